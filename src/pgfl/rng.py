"""Random numbers from one root seed: named generator streams and keyed counter-based draws.

Every random draw in pgfl comes from the root seed of a run, never from global state.
Two kinds of source derive from it:

* :func:`stream` — a :class:`numpy.random.Generator` per purpose (data, topology, client
  schedule, ...), from the root seed and the purpose's *name* (and optional integer
  keys), so adding a new stream never shifts the bits of an existing one;
* :class:`KeyedDraws` — the per-round draws of the GFL engine (client sampling,
  mini-batches, dropout, client and server noise). Each number is a pure function of
  ``(seed, stream, round, repetition, unit, index)``, computed by a counter-based
  generator, so what a unit draws in round ``i`` does not depend on how units or
  repetitions are grouped into blocks, processes or machines.

The counter-based generator is SplitMix64 (Steele, Lea & Flood, "Fast splittable
pseudorandom number generators", OOPSLA 2014) used as a keyed hash: the key of a
``(stream, round, repetition, unit)`` cell is a chain of SplitMix64 finalizers over the
coordinates, and the ``n``-th number of the cell is the finalizer of
``key + (n + 1)·γ`` — exactly the ``n``-th output of a SplitMix64 sequence seeded with
the cell's key, a generator that passes BigCrush. Uniforms take the top 53 bits and lie
in the open interval ``(0, 1)``; Laplace and Gaussian draws are their inverse CDFs.
These are simulation numbers: secrets (secure-aggregation keys, mask seeds, Shamir
coefficients) never come from here but from the operating system (``os.urandom``), with
every cryptographic primitive from the ``cryptography`` package.

>>> a = stream(7, "noise").standard_normal(3)
>>> b = stream(7, "noise").standard_normal(3)
>>> bool((a == b).all()), bool((a != stream(8, "noise").standard_normal(3)).all())
(True, True)
>>> whole = KeyedDraws(7, 1, reps=[0, 1], units=[0, 1, 2]).uniform("batches", (4,))
>>> block = KeyedDraws(7, 1, reps=[1], units=[2]).uniform("batches", (4,))
>>> bool(np.array_equal(whole[1:, 2:], block))   # same numbers whatever the grouping
True
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy.special import ndtri

from pgfl.validation import ConfigError

#: SplitMix64's increment (the odd integer closest to 2^64 / golden ratio) and multipliers.
GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = (np.uint64(s) for s in (30, 27, 31, 11))


def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer; got {seed!r}")
    return int(seed)


def stream(seed: int, name: str, *keys: int) -> np.random.Generator:
    """Generator for stream ``name`` (and integer sub-``keys``) under root ``seed``.

    The stream is ``PCG64(SeedSequence(seed, spawn_key=(crc32(name), *keys)))``:
    independent of every other name and key, stable across runs and machines.
    """
    key = (zlib.crc32(name.encode("utf-8")), *(int(k) for k in keys))
    seq = np.random.SeedSequence(_check_seed(seed), spawn_key=key)
    return np.random.Generator(np.random.PCG64(seq))


@lru_cache(maxsize=1024)
def stream_key(seed: int, name: str) -> np.uint64:
    """The 64-bit key of keyed stream ``name`` under root ``seed`` (from ``SeedSequence``)."""
    seq = np.random.SeedSequence(_check_seed(seed), spawn_key=(zlib.crc32(name.encode("utf-8")),))
    return seq.generate_state(1, np.uint64)[0]


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output finalizer, a bijection of 64-bit words (in place if writeable).

    >>> int(mix64(np.array([0], dtype=np.uint64))[0])   # finalizer of 0 is 0
    0
    """
    z = np.asarray(z, dtype=np.uint64)
    if not z.flags.writeable or z.ndim == 0:
        z = z.copy()
    z ^= z >> _S30
    z *= _M1
    z ^= z >> _S27
    z *= _M2
    z ^= z >> _S31
    return z


def cell_keys(key: np.ndarray | np.uint64, *coords: np.ndarray) -> np.ndarray:
    """Keys of the cells ``coords`` (broadcast integer arrays) under a key.

    ``k_0 = key``, ``k_{j+1} = mix64(k_j + (c_j + 1)·γ)``: a chain of finalizers, so
    distinct coordinate tuples give unrelated keys. (Arithmetic on uint64 arrays is
    modulo 2^64, as intended; arrays, unlike numpy scalars, do not warn on wrap-around.)
    """
    h = np.atleast_1d(np.asarray(key, dtype=np.uint64))
    for c in coords:
        h = mix64(h + (np.atleast_1d(np.asarray(c, dtype=np.uint64)) + np.uint64(1)) * GAMMA)
    return h


def _mix_int(z: int) -> int:
    """:func:`mix64` of one Python integer (exact modulo 2^64)."""
    mask = (1 << 64) - 1
    z &= mask
    z = ((z ^ (z >> 30)) * int(_M1)) & mask
    z = ((z ^ (z >> 27)) * int(_M2)) & mask
    return z ^ (z >> 31)


@lru_cache(maxsize=256)
def _counter_offsets(shape: tuple[int, ...]) -> np.ndarray:
    """``(n + 1)·γ`` for the linear index ``n`` of every entry of ``shape`` (cached)."""
    with np.errstate(over="ignore"):
        out = (np.arange(1, int(np.prod(shape)) + 1, dtype=np.uint64) * GAMMA).reshape(shape)
    out.flags.writeable = False
    return out


def uniforms_from_keys(keys: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Uniforms in ``(0, 1)`` of shape ``keys.shape + shape``: entry ``n`` of each cell.

    The ``n``-th number of a cell (``n`` the linear index within ``shape``) is
    ``(⌊mix64(key + (n + 1)·γ) / 2^11⌋ + 1/2) · 2^-53``.
    """
    k = np.asarray(keys, dtype=np.uint64)
    return _unit_interval(k.reshape(k.shape + (1,) * len(shape)) + _counter_offsets(tuple(shape)))


def _unit_interval(z: np.ndarray) -> np.ndarray:
    """``(⌊mix64(z) / 2^11⌋ + 1/2) · 2^-53`` (consumes ``z``)."""
    mix64(z)
    z >>= _S11
    u = z.astype(np.float64)
    u += 0.5
    u *= 2.0**-53
    return u


def unit_noise(u: np.ndarray, distribution: str) -> np.ndarray:
    """Zero-mean, unit-variance noise from uniforms: ``Lap(0, 1/√2)`` or ``N(0, 1)``.

    Inverse CDFs: Laplace ``-sign(u - ½)·log(1 - 2|u - ½|)/√2``, Gaussian ``Φ⁻¹(u)``.
    Scaled by ``σ`` it is the papers' ``Lap(0, σ/√2)`` of variance ``σ²``.

    >>> unit_noise(np.array([0.5, 0.25]), "laplace").round(6).tolist()   # ln(1/2)/√2
    [0.0, -0.490129]
    """
    if distribution == "gaussian":
        return ndtri(u)
    c = u - 0.5
    return np.copysign(-np.log1p(-2.0 * np.abs(c)), c) * (1.0 / np.sqrt(2.0))


class KeyedDraws:
    """The random numbers of one GFL round for a block of repetitions and units.

    Every number is a pure function of ``(seed, stream, round, repetition, unit, index)``,
    so any block of repetitions and units draws exactly the numbers the whole network
    would draw for it. The key of a cell is ``mix64(G_rp ⊕ S)`` where
    ``G_rp = cell_keys(0, repetition, unit)`` (cached per block, the same every round) and
    ``S = mix64(stream_key(seed, stream) + (round + 1)·γ)``; its ``n``-th number follows
    the module docstring.

    Args:
        seed: the run's root seed.
        round: the iteration number ``i`` (1-based).
        reps: global repetition ids of the block, ``[R]``.
        units: global unit ids of the block, ``[P_b]``.

    Results have shape ``[R, P_b, *shape]``.

    """

    def __init__(self, seed: int, round: int, reps: Sequence[int], units: Sequence[int]):
        self.seed = _check_seed(seed)
        self.round = int(round)
        self.reps = np.asarray(reps, dtype=np.int64)
        self.units = np.asarray(units, dtype=np.int64)
        self._cells = _cell_grid(self.reps.tobytes(), self.units.tobytes())
        self._keys: dict[str, np.ndarray] = {}
        self._noise: dict[tuple, np.ndarray] = {}

    def keys(self, stream_name: str) -> np.ndarray:
        """The ``[R, P_b]`` cell keys of a stream in this round (cached)."""
        keys = self._keys.get(stream_name)
        if keys is None:
            s = _mix_int(int(stream_key(self.seed, stream_name)) + (self.round + 1) * int(GAMMA))
            keys = mix64(self._cells ^ np.uint64(s))
            self._keys[stream_name] = keys
        return keys

    def uniform(self, stream_name: str, shape: tuple[int, ...]) -> np.ndarray:
        """Uniforms in ``(0, 1)``, ``[R, P_b, *shape]``."""
        return uniforms_from_keys(self.keys(stream_name), tuple(shape))

    def noise(self, stream_name: str, distribution: str, shape: tuple[int, ...]) -> np.ndarray:
        """Unit-variance ``distribution`` noise ``[R, P_b, *shape]`` (stream per distribution).

        Read-only and cached for the round: schemes that share a stream (random and
        graph-homomorphic server noise) compute it once.
        """
        key = (stream_name, distribution, tuple(shape))
        out = self._noise.get(key)
        if out is None:
            out = unit_noise(self.uniform(f"{stream_name}.{distribution}", shape), distribution)
            out.flags.writeable = False
            self._noise[key] = out
        return out

    def uniform_at(self, stream_name: str, rows: np.ndarray, counters: np.ndarray) -> np.ndarray:
        """Uniforms ``[R, n, ...]``: entry ``counters[j, ...]`` of the cell of unit ``rows[j]``.

        ``rows`` are block-local unit indices ``[n]``; ``counters`` non-negative integers
        ``[n, ...]`` (the linear index ``n`` of :meth:`uniform` generalised), so that sparse
        subsets of a cell (e.g. one sender's links) are drawn without the rest.
        """
        keys = self.keys(stream_name)[:, rows]
        c = np.atleast_1d(np.asarray(counters, dtype=np.uint64))
        offsets = (c + np.uint64(1)) * GAMMA
        return _unit_interval(keys.reshape(keys.shape + (1,) * (c.ndim - 1)) + offsets)

    def noise_at(
        self, stream_name: str, distribution: str, rows: np.ndarray, counters: np.ndarray
    ) -> np.ndarray:
        """Unit-variance noise at sparse counters (see :meth:`uniform_at`)."""
        u = self.uniform_at(f"{stream_name}.{distribution}", rows, counters)
        return unit_noise(u, distribution)

    def cells(self, units: Sequence[int]) -> KeyedDraws:
        """The draws of other cells (e.g. a trusted party's) in this round and repetitions.

        Mechanisms whose noise belongs to a party other than the block's units (a trusted
        aggregator, a dealer) draw through this, so that a deployment can hand them that
        party's own generator instead (:mod:`pgfl.deploy.draws`).

        >>> d, other = KeyedDraws(3, 2, [0], [5]), KeyedDraws(3, 2, [0], [9])
        >>> bool((d.cells([9]).uniform("x", (2,)) == other.uniform("x", (2,))).all())
        True
        """
        return KeyedDraws(self.seed, self.round, self.reps, units)

    def edge_noise(
        self, stream_name: str, distribution: str, lo: np.ndarray, hi: np.ndarray, dim: int
    ) -> np.ndarray:
        """Noise ``[R, e, dim]`` shared by the two ends of each edge ``lo[j] < hi[j]``.

        Entry ``(r, j, m)`` is entry ``hi[j]·dim + m`` of the cell of unit ``lo[j]``: both
        ends, in any block, draw the same numbers. A deployment draws them from a secret
        the two ends agree on instead (:class:`pgfl.deploy.draws.SecretDraws`).
        """
        cells, row = np.unique(lo, return_inverse=True)
        counters = np.asarray(hi)[:, None] * dim + np.arange(dim)
        return self.cells(cells).noise_at(stream_name, distribution, row, counters)


@lru_cache(maxsize=64)
def _cell_grid(reps: bytes, units: bytes) -> np.ndarray:
    """``G_rp = cell_keys(0, r, p)`` for a block's repetitions and units (cached, read-only)."""
    r = np.frombuffer(reps, dtype=np.int64)
    p = np.frombuffer(units, dtype=np.int64)
    grid = cell_keys(np.uint64(0), r[:, None], p[None, :]).reshape(r.size, p.size)
    grid.flags.writeable = False
    return grid
