"""Answers that come at once: no heavy module is imported before the arguments are checked.

Help, lists, a preset's printed configuration and every argument error (a missing file, an
unknown command or preset, an option out of range) must not pay for dp_accounting, scipy,
pandas, matplotlib or numba (about 1-4 s of CPU together). The check is on what was
imported, not on a clock: each command runs in a fresh interpreter, which then lists the
heavy modules in ``sys.modules``. The CPU times are measured in
``benchmarks/bench_startup.py`` (BENCHMARKS.md, "Start-up").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_startup import HEAVY  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"

PROBE = """
import json, sys
from pgfl.cli import main
code = 0
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "heavy": [m for m in HEAVY if m in sys.modules]}))
""".replace("HEAVY", repr(HEAVY))


def probe(argv, cwd):
    env = dict(os.environ, PYTHONPATH=str(SRC))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], cwd=cwd, env=env, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.parametrize(
    "argv, code, says",
    [
        (["--help"], 0, ""),
        (["reproduce", "--list"], 0, ""),
        (["reproduce", "fig2", "--print-config"], 0, ""),
        (["reproduce", "hybrid", "--quick", "--print-config"], 0, ""),
        (["run", "missing.toml"], 2, "config file not found"),
        (["run", "bad.toml"], 2, "bad.toml"),
        (["run", "missing.toml", "--seed", "-1"], 2, "seed (--seed)"),
        (["audit"], 2, "pgfl privacy audit"),
        (["reproduce", "fig22"], 2, "did you mean 'fig2'"),
        (["reproduce", "fig2", "--backend", "rya"], 2, "did you mean 'ray'"),
        (["reproduce", "fig2", "fig3", "--workers", "0"], 2, "--workers"),
        (["reproduce", "fig2", "--data", "x.csv"], 2, "real-data presets"),
        (["reproduce", "frontier", "--print-config"], 2, "not for the frontier"),
        (["reproduce", "fig2", "--qiuck"], 2, "--quick"),
        (["privacy", "epsilon", "--help"], 0, ""),
    ],
)
def test_no_heavy_import_before_the_arguments_are_checked(tmp_path, argv, code, says):
    (tmp_path / "bad.toml").write_text("iterations = [\n", encoding="utf-8")
    result, stderr = probe(argv, tmp_path)
    assert result["code"] in (code, None if code == 0 else code), stderr
    assert says in stderr
    assert result["heavy"] == [], f"pgfl {' '.join(argv)} imported {result['heavy']}"


def test_the_probe_sees_a_heavy_import(tmp_path):
    # the same probe on a command that runs the engine must list the heavy modules
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(
        'name = "tiny"\niterations = 2\n[topology]\nkind = "ring"\nP = 2\n'
        "[data]\nK = 2\nN = 4\n[training]\nL = 2\n",
        encoding="utf-8",
    )
    result, stderr = probe(["run", str(cfg), "--out", str(tmp_path / "out")], tmp_path)
    assert result["code"] in (0, None), stderr
    assert {"scipy", "matplotlib"} <= set(result["heavy"])
