"""Building blocks: single mechanisms and composition theorems in closed form.

* :func:`laplace_epsilon` — Laplace mechanism, ε = Δ₁ / b (book Lemma 11.1).
* :func:`randomized_response_epsilon` — randomized response, ε = ln 3 (book Example 11.2).
* :func:`basic_composition` — ε and δ add up (book Lemma 11.2; Dwork & Roth Thm 3.16).
* :func:`advanced_composition_epsilon` — Dwork–Rothblum–Vadhan (Dwork & Roth Thm 3.20).
* :func:`kairouz_epsilon` — Kairouz–Oh–Viswanath heterogeneous bound, eq. (32) of the
  graph-topology paper (= KOV 2015, Thm 3.5); :func:`kairouz_optimal_epsilon` — KOV
  Thm 3.3, the optimal composition of k ε₀-DP mechanisms.
* :func:`laplace_rdp` — Rényi DP of the Laplace mechanism at many orders and ε₀ at once
  (Mironov 2017, Prop. 6), the formula ``dp_accounting`` evaluates one scalar at a time.
* :func:`gaussian_sigma` — the classic Gaussian mechanism σ = Δ₂ √(2 ln(1.25/δ)) / ε
  (Dwork & Roth Thm A.1, proven only for ε < 1); :func:`gaussian_sigma_analytic` and
  :func:`gaussian_epsilon_analytic` — the exact (analytic) Gaussian mechanism of Balle &
  Wang (2018, Thm 8), the latter vectorized.

The accountants that compose releases (:mod:`.accountants`) are built on these; every
sensitivity is for *replacing* one client's data (see :mod:`.releases`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import dp_accounting
import numpy as np
from scipy.special import gammaln, log_ndtr

from pgfl.validation import ConfigError, check_int, check_real

__all__ = [
    "tradeoff_curve",
    "DEFAULT_VALUE_DISCRETIZATION_INTERVAL",
    "advanced_composition_epsilon",
    "basic_composition",
    "gaussian_epsilon_analytic",
    "gaussian_epsilon_classic",
    "gaussian_sigma",
    "gaussian_sigma_analytic",
    "kairouz_epsilon",
    "kairouz_optimal_epsilon",
    "drv_from_sums",
    "kov_from_sums",
    "laplace_epsilon",
    "laplace_hockey_stick",
    "laplace_rdp",
    "laplace_scale",
    "randomized_response_epsilon",
]

#: PLD discretization used by default. 1e-3 keeps a 100-step composition at ~0.01 s for
#: Laplace and moves ε by < 1e-5 against the library default 1e-4 on the reference cases;
#: the PLD accountant rounds pessimistically, so a coarser grid only loosens the bound.
DEFAULT_VALUE_DISCRETIZATION_INTERVAL = 1e-3


# --------------------------------------------------------------------------- validation
def _check_epsilon(name: str, value: float) -> float:
    return check_real(name, value, lo=0.0, lo_open=True)


def _check_delta(name: str, value: float) -> float:
    return check_real(name, value, lo=0.0, hi=1.0, lo_open=True, hi_open=True)


def _check_positive(name: str, value: float) -> float:
    return check_real(name, value, lo=0.0, lo_open=True)


def _check_nonneg(name: str, value: float) -> float:
    return check_real(name, value, lo=0.0)


def _as_epsilons(name: str, values: float | Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    if arr.ndim != 1 or arr.size == 0:
        raise ConfigError(
            f"{name} must be a non-empty 1-D sequence of reals; got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        bad = arr[~(np.isfinite(arr) & (arr >= 0))][0]
        raise ConfigError(f"{name} must hold real numbers in [0, inf); got {bad!r}")
    return arr


# ------------------------------------------------------------------- single mechanisms
def laplace_epsilon(sensitivity_l1: float, scale: float) -> float:
    """ε of the Laplace mechanism: ε = Δ₁ / b (book Lemma 11.1; Dwork & Roth Thm 3.6).

    Adding i.i.d. Laplace(0, b) noise to every coordinate of a query whose ℓ₁
    sensitivity is Δ₁ is (Δ₁ / b)-DP. The density ratio at any output is at most
    exp(‖f(D) − f(D′)‖₁ / b).

    Args:
        sensitivity_l1: Δ₁ ≥ 0, the ℓ₁ sensitivity of the released vector.
        scale: b > 0, the Laplace scale (standard deviation √2·b).

    Returns:
        ε = Δ₁ / b.

    >>> laplace_epsilon(1.0, 10.0)
    0.1

    """
    d1 = _check_nonneg("sensitivity_l1", sensitivity_l1)
    b = _check_positive("scale", scale)
    return d1 / b


def laplace_scale(epsilon: float, sensitivity_l1: float) -> float:
    """Laplace scale b = Δ₁ / ε that makes one release ε-DP (inverse of :func:`laplace_epsilon`).

    >>> laplace_scale(0.5, 2.0)
    4.0
    """
    eps = _check_epsilon("epsilon", epsilon)
    d1 = _check_nonneg("sensitivity_l1", sensitivity_l1)
    return d1 / eps


def randomized_response_epsilon(p_truth: float = 0.5) -> float:
    """ε of binary randomized response (book Example 11.2).

    With probability ``p_truth`` answer truthfully, otherwise answer with a fair coin.
    P(report yes | yes) = (1 + p)/2 and P(report yes | no) = (1 − p)/2, so
    ε = ln((1 + p)/(1 − p)); the book's coin-flip protocol (p = 1/2) gives ln 3.

    >>> round(randomized_response_epsilon(), 12) == round(math.log(3), 12)
    True
    """
    p = check_real("p_truth", p_truth, lo=0.0, hi=1.0, hi_open=True)
    return math.log1p(p) - math.log1p(-p)


def gaussian_sigma(
    epsilon: float, delta: float, sensitivity: float, *, strict: bool = True
) -> float:
    """Classic Gaussian-mechanism noise: σ = Δ₂ √(2 ln(1.25/δ)) / ε (Dwork & Roth Thm A.1).

    Adding N(0, σ²I) to a query with ℓ₂ sensitivity Δ₂ is (ε, δ)-DP **for ε < 1**;
    the theorem's proof does not cover ε ≥ 1. This is the formula behind Theorem 3 of
    the graph-topology paper (σ ≥ 2√(2 ln(1.25/δ)) B_z / (N ε), i.e. Δ₂ = 2 B_z / N).
    For ε ≥ 1 use :func:`gaussian_sigma_analytic` (exact, Balle & Wang 2018).

    Args:
        epsilon: ε in (0, 1) (any ε > 0 if ``strict=False``, at your own risk).
        delta: δ in (0, 1).
        sensitivity: Δ₂ ≥ 0, the ℓ₂ sensitivity.
        strict: raise :class:`ConfigError` for ε ≥ 1 (default).

    >>> round(gaussian_sigma(0.5, 1e-5, 1.0), 4)   # sqrt(2 ln 125000) / 0.5
    9.6896

    """
    if strict:
        eps = check_real("epsilon", epsilon, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    else:
        eps = _check_epsilon("epsilon", epsilon)
    dlt = _check_delta("delta", delta)
    d2 = _check_nonneg("sensitivity", sensitivity)
    return d2 * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps


def gaussian_epsilon_classic(sigma: float, delta: float, sensitivity: float) -> float:
    """Invert :func:`gaussian_sigma`: ε = Δ₂ √(2 ln(1.25/δ)) / σ (valid only if ε < 1).

    Returns the value even when it is ≥ 1 (then it is *not* a proven guarantee; callers
    wanting a valid ε for any σ should use the PLD accountant (:func:`~.curves.epsilon`)).

    >>> round(gaussian_epsilon_classic(9.6896, 1e-5, 1.0), 4)
    0.5
    """
    s = _check_positive("sigma", sigma)
    dlt = _check_delta("delta", delta)
    d2 = _check_nonneg("sensitivity", sensitivity)
    return d2 * math.sqrt(2.0 * math.log(1.25 / dlt)) / s


def gaussian_sigma_analytic(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest σ making one Gaussian release (ε, δ)-DP, exactly (Balle & Wang 2018, Thm 8).

    Uses ``dp_accounting.get_sigma_gaussian``; valid for every ε > 0 and always ≤ the
    classic :func:`gaussian_sigma` where that one applies.
    """
    eps = _check_epsilon("epsilon", epsilon)
    dlt = _check_delta("delta", delta)
    d2 = _check_nonneg("sensitivity", sensitivity)
    if d2 == 0.0:
        return 0.0
    return d2 * float(dp_accounting.get_sigma_gaussian(eps, dlt))


def gaussian_epsilon_analytic(
    noise_multiplier: float | np.ndarray, delta: float | np.ndarray
) -> float | np.ndarray:
    """Exact ε of the Gaussian mechanism at δ (Balle & Wang 2018, Thm 8), vectorized.

    For noise N(0, σ² I) on a query of ℓ₂ sensitivity Δ₂ (noise multiplier z = σ/Δ₂) the
    hockey-stick divergence of the shift pair is

        δ(ε) = Φ(1/(2z) − εz) − e^ε Φ(−1/(2z) − εz),

    decreasing in ε; this returns the ε ≥ 0 with δ(ε) = δ (0 when δ(0) ≤ δ), by bisection
    on log δ(ε) evaluated in log space (``scipy.special.log_ndtr``), to full double
    precision. k composed Gaussian releases are one with multiplier z/√k (Dong, Roth &
    Su, GDP composition), so this also gives the exact ε of any Gaussian composition.

    Args:
        noise_multiplier: z = σ/Δ₂ > 0 (``inf``: no information, ε = 0); scalar or array.
        delta: δ in (0, 1); scalar or array broadcast against ``noise_multiplier``.

    Returns:
        ε, a float for scalar inputs, else an array of the broadcast shape.

    >>> round(gaussian_epsilon_analytic(0.1, 1e-5), 2)      # 100 steps of multiplier 1
    91.82

    """
    z = np.asarray(noise_multiplier, dtype=float)
    d = np.asarray(delta, dtype=float)
    if np.any(~(z > 0)):  # also catches NaN
        raise ConfigError(f"noise_multiplier must be real numbers in (0, inf]; got {z.min()!r}")
    if np.any(~((d > 0) & (d < 1))):
        raise ConfigError(f"delta must be a real number in (0, 1); got {delta!r}")
    z, d = np.broadcast_arrays(z, d)
    scalar = z.ndim == 0
    z, log_d = z.reshape(-1), np.log(d.reshape(-1))
    out = np.zeros(z.shape)
    live = np.isfinite(z)
    zl, ld = z[live], log_d[live]
    half = 0.5 / zl

    def log_delta(eps: np.ndarray) -> np.ndarray:
        upper = log_ndtr(half - eps * zl)
        lower = eps + log_ndtr(-half - eps * zl)
        with np.errstate(divide="ignore"):
            return upper + np.log(-np.expm1(np.minimum(lower - upper, 0.0)))

    need = log_delta(np.zeros_like(zl)) > ld
    lo, hi = np.zeros_like(zl), np.ones_like(zl)
    for _ in range(2000):  # grow the bracket: δ(hi) ≤ δ
        grow = need & (log_delta(hi) > ld)
        if not grow.any():
            break
        lo, hi = np.where(grow, hi, lo), np.where(grow, 2.0 * hi, hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        above = log_delta(mid) > ld
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        if np.all(hi - lo <= 4e-16 * hi):
            break
    out[live] = np.where(need, hi, 0.0)
    return float(out[0]) if scalar else out.reshape(d.shape)


def laplace_rdp(epsilon0: float | np.ndarray, orders: Sequence[float] | np.ndarray) -> np.ndarray:
    """Rényi divergence of order α of the Laplace shift pair with ε₀ = Δ₁/b, vectorized.

    Mironov (2017, "Rényi Differential Privacy", arXiv:1702.07476, Prop. 6):

        D_α = ε₀ + ln(1 + (α − 1) (e^{(1−2α) ε₀} − 1)/(2α − 1)) / (α − 1),  α > 1,
        D_1 = ε₀ + e^{−ε₀} − 1                                              (KL, α → 1),

    written with ``expm1``/``log1p``, which stay accurate as α → 1 (``dp_accounting``
    switches to a Taylor series below α = 1.1 for the same reason). It equals
    ``dp_accounting``'s ``LaplaceDpEvent(1/ε₀)`` value order by order (tests compare
    them); composing T releases this way costs one array operation instead of T × orders
    scalar calls.

    Args:
        epsilon0: ε₀ ≥ 0, scalar or array of shape (E,).
        orders: α ≥ 1, shape (A,).

    Returns:
        Array of shape (A,) for a scalar ε₀, else (E, A).

    >>> [round(float(v), 6) for v in laplace_rdp(1.0, [1.0, 2.0])]  # 1/e, 1 + ln(2/3 + e⁻³/3)
    [0.367879, 0.619124]

    """
    a = np.asarray(orders, dtype=float)
    if a.ndim != 1 or a.size == 0 or not np.all(a >= 1.0) or not np.all(np.isfinite(a)):
        raise ConfigError(
            f"orders must be a non-empty 1-D sequence of reals in [1, inf); got {orders!r}"
        )
    e = np.asarray(epsilon0, dtype=float)
    if not np.all(np.isfinite(e)) or np.any(e < 0):
        raise ConfigError(f"epsilon0 must hold real numbers in [0, inf); got {epsilon0!r}")
    ee = e[..., None]
    am1 = np.where(a > 1.0, a - 1.0, 1.0)  # α = 1 handled by the KL limit below
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        renyi = ee + np.log1p(am1 * np.expm1((1.0 - 2.0 * a) * ee) / (2.0 * a - 1.0)) / am1
    return np.where(a > 1.0, renyi, ee + np.expm1(-ee))


def laplace_hockey_stick(epsilon: float | np.ndarray, epsilon0: float) -> float | np.ndarray:
    """δ(ε) of the Laplace shift pair (Lap(0, b), Lap(Δ, b)) with ε₀ = Δ/b, in closed form.

    The privacy loss ln p/q at x is ε₀ for x ≤ 0, ε₀ − 2x/b on (0, Δ) and −ε₀ beyond, so

        δ(ε) = 1 − e^{(ε − ε₀)/2}  for |ε| ≤ ε₀,   0 for ε ≥ ε₀,   1 − e^ε for ε ≤ −ε₀

    (at ε = 0 the total variation 1 − e^{−ε₀/2}). The PLD accountant feeds these values on
    its grid to ``dp_accounting``'s connect-the-dots constructor.

    >>> float(laplace_hockey_stick(0.0, 2.0)) == 1 - math.exp(-1)
    True
    """
    e = np.asarray(epsilon, dtype=float)
    e0 = _check_nonneg("epsilon0", epsilon0)
    with np.errstate(over="ignore"):
        out = np.where(e >= e0, 0.0, np.where(e <= -e0, -np.expm1(e), -np.expm1((e - e0) / 2)))
    return float(out) if out.ndim == 0 else out


# ----------------------------------------------------------------------- composition
def basic_composition(
    epsilons: float | Sequence[float] | np.ndarray,
    deltas: float | Sequence[float] | np.ndarray | None = None,
) -> tuple[float, float]:
    """Compose by adding up: (Σ ε_j, Σ δ_j) (book Lemma 11.2; Dwork & Roth Thm 3.16).

    >>> basic_composition([0.1] * 100)
    (10.0, 0.0)
    """
    eps = _as_epsilons("epsilons", epsilons)
    dl = np.zeros(1) if deltas is None else np.atleast_1d(np.asarray(deltas, dtype=float))
    if np.any(~np.isfinite(dl)) or np.any(dl < 0) or np.any(dl >= 1):
        raise ConfigError(f"deltas must hold real numbers in [0, 1); got {deltas!r}")
    return float(math.fsum(eps)), float(math.fsum(dl))


def advanced_composition_epsilon(
    epsilon0: float, delta0: float, k: int, delta_prime: float
) -> tuple[float, float]:
    """Advanced composition (Dwork, Rothblum & Vadhan 2010; Dwork & Roth 2014, Thm 3.20).

    k adaptive (ε₀, δ₀)-DP mechanisms are together (ε, k δ₀ + δ′)-DP with
    ε = ε₀ √(2k ln(1/δ′)) + k ε₀ (e^{ε₀} − 1).

    Args:
        epsilon0: per-step ε₀ > 0.
        delta0: per-step δ₀ in [0, 1).
        k: number of compositions ≥ 1.
        delta_prime: the slack δ′ in (0, 1).

    Returns:
        ``(epsilon, delta_total)`` with ``delta_total = k*delta0 + delta_prime``.

    >>> e, d = advanced_composition_epsilon(0.1, 0.0, 100, 1e-5)
    >>> round(e, 2), d
    (5.85, 1e-05)

    """
    e0 = _check_epsilon("epsilon0", epsilon0)
    d0 = check_real("delta0", delta0, lo=0.0, hi=1.0, hi_open=True)
    kk = check_int("k", k, lo=1)
    dp = _check_delta("delta_prime", delta_prime)
    return drv_from_sums(kk * e0**2, kk * e0 * math.expm1(e0), dp), kk * d0 + dp


def kairouz_epsilon(epsilons: float | Sequence[float] | np.ndarray, delta: float) -> float:
    """Kairouz–Oh–Viswanath heterogeneous composition: eq. (32) of the graph-topology paper.

    For T mechanisms that are ε_t-DP (pure; the (ε_t, δ_t) case adds
    1 − (1 − δ̄) Π (1 − δ_t) to the total δ), the composition is (ε̄, δ̄)-DP with
    (KOV 2015, Theorem 3.5; graph-topology paper Theorem 3, eq. 32)

        ε̄ = min{ Σ ε_t,
                 Σ (e^{ε_t} − 1) ε_t / (e^{ε_t} + 1) + √( Σ 2 ε_t² · ln(e + √(Σ ε_t²) / δ̄) ),
                 Σ (e^{ε_t} − 1) ε_t / (e^{ε_t} + 1) + √( Σ 2 ε_t² · ln(1/δ̄) ) }.

    Note on the typesetting of eq. (32): the paper prints ln(e + √(Σ ε_t² / δ̄)), i.e. the
    square root over the whole fraction. That is *not* KOV's Theorem 3.5 and is not a
    valid bound: for 100 steps of ε₀ = 0.1 at δ̄ = 1e-5 it gives 3.90, below the exact
    optimum 4.31 of composing 100 ε₀-DP randomized responses. We implement KOV's
    statement, √(Σ ε_t²) / δ̄.

    Args:
        epsilons: per-step ε_t ≥ 0, shape (T,), or a scalar for one step.
        delta: δ̄ in (0, 1).

    >>> round(kairouz_epsilon([0.1] * 100, 1e-5), 3)  # 10·0.1·tanh(0.05) + √(2 ln 1e5)
    5.298

    """
    eps = _as_epsilons("epsilons", epsilons)
    dlt = _check_delta("delta", delta)
    # (e^ε − 1)/(e^ε + 1) = tanh(ε/2)
    return kov_from_sums(
        math.fsum(eps), float(np.sum(eps**2)), float(np.sum(np.tanh(eps / 2) * eps)), dlt
    )


def kov_from_sums(total: float, squares: float, drift: float, delta: float) -> float:
    """Eq. (32) from the sums Σ ε_t, Σ ε_t² and Σ ε_t tanh(ε_t/2) (used by the accountants)."""
    term2 = drift + math.sqrt(2.0 * squares * math.log(math.e + math.sqrt(squares) / delta))
    term3 = drift + math.sqrt(2.0 * squares * math.log(1.0 / delta))
    return float(min(total, term2, term3))


def drv_from_sums(squares: float, drift: float, delta_prime: float) -> float:
    """Dwork–Rothblum–Vadhan, heterogeneous: √(2 ln(1/δ′) Σ ε_t²) + Σ ε_t (e^{ε_t} − 1)."""
    return math.sqrt(2.0 * math.log(1.0 / delta_prime) * squares) + drift


def kairouz_optimal_epsilon(epsilon0: float, k: int, delta: float) -> float:
    """Optimal composition of k ε₀-DP mechanisms (Kairouz, Oh & Viswanath 2015, Thm 3.3).

    The k-fold composition of any ε₀-DP mechanisms is ((k − 2i) ε₀, δ_i)-DP for
    i = 0, …, ⌊k/2⌋ with

        δ_i = Σ_{l=0}^{i−1} C(k, l) (e^{(k−l) ε₀} − e^{(k−2i+l) ε₀}) / (1 + e^{ε₀})^k,

    and no better pair holds in general (randomized response attains it). We return the
    smallest corner (k − 2i) ε₀ whose δ_i ≤ δ, as stated in the theorem (the exact
    curve between corners is slightly lower). This is the tightest bound that uses only
    "each step is ε₀-DP"; Laplace-specific accounting (PLD) can be tighter still.

    >>> round(kairouz_optimal_epsilon(0.1, 100, 1e-5), 6)
    4.4
    """
    e0 = _check_epsilon("epsilon0", epsilon0)
    kk = check_int("k", k, lo=1)
    dlt = _check_delta("delta", delta)
    i = np.arange(1, kk // 2 + 1, dtype=float)
    if i.size == 0:
        return float(kk * e0)
    delta_i = _kov_corner_deltas(e0, kk)
    ok = np.nonzero(delta_i > dlt)[0]
    n_ok = int(ok[0]) if ok.size else int(i.size)  # δ_i increases with i
    return float((kk - 2 * n_ok) * e0)


def _kov_corner_deltas(e0: float, k: int) -> np.ndarray:
    """δ_i of KOV Thm 3.3 for i = 1..⌊k/2⌋, in O(k) with log-space cumulative sums.

    δ_i = A_i − e^{−2iε₀} B_i with A_i = Σ_{l<i} w_l e^{(k−l)ε₀}, B_i = Σ_{l<i} w_l e^{(k+l)ε₀}
    and w_l = C(k, l)/(1 + e^{ε₀})^k.
    """
    ll = np.arange(k // 2, dtype=float)  # l = 0..⌊k/2⌋−1
    log_w = gammaln(k + 1.0) - gammaln(ll + 1.0) - gammaln(k - ll + 1.0) - k * np.logaddexp(0.0, e0)
    log_a = np.logaddexp.accumulate(log_w + (k - ll) * e0)
    log_b = np.logaddexp.accumulate(log_w + (k + ll) * e0)
    i = ll + 1.0
    return np.exp(log_a) * -np.expm1(np.minimum(log_b - 2.0 * i * e0 - log_a, 0.0))


def tradeoff_curve(epsilon: float, delta: float, alpha: np.ndarray) -> np.ndarray:
    """The f-DP trade-off an (ε, δ)-DP claim implies: least type-II error at type-I error α.

    ``f(α) = max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α))`` (Dong, Roth & Su, "Gaussian
    Differential Privacy", arXiv:1905.02383, Prop. 2.5).

    >>> tradeoff_curve(0.0, 0.0, np.array([0.25])).tolist()
    [0.75]

    An ε beyond float range (e^ε overflows past ε ≈ 709) leaves ``1 − δ`` at α = 0 only:

    >>> tradeoff_curve(1e6, 0.0, np.array([0.0, 0.25])).tolist()
    [1.0, 0.0]
    """
    a = np.asarray(alpha, dtype=float)
    scale = math.exp(epsilon) if epsilon < 700 else math.inf
    with np.errstate(invalid="ignore"):  # inf · 0 where α = 0, not taken
        upper = 1 - delta - np.where(a > 0, scale * a, 0.0)
    return np.maximum.reduce([np.zeros_like(a), upper, math.exp(-epsilon) * (1 - delta - a)])
