"""DP variant: Theorem 3 noise, clipping, composition through the accounting module."""

import math

import numpy as np
import pytest

from pgfl.graphlearn.federated import client_distances, federated_graph_learning
from pgfl.graphlearn.privacy import calibrate_noise, privacy_report
from pgfl.graphlearn.smoothness import per_sample_z_norms
from pgfl.privacy.accounting import gaussian_epsilon_pld, kairouz_epsilon
from pgfl.rng import stream
from pgfl.validation import ConfigError


def test_sigma_equals_theorem_3_closed_form():
    eps_bar, delta_bar, T, C = 0.5, 1e-5, 8, 25.0
    n = np.array([20, 50, 1000])
    cal = calibrate_noise(eps_bar, delta_bar, T, n, C)
    e_t, d_t = eps_bar / T, delta_bar / T
    theorem3 = 2 * math.sqrt(2 * math.log(1.25 / d_t)) * C / (n * e_t)
    np.testing.assert_allclose(cal.sigma, theorem3, rtol=1e-12)
    rig = calibrate_noise(eps_bar, delta_bar, T, n, C, sensitivity="rigorous")
    np.testing.assert_allclose(rig.sigma, math.sqrt(2) * theorem3, rtol=1e-12)


def test_report_composition_matches_accounting_module():
    cal = calibrate_noise(1.0, 1e-5, 8, [100], 25.0)
    rep = privacy_report(cal)
    assert rep["epsilon_basic"] == pytest.approx(1.0)
    assert rep["delta_basic"] == pytest.approx(1e-5)
    assert rep["epsilon_kairouz"] == pytest.approx(kairouz_epsilon(np.full(8, 1.0 / 8), 1e-5))
    z = math.sqrt(2 * math.log(1.25 / (1e-5 / 8))) / (1.0 / 8)
    assert rep["noise_multiplier"] == pytest.approx(z)
    assert rep["epsilon_pld"] == pytest.approx(gaussian_epsilon_pld(z, 8, 1e-5))
    assert rep["epsilon_pld"] <= rep["epsilon_pld_rigorous"] <= rep["epsilon_basic"]


def test_calibration_rejects_out_of_range():
    with pytest.raises(ConfigError, match="epsilon_bar / rounds"):
        calibrate_noise(9.0, 1e-5, 8, [10], 25.0)  # ε_t ≥ 1: classic Gaussian invalid
    with pytest.raises(ConfigError, match="sensitivity must be one of"):
        calibrate_noise(1.0, 1e-5, 8, [10], 25.0, sensitivity="loose")
    with pytest.raises(ConfigError, match="clip must be"):
        calibrate_noise(1.0, 1e-5, 8, [10], 0.0)


def test_injected_noise_has_theorem_3_scale():
    # one round, fixed step η: the released iterate differs from the noiseless one by −η s
    rng = np.random.default_rng(0)
    Z = rng.random((4, 3, 45)) + 1.0  # 4 trials, 3 clients, d = 10
    cal = calibrate_noise(8.0, 1e-5, 10, [400, 400, 400], 0.01)  # small σ: no projection
    kw = dict(beta=1.0, rho=0.3, lam=0.0, rounds=1, local_steps=3, local_solver="fixed", step=1e-3)
    kw["dp_step"] = 1e-3
    clean = federated_graph_learning(Z, noise_std=0.0, rng=stream(1, "dp"), **kw)
    # limit case: zero noise is Algorithm 1 itself (fixed-step solver, eqs. 25–27 = 14–16)
    plain = federated_graph_learning(Z, **kw)
    np.testing.assert_allclose(clean.w_local, plain.w_local, rtol=1e-12)
    noisy = federated_graph_learning(Z, noise_std=cal.sigma, rng=stream(1, "dp"), **kw)
    diff = (clean.w_local - noisy.w_local) / 1e-3
    assert np.all(noisy.w_local > 0)  # projection inactive
    est = diff.std()
    n = diff.size
    assert abs(est / cal.sigma[0] - 1) < 4 / math.sqrt(2 * n)
    assert abs(diff.mean()) < 4 * cal.sigma[0] / math.sqrt(n)


def test_clipping_bounds_every_signal_and_client_node_sets():
    X = stream(0, "clip").standard_normal((200, 8)) * 4
    C = float(np.median(per_sample_z_norms(X)))
    z_clip, n = client_distances([X], clip=C)
    z_raw, _ = client_distances([X])
    assert n.tolist() == [200]
    assert np.all(z_clip <= z_raw + 1e-12) and np.any(z_clip < z_raw)
    with pytest.raises(ConfigError, match="same node set: client 1 has 7 nodes, client 0 has 8"):
        client_distances([X, X[:, :7]])
    with pytest.raises(ConfigError, match="signals\\[1\\] must contain only finite"):
        client_distances([X, np.full((3, 8), np.nan)])


def test_dp_same_seed_same_result_different_seed_differs():
    Z = np.random.default_rng(2).random((3, 28)) + 0.5
    kw = dict(beta=0.5, noise_std=5.0, rounds=2)
    a = federated_graph_learning(Z, rng=stream(3, "dp"), **kw)
    b = federated_graph_learning(Z, rng=stream(3, "dp"), **kw)
    c = federated_graph_learning(Z, rng=stream(4, "dp"), **kw)
    np.testing.assert_array_equal(a.w_local, b.w_local)
    assert not np.allclose(a.w_local, c.w_local)
