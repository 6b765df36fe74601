"""Actor mode vs the single-process engine: per-round time, overhead and bytes per round.

For each network size P (default 10, 100, 1000 units; K clients each), the same network
(Erdős–Rényi, edge probability ``2 ln P / P``, connected) is simulated by the local engine
(``pgfl.engine.simulate``) and by ``RayActors`` on a local Ray with ``--workers`` CPUs.
A round's time is measured between the first checkpoint and the end of the run (``--rounds``
rounds, metric reductions and checkpoints included), so start-up (actors building their
data, ``w°``) is left out and reported on its own. Bytes
per round: the messages ``ψ + g`` that cross actor boundaries (float64), and what the
driver receives (block sums ``[C, R, M]``, flags and reports per block and round). The
two runs' server models must be bit-identical.

    PYTHONPATH=src python benchmarks/bench_ray_actors.py [--sizes 10 100 1000] [--actors 2]

Prints one line per size and a JSON document at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time


def _config(P: int, K: int, rounds: int, M: int = 2):
    from pgfl.experiments.loader import parse_config

    prob = 1.0 if P <= 3 else min(1.0, 2.0 * math.log(P) / P)
    return parse_config(
        {
            "name": f"actors-{P}",
            "iterations": rounds,
            "repetitions": 1,
            "seed": 1,
            "topology": {"kind": "erdos_renyi", "P": P, "probability": prob},
            "data": {"K": K, "N": 20, "M": M},
            "training": {"L": max(1, K // 2), "mu": 0.3, "epochs": 1, "batch": 5},
            "privacy": {"server_variance": 0.01},
            "curves": [{"label": "gh", "privacy": {"server_noise": "graph_homomorphic"}}],
        }
    )


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10, 100, 1000])
    parser.add_argument("--clients", type=int, default=10, help="K, clients per unit")
    parser.add_argument("--dim", type=int, default=2, help="M, model dimension")
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--rounds", type=int, default=48, help="rounds timed after the first checkpoint"
    )
    parser.add_argument("--checkpoint-every", type=int, default=16)
    args = parser.parse_args()

    import numpy as np

    from pgfl.backends import ray_session
    from pgfl.backends.ray_actors import RayActors, plan_blocks
    from pgfl.engine import simulate
    from pgfl.experiments.build import build_network, curve_settings

    ray_session(workers=args.workers)
    results = {
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs",
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "workers": args.workers,
        "actors": args.actors,
        "dim": args.dim,
        "clients_per_unit": args.clients,
        "checkpoint_every": args.checkpoint_every,
        "sizes": {},
    }
    for P in args.sizes:
        T = args.checkpoint_every + args.rounds
        cfg = _config(P, args.clients, T, args.dim)
        curve = cfg.curves[0]
        net = build_network(curve, cfg.seed)
        settings = [curve_settings(curve, cfg.iterations, net)]
        C, R, M = 1, 1, net.dim
        stamps: dict[str, dict[int, float]] = {"local": {}, "actors": {}}
        backend = RayActors(actors=args.actors, checkpoint_every=args.checkpoint_every)
        t0 = time.perf_counter()
        local = simulate(
            net,
            settings,
            iterations=T,
            seed=cfg.seed,
            progress=lambda i, s=stamps["local"]: s.__setitem__(i, time.perf_counter()),
        )
        t1 = time.perf_counter()
        actors = backend.simulate(
            curve,
            settings,
            iterations=T,
            seed=cfg.seed,
            progress=lambda i, s=stamps["actors"]: s.__setitem__(i, time.perf_counter()),
        )
        t2 = time.perf_counter()
        same = bool(np.array_equal(local.W, actors.W))
        # a round's time: between the first checkpoint and the end (start-up left out)
        first = args.checkpoint_every
        per_round = {k: (v[T] - v[first]) / (T - first) * 1e3 for k, v in stamps.items()}
        startup = stamps["actors"][first] - t1 - first * per_round["actors"] / 1e3
        plans = plan_blocks(net.links, min(args.actors, P))
        driver = sum(C * R * M * 8 + C * R * 2 + C * R * (p.stop - p.start) + C * R * 8
                     for p in plans)  # fmt: skip
        row = {
            "links": int(net.links.src.size),
            "local_ms_per_round": round(per_round["local"], 3),
            "actors_ms_per_round": round(per_round["actors"], 3),
            "overhead_ms_per_round": round(per_round["actors"] - per_round["local"], 3),
            "actors_startup_s": round(startup, 2),
            "local_total_s": round(t1 - t0, 2),
            "actors_total_s": round(t2 - t1, 2),
            "driver_submit_ms_per_round": round(backend.submit_seconds / T * 1e3, 3),
            "message_bytes_per_round": backend.message_bytes,
            "driver_bytes_per_round": int(driver),
            "same_models": bool(same),
            "load": _load(),
        }
        results["sizes"][str(P)] = row
        print(
            f"P={P:5d} links={row['links']:6d}  local {row['local_ms_per_round']:8.2f} ms/round"
            f"  actors {row['actors_ms_per_round']:8.2f} ms/round"
            f"  (+{row['overhead_ms_per_round']:.2f}; driver submits"
            f" {row['driver_submit_ms_per_round']:.2f})  start-up {row['actors_startup_s']:.1f} s"
            f"  messages {row['message_bytes_per_round']} B/round  same={same}  load {_load()}",
            flush=True,
        )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
