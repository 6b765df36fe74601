"""The problem interface through the JAX adapter and a user's numpy callable.

Every expected value comes from an independent computation: the closed-form gradients of
:mod:`pgfl.problems` (least squares ``2(uᵀw − d)u``, logistic ``−d σ(−d uᵀw) u``), a
per-sample Python loop, or the engine run on the built-in problem.
"""

import dataclasses
import sys

import numpy as np
import pytest

pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from pgfl.data.synthetic import logistic_data  # noqa: E402
from pgfl.engine import CurveSettings, Network, simulate  # noqa: E402
from pgfl.extras import MissingExtra  # noqa: E402
from pgfl.models import NumpyProblem  # noqa: E402
from pgfl.models.jax_adapter import JaxProblem, jax_module  # noqa: E402
from pgfl.privacy.mechanisms import GraphHomomorphic, RandomNoise
from pgfl.problems import LeastSquares, Logistic  # noqa: E402
from pgfl.validation import ConfigError  # noqa: E402


def _ls(params, x, y):
    return (y - x @ params["w"]) ** 2


def _logistic(params, x, y):
    return jnp.logaddexp(0.0, -y * (x @ params["w"]))


def _ls_pytree(params, x, y):  # w split over a nested pytree: flattening must not matter
    w = jnp.concatenate([params["a"], params["b"]["c"]])
    return (y - x @ w) ** 2


def _batch(seed, lead=(4,), B=6, M=3, C=3, pad=2):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((*lead, M, C))
    U = rng.standard_normal((*lead, B, M))
    d = np.sign(rng.standard_normal((*lead, B)))
    weight = np.zeros((*lead, B))
    weight[..., : B - pad] = 1.0 / (B - pad)  # the last samples are padding
    return W, U, d, weight


CASES = [
    (LeastSquares(0.3), _ls, {"w": np.zeros(3)}),
    (Logistic(0.3), _logistic, {"w": np.zeros(3)}),
    (LeastSquares(0.0), _ls_pytree, {"a": np.zeros(1), "b": {"c": np.zeros(2)}}),
]


@pytest.mark.parametrize("clip", [None, 0.7, np.array([0.5, np.inf, 2.0])])
@pytest.mark.parametrize(("numpy_problem", "loss", "params"), CASES)
def test_jax_gradient_equals_closed_form(numpy_problem, loss, params, clip):
    p = JaxProblem(loss, params, numpy_problem.rho)
    for seed, lead in ((0, (5,)), (1, (2, 3)), (2, (1,))):
        W, U, d, weight = _batch(seed, lead)
        got = p.gradient(W, U, d, weight, clip)
        want = numpy_problem.gradient(W, U, d, weight, clip)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
        if clip is not None:  # clipping binds somewhere, else the test would not test it
            assert not np.allclose(got, numpy_problem.gradient(W, U, d, weight))


def test_vmap_clipping_equals_a_per_sample_loop():
    rho, clip = 0.2, np.array([0.3, 1.0])
    p = JaxProblem(_logistic, {"w": np.zeros(3)}, rho)
    W, U, d, weight = _batch(3, (3,), C=2, pad=1)
    got = p.gradient(W, U, d, weight, clip)
    want = np.zeros_like(W)
    for n in range(W.shape[0]):
        for c in range(W.shape[2]):
            w = W[n, :, c]
            for b in range(U.shape[1]):
                g = p.sample_gradients(w, U[n, b : b + 1], d[n, b : b + 1])[0] + 2 * rho * w
                want[n, :, c] += weight[n, b] * g * min(1.0, clip[c] / np.linalg.norm(g))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_numpy_callable_equals_closed_form():
    def grad(w, x, y):
        m = (x * w).sum(-1)
        return (-y / (1 + np.exp(y * m)))[..., None] * x

    p = NumpyProblem(
        grad, lambda w, x, y: np.logaddexp(0, -y * (x * w).sum(-1)), lambda f: f, rho=0.3
    )
    for clip in (None, np.array([0.5, np.inf, 2.0])):
        W, U, d, weight = _batch(4, (2, 3))
        np.testing.assert_allclose(
            p.gradient(W, U, d, weight, clip),
            Logistic(0.3).gradient(W, U, d, weight, clip),
            rtol=0,
            atol=1e-12,
        )


def test_engine_with_jax_problem_equals_engine_with_numpy_problem():
    data = logistic_data(np.random.default_rng(5), P=4, K=5, N=(8, 12), M=3, test_size=50)
    A = np.full((4, 4), 0.25)
    rng = np.random.default_rng(6)
    E, B = rng.integers(1, 4, (4, 5)), rng.integers(2, 5, (4, 5))
    curves = [
        CurveSettings(mu=0.3),
        CurveSettings(mu=0.2, clip_norm=0.5, server=GraphHomomorphic(std=0.1)),
        CurveSettings(mu=0.3, clip_norm=2.0, server=RandomNoise(std=0.1)),
    ]
    ref = Network(data, Logistic(0.1), A, 3, E, B)
    # the JAX classifier predicts class indices: test labels 0/1 for −1/+1
    data01 = dataclasses.replace(data, y_test=(data.y_test > 0).astype(float))
    jx = Network(
        data01, JaxProblem(_logistic, {"w": np.zeros(3)}, 0.1, predict=_scores), A, 3, E, B
    )
    kw = {"iterations": 12, "repetitions": 2, "seed": 9, "w_opt": np.zeros(3)}
    a, b = simulate(ref, curves, **kw), simulate(jx, curves, **kw)
    np.testing.assert_allclose(b.W, a.W, rtol=0, atol=1e-10)
    np.testing.assert_allclose(b.centroid_msd, a.centroid_msd, rtol=0, atol=1e-10)
    # argmax of (−m, m) is sign(m) (ties aside): the same test error as the built-in
    np.testing.assert_array_equal(b.test_error, a.test_error)
    # the test loss sees the 0/1 labels: compare with the built-in loss of the same models
    assert b.test_log_loss.shape == a.test_log_loss.shape
    assert b.server_test_loss.shape == (12, 3, 2, 4)


def _scores(params, x):  # labels ±1: class index 1 for +1 (argmax compares with y)
    m = x @ params["w"]
    return jnp.stack([-m, m])


def test_jax_problem_test_metrics():
    rng = np.random.default_rng(0)
    X, w = rng.standard_normal((40, 3)), rng.standard_normal((2, 5, 3))
    y = (X @ np.ones(3) > 0).astype(float)  # classes 0/1
    p = JaxProblem(_logistic, {"w": np.zeros(3)}, predict=_scores)
    want = np.mean((np.einsum("nm,...m->...n", X, w) > 0) != y, axis=-1)
    np.testing.assert_array_equal(p.test_error(w, X, y), want)
    loss = np.logaddexp(0, -y * np.einsum("nm,...m->...n", X, w)).mean(-1)
    np.testing.assert_allclose(p.test_loss(w, X, y), loss, rtol=1e-13)


def test_bad_user_models_are_one_line_errors():
    with pytest.raises(ConfigError, match=r"must return a scalar per sample; got shape \(3,\)"):
        JaxProblem(lambda q, x, y: x * q["w"], {"w": np.zeros(3)}).dim(3)
    with pytest.raises(ConfigError, match="must be finite real numbers; got nan at index 1 of 3"):
        JaxProblem(_ls, {"w": np.array([0.0, np.nan, 1.0])})
    with pytest.raises(ConfigError, match="fails on a sample of 5 features"):
        JaxProblem(_ls, {"w": np.zeros(3)}).dim(5)


def test_missing_jax_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)
    with pytest.raises(MissingExtra, match=r"pip install 'pgfl\[jax\]'"):
        jax_module()


def test_pickled_problem_is_rebuilt():
    import pickle

    p = JaxProblem(_ls, {"w": np.ones(3)}, 0.1)
    q = pickle.loads(pickle.dumps(p))
    W, U, d, weight = _batch(0)
    np.testing.assert_array_equal(q.gradient(W, U, d, weight), p.gradient(W, U, d, weight))
