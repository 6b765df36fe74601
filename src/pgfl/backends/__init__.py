"""Where the batches of an experiment are simulated: this process, or a Ray cluster.

* :class:`~pgfl.backends.local.LocalBackend` (the default): one vectorized
  :func:`~pgfl.engine.simulate` per batch in this process.
* :class:`~pgfl.backends.ray_sweeps.RaySweeps` (``pgfl[ray]``): batches × repetition
  blocks as Ray tasks.
* :class:`~pgfl.backends.ray_actors.RayActors` (``pgfl[ray]``): one large network's units
  held by Ray actors, messages sent between them.

:func:`make_backend` picks one from a configuration's ``[run]`` table
(:class:`~pgfl.experiments.config.RunConfig`); :func:`~pgfl.backends.session.ray_session`
starts or joins the Ray cluster once per process. A backend that cannot finish (a cluster
that lost a worker for good) raises :class:`RunStopped` after saving every finished piece,
for ``--resume``. Ray itself is imported only when a Ray backend starts.

>>> type(make_backend(None)).__name__
'LocalBackend'
"""

from __future__ import annotations

from pgfl.backends.local import (
    Backend,
    LocalBackend,
    Progress,
    RunStopped,
    batch_progress,
    describe,
)
from pgfl.backends.ray_actors import RayActors
from pgfl.backends.ray_sweeps import RaySweeps
from pgfl.backends.session import ray_session
from pgfl.experiments.config import RunConfig
from pgfl.extras import require

__all__ = [
    "Backend",
    "LocalBackend",
    "Progress",
    "RunStopped",
    "batch_progress",
    "describe",
    "make_backend",
    "ray_session",
]


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
        return RaySweeps(address=run.address, workers=run.workers)
    ray = ray_session(run.address, run.workers)
    actors = run.actors or max(1, int(ray.cluster_resources().get("CPU", 1)))
    return RayActors(
        actors=actors,
        checkpoint_every=run.checkpoint_every,
        address=run.address,
        workers=run.workers,
    )
