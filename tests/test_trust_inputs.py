"""Inputs a user should be able to trust: one line naming the setting they gave, a CSV
typo that is not silently hashed, the graph-learning ε range where the table declares it,
and a memory estimate that brackets the measured peak (from a user report)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pgfl
from pgfl.cli import main
from pgfl.data.datasets import SHIPPED, classification_federated_data, load_frame
from pgfl.experiments.loader import parse_config
from pgfl.experiments.memory import check_experiment_fits
from pgfl.graphlearn.config import parse_config as parse_graphlearn
from pgfl.graphlearn.params import PARAMS as GRAPHLEARN_PARAMS
from pgfl.params import PARAMS
from pgfl.privacy.secagg import SecAggConfig
from pgfl.resources import format_bytes
from pgfl.validation import ConfigError


def _cli_error(capsys, args: list[str]) -> str:
    """The one stderr line of a CLI call that must exit 2."""
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert "Traceback" not in captured.err
    return lines[0].removeprefix("error: ")


def _files(folder: Path) -> list[Path]:
    return sorted(p.relative_to(folder) for p in folder.rglob("*"))


# --------------------------------------------------- secure aggregation: name what was set
def _largest_frac_bits(L: int, clip: float, k: int) -> int:
    """Largest f whose L fixed-point codes rint(clip·2^f) sum below 2^(k−1), by hand."""
    f = -1
    while f < 62 and L * int(np.rint(clip * 2.0 ** (f + 1))) < 2 ** (k - 1):
        f += 1
    return f


def _frac_bits_message(f: int) -> str:
    return rf"^privacy\.secagg_frac_bits must be an integer in \[0, [^\]]*=(\d+)\]; got {f}$"


def test_frac_bits_alone_too_large_for_the_default_modulus_names_frac_bits():
    d = SecAggConfig()  # defaults: k bits, clip; one client when no L is known
    limit = _largest_frac_bits(1, d.clip, d.modulus_bits)
    assert limit < 60 <= d.modulus_bits - 2  # 60 is inside frac_bits' static range
    with pytest.raises(ConfigError) as err:
        SecAggConfig(frac_bits=60)
    match = re.match(_frac_bits_message(60), str(err.value))
    assert match, str(err.value)
    assert int(match.group(1)) == limit
    assert SecAggConfig(frac_bits=limit).frac_bits == limit
    with pytest.raises(ConfigError, match=_frac_bits_message(limit + 1)):
        SecAggConfig(frac_bits=limit + 1)


def test_clip_alone_too_large_names_clip():
    with pytest.raises(ConfigError, match=r"^privacy\.secagg_clip must be a real number in "):
        SecAggConfig(clip=1e30)


def test_when_both_are_set_the_one_whose_own_range_is_violated_is_named():
    # f ≤ k − 2 is frac_bits' own range
    with pytest.raises(ConfigError, match=r"^privacy\.secagg_frac_bits .*-2=30\]; got 31$"):
        SecAggConfig(modulus_bits=32, frac_bits=31)
    # the capacity of the sum is the modulus's own range
    with pytest.raises(ConfigError, match=r"^privacy\.secagg_modulus_bits .*; got 8$"):
        SecAggConfig(modulus_bits=8, frac_bits=6, clip=4.0)


SECAGG_TOML = """name = "s"
iterations = 2
repetitions = 1
[topology]
kind = "ring"
P = 2
[data]
K = 6
N = 5
[training]
L = {L}
[privacy]
client_noise = "secure_aggregation"
{privacy}
"""


def test_pgfl_run_names_frac_bits_in_one_line_and_writes_nothing(tmp_path, capsys):
    L = 4
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(SECAGG_TOML.format(L=L, privacy="secagg_frac_bits = 60"), encoding="utf-8")
    before = _files(tmp_path)
    message = _cli_error(capsys, ["run", str(cfg), "--out", str(tmp_path / "out")])
    assert _files(tmp_path) == before
    match = re.match(_frac_bits_message(60), message)
    assert match, message
    clip = PARAMS["privacy.secagg_clip"].default
    k = PARAMS["privacy.secagg_modulus_bits"].default
    assert int(match.group(1)) == _largest_frac_bits(L, clip, k)


def test_pgfl_run_names_the_modulus_when_the_user_set_it(tmp_path, capsys):
    cfg = tmp_path / "cfg.toml"
    text = "secagg_modulus_bits = 16\nsecagg_frac_bits = 12\nsecagg_clip = 4.0"
    cfg.write_text(SECAGG_TOML.format(L=4, privacy=text), encoding="utf-8")
    message = _cli_error(capsys, ["run", str(cfg), "--out", str(tmp_path / "out")])
    assert message.startswith("privacy.secagg_modulus_bits must be an integer in ")
    assert message.endswith("got 16")


# ------------------------------------------------------ a CSV typo is not a category
def _write_csv(path: Path, rows: int, column: list[str] | None = None) -> None:
    """Numeric columns x1, x2, x3 and a label y; x3's cells replaced by ``column``."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((rows, 3)).round(3)
    x3 = [f"{v}" for v in x[:, 2]] if column is None else column
    lines = ["x1,x2,x3,y"] + [
        f"{a},{b},{c},{i % 2}" for i, (a, b, c) in enumerate(zip(x[:, 0], x[:, 1], x3, strict=True))
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _numbers_with(rows: int, words: dict[int, str]) -> list[str]:
    cells = [f"{v:.2f}" for v in np.linspace(-1, 1, rows)]
    for i, word in words.items():
        cells[i] = word
    return cells


def test_one_word_in_a_numeric_csv_column_is_an_error_naming_file_column_row_value(tmp_path):
    path = tmp_path / "data.csv"
    row = 57  # 0-based data row; the file's line is row + 2 (the header is line 1)
    _write_csv(path, 400, _numbers_with(400, {row: "abc"}))
    with pytest.raises(ConfigError) as err:
        classification_federated_data(f"csv:{path}:y", P=2, K=2, rows=100, test_size=20)
    message = str(err.value)
    assert "\n" not in message
    for needle in ("'x3'", str(path), f"line {row + 2}", f"data row {row}", "'abc'"):
        assert needle in message, (needle, message)


def test_a_mostly_text_column_is_still_hashed_and_missing_cells_as_before(tmp_path):
    path = tmp_path / "data.csv"
    words = {i: f"w{i % 7}" for i in range(0, 400, 2)}  # half the cells are words
    _write_csv(path, 400, _numbers_with(400, words))
    fd = classification_federated_data(
        f"csv:{path}:y", P=2, K=2, rows=100, test_size=20, hash_dim=8
    )
    assert fd.shape[-1] == 2 + 8 + 1  # x1, x2; x3 hashed; the intercept
    # more than 1% words: a category, not a typo
    many = {i: "unknown" for i in range(0, 400, 40)}  # 10 of 400 = 2.5%
    _write_csv(path, 400, _numbers_with(400, many))
    fd = classification_federated_data(
        f"csv:{path}:y", P=2, K=2, rows=100, test_size=20, hash_dim=8
    )
    assert fd.shape[-1] == 2 + 8 + 1
    # an empty cell in a numeric column is still the missing-value error
    _write_csv(path, 400, _numbers_with(400, {30: ""}))
    with pytest.raises(ConfigError, match=r"feature column 'x3' has NaN at data row 30"):
        classification_federated_data(f"csv:{path}:y", P=2, K=2, rows=380, test_size=20)
    # an empty cell does not count as a word: the word is named
    _write_csv(path, 400, _numbers_with(400, {30: "", 90: "abc"}))
    with pytest.raises(ConfigError, match=r"'x3' .*data row 90 .*'abc'"):
        classification_federated_data(f"csv:{path}:y", P=2, K=2, rows=100, test_size=20)


def test_pgfl_run_with_a_csv_typo_is_one_line_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "data.csv"
    _write_csv(path, 300, _numbers_with(300, {12: "1.2.3"}))
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(
        'name = "c"\niterations = 2\n[topology]\nkind = "ring"\nP = 2\n'
        f'[data]\nkind = "classification"\nsource = "csv:{path}:y"\nK = 2\nrows = 100\n'
        "test_size = 20\n[training]\nL = 2\n",
        encoding="utf-8",
    )
    before = _files(tmp_path)
    message = _cli_error(capsys, ["run", str(cfg), "--out", str(tmp_path / "out")])
    assert _files(tmp_path) == before
    assert "'x3'" in message and "line 14" in message and "'1.2.3'" in message


# ------------------------------------------- graph learning: per-round ε below 1 declared
def test_graphlearn_last_step_epsilon_range_is_the_settings_own():
    rounds = 8
    raw = {"algorithm": {"rounds": rounds}, "privacy": {"mechanism": "last_step"}}
    with pytest.raises(ConfigError) as err:
        parse_graphlearn({**raw, "privacy": {**raw["privacy"], "epsilon": float(rounds)}})
    message = str(err.value)
    assert message.startswith("privacy.epsilon must be a real number in (0, "), message
    assert "algorithm.rounds" in message and f"={rounds})" in message
    assert message.endswith(f"got {float(rounds)}")
    below = rounds * (1 - 1e-9)
    assert parse_graphlearn({**raw, "privacy": {**raw["privacy"], "epsilon": below}})
    # the rigorous mechanism's one release has no such limit
    assert parse_graphlearn({"privacy": {"epsilon": 3.0 * rounds}}).privacy["epsilon"] == 24.0
    # the reference (rendered from the table) states the range on the setting itself
    assert "algorithm.rounds" in GRAPHLEARN_PARAMS["privacy.epsilon"].allowed()


def test_pgfl_graphlearn_run_refuses_per_round_epsilon_of_one(tmp_path, capsys):
    cfg = tmp_path / "g.toml"
    cfg.write_text(
        '[algorithm]\nrounds = 4\n[privacy]\nmechanism = "last_step"\nepsilon = 4.0\n',
        encoding="utf-8",
    )
    before = _files(tmp_path)
    message = _cli_error(capsys, ["graphlearn", "run", str(cfg), "--out", str(tmp_path / "o")])
    assert _files(tmp_path) == before
    assert message.startswith("privacy.epsilon must be a real number in (0, algorithm.rounds")
    assert message.endswith("got 4.0")


# ------------------------------------------- the memory estimate brackets the measured peak
#: Run in a fresh interpreter: the estimate of a configuration (what `pgfl run` checks),
#: then the peak of building its network and simulating it, traced by tracemalloc.
MEASURE = """
import json, sys, tracemalloc
from pgfl.engine import simulate
from pgfl.experiments.build import build_network, curve_settings
from pgfl.experiments.loader import parse_config
from pgfl.experiments.memory import experiment_memory
cfg = parse_config(json.loads(sys.argv[1]))
terms, _ = experiment_memory(cfg)
tracemalloc.start()
net = build_network(cfg.curves[0], cfg.seed)
curves = [curve_settings(c, cfg.iterations, net) for c in cfg.curves]
simulate(net, curves, iterations=cfg.iterations, repetitions=cfg.repetitions)
peak = tracemalloc.get_traced_memory()[1]
print(json.dumps({"estimate": sum(terms.values()), "peak": peak, "terms": terms}))
"""


def _measure(raw: dict) -> dict:
    """Estimate and traced peak of a configuration, measured in a subprocess.

    tracemalloc counts the bytes numpy and Python ask for (numpy reports its buffers to it):
    exact and repeatable, unlike the resident set size, which depends on the allocator,
    on untouched zero pages (padding) and on what earlier code left in the process. The
    numpy local phase is forced: the compiled one's JIT compiler costs a fixed amount
    once per process, not a size of the configuration.
    """
    env = {
        **os.environ,
        "PGFL_LOCAL_PHASE": "numpy",
        "PYTHONPATH": str(Path(pgfl.__file__).parents[1]),
    }
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, json.dumps(raw)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def wide_csv(tmp_path_factory) -> Path:
    """A numeric CSV of 300 feature columns and a label, 1,000 rows."""
    path = tmp_path_factory.mktemp("wide") / "wide.csv"
    rng = np.random.default_rng(3)
    X = rng.standard_normal((1000, 300))
    y = (X[:, 0] > 0).astype(int)
    header = ",".join([*(f"x{j}" for j in range(300)), "y"])
    np.savetxt(path, np.column_stack([X, y]), fmt="%.3f", delimiter=",", header=header,
               comments="")  # fmt: skip
    return path


def _synthetic(kind: str, P: int, K: int, N, M: int, **data) -> dict:
    return {
        "name": "m",
        "iterations": 3,
        "repetitions": 2,
        "topology": {"kind": "ring", "P": P},
        "data": {"kind": kind, "K": K, "N": N, "M": M, **data},
        "training": {"L": 2, "epochs": 1, "batch": 5, "rho": 0.01},
    }


def _csv(path: Path, P: int, K: int) -> dict:
    return {
        "name": "m",
        "iterations": 3,
        "repetitions": 2,
        "topology": {"kind": "ring" if P > 1 else "complete", "P": P},
        "data": {"kind": "classification", "K": K, "source": f"csv:{path}:y", "rows": 800,
                 "test_size": 150},
        "training": {"L": 1, "epochs": 1, "batch": 5, "rho": 0.01},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("case", "within"),
    [
        # synthetic data: the features and their copy beside the targets are the peak; the
        # estimate was twice the peak, now calibrated (within 1.5×)
        (lambda csv: _synthetic("regression", 5, 40, 500, 16), 1.5),
        (lambda csv: _synthetic("regression", 4, 20, [50, 400], 40), 1.5),
        (lambda csv: _synthetic("logistic", 5, 40, [200, 600], 24, test_size=500), 1.5),
        # a wide CSV: its columns, not hash_dim, are the features; spread unequally over
        # the clients the padded data is the peak, for one client reading and encoding
        (lambda csv: _csv(csv, 2, 5), 3.0),
        (lambda csv: _csv(csv, 1, 1), 3.0),
    ],
    ids=["regression", "regression-wide", "logistic", "csv-300-columns", "csv-one-client"],
)
def test_the_estimate_brackets_the_measured_peak_of_a_run(case, within, wide_csv):
    m = _measure(case(wide_csv))
    shown = (format_bytes(m["peak"]), format_bytes(m["estimate"]), m["terms"])
    assert m["peak"] <= m["estimate"] <= within * m["peak"], shown


def test_a_table_too_wide_for_the_machine_is_named_by_its_file(wide_csv):
    cfg = parse_config(_csv(wide_csv, 1, 1))
    with pytest.raises(ConfigError) as err:
        check_experiment_fits(cfg, available=2**20)
    message = str(err.value)
    assert re.match(r"^(rows|columns) of data\.source=\d+ needs about ", message), message
    assert "(loading data.source [rows, columns])" in message


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_declared_shape_of_a_shipped_table_is_its_loaded_shape(name):
    frame, _, _ = load_frame(name)
    assert frame.shape == SHIPPED[name].shape
