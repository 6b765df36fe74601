"""Per-round time of one unit's secure aggregation, with the cost split.

Runs the real protocol (pgfl.privacy.secagg.run_secagg_round) for L clients with
M-dimensional vectors (wall clock and CPU time of this process; on a shared machine
the CPU time is the steadier number), with and without 10% of the clients dropping after ShareKeys
(the case that needs key reconstruction), and reports the median over repeats of the
wall-clock time per round and of each phase:

  keygen             2 fresh X25519 key pairs per client
  key_agreement      X25519 + HKDF-SHA256, channel keys and pairwise mask seeds
  shamir_share       Shamir sharing of b_u and s_u^SK (vectorized over clients)
  share_transport    ChaCha20-Poly1305 encryption/decryption of the shares
  mask_expansion     AES-256-CTR keystreams -> uint masks (pairwise + self)
  masking            adding/subtracting the masks (wrap-around arithmetic)
  unmask_reconstruct Lagrange interpolation of the revealed shares
  unmask_masks       regenerating self masks and the dropped clients' pairwise masks

L <= 100 uses the complete graph (original SecAgg: L(L-1)/2 pairs). L = 1000 uses the
SecAgg+ sparse neighbour graph with k = suggested_neighbours(L) (a complete graph would
be ~500,000 pairs, about a minute of X25519 alone). L = 100 is also run with the sparse
graph for comparison.

The pair pass (X25519, HKDF, share transport, mask expansion) runs on --workers worker
processes (default: the usable cores). On a shared machine the wall clock depends on the
other jobs; the "idle-cores estimate" replaces the pair pass's wall time by its busiest
worker's CPU time (what the round would take with one free core per worker).

Usage:  python benchmarks/bench_secagg.py [--json] [--repeats N] [--quick] [--workers W]
        [--only L]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time

import cryptography
import numpy as np

from pgfl.privacy.secagg import (
    DROP_AFTER_SHARE,
    SecAggConfig,
    default_workers,
    quantized_mean,
    run_secagg_round,
    suggested_neighbours,
)
from pgfl.rng import stream

PHASES = [
    "keygen",
    "key_agreement",
    "shamir_share",
    "share_transport",
    "mask_expansion",
    "masking",
    "unmask_reconstruct",
    "unmask_masks",
]


def machine() -> dict:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    keys = [X25519PrivateKey.generate() for _ in range(200)]
    pubs = [k.public_key() for k in keys]
    t0 = time.perf_counter()
    for i in range(2000):
        keys[i % 200].exchange(pubs[(i * 7 + 1) % 200])
    x25519_us = (time.perf_counter() - t0) / 2000 * 1e6
    return {
        "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"),
        "load_average_1min": os.getloadavg()[0],
        "x25519_exchange_us": round(x25519_us, 1),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cryptography": cryptography.__version__,
        "platform": platform.platform(),
    }


def cases(quick: bool) -> list[dict]:
    out = []
    for L in (10, 100, 1000):
        for M in (20, 10_000):
            for drop in (0.0, 0.1):
                k = suggested_neighbours(L) if L >= 1000 else None
                out.append({"L": L, "M": M, "dropout": drop, "neighbours": k})
                if L == 100:
                    out.append(
                        {"L": L, "M": M, "dropout": drop, "neighbours": suggested_neighbours(L)}
                    )
    if quick:
        out = [c for c in out if c["L"] <= 100 and c["M"] == 20]
    return out


def run_case(case: dict, repeats: int, workers: int | None = None) -> dict:
    L, M = case["L"], case["M"]
    cfg = SecAggConfig(neighbours=case["neighbours"])
    x = stream(0, "bench-secagg-values", L, M).normal(size=(L, M))
    n_drop = int(round(case["dropout"] * L))
    dropped = np.zeros(L, dtype=bool)
    dropped[stream(0, "bench-secagg-dropout", L).choice(L, n_drop, replace=False)] = True
    stage = np.where(dropped, DROP_AFTER_SHARE, 0)
    totals, cpus, idle, phases = [], [], [], {p: [] for p in PHASES}
    for r in range(repeats):
        c0 = time.process_time()
        res = run_secagg_round(x, cfg, unit=0, round=r, drop_stage=stage, workers=workers)
        cpus.append(time.process_time() - c0)
        totals.append(res.timings["total"])
        # wall time on idle cores: the round's wall time with the pair pass replaced by
        # its busiest worker's CPU time (this process's own waiting is not work)
        idle.append(res.timings["total"] - res.timings["pairs_wall"] + res.timings["pairs_cpu_max"])
        for p in PHASES:
            phases[p].append(res.timings.get(p, 0.0))
        if not np.array_equal(res.mean, quantized_mean(x, ~dropped, cfg)):
            raise RuntimeError(f"protocol output differs from quantized_mean for {case}")
    t0 = time.perf_counter()
    quantized_mean(x, ~dropped, cfg)
    t_equiv = time.perf_counter() - t0
    pairs = (L * (L - 1) // 2) if case["neighbours"] is None else L * case["neighbours"] // 2
    return {
        **case,
        "graph": "complete" if case["neighbours"] is None else f"sparse k={case['neighbours']}",
        "threshold": cfg.threshold_for(L),
        "pairs": pairs,
        "repeats": repeats,
        "total_median_s": statistics.median(totals),
        "total_min_s": min(totals),
        "cpu_median_s": statistics.median(cpus),
        "workers": workers if workers is not None else default_workers(),
        "idle_estimate_median_s": statistics.median(idle),
        "phases_median_s": {p: statistics.median(v) for p, v in phases.items()},
        "quantized_mean_s": t_equiv,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--repeats", type=int, default=5, help="rounds per case (L<1000, M=20)")
    ap.add_argument("--quick", action="store_true", help="only L<=100, M=20")
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: cores)")
    ap.add_argument("--only", default=None, help="only cases with L=N (e.g. --only 100)")
    args = ap.parse_args(argv)
    # warm-up (imports, first cipher objects)
    # warm-up: imports, first cipher objects, the worker processes
    run_secagg_round(np.zeros((4, 4)), SecAggConfig(), unit=0, round=0)
    run_secagg_round(np.zeros((40, 4)), SecAggConfig(), unit=0, round=0, workers=args.workers)
    results = []
    for case in cases(args.quick):
        if args.only is not None and case["L"] != int(args.only):
            continue
        big = case["L"] * case["M"] >= 1_000_000 or case["L"] >= 1000
        results.append(run_case(case, max(1, args.repeats if not big else 2), args.workers))
        if not args.json:
            r = results[-1]
            print(
                f"L={r['L']:5d} M={r['M']:6d} drop={r['dropout']:.1f} {r['graph']:14s} "
                f"median {r['total_median_s'] * 1e3:9.1f} ms  "
                f"min {r['total_min_s'] * 1e3:9.1f} ms  cpu {r['cpu_median_s'] * 1e3:9.1f} ms  "
                f"idle-cores estimate {r['idle_estimate_median_s'] * 1e3:7.1f} ms  "
                + " ".join(f"{p}={v * 1e3:.1f}" for p, v in r["phases_median_s"].items()),
                flush=True,
            )
    out = {"benchmark": "secagg", "machine": machine(), "results": results}
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
    else:
        print(json.dumps(out["machine"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
