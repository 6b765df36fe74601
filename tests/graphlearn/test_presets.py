"""Presets: summary contract, files, determinism."""

import json

import pytest

from pgfl.graphlearn.presets import PRESETS

LABELS = {"igl", "fedavg", "fedgl_local", "fedgl_consensus"}


def check_contract(summary, out):
    assert (out / "summary.json").is_file() and (out / "curves.csv").is_file()
    assert list(out.glob("*.png"))
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["experiment"] == summary["experiment"]
    for c in on_disk["curves"]:
        assert len(c["x"]) == len(c["mcc"]) == len(c["relative_error"])
        if c["label"] == "fedgl_local_dp":
            assert "epsilon" in c
    if on_disk["experiment"] not in ("graphlearn-digits", "graphlearn-sensitivity"):
        assert LABELS <= {c["label"] for c in on_disk["curves"]}


def test_weights_preset_quick(tmp_path):
    s = PRESETS["graphlearn-weights"](True, tmp_path, 0)
    check_contract(s, tmp_path)
    assert len(s["gamma_table"]["data_size"]["gamma"]) == 5
    again = PRESETS["graphlearn-weights"](True, tmp_path / "again", 0)
    assert again["gamma_table"] == s["gamma_table"]  # same seed, same result


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_quick(name, tmp_path):
    s = PRESETS[name](True, tmp_path, 1)
    check_contract(s, tmp_path)
    if name == "graphlearn-dp":
        for label in ("fedgl_local_dp", "fedgl_local_dp_statistic"):  # both, at equal ε̄
            eps = sorted(c["epsilon"] for c in s["curves"] if c["label"] == label)
            assert eps == [0.3, 1.0]
        assert set(s["mcc_at_equal_epsilon"]["1"]) >= {"last_step", "statistic"}
    if name == "graphlearn-digits":
        assert {"igl_c1", "fedavg", "fedgl", "fedgl_dp@0.5"} <= set(s["table"])
