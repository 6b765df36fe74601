"""numba kernels of :mod:`pgfl.engine.compiled` (imported only when numba is installed).

Module-level functions so that ``cache=True`` stores the machine code on disk and later
processes load them instead of compiling.

Local SGD ("Privatized Graph Federated Learning", arXiv:2203.07105, eq. 3): sampled client
``(p, k)`` of repetition ``r`` runs ``E_pk`` steps ``w ← w − (μ_c/E_pk) ∇Q(w; batch)`` from
``w_{p,i−1}``, for every curve ``c``. A *work item* is one sampled client ``(r, p, slot)``
with all its curves (the curves share the client's mini-batch positions and samples, so
those are drawn and read once). Every item writes only its own rows of the output and
computes each curve's arithmetic in one fixed order, so the result does not depend on
which thread runs an item, in which order, or on how items are grouped into chunks:
bit-identical for any number of threads.

Parallel runs split the items into contiguous chunks of about equal *cost*
(``Σ E_pk (B_pk + 2)``: clients differ in epochs and batch sizes) and the worker threads
take chunks from a shared atomic counter (dynamic scheduling), so a thread that is slow or
descheduled on a shared machine takes fewer chunks (the round still waits for the chunk it
holds). Models with ``M = 2`` (the papers') are trained sample by sample with the model in
registers (:func:`_items_m2`), others a mini-batch at a time (:func:`_items_by_batch`):
the same expressions in the same order, so the same bits.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_ONE = np.uint64(1)
_SCALE53 = 2.0**-53
#: fixed cost of a client epoch, in sample gradients (load/store of the models, the step)
_EPOCH_COST = 2


@numba.njit(cache=True, inline="always", error_model="numpy")
def mix64(z):
    """SplitMix64's finalizer of one ``uint64`` (:func:`pgfl.rng.mix64`)."""
    z ^= z >> _S30
    z *= _M1
    z ^= z >> _S27
    z *= _M2
    z ^= z >> _S31
    return z


@numba.njit(cache=True, inline="always", error_model="numpy")
def round_key(stream_key, rnd):
    """``S = mix64(stream_key + (round + 1)·γ)``: a stream's key in round ``rnd``."""
    return mix64(stream_key + np.uint64(rnd + 1) * _GAMMA)


@numba.njit(cache=True, inline="always", error_model="numpy")
def cell_key(S, rep, unit):
    """Key of cell ``(rep, unit)`` of a stream in a round, as :meth:`pgfl.rng.KeyedDraws.keys`.

    ``mix64(G ⊕ S)`` with ``G = cell_keys(0, rep, unit) = mix64(mix64((rep + 1)·γ) +
    (unit + 1)·γ)`` and ``S`` = :func:`round_key`.
    """
    g = mix64(np.uint64(rep + 1) * _GAMMA)
    g = mix64(g + np.uint64(unit + 1) * _GAMMA)
    return mix64(g ^ S)


@numba.njit(cache=True, error_model="numpy")
def cell_keys(stream_key, rnd, reps, units):
    """``[R, P]`` keys of a stream's cells in round ``rnd`` (:func:`cell_key`)."""
    S = round_key(stream_key, rnd)
    out = np.empty((reps.size, units.size), dtype=np.uint64)
    for r in range(reps.size):
        for p in range(units.size):
            out[r, p] = cell_key(S, reps[r], units[p])
    return out


@numba.njit(cache=True, inline="always", error_model="numpy")
def keyed_uniform(key, n):
    """Entry ``n`` of a keyed cell, as :func:`pgfl.rng.uniforms_from_keys` computes it."""
    z = mix64(key + (np.uint64(n) + _ONE) * _GAMMA)
    return (np.float64(z >> _S11) + 0.5) * _SCALE53


@intrinsic
def _fetch_add(typingctx, counter, value):
    """Atomically ``counter[0] += value`` (``counter`` int64 ``[1]``); returns the old value."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None
    sig = types.int64(counter, types.int64)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", array.data, args[1], "monotonic")

    return sig, codegen


@intrinsic
def _prefetch(typingctx, array, index):
    """Hint the cache line of ``array.flat[index]`` (C-contiguous) into cache (no fault)."""
    if not isinstance(array, types.Array):
        return None
    sig = types.void(array, types.intp)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        ptr = builder.gep(data, [args[1]])
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [ptr, i32(0), i32(3), i32(1)])  # read, keep in all levels, data
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True, error_model="numpy")
def scratch(n, C, M):
    """A worker's scratch arrays for mini-batches of up to ``n`` samples, ``C`` curves, ``M``.

    ``off[2, n]`` flat offsets of this epoch's samples and the next's, ``marg[n]`` margins
    ``u_bᵀw``, ``ck[n]`` residual weights times clipping factors, ``u2[n]`` squared feature
    norms, ``wc[C, M]`` the curves' models between epochs, ``w[M]`` and ``g[M]`` one curve's
    model and gradient, ``last[2]`` the last cell ``r·P + p + 1`` and its key (:func:`_item`).
    """
    return (
        np.zeros((2, n), dtype=np.uint64), np.zeros(n), np.zeros(n), np.zeros(n),
        np.zeros((C, M)), np.zeros(M), np.zeros(M), np.zeros(2, dtype=np.uint64),
    )  # fmt: skip


@numba.njit(cache=True, inline="always", error_model="numpy")
def _residual_weight(loss, margin, d):
    """The ``c`` with ``∇_w loss(w; u, d) = c u`` at ``margin = uᵀw``.

    Least squares ``2(margin − d)``; logistic ``−d σ(−d margin)``, ``σ(z) = (1 + tanh(z/2))/2``.
    """
    if loss == 0:
        return 2.0 * (margin - d)
    return -d * (0.5 * (1.0 + np.tanh(0.5 * (-d * margin))))


@numba.njit(cache=True, inline="always", error_model="numpy")
def _kept(cw, u2, margin, w2, rho, clip, wt):
    """Per-sample clipping factor ``min(1, clip/‖∇‖) / B`` (``wt = 1/B``).

    ``‖∇‖²`` of the sample's gradient ``cw u + 2ρw`` is ``cw² ‖u‖² + 4ρ cw uᵀw + 4ρ² ‖w‖²``.
    """
    norm2 = cw * cw * u2 + (4.0 * rho) * cw * margin + (4.0 * rho * rho) * w2
    return min(1.0, clip / np.sqrt(max(norm2, 1e-300))) * wt


@numba.njit(cache=True, inline="always", error_model="numpy")
def _offsets(off, i, key, first, B, n_k, row0, F, full):
    """``off[i, b]`` = flat offset of mini-batch sample ``b``: row ``row0 + ⌊u_b n_k⌋`` × ``F``.

    ``u_b`` is entry ``first + b`` of the keyed cell ``key``; full batches take rows
    ``row0..row0+B-1``. Offsets are unsigned, so reads need no negative-index wrap-around.
    """
    for b in range(B):
        n = b if full else np.int64(keyed_uniform(key, first + b) * n_k)
        off[i, b] = np.uint64((row0 + n) * F)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _item(item, P, L, K, N, clients, epochs, batch, counts, full, S, reps, units, last):
    """Work item ``item`` (row-major over ``[R, P, L]``): ``(r, p, slot, E, B, n_k, key, row0)``.

    ``E``, ``B`` and ``n_k`` are the client's epochs, batch size (``n_k`` for full batches)
    and sample count, ``key`` its cell's key of stream ``batches``, ``row0`` the flat row of
    its first sample. ``last`` keeps the last cell and its key (a cell's items are
    consecutive: its key is computed once; ``last[0] = 0`` forgets it).
    """
    r = item // (P * L)
    rest = item - r * (P * L)
    p = rest // L
    slot = rest - p * L
    k = clients[r, p, slot]
    n_k = counts[p, k]
    B = n_k if full else batch[p, k]
    cell = np.uint64(r * P + p + 1)
    if last[0] != cell:
        last[0] = cell
        last[1] = cell_key(S, reps[r], units[p])
    return r, p, slot, epochs[p, k], B, n_k, last[1], (p * K + k) * N


@numba.njit(cache=True, inline="always", error_model="numpy")
def _items_m2(lo, hi, W, Xf, KNF, clients, epochs, batch, counts, S, reps, units, mu, clip, rho,
              loss, full, clipping, e_max, b_max, out, off, u2b, wc, last):  # fmt: skip
    """Work items ``lo..hi-1`` for ``M = 2`` (the papers'): sample by sample, in registers.

    The expressions and orders of :func:`_items_by_batch` (each sum starts from ``0.0`` and
    adds its terms in order), so the same bits; with two coordinates the model, gradient
    and margin stay in registers instead of memory, which halves the time per sample.
    The next epoch's samples (or the next client's first) are located and prefetched while
    this epoch computes: a data set larger than the core's cache (the papers' is 2.4 MB)
    is then read at the cache's speed, not memory's.
    """
    C, R, P = W.shape[:3]
    L = clients.shape[2]
    K, N, F = KNF
    one, two = np.uint64(1), np.uint64(2)
    if lo < hi:
        r, p, slot, E, B, n_k, key, row0 = _item(
            lo, P, L, K, N, clients, epochs, batch, counts, full, S, reps, units, last
        )
        _offsets(off, 0, key, slot * e_max * b_max, B, n_k, row0, F, full)
    cur = 0
    for item in range(lo, hi):
        r, p, slot, E, B, n_k, key, row0 = _item(
            item, P, L, K, N, clients, epochs, batch, counts, full, S, reps, units, last
        )
        wt = 1.0 / B
        for c in range(C):
            wc[c, 0] = W[c, r, p, 0]
            wc[c, 1] = W[c, r, p, 1]
        for e in range(E):
            nxt = 1 - cur
            if e + 1 < E:
                if full:  # a full batch is the same every epoch
                    nxt = cur
                else:
                    _offsets(off, nxt, key, (slot * e_max + e + 1) * b_max, B, n_k, row0, F,
                             full)  # fmt: skip
                    for b in range(B):
                        _prefetch(Xf, off[nxt, b])
            elif item + 1 < hi:  # the next client's first epoch
                r2, p2, s2, E2, B2, n2, key2, row2 = _item(
                    item + 1, P, L, K, N, clients, epochs, batch, counts, full, S, reps, units, last
                )
                _offsets(off, nxt, key2, s2 * e_max * b_max, B2, n2, row2, F, full)
                for b in range(B2):
                    _prefetch(Xf, off[nxt, b])
            if clipping and (e == 0 or not full):
                for b in range(B):
                    x0 = off[cur, b]
                    u2b[b] = 0.0 + Xf[x0] * Xf[x0] + Xf[x0 + one] * Xf[x0 + one]
            for c in range(C):
                w0 = wc[c, 0]
                w1 = wc[c, 1]
                ww = 0.0 + w0 * w0 + w1 * w1 if clipping else 0.0
                g0 = 0.0
                g1 = 0.0
                kept = 0.0
                for b in range(B):
                    x0 = off[cur, b]
                    u0 = Xf[x0]
                    u1 = Xf[x0 + one]
                    margin = 0.0 + u0 * w0 + u1 * w1
                    cw = _residual_weight(loss, margin, Xf[x0 + two])
                    kc = wt
                    if clipping:
                        kc = _kept(cw, u2b[b], margin, ww, rho, clip[c], wt)
                        kept += kc
                    ck = cw * kc
                    g0 = g0 + u0 * ck
                    g1 = g1 + u1 * ck
                step = mu[c] / E
                reg = 2.0 * rho * (kept if clipping else 1.0)
                wc[c, 0] = w0 - step * (g0 + reg * w0)
                wc[c, 1] = w1 - step * (g1 + reg * w1)
            cur = nxt
        for c in range(C):
            out[c, r, p, slot, 0] = wc[c, 0]
            out[c, r, p, slot, 1] = wc[c, 1]


@numba.njit(cache=True, inline="always", error_model="numpy")
def _items_by_batch(lo, hi, W, Xf, KNF, clients, epochs, batch, counts, S, reps, units, mu, clip,
                    rho, loss, full, clipping, e_max, b_max, out, off, marg, ckb, u2b, wc, w,
                    g, last):  # fmt: skip
    """Work items ``lo..hi-1``, any ``M``: local SGD of each sampled client, every curve.

    Per curve ``c`` and epoch (eq. 3), with ``κ_b = min(1, clip/‖∇_b‖)/B`` (``1/B`` without
    clipping) and the sums in these orders (fixed here; the numpy path sums in another
    order): ``margin_b = Σ_m u_bm w_m`` (m ascending), ``c_b`` = :func:`_residual_weight`,
    ``g_m = Σ_b u_bm (c_b κ_b)`` (b ascending, from 0), then
    ``w_m ← w_m − (μ_c/E)(g_m + 2ρ (Σ_b κ_b) w_m)`` (``Σ_b κ_b`` is ``1`` without clipping).
    The epoch's sample positions are drawn once and shared by the curves.

    A mini-batch at a time: all margins (feature by feature, so the ``B`` sums advance
    together instead of one long chain after another), all residual weights (the ``tanh``
    calls of a batch do not wait on each other), then ``g`` sample by sample, with the next
    epoch's samples (or the next client's first) prefetched meanwhile. :func:`_items_m2`
    computes the same expressions sample by sample.
    """
    C, R, P, M = W.shape
    L = clients.shape[2]
    K, N, F = KNF
    uM = np.uint64(M)
    if lo < hi:
        r, p, slot, E, B, n_k, key, row0 = _item(
            lo, P, L, K, N, clients, epochs, batch, counts, full, S, reps, units, last
        )
        _offsets(off, 0, key, slot * e_max * b_max, B, n_k, row0, F, full)
    cur = 0
    for item in range(lo, hi):
        r, p, slot, E, B, n_k, key, row0 = _item(
            item, P, L, K, N, clients, epochs, batch, counts, full, S, reps, units, last
        )
        wt = 1.0 / B
        for c in range(C):
            for m in range(M):
                wc[c, m] = W[c, r, p, m]
        for e in range(E):
            nxt = 1 - cur
            B_next = 0
            if e + 1 < E:
                if full:
                    nxt = cur
                else:  # the next epoch's samples; prefetched while this epoch computes
                    _offsets(off, nxt, key, (slot * e_max + e + 1) * b_max, B, n_k, row0, F,
                             full)  # fmt: skip
                    B_next = B
            elif item + 1 < hi:  # the next client's first epoch
                r2, p2, s2, E2, B2, n2, key2, row2 = _item(
                    item + 1, P, L, K, N, clients, epochs, batch, counts, full, S, reps, units, last
                )
                _offsets(off, nxt, key2, s2 * e_max * b_max, B2, n2, row2, F, full)
                B_next = B2
            for b in range(B_next):
                for j in range(0, F, 8):
                    _prefetch(Xf, off[nxt, b] + np.uint64(j))
                _prefetch(Xf, off[nxt, b] + uM)
            if clipping:
                for b in range(B):
                    x0 = off[cur, b]
                    s = 0.0
                    for m in range(M):
                        s += Xf[x0 + np.uint64(m)] * Xf[x0 + np.uint64(m)]
                    u2b[b] = s
            for c in range(C):
                w2 = 0.0
                for m in range(M):
                    w[m] = wc[c, m]
                    g[m] = 0.0
                    if clipping:
                        w2 += w[m] * w[m]
                kept = 0.0
                for b in range(B):
                    marg[b] = 0.0
                for m in range(M):
                    wm = w[m]
                    for b in range(B):
                        marg[b] += Xf[off[cur, b] + np.uint64(m)] * wm
                for b in range(B):
                    margin = marg[b]
                    cw = _residual_weight(loss, margin, Xf[off[cur, b] + uM])
                    kc = wt
                    if clipping:
                        kc = _kept(cw, u2b[b], margin, w2, rho, clip[c], wt)
                        kept += kc
                    ckb[b] = cw * kc
                for b in range(B):
                    x0 = off[cur, b]
                    ck = ckb[b]
                    for m in range(M):
                        g[m] += Xf[x0 + np.uint64(m)] * ck
                step = mu[c] / E
                reg = 2.0 * rho * (kept if clipping else 1.0)
                for m in range(M):
                    wc[c, m] = w[m] - step * (g[m] + reg * w[m])
            cur = nxt
        for c in range(C):
            for m in range(M):
                out[c, r, p, slot, m] = wc[c, m]


@numba.njit(cache=True, error_model="numpy")
def _run_items(lo, hi, W, Xf, KNF, clients, epochs, batch, counts, S, reps, units, mu, clip, rho,
               loss, full, clipping, by_sample, e_max, b_max, out, sc):  # fmt: skip
    """Work items ``lo..hi-1`` with the worker's :func:`scratch` ``sc``.

    One loop nest per mode (one loop whose body holds both optimized worse): with
    ``by_sample`` and ``M = 2`` sample by sample (:func:`_items_m2`), else a mini-batch at
    a time (:func:`_items_by_batch`). Compiled once (not inlined into the kernels: that
    doubled the compile time) and called once per chunk.
    """
    off, marg, ck, u2, wc, w, g, last = sc
    last[0] = 0  # a new round's key S: no cell's key is known
    if by_sample and W.shape[3] == 2:
        _items_m2(lo, hi, W, Xf, KNF, clients, epochs, batch, counts, S, reps, units, mu, clip,
                  rho, loss, full, clipping, e_max, b_max, out, off, u2, wc, last)  # fmt: skip
    else:
        _items_by_batch(lo, hi, W, Xf, KNF, clients, epochs, batch, counts, S, reps, units, mu,
                        clip, rho, loss, full, clipping, e_max, b_max, out, off, marg, ck, u2, wc,
                        w, g, last)  # fmt: skip


@numba.njit(cache=True, error_model="numpy")
def chunk_bounds(clients, epochs, batch, counts, full, n_chunks):
    """``bounds[n_chunks + 1]``: contiguous chunks of work items of about equal cost.

    The cost of item ``(r, p, slot)`` of client ``k`` is ``E_pk (B_pk + 2)`` (sample
    gradients plus a fixed cost per epoch; ``B_pk = N_pk`` for full batches). Chunk ``j``
    is items ``bounds[j]..bounds[j+1]-1``; no chunk is empty when there are at least
    ``n_chunks`` items.
    """
    R, P, L = clients.shape
    items = R * P * L
    n_chunks = max(1, min(n_chunks, items))
    cost = np.empty(items)
    total = 0.0
    item = 0
    for r in range(R):
        for p in range(P):
            for slot in range(L):
                k = clients[r, p, slot]
                B = counts[p, k] if full else batch[p, k]
                total += epochs[p, k] * (B + _EPOCH_COST)
                cost[item] = total
                item += 1
    bounds = np.empty(n_chunks + 1, dtype=np.int64)
    bounds[0] = 0
    j = 1  # the chunk to close next
    for item in range(items):
        if j == n_chunks:
            break
        # close chunk j after the item that brings the running cost to j/n_chunks of the
        # total, or when only one item per later chunk is left
        if cost[item] >= total * j / n_chunks or items - (item + 1) == n_chunks - j:
            bounds[j] = item + 1
            j += 1
    bounds[n_chunks] = items
    return bounds


@numba.njit(cache=True, parallel=True, nogil=True, error_model="numpy")
def local_sgd(W, Xy, clients, epochs, batch, counts, stream_key, rnd, reps, units, mu, clip, rho,
              loss, full, clipping, by_sample, e_max, b_max, out, threads, n_chunks,
              scratch_n):  # fmt: skip
    """Local SGD of every sampled client of every curve and repetition (eq. 3), in place.

    ``W[C, R, P, M]`` start models, ``Xy[P, K, N, M+1]`` samples with the target last,
    ``clients[R, P, L]``, ``epochs``/``batch``/``counts`` ``[P, K]``; the mini-batch draws are
    those of stream ``batches`` (key ``stream_key``) in round ``rnd`` for repetitions ``reps[R]``
    and units ``units[P]`` (:func:`cell_key`); ``loss`` 0 least squares, 1 logistic; result in
    ``out[C, R, P, L, M]``. The ``R·P·L`` work items are split into ``n_chunks`` chunks of
    about equal cost (:func:`chunk_bounds`); ``threads`` workers (numba's thread count:
    one per thread) take chunks from an atomic counter until none is left; ``by_sample``:
    ``M = 2`` models sample by sample (:func:`_run_items`). ``scratch_n`` ≥ the largest
    mini-batch.
    """
    bounds = chunk_bounds(clients, epochs, batch, counts, full, n_chunks)
    n_chunks = bounds.size - 1
    workers = min(threads, n_chunks)
    taken = np.zeros(1, dtype=np.int64)
    Xf, KNF = Xy.reshape(-1), Xy.shape[1:]
    S = round_key(stream_key, rnd)
    for _ in numba.prange(workers):
        sc = scratch(scratch_n, W.shape[0], W.shape[3])
        while True:
            j = _fetch_add(taken, 1)
            if j >= n_chunks:
                break
            _run_items(bounds[j], bounds[j + 1], W, Xf, KNF, clients, epochs, batch, counts, S,
                       reps, units, mu, clip, rho, loss, full, clipping, by_sample, e_max, b_max,
                       out, sc)  # fmt: skip


@numba.njit(cache=True, nogil=True, error_model="numpy")
def local_sgd_serial(W, Xy, clients, epochs, batch, counts, stream_key, rnd, reps, units, mu,
                     clip, rho, loss, full, clipping, by_sample, e_max, b_max, out,
                     scratch_n):  # fmt: skip
    """:func:`local_sgd` on the calling thread (small rounds: no thread start-up).

    ``np.int64(0)``, not the literal ``0``: a literal would type ``_run_items`` differently
    from the parallel kernel's call and compile it a second time.
    """
    sc = scratch(scratch_n, W.shape[0], W.shape[3])
    items = clients.shape[0] * clients.shape[1] * clients.shape[2]
    _run_items(np.int64(0), items, W, Xy.reshape(-1), Xy.shape[1:], clients, epochs, batch, counts,
               round_key(stream_key, rnd), reps, units, mu, clip, rho, loss, full, clipping,
               by_sample, e_max, b_max, out, sc)  # fmt: skip


@numba.njit(cache=True, inline="always", error_model="numpy")
def _kth_smallest(a, n, kth):
    """The ``kth`` smallest (0-based) of ``a[:n]`` (quickselect; reorders ``a[:n]``)."""
    lo, hi = 0, n - 1
    while lo < hi:
        pivot = a[(lo + hi) // 2]
        i, j = lo, hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        if kth <= j:
            hi = j
        elif kth >= i:
            lo = i
        else:
            break
    return a[kth]


@numba.njit(cache=True, inline="always", error_model="numpy")
def _scan_cell(key, K, L, sigmas, cand_u, cand_k, sel, row):
    """The ``L`` clients of smallest keyed uniform of one cell, ascending, into ``row[L]``.

    Scratch ``cand_u[K]``, ``cand_k[K]``, ``sel[K]``. One pass computes the ``K`` uniforms
    and keeps as candidates those below ``(L + σ√L + σ)/K`` with ``σ = sigmas``, about
    ``σ`` standard deviations above the ``L``-th smallest's mean ``L/K`` (all ``K`` if fewer
    than ``L`` pass, which any ``sigmas`` leaves correct, only slower); the ``L``-th
    smallest candidate ``τ`` is found by quickselect, and the candidates ``≤ τ``, in client
    order, are the sample: the ``L`` smallest of all ``K`` (uniforms are distinct with
    probability 1 − O(K²/2⁵³)).
    """
    for k in range(K):  # a loop without dependences: vectorized
        sel[k] = keyed_uniform(key, k)
    threshold = (L + sigmas * np.sqrt(L) + sigmas) / K
    n = 0
    for k in range(K):
        v = sel[k]
        cand_u[n] = v
        cand_k[n] = k
        n += 1 if v < threshold else 0
    if n < L:  # too few below the threshold (rare): every client is a candidate
        for k in range(K):
            cand_u[k] = sel[k]
            cand_k[k] = k
        n = K
    for i in range(n):
        sel[i] = cand_u[i]
    tau = _kth_smallest(sel, n, L - 1)
    j = 0
    for i in range(n):
        if cand_u[i] <= tau and j < L:
            row[j] = cand_k[i]
            j += 1


@numba.njit(cache=True, inline="always", error_model="numpy")
def _floyd_cell(key, K, L, table, row):
    """``L`` distinct clients of ``K`` by Floyd's algorithm, ascending, into ``row[L]``.

    Step ``i = 0..L−1`` (``j = K − L + i``) takes ``t = min(⌊u_i (j + 1)⌋, j)``, ``u_i``
    entry ``i`` of the keyed cell, or ``j`` itself if ``t`` was taken before: a uniformly
    random subset from ``L`` numbers, without looking at the other clients
    (:func:`pgfl.engine.step.floyd_clients` is the numpy version). ``table`` (a power of
    two ≥ ``2L`` entries) is the open-addressing set of the clients taken.
    """
    mask = np.uint64(table.size - 1)
    for i in range(table.size):
        table[i] = -1
    for i in range(L):
        j = K - L + i
        t = np.int64(keyed_uniform(key, i) * (j + 1))
        if t > j:
            t = j
        h = (np.uint64(t) * _GAMMA) & mask
        while table[h] != -1 and table[h] != t:
            h = (h + _ONE) & mask
        if table[h] == t:  # taken: j is new (every earlier pick is < j)
            t = j
            h = (np.uint64(t) * _GAMMA) & mask
            while table[h] != -1:
                h = (h + _ONE) & mask
        table[h] = t
        row[i] = t
    row.sort()


@numba.njit(cache=True, error_model="numpy")
def sampler_scratch(K, L, scan):
    """A worker's scratch for :func:`sample_cell`: ``(cand_u, cand_k, sel, table)``."""
    n = K if scan else 1
    size = 1
    while size < 2 * L:
        size *= 2
    table = np.empty(1 if scan else size, dtype=np.int64)
    return np.empty(n), np.empty(n, dtype=np.int64), np.empty(n), table


@numba.njit(cache=True, inline="always", error_model="numpy")
def sample_cell(key, K, L, scan, sigmas, sc, row):
    """One cell's ``L`` clients, ascending, into ``row``.

    The ``L`` smallest of ``K`` keyed uniforms (``scan``, :func:`_scan_cell`) or Floyd's
    algorithm (:func:`_floyd_cell`), as :func:`pgfl.engine.network.scans_clients` says
    (``K`` up to :data:`~pgfl.engine.network.SCAN_CLIENTS`); ``sc``: :func:`sampler_scratch`.
    """
    cand_u, cand_k, sel, table = sc
    if scan:
        _scan_cell(key, K, L, sigmas, cand_u, cand_k, sel, row)
    else:
        _floyd_cell(key, K, L, table, row)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def sample_clients(stream_key, rnd, reps, units, K, out, scan=True, sigmas=4.0):
    """Per cell ``(r, p)``, its ``L`` sampled clients, into ``out[R, P, L]`` (ascending).

    The uniforms are the entries of cell ``(reps[r], units[p])`` of stream ``sampling`` (key
    ``stream_key``) in round ``rnd`` (:func:`cell_key`), as
    :func:`pgfl.engine.step.draw_clients` uses them (:func:`sample_cell`).
    """
    S = round_key(stream_key, rnd)
    R, P, L = out.shape
    sc = sampler_scratch(K, L, scan)
    for r in range(R):
        for p in range(P):
            sample_cell(cell_key(S, reps[r], units[p]), K, L, scan, sigmas, sc, out[r, p])


@numba.njit(cache=True, parallel=True, nogil=True, error_model="numpy")
def sample_clients_parallel(stream_key, rnd, reps, units, K, out, threads, scan=True, sigmas=4.0):
    """:func:`sample_clients` with the cells split over ``threads`` (cells cost the same)."""
    R, P, L = out.shape
    S = round_key(stream_key, rnd)
    workers = min(threads, R * P)
    for t in numba.prange(workers):
        sc = sampler_scratch(K, L, scan)
        for cell in range(t * R * P // workers, (t + 1) * R * P // workers):
            r = cell // P
            p = cell - r * P
            sample_cell(cell_key(S, reps[r], units[p]), K, L, scan, sigmas, sc, out[r, p])
