import json
import os
import subprocess
import sys

import pytest


def pgfl(*args, cwd=None, columns=None):
    env = dict(os.environ)
    if columns is not None:  # what a terminal of that width would announce
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "pgfl.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env=env,
    )


GOOD = """name = "cli"
iterations = 20
[topology]
kind = "ring"
P = 3
[data]
K = 5
N = 6
[training]
L = 2
"""


@pytest.mark.parametrize(
    ("content", "args", "needle"),
    [
        (None, ["run", "missing.toml"], "config file not found: missing.toml"),
        (GOOD + "bogus = 1\n", ["run", "{cfg}"], "unknown setting"),
        (
            GOOD.replace("L = 2", "L = 9"),
            ["run", "{cfg}"],
            "training.L must be an integer in [1, data.K=5]; got 9",
        ),
        (GOOD.replace("L = 2", 'L = "two"'), ["run", "{cfg}"], "training.L must be an integer"),
        (
            GOOD.replace("N = 6", "N = -6"),
            ["run", "{cfg}"],
            "data.N must be an integer in [1, inf]; got -6",
        ),
        (
            GOOD.replace(
                'kind = "ring"',
                'kind = "matrix"\nmatrix = [[0.5, 0.5, 0], [0.4, 0.5, 0.1], [0.1, 0, 0.9]]',
            ),
            ["run", "{cfg}"],
            "combination matrix must be symmetric",
        ),
        (None, ["reproduce", "fig99"], "preset must be one of"),
        (None, ["reproduce", "fig2", "--bogus"], "No such option"),
        (None, ["bench", "--scale", "huge"], "--scale must be one of"),
    ],
)
def test_bad_input_gives_one_line_and_exit_2(tmp_path, content, args, needle):
    cfg = tmp_path / "c.toml"
    if content is not None:
        cfg.write_text(content)
    result = pgfl(*[a.replace("{cfg}", str(cfg)) for a in args], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.stderr


def test_run_writes_results_and_json(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(GOOD)
    result = pgfl("run", str(cfg), "--out", str(tmp_path / "o"), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["experiment"] == "cli" and summary["curves"][0]["label"] == "cli"
    for f in ("summary.json", "curves.csv", "figure.png", "config.json"):
        assert (tmp_path / "o" / f).is_file()


def test_reproduce_list_and_print_config():
    listed = pgfl("reproduce", "--list")
    assert listed.returncode == 0 and "fig2" in listed.stdout.split()
    text = pgfl("reproduce", "fig5", "--print-config").stdout
    assert 'label = "noisy_updates"' in text


def test_privacy_config_reports_epsilon_per_curve(tmp_path):
    result = pgfl("privacy", "config", "fig2", "--quick", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["curves"]
    assert report["none"] == {}
    assert report["graph_homomorphic"]["epsilon"]["pld"] > 0
    bad = pgfl("privacy", "config", str(tmp_path / "missing.toml"))
    assert bad.returncode == 2 and "config file not found" in bad.stderr


def test_reproduce_a_graph_learning_preset_prints_the_sweep(tmp_path):
    """The sweep's title and the results folder are plain lines: no wrapping at any width."""
    folder = tmp_path / ("a-long-folder-name-" * 8) / "w"
    result = pgfl("reproduce", "graphlearn-weights", "--quick", "--out", str(folder), columns=40)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "graphlearn-weights: MCC / relative error per" in lines[0]
    assert f"results in {folder}: " in result.stdout
    assert "fedgl_local" in result.stdout
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert {c["label"] for c in summary["curves"]} >= {"igl", "fedavg", "fedgl_local"}


SINGLE_UNIT = GOOD.replace("P = 3", "P = 1")


def test_a_single_unit_shows_no_disagreement_column(tmp_path):
    """P = 1: the disagreement is exactly 0 (-inf dB) in every curve: no column for it."""
    (tmp_path / "one.toml").write_text(SINGLE_UNIT, encoding="utf-8")
    result = pgfl("run", "one.toml", "--out", "o", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "curve" in line)
    assert "centroid" in header and "disagr" not in header
    row = next(line for line in lines if line.startswith("│ cli "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[0] == "cli" and len(cells) == len(header.strip("┃").split("┃")), cells
    assert "inf" not in result.stdout
    on_disk = json.loads((tmp_path / "o" / "summary.json").read_text(encoding="utf-8"))
    assert on_disk["curves"][0]["disagreement_db"] == "-inf"


@pytest.mark.parametrize("command", [["run"], ["privacy", "config"]])
def test_quick_help_names_the_quick_table(command):
    result = pgfl(*command, "--help", columns=200)
    assert result.returncode == 0, result.stderr
    assert "[quick] table" in result.stdout
