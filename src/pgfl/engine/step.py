"""One GFL round as a pure step over blocks of units: local phase, messages, combination.

Equation numbers refer to "Privatized Graph Federated Learning" (Rizk, Vlaski & Sayed,
arXiv:2203.07105). One iteration ``i``:

1. server ``p`` samples ``L`` of its ``K`` clients without replacement;
2. each sampled client starts from ``w_{p,i−1}`` and runs ``E_pk`` SGD steps of size
   ``μ/E_pk`` on mini-batches of ``B_pk`` samples (eq. 3) — :func:`local_models`;
3. the server aggregates its clients' messages into ``ψ_p`` (eq. 7) with the curve's
   :class:`~pgfl.privacy.mechanisms.ClientAggregation` — :func:`local_phase`;
4. server ``m`` sends ``ψ_m + g_pm`` to each neighbour ``p`` (and itself), the noise coming
   from the curve's :class:`~pgfl.privacy.mechanisms.ServerNoise` — :func:`server_messages`;
5. server ``p`` combines what it receives, ``w_p = Σ_m a_pm (ψ_m + g_pm)`` (eq. 8) —
   :func:`combine_phase`.

The local phase of a block of units needs only that block's clients' data, models and
draws; the combination needs only the messages arriving at the block. Every draw is
keyed by ``(seed, stream, round, repetition, unit, index)`` (:class:`pgfl.rng.KeyedDraws`),
so a block computes exactly what the whole network computes for it: :func:`gfl_round`
gives the same bits whatever the block size, and a distributed backend can place blocks
in different processes and exchange only the server messages.

Array layout: a leading *curve* axis ``C`` (settings that vary between curves) and a
*repetition* axis ``R``: server models are ``W[C, R, P, M]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from pgfl.engine import compiled
from pgfl.engine.network import Links, Network, UnitBlock, scans_clients
from pgfl.engine.settings import CurveBatch, CurveSettings
from pgfl.privacy.mechanisms import RoundContext
from pgfl.rng import KeyedDraws

#: Rounds with at most this many mini-batch samples (all epochs) are gathered in one call.
GATHER_AT_ONCE = 1 << 16


def sample_clients(u: np.ndarray, L: int) -> np.ndarray:
    """``[R, P_b, L]`` indices: the ``L`` clients of smallest key ``u [R, P_b, K]`` per unit.

    With i.i.d. uniform keys this is ``L`` distinct clients of ``K``, uniformly at random.

    >>> sample_clients(np.array([[[0.9, 0.1, 0.5, 0.3]]]), 2)[0, 0].tolist()
    [1, 3]
    """
    return np.sort(np.argpartition(u, L - 1, axis=-1)[..., :L], axis=-1)


def floyd_clients(u: np.ndarray, K: int) -> np.ndarray:
    """``[R, P_b, L]`` indices: ``L`` distinct clients of ``K`` from ``u [R, P_b, L]`` (Floyd).

    Step ``i`` (``j = K − L + i``) takes ``t = min(⌊u_i (j + 1)⌋, j)``, or ``j`` if ``t``
    was taken before (R. W. Floyd's sampling algorithm, Bentley & Floyd, "Programming
    pearls: a sample of brilliance", CACM 30(9), 1987): with i.i.d. uniforms, a uniformly
    random subset, drawn from ``L`` numbers whatever ``K``. Sorted ascending.

    >>> floyd_clients(np.array([[[0.9, 0.1]]]), 10)[0, 0].tolist()   # ⌊0.9·9⌋, ⌊0.1·10⌋
    [1, 8]
    >>> floyd_clients(np.array([[[0.95, 0.85]]]), 10)[0, 0].tolist()  # ⌊0.85·10⌋ = 8 taken: 9
    [8, 9]
    """
    L = u.shape[-1]
    out = np.empty(u.shape, dtype=np.int64)
    for i in range(L):
        j = K - L + i
        t = np.minimum((u[..., i] * (j + 1)).astype(np.int64), j)
        taken = (out[..., :i] == t[..., None]).any(axis=-1)
        out[..., i] = np.where(taken, j, t)
    return np.sort(out, axis=-1)


def draw_clients(block: UnitBlock, draws: KeyedDraws) -> np.ndarray:
    """The sampled clients of a block's units, ``[R, P_b, L]`` (stream ``sampling``).

    Units of up to :data:`~pgfl.engine.network.SCAN_CLIENTS` clients take the ``L``
    smallest of ``K`` keyed uniforms (:func:`sample_clients`), larger ones Floyd's
    algorithm on ``L`` of them (:func:`floyd_clients`).
    """
    K = block.data.X.shape[1]
    if block.L == K:
        return np.broadcast_to(np.arange(K), (draws.reps.size, block.size, K))
    if not scans_clients(K, block.L):
        return floyd_clients(draws.uniform("sampling", (block.L,)), K)
    return sample_clients(draws.uniform("sampling", (K,)), block.L)


def local_models(
    W: np.ndarray, block: UnitBlock, curves: CurveBatch, draws: KeyedDraws, clients: np.ndarray
) -> np.ndarray:
    """Clients' local SGD (eq. 3): ``W[C, R, P_b, M]`` → local models ``[C, R, P_b, L, M]``.

    Sampled client ``(p, k)`` runs ``E_pk`` steps ``w ← w − (μ/E_pk) ∇Q(w; batch)`` from
    ``w_{p,i−1}``; a mini-batch is ``B_pk`` positions ``⌊u·N_pk⌋`` drawn with replacement,
    ``u`` the uniform of (slot, epoch, batch position) in stream ``batches``. The sampled
    clients of every repetition and unit are flattened into one axis and sorted by their
    number of epochs (most first), so that the clients still training at epoch ``e`` are a
    prefix of that axis: an epoch costs only its active clients. The curve axis is moved
    last (``Wk[n, M, C]``) so that every epoch is two batched matrix products shared by
    all curves (:meth:`pgfl.problems._Problem.gradient`).
    """
    data = block.data
    P, K, N, F = data.X.shape
    R, _, L = clients.shape
    M = W.shape[-1]
    unit = np.arange(P)[None, :, None]
    E_f = block.epochs[unit, clients].reshape(-1)
    order = np.argsort(-E_f, kind="stable")
    E_sorted = E_f[order]
    active = np.searchsorted(-E_sorted, -np.arange(int(E_sorted[0])), side="left")  # #{E > e}
    n_f = data.counts[unit, clients].reshape(-1)[order]
    base = ((unit * K + clients) * N).reshape(-1)[order]  # flat index of a client's 1st sample
    Z = data.Xy.reshape(-1, F + 1)  # features and target side by side: one gather per batch
    step = curves.mu / E_sorted[:, None, None]  # [n, 1, C]
    start = W.transpose(1, 2, 3, 0).reshape(R * P, M, -1)  # each client starts at its unit's model
    Wk = np.take(start, order // L, axis=0)
    if block.batch is None:
        rows = base[:, None] + np.arange(N)
        weight = (np.arange(N) < n_f[:, None]) / n_f[:, None]
        batch = np.take(Z, rows, axis=0)
    else:
        B_f = block.batch[unit, clients].reshape(-1)[order]
        b_max = block.b_max
        weight = (np.arange(b_max) < B_f[:, None]) / B_f[:, None]
        u = draws.uniform("batches", (L, block.e_max, b_max)).reshape(R * P * L, block.e_max, -1)
        position = u[order, : len(active)].transpose(1, 0, 2)  # [E, n, B]
        rows = base[:, None] + (position * n_f[:, None]).astype(np.int64)
        # small rounds gather every epoch's batches at once (fewer calls); large rounds
        # gather each epoch's active prefix only (less memory traffic)
        gathered = np.take(Z, rows, axis=0) if rows.size <= GATHER_AT_ONCE else None
    for e, k in enumerate(active):
        if block.batch is not None:
            batch = gathered[e] if gathered is not None else np.take(Z, rows[e, :k], axis=0)
        U, d = batch[:k, :, :F], batch[:k, :, F]
        Wk[:k] -= step[:k] * block.problem.gradient(Wk[:k], U, d, weight[:k], curves.clip)
    local = np.empty_like(Wk)
    local[order] = Wk
    return local.reshape(R, P, L, M, -1).transpose(4, 0, 1, 2, 3)


class LocalResult(NamedTuple):
    """The local phase of a block: aggregates and what the clients computed.

    Attributes:
        psi: the units' aggregates ``ψ_p``, ``[C, R, P_b, M]``.
        local: the sampled clients' local models ``w_pk``, ``[C, R, P_b, L, M]``.
        clients: the sampled clients, ``[R, P_b, L]``.
        aborted: units that kept ``w_{p,i−1}`` (secure aggregation aborted), ``[C, R, P_b]``.
        clipped: client messages with a coordinate clipped by the aggregation, ``[C, R]``.

    """

    psi: np.ndarray
    local: np.ndarray
    clients: np.ndarray
    aborted: np.ndarray
    clipped: np.ndarray


def _rows(a: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``a[index]`` along the curve axis, without a copy when ``index`` is all of it.

    ``index`` is a scheme group's curves: distinct and ascending, so as many as the axis
    means all of them.
    """
    if index.size == a.shape[0]:
        return a
    return a[index]


def local_phase(
    W: np.ndarray,
    block: UnitBlock,
    curves: CurveBatch,
    draws: KeyedDraws,
    iteration: int,
    kind: str | None = None,
) -> LocalResult:
    """Local SGD and the units' aggregates (eqs. 3 and 7) for one block; ``W[C, R, P_b, M]``.

    ``kind``: the local phase to run (:func:`pgfl.engine.compiled.local_phase_kind`, which
    reads the environment; a run of many rounds passes what it found once).
    """
    # the one dispatch point: numba kernels for the built-in losses (pgfl.engine.compiled),
    # a model's own fused local phase, or the numpy reference below
    kind = compiled.local_phase_kind(block.problem) if kind is None else kind
    clients = (compiled.draw_clients if kind == "compiled" else draw_clients)(block, draws)
    if kind == "compiled":
        local = compiled.local_models(W, block, curves, draws, clients)
    elif kind == "fused":
        local = block.problem.local_models(W, block, curves, draws, clients)
    else:
        local = local_models(W, block, curves, draws, clients)
    C, R, P = W.shape[:3]
    psi = np.empty_like(W)
    aborted = np.zeros((C, R, P), dtype=bool)
    clipped = np.zeros((C, R), dtype=np.int64)
    ctx = RoundContext(draws, block.start, iteration)
    for group in curves.client_groups:
        i = group.index
        out = group.cls.aggregate(
            group.schemes, _rows(W, i), _rows(local, i), curves.mu[i], curves.updates[i], ctx
        )
        psi[i] = out.psi
        if out.aborted is not None:
            aborted[i] = out.aborted
        if out.clipped is not None:
            clipped[i] = out.clipped
    return LocalResult(psi, local, clients, aborted, clipped)


def server_messages(
    psi: np.ndarray,
    links: Links,
    curves: CurveBatch,
    draws: KeyedDraws,
    start: int,
    iteration: int,
    supplied: Mapping[type, np.ndarray] | None = None,
) -> np.ndarray:
    """Messages ``ψ_m + g_pm`` on the links sent by a block, ``[C, R, n_links, M]``.

    ``psi[C, R, P_b, M]`` are the block's aggregates; ``links`` the links it sends
    (senders ``start..start+P_b-1``); the noise comes from each curve's server scheme.
    ``supplied``: the noise of a scheme class ``[C', R, n_links, M]`` drawn elsewhere (a
    deployed dealer's, :mod:`pgfl.deploy`) instead of its ``link_noise``.
    """
    messages = psi[:, :, links.src - start]
    ctx = RoundContext(draws, start, iteration)
    for group in curves.server_groups:
        if supplied is not None and group.cls in supplied:
            noise = supplied[group.cls]
        else:
            noise = group.cls.link_noise(group.schemes, links, psi.shape[-1], ctx)
        messages[group.index] += noise
    return messages


def combine_phase(messages: np.ndarray, links: Links, start: int, stop: int) -> np.ndarray:
    """``w_p = Σ_m a_pm (ψ_m + g_pm)`` (eq. 8) for receivers ``start..stop-1``.

    ``messages[C, R, n, M]`` arrive on ``links`` (all links into the block, sorted by
    receiver then sender); the result is ``[C, R, stop − start, M]``. Each receiver sums its
    incoming messages in sender order, so the bits do not depend on the blocking.
    """
    cache = links.__dict__.setdefault("_receiver_starts", {})  # per-run constant
    first = cache.get((start, stop))
    if first is None:
        first = cache[(start, stop)] = np.searchsorted(links.dst, np.arange(start, stop))
    return np.add.reduceat(messages * links.weight[:, None], first, axis=2)


class RoundResult(NamedTuple):
    """One GFL round and every party's view of it (public per-round API).

    Attributes:
        W: the servers' new models ``w_{p,i}``, ``[C, R, P, M]``.
        psi: each server's aggregate of its clients ``ψ_p`` (what the server learns from
            its clients), ``[C, R, P, M]``.
        messages: what travels on each link ``m → p`` of ``net.links``, ``ψ_m + g_pm``
            (what a neighbour or an eavesdropper sees), ``[C, R, n_links, M]``.
        local: the sampled clients' local models ``w_pk`` (each client's own view; its
            update is ``(w_{p,i−1} − w_pk)/μ``), ``[C, R, P, L, M]``, or ``None`` unless asked.
        clients: the sampled clients, ``[R, P, L]``.
        aborted: units that kept ``w_{p,i−1}``, ``[C, R, P]``.
        clipped: client messages clipped by the aggregation, ``[C, R]``.

    """

    W: np.ndarray
    psi: np.ndarray
    messages: np.ndarray
    local: np.ndarray | None
    clients: np.ndarray
    aborted: np.ndarray
    clipped: np.ndarray


def round_step(
    W: np.ndarray,
    blocks: Sequence[UnitBlock],
    links: Links,
    curves: CurveBatch,
    *,
    seed: int,
    iteration: int,
    reps: np.ndarray,
    keep_local: bool = False,
    kind: str | None = None,
) -> RoundResult:
    """One round over a network partitioned into ``blocks`` (contiguous, in order).

    ``kind``: the local phase (:func:`local_phase`; ``None``: looked up).
    """
    if len(blocks) == 1:  # the whole network in one block: no copies between blocks
        return _one_block_round(
            W, blocks[0], links, curves, seed, iteration, reps, keep_local, kind
        )
    psi = np.empty_like(W)
    C, R, P, _ = W.shape
    L = blocks[0].L
    aborted = np.zeros((C, R, P), dtype=bool)
    clipped = np.zeros((C, R), dtype=np.int64)
    clients = np.empty((R, P, L), dtype=np.int64)
    local = np.empty((*W.shape[:3], L, W.shape[3])) if keep_local else None
    draws = {}
    for b in blocks:
        s = slice(b.start, b.stop)
        draws[b.start] = KeyedDraws(seed, iteration, reps, b.units)
        out = local_phase(W[:, :, s], b, curves, draws[b.start], iteration, kind)
        psi[:, :, s], aborted[:, :, s], clients[:, s] = out.psi, out.aborted, out.clients
        clipped += out.clipped
        if local is not None:
            local[:, :, s] = out.local
    messages = np.empty((C, R, links.src.size, W.shape[3]))
    for b in blocks:
        out_links = links.out_of(b.start, b.stop)
        messages[:, :, out_links] = server_messages(
            psi[:, :, b.start : b.stop],
            links.subset(out_links),
            curves,
            draws[b.start],
            b.start,
            iteration,
        )
    new = np.empty_like(W)
    for b in blocks:
        into = links.into(b.start, b.stop)
        new[:, :, b.start : b.stop] = combine_phase(
            messages[:, :, into], links.subset(into), b.start, b.stop
        )
    return RoundResult(new, psi, messages, local, clients, aborted, clipped)


def _one_block_round(
    W, block, links, curves, seed, iteration, reps, keep_local, kind
) -> RoundResult:
    """:func:`round_step` for a single block (the same arithmetic, fewer arrays)."""
    draws = KeyedDraws(seed, iteration, reps, block.units)
    out = local_phase(W, block, curves, draws, iteration, kind)
    messages = server_messages(out.psi, links, curves, draws, 0, iteration)
    new = combine_phase(messages, links, 0, W.shape[2])
    clients = out.clients if out.clients.flags.writeable else out.clients.copy()
    local = out.local if keep_local else None
    return RoundResult(new, out.psi, messages, local, clients, out.aborted, out.clipped)


def gfl_round(
    W: np.ndarray,
    net: Network,
    curves: Sequence[CurveSettings] | CurveBatch,
    *,
    seed: int,
    iteration: int,
    reps: Sequence[int] | None = None,
    block_size: int | None = None,
    keep_local: bool = True,
) -> RoundResult:
    """One GFL iteration ``i`` from the servers' models ``W[C, R, P, M]``, with every view.

    Args:
        W: ``w_{p,i−1}`` per curve and repetition.
        net: the network.
        curves: the ``C`` curves' settings.
        seed: the run's root seed.
        iteration: ``i`` (1-based; part of every draw's key).
        reps: global repetition ids of ``W``'s ``R`` rows (default ``0..R−1``).
        block_size: units per block of the local phase (any value gives the same bits).
        keep_local: also return the clients' local models.

    One round of two units that each average their one client's gradient step:

    >>> from pgfl.data.federated import FederatedData
    >>> from pgfl.problems import LeastSquares
    >>> data = FederatedData(np.ones((2, 1, 1, 1)), np.array([[[1.0]], [[3.0]]]),
    ...                      np.ones((2, 1), dtype=int))
    >>> net = Network(data, LeastSquares(0.0), np.full((2, 2), 0.5), L=1,
    ...               epochs=np.ones((2, 1), dtype=int), batch=None)
    >>> r = gfl_round(np.zeros((1, 1, 2, 1)), net, [CurveSettings(mu=0.25)], seed=0, iteration=1)
    >>> r.psi[0, 0, :, 0].tolist(), r.W[0, 0, :, 0].tolist()   # w − μ·2(w − d)
    ([0.5, 1.5], [1.0, 1.0])

    """
    batch = curves if isinstance(curves, CurveBatch) else CurveBatch.of(curves, net)
    reps = np.arange(W.shape[1]) if reps is None else np.asarray(reps)
    return round_step(
        W,
        net.blocks(block_size),
        net.links,
        batch,
        seed=seed,
        iteration=iteration,
        reps=reps,
        keep_local=keep_local,
    )
