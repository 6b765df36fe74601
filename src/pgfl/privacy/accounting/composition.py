"""Releases (what was published) and the accountant facade (how much privacy that cost).

A *release* is a small frozen description of one noisy publication, as a
``dp_accounting.DpEvent`` is: the mechanism, its sensitivity (for replacing one
client's data) and its noise, repeated ``count`` times. :func:`epsilon` composes a
sequence of releases with one of the accountants in :data:`ACCOUNTANTS`:

========== ==================================================================================
``paper``  the rule the papers use: Laplace/pure-DP steps add up (book Lemma 11.2);
           Gaussian steps use the classic σ bound per step and eq. (32) (graph-topology
           paper, Thm 3), with δ split evenly: δ/2 over the steps, δ/2 for eq. (32).
           ∞ when a Gaussian step's classic ε is ≥ 1 (the classic bound is unproven there).
``basic``  Σ ε_t (+ Σ δ_t); Gaussian steps get their exact ε_t at δ_t = δ / n_steps.
``advanced`` Dwork–Rothblum–Vadhan in its heterogeneous form,
           √(2 ln(1/δ′) Σ ε_t²) + Σ ε_t (e^{ε_t} − 1) (Dwork & Roth Thm 3.20).
``kairouz`` KOV: Thm 3.3 (optimal) when all steps share one ε₀, else Thm 3.5 = eq. (32).
``pld``    privacy-loss distributions (``dp_accounting.pld``), tight up to a pessimistic
           discretization; Laplace and Gaussian steps exactly, a generic ε-DP step as its
           worst case (randomized response, KOV).
``rdp``    Rényi DP (``dp_accounting.rdp``); always ≥ ``pld`` up to discretization.

When every step is pure DP (Laplace, generic ε-DP), Σ ε_t is a valid bound at any δ, so
``advanced``, ``pld`` and ``rdp`` report the minimum of their bound and Σ ε_t.
========== ==================================================================================

For ``advanced``/``kairouz`` with Gaussian steps, each Gaussian step is first turned
into (ε_t, δ/(2 n)) with the exact analytic Gaussian ε, and δ/2 is left for the
composition theorem, so the total δ never exceeds the δ asked for.

>>> releases = [LaplaceRelease(sensitivity_l1=1.0, scale=10.0, count=100)]
>>> round(epsilon(releases, 1e-5, "basic"), 6), round(epsilon(releases, 1e-5, "pld"), 2)
(10.0, 4.22)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

import dp_accounting
import numpy as np
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import RdpAccountant
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon as rdp_compute_epsilon

from pgfl.validation import ConfigError, check_choice, check_int, check_real

from .mechanisms import (
    DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
    kairouz_epsilon,
    kairouz_optimal_epsilon,
)

__all__ = [
    "ACCOUNTANTS",
    "GaussianRelease",
    "LaplaceRelease",
    "PureDpRelease",
    "Release",
    "epsilon",
    "to_dp_event",
]

#: Accountants understood by :func:`epsilon` (and by the curves module).
ACCOUNTANTS = ("paper", "basic", "advanced", "kairouz", "pld", "rdp")


@dataclasses.dataclass(frozen=True)
class LaplaceRelease:
    """``count`` releases of a query with ℓ₁ sensitivity Δ₁ plus i.i.d. Laplace(0, b) noise.

    Each release is exactly (Δ₁/b)-DP (book Lemma 11.1).

    Attributes:
        sensitivity_l1: Δ₁ ≥ 0 for replacing one client's data.
        scale: b > 0 (per-coordinate standard deviation √2·b).
        count: number of identical releases ≥ 1.

    """

    sensitivity_l1: float
    scale: float
    count: int = 1

    def __post_init__(self) -> None:
        check_real("sensitivity_l1", self.sensitivity_l1, lo=0.0)
        check_real("scale", self.scale, lo=0.0, lo_open=True)
        check_int("count", self.count, lo=1)

    @property
    def epsilon0(self) -> float:
        """Pure ε of one release, Δ₁ / b."""
        return float(self.sensitivity_l1) / float(self.scale)


@dataclasses.dataclass(frozen=True)
class GaussianRelease:
    """``count`` releases of a query with ℓ₂ sensitivity Δ₂ plus N(0, σ² I) noise.

    Attributes:
        sensitivity_l2: Δ₂ ≥ 0 for replacing one client's data.
        sigma: σ > 0, the per-coordinate standard deviation.
        count: number of identical releases ≥ 1.

    """

    sensitivity_l2: float
    sigma: float
    count: int = 1

    def __post_init__(self) -> None:
        check_real("sensitivity_l2", self.sensitivity_l2, lo=0.0)
        check_real("sigma", self.sigma, lo=0.0, lo_open=True)
        check_int("count", self.count, lo=1)


@dataclasses.dataclass(frozen=True)
class PureDpRelease:
    """``count`` releases of any ε-DP mechanism (e.g. randomized response: ε = ln 3).

    Attributes:
        epsilon: ε ≥ 0 of one release.
        count: number of identical releases ≥ 1.

    """

    epsilon: float
    count: int = 1

    def __post_init__(self) -> None:
        check_real("epsilon", self.epsilon, lo=0.0)
        check_int("count", self.count, lo=1)

    @property
    def epsilon0(self) -> float:
        """Pure ε of one release."""
        return float(self.epsilon)


Release = LaplaceRelease | GaussianRelease | PureDpRelease


def to_dp_event(release: Release) -> dp_accounting.DpEvent:
    """Describe a release as a ``dp_accounting`` event (for use with its accountants).

    Laplace → ``LaplaceDpEvent(b/Δ₁)``, Gaussian → ``GaussianDpEvent(σ/Δ₂)``, generic ε-DP →
    binary ``RandomizedResponseDpEvent`` with noise p = 2/(1 + e^ε) (whose ε is exactly ε
    under the replace-one relation). A zero sensitivity gives a ``NoOpDpEvent``.

    >>> to_dp_event(LaplaceRelease(2.0, 10.0, count=3))
    SelfComposedDpEvent(event=LaplaceDpEvent(noise_multiplier=5.0), count=3)
    """
    if isinstance(release, LaplaceRelease):
        if release.sensitivity_l1 == 0:
            return dp_accounting.NoOpDpEvent()
        event: dp_accounting.DpEvent = dp_accounting.LaplaceDpEvent(
            release.scale / release.sensitivity_l1
        )
    elif isinstance(release, GaussianRelease):
        if release.sensitivity_l2 == 0:
            return dp_accounting.NoOpDpEvent()
        event = dp_accounting.GaussianDpEvent(release.sigma / release.sensitivity_l2)
    elif isinstance(release, PureDpRelease):
        if release.epsilon == 0:
            return dp_accounting.NoOpDpEvent()
        event = dp_accounting.RandomizedResponseDpEvent(
            noise_parameter=2.0 / (1.0 + math.exp(release.epsilon)), num_buckets=2
        )
    else:
        raise ConfigError(
            f"release must be a LaplaceRelease, GaussianRelease or PureDpRelease; got {release!r}"
        )
    return event if release.count == 1 else dp_accounting.SelfComposedDpEvent(event, release.count)


# ------------------------------------------------------------------------------ helpers
def _check_releases(releases: Iterable[Release]) -> list[Release]:
    out = list(releases)
    if not out:
        raise ConfigError("releases must hold at least one release; got none")
    for r in out:
        if not isinstance(r, (LaplaceRelease, GaussianRelease, PureDpRelease)):
            raise ConfigError(
                f"releases must hold LaplaceRelease, GaussianRelease or PureDpRelease; got {r!r}"
            )
    return out


def _n_steps(releases: Sequence[Release]) -> int:
    return sum(r.count for r in releases)


def _pure_epsilons(releases: Sequence[Release], gaussian_delta: float) -> np.ndarray:
    """Per-step ε_t (expanded by count); Gaussian steps at δ_t = gaussian_delta (exact)."""
    parts = []
    for r in releases:
        if isinstance(r, GaussianRelease):
            if r.sensitivity_l2 == 0:
                e0 = 0.0
            else:
                e0 = float(
                    dp_accounting.get_epsilon_gaussian(r.sigma / r.sensitivity_l2, gaussian_delta)
                )
        else:
            e0 = r.epsilon0
        parts.append(np.full(r.count, e0))
    return np.concatenate(parts)


def _classic_gaussian_epsilon(r: GaussianRelease, delta_t: float) -> float:
    return r.sensitivity_l2 * math.sqrt(2.0 * math.log(1.25 / delta_t)) / r.sigma


def _pld_of(release: Release, vdi: float) -> pld_lib.PrivacyLossDistribution | None:
    if isinstance(release, LaplaceRelease):
        if release.sensitivity_l1 == 0:
            return None
        single = pld_lib.from_laplace_mechanism(
            release.scale / release.sensitivity_l1, value_discretization_interval=vdi
        )
        return single if release.count == 1 else single.self_compose(release.count)
    if isinstance(release, GaussianRelease):
        if release.sensitivity_l2 == 0:
            return None
        # k Gaussian steps of multiplier z are one Gaussian step of multiplier z/√k.
        z = release.sigma / release.sensitivity_l2 / math.sqrt(release.count)
        return pld_lib.from_gaussian_mechanism(z, value_discretization_interval=vdi)
    if release.epsilon == 0:
        return None
    single = pld_lib.from_privacy_parameters(
        pld_common.DifferentialPrivacyParameters(release.epsilon, 0.0),
        value_discretization_interval=vdi,
    )
    return single if release.count == 1 else single.self_compose(release.count)


def _pld_epsilon(releases: Sequence[Release], delta: float, vdi: float) -> float:
    pld = None
    for r in releases:
        p = _pld_of(r, vdi)
        if p is not None:
            pld = p if pld is None else pld.compose(p)
    if pld is None:
        return 0.0
    return float(pld.get_epsilon_for_delta(delta))


def _rdp_epsilon(releases: Sequence[Release], delta: float) -> float:
    shift = RdpAccountant()  # Laplace / Gaussian: the symmetric shift pair
    replace = RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    for r in releases:
        event = to_dp_event(r)
        (replace if isinstance(r, PureDpRelease) else shift).compose(event)
    rdp = shift.rdp + replace.rdp
    if not np.any(rdp):
        return 0.0
    return float(rdp_compute_epsilon(shift.orders, rdp, delta)[0])


# -------------------------------------------------------------------------------- facade
def epsilon(
    releases: Iterable[Release],
    delta: float,
    accountant: str = "pld",
    *,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> float:
    """ε at ``delta`` of the adaptive composition of ``releases``, by one accountant.

    Args:
        releases: :class:`LaplaceRelease`, :class:`GaussianRelease`, :class:`PureDpRelease`.
        delta: target δ in (0, 1).
        accountant: one of :data:`ACCOUNTANTS` (see the module docstring).
        value_discretization_interval: PLD grid (``pld`` only); coarser is faster and looser.

    Returns:
        ε ≥ 0 (``math.inf`` for ``paper`` when a Gaussian step is outside the classic bound).

    Raises:
        ConfigError: unknown accountant, δ ∉ (0, 1), empty or malformed releases.

    >>> round(epsilon([PureDpRelease(math.log(3))], 1e-5, "basic"), 6)  # randomized response
    1.098612
    >>> e = epsilon([GaussianRelease(1.0, 1.0, count=100)], 1e-5, "rdp")
    >>> round(e, 2)
    96.12

    """
    acc = check_choice("accountant", accountant, ACCOUNTANTS)
    dlt = check_real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    rel = _check_releases(releases)
    n = _n_steps(rel)
    has_gauss = any(isinstance(r, GaussianRelease) for r in rel)

    pure_total = math.inf if has_gauss else float(math.fsum(_pure_epsilons(rel, dlt)))
    if acc == "pld":
        vdi = check_real(
            "value_discretization_interval", value_discretization_interval, lo=0.0, lo_open=True
        )
        return min(_pld_epsilon(rel, dlt, vdi), pure_total)
    if acc == "rdp":
        return min(_rdp_epsilon(rel, dlt), pure_total)
    if acc == "basic":
        return float(math.fsum(_pure_epsilons(rel, dlt / n)))
    if acc == "paper":
        if not has_gauss:
            return float(math.fsum(_pure_epsilons(rel, dlt)))
        delta_t = dlt / (2.0 * n)
        eps_t = []
        for r in rel:
            if isinstance(r, GaussianRelease):
                e0 = _classic_gaussian_epsilon(r, delta_t)
                if e0 >= 1.0:
                    return math.inf
            else:
                e0 = r.epsilon0
            eps_t.append(np.full(r.count, e0))
        return kairouz_epsilon(np.concatenate(eps_t), dlt / 2.0)
    # advanced / kairouz: pure per-step ε, Gaussian steps converted at δ/(2n)
    slack = dlt / 2.0 if has_gauss else dlt
    eps_t = _pure_epsilons(rel, dlt / (2.0 * n))
    if acc == "advanced":
        with np.errstate(over="ignore"):  # huge ε_t: DRV is ∞ and Σ ε_t wins the min
            drift = float(np.sum(eps_t * np.expm1(eps_t)))
        drv = math.sqrt(2.0 * math.log(1.0 / slack) * float(np.sum(eps_t**2))) + drift
        return min(drv, float(math.fsum(eps_t)))
    # kairouz
    if np.all(eps_t == eps_t[0]) and eps_t[0] > 0:
        return min(
            kairouz_optimal_epsilon(float(eps_t[0]), int(eps_t.size), slack),
            kairouz_epsilon(eps_t, slack),
        )
    return kairouz_epsilon(eps_t, slack)
