"""numba kernels of :mod:`pgfl.engine.rounds`: whole GFL rounds, several per call.

Imported only when numba is installed. One call runs ``T`` rounds of "Privatized Graph
Federated Learning" (Rizk, Vlaski & Sayed, arXiv:2203.07105) for every curve and
repetition: client sampling, local SGD (eq. 3, :func:`pgfl.engine._kernels._run_items`),
the units' aggregates with client noise (eq. 7; journal eqs. 54–55), the server
messages with link noise and their combination (eq. 8), the divergence check and the
history of server models. Every floating-point operation is the one the numpy round of
:mod:`pgfl.engine.step` performs, in the same order, so the results are equal bit for
bit:

* ``x.mean(axis)`` over the sampled clients: numpy adds the ``L`` terms one after the
  other into ``0.0`` when ``M > 1`` (its inner loop runs over the coordinates) and by
  pairwise summation when ``M = 1`` (its inner loop is then the reduction), then divides
  by ``L`` (:func:`_mean_slots`);
* ``np.add.reduceat`` over a receiver's links computes ``x₀ + pairwise(x₁, x₂, …)``
  (:func:`_combine`), numpy's pairwise summation being eight partial sums for 8–128 terms
  and halves above (:func:`_pairwise`);
* the noise values themselves are computed by numpy before the call
  (:func:`pgfl.rng.unit_noise` of :func:`keyed_uniforms`), because numpy's ``log1p`` (a
  vectorized implementation on AVX-512 machines) and glibc's differ in the last bit for
  about 7% of arguments.

Threads: the work of a call is a sequence of *phases* (sampling every round's clients,
cost-balanced chunks of each round's local SGD, then each round's trials ``(c, r)``).
Every worker runs the same sequence; it takes items of the current phase from an atomic
counter, adds what it finished to a second counter, and waits until the phase's items
are all finished before the next phase (spinning briefly, then yielding its processor).
No worker ever waits for another to *start*, only for items a running worker took, so a
call finishes whether the workers run at once, one after the other, or on one thread
(:func:`rounds_serial`). Each item writes only its own outputs in one fixed order: the
bits do not depend on the number of workers.
"""

from __future__ import annotations

import platform

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from pgfl.engine._kernels import (
    _run_items,
    cell_key,
    chunk_bounds,
    keyed_uniform,
    round_key,
    sample_cell,
    sampler_scratch,
    scratch,
)
from pgfl.engine.metrics import DIVERGENCE_BOUND

#: numpy's pairwise summation: blocks of at most this many terms are summed with 8
#: partial sums (``PW_BLOCKSIZE`` in numpy's ``loops_utils.h.src``).
_PW_BLOCK = 128
#: A waiting worker spins this many times (``pause`` on x86) before it yields its processor.
_SPINS = 2000
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
_sched_yield = types.ExternalFunction("sched_yield", types.int32())


@intrinsic
def _atomic_add(typingctx, array, index, value):
    """``array[index] += value`` atomically (sequentially consistent); the old value."""
    if not (isinstance(array, types.Array) and array.dtype == types.int64):
        return None
    sig = types.int64(array, types.intp, types.int64)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.atomic_rmw("add", builder.gep(data, [args[1]]), args[2], "seq_cst")

    return sig, codegen


@intrinsic
def _atomic_load(typingctx, array, index):
    """``array[index]`` read atomically (acquire: what was written before the add is seen)."""
    if not (isinstance(array, types.Array) and array.dtype == types.int64):
        return None
    sig = types.int64(array, types.intp)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.load_atomic(builder.gep(data, [args[1]]), "acquire", 8)

    return sig, codegen


@intrinsic
def _pause(typingctx):
    """The x86 ``pause`` hint of a spin loop (nothing elsewhere)."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        if _X86:
            fnty = ir.FunctionType(ir.VoidType(), [])
            pause = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse2.pause")
            builder.call(pause, [])
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True, inline="always")
def _claim(ctl, phase, n, per):
    """Items ``lo..hi-1`` of a phase of ``n`` items, ``per`` at most; ``lo ≥ n``: none left."""
    lo = _atomic_add(ctl, 2 * phase, per)
    return lo, min(lo + per, n)


@numba.njit(cache=True, inline="always")
def _finished(ctl, phase, count):
    """``count`` items of ``phase`` are finished (their writes are visible to the waiters)."""
    _atomic_add(ctl, 2 * phase + 1, count)


@numba.njit(cache=True)
def _wait(ctl, phase, n):
    """Until the ``n`` items of ``phase`` are finished: spin, then yield the processor."""
    spins = 0
    while _atomic_load(ctl, 2 * phase + 1) < n:
        if spins < _SPINS:
            _pause()
            spins += 1
        else:
            _sched_yield()


@numba.njit(cache=True, inline="always")
def _block_sum(a, col, lo, n):
    """Numpy's ``pairwise_sum`` of ``a[lo:lo+n, col]`` for ``n ≤ 128``."""
    if n < 8:
        res = -0.0
        for i in range(n):
            res += a[lo + i, col]
        return res
    r0, r1, r2, r3 = a[lo, col], a[lo + 1, col], a[lo + 2, col], a[lo + 3, col]
    r4, r5, r6, r7 = a[lo + 4, col], a[lo + 5, col], a[lo + 6, col], a[lo + 7, col]
    i = 8
    while i < n - n % 8:
        r0 += a[lo + i, col]
        r1 += a[lo + i + 1, col]
        r2 += a[lo + i + 2, col]
        r3 += a[lo + i + 3, col]
        r4 += a[lo + i + 4, col]
        r5 += a[lo + i + 5, col]
        r6 += a[lo + i + 6, col]
        r7 += a[lo + i + 7, col]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i, col]
        i += 1
    return res


@numba.njit(cache=True)
def _pairwise(a, col, lo, n):
    """Numpy's pairwise summation of ``a[lo:lo+n, col]`` (``n ≥ 0``).

    Up to 128 terms :func:`_block_sum`; above, the sum of the two halves, the first of
    ``⌊n/2⌋`` rounded down to a multiple of 8 terms (numpy's recursion, evaluated here
    with an explicit stack; addition commutes exactly, so only the tree matters).
    """
    if n <= _PW_BLOCK:
        return _block_sum(a, col, lo, n)
    task_lo = np.empty(192, dtype=np.int64)
    task_n = np.empty(192, dtype=np.int64)
    vals = np.empty(64)
    nt, nv = 1, 0
    task_lo[0], task_n[0] = lo, n
    while nt > 0:
        nt -= 1
        start, count = task_lo[nt], task_n[nt]
        if count < 0:  # both halves are on the value stack: add them
            nv -= 1
            vals[nv - 1] = vals[nv - 1] + vals[nv]
        elif count <= _PW_BLOCK:
            vals[nv] = _block_sum(a, col, start, count)
            nv += 1
        else:
            half = count // 2
            half -= half % 8
            task_lo[nt], task_n[nt] = 0, -1
            task_lo[nt + 1], task_n[nt + 1] = start + half, count - half
            task_lo[nt + 2], task_n[nt + 2] = start, half
            nt += 3
    return vals[0]


@numba.njit(cache=True, inline="always")
def _mean_slots(a, col):
    """``a[:, col].mean()`` over the ``L`` rows of ``a[L, M]`` as numpy's ``mean`` over that axis.

    ``M > 1``: ``0.0`` plus the terms one by one; ``M = 1``: ``0.0`` plus their pairwise sum.
    """
    L, M = a.shape
    s = 0.0
    if M == 1:
        s += _pairwise(a, col, 0, L)
    else:
        for i in range(L):
            s += a[i, col]
    return s / L


@numba.njit(cache=True, nogil=True, error_model="numpy")
def keyed_uniforms(stream_key, rnd0, reps, rows, counters, out):
    """``out[t, r, i, j]``: entry ``counters[i, j]`` of cell ``(reps[r], rows[i])``, round ``t``.

    The keyed uniforms of :class:`pgfl.rng.KeyedDraws` (``uniform``, ``uniform_at``) for
    ``T = out.shape[0]`` rounds ``rnd0 + t`` at once; ``stream_key`` is the stream's key
    (:func:`pgfl.rng.stream_key`).
    """
    T, R, n_rows, n = out.shape
    for t in range(T):
        S = round_key(stream_key, rnd0 + t)
        for r in range(R):
            for i in range(n_rows):
                key = cell_key(S, reps[r], rows[i])
                for j in range(n):
                    out[t, r, i, j] = keyed_uniform(key, counters[i, j])


@numba.njit(cache=True, error_model="numpy")
def _trial(c, r, t, rnd, Wn, local, diverged, psi, xs, client_kind, client_dist,
           client_scale, client_noise, server_kind, server_dist, server_std, coef,
           server_noise, link_noise, central_noise, src, weight, first):  # fmt: skip
    """Trial ``(c, r)`` of round ``rnd`` after its local SGD: its models ``Wn`` (eqs. 7, 8).

    ``ψ_p`` = the mean of the local models (``+ scale_c · mean_k g_pk`` with client noise,
    ``scale_c = σ_c`` for shared models, ``−μ_c σ_c`` for updates); each link ``m → p``
    carries ``(ψ_m + g_pm) a_pm`` with ``g_pm = σ_c (g_m c_pm)`` (random and
    graph-homomorphic noise, coefficient ``c_pm``), ``σ_c g_pm`` (per link) or
    ``σ_c (z c_pm)`` (central: the aggregator's draw on a unit's copy to itself,
    ``c_pp = 1/a_pp``, none on the uplinks); ``w_p`` sums them as ``np.add.reduceat``
    does. A repetition with an entry that is not finite or above the bound is marked
    diverged (``diverged[c, r] = rnd``) and frozen at NaN, as is one that diverged before.
    """
    P, M = psi.shape
    if diverged[c, r] >= 0:
        Wn[c, r] = np.nan
        return
    kind, scale = client_kind[c], client_scale[c]
    for p in range(P):
        for m in range(M):
            v = _mean_slots(local[c, r, p], m)
            if kind == 1:
                v = v + scale * _mean_slots(client_noise[client_dist[c], t, r, p], m)
            psi[p, m] = v
    kind, d, std = server_kind[c], server_dist[c], server_std[c]
    bad = False
    for p in range(P):
        lo, hi = first[p], first[p + 1]
        for j in range(lo, hi):
            s = src[j]
            for m in range(M):
                x = psi[s, m]
                if kind == 1:
                    x = x + std * (server_noise[d, t, r, s, m] * coef[c, j])
                elif kind == 2:
                    x = x + std * link_noise[d, t, r, j, m]
                elif kind == 3:
                    x = x + std * (central_noise[d, t, r, m] * coef[c, j])
                xs[j - lo, m] = x * weight[j]
        for m in range(M):
            v = xs[0, m]
            if hi - lo > 1:
                v = v + _pairwise(xs, m, 1, hi - lo - 1)
            Wn[c, r, p, m] = v
            if not abs(v) <= DIVERGENCE_BOUND:
                bad = True
    if bad:
        diverged[c, r] = rnd
        Wn[c, r] = np.nan


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _worker(ctl, W0, history, local, clients, bounds, n_bounds, diverged, sample, scan,
            sk_sampling, sk_batches, rnd0, reps, units, K, Xy, epochs, batch, counts, mu,
            clip, rho, loss, full, clipping, by_sample, e_max, b_max, scratch_n, n_chunks,
            cells_per_claim, client_kind, client_dist, client_scale, client_noise,
            server_kind, server_dist, server_std, coef, server_noise, link_noise,
            central_noise, src, weight, first, max_degree):  # fmt: skip
    """One worker's share of ``T = history.shape[0]`` rounds from ``W0`` (module docstring).

    Phase 0 samples every round's clients into ``clients[T, R, P, L]`` (``sample``: else
    they are given); phase 1 cuts each round's work items into ``n_chunks`` chunks of
    equal cost (``n_chunks > 1``); then per round ``t`` the local SGD of its chunks into
    ``local[C, R, P, L, M]`` and :func:`_trial` of every ``(c, r)``, writing
    ``history[t]`` (the models after round ``rnd0 + t``) from ``history[t − 1]`` (``W0``
    for ``t = 0``).
    """
    T = history.shape[0]
    C, R, P, M = W0.shape
    L = clients.shape[3]
    Xf, KNF = Xy.reshape(-1), Xy.shape[1:]
    if sample:
        n = T * R * P
        ssc = sampler_scratch(K, L, scan)
        while True:
            lo, hi = _claim(ctl, 0, n, cells_per_claim)
            if lo >= n:
                break
            for cell in range(lo, hi):
                t = cell // (R * P)
                r = (cell - t * R * P) // P
                p = cell - t * R * P - r * P
                key = cell_key(round_key(sk_sampling, rnd0 + t), reps[r], units[p])
                sample_cell(key, K, L, scan, 4.0, ssc, clients[t, r, p])
            _finished(ctl, 0, hi - lo)
        _wait(ctl, 0, n)
    if n_chunks > 1:
        while True:
            t, hi = _claim(ctl, 1, T, 1)
            if t >= T:
                break
            b = chunk_bounds(clients[t], epochs, batch, counts, full, n_chunks)
            bounds[t, : b.size] = b
            n_bounds[t] = b.size - 1
            _finished(ctl, 1, 1)
        _wait(ctl, 1, T)
    sc = scratch(scratch_n, C, M)
    psi = np.empty((P, M))
    xs = np.empty((max_degree, M))
    for t in range(T):
        W = W0 if t == 0 else history[t - 1]
        S = round_key(sk_batches, rnd0 + t)
        phase = 2 + 2 * t
        chunks = n_bounds[t]
        while True:
            j, hi = _claim(ctl, phase, chunks, 1)
            if j >= chunks:
                break
            _run_items(bounds[t, j], bounds[t, j + 1], W, Xf, KNF, clients[t], epochs, batch,
                       counts, S, reps, units, mu, clip, rho, loss, full, clipping, by_sample,
                       e_max, b_max, local, sc)  # fmt: skip
            _finished(ctl, phase, 1)
        _wait(ctl, phase, chunks)
        trials = C * R
        while True:
            i, hi = _claim(ctl, phase + 1, trials, 1)
            if i >= trials:
                break
            _trial(i // R, i % R, t, rnd0 + t, history[t], local, diverged, psi, xs,
                   client_kind, client_dist, client_scale, client_noise, server_kind,
                   server_dist, server_std, coef, server_noise, link_noise, central_noise,
                   src, weight, first)  # fmt: skip
            _finished(ctl, phase + 1, 1)
        _wait(ctl, phase + 1, trials)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def rounds_serial(ctl, W0, history, local, clients, bounds, n_bounds, diverged, sample, scan,
                  sk_sampling, sk_batches, rnd0, reps, units, K, Xy, epochs, batch, counts, mu,
                  clip, rho, loss, full, clipping, by_sample, e_max, b_max, scratch_n, n_chunks,
                  cells_per_claim, client_kind, client_dist, client_scale, client_noise,
                  server_kind, server_dist, server_std, coef, server_noise, link_noise,
                  central_noise, src, weight, first, max_degree):  # fmt: skip
    """:func:`_worker` alone on the calling thread (no parallel region to start)."""
    _worker(ctl, W0, history, local, clients, bounds, n_bounds, diverged, sample, scan,
            sk_sampling, sk_batches, rnd0, reps, units, K, Xy, epochs, batch, counts, mu, clip,
            rho, loss, full, clipping, by_sample, e_max, b_max, scratch_n, n_chunks,
            cells_per_claim, client_kind, client_dist, client_scale, client_noise, server_kind,
            server_dist, server_std, coef, server_noise, link_noise, central_noise, src,
            weight, first, max_degree)  # fmt: skip


@numba.njit(cache=True, parallel=True, nogil=True, error_model="numpy")
def rounds_parallel(workers, ctl, W0, history, local, clients, bounds, n_bounds, diverged,
                    sample, scan, sk_sampling, sk_batches, rnd0, reps, units, K, Xy, epochs,
                    batch, counts, mu, clip, rho, loss, full, clipping, by_sample, e_max, b_max,
                    scratch_n, n_chunks, cells_per_claim, client_kind, client_dist,
                    client_scale, client_noise, server_kind, server_dist, server_std, coef,
                    server_noise, link_noise, central_noise, src, weight, first,
                    max_degree):  # fmt: skip
    """:func:`_worker` on ``workers`` threads (one parallel region for all ``T`` rounds)."""
    for _ in numba.prange(workers):
        _worker(ctl, W0, history, local, clients, bounds, n_bounds, diverged, sample, scan,
                sk_sampling, sk_batches, rnd0, reps, units, K, Xy, epochs, batch, counts, mu,
                clip, rho, loss, full, clipping, by_sample, e_max, b_max, scratch_n, n_chunks,
                cells_per_claim, client_kind, client_dist, client_scale, client_noise,
                server_kind, server_dist, server_std, coef, server_noise, link_noise,
                central_noise, src, weight, first, max_degree)  # fmt: skip
