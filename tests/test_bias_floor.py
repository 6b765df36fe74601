"""The bias of graph-homomorphic noise on a non-linear loss (pgfl.engine.floor).

Graph-homomorphic noise cancels in the centroid, but clients compute gradients at their
server's noisy model: with a logistic loss the centroid converges to the noise-smoothed
optimum w̃, offset from w° by a bias ∝ σ_g² (MSD floor ∝ σ_g⁴); with least squares there is
no bias. Ladder: closed form (the smoothed optimum of a quadratic, a complete graph's
deviation variance) → limit (v → 0) → the engine's own disagreement and centroid against
the prediction (statistical).
"""

from __future__ import annotations

import tomllib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgfl.data.synthetic import logistic_data, regression_data
from pgfl.engine import CurveSettings, Network, simulate
from pgfl.engine.floor import centroid_bias, deviation_variance
from pgfl.experiments.build import build_network
from pgfl.experiments.loader import parse_config
from pgfl.experiments.presets import preset_text
from pgfl.privacy.mechanisms import GraphHomomorphic, RandomNoise
from pgfl.problems import LeastSquares, Logistic
from pgfl.topology import build_graph, combination_matrix


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(0.0, 2.0), min_size=3, max_size=3), st.integers(0, 2**16))
def test_smoothing_a_quadratic_risk_leaves_its_optimum(variance, seed):
    data = regression_data(np.random.default_rng(seed), P=3, K=2, N=15)
    problem = LeastSquares(0.1)
    w = problem.smoothed_optimum(data, np.array(variance))
    np.testing.assert_allclose(w, problem.optimum(data), atol=1e-10)


def test_the_logistic_offset_is_proportional_to_the_variance():
    data = logistic_data(np.random.default_rng(3), P=4, K=3, N=40)
    problem = Logistic(0.01)
    w0 = problem.optimum(data)
    np.testing.assert_allclose(problem.smoothed_optimum(data, np.zeros(4)), w0, atol=1e-12)
    v = np.array([0.5, 1.0, 1.5, 2.0]) * 1e-3
    b1, b2, b4 = (problem.smoothed_optimum(data, k * v) - w0 for k in (1, 2, 4))
    assert np.linalg.norm(b1) > 1e-5
    # first order in v: doubling v doubles the offset, in the same direction
    np.testing.assert_allclose(b2, 2 * b1, rtol=0.01)
    np.testing.assert_allclose(b4, 4 * b1, rtol=0.03)


def test_a_complete_graph_forgets_the_noise_after_one_round():
    # B = A − 11ᵀ/P = 0: the deviation is this round's noise (A − I)g, variance σ²(1 − 1/P)
    for P in (2, 5, 9):
        np.testing.assert_allclose(
            deviation_variance(np.full((P, P), 1 / P), 0.3), np.full(P, 0.3 * (1 - 1 / P))
        )


def test_the_deviation_variance_is_what_the_engine_disagrees_by():
    # with a tiny step the gradients barely move the models: the extra disagreement
    # (1/P) Σ_p ‖w_p − w_c‖² of graph-homomorphic noise is M · mean_p v_p
    data = regression_data(np.random.default_rng(0), P=6, K=2, N=10)
    A = combination_matrix(build_graph("ring", 6))
    one = np.ones((6, 2), dtype=int)
    net = Network(data, LeastSquares(0.1), A, L=2, epochs=one, batch=None)
    curves = [CurveSettings(mu=1e-3), CurveSettings(mu=1e-3, server=GraphHomomorphic(variance=0.1))]
    traj = simulate(net, curves, iterations=4000, repetitions=4)
    extra = traj.disagreement[200:, 1].mean() - traj.disagreement[200:, 0].mean()
    predicted = data.shape[-1] * deviation_variance(A, 0.1).mean()
    assert abs(extra / predicted - 1) < 0.05, (extra, predicted)  # measured: 1.3% off


def test_the_bias_applies_only_where_the_noise_cancels_in_the_centroid():
    data = logistic_data(np.random.default_rng(1), P=3, K=2, N=20)
    A = combination_matrix(build_graph("complete", 3))
    one = np.ones((3, 2), dtype=int)
    net = Network(data, Logistic(0.01), A, L=2, epochs=one, batch=None)
    w0 = net.problem.optimum(data)
    gh = CurveSettings(mu=0.1, server=GraphHomomorphic(variance=0.04))
    assert centroid_bias(net, gh, w0) > 0
    assert centroid_bias(net, CurveSettings(mu=0.1, server=RandomNoise(variance=0.04)), w0) is None
    assert centroid_bias(net, CurveSettings(mu=0.1), w0) is None
    ls = Network(regression_data(np.random.default_rng(1), P=3, K=2, N=20), LeastSquares(0.1),
                 A, L=2, epochs=one, batch=None)  # fmt: skip
    assert centroid_bias(ls, gh, ls.problem.optimum(ls.data)) == 0.0


def _gfl(kind):
    """The hybrid preset's network with full participation, full batches and one epoch:
    no gradient noise, so the centroid settles where the server noise puts it."""
    raw = tomllib.loads(preset_text("hybrid"))
    raw["data"].update(K=10)
    if kind == "regression":
        raw["data"] = {"kind": "regression", "K": 10, "N": 100, "M": 2}
        raw["plot"] = ["centroid_msd_db"]
    raw["training"].update(L=10, batch="full", epochs=1, mu=0.5)
    raw["privacy"] = {}
    raw["curves"] = [{"label": "none"}]
    return build_network(parse_config(raw).curves[0], 0)


VARIANCES = (0.02, 0.04, 0.08)


def _offsets(net):
    """Mean and standard error (over repetitions) of the centroid's offset from w°."""
    w0 = net.problem.optimum(net.data)
    curves = [CurveSettings(mu=0.5)] + [
        CurveSettings(mu=0.5, server=GraphHomomorphic(variance=v)) for v in VARIANCES
    ]
    traj = simulate(net, curves, iterations=600, repetitions=4, seed=0)
    d = traj.W.mean(axis=2) - w0  # [C, R, M]: each repetition's final centroid
    msd_db = 10 * np.log10(traj.centroid_msd[-200:].mean(axis=(0, 2)))
    return d.mean(axis=1), d.std(axis=1, ddof=1) / np.sqrt(d.shape[1]), msd_db, w0


@pytest.mark.slow
def test_the_centroid_settles_at_the_predicted_offset_which_scales_with_the_variance():
    net = _gfl("logistic")
    mean, se, msd_db, w0 = _offsets(net)
    predicted = []
    for c, v in enumerate(VARIANCES, start=1):
        gh = CurveSettings(mu=0.5, server=GraphHomomorphic(variance=v))
        smoothed = net.problem.smoothed_optimum(net.data, deviation_variance(net.A, v))
        predicted.append(smoothed - w0)
        # measured over 4 repetitions: within 4-9% of the prediction (about 1 SE)
        assert np.linalg.norm(mean[c] - predicted[-1]) <= 0.25 * np.linalg.norm(predicted[-1])
        assert centroid_bias(net, gh, w0) == pytest.approx(np.sum(predicted[-1] ** 2))
    norms = np.linalg.norm(mean[1:], axis=1)
    assert np.all(np.abs(np.log2(norms[1:] / norms[:-1]) - 1) < 0.2), norms  # ∝ σ_g²
    # the MSD floor ∝ σ_g⁴: +6 dB per doubling of the variance (measured +6.06, +6.05)
    assert np.all(np.abs(np.diff(msd_db[1:]) - 6.02) < 1.0), msd_db


@pytest.mark.slow
def test_least_squares_has_no_offset():
    net = _gfl("regression")
    mean, se, msd_db, _ = _offsets(net)
    for c in range(1, len(VARIANCES) + 1):  # the same as without noise, within 4 SE
        assert np.all(np.abs(mean[c] - mean[0]) <= 4 * se[c] + 1e-12), (mean[c], mean[0], se[c])
    # a variance, not a bias: +3 dB per doubling of σ_g² (measured +3.0, +3.0)
    assert np.all(np.abs(np.diff(msd_db[1:]) - 3.01) < 1.0), msd_db
