"""Algorithm 1, baselines, generators and metrics."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pgfl.graphlearn.federated import (
    consensus_update,
    fedavg_graph_learning,
    federated_graph_learning,
    federated_objective,
    independent_graph_learning,
    soft_threshold,
)
from pgfl.graphlearn.generators import heterogeneous_graphs, rbf_graph, smooth_signals
from pgfl.graphlearn.metrics import edge_support, mcc, relative_error
from pgfl.graphlearn.params import PARAMS as GRAPHLEARN_PARAMS
from pgfl.graphlearn.smoothness import edge_count, pairwise_sq_distances
from pgfl.graphlearn.solver import solve_apgd
from pgfl.rng import stream
from pgfl.validation import ConfigError


def client_data(seed, q=0.5, n=60, clients=3, d=12):
    g = stream(seed, "graph")
    w0, _ = rbf_graph(d, g)
    w_con, w_cl = heterogeneous_graphs(w0, q, clients, g)
    s = stream(seed, "signals")
    Z = np.stack([pairwise_sq_distances(smooth_signals(w_cl[i], n, s)) for i in range(clients)])
    return Z, w_cl, w_con


def test_soft_threshold_and_consensus_closed_form():
    np.testing.assert_allclose(soft_threshold(np.array([2.0, -3.0, 0.5]), 1.0), [1.0, -2.0, 0.0])
    w = np.array([[1.0, 3.0], [3.0, 1.0]])
    gamma = np.array([1.0, 3.0])  # weighted mean (2.5, 1.5), μ = λ/(ρ Σγ) = 2/(1·4) = 0.5
    np.testing.assert_allclose(consensus_update(w, gamma, 1.0, 2.0), [2.0, 1.0])


def test_consensus_update_minimizes_eq_17():
    rng = np.random.default_rng(0)
    w = rng.random((4, 6))
    gamma = rng.random(4) + 0.1
    rho, lam = 0.7, 0.3
    c = consensus_update(w, gamma, rho, lam)

    def f(v):
        return 0.5 * rho * np.sum(gamma * np.sum((w - v) ** 2, axis=1)) + lam * np.abs(v).sum()

    for _ in range(200):
        assert f(c) <= f(c + 1e-3 * rng.standard_normal(6)) + 1e-12


def test_vanishing_rho_recovers_igl():
    # limit case: ρ → 0 decouples the clients; each personalized graph solves eq. 7 alone
    Z, _, _ = client_data(1, clients=3)
    r = federated_graph_learning(Z, alpha=2.0, beta=0.05, rho=1e-9, lam=0.0, rounds=40)
    igl = independent_graph_learning(Z, alpha=2.0, beta=0.05)
    np.testing.assert_allclose(r.w_local, igl, atol=1e-4 * igl.max())


def test_identical_clients_learn_identical_graphs_and_objective_decreases():
    Z, _, _ = client_data(2, clients=1)
    Z = np.repeat(Z, 4, axis=0)
    r = federated_graph_learning(Z, beta=0.05, rho=0.5, lam=0.01)
    np.testing.assert_allclose(r.w_local, np.repeat(r.w_local[:1], 4, axis=0), atol=1e-10)
    assert r.objective[-1] < r.objective[0]
    np.testing.assert_allclose(r.gamma, r.gamma[0])


def test_trial_axis_equals_separate_runs():
    Za, _, _ = client_data(3)
    Zb, _, _ = client_data(4)
    both = federated_graph_learning(
        np.stack([Za, Zb]), beta=0.05, rho=np.array([0.3, 1.0]), lam=0.02
    )
    a = federated_graph_learning(Za, beta=0.05, rho=0.3, lam=0.02)
    b = federated_graph_learning(Zb, beta=0.05, rho=1.0, lam=0.02)
    np.testing.assert_allclose(both.w_local[0], a.w_local, atol=1e-10)
    np.testing.assert_allclose(both.w_local[1], b.w_local, atol=1e-10)
    np.testing.assert_allclose(both.w_con[1], b.w_con, atol=1e-10)


def test_fixed_step_solver_follows_eqs_14_16_loop_reference():
    Z = np.random.default_rng(5).random((2, 15))  # bounded distances: degrees stay positive
    eta, xi, K, T, rho, lam, beta = 5e-4, 0.9, 5, 3, 0.4, 0.01, 1.0
    r = federated_graph_learning(
        Z,
        beta=beta,
        rho=rho,
        lam=lam,
        rounds=T,
        local_steps=K,
        local_solver="fixed",
        step=eta,
        momentum=xi,
    )
    # slow reference: plain loops over clients and edges
    d, p = 6, edge_count(6)
    pairs = [(j, k) for j in range(d) for k in range(j + 1, d)]
    c0 = np.sqrt(2.0 / (2 * beta * (d - 1)))
    w = [np.full(p, c0) for _ in range(2)]
    wp = [x.copy() for x in w]
    wc = np.full(p, c0)
    gam = [0.5, 0.5]
    for _ in range(T):
        for i in range(2):
            for _k in range(K):
                ex = w[i] + xi * (w[i] - wp[i])
                deg = np.zeros(d)
                for e, (j, k) in enumerate(pairs):
                    deg[j] += ex[e]
                    deg[k] += ex[e]
                g = np.array(
                    [
                        2 * Z[i, e]
                        - 2.0 * (1 / deg[j] + 1 / deg[k])
                        + 4 * beta * ex[e]
                        + rho * gam[i] * (ex[e] - wc[e])
                        for e, (j, k) in enumerate(pairs)
                    ]
                )
                wp[i], w[i] = w[i], np.maximum(ex - eta * g, 0.0)
        avg = (gam[0] * w[0] + gam[1] * w[1]) / (gam[0] + gam[1])
        mu = lam / (rho * (gam[0] + gam[1]))
        wc = np.sign(avg) * np.maximum(np.abs(avg) - mu, 0)
        gam = [1 / (np.linalg.norm(w[i] - wc) + 1e-8) for i in range(2)]
    np.testing.assert_allclose(r.w_local, np.array(w), rtol=1e-10)
    np.testing.assert_allclose(r.w_con, wc, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(r.gamma, gam, rtol=1e-8)


def test_federated_objective_value():
    w = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 2.0]])
    wc = np.array([1.0, 1.0, 1.0])
    Z = np.zeros((2, 3))
    expected = (-2 * 3 * np.log(2) + 2 * 0.5 * 3) + (-2 * (np.log(2) + 2 * np.log(3)) + 2 * 0.5 * 6)
    expected += 0.3 * 1.0 + 0.2 * 3
    assert federated_objective(w, wc, Z, 2.0, 0.5, 0.3, 0.2) == pytest.approx(expected)


def test_fedavg_identical_clients_is_centralized_solution():
    Z, _, _ = client_data(6, clients=1)
    Z3 = np.repeat(Z, 3, axis=0)
    fa = fedavg_graph_learning(Z3, np.array([10, 20, 30]), beta=0.1, rounds=20)
    ref = solve_apgd(Z[0], 2.0, 0.1, tol=1e-12).w[0]
    np.testing.assert_allclose(fa, ref, atol=1e-4 * ref.max())


def test_igl_shape_and_validation_errors():
    Z, _, _ = client_data(7)
    assert independent_graph_learning(Z, beta=0.1).shape == Z.shape
    with pytest.raises(ConfigError, match="alpha must be a real number in \\(0, inf\\); got 0"):
        federated_graph_learning(Z, alpha=0.0)
    with pytest.raises(ConfigError, match="rho must be"):
        federated_graph_learning(Z, rho=-1.0)
    with pytest.raises(ConfigError, match="finite"):
        federated_graph_learning(np.full_like(Z, np.nan))
    with pytest.raises(ConfigError, match="local_solver must be one of"):
        federated_graph_learning(Z, local_solver="sgd")
    with pytest.raises(ConfigError, match="rng is required"):
        federated_graph_learning(Z, noise_std=1.0)


def test_generators_properties():
    g = stream(0, "t")
    w0, u = rbf_graph(20, g)
    assert u.shape == (20, 2) and np.all((w0 == 0) | ((w0 >= 0.75) & (w0 <= 1)))
    con, cl = heterogeneous_graphs(w0, 0.5, 5, g)
    e0 = int((w0 > 0).sum())
    assert int((con > 0).sum()) == round(0.5 * e0)
    assert np.all(cl[:, con > 0] == con[con > 0])  # consensus edges are in every client graph
    assert np.all((cl > 0).sum(axis=1) == e0)
    assert not np.all(cl == cl[0])  # clients differ
    con1, cl1 = heterogeneous_graphs(w0, 1.0, 3, g)
    np.testing.assert_array_equal(con1, w0)
    np.testing.assert_array_equal(cl1, np.repeat(w0[None], 3, axis=0))


def test_smooth_signals_covariance():
    w = np.array([1.0, 0.0, 0.5])
    X = smooth_signals(w, 200_000, stream(0, "cov"), sigma_w=0.5)
    L = np.array([[1.0, -1.0, 0.0], [-1.0, 1.5, -0.5], [0.0, -0.5, 0.5]])
    cov = np.linalg.inv(L + 0.25 * np.eye(3))
    np.testing.assert_allclose(np.cov(X.T), cov, atol=0.05 * np.abs(cov).max())


def test_metrics_closed_form():
    truth = np.array([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    learned = np.array([0.9, 0.05, 0.0, 0.0, 0.5, 0.8])  # TP=2 FN=1 FP=1 TN=2 (0.05 < 0.1·0.9)
    assert edge_support(learned).tolist() == [True, False, False, False, True, True]
    assert float(mcc(learned, truth)) == pytest.approx((2 * 2 - 1 * 1) / np.sqrt(3 * 3 * 3 * 3))
    assert float(mcc(np.zeros(6), truth)) == 0.0
    assert float(relative_error(truth, truth)) == 0.0
    assert float(relative_error(2 * truth, truth)) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": -1.0}, r"alpha must be a real number in \(0, inf\); got -1.0"),
        ({"rounds": 0}, r"rounds must be an integer in \[1, inf\]; got 0"),
        ({"momentum": 1.5}, r"momentum must be a real number in \[0, 1\]; got 1.5"),
        ({"step": 0.0}, r"step must be a real number in \(0, inf\); got 0.0"),
        # an array argument: the first entry outside the range, in the same line
        ({"rho": np.array([0.3, 0.0])}, r"rho must be a real number in \(0, inf\); got 0.0"),
        ({"lam": np.array([0.1, np.nan])}, r"lam must be a real number in \[0, inf\); got nan"),
        ({"local_steps": np.array([5, 0, 5])}, r"local_steps must be an integer .*; got 0"),
        ({"local_steps": 2.5}, r"local_steps must be an integer in \[1, inf\]; got 2.5"),
        (
            {"noise_std": np.array([1.0, -0.5, 1.0]), "rng": np.random.default_rng(0)},
            r"noise_std must be a real number in \[0, inf\); got -0.5",
        ),
        (
            {"noise_std": 1.0, "rng": np.random.default_rng(0), "dp_step": 0},
            r"dp_step must be a real number in \(0, inf\); got 0",
        ),
    ],
)
def test_arguments_are_refused_in_one_line_with_range_and_value(kwargs, message):
    Z, _, _ = client_data(8, clients=3, d=6)
    Z = np.stack([Z, Z])  # two trials: rho and lam may differ between them
    with pytest.raises(ConfigError, match=message) as info:
        federated_graph_learning(Z, rounds=kwargs.pop("rounds", 1), **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("argument", "value", "setting"),
    [
        ("alpha", 0.0, "model.alpha"),
        ("beta", -1.0, "model.beta"),
        ("rho", -1.0, "model.rho"),
        ("lam", -1.0, "model.lambda"),
        ("rounds", 0, "algorithm.rounds"),
        ("local_steps", 0, "algorithm.local_steps"),
        ("local_solver", "adam", "algorithm.local_solver"),
        ("step", -1.0, "algorithm.step"),
        ("momentum", 2.0, "algorithm.momentum"),
    ],
)
def test_an_argument_that_mirrors_a_setting_states_the_settings_range(argument, value, setting):
    # the range in the message is the graph-learning table's, so the two cannot drift apart
    p = GRAPHLEARN_PARAMS[setting]
    allowed = "one of 'backtracking', 'fixed'" if p.kind == "choice" else p.interval()
    Z, _, _ = client_data(8, clients=2, d=5)
    with pytest.raises(ConfigError) as info:
        federated_graph_learning(Z, **{argument: value})
    assert str(info.value).startswith(f"{argument} must be ")
    assert allowed in str(info.value) and str(info.value).endswith(f"got {value!r}")


def test_fedavg_counts_and_a_non_finite_zbar_are_one_line_errors():
    Z, _, _ = client_data(8, clients=3, d=6)
    with pytest.raises(ConfigError, match=r"counts must be a real number in \(0, inf\); got 0.0"):
        fedavg_graph_learning(Z, np.array([10, 0, 30]))
    Z[1, 2] = np.inf
    with pytest.raises(ConfigError, match="zbar must contain only finite values; got 1 non-"):
        fedavg_graph_learning(Z, np.array([10, 20, 30]))


def test_the_algorithms_and_their_table_load_without_dp_accounting():
    # the arguments' ranges come from the graph-learning table; reading it must not load
    # the accountants (pgfl.graphlearn imports pgfl.graphlearn.privacy only on first use)
    code = (
        "import sys, pgfl.graphlearn.params, pgfl.graphlearn; print('dp_accounting' in sys.modules)"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=src),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "False"
