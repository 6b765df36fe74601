"""Engine throughput: client updates per second at the papers' scale and beyond.

A *client update* is one sampled client's whole local training in one iteration (all its
epochs), for one trial (curve x repetition). ``rounds_per_s`` counts GFL iterations of
the whole batched network per second. Timings are wall-clock on whatever machine runs
them; record them with the machine and date (BENCHMARKS.md), never assert them in tests.

``pgfl bench --threads`` measures the same cases at 1, 2, 4, ... threads of the compiled
local phase (numba's thread count, up to its pool size: the cores by default) and fits
Amdahl's law ``S(n) = 1 / (s + (1 - s)/n)`` to the speed-ups: ``s`` is the share of a
round that does not run in parallel (numpy steps, the sampler of small rounds, thread
start-up and imbalance).
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

from pgfl.data.synthetic import client_schedule, logistic_data, regression_data
from pgfl.engine import CurveSettings, Network, compiled, rounds, simulate
from pgfl.engine.compiled import local_phase_kind
from pgfl.engine.rounds import CompiledRounds
from pgfl.engine.settings import CurveBatch
from pgfl.privacy.mechanisms import GraphHomomorphic, NoServerNoise, RandomNoise
from pgfl.problems import LeastSquares, Logistic
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
    "wide": (10, 10_000, 20, 2, 11, 1, 1),
}
SCALES = {
    "paper": ("paper", "paper_fig2", "paper_trials"),
    "medium": ("medium",),
    "large": ("large",),
    "wide": ("wide",),
    "all": tuple(CASES),
}


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def bench_network(name: str) -> tuple[Network, list[CurveSettings], int, np.ndarray]:
    """Network, curves, repetitions and ``w°`` of case ``name`` of :data:`CASES`."""
    P, K, N, M, L, R, C = CASES[name]
    data = regression_data(stream(0, "data"), P=P, K=K, N=N, M=M)
    E, B = client_schedule(stream(0, "schedule"), P, K)
    A = combination_matrix(build_graph("ring", P))
    net = Network(data, LeastSquares(0.1), A, L, E, B)
    noise = (NoServerNoise(), GraphHomomorphic(std=0.3), RandomNoise(std=0.3))
    curves = [CurveSettings(mu=0.7, server=noise[c % 3]) for c in range(C)]
    return net, curves, R, net.problem.optimum(data)


def bench_case(name: str, seconds: float = 3.0) -> dict[str, Any]:
    """Time the engine on case ``name`` of :data:`CASES` for about ``seconds``.

    Also says how the rounds ran (``rounds``: compiled, several per call, or round by
    round; ``workers``: the threads of a compiled call) and the data's size (``Xy``).
    """
    P, K, N, M, L, R, C = CASES[name]
    net, curves, R, w_opt = bench_network(name)
    fast = CompiledRounds.prepare(net, CurveBatch.of(curves, net), seed=0, reps=np.arange(R))
    simulate(net, curves, iterations=1, repetitions=R, w_opt=w_opt)  # compile / load kernels
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
        "rounds": "round by round" if fast is None else "compiled",
        "workers": 1 if fast is None else fast.workers,
        "data_mib": round(net.data.Xy.nbytes / 2**20, 2),
        "peak_rss_gib": round(_peak_rss_gib(), 3),
    }


def _machine() -> str:
    return (
        f"{platform.machine()} {os.cpu_count()} cpus, "
        f"python {platform.python_version()}, numpy {np.__version__}"
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def thread_counts(most: int) -> list[int]:
    """``1, 2, 4, ...`` below ``most``, then ``most``: the points of a thread curve.

    >>> thread_counts(16), thread_counts(6), thread_counts(1)
    ([1, 2, 4, 8, 16], [1, 2, 4, 6], [1])
    """
    counts, n = [], 1
    while n < most:
        counts.append(n)
        n *= 2
    return [*counts, most]


def amdahl_serial_fraction(threads: int, speedup: float) -> float | None:
    """Amdahl's serial fraction ``s`` from the speed-up ``S`` on ``threads`` > 1 threads.

    ``S = 1 / (s + (1 - s)/n)`` gives ``s = (n/S - 1)/(n - 1)``; ``None`` for one thread.

    >>> round(amdahl_serial_fraction(2, 1.6), 3)   # 1.6x on 2 threads: a quarter is serial
    0.25
    """
    if threads <= 1:
        return None
    return (threads / speedup - 1.0) / (threads - 1.0)


def amdahl_speedup(serial_fraction: float, threads: int) -> float:
    """Amdahl's speed-up ``1 / (s + (1 - s)/n)`` on ``threads`` threads.

    >>> round(amdahl_speedup(0.25, 16), 2)
    3.37
    """
    return 1.0 / (serial_fraction + (1.0 - serial_fraction) / threads)


def _with_threads(counts: list[int], measure: Callable[[int], Any]) -> list[Any]:
    """``measure(n)`` with the compiled kernels on ``n`` threads, for each ``n`` of ``counts``.

    Every compiled call of rounds large enough for the threads runs on all ``n`` (not the
    faster of one and ``n``, as runs do: :data:`pgfl.engine.rounds.ADAPTIVE`).
    """
    old, adaptive = compiled.set_threads(None), rounds.ADAPTIVE
    rounds.ADAPTIVE = False
    try:
        out = []
        for n in counts:
            compiled.set_threads(n)
            out.append(measure(n))
        return out
    finally:
        compiled.set_threads(old)
        rounds.ADAPTIVE = adaptive


def _runs_parallel(name: str) -> bool:
    """Whether case ``name``'s local SGD is above the parallel threshold in force."""
    P, K, N, M, L, R, C = CASES[name]
    block = bench_network(name)[0].block()
    work = C * R * P * L * int(block.e_max) * int(block.b_max) * M
    return work >= compiled._threshold(compiled.PARALLEL_WORK)


def bench_threads(
    scale: str = "paper",
    seconds: float = 3.0,
    log: Callable[[str], None] | None = None,
    counts: list[int] | None = None,
) -> dict[str, Any]:
    """The cases of ``scale`` at each thread count of ``counts`` (default: 1, 2, 4, ... cores).

    Returns a JSON-able dict: ``curve`` (one entry per case and thread count: client
    updates/s, rounds/s, speed-up over one thread) and ``amdahl`` per case: the serial
    fraction ``s`` fitted from one thread and the most threads measured, and what it
    predicts on 16 threads (``parallel_kernel``: False when the case's local SGD is below
    the parallel threshold and runs on one thread anyway); ``workers_spin``: whether idle
    workers spin
    (:func:`pgfl.engine.compiled.spinning`), which decides how small a round goes parallel.
    """
    check_choice("--scale", scale, tuple(SCALES))
    counts = counts or thread_counts(compiled.max_threads())

    def measure(n: int) -> list[dict[str, Any]]:
        rows = []
        for name in SCALES[scale]:
            if log:
                log(f"bench {name} on {n} thread(s) ...")
            rows.append({**bench_case(name, seconds), "threads": n})
        return rows

    points = [row for rows in _with_threads(counts, measure) for row in rows]
    amdahl = {}
    for name in SCALES[scale]:
        parallel = _runs_parallel(name)
        mine = [p for p in points if p["case"] == name]
        for p in mine:
            p["parallel_kernel"] = parallel and p["threads"] > 1
        one = mine[0]["client_updates_per_s"]
        for p in mine:
            p["speedup"] = p["client_updates_per_s"] / one
        last = mine[-1]
        s = amdahl_serial_fraction(last["threads"], last["speedup"])
        amdahl[name] = {
            "parallel_kernel": parallel,
            "threads": [mine[0]["threads"], last["threads"]],
            "serial_fraction": s,
            "predicted_speedup_16": None
            if s is None
            else amdahl_speedup(min(max(s, 0.0), 1.0), 16),
        }
    return {
        "threads": counts,
        "local_phase": compiled.local_phase_kind(LeastSquares(0.1)),
        "workers_spin": compiled.spinning(),
        "curve": points,
        "amdahl": amdahl,
        "machine": _machine(),
        "date": _now(),
    }


def run_bench(
    scale: str = "paper", seconds: float = 3.0, log: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Run the cases of ``scale`` (paper, medium, large, wide or all); return a JSON-able dict.

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
        "machine": _machine(),
        "date": _now(),
    }


#: ``pgfl bench --compare`` workloads: name -> (P, K, N, M, L, epochs, batch, loss).
#: ``flower`` is the Flower simulation harness's workload (one unit, 1,000 clients of 50
#: samples, 100 sampled per round, 5 local steps of 10 samples, logistic regression, d = 20).
COMPARE: dict[str, tuple[int, int, int, int, int, Any, Any, str]] = {
    "paper": (10, 100, 100, 2, 11, (1, 10), (5, 10), "least_squares"),
    "flower": (1, 1000, 50, 20, 100, 5, 10, "logistic"),
}


def compare_network(name: str) -> Network:
    """The network of workload ``name`` of :data:`COMPARE` (ring graph; one unit: ``A = [1]``)."""
    P, K, N, M, L, epochs, batch, loss = COMPARE[name]
    if loss == "logistic":
        data, problem = logistic_data(stream(0, "data"), P=P, K=K, N=N, M=M), Logistic(0.01)
    else:
        data, problem = regression_data(stream(0, "data"), P=P, K=K, N=N, M=M), LeastSquares(0.1)
    E, B = client_schedule(stream(0, "schedule"), P, K, epochs=epochs, batch=batch)
    A = np.ones((1, 1)) if P == 1 else combination_matrix(build_graph("ring", P))
    return Network(data, problem, A, L, E, B)


def loop_round(W: np.ndarray, net: Network, mu: float, rng: np.random.Generator) -> np.ndarray:
    """One GFL round the plain way: a Python loop over units, clients and epochs (numpy).

    The baseline of ``pgfl bench --compare``: the same work as the engine's round (eqs. 3,
    7, 8 of arXiv:2203.07105 with no privacy noise): each unit samples ``L`` clients
    without replacement, each runs ``E_pk`` steps of size ``μ/E_pk`` on ``B_pk`` samples
    drawn with replacement (all its samples for full batches), the unit averages the local
    models and the servers combine, ``W ← A W``. ``W[P, M]``; draws from ``rng``.
    """
    data, problem = net.data, net.problem
    P, K = data.counts.shape
    psi = np.empty_like(W)
    for p in range(P):
        total = np.zeros(W.shape[1])
        for k in rng.choice(K, net.L, replace=False):
            w, n, E = W[p].copy(), data.counts[p, k], net.epochs[p, k]
            for _ in range(E):
                idx = np.arange(n) if net.batch is None else rng.integers(0, n, net.batch[p, k])
                U, d = data.X[p, k, idx], data.y[p, k, idx]
                c = problem.residual_weight(U @ w, d)
                w -= (mu / E) * (U.T @ c / len(idx) + 2.0 * problem.rho * w)
            total += w
        psi[p] = total / net.L
    return net.A @ psi


def _timed(step: Callable[[int], None], seconds: float) -> tuple[int, float]:
    """Run ``step(n)`` (n rounds) with growing ``n`` until it takes ``seconds``."""
    n = 1
    while True:
        start = time.perf_counter()
        step(n)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds or n >= 100_000:
            return n, elapsed
        n = max(n * 2, int(n * seconds / max(elapsed, 1e-3) * 1.1))


#: Engine/loop pairs of ``pgfl bench --compare``, timed in turn (A B A B ...).
COMPARE_PAIRS = 3


def _compare_one(name: str, seconds: float, counts: list[int] | None = None) -> list[dict]:
    """One workload: the engine (on each thread count of ``counts``) and the loop, interleaved.

    :data:`COMPARE_PAIRS` pairs, each the engine then the loop for ``seconds / pairs``
    each (``pairs``: their rates); the rates are the medians and the ratio the median of
    the pairs' ratios, so that a change of the machine's speed between pairs (other jobs)
    cancels.
    """
    net = compare_network(name)
    P, L, M = net.data.shape[0], net.L, net.dim
    curves = [CurveSettings(mu=0.5)]
    w_opt = np.zeros(M)
    simulate(net, curves, iterations=1, w_opt=w_opt)  # compile / warm up
    rounds = CompiledRounds.prepare(net, CurveBatch.of(curves, net), seed=0, reps=np.arange(1))
    each = seconds / COMPARE_PAIRS
    rng = stream(0, "bench.loop")

    def engine() -> float:
        n, t = _timed(lambda n: simulate(net, curves, iterations=n, w_opt=w_opt), each)
        return n * P * L / t

    def loop() -> float:
        def rounds_(n: int) -> None:
            W = np.zeros((P, M))
            for _ in range(n):
                W = loop_round(W, net, 0.5, rng)

        n, t = _timed(rounds_, each)
        return n * P * L / t

    def pairs(_: int | None = None) -> list[tuple[float, float]]:
        return [(engine(), loop()) for _ in range(COMPARE_PAIRS)]

    measured = [pairs()] if counts is None else _with_threads(counts, pairs)
    rows = []
    for i, runs in enumerate(measured):
        a, b = np.array(runs).T
        row = {
            "workload": name,
            "P": P,
            "K": int(net.data.shape[1]),
            "M": M,
            "L": L,
            "loss": net.problem.name,
            "local_phase": local_phase_kind(net.problem),
            "rounds": "round by round" if rounds is None else "compiled",
            "pgfl_client_updates_per_s": float(np.median(a)),
            "loop_client_updates_per_s": float(np.median(b)),
            "ratio": float(np.median(a / b)),
            "pairs": [list(map(float, r)) for r in runs],
        }
        if counts is not None:
            row["threads"] = counts[i]
        rows.append(row)
    return rows


def compare(
    seconds: float = 3.0,
    log: Callable[[str], None] | None = None,
    counts: list[int] | None = None,
) -> dict[str, Any]:
    """Pgfl against a per-client numpy loop (:func:`loop_round`) on the same work.

    In one process, for each workload of :data:`COMPARE`: client updates per second of
    :func:`pgfl.engine.simulate` (one trial, no noise, default settings) and of the loop,
    timed in turn (:func:`_compare_one`), and their ratio. With ``counts`` (``pgfl bench
    --compare --threads``) pgfl is measured on each of those thread counts, each against
    loops timed beside it, one row per count.
    """
    rows = []
    for name in COMPARE:
        if log:
            log(f"compare {name} ...")
        rows.extend(_compare_one(name, seconds, counts))
    return {"compare": rows, "machine": _machine(), "date": _now()}
