import math

import pytest

from pgfl.experiments.config import load_config, parse_config
from pgfl.experiments.presets import load_preset, preset_names
from pgfl.validation import ConfigError


def base(**over):
    raw = {
        "name": "t",
        "topology": {"kind": "ring", "P": 4},
        "data": {"K": 10, "N": 8},
        "training": {"L": 3},
    }
    raw.update(over)
    return raw


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (base(bogus=1), "unknown setting 'bogus'"),
        (base(training={"L": 3, "stepsize": 1}), "unknown setting training.stepsize; allowed:"),
        (base(training={"L": 30}), r"training.L must be an integer in \[1, data.K=10\]; got 30"),
        (
            base(training={"L": 3, "mu": -1}),
            r"training.mu must be a real number in \(0, inf\); got -1",
        ),
        (base(training={"L": 3, "mu": "fast"}), "training.mu must be a real number .* got 'fast'"),
        (base(topology={"kind": "hypercube"}), "topology.kind must be one of"),
        (base(privacy={"server_noise": "loud"}), "privacy.server_noise must be one of"),
        (
            base(privacy={"server_variance": -0.1}),
            r"privacy.server_variance must be a real number in \[0, inf\); got -0.1",
        ),
        (
            base(data={"K": 10, "N": [5]}),
            r"data.N must be an integer in \[1, inf\] or a \[low, high\] pair of them; got \[5\]",
        ),
        (
            base(data={"K": 10, "N": [9, 5]}),
            r"data.N\[1\] must be an integer in \[data.N\[0\]=9, inf\]; got 5",
        ),
        (base(iterations=0), r"iterations must be an integer in \[1, inf\]; got 0"),
        (base(curves=[{"label": "a"}, {"label": "a"}]), "curve labels must be unique"),
        (base(curves=[{"label": "a", "tpology": {}}]), r"unknown setting curves\[0\].tpology"),
        (base(topology={"kind": "matrix", "P": 2}), "topology.matrix is required"),
        (base(plot=["loss"]), "plot must be one of"),
    ],
)
def test_bad_configs_name_the_setting_range_and_value(raw, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(raw)


def test_curves_override_and_inherit():
    cfg = parse_config(
        base(
            privacy={"server_variance": 0.1},
            curves=[
                {"label": "a"},
                {"label": "b", "privacy": {"server_noise": "random"}, "training": {"mu": 0.1}},
            ],
        )
    )
    a, b = cfg.curves
    assert a.privacy.server_noise == "none" and b.privacy.server_noise == "random"
    assert b.privacy.server_variance == 0.1 and b.training.mu == 0.1 and a.training.mu == 0.7
    assert a.structure() == b.structure()
    assert math.isclose(b.settings().server_std, math.sqrt(0.1))


def test_structural_overrides_split_batches():
    cfg = parse_config(base(curves=[{"label": "a"}, {"label": "b", "training": {"L": 2}}]))
    assert cfg.curves[0].structure() != cfg.curves[1].structure()


def test_toml_file_round_trip_and_errors(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text('name = "x"\n[data]\nK = 5\n[training]\nL = 2\nclip_norm = inf\n')
    cfg = load_config(path)
    assert cfg.curves[0].training.clip_norm == math.inf
    path.write_text("name = \n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(path)
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.toml")


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_validates_in_both_modes(name):
    full, quick = load_preset(name), load_preset(name, quick=True)
    assert full.iterations >= quick.iterations and full.repetitions >= quick.repetitions
    assert len({c.label for c in full.curves}) == len(full.curves)


def test_preset_parameters_are_the_papers():
    fig2 = load_preset("fig2")
    c = fig2.curves[0]
    assert (c.topology.P, c.data.K, c.data.N, c.training.L) == (10, 100, 100, 11)
    assert (c.training.mu, c.training.rho, c.training.epochs, c.training.batch) == (
        0.7,
        0.1,
        (1, 10),
        (5, 10),
    )
    assert fig2.curves[1].privacy.server_variance == 0.1
    assert [c.label for c in fig2.curves] == ["none", "graph_homomorphic", "random"]
    fig5 = load_preset("fig5")
    c = fig5.curves[1]
    assert (c.topology.P, c.data.K, c.training.L, c.training.mu, c.training.rho) == (
        1,
        1000,
        30,
        0.2,
        0.007,
    )
    assert fig5.repetitions == 100 and c.privacy.client_variance == 0.02
    assert [c.label for c in fig5.curves] == ["none", "noisy_models", "noisy_updates"]
    fig3 = load_preset("fig3")
    assert sorted({c.privacy.server_variance for c in fig3.curves[1:]}) == [
        0.001,
        0.01,
        0.1,
        1,
        2,
        10,
    ]
    assert sorted({c.training.mu for c in load_preset("fig4").curves}) == [0.1, 0.5, 1, 5]
