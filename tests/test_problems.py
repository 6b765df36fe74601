import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression

from pgfl.data.federated import FederatedData
from pgfl.data.synthetic import logistic_data, regression_data
from pgfl.problems import LeastSquares, Logistic
from pgfl.validation import ConfigError


@pytest.mark.parametrize("problem", [LeastSquares(0.3), Logistic(0.3)])
def test_gradient_matches_finite_differences_of_the_batch_loss(problem):
    rng = np.random.default_rng(0)
    U = rng.standard_normal((6, 4))
    d = np.sign(rng.standard_normal(6))
    weight = np.array([1, 1, 1, 1, 0, 0.0])
    w = rng.standard_normal(4)

    def loss(v):
        m = U @ v
        return float(
            (problem.sample_loss(m, d) * weight).sum() / weight.sum() + problem.rho * v @ v
        )

    g = problem.gradient(w[:, None], U, d, weight / weight.sum())[:, 0]
    h = 1e-6
    fd = np.array([(loss(w + h * e) - loss(w - h * e)) / (2 * h) for e in np.eye(4)])
    np.testing.assert_allclose(g, fd, atol=1e-7)


def test_least_squares_optimum_equals_normal_equations_of_eq_54():
    data = regression_data(np.random.default_rng(1), P=3, K=4, N=(5, 12), M=3)
    rho = 0.2
    w = LeastSquares(rho).optimum(data)
    # stack every sample with weight 1/(P K N_pk): minimize sum_j c_j (d_j - u_j^T w)^2 + rho |w|^2
    rows, targets, weights = [], [], []
    P, K = data.counts.shape
    for p in range(P):
        for k in range(K):
            n = data.counts[p, k]
            rows.append(data.X[p, k, :n])
            targets.append(data.y[p, k, :n])
            weights.append(np.full(n, 1.0 / (P * K * n)))
    U, d, c = np.vstack(rows), np.concatenate(targets), np.concatenate(weights)
    expected = np.linalg.solve(U.T @ (c[:, None] * U) + rho * np.eye(3), U.T @ (c * d))
    np.testing.assert_allclose(w, expected, atol=1e-13)
    # eq. 55 form with w* and the noise correlation
    assert np.linalg.norm(LeastSquares(rho).full_gradient(w, data)) < 1e-12


@pytest.mark.parametrize(
    "shape", [(10, 100, 100, 2), (3, 7, 13, 3), (1, 50, 40, 20), (4, 5, 6, 1), (6, 9, 30, 1)]
)
@pytest.mark.parametrize("uneven", [False, True])
def test_least_squares_optimum_terms_keep_the_bits_of_a_full_weight_array(shape, uneven):
    # the terms of w° (preprint eq. 55) without a [P, K, N] weight array when every client
    # is full: the same bits as the explicit einsum over mask / N_pk (the form before it),
    # so every noise-free curve keeps its bits; and equal to a per-client loop to 1e-12
    P, K, N, M = shape
    sizes = (max(1, N // 3), N) if uneven else N
    data = regression_data(np.random.default_rng(P * K + M), P=P, K=K, N=sizes, M=M)
    R, r = LeastSquares(0.1).optimum_terms(data, None, P * K)
    weight = data.mask / data.counts[..., None]
    assert np.array_equal(R, np.einsum("pkn,pkni,pknj->ij", weight, data.X, data.X))
    assert np.array_equal(r, np.einsum("pkn,pkn,pkni->i", weight, data.y, data.X))
    R_loop, r_loop = np.zeros((M, M)), np.zeros(M)
    for p in range(P):
        for k in range(K):
            U, d = data.X[p, k, : data.counts[p, k]], data.y[p, k, : data.counts[p, k]]
            R_loop += U.T @ U / len(d)
            r_loop += U.T @ d / len(d)
    np.testing.assert_allclose(R, R_loop, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r, r_loop, rtol=1e-12, atol=1e-12)


def test_logistic_optimum_matches_scikit_learn_with_matching_penalty():
    data = logistic_data(np.random.default_rng(2), P=2, K=3, N=40, M=3)
    rho = 0.05
    w = Logistic(rho).optimum(data)
    assert np.linalg.norm(Logistic(rho).full_gradient(w, data)) <= 1e-10
    # equal client sizes: J = (1/n) sum loss + rho |w|^2  <=>  sklearn's 1/2 |w|^2 + C sum loss
    X = data.X.reshape(-1, 3)
    y = data.y.reshape(-1)
    clf = LogisticRegression(
        C=1.0 / (2 * rho * len(y)), fit_intercept=False, tol=1e-12, max_iter=10000
    )
    clf.fit(X, y)
    np.testing.assert_allclose(w, clf.coef_[0], atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 3.0), st.integers(0, 10**6))
def test_clipped_per_sample_gradients_never_exceed_the_norm(clip, seed):
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((7, 5)) * 3
    d = rng.standard_normal(7)
    W = rng.standard_normal((5, 2))
    weight = np.full(7, 1 / 7)
    problem = LeastSquares(0.4)
    # single-sample batches expose each clipped per-sample gradient
    for j in range(7):
        g = problem.gradient(
            W, U[j : j + 1], d[j : j + 1], np.ones(1), clip_norm=np.array([clip, clip])
        )
        assert np.all(np.linalg.norm(g, axis=0) <= clip * (1 + 1e-12))
    # the mean of clipped gradients is within the norm too, and equals the unclipped one
    # when the norm is large
    g = problem.gradient(W, U, d, weight, clip_norm=np.array([clip, 1e9]))
    assert np.linalg.norm(g[:, 0]) <= clip * (1 + 1e-12)
    np.testing.assert_allclose(g[:, 1], problem.gradient(W, U, d, weight)[:, 1], atol=1e-10)


def test_test_error_of_logistic_and_not_of_least_squares():
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    y = np.array([1.0, -1.0, -1.0])
    assert Logistic(0.1).test_error(np.array([1.0, 0.0]), X, y) == pytest.approx(1 / 3)
    with pytest.raises(ConfigError, match="classification"):
        LeastSquares(0.1).test_error(np.zeros(2), X, y)


def test_bad_rho_and_bad_data_are_rejected():
    with pytest.raises(
        ConfigError, match=r"training.rho must be a real number in \[0, inf\); got -1"
    ):
        LeastSquares(-1)
    with pytest.raises(ConfigError, match="counts must be in"):
        FederatedData(np.zeros((1, 1, 2, 1)), np.zeros((1, 1, 2)), np.array([[3]]))
    with pytest.raises(ConfigError, match="finite"):
        FederatedData(np.full((1, 1, 2, 1), np.nan), np.zeros((1, 1, 2)), np.array([[2]]))
