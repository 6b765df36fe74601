"""The compiled local phase on several threads: same bits for any thread count.

Every check compares against something computed independently: the numpy reference path
(to 1e-12), the serial kernel, or another thread count in another process. Nothing here is
timed (speed lives in ``pgfl bench --threads`` and ``benchmarks/``).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.test_compiled import CURVES, assert_same, rounds
from tests.test_engine import small_network

from pgfl.engine import CurveSettings, compiled
from pgfl.engine.settings import CurveBatch
from pgfl.rng import KeyedDraws, stream_key

numba = pytest.importorskip("numba")
from pgfl.engine import _kernels  # noqa: E402  (needs numba)

SRC = Path(compiled.__file__).resolve().parents[2]


@pytest.fixture
def threads():
    """Set numba's thread count inside a test; the old count is restored after it."""
    old = compiled.set_threads(None)
    yield compiled.set_threads
    compiled.set_threads(old)


def _counts():
    """Thread counts this process can run (numba's pool size caps them)."""
    return [t for t in (1, 2, 4) if t <= compiled.max_threads()]


@pytest.mark.parametrize("problem", ["ls", "logistic"])
@pytest.mark.parametrize("batch", [True, False], ids=["minibatch", "fullbatch"])
@pytest.mark.parametrize("by_sample", [True, False], ids=["by-sample", "by-batch"])
def test_parallel_kernel_equals_numpy_and_is_bit_identical_across_threads(
    monkeypatch, threads, problem, batch, by_sample
):
    """Every scheme, sharing mode and clipping; both loop orders; 1, 2 (and 4) threads."""
    monkeypatch.setattr(compiled, "PARALLEL_WORK", 0)  # the parallel kernel even when tiny
    monkeypatch.setattr(compiled, "SAMPLE_LOOP", by_sample)
    net = small_network(P=4, K=20, L=12, M=2, problem=problem, batch=batch)
    reference = rounds(monkeypatch, "numpy", net, CURVES, R=3)
    first = None
    for t in _counts():
        threads(t)
        got = rounds(monkeypatch, "compiled", net, CURVES, R=3)
        assert_same(reference, got)  # the numpy reference path, to 1e-12
        if first is None:
            first = got
        for a, b in zip(first, got, strict=True):  # and the bits of the first thread count
            assert np.array_equal(a.local.view(np.uint64), b.local.view(np.uint64))
            assert np.array_equal(a.W.view(np.uint64), b.W.view(np.uint64))


@pytest.mark.parametrize("problem", ["ls", "logistic"])
@pytest.mark.parametrize("M", [2, 7])  # 7: 8 floats per sample, the prefetch's line
def test_both_loop_orders_and_any_chunking_give_the_same_bits(monkeypatch, threads, problem, M):
    net = small_network(P=3, K=8, L=6, M=M, problem=problem)
    block, batch = net.block(), CurveBatch.of(CURVES)
    W = np.random.default_rng(0).standard_normal((len(CURVES), 2, 3, M)) * 0.3
    draws = KeyedDraws(4, 3, [0, 1], block.units)
    clients = compiled.draw_clients(block, draws)
    results = []
    serial = 1 << 62
    for by_sample, parallel, chunks in [(1, serial, 4), (0, serial, 4), (0, 0, 1), (1, 0, 7)]:
        monkeypatch.setattr(compiled, "SAMPLE_LOOP", bool(by_sample))
        monkeypatch.setattr(compiled, "PARALLEL_WORK", parallel)
        monkeypatch.setattr(compiled, "CHUNKS_PER_THREAD", chunks)
        threads(max(_counts()))
        results.append(compiled.local_models(W, block, batch, draws, clients))
    for r in results[1:]:
        assert np.array_equal(results[0].view(np.uint64), r.view(np.uint64))


def test_bit_identical_on_1_2_and_4_threads_in_a_fresh_process(tmp_path, monkeypatch):
    """4 threads need a numba pool of 4 (``NUMBA_NUM_THREADS``, fixed when numba starts)."""
    script = tmp_path / "run.py"
    script.write_text(
        "import json, sys\n"
        "import numpy as np\n"
        "from tests.test_engine import small_network\n"
        "from tests.test_compiled import CURVES\n"
        "from pgfl.engine import compiled, gfl_round\n"
        "compiled.PARALLEL_WORK = 0\n"
        "net = small_network(P=6, K=40, L=25, problem=sys.argv[2])\n"
        "out = {}\n"
        "for t in (1, 2, 4):\n"
        "    compiled.set_threads(t)\n"
        "    W = np.random.default_rng(4).standard_normal((len(CURVES), 4, 6, 3)) * 0.3\n"
        "    for i in (1, 2, 3):\n"
        "        r = gfl_round(W, net, CURVES, seed=11, iteration=i)\n"
        "        W = r.W\n"
        "    out[t] = r.local.tolist()\n"
        "    out[f'{t}-bits'] = r.local.view(np.uint64).tolist()\n"
        "json.dump(out, open(sys.argv[1], 'w'))\n"
    )
    root = SRC.parent
    env = dict(
        os.environ,
        NUMBA_NUM_THREADS="4",
        PGFL_LOCAL_PHASE="compiled",
        PYTHONPATH=os.pathsep.join([str(SRC), str(root)]),
    )
    for problem in ("ls", "logistic"):
        path = tmp_path / f"{problem}.json"
        done = subprocess.run(
            [sys.executable, str(script), str(path), problem], env=env, cwd=root,
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr}"
        got = json.loads(path.read_text())
        assert got["1-bits"] == got["2-bits"] == got["4-bits"]
        # the same round on the numpy reference path, in this process
        net = small_network(P=6, K=40, L=25, problem=problem)
        reference = rounds(monkeypatch, "numpy", net, CURVES, n=3, R=4)[-1].local
        np.testing.assert_allclose(np.array(got["4"]), reference, rtol=0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**40),
    rnd=st.integers(1, 10**6),
    reps=st.lists(st.integers(0, 10**4), min_size=1, max_size=4, unique=True),
    units=st.lists(st.integers(0, 10**5), min_size=1, max_size=5, unique=True),
    name=st.sampled_from(["sampling", "batches", "client_noise.laplace"]),
)
def test_kernel_cell_keys_equal_keyed_draws(seed, rnd, reps, units, name):
    draws = KeyedDraws(seed, rnd, reps, units)
    got = _kernels.cell_keys(np.uint64(stream_key(seed, name)), rnd, draws.reps, draws.units)
    assert np.array_equal(got, draws.keys(name))


@pytest.mark.parametrize(("K", "L"), [(5, 1), (100, 11), (1000, 100), (50, 49), (3, 2)])
@pytest.mark.parametrize("sigmas", [4.0, -50.0], ids=["threshold", "no-candidates-fallback"])
def test_sampler_selects_the_L_smallest_keyed_uniforms(K, L, sigmas):
    draws = KeyedDraws(8, 5, [0, 2, 9], [1, 4])
    u = draws.uniform("sampling", (K,))
    expected = np.sort(np.argsort(u, axis=-1)[..., :L], axis=-1)
    cells = (np.uint64(stream_key(8, "sampling")), 5, draws.reps, draws.units)
    serial = np.empty((3, 2, L), dtype=np.int64)
    _kernels.sample_clients(*cells, K, serial, sigmas)
    parallel = np.empty_like(serial)
    _kernels.sample_clients_parallel(*cells, K, parallel, 2, sigmas)
    assert np.array_equal(serial, expected)
    assert np.array_equal(parallel, expected)


def test_parallel_sampling_equals_serial(monkeypatch, threads):
    net = small_network(P=6, K=40, L=9, N=(2, 3), M=2)
    draws = KeyedDraws(3, 7, reps=[0, 1, 5], units=np.arange(6))
    monkeypatch.setattr(compiled, "PARALLEL_SAMPLING", 1 << 62)
    serial = compiled.draw_clients(net.block(), draws)
    monkeypatch.setattr(compiled, "PARALLEL_SAMPLING", 0)
    for t in _counts():
        threads(t)
        assert np.array_equal(compiled.draw_clients(net.block(), draws), serial)


@settings(max_examples=60, deadline=None)
@given(
    costs=st.lists(st.tuples(st.integers(1, 10), st.integers(1, 12)), min_size=1, max_size=60),
    n_chunks=st.integers(1, 40),
    full=st.booleans(),
)
def test_chunks_cover_every_item_once_and_balance_the_cost(costs, n_chunks, full):
    """Contiguous, non-empty chunks; each within one item's cost of an equal share."""
    n = len(costs)
    epochs = np.array([[e for e, _ in costs]])
    sizes = np.array([[b for _, b in costs]])
    clients = np.arange(n).reshape(1, 1, n)
    bounds = _kernels.chunk_bounds(clients, epochs, sizes, sizes, full, n_chunks)
    chunks = min(n_chunks, n)
    assert bounds.size == chunks + 1 and bounds[0] == 0 and bounds[-1] == n
    assert (np.diff(bounds) > 0).all()
    cost = np.array([e * (b + 2) for e, b in costs], dtype=float)
    share = cost.sum() / chunks
    per_chunk = np.add.reduceat(cost, bounds[:-1])
    assert per_chunk.max() <= share + cost.max() + 1e-9


def test_threads_can_be_set_and_restored():
    old = compiled.set_threads(1)
    try:
        assert compiled._threads() == 1
        assert 1 <= compiled.max_threads() <= (os.cpu_count() or 1) * 64
    finally:
        compiled.set_threads(old)
    assert compiled._threads() == old


def test_one_client_one_epoch_is_the_closed_form_step_on_any_thread_count(threads):
    """A hand-checkable case through the parallel kernel: ``w − μ(2u(uᵀw − d) + 2ρw)``."""
    from pgfl.data.federated import FederatedData
    from pgfl.engine import Network
    from pgfl.problems import LeastSquares

    X = np.array([[[[1.0, 2.0]]]])
    data = FederatedData(X, np.array([[[3.0]]]), np.array([[1]]))
    net = Network(data, LeastSquares(0.1), np.ones((1, 1)), 1, np.ones((1, 1), int), None)
    W = np.array([0.5, -0.5]).reshape(1, 1, 1, 2)
    for t in _counts():
        threads(t)
        out = _kernels_local(W, net, mu=0.2)
        u, w = np.array([1.0, 2.0]), np.array([0.5, -0.5])
        expected = w - 0.2 * (2.0 * u * (u @ w - 3.0) + 2.0 * 0.1 * w)
        np.testing.assert_allclose(out[0, 0, 0, 0], expected, rtol=1e-15, atol=1e-15)


def _kernels_local(W, net, mu):
    block = net.block()
    clients = np.zeros((1, 1, 1), dtype=np.int64)
    curves = CurveBatch.of([CurveSettings(mu=mu)])
    saved = compiled.PARALLEL_WORK
    compiled.PARALLEL_WORK = 0
    try:
        return compiled.local_models(W, block, curves, KeyedDraws(0, 1, [0], [0]), clients)
    finally:
        compiled.PARALLEL_WORK = saved


def test_bench_threads_json_is_a_curve_with_speedups_and_an_amdahl_fit(capsys):
    from pgfl.cli import main

    main(["bench", "--threads", "--json", "--seconds", "0.01"])
    result = json.loads(capsys.readouterr().out)
    counts = result["threads"]
    assert counts[0] == 1 and counts[-1] == compiled.max_threads()
    assert result["local_phase"] == "compiled"
    for case in ("paper", "paper_fig2", "paper_trials"):
        points = [p for p in result["curve"] if p["case"] == case]
        assert [p["threads"] for p in points] == counts
        assert points[0]["speedup"] == 1.0
        for p in points:
            assert p["speedup"] == pytest.approx(
                p["client_updates_per_s"] / points[0]["client_updates_per_s"]
            )
        fit = result["amdahl"][case]
        if counts[-1] > 1:
            n, speedup = counts[-1], points[-1]["speedup"]
            s = fit["serial_fraction"]
            assert s == pytest.approx((n / speedup - 1) / (n - 1))


def test_bench_compare_threads_gives_one_row_per_thread_count(capsys):
    from pgfl.cli import main

    main(["bench", "--compare", "--threads", "--json", "--seconds", "0.01"])
    rows = json.loads(capsys.readouterr().out)["compare"]
    counts = [r["threads"] for r in rows if r["workload"] == "flower"]
    assert counts[0] == 1 and counts[-1] == compiled.max_threads()
    for r in rows:
        assert r["ratio"] == pytest.approx(
            r["pgfl_client_updates_per_s"] / r["loop_client_updates_per_s"]
        )


def test_amdahl_fit_inverts_the_law():
    from pgfl.bench import amdahl_serial_fraction, amdahl_speedup, thread_counts

    for s in (0.0, 0.1, 0.5, 1.0):
        for n in (2, 3, 16):
            assert amdahl_serial_fraction(n, amdahl_speedup(s, n)) == pytest.approx(s)
    assert amdahl_serial_fraction(1, 1.0) is None
    assert thread_counts(2) == [1, 2] and thread_counts(12) == [1, 2, 4, 8, 12]


@pytest.mark.parametrize(
    ("env", "spins"),
    [
        ({"OMP_WAIT_POLICY": "PASSIVE"}, False),
        ({"OMP_WAIT_POLICY": "active"}, True),
        ({"GOMP_SPINCOUNT": "100000"}, True),
        ({"GOMP_SPINCOUNT": "0"}, False),
        ({"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "100000"}, False),
    ],
)
def test_parallel_thresholds_follow_the_wait_policy(monkeypatch, env, spins):
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert compiled.spinning() is spins
    expected = compiled.PARALLEL_WORK * (compiled.SPINNING_FACTOR if spins else 1)
    assert compiled._threshold(compiled.PARALLEL_WORK) == expected
