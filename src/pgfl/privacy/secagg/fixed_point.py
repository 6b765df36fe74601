"""Fixed-point codes modulo 2^k, and the vectorized equivalent of the protocol's output.

A real value is clipped to ``[−clip, clip]`` and encoded as ``q = rint(x · 2^f) mod 2^k``;
sums wrap in unsigned numpy integers, so pairwise masks cancel *exactly*. The decoded mean
over the n clients that survived is ``centred(Σ q) / (n 2^f)``, whose only error against
the mean of the clipped inputs is rounding: ``|decoded − mean| ≤ 2^−(f+1) + 2^−52
|decoded|`` per coordinate. :func:`quantized_mean` computes the protocol's output for any
batch ``[..., L, M]`` without cryptography (Bonawitz et al., CCS 2017; "Privatized Graph
Federated Learning", arXiv:2203.07105, eq. 48).
"""

from __future__ import annotations

import numpy as np

from pgfl.privacy.secagg.config import SecAggAbort, SecAggConfig
from pgfl.privacy.secagg.graph import neighbour_graph, sparse_abort_reason
from pgfl.validation import ConfigError

__all__ = ["completes", "decode_mean", "encode", "quantized_mean", "reduce_mod"]


def encode(values: np.ndarray, config: SecAggConfig) -> np.ndarray:
    """Fixed-point codes ``rint(clip(x) · 2^f) mod 2^k`` as ``config.dtype``.

    >>> encode(np.array([0.25, -0.25, 100.0]), SecAggConfig(modulus_bits=8, frac_bits=2,
    ...        clip=2.0)).tolist()
    [1, 255, 8]
    """
    x = np.asarray(values, dtype=np.float64)
    if not np.isfinite(x).all():
        raise ConfigError("values must be finite real numbers; got NaN or inf")
    q = np.rint(np.clip(x, -config.clip, config.clip) * 2.0**config.frac_bits).astype(np.int64)
    u = q.astype(np.uint64) & np.uint64(2**config.modulus_bits - 1)
    return u.astype(config.dtype)


def reduce_mod(residues: np.ndarray, config: SecAggConfig) -> np.ndarray:
    """``residues mod 2^k`` (a no-op for k = 32, 64: the integer type wraps)."""
    if config.modulus_bits in (32, 64):
        return residues
    return residues & config.dtype(2**config.modulus_bits - 1)


def decode_mean(sum_residues: np.ndarray, n: np.ndarray | int, config: SecAggConfig) -> np.ndarray:
    """Decode a sum of codes mod 2^k into the mean over ``n`` clients.

    The residue is centred to ``[−2^(k−1), 2^(k−1))``, then divided: ``(S / n) · 2^−f``.
    ``n`` broadcasts against the leading axes of ``sum_residues[..., M]``.

    >>> cfg = SecAggConfig(modulus_bits=8, frac_bits=2, clip=2.0)
    >>> decode_mean(np.array([254, 6], dtype=np.uint32), 2, cfg).tolist()
    [-0.25, 0.75]
    """
    k = config.modulus_bits
    r = reduce_mod(np.asarray(sum_residues, dtype=config.dtype), config).astype(np.uint64)
    if k == 64:
        s = r.view(np.int64)
    else:
        s = r.astype(np.int64)
        s = np.where(s >= 2 ** (k - 1), s - 2**k, s)
    n_arr = np.asarray(n, dtype=np.float64)[..., None]
    return (s.astype(np.float64) / n_arr) * 2.0**-config.frac_bits


def completes(
    survivors: np.ndarray,
    config: SecAggConfig,
    *,
    unit: int | np.ndarray | None = None,
    round: int | np.ndarray | None = None,
) -> np.ndarray:
    """Whether each round ``[..., L]`` of survivors completes (else the protocol aborts).

    At least t survivors (t resolved for L = ``survivors.shape[-1]``); with a sparse
    graph, and ``unit`` and ``round`` given (they fix the public neighbour graph), also
    enough share holders around every client and a connected survivors' graph
    (:func:`sparse_abort_reason`; a Python loop over the batch, sparse case only).

    >>> completes(np.array([[True, True, False], [True, False, False]]),
    ...           SecAggConfig(threshold=2)).tolist()
    [True, False]
    """
    surv = np.asarray(survivors, dtype=bool)
    L = surv.shape[-1]
    t = config.threshold_for(L)
    n = surv.sum(axis=-1)
    ok = np.array(n >= t)  # 0-d array for a single round
    if config.is_sparse(L) and unit is not None and round is not None:
        units = np.broadcast_to(np.asarray(unit), n.shape)
        rounds = np.broadcast_to(np.asarray(round), n.shape)
        every = np.ones(L, dtype=bool)
        for idx in np.ndindex(n.shape):
            if ok[idx]:
                holders = neighbour_graph(L, config, unit=int(units[idx]), round=int(rounds[idx]))
                s_ = surv[idx]
                ok[idx] = sparse_abort_reason(holders, every, s_, s_, t) is None
    return ok


def quantized_mean(
    values: np.ndarray,
    survivors: np.ndarray,
    config: SecAggConfig,
    *,
    on_abort: str = "nan",
    unit: int | np.ndarray | None = None,
    round: int | np.ndarray | None = None,
) -> np.ndarray:
    """Vectorized equivalent of the protocol's output, over any batch of units/trials.

    Returns ``decode_mean(Σ_{u: survivors[u]} encode(values[u]) mod 2^k, n_survivors)``,
    bit-for-bit what :meth:`SecureAggregation.aggregate` returns for the same inputs
    and dropout pattern (masks cancel exactly). Entries with fewer than t survivors
    (t resolved for L = ``values.shape[-2]``) are what the protocol aborts on: NaN
    (``on_abort="nan"``) or :class:`SecAggAbort` (``"raise"``). A sparse graph can abort
    in more cases (per-neighbourhood thresholds, disconnection; see
    :func:`sparse_abort_reason`); these are reproduced too when ``unit`` and ``round``
    (ints or integer arrays broadcastable to ``survivors.shape[:-1]``) are given, since
    they fix the public neighbour graph (a Python loop over the batch, sparse case only).

    Args:
        values: ``[..., L, M]`` real vectors.
        survivors: ``[..., L]`` bool, the clients whose masked input reached the server.
        config: encoding and threshold settings.
        on_abort: ``"nan"`` or ``"raise"``.
        unit: unit id(s) of the rounds (needed only to model sparse-graph aborts).
        round: round number(s) of the rounds (same).

    Returns:
        ``[..., M]`` float64 mean over the survivors.

    >>> cfg = SecAggConfig(frac_bits=1, clip=8.0, threshold=1)
    >>> quantized_mean(np.array([[[1.2], [2.0]]]), np.array([[True, True]]), cfg).tolist()
    [[1.5]]

    """
    if on_abort not in ("nan", "raise"):
        raise ConfigError(f"on_abort must be one of 'nan', 'raise'; got {on_abort!r}")
    x = np.asarray(values, dtype=np.float64)
    surv = np.asarray(survivors)
    if x.ndim < 2 or surv.shape != x.shape[:-1] or surv.dtype != bool:
        raise ConfigError(
            f"survivors must be a bool array of shape values.shape[:-1]={x.shape[:-1]}; "
            f"got {surv.dtype} {surv.shape}"
        )
    L = config.check_clients(x.shape[-2])
    t = config.threshold_for(L)
    codes = encode(x, config)
    codes = np.where(surv[..., None], codes, config.dtype(0))
    total = codes.sum(axis=-2, dtype=config.dtype)  # wraps modulo 2^32 / 2^64
    n = surv.sum(axis=-1)
    ok = completes(surv, config, unit=unit, round=round)
    if on_abort == "raise" and not ok.all():
        bad = int(np.argmin(ok.reshape(-1)))
        nb = int(n.reshape(-1)[bad])
        raise SecAggAbort(
            f"batch entry {bad}: {nb} survivors with threshold t={t} (or sparse-graph abort)",
            unit=-1,
            round=-1,
            survivors=nb,
        )
    out = decode_mean(total, np.maximum(n, 1), config)
    return np.where(ok[..., None], out, np.nan)
