"""What pgfl promises about threads and processes (the compiled engine's module doc).

One parallel kernel launch per process at a time, whatever numba's threading layer; no
fork after numba is loaded; a process readied by ``compiled.load`` allocates only its data
on its first round. Nothing here is timed: where a test waits, waiting longer can only make
it fail more surely, never pass wrongly.
"""

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from tests.test_engine import small_network

from pgfl.engine import CurveSettings, compiled
from pgfl.engine.settings import CurveBatch
from pgfl.rng import KeyedDraws

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (this tree's pgfl) and return what it printed."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_secure_aggregation_workers_fork_only_from_a_process_without_numba():
    code = (
        "import sys\n"
        "from pgfl.privacy.secagg.pool import start_method\n"
        "print(start_method())\n"
        "import numba\n"
        "print(start_method())\n"
    )
    plain, with_numba = _python(code).splitlines()
    assert plain == "fork"
    assert with_numba == "forkserver"


def test_two_threads_never_launch_parallel_kernels_at_once(monkeypatch):
    """Two threads run a round's local phase at once; inside the parallel launch, the
    second is never there while the first is (a barrier for two never fills)."""
    inside = threading.Barrier(2, timeout=0.5)
    met = []

    def parallel(*args):
        try:
            inside.wait()
            met.append(True)  # both threads inside a parallel launch together
        except threading.BrokenBarrierError:
            met.append(False)
        args[-4].fill(0.0)  # out

    def serial(*args):  # pragma: no cover - the parallel launch is forced below
        raise AssertionError("the serial kernel ran")

    monkeypatch.setattr(compiled, "_kernels", lambda: (parallel, serial))
    monkeypatch.setattr(compiled, "_threads", lambda: 2)
    monkeypatch.setattr(compiled, "PARALLEL_WORK", 0)
    net = small_network(P=2, K=4, L=2)
    block, curves = net.block(), CurveBatch.of([CurveSettings(mu=0.3)])
    draws = KeyedDraws(1, 1, [0], block.units)
    clients = np.zeros((1, 2, 2), dtype=np.int64)
    W = np.zeros((1, 1, 2, 3))

    def run():
        compiled.local_models(W, block, curves, draws, clients)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert met == [False, False]  # each waited alone: the other was held at the lock


def test_a_readied_process_allocates_almost_nothing_on_its_first_kernel_call():
    """After ``compiled.load()`` a first round's kernel calls trace < 2 MiB of Python
    objects (without it, numba's typing context alone is about 15 MiB): what a Ray actor
    counts against its memory budget is its data."""
    pytest.importorskip("numba")
    code = (
        "import tracemalloc\n"
        "import numpy as np\n"
        "from tests.test_engine import small_network\n"
        "from pgfl.engine import CurveSettings, compiled\n"
        "from pgfl.engine.step import gfl_round\n"
        "net = small_network(P=3, K=5, L=3)\n"
        "W = np.zeros((1, 1, 3, 3))\n"
        "{load}"
        "tracemalloc.start()\n"
        "gfl_round(W, net, [CurveSettings(mu=0.3)], seed=1, iteration=1)\n"
        "print(tracemalloc.get_traced_memory()[1])\n"
    )
    env_forced = "import os; os.environ['PGFL_LOCAL_PHASE'] = 'compiled'\n"
    readied = int(_python(env_forced + code.format(load="compiled.load()\n")))
    cold = int(_python(env_forced + code.format(load="")))
    assert readied < 2 << 20 < cold
