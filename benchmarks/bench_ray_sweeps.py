"""Sweep mode on Ray vs the single-process engine: full presets, wall time and speed-up.

For each preset (default: the full ``fig3`` and ``fig6``), one run with the local engine
(``LocalBackend``) and one on a local Ray with ``--workers`` CPUs (``RaySweeps``), each
end to end as ``pgfl run`` does it (simulation, privacy accounting, files, figure). Ray
is started, and its workers warmed up (each imports pgfl), before the timed runs; that
start-up is reported on its own. The two runs' ``summary.json`` curves must be equal.

    PYTHONPATH=src python benchmarks/bench_ray_sweeps.py [--presets fig3 fig6] [--workers 2]

Prints one line per preset and a JSON document at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path


def _warm() -> int:
    import pgfl.engine  # noqa: F401  (the import a first task would pay)

    return os.getpid()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["fig3", "fig6"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="the presets' quick variants")
    args = parser.parse_args()

    from pgfl.apps.runner import run_experiment
    from pgfl.backends import LocalBackend, ray_session
    from pgfl.backends.ray_sweeps import RaySweeps
    from pgfl.experiments.presets import load_preset

    t0 = time.perf_counter()
    ray = ray_session(workers=args.workers)
    warm = ray.remote(_warm)
    pids = set(ray.get([warm.remote() for _ in range(4 * args.workers)]))
    startup = time.perf_counter() - t0
    print(f"ray start-up (init + {len(pids)} workers importing pgfl): {startup:.2f} s")

    results = {
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs",
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "workers": args.workers,
        "ray_startup_s": round(startup, 2),
        "presets": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.presets:
            cfg = load_preset(name, quick=args.quick)
            times, summaries = {}, {}
            for label, backend in (("local", LocalBackend()), ("ray", RaySweeps())):
                start = time.perf_counter()
                summaries[label] = run_experiment(
                    cfg, Path(tmp) / f"{name}-{label}", backend=backend
                )
                times[label] = time.perf_counter() - start
            same = summaries["local"]["curves"] == summaries["ray"]["curves"]
            speedup = times["local"] / times["ray"]
            print(
                f"{name}: {len(cfg.curves)} curves x {cfg.repetitions} repetitions x "
                f"{cfg.iterations} iterations; local {times['local']:.2f} s, ray "
                f"{times['ray']:.2f} s, speed-up {speedup:.2f}x, identical summaries: {same}"
            )
            results["presets"][name] = {
                "local_s": round(times["local"], 2),
                "ray_s": round(times["ray"], 2),
                "speedup": round(speedup, 2),
                "identical": same,
            }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
