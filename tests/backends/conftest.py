"""One local Ray instance with 2 CPUs for every Ray test of the session."""

import pytest


@pytest.fixture(scope="session")
def ray_local():
    """The ``ray`` module with a local 2-CPU session (reused if one is already open)."""
    ray = pytest.importorskip("ray")
    from pgfl.backends import ray_session

    started = not ray.is_initialized()
    ray_session(workers=2)
    yield ray
    if started:
        ray.shutdown()
