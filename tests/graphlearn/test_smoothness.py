"""Smoothness model: operators, cost, gradient, distances, clipping (eqs. 2–7, Prop. 1)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgfl.graphlearn.smoothness import (
    clip_factors,
    degree_adjoint,
    degree_operator,
    edge_count,
    lipschitz_constant,
    local_cost,
    local_cost_and_gradient,
    local_gradient,
    mat_to_vec,
    num_nodes,
    pairwise_sq_distances,
    per_sample_z_norms,
    validate_signals,
    vec_to_mat,
)
from pgfl.validation import ConfigError


def dense_S(d):
    """Slow reference: S as a dense d × p matrix built edge by edge."""
    pairs = list(itertools.combinations(range(d), 2))
    S = np.zeros((d, len(pairs)))
    for e, (j, k) in enumerate(pairs):
        S[j, e] = 1.0
        S[k, e] = 1.0
    return S


@pytest.mark.parametrize("d", [2, 3, 7, 20])
def test_degree_operator_matches_dense_reference_and_W1(d):
    rng = np.random.default_rng(d)
    w = rng.random(edge_count(d))
    np.testing.assert_allclose(degree_operator(w, d), dense_S(d) @ w)
    np.testing.assert_allclose(degree_operator(w, d), vec_to_mat(w).sum(axis=1))
    y = rng.standard_normal(d)
    np.testing.assert_allclose(degree_adjoint(y, d), dense_S(d).T @ y)


@pytest.mark.parametrize("d", [3, 10, 25])
def test_operator_norm_squared_is_2_d_minus_1(d):
    # the constant ‖S‖₂² = 2(d−1) used in Proposition 1
    assert np.linalg.norm(dense_S(d), 2) ** 2 == pytest.approx(2 * (d - 1))


@settings(max_examples=40, deadline=None)
@given(d=st.integers(2, 30), seed=st.integers(0, 2**32 - 1), batch=st.integers(1, 4))
def test_S_and_ST_are_adjoint(d, seed, batch):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((batch, edge_count(d)))
    y = rng.standard_normal((batch, d))
    lhs = np.sum(degree_operator(w, d) * y, axis=-1)
    rhs = np.sum(w * degree_adjoint(y, d), axis=-1)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10, atol=1e-10)


def test_vec_mat_roundtrip_and_num_nodes():
    w = np.arange(1.0, 11.0)
    W = vec_to_mat(w)
    assert W.shape == (5, 5) and np.allclose(W, W.T) and np.all(np.diag(W) == 0)
    np.testing.assert_array_equal(mat_to_vec(W), w)
    assert num_nodes(10) == 5
    with pytest.raises(ConfigError, match="d\\(d-1\\)/2"):
        num_nodes(11)


def test_pairwise_sq_distances_matches_loop_and_weights():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((37, 6)) + 5.0
    c = rng.random(37)
    ref = np.zeros(edge_count(6))
    ref_w = np.zeros(edge_count(6))
    for e, (j, k) in enumerate(itertools.combinations(range(6), 2)):
        ref[e] = np.mean((X[:, j] - X[:, k]) ** 2)
        ref_w[e] = np.mean(c * (X[:, j] - X[:, k]) ** 2)
    np.testing.assert_allclose(pairwise_sq_distances(X), ref, rtol=1e-12)
    np.testing.assert_allclose(pairwise_sq_distances(X, c, chunk=5), ref_w, rtol=1e-12)


def test_per_sample_norms_and_clipping():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((9, 7)) * 3
    ref = np.array(
        [
            np.linalg.norm([(x[j] - x[k]) ** 2 for j, k in itertools.combinations(range(7), 2)])
            for x in X
        ]
    )
    np.testing.assert_allclose(per_sample_z_norms(X, chunk=4), ref, rtol=1e-12)
    C = float(np.median(ref))
    f = clip_factors(X, C)
    clipped = ref * f
    assert np.all(clipped <= C * (1 + 1e-12))
    np.testing.assert_allclose(clipped[ref <= C], ref[ref <= C])  # small vectors untouched
    np.testing.assert_allclose(clipped[ref > C], C)


def test_cost_closed_form_small_graph():
    # d = 3, w = (1, 2, 3): degrees (3, 4, 5)
    w = np.array([1.0, 2.0, 3.0])
    z = np.array([0.5, 1.0, 2.0])
    expected = 2 * (0.5 + 2 + 6) - 2.0 * np.log(3 * 4 * 5) + 2 * 0.7 * 14
    assert local_cost(w, z, 2.0, 0.7) == pytest.approx(expected)
    assert local_cost(np.array([0.0, 0.0, 1.0]), z, 2.0, 0.7) == np.inf


@pytest.mark.parametrize("d", [3, 8, 15])
def test_gradient_matches_finite_differences(d):
    rng = np.random.default_rng(d)
    p = edge_count(d)
    w = rng.random(p) + 0.1
    z = rng.random(p) * 3
    alpha, beta = 2.0, 0.8
    g = local_gradient(w, z, alpha, beta)
    h = 1e-6
    fd = np.array(
        [
            (local_cost(w + h * e, z, alpha, beta) - local_cost(w - h * e, z, alpha, beta))
            / (2 * h)
            for e in np.eye(p)
        ]
    )
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    f2, g2 = local_cost_and_gradient(w, z, alpha, beta)
    assert f2 == pytest.approx(local_cost(w, z, alpha, beta))
    np.testing.assert_allclose(g2, g)


def test_hessian_norm_within_proposition_1_bound():
    d, alpha, beta = 10, 2.0, 1.5
    rng = np.random.default_rng(0)
    w = rng.random(edge_count(d)) + 0.05
    deg = degree_operator(w, d)
    S = dense_S(d)
    H = alpha * S.T @ np.diag(1 / deg**2) @ S + 4 * beta * np.eye(S.shape[1])
    bound = lipschitz_constant(d, alpha, beta, deg.min())
    assert np.linalg.norm(H, 2) <= bound * (1 + 1e-12)


@pytest.mark.parametrize(
    "X, msg",
    [
        (np.ones((4, 1)), "at least 2 nodes"),
        (np.array([[1.0, np.nan], [0.0, 1.0]]), "finite values; got 1 non-finite"),
        (np.ones(5), "2-D array"),
    ],
)
def test_validate_signals_rejects(X, msg):
    with pytest.raises(ConfigError, match=msg):
        validate_signals(X)
