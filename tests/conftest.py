"""Guards every test shares (nothing a test starts outlives it), and the Ray fixture."""

import sys

import pytest


def _ray_running() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


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


@pytest.fixture(autouse=True)
def _no_ray_driver_left_running():
    """A Ray instance a test started (``--backend ray`` through the CLI, say) is shut down.

    A Ray driver left in the pytest process is a crash waiting for a loaded machine (its
    core worker aborts the process when the local cluster stops answering) and would take
    every later test down with it. The module-scoped ``ray_local`` fixture
    starts its instance before the test and stops it after its module.
    """
    before = _ray_running()
    yield
    if not before and _ray_running():
        sys.modules["ray"].shutdown()


#: Seconds a Ray test may take before it fails (its stack printed, the suite going on):
#: minutes on a quiet 2-core machine are seconds; a loaded one is slower, not stuck.
RAY_TIMEOUT = 600


def pytest_itemcollected(item):
    """Ray tests: a time bound of their own, and one pytest worker for all of them
    (``--dist loadgroup``: one local Ray instance at a time on the machine).

    Marked as each test is collected, before any ``pytest_collection_modifyitems`` hook:
    pytest-xdist reads the ``xdist_group`` marks in its own hook of that name, whose order
    against a conftest's is not guaranteed. (pytest >= 9.2 breaks the grouping anyway:
    pyproject.toml bounds it.)
    """
    ray = "ray_local" in getattr(item, "fixturenames", ())
    if ray or item.get_closest_marker("ray") is not None:
        if item.get_closest_marker("timeout") is None:  # a test's own bound stands
            item.add_marker(pytest.mark.timeout(RAY_TIMEOUT))
        item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.fixture
def cli(capsys):
    """``cli(args)``: run ``pgfl args`` in this process; return ``(exit code, stdout, stderr)``."""
    from pgfl.cli import main  # lazy: the whole command line, for the tests that ask for it

    def run(args: list[str]) -> tuple[int, str, str]:
        capsys.readouterr()  # what came before is not this command's
        code = 0
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
