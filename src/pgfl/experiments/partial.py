"""Partial results: each finished batch's metrics on disk, stamped with the configuration.

After each batch, every curve's per-iteration metrics are saved in
``<out>/partial/curve-NNN.npz`` with the configuration's fingerprint
(:func:`config_fingerprint`: the configuration as given, T, R, the seed and the content
of any user model's source file) and the SHA-256 checksum of its arrays
(:func:`arrays_digest`). An interrupted run keeps them, and a rerun with ``--resume``
uses the files whose fingerprint matches and whose arrays match their checksum; a stale
file is recomputed (never deleted up front), an unreadable or altered one with a
:class:`PartialResultWarning` naming it. A run that finishes removes the folder
(:func:`remove_partial`: only the files pgfl names so, never through a link) unless
``run.keep_partial`` (``--keep-partial``) asks to keep it. ``out`` here is the folder a
run writes in (its staging folder, :mod:`pgfl.folders`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import warnings
import zipfile
from pathlib import Path

import numpy as np

from pgfl.data.datasets import source_path
from pgfl.experiments.config import ExperimentConfig
from pgfl.files import TEMPORARY, content_digest, jsonable, replacing

__all__ = [
    "PartialResultWarning",
    "arrays_digest",
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


def arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of named arrays: each name, dtype, shape and bytes, in name order.

    >>> a = {"x": np.arange(3.0)}
    >>> arrays_digest(a) == arrays_digest({"x": np.arange(3.0)}) != arrays_digest({"x": -a["x"]})
    True
    """
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def write_partial(path: Path, fingerprint: str, arrays: dict[str, np.ndarray]) -> None:
    """Write a partial-result file atomically, with the checksum of its arrays."""
    arrays = {"fingerprint": np.array(fingerprint), **arrays}
    with replacing(path, binary=True) as fh:
        np.savez(fh, digest=np.array(arrays_digest(arrays)), **arrays)


def read_partial(path: Path, fingerprint: str, redo: str) -> dict[str, np.ndarray] | None:
    """The arrays of a partial-result file of this configuration, or None.

    None if the file is absent or was written by another configuration (its stored
    fingerprint differs); an unreadable one (truncated, corrupt, pickled objects) or one
    whose arrays do not match their checksum (altered, or written before pgfl stored one)
    is ignored with a :class:`PartialResultWarning` naming it and what happens instead
    (``redo``). Nothing is deleted: the file is replaced when its work is done again.
    """
    if not path.is_file() or path.is_symlink():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            if "fingerprint" not in f.files or str(f["fingerprint"]) != fingerprint:
                return None
            arrays = {k: f[k] for k in f.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        _warn(f"{path} is unreadable ({type(exc).__name__}: {exc}); {redo}")
        return None
    digest = str(arrays.pop("digest", ""))
    if arrays_digest(arrays) != digest:
        _warn(
            f"{path} does not match its checksum (the digest of its arrays): altered or "
            f"written by an older pgfl; {redo}"
        )
        return None
    del arrays["fingerprint"]
    return arrays


def _warn(message: str) -> None:
    warnings.warn(message, PartialResultWarning, stacklevel=4)


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


#: The files pgfl writes in ``partial/``: curves, Ray tasks, temporary files of a write.
OWN_PARTIAL = re.compile(r"^(curve-\d{3,}\.npz|task-\d{3,}-\d{4,}-\d{4,}\.npz)$")


def remove_partial(out: Path) -> None:
    """Remove ``out/partial`` of a finished run: its curves' and Ray tasks' files.

    Only the files pgfl writes there (:data:`OWN_PARTIAL`, temporary files of an
    interrupted write) are removed, then the folder if it is empty; a link is never
    followed (``partial`` itself a link: nothing is removed). A file that cannot be
    removed is left with a :class:`PartialResultWarning` (the results are written anyway).
    """
    folder = Path(out) / "partial"
    if not folder.exists() and not folder.is_symlink():
        return
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        what = "is a symbolic link" if folder.is_symlink() else f"cannot be read ({exc.strerror})"
        _warn(f"{folder} {what}; pgfl removed nothing from it")
        return
    try:
        with os.scandir(fd) as entries:
            mine = [
                e.name
                for e in entries
                if e.is_file(follow_symlinks=False)
                and (OWN_PARTIAL.match(e.name) or TEMPORARY.match(e.name))
            ]
        for name in mine:
            os.unlink(name, dir_fd=fd)
        with os.scandir(fd) as entries:
            empty = next(entries, None) is None
        if empty:
            with contextlib.suppress(OSError):  # replaced by something else meanwhile
                os.rmdir(folder)
    except OSError as exc:
        _warn(
            f"could not remove {folder} after the run ({exc.strerror or exc}); its files are "
            "no longer needed"
        )
    finally:
        os.close(fd)


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
