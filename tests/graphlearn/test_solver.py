"""Centralized APGD solver (eqs. 14–16 with backtracking and restart)."""

import numpy as np
import pytest

from pgfl.graphlearn.smoothness import edge_count, local_cost, local_gradient, pairwise_sq_distances
from pgfl.graphlearn.solver import SmoothGraphLearner, learn_graph, objective, solve_apgd
from pgfl.validation import ConfigError


def slow_reference(z, alpha, beta, iters=200_000):
    """Obviously-correct projected gradient with a fixed small step and no momentum."""
    d = int(round((1 + np.sqrt(1 + 8 * z.size)) / 2))
    w = np.full(z.size, np.sqrt(alpha / (2 * beta * (d - 1))))
    pairs = [(j, k) for j in range(d) for k in range(j + 1, d)]
    step = 1e-3
    for _ in range(iters):
        deg = np.zeros(d)
        for e, (j, k) in enumerate(pairs):
            deg[j] += w[e]
            deg[k] += w[e]
        g = np.array(
            [
                2 * z[e] - alpha * (1 / deg[j] + 1 / deg[k]) + 4 * beta * w[e]
                for e, (j, k) in enumerate(pairs)
            ]
        )
        w_new = np.maximum(w - step * g, 0.0)
        if np.max(np.abs(w_new - w)) < 1e-13:
            break
        w = w_new
    return w


def kkt_residual(w, z, alpha, beta):
    g = local_gradient(w, z, alpha, beta)
    return np.max(np.abs(np.where(w > 0, g, np.minimum(g, 0.0))))


def test_matches_slow_reference_to_1e_6():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((30, 6))
    z = pairwise_sq_distances(X)
    ref = slow_reference(z, 2.0, 0.5, iters=30_000)
    res = solve_apgd(z, 2.0, 0.5, tol=1e-12)
    np.testing.assert_allclose(res.w[0], ref, atol=1e-6)
    f_ref = local_cost(ref, z, 2.0, 0.5)
    assert abs(res.costs[-1, 0] - f_ref) <= 1e-6 * abs(f_ref)


@pytest.mark.parametrize("d, N, beta", [(10, 20, 0.3), (25, 100, 1.0), (60, 40, 5.0)])
def test_objective_monotone_and_kkt(d, N, beta):
    rng = np.random.default_rng(d)
    z = pairwise_sq_distances(rng.standard_normal((N, d)))
    res = solve_apgd(z, 2.0, beta, tol=1e-10)
    assert res.converged.all()
    assert np.all(np.diff(res.costs[:, 0]) <= 0.0)
    assert kkt_residual(res.w[0], z, 2.0, beta) < 1e-5
    assert np.all(res.w >= 0)


def test_zero_data_limit_is_constant_graph():
    # z = 0: the optimum is c·1 with c = sqrt(α/(2β(d−1))); start elsewhere to test
    d, alpha, beta = 8, 2.0, 0.5
    p = edge_count(d)
    res = solve_apgd(np.zeros(p), alpha, beta, w0=np.linspace(0.1, 2.0, p), tol=1e-12)
    np.testing.assert_allclose(res.w[0], np.sqrt(alpha / (2 * beta * (d - 1))), rtol=1e-6)


def test_batched_equals_separate_and_prox_term():
    rng = np.random.default_rng(2)
    Z = np.stack([pairwise_sq_distances(rng.standard_normal((15, 7))) for _ in range(3)])
    c = rng.random(Z.shape[1])
    kappa = np.array([0.0, 1.0, 10.0])
    batched = solve_apgd(Z, 2.0, 1.0, kappa=kappa, center=c, tol=1e-11)
    for b in range(3):
        single = solve_apgd(Z[b], 2.0, 1.0, kappa=kappa[b], center=c, tol=1e-11)
        np.testing.assert_allclose(batched.w[b], single.w[0], atol=1e-7)
    # larger κ pulls the solution towards the centre
    dist = np.linalg.norm(batched.w - c, axis=1)
    assert dist[0] > dist[1] > dist[2]
    f = objective(batched.w, Z, 2.0, 1.0, kappa, c)
    assert np.all(np.isfinite(f))


def test_estimator_and_function_agree_and_validate():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((40, 9))
    est = SmoothGraphLearner(alpha=2.0, beta=0.7).fit(X)
    np.testing.assert_allclose(est.weights_, learn_graph(X, 2.0, 0.7), atol=1e-10)
    assert est.adjacency_.shape == (9, 9) and est.n_iter_ == len(est.costs_) - 1
    with pytest.raises(ConfigError, match=r"alpha must be a real number in \(0, inf\); got -1"):
        SmoothGraphLearner(alpha=-1).fit(X)
    with pytest.raises(ConfigError, match="at least 2 nodes"):
        learn_graph(X[:, :1])
    with pytest.raises(ConfigError, match="non-finite"):
        learn_graph(np.full((3, 3), np.inf))


# ------------------------------------------------ compiled one-pass evaluations (numba)


def _model(d, kappa, with_center, compiled, monkeypatch, rng):
    from pgfl.graphlearn import solver

    monkeypatch.setattr(solver, "COMPILED", None if compiled else False)
    p = edge_count(d)
    z = rng.uniform(0.0, 3.0, size=(1, p))
    center = rng.uniform(0.0, 1.0, size=(1, p)) if with_center else None
    return solver._Model(d, z, 1.7, 0.3, np.array([kappa]), center)


@pytest.mark.parametrize("with_center", [False, True])
def test_compiled_evaluations_equal_the_numpy_ones(with_center, monkeypatch):
    pytest.importorskip("numba")
    rng = np.random.default_rng(4)
    d = 13
    fast = _model(d, 0.8 if with_center else 0.0, with_center, True, monkeypatch, rng)
    rng = np.random.default_rng(4)
    ref = _model(d, 0.8 if with_center else 0.0, with_center, False, monkeypatch, rng)
    assert fast.k is not None and ref.k is None
    p = edge_count(d)
    w = rng.uniform(0.0, 1.0, size=(1, p))
    w[0, rng.random(p) < 0.3] = 0.0
    # the compiled F and ∇F against local_cost / local_gradient of smoothness.py (+ prox term)
    f_ref = local_cost(w, ref.Z, 1.7, 0.3)
    g_ref = local_gradient(w, ref.Z, 1.7, 0.3)
    if with_center:
        f_ref = f_ref + 0.4 * np.sum((w - ref.center) ** 2)
        g_ref = g_ref + 0.8 * (w - ref.center)
    for m in (fast, ref):
        f, g = m.cost_grad(w)
        np.testing.assert_allclose(f, f_ref, rtol=1e-12)
        np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(m.cost(w), f_ref, rtol=1e-12)
    y = w + 0.05
    fy, gy = ref.cost_grad(y)
    H = rng.uniform(0.5, 2.0, size=(1, p))
    for L in (0.3, 4.0):
        c1, f1, b1 = fast.trial(y, gy / H, gy, H, np.array([L]))
        c2, f2, b2 = ref.trial(y, gy / H, gy, H, np.array([L]))
        assert np.array_equal(c1, c2)
        np.testing.assert_allclose([f1[0], b1[0]], [f2[0], b2[0]], rtol=1e-12, atol=1e-13)
    # a vertex with no edge left: outside the log's domain, F = +inf on both paths
    w0 = w.copy()
    rows, cols = np.triu_indices(d, 1)
    w0[0, (rows == 2) | (cols == 2)] = 0.0
    assert np.isinf(fast.cost(w0)[0]) and np.isinf(ref.cost(w0)[0])


def test_compiled_solver_reaches_the_numpy_solvers_objective(monkeypatch):
    pytest.importorskip("numba")
    from pgfl.graphlearn import solver

    rng = np.random.default_rng(9)
    z = pairwise_sq_distances(rng.standard_normal((40, 12)))
    fast = solve_apgd(z, 2.0, 0.05, tol=1e-10)
    monkeypatch.setattr(solver, "COMPILED", False)
    ref = solve_apgd(z, 2.0, 0.05, tol=1e-10)
    assert fast.converged[0] and ref.converged[0]
    f_fast, f_ref = fast.costs[-1, 0], ref.costs[-1, 0]
    assert abs(f_fast - f_ref) <= 1e-9 * abs(f_ref)
    np.testing.assert_allclose(fast.w, ref.w, atol=1e-6)
