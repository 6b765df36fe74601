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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pgfl.data.avazu import is_avazu_file, load_avazu
from pgfl.data.federated import FederatedData
from pgfl.data.partition import add_intercept, partition
from pgfl.data.tabular import TabularEncoder, encode_labels, infer_columns, read_table
from pgfl.files import check_input_file, resolve_path
from pgfl.rng import stream
from pgfl.validation import ConfigError, check_choice, check_int

__all__ = [
    "SHIPPED",
    "source_path",
    "absolute_source",
    "ShippedDataset",
    "dataset_names",
    "load_frame",
    "load_dataset",
    "classification_federated_data",
]


def _fair() -> pd.DataFrame:
    from statsmodels.datasets import fair

    df = fair.load_pandas().data.copy()
    df["had_affair"] = (df["affairs"] > 0).astype(np.int64)
    return df.drop(columns=["affairs"])


def _breast_cancer() -> pd.DataFrame:
    from sklearn.datasets import load_breast_cancer

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

    """

    name: str
    load: Callable[[], pd.DataFrame]
    label: str
    categorical: tuple[str, ...]
    description: str


SHIPPED: dict[str, ShippedDataset] = {
    "fair": ShippedDataset(
        "fair",
        _fair,
        "had_affair",
        ("occupation", "occupation_husb"),
        "statsmodels Fair affairs survey, 6,366 rows, label affairs > 0",
    ),
    "breast_cancer": ShippedDataset(
        "breast_cancer",
        _breast_cancer,
        "target",
        (),
        "scikit-learn Wisconsin breast cancer, 569 rows, 30 numeric features, label benign",
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
    numeric, cat = infer_columns(frame, label=src.label, categorical=src.categorical)
    y_all, _ = encode_labels(frame[src.label], name=src.label, source=src.path)
    tr = frame.iloc[train]
    enc = TabularEncoder.fit(
        tr, numeric=numeric, categorical=cat, hash_dim=hash_dim, signed=signed, source=src.path
    )
    X_tr = enc.transform(tr, source=src.path)
    if test is None:
        return X_tr, y_all[train], None, None
    return X_tr, y_all[train], enc.transform(frame.iloc[test], source=src.path), y_all[test]


def classification_federated_data(
    source: str = "fair",
    *,
    P: int = 5,
    K: int = 10,
    rows: int | None = 5101,
    test_size: int = 256,
    hash_dim: int | None = None,
    feature_noise: float | Sequence[float] = (0.0, 1.0),
    feature_shift: float = 0.0,
    sizes: str = "dirichlet",
    size_alpha: float = 1.0,
    min_per_client: int = 10,
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
        test_size: clean held-out samples (the papers' 256), never perturbed.
        hash_dim: hashed columns for categorical features; default 16 for tables (the
            12 ``fair`` occupation codes) and 256 for Avazu.
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

    src = _resolve(source, None)
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
        # Schema and label errors first: they say more than a size error would.
        infer_columns(src.frame, label=src.label, categorical=src.categorical)
        encode_labels(src.frame[src.label], name=src.label, source=src.path)
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
