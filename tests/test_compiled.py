"""The compiled local phase (numba) against the numpy reference path and a slow loop."""

import json
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.reference import reference_round
from tests.test_engine import ALL_SCHEMES, small_network

from pgfl.apps.runner import run_experiment
from pgfl.bench import loop_round
from pgfl.cli import main
from pgfl.data.federated import FederatedData
from pgfl.engine import CurveSettings, Network, compiled, simulate
from pgfl.engine.settings import CurveBatch
from pgfl.engine.step import draw_clients, gfl_round
from pgfl.experiments.loader import parse_config
from pgfl.privacy.mechanisms import GraphHomomorphic, RandomNoise, SecureAggregationScheme
from pgfl.privacy.secagg import SecAggConfig
from pgfl.problems import LeastSquares, Logistic
from pgfl.rng import KeyedDraws
from pgfl.validation import ConfigError

pytest.importorskip("numba")

SECAGG = SecAggConfig(clip=32.0, frac_bits=20, threshold=2)
CURVES = [
    *ALL_SCHEMES,
    CurveSettings(mu=0.3, share="updates"),
    CurveSettings(mu=0.5, share="updates", server=GraphHomomorphic(std=0.2)),
    CurveSettings(mu=0.3, clip_norm=0.05, server=RandomNoise(std=0.1)),
]


def rounds(monkeypatch, kind, net, curves, *, n=3, block_size=None, R=2):
    """``n`` rounds of ``gfl_round`` with the local phase forced to ``kind``; every view."""
    monkeypatch.setenv(compiled.ENV, kind)
    P, M = net.data.shape[0], net.data.shape[3]
    W = np.random.default_rng(4).standard_normal((len(curves), R, P, M)) * 0.3
    out = []
    for i in range(1, n + 1):
        r = gfl_round(W, net, curves, seed=11, iteration=i, block_size=block_size)
        out.append(r)
        W = r.W
    return out


def assert_same(a, b):
    for x, y in zip(a, b, strict=True):
        for name in ("W", "psi", "messages", "local"):
            np.testing.assert_allclose(getattr(x, name), getattr(y, name), rtol=0, atol=1e-12)
        assert np.array_equal(x.clients, y.clients)
        assert np.array_equal(x.aborted, y.aborted)
        assert np.array_equal(x.clipped, y.clipped)


@pytest.mark.parametrize("problem", ["ls", "logistic"])
@pytest.mark.parametrize("batch", [True, False], ids=["minibatch", "fullbatch"])
@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "serial"])
def test_compiled_equals_numpy_every_scheme_sharing_and_clipping(
    monkeypatch, problem, batch, parallel
):
    monkeypatch.setattr(compiled, "PARALLEL_WORK", 0 if parallel else 1 << 62)
    net = small_network(problem=problem, batch=batch)
    assert_same(
        rounds(monkeypatch, "numpy", net, CURVES),
        rounds(monkeypatch, "compiled", net, CURVES, block_size=2),
    )


@pytest.mark.parametrize("share", ["models", "updates"])
def test_compiled_equals_numpy_with_secure_aggregation(monkeypatch, share):
    net = small_network(P=3, K=6, L=4)
    curves = [
        CurveSettings(mu=0.3, share=share, client=SecureAggregationScheme(SECAGG)),
        CurveSettings(mu=0.3, share=share, client=SecureAggregationScheme(SECAGG, dropout=0.3)),
    ]
    assert_same(
        rounds(monkeypatch, "numpy", net, curves), rounds(monkeypatch, "compiled", net, curves)
    )


@pytest.mark.parametrize("problem", ["ls", "logistic"])
def test_compiled_equals_the_slow_loop_reference(monkeypatch, problem):
    monkeypatch.setenv(compiled.ENV, "compiled")
    net = small_network(problem=problem, L=4)
    W = np.random.default_rng(1).standard_normal((len(ALL_SCHEMES), 2, 3, 3)) * 0.3
    for i in (1, 2):
        fast = gfl_round(W, net, ALL_SCHEMES, seed=5, iteration=i).W
        np.testing.assert_allclose(
            fast, reference_round(W, net, ALL_SCHEMES, 5, i), rtol=0, atol=1e-12
        )
        W = fast


def test_whole_simulation_same_with_either_path(monkeypatch):
    net = small_network(P=4, K=8, L=3)
    curves = CURVES[:4]
    monkeypatch.setenv(compiled.ENV, "numpy")
    a = simulate(net, curves, iterations=6, repetitions=3, seed=2)
    monkeypatch.setenv(compiled.ENV, "compiled")
    b = simulate(net, curves, iterations=6, repetitions=3, seed=2)
    np.testing.assert_allclose(a.W, b.W, rtol=0, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    w=st.lists(st.floats(-2, 2), min_size=2, max_size=2),
    mu=st.floats(0.01, 1.0),
    rho=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**31),
)
def test_one_full_batch_step_is_the_closed_form_least_squares_step(w, mu, rho, seed):
    """E = 1, full batch, one client: ``w − μ(2/N Σ u(uᵀw − d) + 2ρw)`` (eq. 3, journal eq. 54)."""
    rng = np.random.default_rng(seed)
    N = 7
    X = rng.standard_normal((1, 1, N, 2))
    y = rng.standard_normal((1, 1, N))
    data = FederatedData(X, y, np.array([[N]]))
    net = Network(data, LeastSquares(rho), np.ones((1, 1)), 1, np.ones((1, 1), int), None)
    W = np.array(w, dtype=float).reshape(1, 1, 1, 2)
    block = net.block()
    draws = KeyedDraws(0, 1, [0], [0])
    clients = np.zeros((1, 1, 1), dtype=np.int64)
    out = compiled.local_models(W, block, CurveBatch.of([CurveSettings(mu=mu)]), draws, clients)
    u, d, w0 = X[0, 0], y[0, 0], np.array(w)
    expected = w0 - mu * (2.0 / N * u.T @ (u @ w0 - d) + 2.0 * rho * w0)
    np.testing.assert_allclose(out[0, 0, 0, 0], expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("K", "L"), [(5, 1), (100, 11), (1000, 100), (7, 7)])
def test_compiled_client_sampling_equals_numpy(K, L):
    net = small_network(P=3, K=K, L=L, N=(2, 3), M=2)
    draws = KeyedDraws(3, 2, reps=[0, 5], units=[0, 1, 2])
    expected = draw_clients(net.block(), draws)
    got = compiled.draw_clients(net.block(), draws)
    assert np.array_equal(got, expected)
    assert (np.diff(got, axis=-1) > 0).all()  # L distinct clients, ascending


def test_kernel_draws_the_keyed_uniforms_bit_for_bit():
    from pgfl.engine._kernels import keyed_uniform

    draws = KeyedDraws(9, 4, reps=[0, 3], units=[1, 2, 5])
    u = draws.uniform("batches", (3, 4, 5))  # [R, P, L, E, B]
    keys = draws.keys("batches")
    for r, p, n in [(0, 0, 0), (1, 2, 59), (0, 1, 17), (1, 0, 33)]:
        assert keyed_uniform(keys[r, p], n) == u[r, p].reshape(-1)[n]


def test_compiled_is_the_default_for_builtin_losses_only(monkeypatch):
    monkeypatch.delenv(compiled.ENV, raising=False)
    assert compiled.local_phase_kind(LeastSquares(0.1)) == "compiled"
    assert compiled.local_phase_kind(Logistic(0.1)) == "compiled"

    class MyLoss(LeastSquares):
        pass

    assert compiled.local_phase_kind(MyLoss(0.1)) == "numpy"
    monkeypatch.setenv(compiled.ENV, "numpy")
    assert compiled.local_phase_kind(LeastSquares(0.1)) == "numpy"
    monkeypatch.setenv(compiled.ENV, "compiled")
    with pytest.raises(ConfigError, match="built-in loss"):
        compiled.local_phase_kind(MyLoss(0.1))
    monkeypatch.setenv(compiled.ENV, "fortran")
    with pytest.raises(ConfigError, match="PGFL_LOCAL_PHASE"):
        compiled.local_phase_kind(LeastSquares(0.1))


@pytest.mark.parametrize("forced", [None, "numpy"])
def test_the_run_reports_which_local_phase_ran(monkeypatch, tmp_path, forced):
    if forced is None:
        monkeypatch.delenv(compiled.ENV, raising=False)
    else:
        monkeypatch.setenv(compiled.ENV, forced)
    raw = {
        "name": "which",
        "iterations": 3,
        "topology": {"kind": "ring", "P": 3},
        "data": {"K": 4, "N": 6},
        "training": {"L": 2, "mu": 0.3},
    }
    summary = run_experiment(parse_config(raw), tmp_path)
    expected = forced or "compiled"
    assert summary["engine"]["local_phase"] == expected
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["engine"] == {"backend": "local", "local_phase": expected}
    log = (tmp_path / "run.log").read_text().splitlines()
    assert log[:2] == ["engine: backend=local", f"engine: local_phase={expected}"]


@pytest.mark.parametrize("problem", ["ls", "logistic"])
def test_the_compare_baseline_loop_does_the_engines_work(problem):
    """With every client sampled and full batches there is no randomness: same round."""
    net = small_network(problem=problem, P=4, K=5, L=5, batch=False)
    W = np.random.default_rng(2).standard_normal((4, 3)) * 0.3
    engine = gfl_round(W[None, None], net, [CurveSettings(mu=0.4)], seed=0, iteration=1).W
    loop = loop_round(W, net, 0.4, np.random.default_rng(0))
    np.testing.assert_allclose(engine[0, 0], loop, rtol=0, atol=1e-12)


def test_bench_compare_prints_both_rates_and_their_ratio(capsys):
    main(["bench", "--compare", "--json", "--seconds", "0.01"])
    rows = json.loads(capsys.readouterr().out)["compare"]
    assert [r["workload"] for r in rows] == ["paper", "flower"]
    flower = rows[1]
    assert (flower["P"], flower["K"], flower["L"], flower["M"]) == (1, 1000, 100, 20)
    assert flower["loss"] == "logistic" and flower["local_phase"] == "compiled"
    for r in rows:  # medians of engine/loop pairs timed in turn
        pgfl, loop = np.array(r["pairs"]).T
        assert len(pgfl) == 3 and r["ratio"] == pytest.approx(np.median(pgfl / loop))
        assert r["pgfl_client_updates_per_s"] == pytest.approx(np.median(pgfl))
        assert r["loop_client_updates_per_s"] == pytest.approx(np.median(loop))
        assert r["rounds"] == "compiled"


def test_without_numba_the_numpy_path_runs_and_forcing_compiled_says_how_to_install(
    monkeypatch,
):
    monkeypatch.delenv(compiled.ENV, raising=False)
    monkeypatch.setattr(compiled, "_numba_available", lambda: False)
    assert compiled.local_phase_kind(LeastSquares(0.1)) == "numpy"
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba now fails
    monkeypatch.setenv(compiled.ENV, "compiled")
    with pytest.raises(ConfigError, match=r"pgfl\[fast\]"):
        compiled.local_phase_kind(LeastSquares(0.1))
