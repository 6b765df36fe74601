"""Every privatized run reports the ε it spent; a target ε can replace a noise variance.

The expected values are closed forms (the papers' bound, basic composition of the
per-iteration ε₀ = √M Δ₂(j)/b), never the accountant called again on the same inputs.
"""

import math

import numpy as np
import pytest

from pgfl.apps.runner import run_experiment
from pgfl.experiments.loader import parse_config
from pgfl.files import read_csv
from pgfl.privacy.mechanisms import RoundContext, SecureAggregationScheme
from pgfl.privacy.secagg import SecAggConfig
from pgfl.validation import ConfigError

BASE = {
    "name": "eps",
    "iterations": 40,
    "repetitions": 1,
    "topology": {"kind": "ring", "P": 4},
    "data": {"K": 5, "N": 8},
    "training": {"L": 2, "mu": 0.3, "clip_norm": 1.5},
}
T, MU, B, M, DELTA = 40, 0.3, 1.5, 2, 1e-5
ACCOUNTANTS = ["paper", "basic", "pld"]


def _run(tmp_path, **raw):
    cfg = parse_config({**BASE, **raw})
    return {c["label"]: c for c in run_experiment(cfg, tmp_path)["curves"]}


def _basic(sensitivities: np.ndarray, sigma: float) -> float:
    """Σ_j √M Δ₂(j) / b with b = σ/√2: the ℓ₁ charge of M-dimensional Laplace noise."""
    return float(np.sum(math.sqrt(M) * sensitivities / (sigma / math.sqrt(2))))


def _single_axis_floor(sensitivity: float, sigma: float) -> float:
    """ε at δ of one Laplace release shifted along an axis, ε₀ + 2 ln(1 − δ): a lower bound."""
    return sensitivity / (sigma / math.sqrt(2)) + 2 * math.log1p(-DELTA)


def test_privatized_curves_report_epsilon_in_summary_and_csv(tmp_path):
    s = _run(
        tmp_path,
        privacy={"server_variance": 0.5, "accountants": ACCOUNTANTS},
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
    assert "epsilon" not in s["none"]
    sigma = math.sqrt(0.5)
    gh = s["gh"]["epsilon"]
    # preprint Thm 2: ε(T) = √2 μ B T (T+1) / σ_g; rigorous basic: √M times that (ℓ₁)
    assert gh["paper"] == pytest.approx(math.sqrt(2) * MU * B * T * (T + 1) / sigma)
    assert gh["basic"] == pytest.approx(_basic(2 * MU * B * np.arange(1, T + 1), sigma))
    assert _single_axis_floor(2 * MU * B * T, sigma) <= gh["pld"] < gh["basic"]
    assert s["gh"]["delta"] == DELTA and "NOT the centroid" in s["gh"]["epsilon_scope"]
    models = s["models"]["epsilon"]  # a client's model moves by ≤ 2μB per round
    assert models["basic"] == pytest.approx(_basic(np.full(T, 2 * MU * B), math.sqrt(0.2)))
    assert models["pld"] < models["basic"]
    assert s["noclip"]["epsilon"]["pld"] == "inf"
    assert "training.clip_norm" in s["noclip"]["epsilon_reason"]
    rows = [r for r in read_csv(tmp_path / "curves.csv") if r["label"] == "gh"]
    paper = np.array([float(r["epsilon_paper"]) for r in rows])
    i = np.arange(1, T + 1)
    np.testing.assert_allclose(paper, math.sqrt(2) * MU * B * i * (i + 1) / sigma)
    pld = np.array([float(r["epsilon_pld"]) for r in rows])
    assert np.all(np.diff(pld) >= 0) and pld[-1] == pytest.approx(gh["pld"])


def test_target_epsilon_calibrates_the_noise(tmp_path):
    c = _run(
        tmp_path,
        privacy={"server_noise": "graph_homomorphic", "target_epsilon": 50.0,
                 "accountants": ACCOUNTANTS},
    )["eps"]  # fmt: skip
    assert 50.0 * (1 - 1e-3) <= c["epsilon"]["pld"] <= 50.0
    sigma = math.sqrt(c["noise_variance"])  # the reported ε belongs to the calibrated noise
    assert c["epsilon"]["basic"] == pytest.approx(_basic(2 * MU * B * np.arange(1, T + 1), sigma))


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
    s = _run(
        tmp_path,
        privacy={"server_variance": 0.5, "accountants": ACCOUNTANTS},
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
    L, sigma = 2, math.sqrt(0.5)
    rnd = s["random"]["epsilon"]
    assert rnd["basic"] == pytest.approx(_basic(np.full(T, 2 * MU * B / L), sigma))
    assert rnd["paper"] == pytest.approx(math.sqrt(2) * MU * B * T * (T + 1) / sigma)  # 2μBj
    client = s["both"]["epsilon_client"]
    assert client["basic"] == pytest.approx(_basic(np.full(T, 2 * MU * B), math.sqrt(0.2)))


def test_server_noise_of_variance_zero_keeps_the_client_level_epsilon():
    from dataclasses import replace

    from pgfl.experiments.build import build_network, curve_settings
    from pgfl.experiments.privacy import curve_epsilon

    # a config cannot ask for it (a noisy link of variance 0 is refused at load) ...
    raw = {**BASE, "privacy": {"server_noise": "random", "server_variance": 0.0}}
    with pytest.raises(ConfigError, match="server_variance > 0"):
        parse_config(raw)
    # ... but a calibration or a library caller can reach server noise of std 0: the
    # curve's epsilon is then the client level's, not dropped
    raw = {
        **BASE,
        "privacy": {
            "server_noise": "random",
            "server_variance": 0.5,
            "client_noise": "laplace",
            "client_variance": 0.2,
            "accountants": ACCOUNTANTS,
        },
    }
    curve = parse_config(raw).curves[0]
    net = build_network(curve, 0)
    settings = curve_settings(curve, T, net)
    settings = replace(settings, server=settings.server.with_std(0.0))
    _, entry = curve_epsilon(settings, net, T, delta=DELTA, accountants=ACCOUNTANTS, checkpoints=64)
    expected = _basic(np.full(T, 2 * MU * B), math.sqrt(0.2))
    assert entry["epsilon"]["basic"] == pytest.approx(expected)
    assert "honest-but-curious server" in entry["epsilon_scope"]


def test_per_link_noise_counts_every_outgoing_link_even_with_a_zero_diagonal(tmp_path):
    # P = 3, a_pp = 0: every server sends to both others, so an adversary on all of its
    # links sees 2 copies per iteration (the old count, non-zeros per row minus one, saw 1)
    a = [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]]
    sigma = math.sqrt(0.5)
    s = _run(
        tmp_path,
        topology={"kind": "matrix", "P": 3, "matrix": a},
        privacy={"server_noise": "random_per_link", "server_variance": 0.5,
                 "accountants": ACCOUNTANTS},
    )["eps"]  # fmt: skip
    assert s["epsilon"]["basic"] == pytest.approx(
        2 * _basic(2 * MU * B * np.arange(1, T + 1), sigma)
    )


def test_secure_aggregation_is_accounted_with_its_threshold(tmp_path):
    # L = 5 of K = 5 clients, threshold t = 3 (a majority), dropout: a unit averages any
    # n ≥ 3 survivors, so one client moves it by up to 2μB/3, plus the rounding of the
    # fixed-point aggregate, 2√M·2^-(f+1)
    f = 10
    s = _run(
        tmp_path,
        training={**BASE["training"], "L": 5},
        privacy={"server_noise": "random", "server_variance": 0.5, "accountants": ACCOUNTANTS,
                 "client_noise": "secure_aggregation", "dropout": 0.3, "secagg_frac_bits": f},
    )["eps"]  # fmt: skip
    per_round = 2 * MU * B / 3 + 2 * math.sqrt(M) * 2.0 ** -(f + 1)
    assert s["epsilon"]["basic"] == pytest.approx(_basic(np.full(T, per_round), math.sqrt(0.5)))
    assert s["secure_aggregation"]["threshold"] == 3


@pytest.mark.parametrize("share", ["models", "updates"])
def test_one_client_moves_a_securely_aggregated_unit_by_up_to_its_charged_sensitivity(share):
    """Coupled aggregates: client 0's message differs by the most clipping allows, and
    exactly t of L clients survive. The change of the unit's aggregate reaches beyond
    2μB/L (what was charged before) and stays within 2μB/t + the rounding term."""
    mu, bound, L, f = 0.4, 1.0, 6, 12
    cfg = SecAggConfig(frac_bits=f)
    t = cfg.threshold_for(L)  # 4
    scheme = SecureAggregationScheme(cfg, dropout=0.5)
    rng = np.random.default_rng(3)
    W = rng.normal(size=(1, 1, M))
    Wk = W[:, :, None, :] + rng.normal(scale=0.1, size=(1, 1, L, M))
    u = np.array([1.0, -1.0]) / math.sqrt(2)  # the ℓ₁-maximising diagonal
    Wk2 = Wk.copy()
    Wk[0, 0, 0] = W[0, 0] - mu * bound * u  # each run's client 0 moved by μB, opposite ways
    Wk2[0, 0, 0] = W[0, 0] + mu * bound * u
    survive = np.zeros((1, 1, L))
    survive[..., :t] = 1.0  # dropout draws ≥ the dropout probability survive: clients 0..t−1

    class FixedDropout:  # the round's draws, with the dropout pattern fixed
        def uniform(self, stream, shape):
            assert stream == "dropout"
            return survive

    def aggregate(local):
        ctx = RoundContext(FixedDropout(), 0, 1)
        up = np.array([share == "updates"])
        return SecureAggregationScheme.aggregate(
            [scheme], W[None], local[None], np.array([mu]), up, ctx
        ).psi[0]

    psi, psi2 = aggregate(Wk), aggregate(Wk2)
    moved = float(np.linalg.norm(psi - psi2))
    assert moved > 2 * mu * bound / L * 1.4  # the L-based charge is exceeded (L/t = 1.5)
    scale = mu if share == "updates" else 1.0
    charged = 2 * mu * bound / t + 2 * math.sqrt(M) * scale * cfg.quantization_bound
    assert moved <= charged + 1e-12
