"""Worker processes for the per-pair cryptography of a round (X25519, HKDF, AES-CTR).

Results come back in task order and masks are summed by wrap-around addition, so the
round's output and transcript do not depend on the number of workers.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from pgfl.workers import exit_with

__all__ = ["MIN_PARALLEL", "Pool", "chunks", "default_workers", "start_method"]


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


EXECUTORS: dict[int, ProcessPoolExecutor] = {}


class Pool:
    """``map`` over tasks on ``workers`` processes (inline for one worker or a small job).

    Threads do not speed the round up: the per-pair Python glue between OpenSSL calls
    holds the GIL, and two threads were slower than one (measured, benchmarks/RESULTS-speed.md).
    The worker processes persist across rounds (forked once, on first use) and end soon
    after this process does, even when it is killed (:func:`pgfl.workers.exit_with`).
    Results come back in task order and masks are summed by wrap-around addition, so
    the round's output and transcript do not depend on the number of workers (tested).
    """

    def __init__(self, workers: int):
        self.workers = workers
        self.tasks = workers

    def map(self, fn: Callable, items: list, size: int) -> list:
        """``[fn(item) for item in items]``, on the workers when ``size`` work items justify it."""
        if self.workers == 1 or size < MIN_PARALLEL or len(items) < 2:
            return [fn(it) for it in items]
        ex = self._executor()
        try:
            return list(ex.map(fn, items))
        except BrokenProcessPool:  # a worker died (killed, out of memory): one fresh pool
            EXECUTORS.pop(self.workers, None)
            ex.shutdown(wait=False, cancel_futures=True)
            return list(self._executor().map(fn, items))

    def _executor(self) -> ProcessPoolExecutor:
        ex = EXECUTORS.get(self.workers)
        if ex is None:
            ctx = multiprocessing.get_context(start_method())
            ex = EXECUTORS[self.workers] = ProcessPoolExecutor(
                self.workers, mp_context=ctx, initializer=exit_with, initargs=(os.getpid(),)
            )  # the workers end with this process, even one killed by SIGKILL
        return ex


def start_method() -> str:
    """How the worker processes start: ``fork`` in a single-threaded process, else ``forkserver``.

    ``fork`` needs no re-import of the caller's ``__main__`` (a script needs no main guard),
    but forking a process whose other threads may hold locks (Ray's and JAX's runtimes
    start threads; so may the caller) can deadlock the child, and GNU OpenMP, one of
    numba's threading layers, is not fork-safe once its threads have started; there the
    workers are forked from a clean server process instead (which, like ``spawn``,
    imports the caller's main module: scripts then need ``if __name__ == "__main__":``).
    A process that has imported numba (the compiled engine) counts as threaded.
    """
    methods = multiprocessing.get_all_start_methods()
    runtimes = ("jax", "ray", "numba")
    threaded = threading.active_count() > 1 or any(m in sys.modules for m in runtimes)
    if "fork" in methods and not threaded:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


#: Below this many items (pairs, keys) a round runs on the calling thread only.
MIN_PARALLEL = 64


def chunks(n: int, parts: int) -> list[range]:
    """Split ``range(n)`` into at most ``parts`` contiguous, nearly equal ranges."""
    parts = max(1, min(parts, n))
    bounds = [n * i // parts for i in range(parts + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(parts)]
