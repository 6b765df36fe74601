"""Differential privacy of federated graph learning (§IV-B, §IV-D; Theorem 3).

**Mechanism.** In every round ``t`` client ``i`` adds ``s_i^t ~ N(0, σ_i² I_p)`` to the
gradient of its last local step (eq. 26) and releases the unprojected iterate. The data
enter that gradient only through ``(2/N_i) Σ_n z̃_{i,n}`` with clipped distance vectors
``z̃ = z / max(1, ‖z‖/C)`` (below eq. 32), so replacing one signal moves the released
iterate by ``η (2/N_i) ‖z̃¹ − z̃²‖`` while the noise on it has std ``η σ_i``.

**Noise (Theorem 3).** With a per-round budget ``(ε_t, δ_t)`` the classic Gaussian
mechanism (valid for ``ε_t < 1``) needs ``σ_i ≥ Δ_i √(2 ln(1.25/δ_t)) / ε_t`` with the
gradient sensitivity ``Δ_i``:

* ``sensitivity="paper"``: ``Δ_i = 2C/N_i`` (eq. 58), so ``σ_i = 2√(2 ln(1.25/δ_t)) C/(N_i ε_t)``
  exactly as in Theorem 3 / eq. 60;
* ``sensitivity="rigorous"``: ``Δ_i = 2√2 C/N_i``. Eq. 58 bounds ``‖z¹ − z²‖`` by
  ``max ‖z‖``, but two non-negative vectors of norm ``C`` can be ``√2 C`` apart
  (orthogonal supports), so the paper's σ is short by ``√2``.

The helper :func:`pgfl.privacy.accounting.graph_topology_sensitivity` owns both values;
this module only composes the pieces (no accounting formula is re-implemented here).

**Budget split.** ``ε̄`` and ``δ̄`` are split evenly over the ``T`` rounds
(``ε_t = ε̄/T``, ``δ_t = δ̄/T``, §V-B 5: "we simply split the privacy budget"), so basic
composition gives exactly ``(ε̄, δ̄)``. :func:`privacy_report` also gives eq. 32
(Kairouz–Oh–Viswanath) and the tight privacy-loss-distribution ε of the same noise at
``δ̄`` (``dp_accounting`` via :mod:`pgfl.privacy.accounting`), under both sensitivities.

**What is and is not covered.** The guarantee is per client, with respect to replacing
one of its signals, against an observer of everything the client sends. As in the
paper's proof, only the last local step of each round is treated as data-dependent:
the first ``K_i − 1`` noiseless steps also read the data, and their influence on the
released iterate is *not* accounted for (Appendix C conditions on ``w_ex^{t,K−1}``).
The ε values reported here are therefore those of the paper's argument, not an
end-to-end guarantee of the whole local computation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pgfl.privacy.accounting import (
    basic_composition,
    gaussian_epsilon_pld,
    gaussian_sigma,
    graph_topology_epsilon,
    graph_topology_sensitivity,
)
from pgfl.validation import check_choice, check_int, check_real

__all__ = ["DPCalibration", "calibrate_noise", "privacy_report"]


@dataclass(frozen=True)
class DPCalibration:
    """Noise calibrated by Theorem 3 for a target ``(ε̄, δ̄)`` split over ``T`` rounds.

    Attributes:
        epsilon_bar: total ``ε̄``.
        delta_bar: total ``δ̄``.
        rounds: ``T``.
        epsilon_t: per-round ``ε_t = ε̄/T``.
        delta_t: per-round ``δ_t = δ̄/T``.
        clip: clipping norm ``C`` of the distance vectors.
        sensitivity_rule: ``"paper"`` or ``"rigorous"``.
        n_samples: ``N_i`` per client, shape ``[I]``.
        sensitivity: gradient sensitivity ``Δ_i``, shape ``[I]``.
        sigma: noise std ``σ_i`` on the gradient, shape ``[I]``.

    """

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


def calibrate_noise(
    epsilon_bar: float,
    delta_bar: float,
    rounds: int,
    n_samples: np.ndarray | int,
    clip: float,
    *,
    sensitivity: str = "paper",
) -> DPCalibration:
    """Theorem 3: the gradient noise ``σ_i`` for a total ``(ε̄, δ̄)`` over ``T`` rounds.

    ``σ_i = Δ_i √(2 ln(1.25/δ_t)) / ε_t`` with ``ε_t = ε̄/T``, ``δ_t = δ̄/T`` (needs
    ``ε_t < 1``, the classic Gaussian mechanism's range).

    >>> cal = calibrate_noise(0.8, 8e-5, 8, [50, 100], clip=25.0)
    >>> expected = 2 * np.sqrt(2 * np.log(1.25 / 1e-5)) * 25.0 / (np.array([50, 100]) * 0.1)
    >>> bool(np.allclose(cal.sigma, expected))
    True
    """
    eb = check_real("epsilon_bar", epsilon_bar, lo=0.0, lo_open=True)
    db = check_real("delta_bar", delta_bar, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    T = check_int("rounds", rounds, lo=1)
    C = check_real("clip", clip, lo=0.0, lo_open=True)
    rule = check_choice("sensitivity", sensitivity, ("paper", "rigorous"))
    n = np.atleast_1d(np.asarray(n_samples))
    for v in n:
        check_int("n_samples", v, lo=1)
    e_t, d_t = eb / T, db / T
    check_real("epsilon_bar / rounds", e_t, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    sens = np.array([graph_topology_sensitivity(C, int(v), rigorous=rule == "rigorous") for v in n])
    sig = np.array([gaussian_sigma(e_t, d_t, s) for s in sens])
    return DPCalibration(eb, db, T, e_t, d_t, C, rule, n.astype(int), sens, sig)


def privacy_report(cal: DPCalibration) -> dict[str, Any]:
    """ε̄ of the calibrated noise under several accountants (for ``summary.json``).

    Keys: ``epsilon_basic`` (``Σ ε_t``, δ = ``Σ δ_t``), ``epsilon_kairouz`` (eq. 32 with
    slack ``δ̄``; its total δ in ``delta_kairouz``), ``epsilon_pld`` (tight ε at ``δ̄`` of
    ``T`` Gaussian releases with the calibrated noise multiplier), and
    ``epsilon_pld_rigorous`` (the same noise judged with the rigorous sensitivity
    ``2√2C/N``; equals ``epsilon_pld`` when the calibration is already rigorous).
    """
    T = cal.rounds
    e_basic, d_basic = basic_composition(np.full(T, cal.epsilon_t), np.full(T, cal.delta_t))
    e_kov, d_kov = graph_topology_epsilon(
        np.full(T, cal.epsilon_t), np.full(T, cal.delta_t), cal.delta_bar
    )
    z = cal.noise_multiplier
    e_pld = gaussian_epsilon_pld(z, T, cal.delta_bar)
    z_rig = z if cal.sensitivity_rule == "rigorous" else z / math.sqrt(2.0)
    e_rig = gaussian_epsilon_pld(z_rig, T, cal.delta_bar)
    return {
        "epsilon_target": cal.epsilon_bar,
        "delta_target": cal.delta_bar,
        "rounds": T,
        "epsilon_per_round": cal.epsilon_t,
        "delta_per_round": cal.delta_t,
        "clip": cal.clip,
        "sensitivity_rule": cal.sensitivity_rule,
        "noise_multiplier": z,
        "sigma": cal.sigma.tolist(),
        "epsilon_basic": e_basic,
        "delta_basic": d_basic,
        "epsilon_kairouz": e_kov,
        "delta_kairouz": d_kov,
        "epsilon_pld": e_pld,
        "epsilon_pld_rigorous": e_rig,
    }
