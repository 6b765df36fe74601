"""Deterministic feature hashing (the hashing trick) into ``M`` dimensions.

A categorical value ``v`` of field ``f`` becomes the token ``"f=v"``; the token is
hashed with BLAKE2b (RFC 7693, through :mod:`hashlib`, 8-byte digest, optional key) to
a 64-bit integer ``h``. Its column is ``h mod M`` and, for *signed* hashing
(Weinberger et al., 2009, "Feature hashing for large scale multitask learning"), its
value is ``+1`` if the top bit of ``h`` is 0 and ``-1`` otherwise; unsigned hashing
always writes ``+1``. Collisions inside one row add up.

Why signed by default: two tokens that collide in a column then cancel or add with
equal probability, so inner products between hashed rows are unbiased estimates of the
inner products of the one-hot rows, and a linear model can still tell two colliding
tokens apart when their signs differ.

The hash is fixed: it never depends on the process (unlike Python's salted
:func:`hash`), the machine or the library version, so a model trained on hashed
features today applies to data hashed tomorrow.

>>> int(hash_tokens(["site_id=1fbe01fe"])[0]) == int.from_bytes(
...     hashlib.blake2b(b"site_id=1fbe01fe", digest_size=8).digest(), "little")
True
>>> idx, sign = hashed_indices(["a=1", "a=1", "b=2"], 8)
>>> bool(idx[0] == idx[1]) and bool(sign[0] == sign[1])
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from pgfl.validation import ConfigError, check_int

__all__ = [
    "hash_tokens",
    "hashed_indices",
    "hash_fields",
    "hashed_to_dense",
    "hashed_to_csr",
]

_TOP_BIT = np.uint64(63)


def _check_key(key: bytes) -> bytes:
    if not isinstance(key, (bytes, bytearray)) or len(key) > 64:
        raise ConfigError(f"hash key must be bytes of length in [0, 64]; got {key!r}")
    return bytes(key)


def hash_tokens(tokens: Iterable[str], *, key: bytes = b"") -> np.ndarray:
    """64-bit BLAKE2b hashes of string tokens.

    ``h(t) = int.from_bytes(blake2b(utf8(t), digest_size=8, key=key), "little")``.

    Args:
        tokens: strings (any iterable; numpy/pandas string arrays work).
        key: optional BLAKE2b key (at most 64 bytes); a different key gives an
            independent hash family. Empty (the default) means unkeyed.

    Returns:
        ``uint64`` array, one hash per token, in input order.

    >>> hash_tokens(["x", "x", "y"]).dtype
    dtype('uint64')

    """
    key = _check_key(key)
    digests = b"".join(
        hashlib.blake2b(str(t).encode("utf-8"), digest_size=8, key=key).digest() for t in tokens
    )
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64, copy=True)


def _index_sign(h: np.ndarray, dim: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    idx = (h % np.uint64(dim)).astype(np.int64)
    if signed:
        sign = 1.0 - 2.0 * (h >> _TOP_BIT).astype(np.float64)
    else:
        sign = np.ones(h.shape, dtype=np.float64)
    return idx, sign


def hashed_indices(
    tokens: Iterable[str], dim: int, *, signed: bool = True, key: bytes = b""
) -> tuple[np.ndarray, np.ndarray]:
    """Column and value of each token under the hashing trick into ``dim`` columns.

    Column ``h(t) mod dim``; value ``(-1)^{bit63(h(t))}`` if ``signed`` else ``+1``.

    Returns:
        ``(idx, sign)``: ``int64`` columns in ``[0, dim)`` and ``float64`` values in
        ``{-1, +1}``, each of the length of ``tokens``.

    >>> idx, sign = hashed_indices(["a", "b", "c"], 4, signed=False)
    >>> bool(((idx >= 0) & (idx < 4)).all()), sign.tolist()
    (True, [1.0, 1.0, 1.0])

    """
    dim = check_int("hash_dim", dim, lo=1)
    return _index_sign(hash_tokens(tokens, key=key), dim, signed)


def hash_fields(
    columns: Mapping[str, Sequence[object] | np.ndarray | pd.Series],
    dim: int,
    *,
    signed: bool = True,
    key: bytes = b"",
) -> tuple[np.ndarray, np.ndarray]:
    """Hash ``F`` categorical fields of ``n`` rows into ``(idx[n, F], sign[n, F])``.

    Row ``i``'s token for field ``f`` is ``f"{f}={value}"`` (missing values become
    ``f"{f}=<NA>"``; integral floats print as integers, ``2.0`` → ``"f=2"``). Each
    column is factorized first, so each *distinct* value is hashed once per call: cost
    ``O(n)`` vectorized work plus ``O(#distinct)`` hash calls.

    Args:
        columns: field name → values (all of the same length ``n``).
        dim: number of hashed columns ``M``.
        signed: signed (``±1``) or unsigned (``+1``) hashing, see the module docstring.
        key: optional BLAKE2b key.

    Returns:
        ``idx`` (``int64``, ``[n, F]``) and ``sign`` (``float64``, ``[n, F]``).

    >>> idx, sign = hash_fields({"a": ["x", "y", "x"]}, 16)
    >>> idx.shape, bool(idx[0, 0] == idx[2, 0])
    ((3, 1), True)

    """
    dim = check_int("hash_dim", dim, lo=1)
    names = list(columns)
    n = len(columns[names[0]]) if names else 0
    idx = np.empty((n, len(names)), dtype=np.int64)
    sign = np.empty((n, len(names)), dtype=np.float64)
    for j, name in enumerate(names):
        values = columns[name]
        if len(values) != n:
            raise ConfigError(
                f"every hashed field must have {n} values; field {name!r} has {len(values)}"
            )
        codes, uniques = pd.factorize(pd.Series(values, copy=False), use_na_sentinel=True)
        tokens = [f"{name}={_token_value(u)}" for u in uniques]
        tokens.append(f"{name}=<NA>")  # code -1 (missing) indexes the last entry
        u_idx, u_sign = hashed_indices(tokens, dim, signed=signed, key=key)
        idx[:, j] = u_idx[codes]
        sign[:, j] = u_sign[codes]
    return idx, sign


def _token_value(v: object) -> str:
    """Text of a categorical value; integral floats print as integers (``2.0`` → ``2``).

    A column of integer codes reads as float when it has a missing cell; this keeps its
    tokens the same as in a file without missing cells.
    """
    if isinstance(v, (float, np.floating)) and np.isfinite(v) and float(v).is_integer():
        return str(int(v))
    return str(v)


def hashed_to_dense(idx: np.ndarray, sign: np.ndarray, dim: int) -> np.ndarray:
    """Dense ``[n, dim]`` matrix with ``X[i, idx[i, f]] += sign[i, f]`` (collisions add).

    >>> hashed_to_dense(np.array([[0, 2], [1, 1]]), np.array([[1.0, -1.0], [1.0, 1.0]]), 3)
    array([[ 1.,  0., -1.],
           [ 0.,  2.,  0.]])
    """
    n = idx.shape[0]
    flat = (np.arange(n, dtype=np.int64)[:, None] * dim + idx).ravel()
    return np.bincount(flat, weights=sign.ravel(), minlength=n * dim).reshape(n, dim)


def hashed_to_csr(idx: np.ndarray, sign: np.ndarray, dim: int):  # -> scipy.sparse.csr_matrix
    """Sparse CSR ``[n, dim]`` version of :func:`hashed_to_dense` (duplicates summed)."""
    from scipy import sparse  # lazy: scipy, only for sparse features

    n, F = idx.shape
    indptr = np.arange(0, n * F + 1, F, dtype=np.int64) if F else np.zeros(n + 1, np.int64)
    m = sparse.csr_matrix((sign.ravel(), idx.ravel(), indptr), shape=(n, dim))
    m.sum_duplicates()
    return m
