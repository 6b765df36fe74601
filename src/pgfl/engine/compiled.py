"""Compiled local phase (numba, extra ``fast``) for the built-in losses.

Same computation as :func:`pgfl.engine.step.local_models` — clients' local SGD of
"Privatized Graph Federated Learning" (Rizk, Vlaski & Sayed, arXiv:2203.07105), eq. 3:
sampled client ``(p, k)`` runs ``E_pk`` steps ``w ← w − (μ/E_pk) ∇Q(w; batch)`` from
``w_{p,i−1}`` — fused into one compiled loop per client: the epochs, the mini-batch
gradient (least squares ``2(uᵀw − d)u + 2ρw``, logistic ``−d σ(−d uᵀw) u + 2ρw``), the
per-sample clipping and the padding mask are inlined and the samples are read in place
(no gathered copies). A work item is one sampled client (repetition × unit × slot) with
all its curves, which share its mini-batch draws and sample reads. Rounds with enough work
(:data:`PARALLEL_WORK`) run on every numba thread: the items are cut into chunks of equal
cost (``Σ E_pk (B_pk + 2)``) that the threads take from a shared counter. Every item's
arithmetic is a separate computation in one fixed order and writes only its own rows, so
the result is bit-identical for any thread count (:func:`set_threads`).

The mini-batch positions come from the same keyed SplitMix64 counters as
:class:`pgfl.rng.KeyedDraws` (Steele, Lea & Flood, OOPSLA 2014): the uniform of slot
``l``, epoch ``e``, position ``b`` of cell ``(r, p)`` is entry ``n = (l·E_max + e)·B_max + b``
of the cell of stream ``batches``, ``u = (⌊mix64(key + (n + 1)·γ) / 2^11⌋ + ½)·2^-53``,
and the sample is ``⌊u·N_pk⌋``. Only the ``E_pk·B_pk`` numbers a client uses are computed.
Both paths therefore see the same samples; they differ only in the order of floating-point
sums (≈ 1e-16 relative per step).

Kernels are compiled on first use and cached on disk (``cache=True``), so later processes
load them instead of compiling. ``PGFL_LOCAL_PHASE=numpy|compiled`` forces a path; by
default the compiled path runs when numba is importable and the loss is
:class:`~pgfl.problems.LeastSquares` or :class:`~pgfl.problems.Logistic` (exactly those
classes: a subclass may change the gradient).

Threads and processes. pgfl needs no particular numba threading layer (``tbb``, ``omp`` or
``workqueue``, whichever numba loads; ``NUMBA_THREADING_LAYER`` is respected): a process
launches at most one parallel kernel at a time (:data:`LAUNCH`, a lock held around every
parallel launch, so two Python threads — the runner's accounting thread, a user's own —
never enter a layer at once, which ``workqueue`` would answer by aborting the process),
and no process forks after numba has started its threads (the secure-aggregation workers
then start from a fork server: :func:`pgfl.privacy.secagg.pool.start_method`; Ray and
``reproduce --jobs`` start fresh interpreters). :func:`load` readies the compiled path in a
process before it is given data.

>>> import numpy as np
>>> from pgfl.problems import LeastSquares
>>> local_phase_kind(LeastSquares(0.0)) in ("compiled", "numpy")
True
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache
from typing import Any

import numpy as np

from pgfl.engine.network import scans_clients
from pgfl.extras import available, require
from pgfl.problems import LeastSquares, Logistic
from pgfl.rng import stream_key
from pgfl.validation import ConfigError

#: Environment variable that forces the local-phase implementation.
ENV = "PGFL_LOCAL_PHASE"
#: Rounds with less work than this (curves × sampled clients × E_max·B_max × M, an upper
#: bound; 1–2 ns each) run on the calling thread. With sleeping workers (the default) a
#: parallel region costs 50–90 µs to start on this project's virtual machines, so only rounds
#: of ≥ 0.5 ms of kernel work gain (the 96-trial bench case: 2.6 M; Flower: 0.1 M; the
#: papers' single trial: 22,000).
PARALLEL_WORK = 500_000
#: With spinning workers (:func:`spinning`) a region starts in 2–4 µs: the thresholds shrink
#: by this factor (the papers' single trial then runs on every thread).
SPINNING_FACTOR = 0.02
#: Models of dimension 2 (the papers') are trained one sample at a time with the model in
#: registers (:func:`pgfl.engine._kernels._items_m2`), others one mini-batch at a time
#: (:func:`pgfl.engine._kernels._items_by_batch`); False: every model by mini-batch. Same bits.
SAMPLE_LOOP = True
#: Rounds that draw at least this many client-sampling uniforms (repetitions × units × K,
#: about 6 ns each) sample their units on every thread (the 96-trial bench case: 32,000).
PARALLEL_SAMPLING = 100_000
#: Chunks of work items per thread in a parallel round (taken dynamically by the threads).
CHUNKS_PER_THREAD = 4
_LOSS_CODE = {LeastSquares: 0, Logistic: 1}
#: Held around every parallel kernel launch: one parallel region per process at a time.
LAUNCH = threading.Lock()


def local_phase_kind(problem: Any) -> str:
    """``"compiled"``, ``"fused"`` or ``"numpy"``: the local phase that runs for ``problem``.

    ``compiled``: the numba kernel of the built-in losses; ``fused``: the problem's own
    ``local_models`` hook (a JAX model's whole local phase in one compiled call,
    :meth:`pgfl.models.jax_adapter.JaxProblem.local_models`); ``numpy``: the reference
    path, one ``gradient`` call per epoch (``PGFL_LOCAL_PHASE=numpy`` forces it).
    ``PGFL_LOCAL_PHASE=compiled`` raises :class:`~pgfl.validation.ConfigError` when the
    compiled path cannot run (numba missing or a user-supplied loss).
    """
    forced = os.environ.get(ENV, "").strip().lower()
    if forced not in ("", "numpy", "compiled"):
        raise ConfigError(f"{ENV} must be 'numpy' or 'compiled' (or unset); got {forced!r}")
    if forced == "numpy":
        return "numpy"
    supported = type(problem) in _LOSS_CODE
    if forced == "compiled":
        if not supported:
            raise ConfigError(
                f"{ENV}=compiled needs a built-in loss (least_squares, logistic); "
                f"got {type(problem).__name__}"
            )
        require("numba", "fast", "the compiled local phase")
        return "compiled"
    if supported and _numba_available():
        return "compiled"
    return "fused" if callable(getattr(problem, "local_models", None)) else "numpy"


@lru_cache(maxsize=1)
def _numba_available() -> bool:
    return available("numba")


def draw_clients(block, draws) -> np.ndarray:
    """Compiled :func:`pgfl.engine.step.draw_clients`: the sampled clients ``[R, P_b, L]``.

    The same keyed uniforms (stream ``sampling``) and the same rule (the ``L`` smallest),
    drawn and selected in one compiled loop; the cells ``(r, p)`` are split over the
    threads when there are at least :data:`PARALLEL_SAMPLING` uniforms to draw.
    """
    K = block.data.X.shape[1]
    R = draws.reps.size
    if block.L == K:
        return np.broadcast_to(np.arange(K), (R, block.size, K))
    out = np.empty((R, block.size, block.L), dtype=np.int64)
    cells = _cells(draws, "sampling")
    serial, parallel = _samplers()
    threads = _threads()
    scan = scans_clients(K, block.L)
    if threads > 1 and R * block.size * (K if scan else block.L) >= _threshold(PARALLEL_SAMPLING):
        _launch(parallel, *cells, K, out, threads, scan)
    else:
        serial(*cells, K, out, scan)
    return out


def _cells(draws, stream_name: str) -> tuple:
    """``(stream key, round, reps, units)``: what the kernels need to key a stream's cells.

    The kernels compute each cell's key as :meth:`pgfl.rng.KeyedDraws.keys` does
    (:func:`pgfl.engine._kernels.cell_key`; equal bit for bit, tested) instead of taking
    the ``[R, P]`` keys, which numpy computes in five passes (≈ 5 µs a call).
    """
    return (
        np.uint64(stream_key(draws.seed, stream_name)),
        draws.round,
        draws.reps,
        draws.units,
    )


@lru_cache(maxsize=1)
def _samplers():
    _kernels()
    from pgfl.engine._kernels import sample_clients, sample_clients_parallel  # lazy: numba

    return sample_clients, sample_clients_parallel


def local_models(W, block, curves, draws, clients) -> np.ndarray:
    """Compiled :func:`pgfl.engine.step.local_models` (same arguments, same result).

    ``W[C, R, P_b, M]`` → local models ``[C, R, P_b, L, M]``. Rounds with at least
    :data:`PARALLEL_WORK` of work run on every numba thread (work items = sampled clients,
    in chunks of equal cost); smaller ones on the calling thread. Same bits either way.
    """
    C, R, P, M = W.shape
    L = clients.shape[2]
    Xy, epochs, batch, counts, rho, loss, full, e_max, b_max, per_client = _block_arrays(block)
    W = np.ascontiguousarray(W, dtype=np.float64)
    clip = curves.clip
    clipping = clip is not None
    clip = np.full(C, np.inf) if clip is None else np.asarray(clip, dtype=np.float64)
    out = np.empty((C, R, P, L, M))
    args = (
        W, Xy, np.ascontiguousarray(clients, dtype=np.int64), epochs, batch, counts,
        *_cells(draws, "batches"), np.asarray(curves.mu, dtype=np.float64), clip, rho, loss,
        full, clipping, SAMPLE_LOOP, e_max, b_max, out,
    )  # fmt: skip
    scratch_n = Xy.shape[2] if full else b_max
    threads = _threads()
    parallel, serial = _kernels()
    if threads > 1 and C * R * P * L * per_client * M >= _threshold(PARALLEL_WORK):
        _launch(parallel, *args, threads, threads * CHUNKS_PER_THREAD, scratch_n)
    else:
        serial(*args, scratch_n)
    return out


def _launch(kernel, *args) -> None:
    """Run a parallel kernel: every parallel region of pgfl starts here, and only here.

    Under :data:`LAUNCH`: one parallel launch at a time in this process.
    """
    with LAUNCH:
        kernel(*args)


def _block_arrays(block) -> tuple:
    """The kernel's per-block constants (data, schedule, loss), made once per block.

    A block's arrays never change during a simulation; converting them on every round
    cost about as much as a paper-scale round's arithmetic.
    """
    cached = block.__dict__.get("_compiled_arrays")
    if cached is None:
        data = block.data
        full = block.batch is None
        batch = np.zeros((1, 1), dtype=np.int64) if full else block.batch
        per_client = (data.X.shape[2] if full else int(block.b_max)) * int(block.e_max)
        cached = (
            np.ascontiguousarray(data.Xy),
            np.ascontiguousarray(block.epochs, dtype=np.int64),
            np.ascontiguousarray(batch, dtype=np.int64),
            np.ascontiguousarray(data.counts, dtype=np.int64),
            float(block.problem.rho),
            _LOSS_CODE[type(block.problem)],
            full,
            int(block.e_max),
            int(block.b_max),
            per_client,
        )
        object.__setattr__(block, "_compiled_arrays", cached)
    return cached


def _threshold(work: float) -> float:
    """A parallel threshold for the wait policy in force (see :func:`spinning`)."""
    return work * SPINNING_FACTOR if spinning() else work


def _threads() -> int:
    """How many threads numba runs the next parallel region on (``numba.set_num_threads``)."""
    _kernels()  # numba's threads start after the wait policy is set there
    import numba  # lazy: numba is optional (extra "fast")

    return numba.get_num_threads()


def set_threads(n: int | None) -> int:
    """Run the compiled kernels on ``n`` threads from now on (``None``: all); the old count.

    ``n`` is at most numba's thread pool size (``NUMBA_NUM_THREADS``, default: the cores).
    The results do not depend on it (bit for bit); only the speed does.
    """
    old = _threads()
    import numba  # lazy: numba is optional (extra "fast")

    numba.set_num_threads(max_threads() if n is None else n)
    return old


def max_threads() -> int:
    """The largest thread count :func:`set_threads` accepts (numba's thread pool size)."""
    require("numba", "fast", "the compiled local phase")
    import numba  # lazy: numba is optional (extra "fast")

    return int(numba.config.NUMBA_NUM_THREADS)


@lru_cache(maxsize=1)
def _kernels():
    """The parallel and serial kernels of :mod:`pgfl.engine._kernels` (numba imported here).

    Before numba starts its OpenMP threads: ``OMP_WAIT_POLICY=PASSIVE`` unless
    ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is set, so idle workers sleep. Measured on
    this project's 2-vCPU virtual machines (benchmarks/bench_threads.py, BENCHMARKS.md):
    waking sleeping workers costs 50–90 µs per parallel region when the other CPU is idle
    (a halted virtual CPU must be woken), while spinning workers answer in 2–4 µs, but
    spinning makes a machine whose cores are all busy with other jobs 8–25× slower per
    region (each waiting thread burns its time slice while the one it waits for is
    descheduled). Sleeping is the safe default; on a machine of your own set
    ``OMP_WAIT_POLICY=ACTIVE`` (or ``GOMP_SPINCOUNT``) and smaller rounds go parallel too
    (:func:`spinning`).
    """
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    require("numba", "fast", "the compiled local phase")
    from pgfl.engine._kernels import local_sgd, local_sgd_serial  # lazy: numba

    return local_sgd, local_sgd_serial


@lru_cache(maxsize=1)
def _round_kernels():
    """:mod:`pgfl.engine._round_kernels` (whole rounds), after :func:`_kernels`'s set-up."""
    _kernels()
    from pgfl.engine import _round_kernels  # lazy: numba

    return _round_kernels


def load() -> None:
    """Ready the compiled path in this process: numba, its kernels, its typing context.

    The first call of any numba function loads numba's typing and target contexts (about
    15 MiB of Python objects in numba 0.68); a process that is about to be given data
    (a Ray actor's block, :class:`pgfl.backends.ray_actors.BlockActor`) calls this first,
    so that what it then allocates is its data and models only. Idempotent.
    """
    _kernels()
    _samplers()
    from pgfl.engine._kernels import cell_keys  # lazy: numba is optional (extra "fast")

    one = np.zeros(1, dtype=np.int64)
    cell_keys(np.uint64(1), 1, one, one)  # any call: numba's contexts load on the first


def spinning() -> bool:
    """Whether idle OpenMP workers spin (``OMP_WAIT_POLICY=ACTIVE`` or ``GOMP_SPINCOUNT`` set).

    Then a parallel region starts in microseconds and the thresholds
    :data:`PARALLEL_WORK` and :data:`PARALLEL_SAMPLING` are scaled by
    :data:`SPINNING_FACTOR`.
    """
    policy = os.environ.get("OMP_WAIT_POLICY", "").strip().upper()
    if policy in ("ACTIVE", "PASSIVE"):
        return policy == "ACTIVE"
    return os.environ.get("GOMP_SPINCOUNT", "0").strip() not in ("", "0")
