"""Every privatized run reports the ε it spent; a target ε can replace a noise variance."""

import math

import numpy as np
import pytest

from pgfl.experiments.config import parse_config
from pgfl.experiments.results import read_csv
from pgfl.experiments.runner import run_experiment
from pgfl.privacy.accounting import epsilon_curve
from pgfl.validation import ConfigError

BASE = {
    "name": "eps",
    "iterations": 40,
    "repetitions": 1,
    "topology": {"kind": "ring", "P": 4},
    "data": {"K": 5, "N": 8},
    "training": {"L": 2, "mu": 0.3, "clip_norm": 1.5},
}


def test_privatized_curves_report_epsilon_in_summary_and_csv(tmp_path):
    raw = dict(
        BASE,
        privacy={"server_variance": 0.5},
        curves=[
            {"label": "none"},
            {"label": "gh", "privacy": {"server_noise": "graph_homomorphic"}},
            {"label": "models", "privacy": {"client_noise": "laplace", "client_variance": 0.2}},
            {
                "label": "noclip",
                "privacy": {"server_noise": "random"},
                "training": {"clip_norm": math.inf},
            },
        ],
    )
    s = {c["label"]: c for c in run_experiment(parse_config(raw), tmp_path)["curves"]}
    assert "epsilon" not in s["none"]
    expected = epsilon_curve(
        scheme="graph_homomorphic",
        sigma=math.sqrt(0.5),
        mu=0.3,
        clip=1.5,
        iterations=40,
        dim=2,
        accountants=["paper", "pld"],
    ).final()
    assert s["gh"]["epsilon"] == pytest.approx(expected)
    assert s["gh"]["delta"] == 1e-5 and "epsilon_scope" in s["gh"]
    assert np.isfinite(list(s["models"]["epsilon"].values())).all()
    assert s["noclip"]["epsilon"]["pld"] == "inf" and "clip" in s["noclip"]["epsilon_reason"]
    rows = [r for r in read_csv(tmp_path / "curves.csv") if r["label"] == "gh"]
    eps = np.array([float(r["epsilon_pld"]) for r in rows])
    assert (
        len(eps) == 40 and np.all(np.diff(eps) >= 0) and eps[-1] == pytest.approx(expected["pld"])
    )


def test_target_epsilon_calibrates_the_noise(tmp_path):
    raw = dict(BASE, privacy={"server_noise": "graph_homomorphic", "target_epsilon": 50.0})
    c = run_experiment(parse_config(raw), tmp_path)["curves"][0]
    assert c["epsilon"]["pld"] <= 50.0 * (1 + 1e-9)
    assert c["epsilon"]["pld"] >= 50.0 * 0.99
    assert c["noise_variance"] > 0


@pytest.mark.parametrize(
    ("privacy", "training", "message"),
    [
        ({"target_epsilon": 1.0}, {}, "needs a privatized link"),
        (
            {"server_noise": "random", "target_epsilon": 1.0},
            {"clip_norm": math.inf},
            "needs a gradient bound",
        ),
        (
            {"target_epsilon": -1.0},
            {},
            r"privacy.target_epsilon must be a real number in \(0, inf\)",
        ),
        ({"delta": 1.0}, {}, r"privacy.delta must be a real number in \(0, 1\); got 1.0"),
        ({"accountants": ["pld", "magic"]}, {}, "privacy.accountants must be one of"),
    ],
)
def test_bad_privacy_settings(tmp_path, privacy, training, message):
    raw = dict(BASE, privacy=privacy, training={**BASE["training"], **training})
    with pytest.raises(ConfigError, match=message):
        run_experiment(parse_config(raw), tmp_path)


def test_random_noise_is_accounted_with_l_clients_and_client_level_epsilon_is_added(tmp_path):
    raw = dict(
        BASE,
        privacy={"server_variance": 0.5},
        curves=[
            {"label": "random", "privacy": {"server_noise": "random"}},
            {
                "label": "both",
                "privacy": {
                    "server_noise": "graph_homomorphic",
                    "client_noise": "laplace",
                    "client_variance": 0.2,
                },
            },
        ],
    )
    s = {c["label"]: c for c in run_experiment(parse_config(raw), tmp_path)["curves"]}
    common = dict(
        sigma=math.sqrt(0.5), mu=0.3, clip=1.5, iterations=40, dim=2, accountants=["paper", "pld"]
    )
    with_l = epsilon_curve(scheme="random", clients_per_round=2, **common).final()
    assert s["random"]["epsilon"] == pytest.approx(with_l)
    client = epsilon_curve(
        scheme="models",
        sigma=math.sqrt(0.2),
        mu=0.3,
        clip=1.5,
        iterations=40,
        dim=2,
        clients_per_round=2,
        accountants=["paper", "pld"],
    ).final()
    assert s["both"]["epsilon_client"] == pytest.approx(client)
