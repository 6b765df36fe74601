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
files are written atomically (:func:`write_json`, :func:`write_csv`, through
:func:`replacing`: a new temporary file beside the target, created exclusively under a
random name, then renamed over it), so an interrupted run never leaves a half-written
result behind and a link planted under a temporary name is never written through; below
an output folder being written (:func:`no_links_below`) no symbolic link is followed at
all. :func:`read_toml` reads a configuration file, refusing what is not one (empty, a
byte-order mark, nested too deep, too large) before parsing it.

>>> import tempfile, pathlib
>>> f = pathlib.Path(tempfile.mkdtemp()) / "results"
>>> _ = f.write_text("not a folder")
>>> check_output_folder(f)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pgfl.files.FileError: output folder ... is an existing file, not a folder
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import hashlib
import json
import math
import os
import re
import secrets
import tomllib
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from pgfl.validation import ConfigError

__all__ = [
    "FileError",
    "MissingFileError",
    "check_output_file",
    "check_output_folder",
    "check_input_file",
    "content_digest",
    "no_links_below",
    "open_folder",
    "output_lock",
    "replacing",
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
    if os.path.islink(p) and not p.exists():
        raise FileError(
            f"{what} {p} is a broken symbolic link (to {os.readlink(p)}); remove it or "
            "choose another folder"
        )
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


#: The largest configuration file read (a thousand curves take about 0.1 MiB).
MAX_CONFIG_BYTES = 4 << 20
#: The deepest nesting of tables and arrays a configuration may have (pgfl's need 4).
MAX_CONFIG_DEPTH = 32
_BOM = b"\xef\xbb\xbf"
#: A dotted key of more than :data:`MAX_CONFIG_DEPTH` bare parts (``a.b.c...``).
_DOTTED = re.compile(rf"(?<![\w-])(?:[\w-]++[ \t]*+\.[ \t]*+){{{MAX_CONFIG_DEPTH}}}[\w-]")


def read_toml(path: str | Path) -> dict[str, Any]:
    """The table of a TOML file; a bad file raises :class:`ConfigError` naming it.

    Bad: missing, a folder, unreadable, larger than :data:`MAX_CONFIG_BYTES` (refused
    before it is read), starting with a UTF-8 byte-order mark, not UTF-8, not valid TOML,
    empty (nothing but blanks and comments), or nested deeper than
    :data:`MAX_CONFIG_DEPTH` levels.

    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "c.toml"
    >>> _ = f.write_bytes(b"")
    >>> read_toml(f)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: config file .../c.toml is empty (0 bytes): it sets nothing...
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    if not path.is_file():
        raise ConfigError(f"config file {path} is not a file")
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        size = max(len(data), path.stat().st_size)
        raise ConfigError(
            f"config file {path} is {size / 2**20:.1f} MiB; a configuration is at most "
            f"{MAX_CONFIG_BYTES >> 20} MiB (a thousand curves take about 0.1 MiB)"
        )
    if data.startswith(_BOM):
        raise ConfigError(
            f"config file {path} starts with a UTF-8 byte-order mark, which TOML does not "
            "allow; save it as UTF-8 without BOM"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None
    if _DOTTED.search(text):  # tomllib takes time quadratic in a dotted key's length
        raise ConfigError(
            f"config file {path} has a dotted key of more than {MAX_CONFIG_DEPTH} parts: "
            f"nested deeper than a configuration may be ({MAX_CONFIG_DEPTH} levels of tables "
            "and arrays)"
        )
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None
    except RecursionError:
        raise ConfigError(
            f"config file {path} is nested deeper than it can be read; a configuration "
            f"nests at most {MAX_CONFIG_DEPTH} levels of tables and arrays"
        ) from None
    if not table:
        size = "0 bytes" if not data else "only blanks and comments"
        raise ConfigError(
            f"config file {path} is empty ({size}): it sets nothing; see docs/config.md"
        )
    depth = _depth(table)
    if depth > MAX_CONFIG_DEPTH:
        raise ConfigError(
            f"config file {path} is nested {depth} levels deep; a configuration nests at most "
            f"{MAX_CONFIG_DEPTH} levels of tables and arrays"
        )
    return table


def _depth(value: Any) -> int:
    """How deep tables and arrays nest in ``value`` (without recursion: any depth).

    >>> _depth({"a": [1, {"b": 2}]}), _depth(3)
    (3, 0)
    """
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


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


#: Roots of the output folders being written: no symbolic link is followed below them.
_ROOTS: list[str] = []


@contextmanager
def no_links_below(root: str | os.PathLike[str]) -> Iterator[None]:
    """While the block runs, the writers of this module follow no link below ``root``.

    ``root`` itself may be a link (the user named it); a folder below it that is a
    symbolic link makes a write there raise :class:`FileError` instead of following it.
    """
    entry = os.path.abspath(root)
    _ROOTS.append(entry)
    try:
        yield
    finally:
        _ROOTS.remove(entry)


def _below(folder: str) -> str | None:
    """The registered root that ``folder`` lies in (the innermost), or None."""
    inside = [r for r in _ROOTS if folder == r or folder.startswith(r.rstrip(os.sep) + os.sep)]
    return max(inside, key=len, default=None)


def open_folder(folder: str | os.PathLike[str], *, create: bool = True) -> int:
    """A descriptor of ``folder`` (created if missing), no link followed below a root.

    Below a root of :func:`no_links_below`, every component is opened with ``O_NOFOLLOW``
    from the root down: a symbolic link there raises :class:`FileError`. Elsewhere the
    path is opened as given (it is the user's). The caller closes the descriptor.
    """
    path = os.path.abspath(folder)
    root = _below(path)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    if root is None:
        if create:
            os.makedirs(path, exist_ok=True)
        return os.open(path, flags)
    fd = os.open(root, flags)
    where = Path(root)
    try:
        for part in Path(os.path.relpath(path, root)).parts:
            if part == ".":
                continue
            where = where / part
            try:
                child = os.open(part, flags | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o777, dir_fd=fd)
                child = os.open(part, flags | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(where):
                    raise FileError(
                        f"{where} is a symbolic link; pgfl never follows a link inside an "
                        "output folder: remove it or choose another --out"
                    ) from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def replacing(
    path: str | os.PathLike[str], *, binary: bool = False, newline: str | None = None
) -> Iterator[IO[Any]]:
    """Write ``path`` atomically: a new temporary file beside it, renamed over it at the end.

    The temporary file is created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``) under a
    random name ``.NAME.XXXXXXXX.tmp`` in ``path``'s folder (created if missing; no link
    followed below a root of :func:`no_links_below`), so nothing planted in the folder is
    ever written through; an error or interrupt in the block removes it and leaves
    ``path`` as it was. A link at ``path`` itself is replaced, never followed.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "a.txt"
    >>> with replacing(p) as fh:
    ...     _ = fh.write("done")
    >>> p.read_text(), sorted(x.name for x in p.parent.iterdir())
    ('done', ['a.txt'])
    """
    path = Path(path)
    folder = open_folder(path.parent)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for _ in range(64):
            name = f".{path.name}.{secrets.token_hex(4)}.tmp"
            try:
                fd = os.open(name, flags, 0o666, dir_fd=folder)  # the umask applies
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover - 64 collisions of 32 random bits
            raise FileError(f"cannot create a temporary file beside {path}")
        try:
            if binary:
                fh: IO[Any] = os.fdopen(fd, "wb")
            else:
                fh = os.fdopen(fd, "w", encoding="utf-8", newline=newline)
            with fh:
                yield fh
            os.replace(name, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
            raise
    finally:
        os.close(folder)


#: A temporary file of :func:`replacing` (or of pgfl before it): ``.NAME.XXXX.tmp[.npz]``.
TEMPORARY = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]+\.tmp(\.npz)?$")


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`replacing`)."""
    with replacing(path) as fh:
        fh.write(text)


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
    with replacing(path, newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


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
    never leaves a folder locked; a run that ends removes the lock file (a waiting run
    checks that the file it locked is still the one named :data:`LOCK_NAME`, so the
    removal never lets two runs in). A link at the lock's name is refused.
    """
    p = Path(folder)
    with writing(p):
        p.mkdir(parents=True, exist_ok=True)
        folder_fd = open_folder(p)
    try:
        fd = _lock(p, folder_fd)
        try:
            yield p
        finally:
            with contextlib.suppress(OSError):
                os.unlink(LOCK_NAME, dir_fd=folder_fd)
            os.close(fd)  # closing releases the lock, after the name is gone
    finally:
        os.close(folder_fd)


def _lock(p: Path, folder_fd: int) -> int:
    """Lock :data:`LOCK_NAME` in the folder ``folder_fd`` (``p``); its locked descriptor."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        try:
            fd = os.open(LOCK_NAME, flags, 0o666, dir_fd=folder_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise FileError(
                    f"{p / LOCK_NAME} is a symbolic link; pgfl never follows a link inside "
                    "an output folder: remove it or choose another --out"
                ) from None
            raise FileError(f"cannot write {p / LOCK_NAME}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise FileError(
                f"output folder {p} is in use by another pgfl run (it holds {p / LOCK_NAME}); "
                "wait for it to finish or choose another --out"
            ) from None
        try:
            named = os.stat(LOCK_NAME, dir_fd=folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            named = None
        held = os.fstat(fd)
        if named is not None and (named.st_ino, named.st_dev) == (held.st_ino, held.st_dev):
            return fd
        os.close(fd)  # the run before removed the file we locked: lock the new one
