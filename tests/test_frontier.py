"""The privacy-utility frontier (pgfl.apps.frontier, `pgfl privacy frontier`,
`pgfl reproduce frontier`).

References are independent of the code under test: the Gaussian mechanism's exact ε
(Balle & Wang 2018, Thm 8) written out here with scipy, composition of T Gaussian
releases of sensitivity Δ as one of sensitivity Δ√T, and the replace-one sensitivities
2μB/L (random server noise) and 2μB (a client's model) of the papers' set-up.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from pgfl.apps.frontier import EPSILONS, PAPER_SCHEMES, frontier_configs, run_frontier

EPS = (0.5, 2.0, 50.0)
COUNTS = (2, 6)
CONTRACT = ("label", "x", "centroid_msd_db", "individual_msd_db", "noise_variance")


@pytest.fixture(scope="module")
def frontier(tmp_path_factory):
    """Every scheme at three targets and two iteration counts, plus a logistic set-up."""
    out = tmp_path_factory.mktemp("frontier")
    configs = frontier_configs(
        setups=("regression",), iterations=COUNTS, epsilons=EPS, repetitions=1
    )
    configs.update(
        frontier_configs(setups=("logistic",), iterations=(3,), epsilons=(1.0, 10.0),
                         schemes=("random", "client_gaussian_models"), repetitions=1)
    )  # fmt: skip
    return out, run_frontier(out, configs=configs)


def _curve(summary, label, setup="regression", iterations=COUNTS[0]):
    (c,) = [
        c
        for c in summary["curves"]
        if (c["label"], c["setup"], c["iterations"]) == (label, setup, iterations)
    ]
    return c


def test_output_contract(frontier):
    out, summary = frontier
    assert json.loads((out / "summary.json").read_text()) == json.loads(json.dumps(summary))
    keys = {(c["label"], c["setup"], c["iterations"]) for c in summary["curves"]}
    expected = {(s, "regression", T) for s in PAPER_SCHEMES for T in COUNTS}
    assert keys == expected | {("random", "logistic", 3), ("client_gaussian_models", "logistic", 3)}
    for c in summary["curves"]:
        assert all(k in c for k in CONTRACT)
        assert c["scope"] and c["legend"]
        for k in ("centroid_msd_db", "individual_msd_db", "noise_variance", "epsilon"):
            assert len(c[k]) == len(c["x"])
        assert ("test_error" in c) == (c["setup"] == "logistic")
    assert _curve(summary, "random")["x"] == list(EPS)
    assert _curve(summary, "random", "logistic", 3)["x"] == [1.0, 10.0]
    assert (out / "frontier.png").stat().st_size > 0
    rows = (out / "frontier.csv").read_text().splitlines()
    assert len(rows) == 1 + sum(len(c["x"]) for c in summary["curves"])
    # each (set-up, T) is one experiment: its curves ran as one batch
    assert sorted(summary["runs"]) == ["logistic-T3", "regression-T2", "regression-T6"]
    assert len(summary["baselines"]) == 3


def test_reported_epsilon_meets_each_target(frontier):
    _, summary = frontier
    for c in summary["curves"]:
        for target, eps in zip(c["x"], c["epsilon"], strict=True):
            assert eps <= target * (1 + 1e-9), (c["label"], target)
            assert eps == pytest.approx(target, rel=1e-3), (c["label"], target)


def test_calibrated_noise_decreases_as_epsilon_grows_and_with_fewer_iterations(frontier):
    _, summary = frontier
    for c in summary["curves"]:
        v = np.array(c["noise_variance"])
        assert np.all(v > 0) and np.all(np.diff(v) < 0), c["label"]
    for name in PAPER_SCHEMES:  # composition: a longer run needs more noise for the same ε
        short, long_ = (_curve(summary, name, iterations=T) for T in COUNTS)
        assert np.all(np.array(long_["noise_variance"]) > np.array(short["noise_variance"]))


def _gaussian_epsilon(sigma: float, sensitivity: float, delta: float) -> float:
    """Exact ε of N(0, σ²) on a query of ℓ2 sensitivity Δ (Balle & Wang 2018, Thm 8)."""
    a = sensitivity / (2 * sigma)

    def excess(eps: float) -> float:
        b = eps * sigma / sensitivity
        return norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b) - delta

    return brentq(excess, 0.0, 500.0, xtol=1e-12)


@pytest.mark.parametrize(
    ("label", "sensitivity"),
    [("random_gaussian", 2 * 0.7 * 2.0 / 11), ("client_gaussian_models", 2 * 0.7 * 2.0)],
)
def test_gaussian_points_match_the_exact_gaussian_mechanism(frontier, label, sensitivity):
    # preprint Fig. 2 set-up: μ = 0.7, B = 2, L = 11; T releases of sensitivity Δ compose
    # to one of sensitivity Δ√T, so the calibrated σ must give the target exactly
    _, summary = frontier
    for T in COUNTS:
        c = _curve(summary, label, iterations=T)
        for target, var in zip(c["x"], c["noise_variance"], strict=True):
            exact = _gaussian_epsilon(math.sqrt(var), sensitivity * math.sqrt(T), 1e-5)
            assert exact == pytest.approx(target, rel=2e-3), (T, target)
            assert exact <= target * (1 + 1e-6)


def test_utility_and_privacy_trade_off_where_the_papers_predict(frontier):
    # random server noise covers the centroid: more ε, less noise, lower centroid MSD; the
    # graph-homomorphic noise cancels in the centroid, so its centroid MSD is far below
    # its individual MSD where the noise is large (preprint eq. 46)
    _, summary = frontier
    for T in COUNTS:
        c = _curve(summary, "random", iterations=T)
        assert c["centroid_msd_db"][-1] < c["centroid_msd_db"][0] - 10
        gh = _curve(summary, "graph_homomorphic", iterations=T)
        pairs = list(zip(gh["centroid_msd_db"], gh["individual_msd_db"], strict=True))
        assert all(ce <= ie + 0.5 for ce, ie in pairs)
        assert pairs[0][0] < pairs[0][1] - 10  # the most noise: ε = 0.5


def test_resume_keeps_the_saved_curves(tmp_path):
    configs = frontier_configs(setups=("regression",), iterations=(2,), epsilons=(1.0, 5.0),
                               schemes=("random",), repetitions=1)  # fmt: skip
    configs = {k: replace(c, run=replace(c.run, keep_partial=True)) for k, c in configs.items()}
    first = run_frontier(tmp_path, configs=configs)
    partial = sorted((tmp_path / "regression-T2" / "partial").glob("curve-*.npz"))
    assert partial  # run.keep_partial: kept after the frontier finished
    stamps = [p.stat().st_mtime_ns for p in partial]
    second = run_frontier(tmp_path, configs=configs, resume=True)
    assert [p.stat().st_mtime_ns for p in partial] == stamps  # nothing recomputed
    assert second["curves"] == first["curves"]


def test_default_grid_is_the_issues():
    assert EPSILONS == (0.5, 1.0, 2.0, 5.0, 10.0, 50.0)
    configs = frontier_configs()
    assert sorted(configs) == ["logistic-T100", "logistic-T1000", "regression-T100",
                               "regression-T1000"]  # fmt: skip
    cfg = configs["regression-T1000"]
    assert len(cfg.curves) == 1 + len(PAPER_SCHEMES) * len(EPSILONS)
    assert {c.privacy.delta for c in cfg.curves} == {1e-5}
    assert len({c.structure() for c in cfg.curves}) == 1  # one vectorized simulation


# ----------------------------------------------------------------------------- CLI
def test_cli_privacy_frontier_json(tmp_path, cli):
    code, stdout, err = cli(
        ["privacy", "frontier", "--setup", "regression", "--iterations", "3", "--epsilon", "10",
         "--epsilon", "1", "--scheme", "random", "--scheme", "hybrid", "--mu", "0.5",
         "--out", str(tmp_path), "--json"])  # fmt: skip
    assert code == 0, err
    out = json.loads(stdout)
    assert [c["label"] for c in out["curves"]] == ["random", "hybrid"]
    for c in out["curves"]:
        assert c["x"] == [1.0, 10.0] and c["iterations"] == 3
        assert all(len(c[k]) == 2 for k in CONTRACT[2:])
    assert (tmp_path / "frontier.png").is_file()
    cfg = json.loads((tmp_path / "regression-T3" / "config.json").read_text())
    assert cfg["config"]["training"]["mu"] == 0.5
    code, stdout, _ = cli(
        ["privacy", "frontier", "--setup", "regression", "--iterations", "3", "--epsilon", "10",
         "--epsilon", "1", "--scheme", "random", "--scheme", "hybrid", "--mu", "0.5",
         "--out", str(tmp_path), "--resume"])  # fmt: skip
    assert code == 0 and "no privacy" in stdout and "ε=10" in stdout


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["privacy", "frontier", "--setup", "images"], "--setup"),
        (["privacy", "frontier", "--scheme", "dp_sgd"], "--scheme"),
        (["privacy", "frontier", "--epsilon", "0"], "--epsilon"),
        (["privacy", "frontier", "--epsilon", "1", "--epsilon", "1"], "--epsilon"),
        (["privacy", "frontier", "--iterations", "0"], "--iterations"),
        (["privacy", "frontier", "--mu", "-1"], "--mu"),
        (["reproduce", "frontier", "--data", "fair"], "--data"),
    ],
)
def test_cli_frontier_bad_input(tmp_path, cli, args, what):
    code, _, err = cli([*args, "--out", str(tmp_path / "o")])
    assert code == 2 and what in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_cli_reproduce_frontier_quick(tmp_path, cli):
    code, stdout, err = cli(["reproduce", "frontier", "--quick", "--json", "--out",
                               str(tmp_path)])  # fmt: skip
    assert code == 0, err
    out = json.loads(stdout)
    assert out["experiment"] == "frontier" and out["quick"] is True
    assert {c["iterations"] for c in out["curves"]} == {200, 20}
    for c in out["curves"]:
        assert c["x"] == list(EPSILONS)
        assert c["epsilon"] == pytest.approx(c["x"], rel=1e-3)
