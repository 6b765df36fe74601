"""CPU time of the answers that should come at once: help, lists, printed configs, bad input.

Usage:
    python benchmarks/bench_startup.py [--src SRC] [--runs 5] [--json]

Each command runs ``--runs`` times in a fresh interpreter with ``PYTHONPATH=SRC`` (default:
this checkout's ``src``), from a scratch folder; its CPU time (user + system, of the child
process, from ``resource.getrusage``) is reported as the median and the minimum, with the
heavy modules it imported (``dp_accounting``, scipy, pandas, matplotlib, numba, ...). CPU
time, not wall time: other jobs on the machine slow the wall clock, not the work. Run it
on two trees (the branch point and the branch) to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

#: The modules whose import costs most (``python -X importtime``): none of them may load
#: before a command has checked its arguments.
HEAVY = (
    "dp_accounting",
    "scipy",
    "pandas",
    "matplotlib",
    "numba",
    "sklearn",
    "statsmodels",
    "networkx",
    "jax",
    "torch",
    "ray",
)

#: (label, argv): answers and argument errors of the commands a new user meets first.
COMMANDS = (
    ("pgfl --help", ["--help"]),
    ("pgfl reproduce --help", ["reproduce", "--help"]),
    ("pgfl reproduce --list", ["reproduce", "--list"]),
    ("pgfl reproduce fig2 --print-config", ["reproduce", "fig2", "--print-config"]),
    ("pgfl run missing.toml", ["run", "missing.toml"]),
    ("pgfl audit (no such command)", ["audit"]),
    ("pgfl reproduce fig2 --seed -1", ["reproduce", "fig2", "--seed", "-1"]),
    ("pgfl reproduce fig2 --backend rya", ["reproduce", "fig2", "--backend", "rya"]),
    ("pgfl reproduce fig22", ["reproduce", "fig22"]),
    ("pgfl privacy epsilon --help", ["privacy", "epsilon", "--help"]),
)

PROBE = """
import sys
from pgfl.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = {heavy!r}
sys.stderr.write("HEAVY " + ",".join(h for h in heavy if h in sys.modules) + "\\n")
"""


def measure(src: Path, argv: list[str], cwd: str) -> tuple[float, list[str]]:
    """CPU seconds of one run of ``pgfl ARGV`` and the heavy modules it imported."""
    env = dict(os.environ, PYTHONPATH=str(src.resolve()))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv],
        env=env, cwd=cwd, capture_output=True, text=True, check=False,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    line = [x for x in done.stderr.splitlines() if x.startswith("HEAVY ")][-1]
    return cpu, [m for m in line[6:].split(",") if m]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as cwd:
        for label, argv in COMMANDS:
            times, heavy = [], []
            for _ in range(args.runs):
                cpu, heavy = measure(args.src, argv, cwd)
                times.append(cpu)
            rows.append(
                {"command": label, "cpu_median_s": round(statistics.median(times), 3),
                 "cpu_min_s": round(min(times), 3), "heavy": heavy}
            )  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'command':<40} {'median':>7} {'min':>7}  heavy modules imported")
    for r in rows:
        heavy = ", ".join(r["heavy"]) or "none"
        print(f"{r['command']:<40} {r['cpu_median_s']:>6.2f}s {r['cpu_min_s']:>6.2f}s  {heavy}")


if __name__ == "__main__":
    main()
