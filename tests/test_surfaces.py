"""Consistent command-line surfaces: options every run command shares, what the commands
print and leave behind, and how they treat settings and data that do not fit.

`pgfl run --seed`, `pgfl reproduce --list` and `--print-config` (graph-learning presets
too), `pgfl graphlearn run`'s default folder, the backend named in `run.log` and
`summary.json`, `partial/` removed after a finished run, a narrow summary table, the
fig7 split fitted to a small CSV, and settings without effect as warnings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from pgfl.cli import main
from pgfl.commands import printing
from pgfl.experiments.frontier import frontier_configs, run_frontier
from pgfl.experiments.loader import parse_config
from pgfl.param import SettingWarning
from pgfl.validation import ConfigError

TINY = """name = "tiny"
iterations = 12
repetitions = 2
[topology]
kind = "ring"
P = 3
[data]
K = 5
N = 6
[training]
L = 2
"""

RAW = {
    "name": "tiny",
    "iterations": 12,
    "repetitions": 2,
    "topology": {"kind": "ring", "P": 3},
    "data": {"K": 5, "N": 6},
    "training": {"L": 2},
    "privacy": {"server_variance": 0.05},
    "curves": [
        {"label": "none"},
        {"label": "gh", "privacy": {"server_noise": "graph_homomorphic"}},
        {"label": "small_L", "training": {"L": 1}},
    ],
}


def pgfl(*args: str, cwd: Path | None = None, columns: int | None = None):
    env = dict(os.environ)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "pgfl.cli", *args],
        capture_output=True, text=True, cwd=cwd, timeout=300, env=env,
    )  # fmt: skip


def cli_json(capsys, *args: str) -> dict:
    """``pgfl ARGS --json`` in this process: the summary it prints."""
    capsys.readouterr()
    main([*args, "--json"])
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------ 4. graphlearn run: --out default
def test_graphlearn_run_writes_into_runs_name_by_default(tmp_path, monkeypatch, capsys):
    (tmp_path / "small-graphs.toml").write_text(
        "[data]\nnodes = 8\nclients = 2\nn_samples = 30\nrepetitions = 1\n"
        "[algorithm]\nrounds = 2\nlocal_steps = 5\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    main(["graphlearn", "run", "small-graphs.toml"])
    assert (tmp_path / "runs" / "small-graphs" / "summary.json").is_file()
    assert not (tmp_path / "results").exists()


# ----------------------------------------------------------- 7. the summary table
def _printed(summary: dict, width: int = 200) -> str:
    console = Console(width=width, file=None, record=True, force_terminal=False)
    old = printing.out
    printing.out = console
    try:
        with console.capture() as captured:
            printing.print_summary(summary)
    finally:
        printing.out = old
    return captured.get()


def _curve(label, rng, *, test=True, msd=True, P1=False, eps=True, target=None):
    c = {
        "label": label,
        "centroid_msd_db": float(rng.uniform(-50, 30)) if msd else None,
        "individual_msd_db": float(rng.uniform(-50, 30)) if msd else None,
        "disagreement_db": float("-inf") if P1 else float(rng.uniform(-60, 70)),
        "diverged": False,
        "diverged_at": None,
        "diverged_repetitions": 0,
    }
    if test:
        error = float(rng.uniform(0.01, 0.99))
        c.update(test_error=error, test_accuracy=1 - error,
                 test_log_loss=float(rng.uniform(0.1, 3)))  # fmt: skip
    if eps:
        c.update(epsilon={"paper": float(10 ** rng.uniform(-1, 9)),
                          "pld": float(10 ** rng.uniform(-1, 9))},
                 delta=1e-5, noise_variance=0.1)  # fmt: skip
    if target is not None:
        c["target_epsilon"] = target
    return c


WIDTH = 100  # the widest the table of a shipped preset may be


def _summaries():
    rng = np.random.default_rng(0)
    long = "graph_homomorphic_eps"  # the longest label of a shipped preset
    return {
        "fig7-like": {"experiment": "fig7", "curves": [
            _curve(n, rng, eps=n != "none") for n in ("none", "graph_homomorphic", "random")]},
        "digits-like": {"experiment": "digits-mlp", "curves": [
            _curve(n, rng, msd=False, target=2000.0 if n.endswith("_eps") else None)
            for n in ("none", "graph_homomorphic", "hybrid", long, "random_eps")]},
        "single-unit": {"experiment": "fl", "curves": [
            _curve(n, rng, P1=True, test=False) for n in ("none", "noisy_models")]},
        "regression": {"experiment": "fig2", "curves": [
            _curve(n, rng, test=False) for n in ("none", "graph_homomorphic", "random")]},
    }  # fmt: skip


@pytest.mark.parametrize("name", ["fig7-like", "digits-like", "single-unit", "regression"])
def test_the_summary_table_is_narrow_and_shows_accuracy_to_a_tenth_of_a_point(name):
    summary = _summaries()[name]
    text = _printed(summary)
    lines = text.splitlines()
    assert max(map(len, lines)) <= WIDTH, "\n" + text
    header = next(line for line in lines if "curve" in line)
    assert header.replace("dB", "db") == header.lower()  # lower-case headers (units aside)
    assert "diverged" not in header  # told below the table instead
    for c in summary["curves"]:
        row = next(line for line in lines if line.startswith(f"│ {c['label']} "))
        cells = [cell.strip() for cell in row.strip("│").split("│")]
        if "test_accuracy" in c:
            assert f"{100 * c['test_accuracy']:.1f}" in cells
    if name == "single-unit":  # P = 1: no disagreement column, no -inf
        assert "disagr" not in header and "inf" not in text
    if name == "digits-like":  # no MSD without a closed-form optimum
        assert "centroid" not in header


def test_accuracies_a_tenth_of_a_point_apart_print_differently():
    rng = np.random.default_rng(1)
    a, b = _curve("a", rng), _curve("b", rng)
    a["test_accuracy"], b["test_accuracy"] = 0.9120, 0.9131
    text = _printed({"experiment": "x", "curves": [a, b]})
    assert "91.2" in text and "91.3" in text


def test_a_diverged_curve_is_told_below_the_table():
    rng = np.random.default_rng(2)
    bad = _curve("blowup", rng, test=False, eps=False)
    bad.update(centroid_msd_db=None, individual_msd_db=None, disagreement_db=None,
               diverged=True, diverged_at=7, diverged_repetitions=2)  # fmt: skip
    text = _printed({"experiment": "x", "repetitions": 2,
                     "curves": [_curve("ok", rng, test=False, eps=False), bad]})  # fmt: skip
    assert "curve blowup diverged at iteration 7" in text


def test_the_frontier_tables_are_narrow(tmp_path):
    configs = frontier_configs(
        setups=("regression", "logistic"),
        iterations=(2,),
        epsilons=(0.5, 1.0, 2.0, 5.0, 10.0, 50.0),
        repetitions=1,
    )
    summary = run_frontier(tmp_path, configs=configs)  # fmt: skip
    text = _printed(summary)
    assert max(map(len, text.splitlines())) <= WIDTH, "\n" + text
    assert "test error %" in text  # the logistic set-up's second table
    c = next(c for c in summary["curves"] if c["setup"] == "logistic")
    shown = [f"{100 * e:.1f}" for e in c["test_error"] if e is not None]
    row = next(line for line in text.splitlines()[::-1] if line.startswith(f"│ {c['label']} "))
    assert all(s in row for s in shown)


# ------------------------------------------------- 9. settings without effect warn
NO_SERVER_NOISE = {
    "name": "quiet",
    "iterations": 8,
    "topology": {"kind": "ring", "P": 3},
    "data": {"K": 5, "N": 6},
    "training": {"L": 2},
    "privacy": {"server_variance": 0.1},
    "curves": [{"label": "a"}, {"label": "b", "training": {"mu": 0.3}}],
}


def test_a_setting_without_effect_warns_and_the_run_goes_on():
    with pytest.warns(SettingWarning) as caught:
        cfg = parse_config(NO_SERVER_NOISE)
    (w,) = [w for w in caught if w.category is SettingWarning]
    message = str(w.message)
    assert message.startswith("privacy.server_variance = 0.1 has no effect: no curve has ")
    assert 'privacy.server_noise other than "none"' in message
    assert [c.label for c in cfg.curves] == ["a", "b"]


def test_a_per_curve_setting_without_effect_names_the_curve():
    raw = {**NO_SERVER_NOISE, "privacy": {}}
    raw["curves"] = [{"label": "a"}, {"label": "b", "privacy": {"dropout": 0.2}}]
    with pytest.warns(SettingWarning, match=r"^curves\[1\]\.privacy\.dropout = 0\.2 has no "
                      r"effect: curve 'b' does not have privacy\.client_noise"):  # fmt: skip
        parse_config(raw)


def test_a_wrong_value_is_still_an_error_where_the_setting_has_no_effect():
    raw = {**NO_SERVER_NOISE, "privacy": {"server_variance": -1.0}}
    with pytest.raises(ConfigError, match=r"^privacy.server_variance must be"):
        parse_config(raw)


def test_a_default_value_never_warns():
    raw = {**NO_SERVER_NOISE, "privacy": {"server_distribution": "laplace"}}
    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingWarning)
        parse_config(raw)


def test_the_cli_prints_a_setting_without_effect_as_one_warning_line(tmp_path):
    text = TINY + "[privacy]\nserver_variance = 0.1\n"
    (tmp_path / "q.toml").write_text(text, encoding="utf-8")
    result = pgfl("run", "q.toml", "--out", "o", "--workers", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert (
        "warning: privacy.server_variance = 0.1 has no effect: no curve has "
        'privacy.server_noise other than "none"'
    ) in "\n".join(lines)
    assert any(line.startswith("warning: --workers = 2 has no effect") for line in lines)
    assert all(line.startswith("warning: ") for line in lines)
    assert (tmp_path / "o" / "summary.json").is_file()
