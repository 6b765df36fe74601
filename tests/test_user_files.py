"""The user's own files: paths relative to the config file, and errors of the user's code.

A config file's ``model.source`` and ``data.source`` paths are relative to the file's
folder, whatever the current directory (and never a file of the same name there); a path
given on the command line is relative to the current directory. An exception raised by a
``model.source`` file is reported as the user's (file and line), exit code 1, never as a
bug in pgfl.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pgfl.experiments.build import build_network
from pgfl.experiments.loader import load_config, parse_config
from pgfl.experiments.presets import load_preset
from pgfl.validation import UserCodeError

pytest.importorskip("jax")

SRC = str(Path(__file__).resolve().parents[1] / "src")

MODEL = """import jax
import numpy as np


def logits(p, x):
    return x @ p["w"] + p["b"]


def make(features, classes, rng):
    params = {"w": rng.normal(0, 0.01, (features, classes)), "b": np.zeros(classes)}
    loss = lambda p, x, y: jax.nn.logsumexp(logits(p, x)) - logits(p, x)[y.astype(int)]
    return loss, params, logits


def init_params(features):
    raise ValueError(f"no parameters for {features} features")


def broken(features, classes, rng):
    return init_params(features)


def bad_loss(features, classes, rng):
    params = {"w": np.zeros((features, classes)), "b": np.zeros(classes)}

    def loss(p, x, y):
        return logits(p, x)[y.astype(int)] + undefined_name

    return loss, params, logits
"""
#: Lines of MODEL where init_params and bad_loss's loss raise.
INIT_LINE, LOSS_LINE = 16, 27

CONFIG = """name = "paths"
iterations = 3
plot = ["test_error"]
[topology]
kind = "ring"
P = 2
[data]
kind = "classification"
source = "csv:data.csv:y"
K = 2
rows = 60
test_size = 20
[training]
L = 2
[model]
kind = "custom"
source = "model.py:{function}"
"""


def pgfl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC}  # this tree's pgfl, whatever the cwd
    return subprocess.run(
        [sys.executable, "-m", "pgfl.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``exp/`` holds the configs, ``model.py`` and ``data.csv``; ``elsewhere/`` decoys."""
    exp, elsewhere = tmp_path / "exp", tmp_path / "elsewhere"
    exp.mkdir()
    elsewhere.mkdir()
    (exp / "model.py").write_text(MODEL, encoding="utf-8")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    rows = "".join(f"{a},{b},{c},{int(a > 0)}\n" for a, b, c in X)
    (exp / "data.csv").write_text("a,b,c,y\n" + rows, encoding="utf-8")
    for function in ("make", "broken", "bad_loss"):
        text = CONFIG.format(function=function)
        (exp / f"{function}.toml").write_text(text, encoding="utf-8")
    # files of the same names in the current directory, which must not be picked up
    (elsewhere / "model.py").write_text("raise RuntimeError('the decoy in the cwd')\n")
    (elsewhere / "data.csv").write_text("nothing\n1\n2\n", encoding="utf-8")
    return tmp_path


def test_config_paths_are_relative_to_the_config_file(project, monkeypatch):
    exp = project / "exp"
    monkeypatch.chdir(project / "elsewhere")
    cfg = load_config(Path("..") / "exp" / "make.toml")
    data, model = cfg.curves[0].data, cfg.curves[0].model
    assert data.source == f"csv:{exp / 'data.csv'}:y"
    assert model.source == f"{exp / 'model.py'}:make"
    assert cfg.to_dict()["model"]["source"] == model.source  # what config.json keeps
    # absolute paths stay as they are; a curve's own [data]/[model] table is resolved too
    raw = {
        "data": {"kind": "classification", "source": f"csv:{exp / 'data.csv'}:y", "K": 2},
        "training": {"L": 2},
        "curves": [{"label": "a"}, {"label": "b", "data": {"source": "avazu:train.csv"}}],
    }
    cfg = parse_config(raw, base="/somewhere/else")
    assert cfg.curves[0].data.source == f"csv:{exp / 'data.csv'}:y"
    assert cfg.curves[1].data.source == "avazu:/somewhere/else/train.csv"
    # shipped names are names, not paths
    assert load_preset("fig7", quick=True).curves[0].data.source == "fair"


def test_command_line_and_preset_paths_are_relative_to_the_current_directory(project, monkeypatch):
    monkeypatch.chdir(project / "exp")
    cfg = load_preset("fig7", quick=True, data={"source": "csv:data.csv:y", "rows": 60})
    assert cfg.curves[0].data.source == f"csv:{project / 'exp' / 'data.csv'}:y"
    # a mapping without a base: the current directory
    cfg = parse_config(load_config(project / "exp" / "make.toml").to_dict() | {
        "model": {"kind": "custom", "source": "model.py:make"}
    })  # fmt: skip
    assert cfg.curves[0].model.source == f"{project / 'exp' / 'model.py'}:make"


def test_a_config_in_a_subfolder_runs_from_another_directory(project):
    proc = pgfl("run", "../exp/make.toml", "--out", "out", cwd=project / "elsewhere")
    assert proc.returncode == 0, proc.stderr
    config = json.loads((project / "elsewhere" / "out" / "config.json").read_text())
    assert config["config"]["model"]["source"] == f"{project / 'exp' / 'model.py'}:make"
    assert config["config"]["data"]["source"] == f"csv:{project / 'exp' / 'data.csv'}:y"
    assert str(project / "exp" / "data.csv") in config["data_files"]
    # the other commands that read a config file resolve it the same way
    proc = pgfl("privacy", "config", "../exp/make.toml", cwd=project / "elsewhere")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("function", "needles"),
    [
        (
            "broken",
            [
                "raised ValueError: no parameters for 4 features",
                f"model.py:{INIT_LINE} in init_params",
            ],
        ),
        ("bad_loss", ["raised NameError: name 'undefined_name'", f"model.py:{LOSS_LINE} in loss"]),
    ],
)
def test_an_exception_in_the_users_model_is_reported_as_theirs(project, function, needles):
    proc = pgfl("run", f"../exp/{function}.toml", "--out", "out", cwd=project / "elsewhere")
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: model.source {project / 'exp' / 'model.py'} raised"), line
    for needle in needles:
        assert needle in line, line
    assert "bug in pgfl" not in line and "internal error" not in line


def test_the_users_import_and_syntax_errors_name_the_line(project):
    exp = project / "exp"
    (exp / "syntax.py").write_text("import numpy\n\ndef make(:\n", encoding="utf-8")
    (exp / "imports.py").write_text("import numpy\nimport no_such_module_here\n")
    for name, needle in (
        ("syntax", "raised SyntaxError: invalid syntax (syntax.py:3)"),
        ("imports", "raised ModuleNotFoundError: No module named 'no_such_module_here' "
         "(imports.py:2 in <module>)"),
    ):  # fmt: skip
        cfg = parse_config({**load_config(exp / "make.toml").to_dict(), "model": {
            "kind": "custom", "source": f"{name}.py:make"}}, base=exp)  # fmt: skip
        with pytest.raises(UserCodeError) as info:
            build_network(cfg.curves[0], 0)
        assert needle in str(info.value), str(info.value)
