"""`pgfl bench` of two source trees in one run, interleaved (A B A B ...), for a ratio.

Usage: python benchmarks/compare_trees.py OLD_SRC NEW_SRC [--cases paper,paper_fig2]
[--rounds 3] [--seconds 2] [--local-phase numpy|compiled] [--threads N]. Each measurement
runs in a fresh interpreter with PYTHONPATH=SRC, so the two trees never share imported
modules; interleaving spreads any change of machine load over both. Prints each case's
median client updates/s, the median of the pairs' ratios NEW / OLD and their range
(used for the engine restructuring's "at most 10% slower" check with the numpy local
phase, the default, and for the compiled kernels' before/after with ``--local-phase
compiled``). ``--threads`` sets
``NUMBA_NUM_THREADS`` for both sides (numba's worker threads; default: all cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CODE = (
    "import json, sys; from pgfl.bench import bench_case; "
    "print(json.dumps(bench_case(sys.argv[1], float(sys.argv[2]))))"
)


def measure(src: str, case: str, seconds: float, local_phase: str, threads: int | None) -> float:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src), PGFL_LOCAL_PHASE=local_phase)
    if threads is not None:
        env["NUMBA_NUM_THREADS"] = str(threads)
    out = subprocess.run(
        [sys.executable, "-c", CODE, case, str(seconds)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])["client_updates_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--cases", default="paper,paper_fig2,paper_trials,medium")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--local-phase", choices=("numpy", "compiled"), default="numpy")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'case':14s} {'old /s':>12s} {'new /s':>12s} {'new/old':>8s}  pairs new/old")
    for case in args.cases.split(","):
        old, new = [], []
        for _ in range(args.rounds):
            old.append(measure(args.old, case, args.seconds, args.local_phase, args.threads))
            new.append(measure(args.new, case, args.seconds, args.local_phase, args.threads))
        a, b = statistics.median(old), statistics.median(new)
        pairs = [n / o for o, n in zip(old, new, strict=True)]
        print(f"{case:14s} {a:12,.0f} {b:12,.0f} {statistics.median(pairs):8.2f}  "
              f"{min(pairs):.2f}-{max(pairs):.2f}", flush=True)  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
