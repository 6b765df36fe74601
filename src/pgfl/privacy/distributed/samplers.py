"""Samplers of distributed DP's integer noise: exact in integer arithmetic, vectorized.

Every sampler here draws from a *word source*, 64-bit random words handed out per element
of an array of draws, so that one algorithm serves both secure-aggregation protocols:

* :class:`KeyedWords` (the simulated protocol): the words of element ``e`` of cell ``c``
  are the SplitMix64 outputs of the cell's key (:class:`pgfl.rng.KeyedDraws`) at counters
  ``j·n + e`` for its ``j``-th word, so an element's draws depend on nothing but its own
  key and history: the same bits whatever the grouping of units, repetitions or other
  elements' rejections. Simulation numbers, never secrets.
* :class:`SystemWords` (the cryptographic protocol): the operating system's
  cryptographically secure generator, ``os.urandom``.

The discrete Gaussian is the exact rejection sampler of Canonne, Kamath & Steinke, "The
Discrete Gaussian for Differential Privacy" (NeurIPS 2020, arXiv:2004.00010): Algorithm 1
(``Bernoulli(exp(−γ))`` for rational γ, from uniform integers only), Algorithm 2 (discrete
Laplace), Algorithm 3 (discrete Gaussian by rejection from the discrete Laplace), all in
``int64`` arithmetic, with no floating point anywhere: the variance is a product of two
integers ``σ² = t·m`` (:func:`exact_variance`), so the acceptance exponent
``(|Y| − σ²/t)²/(2σ²) = (|Y| − m)²/(2tm)`` is a ratio of integers. Each vectorized loop
runs over the elements still pending; an element leaves when its own draws accept.

Poisson noise (the Skellam mechanism's ``Sk(λ, λ) = Pois(λ) − Pois(λ)``, Agarwal, Kairouz
& Liu, "The Skellam Mechanism for Differentially Private Federated Learning", NeurIPS
2021, arXiv:2110.04995) comes two ways: :func:`poisson_exact`, exact for rational λ in
Python integers (rejection from a two-sided geometric envelope of rational ratio, whose
acceptance probability is rational because Poisson probabilities at two points have a
rational ratio; one element at a time, for the cryptographic protocol), and
:func:`poisson_keyed`, Hörmann's transformed rejection (PTRS, "The transformed rejection
method for generating Poisson random variables", 1993, the algorithm of numpy's own
``Generator.poisson`` for λ ≥ 10; inversion below) in floating point, vectorized over keyed
uniforms, for the simulated protocol.

>>> src = KeyedWords(np.array([7], dtype=np.uint64), per_cell=4)
>>> bool((discrete_gaussian(src, np.arange(4), t=3, m=3) == discrete_gaussian(
...     KeyedWords(np.array([7], dtype=np.uint64), per_cell=4), np.arange(4), t=3, m=3)).all())
True
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy.special import gammaln

from pgfl.rng import GAMMA, mix64
from pgfl.validation import ConfigError

__all__ = [
    "KeyedWords",
    "SystemWords",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_gaussian_keyed",
    "discrete_laplace",
    "exact_variance",
    "poisson_exact",
    "poisson_keyed",
    "uniform_below",
]

_ONE = np.uint64(1)
#: A draw whose integers would leave int64 is refused (it has probability below 2^-1000).
_LIMIT = 1 << 31


class KeyedWords:
    """Keyed 64-bit words: element ``e`` of a cell draws its ``j``-th at counter ``j·n + e``.

    Args:
        keys: one 64-bit key per cell (e.g. :meth:`pgfl.rng.KeyedDraws.keys` of a stream,
            flattened), ``[cells]``.
        per_cell: ``n``, the elements of a cell; element ``i`` of the flat array of draws
            is element ``i mod n`` of cell ``i // n``.

    The word is SplitMix64's finalizer of ``key + (j·n + e + 1)·γ`` (:func:`pgfl.rng.mix64`),
    the counter-based generator of :class:`pgfl.rng.KeyedDraws`.

    """

    def __init__(self, keys: np.ndarray, per_cell: int):
        self.keys = np.asarray(keys, dtype=np.uint64).ravel()
        self.per_cell = int(per_cell)
        self.count = np.zeros(self.keys.size * self.per_cell, dtype=np.uint64)

    def words(self, index: np.ndarray) -> np.ndarray:
        """One fresh word for each element of ``index`` (distinct flat element ids)."""
        index = np.asarray(index, dtype=np.int64)
        cell, e = np.divmod(index, self.per_cell)
        counter = self.count[index] * np.uint64(self.per_cell) + e.astype(np.uint64) + _ONE
        self.count[index] += _ONE
        return mix64(self.keys[cell] + counter * GAMMA)

    def uniforms(self, index: np.ndarray) -> np.ndarray:
        """Uniforms in (0, 1) from the top 53 bits of one word each (as :mod:`pgfl.rng`)."""
        return ((self.words(index) >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


class SystemWords:
    """Words from the operating system's cryptographically secure generator (``os.urandom``).

    ``randbytes`` replaces ``os.urandom`` only in tests that replay a transcript.
    """

    def __init__(self, randbytes: Callable[[int], bytes] = os.urandom):
        self.randbytes = randbytes

    def words(self, index: np.ndarray) -> np.ndarray:
        """One fresh word for each element of ``index``."""
        n = int(np.asarray(index).size)
        return np.frombuffer(self.randbytes(8 * n), dtype=np.uint64).copy()

    def randbelow(self, bound: int) -> int:
        """A uniform integer in ``[0, bound)``, any size (rejection on the bit length)."""
        bits = int(bound - 1).bit_length()
        while True:
            x = int.from_bytes(self.randbytes((bits + 7) // 8), "little") >> (-bits % 8)
            if x < bound:
                return x

    def uniforms(self, index: np.ndarray) -> np.ndarray:
        """Uniforms in (0, 1) from the top 53 bits of one word each."""
        return ((self.words(index) >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def uniform_below(source, index: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Uniform integers in ``[0, bound)`` per element, exactly (``1 ≤ bound < 2^63``).

    A word ``w`` is kept when ``w < 2^64 − (2^64 mod bound)`` and reduced mod ``bound``;
    the rest draw again (each with probability < bound/2^64).

    >>> x = uniform_below(KeyedWords(np.array([1], dtype=np.uint64), 1000), np.arange(1000),
    ...                   np.full(1000, 6))
    >>> sorted(set(x.tolist()))
    [0, 1, 2, 3, 4, 5]
    """
    index = np.asarray(index, dtype=np.int64)
    b = np.broadcast_to(np.asarray(bound, dtype=np.uint64), index.shape)
    out = np.empty(index.size, dtype=np.int64)
    live = np.arange(index.size)
    while live.size:
        w = source.words(index[live])
        bl = b[live]
        r = (~bl + _ONE) % bl  # 2^64 mod b
        ok = (r == 0) | (w < ~r + _ONE)
        out[live[ok]] = (w[ok] % bl[ok]).astype(np.int64)
        live = live[~ok]
    return out


def _exp_at_most_one(source, index: np.ndarray, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``Bernoulli(exp(−num/den))`` for ``0 ≤ num ≤ den`` (CKS Algorithm 1, γ ∈ [0, 1]).

    K = 1; while ``A ~ Bernoulli(γ/K)`` succeeds, K += 1; return K odd. ``Bernoulli(γ/K)``
    is ``[U_K = 0] ∧ [U_den < num]`` with independent uniform integers below K and den.
    """
    k = np.ones(index.size, dtype=np.int64)
    live = np.arange(index.size)
    while live.size:
        idx = index[live]
        a = (uniform_below(source, idx, k[live]) == 0) & (
            uniform_below(source, idx, den[live]) < num[live]
        )
        k[live[a]] += 1
        live = live[a]
    return k % 2 == 1


def bernoulli_exp(source, index: np.ndarray, num, den) -> np.ndarray:
    """``Bernoulli(exp(−num/den))`` per element, exactly, for integers ``num ≥ 0``, ``den ≥ 1``.

    CKS Algorithm 1: ``⌊γ⌋`` independent ``Bernoulli(e^{−1})`` that must all succeed, then
    one ``Bernoulli(exp(−(γ − ⌊γ⌋)))``.

    >>> src = KeyedWords(np.array([3], dtype=np.uint64), 20000)
    >>> hits = bernoulli_exp(src, np.arange(20000), np.full(20000, 1), np.full(20000, 2))
    >>> bool(abs(hits.mean() - math.exp(-0.5)) < 0.02)
    True
    """
    index = np.asarray(index, dtype=np.int64)
    num = np.broadcast_to(np.asarray(num, dtype=np.int64), index.shape)
    den = np.broadcast_to(np.asarray(den, dtype=np.int64), index.shape)
    whole, frac = np.divmod(num, den)
    out = np.ones(index.size, dtype=bool)
    ones = np.ones(index.size, dtype=np.int64)
    live, k = np.flatnonzero(whole > 0), 0
    while live.size:
        ok = _exp_at_most_one(source, index[live], ones[live], ones[live])
        out[live[~ok]] = False
        k += 1
        live = live[ok & (whole[live] > k)]
    todo = np.flatnonzero(out & (frac > 0))
    out[todo] = _exp_at_most_one(source, index[todo], frac[todo], den[todo])
    return out


def discrete_laplace(source, index: np.ndarray, t: int) -> np.ndarray:
    """``P(Y = y) ∝ exp(−|y|/t)`` on the integers, exactly (CKS Algorithm 2), ``t ≥ 1``.

    ``U`` uniform in ``[0, t)`` kept with probability ``e^{−U/t}``, ``V`` the number of
    successes of ``Bernoulli(e^{−1})`` before the first failure, a fair sign, ``(U, V) =
    (0, 0)`` with a negative sign rejected; ``Y = ±(U + tV)``.
    """
    index = np.asarray(index, dtype=np.int64)
    out = np.empty(index.size, dtype=np.int64)
    live = np.arange(index.size)
    while live.size:
        idx = index[live]
        u = uniform_below(source, idx, np.full(idx.size, t))
        keep = bernoulli_exp(source, idx, u, np.full(idx.size, t))
        retry = live[~keep]
        live, idx, u = live[keep], idx[keep], u[keep]
        v = np.zeros(idx.size, dtype=np.int64)
        more = np.arange(idx.size)
        while more.size:
            a = _exp_at_most_one(source, idx[more], np.ones(more.size, np.int64),
                                 np.ones(more.size, np.int64))  # fmt: skip
            v[more[a]] += 1
            more = more[a]
        negative = uniform_below(source, idx, np.full(idx.size, 2)) == 1
        good = ~(negative & (u == 0) & (v == 0))
        y = u + t * v
        out[live[good]] = np.where(negative, -y, y)[good]
        live = np.sort(np.concatenate([retry, live[~good]]))
    return out


def discrete_gaussian(source, index: np.ndarray, t: int, m: int) -> np.ndarray:
    """``N_Z(0, σ²)``, ``P(Y = y) ∝ exp(−y²/(2σ²))``, exactly, for ``σ² = t·m`` (CKS Algorithm 3).

    ``Y ~`` :func:`discrete_laplace` of scale ``t``, kept with probability
    ``exp(−(|Y| − σ²/t)²/(2σ²)) = exp(−(|Y| − m)²/(2tm))`` (integers only). CKS take
    ``t = ⌊σ⌋ + 1`` for speed (:func:`exact_variance`); any ``t ≥ 1`` is exact.

    Args:
        source: a word source.
        index: the flat element ids of the draws, ``[n]``.
        t: a positive integer, the discrete Laplace's scale.
        m: a positive integer, ``σ² = t·m``.

    Returns:
        ``int64 [n]``.

    """
    if t < 1 or m < 1 or 2 * t * m >= 1 << 62:
        raise ConfigError(f"discrete Gaussian needs integers t, m >= 1 with 2tm < 2^62; "
                          f"got t={t}, m={m}")  # fmt: skip
    index = np.asarray(index, dtype=np.int64)
    out = np.empty(index.size, dtype=np.int64)
    live = np.arange(index.size)
    while live.size:
        y = discrete_laplace(source, index[live], t)
        gap = np.abs(y) - m
        if np.abs(gap).max(initial=0) >= _LIMIT:
            raise ConfigError("discrete Gaussian: a draw beyond 2^31 (probability < 2^-1000)")
        keep = bernoulli_exp(source, index[live], gap * gap, np.full(y.size, 2 * t * m))
        out[live[keep]] = y[keep]
        live = live[~keep]
    return out


#: Standard deviations of support of the simulated discrete Gaussian's table (mass beyond:
#: ≈ e^{−800}, below every float uniform's resolution).
_TABLE_STDDEVS = 40
#: The largest table :func:`discrete_gaussian_keyed` builds (larger σ: the exact sampler).
_TABLE_MAX = 1 << 21


@lru_cache(maxsize=16)
def _dg_table(variance: float) -> tuple[int, np.ndarray]:
    """``(radius, cdf)``: the discrete Gaussian's CDF on ``[−radius, radius]`` (floats)."""
    radius = int(_TABLE_STDDEVS * math.sqrt(variance)) + 1
    y = np.arange(-radius, radius + 1, dtype=np.float64)
    w = np.exp(-(y * y) / (2.0 * variance))
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    cdf.flags.writeable = False
    return radius, cdf


def discrete_gaussian_keyed(source, index: np.ndarray, t: int, m: int) -> np.ndarray:
    """``N_Z(0, t·m)`` per element by inverting its CDF at one keyed uniform (simulation only).

    One vectorized pass instead of the exact sampler's rejection loops: the CDF is a float
    table over ±40σ (cached per variance), so the draw is exact up to floating-point
    rounding of the table — a simulation sampler; :func:`discrete_gaussian` is the exact
    one (used beyond 2^21 table entries).

    >>> src = KeyedWords(np.array([2], dtype=np.uint64), 20000)
    >>> x = discrete_gaussian_keyed(src, np.arange(20000), 5, 5)
    >>> bool(abs(x.var() / 25 - 1) < 0.05), bool(abs(x.mean()) < 0.1)
    (True, True)
    """
    variance = float(t * m)
    if 2 * _TABLE_STDDEVS * math.sqrt(variance) > _TABLE_MAX:
        return discrete_gaussian(source, index, t, m)
    radius, cdf = _dg_table(variance)
    u = source.uniforms(np.asarray(index, dtype=np.int64))
    return np.minimum(np.searchsorted(cdf, u, side="left"), cdf.size - 1) - radius


def exact_variance(variance: float) -> tuple[int, int]:
    """``(t, m)``: ``σ² = t·m ≥ variance``, smallest over ``t ∈ {⌊σ⌋, ⌊σ⌋ + 1}``.

    The discrete Gaussian's variance rounded up to a product of integers, so that
    :func:`discrete_gaussian` runs in integers (CKS take ``t = ⌊σ⌋ + 1``; ``⌊σ⌋`` is as
    fast); the increase is below ``t``, relative ``≈ 1/σ`` (and ``σ² ≥ 1``: noise below
    one grid step is raised to it).

    >>> exact_variance(10.0), exact_variance(0.3), exact_variance(1e6 + 1)
    ((4, 3), (1, 1), (1001, 1000))
    """
    v = max(float(variance), 1.0)
    r = math.isqrt(math.floor(v))
    pairs = [(t, math.ceil(v / t)) for t in (r + 1, r) if t >= 1]
    return min(pairs, key=lambda p: p[0] * p[1])


# ------------------------------------------------------------------------------- Poisson
@lru_cache(maxsize=64)
def _envelope(lam: Fraction) -> tuple[int, int, Fraction]:
    """``(m, s, C)`` of :func:`poisson_exact`, exact.

    The mode m, the geometric ratio ``ρ = (s−1)/s``, and ``C = max_j h(j)·ρ^{−|j|}`` over
    ``j ≥ −m`` with ``h(j) = P(m+j)/P(m)``.
    """
    m = math.floor(lam)
    s = math.isqrt(m) + 2
    rho = Fraction(s - 1, s)
    best, f, j = Fraction(1), Fraction(1), 0
    while True:  # right side: f(j+1)/f(j) = λ/((m+j+1)ρ), decreasing in j
        step = lam / ((m + j + 1) * rho)
        if step <= 1:
            break
        f, j = f * step, j + 1
        best = max(best, f)
    f, j = Fraction(1), 0
    while j < m:  # left side: f(−j−1)/f(−j) = (m−j)/(λρ), decreasing in j
        step = Fraction(m - j) / (lam * rho)
        if step <= 1:
            break
        f, j = f * step, j + 1
        best = max(best, f)
    return m, s, best


def _geometric_exact(source: SystemWords, s: int) -> int:
    """``P(X = x) ∝ ((s−1)/s)^x``, x ≥ 0, exactly: ``X = U + sV`` (U kept w.p. ρ^U, V geometric)."""
    while True:
        u = source.randbelow(s)
        if source.randbelow(s**u) < (s - 1) ** u:
            break
    v = 0
    while source.randbelow(s**s) < (s - 1) ** s:
        v += 1
    return u + s * v


def poisson_exact(source: SystemWords, lam: Fraction, n: int) -> np.ndarray:
    """``n`` draws of ``Poisson(λ)`` for rational ``λ > 0``, exactly, in Python integers.

    Rejection from the two-sided geometric ``g(j) ∝ ρ^{|j|}``, ``ρ = (s−1)/s``,
    ``s = ⌊√⌊λ⌋⌋ + 2``, centred at the mode ``m = ⌊λ⌋``: ``j`` is kept with probability
    ``h(j) ρ^{−|j|}/C``, where ``h(j) = P(m+j)/P(m) = λ^j m!/(m+j)!`` is rational and ``C``
    its largest value against the envelope (:func:`_envelope`; ``h ρ^{−|j|}`` is log-concave
    on each side, so the scan finds it). The normalising ``e^{−λ}`` cancels, so every
    probability compared is a ratio of integers and the draw is exact. Cost: O(√λ)
    big-integer products per draw; for the cryptographic protocol, one draw at a time.

    >>> src = SystemWords()
    >>> x = poisson_exact(src, Fraction(3), 4000)
    >>> bool(abs(x.mean() - 3) < 0.2)
    True
    """
    lam = Fraction(lam)
    if lam <= 0:
        raise ConfigError(f"Poisson needs lambda > 0; got {lam}")
    m, s, c = _envelope(lam)
    a, b = lam.numerator, lam.denominator
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        while True:
            x = _geometric_exact(source, s)
            negative = source.randbelow(2) == 1
            if negative and x == 0:
                continue
            j = -x if negative else x
            if j < -m:
                continue
            # h(j) ρ^{-|j|} / C as num/den
            if j >= 0:
                num, den = a**j * s**j, b**j * math.prod(range(m + 1, m + j + 1)) * (s - 1) ** j
            else:
                k = -j
                num = math.prod(range(m - k + 1, m + 1)) * b**k * s**k
                den = a**k * (s - 1) ** k
            num, den = num * c.denominator, den * c.numerator
            if source.randbelow(den) < num:
                out[i] = m + j
                break
    return out


def poisson_keyed(source: KeyedWords, index: np.ndarray, lam: float) -> np.ndarray:
    """``Poisson(λ)`` per element from keyed uniforms, in floating point (simulation only).

    λ ≥ 10: PTRS (Hörmann 1993), vectorized rejection, two uniforms per trial; λ < 10:
    inversion of the CDF by sequential search. Floating-point arithmetic: a simulation
    sampler, not a private one (:func:`poisson_exact` is).

    >>> src = KeyedWords(np.array([5], dtype=np.uint64), 4000)
    >>> bool(abs(poisson_keyed(src, np.arange(4000), 50.0).mean() - 50) < 0.5)
    True
    """
    index = np.asarray(index, dtype=np.int64)
    out = np.empty(index.size, dtype=np.int64)
    if lam < 10:
        u = source.uniforms(index)
        k = np.zeros(index.size, dtype=np.int64)
        p = np.full(index.size, math.exp(-lam))
        cdf = p.copy()
        live = np.flatnonzero(u > cdf)
        while live.size:
            k[live] += 1
            p[live] *= lam / k[live]
            cdf[live] += p[live]
            live = live[(u[live] > cdf[live]) & (p[live] > 0)]
        return k
    slam, loglam = math.sqrt(lam), math.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    invalpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2.0)
    live = np.arange(index.size)
    while live.size:
        u = source.uniforms(index[live]) - 0.5
        v = source.uniforms(index[live])
        us = 0.5 - np.abs(u)
        k = np.floor((2.0 * a / us + b) * u + lam + 0.43)
        quick = (us >= 0.07) & (v <= vr)
        out_ok = (k < 0) | ((us < 0.013) & (v > us))
        with np.errstate(divide="ignore", invalid="ignore"):
            lhs = np.log(v) + math.log(invalpha) - np.log(a / (us * us) + b)
            rhs = -lam + k * loglam - gammaln(k + 1.0)
        ok = quick | (~out_ok & (lhs <= rhs))
        out[live[ok]] = k[ok].astype(np.int64)
        live = live[~ok]
    return out
