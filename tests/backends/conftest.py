"""One local Ray instance with 2 CPUs for the Ray tests of a module."""

import pytest


@pytest.fixture(scope="module")
def ray_local():
    """The ``ray`` module with a local 2-CPU session, shut down after the module.

    Not kept for the whole session: a Ray driver left running inside the pytest process
    is a crash waiting for a loaded machine (its core worker aborts the process when the
    local cluster stops answering), and it would take every later test down with it.
    """
    ray = pytest.importorskip("ray")
    from pgfl.backends import ray_session

    ray_session(workers=2)
    yield ray
    ray.shutdown()
