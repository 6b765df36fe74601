"""Mechanisms of the client → server link: plain averaging and client-level DP noise.

Equation numbers refer to "Privatized Graph Federated Learning" (Rizk, Vlaski & Sayed,
arXiv:2203.07105) and its journal version (EURASIP J. Adv. Signal Process. 2023, §3.4).

* :class:`Mean` — ``ψ_p = (1/L) Σ_k w_pk`` (no privacy);
* :class:`ClientNoise` — each client adds noise ``g_pk`` (std ``σ`` per coordinate) to what
  it shares: its model, ``ψ_p = (1/L) Σ_k (w_pk + g_pk)`` (eq. 7), or its update
  ``u_pk = (w_{p,i−1} − w_pk)/μ``, ``ψ_p = w_{p,i−1} − μ (1/L) Σ_k (u_pk + g_pk)``
  (journal eqs. 54–55).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pgfl.param import Param, When
from pgfl.privacy.accounting.releases import Transcript
from pgfl.privacy.mechanisms.base import (
    ADVERSARIES,
    SERVER_SIDE,
    Aggregate,
    ClientAggregation,
    FrontierLine,
    Mechanism,
    NoiseLevel,
    ReleaseContext,
    owns,
    status_mixture,
    subsampled,
)
from pgfl.style import SchemeStyle
from pgfl.validation import ConfigError

__all__ = ["CLIENT_VARIANCE", "DISTRIBUTIONS", "NO_PRIVACY", "ClientNoise", "Mean"]

#: Distributions of additive noise.
DISTRIBUTIONS = ("laplace", "gaussian")

#: The style of no noise at either level (black: the reference), of :class:`NoServerNoise`
#: and of the clients' plain mean.
NO_PRIVACY = SchemeStyle("none", "no privacy", "#000000", "o", order=0,
                         labels=("none*", "no_noise*", "no_privacy*", "non_private*",
                                 "nonprivate*"))  # fmt: skip

#: ``privacy.client_variance``: the variance of client-level noise per coordinate.
CLIENT_VARIANCE = Param(
    "privacy.client_variance", "real", 0.0, "Variance of the client noise per coordinate.",
    lo=0, batched=True,
    applies=When('privacy.client_noise = "laplace"/"gaussian" (alone or stacked), not '
                 "calibrated by privacy.target_epsilon nor given as "
                 "privacy.client_noise_multiplier",
                 lambda c: owns("client", c, "privacy.client_variance")
                 and (c["privacy.target_epsilon"] is None
                      or c["privacy.server_noise"] != "none")
                 and c.get("privacy.client_noise_multiplier") is None),
)  # fmt: skip


def no_noise_reason(ctx: ReleaseContext, std: float) -> str | None:
    """Why a noisy link gives ε = ∞: no clipping bound, or no noise (else ``None``)."""
    if ctx.clip is None:
        return (
            "no gradient bound: set training.clip_norm (the per-sample clipping norm B; --clip "
            "on the command line) to get a finite epsilon"
        )
    if std == 0:
        return "no noise (sigma = 0): the messages are released in the clear"
    return None


@dataclass(frozen=True)
class Mean(ClientAggregation):
    """``ψ_p = (1/L) Σ_k w_pk``: plain federated averaging, no privacy.

    Sharing updates gives the same aggregate: ``w − μ·mean((w − w_k)/μ) = mean(w_k)``.
    """

    names: ClassVar[tuple[str, ...]] = ("none",)
    stacks: ClassVar[Mapping[str, tuple[str, ...]]] = {"none": ()}
    style: ClassVar[SchemeStyle | None] = NO_PRIVACY
    not_deployed: ClassVar[str | None] = None  # pgfl.deploy runs it
    exposes: ClassVar[Mapping[str, str]] = {
        "upload_eavesdropper": "the uploads are the clients' models or updates in the clear",
        "own_server": "the server receives its clients' models or updates in the clear",
    }

    @classmethod
    def aggregate(cls, schemes, start, local, mu, updates, ctx) -> Aggregate:
        """Mean of the local models over the sampled clients."""
        return Aggregate(local.mean(axis=3))


@dataclass(frozen=True, kw_only=True)
class ClientNoise(NoiseLevel, ClientAggregation):
    """Each sampled client adds noise to what it shares (eq. 7; journal eqs. 54–55).

    Attributes:
        distribution: ``"laplace"`` (``Lap(0, σ/√2)``) or ``"gaussian"`` (``N(0, σ²)``).
        std: ``σ``, the standard deviation per coordinate (or give ``variance``).
        variance: ``σ²`` (or give ``std``).

    Noise on a model enters ``ψ_p`` as ``+ mean_k g_pk``; noise on an update as
    ``−μ mean_k g_pk`` (journal §3.4: O(μ) instead of O(1/μ) in the MSD). Its ε covers what
    one client sends its server, against that honest-but-curious server and, by
    post-processing, anyone downstream.

    >>> ClientNoise(distribution="gaussian", variance=0.25).std
    0.5

    """

    distribution: str = "laplace"
    names: ClassVar[tuple[str, ...]] = DISTRIBUTIONS
    not_deployed: ClassVar[str | None] = None  # pgfl.deploy runs it
    style: ClassVar[SchemeStyle | None] = SchemeStyle(
        "client_noise", "client Laplace/Gaussian noise", "#E69F00", "v", order=1,
        labels=("*client_noise*", "client*", "noisy_model*", "noisy_update*"),
    )  # fmt: skip
    distributions: ClassVar[tuple[str, ...]] = DISTRIBUTIONS
    params: ClassVar[tuple[Param, ...]] = (CLIENT_VARIANCE,)
    variance_param: ClassVar[Param] = CLIENT_VARIANCE
    protects: ClassVar[tuple[str, ...]] = tuple(ADVERSARIES)
    covers: ClassVar[str] = "what each client sends its server, and everything computed from it"
    frontier: ClassVar[Mapping[str, FrontierLine] | None] = {
        f"client_{dist}_{share}": FrontierLine(
            {"privacy.client_noise": dist}
            | ({"training.share": share} if share != "models" else {}),
            legend=f"client {dist.capitalize()} on {share} (vs own server)",
            scope=f"client level: one client's noisy {share[:-1]} against its own "
            "(honest-but-curious) server, and by post-processing everyone downstream",
            by_adversary=(dist, share) == ("gaussian", "models"),
        )
        for share in ("models", "updates")
        for dist in DISTRIBUTIONS
    }

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise ConfigError(
                f"privacy.client_noise must be one of 'laplace', 'gaussian'; "
                f"got {self.distribution!r}"
            )
        super().__post_init__()

    @property
    def name(self) -> str:
        """The distribution, as in ``privacy.client_noise``."""
        return self.distribution

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """Noise of variance ``privacy.client_variance`` (0 until a target ε calibrates it)."""
        return cls(distribution=s["privacy.client_noise"], **cls.level_of(s))

    def noiseless(self) -> Mechanism:
        """Plain averaging."""
        return Mean()

    def transcript(self, ctx: ReleaseContext) -> Transcript:
        """One client's message each round: Δ₂ = 2μB (a model) or 2B (an update).

        Given the model its server sent it (which the server knows), one iteration moves a
        client's model by μ times an average of clipped gradients, so replacing the
        client's data moves its model by at most 2μB, its averaged update by 2B
        (journal §3.4; the papers' rule is the same). At equal noise, shared updates cost
        1/μ times more ε per round than shared models.
        """
        what = "model" if ctx.share == "models" else "update"
        scope = (
            f"covers what one client sends its server (noisy {what}); adversary: the "
            "honest-but-curious server, and by post-processing anyone downstream"
        )
        common = {"std": self.std, "distribution": self.distribution, "dim": ctx.dim,
                  "rigorous": ctx.rigorous, "scope": scope, "iterations": ctx.iterations,
                  "settings": (("mechanism", f"client_{self.distribution}_{ctx.share}"),
                               ("sigma", self.std), ("mu", ctx.mu), ("clip", ctx.clip),
                               ("share", ctx.share))}  # fmt: skip
        reason = no_noise_reason(ctx, self.std)
        if reason is not None:
            return Transcript((), reason=reason, **common)
        per_round = 2.0 * ctx.mu * ctx.clip if ctx.share == "models" else 2.0 * ctx.clip
        sens = tuple(np.full(ctx.iterations, per_round / ctx.records).tolist())
        return Transcript(sens, paper_sensitivities=sens, **common)

    def views(self, ctx: ReleaseContext) -> dict[str, Transcript | None]:
        """Its server and an observer of the uploads see one client's message; others less.

        ``own_server``, ``upload_eavesdropper``: the client's noisy message, no sampling
        credit (they see who uploads). Everyone else sees at most the unit's mean of
        n = L noisy messages (Gaussian noise: sensitivity Δ/n, std σ/√n; Laplace noise,
        whose mean has no closed form: the client's own message, by post-processing), on
        the client sample it does not know (:func:`~pgfl.privacy.mechanisms.base.subsampled`).
        A client of the unit who is sampled itself knows its own noise: the mean then
        carries σ√(n−1)/n of the others' (the std of its sampled status, or of every
        round where all clients are sampled or the sample is revealed).
        """
        own = self.transcript(ctx)
        out: dict[str, Transcript | None] = dict.fromkeys(ADVERSARIES, own)
        if not own.sensitivities:
            return out
        seen = own
        sampled_std = own.std
        n = ctx.clients_per_round
        if self.distribution == "gaussian":
            seen = dataclasses.replace(
                own,
                sensitivities=tuple(s / n for s in own.sensitivities),
                std=own.std / math.sqrt(n),
                paper_sensitivities=None,
                scope=f"covers the mean of a unit's {n} noisy client messages; adversary: "
                "anyone but the unit's own server and an observer of the uploads",
            )
            sampled_std = own.std * math.sqrt(n - 1) / n if n > 1 else seen.std
        for a in SERVER_SIDE:
            out[a] = subsampled(seen, ctx, a)
        credit = 0 < ctx.sampled < ctx.clients and not ctx.sample_revealed
        if credit:
            out["unit_client"] = status_mixture(seen, ctx, sampled_std)
        elif ctx.clients > 1:  # it may be a sampled client of the unit itself
            out["unit_client"] = dataclasses.replace(seen, std=sampled_std)
        else:
            out["unit_client"] = seen
        return out

    @staticmethod
    def _draws(schemes, mu, updates, ctx, shape):
        """Per distribution: which curves draw it, their scale (σ; −μσ on updates), the draws.

        The stream ``client_noise``, ``[R, P_b, *shape]``: the same for :meth:`aggregate` and
        :meth:`perturb`.
        """
        scale = np.array([s.std for s in schemes]) * np.where(updates, -mu, 1.0)
        for dist in sorted({s.distribution for s in schemes}):
            mine = np.array([s.distribution == dist for s in schemes])
            yield mine, scale[mine], ctx.draws.noise("client_noise", dist, shape)

    @classmethod
    def perturb(cls, schemes, start, local, mu, updates, ctx) -> np.ndarray:
        """The local models whose messages carry each client's noise (a noise piece).

        ``[C', R, P_b, L, M]``: a model message becomes ``w_pk + g_pk``; an update message
        ``(w_{p,i−1} − w_pk)/μ + g_pk``, i.e. the model ``w_pk − μ g_pk``. The same draws
        as :meth:`aggregate`, before any aggregation
        (:func:`~pgfl.privacy.mechanisms.chain.compose`: noise under secure aggregation).
        """
        out = np.array(local, dtype=float)
        for mine, scale, g in cls._draws(schemes, mu, updates, ctx, local.shape[-2:]):
            out[mine] += scale[:, None, None, None, None] * g
        return out

    @classmethod
    def aggregate(cls, schemes, start, local, mu, updates, ctx) -> Aggregate:
        """Mean of the local models plus each distribution's averaged client noise."""
        psi = local.mean(axis=3)
        for mine, scale, g in cls._draws(schemes, mu, updates, ctx, local.shape[-2:]):
            psi[mine] += scale[:, None, None, None] * g.mean(axis=2)  # [R, P_b, M]
        return Aggregate(psi)
