"""Run an experiment: validate and plan, simulate on a backend, save partial results, write.

A run has two steps: :func:`~pgfl.experiments.plan.prepare_experiment` validates
everything (output folder, topology, data files, every curve's settings) without writing
anything, then :func:`run_plan` takes the folder (:func:`pgfl.folders.staged`: created,
marked as pgfl's, locked), has a backend (:mod:`pgfl.backends`) simulate the batches,
computes each curve's privacy accounting while the backend works, saves each batch's
partial results as it finishes (:mod:`pgfl.experiments.partial`) and writes the results
(:func:`pgfl.experiments.results.write_results`), all in the folder's staging folder;
the results replace the folder's only when all are written.
"""

from __future__ import annotations

import json
import os
import stat
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
from pgfl.experiments.privacy import curve_epsilon, resolved_variances
from pgfl.experiments.results import curve_metrics, round_lines, write_results
from pgfl.files import FileError, jsonable, open_folder, write_json, writing
from pgfl.folders import staged

__all__ = ["run_experiment", "run_plan"]


def _open(plan: Plan) -> None:
    """Write ``config.json`` in the run's folder, and the partial files of resumed curves.

    A curve resumed from the partial files a finished run kept (``out/partial``) joins
    this run's (a hard link to the same file where the file system allows, else a copy),
    so that they go together (``run.keep_partial``, an interrupt).
    """
    cfg, work = plan.cfg, plan.work
    with writing(work):
        write_json(work / "config.json", json.loads(plan.fingerprint))
        for i, metrics in plan.loaded.items():
            name = f"curve-{i:03d}.npz"
            if not (work / "partial" / name).is_file() and not _link(plan.out, work, name):
                save_curve(work, i, cfg.curves[i].label, plan.fingerprint, metrics)


def _link(out: Path, work: Path, name: str) -> bool:
    """Hard-link ``out/partial/name`` (a regular file, no link followed) into ``work``."""
    try:
        src = open_folder(out / "partial", create=False)
    except (OSError, FileError):
        return False
    try:
        dst = open_folder(work / "partial")
        try:
            os.link(name, name, src_dir_fd=src, dst_dir_fd=dst, follow_symlinks=False)
            return stat.S_ISREG(os.stat(name, dir_fd=dst, follow_symlinks=False).st_mode)
        except OSError:
            return False
        finally:
            os.close(dst)
    finally:
        os.close(src)


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
                adversary=priv.adversary,
            )
    return out


def _curve_results(
    batch: Batch,
    c: int,
    traj: Any,
    accounted: tuple[dict[str, np.ndarray], dict[str, Any]],
    backend: str,
    phase: str | None = None,
) -> dict[str, np.ndarray]:
    """What is saved of curve ``c`` of a batch: metrics, ε(i), privacy, noise run, engine.

    ``backend`` says which backend simulated the batch (:func:`pgfl.backends.describe`),
    ``phase`` the local phase that ran where the backend says so (deployed clients).
    """
    settings = batch.settings[c]
    metrics = curve_metrics(traj, c)
    eps, entry = accounted
    metrics.update(eps)
    aborts = [(r, i, p) for cc, r, i, p in traj.abort_log if cc == c]
    for m in (settings.client, settings.server):  # a mechanism's own records
        entry.update(m.record(batch.net.L, batch.net.dim, int(traj.aborted[c].sum()),
                              int(traj.clipped[c].sum()), aborts))  # fmt: skip
    metrics["privacy"] = np.array(json.dumps(jsonable(entry)))
    metrics["resolved"] = np.array(json.dumps(jsonable(resolved_variances(settings))))
    engine = {
        "backend": backend,
        "local_phase": phase or local_phase_kind(batch.net.problem),
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
    """Simulate a prepared experiment, saving each batch's partial files; write results.

    The run takes the output folder (:func:`pgfl.folders.staged`: created and marked as
    pgfl's, locked, so that a second run into it stops in one line) and writes into its
    staging folder ``plan.work``: ``config.json``, each batch's partial files as it
    finishes, then the results; only then do they replace the folder's results, so an
    interrupted or failed rerun leaves the earlier results whole. An interrupted run keeps
    its partial files for ``--resume``; one that finishes removes them unless
    ``run.keep_partial`` is set (then they are kept in ``out/partial``). A plan without
    ``output`` (a frontier's sub-run) writes into ``plan.work`` of the frontier that
    holds the folder. ``backend`` simulates the batches (default: the one the
    configuration's ``[run]`` table names, :func:`~pgfl.backends.make_backend`; without
    it this process); every backend gives the same bits. The privacy accounting of the
    curves (which does not depend on the simulation) is computed in a second thread while
    the backend simulates.
    """
    backend = backend or make_backend(plan.cfg.run)
    start = getattr(backend, "start", None)
    if start is not None and plan.batches:
        start()  # joining a cluster fails on a bad address before anything is written
    if plan.output is None:
        _open(plan)
        return _run(plan, backend, on_progress)
    with staged(plan.output):
        _open(plan)
        return _run(plan, backend, on_progress)


def _run(
    plan: Plan, backend: Backend, on_progress: Callable[[str, int, int], None] | None
) -> dict[str, Any]:
    """:func:`run_plan` in the run's folder, ``config.json`` written."""
    cfg, out = plan.cfg, plan.work
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
                phase = getattr(backend, "local_phase", None)
                metrics[i] = _curve_results(batch, c, traj, accounted[i], ran, phase)
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
    force: bool = False,
    on_progress: Callable[[str, int, int], None] | None = None,
    backend: Backend | None = None,
) -> dict[str, Any]:
    """Run every curve of ``cfg``, write the results into ``out``, return the summary.

    ``on_progress(batch_labels, done, total)`` is called as iterations finish (every
    compiled call of up to 64 rounds, or every round).
    With ``resume``, curves already saved by an earlier run of the same configuration are
    loaded instead of recomputed. Everything is validated
    (:func:`~pgfl.experiments.plan.prepare_experiment`) before ``out`` is created or
    touched; a folder holding files pgfl did not write, or results of another
    configuration, is refused unless ``force`` (:func:`pgfl.folders.check_output`).
    ``backend``
    (default: the configuration's ``[run]`` table) simulates; e.g.
    ``backend=pgfl.backends.ray_sweeps.RaySweeps(workers=2)`` runs on a local Ray.
    """
    plan = prepare_experiment(cfg, out, resume=resume, force=force)
    return run_plan(plan, on_progress=on_progress, backend=backend)
