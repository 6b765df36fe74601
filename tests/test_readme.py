"""The README's inline commands run, and its examples and tables say what pgfl does.

Every ``pgfl ...`` command the README shows inline (in the prose, outside code blocks) is
run, made cheap (``--quick``, a short ``bench``) and with its placeholders replaced by
small real inputs; a command this file does not know how to run fails the test, so a new
README command cannot go unchecked. The README's code blocks themselves run in
``tests/test_docs.py``, with every other page's; here their output and content are checked
against what the README says (the library example's numbers, the configuration example).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

import pgfl
from pgfl.experiments.loader import parse_config

README = Path(__file__).resolve().parents[1] / "README.md"
#: This pgfl for the commands started here, whatever their working folder.
ENV = {**os.environ, "PYTHONPATH": str(Path(pgfl.__file__).resolve().parents[1])}
TEXT = README.read_text(encoding="utf-8")

GRAPHLEARN_CONFIG = """seed = 0
[data]
kind = "synthetic"
nodes = 8
clients = 2
n_samples = 30
repetitions = 1
[algorithm]
rounds = 2
local_steps = 5
"""


def fenced_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", TEXT, flags=re.S)


def readme_commands() -> list[str]:
    """Every ``pgfl`` command of the README's prose (inline code), in order."""
    found = []
    prose = re.sub(r"```.*?```", "", TEXT, flags=re.S)
    for span in re.findall(r"`([^`]+)`", prose):
        span = " ".join(span.split())  # inline code may wrap over two lines
        if span.startswith("pgfl "):
            found.append(span)
    return list(dict.fromkeys(found))


def test_readme_commands_are_found():
    cmds = readme_commands()
    assert "pgfl privacy config fig2" in cmds and "pgfl bench --json" in cmds
    assert len(cmds) >= 10, cmds


def cheap(cmd: str, tmp: Path) -> tuple[list[str], Path | None]:
    """The command as arguments to run cheaply in ``tmp``, and the file its stdout goes to."""
    cmd, _, redirect = cmd.partition(">")
    args = shlex.split(cmd)[1:]
    sub = args[0] if args else ""
    if "path/to/train.csv" in args:  # an Avazu file with enough rows for --rows 5101
        from pgfl.data.avazu import write_synthetic_avazu

        write_synthetic_avazu(tmp / "train.csv", 5600, seed=1)
        args = [str(tmp / "train.csv") if a == "path/to/train.csv" else a for a in args]
    if args[-1:] == ["CONFIG.toml"]:
        (tmp / "CONFIG.toml").write_text(GRAPHLEARN_CONFIG, encoding="utf-8")
    if "my.toml" in args:  # what the README's first commands make it: fig5 as a config
        from pgfl.experiments.presets import preset_text

        (tmp / "my.toml").write_text(preset_text("fig5"), encoding="utf-8")
    unknown = [a for a in args if a.isupper() or a.startswith("path") or "..." in a]
    assert not unknown, f"README command {cmd!r} has a placeholder this test cannot fill"
    is_run = sub == "run" or (sub == "reproduce" and "--list" not in args)
    if is_run and "--print-config" not in args and "--quick" not in args:
        args.append("--quick")
    if sub == "bench":
        args += ["--seconds", "0.05"]
    out = tmp / redirect.strip() if redirect else None
    return args, out


@pytest.mark.slow
@pytest.mark.timeout(3600)  # the README's commands in turn (each bounded apart): minutes idle
def test_every_inline_readme_command_runs(tmp_path):
    outputs = {}
    for cmd in readme_commands():
        args, out = cheap(cmd, tmp_path)
        proc = subprocess.run(
            [sys.executable, "-m", "pgfl.cli", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=600,
            env=ENV,
        )
        assert proc.returncode == 0, (cmd, proc.stderr[-2000:])
        if out is not None:
            out.write_text(proc.stdout, encoding="utf-8")
        outputs[cmd] = proc.stdout
    assert (tmp_path / "runs" / "mine-actors" / "summary.json").is_file()
    bench = json.loads(outputs["pgfl bench --json"])
    assert bench["client_updates_per_s"] > 0 and bench["rounds_per_s"] > 0


@pytest.mark.slow
def test_library_example_runs_and_prints_a_steady_state_per_curve(tmp_path):
    (code,) = [b for b in fenced_blocks("python") if "simulate(" in b]
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        env=ENV,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    values = np.array([float(v) for v in re.findall(r"-?\d+\.\d+", proc.stdout)])
    # two curves, no noise then graph-homomorphic noise: steady states in dB, both far
    # below 0 dB (‖w°‖ = 1), the noisy one not better by more than the seed-to-seed spread
    assert values.shape == (2,), proc.stdout
    assert np.all(values < -30.0) and values[1] >= values[0] - 1.5, values


def test_configuration_example_is_a_valid_config():
    (block,) = [b for b in fenced_blocks("toml") if "[[curves]]" in b]
    cfg = parse_config(tomllib.loads(block))
    assert [c.label for c in cfg.curves] == ["graph_homomorphic"]
    assert cfg.curves[0].privacy.server_noise == "graph_homomorphic"
    assert cfg.curves[0].training.L == 11 and cfg.curves[0].data.K == 100


# symbol of the README's presets table → (section, key) of the preset's base tables
SYMBOLS = {
    "P": ("topology", "P"),
    "K": ("data", "K"),
    "N": ("data", "N"),
    "M": ("data", "M"),
    "L": ("training", "L"),
    "E": ("training", "epochs"),
    "B": ("training", "batch"),
    "μ": ("training", "mu"),
    "ρ": ("training", "rho"),
    "σ_g²": ("privacy", "server_variance"),
    "σ_v²": ("privacy", "server_variance"),
    "σ²": ("privacy", "client_variance"),
}


def readme_preset_parameters() -> dict[str, dict[tuple[str, str], object]]:
    """``{preset: {(section, key): value}}`` from the "papers' parameters" column."""
    text = TEXT[TEXT.index("### Presets") :]
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| `(fig\d|hybrid|diffusion)` \|[^|]*\| (.*) \|$", line)
        if not m:
            continue
        name, params = m.groups()
        want: dict[tuple[str, str], object] = {}
        if params.startswith("as "):
            want.update(rows[params[3:]])
            rows[name] = want
            continue
        for sym, lo, hi in re.findall(r"(\S+?)∈\[(\d+),(\d+)\]", params):
            want[SYMBOLS[sym]] = [int(lo), int(hi)]
        for sym, val in re.findall(r"(?:^|[ (:])(\S+?)=([\d.]+)", params):
            if sym == "σ_g":  # a standard deviation
                want[SYMBOLS["σ_g²"]] = float(val) ** 2
            else:
                want[SYMBOLS[sym]] = float(val)
        if m2 := re.search(r"(\d+) agents", params):
            want[("topology", "P")] = int(m2.group(1))
        if m2 := re.search(r"([\d,]+) samples", params):
            want[("data", "rows")] = int(m2.group(1).replace(",", ""))
        if m2 := re.search(r"(\d+) clean test samples", params):
            want[("data", "test_size")] = int(m2.group(1))
        rows[name] = want
    return rows


def test_presets_table_matches_the_preset_files():
    from pgfl.experiments.presets import preset_text

    table = readme_preset_parameters()
    assert set(table) == {f"fig{i}" for i in range(2, 8)} | {"hybrid", "diffusion"}
    for name, want in table.items():
        raw = tomllib.loads(preset_text(name))
        assert len(want) >= 3, (name, want)
        for (section, key), value in want.items():
            got = raw[section][key]
            if isinstance(value, float):
                assert got == pytest.approx(value), (name, section, key, got, value)
            else:
                assert got == value, (name, section, key, got, value)


def test_fig5_fig6_sizes_and_fig6_step_sizes_are_as_the_readme_says():
    from pgfl.experiments.presets import load_preset

    assert "N ∈ [50, 150]" in TEXT and "{0.05, 0.1, 0.2, 0.5, 1}" in TEXT
    for name in ("fig5", "fig6"):
        assert load_preset(name).curves[0].data.N == (50, 150)
    mus = {c.training.mu for c in load_preset("fig6").curves}
    assert mus == {0.05, 0.1, 0.2, 0.5, 1.0}, mus
