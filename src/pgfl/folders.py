"""Output folders pgfl owns: nothing it did not write is touched, a failed rerun loses nothing.

The rules (README, "Outputs"):

1. **Owned.** A folder pgfl writes results into holds a marker, :data:`MARKER` (JSON),
   written when pgfl creates the folder (or adopts an empty one). It lists every file
   pgfl wrote there and a digest of the configuration the results come from.
2. **Checked before any work** (:func:`check_output`, which writes nothing): a folder
   holding anything pgfl did not list (another tool's files, a user's notes, a link) or
   the results of another configuration is refused in one line (a
   :class:`~pgfl.files.FileError`: exit code 2) unless ``force``; with ``force`` pgfl
   replaces the files it writes and still deletes nothing it did not list. Results of
   the same configuration are replaced with a one-line :class:`ReplacingResultsWarning`.
3. **Staged** (:func:`staged`): a run writes into :data:`STAGE` inside the folder
   (its ``config.json``, ``partial/``, then its results) and only a run that completes
   moves its results into the folder, replacing the old ones, and deletes the files of
   the old results it did not write again (:func:`commit`). An interrupted or failed run
   leaves the folder as it was; its staging folder keeps the partial files for
   ``--resume``. A commit cut short (the process killed mid-way) is finished by the next
   run into the folder (:data:`DONE` records what it moves).
4. **No link followed**: below the folder, the writers open every folder with
   ``O_NOFOLLOW`` (:func:`pgfl.files.no_links_below`); the marker, the lock, the staging
   folder and the results' folders are refused as links even with ``force``; a file is
   deleted only if it is a regular file (never the target of a link) that the marker
   lists, under a path with no link in it. Temporary files of killed runs
   (``.NAME.XXXX.tmp``) and a stale lock file are removed by the next run.

>>> import tempfile
>>> out = Path(tempfile.mkdtemp()) / "results"
>>> output = check_output(out, digest="a", what="example")
>>> with staged(output) as stage:
...     _ = (stage / "summary.json").write_text("{}")
>>> sorted(p.name for p in out.iterdir()), read_marker(out)["files"]
(['.pgfl-folder', 'summary.json'], ['summary.json'])
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pgfl.files import (
    LOCK_NAME,
    TEMPORARY,
    FileError,
    check_output_folder,
    no_links_below,
    open_folder,
    output_lock,
    read_json,
    write_json,
    writing,
)

__all__ = [
    "DONE",
    "MARKER",
    "STAGE",
    "Output",
    "ReplacingResultsWarning",
    "check_output",
    "commit",
    "digest_of",
    "read_marker",
    "staged",
]

#: The marker of an owned output folder: what pgfl wrote there and for which configuration.
MARKER = ".pgfl-folder"
#: The staging folder of a run, inside the output folder.
STAGE = ".pgfl-run"
#: In the staging folder: the list of files a commit moves, written before the first move.
DONE = ".pgfl-commit"
#: Names pgfl keeps in an output folder beside the results.
INTERNAL = frozenset({MARKER, STAGE, LOCK_NAME})
_NOTE = "pgfl output folder: pgfl replaces or deletes only the files listed here"


class ReplacingResultsWarning(UserWarning):
    """A run will replace the results an output folder holds (when it completes)."""


@dataclass(frozen=True)
class Output:
    """An output folder checked for a run by :func:`check_output`; nothing written yet.

    Attributes:
        path: the folder.
        digest: identifies what the run's results come from (:func:`digest_of`).
        what: a few words for messages, e.g. ``experiment 'fig2'``.
        dirs: folders the run's results will have (refused if a link is there).
        force: files pgfl did not write were accepted (``--force``).

    """

    path: Path
    digest: str
    what: str
    dirs: tuple[str, ...] = ()
    force: bool = False

    @property
    def stage(self) -> Path:
        """Where the run writes (:data:`STAGE` in the folder)."""
        return self.path / STAGE


def digest_of(identity: Any) -> str:
    """SHA-256 of a JSON-able identity (a configuration's fingerprint, a preset and seed).

    >>> digest_of({"seed": 1}) == digest_of({"seed": 1}) != digest_of({"seed": 2})
    True
    """
    text = identity if isinstance(identity, str) else json.dumps(identity, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _inside(name: Any) -> bool:
    """``name`` is a relative path below a folder, not one of pgfl's own names."""
    if not isinstance(name, str) or not name or "\0" in name or "\\" in name:
        return False
    parts = PurePosixPath(name).parts
    return (
        not name.startswith("/")
        and all(part not in ("", ".", "..") for part in parts)
        and parts[0] not in INTERNAL
    )


def read_marker(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The marker of ``folder``: ``{"files": [...], "results": digest | None, "what"}``.

    None when there is none or it is not pgfl's (a link, not a JSON table). Entries that
    name no file inside the folder (``..``, an absolute path) are dropped: a forged
    marker never makes pgfl delete outside the folder.
    """
    path = Path(folder) / MARKER
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return None
        data = read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        return None
    results = data.get("results")
    return {
        "files": sorted({f for f in data["files"] if _inside(f)}),
        "results": results if isinstance(results, str) else None,
        "what": str(data.get("what", "")),
    }


def _write_marker(folder: Path, files: list[str], results: str | None, what: str) -> None:
    write_json(folder / MARKER, {"pgfl": _NOTE, "what": what, "results": results,
                                 "files": sorted(files)})  # fmt: skip


def _is_litter(folder: Path, name: str) -> bool:
    """A temporary file a killed pgfl run left (a regular file, never a link)."""
    if not TEMPORARY.match(name):
        return False
    try:
        return stat.S_ISREG((folder / name).lstat().st_mode)
    except OSError:
        return False


def _link(path: Path) -> FileError:
    return FileError(
        f"{path} is a symbolic link; pgfl never follows a link inside an output folder: "
        "remove it or choose another --out"
    )


def _foreign(folder: Path, marker: dict[str, Any] | None) -> list[str]:
    """Entries of ``folder`` pgfl did not write (not listed, not its own names or litter)."""
    listed = {PurePosixPath(f).parts[0] for f in (marker or {}).get("files", [])}
    return sorted(
        e
        for e in os.listdir(folder)
        if e not in listed and e not in INTERNAL and not _is_litter(folder, e)
    )


def _refuse_foreign(folder: Path, foreign: list[str]) -> None:
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    raise FileError(
        f"output folder {folder} holds files pgfl did not write ({shown}); choose another "
        "--out, or give --force to write there anyway (pgfl then replaces the files it "
        "writes and deletes nothing else)"
    )


def check_output(
    out: str | os.PathLike[str],
    *,
    digest: str,
    what: str,
    force: bool = False,
    resume: bool = False,
    dirs: tuple[str, ...] = (),
) -> Output:
    """Check that a run may write its results into ``out``; write nothing.

    Refused (:class:`~pgfl.files.FileError`, one line): what
    :func:`~pgfl.files.check_output_folder` refuses; a link at the marker, the lock, the
    staging folder or one of ``dirs``; unless ``force``, entries pgfl did not write, or
    results of another configuration (a marker whose digest is not ``digest``). Results
    that this run will replace are announced with a :class:`ReplacingResultsWarning`.
    Neither with ``resume``: the run continues one of this configuration (whose files
    the caller found), which was allowed to replace what the folder holds.
    """
    p = check_output_folder(out)
    output = Output(p, digest, what, tuple(dirs), force)
    if not p.exists():
        return output
    for name in (*INTERNAL, *dirs):
        if (p / name).is_symlink():
            raise _link(p / name)
    marker = read_marker(p)
    foreign = _foreign(p, marker)
    if foreign and not force:
        _refuse_foreign(p, foreign)
    held = marker["results"] if marker else None
    if held is None or resume:
        return output
    if held != digest and not force:
        raise FileError(
            f"output folder {p} holds the results of another configuration "
            f"({marker['what'] or 'another run'}); choose another --out, or give --force "
            "to replace them when this run finishes"
        )
    whose = "an earlier run of this configuration" if held == digest else "another configuration"
    warnings.warn(
        f"{p} holds the results of {whose}; this run replaces them when it finishes (until "
        "then, and if it stops early, they stay as they are)",
        ReplacingResultsWarning,
        stacklevel=2,
    )
    return output


@contextmanager
def staged(output: Output) -> Iterator[Path]:
    """Hold ``output``'s folder (created, marked, locked) and yield its staging folder.

    The folder is created if missing and marked as pgfl's; its lock is held until the
    block ends (:func:`~pgfl.files.output_lock`); a commit cut short by a killed run is
    finished, litter of killed runs removed, and the staging folder emptied of all but
    its ``partial/`` files (kept for ``--resume``). When the block ends without an error
    the staged results are committed (:func:`commit`); otherwise the folder stays as it
    was. Without ``output.force`` the folder is checked again under the lock: nothing
    foreign may have appeared since :func:`check_output`.
    """
    p = output.path
    with output_lock(p), no_links_below(p):
        with writing(p):
            marker = read_marker(p)
            if marker is None:
                if (p / MARKER).is_symlink():
                    raise _link(p / MARKER)
                _write_marker(p, [], None, output.what)  # the folder is pgfl's from now
            elif not output.force and (foreign := _foreign(p, marker)):
                _refuse_foreign(p, foreign)
            stage = output.stage
            _finish_commit(p, stage)
            _remove_litter(p)
            fd = open_folder(stage)  # created if missing; a link is refused
            try:
                os.fchmod(fd, 0o700)  # nobody else writes in a run's own folder
            finally:
                os.close(fd)
            _clear_stage(stage)
        yield stage
        with writing(p):
            commit(output)


def _walk(folder: Path) -> Iterator[tuple[str, os.DirEntry]]:
    """Relative posix names and entries of everything below ``folder``; no link followed."""
    todo = [""]
    while todo:
        rel = todo.pop()
        fd = open_folder(folder / rel, create=False)
        try:
            with os.scandir(fd) as entries:
                for e in entries:
                    name = f"{rel}/{e.name}" if rel else e.name
                    yield name, e
                    if e.is_dir(follow_symlinks=False):
                        todo.append(name)
        finally:
            os.close(fd)


def _clear_stage(stage: Path) -> None:
    """Remove from ``stage`` what an earlier run left but ``partial/`` files (for --resume)."""
    found = list(_walk(stage))
    for name, e in found:
        keep = "partial" in PurePosixPath(name).parts[:-1] and not TEMPORARY.match(e.name)
        if not e.is_dir(follow_symlinks=False) and not keep:
            _unlink(stage, name)
    for name, e in sorted(found, key=lambda x: -len(x[0])):
        if e.is_dir(follow_symlinks=False):
            _rmdir_if_empty(stage, name)


def _remove_litter(folder: Path) -> None:
    """Remove temporary files of killed runs from ``folder`` and its listed sub-folders."""
    marker = read_marker(folder) or {"files": []}
    subs = {str(PurePosixPath(f).parent) for f in marker["files"]} - {"."}
    for sub in ["", *sorted(subs)]:
        where = folder / sub
        try:
            names = [n for n in os.listdir(where) if _is_litter(where, n)]
        except OSError:
            continue
        for name in names:
            _unlink(folder, f"{sub}/{name}" if sub else name)


def _unlink(folder: Path, name: str) -> bool:
    """Delete the regular file ``folder/name`` (no link followed on the way); done or not."""
    parent = PurePosixPath(name).parent
    try:
        fd = open_folder(folder / parent, create=False)
    except (OSError, FileError):
        return False
    try:
        leaf = PurePosixPath(name).name
        if not stat.S_ISREG(os.stat(leaf, dir_fd=fd, follow_symlinks=False).st_mode):
            return False
        os.unlink(leaf, dir_fd=fd)
        return True
    except FileNotFoundError:
        return False
    finally:
        os.close(fd)


def _rmdir_if_empty(folder: Path, name: str) -> None:
    with contextlib.suppress(OSError, FileError):
        fd = open_folder(folder / PurePosixPath(name).parent, create=False)
        try:
            os.rmdir(PurePosixPath(name).name, dir_fd=fd)
        finally:
            os.close(fd)


def commit(output: Output) -> None:
    """Move the staged results into the folder, replacing the old; delete what is gone.

    Every folder the results go into is checked for links before anything moves; the
    list of files is written to :data:`DONE` first, so a commit cut short is finished by
    the next run (:func:`staged`). Old listed files the new results do not have are
    deleted (regular files only), then folders they leave empty; the marker then lists
    exactly the new files.
    """
    p, stage = output.path, output.stage
    files = sorted(
        name
        for name, e in _walk(stage)
        if e.is_file(follow_symlinks=False) and name != DONE and not TEMPORARY.match(e.name)
    )
    for name in files:  # refuse a link where the results go before anything moves
        for parent in reversed(PurePosixPath(name).parents[:-1]):
            if (p / parent).is_symlink():
                raise _link(p / parent)
    write_json(stage / DONE, {"files": files, "results": output.digest, "what": output.what})
    _finish_commit(p, stage)


def _finish_commit(folder: Path, stage: Path) -> None:
    """Carry out the commit :data:`DONE` describes (idempotent), if there is one."""
    try:
        if not stat.S_ISREG((stage / DONE).lstat().st_mode):
            return
        done = read_json(stage / DONE)
    except (OSError, ValueError):
        return
    files = [f for f in done.get("files", []) if _inside(f)]
    marker = read_marker(folder) or {"files": [], "what": ""}
    what = str(done.get("what", ""))
    _write_marker(folder, sorted({*marker["files"], *files}), done.get("results"), what)
    for name in files:
        src = PurePosixPath(name)
        try:
            src_fd = open_folder(stage / src.parent, create=False)
        except FileNotFoundError:
            continue  # moved before the commit was cut short
        try:
            dst_fd = open_folder(folder / src.parent)
            try:
                os.replace(src.name, src.name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
            except FileNotFoundError:
                pass
            finally:
                os.close(dst_fd)
        finally:
            os.close(src_fd)
    gone = sorted(set(marker["files"]) - set(files))
    for name in gone:
        _unlink(folder, name)
    for parent in sorted({str(q) for n in gone for q in PurePosixPath(n).parents[:-1]},
                         key=lambda q: -len(q)):  # fmt: skip
        _rmdir_if_empty(folder, parent)
    _write_marker(folder, files, done.get("results"), what)
    _unlink(stage, DONE)
    for name, e in sorted(_walk(stage), key=lambda x: -len(x[0])):
        if e.is_dir(follow_symlinks=False):
            _rmdir_if_empty(stage, name)
    _rmdir_if_empty(folder, STAGE)
