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
them as bad input (one line on stderr, exit code 2).

>>> import tempfile, pathlib
>>> f = pathlib.Path(tempfile.mkdtemp()) / "results"
>>> _ = f.write_text("not a folder")
>>> check_output_folder(f)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pgfl.files.FileError: output folder ... is an existing file, not a folder
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pgfl.validation import ConfigError

__all__ = [
    "FileError",
    "MissingFileError",
    "check_output_file",
    "check_output_folder",
    "check_input_file",
    "reading",
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
