"""Real classification data that loads offline, and the one-call federated builder.

Shipped datasets (inside installed PyPI packages; no network):

==================  ======  ========  ===================================================
name                rows    features  label ``+1``
==================  ======  ========  ===================================================
``fair``            6,366   6 + 2     ``affairs > 0`` (32.2%); statsmodels' Fair (1978)
                                      extramarital-affairs survey. Numeric:
                                      ``rate_marriage, age, yrs_married, children,
                                      religious, educ``; categorical (hashed):
                                      ``occupation, occupation_husb``.
``breast_cancer``   569     30        benign (62.7%); scikit-learn's Wisconsin
                                      diagnostic set, all numeric.
==================  ======  ========  ===================================================

Other sources: ``"avazu:<path>"`` (or just a path to an Avazu-format CSV) and
``"csv:<path>:<label>"`` (any CSV or Parquet file with a two-valued label column).

:func:`classification_federated_data` is the papers' set-up (preprint §V-B): 5,101
training samples split unequally over ``P K = 50`` clients with per-client feature
noise, plus 256 clean test samples.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from pgfl.data.avazu import AVAZU_COLUMNS, is_avazu_file, load_avazu
from pgfl.data.federated import FederatedData
from pgfl.data.partition import add_intercept, client_counts, partition
from pgfl.data.tabular import (
    TabularEncoder,
    count_rows,
    encode_labels,
    infer_columns,
    outline_table,
    read_table,
)
from pgfl.files import check_input_file, resolve_path
from pgfl.rng import stream
from pgfl.validation import ConfigError, check_choice, check_int

__all__ = [
    "MIN_TEST",
    "PAPER_ROWS",
    "PAPER_TEST",
    "SHIPPED",
    "DataWarning",
    "id_columns",
    "real_split",
    "split_sizes",
    "warn_id_columns",
    "SourceOutline",
    "federated_counts",
    "outline_source",
    "source_path",
    "absolute_source",
    "ShippedDataset",
    "dataset_names",
    "load_frame",
    "load_dataset",
    "classification_federated_data",
]


def _fair() -> pd.DataFrame:
    from statsmodels.datasets import fair  # lazy: statsmodels, only for this data set

    df = fair.load_pandas().data.copy()
    df["had_affair"] = (df["affairs"] > 0).astype(np.int64)
    return df.drop(columns=["affairs"])


def _breast_cancer() -> pd.DataFrame:
    from sklearn.datasets import load_breast_cancer  # lazy: scikit-learn, only for this data set

    b = load_breast_cancer(as_frame=True)
    return b.frame  # columns: 30 features + "target" (1 = benign)


@dataclass(frozen=True)
class ShippedDataset:
    """A table bundled with an installed package.

    Attributes:
        name: registry name.
        load: returns the raw DataFrame (label column included).
        label: the label column.
        categorical: columns hashed although numeric (integer-coded categories).
        description: one line for listings.
        shape: rows and columns (label included) of the loaded table, for estimates
            made without loading it.

    """

    name: str
    load: Callable[[], pd.DataFrame]
    label: str
    categorical: tuple[str, ...]
    description: str
    shape: tuple[int, int]


SHIPPED: dict[str, ShippedDataset] = {
    "fair": ShippedDataset(
        "fair",
        _fair,
        "had_affair",
        ("occupation", "occupation_husb"),
        "statsmodels Fair affairs survey, 6,366 rows, label affairs > 0",
        (6366, 9),
    ),
    "breast_cancer": ShippedDataset(
        "breast_cancer",
        _breast_cancer,
        "target",
        (),
        "scikit-learn Wisconsin breast cancer, 569 rows, 30 numeric features, label benign",
        (569, 31),
    ),
}

_DEFAULT_HASH_DIM = {"tabular": 16, "avazu": 256}


def dataset_names() -> list[str]:
    """Names of the shipped datasets (plus the ``avazu:``/``csv:`` forms, not listed)."""
    return list(SHIPPED)


@dataclass(frozen=True)
class _Source:
    kind: str  # "tabular" or "avazu"
    frame: pd.DataFrame | None = None
    label: str = ""
    categorical: tuple[str, ...] = ()
    path: str | None = None
    drop: tuple[str, ...] = ()


#: The papers' real-data split (preprint §V-B): training rows and clean test rows.
PAPER_ROWS, PAPER_TEST = 5101, 256
#: The smallest test set an unset ``test_size`` gives a small file.
MIN_TEST = 20


def split_sizes(n: int, rows: int | None, test_size: int | None) -> tuple[int, int]:
    """``(rows, test_size)`` of a real-data set of ``n`` rows, each unset one filled in.

    The rule of ``data.rows`` and ``data.test_size``: an unset test set is the papers'
    256 rows when the file holds them beside the training rows (``rows``, or the papers'
    5,101), else a fifth of the file (at least :data:`MIN_TEST`, at most 256); unset
    training rows are the papers' 5,101, or every row the test set leaves. A value given
    is kept (too many rows for the file: the loader's error names both).

    >>> split_sizes(6366, None, None), split_sizes(1000, None, None), split_sizes(1000, 800, None)
    ((5101, 256), (800, 200), (800, 200))
    >>> split_sizes(90, None, None), split_sizes(1000, None, 0)
    ((70, 20), (1000, 0))
    """
    if test_size is None:
        fits = n >= (PAPER_ROWS if rows is None else rows) + PAPER_TEST
        test_size = PAPER_TEST if fits else max(MIN_TEST, min(PAPER_TEST, n // 5))
    if rows is None:
        rows = max(1, min(PAPER_ROWS, n - test_size))
    return rows, test_size


def real_split(source: str, rows: int | None, test_size: int | None) -> tuple[int, int]:
    """:func:`split_sizes` for ``data.source``, reading no more rows than the split needs."""
    if rows is not None and test_size is not None:
        return rows, test_size
    want = (PAPER_ROWS if rows is None else rows) + (PAPER_TEST if test_size is None else test_size)
    if source in SHIPPED:
        n = SHIPPED[source].shape[0]
    else:
        n = len(load_dataset(source, rows=want)[1])  # a file: at most what the split needs
    return split_sizes(min(n, want), rows, test_size)


def source_path(source: str) -> str | None:
    """The file a ``data.source`` reads (``None`` for a shipped data set).

    >>> source_path("fair"), source_path("csv:data/x.csv:y"), source_path("avazu:a.csv")
    (None, 'data/x.csv', 'a.csv')
    """
    if source in SHIPPED:
        return None
    if source.startswith("avazu:"):
        return source[len("avazu:") :]
    if source.startswith("csv:"):
        return source[len("csv:") :].rsplit(":", 1)[0]
    return source


def _looks_like_path(source: str, base: str | os.PathLike[str] = ".") -> bool:
    """A ``data.source`` that is neither shipped nor prefixed names a file (an Avazu CSV)."""
    p = Path(source)
    return bool(p.suffix) or os.sep in source or (Path(base) / p).exists()


def absolute_source(source: str, base: str | os.PathLike[str]) -> str:
    """``source`` with the file it reads made absolute, a relative path taken from ``base``.

    A configuration file's ``data.source`` is relative to the file's folder; a shipped
    name, a malformed ``csv:`` source and an unknown name are returned unchanged (their
    errors come when the data are loaded).

    >>> absolute_source("fair", "/cfg"), absolute_source("csv:d/x.csv:y", "/cfg")
    ('fair', 'csv:/cfg/d/x.csv:y')
    >>> absolute_source("avazu:train.csv", "/cfg"), absolute_source("/data/train.csv", "/cfg")
    ('avazu:/cfg/train.csv', '/data/train.csv')
    """
    if source in SHIPPED:
        return source
    if source.startswith("avazu:"):
        return "avazu:" + resolve_path(source[len("avazu:") :], base)
    if source.startswith("csv:"):
        path, sep, label = source[len("csv:") :].rpartition(":")
        return f"csv:{resolve_path(path, base)}:{label}" if sep and path else source
    return resolve_path(source, base) if _looks_like_path(source, base) else source


@dataclass(frozen=True)
class SourceOutline:
    """The sizes of a ``data.source`` without loading it (:func:`outline_source`).

    Attributes:
        kind: ``"tabular"`` or ``"avazu"``.
        rows: data rows of the file (or the shipped table).
        columns: columns of the table as read (the label included); Avazu's 24.
        numeric: feature columns standardized (one feature each).
        categorical: feature columns hashed together into ``hash_dim`` features.
        hash_dim: the hashed features (the default of the kind when unset).
        text_bytes: estimated bytes of the table's distinct strings once read.

    """

    kind: str
    rows: int
    columns: int
    numeric: int
    categorical: int
    hash_dim: int
    text_bytes: int = 0

    @property
    def dim(self) -> int:
        """Features M of the encoded rows, before the intercept."""
        return self.numeric + (self.hash_dim if self.categorical else 0)


def outline_source(source: str, hash_dim: int | None = None) -> SourceOutline | None:
    """The :class:`SourceOutline` of a data source, from its header, first rows and size.

    A CSV's columns are typed by its first rows (:func:`~pgfl.data.tabular.outline_table`)
    and its rows counted or estimated from its size; a shipped table's sizes are declared.
    ``None`` when the source cannot be read or named: the loader then says why.

    >>> o = outline_source("fair")
    >>> o.rows, o.numeric, o.categorical, o.dim   # 6 numeric + 16 hashed features
    (6366, 6, 2, 22)
    """
    try:
        return _outline(source, hash_dim)
    except (OSError, EOFError, ValueError, ImportError, UnicodeDecodeError, pd.errors.ParserError):
        return None  # a missing, empty, truncated or unreadable file: the loader says why


def _outline(source: str, hash_dim: int | None) -> SourceOutline | None:
    if source in SHIPPED:
        d = SHIPPED[source]
        rows, columns = d.shape
        cat = len(d.categorical)
        dim = hash_dim or _DEFAULT_HASH_DIM["tabular"]
        return SourceOutline("tabular", rows, columns, columns - 1 - cat, cat, dim)
    path = source_path(source)
    if source.startswith("csv:"):
        label = source.rsplit(":", 1)[1]
        t = outline_table(path)
        numeric = len([c for c in t.numeric if c != label])
        cat = len([c for c in t.text if c != label])
        dim = hash_dim or _DEFAULT_HASH_DIM["tabular"]
        return SourceOutline("tabular", t.rows, len(t.columns), numeric, cat, dim, t.text_bytes)
    if path is not None and (source.startswith("avazu:") or is_avazu_file(Path(path))):
        rows = count_rows(path)
        if rows is None:
            return None
        dim = hash_dim or _DEFAULT_HASH_DIM["avazu"]
        return SourceOutline("avazu", rows, len(AVAZU_COLUMNS), 0, len(AVAZU_COLUMNS) - 2, dim)
    return None


def _resolve(source: str, rows: int | None) -> _Source:
    if not isinstance(source, str) or not source:
        raise ConfigError(f"source must be a dataset name or a path; got {source!r}")
    if source in SHIPPED:
        d = SHIPPED[source]
        return _Source("tabular", d.load(), d.label, d.categorical)
    if source.startswith("avazu:"):
        return _Source("avazu", path=source[len("avazu:") :])
    if source.startswith("csv:"):
        body = source[len("csv:") :]
        if ":" not in body:
            raise ConfigError(f"a csv source must read 'csv:<path>:<label column>'; got {source!r}")
        path, label = body.rsplit(":", 1)
        frame = read_table(path, rows=rows)
        return _Source("tabular", frame, label, (), path=path)
    p = Path(source)
    if _looks_like_path(source):
        check_input_file(p)
        if is_avazu_file(p):
            return _Source("avazu", path=source)
        raise ConfigError(
            f"{source!r} is not in the Avazu format (no click/hour/C1..C21 columns); "
            f"for another table use 'csv:{source}:<label column>'"
        )
    raise ConfigError(
        f"unknown dataset {source!r}; choose one of {', '.join(map(repr, SHIPPED))}, "
        "'avazu:<path>', 'csv:<path>:<label>' or a path to an Avazu CSV"
    )


class DataWarning(UserWarning):
    """Something in a data file that is probably not meant (the run goes on)."""


#: A column name that says "identifier": ``id``, ``user_id``, ``RowIndex``, ``uuid``, ...
ID_NAME = re.compile(r"(^|[_\W])(id|idx|index|key|uuid|guid)$|^(id|index|key)[_\W]|[a-z]Id$")


def id_columns(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The ``columns`` that look like an identifier: a different value in every row.

    Text with a distinct value per row (hashed, each is a category seen once), or
    integers with a distinct value per row that are named like an id (:data:`ID_NAME`)
    or count the rows (consecutive). Real-valued measurements are distinct too, which is
    why a number needs one of those two signs. Tables of fewer than 20 rows say nothing.

    >>> df = pd.DataFrame({"user_id": range(5, 95, 3), "row": range(30), "x": [0.5] * 30,
    ...                    "income": range(1000, 1900, 30), "code": [f"u{i}" for i in range(30)]})
    >>> id_columns(df, ["user_id", "row", "x", "income", "code"])   # income: a measurement
    ['user_id', 'row', 'code']
    """
    if len(frame) < 20:
        return []
    out = []
    for c in columns:
        values = frame[c]
        if values.isna().any() or values.nunique() != len(values):
            continue
        if pd.api.types.is_integer_dtype(values):
            steps = np.diff(np.sort(values.to_numpy()))
            if ID_NAME.search(str(c)) or bool(np.all(steps == 1)):
                out.append(c)
        elif not pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            out.append(c)
    return out


def warn_id_columns(src: _Source, source: str) -> None:
    """A :class:`DataWarning` for each feature column of ``src`` that looks like an ID."""
    features = [c for c in src.frame.columns if c != src.label and c not in src.drop]
    for c in id_columns(src.frame, features):
        warnings.warn(
            f"column {c!r} of {src.path or source!r} looks like an ID (a different value in "
            f'every row) and is used as a feature; leave it out with data.drop = ["{c}"]',
            DataWarning,
            stacklevel=3,
        )


def load_frame(name: str) -> tuple[pd.DataFrame, str, tuple[str, ...]]:
    """Raw shipped table: ``(frame, label column, categorical columns)``.

    >>> frame, label, cats = load_frame("fair")
    >>> frame.shape, label, cats
    ((6366, 9), 'had_affair', ('occupation', 'occupation_husb'))
    """
    check_choice("dataset", name, list(SHIPPED))
    d = SHIPPED[name]
    return d.load(), d.label, d.categorical


def load_dataset(
    name: str,
    *,
    rows: int | None = None,
    hash_dim: int | None = None,
    signed: bool = True,
    intercept: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Load a dataset by name as ``(X [n, M], y [n] ∈ {±1})``.

    Numeric columns are standardized over all ``n`` rows here (use
    :func:`classification_federated_data` for training-only statistics).

    Args:
        name: ``"fair"``, ``"breast_cancer"``, ``"avazu:<path>"`` (or a bare path to an
            Avazu CSV) or ``"csv:<path>:<label>"``.
        rows: the first ``rows`` rows only (default all).
        hash_dim: hashed columns for categorical features (default 16 for tables, 256
            for Avazu).
        signed: signed hashing.
        intercept: append a column of ones.

    >>> X, y = load_dataset("breast_cancer")
    >>> X.shape, int((y > 0).sum())
    ((569, 30), 357)

    """
    if rows is not None:
        rows = check_int("rows", rows, lo=1)
    src = _resolve(name, rows)
    dim = _DEFAULT_HASH_DIM[src.kind] if hash_dim is None else check_int("hash_dim", hash_dim, lo=1)
    if src.kind == "avazu":
        X, y = load_avazu(src.path, hash_dim=dim, rows=rows, signed=signed)
    else:
        frame = src.frame if rows is None else src.frame.iloc[:rows]
        X, y = _encode_split(frame, src, dim, signed, np.arange(len(frame)), None)[:2]
    return (add_intercept(X) if intercept else X), y


def _encode_split(
    frame: pd.DataFrame,
    src: _Source,
    hash_dim: int,
    signed: bool,
    train: np.ndarray,
    test: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Encode training rows (fit) and test rows (transform) of a table."""
    numeric, cat = infer_columns(
        frame, label=src.label, categorical=src.categorical, drop=src.drop, source=src.path
    )
    y_all, _ = encode_labels(frame[src.label], name=src.label, source=src.path)
    tr = frame.iloc[train]
    enc = TabularEncoder.fit(
        tr, numeric=numeric, categorical=cat, hash_dim=hash_dim, signed=signed, source=src.path
    )
    X_tr = enc.transform(tr, source=src.path)
    if test is None:
        return X_tr, y_all[train], None, None
    return X_tr, y_all[train], enc.transform(frame.iloc[test], source=src.path), y_all[test]


def _with_columns(
    src: _Source, source: str, categorical: Sequence[str], drop: Sequence[str]
) -> _Source:
    """``src`` with the columns given to hash (beside its own) and to leave out."""
    if src.kind == "avazu" and (categorical or drop):
        raise ConfigError(
            "data.categorical and data.drop apply to tables (csv:PATH:LABEL or a shipped set); "
            f"{source!r} is an Avazu file, whose columns pgfl hashes itself"
        )
    return replace(src, categorical=(*src.categorical, *categorical), drop=tuple(drop))


def _check_table(src: _Source, source: str) -> None:
    """A table's columns and labels (one line for the first problem), and ID-like columns."""
    infer_columns(
        src.frame, label=src.label, categorical=src.categorical, drop=src.drop, source=src.path
    )
    warn_id_columns(src, source)
    encode_labels(src.frame[src.label], name=src.label, source=src.path)


#: The client sizes of :func:`classification_federated_data` by default (the papers'
#: unequal split): scheme, Dirichlet concentration, samples guaranteed to every client.
SIZES, SIZE_ALPHA, MIN_PER_CLIENT = "dirichlet", 1.0, 10


def federated_counts(n: int, *, P: int, K: int, seed: int) -> np.ndarray:
    """Samples per client ``[P, K]`` of ``n`` training rows, as the builder spreads them.

    :func:`classification_federated_data` with its default sizes, drawn from the seed
    without the data.

    >>> int(federated_counts(5101, P=5, K=10, seed=1).sum())
    5101
    """
    return client_counts(n, P, K, seed, SIZES, SIZE_ALPHA, 1.0, MIN_PER_CLIENT)


def classification_federated_data(
    source: str = "fair",
    *,
    P: int = 5,
    K: int = 10,
    rows: int | None = 5101,
    test_size: int = 256,
    hash_dim: int | None = None,
    categorical: Sequence[str] = (),
    drop: Sequence[str] = (),
    feature_noise: float | Sequence[float] = (0.0, 1.0),
    feature_shift: float = 0.0,
    sizes: str = SIZES,
    size_alpha: float = SIZE_ALPHA,
    min_per_client: int = MIN_PER_CLIENT,
    label_skew: float | None = None,
    intercept: bool = True,
    signed: bool = True,
    avazu_sample: str = "head",
    seed: int = 0,
) -> FederatedData:
    """Build the papers' federated classification data in one call (preprint §V-B).

    Steps: load ``source``; draw ``test_size`` clean test rows uniformly at random; draw
    ``rows`` training rows from the rest (all of them if ``rows`` is None); fit the
    standardization on the training rows only and encode both parts; append the
    intercept; split the training rows over ``P × K`` clients with unequal sizes
    (optionally label skew) and add per-client feature noise to the training rows only
    (:mod:`pgfl.data.partition`). The defaults reproduce the papers' set-up (5,101
    samples unequally over 50 agents, non-iid noise per agent, 256 clean test samples)
    on the shipped ``fair`` data (6,366 rows).

    Args:
        source: ``"fair"`` (default), ``"breast_cancer"``, a path to an Avazu CSV (or
            ``"avazu:<path>"``), or ``"csv:<path>:<label>"``.
        P: number of federated units (servers).
        K: clients per unit.
        rows: training samples over all clients (the papers' 5,101); ``None`` = all rows
            left after the test set. Must be at least ``P K min_per_client``.
        test_size: clean held-out samples (the papers' 256), never perturbed; 0: none
            (the data's ``X_test`` is ``None``).
        hash_dim: hashed columns for categorical features; default 16 for tables (the
            12 ``fair`` occupation codes) and 256 for Avazu.
        categorical: columns of a table hashed as categories although numeric (integer
            codes), beside the text columns and a shipped set's own.
        drop: columns of a table left out (an ID, a leak of the label). A column that
            looks like an ID (a distinct value in every row: text, or integers named like
            an id or counting the rows) and is not dropped gets a :class:`DataWarning`.
        feature_noise: per-client feature-noise scale: client ``c`` draws
            ``s_c ~ U[lo, hi]`` (a pair) or ``U[0, s]`` (a float) and adds
            ``s_c N(0, I)`` to each of its rows' features (default ``(0, 1)``: on
            standardized features, client noise from none up to the signal's own size).
            ``0`` disables it.
        feature_shift: std of a per-client mean shift ``δ_c ~ N(0, σ² I)`` (default 0).
        sizes: client-size scheme: ``"dirichlet"`` (default), ``"lognormal"``, ``"equal"``.
        size_alpha: Dirichlet concentration of the client proportions (1.0: sizes spread
            from ``min_per_client`` to about four times the mean).
        min_per_client: samples guaranteed to every client (10 = the papers' largest
            mini-batch ``B ∈ [5, 10]``).
        label_skew: Dirichlet concentration of per-client label proportions; ``None``
            (default, as in the papers) for none.
        intercept: append a constant-1 bias column (never perturbed), default on.
        signed: signed feature hashing.
        avazu_sample: for Avazu files: ``"head"`` (the first ``rows + test_size`` rows;
            fast, but Avazu's file is sorted by hour) or ``"reservoir"`` (uniform over
            the whole file; reads all of it).
        seed: root seed; every draw comes from a named stream under it.

    Returns:
        :class:`FederatedData` with ``X [P, K, N_max, M]``, ``y ∈ {±1}``, ``counts``,
        ``X_test [test_size, M]``, ``y_test``; ``M = n_numeric + hash_dim (if any
        categorical) + intercept`` (``fair``: 6 + 16 + 1 = 23).

    Raises:
        ConfigError: unknown source, bad data (see the loaders), too few rows for the
            test set and the clients, bad parameters. MissingFileError: missing file (a
            ``FileNotFoundError``); FileError: a file that cannot be read.

    >>> fd = classification_federated_data(seed=1)
    >>> fd.shape[:2], int(fd.counts.sum()), fd.X_test.shape
    ((5, 10), 5101, (256, 23))

    """
    P = check_int("P", P, lo=1)
    K = check_int("K", K, lo=1)
    test_size = check_int("test_size", test_size, lo=0)
    min_per_client = check_int("min_per_client", min_per_client, lo=1)
    if rows is not None:
        rows = check_int("rows", rows, lo=1)
    check_choice("avazu_sample", avazu_sample, ["head", "reservoir"])
    need_train = rows if rows is not None else None

    src = _with_columns(_resolve(source, None), source, categorical, drop)
    dim = _DEFAULT_HASH_DIM[src.kind] if hash_dim is None else check_int("hash_dim", hash_dim, lo=1)
    split_rng = stream(seed, "data.split")
    if src.kind == "avazu":
        want = None if rows is None else rows + test_size
        if avazu_sample == "reservoir":
            if want is None:
                raise ConfigError("rows must be given with avazu_sample='reservoir'")
            X_all, y_all = load_avazu(
                src.path,
                hash_dim=dim,
                rows=want,
                sample="reservoir",
                rng=stream(seed, "data.avazu.sample"),
                signed=signed,
            )
        else:
            X_all, y_all = load_avazu(src.path, hash_dim=dim, rows=want, signed=signed)
        n_all = X_all.shape[0]
    else:
        _check_table(src, source)  # schema and labels first: they say more than a size error
        n_all = len(src.frame)
    if need_train is None:
        need_train = n_all - test_size
    if n_all < need_train + test_size or need_train < 1:
        raise ConfigError(
            f"rows + test_size must be at most the {n_all} rows of {source!r}; "
            f"got rows={rows} + test_size={test_size}"
        )
    if need_train < P * K * min_per_client:
        raise ConfigError(
            f"rows must be at least P*K*min_per_client = {P}*{K}*{min_per_client} = "
            f"{P * K * min_per_client} (every client needs {min_per_client} sample(s)); "
            f"got {need_train}"
        )
    perm = split_rng.permutation(n_all)
    test_idx = np.sort(perm[:test_size])
    train_idx = np.sort(perm[test_size : test_size + need_train])
    if src.kind == "avazu":
        X_tr, y_tr, X_te, y_te = (
            X_all[train_idx],
            y_all[train_idx],
            X_all[test_idx],
            y_all[test_idx],
        )
    else:
        X_tr, y_tr, X_te, y_te = _encode_split(src.frame, src, dim, signed, train_idx, test_idx)
    if np.unique(y_tr).size < 2:
        raise ConfigError(f"the training rows of {source!r} hold a single label; need both")
    M = X_tr.shape[1]
    if intercept:
        X_tr, X_te = add_intercept(X_tr), add_intercept(X_te)
    if test_size == 0:  # no test set: no test metrics (not an empty one)
        X_te = y_te = None
    return partition(
        X_tr,
        y_tr,
        P=P,
        K=K,
        seed=seed,
        sizes=sizes,
        size_alpha=size_alpha,
        min_per_client=min_per_client,
        label_skew=label_skew,
        feature_noise=feature_noise,
        feature_shift=feature_shift,
        clean_columns=(M,) if intercept else (),
        X_test=X_te,
        y_test=y_te,
    )
