"""Streaming loader for the Avazu click-through CSV format, with the hashing trick.

The Avazu file (Kaggle 2014; the papers' Fig. 7 data, preprint §V-B) has the header::

    id,click,hour,C1,banner_pos,site_id,site_domain,site_category,app_id,app_domain,
    app_category,device_id,device_ip,device_model,device_type,device_conn_type,C14,...,C21

and about 40 million rows (6 GB). Every feature is categorical. A row becomes ``F = 23``
tokens hashed into ``M`` columns (:mod:`pgfl.data.hashing`):

* the 21 categorical fields ``C1 .. C21`` (including ``site_*``, ``app_*``, ``device_*``)
  as ``"field=value"`` tokens (an empty cell is the token ``"field="``);
* ``hour`` (``YYMMDDHH``) split into ``"hour_of_day=H"`` (``H`` in 0..23) and ``"day_of_week=D"``
  (``D = 0`` for Monday .. ``6`` for Sunday);
* ``id`` is dropped; ``click`` (``0``/``1``) becomes the label ``y = 2 click - 1 ∈ {-1, +1}``.

The file is read in chunks of ``chunk_rows`` rows (pandas' C parser): memory is bounded by
one chunk plus what is kept, whatever the file size; with a ``rows`` limit and no sampling
the reader stops after ``rows`` rows. Sampling over the whole file is reservoir
(Vitter's Algorithm R, exactly ``rows`` rows uniformly without replacement) or Bernoulli
(each row kept independently with probability ``fraction``); both draw from an explicit
:class:`numpy.random.Generator`.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "train.csv")
>>> write_synthetic_avazu(path, 50, seed=1)
>>> X, y = load_avazu(path, hash_dim=64, rows=10)
>>> X.shape, sorted(set(y.tolist())) <= [-1.0, 1.0]
((10, 64), True)
>>> bool((np.abs(X).sum(axis=1) <= 23).all())  # at most F = 23 non-zeros per row
True
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pgfl.data.hashing import hash_fields, hashed_to_csr, hashed_to_dense
from pgfl.files import check_input_file, reading
from pgfl.rng import stream
from pgfl.validation import ConfigError, check_choice, check_int, check_real

__all__ = [
    "AVAZU_COLUMNS",
    "AVAZU_CATEGORICAL",
    "AvazuChunk",
    "iter_avazu",
    "load_avazu",
    "is_avazu_file",
    "write_synthetic_avazu",
]

AVAZU_CATEGORICAL: tuple[str, ...] = (
    "C1",
    "banner_pos",
    "site_id",
    "site_domain",
    "site_category",
    "app_id",
    "app_domain",
    "app_category",
    "device_id",
    "device_ip",
    "device_model",
    "device_type",
    "device_conn_type",
    *(f"C{i}" for i in range(14, 22)),
)
"""The 21 categorical fields hashed as ``"field=value"`` tokens."""

AVAZU_COLUMNS: tuple[str, ...] = ("id", "click", "hour", *AVAZU_CATEGORICAL)
"""The header of Avazu's ``train`` file, in order."""

_HOUR_FIELDS = ("hour_of_day", "day_of_week")
_MAX_DENSE_ENTRIES = 250_000_000  # 2 GB of float64


@dataclass(frozen=True)
class AvazuChunk:
    """One chunk of hashed Avazu rows (sparse: ``F`` tokens per row).

    Attributes:
        idx: hashed columns, ``int64`` ``[n, F]``, each in ``[0, M)``.
        sign: token values, ``float64`` ``[n, F]`` in ``{-1, +1}``.
        y: labels ``2 click - 1``, ``float64`` ``[n]``.
        row: 0-based data row numbers in the file (header excluded), ``int64`` ``[n]``.

    """

    idx: np.ndarray
    sign: np.ndarray
    y: np.ndarray
    row: np.ndarray

    def __len__(self) -> int:
        return int(self.y.shape[0])


def _check_path(path: str | os.PathLike[str]) -> Path:
    return check_input_file(path, what="Avazu file")


def _read_header(path: Path) -> list[str]:
    """The column names of the first line (compressed files too: pandas infers it)."""
    with reading(path):
        try:
            header = pd.read_csv(path, nrows=0, dtype=str, engine="c")
        except pd.errors.EmptyDataError:
            raise ConfigError(f"file {str(path)!r} is empty (no header line)") from None
    return [str(c).strip() for c in header.columns]


def is_avazu_file(path: str | os.PathLike[str]) -> bool:
    """Tell whether the file's header has Avazu's ``click``, ``hour`` and categorical columns."""
    header = set(_read_header(_check_path(path)))
    return {"click", "hour", *AVAZU_CATEGORICAL} <= header


def _hour_fields(hour: pd.Series, first_row: int, path: Path) -> dict[str, np.ndarray]:
    t = pd.to_datetime(hour, format="%y%m%d%H", errors="coerce")
    bad = np.flatnonzero(t.isna().to_numpy())
    if bad.size:
        i = int(bad[0])
        raise ConfigError(
            f"{str(path)!r}: column 'hour' must be YYMMDDHH; got {hour.iloc[i]!r} "
            f"at data row {first_row + i} (line {first_row + i + 2})"
        )
    return {
        "hour_of_day": t.dt.hour.to_numpy(),
        "day_of_week": t.dt.day_of_week.to_numpy(),
    }


def _labels(click: pd.Series, first_row: int, path: Path) -> np.ndarray:
    v = click.to_numpy(dtype=object)
    is1 = v == "1"
    bad = np.flatnonzero(~(is1 | (v == "0")))
    if bad.size:
        i = int(bad[0])
        raise ConfigError(
            f"{str(path)!r}: label column 'click' must have exactly two values '0' and '1'; "
            f"got {v[i]!r} at data row {first_row + i} (line {first_row + i + 2})"
        )
    return np.where(is1, 1.0, -1.0)


def iter_avazu(
    path: str | os.PathLike[str],
    *,
    hash_dim: int,
    signed: bool = True,
    rows: int | None = None,
    chunk_rows: int = 65_536,
    fields: Sequence[str] | None = None,
    key: bytes = b"",
) -> Iterator[AvazuChunk]:
    """Stream an Avazu CSV as hashed chunks, reading at most ``rows`` rows.

    Args:
        path: the CSV file (Avazu's ``train`` layout; extra columns are ignored).
        hash_dim: number of hashed columns ``M``.
        signed: signed (``±1``) or unsigned hashing (:mod:`pgfl.data.hashing`).
        rows: stop after this many data rows (``None``: the whole file).
        chunk_rows: rows parsed per chunk; peak memory is about ``chunk_rows`` × 1.5 kB.
        fields: categorical fields to hash (default all 21 of :data:`AVAZU_CATEGORICAL`);
            the two hour tokens are always included.
        key: optional BLAKE2b key for the hash.

    Yields:
        :class:`AvazuChunk` objects with ``F = len(fields) + 2`` tokens per row.

    Raises:
        MissingFileError: the file does not exist (a ``FileNotFoundError``).
        FileError: the file cannot be read: not UTF-8, a truncated compressed stream, a
            row with more fields than the header (the message names the file and line).
        ConfigError: empty file, missing columns, a ``click`` other than 0/1 or a
            malformed ``hour`` (reported with data row and file line).

    """
    p = _check_path(path)
    hash_dim = check_int("hash_dim", hash_dim, lo=1)
    chunk_rows = check_int("chunk_rows", chunk_rows, lo=1)
    if rows is not None:
        rows = check_int("rows", rows, lo=1)
    fields = AVAZU_CATEGORICAL if fields is None else tuple(fields)
    unknown = [f for f in fields if f not in AVAZU_CATEGORICAL]
    if unknown or not fields:
        raise ConfigError(
            f"fields must be a non-empty subset of {list(AVAZU_CATEGORICAL)}; got {list(fields)}"
        )
    header = _read_header(p)
    needed = ["click", "hour", *fields]
    missing = [c for c in needed if c not in header]
    if missing:
        what = "label column 'click'" if missing == ["click"] else f"columns {missing}"
        raise ConfigError(f"{str(p)!r} is not in the Avazu format: missing {what}")
    first = 0
    chunksize = min(chunk_rows, rows) if rows is not None else chunk_rows
    for frame in _frames(p, needed, chunksize, rows):
        n = len(frame)
        if n == 0:
            break
        y = _labels(frame["click"], first, p)
        cols: dict[str, object] = {f: frame[f].to_numpy() for f in fields}
        cols.update(_hour_fields(frame["hour"], first, p))
        idx, sign = hash_fields(cols, hash_dim, signed=signed, key=key)
        yield AvazuChunk(idx, sign, y, np.arange(first, first + n, dtype=np.int64))
        first += n


def _frames(
    p: Path, columns: list[str], chunksize: int, rows: int | None
) -> Iterator[pd.DataFrame]:
    """The file's chunks as string frames; a bad row or truncated stream names the file."""
    with reading(p):  # parse errors surface while iterating, not when the reader opens
        reader = pd.read_csv(
            p,
            usecols=columns,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            chunksize=chunksize,
            nrows=rows,
            engine="c",
        )
        with reader:
            yield from reader


def _reservoir_update(
    res: AvazuChunk | None, chunk: AvazuChunk, size: int, seen: int, rng: np.random.Generator
) -> AvazuChunk:
    """Vectorized Algorithm R over one chunk (``seen`` rows came before it)."""
    n = len(chunk)
    fill = 0
    if res is None or len(res) < size:
        fill = min(size - (0 if res is None else len(res)), n)
        head = AvazuChunk(chunk.idx[:fill], chunk.sign[:fill], chunk.y[:fill], chunk.row[:fill])
        res = (
            head
            if res is None
            else AvazuChunk(
                np.concatenate([res.idx, head.idx]),
                np.concatenate([res.sign, head.sign]),
                np.concatenate([res.y, head.y]),
                np.concatenate([res.row, head.row]),
            )
        )
    if fill == n:
        return res
    # Row t (0-based over the stream, t >= size) draws j ~ U{0..t}; if j < size it
    # replaces slot j. Later rows overwrite earlier ones: keep the last writer per slot.
    t = seen + np.arange(fill, n, dtype=np.int64)
    j = rng.integers(0, t + 1)
    hit = np.flatnonzero(j < size) + fill
    if hit.size:
        slots = j[hit - fill]
        rev_slots, rev_first = np.unique(slots[::-1], return_index=True)
        src = hit[::-1][rev_first]
        res.idx[rev_slots] = chunk.idx[src]
        res.sign[rev_slots] = chunk.sign[src]
        res.y[rev_slots] = chunk.y[src]
        res.row[rev_slots] = chunk.row[src]
    return res


def load_avazu(
    path: str | os.PathLike[str],
    *,
    hash_dim: int = 1024,
    rows: int | None = None,
    sample: str | None = None,
    fraction: float | None = None,
    rng: np.random.Generator | None = None,
    signed: bool = True,
    fields: Sequence[str] | None = None,
    chunk_rows: int = 65_536,
    sparse: bool = False,
    key: bytes = b"",
) -> tuple[np.ndarray, np.ndarray]:
    """Read (a sample of) an Avazu CSV into hashed features ``X [n, M]`` and labels ``y [n]``.

    Args:
        path: the CSV file.
        hash_dim: ``M``, the number of hashed feature columns.
        rows: how many rows to return. Without ``sample``: the first ``rows`` rows (the
            reader stops there). With ``sample="reservoir"``: required, the sample size.
            With ``sample="bernoulli"``: an optional cap (reading stops when reached).
        sample: ``None`` (read in file order), ``"reservoir"`` (exactly ``rows`` rows,
            uniformly without replacement over the whole file, returned in file order)
            or ``"bernoulli"`` (each row independently with probability ``fraction``).
        fraction: the Bernoulli keep probability in ``(0, 1]``.
        rng: the Generator for sampling (required when ``sample`` is set), e.g.
            ``pgfl.rng.stream(seed, "data.avazu.sample")``.
        signed: signed or unsigned hashing.
        fields: subset of the categorical fields to hash (default all 21).
        chunk_rows: rows parsed per chunk (bounds memory).
        sparse: return ``X`` as a ``scipy.sparse.csr_matrix`` instead of a dense array.
        key: optional BLAKE2b key.

    Returns:
        ``(X, y)``: ``X`` float64 ``[n, M]`` (dense or CSR), ``y`` float64 ``[n]`` in ``{±1}``.

    Raises:
        MissingFileError, FileError, ConfigError: see :func:`iter_avazu`; also a file with no data
            rows, a bad ``sample``/``fraction``/``rng``, or a dense result above 2 GB.

    """
    if sample is not None:
        check_choice("sample", sample, ["reservoir", "bernoulli"])
        if not isinstance(rng, np.random.Generator):
            raise ConfigError(
                f"rng must be a numpy.random.Generator when sample={sample!r}; got {rng!r}"
            )
    if sample == "reservoir" and rows is None:
        raise ConfigError("rows must be an integer in [1, inf] when sample='reservoir'; got None")
    if sample == "bernoulli":
        if fraction is None:
            raise ConfigError("fraction must be a real number in (0, 1] when sample='bernoulli'")
        fraction = check_real("fraction", fraction, lo=0.0, hi=1.0, lo_open=True)
    elif fraction is not None:
        raise ConfigError(f"fraction is only used with sample='bernoulli'; got sample={sample!r}")

    chunks: list[AvazuChunk] = []
    if sample == "reservoir":
        res: AvazuChunk | None = None
        seen = 0
        for ch in iter_avazu(
            path, hash_dim=hash_dim, signed=signed, chunk_rows=chunk_rows, fields=fields, key=key
        ):
            res = _reservoir_update(res, ch, rows, seen, rng)
            seen += len(ch)
        if res is not None:
            order = np.argsort(res.row, kind="stable")
            chunks = [AvazuChunk(res.idx[order], res.sign[order], res.y[order], res.row[order])]
    else:
        kept = 0
        read_limit = rows if sample is None else None
        for ch in iter_avazu(
            path,
            hash_dim=hash_dim,
            signed=signed,
            rows=read_limit,
            chunk_rows=chunk_rows,
            fields=fields,
            key=key,
        ):
            if sample == "bernoulli":
                keep = np.flatnonzero(rng.random(len(ch)) < fraction)
                if rows is not None:
                    keep = keep[: rows - kept]
                ch = AvazuChunk(ch.idx[keep], ch.sign[keep], ch.y[keep], ch.row[keep])
            chunks.append(ch)
            kept += len(ch)
            if rows is not None and kept >= rows:
                break
    n = sum(len(c) for c in chunks)
    if n == 0:
        raise ConfigError(f"{str(path)!r} has no data rows (only a header, or none sampled)")
    if not sparse and n * hash_dim > _MAX_DENSE_ENTRIES:
        raise ConfigError(
            f"a dense X of {n} rows x hash_dim={hash_dim} needs {n * hash_dim * 8 / 1e9:.1f} GB; "
            "use sparse=True, fewer rows or a smaller hash_dim"
        )
    idx = np.concatenate([c.idx for c in chunks])
    sign = np.concatenate([c.sign for c in chunks])
    y = np.concatenate([c.y for c in chunks])
    X = hashed_to_csr(idx, sign, hash_dim) if sparse else hashed_to_dense(idx, sign, hash_dim)
    return X, y


# ----------------------------------------------------------------------------------------
# A generator of files in the same format (tests, benchmarks, trying the CLI offline).
# ----------------------------------------------------------------------------------------

_SYNTH_CARD = {
    "C1": 7,
    "banner_pos": 7,
    "site_id": 3000,
    "site_domain": 3000,
    "site_category": 22,
    "app_id": 3000,
    "app_domain": 200,
    "app_category": 30,
    "device_id": 60000,
    "device_ip": 200000,
    "device_model": 5000,
    "device_type": 5,
    "device_conn_type": 4,
    "C14": 2500,
    "C15": 8,
    "C16": 9,
    "C17": 400,
    "C18": 4,
    "C19": 65,
    "C20": 170,
    "C21": 60,
}
_SYNTH_INFORMATIVE = ("banner_pos", "site_category", "app_category", "device_type", "C18", "C16")


def write_synthetic_avazu(
    path: str | os.PathLike[str],
    rows: int,
    *,
    seed: int = 0,
    chunk_rows: int = 100_000,
    base_logit: float = -2.3,
) -> None:
    """Write ``rows`` synthetic rows in Avazu's ``train`` format (header included).

    Field values follow skewed (power-law-like) frequencies over a per-field vocabulary
    of hexadecimal ids (``site_*``, ``app_*``, ``device_*`` but ``device_type`` /
    ``device_conn_type``) or integers (``C*``, ``banner_pos``, ...), like the real file.
    ``hour`` advances from 14102100 in file order. Clicks are drawn from a logistic model
    ``P(click) = σ(base_logit + Σ_f β_f[value_f] + β_hour[hour of day])`` over six
    low-cardinality fields with ``β ~ N(0, 1.2²)``, so a hashed logistic regression
    learns something (click rate about 15-20%, as in Avazu). Deterministic given ``seed``.
    """
    rows = check_int("rows", rows, lo=0)
    chunk_rows = check_int("chunk_rows", chunk_rows, lo=1)
    vocab_rng = stream(seed, "data.avazu.synthetic.vocab")
    vocab: dict[str, np.ndarray] = {}
    for j, (f, card) in enumerate(_SYNTH_CARD.items()):
        raw = vocab_rng.integers(0, 2**32, size=card, dtype=np.uint64)
        if f.startswith(("site_", "app_", "device_")) and f not in (
            "device_type",
            "device_conn_type",
        ):
            vocab[f] = np.array([f"{v:08x}" for v in raw.tolist()], dtype=object)
        else:
            base = 1000 * (j + 1) if f.startswith("C") and f not in ("C1",) else 0
            vocab[f] = np.array([str(base + v) for v in range(card)], dtype=object)
    beta = {f: vocab_rng.normal(0.0, 1.2, size=_SYNTH_CARD[f]) for f in _SYNTH_INFORMATIVE}
    beta_hour = vocab_rng.normal(0.0, 1.2, size=24)
    start = np.datetime64("2014-10-21T00", "h")
    rows_per_hour = 4000
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(",".join(AVAZU_COLUMNS) + "\n")
        for c, first in enumerate(range(0, rows, chunk_rows)):
            n = min(chunk_rows, rows - first)
            rng = stream(seed, "data.avazu.synthetic.rows", c)
            frame: dict[str, object] = {}
            frame["id"] = rng.integers(0, 2**63, size=n, dtype=np.uint64).astype(str)
            hours = start + ((first + np.arange(n)) // rows_per_hour).astype("timedelta64[h]")
            hod = (hours - hours.astype("datetime64[D]")).astype(np.int64)
            logit = base_logit + beta_hour[hod]
            codes = {}
            for f, card in _SYNTH_CARD.items():
                codes[f] = np.minimum((card * rng.random(n) ** 3).astype(np.int64), card - 1)
            for f in _SYNTH_INFORMATIVE:
                logit = logit + beta[f][codes[f]]
            click = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
            frame["click"] = click
            frame["hour"] = pd.to_datetime(hours).strftime("%y%m%d%H")
            for f in AVAZU_CATEGORICAL:
                frame[f] = vocab[f][codes[f]]
            pd.DataFrame(frame, columns=list(AVAZU_COLUMNS)).to_csv(fh, header=False, index=False)
