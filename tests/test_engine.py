import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.reference import reference_round

from pgfl.data.synthetic import client_schedule, logistic_data, regression_data
from pgfl.engine import (
    CurveSettings,
    Network,
    Streams,
    _curve_arrays,
    combine_phase,
    draw_round,
    local_phase,
    sample_clients,
    simulate,
)
from pgfl.problems import LeastSquares, Logistic
from pgfl.rng import stream
from pgfl.topology import combination_matrix
from pgfl.validation import ConfigError


def small_network(P=3, K=5, L=3, N=(4, 9), M=3, batch=True, problem="ls", seed=0, A=None):
    rng = np.random.default_rng(seed)
    if problem == "ls":
        data, prob = regression_data(rng, P=P, K=K, N=N, M=M), LeastSquares(0.1)
    else:
        data, prob = logistic_data(rng, P=P, K=K, N=N, M=M, test_size=5), Logistic(0.05)
    E, B = client_schedule(rng, P, K, epochs=(1, 4), batch=(2, 5))
    if A is None:
        A = combination_matrix(nx.cycle_graph(P) if P > 2 else nx.complete_graph(P))
    return Network(data, prob, A, L, E, B if batch else None)


def run_both(net, settings, R=2, rounds=3, seed=5):
    """Advance the engine and the loop reference from the same state with the same draws."""
    ca = _curve_arrays(settings)
    streams = Streams(*(stream(seed, n) for n in Streams._fields))
    P, M = net.data.shape[0], net.data.shape[3]
    W = np.random.default_rng(1).standard_normal((len(settings), R, P, M)) * 0.3
    for _ in range(rounds):
        draws = draw_round(streams, net, ca, R)
        fast = combine_phase(local_phase(W, net, ca, draws)[0], net, ca, draws)
        slow = reference_round(W, net, settings, draws)
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)
        W = fast
    return W


ALL_SCHEMES = [
    CurveSettings(mu=0.3),
    CurveSettings(mu=0.5, server_noise="graph_homomorphic", server_std=0.4),
    CurveSettings(mu=0.2, server_noise="random", server_std=0.3, server_distribution="gaussian"),
    CurveSettings(mu=0.4, server_noise="random_per_link", server_std=0.2),
    CurveSettings(mu=0.3, client_noise="laplace", client_std=0.5),
    CurveSettings(mu=0.3, share="updates", client_noise="gaussian", client_std=0.5),
    CurveSettings(mu=0.3, clip_norm=0.5),
]


@pytest.mark.parametrize("problem", ["ls", "logistic"])
def test_engine_equals_loop_reference_every_scheme(problem):
    run_both(small_network(problem=problem), ALL_SCHEMES)


def test_engine_equals_loop_reference_full_batch_full_participation_one_epoch():
    net = small_network(L=5, batch=False)
    net = Network(net.data, net.problem, net.A, 5, np.ones_like(net.epochs), None)
    run_both(net, [CurveSettings(mu=0.4)], R=1, rounds=5)


def test_limit_case_full_participation_one_epoch_is_plain_gradient_descent_diffusion():
    # no noise, L = K, E = 1, full batch: w_p <- sum_m a_pm (w_m - mu grad J_m(w_m)),
    # where J_m is the average over unit m's clients of their empirical risks.
    net = small_network(P=4, K=3, L=3, batch=False, A=combination_matrix(nx.path_graph(4)))
    net = Network(net.data, net.problem, net.A, 3, np.ones((4, 3), dtype=int), None)
    mu, T = 0.3, 20
    traj = simulate(net, [CurveSettings(mu=mu)], iterations=T, w_opt=np.zeros(3))
    data = net.data
    W = np.zeros((4, 3))
    for _ in range(T):
        psi = np.zeros_like(W)
        for p in range(4):
            grads = []
            for k in range(3):
                n = data.counts[p, k]
                X, y = data.X[p, k, :n], data.y[p, k, :n]
                grads.append(2 * X.T @ (X @ W[p] - y) / n + 2 * 0.1 * W[p])
            psi[p] = W[p] - mu * np.mean(grads, axis=0)
        W = net.A @ psi
    np.testing.assert_allclose(traj.W[0, 0], W, atol=1e-12)


def test_p_equals_one_is_fedavg():
    net = small_network(P=1, K=6, L=4, A=np.ones((1, 1)))
    assert net.iota2 == 0.0
    W = run_both(
        net, [CurveSettings(mu=0.3), CurveSettings(mu=0.3, client_noise="laplace", client_std=0.1)]
    )
    assert W.shape == (2, 2, 1, 3)


def test_k1_l1_is_the_books_diffusion_recursion():
    # K = 1, L = 1, one epoch, full batch: each server is a single agent running
    # adapt-then-combine diffusion (book §11.3): phi = w - mu grad J(w); w = sum a phi.
    net = small_network(P=5, K=1, L=1, batch=False, A=combination_matrix(nx.cycle_graph(5)))
    net = Network(net.data, net.problem, net.A, 1, np.ones((5, 1), dtype=int), None)
    traj = simulate(net, [CurveSettings(mu=0.2)], iterations=15, w_opt=np.zeros(3))
    W = np.zeros((5, 3))
    for _ in range(15):
        phi = np.array(
            [
                W[k]
                - 0.2
                * (
                    2
                    * net.data.X[k, 0, : net.data.counts[k, 0]].T
                    @ (
                        net.data.X[k, 0, : net.data.counts[k, 0]] @ W[k]
                        - net.data.y[k, 0, : net.data.counts[k, 0]]
                    )
                    / net.data.counts[k, 0]
                    + 0.2 * W[k]
                )
                for k in range(5)
            ]
        )
        W = net.A @ phi
    np.testing.assert_allclose(traj.W[0, 0], W, atol=1e-12)


@st.composite
def valid_matrices(draw):
    P = draw(st.integers(2, 9))
    seed = draw(st.integers(0, 2**31 - 1))
    p = draw(st.floats(0.3, 1.0))
    rng = np.random.default_rng(seed)
    while True:
        g = nx.gnp_random_graph(P, p, seed=int(rng.integers(2**31)))
        if nx.is_connected(g):
            break
    rule = draw(st.sampled_from(["metropolis", "max_degree"]))
    return combination_matrix(g, rule), seed


@settings(max_examples=60, deadline=None)
@given(valid_matrices(), st.integers(1, 4), st.integers(1, 3))
def test_graph_homomorphic_noise_has_zero_network_average(matrix_seed, M, R):
    A, seed = matrix_seed
    P = A.shape[0]
    rng = np.random.default_rng(seed)
    data = regression_data(rng, P=P, K=1, N=2, M=M)
    net = Network(data, LeastSquares(0.1), A, 1, np.ones((P, 1), int), None)
    settings_ = [
        CurveSettings(mu=0.1, server_noise="graph_homomorphic", server_std=s) for s in (0.5, 3.0)
    ]
    ca = _curve_arrays(settings_)
    streams = Streams(*(stream(seed, n) for n in Streams._fields))
    draws = draw_round(streams, net, ca, R)
    psi = rng.standard_normal((2, R, P, M))
    W = combine_phase(psi, net, ca, draws)
    noiseless = np.einsum("pm,crmd->crpd", A, psi)
    # eq. 46: sum_{p,m} a_pm g_pm = 0, so the centroid is exactly that of the noiseless step
    np.testing.assert_allclose(W.mean(axis=2), noiseless.mean(axis=2), atol=1e-12)
    assert np.abs(W - noiseless).max() > 1e-3  # the individual models are perturbed


@pytest.mark.parametrize("distribution", ["laplace", "gaussian"])
@pytest.mark.parametrize("scheme", ["random", "random_per_link"])
def test_random_server_noise_has_requested_variance(scheme, distribution):
    # On the complete graph a_pm = 1/P, so the combined noise has variance sigma^2 / P.
    P, M, R, var = 4, 3, 20000, 0.3
    data = regression_data(np.random.default_rng(0), P=P, K=1, N=2, M=M)
    A = combination_matrix(nx.complete_graph(P))
    net = Network(data, LeastSquares(0.1), A, 1, np.ones((P, 1), int), None)
    s = CurveSettings(
        mu=0.1, server_noise=scheme, server_std=np.sqrt(var), server_distribution=distribution
    )
    ca = _curve_arrays([s])
    draws = draw_round(Streams(*(stream(3, n) for n in Streams._fields)), net, ca, R)
    g = combine_phase(np.zeros((1, R, P, M)), net, ca, draws)[0]
    # random: W = A g, with a_pm = 1/P => var = var / P; per link: sum_m a_pm^2 var = var / P
    expected = var / P
    sample_var = g.var(axis=0)
    assert np.all(np.abs(sample_var - expected) < 0.05 * expected)
    # the raw draws have the requested variance and the right tails
    raw = draws.server_noise[distribution] if scheme == "random" else draws.link_noise[distribution]
    scaled = np.sqrt(var) * raw
    assert abs(scaled.var() - var) < 0.03 * var
    kurt = ((scaled - scaled.mean()) ** 4).mean() / scaled.var() ** 2 - 3
    assert abs(kurt - (3.0 if distribution == "laplace" else 0.0)) < 0.4


def test_client_noise_variance_on_the_aggregate():
    # psi = mean over L clients of (w_k + g_k): the noise part has variance sigma^2 / L.
    net = small_network(P=2, K=6, L=6, batch=False)
    var, R = 0.5, 4000
    ca = _curve_arrays([CurveSettings(mu=1e-9, client_noise="laplace", client_std=np.sqrt(var))])
    draws = draw_round(Streams(*(stream(4, n) for n in Streams._fields)), net, ca, R)
    ca0 = _curve_arrays([CurveSettings(mu=1e-9)])
    W = np.zeros((1, R, 2, 3))
    noise = local_phase(W, net, ca, draws)[0] - local_phase(W, net, ca0, draws)[0]
    assert abs(noise.var() - var / 6) < 0.06 * var / 6


def test_client_sampling_is_without_replacement_and_uniform():
    rng = np.random.default_rng(0)
    idx = sample_clients(rng, 5000, 2, 10, 3)
    assert idx.shape == (5000, 2, 3)
    srt = np.sort(idx, axis=-1)
    assert np.all(np.diff(srt, axis=-1) > 0)
    freq = np.bincount(idx.ravel(), minlength=10) / idx.size
    assert np.allclose(freq, 0.1, atol=0.01)


def test_same_seed_bit_identical_and_different_seed_different():
    net = small_network()
    s = ALL_SCHEMES[:4]
    a = simulate(net, s, iterations=20, repetitions=2, seed=11)
    b = simulate(net, s, iterations=20, repetitions=2, seed=11)
    c = simulate(net, s, iterations=20, repetitions=2, seed=12)
    assert np.array_equal(a.W, b.W) and np.array_equal(a.centroid_msd, b.centroid_msd)
    assert not np.array_equal(a.W, c.W)


def test_divergence_is_reported_per_curve_and_others_continue():
    net = small_network(batch=False)
    traj = simulate(net, [CurveSettings(mu=0.3), CurveSettings(mu=50.0)], iterations=200)
    assert traj.diverged_at[0, 0] == -1
    assert 1 <= traj.diverged_at[1, 0] < 200
    assert np.isfinite(traj.centroid_msd[:, 0]).all()
    assert traj.centroid_msd[-1, 0] < traj.centroid_msd[0, 0]


def test_graph_homomorphic_needs_self_weights():
    # a valid (symmetric, doubly stochastic, connected) matrix with a_11 = 0
    A = np.array([[0.0, 0.5, 0.5], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5]])
    net = small_network(P=3, A=A)
    with pytest.raises(ConfigError, match="a_pp > 0"):
        simulate(
            net,
            [CurveSettings(mu=0.1, server_noise="graph_homomorphic", server_std=0.1)],
            iterations=1,
        )
    simulate(net, [CurveSettings(mu=0.1, server_noise="random", server_std=0.1)], iterations=1)


def test_network_rejects_l_above_k():
    net = small_network()
    with pytest.raises(ConfigError, match=r"training.L must be an integer in \[1, K=5\]; got 6"):
        Network(net.data, net.problem, net.A, 6, net.epochs, net.batch)
