"""Sweeps on Ray: the curves × repetition blocks of an experiment as Ray tasks.

A batch of curves (those that share their network, see
:class:`~pgfl.apps.runner.Batch`) is never split; its Monte-Carlo repetitions
``0..R−1`` are cut into contiguous blocks, and each block is one Ray task running the
vectorized engine, ``simulate(net, settings, repetitions=r, first_repetition=start)``.
Every draw of the engine is keyed by ``(seed, stream, round, repetition, unit)``
(:class:`pgfl.rng.KeyedDraws`), so a block computes exactly the rows ``start..start+r−1``
of the whole run and :meth:`Trajectory.concat <pgfl.engine.Trajectory.concat>` of the
blocks is bit-identical to the single-process engine (``LocalBackend``).

Scheduling: the blocks are sized so that the cluster's CPUs finish together (a batch of
cost ``c`` gets about ``W·c / Σc`` blocks on ``W`` CPUs, as equal as its repetitions
allow) and are submitted largest first; each batch's :class:`~pgfl.engine.Network` is
shipped once (``ray.put``) and shared by its tasks. Tasks are submitted when
:meth:`RaySweeps.trajectories` is called, so the runner's privacy accounting runs on the
driver while the cluster simulates.

Partial results: each finished task is saved by the driver in
``<out>/partial/task-<batch>-<start>-<stop>.npz`` (``<batch>``: the batch's first curve
index; repetitions ``start..stop−1``), with the configuration's fingerprint and a SHA-256
digest of its arrays. With ``--resume`` a valid file stands for its task (any block
split: the remaining repetitions are re-split over the workers); a stale, corrupt or
foreign file is recomputed and replaced when its task finishes, never deleted up front.

Faults: a task whose worker dies is retried by Ray (``max_retries``); if it still fails,
the other tasks run to the end and are saved, and :class:`~pgfl.backends.RunStopped`
says in one line what failed and that ``--resume`` continues.

>>> split_range(0, 10, 3)
[(0, 3), (3, 6), (6, 10)]
>>> block_counts([4.0, 1.0], [8, 8], workers=4)   # the costly batch gets more blocks
[3, 1]
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from pgfl.backends.local import Progress, RunStopped
from pgfl.backends.session import ray_session
from pgfl.engine import CurveBatch, Network, Trajectory, simulate
from pgfl.experiments.partial import read_partial, write_partial
from pgfl.experiments.plan import Batch, Plan
from pgfl.files import writing

__all__ = [
    "FAULT_ENV",
    "RaySweeps",
    "SweepTask",
    "block_counts",
    "load_task",
    "save_task",
    "split_range",
    "task_path",
]

#: Test hook: a worker running a task with this environment variable set to a path that
#: does not exist creates the file and dies (``os._exit``), once per path (fault tests).
FAULT_ENV = "PGFL_RAY_FAULT_ONCE"
_TASK_NAME = re.compile(r"task-(\d+)-(\d+)-(\d+)\.npz$")


@dataclass(frozen=True)
class SweepTask:
    """One Ray task: the curves of ``plan.batches[batch]``, repetitions ``start..stop−1``.

    ``key`` is the batch's first curve index in the configuration (its name on disk,
    stable when a resumed run has fewer batches); ``cost`` the estimated work.
    """

    batch: int
    key: int
    start: int
    stop: int
    cost: float

    @property
    def repetitions(self) -> int:
        """Repetitions of the block."""
        return self.stop - self.start


def split_range(start: int, stop: int, n: int) -> list[tuple[int, int]]:
    """``start..stop−1`` cut into ``min(n, stop−start)`` contiguous near-equal blocks."""
    n = max(1, min(n, stop - start))
    edges = [start + (stop - start) * k // n for k in range(n + 1)]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def block_counts(costs: Sequence[float], reps: Sequence[int], workers: int) -> list[int]:
    """Blocks per batch so that ``workers`` CPUs get near-equal shares of the total cost.

    ``costs[b]`` is batch ``b``'s cost per repetition and ``reps[b]`` its repetitions to
    run; a batch gets ``round(workers · share)`` blocks, at least 1, at most its repetitions.
    """
    total = sum(c * r for c, r in zip(costs, reps, strict=True)) or 1.0
    return [
        max(1, min(r, round(workers * c * r / total))) for c, r in zip(costs, reps, strict=True)
    ]


def repetition_cost(net: Network, curves: int) -> float:
    """Work of one repetition of a batch, up to a constant: client samples processed."""
    steps = net.epochs.mean() * (net.data.shape[2] if net.batch is None else net.batch.mean())
    return float(curves * net.data.shape[0] * net.L * steps * net.dim)


# ------------------------------------------------------------------------ partial files
def task_path(out: Path, key: int, start: int, stop: int) -> Path:
    """Where the task of batch ``key`` over repetitions ``start..stop−1`` is saved."""
    return out / "partial" / f"task-{key:03d}-{start:04d}-{stop:04d}.npz"


def _arrays(traj: Trajectory) -> dict[str, np.ndarray]:
    out = {}
    for f in fields(Trajectory):
        value = getattr(traj, f.name)
        if f.name == "abort_log":
            out[f.name] = np.asarray(value, dtype=np.int64).reshape(-1, 4)
        elif value is not None:
            out[f.name] = np.asarray(value)
    return out


def save_task(
    out: Path, task: SweepTask, indices: Sequence[int], fingerprint: str, traj: Trajectory
) -> Path:
    """Save a finished task atomically, with the fingerprint and the checksum of its arrays."""
    arrays = {f"traj_{k}": v for k, v in _arrays(traj).items()}
    arrays["curves"] = np.asarray(indices, dtype=np.int64)
    path = task_path(out, task.key, task.start, task.stop)
    with writing(out):
        write_partial(path, fingerprint, arrays)
    return path


def load_task(path: Path, indices: Sequence[int], fingerprint: str) -> Trajectory | None:
    """The trajectory saved in ``path`` if it belongs to this run and is intact, else None.

    A file of another configuration or batch is ignored; an unreadable one or one whose
    arrays do not match their checksum is ignored with a
    :class:`~pgfl.experiments.partial.PartialResultWarning`
    (:func:`~pgfl.experiments.partial.read_partial`). Either way its task runs again.
    """
    arrays = read_partial(path, fingerprint, "its task runs again")
    if arrays is None:
        return None
    if not np.array_equal(arrays.pop("curves", None), np.asarray(indices)):
        return None
    values: dict[str, Any] = {f.name: None for f in fields(Trajectory)}
    for k, v in arrays.items():
        values[k.removeprefix("traj_")] = v
    values["abort_log"] = [tuple(int(x) for x in row) for row in values["abort_log"]]
    return Trajectory(**values)


def _saved_blocks(
    out: Path, key: int, indices: Sequence[int], fingerprint: str, reps: int
) -> dict[tuple[int, int], Trajectory]:
    """Valid saved blocks of a batch, non-overlapping (earliest start, then longest)."""
    found = []
    for path in sorted((out / "partial").glob(f"task-{key:03d}-*.npz")):
        m = _TASK_NAME.search(path.name)
        if m is None or int(m.group(1)) != key:
            continue
        start, stop = int(m.group(2)), int(m.group(3))
        if 0 <= start < stop <= reps:
            found.append((start, -stop, path))
    blocks: dict[tuple[int, int], Trajectory] = {}
    covered = 0
    for start, neg_stop, path in sorted(found):
        if start < covered:
            continue
        traj = load_task(path, indices, fingerprint)
        if traj is not None and np.array_equal(traj.reps, np.arange(start, -neg_stop)):
            blocks[(start, -neg_stop)] = traj
            covered = -neg_stop
    return blocks


def _gaps(done: Sequence[tuple[int, int]], reps: int) -> list[tuple[int, int]]:
    gaps, at = [], 0
    for a, b in sorted(done):
        if a > at:
            gaps.append((at, a))
        at = max(at, b)
    if at < reps:
        gaps.append((at, reps))
    return gaps


# ------------------------------------------------------------------------------- tasks
def _simulate_block(
    net: Network,
    curves: CurveBatch,
    w_opt: np.ndarray | None,
    iterations: int,
    seed: int,
    start: int,
    stop: int,
) -> Trajectory:
    """Repetitions ``start..stop−1`` of a batch (runs in a Ray worker)."""
    marker = os.environ.get(FAULT_ENV)
    if marker:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            pass
        else:
            os._exit(1)  # a worker killed mid-run, once
    return simulate(
        net,
        curves,
        iterations=iterations,
        repetitions=stop - start,
        seed=seed,
        first_repetition=start,
        w_opt=w_opt,
    )


class RaySweeps:
    """Backend running an experiment's batches × repetition blocks as Ray tasks.

    Args:
        address: a running cluster to join (``ray start --head`` prints it); ``None``
            starts a local Ray with ``workers`` CPUs (default: the machine's).
        workers: CPUs of the local Ray (ignored when joining a cluster).
        max_retries: times Ray reruns a task whose worker died.
        blocks_per_worker: repetition blocks per CPU of the cluster (more: finer load
            balance, more per-task overhead).
        runtime_env: Ray runtime environment of the tasks (e.g. ``{"env_vars": ...}``).

    Gives the bits of :class:`~pgfl.backends.LocalBackend` (module doc).

    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        *,
        max_retries: int = 3,
        blocks_per_worker: int = 1,
        runtime_env: dict[str, Any] | None = None,
    ) -> None:
        self.address = address
        self.workers = workers
        self.max_retries = max_retries
        self.blocks_per_worker = blocks_per_worker
        self.runtime_env = runtime_env
        #: CPUs of the cluster the last run's tasks ran on (``None``: none ran yet).
        self.cluster_cpus: int | None = None

    def describe(self) -> str:
        """``"ray (tasks, N workers)"`` (``at ADDRESS`` when a cluster was joined)."""
        at = f" at {self.address}" if self.address else ""
        if self.cluster_cpus is None:
            return f"ray (tasks{at})"
        return f"ray (tasks, {self.cluster_cpus} workers{at})"

    def start(self) -> None:
        """Start or join the Ray cluster (:func:`~pgfl.backends.ray_session`); idempotent."""
        ray_session(self.address, self.workers)

    def plan_tasks(
        self, plan: Plan, workers: int, done: Sequence[dict[tuple[int, int], Trajectory]]
    ) -> list[SweepTask]:
        """The tasks still to run, largest first; ``done[b]``: saved blocks of batch ``b``."""
        R = plan.cfg.repetitions
        gaps = [_gaps(list(d), R) for d in done]
        todo = [sum(b - a for a, b in g) for g in gaps]
        costs = [repetition_cost(b.net, len(b.indices)) for b in plan.batches]
        counts = block_counts(costs, todo, workers * self.blocks_per_worker)
        tasks = []
        for b, batch in enumerate(plan.batches):
            for a, z in gaps[b]:
                n = max(1, round(counts[b] * (z - a) / todo[b]))
                for start, stop in split_range(a, z, n):
                    cost = costs[b] * (stop - start)
                    tasks.append(SweepTask(b, batch.indices[0], start, stop, cost))
        return sorted(tasks, key=lambda t: (-t.cost, t.batch, t.start))

    def trajectories(
        self, plan: Plan, progress: Progress | None = None
    ) -> Iterator[tuple[Batch, Trajectory]]:
        """Submit every task now; iterate over ``(batch, trajectory)`` as batches complete.

        Tasks are submitted before this returns, so work done by the caller before it
        iterates (the runner's privacy accounting) overlaps the simulations.
        """
        if not plan.batches:  # everything was resumed: no cluster needed
            return iter(())
        ray = ray_session(self.address, self.workers)
        workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.cluster_cpus = workers
        done = [
            _saved_blocks(
                plan.work, b.indices[0], b.indices, plan.fingerprint, plan.cfg.repetitions
            )
            if plan.resume
            else {}
            for b in plan.batches
        ]
        tasks = self.plan_tasks(plan, workers, done)
        options: dict[str, Any] = {"max_retries": self.max_retries, "num_cpus": 1}
        if self.runtime_env is not None:
            options["runtime_env"] = self.runtime_env
        remote = ray.remote(_simulate_block).options(**options)
        shared = {
            b: (
                ray.put(plan.batches[b].net),
                ray.put(plan.batches[b].curves),
                plan.batches[b].w_opt,
            )
            for b in sorted({t.batch for t in tasks})
        }
        cfg = plan.cfg
        pending = {
            remote.remote(*shared[t.batch], cfg.iterations, cfg.seed, t.start, t.stop): t
            for t in tasks
        }
        return self._gather(ray, plan, pending, done, progress)

    def _gather(
        self,
        ray: Any,
        plan: Plan,
        pending: dict[Any, SweepTask],
        done: list[dict[tuple[int, int], Trajectory]],
        progress: Progress | None,
    ) -> Iterator[tuple[Batch, Trajectory]]:
        R, T = plan.cfg.repetitions, plan.cfg.iterations
        failures: list[tuple[SweepTask, BaseException]] = []
        finished = 0
        try:
            for b, batch in enumerate(plan.batches):  # batches resumed whole
                if sum(z - a for a, z in done[b]) == R:
                    yield batch, Trajectory.concat([done[b][k] for k in sorted(done[b])])
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                task = pending.pop(ready[0])
                batch = plan.batches[task.batch]
                try:
                    traj = ray.get(ready[0])
                except ray.exceptions.RayError as exc:
                    failures.append((task, exc))
                    continue
                save_task(plan.work, task, batch.indices, plan.fingerprint, traj)
                finished += 1
                blocks = done[task.batch]
                blocks[(task.start, task.stop)] = traj
                reps = sum(z - a for a, z in blocks)
                if progress is not None:
                    progress(batch, T * reps // R)
                if reps == R:
                    yield batch, Trajectory.concat([blocks.pop(k) for k in sorted(blocks)])
        finally:
            for ref in pending:  # interrupted: the cluster stops the unfinished tasks
                ray.cancel(ref, force=False)
        if failures:
            self._stop(plan, failures, finished)

    def _stop(
        self, plan: Plan, failures: list[tuple[SweepTask, BaseException]], finished: int
    ) -> None:
        ray = ray_session(self.address, self.workers)
        task, exc = failures[0]
        if isinstance(exc, ray.exceptions.RayTaskError) and not isinstance(
            exc.cause, ray.exceptions.RayError
        ):
            raise exc.cause  # an error of the simulation itself, as in a local run
        curves = plan.batches[task.batch].indices
        what = f"curves {curves[0]}-{curves[-1]}, repetitions {task.start}-{task.stop - 1}"
        raise RunStopped(
            f"the Ray cluster failed {len(failures)} task(s) ({what}: {type(exc).__name__}, "
            f"after {self.max_retries} retries); {finished} finished task(s) saved in "
            f"{plan.work / 'partial'}; rerun with --resume to continue"
        )
