"""Partial results: each finished batch's metrics on disk, stamped with the configuration.

After each batch, every curve's per-iteration metrics are saved in
``<out>/partial/curve-NNN.npz`` with the configuration's fingerprint
(:func:`config_fingerprint`: the configuration as given, T, R, the seed and the content
of any user model's source file). An interrupted run keeps them, and a rerun with
``--resume`` uses the files whose fingerprint matches; a stale or unreadable file is
recomputed (never deleted up front), an unreadable one with a
:class:`PartialResultWarning` naming it. A run that finishes removes the folder
(:func:`remove_partial`) unless ``run.keep_partial`` (``--keep-partial``) asks to keep it.
"""

from __future__ import annotations

import hashlib
import json
import warnings
import zipfile
from pathlib import Path

import numpy as np

from pgfl.data.datasets import source_path
from pgfl.experiments.config import ExperimentConfig
from pgfl.files import content_digest, jsonable, temporary

__all__ = [
    "PartialResultWarning",
    "config_fingerprint",
    "load_curve",
    "read_partial",
    "remove_partial",
    "save_curve",
    "saved_curves",
    "write_partial",
]


def _partial_path(out: Path, index: int) -> Path:
    return out / "partial" / f"curve-{index:03d}.npz"


def write_partial(path: Path, fingerprint: str, arrays: dict[str, np.ndarray]) -> None:
    """Write a partial-result file atomically (a ``.tmp`` file renamed over the old one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary(path).with_suffix(".tmp.npz")
    np.savez(tmp, fingerprint=np.array(fingerprint), **arrays)
    tmp.replace(path)


def read_partial(path: Path, fingerprint: str, redo: str) -> dict[str, np.ndarray] | None:
    """The arrays of a partial-result file of this configuration, or None.

    None if the file is absent or was written by another configuration (its stored
    fingerprint differs); an unreadable one (truncated, corrupt, pickled objects) is
    ignored with a :class:`PartialResultWarning` naming it and what happens instead
    (``redo``). Nothing is deleted: the file is replaced when its work is done again.
    """
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            if "fingerprint" not in f.files or str(f["fingerprint"]) != fingerprint:
                return None
            return {k: f[k] for k in f.files if k != "fingerprint"}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        warnings.warn(
            f"{path} is unreadable ({type(exc).__name__}: {exc}); {redo}",
            PartialResultWarning,
            stacklevel=3,
        )
        return None


def save_curve(
    out: Path, index: int, label: str, fingerprint: str, metrics: dict[str, np.ndarray]
) -> None:
    """Save curve ``index``'s metrics in ``out/partial`` (atomic, with the fingerprint)."""
    write_partial(_partial_path(out, index), fingerprint, {"label": np.array(label), **metrics})


def load_curve(out: Path, index: int, label: str, fingerprint: str) -> dict[str, np.ndarray] | None:
    """The saved metrics of curve ``index``, or None if absent, stale or unreadable.

    A file of another configuration (its stored fingerprint differs) is ignored; an
    unreadable one (truncated, corrupt) is ignored with a warning naming it. Either way
    the curve is recomputed and its file replaced when done.
    """
    path = _partial_path(out, index)
    arrays = read_partial(path, fingerprint, f"recomputing curve {label!r}")
    if arrays is None or str(arrays.pop("label", "")) != label:
        return None
    return arrays


class PartialResultWarning(UserWarning):
    """A saved partial result could not be used and its curve is computed again."""


def remove_partial(out: Path) -> None:
    """Remove ``out/partial`` of a finished run: its curves' and Ray tasks' files.

    Only the files pgfl writes there (``*.npz``, temporary files of an interrupted write)
    are removed, then the folder if it is empty; a file that cannot be removed is left
    with a :class:`PartialResultWarning` (the run's results are written either way).
    """
    folder = Path(out) / "partial"
    if not folder.is_dir():
        return
    try:
        for path in folder.iterdir():
            if path.is_file() and (path.suffix == ".npz" or path.name.endswith(".tmp")):
                path.unlink(missing_ok=True)
        if not any(folder.iterdir()):
            folder.rmdir()
    except OSError as exc:
        warnings.warn(
            f"could not remove {folder} after the run ({exc.strerror or exc}); its files are "
            "no longer needed",
            PartialResultWarning,
            stacklevel=2,
        )


def saved_curves(cfg: ExperimentConfig, out: str | Path) -> int:
    """How many curves of ``cfg`` have a valid partial result in ``out/partial``."""
    out, fingerprint = Path(out), config_fingerprint(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PartialResultWarning)
        return sum(
            load_curve(out, i, c.label, fingerprint) is not None for i, c in enumerate(cfg.curves)
        )


def config_fingerprint(cfg: ExperimentConfig) -> str:
    """What a partial result depends on: the configuration, a user model's code, data files.

    A user's model source and a data file read from disk are identified by their content
    (:func:`pgfl.files.content_digest`), so an edited file is never resumed as the old one.
    """
    return json.dumps(
        jsonable(
            {
                "config": cfg.to_dict(),
                "iterations": cfg.iterations,
                "repetitions": cfg.repetitions,
                "seed": cfg.seed,
                "model_code": _model_code_digests(cfg),
                "data_files": _data_digests(cfg),
            }
        ),
        sort_keys=True,
    )


def _data_digests(cfg: ExperimentConfig) -> dict[str, str]:
    """Content digest of each data file a curve reads (``data.source`` of real data)."""
    out = {}
    for c in cfg.curves:
        path = source_path(c.data.source) if c.data.kind == "classification" else None
        if path is not None and path not in out:
            out[path] = content_digest(path)
    return out


def _model_code_digests(cfg: ExperimentConfig) -> dict[str, str]:
    """SHA-256 of each ``model.source`` file, so that editing a user's model is not resumed."""
    out = {}
    for c in cfg.curves:
        if c.model.kind == "custom":
            path = c.model.source.rpartition(":")[0]
            try:
                out[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            except OSError:
                out[path] = "unreadable"
    return out
