"""The file-system boundary: files and folders the user names, checked before any work.

Two kinds of failure reach a user through a path:

* an **output** folder or file that cannot be written (an existing file where a folder is
  wanted, a folder where a file is wanted, a path under a file, a read-only folder):
  :func:`check_output_folder` and :func:`check_output_file` find these before anything
  is computed or written, and :func:`writing` turns any later ``OSError`` into one line;
* an **input** data file that cannot be read (missing, not UTF-8, a truncated gzip
  stream, a malformed CSV row, a pickled or corrupt ``.npy``): :func:`reading` turns
  the reader's exception into one line naming the file and the problem.

Both raise :class:`FileError`, a :class:`~pgfl.validation.ConfigError`, so the CLI reports
them as bad input (one line on stderr, exit code 2). Results are data first: JSON and CSV
files are written atomically (:func:`write_json`, :func:`write_csv`: to a temporary name,
then renamed), so an interrupted run never leaves a half-written result behind;
:func:`read_toml` reads a configuration file.

>>> import tempfile, pathlib
>>> f = pathlib.Path(tempfile.mkdtemp()) / "results"
>>> _ = f.write_text("not a folder")
>>> check_output_folder(f)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pgfl.files.FileError: output folder ... is an existing file, not a folder
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import json
import math
import os
import re
import tomllib
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pgfl.validation import ConfigError

__all__ = [
    "FileError",
    "MissingFileError",
    "check_output_file",
    "check_output_folder",
    "check_input_file",
    "content_digest",
    "output_lock",
    "temporary",
    "jsonable",
    "read_csv",
    "read_json",
    "read_toml",
    "reading",
    "resolve_path",
    "write_atomic",
    "write_csv",
    "write_json",
    "writing",
]


class FileError(ConfigError):
    """A file or folder named by the user cannot be read, parsed or written."""


class MissingFileError(FileError, FileNotFoundError):
    """An input file does not exist (also a :class:`FileNotFoundError`)."""


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (``lexists``: broken links count)."""
    p = path
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def _check_creatable(p: Path, what: str) -> None:
    """``p`` can be created or replaced: its nearest existing ancestor is a writable folder."""
    base = _nearest_existing(p.absolute().parent)
    if not base.is_dir():
        raise FileError(f"{what} {p} cannot be created: {base} is a file, not a folder")
    target = p if p.exists() else base
    if not os.access(target, os.W_OK | (os.X_OK if target.is_dir() else 0)):
        raise FileError(f"{what} {p} is not writable: permission denied on {target}")


def check_output_folder(path: str | os.PathLike[str], what: str = "output folder") -> Path:
    """Check that ``path`` is, or can be created as, a writable folder; write nothing.

    Raises:
        FileError: ``path`` is an existing file, lies under a file, or is (or would be
            created in) a folder that is not writable.

    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise FileError(f"{what} {p} is an existing file, not a folder")
    _check_creatable(p, what)
    return p


def check_output_file(path: str | os.PathLike[str], what: str = "output file") -> Path:
    """Check that a file can be written at ``path`` (missing folders will be created).

    Raises:
        FileError: ``path`` is a folder, lies under a file, or is (or would be created
            in) something not writable.

    """
    p = Path(path)
    if p.is_dir():
        raise FileError(f"{what} {p} is a folder; give a file name, e.g. {p / 'epsilon.png'}")
    _check_creatable(p, what)
    return p


@contextmanager
def writing(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an ``OSError`` raised while writing under ``path`` into a :class:`FileError`."""
    try:
        yield
    except OSError as exc:
        where = exc.filename if exc.filename is not None else path
        reason = exc.strerror or str(exc)
        raise FileError(f"cannot write {where}: {reason}") from exc


def resolve_path(path: str, base: str | os.PathLike[str]) -> str:
    """``path`` as an absolute path, a relative one taken relative to the folder ``base``.

    A configuration file's paths are relative to its folder (``base``); a path given on
    the command line to the current directory (``base = "."``). ``~`` is the home folder.

    >>> resolve_path("data.csv", "/runs/cfg"), resolve_path("/x/data.csv", "/runs/cfg")
    ('/runs/cfg/data.csv', '/x/data.csv')
    """
    p = Path(path).expanduser()
    return os.path.abspath(p if p.is_absolute() else Path(base) / p)


def check_input_file(path: str | os.PathLike[str], what: str = "data file") -> Path:
    """Return ``path`` if it is an existing file, else raise :class:`MissingFileError`."""
    p = Path(path)
    if p.is_dir():
        raise FileError(f"{what} {str(p)!r} is a folder, not a file")
    if not p.is_file():
        raise MissingFileError(f"{what} not found: {str(p)!r}")
    return p


_CSV_FIELDS = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def _problem(exc: BaseException) -> str:
    """A short description of why a data file could not be read."""
    if isinstance(exc, UnicodeDecodeError):
        bad = exc.object[exc.start : exc.start + 1].hex()
        return f"not UTF-8 text (byte 0x{bad} is invalid); save it as UTF-8"
    if isinstance(exc, (EOFError, zlib.error)) or type(exc).__name__ == "BadGzipFile":
        return f"the compressed stream is truncated or corrupt ({exc})"
    text = " ".join(str(exc).split())
    m = _CSV_FIELDS.search(text)
    if m:
        expected, line, saw = m.groups()
        return f"line {line} has {saw} fields; the rows before it have {expected}"
    if "allow_pickle" in text:
        return "it holds pickled Python objects; save a numeric array (numpy.save)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return text.removeprefix("Error tokenizing data. C error: ") or type(exc).__name__


#: What a reader may raise on a malformed file (pandas' ParserError is a ValueError).
READ_ERRORS: tuple[type[BaseException], ...] = (ValueError, EOFError, OSError, zlib.error)


@contextmanager
def reading(path: str | os.PathLike[str], what: str = "data file") -> Iterator[None]:
    """Turn a reader's exception about ``path`` into a :class:`FileError` naming the file.

    A :class:`ConfigError` raised inside (already a clear message) passes unchanged.
    ``EOFError`` must not escape: the CLI framework would report it as an interrupt.

    >>> with reading("x.csv"):  # doctest: +ELLIPSIS
    ...     raise EOFError("Compressed file ended before the end-of-stream marker was reached")
    Traceback (most recent call last):
    ...
    pgfl.files.FileError: data file 'x.csv': the compressed stream is truncated or corrupt (...)
    """
    try:
        yield
    except ConfigError:
        raise
    except READ_ERRORS as exc:
        raise FileError(f"{what} {str(path)!r}: {_problem(exc)}") from exc


def read_toml(path: str | Path) -> dict[str, Any]:
    """The table of a TOML file; a bad file raises :class:`ConfigError` naming it.

    Bad: missing, a folder, unreadable, not UTF-8, or not valid TOML.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    if not path.is_file():
        raise ConfigError(f"config file {path} is not a file")
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None


# ------------------------------------------------------------- results as files
def jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats into JSON-safe values.

    >>> jsonable({"a": float("inf"), "b": (1, float("nan"))})
    {'a': 'inf', 'b': [1, None]}
    """
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def temporary(path: Path) -> Path:
    """A temporary name beside ``path`` for an atomic write, unique to this process."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary(path)
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as indented JSON (numpy values converted, NaN → null)."""
    write_atomic(path, json.dumps(jsonable(data), indent=2) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    """Read a JSON file written by :func:`write_json`."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_csv(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write rows (dicts) as CSV; the header is the union of keys in first-seen order."""
    rows = [dict(jsonable(r)) for r in rows]
    fields: list[str] = []
    for r in rows:
        fields.extend(k for k in r if k not in fields)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary(path)
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def read_csv(path: Path) -> list[dict[str, str]]:
    """Read a CSV written by :func:`write_csv` (values stay strings)."""
    with Path(path).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


#: Files hashed whole up to this size; larger ones by size, time and their first and last MiB.
DIGEST_WHOLE = 64 << 20


def content_digest(path: str | os.PathLike[str]) -> str:
    """A digest of a data file's content, so that an edited file is not resumed as the old one.

    SHA-256 of the whole file up to :data:`DIGEST_WHOLE` bytes; a larger file (a full
    Avazu CSV is gigabytes) is identified by its size, modification time and the SHA-256
    of its first and last MiB. ``"missing"`` for a file that cannot be read.
    """
    p = Path(path)
    try:
        st = p.stat()
        h = hashlib.sha256()
        with p.open("rb") as fh:
            if st.st_size <= DIGEST_WHOLE:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
                return h.hexdigest()
            h.update(fh.read(1 << 20))
            fh.seek(-(1 << 20), os.SEEK_END)
            h.update(fh.read())
        return f"{st.st_size}:{st.st_mtime_ns}:{h.hexdigest()}"
    except OSError:
        return "missing"


#: The lock file a run holds in its output folder.
LOCK_NAME = ".pgfl.lock"


@contextmanager
def output_lock(folder: str | os.PathLike[str]) -> Iterator[Path]:
    """Create ``folder`` and hold its lock while the block runs; one run per folder.

    A second run into the same folder (another process holds the lock) stops at once
    with one line (a :class:`FileError`) naming the folder and the lock file. The lock
    is released when the block ends or the process dies (``flock``), so a crashed run
    never leaves a folder locked.
    """
    p = Path(folder)
    with writing(p):
        p.mkdir(parents=True, exist_ok=True)
        fh = (p / LOCK_NAME).open("a+")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise FileError(
                f"output folder {p} is in use by another pgfl run (it holds {p / LOCK_NAME}); "
                "wait for it to finish or choose another --out"
            ) from None
        yield p
    finally:
        fh.close()
