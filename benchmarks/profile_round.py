"""Where one GFL round's time goes at the papers' scale: the split between the phases.

Runs the phases of :func:`pgfl.engine.step.round_step` by hand (one block, as the engine
does at this scale) and times each over many rounds, for the numpy and the compiled local
phase; ``simulate`` end to end round by round gives the bookkeeping (divergence check,
history, metrics) as the remainder, and ``simulate`` as it runs by default (whole rounds in
compiled calls, :mod:`pgfl.engine.rounds`) the last row. Prints microseconds per round
and each row's share of the round-by-round round.

    PYTHONPATH=src python benchmarks/profile_round.py [--case paper|paper_fig2|paper_trials]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from pgfl.bench import CASES, COMPARE, bench_network, compare_network
from pgfl.engine import CurveSettings, compiled, simulate
from pgfl.engine import rounds as whole_rounds
from pgfl.engine.settings import CurveBatch
from pgfl.engine.step import _rows, combine_phase, draw_clients, local_models, server_messages
from pgfl.privacy.mechanisms import RoundContext
from pgfl.rng import KeyedDraws


def profile(case: str, kind: str, rounds: int) -> dict[str, float]:
    """Microseconds per round of each phase (and of ``simulate`` as a whole)."""
    os.environ[compiled.ENV] = kind
    if case in CASES:
        net, curves, R, w_opt = bench_network(case)
    else:  # a workload of pgfl bench --compare
        net, curves, R = compare_network(case), [CurveSettings(mu=0.5)], 1
        w_opt = np.zeros(net.dim)
    batch = CurveBatch.of(curves)
    block, links = net.block(), net.links
    fn = compiled.local_models if kind == "compiled" else local_models
    sample = compiled.draw_clients if kind == "compiled" else draw_clients
    W = np.zeros((len(curves), R, net.data.shape[0], net.dim))
    reps = np.arange(R)
    t = dict.fromkeys(("draws", "clients", "local SGD", "aggregate", "messages", "combine"), 0.0)
    simulate(net, curves, iterations=2, repetitions=R, w_opt=w_opt)  # warm-up (compile)
    for i in range(1, rounds + 1):
        t0 = time.perf_counter()
        draws = KeyedDraws(0, i, reps, block.units)
        t1 = time.perf_counter()
        clients = sample(block, draws)
        t2 = time.perf_counter()
        local = fn(W, block, batch, draws, clients)
        t3 = time.perf_counter()
        psi = np.empty_like(W)
        ctx = RoundContext(draws, 0, i)
        for g in batch.client_groups:
            out = g.cls.aggregate(
                g.schemes, _rows(W, g.index), _rows(local, g.index), batch.mu[g.index],
                batch.updates[g.index], ctx,
            )  # fmt: skip
            psi[g.index] = out.psi
        t4 = time.perf_counter()
        messages = server_messages(psi, links, batch, draws, 0, i)
        t5 = time.perf_counter()
        W = combine_phase(messages, links, 0, net.data.shape[0])
        t6 = time.perf_counter()
        for key, a, b in zip(t, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6), strict=True):
            t[key] += b - a
    split = {k: v / rounds * 1e6 for k, v in t.items()}
    whole_rounds.WHOLE_ROUNDS = False  # round by round: the phases above, and the bookkeeping
    start = time.perf_counter()
    simulate(net, curves, iterations=rounds, repetitions=R, w_opt=w_opt)
    split["simulate (whole round)"] = (time.perf_counter() - start) / rounds * 1e6
    whole_rounds.WHOLE_ROUNDS = True
    phases = sum(t.values()) / rounds * 1e6
    split["bookkeeping (remainder)"] = split["simulate (whole round)"] - phases
    if kind == "compiled":  # simulate's default: whole rounds in compiled calls
        start = time.perf_counter()
        simulate(net, curves, iterations=rounds, repetitions=R, w_opt=w_opt)
        split["compiled rounds (default)"] = (time.perf_counter() - start) / rounds * 1e6
    return split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="paper", choices=sorted({*CASES, *COMPARE}))
    parser.add_argument("--rounds", type=int, default=500)
    args = parser.parse_args()
    if args.case in CASES:
        P, K, N, M, L, R, C = CASES[args.case]
    else:
        (P, K, N, M, L, *_), R, C = COMPARE[args.case], 1, 1
    updates = P * L * R * C
    print(f"case {args.case}: P={P} K={K} N={N} M={M} L={L}, {R * C} trials, {updates} "
          f"client updates per round; microseconds per round (machine may be loaded)")  # fmt: skip
    for kind in ("numpy", "compiled"):
        split = profile(args.case, kind, args.rounds)
        whole = split["simulate (whole round)"]
        print(f"-- local phase: {kind}: {updates / whole * 1e6:,.0f} client updates/s")
        for key, us in split.items():
            print(f"  {key:<26} {us:9.1f} us  {us / whole:6.1%}")


if __name__ == "__main__":
    main()
