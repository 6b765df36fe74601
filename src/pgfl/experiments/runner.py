"""Run an experiment: validate and plan, simulate on a backend, save partial results, write.

A run has two steps: :func:`~pgfl.experiments.plan.prepare_experiment` validates
everything (output folder, topology, data files, every curve's settings) without writing
anything, then :func:`run_plan` creates the folder, has a backend
(:mod:`pgfl.backends`) simulate the batches, computes each curve's privacy accounting
while the backend works, saves each batch's partial results as it finishes
(:mod:`pgfl.experiments.partial`) and writes the results
(:func:`pgfl.experiments.results.write_results`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from pgfl.backends import Backend, describe, make_backend
from pgfl.engine.compiled import local_phase_kind
from pgfl.engine.floor import centroid_bias
from pgfl.experiments.config import ExperimentConfig
from pgfl.experiments.partial import remove_partial, save_curve
from pgfl.experiments.plan import Batch, Plan, prepare_experiment
from pgfl.experiments.privacy import curve_epsilon, resolved_variances, secagg_entry
from pgfl.experiments.results import clear_results, curve_metrics, round_lines, write_results
from pgfl.files import jsonable, output_lock, write_json, writing

__all__ = ["run_experiment", "run_plan"]


def _open(plan: Plan) -> None:
    """Clear an earlier run's results from the (locked) output folder; write ``config.json``."""
    with writing(plan.out):
        clear_results(plan.out)
        write_json(plan.out / "config.json", json.loads(plan.fingerprint))


def _accounting(plan: Plan) -> dict[int, tuple[dict[str, np.ndarray], dict[str, Any]]]:
    """ε(i) and the privacy entry of every curve to simulate, by curve index."""
    cfg = plan.cfg
    out = {}
    for batch in plan.batches:
        for c, i in enumerate(batch.indices):
            priv = cfg.curves[i].privacy
            out[i] = curve_epsilon(
                batch.settings[c],
                batch.net,
                cfg.iterations,
                delta=priv.delta,
                accountants=priv.accountants,
                checkpoints=priv.epsilon_checkpoints,
            )
    return out


def _curve_results(
    batch: Batch,
    c: int,
    traj: Any,
    accounted: tuple[dict[str, np.ndarray], dict[str, Any]],
    backend: str,
) -> dict[str, np.ndarray]:
    """What is saved of curve ``c`` of a batch: metrics, ε(i), privacy, noise run, engine.

    ``backend`` says which backend simulated the batch (:func:`pgfl.backends.describe`).
    """
    settings = batch.settings[c]
    metrics = curve_metrics(traj, c)
    eps, entry = accounted
    metrics.update(eps)
    if settings.client.name == "secure_aggregation":
        entry["secure_aggregation"] = secagg_entry(settings.client, traj, c, batch.net.L)
    metrics["privacy"] = np.array(json.dumps(jsonable(entry)))
    metrics["resolved"] = np.array(json.dumps(jsonable(resolved_variances(settings))))
    engine = {
        "backend": backend,
        "local_phase": local_phase_kind(batch.net.problem),
        "iota2": batch.net.iota2,
    }
    metrics["engine"] = np.array(json.dumps(jsonable(engine)))
    bias = centroid_bias(batch.net, settings, batch.w_opt)
    if bias is not None:  # graph-homomorphic noise on a non-linear loss: the MSD's floor
        metrics["centroid_bias"] = np.array(bias)
    return metrics


def _engine(cfg: ExperimentConfig, metrics: dict[int, dict[str, np.ndarray]]) -> tuple:
    """``iota2`` per topology kind, the backends and local phases that ran, from the curves.

    Read from every curve's saved metrics, so a run resumed from partial files reports
    what the interrupted one computed (curves saved by an older pgfl lack them); a run
    whose curves were simulated by different backends (resumed on another) names each.
    """
    iota: dict[str, float] = {}
    facts_seen: dict[str, set[str]] = {"backend": set(), "local_phase": set()}
    for i in sorted(metrics):
        if "engine" in metrics[i]:
            facts = json.loads(str(metrics[i]["engine"]))
            iota.setdefault(cfg.curves[i].topology.kind, facts["iota2"])
            for key, seen in facts_seen.items():
                if key in facts:
                    seen.add(facts[key])
    join = {"backend": " + ", "local_phase": "+"}
    engine = {k: join[k].join(sorted(v)) or "unknown (resumed)" for k, v in facts_seen.items()}
    return iota, engine


def run_plan(
    plan: Plan,
    *,
    on_progress: Callable[[str, int, int], None] | None = None,
    backend: Backend | None = None,
) -> dict[str, Any]:
    """Simulate a prepared experiment, saving each batch in ``out/partial``; write results.

    The run holds the output folder's lock (:func:`~pgfl.files.output_lock`: a second run
    into the same folder stops in one line), deletes an earlier run's results
    (:func:`~pgfl.experiments.results.clear_results`) and writes ``config.json``; a
    partial file from an earlier run is replaced only when its curve finishes again, so an
    interrupted rerun never loses results and never leaves another run's beside its own.
    A run that finishes removes ``out/partial`` unless ``run.keep_partial`` is set; an
    interrupted one (Ctrl-C, a stopped backend) keeps it for ``--resume``.
    ``backend`` simulates the batches (default: the one the configuration's ``[run]``
    table names, :func:`~pgfl.backends.make_backend`; without it this process); every
    backend gives the same bits. The privacy accounting of the curves (which does not
    depend on the simulation) is computed in a second thread while the backend simulates.
    """
    backend = backend or make_backend(plan.cfg.run)
    start = getattr(backend, "start", None)
    if start is not None and plan.batches:
        start()  # joining a cluster fails on a bad address before anything is written
    with output_lock(plan.out):
        _open(plan)
        return _run(plan, backend, on_progress)


def _run(
    plan: Plan, backend: Backend, on_progress: Callable[[str, int, int], None] | None
) -> dict[str, Any]:
    """:func:`run_plan` in the locked output folder, ``config.json`` written."""
    cfg, out = plan.cfg, plan.out
    started = time.perf_counter()
    metrics = dict(plan.loaded)
    progress = None
    if on_progress is not None:

        def progress(batch: Batch, done: int) -> None:
            labels = ", ".join(cfg.curves[i].label for i in batch.indices)
            on_progress(labels, done, cfg.iterations)

    results = backend.trajectories(plan, progress)
    # the accounting does not depend on the simulation: a second thread computes it while
    # the backend simulates (the compiled kernels release the GIL)
    pool = ThreadPoolExecutor(1, thread_name_prefix="pgfl-accounting")
    try:
        pending = pool.submit(_accounting, plan)
        for batch, traj in results:
            accounted = pending.result()
            ran = describe(backend)  # after the batch: what it ran on (Ray's workers, actors)
            for c, i in enumerate(batch.indices):
                metrics[i] = _curve_results(batch, c, traj, accounted[i], ran)
                with writing(out):
                    save_curve(out, i, cfg.curves[i].label, plan.fingerprint, metrics[i])
            with writing(out):  # the batch's rounds, as it finishes (the end rewrites run.log)
                curves = [(cfg.curves[i].label, metrics[i]) for i in batch.indices]
                with (out / "run.log").open("a", encoding="utf-8") as log:
                    log.writelines(
                        f"{line}\n" for line in round_lines(cfg.iterations, list(cfg.plot), curves)
                    )
        pending.result()  # an accounting error surfaces even when every curve was resumed
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        close = getattr(results, "close", None)
        if close is not None:
            close()  # an interrupted backend stops its unfinished work
    iota, engine = _engine(cfg, metrics)
    with writing(out):
        elapsed = time.perf_counter() - started
        summary = write_results(cfg, out, metrics, elapsed=elapsed, iota2=iota, engine=engine)
    if not cfg.run.keep_partial:  # finished: --resume has nothing left to continue
        remove_partial(out)
    return summary


def run_experiment(
    cfg: ExperimentConfig,
    out: str | Path,
    *,
    resume: bool = False,
    on_progress: Callable[[str, int, int], None] | None = None,
    backend: Backend | None = None,
) -> dict[str, Any]:
    """Run every curve of ``cfg``, write the results into ``out``, return the summary.

    ``on_progress(batch_labels, done, total)`` is called after every iteration.
    With ``resume``, curves already saved in ``out/partial`` by an earlier run of the
    same configuration are loaded instead of recomputed. Everything is validated
    (:func:`~pgfl.experiments.plan.prepare_experiment`) before ``out`` is created or
    touched. ``backend``
    (default: the configuration's ``[run]`` table) simulates; e.g.
    ``backend=pgfl.backends.ray_sweeps.RaySweeps(workers=2)`` runs on a local Ray.
    """
    plan = prepare_experiment(cfg, out, resume=resume)
    return run_plan(plan, on_progress=on_progress, backend=backend)
