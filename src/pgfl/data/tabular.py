"""Generic tabular data (CSV / Parquet / DataFrame) → features ``X`` and labels ``y ∈ {±1}``.

A table has one named label column; every other column is a feature (unless dropped):

* **numeric** columns (int, float, bool dtypes) are standardized,
  ``x ← (x − mean) / std`` with the mean and (population) standard deviation of the
  *training* rows only (:meth:`TabularEncoder.fit` on the training part, then
  :meth:`TabularEncoder.transform` on training and test parts); a constant column has
  ``std = 0`` and is only centred. NaN or ±inf in a numeric column is an error that
  names the row and the column;
* **categorical** columns (strings, pandas ``category``, or any column listed in
  ``categorical=``) are hashed as ``"column=value"`` tokens into ``hash_dim`` columns
  (:mod:`pgfl.data.hashing`); a missing value is the token ``"column=<NA>"``;
* a column of text whose non-missing cells are all numbers but a few is a numeric
  column with a typo, not a category, and is an error that names the file, the column,
  the first such cell's row and its value: some cells are not numbers, but no more than
  1% of them (or one cell, whichever is more; :data:`TYPO_FRACTION`) and fewer than
  half. A column with more text than that is categorical. Missing cells (empty, ``NA``,
  ...) are not counted.

The feature layout is ``[numeric columns in table order | hash_dim hashed columns]``.

The label must have exactly two distinct values. ``{0, 1}``, ``{-1, 1}`` and
``{False, True}`` map to ``-1, +1`` in that order; other values are sorted and the larger
one is ``+1`` unless ``positive=`` names it.

>>> import pandas as pd
>>> df = pd.DataFrame({"x": [1.0, 2.0, 3.0], "c": ["a", "b", "a"], "y": ["no", "yes", "no"]})
>>> X, y = load_tabular(df, label="y", hash_dim=4)
>>> X[:, 0].round(4).tolist(), y.tolist()
([-1.2247, 0.0, 1.2247], [-1.0, 1.0, -1.0])
>>> X.shape
(3, 5)
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pgfl.data.hashing import hash_fields, hashed_to_dense
from pgfl.files import check_input_file, reading
from pgfl.validation import ConfigError, check_int

__all__ = [
    "TableOutline",
    "count_rows",
    "outline_table",
    "read_table",
    "encode_labels",
    "infer_columns",
    "TYPO_FRACTION",
    "check_finite",
    "TabularEncoder",
    "load_tabular",
]

_PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in _PARQUET_SUFFIXES


def read_table(
    path: str | os.PathLike[str],
    *,
    rows: int | None = None,
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Read a CSV (any delimiter pandas sniffs as ``,``) or Parquet file into a DataFrame.

    Parquet (``.parquet``, ``.pq``, ``.parq``) needs ``pyarrow`` (``pip install
    'pgfl[parquet]'``). A CSV with a ``rows`` limit stops reading after ``rows`` rows.

    Raises:
        MissingFileError: no such file (a ``FileNotFoundError`` and a ``ConfigError``).
        FileError: a file that cannot be read: not UTF-8, a truncated compressed stream,
            a row with more fields than the header (the message names the file).
        ConfigError: empty file, a header without data rows, missing ``columns``,
            or Parquet without pyarrow.

    """
    p = check_input_file(path)
    if rows is not None:
        rows = check_int("rows", rows, lo=1)
    if _is_parquet(p):
        try:
            import pyarrow  # noqa: F401  # lazy: pyarrow is optional (Parquet files only)
        except ImportError as e:
            raise ConfigError(
                f"reading Parquet file {str(p)!r} needs pyarrow: pip install 'pgfl[parquet]'"
            ) from e
        with reading(p):
            frame = pd.read_parquet(p, columns=list(columns) if columns is not None else None)
        if rows is not None:
            frame = frame.iloc[:rows]
    else:
        if p.stat().st_size == 0:
            raise ConfigError(f"file {str(p)!r} is empty (no header line)")
        with reading(p):
            try:
                frame = pd.read_csv(p, nrows=rows, skipinitialspace=True)
            except pd.errors.EmptyDataError as e:
                raise ConfigError(f"file {str(p)!r} is empty (no header line)") from e
        if columns is not None:
            missing = [c for c in columns if c not in frame.columns]
            if missing:
                raise ConfigError(f"{str(p)!r} has no column(s) {missing}")
            frame = frame[list(columns)]
    if len(frame) == 0:
        raise ConfigError(f"{str(p)!r} has no data rows (only a header)")
    return frame


@dataclass(frozen=True)
class TableOutline:
    """The sizes of a table file without its data: what loading it will cost.

    Attributes:
        rows: data rows (counted, or estimated from the bytes of the first lines).
        columns: the header.
        numeric: columns the first rows read as numbers (int, float, bool).
        text: the other columns.
        text_bytes: estimated bytes of the distinct strings of the text columns (Python
            objects; pandas' reader shares equal strings), from the first rows'
            distinct values and lengths.

    """

    rows: int
    columns: tuple[str, ...]
    numeric: tuple[str, ...]
    text: tuple[str, ...]
    text_bytes: int


#: A file of up to this many (uncompressed) bytes has its lines counted; the rows of a
#: larger one are extrapolated from the lines in its first bytes.
COUNT_LINES_BYTES = 64 << 20
#: Rows read to learn the columns' types and strings.
OUTLINE_ROWS = 1000
#: Bytes of a Python str object beyond its characters (CPython, ASCII, with the allocator's
#: rounding).
STR_OBJECT_BYTES = 56
_OPENERS = {
    ".gz": gzip.GzipFile,
    ".bz2": lambda fileobj: bz2.BZ2File(fileobj),
    ".xz": lambda fileobj: lzma.LZMAFile(fileobj),
}
_OTHER_COMPRESSED = (".zip", ".zst", ".tar")


def count_rows(path: str | os.PathLike[str]) -> int | None:
    """Data rows of a CSV (lines after the header), cheaply; ``None`` if it cannot tell.

    The lines of the first :data:`COUNT_LINES_BYTES` (decompressed) bytes are counted;
    a longer file's rows are extrapolated from the share of the file those bytes took.
    gzip, bz2 and xz files are read through their decompressor; other compressed
    formats give ``None``. A quoted field spanning lines counts each line (an upper
    bound).
    """
    p = Path(path)
    if p.suffix.lower() in _OTHER_COMPRESSED:
        return None
    opener = _OPENERS.get(p.suffix.lower())
    lines, seen, last = 0, 0, b"\n"
    with open(p, "rb") as raw:
        stream = raw if opener is None else opener(fileobj=raw)
        while seen < COUNT_LINES_BYTES:
            block = stream.read(1 << 20)
            if not block:
                return max(0, lines + (last != b"\n") - 1)  # the header is no row
            lines, seen, last = lines + block.count(b"\n"), seen + len(block), block[-1:]
        share = raw.tell() / max(1, p.stat().st_size)
    return max(0, round(lines / share) - 1)


def outline_table(path: str | os.PathLike[str], *, sample: int = OUTLINE_ROWS) -> TableOutline:
    """The :class:`TableOutline` of a CSV or Parquet file, from its head and size.

    A Parquet file's rows and types come from its metadata (pyarrow); its strings are
    not sampled (``text_bytes`` 0).

    Raises what reading the file raises (a missing file, not UTF-8, ...); a caller that
    only estimates should treat an error as "unknown" and let the loader report it.
    """
    p = Path(path)
    if _is_parquet(p):
        import pyarrow.parquet as pq  # lazy: an optional dependency

        meta = pq.ParquetFile(p)
        head = meta.schema_arrow.empty_table().to_pandas()
        rows: int | None = meta.metadata.num_rows
    else:
        head = pd.read_csv(p, nrows=sample, skipinitialspace=True)
        rows = count_rows(p)
    if rows is None:
        raise ValueError(f"cannot count the rows of {str(p)!r}")
    numeric = tuple(
        str(c)
        for c in head.columns
        if pd.api.types.is_numeric_dtype(head[c]) or pd.api.types.is_bool_dtype(head[c])
    )
    text = tuple(str(c) for c in head.columns if str(c) not in numeric)
    per_row = 0.0
    for c in text:
        values = head[c].dropna().astype(str)
        if len(values):
            distinct = values.nunique() / len(head)
            per_row += distinct * (STR_OBJECT_BYTES + values.str.len().mean())
    columns = tuple(map(str, head.columns))
    return TableOutline(rows, columns, numeric, text, round(per_row * rows))


def _row_ref(frame: pd.DataFrame, i: int, source: str | None) -> str:
    """Human pointer to positional row ``i``: data row (and file line for a CSV).

    A frame read from a file keeps the file's row numbers as its index through row
    selections (the training rows of a split), so an integer index gives the row.
    """
    if pd.api.types.is_integer_dtype(frame.index.dtype):
        i = int(frame.index[i])
    if source is not None and not _is_parquet(Path(source)):
        return f"data row {i} (line {i + 2} of {source!r})"
    return f"data row {i}"


def encode_labels(
    values: Sequence[object] | np.ndarray | pd.Series,
    *,
    name: str = "label",
    positive: object | None = None,
    source: str | None = None,
) -> tuple[np.ndarray, tuple[object, object]]:
    """Map a two-valued label column to ``y ∈ {-1, +1}``.

    Args:
        values: the label column.
        name: its name (for messages).
        positive: the value that becomes ``+1`` (default: see the module docstring).
        source: file name for messages.

    Returns:
        ``(y, (negative_value, positive_value))`` with ``y`` float64.

    Raises:
        ConfigError: a missing label (row given), or not exactly two distinct values.

    >>> encode_labels(["b", "a", "b"])[0].tolist()
    [1.0, -1.0, 1.0]
    >>> encode_labels([3, 7, 3], positive=3)[0].tolist()
    [1.0, -1.0, 1.0]

    """
    s = pd.Series(values, copy=False).reset_index(drop=True)
    na = np.flatnonzero(s.isna().to_numpy())
    if na.size:
        where = _row_ref(s.to_frame(), int(na[0]), source)
        raise ConfigError(f"label column {name!r} has a missing value at {where}")
    uniq = pd.unique(s)
    if len(uniq) != 2:
        shown = sorted(map(repr, uniq[:10].tolist()))
        more = "" if len(uniq) <= 10 else f" (and {len(uniq) - 10} more)"
        raise ConfigError(
            f"label column {name!r} must have exactly two distinct values; "
            f"got {len(uniq)}: {', '.join(shown)}{more}"
        )
    try:
        neg, pos = sorted(uniq.tolist())
    except TypeError:  # mixed types
        neg, pos = sorted(uniq.tolist(), key=repr)
    if positive is not None:
        if positive not in (neg, pos):
            raise ConfigError(
                f"positive must be one of the label values {neg!r}, {pos!r}; got {positive!r}"
            )
        if positive == neg:
            neg, pos = pos, neg
    y = np.where((s == pos).to_numpy(), 1.0, -1.0)
    return y, (neg, pos)


#: A text column whose non-missing cells are numbers except at most this fraction of them
#: (at least one cell, and fewer than half) is a numeric column with a typo: an error.
TYPO_FRACTION = 0.01


def infer_columns(
    frame: pd.DataFrame,
    *,
    label: str,
    categorical: Sequence[str] | None = None,
    drop: Sequence[str] = (),
    source: str | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split the feature columns (all but ``label`` and ``drop``) into numeric and categorical.

    Numeric: int/float/bool dtypes not listed in ``categorical``. Categorical: everything
    else (strings, ``category``, mixed objects) plus the ``categorical`` list — except a
    text column whose non-missing cells are numbers but for a few: at most
    :data:`TYPO_FRACTION` of them (at least one) and fewer than half. One stray word in a
    column of numbers is a typo, and hashing the column would silently turn its numbers
    into categories; it is an error naming the column, the row and the value. ``source``
    names the file in messages.

    >>> frame = pd.DataFrame({"x": ["1.5", "2", "abc", "4"], "y": [0, 1, 0, 1]})
    >>> infer_columns(frame, label="y")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: column 'x' is numeric except at data row 2: 'abc' (1 of 4 ...
    >>> infer_columns(frame.assign(x=["a", "b", "c", "4"]), label="y")   # mostly text
    ((), ('x',))

    Raises:
        ConfigError: the label column, a listed column or every feature is missing; a
            numeric column with a few cells that are not numbers.

    """
    if label not in frame.columns:
        raise ConfigError(
            f"label column {label!r} not found; the columns are {list(map(str, frame.columns))}"
        )
    cats = list(categorical or ())
    unknown = [c for c in [*cats, *drop] if c not in frame.columns]
    if unknown:
        raise ConfigError(f"column(s) {unknown} not found; the columns are {list(frame.columns)}")
    if label in cats:
        raise ConfigError(f"the label column {label!r} cannot also be categorical")
    features = [c for c in frame.columns if c != label and c not in drop]
    if not features:
        raise ConfigError(f"no feature columns besides the label {label!r}")
    numeric = tuple(
        c
        for c in features
        if c not in cats
        and (pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c]))
    )
    cat = tuple(c for c in features if c not in numeric)
    for c in cat:
        if c not in cats:
            _reject_stray_text(frame, c, source)
    return numeric, cat


def _reject_stray_text(frame: pd.DataFrame, column: str, source: str | None) -> None:
    """Raise if text column ``column`` holds numbers but for a few cells (see infer_columns)."""
    values = frame[column]
    if isinstance(values.dtype, pd.CategoricalDtype):
        return
    present = values.notna().to_numpy()
    n = int(present.sum())
    text = present & np.isnan(pd.to_numeric(values, errors="coerce").to_numpy(dtype=float))
    bad = int(text.sum())
    if bad == 0 or bad > max(1, TYPO_FRACTION * n) or 2 * bad >= n:
        return
    i = int(np.flatnonzero(text)[0])
    row = _row_ref(frame, i, source)
    where = "" if source is None or repr(source) in row else f" of {source!r}"
    raise ConfigError(
        f"column {column!r}{where} is numeric except at {row}: "
        f"{values.iloc[i]!r} ({bad} of {n} cells); fix the cell, or hash the column as "
        f"a category: data.categorical = [{column!r}] in a configuration"
    )


def check_finite(
    frame: pd.DataFrame, columns: Sequence[str], *, source: str | None = None
) -> np.ndarray:
    """Return ``frame[columns]`` as float64 ``[n, len(columns)]``; reject NaN/inf by row and column.

    >>> check_finite(pd.DataFrame({"a": [1.0, float("nan")]}), ["a"])
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: feature column 'a' has NaN at data row 1
    """
    if not columns:
        return np.zeros((len(frame), 0))
    try:
        A = frame[list(columns)].to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError) as e:
        raise ConfigError(
            f"numeric feature columns {list(columns)} are not all numbers: {e}"
        ) from e
    bad = ~np.isfinite(A)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        what = "NaN" if np.isnan(A[i, j]) else ("inf" if A[i, j] > 0 else "-inf")
        raise ConfigError(
            f"feature column {columns[j]!r} has {what} at {_row_ref(frame, i, source)}"
        )
    return A


@dataclass(frozen=True)
class TabularEncoder:
    """Standardize numeric columns and hash categorical ones; learned statistics end in ``_``.

    ``X = [(A − mean_) / std_ | hash(categorical)]`` with ``A`` the numeric columns,
    ``mean_``/``std_`` computed on the rows given to :meth:`fit` (``std_ = 1`` for a
    constant column), ``hash`` the signed/unsigned hashing trick into ``hash_dim`` columns.

    Attributes:
        numeric, categorical: column names.
        hash_dim: hashed columns (0 columns are produced when there is no categorical).
        signed: signed hashing.
        standardize: if False, numeric columns are passed through unchanged.
        mean_, std_: per-numeric-column statistics of the fitted rows, shape ``[n_numeric]``.

    >>> enc = TabularEncoder.fit(pd.DataFrame({"a": [0.0, 2.0]}), numeric=["a"])
    >>> enc.mean_.tolist(), enc.std_.tolist()
    ([1.0], [1.0])
    >>> enc.transform(pd.DataFrame({"a": [3.0]})).tolist()
    [[2.0]]

    """

    numeric: tuple[str, ...]
    categorical: tuple[str, ...]
    hash_dim: int
    signed: bool
    standardize: bool
    mean_: np.ndarray
    std_: np.ndarray
    key: bytes = b""

    @classmethod
    def fit(
        cls,
        frame: pd.DataFrame,
        *,
        numeric: Sequence[str] = (),
        categorical: Sequence[str] = (),
        hash_dim: int = 64,
        signed: bool = True,
        standardize: bool = True,
        key: bytes = b"",
        source: str | None = None,
    ) -> TabularEncoder:
        """Learn the standardization of ``numeric`` from ``frame`` (the training rows)."""
        hash_dim = check_int("hash_dim", hash_dim, lo=1)
        if len(frame) == 0:
            raise ConfigError("cannot fit the feature encoder on zero rows")
        A = check_finite(frame, list(numeric), source=source)
        mean = A.mean(axis=0) if standardize else np.zeros(A.shape[1])
        std = A.std(axis=0) if standardize else np.ones(A.shape[1])
        std = np.where(std > 0, std, 1.0)
        return cls(
            tuple(numeric), tuple(categorical), hash_dim, signed, standardize, mean, std, key
        )

    @property
    def dim(self) -> int:
        """Number of output features ``M``."""
        return len(self.numeric) + (self.hash_dim if self.categorical else 0)

    @property
    def feature_names(self) -> list[str]:
        """Names of the output columns (``hash[j]`` for hashed ones)."""
        hashed = [f"hash[{j}]" for j in range(self.hash_dim)] if self.categorical else []
        return [*self.numeric, *hashed]

    def transform(self, frame: pd.DataFrame, *, source: str | None = None) -> np.ndarray:
        """Features ``[n, dim]`` float64 of ``frame`` (same columns as at fit time)."""
        missing = [c for c in (*self.numeric, *self.categorical) if c not in frame.columns]
        if missing:
            raise ConfigError(f"column(s) {missing} missing from the data to transform")
        A = (check_finite(frame, list(self.numeric), source=source) - self.mean_) / self.std_
        if not self.categorical:
            return A
        idx, sign = hash_fields(
            {c: frame[c].to_numpy() for c in self.categorical},
            self.hash_dim,
            signed=self.signed,
            key=self.key,
        )
        return np.hstack([A, hashed_to_dense(idx, sign, self.hash_dim)])


def load_tabular(
    data: str | os.PathLike[str] | pd.DataFrame,
    *,
    label: str,
    rows: int | None = None,
    categorical: Sequence[str] | None = None,
    drop: Sequence[str] = (),
    hash_dim: int = 64,
    signed: bool = True,
    standardize: bool = True,
    positive: object | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Load a table and return ``(X [n, M], y [n] in {±1})``, standardized on all rows.

    For a train/test split with statistics from the training part only, use
    :func:`read_table`, :func:`infer_columns`, :meth:`TabularEncoder.fit` on the training
    rows and :meth:`TabularEncoder.transform` (as
    :func:`pgfl.data.datasets.classification_federated_data` does).

    Args:
        data: a CSV/Parquet path or a DataFrame.
        label: the label column (two distinct values).
        rows: read at most this many rows.
        categorical: columns to hash even if numeric (e.g. integer codes).
        drop: columns to ignore (ids, leakage).
        hash_dim: hashed columns for the categorical features.
        signed: signed hashing.
        standardize: standardize numeric columns.
        positive: the label value mapped to ``+1``.

    """
    source = None if isinstance(data, pd.DataFrame) else str(data)
    frame = read_table(data, rows=rows) if source is not None else data
    if source is None and rows is not None:
        frame = frame.iloc[: check_int("rows", rows, lo=1)]
    if len(frame) == 0:
        raise ConfigError("the table has no rows")
    numeric, cat = infer_columns(
        frame, label=label, categorical=categorical, drop=drop, source=source
    )
    y, _ = encode_labels(frame[label], name=label, positive=positive, source=source)
    enc = TabularEncoder.fit(
        frame,
        numeric=numeric,
        categorical=cat,
        hash_dim=hash_dim,
        signed=signed,
        standardize=standardize,
        source=source,
    )
    return enc.transform(frame, source=source), y
