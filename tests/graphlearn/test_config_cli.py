"""`pgfl graphlearn run` config schema and command."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from pgfl.commands.graphlearn import app
from pgfl.graphlearn.config import load_config, parse_config
from pgfl.validation import ConfigError


@pytest.mark.parametrize(
    "raw, msg",
    [
        ({"modle": {}}, "unknown setting 'modle'; allowed: seed, data, model"),
        (
            {"model": {"gamma": 1}},
            "unknown setting model.gamma; allowed: alpha, beta, lambda, rho",
        ),
        ({"model": {"alpha": 0}}, r"model.alpha must be a real number in \(0, inf\); got 0"),
        ({"model": {"alpha": float("nan")}}, "model.alpha must be a real number"),
        ({"data": {"nodes": 1}}, r"data.nodes must be an integer in \[2, inf\]; got 1"),
        ({"data": {"clients": 2, "n_samples": [5, 6, 7]}}, "one entry per client"),
        ({"data": {"kind": "files"}}, "data.files is required when data.kind"),
        ({"privacy": {"delta": 2}}, "privacy.delta must be a real number in"),
        ({"algorithm": {"local_solver": "adam"}}, "algorithm.local_solver must be one of"),
    ],
)
def test_parse_config_rejects(raw, msg):
    with pytest.raises(ConfigError, match=msg):
        parse_config(raw)


def test_defaults_and_file_paths_relative_to_config(tmp_path):
    cfg = parse_config({})
    assert (cfg.params.alpha, cfg.params.rounds, cfg.params.local_steps, cfg.clients) == (
        2.0,
        8,
        25,
        5,
    )
    p = tmp_path / "c.toml"
    p.write_text('[data]\nkind = "files"\nfiles = ["a.csv"]\n', encoding="utf-8")
    assert load_config(p).files == (tmp_path / "a.csv",)
    p.write_text("[data\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(p)


def test_run_files_with_dp_and_bad_inputs(tmp_path):
    rng = np.random.default_rng(0)
    for i in range(2):
        np.savetxt(tmp_path / f"c{i}.csv", rng.standard_normal((30, 6)), delimiter=",")
    np.savetxt(tmp_path / "nan.csv", np.full((3, 6), np.nan), delimiter=",")
    (tmp_path / "ok.toml").write_text(
        '[data]\nkind = "files"\nfiles = ["c0.csv", "c1.csv"]\n[privacy]\nepsilon = 2.0\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["run", str(tmp_path / "ok.toml"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["privacy"]["mechanism"] == "statistic"  # the default: ε covers the graphs
    assert 2.0 * (1 - 1e-3) <= summary["privacy"]["epsilon"]["pld"] <= 2.0
    graphs = np.load(out / "graphs.npz")
    assert graphs["fedgl_local"].shape == (2, 15) and graphs["fedgl_consensus"].shape == (15,)
    (tmp_path / "bad.toml").write_text(
        '[data]\nkind = "files"\nfiles = ["c0.csv", "nan.csv"]\n', encoding="utf-8"
    )
    res = CliRunner().invoke(app, ["run", str(tmp_path / "bad.toml"), "--out", str(out)])
    assert isinstance(res.exception, ConfigError)
    assert "nan.csv' must contain only finite values" in str(res.exception)


def test_run_synthetic_summary_contract(tmp_path):
    (tmp_path / "s.toml").write_text(
        "seed = 1\n[data]\nn_samples = 40\nrepetitions = 1\nclients = 3\nnodes = 10\n",
        encoding="utf-8",
    )
    res = CliRunner().invoke(app, ["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert {c["label"] for c in s["curves"]} == {"igl", "fedavg", "fedgl_local", "fedgl_consensus"}
    assert all(len(c["x"]) == len(c["mcc"]) == len(c["relative_error"]) for c in s["curves"])
