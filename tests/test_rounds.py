"""Whole rounds in compiled code (pgfl.engine.rounds) against the round-by-round engine.

The round-by-round engine (pgfl.engine.step, numpy steps around the compiled local phase)
defines what a round computes; the compiled rounds must give its bits exactly, for every
built-in mechanism, both losses, mini- and full batches, any M, L and thread count, across
calls and metric chunks, and through divergence. They are also checked against the plain
loop of tests/reference.py (to 1e-12) and their pieces against numpy's own sums.
"""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare
from tests.reference import reference_round, sampled_clients, unit_draws
from tests.test_engine import ALL_SCHEMES, small_network

from pgfl.data.synthetic import client_schedule, regression_data
from pgfl.engine import CurveSettings, Network, compiled, rounds, simulate
from pgfl.engine.settings import CurveBatch
from pgfl.engine.simulate import METRICS_CHUNK
from pgfl.engine.step import draw_clients, floyd_clients
from pgfl.privacy.mechanisms import (
    CentralNoise,
    ClientNoise,
    GraphHomomorphic,
    PairwiseCancelling,
    PerLinkNoise,
    RandomNoise,
    SecureAggregationScheme,
)
from pgfl.privacy.secagg import SecAggConfig
from pgfl.problems import LeastSquares
from pgfl.rng import KeyedDraws
from pgfl.topology import combination_matrix

numba = pytest.importorskip("numba")
from pgfl.engine import _round_kernels  # noqa: E402  (needs numba)

CURVES = [
    *ALL_SCHEMES,
    CurveSettings(mu=0.3, share="updates", client=ClientNoise(distribution="laplace", std=0.2)),
    CurveSettings(
        mu=0.2, client=ClientNoise(distribution="gaussian", std=0.3), server=RandomNoise(std=0.2)
    ),  # fmt: skip
    CurveSettings(mu=0.4, server=PerLinkNoise(std=0.3, distribution="gaussian")),
    CurveSettings(mu=0.3, clip_norm=0.2, server=GraphHomomorphic(std=0.1, distribution="gaussian")),
]
FIELDS = (
    *("centroid_msd", "individual_msd", "disagreement", "test_error", "test_log_loss"),
    *("server_test_error", "server_test_loss", "diverged_at", "W", "aborted", "clipped"),
)


def both(monkeypatch, net, curves, **kw):
    """``simulate`` with the compiled rounds, and round by round; both trajectories."""
    assert rounds.CompiledRounds.prepare(net, CurveBatch.of(curves, net), seed=0, reps=[0])
    fast = simulate(net, curves, **kw)
    monkeypatch.setattr(rounds, "WHOLE_ROUNDS", False)
    slow = simulate(net, curves, **kw)
    monkeypatch.setattr(rounds, "WHOLE_ROUNDS", True)
    return fast, slow


def assert_bits(a, b):
    """Every field of two trajectories equal bit for bit (NaN where NaN)."""
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None:
            assert x is None and y is None, name
            continue
        assert x.shape == y.shape, name
        if x.dtype == np.float64:
            x, y = x.view(np.uint64), y.view(np.uint64)
        assert np.array_equal(x, y), name
    assert a.abort_log == b.abort_log


@pytest.mark.parametrize("problem", ["ls", "logistic"])
@pytest.mark.parametrize("batch", [True, False], ids=["minibatch", "fullbatch"])
@pytest.mark.parametrize(("M", "K", "L"), [(3, 5, 3), (1, 12, 10), (2, 6, 6), (2, 9, 1)])
def test_compiled_rounds_give_the_round_by_round_bits(monkeypatch, problem, batch, M, K, L):
    """Every built-in scheme; M = 1 takes numpy's pairwise mean over L ≥ 8; L = K, L = 1."""
    net = small_network(P=4, K=K, L=L, M=M, batch=batch, problem=problem)
    fast, slow = both(monkeypatch, net, CURVES, iterations=70, repetitions=3, seed=3)
    assert_bits(fast, slow)
    assert np.isfinite(fast.W).all()


def test_short_calls_and_later_repetitions_give_the_same_bits(monkeypatch):
    """Calls of a few rounds (much noise per round) and a block of later repetitions."""
    net = small_network(P=3, K=7, L=4, M=2)
    monkeypatch.setattr(rounds, "NOISE_BYTES", 1)  # one round per call
    fast, slow = both(monkeypatch, net, CURVES, iterations=5, repetitions=2, first_repetition=4)
    assert_bits(fast, slow)
    monkeypatch.setattr(rounds, "NOISE_BYTES", 8 << 20)
    monkeypatch.setattr(rounds, "ROUNDS_PER_CALL", 7)  # calls that straddle the metric chunks
    fast, slow = both(monkeypatch, net, CURVES, iterations=METRICS_CHUNK + 20, repetitions=2)
    assert_bits(fast, slow)


def test_central_noise_and_large_in_degrees_give_the_same_bits(monkeypatch):
    """``A = 11ᵀ/P`` with P = 140: receivers sum 140 messages (numpy's pairwise halves)."""
    P = 140
    net = small_network(P=P, K=2, L=1, N=(2, 3), M=2, A=np.full((P, P), 1.0 / P))
    curves = [
        CurveSettings(mu=0.3),
        CurveSettings(mu=0.3, server=CentralNoise(std=0.5)),
        CurveSettings(mu=0.3, server=CentralNoise(std=0.2, distribution="gaussian")),
    ]
    fast, slow = both(monkeypatch, net, curves, iterations=4, repetitions=2)
    assert_bits(fast, slow)


def test_diverging_repetitions_are_marked_and_frozen_as_round_by_round(monkeypatch):
    net = small_network(P=3, K=6, L=3, M=2)
    curves = [
        CurveSettings(mu=0.3),
        CurveSettings(mu=60.0),
        CurveSettings(mu=9.0, server=RandomNoise(std=3.0)),
    ]
    fast, slow = both(monkeypatch, net, curves, iterations=40, repetitions=3)
    assert_bits(fast, slow)
    assert (fast.diverged_at[1] > 0).all() and (fast.diverged_at[0] == -1).all()
    assert np.isnan(fast.W[1]).all() and np.isfinite(fast.W[0]).all()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("pick", ["all", "alternate"])
def test_the_parallel_kernel_gives_the_serial_bits_on_any_thread_count(monkeypatch, threads, pick):
    """Every call on the threads, or one call on them and the next on one thread."""
    if threads > compiled.max_threads():
        pytest.skip("numba's pool has fewer threads")
    net = small_network(P=5, K=20, L=12, M=2)
    monkeypatch.setattr(rounds, "ROUNDS_PER_CALL", 16)
    monkeypatch.setattr(rounds, "WHOLE_ROUNDS", False)
    reference = simulate(net, CURVES, iterations=67, repetitions=3, seed=1)
    monkeypatch.setattr(rounds, "WHOLE_ROUNDS", True)
    calls = []

    def choose(pace):
        calls.append(pace.choices[0 if pick == "all" else len(calls) % len(pace.choices)])
        return calls[-1]

    old = compiled.set_threads(threads)
    try:
        monkeypatch.setattr(compiled, "PARALLEL_WORK", 0)  # every call may use the threads
        monkeypatch.setattr(compiled, "CHUNKS_PER_THREAD", 3)
        monkeypatch.setattr(rounds._Pace, "choose", choose)
        run = rounds.CompiledRounds.prepare(net, CurveBatch.of(CURVES, net), seed=1, reps=[0])
        assert run.workers == threads
        got = simulate(net, CURVES, iterations=67, repetitions=3, seed=1)
    finally:
        compiled.set_threads(old)
    assert_bits(got, reference)
    assert len(calls) == 5 and threads in calls


def test_a_call_goes_to_the_threads_when_its_rounds_together_carry_the_work(monkeypatch):
    """Waking the workers is paid once per call of T rounds: the threshold weighs T rounds."""
    if compiled.max_threads() < 2:
        pytest.skip("numba's pool has one thread")
    net = small_network(P=5, K=20, L=12, M=2)
    batch = CurveBatch.of(CURVES, net)
    per_round = rounds.CompiledRounds(net, batch, 1, np.arange(1))
    per_client = compiled._block_arrays(net.block())[-1]
    work = len(CURVES) * 5 * 12 * per_client * 2  # C R P L E(B+2) M of one round
    monkeypatch.setattr(compiled, "spinning", lambda: False)  # the sleeping workers' threshold
    old = compiled.set_threads(2)
    try:
        monkeypatch.setattr(compiled, "PARALLEL_WORK", work * per_round.T)
        assert rounds.CompiledRounds(net, batch, 1, np.arange(1)).workers == 2
        monkeypatch.setattr(compiled, "PARALLEL_WORK", work * per_round.T + 1)
        assert rounds.CompiledRounds(net, batch, 1, np.arange(1)).workers == 1
    finally:
        compiled.set_threads(old)


def test_the_pace_keeps_the_faster_thread_count_and_retries_the_other():
    pace = rounds._Pace(2)
    assert pace.choose() == 2
    pace.record(2, 1.0)
    assert pace.choose() == 1  # not timed yet
    pace.record(1, 3.0)
    for _ in range(rounds.RETRY_CALLS):
        assert pace.choose() == 2
        pace.record(2, 1.0)
    assert pace.choose() == 1  # timed again
    pace.record(1, 2.0)  # still slower: twice as long before the next try
    assert pace.wait[1] == 2 * rounds.RETRY_CALLS
    for _ in range(2 * rounds.RETRY_CALLS):
        assert pace.choose() == 2
        pace.record(2, 1.5)
    assert pace.choose() == 1
    pace.record(1, 0.5)  # now one thread is faster (another job took a core)
    assert pace.choose() == 1 and pace.wait[1] == rounds.RETRY_CALLS
    assert rounds._Pace(1).choose() == 1


def test_equal_to_the_plain_loop_reference():
    """Three rounds of every built-in scheme against tests/reference.py's loops (1e-12)."""
    net = small_network(P=3, K=5, L=3, M=3)
    curves = CURVES[: len(ALL_SCHEMES) + 2]
    R = 2
    got = simulate(net, curves, iterations=3, repetitions=R, seed=5).W
    W = np.zeros((len(curves), R, 3, 3))
    for i in (1, 2, 3):
        W = reference_round(W, net, curves, 5, i)
    np.testing.assert_allclose(got, W, rtol=0, atol=1e-12)


def test_other_schemes_and_losses_run_round_by_round():
    net = small_network(P=3, K=5, L=3)
    secagg = SecureAggregationScheme(SecAggConfig(clip=32.0, frac_bits=20, threshold=2))
    correlated = CurveSettings(mu=0.3, server=PairwiseCancelling(std=0.1))
    for curves in ([CurveSettings(mu=0.3, client=secagg)], [CurveSettings(mu=0.3), correlated]):
        batch = CurveBatch.of(curves, net)
        assert rounds.unsupported(net, batch) is not None
        assert rounds.CompiledRounds.prepare(net, batch, seed=0, reps=[0]) is None

    class MyLoss(LeastSquares):  # a subclass may change the gradient
        pass

    mine = Network(net.data, MyLoss(0.1), net.A, net.L, net.epochs, net.batch)
    assert "MyLoss" in rounds.unsupported(mine, CurveBatch.of([CurveSettings(mu=0.3)]))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 700), cols=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_pairwise_sum_is_numpys(n, cols, seed):
    a = np.random.default_rng(seed).standard_normal((n, cols)) * 10.0 ** np.arange(cols)
    for col in range(cols):
        got = _round_kernels._pairwise(a, col, 0, n)
        want = np.add.reduce(np.ascontiguousarray(a[:, col]), initial=-0.0) if n else -0.0
        assert np.float64(got).view(np.uint64) == np.float64(want).view(np.uint64)


@settings(max_examples=40, deadline=None)
@given(L=st.integers(1, 300), M=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_mean_over_the_clients_is_numpys_mean(L, M, seed):
    """numpy's mean over the client axis of ``[C, R, P, L, M]``: the order depends on M."""
    a = np.random.default_rng(seed).standard_normal((2, 1, 2, L, M)) * 1e3
    a[0, 0, 0] = -0.0  # the sign of an all-zero mean
    want = a.mean(axis=3)
    got = np.array([[[[_round_kernels._mean_slots(a[c, r, p], m) for m in range(M)]
                      for p in range(2)] for r in range(1)] for c in range(2)])  # fmt: skip
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))


def test_a_ring_of_ten_units_keeps_the_same_bits_over_a_thousand_rounds(monkeypatch):
    """The papers' network (ring, P = 10, K = 100, L = 11, M = 2) at length."""
    rng = np.random.default_rng(0)
    data = regression_data(rng, P=10, K=100, N=20, M=2)
    E, B = client_schedule(rng, 10, 100, epochs=(1, 10), batch=(5, 10))
    net = Network(data, LeastSquares(0.1), combination_matrix(nx.cycle_graph(10)), 11, E, B)
    curves = [CurveSettings(mu=0.7), CurveSettings(mu=0.7, server=GraphHomomorphic(std=0.3))]
    fast, slow = both(monkeypatch, net, curves, iterations=1000, repetitions=1)
    assert_bits(fast, slow)


@pytest.mark.parametrize(("K", "L"), [(2000, 11), (1500, 1400), (5000, 1)])
def test_floyd_sampling_is_the_same_on_every_path(K, L):
    """Units of more than SCAN_CLIENTS clients: numpy, kernel and the plain reference agree."""
    net = small_network(P=2, K=K, L=L, N=(1, 2), M=2)
    draws = KeyedDraws(4, 9, [0, 3], net.block().units)
    got = compiled.draw_clients(net.block(), draws)
    assert np.array_equal(got, draw_clients(net.block(), draws))
    for r, rep in enumerate((0, 3)):
        for p in range(2):
            assert got[r, p].tolist() == sampled_clients(unit_draws(4, 9, rep, p), K, L)
    assert (np.diff(got, axis=-1) > 0).all() and got.min() >= 0 and got.max() < K


def test_floyd_sampling_is_uniform():
    """Each of K clients is sampled with probability L/K (chi-square over 4,000 cells)."""
    K, L, n = 1100, 7, 4000
    u = np.random.default_rng(0).random((n, 1, L))
    picks = floyd_clients(u, K).reshape(-1)
    counts = np.bincount(picks, minlength=K)
    assert chisquare(counts).pvalue > 1e-4
    pairs = floyd_clients(np.random.default_rng(1).random((20000, 1, 2)), 4)  # all 6 pairs alike
    _, freq = np.unique(pairs[:, 0, 0] * 4 + pairs[:, 0, 1], return_counts=True)
    assert freq.size == 6 and chisquare(freq).pvalue > 1e-4


def test_floyd_networks_give_the_same_bits_in_compiled_rounds(monkeypatch):
    net = small_network(P=2, K=1500, L=9, N=(1, 4), M=2)
    fast, slow = both(monkeypatch, net, CURVES[:3], iterations=5, repetitions=2)
    assert_bits(fast, slow)
