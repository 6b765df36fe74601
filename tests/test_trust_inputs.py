"""Inputs a user should be able to trust: one line naming the setting they gave, a CSV
typo that is not silently hashed, the graph-learning ε range where the table declares it,
and a memory estimate that brackets the measured peak (from a user report)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from pgfl.cli import main
from pgfl.graphlearn.config import parse_config as parse_graphlearn
from pgfl.graphlearn.params import PARAMS as GRAPHLEARN_PARAMS
from pgfl.params import PARAMS
from pgfl.privacy.secagg import SecAggConfig
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
