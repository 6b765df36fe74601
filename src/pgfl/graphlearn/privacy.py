"""Differential privacy of federated graph learning (§IV-B, §IV-D; Theorem 3), two ways.

A client's data enter Algorithm 1 only through its clipped sufficient statistic
``z̄_i = (1/N_i) Σ_n z̃_{i,n}`` (eq. 6), with ``z̃ = z / max(1, ‖z‖/C)`` (below eq. 32).
Replacing one signal moves ``z̄_i`` by ``‖z̃¹ − z̃²‖/N_i``; two non-negative vectors of
norm ``≤ C`` are at most ``√2 C`` apart (orthogonal supports), so ``Δ(z̄_i) = √2 C/N_i``
and the gradient ``∇g_i = 2 z̄_i − …`` has ``Δ_i = 2√2 C/N_i``. The paper's eq. 58 bounds
``‖z¹ − z²‖`` by ``max ‖z‖`` ("since all z are non-negative"), which is false, and gets
``2C/N_i``: ``sensitivity="paper"`` keeps that, the default ``"rigorous"`` does not.
Both come from :func:`pgfl.privacy.accounting.graph_topology_sensitivity`. The
neighbouring relation is replace-one (one signal of one client), as everywhere in pgfl.

**Mechanisms** (``mechanism=``):

* ``"last_step"`` — the paper's (eqs. 25–28, Theorem 3): in every round, Gaussian noise
  ``N(0, σ_i² I)`` on the gradient of the client's *last* local step; the budget is
  split evenly (``ε_t = ε̄/T``, ``δ_t = δ̄/T``, §V-B 5) and ``σ_i = Δ_i √(2 ln(1.25/δ_t))/ε_t``
  (classic Gaussian mechanism, requires ``ε_t < 1``). **Its ε does not cover the released
  graph**: the first ``K_i − 1`` noiseless steps of a round also read the data, and the
  proof (Appendix C) conditions on their result ``w_ex^{t,K−1}``. It covers one noisy
  gradient per round, as if the rest of the round were data-independent.
* ``"statistic"`` — rigorous: each client releases ``ẑ_i = max(z̄_i + N(0, σ_i² I), 0)``
  **once**, and Algorithm 1 runs on ``ẑ`` (every local step of every round, the server's
  consensus and the released graphs are post-processing). One Gaussian release of
  sensitivity ``Δ(z̄_i)``, calibrated exactly: ``σ_i = Δ(z̄_i) · z`` with ``z`` the smallest
  noise multiplier whose analytic Gaussian ε at ``δ̄`` is ``ε̄`` (:func:`calibrate_releases`
  with the PLD accountant). Its ε covers everything the client's data influence.

:func:`privacy_report` states the ε of the calibrated noise by the same accountants as
the GFL side (``paper``, ``basic``, ``kairouz``, ``pld``, ``rdp``), with the rigorous
sensitivity, for the releases each mechanism makes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pgfl.graphlearn.params import MECHANISMS
from pgfl.privacy.accounting import (
    GaussianRelease,
    calibrate_releases,
    epsilon,
    gaussian_sigma,
    graph_topology_sensitivity,
)
from pgfl.validation import ConfigError, check_choice, check_int, check_real

__all__ = [
    "COVERS",
    "MECHANISMS",
    "REPORT_ACCOUNTANTS",
    "DPCalibration",
    "calibrate_noise",
    "privacy_report",
    "privatize_statistic",
]

#: Accountants :func:`privacy_report` states ε by (all Gaussian-capable ones).
REPORT_ACCOUNTANTS = ("paper", "basic", "kairouz", "pld", "rdp")
#: What each mechanism's ε covers (``summary.json``: ``epsilon_covers``).
COVERS = {
    "statistic": (
        "everything the client's data influence: its noisy statistic is released once and "
        "every local step, the consensus and the released graphs are post-processing "
        "(replace one signal of one client; any adversary)"
    ),
    "last_step": (
        "one noisy gradient per round, as in the paper's Theorem 3; NOT the released graph: "
        "the K-1 noiseless local steps of each round also read the data and are not accounted"
    ),
}


@dataclass(frozen=True)
class DPCalibration:
    """Noise calibrated for a target ``(ε̄, δ̄)``.

    Attributes:
        mechanism: ``"last_step"`` or ``"statistic"`` (module docstring).
        epsilon_bar: total ``ε̄``.
        delta_bar: total ``δ̄``.
        rounds: ``T``.
        epsilon_t: per-release ``ε`` the calibration used (``ε̄/T``, or ``ε̄`` for one release).
        delta_t: per-release ``δ`` (``δ̄/T``, or ``δ̄``).
        clip: clipping norm ``C`` of the distance vectors.
        sensitivity_rule: ``"paper"`` or ``"rigorous"``.
        n_samples: ``N_i`` per client, shape ``[I]``.
        sensitivity: sensitivity ``Δ_i`` of the noised quantity (gradient or ``z̄_i``), ``[I]``.
        sigma: noise std ``σ_i``, shape ``[I]``.

    """

    mechanism: str
    epsilon_bar: float
    delta_bar: float
    rounds: int
    epsilon_t: float
    delta_t: float
    clip: float
    sensitivity_rule: str
    n_samples: np.ndarray
    sensitivity: np.ndarray
    sigma: np.ndarray

    @property
    def noise_multiplier(self) -> float:
        """``σ_i / Δ_i`` (the same for every client: both scale as ``1/N_i``)."""
        return float(self.sigma[0] / self.sensitivity[0])

    @property
    def rigorous_noise_multiplier(self) -> float:
        """``σ_i`` over the rigorous ``Δ_i`` (smaller by √2 under the paper's rule)."""
        return self.noise_multiplier / (math.sqrt(2.0) if self.sensitivity_rule == "paper" else 1.0)

    def releases(self) -> list[GaussianRelease]:
        """What one client publishes, with the rigorous sensitivity (unit Δ, multiplier z).

        ``last_step``: one Gaussian release per round; ``statistic``: one in all.
        """
        count = self.rounds if self.mechanism == "last_step" else 1
        return [GaussianRelease(1.0, self.rigorous_noise_multiplier, count=count)]


def calibrate_noise(
    epsilon_bar: float,
    delta_bar: float,
    rounds: int,
    n_samples: np.ndarray | int,
    clip: float,
    *,
    sensitivity: str = "rigorous",
    mechanism: str = "last_step",
) -> DPCalibration:
    """The noise ``σ_i`` of a mechanism for a total ``(ε̄, δ̄)`` over ``T`` rounds.

    ``last_step`` (Theorem 3): ``σ_i = Δ_i √(2 ln(1.25/δ_t)) / ε_t`` with ``ε_t = ε̄/T``,
    ``δ_t = δ̄/T`` and the gradient sensitivity ``Δ_i`` (needs ``ε_t < 1``).
    ``statistic``: ``σ_i = Δ(z̄_i) · z`` with ``Δ(z̄_i)`` half the gradient's and ``z`` the
    exact noise multiplier of one Gaussian release at ``(ε̄, δ̄)``.

    >>> cal = calibrate_noise(0.8, 8e-5, 8, [50, 100], clip=25.0, sensitivity="paper")
    >>> expected = 2 * np.sqrt(2 * np.log(1.25 / 1e-5)) * 25.0 / (np.array([50, 100]) * 0.1)
    >>> bool(np.allclose(cal.sigma, expected))
    True
    """
    eb = check_real("epsilon_bar", epsilon_bar, lo=0.0, lo_open=True)
    db = check_real("delta_bar", delta_bar, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    T = check_int("rounds", rounds, lo=1)
    C = check_real("clip", clip, lo=0.0, lo_open=True)
    rule = check_choice("sensitivity", sensitivity, ("paper", "rigorous"))
    mech = check_choice("mechanism", mechanism, MECHANISMS)
    n = np.atleast_1d(np.asarray(n_samples))
    for v in n:
        check_int("n_samples", v, lo=1)
    grad = np.array([graph_topology_sensitivity(C, int(v), rigorous=rule == "rigorous") for v in n])
    if mech == "last_step":
        e_t, d_t = eb / T, db / T
        check_real("epsilon_bar / rounds", e_t, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        sig = np.array([gaussian_sigma(e_t, d_t, s) for s in grad])
        return DPCalibration(mech, eb, db, T, e_t, d_t, C, rule, n.astype(int), grad, sig)
    z = calibrate_releases(lambda s: [GaussianRelease(1.0, s)], eb, db, accountant="pld")
    sens = grad / 2.0  # z̄ enters the gradient as 2 z̄
    return DPCalibration(mech, eb, db, T, eb, db, C, rule, n.astype(int), sens, sens * z)


def privatize_statistic(
    zbar: np.ndarray, cal: DPCalibration, rng: np.random.Generator
) -> np.ndarray:
    """``ẑ_i = max(z̄_i + N(0, σ_i² I), 0)``: the one release of the ``statistic`` mechanism.

    ``zbar`` is ``[..., I, p]`` (clipped); the projection onto ``z ≥ 0`` (distances are
    non-negative) is post-processing.
    """
    if cal.mechanism != "statistic":
        raise ConfigError(f"privatize_statistic needs mechanism='statistic'; got {cal.mechanism!r}")
    Z = np.asarray(zbar, dtype=float)
    if Z.shape[-2] != cal.sigma.size:
        raise ConfigError(f"zbar has {Z.shape[-2]} clients; the calibration has {cal.sigma.size}")
    return np.maximum(Z + cal.sigma[:, None] * rng.standard_normal(Z.shape), 0.0)


def privacy_report(cal: DPCalibration) -> dict[str, Any]:
    """What the calibrated noise buys, for ``summary.json``.

    ``epsilon_target`` is the ``ε̄`` the calibration aimed at (for ``last_step`` by
    Theorem 3's own argument: ``Σ ε_t`` at ``δ = Σ δ_t``); ``epsilon`` is, per accountant
    of :data:`REPORT_ACCOUNTANTS`, the ε at ``δ̄`` of the releases the mechanism makes
    (:meth:`DPCalibration.releases`) with the rigorous sensitivity; ``epsilon_covers``
    says what either one covers.
    """
    rel = cal.releases()
    return {
        "mechanism": cal.mechanism,
        "epsilon_target": cal.epsilon_bar,
        "delta_target": cal.delta_bar,
        "rounds": cal.rounds,
        "epsilon_per_release": cal.epsilon_t,
        "delta_per_release": cal.delta_t,
        "clip": cal.clip,
        "sensitivity_rule": cal.sensitivity_rule,
        "noise_multiplier": cal.noise_multiplier,
        "sigma": cal.sigma.tolist(),
        "epsilon": {a: epsilon(rel, cal.delta_bar, a) for a in REPORT_ACCOUNTANTS},
        "delta": cal.delta_bar,
        "epsilon_covers": COVERS[cal.mechanism],
    }
