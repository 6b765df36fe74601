"""The secure-aggregation protocol of one unit and one round (Bonawitz et al. 2017).

The papers privatize the client → server link of each federated unit with pairwise masks
that cancel in the server's sum, ``Σ_{k∈L_{p,i}} g_{p,k,i} = 0`` (Rizk, Vlaski & Sayed,
"Privatized Graph Federated Learning", arXiv:2203.07105, §III-C, eq. 48; Rizk & Sayed,
"A Graph Federated Architecture with Privacy Preserving Learning", SPAWC 2021,
arXiv:2104.13215, §III-D, eq. 23), agreed by Diffie–Hellman over a public channel.
:func:`run_secagg_round` runs the full semi-honest protocol of Bonawitz et al. (CCS 2017,
Fig. 4), with the optional sparse neighbour graph of SecAgg+ (Bell et al., CCS 2020):

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

Simulation note: all clients of a unit run in one process, so each pair's X25519
agreement is computed once (by the lower-indexed client) and used by both parties —
DH is symmetric, a test checks that both sides agree — and the pair's mask is expanded
once and added to one party's vector and subtracted from the other's. The per-pair work
runs on worker processes (``workers``); the secret randomness is drawn beforehand on the
calling thread, so the transcript does not depend on how many workers ran it.

>>> cfg = SecAggConfig(frac_bits=8, clip=4.0)
>>> x = np.array([[0.5, -1.0], [1.5, 2.0], [1.0, 0.0]])
>>> SecureAggregation(cfg, num_clients=3).aggregate(x, unit=0, round=0).tolist()
[1.0, 0.3333333333333333]
>>> keep = np.array([True, False, True])   # client 1 drops after sharing its keys
>>> secure_mean(x, config=cfg, unit=0, round=1, dropped=~keep).tolist()
[0.75, -0.5]
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from pgfl.privacy.secagg import shamir
from pgfl.privacy.secagg.config import SecAggAbort, SecAggConfig, SecAggProtocolError
from pgfl.privacy.secagg.crypto import (
    SECRET_BYTES,
    PairTask,
    hkdf_sha256,
    info,
    keystream,
    public_keys,
    run_pairs,
    undo_pair_masks,
)
from pgfl.privacy.secagg.fixed_point import decode_mean, encode, reduce_mod
from pgfl.privacy.secagg.graph import edges, neighbour_graph, slot, sparse_abort_reason
from pgfl.privacy.secagg.pool import Pool, chunks, default_workers
from pgfl.validation import ConfigError, check_int

__all__ = [
    "DROP_AFTER_ADVERTISE",
    "DROP_AFTER_MASKED_INPUT",
    "DROP_AFTER_SHARE",
    "NEVER_DROP",
    "SecAggRoundResult",
    "SecureAggregation",
    "ShareVault",
    "recover_secrets",
    "run_secagg_round",
    "secure_mean",
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


class ShareVault:
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


def _request_shares(vault: ShareVault, b_for, s_for, n_included: int, included=None):
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


def _check_codes(values: np.ndarray, config: SecAggConfig) -> np.ndarray:
    """Codes ``[L, M]``: unsigned integers below ``2^k``."""
    x = np.asarray(values)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1 or x.dtype.kind != "u":
        raise ConfigError(
            f"encoded values must be a 2-D unsigned integer array [L, M]; got {x.dtype} {x.shape}"
        )
    if x.size and int(x.max()) >> config.modulus_bits:
        raise ConfigError(f"encoded values must lie in [0, 2^{config.modulus_bits})")
    return x


def _drop_stages(drop_stage: np.ndarray | None, L: int) -> np.ndarray:
    """``int [L]`` stage at which each client vanishes (validated), default: never."""
    if drop_stage is None:
        return np.zeros(L, dtype=np.int64)
    stage = np.asarray(drop_stage)
    if stage.shape != (L,) or stage.dtype.kind not in "iu":
        raise ConfigError(
            f"drop_stage must be an integer array of shape [L={L}]; got {stage.dtype} {stage.shape}"
        )
    if stage.size and (stage.min() < 0 or stage.max() > 3):
        raise ConfigError("drop_stage values must be in [0, 3]")
    return stage


@dataclass(eq=False)
class _Round:
    """The state of one round as it advances through the protocol's phases."""

    x: np.ndarray
    config: SecAggConfig
    unit: int
    round: int
    t: int
    stage: np.ndarray
    randbytes: RandBytes
    pool: Pool
    timer: _Timer
    encoded: bool = False

    def __post_init__(self) -> None:
        self.L, self.M = self.x.shape
        self.dtype = self.config.dtype
        u1 = np.ones(self.L, dtype=bool)  # everybody advertised
        self.u2 = u1 & (self.stage != DROP_AFTER_ADVERTISE)  # sent their shares
        self.u3 = self.u2 & (self.stage != DROP_AFTER_SHARE)  # masked input arrived
        self.u4 = self.u3 & (self.stage != DROP_AFTER_MASKED_INPUT)  # answer the unmasking
        self.survivors = (("advertised keys", u1), ("shared keys", self.u2))

    def abort(self, reason: str) -> SecAggAbort:
        """The abort of this round, with the number of survivors."""
        return SecAggAbort(reason, unit=self.unit, round=self.round, survivors=int(self.u3.sum()))

    def advertise_keys(self) -> None:
        """Round 0: fresh X25519 key pairs from the secure source, public keys broadcast.

        The secret bytes are drawn here, in this order, whatever the number of workers.
        """
        t0 = time.perf_counter()
        L = self.L
        c_bytes = [self.randbytes(32) for _ in range(L)]
        s_bytes = [self.randbytes(32) for _ in range(L)]
        self.raw = c_bytes + s_bytes  # X25519 private keys, raw (workers make key objects)
        parts = chunks(2 * L, self.pool.tasks)
        pubs = sum(
            self.pool.map(public_keys, [self.raw[r.start : r.stop] for r in parts], 2 * L), []
        )
        self.pub = list(zip(pubs[:L], pubs[L:], strict=True))
        self.timer.add("keygen", t0)
        for name, s_ in self.survivors:
            if int(s_.sum()) < self.t:
                raise self.abort(f"{int(s_.sum())} clients {name} < threshold t={self.t}")
        self.holders = neighbour_graph(L, self.config, unit=self.unit, round=self.round)
        # public keys as received by each client from the server's broadcast
        self.s_pk = [X25519PublicKey.from_public_bytes(p[1]) for p in self.pub]

    def share_keys(self) -> None:
        """Round 1: self-mask seeds drawn, ``b_u`` and ``s_u^SK`` Shamir-shared over N[u]."""
        t0 = time.perf_counter()
        L, h = self.L, self.holders.shape[1]
        self.b_seed = [self.randbytes(SECRET_BYTES) for _ in range(L)]
        secrets = np.concatenate(
            [shamir.bytes_to_field(self.b_seed), shamir.bytes_to_field(self.raw[L:])], axis=1
        )  # [L, 2C]
        self.C = shamir.chunks_for(SECRET_BYTES)
        self.owners = owners = np.flatnonzero(self.u2)
        if h == L:  # complete graph: one Vandermonde for all owners, then u's holder order
            by_id = shamir.share_field(
                secrets[owners], np.arange(1, L + 1), self.t, randbytes=self.randbytes
            )
            shares = np.take_along_axis(by_id, self.holders[owners][:, :, None], axis=1)
        else:
            shares = shamir.share_field(
                secrets[owners], self.holders[owners] + 1, self.t, randbytes=self.randbytes
            )
        self.shares = shares  # [|U2|, h, 2C]; shares[i, j] is held by holders[owners[i], j]
        self.timer.add("shamir_share", t0)

    def pair_tasks(self) -> tuple[list[PairTask], int]:
        """The per-pair work u < v of rounds 1-2, split over the pool; and the pair count."""
        eu, ev = edges(self.holders)
        act = self.u2[eu] & self.u2[ev]  # channels between clients that both share
        pair = act & (self.u3[eu] | self.u3[ev])  # masks that end up in some survivor's vector
        owner_of = np.full(self.L, -1, dtype=np.int64)
        owner_of[self.owners] = np.arange(self.owners.size)
        pairs = np.stack(
            [eu, ev, slot(self.holders, eu, ev), slot(self.holders, ev, eu), act, pair], axis=1
        ).tolist()
        selfs = [(u, self.b_seed[u]) for u in np.flatnonzero(self.u3).tolist()]
        L, pub = self.L, self.pub
        common = dict(
            unit=self.unit, round=self.round, dtype=np.dtype(self.dtype).str, M=self.M, L=L,
            c_sk=self.raw[:L], c_pk=[p[0] for p in pub], s_sk=self.raw[L:],
            s_pk=[p[1] for p in pub], payload=self.shares.astype("<u4"), owner_of=owner_of,
        )  # fmt: skip
        e_parts = chunks(len(pairs), self.pool.tasks)
        s_parts = chunks(len(selfs), len(e_parts))
        s_parts += [range(0)] * (len(e_parts) - len(s_parts))
        tasks = [
            PairTask(
                **common, edges=pairs[er.start : er.stop], self_seeds=selfs[sr.start : sr.stop]
            )
            for er, sr in zip(e_parts, s_parts, strict=True)
        ]
        return tasks, len(pairs)

    def masked_inputs(self) -> list[ShareVault]:
        """Rounds 1-2: shares delivered through the server, masked inputs ``y_u`` formed.

        Returns each client's vault of the shares it holds.
        """
        t0 = time.perf_counter()
        L, h, C = self.L, self.holders.shape[1], self.C
        received = np.zeros((L, h, 2 * C), dtype=np.int64)  # [v, j]: share of holders[v, j]
        has = np.zeros((L, h), dtype=bool)
        received[self.owners, 0] = self.shares[:, 0]  # u keeps its own share
        has[self.owners, 0] = True
        tasks, n_pairs = self.pair_tasks()
        y = self.x.astype(self.dtype) if self.encoded else encode(self.x, self.config)
        results = self.pool.map(run_pairs, tasks, n_pairs)
        for acc, dest, got, times in results:
            y += acc
            received[dest[:, 0], dest[:, 1]] = got
            has[dest[:, 0], dest[:, 1]] = True
            for phase, sec in times.items():
                self.timer.t[phase] = self.timer.t.get(phase, 0.0) + sec
        # the busiest worker's CPU time: the pair pass's wall time on idle cores
        self.timer.t["pairs_cpu_max"] = max(r[3]["pairs_cpu"] for r in results)
        t0 = self.timer.add("pairs_wall", t0)
        vaults = [ShareVault(v, self.t) for v in range(L)]
        for v in range(L):
            js = np.flatnonzero(has[v])
            us = self.holders[v, js].tolist()
            rows = received[v, js]
            vaults[v].b = dict(zip(us, rows[:, :C], strict=True))
            vaults[v].s = dict(zip(us, rows[:, C:], strict=True))
        self.y = reduce_mod(y, self.config)
        self.y[~self.u3] = 0  # nothing arrives from clients that vanished
        self.timer.add("masking", t0)
        return vaults

    def collect_shares(self, vaults: list[ShareVault]) -> tuple[dict, dict]:
        """Round 3, requests: shares of ``b_u`` (u ∈ U3) and of ``s_u^SK`` (u ∈ U2 − U3)."""
        reason = sparse_abort_reason(self.holders, self.u2, self.u3, self.u4, self.t)
        if reason is not None:
            raise self.abort(reason)
        b_for_all = np.flatnonzero(self.u3)
        s_for_all = np.flatnonzero(self.u2 & ~self.u3)
        n3 = int(self.u3.sum())
        got_b: dict[int, list[tuple[int, np.ndarray]]] = {int(u): [] for u in b_for_all}
        got_s: dict[int, list[tuple[int, np.ndarray]]] = {int(u): [] for u in s_for_all}
        is_b, is_s = np.zeros(self.L, dtype=bool), np.zeros(self.L, dtype=bool)
        is_b[b_for_all], is_s[s_for_all] = True, True
        for v in np.flatnonzero(self.u4).tolist():
            nb = self.holders[v]  # N[v]: the owners whose shares v holds (undirected graph)
            rb, rs = _request_shares(vaults[v], nb[is_b[nb]], nb[is_s[nb]], n3, self.u3)
            for u, sh in rb.items():
                got_b[u].append((v, sh))
            for u, sh in rs.items():
                got_s[u].append((v, sh))
        return got_b, got_s

    def recover(self, got: dict[int, list[tuple[int, np.ndarray]]]) -> dict[int, bytes]:
        """Reconstruct each owner's secret from its first t shares."""
        return recover_secrets(got, self.t)

    def unmask(self, vaults: list[ShareVault]) -> np.ndarray:
        """Round 3, server: remove the survivors' self masks and dropped clients' pair masks."""
        t0 = time.perf_counter()
        total = self.y[self.u3].sum(axis=0, dtype=self.dtype)
        got_b, got_s = self.collect_shares(vaults)
        rec_b, rec_s = self.recover(got_b), self.recover(got_s)
        t0 = self.timer.add("unmask_reconstruct", t0)
        M, dtype = self.M, self.dtype
        correction = np.zeros(M, dtype=dtype)
        for u, bu in rec_b.items():
            sk = hkdf_sha256(bu, info(b"self", self.unit, self.round, u, 0))
            correction += np.frombuffer(keystream(sk, M * np.dtype(dtype).itemsize), dtype=dtype)
        redo: list[tuple[X25519PrivateKey, int, int]] = []  # (key of dropped u, u, surviving v)
        for u, raw in rec_s.items():
            key_u = X25519PrivateKey.from_private_bytes(raw)
            if key_u.public_key().public_bytes_raw() != self.pub[u][1]:
                raise SecAggProtocolError(
                    f"reconstructed key of client {u} does not match its public key"
                )
            redo += [(key_u, u, v) for v in self.holders[u, 1:].tolist() if self.u3[v]]
        if redo:
            correction += undo_pair_masks(redo, self.s_pk, self.unit, self.round, M, dtype)
        self.timer.add("unmask_masks", t0)
        return reduce_mod(total - correction, self.config)


def run_secagg_round(
    values: np.ndarray,
    config: SecAggConfig,
    *,
    unit: int,
    round: int,
    drop_stage: np.ndarray | None = None,
    randbytes: RandBytes = os.urandom,
    workers: int | None = None,
    encoded: bool = False,
) -> SecAggRoundResult:
    """Run one full round of the protocol for one unit; return the mean over U3.

    Args:
        values: ``[L, M]`` the sampled clients' real vectors, or with ``encoded`` their
            codes already in ``[0, 2^k)`` (unsigned integers: a client's own encoding,
            e.g. distributed DP's, :mod:`pgfl.privacy.distributed`), summed as they are.
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
            cryptography (``None``: :func:`~pgfl.privacy.secagg.pool.default_workers`,
            the usable cores). The result, transcript and secret draws are the same for
            every value.
        encoded: ``values`` are codes mod 2^k (``result.sum_residues`` is then their sum
            over U3 mod 2^k; ``result.mean`` decodes it as fixed point of the config).

    Returns:
        :class:`SecAggRoundResult`.

    Raises:
        SecAggAbort: too few survivors or share holders, or a disconnected sparse graph.
        ConfigError: bad inputs.

    """
    x = _check_codes(values, config) if encoded else _check_values(values)
    L, _ = x.shape
    config.check_clients(L)
    t = config.threshold_for(L)
    unit = check_int("unit", unit, lo=0, hi=2**63 - 1)
    round = check_int("round", round, lo=0, hi=2**63 - 1)
    stage = _drop_stages(drop_stage, L)
    workers = default_workers() if workers is None else check_int("workers", workers, lo=1, hi=256)
    timer = _Timer()
    t_start = time.perf_counter()
    state = _Round(x, config, unit, round, t, stage, randbytes, Pool(workers), timer, encoded)
    state.advertise_keys()
    state.share_keys()
    vaults = state.masked_inputs()
    total = state.unmask(vaults)
    t0 = time.perf_counter()
    n3 = int(state.u3.sum())
    mean = decode_mean(total, n3, config)
    timer.add("decode", t0)
    timer.t["total"] = time.perf_counter() - t_start
    return SecAggRoundResult(
        mean=mean,
        sum_residues=total,
        included=state.u3,
        masked_inputs=state.y,
        public_keys=state.pub,
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


def recover_secrets(got: dict[int, list[tuple[int, np.ndarray]]], t: int) -> dict[int, bytes]:
    """Each owner's secret from its first ``t`` shares ``(holder, share)`` (Shamir)."""
    if not got:
        return {}
    us = list(got)
    xs = np.array([[v + 1 for v, _ in got[u][:t]] for u in us], dtype=np.int64)
    ys = np.array([[sh for _, sh in got[u][:t]] for u in us], dtype=np.int64)
    secrets = shamir.field_to_bytes(shamir.reconstruct_field(xs, ys), SECRET_BYTES)
    return dict(zip(us, secrets, strict=True))
