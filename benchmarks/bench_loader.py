"""Benchmark: the Avazu loader streams (memory stays flat as the file grows).

Writes a synthetic Avazu-format file of 1,000,000 rows, then, each in a fresh
subprocess (so ``ru_maxrss`` is per measurement):

* streams the first n rows (n = 100k, 250k, 500k, 1M) through ``iter_avazu`` without
  keeping them — peak RSS and Python-heap peak (``tracemalloc``) must not grow with n;
* reservoir-samples 5,101 rows (the papers' sample size) from the whole file;
* reads the first 5,101 rows only (the row limit stops the reader).

Usage: ``python benchmarks/bench_loader.py [--rows 1000000] [--hash-dim 1024] [--dir DIR]``.
Prints a Markdown table; copy it into ``benchmarks/RESULTS-data.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, resource, sys, time, tracemalloc
import numpy as np
from pgfl.data.avazu import iter_avazu, load_avazu
from pgfl.rng import stream

path, mode = sys.argv[1], sys.argv[2]
n, dim, trace = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if trace:
    tracemalloc.start()
t = time.perf_counter()
if mode == "stream":
    rows = 0
    for ch in iter_avazu(path, hash_dim=dim, rows=n):
        rows += len(ch)
elif mode == "reservoir":
    X, y = load_avazu(path, hash_dim=dim, rows=n, sample="reservoir", rng=stream(0, "bench"))
    rows = X.shape[0]
else:
    X, y = load_avazu(path, hash_dim=dim, rows=n)
    rows = X.shape[0]
dt = time.perf_counter() - t
peak = tracemalloc.get_traced_memory()[1] if trace else None
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rows": rows, "seconds": dt, "maxrss_kb": rss,
                  "import_rss_kb": base, "tracemalloc_peak": peak}))
"""


TRACE = r"""
import sys
from pgfl.data.avazu import iter_avazu
marks = []
for i, ch in enumerate(iter_avazu(sys.argv[1], hash_dim=int(sys.argv[2]))):
    if i % 2 == 0:
        with open("/proc/self/status") as f:
            rss = next(l for l in f if l.startswith("VmRSS")).split()[1]
        marks.append(f"{(i + 1) * 65536 // 1000}k rows: {int(rss) // 1024} MB")
print("; ".join(marks))
"""


def run(path: str, mode: str, n: int, dim: int, trace: bool) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, path, mode, str(n), str(dim), "1" if trace else "0"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--hash-dim", type=int, default=1024)
    ap.add_argument("--dir", default=None, help="where to write the generated file")
    args = ap.parse_args()

    from pgfl.data.avazu import write_synthetic_avazu

    tmp = args.dir or tempfile.mkdtemp(prefix="pgfl-bench-")
    path = os.path.join(tmp, "avazu_synthetic.csv")
    t = time.perf_counter()
    write_synthetic_avazu(path, args.rows, seed=0)
    gen_s = time.perf_counter() - t
    size_mb = os.path.getsize(path) / 1e6
    print(f"# Avazu loader benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}, {platform.platform()}"
    )
    print(
        f"file: {args.rows:,} rows, {size_mb:.0f} MB, written in {gen_s:.1f} s; "
        f"hash_dim={args.hash_dim}"
    )
    print()
    print("| mode | rows read/kept | time (s) | rows/s | peak RSS (MB) | tracemalloc peak (MB) |")
    print("|---|---|---|---|---|---|")
    sizes = [n for n in (100_000, 250_000, 500_000, 1_000_000) if n <= args.rows]
    jobs = [("stream", n) for n in sizes] + [("reservoir", 5101), ("head", 5101)]
    for mode, n in jobs:
        r = run(path, mode, n, args.hash_dim, trace=False)
        tr = run(path, mode, n, args.hash_dim, trace=True)
        rate = (n if mode == "stream" else args.rows if mode == "reservoir" else n) / r["seconds"]
        print(
            f"| {mode} | {r['rows']:,} | {r['seconds']:.2f} | {rate:,.0f} | "
            f"{r['maxrss_kb'] / 1024:.0f} | {tr['tracemalloc_peak'] / 1e6:.1f} |"
        )
    print()
    print(
        "Current RSS while streaming the whole file (one process, every 2nd chunk of 65,536 rows):"
    )
    out = subprocess.run(
        [sys.executable, "-c", TRACE, path, str(args.hash_dim)],
        capture_output=True,
        text=True,
        check=True,
    )
    print(out.stdout.strip())
    if args.dir is None:
        os.remove(path)
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
