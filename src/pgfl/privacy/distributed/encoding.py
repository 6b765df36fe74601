"""Client vectors to integers mod 2^b and back: distributed DP's encoding pipeline.

Kairouz, Liu & Steinke, "The Distributed Discrete Gaussian Mechanism for Federated
Learning with Secure Aggregation" (ICML 2021, arXiv:2102.06387), Algorithms 1-2, as the
Skellam mechanism (Agarwal, Kairouz & Liu, NeurIPS 2021, arXiv:2110.04995) also uses it.
A client's real vector ``x ∈ R^M``:

1. **clip** to ``‖x‖₂ ≤ c`` (:func:`clip_l2`);
2. **scale** by ``1/γ`` (γ: real units per grid step, :func:`choose_scale`) and pad with
   zeros to ``d = 2^⌈log₂ M⌉``;
3. **flatten** with the randomized Hadamard rotation ``x ↦ H D x/√d`` (:func:`rotate`;
   ``D`` diagonal ±1 signs, public randomness shared by a unit's clients and server in a
   round), which spreads the norm evenly over the coordinates so that few of them reach
   the modulus;
4. **round** to integers, randomized and unbiased, ``x̃ = ⌊x + U⌋``, ``U`` uniform in
   ``[0, 1)^d``; *conditional* on ``‖x̃‖₂ ≤ Δ̃`` when β > 0 (redrawn otherwise;
   :func:`rounded_norm_bound`, KLS Proposition 22);
5. (the mechanism adds its integer noise share;)
6. reduce **mod 2^b**: secure aggregation sums the codes modulo ``2^b`` (*modular
   clipping*: a sum outside ``[−2^(b−1), 2^(b−1))`` wraps around; :func:`choose_scale`
   sizes γ so that it rarely does).

The server centres the sum, rotates back, multiplies by γ (:func:`decode`).

>>> x = np.array([[0.3, -0.4]])
>>> signs = np.array([1.0, -1.0])
>>> bool(np.allclose(unrotate(rotate(x, signs), signs), x))
True
"""

from __future__ import annotations

import math

import numpy as np

from pgfl.validation import ConfigError

__all__ = [
    "choose_scale",
    "clip_l2",
    "decode",
    "hadamard",
    "padded_dim",
    "randomized_round",
    "rotate",
    "rounded_norm_bound",
    "to_residues",
    "unrotate",
]


def padded_dim(dim: int) -> int:
    """``d = 2^⌈log₂ M⌉``, the length the Hadamard rotation needs.

    >>> padded_dim(1), padded_dim(2), padded_dim(5)
    (1, 2, 8)
    """
    return 1 << max(0, int(dim) - 1).bit_length()


def hadamard(x: np.ndarray) -> np.ndarray:
    """The unnormalized Walsh–Hadamard transform ``H x`` along the last axis (length 2^k).

    ``H`` is symmetric with ``H H = d I``; the fast transform takes ``log₂ d`` passes.

    >>> hadamard(np.array([1.0, 0.0, 0.0, 0.0])).tolist(), hadamard(np.array([1.0, 1.0])).tolist()
    ([1.0, 1.0, 1.0, 1.0], [2.0, 0.0])
    """
    y = np.array(x, dtype=np.float64)
    d = y.shape[-1]
    if d & (d - 1):
        raise ConfigError(f"the Hadamard transform needs a power-of-two length; got {d}")
    h = 1
    while h < d:
        y = y.reshape(*y.shape[:-1], d // (2 * h), 2, h)
        a, b = y[..., 0, :], y[..., 1, :]
        y = np.stack([a + b, a - b], axis=-2).reshape(*y.shape[:-3], d)
        h *= 2
    return y


def rotate(x: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """``H D x/√d``: pad ``x [..., M]`` to ``d`` with zeros, flip signs, transform.

    ``signs [..., d]`` (±1) broadcasts against ``x``'s leading axes. An isometry: norms
    (and the sensitivity) are kept.
    """
    d = signs.shape[-1]
    pad = np.zeros((*x.shape[:-1], d))
    pad[..., : x.shape[-1]] = x
    return hadamard(pad * signs) / math.sqrt(d)


def unrotate(y: np.ndarray, signs: np.ndarray, dim: int | None = None) -> np.ndarray:
    """``D H y/√d``, the inverse of :func:`rotate`, cut to the first ``dim`` coordinates."""
    d = signs.shape[-1]
    x = signs * hadamard(y) / math.sqrt(d)
    return x if dim is None else x[..., :dim]


def clip_l2(x: np.ndarray, clip: float) -> tuple[np.ndarray, np.ndarray]:
    """``x · min(1, c/‖x‖₂)`` along the last axis, and which vectors were clipped.

    >>> y, hit = clip_l2(np.array([[3.0, 4.0], [0.3, 0.4]]), 1.0)
    >>> y.round(6).tolist(), hit.tolist()
    ([[0.6, 0.8], [0.3, 0.4]], [True, False])
    """
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    factor = np.minimum(1.0, clip / np.maximum(norm, 1e-300))
    return x * factor, (norm[..., 0] > clip)


def rounded_norm_bound(clip: float, dim: int, beta: float) -> float:
    """Δ̃: a bound on ``‖x̃‖₂`` of the rounded vector of any ``‖x‖₂ ≤ clip`` (grid units).

    Unconditional rounding (β = 0): ``clip + √d`` (each coordinate moves by less than 1).
    Conditional rounding, β ∈ (0, 1) (KLS Proposition 22): ``min(clip + √d,
    √(clip² + d/4 + √(2 ln(1/β))·(clip + √d/2)))``, which ``⌊x + U⌋`` exceeds with
    probability at most β (Hoeffding on ``‖x̃‖² − ‖x‖² = Σ_j (2x_j e_j + e_j²)``, e_j the
    rounding error, mean ≤ d/4, ranges ``|2x_j + 1 − 2f_j| ≤ 2|x_j| + 1``).

    >>> rounded_norm_bound(10.0, 4, 0.0)
    12.0
    >>> round(rounded_norm_bound(10.0, 4, math.exp(-0.5)), 4)   # √(100 + 1 + 11)
    10.583
    """
    plain = clip + math.sqrt(dim)
    if beta == 0:
        return plain
    tail = math.sqrt(2.0 * math.log(1.0 / beta)) * (clip + 0.5 * math.sqrt(dim))
    return min(plain, math.sqrt(clip * clip + dim / 4.0 + tail))


def randomized_round(
    x: np.ndarray, source, index: np.ndarray, bound: float | None = None, *, tries: int = 10_000
) -> np.ndarray:
    """``⌊x + U⌋`` per coordinate (unbiased), redrawn until ``‖x̃‖₂ ≤ bound`` when given.

    Args:
        x: ``[n, d]`` real vectors (grid units).
        source: a word source (:mod:`~pgfl.privacy.distributed.samplers`); coordinate ``j``
            of vector ``i`` draws from element ``index[i]·d + j``.
        index: ``[n]`` flat ids of the vectors.
        bound: Δ̃ of conditional rounding (``None``: unconditional).
        tries: redraws allowed before giving up (each fails w.p. ≤ β).

    Returns:
        ``int64 [n, d]``.

    """
    n, d = x.shape
    base = np.floor(x)
    frac = x - base
    elem = np.asarray(index, dtype=np.int64)[:, None] * d + np.arange(d)
    out = np.empty((n, d), dtype=np.int64)
    live = np.arange(n)
    for _ in range(tries):
        u = source.uniforms(elem[live].ravel()).reshape(live.size, d)
        r = (base[live] + (u < frac[live])).astype(np.int64)
        ok = np.ones(live.size, dtype=bool) if bound is None else (r * r).sum(-1) <= bound**2
        out[live[ok]] = r[ok]
        live = live[~ok]
        if not live.size:
            return out
    raise ConfigError(f"conditional rounding: no draw within the norm bound in {tries} tries")


def choose_scale(
    bits: int, clip: float, clients: int, dim: int, share_std: float, k: float
) -> float:
    """γ (real units per grid step) so that a unit's sum rarely leaves ``[−2^(b−1), 2^(b−1))``.

    A coordinate of the rotated sum of n ≤ ``clients`` vectors of norm ≤ c is sub-Gaussian
    with variance proxy ``(nc)²/d`` (random signs; KLS §4.2) and never exceeds ``nc``; the
    noise is n shares of std σ_k and the rounding adds variance ≤ γ²/4 per client. The
    half-range ``2^(b−1)·γ`` must hold k standard deviations:
    ``min(k·√((nc)²/d + n(σ_k² + γ²/4)),  nc + k·√(n(σ_k² + γ²/4)))`` (the first is KLS
    eq. 61's choice, the second uses the exact bound). Solved by fixed-point iteration
    (the γ²/4 term is small).

    >>> round(choose_scale(16, 1.0, 10, 2, 0.0, 4.0) * 2**15, 2)   # nc = 10 < 4·10/√2
    10.0
    """
    n = float(clients)
    half = 2.0 ** (bits - 1)
    gamma = 0.0
    for _ in range(50):
        spread = n * (share_std**2 + gamma**2 / 4.0)
        reach = min(k * math.sqrt((n * clip) ** 2 / dim + spread), n * clip + k * math.sqrt(spread))
        new = reach / half
        if new == gamma:
            break
        gamma = new
    if not gamma > 0:
        raise ConfigError(f"cannot choose a grid for clip={clip}, noise std={share_std}")
    return gamma


def to_residues(codes: np.ndarray, bits: int) -> np.ndarray:
    """Integers mod 2^b as unsigned codes (``uint32`` for b ≤ 32, else ``uint64``)."""
    dtype = np.uint32 if bits <= 32 else np.uint64
    return (codes.astype(np.int64).astype(np.uint64) & np.uint64((1 << bits) - 1)).astype(dtype)


def decode(total: np.ndarray, signs: np.ndarray, scale: float, bits: int, dim: int) -> np.ndarray:
    """The real sum from a sum of codes mod 2^b, ``[..., d] → [..., dim]``.

    Centre to ``[−2^(b−1), 2^(b−1))``, rotate back (:func:`unrotate`), times γ.

    >>> decode(to_residues(np.array([[-3]]), 8), np.array([1.0]), 0.5, 8, 1).tolist()  # 253 ↦ −3
    [[-1.5]]
    """
    r = np.asarray(total).astype(np.int64) & ((1 << bits) - 1)
    centred = np.where(r >= 1 << (bits - 1), r - (1 << bits), r)
    return unrotate(centred.astype(np.float64), signs, dim) * scale
