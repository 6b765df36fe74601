"""The papers' qualitative claims, checked across seeds on the presets (quick variants)."""

import numpy as np
import pytest

from pgfl.experiments.presets import load_preset
from pgfl.experiments.runner import run_experiment

SEEDS = [0, 1, 2]


def steady(summary, key="centroid_msd_db"):
    return {c["label"]: c[key] for c in summary["curves"]}


@pytest.mark.parametrize("seed", SEEDS)
def test_fig2_graph_homomorphic_tracks_no_noise_and_random_does_not(tmp_path, seed):
    s = steady(run_experiment(load_preset("fig2", quick=True, seed=seed), tmp_path))
    assert abs(s["graph_homomorphic"] - s["none"]) <= 8.0
    assert s["random"] >= s["graph_homomorphic"] + 10.0


@pytest.mark.parametrize("seed", SEEDS)
def test_fig2_no_noise_centroid_reaches_w_opt_below_minus_40_db(tmp_path, seed):
    cfg = load_preset("fig2", seed=seed)
    cfg = type(cfg)(**{**cfg.__dict__, "curves": cfg.curves[:1]})
    assert steady(run_experiment(cfg, tmp_path))["none"] < -40.0


@pytest.mark.parametrize("seed", SEEDS)
def test_fig4_random_grows_as_mu_shrinks_graph_homomorphic_does_not(tmp_path, seed):
    s = steady(run_experiment(load_preset("fig4", quick=True, seed=seed), tmp_path))
    mus = ["0.1", "0.5", "1", "5"]
    random = [s[f"random_mu={m}"] for m in mus]
    gh = [s[f"graph_homomorphic_mu={m}"] for m in mus]
    assert all(np.diff(random) < 0), random  # smaller mu => larger MSD (O(1/mu) term)
    assert gh[0] <= gh[-1], gh  # no O(1/mu) growth: the smallest mu is not the worst
    assert all(g < r for g, r in zip(gh, random, strict=True))


@pytest.mark.parametrize("seed", SEEDS)
def test_fig5_noisy_updates_beat_noisy_models_by_8_db(tmp_path, seed):
    s = steady(run_experiment(load_preset("fig5", quick=True, seed=seed), tmp_path))
    assert s["noisy_updates"] <= s["noisy_models"] - 8.0
    assert s["none"] <= s["noisy_updates"]


def test_fig3_individual_msd_grows_with_variance_for_both_schemes(tmp_path):
    s = run_experiment(load_preset("fig3", quick=True), tmp_path)
    ind = steady(s, "individual_msd_db")
    cen = steady(s)
    for scheme in ("graph_homomorphic", "random"):
        values = [ind[f"{scheme}_var={v}"] for v in ("0.001", "0.01", "0.1", "1", "2", "10")]
        assert all(np.diff(values) > 0), (scheme, values)
    # at the centroid, graph-homomorphic noise costs far less than random noise
    assert cen["graph_homomorphic_var=1"] < cen["random_var=1"] - 20


@pytest.mark.parametrize("seed", SEEDS)
def test_fig7_real_data_test_errors(tmp_path, seed):
    from pgfl.experiments.runner import build_network

    cfg = load_preset("fig7", quick=True, seed=seed)
    s = steady(run_experiment(cfg, tmp_path), "test_error")
    net = build_network(cfg.curves[0], seed)
    optimum = net.problem.test_error(
        net.problem.optimum(net.data), net.data.X_test, net.data.y_test
    )
    assert abs(s["none"] - optimum) <= 0.01  # the centralized optimum's test error
    assert abs(s["graph_homomorphic"] - s["none"]) <= 0.02
    assert s["random"] >= s["none"] + 0.05


def test_fig7_runs_on_an_avazu_file(tmp_path):
    from pgfl.data.avazu import write_synthetic_avazu

    path = tmp_path / "train.csv"
    write_synthetic_avazu(path, 1500, seed=3)
    cfg = load_preset("fig7", quick=True, data={"source": str(path), "rows": 1000})
    s = run_experiment(cfg, tmp_path / "out")
    errors = steady(s, "test_error")
    assert set(errors) == {"none", "graph_homomorphic", "random"}
    assert all(0.0 <= e <= 1.0 for e in errors.values())


def test_classification_metrics_per_server_and_log_loss(tmp_path):
    from pgfl.experiments.results import read_csv

    cfg = load_preset("fig7", quick=True)
    s = {c["label"]: c for c in run_experiment(cfg, tmp_path)["curves"]}
    none = s["none"]
    assert len(none["server_test_error"]) == 5 and 0 < none["test_log_loss"] < np.log(2) + 0.2
    # without noise the servers agree with the centroid; random noise spreads them
    assert max(abs(e - none["test_error"]) for e in none["server_test_error"]) < 0.02
    row = read_csv(tmp_path / "curves.csv")[0]
    assert {"test_error", "test_log_loss", "server_test_error_mean"} <= set(row)


@pytest.mark.parametrize("seed", [0, 1])
def test_book_diffusion_graph_homomorphic_spares_the_centroid(tmp_path, seed):
    s = steady(run_experiment(load_preset("diffusion", quick=True, seed=seed), tmp_path))
    assert abs(s["graph_homomorphic"] - s["none"]) <= 3.0  # eq. 11.39: O(sigma_v^2), no 1/mu
    assert s["random"] >= s["graph_homomorphic"] + 6.0  # eqs. 11.25-11.32: O(sigma_v^2 / mu)
