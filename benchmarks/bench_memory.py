"""Peak memory of a `pgfl bench` case against its data and results, in a fresh process.

Builds the case (data, network, ``w°``) and simulates it with ``tracemalloc`` on, after the
imports and the compiled kernels are loaded (a short run first, on one thread and on all),
and prints the data's bytes (``Xy[P, K, N, M+1]``: the samples, stored once), the
results' (the Trajectory's arrays), the traced peaks (numpy's allocations: every array;
numba's own scratch, a few kilobytes per thread, is not traced) of the set-up (data,
network, ``w°``) and of the run (``simulate``, the data held), and the growth of the
process's peak resident memory over what it held before the case was built.

    PYTHONPATH=src python benchmarks/bench_memory.py --case paper --iterations 2000
"""

from __future__ import annotations

import argparse
import json
import resource
import tracemalloc

import numpy as np

from pgfl.bench import CASES, bench_network
from pgfl.engine import simulate
from pgfl.engine.rounds import ROUNDS_PER_CALL


def _rss_kib() -> int:
    """The current resident memory (KiB) from /proc (Linux), else the peak so far."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measure(case: str, iterations: int) -> dict:
    """Bytes of the data, the results and the peaks of one run of ``case``."""
    tiny, curves, R, w_opt = bench_network("paper")
    # load the kernels: three calls of whole rounds, so that both the one-thread and the
    # all-thread kernel run once (pgfl.engine.rounds._Pace tries each); numba's first use
    # of a kernel in a process costs about 1 MiB, once
    simulate(tiny, curves, iterations=3 * ROUNDS_PER_CALL, repetitions=1, w_opt=w_opt)
    del tiny
    before = _rss_kib()
    tracemalloc.start()
    net, curves, R, w_opt = bench_network(case)
    setup = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    t = simulate(net, curves, iterations=iterations, repetitions=R, w_opt=w_opt)
    run = tracemalloc.get_traced_memory()[1]
    peak = max(setup, run)
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    data = net.data.Xy.nbytes
    results = sum(v.nbytes for v in vars(t).values() if isinstance(v, np.ndarray))
    return {
        "case": case,
        "iterations": iterations,
        "data_mib": data / 2**20,
        "results_mib": results / 2**20,
        "traced_peak_mib": peak / 2**20,
        "traced_peak_setup_mib": setup / 2**20,
        "traced_peak_run_mib": run / 2**20,
        "peak_over_data_plus_results": peak / (data + results),
        "run_peak_over_data_plus_results": run / (data + results),
        "rss_growth_mib": rss / 2**10,
        "rss_growth_over_data_plus_results": rss * 1024 / (data + results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="paper", choices=sorted(CASES))
    parser.add_argument("--iterations", type=int, default=1000)
    args = parser.parse_args()
    print(json.dumps(measure(args.case, args.iterations), indent=1))


if __name__ == "__main__":
    main()
