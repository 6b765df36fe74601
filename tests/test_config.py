import math
import os
import re
import tracemalloc

import pytest

from pgfl.experiments.build import curve_mechanisms
from pgfl.experiments.loader import load_config, parse_config, validate_experiment
from pgfl.experiments.presets import load_preset, preset_names
from pgfl.param import SettingWarning
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
    assert math.isclose(curve_mechanisms(b)[1].std, math.sqrt(0.1))


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


# ------------------------------------------------- rules across settings, checked at load
SECAGG = {"client_noise": "secure_aggregation"}
FIXED_POINT = {"secagg_modulus_bits": 16, "secagg_frac_bits": 8, "secagg_clip": 4.0}
GH = {"server_noise": "graph_homomorphic", "server_variance": 0.1}


def matrix(P, rows, **privacy):
    return base(topology={"kind": "matrix", "P": P, "matrix": rows}, privacy=privacy)


def topology(**kw):
    return base(topology={"kind": "ring", "P": 4, **kw})


def privacy(**kw):
    return base(privacy=kw)


def logistic(**kw):
    return base(data={"K": 10, "N": 8, "kind": "logistic"}, **kw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        # the [quick] table is checked whether or not --quick is given
        (base(quick={"iterations": 5, "bogus": 1}), r"unknown setting quick.bogus; allowed"),
        (
            base(quick={"iterations": 0}),
            r"quick.iterations must be an integer in \[1, inf\]; got 0",
        ),
        (base(quick=[5]), r"quick must be a table of settings; got \[5\]"),
        # empty panels
        (base(plot=["test_error"]), "plot 'test_error' needs a test set"),
        (logistic(plot="server_test_error_mean"), "plot 'server_test_error_mean' needs a test set"),
        (
            base(topology={"kind": "complete", "P": 1}, plot=["disagreement_db"]),
            "plot 'disagreement_db' needs topology.P > 1",
        ),
        # the server graph, in one line naming topology.matrix / topology.edges
        (matrix(2, [[0.5, 0.5], [1.0]]), r"^topology.matrix must be a 2 x 2 table .*ragged"),
        (matrix(2, [[0.5, "x"], [0.5, 0.5]]), r"^topology.matrix .*got 'x' at row 0, column 1"),
        (matrix(3, [[0.5, 0.5], [0.5, 0.5]]), r"^topology.matrix must be a 3 x 3 .*got 2 rows"),
        (matrix(2, [[0.6, 0.5], [0.5, 0.5]]), r"^topology.matrix: .* must be doubly stochastic"),
        (matrix(2, [[0.6, 0.4], [0.3, 0.7]]), r"^topology.matrix: .* must be symmetric"),
        (matrix(2, [[0, 1], [1, 0]]), r"^topology.matrix: combination matrix must be connected"),
        (matrix(2, [[0.7, 0.3], [0.3, 0.7]], **GH), None),
        (matrix(3, [[0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]]), None),
        (
            matrix(3, [[0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]], **GH),
            r"^topology.matrix needs a_pp > 0 for graph-homomorphic noise .* at p = 0",
        ),
        (
            topology(kind="edges", P=3, edges=[[0, 1], [1, 3]]),
            r"topology.edges\[1\] must be an integer in \[0, topology.P-1=2\]; got 3",
        ),
        (
            topology(kind="edges", edges=[[0, 1], [2, 3]]),
            "topology.edges must connect all topology.P=4 servers; got 2 components",
        ),
        (
            topology(kind="grid", P=6, rows=7),
            r"topology.rows must be .* \[1, topology.P=6\]; got 7",
        ),
        (topology(kind="grid", P=6, rows=5), "topology.rows must divide topology.P=6; got 5"),
        # secure aggregation, under its privacy.secagg_* names, with ranges from L
        (
            privacy(**SECAGG, secagg_threshold=4),
            r"privacy.secagg_threshold must be an integer in \[1, neighbourhood size=3\]; got 4",
        ),
        (
            privacy(**SECAGG, secagg_neighbours=3),
            r"privacy.secagg_neighbours must be an even integer in \[2, inf\]; got 3",
        ),
        (
            privacy(**SECAGG, secagg_modulus_bits=32, secagg_frac_bits=31),
            r"privacy.secagg_frac_bits must be an integer in "
            r"\[0, privacy.secagg_modulus_bits-2=30\]; got 31",
        ),
        (privacy(**SECAGG, **FIXED_POINT), None),  # 3 clients fit in 16 bits
        (
            base(data={"K": 40, "N": 8}, training={"L": 32}, privacy={**SECAGG, **FIXED_POINT}),
            r"privacy.secagg_modulus_bits must be an integer in \[1\+bit_length\(training.L·"
            r"rint\(privacy.secagg_clip·2\^privacy.secagg_frac_bits\)\)=17, 64\]; got 16",
        ),
        (privacy(**SECAGG, secagg_protocol="magic"), "privacy.secagg_protocol must be one of"),
        # other rules of one curve
        (privacy(server_noise="random"), "'random' needs privacy.server_variance > 0"),
        (privacy(client_noise="gaussian"), "'gaussian' needs privacy.client_variance > 0"),
        (privacy(target_epsilon=5.0), "privacy.target_epsilon needs a privatized link"),
        (
            privacy(target_epsilon=5.0, server_noise="random"),
            "needs a gradient bound: set training.clip_norm",
        ),
        (
            base(topology={"kind": "complete", "P": 1}, privacy=GH),
            "'graph_homomorphic' needs topology.P > 1",
        ),
        (
            logistic(training={"L": 3, "rho": 0}),
            r"training.rho must be a real number in \(0, inf\) for data.kind = 'logistic'",
        ),
        (base(name="runs/x"), r"name must be a non-empty string without '/', '\\\\'; got 'runs/x'"),
        (
            base(training={"L": 3, "clip_norm": -1}),
            r"training.clip_norm must be a real number in \(0, inf\]; got -1",
        ),
    ],
)
def test_rules_across_settings_are_checked_at_load(raw, message):
    if message is None:
        parse_config(raw)  # the valid neighbour of the cases around it
        return
    for quick in (False, True):
        with pytest.raises(ConfigError, match=message):
            parse_config(raw, quick=quick)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            privacy(dropout=0.1),
            r"^privacy.dropout = 0.1 has no effect: no curve has "
            r"privacy.client_noise a scheme that runs secure aggregation \(`secure_aggregation`, "
            r"distributed DP's\)$",
        ),
        (
            base(
                curves=[
                    {"label": "s", "privacy": SECAGG},
                    {"label": "b", "privacy": {"dropout": 0.1}},
                ]
            ),
            r"^curves\[1\].privacy.dropout = 0.1 has no effect: curve 'b' does not have "
            r"privacy.client_noise a scheme that runs secure aggregation \(`secure_aggregation`, "
            r"distributed DP's\)$",
        ),
        (topology(probability=0.9), "topology.probability = 0.9 has no effect"),
        (base(data={"K": 10, "N": 8, "test_size": 50}), "data.test_size = 50 has no effect"),
        (base(data={"K": 10, "kind": "classification", "M": 5}), "data.M = 5 has no effect"),
        (privacy(secagg_threshold=2), "privacy.secagg_threshold = 2 has no effect"),
        (privacy(delta=1e-6), "privacy.delta = 1e-06 has no effect"),
        (privacy(accountants=["rdp"]), r"privacy.accountants = \['rdp'\] has no effect"),
        (privacy(server_distribution="gaussian"), "privacy.server_distribution = 'gaussian'"),
    ],
)
def test_settings_without_effect_warn_and_are_ignored(raw, message):
    """A setting given where it has no effect: a one-line SettingWarning, the config loads."""
    for quick in (False, True):
        with pytest.warns(SettingWarning, match=message) as caught:
            cfg = parse_config(raw, quick=quick)
        assert all("\n" not in str(w.message) for w in caught)
        assert cfg.curves


def test_a_shared_setting_used_by_some_curve_and_explicit_defaults_are_accepted():
    raw = base(
        privacy={"dropout": 0.2, "client_variance": 0.0, "server_distribution": "laplace"},
        curves=[{"label": "plain"}, {"label": "secagg", "privacy": SECAGG}],
    )
    cfg = parse_config(raw)
    assert [c.privacy.dropout for c in cfg.curves] == [0.2, 0.2]
    assert curve_mechanisms(cfg.curves[1])[0].dropout == 0.2


def test_quick_applies_only_with_the_flag():
    raw = base(iterations=50, repetitions=3, quick={"iterations": 5})
    assert (parse_config(raw).iterations, parse_config(raw).repetitions) == (50, 3)
    assert (
        parse_config(raw, quick=True).iterations,
        parse_config(raw, quick=True).repetitions,
    ) == (5, 3)


def test_lists_become_tuples_and_numbers_keep_their_meaning():
    cfg = parse_config(
        base(data={"K": 10, "N": [4, 9]}, training={"L": 3, "epochs": [1, 2], "mu": 1})
    )
    c = cfg.curves[0]
    assert c.data.N == (4, 9) and c.training.epochs == (1, 2) and c.training.mu == 1.0
    assert cfg.to_dict()["data"]["N"] == [4, 9]  # config.json keeps the file's form
    hash(c.structure())


def test_unreadable_or_non_utf8_config_files_are_named(tmp_path):
    latin = tmp_path / "latin.toml"
    latin.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match=f"config file {re.escape(str(latin))} is not UTF-8 text"):
        load_config(latin)
    with pytest.raises(ConfigError, match=f"config file {re.escape(str(tmp_path))} is not a file"):
        load_config(tmp_path)
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.toml"
        locked.write_text('name = "x"\n')
        locked.chmod(0)
        with pytest.raises(
            ConfigError, match=f"config file {re.escape(str(locked))} cannot be read"
        ):
            load_config(locked)


@pytest.mark.parametrize(
    ("over", "culprit", "term"),
    [
        ({"iterations": 10**11}, "iterations=100000000000", "results [T, curves]"),
        ({"repetitions": 10**11}, "repetitions=100000000000", "round [R, P, L, E, B, M]"),
        ({"data": {"K": 10, "N": 10**9}}, "data.N=1000000000", "data [P, K, N, M+1]"),
        ({"data": {"K": 10, "N": 8, "M": 10**6}}, "data.M=1000000", "data [P, K, N, M+1]"),
        ({"topology": {"kind": "ring", "P": 10**7}}, "topology.P=10000000", None),
    ],
)
def test_sizes_that_cannot_fit_are_refused_at_load_without_allocating(over, culprit, term):
    raw = base(**over)
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as err:
            parse_config(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(err.value)
    assert peak < 50 * 2**20  # refused from the sizes alone
    assert message.startswith(f"{culprit} needs about ")
    size = r"[\d.]+ [KMGTPE]?i?B"
    assert re.search(
        rf"needs about {size} of memory \(.+\); this machine has {size} available$",
        message,
    )
    if term is not None:
        assert f"({term})" in message


def test_validate_experiment_compares_the_estimate_with_what_is_available():
    cfg = parse_config(base(iterations=2000, repetitions=8))
    validate_experiment(cfg, available=2**40)
    with pytest.raises(ConfigError, match=r"needs about .* this machine has 1 KiB available"):
        validate_experiment(cfg, available=1024)


def test_quick_curves_keeps_the_named_curves_in_the_files_order():
    raw = {"name": "q", "iterations": 9,
           "quick": {"iterations": 3, "curves": ["c", "a"]},
           "curves": [{"label": "a"}, {"label": "b"}, {"label": "c"}]}  # fmt: skip
    assert [c.label for c in parse_config(dict(raw), quick=True).curves] == ["a", "c"]
    full = parse_config(dict(raw))
    assert [c.label for c in full.curves] == ["a", "b", "c"] and full.iterations == 9
    with pytest.raises(ConfigError, match="quick.curves names 'd', which no curve has"):
        parse_config({**raw, "quick": {"curves": ["d"]}}, quick=True)
    with pytest.raises(ConfigError, match="quick.curves must name at least one curve"):
        parse_config({**raw, "quick": {"curves": []}})
