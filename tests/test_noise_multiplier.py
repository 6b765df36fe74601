"""``noise_multiplier``: noise given as z = σ/Δ (Opacus' convention), converted in one place.

σ = z·Δ₁, Δ₁ the L2 sensitivity of the link's first message as the accountant charges it
(pgfl.experiments.privacy.multiplier_std): a client's model moves by at most 2μB per round
(journal §3.4), so client Gaussian noise with multiplier z has σ = 2μBz exactly.
"""

from __future__ import annotations

import copy
import json
import math

import pytest

from pgfl.cli import main
from pgfl.experiments.build import build_network, curve_settings
from pgfl.experiments.loader import parse_config
from pgfl.validation import ConfigError

BASE = {
    "name": "z",
    "iterations": 30,
    "topology": {"kind": "ring", "P": 3},
    "data": {"K": 4, "N": 6},
    "training": {"L": 2, "mu": 0.4, "clip_norm": 1.5, "batch": "full", "epochs": 1},
    "privacy": {"client_noise": "gaussian"},
}


def settings_of(raw, curve=0):
    cfg = parse_config(raw)
    c = cfg.curves[curve]
    return curve_settings(c, cfg.iterations, build_network(c, cfg.seed))


def with_privacy(**privacy):
    raw = copy.deepcopy(BASE)
    raw["privacy"].update(privacy)
    return raw


@pytest.mark.parametrize("z", [0.5, 1.1, 3.0])
def test_client_noise_multiplier_is_sigma_over_two_mu_b(z):
    s = settings_of(with_privacy(client_noise_multiplier=z))
    assert s.client.std == pytest.approx(z * 2 * 0.4 * 1.5, rel=1e-12)


def test_record_level_neighbours_divide_the_sensitivity_by_the_records():
    raw = with_privacy(client_noise_multiplier=1.0, neighbours="record")
    s = settings_of(raw)
    assert s.client.std == pytest.approx(2 * 0.4 * 1.5 / 6, rel=1e-12)  # N = 6 records


def test_a_multiplier_and_the_variance_it_means_give_the_same_run(tmp_path):
    from pgfl.apps.runner import run_experiment

    z = run_experiment(parse_config(with_privacy(client_noise_multiplier=1.2)), tmp_path / "a")
    var = (1.2 * 2 * 0.4 * 1.5) ** 2
    v = run_experiment(parse_config(with_privacy(client_variance=var)), tmp_path / "b")
    (cz,), (cv,) = z["curves"], v["curves"]
    assert cz["settings"]["client_noise_multiplier"] == 1.2
    assert cz["settings"]["client_variance"] == pytest.approx(var, rel=1e-12)
    assert cz["centroid_msd_db"] == pytest.approx(cv["centroid_msd_db"], rel=1e-9)
    assert cz["epsilon"]["pld"] == pytest.approx(cv["epsilon"]["pld"], rel=1e-9)


def test_server_noise_multiplier_uses_the_first_messages_sensitivity():
    raw = copy.deepcopy(BASE)
    raw["privacy"] = {"server_noise": "random", "server_noise_multiplier": 2.0}
    s = settings_of(raw)
    ctx = s.release_context(build_network(parse_config(raw).curves[0], 0), 30)
    first = s.server.with_std(1.0).transcript(ctx).sensitivities[0]
    assert s.server.std == pytest.approx(2.0 * first, rel=1e-12)
    assert first == pytest.approx(2 * 0.4 * 1.5 / 2, rel=1e-12)  # 2μB/L, L = 2


@pytest.mark.parametrize(
    "privacy, training, says",
    [
        ({"client_noise_multiplier": 1.0}, {"clip_norm": math.inf}, "needs a gradient bound"),
        ({"client_noise_multiplier": 1.0, "target_epsilon": 5.0}, {}, "give one"),
        ({"client_noise_multiplier": 0.0}, {}, "privacy.client_noise_multiplier must be"),
    ],
)
def test_bad_multipliers_are_one_line(privacy, training, says):
    raw = with_privacy(**privacy)
    raw["training"].update(training)
    with pytest.raises(ConfigError, match=says):
        settings_of(raw)


def test_the_epsilon_command_takes_a_noise_multiplier(capsys):
    argv = ["privacy", "epsilon", "--mu", "0.7", "--clip", "2", "--iterations", "10", "--dim",
            "2", "--scheme", "models", "--distribution", "gaussian", "--json"]  # fmt: skip
    main([*argv, "--noise-multiplier", "1.5"])
    by_z = json.loads(capsys.readouterr().out)
    main([*argv, "--sigma", str(1.5 * 2 * 0.7 * 2)])
    by_sigma = json.loads(capsys.readouterr().out)
    assert by_z["epsilon"] == by_sigma["epsilon"]
    with pytest.raises(SystemExit):
        main([*argv, "--noise-multiplier", "1.5", "--sigma", "1"])
    assert "exactly one of" in capsys.readouterr().err


@pytest.mark.parametrize("noise", ["distributed_gaussian", "skellam"])
def test_distributed_noise_takes_a_multiplier_of_the_real_unit_sensitivity(noise):
    # σ on a unit's sum = z·2μB: Δ in real units before the integer encoding, not the
    # rounded grid-unit sensitivity the accountant charges (whose grid depends on σ)
    z = 1.3
    s = settings_of(with_privacy(client_noise=noise, client_noise_multiplier=z))
    assert s.client.name == noise
    assert s.client.std == pytest.approx(z * 2 * 0.4 * 1.5, rel=1e-12)
    by_variance = settings_of(with_privacy(client_noise=noise, ddp_variance=s.client.variance))
    assert by_variance.client == s.client  # the same mechanism as the variance it means
    net = build_network(
        parse_config(with_privacy(client_noise=noise, ddp_variance=1.0)).curves[0], 0
    )
    rounded = s.client.transcript(s.release_context(net, 30))
    assert rounded.sensitivities[0] * rounded.grid > 2 * 0.4 * 1.5  # rounding adds to Δ


def test_distributed_noise_multiplier_beside_a_target_for_the_same_level_is_refused():
    raw = with_privacy(client_noise="skellam", client_noise_multiplier=1.0, target_epsilon=2.0)
    with pytest.raises(ConfigError, match="give one"):
        settings_of(raw)
