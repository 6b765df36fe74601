"""The backend seam, and the default backend: every batch in this process.

A *backend* turns a validated :class:`~pgfl.experiments.plan.Plan` into one
:class:`~pgfl.engine.Trajectory` per :class:`~pgfl.experiments.plan.Batch`. The runner
owns everything around it (validation, partial files, accounting, results), so every
backend writes the same ``summary.json`` and ``curves.csv``; a backend must give the bits
of :class:`LocalBackend` for the same seed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from pgfl.engine import Trajectory, simulate
from pgfl.experiments.plan import Batch, Plan

__all__ = ["Backend", "LocalBackend", "Progress", "RunStopped", "batch_progress", "describe"]

#: ``progress(batch, done_iterations)``: called as a batch advances.
Progress = Callable[[Batch, int], None]


class Backend(Protocol):
    """Simulates the batches of a plan; yields each ``(batch, trajectory)`` as it finishes.

    A backend may also have ``start()``, which the runner calls before it writes
    anything (e.g. joining a cluster, so that a bad address leaves the output untouched),
    and ``describe()``, one line saying what ran (``engine.backend`` of ``summary.json``,
    e.g. ``"ray (tasks, 4 workers)"``; :func:`describe`).
    """

    def trajectories(
        self, plan: Plan, progress: Progress | None = None
    ) -> Iterator[tuple[Batch, Trajectory]]:
        """Yield ``(batch, trajectory)`` for every batch of ``plan.batches`` (any order)."""
        ...


def batch_progress(progress: Progress | None, batch: Batch) -> Callable[[int], None] | None:
    """``progress`` bound to one batch: the ``progress(done)`` callback of its simulation."""
    return None if progress is None else (lambda done: progress(batch, done))


def describe(backend: Backend) -> str:
    """One line saying which backend ran: its ``describe()``, else its ``name`` or class.

    >>> describe(LocalBackend())
    'local'
    """
    method = getattr(backend, "describe", None)
    if method is not None:
        return str(method())
    return str(getattr(backend, "name", type(backend).__name__))


class LocalBackend:
    """Every batch in this process, one after the other (the single-process engine)."""

    name = "local"

    def describe(self) -> str:
        """What ``run.log`` and ``summary.json`` say ran (``engine.backend``)."""
        return "local"

    def trajectories(
        self, plan: Plan, progress: Progress | None = None
    ) -> Iterator[tuple[Batch, Trajectory]]:
        """Yield ``(batch, simulate(batch))`` in the plan's order."""
        cfg = plan.cfg
        for batch in plan.batches:
            step = batch_progress(progress, batch)
            yield (
                batch,
                simulate(
                    batch.net,
                    batch.curves,
                    iterations=cfg.iterations,
                    repetitions=cfg.repetitions,
                    seed=cfg.seed,
                    progress=step,
                    w_opt=batch.w_opt,
                ),
            )


class RunStopped(Exception):
    """A run could not finish (e.g. a Ray worker died and its retries ran out).

    Every finished piece of work is on disk when it is raised; the message is one line
    saying what failed and that ``--resume`` continues.
    """
