"""Engine throughput: client updates per second at the papers' scale and beyond.

A *client update* is one sampled client's whole local training in one iteration (all its
epochs), for one trial (curve x repetition). ``rounds_per_s`` counts GFL iterations of
the whole batched network per second. Timings are wall-clock on whatever machine runs
them; record them with the machine and date (BENCHMARKS.md), never assert them in tests.
"""

from __future__ import annotations

import os
import platform
import resource
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from pgfl.data.synthetic import client_schedule, regression_data
from pgfl.engine import CurveSettings, Network, simulate
from pgfl.problems import LeastSquares
from pgfl.rng import stream
from pgfl.topology import build_graph, combination_matrix
from pgfl.validation import check_choice

#: name -> (P, K, N, M, L, repetitions, curves)
CASES: dict[str, tuple[int, int, int, int, int, int, int]] = {
    "paper": (10, 100, 100, 2, 11, 1, 1),
    "paper_fig2": (10, 100, 100, 2, 11, 4, 3),
    "paper_trials": (10, 100, 100, 2, 11, 32, 3),
    "medium": (20, 1000, 50, 50, 100, 1, 1),
    "large": (100, 1000, 100, 20, 10, 4, 1),
}
SCALES = {
    "paper": ("paper", "paper_fig2", "paper_trials"),
    "medium": ("medium",),
    "large": ("large",),
    "all": tuple(CASES),
}


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def bench_case(name: str, seconds: float = 3.0) -> dict[str, Any]:
    """Time the engine on case ``name`` of :data:`CASES` for about ``seconds``."""
    P, K, N, M, L, R, C = CASES[name]
    data = regression_data(stream(0, "data"), P=P, K=K, N=N, M=M)
    E, B = client_schedule(stream(0, "schedule"), P, K)
    A = combination_matrix(build_graph("ring", P))
    net = Network(data, LeastSquares(0.1), A, L, E, B)
    noise = ("none", "graph_homomorphic", "random")
    curves = [CurveSettings(mu=0.7, server_noise=noise[c % 3], server_std=0.3) for c in range(C)]
    w_opt = net.problem.optimum(data)
    iterations, elapsed = 1, 0.0
    while True:
        start = time.perf_counter()
        simulate(net, curves, iterations=iterations, repetitions=R, w_opt=w_opt)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds or iterations >= 100_000:
            break
        iterations = max(iterations * 2, int(iterations * seconds / max(elapsed, 1e-3) * 1.1))
    rounds = iterations / elapsed
    return {
        "case": name,
        "P": P,
        "K": K,
        "N": N,
        "M": M,
        "L": L,
        "trials": R * C,
        "iterations": iterations,
        "seconds": round(elapsed, 3),
        "rounds_per_s": rounds,
        "client_updates_per_s": rounds * R * C * P * L,
        "peak_rss_gib": round(_peak_rss_gib(), 3),
    }


def run_bench(
    scale: str = "paper", seconds: float = 3.0, log: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Run the cases of ``scale`` (paper, medium, large or all); return a JSON-able dict.

    The top-level ``client_updates_per_s`` and ``rounds_per_s`` are those of the
    paper-scale regression configuration with a single trial (``paper``) when it ran;
    ``paper_fig2`` batches 3 curves x 4 repetitions as ``pgfl reproduce fig2`` does, and
    ``paper_trials`` 3 x 32.
    """
    check_choice("--scale", scale, tuple(SCALES))
    cases = []
    for name in SCALES[scale]:
        if log:
            log(f"bench {name} ...")
        cases.append(bench_case(name, seconds))
    head = cases[0]
    return {
        "client_updates_per_s": head["client_updates_per_s"],
        "rounds_per_s": head["rounds_per_s"],
        "cases": cases,
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, "
        f"python {platform.python_version()}, numpy {np.__version__}",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
