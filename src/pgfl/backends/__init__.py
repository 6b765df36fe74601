"""Where the batches of an experiment are simulated: this process, or a Ray cluster.

A *backend* turns a validated :class:`~pgfl.experiments.runner.Plan` into one
:class:`~pgfl.engine.Trajectory` per :class:`~pgfl.experiments.runner.Batch`. The runner
owns everything around it (validation, partial files, accounting, results), so every
backend writes the same ``summary.json`` and ``curves.csv``; a backend must give the bits
of :class:`LocalBackend` for the same seed.

* :class:`LocalBackend` (the default): one vectorized :func:`~pgfl.engine.simulate` per
  batch in this process.
* ``pgfl.backends.ray_sweeps`` (``pgfl[ray]``): batches × repetition blocks as Ray tasks.
* ``pgfl.backends.ray_actors`` (``pgfl[ray]``): one large network's units held by Ray
  actors, messages sent between them.

:func:`make_backend` picks one from a configuration's ``[run]`` table
(:class:`~pgfl.experiments.config.RunConfig`); :func:`ray_session` starts or joins the Ray
cluster once per process. A backend that cannot finish (a cluster that lost a worker for
good) raises :class:`RunStopped` after saving every finished piece, for ``--resume``.

>>> type(make_backend(None)).__name__
'LocalBackend'
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from pgfl.engine import Trajectory, simulate
from pgfl.extras import require
from pgfl.validation import ConfigError

if TYPE_CHECKING:
    from pgfl.experiments.config import RunConfig
    from pgfl.experiments.runner import Batch, Plan

__all__ = [
    "Backend",
    "LocalBackend",
    "Progress",
    "RunStopped",
    "batch_progress",
    "make_backend",
    "ray_session",
]

#: ``progress(batch, done_iterations)``: called as a batch advances.
Progress = Callable[["Batch", int], None]


class Backend(Protocol):
    """Simulates the batches of a plan; yields each ``(batch, trajectory)`` as it finishes.

    A backend may also have ``start()``, which the runner calls before it writes
    anything (e.g. joining a cluster, so that a bad address leaves the output untouched).
    """

    def trajectories(
        self, plan: Plan, progress: Progress | None = None
    ) -> Iterator[tuple[Batch, Trajectory]]:
        """Yield ``(batch, trajectory)`` for every batch of ``plan.batches`` (any order)."""
        ...


def batch_progress(progress: Progress | None, batch: Batch) -> Callable[[int], None] | None:
    """``progress`` bound to one batch: the ``progress(done)`` callback of its simulation."""
    return None if progress is None else (lambda done: progress(batch, done))


class LocalBackend:
    """Every batch in this process, one after the other (the single-process engine)."""

    name = "local"

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
                    list(batch.settings),
                    iterations=cfg.iterations,
                    repetitions=cfg.repetitions,
                    seed=cfg.seed,
                    progress=step,
                ),
            )


class RunStopped(Exception):
    """A run could not finish (e.g. a Ray worker died and its retries ran out).

    Every finished piece of work is on disk when it is raised; the message is one line
    saying what failed and that ``--resume`` continues.
    """


def ray_session(address: str | None = None, workers: int | None = None) -> ModuleType:
    """The ``ray`` module with a session open in this process; started or joined once.

    Without ``address``: a local Ray sized to ``workers`` CPUs (default: every CPU of the
    machine), without dashboard or worker log forwarding. With one (``"auto"``,
    ``"HOST:6379"`` or ``"ray://HOST:10001"``): join that running cluster. A session already
    open in the process is kept and reused, so many runs share one cluster start-up.
    Raises :class:`~pgfl.extras.MissingExtra` without ``pgfl[ray]``, and
    :class:`~pgfl.validation.ConfigError` naming ``run.address`` if it cannot be joined.
    """
    ray = require("ray", "ray", "--backend ray")
    if ray.is_initialized():
        return ray
    quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    if address is None:
        ray.init(num_cpus=workers or os.cpu_count(), **quiet)
        return ray
    try:
        _reachable(address)
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError, ValueError, OSError) as exc:
        reason = " ".join(str(exc).split())[:200]
        raise ConfigError(
            f"run.address: cannot join the Ray cluster at {address!r} ({reason}); start one "
            "with 'ray start --head' and pass the address it prints"
        ) from None
    return ray


def _reachable(address: str, timeout: float = 5.0) -> None:
    """Raise :class:`OSError` if ``HOST:PORT`` (or ``ray://HOST:PORT``) accepts no TCP connection.

    Ray itself retries an unreachable head for minutes; a connection attempt fails in
    ``timeout`` seconds. ``"auto"`` (a cluster on this machine, found by Ray) is left to Ray.
    """
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        if address == "auto":
            return
        raise ValueError("expected 'auto', 'HOST:PORT' or 'ray://HOST:PORT'")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
        pass


def make_backend(run: RunConfig | None) -> Backend:
    """The backend a ``[run]`` table asks for (``None``: :class:`LocalBackend`).

    ``backend = "ray"`` checks that Ray is installed (one line naming ``pgfl[ray]`` if not).
    ``mode = "tasks"`` gives :class:`~pgfl.backends.ray_sweeps.RaySweeps`, which starts or
    joins the cluster when the run begins; ``mode = "actors"`` opens the session here
    (:func:`ray_session`) and gives :class:`~pgfl.backends.ray_actors.RayActors`.
    """
    if run is None or run.backend == "local":
        return LocalBackend()
    require("ray", "ray", "--backend ray")
    if run.mode == "tasks":
        from pgfl.backends.ray_sweeps import RaySweeps

        return RaySweeps(address=run.address, workers=run.workers)
    try:
        from pgfl.backends.ray_actors import RayActors
    except ImportError as exc:
        if exc.name != "pgfl.backends.ray_actors":
            raise
        raise ConfigError(
            "run.mode = 'actors' is not available in this installation of pgfl; "
            "use run.mode = 'tasks'"
        ) from None
    ray = ray_session(run.address, run.workers)
    actors = run.actors or max(1, int(ray.cluster_resources().get("CPU", 1)))
    return RayActors(
        actors=actors,
        checkpoint_every=run.checkpoint_every,
        address=run.address,
        workers=run.workers,
    )
