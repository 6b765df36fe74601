"""The privacy of one curve: its noise calibrated to a target ε, and the ε it spent.

The accountant's input comes from the mechanisms that were simulated: the curve's
:class:`~pgfl.engine.CurveSettings` hold them, and each describes its release
(:meth:`~pgfl.privacy.mechanisms.base.Mechanism.transcript`) for the run's
:class:`~pgfl.privacy.mechanisms.ReleaseContext`
(:meth:`~pgfl.engine.CurveSettings.release_context`). A curve's ε is reported for its
*primary* link: the server level if it carries differentially private noise, else the
client level; with noise at both levels the client level's final ε is added, which is
what applies against the client's own server. Beside it, the ε against every adversary
(``epsilon_by_adversary``), the bound each value is (``accountant_by_adversary``), why an
adversary is not protected (``adversary_notes``), the adversary the noise was calibrated
against (``calibrated_adversary``) and the parties the numbers trust
(``trusted_parties``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from pgfl.engine import CurveSettings, Network
from pgfl.privacy.accounting import calibrate, check_composable, epsilon_curve
from pgfl.privacy.mechanisms import Mechanism, view_of
from pgfl.privacy.mechanisms.adversaries import adversary_epsilons, trusted_parties
from pgfl.validation import ConfigError

__all__ = [
    "calibrated",
    "multiplier_std",
    "with_noise_multiplier",
    "curve_epsilon",
    "primary",
    "reported",
    "resolved_variances",
]


def primary(settings: CurveSettings) -> str | None:
    """The level a ``target_epsilon`` calibrates: ``"server"``, ``"client"``, or None.

    The server level if its mechanism has a noise level, else the client level if its has
    (secure aggregation adds no DP noise: the server sees only the sum).
    """
    for level in ("server", "client"):
        if getattr(settings, level).calibrates is not None:
            return level
    return None


def reported(settings: CurveSettings) -> str | None:
    """The level a curve's ε is reported for: :func:`primary`, unless its noise is zero.

    Server noise of variance 0 protects nothing; with noisy clients the ε is then theirs.
    """
    level = primary(settings)
    client = settings.client
    if level == "server" and settings.server.std == 0 and client.calibrates and client.std > 0:
        return "client"
    return level


def multiplier_std(z: float, transcript_at: Any, name: str) -> float:
    """The noise std ``σ = z·Δ₁`` of noise multiplier ``z`` (Opacus' ``noise_multiplier``).

    The one conversion from a noise multiplier to a noise level, for the configurations
    (:func:`with_noise_multiplier`) and ``pgfl privacy epsilon --noise-multiplier``.
    ``transcript_at(σ)`` is the link's release at noise std σ
    (:meth:`~pgfl.privacy.mechanisms.base.Mechanism.transcript`); ``Δ₁`` is the L2
    sensitivity of its first message, the one the accountant charges: 2μB for a client's
    model, 2B for its update (divided by the records under record-level neighbours), and
    for server noise the first round's (later rounds' grow, preprint eq. 52). As in
    Opacus, ``z`` alone fixes what one Gaussian release costs. Distributed discrete noise
    (``distributed_gaussian``, ``skellam``: σ the std of the noise on a unit's sum) takes
    Δ₁ in real units before the encoding (its transcript's ``message_sensitivity``,
    2μB/r): its accountant charges the rounded vector on a grid whose step depends on σ
    itself, so that Δ is not known before σ; the rounding's extra cost shows in its ε.
    ``name`` is the setting or option in the message when there is no sensitivity (no
    clipping bound).

    >>> from pgfl.privacy.accounting.releases import Transcript
    >>> multiplier_std(1.5, lambda s: Transcript((0.4, 0.8), std=s), "z")
    0.6000000000000001
    """
    transcript = transcript_at(1.0)
    if not transcript.sensitivities:
        raise ConfigError(
            f"{name}: a noise multiplier is σ/Δ, and this link has no sensitivity Δ "
            f"({transcript.reason or 'no release'}); set training.clip_norm"
        )
    if transcript.shares:  # distributed discrete noise: its sensitivities are in grid units
        return float(z) * float(dict(transcript.settings)["message_sensitivity"])
    return float(z) * float(transcript.sensitivities[0])


def with_noise_multiplier(
    settings: CurveSettings, net: Network, iterations: int, level: str, z: float
) -> CurveSettings:
    """``settings`` with the ``level`` link's noise std set to ``z·Δ₁`` (:func:`multiplier_std`)."""
    mechanism: Mechanism = getattr(settings, level)
    ctx = settings.release_context(net, iterations)
    name = f"privacy.{level}_noise_multiplier"
    std = multiplier_std(z, lambda s: mechanism.with_std(s).transcript(ctx), name)
    return replace(settings, **{level: mechanism.with_std(std)})


def calibrated(
    settings: CurveSettings,
    net: Network,
    iterations: int,
    target: float,
    delta: float,
    *,
    adversary: str | None = None,
) -> CurveSettings:
    """``settings`` with the primary mechanism's noise set to meet ε(T) ≤ ``target``.

    The smallest per-coordinate std on the calibration grid, by the tight accountant
    (:func:`pgfl.privacy.accounting.calibrate` on the factory σ ↦ transcript): the
    privatized link's own transcript, or with ``adversary`` what that adversary observes
    of it (:meth:`~pgfl.privacy.mechanisms.base.Mechanism.views`, amplification by client
    sampling included where it holds).
    """
    level = primary(settings)
    mechanism: Mechanism = getattr(settings, level)
    ctx = settings.release_context(net, iterations)
    if adversary is None:
        seen = lambda s: mechanism.with_std(s).transcript(ctx)  # noqa: E731
    else:
        seen = lambda s: view_of(mechanism.with_std(s), ctx, adversary)  # noqa: E731
    sigma = calibrate(seen, target, delta)
    return replace(settings, **{level: mechanism.with_std(sigma)})


def check_accountants(
    settings: CurveSettings, net: Network, iterations: int, accountants: tuple[str, ...]
) -> None:
    """Raise the one-line refusal if a requested accountant cannot compose a level's releases.

    Run when a curve is planned (:func:`pgfl.experiments.build.curve_settings`), so that an
    unsupported release kind stops the run before anything is written (exit 2), never as
    an ε of ∞ at the end (:func:`pgfl.privacy.accounting.check_composable`).
    """
    ctx = settings.release_context(net, iterations)
    for level in ("client", "server"):
        t = getattr(settings, level).transcript(ctx)
        if t is not None:
            check_composable(t, accountants)


def curve_epsilon(
    settings: CurveSettings,
    net: Network,
    iterations: int,
    *,
    delta: float,
    accountants: tuple[str, ...],
    checkpoints: int,
    adversary: str | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """ε(i) per accountant (``epsilon_<acc>`` series) and the ``summary.json`` privacy entry.

    The entry is for the curve's reported link (:func:`reported`); a privatized link with
    variance 0 reports ε = ∞ and the reason. ``adversary``: the one a target ε was
    calibrated against (``privacy.adversary``), recorded as ``calibrated_adversary``.
    """
    level = reported(settings)
    if level is None:
        return {}, {}
    ctx = settings.release_context(net, iterations)
    common = {"delta": delta, "accountants": list(accountants), "checkpoints": checkpoints}
    main = getattr(settings, level)
    eps = epsilon_curve(main.transcript(ctx), **common)  # σ = 0: ε = ∞ with the reason
    entry = eps.summary()
    caveat = getattr(main, "caveat", None)  # a mechanism that says what its ε rests on
    if caveat is not None:
        entry["epsilon_caveat"] = caveat
    entry["noise_variance"] = main.std**2
    pairwise = getattr(main, "sigma_cor", None)  # correlated noise: σ_cor at that σ
    if pairwise is not None:
        entry["pairwise_variance"] = pairwise**2
    entry["neighbours"] = settings.neighbours
    link = main.transcript(ctx)
    known = {}
    if "pld" in eps and link.reason is None:
        known = {link: (float(eps.final()["pld"]), eps.source("pld"))}
    by = adversary_epsilons(settings.client, settings.server, ctx, delta, known=known)
    entry["epsilon_by_adversary"] = {a: e.epsilon for a, e in by.items()}
    entry["accountant_by_adversary"] = {a: e.accountant for a, e in by.items()}
    entry["adversary_notes"] = {a: e.note for a, e in by.items() if e.note}
    if adversary is not None:
        entry["calibrated_adversary"] = adversary
    trusted = trusted_parties(settings.client, settings.server)
    if trusted:
        entry["trusted_parties"] = trusted
    client = settings.client
    if level == "server" and client.calibrates is not None and client.std > 0:
        entry["epsilon_client"] = epsilon_curve(client.transcript(ctx), **common).final()
    return {f"epsilon_{k}": np.asarray(v) for k, v in eps.items()}, entry


def resolved_variances(settings: CurveSettings) -> dict[str, float | None]:
    """The noise variance each level ran with (``None``: a mechanism without one)."""
    out = {}
    for level in ("client", "server"):
        m = getattr(settings, level)
        v = getattr(m, "variance", None)
        out[f"{level}_variance"] = m.std**2 if v is None and m.calibrates else v
    return out
