"""Scaling model of the compiled engine: Amdahl's serial fraction, measured two ways.

    PYTHONPATH=src python benchmarks/bench_threads.py [--cases paper,paper_trials,flower]
        [--rounds 400] [--repeats 5] [--json]

For each case (``pgfl bench`` cases and ``--compare`` workloads), one trial batch as the
bench runs it:

1. **Profile, one thread** (load-robust: CPU time of the calling thread,
   ``time.thread_time``): a round as ``simulate`` runs it (``compiled round``: whole rounds
   in compiled calls, :mod:`pgfl.engine.rounds`), and round by round the share spent in
   what runs on the worker threads (the compiled local SGD and client sampler) against the
   whole round (numpy steps: aggregation, messages, combination, metrics, bookkeeping).
   ``s_profile`` is the rest (of the round-by-round path).
2. **Measured, 1 vs n threads** (wall clock, interleaved repeats, medians; every compiled
   call on all n threads, not the faster of 1 and n as runs choose): the speed-up
   ``S(n)`` and Amdahl's ``s = (n/S − 1)/(n − 1)``. On a machine shared with other jobs
   this one moves with their load (a busy core is a straggler every round).
3. **Fork-join cost**: an empty parallel region on n threads, back to back and 100 µs of
   serial work after the last (numba's OpenMP pool; with the default
   ``OMP_WAIT_POLICY=PASSIVE`` the workers sleep in between and must be woken; run again
   with ``OMP_WAIT_POLICY=ACTIVE`` for spinning workers).

The model ``T(n) = T(1)·(s + (1 − s)/n) + regions·fork_join(n)`` then predicts the
speed-up on more cores from ``s_profile`` (the fork-join cost on more cores is not
measured here: it grows with n).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from datetime import UTC, datetime

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

from pgfl.bench import (  # noqa: E402
    CASES,
    amdahl_serial_fraction,
    amdahl_speedup,
    bench_network,
    compare_network,
)
from pgfl.engine import CurveSettings, compiled, simulate  # noqa: E402
from pgfl.engine import rounds as whole_rounds  # noqa: E402


def _setup(case: str):
    if case in CASES:
        net, curves, R, w_opt = bench_network(case)
    else:
        net = compare_network(case)
        curves, R, w_opt = [CurveSettings(mu=0.5)], 1, np.zeros(net.dim)
    return net, curves, R, w_opt


def profile(case: str, rounds: int) -> dict[str, float]:
    """One thread: µs per round of the whole round and of its parallel parts (thread CPU)."""
    net, curves, R, w_opt = _setup(case)
    spent = {"local SGD": 0.0, "sampler": 0.0}
    originals = (compiled.local_models, compiled.draw_clients)

    def timed(name, fn):
        def wrapper(*args):
            t0 = time.thread_time()
            out = fn(*args)
            spent[name] += time.thread_time() - t0
            return out

        return wrapper

    old = compiled.set_threads(1)
    try:
        simulate(net, curves, iterations=2, repetitions=R, w_opt=w_opt)
        t0 = time.thread_time()
        simulate(net, curves, iterations=rounds, repetitions=R, w_opt=w_opt)
        compiled_round = time.thread_time() - t0
        whole_rounds.WHOLE_ROUNDS = False  # round by round, its phases timed
        compiled.local_models = timed("local SGD", originals[0])
        compiled.draw_clients = timed("sampler", originals[1])
        t0 = time.thread_time()
        simulate(net, curves, iterations=rounds, repetitions=R, w_opt=w_opt)
        whole = time.thread_time() - t0
    finally:
        compiled.local_models, compiled.draw_clients = originals
        compiled.set_threads(old)
        whole_rounds.WHOLE_ROUNDS = True
    out = {k: v / rounds * 1e6 for k, v in spent.items()}
    out["round"] = whole / rounds * 1e6
    out["compiled round"] = compiled_round / rounds * 1e6
    out["s_profile"] = 1.0 - (spent["local SGD"] + spent["sampler"]) / whole
    return out


def measured(case: str, rounds: int, repeats: int, counts: list[int]) -> dict[int, float]:
    """Median wall µs per round on each thread count (parallel paths forced), interleaved."""
    net, curves, R, w_opt = _setup(case)
    saved = compiled.PARALLEL_WORK, compiled.PARALLEL_SAMPLING
    compiled.PARALLEL_WORK = compiled.PARALLEL_SAMPLING = 0  # the parallel kernels always
    whole_rounds.ADAPTIVE = False  # every compiled call on all the threads
    old = compiled.set_threads(None)
    times: dict[int, list[float]] = {n: [] for n in counts}
    try:
        for n in counts:
            compiled.set_threads(n)
            simulate(net, curves, iterations=2, repetitions=R, w_opt=w_opt)
        for _ in range(repeats):
            for n in counts:
                compiled.set_threads(n)
                t0 = time.perf_counter()
                simulate(net, curves, iterations=rounds, repetitions=R, w_opt=w_opt)
                times[n].append((time.perf_counter() - t0) / rounds * 1e6)
    finally:
        compiled.PARALLEL_WORK, compiled.PARALLEL_SAMPLING = saved
        compiled.set_threads(old)
        whole_rounds.ADAPTIVE = True
    return {n: statistics.median(v) for n, v in times.items()}


def fork_join(counts: list[int], calls: int = 2_000, gap_us: float = 0.0) -> dict[int, float]:
    """Median µs of an empty parallel region on each thread count, ``gap_us`` after the last.

    The gap is serial work on the calling thread, as the numpy steps of a round are:
    sleeping workers (the default wait policy) fall asleep during it.
    """
    import numba

    @numba.njit(parallel=True)
    def region(out):
        for i in numba.prange(out.size):
            out[i] += 1.0

    buf = np.zeros(max(counts))
    old = compiled.set_threads(None)
    try:
        result = {}
        for n in counts:
            compiled.set_threads(n)
            region(buf[:n])
            times = []
            for _ in range(calls):
                end = time.perf_counter() + gap_us * 1e-6
                while time.perf_counter() < end:
                    pass
                t0 = time.perf_counter()
                region(buf[:n])
                times.append((time.perf_counter() - t0) * 1e6)
            result[n] = statistics.median(times)
        return result
    finally:
        compiled.set_threads(old)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="paper,paper_fig2,paper_trials,flower")
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    most = compiled.max_threads()
    counts = sorted({1, 2, most} & set(range(1, most + 1)))
    report = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, python "
        f"{platform.python_version()}, numpy {np.__version__}",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_before": os.getloadavg()[0],
        "workers_spin": compiled.spinning(),
        "fork_join_us": fork_join(counts),
        "fork_join_after_100us_us": fork_join(counts, gap_us=100.0),
        "cases": {},
    }
    for case in args.cases.split(","):
        rounds = args.rounds if case in ("paper", "flower") else max(20, args.rounds // 10)
        prof = profile(case, rounds)
        wall = measured(case, rounds, args.repeats, counts)
        n = counts[-1]
        speedup = wall[1] / wall[n]
        s_meas = amdahl_serial_fraction(n, speedup)
        s_prof = prof["s_profile"]
        report["cases"][case] = {
            "profile_us_per_round_1_thread": {k: round(v, 2) for k, v in prof.items()},
            "wall_us_per_round": {str(k): round(v, 2) for k, v in wall.items()},
            f"speedup_{n}": speedup,
            "s_measured": s_meas,
            "s_profile": s_prof,
            "predicted_speedup": {
                str(m): amdahl_speedup(min(max(s_prof, 0.0), 1.0), m) for m in (2, 4, 8, 16)
            },
        }
    report["load_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['date']}, {report['machine']}, load {report['load_before']:.2f} → "
          f"{report['load_after']:.2f}")  # fmt: skip
    print(
        "fork-join µs per empty region:",
        {k: round(v, 2) for k, v in report["fork_join_us"].items()},
    )
    for case, r in report["cases"].items():
        p = r["profile_us_per_round_1_thread"]
        s_meas = r["s_measured"]
        print(
            f"{case:13s} compiled round {p['compiled round']:8.1f} µs, round by round "
            f"{p['round']:8.1f} µs (1 thread CPU): local SGD "
            f"{p['local SGD']:8.1f}, sampler {p['sampler']:6.1f} → s_profile "
            f"{r['s_profile']:.2f}; wall {r['wall_us_per_round']} → speed-up "
            f"{r[f'speedup_{counts[-1]}']:.2f}, s_measured "
            f"{s_meas if s_meas is None else round(s_meas, 2)}; predicted from s_profile: "
            + ", ".join(f"{m}: {v:.2f}x" for m, v in r["predicted_speedup"].items())
        )


if __name__ == "__main__":
    main()
