"""Secure aggregation with real cryptography and dropout recovery (Bonawitz et al. 2017).

The papers privatize the client → server link of each federated unit with pairwise masks
that cancel in the server's sum, ``Σ_{k∈L_{p,i}} g_{p,k,i} = 0`` (Rizk, Vlaski & Sayed,
"Privatized Graph Federated Learning", arXiv:2203.07105, §III-C, eq. 48; Rizk & Sayed,
"A Graph Federated Architecture with Privacy Preserving Learning", SPAWC 2021,
arXiv:2104.13215, §III-D, eq. 23), agreed by Diffie–Hellman over a public channel.
This module runs the full semi-honest protocol of Bonawitz et al. (CCS 2017, Fig. 4) for
one unit and one round, with the optional sparse neighbour graph of SecAgg+ (Bell et al.,
CCS 2020):

0. *AdvertiseKeys*: every client u draws two fresh X25519 key pairs, ``(c_u^PK, c_u^SK)``
   for the share channel and ``(s_u^PK, s_u^SK)`` for masking, from the OS's secure
   randomness, and the server broadcasts the public keys.
1. *ShareKeys*: u draws a 32-byte self-mask seed ``b_u`` and Shamir-shares ``b_u`` and
   ``s_u^SK`` t-out-of-n among its closed neighbourhood ``N[u]`` (everyone, or u and its
   k graph neighbours); the share for v travels through the server encrypted with
   ChaCha20-Poly1305 under ``HKDF(DH(c_u^SK, c_v^PK))``.
2. *MaskedInput*: u sends ``y_u = x̄_u + PRG(b_u) + Σ_{v∈N(u), v>u} PRG(s_uv)
   − Σ_{v∈N(u), v<u} PRG(s_uv)  (mod 2^k)``, where ``x̄_u`` is the fixed-point code of
   its vector and ``s_uv = HKDF(DH(s_u^SK, s_v^PK), info = unit, round, u, v)``.
3. *Unmasking*: the server announces the set U3 of clients whose ``y_u`` arrived; each
   responding client reveals its share of ``b_u`` for u ∈ U3 and its share of ``s_u^SK``
   for u ∉ U3 — never both for the same u (enforced, :class:`SecAggProtocolError`). The
   server reconstructs, regenerates the masks and outputs ``Σ_{u∈U3} x̄_u mod 2^k``.

PRG = AES-256-CTR keystream (zero IV; each key is used for exactly one stream), read as
little-endian ``uint32``/``uint64`` with ``np.frombuffer``: one cipher call per pair.
Numpy generators are never used for anything secret; the only numpy generator here
draws the *public* permutation of the sparse neighbour graph.

**Fixed point.** A real value is clipped to ``[−clip, clip]`` and encoded as
``q = rint(x · 2^f) mod 2^k``; sums wrap in unsigned numpy integers, so masks cancel
*exactly*. The decoded mean over the n clients in U3 is ``centred(Σ q) / (n 2^f)``, whose
only error against the mean of the clipped inputs is rounding:
``|decoded − mean| ≤ 2^−(f+1) + 2^−52 |decoded|`` per coordinate (the second term is the
float64 conversion and division). Exact decoding needs ``L · rint(clip · 2^f) < 2^(k−1)``,
checked at construction (:class:`~pgfl.validation.ConfigError` otherwise).

:func:`quantized_mean` is the vectorized *equivalent*: because masks cancel exactly, the
protocol's output is bit-for-bit the fixed-point sum of the survivors, decoded, which
:func:`quantized_mean` computes for any batch ``[..., L, M]`` without cryptography.

Simulation note: all clients of a unit run in one process, so each pair's X25519
agreement is computed once (by the lower-indexed client) and used by both parties —
DH is symmetric, a test checks that both sides agree — and the pair's mask is expanded
once and added to one party's vector and subtracted from the other's. The per-pair work
runs on worker processes (``workers``; see :func:`run_secagg_round`); the secret
randomness is drawn beforehand on the calling thread, so the transcript does not depend
on how many workers ran it.

>>> cfg = SecAggConfig(frac_bits=8, clip=4.0)
>>> x = np.array([[0.5, -1.0], [1.5, 2.0], [1.0, 0.0]])
>>> SecureAggregation(cfg, num_clients=3).aggregate(x, unit=0, round=0).tolist()
[1.0, 0.3333333333333333]
>>> keep = np.array([True, False, True])   # client 1 drops after sharing its keys
>>> secure_mean(x, config=cfg, unit=0, round=1, dropped=~keep).tolist()
[0.75, -0.5]
"""

from __future__ import annotations

import math
import multiprocessing
import os
import struct
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from pgfl.params import PARAMS, check, max_code, neighbourhood_size
from pgfl.privacy import shamir
from pgfl.rng import stream
from pgfl.validation import ConfigError, check_int

__all__ = [
    "DROP_AFTER_ADVERTISE",
    "DROP_AFTER_MASKED_INPUT",
    "DROP_AFTER_SHARE",
    "NEVER_DROP",
    "SecAggAbort",
    "SecAggConfig",
    "SecAggProtocolError",
    "SecAggRoundResult",
    "SecureAggregation",
    "decode_mean",
    "encode",
    "hkdf_sha256",
    "neighbour_graph",
    "quantized_mean",
    "run_secagg_round",
    "secure_mean",
    "sparse_abort_reason",
    "suggested_neighbours",
]

RandBytes = Callable[[int], bytes]

#: Drop stages of a client (``drop_stage`` of :func:`run_secagg_round`).
NEVER_DROP = 0
#: Advertised its keys, then vanished (sent no shares; not masked with by anyone).
DROP_AFTER_ADVERTISE = 1
#: Sent its shares, then vanished before sending its masked input (the hard case:
#: its pairwise masks are in the survivors' vectors and must be recovered).
DROP_AFTER_SHARE = 2
#: Sent its masked input (counted in the sum), then vanished before unmasking.
DROP_AFTER_MASKED_INPUT = 3

_LABEL = b"pgfl-secagg-v1/"
_SECRET_BYTES = 32


class SecAggAbort(RuntimeError):
    """The round cannot complete without revealing more than the aggregate.

    Raised when fewer than t clients survive (globally, or among the share holders of a
    client whose secret must be reconstructed), or when the surviving clients' neighbour
    graph is disconnected (a sparse graph would then reveal per-component sums). The
    server has learnt nothing beyond masked vectors; the caller should keep the unit's
    previous model for this round. Never a wrong aggregate.

    Attributes:
        unit: federated unit id. round: round number. reason: human-readable cause.
        survivors: number of clients whose masked input arrived (|U3|).

    """

    def __init__(self, reason: str, *, unit: int, round: int, survivors: int):
        super().__init__(f"secure aggregation aborted (unit {unit}, round {round}): {reason}")
        self.reason = reason
        self.unit = unit
        self.round = round
        self.survivors = survivors


class SecAggProtocolError(RuntimeError):
    """A rule of the protocol was violated (never raised in a correct run).

    Examples: a client is asked for both its share of ``b_u`` and of ``s_u^SK``; a
    reconstructed secret key does not match the advertised public key; a ciphertext fails
    authentication.
    """


# --------------------------------------------------------------------------------------
# Configuration and fixed-point encoding
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SecAggConfig:
    """Settings of secure aggregation (immutable).

    Attributes:
        modulus_bits: k, arithmetic is modulo 2^k, in [8, 64]; k ≤ 32 uses ``uint32``
            masks (half the keystream), otherwise ``uint64``.
        frac_bits: f, fixed-point fractional bits, in [0, k − 2]; the quantization step
            is 2^−f and the decoded mean is within 2^−(f+1) of the true mean.
        clip: values are clipped to ``[−clip, clip]`` before encoding (document your
            range: a clipped value changes the aggregate).
        threshold: t, shares needed to reconstruct a secret, among the closed
            neighbourhood (L clients for the complete graph, k + 1 for a sparse one).
            ``None`` = a majority, ``⌊h/2⌋ + 1`` for neighbourhood size h.
        neighbours: k, even, the degree of the SecAgg+ neighbour graph; ``None`` (or
            k ≥ L − 1) = complete graph (original SecAgg).
        graph_seed: public seed of the neighbour graph's random permutation.

    """

    modulus_bits: int = PARAMS["privacy.secagg_modulus_bits"].default
    frac_bits: int = PARAMS["privacy.secagg_frac_bits"].default
    clip: float = PARAMS["privacy.secagg_clip"].default
    threshold: int | None = None
    neighbours: int | None = None
    graph_seed: int = 0

    def __post_init__(self) -> None:
        # the ranges live in pgfl.params (the config's privacy.secagg_* settings); the
        # capacity bound is checked for one client here and for L in check_clients
        k = check("privacy.secagg_modulus_bits", self.modulus_bits)
        f = check("privacy.secagg_frac_bits", self.frac_bits, secagg_modulus_bits=k)
        clip = check("privacy.secagg_clip", self.clip, secagg_frac_bits=f)
        check("privacy.secagg_modulus_bits", k, L=1, secagg_clip=clip, secagg_frac_bits=f)
        check("privacy.secagg_threshold", self.threshold)
        check("privacy.secagg_neighbours", self.neighbours)
        check_int("graph_seed", self.graph_seed, lo=0)

    @property
    def dtype(self) -> type[np.unsignedinteger]:
        """Unsigned integer type of codes and masks: ``uint32`` for k ≤ 32, else ``uint64``."""
        return np.uint32 if self.modulus_bits <= 32 else np.uint64

    @property
    def max_code(self) -> int:
        """Largest code magnitude ``rint(clip · 2^f)``."""
        return max_code(self.clip, self.frac_bits)

    @property
    def max_clients(self) -> int:
        """Largest L with ``L · max_code ≤ 2^(k−1) − 1`` (no overflow of the signed sum)."""
        return (2 ** (self.modulus_bits - 1) - 1) // self.max_code

    @property
    def quantization_bound(self) -> float:
        """Per-coordinate bound 2^−(f+1) on |decoded mean − mean of clipped inputs|."""
        return 2.0 ** -(self.frac_bits + 1)

    def is_sparse(self, num_clients: int) -> bool:
        """Whether L clients use a sparse (SecAgg+) graph rather than the complete one."""
        return self.neighbourhood_size(num_clients) < num_clients

    def neighbourhood_size(self, num_clients: int) -> int:
        """H = |N[u]|: L for the complete graph, k + 1 for a sparse one."""
        return neighbourhood_size(num_clients, self.neighbours)

    def threshold_for(self, num_clients: int) -> int:
        """Resolve and validate t for L clients (``1 ≤ t ≤ h``)."""
        h = self.neighbourhood_size(num_clients)
        if self.threshold is None:
            return h // 2 + 1
        return check(
            "privacy.secagg_threshold", self.threshold, L=num_clients,
            secagg_neighbours=self.neighbours,
        )  # fmt: skip

    def check_clients(self, num_clients: int) -> int:
        """Validate L against the modulus (``L · max_code < 2^(k−1)``) and the threshold."""
        L = check_int("num_clients", num_clients, lo=1, hi=shamir.FIELD_PRIME - 2)
        check(
            "privacy.secagg_modulus_bits", self.modulus_bits, L=L, secagg_clip=self.clip,
            secagg_frac_bits=self.frac_bits,
        )  # fmt: skip
        self.threshold_for(L)
        return L


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


def _reduce(residues: np.ndarray, config: SecAggConfig) -> np.ndarray:
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
    r = _reduce(np.asarray(sum_residues, dtype=config.dtype), config).astype(np.uint64)
    if k == 64:
        s = r.view(np.int64)
    else:
        s = r.astype(np.int64)
        s = np.where(s >= 2 ** (k - 1), s - 2**k, s)
    n_arr = np.asarray(n, dtype=np.float64)[..., None]
    return (s.astype(np.float64) / n_arr) * 2.0**-config.frac_bits


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
    ok = n >= t
    if config.is_sparse(L) and unit is not None and round is not None:
        units = np.broadcast_to(np.asarray(unit), n.shape)
        rounds = np.broadcast_to(np.asarray(round), n.shape)
        ok = np.array(ok)  # 0-d array for a single round
        every = np.ones(L, dtype=bool)
        for idx in np.ndindex(n.shape):
            if ok[idx]:
                holders = neighbour_graph(L, config, unit=int(units[idx]), round=int(rounds[idx]))
                s_ = surv[idx]
                ok[idx] = sparse_abort_reason(holders, every, s_, s_, t) is None
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


# --------------------------------------------------------------------------------------
# Cryptographic primitives
# --------------------------------------------------------------------------------------


def hkdf_sha256(ikm: bytes, info: bytes, length: int = 32, salt: bytes = b"") -> bytes:
    """HKDF-SHA256 (RFC 5869) from the ``cryptography`` package: extract, then expand.

    An empty ``salt`` means the RFC's default, ``HashLen`` zero bytes (§2.2). A test
    checks the three SHA-256 test vectors of RFC 5869, Appendix A.1-A.3.

    >>> hkdf_sha256(bytes([0x0B]) * 22, b"", 42).hex()[:16]   # RFC 5869, Appendix A.3
    '8da4e775a563c18f'
    """
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt or None, info=info).derive(ikm)


def _info(kind: bytes, unit: int, round: int, a: int, b: int) -> bytes:
    return _LABEL + kind + struct.pack("<QQII", unit, round, a, b)


def _keystream(key: bytes, nbytes: int) -> bytes:
    enc = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
    return enc.update(bytes(nbytes))


# --------------------------------------------------------------------------------------
# Neighbour graph (SecAgg+)
# --------------------------------------------------------------------------------------


def neighbour_graph(num_clients: int, config: SecAggConfig, *, unit: int, round: int) -> np.ndarray:
    """Return the closed neighbourhoods ``N[u]`` as an ``int64 [L, h]`` array, u itself first.

    Complete graph: every row is all clients (u first). Sparse (SecAgg+): a *random
    Harary graph*: a public permutation π (from ``graph_seed``, unit and round; public
    randomness, so a numpy generator) places the clients on a ring, and each is joined to
    the k/2 nearest on each side: k-regular, connected, and after random dropouts
    disconnected only if k/2 ring-consecutive clients all drop.

    >>> neighbour_graph(4, SecAggConfig(), unit=0, round=0).tolist()
    [[0, 1, 2, 3], [1, 0, 2, 3], [2, 0, 1, 3], [3, 0, 1, 2]]
    """
    L = check_int("num_clients", num_clients, lo=1)
    if not config.is_sparse(L):
        u = np.arange(L)[:, None]
        j = np.arange(L - 1)[None, :]
        return np.concatenate([u, j + (j >= u)], axis=1)
    k = config.neighbours
    perm = stream(config.graph_seed, "secagg-neighbour-graph", unit, round).permutation(L)
    pos = np.empty(L, dtype=np.int64)
    pos[perm] = np.arange(L)
    offs = np.concatenate([np.arange(1, k // 2 + 1), -np.arange(1, k // 2 + 1)])
    nb = perm[(pos[:, None] + offs[None, :]) % L]
    nb = np.sort(nb, axis=1)
    return np.concatenate([np.arange(L)[:, None], nb], axis=1)


def _edges(holders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Undirected edges (u < v) of the graph given by closed neighbourhoods."""
    L, h = holders.shape
    u = np.repeat(np.arange(L), h - 1)
    v = holders[:, 1:].reshape(-1)
    keep = u < v
    return u[keep], v[keep]


def sparse_abort_reason(
    holders: np.ndarray,
    shared: np.ndarray,
    included: np.ndarray,
    responders: np.ndarray,
    t: int,
) -> str | None:
    """Why the unmasking round must abort, or ``None`` if it can proceed safely.

    Args:
        holders: ``[L, h]`` closed neighbourhoods.
        shared: bool ``[L]``, U2 (sent their shares).
        included: bool ``[L]``, U3 (masked input arrived).
        responders: bool ``[L]``, the clients that answer the unmasking request.
        t: threshold.

    """
    n3 = int(included.sum())
    if n3 < t:
        return f"{n3} survivors < threshold t={t}"
    need = shared  # b_u for u in U3, s_u^SK for u in U2 \ U3: every u in U2
    avail = (responders[holders] & shared[holders]).sum(axis=1)
    short = need & (avail < t)
    if short.any():
        u = int(np.flatnonzero(short)[0])
        return (
            f"client {u} has {int(avail[u])} responding share holders < threshold t={t} "
            f"({int(short.sum())} clients short)"
        )
    L, h = holders.shape
    if h < L:  # sparse: the survivors' graph must be connected
        # min-label propagation over surviving edges; converges in ≤ diameter steps
        lab = np.where(included, np.arange(L), L)
        alive = included[holders]
        while True:
            nxt = np.where(alive, lab[holders], L).min(axis=1)
            nxt = np.where(included, np.minimum(lab, nxt), L)
            if np.array_equal(nxt, lab):
                break
            lab = nxt
        comps = np.unique(lab[included]).size
        if comps > 1:
            return (
                f"the survivors' neighbour graph has {comps} components; unmasking would "
                "reveal per-component sums (raise neighbours)"
            )
    return None


# --------------------------------------------------------------------------------------
# Parallel execution of the per-pair work (worker processes)
# --------------------------------------------------------------------------------------


def default_workers() -> int:
    """Worker processes of :func:`run_secagg_round` by default: the usable cores.

    Inside a Ray task or actor, the CPUs Ray assigned to it (so that a cluster's workers
    do not each start one process per core of the machine).
    """
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        try:
            ctx = ray.get_runtime_context()
            if ctx.worker.mode == ray.WORKER_MODE:
                return max(1, int(ctx.get_assigned_resources().get("CPU", 1)))
        except Exception:  # noqa: BLE001 - Ray's internals vary by version: fall back
            pass
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


_EXECUTORS: dict[int, ProcessPoolExecutor] = {}


class _Pool:
    """``map`` over tasks on ``workers`` processes (inline for one worker or a small job).

    Threads do not speed the round up: the per-pair Python glue between OpenSSL calls
    holds the GIL, and two threads were slower than one (measured, benchmarks/RESULTS-speed.md).
    The worker processes persist across rounds (forked once, on first use).
    Results come back in task order and masks are summed by wrap-around addition, so
    the round's output and transcript do not depend on the number of workers (tested).
    """

    def __init__(self, workers: int):
        self.workers = workers
        self.tasks = workers

    def map(self, fn: Callable, items: list, size: int) -> list:
        if self.workers == 1 or size < _MIN_PARALLEL or len(items) < 2:
            return [fn(it) for it in items]
        ex = self._executor()
        try:
            return list(ex.map(fn, items))
        except BrokenProcessPool:  # a worker died (killed, out of memory): one fresh pool
            _EXECUTORS.pop(self.workers, None)
            ex.shutdown(wait=False, cancel_futures=True)
            return list(self._executor().map(fn, items))

    def _executor(self) -> ProcessPoolExecutor:
        ex = _EXECUTORS.get(self.workers)
        if ex is None:
            ctx = multiprocessing.get_context(_start_method())
            ex = _EXECUTORS[self.workers] = ProcessPoolExecutor(self.workers, mp_context=ctx)
        return ex


def _start_method() -> str:
    """How the worker processes start: ``fork`` in a single-threaded process, else ``forkserver``.

    ``fork`` needs no re-import of the caller's ``__main__`` (a script needs no main guard),
    but forking a process whose other threads may hold locks (Ray's and JAX's runtimes
    start threads; so may the caller) can deadlock the child; there the workers are forked
    from a clean server process instead (which, like ``spawn``, imports the caller's main
    module: scripts then need ``if __name__ == "__main__":``).
    """
    methods = multiprocessing.get_all_start_methods()
    threaded = threading.active_count() > 1 or any(m in sys.modules for m in ("jax", "ray"))
    if "fork" in methods and not threaded:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


#: Below this many items (pairs, keys) a round runs on the calling thread only.
_MIN_PARALLEL = 64


def _chunks(n: int, parts: int) -> list[range]:
    """Split ``range(n)`` into at most ``parts`` contiguous, nearly equal ranges."""
    parts = max(1, min(parts, n))
    bounds = [n * i // parts for i in range(parts + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(parts)]


def _public_keys(raw: list[bytes]) -> list[bytes]:
    """Raw X25519 public keys of private keys given as 32 secret bytes each."""
    return [X25519PrivateKey.from_private_bytes(r).public_key().public_bytes_raw() for r in raw]


def _slot(holders: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Position j of v in ``holders[u]`` (``holders[u, 1:]`` is sorted, v ≠ u a neighbour)."""
    L, h = holders.shape
    flat = (np.arange(L)[:, None] * L + holders[:, 1:]).reshape(-1)  # sorted row by row
    pos = np.searchsorted(flat, u * L + v)
    return pos - u * (h - 1) + 1


@dataclass(eq=False, kw_only=True)
class _PairTask:
    """Picklable per-pair work of rounds 1-2 for a range of pairs (run in a worker process).

    ``edges[i] = (u, v, slot of v in N[u], slot of u in N[v], channel?, mask?)`` with
    u < v: the channel key ``HKDF(DH(c_u^SK, c_v^PK))``, u's share for v and v's share
    for u encrypted and decrypted (ChaCha20-Poly1305; the server relays only the
    ciphertext), then the mask seed ``HKDF(DH(s_u^SK, s_v^PK))`` expanded and added to
    u's / subtracted from v's vector. ``self_seeds`` are the self masks ``PRG(HKDF(b_u))``.
    Key material travels as raw bytes: all parties of a unit are simulated by one program,
    whose worker processes are part of it.
    """

    unit: int
    round: int
    dtype: str
    M: int
    L: int
    c_sk: list[bytes]
    c_pk: list[bytes]
    s_sk: list[bytes]
    s_pk: list[bytes]
    payload: np.ndarray
    owner_of: np.ndarray
    edges: list[list[int]]
    self_seeds: list[tuple[int, bytes]]


def _run_pairs(task: _PairTask) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, float]]:
    """Do ``task``: (mask sum ``[L, M]``, receivers ``[n, 2]`` (v, slot), shares, times)."""
    unit, rnd, dtype = task.unit, task.round, np.dtype(task.dtype)
    nbytes = task.M * dtype.itemsize
    # key objects, made once per client and task (making a private key costs ~1 X25519)
    keys: dict[tuple[int, int], X25519PrivateKey | X25519PublicKey] = {}

    def key(kind: int, u: int) -> X25519PrivateKey | X25519PublicKey:
        k = keys.get((kind, u))
        if k is None:
            raw = (task.c_sk, task.c_pk, task.s_sk, task.s_pk)[kind][u]
            make = X25519PrivateKey.from_private_bytes if kind % 2 == 0 else None
            k = make(raw) if make else X25519PublicKey.from_public_bytes(raw)
            keys[(kind, u)] = k
        return k

    payload = task.payload  # [owners, h, 2C] little-endian uint32
    row = payload.shape[-1] * 4
    blob = memoryview(payload.tobytes())
    stride_owner = payload.shape[1] * row
    dest: list[tuple[int, int]] = []
    pts: list[bytes] = []
    plus: list[int] = []  # mask i is added to client plus[i] and subtracted from minus[i]
    minus: list[int] = []
    streams: list[bytes] = []
    perf = time.perf_counter
    cpu0 = time.process_time()
    t_ka = t_tr = t_exp = 0.0
    pack = struct.Struct("<II").pack
    pad = b"\x00" * 4
    for a, b, j_ab, j_ba, channel, mask in task.edges:
        c0 = perf()
        if channel:
            shared = key(0, a).exchange(key(1, b))
            aead = ChaCha20Poly1305(hkdf_sha256(shared, _info(b"channel", unit, rnd, a, b)))
            c1 = perf()
            t_ka += c1 - c0
            for u, v, j_uv, j_vu in ((a, b, j_ab, j_ba), (b, a, j_ba, j_ab)):
                # one message per direction per round under a per-round key: nonce = (from, to)
                nonce = pack(u, v) + pad
                aad = _info(b"share", unit, rnd, u, v)
                off = int(task.owner_of[u]) * stride_owner + j_uv * row
                ct = aead.encrypt(nonce, blob[off : off + row], aad)
                # --- relayed by the server, which sees only ct; v decrypts with its key ---
                try:
                    pts.append(aead.decrypt(nonce, ct, aad))
                except InvalidTag as exc:  # pragma: no cover - only on tampering
                    raise SecAggProtocolError(
                        f"share from {u} to {v} failed authentication"
                    ) from exc
                dest.append((v, j_vu))
            c0 = perf()
            t_tr += c0 - c1
        if mask:
            # y_u gets +PRG(s_uv) for v > u and −PRG(s_uv) for v < u
            shared = key(2, a).exchange(key(3, b))
            sd = hkdf_sha256(shared, _info(b"pairwise", unit, rnd, a, b))
            c1 = perf()
            streams.append(_keystream(sd, nbytes))
            plus.append(a)
            minus.append(b)
            t_ka += c1 - c0
            t_exp += perf() - c1
    c0 = perf()
    for u, seed in task.self_seeds:
        streams.append(_keystream(hkdf_sha256(seed, _info(b"self", unit, rnd, u, 0)), nbytes))
        plus.append(u)
    c1 = perf()
    t_exp += c1 - c0
    y = np.zeros((task.L, task.M), dtype=dtype)
    if streams:
        m = np.frombuffer(b"".join(streams), dtype=dtype).reshape(len(streams), task.M)
        np.add.at(y, np.array(plus, dtype=np.int64), m)  # wraps modulo 2^32 / 2^64
        np.subtract.at(y, np.array(minus, dtype=np.int64), m[: len(minus)])
    width = payload.shape[-1]
    shares = np.frombuffer(b"".join(pts), dtype="<u4").reshape(len(pts), width)
    times = {
        "key_agreement": t_ka,
        "share_transport": t_tr,
        "mask_expansion": t_exp,
        "masking": perf() - c1,
        "pairs_cpu": time.process_time() - cpu0,
    }
    return y, np.array(dest, dtype=np.int64).reshape(-1, 2), shares, times


def _undo_pair_masks(
    items: list[tuple[X25519PrivateKey, int, int]],
    s_pk: list[X25519PublicKey],
    unit: int,
    round: int,
    M: int,
    dtype: type[np.unsignedinteger],
) -> np.ndarray:
    """Sum of the pairwise masks a surviving v applied with a dropped u (to subtract)."""
    out = np.zeros(M, dtype=dtype)
    nbytes = M * np.dtype(dtype).itemsize
    for key_u, u, v in items:
        a, b = (u, v) if u < v else (v, u)
        sd = hkdf_sha256(key_u.exchange(s_pk[v]), _info(b"pairwise", unit, round, a, b))
        m = np.frombuffer(_keystream(sd, nbytes), dtype=dtype)
        # v added +m if v < u (v is the lower end), −m otherwise; undo it
        if v < u:
            out += m
        else:
            out -= m
    return out


# --------------------------------------------------------------------------------------
# Protocol
# --------------------------------------------------------------------------------------


class _ShareVault:
    """Shares a client holds for others, and the rule: never reveal both kinds for one owner."""

    __slots__ = ("client", "b", "s", "revealed_b", "revealed_s", "t")

    def __init__(self, client: int, t: int):
        self.client = client
        self.t = t
        self.b: dict[int, np.ndarray] = {}
        self.s: dict[int, np.ndarray] = {}
        self.revealed_b: set[int] = set()
        self.revealed_s: set[int] = set()

    def reveal(
        self,
        b_for: np.ndarray,
        s_for: np.ndarray,
        n_included: int,
        included: np.ndarray | None = None,
    ) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        """Answer an unmasking request (Bonawitz et al. round 4, client side).

        ``included`` is the announced U3 (bool ``[L]``): b-shares only for its members,
        key shares only for non-members.
        """
        if n_included < self.t:
            raise SecAggProtocolError(
                f"client {self.client}: refusing to unmask, |U3|={n_included} < t={self.t}"
            )
        if included is not None and (
            not included[np.asarray(b_for, dtype=np.int64)].all()
            or included[np.asarray(s_for, dtype=np.int64)].any()
        ):
            raise SecAggProtocolError(
                f"client {self.client}: request inconsistent with the announced survivors U3 "
                "(self-mask shares only for U3, key shares only outside U3)"
            )
        b_set = {int(u) for u in b_for}
        s_set = {int(u) for u in s_for}
        both = (b_set & s_set) | (b_set & self.revealed_s) | (s_set & self.revealed_b)
        if both:
            raise SecAggProtocolError(
                f"client {self.client}: asked for both the self-mask share and the key share "
                f"of client(s) {sorted(both)}; refusing (this would unmask their input)"
            )
        self.revealed_b |= b_set
        self.revealed_s |= s_set
        return (
            {u: self.b[u] for u in b_set if u in self.b},
            {u: self.s[u] for u in s_set if u in self.s},
        )


def _request_shares(vault: _ShareVault, b_for, s_for, n_included: int, included=None):
    """Server side of round 4: refuse to ask for both kinds of share for one client."""
    overlap = set(map(int, b_for)) & set(map(int, s_for))
    if overlap:
        raise SecAggProtocolError(
            f"server must not request both kinds of share for client(s) {sorted(overlap)}"
        )
    return vault.reveal(b_for, s_for, n_included, included)


@dataclass
class SecAggRoundResult:
    """Outcome and public transcript of one round of secure aggregation for one unit.

    Attributes:
        mean: ``[M]`` decoded mean over the included clients (U3).
        sum_residues: ``[M]`` the unmasked sum of codes modulo 2^k.
        included: bool ``[L]``, clients whose masked input is in the sum (U3).
        masked_inputs: ``[L, M]`` what the server received (zero rows: nothing arrived).
        public_keys: per client ``(c_u^PK, s_u^PK)`` raw 32-byte keys.
        threshold: t used. timings: seconds per phase.

    """

    mean: np.ndarray
    sum_residues: np.ndarray
    included: np.ndarray
    masked_inputs: np.ndarray
    public_keys: list[tuple[bytes, bytes]]
    threshold: int
    unit: int
    round: int
    timings: dict[str, float] = field(default_factory=dict)


class _Timer:
    def __init__(self) -> None:
        self.t: dict[str, float] = {}

    def add(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.t[name] = self.t.get(name, 0.0) + now - since
        return now


def _check_values(values: np.ndarray, num_clients: int | None = None) -> np.ndarray:
    x = np.asarray(values)
    if x.ndim != 2 or x.shape[1] < 1 or x.shape[0] < 1:
        raise ConfigError(f"values must be a 2-D array [L, M] with L, M >= 1; got shape {x.shape}")
    if num_clients is not None and x.shape[0] != num_clients:
        raise ConfigError(
            f"values must have num_clients={num_clients} rows (one per sampled client); "
            f"got shape {x.shape}"
        )
    if x.dtype.kind not in "fiu":
        raise ConfigError(f"values must be real numbers; got dtype {x.dtype}")
    return x.astype(np.float64, copy=False)


def run_secagg_round(
    values: np.ndarray,
    config: SecAggConfig,
    *,
    unit: int,
    round: int,
    drop_stage: np.ndarray | None = None,
    randbytes: RandBytes = os.urandom,
    workers: int | None = None,
) -> SecAggRoundResult:
    """Run one full round of the protocol for one unit; return the mean over U3.

    Args:
        values: ``[L, M]`` the sampled clients' real vectors.
        config: settings; L is validated against the modulus and threshold.
        unit: non-negative unit id, bound into every key derivation.
        round: non-negative round number, bound into every key derivation.
        drop_stage: ``int [L]`` when each client vanishes (:data:`NEVER_DROP`,
            :data:`DROP_AFTER_ADVERTISE`, :data:`DROP_AFTER_SHARE`,
            :data:`DROP_AFTER_MASKED_INPUT`); default: nobody drops.
        randbytes: secure random source for keys, self-mask seeds and Shamir
            coefficients. Production: ``os.urandom`` (default). A deterministic source
            exists only so that tests can replay a transcript; never use one for real.
            It is called on the calling thread only, in a fixed order.
        workers: processes for the X25519 agreements and the per-pair symmetric
            cryptography (``None``: :func:`default_workers`, the usable cores). The
            result, transcript and secret draws are the same for every value.

    Returns:
        :class:`SecAggRoundResult`.

    Raises:
        SecAggAbort: too few survivors or share holders, or a disconnected sparse graph.
        ConfigError: bad inputs.

    """
    x = _check_values(values)
    L, M = x.shape
    config.check_clients(L)
    t = config.threshold_for(L)
    unit = check_int("unit", unit, lo=0, hi=2**63 - 1)
    round = check_int("round", round, lo=0, hi=2**63 - 1)
    if drop_stage is None:
        stage = np.zeros(L, dtype=np.int64)
    else:
        stage = np.asarray(drop_stage)
        if stage.shape != (L,) or stage.dtype.kind not in "iu":
            raise ConfigError(
                f"drop_stage must be an integer array of shape [L={L}]; got {stage.dtype} "
                f"{stage.shape}"
            )
        if stage.size and (stage.min() < 0 or stage.max() > 3):
            raise ConfigError("drop_stage values must be in [0, 3]")
    workers = default_workers() if workers is None else check_int("workers", workers, lo=1, hi=256)
    dtype = config.dtype
    timer = _Timer()
    t0 = t_start = time.perf_counter()

    # ---- round 0: AdvertiseKeys (fresh key pairs from the OS, every round) ----
    # the secret bytes are drawn here, in this order, whatever the number of workers
    c_bytes = [randbytes(32) for _ in range(L)]
    s_bytes = [randbytes(32) for _ in range(L)]
    pool = _Pool(workers)
    raw = c_bytes + s_bytes  # X25519 private keys, raw (the workers make the key objects)
    parts = _chunks(2 * L, pool.tasks)
    pubs = sum(pool.map(_public_keys, [raw[r.start : r.stop] for r in parts], 2 * L), [])
    pub = list(zip(pubs[:L], pubs[L:], strict=True))
    t0 = timer.add("keygen", t0)
    u1 = np.ones(L, dtype=bool)  # everybody advertised
    u2 = u1 & (stage != DROP_AFTER_ADVERTISE)
    u3 = u2 & (stage != DROP_AFTER_SHARE)
    u4 = u3 & (stage != DROP_AFTER_MASKED_INPUT)
    for name, s_ in (("advertised keys", u1), ("shared keys", u2)):
        if int(s_.sum()) < t:
            raise SecAggAbort(
                f"{int(s_.sum())} clients {name} < threshold t={t}",
                unit=unit,
                round=round,
                survivors=int(u3.sum()),
            )
    holders = neighbour_graph(L, config, unit=unit, round=round)
    h = holders.shape[1]
    eu, ev = _edges(holders)
    # Public keys as received by each client from the server's broadcast.
    s_pk = [X25519PublicKey.from_public_bytes(p[1]) for p in pub]

    # ---- round 1: ShareKeys (secret sharing; the messages travel in the pair pass) ----
    t0 = time.perf_counter()
    b_seed = [randbytes(_SECRET_BYTES) for _ in range(L)]
    s_raw = raw[L:]
    secrets = np.concatenate(
        [shamir.bytes_to_field(b_seed), shamir.bytes_to_field(s_raw)], axis=1
    )  # [L, 2C]
    C = shamir.chunks_for(_SECRET_BYTES)
    owners = np.flatnonzero(u2)
    if h == L:  # complete graph: one Vandermonde for all owners, then u's holder order
        by_id = shamir.share_field(secrets[owners], np.arange(1, L + 1), t, randbytes=randbytes)
        shares = np.take_along_axis(by_id, holders[owners][:, :, None], axis=1)
    else:
        shares = shamir.share_field(secrets[owners], holders[owners] + 1, t, randbytes=randbytes)
    # shares: [|U2|, h, 2C]; shares[i, j] is held by holders[owners[i], j]
    t0 = timer.add("shamir_share", t0)

    # ---- rounds 1-2, per pair u < v: the share channel (both directions) and the mask ----
    act = u2[eu] & u2[ev]  # channels between clients that both share
    pair = act & (u3[eu] | u3[ev])  # masks that end up in some survivor's vector
    slot_uv = _slot(holders, eu, ev)  # position of v in N[u]
    slot_vu = _slot(holders, ev, eu)  # position of u in N[v]
    owner_of = np.full(L, -1, dtype=np.int64)
    owner_of[owners] = np.arange(owners.size)
    received = np.zeros((L, h, 2 * C), dtype=np.int64)  # received[v, j]: share of holders[v, j]
    has = np.zeros((L, h), dtype=bool)
    received[owners, 0] = shares[:, 0]  # u keeps its own share
    has[owners, 0] = True
    codes = encode(x, config)
    edges = np.stack([eu, ev, slot_uv, slot_vu, act, pair], axis=1).tolist()
    selfs = [(u, b_seed[u]) for u in np.flatnonzero(u3).tolist()]
    common = dict(
        unit=unit, round=round, dtype=np.dtype(dtype).str, M=M, L=L,
        c_sk=raw[:L], c_pk=[p[0] for p in pub], s_sk=s_raw,
        s_pk=[p[1] for p in pub],
        payload=shares.astype("<u4"), owner_of=owner_of,
    )  # fmt: skip
    e_parts = _chunks(len(edges), pool.tasks)
    s_parts = _chunks(len(selfs), len(e_parts))
    tasks = [
        _PairTask(**common, edges=edges[er.start : er.stop], self_seeds=selfs[sr.start : sr.stop])
        for er, sr in zip(
            e_parts, s_parts + [range(0)] * (len(e_parts) - len(s_parts)), strict=True
        )
    ]
    y = codes.copy()
    results = pool.map(_run_pairs, tasks, len(edges))
    for acc, dest, got, times in results:
        y += acc
        received[dest[:, 0], dest[:, 1]] = got
        has[dest[:, 0], dest[:, 1]] = True
        for phase, sec in times.items():
            timer.t[phase] = timer.t.get(phase, 0.0) + sec
    # the busiest worker's CPU time: the pair pass's wall time on idle cores
    timer.t["pairs_cpu_max"] = max(r[3]["pairs_cpu"] for r in results)
    t0 = timer.add("pairs_wall", t0)
    vaults = [_ShareVault(v, t) for v in range(L)]
    for v in range(L):
        js = np.flatnonzero(has[v])
        us = holders[v, js].tolist()
        rows = received[v, js]
        vaults[v].b = dict(zip(us, rows[:, :C], strict=True))
        vaults[v].s = dict(zip(us, rows[:, C:], strict=True))
    y = _reduce(y, config)
    y[~u3] = 0  # nothing arrives from clients that vanished
    t0 = timer.add("masking", t0)
    # ---- round 3: Unmasking (server) ----
    total = y[u3].sum(axis=0, dtype=dtype)
    reason = sparse_abort_reason(holders, u2, u3, u4, t)
    if reason is not None:
        raise SecAggAbort(reason, unit=unit, round=round, survivors=int(u3.sum()))
    b_for_all = np.flatnonzero(u3)
    s_for_all = np.flatnonzero(u2 & ~u3)
    n3 = int(u3.sum())
    got_b: dict[int, list[tuple[int, np.ndarray]]] = {int(u): [] for u in b_for_all}
    got_s: dict[int, list[tuple[int, np.ndarray]]] = {int(u): [] for u in s_for_all}
    is_b, is_s = np.zeros(L, dtype=bool), np.zeros(L, dtype=bool)
    is_b[b_for_all], is_s[s_for_all] = True, True
    for v in np.flatnonzero(u4).tolist():
        nb = holders[v]  # N[v]: the owners whose shares v holds (the graph is undirected)
        rb, rs = _request_shares(vaults[v], nb[is_b[nb]], nb[is_s[nb]], n3, u3)
        for u, sh in rb.items():
            got_b[u].append((v, sh))
        for u, sh in rs.items():
            got_s[u].append((v, sh))

    def _recover(got: dict[int, list[tuple[int, np.ndarray]]]) -> dict[int, bytes]:
        if not got:
            return {}
        us = list(got)
        xs = np.array([[v + 1 for v, _ in got[u][:t]] for u in us], dtype=np.int64)
        ys = np.array([[sh for _, sh in got[u][:t]] for u in us], dtype=np.int64)
        chunks = shamir.reconstruct_field(xs, ys)
        return dict(zip(us, shamir.field_to_bytes(chunks, _SECRET_BYTES), strict=True))

    rec_b = _recover(got_b)
    rec_s = _recover(got_s)
    t0 = timer.add("unmask_reconstruct", t0)
    itemsize = np.dtype(dtype).itemsize
    correction = np.zeros(M, dtype=dtype)
    for u, bu in rec_b.items():
        sk = hkdf_sha256(bu, _info(b"self", unit, round, u, 0))
        correction += np.frombuffer(_keystream(sk, M * itemsize), dtype=dtype)
    redo: list[tuple[X25519PrivateKey, int, int]] = []  # (key of dropped u, u, surviving v)
    for u, raw in rec_s.items():
        key_u = X25519PrivateKey.from_private_bytes(raw)
        if key_u.public_key().public_bytes_raw() != pub[u][1]:
            raise SecAggProtocolError(
                f"reconstructed key of client {u} does not match its public key"
            )
        redo += [(key_u, u, v) for v in holders[u, 1:].tolist() if u3[v]]
    if redo:
        correction += _undo_pair_masks(redo, s_pk, unit, round, M, dtype)
    total = _reduce(total - correction, config)
    t0 = timer.add("unmask_masks", t0)
    mean = decode_mean(total, n3, config)
    timer.add("decode", t0)
    timer.t["total"] = time.perf_counter() - t_start
    return SecAggRoundResult(
        mean=mean,
        sum_residues=total,
        included=u3,
        masked_inputs=y,
        public_keys=pub,
        threshold=t,
        unit=unit,
        round=round,
        timings=timer.t,
    )


class SecureAggregation:
    """Secure aggregation of one unit's sampled clients, called once per unit per round.

    Args:
        config: :class:`SecAggConfig` (default settings if ``None``).
        num_clients: L, the number of sampled clients per round; validated against the
            modulus (``L · rint(clip 2^f) < 2^(k−1)``) and the threshold now.

    Attributes:
        last_result_: the :class:`SecAggRoundResult` of the latest successful call.

    """

    def __init__(self, config: SecAggConfig | None = None, *, num_clients: int):
        self.config = config if config is not None else SecAggConfig()
        if not isinstance(self.config, SecAggConfig):
            raise ConfigError(f"config must be a SecAggConfig; got {type(self.config).__name__}")
        self.num_clients = self.config.check_clients(num_clients)
        self.threshold = self.config.threshold_for(self.num_clients)
        self.last_result_: SecAggRoundResult | None = None

    def aggregate(
        self,
        values: np.ndarray,
        *,
        unit: int,
        round: int,
        dropped: np.ndarray | None = None,
    ) -> np.ndarray:
        """Mean over the surviving clients of ``values[L, M]``, by the real protocol.

        ``dropped[u]`` (bool ``[L]``) means client u shared its keys and then vanished
        before sending its masked input: it is not in the mean, and its pairwise masks are
        removed by reconstructing its key. The result is the mean over the *survivors*
        ``~dropped``, equal bit-for-bit to ``quantized_mean(values, ~dropped, config)``.

        Raises:
            SecAggAbort: fewer than t survivors (or, with a sparse graph, too few share
                holders around some client, or a disconnected survivors' graph).

        """
        x = _check_values(values, self.num_clients)
        if dropped is None:
            stage = None
        else:
            d = np.asarray(dropped)
            if d.shape != (self.num_clients,) or d.dtype != bool:
                raise ConfigError(
                    f"dropped must be a bool array of shape [L={self.num_clients}]; got "
                    f"{d.dtype} {d.shape}"
                )
            stage = np.where(d, DROP_AFTER_SHARE, NEVER_DROP)
        res = run_secagg_round(x, self.config, unit=unit, round=round, drop_stage=stage)
        self.last_result_ = res
        return res.mean


def secure_mean(
    values: np.ndarray,
    *,
    config: SecAggConfig | None = None,
    unit: int,
    round: int,
    dropped: np.ndarray | None = None,
) -> np.ndarray:
    """Functional form of :meth:`SecureAggregation.aggregate`."""
    agg = SecureAggregation(config, num_clients=np.shape(values)[0] if np.ndim(values) else 0)
    return agg.aggregate(values, unit=unit, round=round, dropped=dropped)


def suggested_neighbours(num_clients: int) -> int:
    """Return a heuristic SecAgg+ degree, ``2⌈1.5 log2 L⌉`` (even; see docs/secagg.md)."""
    return min(2 * math.ceil(1.5 * math.log2(max(num_clients, 2))), max(2, num_clients - 2))
