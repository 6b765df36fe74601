"""A validated experiment ready to run: its batches of curves, nothing written yet.

Curves that share their structure (topology, data, everything in training but the step
size, sharing mode and clipping) run as one vectorized simulation, a :class:`Batch`.
:func:`prepare_experiment` validates everything a run needs (output folder, ``--resume``,
topology, data files, every curve's settings and mechanisms) without writing anything and
returns the :class:`Plan` that a backend simulates. The run writes into the output folder's
staging folder and its results replace the folder's only when it completes
(:mod:`pgfl.folders`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pgfl.engine import CurveBatch, CurveSettings, Network
from pgfl.experiments.build import build_network, curve_settings
from pgfl.experiments.config import ExperimentConfig
from pgfl.experiments.partial import config_fingerprint, load_curve
from pgfl.files import FileError, check_output_folder, read_json
from pgfl.folders import STAGE, Output, check_output, digest_of
from pgfl.validation import ConfigError

__all__ = ["Batch", "Plan", "prepare_experiment"]


@dataclass(frozen=True)
class Batch:
    """Curves simulated together: their indices in the config, network and curves.

    ``curves`` were checked against ``net`` when the batch was planned
    (:meth:`~pgfl.engine.settings.CurveBatch.of`), so a backend runs them unchecked.
    ``w_opt`` is the optimum ``w°`` of the MSD metrics, solved at planning (``None``
    where the problem has none, or where the data lives in Ray actors, which solve it).
    """

    indices: tuple[int, ...]
    net: Network
    curves: CurveBatch
    w_opt: np.ndarray | None = None

    @property
    def settings(self) -> tuple[CurveSettings, ...]:
        """The curves' settings, in the batch's order."""
        return self.curves.settings


@dataclass(frozen=True)
class Plan:
    """A validated experiment ready to run: nothing of it has touched the output folder.

    Attributes:
        cfg: the configuration.
        out: the output folder (checked writable, not yet created).
        fingerprint: the configuration's identity, stored in ``config.json`` and in
            every partial file.
        loaded: metrics of curves resumed from partial files (by curve index).
        batches: the curves still to simulate, grouped by shared structure.
        work: the folder the run writes in (``config.json``, ``partial/``, results): the
            staging folder of ``out`` (:data:`pgfl.folders.STAGE`).
        resume: whether a backend may reuse its own partial results in ``work/partial``.
        output: ``out`` as checked for this run (:func:`pgfl.folders.check_output`);
            ``None`` for a run that is part of a larger one (a frontier's sub-run), whose
            folder the larger run holds and commits.
        resumed_from: the folder ``--resume`` loaded partial files from (``work``: an
            interrupted run of this configuration; ``out``: the files a finished one kept).

    """

    cfg: ExperimentConfig
    out: Path
    fingerprint: str
    loaded: dict[int, dict[str, np.ndarray]]
    batches: tuple[Batch, ...]
    work: Path
    resume: bool = False
    output: Output | None = None
    resumed_from: Path | None = None


def _changed(stored: object, now: dict) -> str:
    """What differs between an interrupted run's ``config.json`` and this configuration."""
    files = [
        path
        for key in ("data_files", "model_code")
        for path, digest in now.get(key, {}).items()
        if not isinstance(stored, dict) or stored.get(key, {}).get(path) != digest
    ]
    same_config = isinstance(stored, dict) and all(
        stored.get(k) == v for k, v in now.items() if k not in ("data_files", "model_code")
    )
    if files and same_config:
        return (
            f"{', '.join(files)} changed since the interrupted run, whose results came from "
            "the old file; drop --resume to recompute every curve, or use a new --out"
        )
    return (
        "the output folder's config.json was written by a different configuration; "
        "use a new --out directory or drop --resume"
    )


def _resume_from(folders: list[Path], fingerprint: str) -> Path | None:
    """The first folder whose ``config.json`` is this configuration's (``--resume``).

    ``None`` when no folder has one; refused (:class:`ConfigError`, naming what changed)
    when every ``config.json`` there is of another configuration.
    """
    stored = []
    for folder in folders:
        path = folder / "config.json"
        if path.is_file() and not path.is_symlink():
            try:
                text = read_json(path)
            except (OSError, ValueError) as exc:
                raise FileError(f"--resume: cannot read {path} ({exc})") from exc
            if json.dumps(text, sort_keys=True) == fingerprint:
                return folder
            stored.append(text)
    if stored:
        raise ConfigError(f"--resume: {_changed(stored[0], json.loads(fingerprint))}")
    return None


def prepare_experiment(
    cfg: ExperimentConfig,
    out: str | Path,
    *,
    resume: bool = False,
    force: bool = False,
    work: str | Path | None = None,
    on_curve: Callable[[], None] | None = None,
) -> Plan:
    """Validate everything a run needs, without writing anything.

    Checks the output folder (not a file, not under a file, writable), that ``--resume``
    continues the same configuration, builds every network that still has curves to
    run (topology, data files) and every curve's settings (including the noise a
    ``target_epsilon`` needs), then that the folder may take this run's results
    (:func:`pgfl.folders.check_output`: files pgfl did not write, results of another
    configuration; ``force`` accepts both); any problem raises :class:`ConfigError` (or
    its :class:`~pgfl.files.FileError`) and leaves ``out`` exactly as it was.

    With ``resume``, the partial files of an interrupted run (in the staging folder) or
    those a finished run kept (``run.keep_partial``, in ``out/partial``) are loaded; a
    batch is skipped only if every one of its curves has a valid partial file; otherwise
    it runs whole (a curve recomputed with fewer batch mates would differ in rounding), so
    a resumed run gives the bits of an uninterrupted one. ``work`` (a frontier's sub-run)
    is the folder to write in when a larger run holds ``out``: then ``out`` is not
    checked for ownership here. ``on_curve()`` is called as each curve's settings are
    ready (calibrating a ``target_epsilon`` is most of the work: a frontier's progress).
    """
    out = check_output_folder(out)
    fingerprint = config_fingerprint(cfg)
    part_of = work is not None
    work = Path(work) if part_of else out / STAGE
    loaded: dict[int, dict[str, np.ndarray]] = {}
    source = _resume_from([work, out], fingerprint) if resume else None
    if source is not None:
        for i, c in enumerate(cfg.curves):
            metrics = load_curve(source, i, c.label, fingerprint)
            if metrics is not None:
                loaded[i] = metrics
    # units held by Ray actors: the driver plans from an outline, never the clients' data
    outline = cfg.run.backend == "ray" and cfg.run.mode == "actors"
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(cfg.curves):
        groups.setdefault(c.structure(), []).append(i)
    batches = []
    for indices in groups.values():
        if all(i in loaded for i in indices):
            continue
        for i in indices:  # a batch runs whole: the same bits as an uninterrupted run
            loaded.pop(i, None)
        net = build_network(cfg.curves[indices[0]], cfg.seed, outline=outline)
        settings = []
        for i in indices:
            settings.append(curve_settings(cfg.curves[i], cfg.iterations, net))
            if on_curve is not None:
                on_curve()
        w_opt = None if outline else net.problem.optimum(net.data)  # a singular risk: refused
        batches.append(Batch(tuple(indices), net, CurveBatch.of(settings, net), w_opt))
    output = None
    if not part_of:  # last: a wrong setting is named before the folder's contents are
        output = check_output(
            out, digest=digest_of(fingerprint), what=f"experiment {cfg.name!r}", force=force,
            resume=source is not None, dirs=("partial",) if cfg.run.keep_partial else (),
        )  # fmt: skip
    return Plan(cfg, out, fingerprint, loaded, tuple(batches), work, resume, output, source)
