"""Rényi DP of a sum released by secure aggregation with integer noise shares.

The server sees ``S = Σ_i (x̃_i + Z_i)`` over the n surviving clients: integer vectors
``x̃_i ∈ Z^d`` (:mod:`~pgfl.privacy.distributed.encoding`) and independent noise shares.
Replacing one client's data moves ``Σ x̃_i`` by an integer vector ``D`` with ``‖D‖₂ ≤ Δ₂``
(:func:`rounded_sensitivity`), so one round is the shift pair ``(N + D, N)`` of the sum of
the n shares ``N``; coordinates are independent, so Rényi divergences add over them.

**Distributed discrete Gaussian** (shares ``N_Z(0, σ²)``; Kairouz, Liu & Steinke,
arXiv:2102.06387). The sum of n discrete Gaussians is not one, but it is close
(derivation, re-done here): convolving ``N_Z(0, kσ²)·a_k`` with ``N_Z(0, σ²)`` gives
``exp(−x²/(2(k+1)σ²))·Θ_k(x)`` where, by Poisson summation,
``Θ_k ∝ 1 + 2Σ_{j≥1} e^{−2π²s²j²} cos(2πjc_x)``, ``s² = σ²k/(k+1)``; so the sum's mass
function is ``exp(−x²/(2nσ²))·a(x)/Z`` with ``a(x)/a(y) ≤ e^{L_n}``,
``L_n = Σ_{k=1}^{n−1} ln((1+ε_k)/(1−ε_k))``, ``ε_k = 2Σ_{j≥1} e^{−2π²σ²j²k/(k+1)}``
(:func:`theta_loss`). For one coordinate and an integer shift δ, with ``G`` the discrete
Gaussian ``N_Z(0, nσ²)``, ``Σ_x P(x−δ)^α P(x)^{1−α} ≤ e^{αL_n} Σ_x G(x−δ)^α G(x)^{1−α}``
(bound ``a`` above and below; the normalisation ``Z ≥ min a · Σ e^{−x²/(2nσ²)}``), and the
discrete Gaussian's own divergence is at most ``αδ²/(2nσ²)`` (Canonne, Kamath & Steinke,
arXiv:2004.00010: the shifted theta sum peaks at an integer). Hence for every α > 1

    D_α(N + D ‖ N) ≤ α‖D‖₂²/(2nσ²) + ‖D‖₀ · α L_n/(α − 1),     ‖D‖₀ ≤ min(d, ⌊Δ₂²⌋)

(:func:`discrete_gaussian_rdp`). KLS's Proposition 14 (``τ = 10 Σ_k e^{−2π²σ²k/(k+1)}``;
``min(αΔ₂²/(2nσ²) + τd, (α/2)(Δ₂²/(nσ²) + 2Δ₁τ/(√nσ) + τ²d), (α/2)(Δ₂/(√nσ) + τ√d)²)``,
:func:`kls_rdp`) is the papers' reading; tests check both against the Rényi divergence of
the exact mass function of the sum (:func:`exact_rdp_1d`).

**Skellam** (shares ``Sk(λ, λ) = Pois(λ) − Pois(λ)``, variance 2λ; Agarwal, Kairouz & Liu,
arXiv:2110.04995, Theorem 3.5 / their accounting code): the sum is ``Sk(nλ, nλ)``, of
variance ``V = 2nλ``, and

    D_α ≤ αΔ₂²/(2V) + min(((2α − 1)Δ₂² + 6Δ₁)/(4V²), 3Δ₁/(2V))

(:func:`skellam_rdp`; applied at ``⌈α⌉``, as Rényi divergence grows with the order).

**The discrete Gaussian sum is (almost) a post-processed continuous Gaussian** (derived
here; gives the tight ε the ``pld`` accountant reports). Draw ``Y ~ N(s, V − W)`` and then
``K`` with ``P(K = k | Y) = φ_W(k − Y)/θ_W(Y)``, ``θ_W(y) = Σ_j φ_W(j − y)``: a kernel that
does not depend on ``s``. Completing the square, ``P(K = k) = φ_V(k − s)·E[1/θ_W]`` and, by
Poisson summation, ``θ_W ∈ [1 − ε_W, 1 + ε_W]``, ``ε_W = 2Σ_{m≥1} e^{−2π²Wm²}``. The
sum of n shares has mass ``∝ φ_V(x)·a(x)``, ``V = nσ²``, ``a`` within ``e^{L_n}``; both are
distributions, so their ratio lies in ``e^{±κ}``, ``κ = L_n + ln((1+ε_W)/(1−ε_W))`` per
shifted coordinate (coordinates without a shift are common to both worlds and drop
out). Over a run, the joint densities of the real and the post-processed views differ by
at most ``e^{±K}``, ``K = Σ_rounds ‖D‖₀ κ``, so ``δ_P(ε) ≤ e^K δ_Q(ε − 2K)``; and the
post-processed views are an adaptive composition of Gaussian mechanisms (rounding's
mixture over ``U`` keeps each round's trade-off function, which is convex), of
``μ² = Σ_rounds Δ₂²/(V − W)`` (Dong, Roth & Su, GDP). Hence
``ε(δ) ≤ ε_GDP(μ, δ e^{−K}) + 2K`` (:func:`gaussian_dominance`; W = :data:`DOMINANCE_W`,
K ~ 10⁻³⁰ once σ² ≥ 4). The ``pld`` accountant takes the smaller of this and the Rényi
bound.

**Dropout**: each client adds the noise for the worst allowed dropout (the threshold t:
share variance σ²/t), and a round is charged the largest divergence over the survivors
``n ∈ [t, L]`` it may hold (:func:`sum_rdp`), which is the one at n = t: fewer survivors,
less noise, more ε. **Sampling**: against an observer who does not know which L of the K
clients were sampled (subsampling without replacement, replace-one): the discrete
Gaussian sum stays within ``e^{±κ}`` of a post-processed Gaussian mechanism after the
sampling mixture too, so its Rényi DP is at most ``dp_accounting``'s sampled Gaussian
(Wang, Balle & Kasiviswanathan, "Subsampled Rényi Differential Privacy and Analytical
Moments Accountant", AISTATS 2019, arXiv:1808.00087) of multiplier ``1/μ`` plus
``(2α − 1)κ/(α − 1)`` (``P = Q·r``, ``|ln r| ≤ κ`` in both worlds); Skellam gets their
general Theorem 9 at integer orders (:func:`subsampled_rdp`; weak for small per-round ε,
as it must hold for any mechanism with ``ε(∞) = ∞``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import gammaln, ive, logsumexp

from pgfl.privacy.distributed.encoding import rounded_norm_bound
from pgfl.validation import ConfigError

__all__ = [
    "DISCRETE_NOISE",
    "DOMINANCE_W",
    "gaussian_dominance",
    "discrete_gaussian_rdp",
    "exact_rdp_1d",
    "kls_rdp",
    "kls_tau",
    "rounded_sensitivity",
    "skellam_rdp",
    "subsampled_rdp",
    "sum_logpmf",
    "sum_rdp",
    "theta_loss",
]

#: The integer noise of distributed DP, by transcript distribution name.
DISCRETE_NOISE = ("discrete_gaussian", "skellam")


def rounded_sensitivity(shift: float, clip: float, dim: int, beta: float) -> float:
    """Δ₂ (grid units) of one client's rounded vector when its data is replaced.

    Args:
        shift: bound on ``‖x − x′‖₂`` of the two real (scaled, rotated) vectors.
        clip: bound on ``‖x‖₂`` of one real vector.
        dim: d.
        beta: conditional rounding's β (0: unconditional).

    Unconditional rounding ``⌊x + U⌋`` with one ``U`` shared by both worlds (a coupling:
    the output is a mixture over ``U``, and a Rényi divergence of mixtures with the same
    weights is at most the largest one, by joint convexity) moves each coordinate by
    ``⌈|x_j − x′_j|⌉ < |x_j − x′_j| + 1``: ``Δ₂ ≤ shift + √d``; also ``≤ 2(clip + √d)``
    (two rounded vectors of norm ≤ clip + √d). Conditional rounding redraws ``U`` as a
    function of ``x``, which breaks the coupling, and only the norm bound holds:
    ``2Δ̃`` (:func:`~pgfl.privacy.distributed.encoding.rounded_norm_bound`), the one KLS
    use (client-level neighbours, whole contributions).

    >>> rounded_sensitivity(3.0, 100.0, 4, 0.0)     # 3 + √4
    5.0
    >>> rounded_sensitivity(3.0, 100.0, 4, 0.5) > 200  # conditional: 2Δ̃
    True

    """
    whole = 2.0 * rounded_norm_bound(clip, dim, beta)
    if beta > 0:
        return whole
    return min(shift + math.sqrt(dim), whole)


def _theta_tail(a: float) -> float:
    """An upper bound on ``Σ_{j≥1} e^{−a j²}``: ``e^{−a}/(1 − e^{−3a})`` (j² ≥ 3j − 2)."""
    if a <= 0:
        return math.inf
    return math.exp(-a) / -math.expm1(-3.0 * a)


def theta_loss(share_variance: float, shares: int) -> float:
    """``L_n``: the sum of n ``N_Z(0, σ²)`` has mass ``∝ e^{−x²/(2nσ²)} a(x)``, ``a/a′ ≤ e^{L_n}``.

    ``L_n = Σ_{k=1}^{n−1} ln((1+ε_k)/(1−ε_k))``, ``ε_k`` an upper bound on
    ``2Σ_{j≥1} e^{−2π²σ²j²k/(k+1)}`` (module doc); ``inf`` when some ``ε_k ≥ 1``.

    >>> theta_loss(4.0, 1), theta_loss(4.0, 2) < 1e-16, theta_loss(0.05, 3) == math.inf
    (0.0, True, True)
    """
    total = 0.0
    for k in range(1, int(shares)):
        eps = 2.0 * _theta_tail(2.0 * math.pi**2 * share_variance * k / (k + 1))
        if eps >= 1.0:
            return math.inf
        total += math.log1p(eps) - math.log1p(-eps)
    return total


def kls_tau(share_variance: float, shares: int) -> float:
    """KLS's ``τ = 10 Σ_{k=1}^{n−1} exp(−2π²σ²k/(k+1))`` (their Theorem 1).

    >>> kls_tau(1.0, 1), kls_tau(0.25, 2) > 0.1
    (0.0, True)
    """
    return 10.0 * sum(
        math.exp(-2.0 * math.pi**2 * share_variance * k / (k + 1)) for k in range(1, int(shares))
    )


def _nonzero(l2: float, dim: int) -> int:
    """The most non-zero coordinates of an integer vector of ℓ2 norm ≤ l2 in d dims."""
    return int(min(dim, math.floor(l2 * l2 + 1e-9)))


def _monotone(orders: np.ndarray, rdp: np.ndarray) -> np.ndarray:
    """``min_{α′ ≥ α} rdp(α′)``: Rényi divergence grows with α, so a bound at α′ bounds α."""
    order = np.argsort(orders)
    out = np.empty_like(rdp)
    out[order] = np.minimum.accumulate(rdp[order][::-1])[::-1]
    return out


#: W, the variance (grid units²) of the continuous Gaussian set aside to discretize.
DOMINANCE_W = 4.0


def gaussian_dominance(
    l2: float, share_variance: float, shares: Sequence[int], dim: int
) -> tuple[float, float] | None:
    """``(μ², κ)`` of one round of the distributed discrete Gaussian (module doc).

    The round is a post-processed Gaussian mechanism of ``μ = l2/√(nσ² − W)`` (n the fewest
    shares) up to a likelihood-ratio factor ``e^{±κ}``, ``κ = ‖D‖₀ (L_n +
    ln((1+ε_W)/(1−ε_W)))`` (the most shares for ``L_n``); ``None`` when ``nσ² ≤ 2W`` or the
    factor is unbounded.

    >>> mu2, kappa = gaussian_dominance(10.0, 1e4, (10,), 2)
    >>> round(mu2, 9), kappa < 1e-30
    (0.00100004, True)
    """
    n = min(shares)
    if n * share_variance <= 2.0 * DOMINANCE_W:
        return None
    eps_w = 2.0 * _theta_tail(2.0 * math.pi**2 * DOMINANCE_W)
    loss = theta_loss(share_variance, max(shares))
    kappa = _nonzero(l2, dim) * (loss + math.log1p(eps_w) - math.log1p(-eps_w))
    if not math.isfinite(kappa):
        return None
    return l2 * l2 / (n * share_variance - DOMINANCE_W), kappa


def discrete_gaussian_rdp(
    orders: np.ndarray, l2: float, share_variance: float, shares: int, dim: int
) -> np.ndarray:
    """Rényi DP of the sum of n ``N_Z(0, σ²)`` shares, integer shifts of norm ≤ l2 (derived).

    ``α l2²/(2nσ²) + ‖D‖₀ α L_n/(α − 1)`` (module doc), made non-increasing from the
    right (:func:`_monotone`). Orders must exceed 1.

    >>> o = np.array([2.0, 8.0])
    >>> discrete_gaussian_rdp(o, 3.0, 1e4, 1, 4).tolist()    # one share: the discrete Gaussian
    [0.0009, 0.0036]
    """
    o = np.asarray(orders, dtype=float)
    loss = theta_loss(share_variance, shares)
    extra = 0.0 if loss == 0 else _nonzero(l2, dim) * loss * o / (o - 1.0)
    return _monotone(o, o * l2 * l2 / (2.0 * shares * share_variance) + extra)


def kls_rdp(
    orders: np.ndarray, l2: float, share_variance: float, shares: int, dim: int
) -> np.ndarray:
    """KLS's Proposition 14 (as their accounting code applies it): the papers' reading.

    With ``s2 = l2/(√n σ)``, ``s1 = l1/(√n σ)``, ``l1 = l2·min(√d, l2)``, ``τ`` =
    :func:`kls_tau`: ``min(α s2²/2 + τd, (α/2)(s2² + 2 s1 τ + τ²d), (α/2)(s2 + τ√d)²)``.

    >>> kls_rdp(np.array([2.0]), 3.0, 1e4, 1, 4).tolist()
    [0.0009]
    """
    o = np.asarray(orders, dtype=float)
    sd = math.sqrt(shares * share_variance)
    s2, s1 = l2 / sd, l2 * min(math.sqrt(dim), l2) / sd
    tau = kls_tau(share_variance, shares)
    return np.minimum.reduce([
        o * s2**2 / 2.0 + tau * dim,
        o / 2.0 * (s2**2 + 2.0 * s1 * tau + tau**2 * dim),
        o / 2.0 * (s2 + math.sqrt(dim) * tau) ** 2,
    ])  # fmt: skip


def skellam_rdp(orders: np.ndarray, l2: float, total_variance: float, dim: int) -> np.ndarray:
    """Agarwal et al.'s Rényi bound of ``Sk(μ, μ)^d`` (variance ``V = 2μ``) at ``⌈α⌉``.

    ``αΔ₂²/(2V) + min(((2α − 1)Δ₂² + 6Δ₁)/(4V²), 3Δ₁/(2V))``, ``Δ₁ = Δ₂ min(√d, Δ₂)``
    (an integer vector has ``‖D‖₁ ≤ ‖D‖₂²``).

    >>> skellam_rdp(np.array([2.0]), 1.0, 100.0, 1).tolist()    # 0.01 + (3 + 6)/40000
    [0.010225]
    """
    a = np.ceil(np.asarray(orders, dtype=float))
    l1 = l2 * min(math.sqrt(dim), l2)
    v = float(total_variance)
    return a * l2**2 / (2 * v) + np.minimum(((2 * a - 1) * l2**2 + 6 * l1) / (4 * v * v),
                                            3 * l1 / (2 * v))  # fmt: skip


def sum_rdp(
    orders: np.ndarray,
    noise: str,
    l2: float,
    share_variance: float,
    shares: Sequence[int],
    dim: int,
    *,
    published: bool = False,
) -> np.ndarray:
    """One round's Rényi DP, the largest over the possible survivor counts ``shares``.

    ``noise``: one of :data:`DISCRETE_NOISE`; ``published``: KLS's Proposition 14 for the
    discrete Gaussian (the papers' reading) instead of the derived bound.

    >>> o = np.array([4.0])
    >>> float(sum_rdp(o, "skellam", 2.0, 50.0, (10, 9, 8), 2)[0]) == float(
    ...     skellam_rdp(o, 2.0, 8 * 50.0, 2)[0])        # fewest survivors: least noise
    True
    """
    if noise not in DISCRETE_NOISE:
        raise ConfigError(f"noise must be one of {', '.join(DISCRETE_NOISE)}; got {noise!r}")
    if not shares:
        raise ConfigError("shares must hold at least one survivor count")
    o = np.asarray(orders, dtype=float)
    if noise == "skellam":
        rows = [skellam_rdp(o, l2, n * share_variance, dim) for n in shares]
    else:
        bound = kls_rdp if published else discrete_gaussian_rdp
        rows = [bound(o, l2, share_variance, n, dim) for n in shares]
    return np.max(rows, axis=0)


def subsampled_rdp(orders: np.ndarray, base, q: float) -> np.ndarray:
    """RDP of a mechanism run on a uniform m-of-K subsample (q = m/K), replace-one.

    Wang, Balle & Kasiviswanathan (arXiv:1808.00087), Theorem 9 for a mechanism with
    ``ε(∞) = ∞``, at the integer order ``⌈α⌉`` (valid for α by monotonicity):
    ``(1/(α−1)) ln(1 + q²C(α,2) min(4(e^{ε(2)} − 1), 2e^{ε(2)}) +
    Σ_{j=3}^{α} 2 q^j C(α,j) e^{(j−1)ε(j)})``, the smaller of that and ε(α). ``base``
    maps integer orders (an array) to the mechanism's RDP.

    >>> gauss = lambda a: a / 2.0
    >>> float(subsampled_rdp(np.array([2.0]), gauss, 1.0)[0])
    1.0
    """
    o = np.asarray(orders, dtype=float)
    if q >= 1.0:
        return np.asarray(base(o), dtype=float)
    top = int(math.ceil(o.max()))
    ints = np.arange(2, top + 1)
    eps = np.asarray(base(ints.astype(float)), dtype=float)  # ε(j), j = 2..top
    out = np.empty(o.size)
    for i, alpha in enumerate(np.ceil(o).astype(int)):
        if alpha < 2:
            alpha = 2
        e2 = eps[0]
        second = min(math.log(4.0) + e2 + math.log(-math.expm1(-e2)), math.log(2.0) + e2)
        terms = [0.0, 2 * math.log(q) + _log_comb(alpha, 2) + second]
        j = np.arange(3, alpha + 1)
        if j.size:
            terms += list(math.log(2.0) + j * math.log(q) + _log_comb(alpha, j)
                          + (j - 1) * eps[j - 2])  # fmt: skip
        out[i] = min(float(logsumexp(terms)) / (alpha - 1), float(eps[alpha - 2]))
    return out


def _log_comb(n, k):
    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


# ------------------------------------------------------------- the exact 1-D distributions
def sum_logpmf(noise: str, share_variance: float, shares: int, radius: int) -> np.ndarray:
    """The exact log-mass function of the sum of n shares on ``[−radius, radius]`` (1-D).

    Discrete Gaussian: the n-fold convolution of ``N_Z(0, σ²)``, in log space (each share
    normalised over ``[−radius, radius]``, which must hold its mass; far tails stay exact
    down to ``e^{−700}`` and below); Skellam: ``Sk(nλ, nλ)`` with ``2λ = σ²``,
    ``P(k) = e^{−2nλ} I_|k|(2nλ)`` (scipy's scaled Bessel function; ``−inf`` where it
    underflows).
    The independent computation the accountant is checked with.

    >>> p = np.exp(sum_logpmf("discrete_gaussian", 1.0, 2, 30))
    >>> round(float(p.sum()), 12), round(float((np.arange(-30, 31) ** 2 * p).sum()), 6)
    (1.0, 2.0)
    """
    x = np.arange(-radius, radius + 1)
    if noise == "skellam":  # P(k) = e^{−2μ} I_|k|(2μ) = ive(|k|, 2μ)
        mu = shares * share_variance / 2.0
        with np.errstate(divide="ignore"):
            return np.log(ive(np.abs(x), 2.0 * mu))
    one = -(x.astype(float) ** 2) / (2.0 * share_variance)
    one -= logsumexp(one)
    out = one
    grid = x[:, None] - x[None, :]  # out(x) = log Σ_y one(y) + prev(x − y)
    inside = np.abs(grid) <= radius
    for _ in range(shares - 1):
        prev = np.where(inside, out[np.clip(grid + radius, 0, 2 * radius)], -np.inf)
        out = logsumexp(one[None, :] + prev, axis=1)
    return out - logsumexp(out)


def exact_rdp_1d(logpmf: np.ndarray, shift: int, alpha: float) -> float:
    """``D_α(P(· − δ) ‖ P)`` of a log-mass function on a centred grid, numerically.

    >>> p = sum_logpmf("discrete_gaussian", 4.0, 1, 60)
    >>> round(exact_rdp_1d(p, 1, 2.0), 6)        # α δ²/(2σ²) = 0.25 for the discrete Gaussian
    0.25
    """
    a, b = logpmf[: logpmf.size - shift], logpmf[shift:]  # P(x − δ), P(x), x ∈ [−r + δ, r]
    ok = np.isfinite(a) & np.isfinite(b)
    return float(logsumexp(alpha * a[ok] + (1.0 - alpha) * b[ok])) / (alpha - 1.0)
