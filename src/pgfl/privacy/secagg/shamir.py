"""Shamir t-out-of-n secret sharing over a prime field, vectorized over many secrets.

A secret s ∈ GF(p) is shared by drawing a random polynomial
``f(x) = s + c_1 x + ... + c_{t-1} x^{t-1}`` with coefficients uniform in GF(p)
(from the operating system's secure randomness) and giving holder j the share
``(x_j, f(x_j))`` for distinct non-zero points ``x_j``. Any t shares determine f and
hence ``s = f(0) = Σ_j λ_j f(x_j)`` with the Lagrange coefficients at zero
``λ_j = Π_{m≠j} x_m / (x_m − x_j)``; any t − 1 shares are jointly uniform and
independent of s (perfect secrecy; Shamir 1979). Secure aggregation (Bonawitz et al.
2017, §4) shares each client's self-mask seed ``b_u`` and its mask secret key
``s_u^SK`` this way.

**Field.** ``p = 2^21 − 9`` (:data:`FIELD_PRIME`). A 32-byte secret is cut into
:data:`CHUNK_BITS`-bit chunks (20 bits, so 13 chunks) and each chunk is shared with its
own independent polynomial on the same points. Secrecy is information-theoretic for
*any* field with more elements than holders, so a small field loses nothing; it buys
exact vectorized arithmetic: a product of two field elements is < 2^42, and a sum of up
to 2^21 such products still fits in ``int64``, so share evaluation is one integer matrix
product per batch of secrets instead of a Python big-integer loop. The number of holders
is limited to ``p − 1`` (about two million).

>>> s = b"0123456789abcdef0123456789abcdef"
>>> shares = share_bytes(s, n=5, t=3)
>>> reconstruct_bytes(shares[1:4], nbytes=32, t=3) == s
True
>>> reconstruct_bytes([shares[0], shares[4], shares[2]], nbytes=32, t=3) == s
True
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pgfl.validation import ConfigError, check_int

#: The prime modulus of the share field, 2^21 − 9.
FIELD_PRIME: int = 2_097_143
#: Bits of secret carried by one field element (2^20 < p).
CHUNK_BITS: int = 20

RandBytes = Callable[[int], bytes]


def chunks_for(nbytes: int) -> int:
    """Return the number of field elements that carry an ``nbytes``-byte secret.

    >>> chunks_for(32)
    13
    """
    return -(-8 * nbytes // CHUNK_BITS)


def bytes_to_field(secrets: Sequence[bytes] | bytes) -> np.ndarray:
    r"""Cut byte strings of equal length into 20-bit field elements, little-endian.

    Args:
        secrets: one byte string or a sequence of ``S`` byte strings of equal length.

    Returns:
        ``int64`` array ``[C]`` (one secret) or ``[S, C]`` with ``C = chunks_for(len)``.

    >>> bytes_to_field(b"\x01\x00\x10").tolist()
    [1, 1]

    """
    single = isinstance(secrets, (bytes, bytearray))
    items = [bytes(secrets)] if single else [bytes(s) for s in secrets]
    if not items:
        raise ConfigError("secrets must contain at least one byte string; got none")
    nbytes = len(items[0])
    if nbytes == 0 or any(len(s) != nbytes for s in items):
        raise ConfigError("secrets must be non-empty byte strings of equal length")
    nchunks = chunks_for(nbytes)
    mask = (1 << CHUNK_BITS) - 1
    out = np.empty((len(items), nchunks), dtype=np.int64)
    for i, s in enumerate(items):
        v = int.from_bytes(s, "little")
        out[i] = [(v >> (CHUNK_BITS * c)) & mask for c in range(nchunks)]
    return out[0] if single else out


def field_to_bytes(chunks: np.ndarray, nbytes: int) -> list[bytes]:
    """Inverse of :func:`bytes_to_field` for ``chunks[S, C]`` (or ``[C]``); returns S strings.

    Raises :class:`ConfigError` when a chunk is not a valid 20-bit value or the value does
    not fit in ``nbytes`` (which happens when the chunks did not come from a secret, e.g.
    after interpolating too few shares).

    >>> field_to_bytes(bytes_to_field(b"abc"), 3)
    [b'abc']
    """
    arr = np.atleast_2d(np.asarray(chunks, dtype=np.int64))
    if arr.shape[-1] != chunks_for(nbytes):
        raise ConfigError(
            f"chunks must have {chunks_for(nbytes)} field elements per secret for "
            f"nbytes={nbytes}; got {arr.shape[-1]}"
        )
    if (arr < 0).any() or (arr >= 1 << CHUNK_BITS).any():
        raise ConfigError("chunks hold a value outside [0, 2^20): not an encoded secret")
    out = []
    for row in arr:
        v = 0
        for c, val in enumerate(row.tolist()):
            v |= int(val) << (CHUNK_BITS * c)
        if v >> (8 * nbytes):
            raise ConfigError(f"chunks encode a value that does not fit in {nbytes} bytes")
        out.append(v.to_bytes(nbytes, "little"))
    return out


def uniform_field(shape: tuple[int, ...], randbytes: RandBytes = os.urandom) -> np.ndarray:
    """Elements uniform in GF(p) from secure random bytes, by rejection sampling.

    21-bit candidates (the low 21 bits of 32-bit words) are accepted when below p;
    the acceptance rate is p / 2^21 ≈ 1 − 4.3e-6, so one extra word per call is almost
    always enough. The result is exactly uniform.
    """
    n = int(np.prod(shape, dtype=np.int64))
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        draw = need + 8 + need // 1024
        cand = np.frombuffer(randbytes(4 * draw), dtype="<u4").astype(np.int64) & ((1 << 21) - 1)
        cand = cand[cand < FIELD_PRIME][:need]
        out[filled : filled + cand.size] = cand
        filled += cand.size
    return out.reshape(shape)


def _check_points(x: np.ndarray, name: str = "x") -> None:
    if x.size and (x.min() < 1 or x.max() >= FIELD_PRIME):
        raise ConfigError(
            f"{name} (evaluation points) must lie in [1, p-1={FIELD_PRIME - 1}]; "
            f"got values in [{x.min()}, {x.max()}]"
        )
    srt = np.sort(x, axis=-1)
    if x.shape[-1] > 1 and (np.diff(srt, axis=-1) == 0).any():
        raise ConfigError(f"{name} (evaluation points) must be distinct for each secret")


def share_field(
    secrets: np.ndarray,
    x: np.ndarray,
    t: int,
    *,
    randbytes: RandBytes = os.urandom,
) -> np.ndarray:
    """Share ``S`` secrets (each ``C`` field elements) among holders at points ``x``.

    For secret i and chunk c, draws ``f_{ic}(z) = secrets[i, c] + Σ_{d=1}^{t-1} a_{icd} z^d``
    with ``a`` uniform in GF(p), and returns ``shares[i, j, c] = f_{ic}(x[i, j]) mod p``.

    Args:
        secrets: ``int64 [S, C]`` field elements in ``[0, p)``.
        x: evaluation points, ``[h]`` (the same holders for every secret) or ``[S, h]``;
            distinct per secret, in ``[1, p−1]``.
        t: threshold, ``1 ≤ t ≤ h``.
        randbytes: source of secure random bytes (``os.urandom``; tests may pass a
            deterministic source to reproduce a transcript).

    Returns:
        ``int64 [S, h, C]`` share values (the holder's point is ``x[..., j]``).

    >>> sec = np.array([[7, 11]])
    >>> sh = share_field(sec, np.arange(1, 4), t=1)   # t = 1: every share is the secret
    >>> sh[0].tolist()
    [[7, 11], [7, 11], [7, 11]]

    """
    secrets = np.asarray(secrets, dtype=np.int64)
    if secrets.ndim != 2:
        raise ConfigError(f"secrets must be a 2-D array [S, C]; got shape {secrets.shape}")
    if (secrets < 0).any() or (secrets >= FIELD_PRIME).any():
        raise ConfigError(f"secrets must be field elements in [0, p={FIELD_PRIME})")
    x = np.asarray(x, dtype=np.int64)
    if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[0] != secrets.shape[0]):
        raise ConfigError(
            f"x must have shape [h] or [S={secrets.shape[0]}, h]; got shape {x.shape}"
        )
    h = x.shape[-1]
    t = check_int("t (threshold)", t, lo=1, hi=h, hi_name="n")
    _check_points(x)
    S, C = secrets.shape
    # coefficients [S, t, C]: degree 0 is the secret
    coeffs = np.empty((S, t, C), dtype=np.int64)
    coeffs[:, 0] = secrets
    if t > 1:
        coeffs[:, 1:] = uniform_field((S, t - 1, C), randbytes)
    # Vandermonde powers x^d mod p, [.., h, t]; every entry < p < 2^21
    powers = np.empty((*x.shape, t), dtype=np.int64)
    powers[..., 0] = 1
    for d in range(1, t):
        powers[..., d] = powers[..., d - 1] * x % FIELD_PRIME
    # Σ_d powers·coeffs: each product < 2^42, at most t < 2^21 terms: exact in int64.
    if x.ndim == 1:
        shares = (powers @ coeffs.transpose(1, 0, 2).reshape(t, S * C)) % FIELD_PRIME
        return shares.reshape(h, S, C).transpose(1, 0, 2).copy()
    return np.matmul(powers, coeffs) % FIELD_PRIME


def _inv_mod(a: np.ndarray) -> np.ndarray:
    """Element-wise inverse in GF(p) by Fermat, a^(p−2), square-and-multiply in int64."""
    result = np.ones_like(a)
    base = a % FIELD_PRIME
    e = FIELD_PRIME - 2
    while e:
        if e & 1:
            result = result * base % FIELD_PRIME
        base = base * base % FIELD_PRIME
        e >>= 1
    return result


def lagrange_at_zero(x: np.ndarray) -> np.ndarray:
    """Lagrange coefficients ``λ_j = Π_{m≠j} x_m / (x_m − x_j) mod p`` for points ``x[..., r]``.

    ``Σ_j λ_j f(x_j) = f(0)`` for every polynomial f of degree < r.

    >>> lagrange_at_zero(np.array([1, 2])).tolist()  # f(0) = 2 f(1) − f(2)
    [2, 2097142]
    """
    x = np.asarray(x, dtype=np.int64)
    _check_points(x)
    r = x.shape[-1]
    num = np.ones_like(x)
    den = np.ones_like(x)
    for m in range(r):
        xm = x[..., m : m + 1]
        diff = (xm - x) % FIELD_PRIME
        own = np.zeros(r, dtype=bool)
        own[m] = True
        num = np.where(own, num, num * xm % FIELD_PRIME)
        den = np.where(own, den, den * diff % FIELD_PRIME)
    return num * _inv_mod(den) % FIELD_PRIME


def reconstruct_field(x: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Interpolate ``f(0)`` per secret and chunk from ``r`` shares each.

    Args:
        x: ``int64 [R, r]`` distinct points of the shares used for each of R secrets.
        shares: ``int64 [R, r, C]`` share values.

    Returns:
        ``int64 [R, C]``: the secrets, if every row has at least t shares of a degree
        t − 1 sharing; otherwise a value independent of the secret.

    """
    x = np.asarray(x, dtype=np.int64)
    shares = np.asarray(shares, dtype=np.int64)
    if x.ndim != 2 or shares.ndim != 3 or shares.shape[:2] != x.shape:
        raise ConfigError(
            f"shares must have shape [R, r, C] matching x [R, r]; got {shares.shape} and {x.shape}"
        )
    lam = lagrange_at_zero(x)
    # products < 2^42, r < 2^21 terms: exact in int64
    return np.einsum("rj,rjc->rc", lam, shares) % FIELD_PRIME


@dataclass(frozen=True)
class Share:
    """One holder's share of a byte secret: point ``x`` and values ``y[C]`` in GF(p)."""

    x: int
    y: np.ndarray


def share_bytes(secret: bytes, *, n: int, t: int, randbytes: RandBytes = os.urandom) -> list[Share]:
    """Split ``secret`` into ``n`` shares at points 1..n, any ``t`` of which recover it."""
    n = check_int("n (number of shares)", n, lo=1, hi=FIELD_PRIME - 1)
    t = check_int("t (threshold)", t, lo=1, hi=n, hi_name="n")
    sec = bytes_to_field(secret)[None, :]
    ys = share_field(sec, np.arange(1, n + 1), t, randbytes=randbytes)[0]
    return [Share(j + 1, ys[j]) for j in range(n)]


def reconstruct_bytes(shares: Sequence[Share], *, nbytes: int, t: int) -> bytes:
    """Recover an ``nbytes`` secret from at least ``t`` shares of :func:`share_bytes`.

    Raises :class:`ConfigError` for fewer than t shares or repeated points.
    """
    t = check_int("t (threshold)", t, lo=1)
    if len(shares) < t:
        raise ConfigError(f"need at least t={t} shares to reconstruct; got {len(shares)}")
    x = np.array([[s.x for s in shares]], dtype=np.int64)
    y = np.stack([np.asarray(s.y, dtype=np.int64) for s in shares])[None]
    return field_to_bytes(reconstruct_field(x, y), nbytes)[0]
