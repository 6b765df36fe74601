import csv
import datetime as dt

import numpy as np
import pytest
from scipy import sparse as sp

from pgfl.data.avazu import (
    AVAZU_CATEGORICAL,
    AVAZU_COLUMNS,
    AvazuChunk,
    _reservoir_update,
    is_avazu_file,
    iter_avazu,
    load_avazu,
    write_synthetic_avazu,
)
from pgfl.data.hashing import hashed_indices
from pgfl.rng import stream
from pgfl.validation import ConfigError


@pytest.fixture(scope="module")
def avazu_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("avazu") / "train.csv"
    write_synthetic_avazu(path, 3000, seed=3, chunk_rows=700)
    return path


def reference_rows(path, n, dim, signed=True):
    """Slow, obviously-correct reference: csv module + one token at a time."""
    X, y = [], []
    with open(path, newline="") as fh:
        for i, rec in enumerate(csv.DictReader(fh)):
            if i == n:
                break
            h = rec["hour"]
            t = dt.datetime(2000 + int(h[:2]), int(h[2:4]), int(h[4:6]), int(h[6:]))
            tokens = [f"{f}={rec[f]}" for f in AVAZU_CATEGORICAL]
            tokens += [f"hour_of_day={t.hour}", f"day_of_week={t.weekday()}"]
            row = np.zeros(dim)
            idx, sign = hashed_indices(tokens, dim, signed=signed)
            for j, s in zip(idx, sign, strict=True):
                row[j] += s
            X.append(row)
            y.append(1.0 if rec["click"] == "1" else -1.0)
    return np.array(X), np.array(y)


def write_rows(path, rows, header=AVAZU_COLUMNS):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def good_row(i=0, click="0", hour="14102213"):
    vals = {"id": str(i), "click": click, "hour": hour}
    vals.update({f: f"v{i % 3}" for f in AVAZU_CATEGORICAL})
    return [vals[c] for c in AVAZU_COLUMNS]


def test_first_rows_match_slow_reference(avazu_file):
    X, y = load_avazu(avazu_file, hash_dim=97, rows=60, chunk_rows=25)
    Xr, yr = reference_rows(avazu_file, 60, 97)
    assert np.array_equal(X, Xr)
    assert np.array_equal(y, yr)


def test_unsigned_matches_reference_and_has_23_tokens(avazu_file):
    X, _ = load_avazu(avazu_file, hash_dim=31, rows=20, signed=False)
    Xr, _ = reference_rows(avazu_file, 20, 31, signed=False)
    assert np.array_equal(X, Xr)
    assert np.array_equal(X.sum(axis=1), np.full(20, 23.0))


def test_hour_tokens_day_of_week_known_date(tmp_path):
    # 2014-10-21 was a Tuesday (weekday 1); 2014-10-26 a Sunday (6).
    p = tmp_path / "t.csv"
    write_rows(p, [good_row(0, hour="14102105"), good_row(0, hour="14102623")])
    ch = next(iter_avazu(p, hash_dim=1 << 30, fields=["C1"]))
    want = [
        hashed_indices(["hour_of_day=5", "day_of_week=1"], 1 << 30)[0],
        hashed_indices(["hour_of_day=23", "day_of_week=6"], 1 << 30)[0],
    ]
    assert ch.idx[:, 1:].tolist() == [w.tolist() for w in want]


def test_whole_file_streams_in_chunks_in_order(avazu_file):
    chunks = list(iter_avazu(avazu_file, hash_dim=64, chunk_rows=700))
    assert [len(c) for c in chunks] == [700, 700, 700, 700, 200]
    rows = np.concatenate([c.row for c in chunks])
    assert np.array_equal(rows, np.arange(3000))
    X, y = load_avazu(avazu_file, hash_dim=64, chunk_rows=700)
    assert X.shape == (3000, 64) and set(np.unique(y)) <= {-1.0, 1.0}


def test_row_limit_never_reads_past_limit(tmp_path):
    # Rows after the limit are malformed: reading the first 50 must not touch them.
    p = tmp_path / "t.csv"
    write_rows(p, [good_row(i) for i in range(50)] + [good_row(50, click="7")])
    X, y = load_avazu(p, hash_dim=16, rows=50, chunk_rows=8)
    assert X.shape == (50, 16)
    with pytest.raises(ConfigError, match=r"got '7' at data row 50 \(line 52\)"):
        load_avazu(p, hash_dim=16)


def test_sparse_equals_dense(avazu_file):
    Xd, yd = load_avazu(avazu_file, hash_dim=50, rows=300)
    Xs, ys = load_avazu(avazu_file, hash_dim=50, rows=300, sparse=True)
    assert sp.issparse(Xs) and np.array_equal(Xs.toarray(), Xd) and np.array_equal(ys, yd)


def test_reservoir_exact_size_file_order_and_deterministic(avazu_file):
    kw = dict(hash_dim=64, rows=100, sample="reservoir", chunk_rows=333)
    X1, y1 = load_avazu(avazu_file, rng=stream(5, "s"), **kw)
    X2, y2 = load_avazu(avazu_file, rng=stream(5, "s"), **kw)
    X3, _ = load_avazu(avazu_file, rng=stream(6, "s"), **kw)
    assert X1.shape == (100, 64) and np.array_equal(X1, X2) and np.array_equal(y1, y2)
    assert not np.array_equal(X1, X3)
    # Every sampled row is a row of the file (compare to the full hashed file).
    Xall, _ = load_avazu(avazu_file, hash_dim=64)
    pos = {r.tobytes(): i for i, r in enumerate(Xall)}
    idx = [pos[r.tobytes()] for r in X1]
    assert idx == sorted(idx)  # returned in file order


def test_reservoir_larger_than_file_returns_whole_file(avazu_file):
    X, _ = load_avazu(avazu_file, hash_dim=8, rows=5000, sample="reservoir", rng=stream(0, "s"))
    assert X.shape == (3000, 8)


def _chunk(rows):
    n = len(rows)
    return AvazuChunk(np.zeros((n, 1), np.int64), np.ones((n, 1)), np.zeros(n), rows)


def test_reservoir_inclusion_is_uniform():
    # Statistical: N = 30 rows streamed in chunks of 7, reservoir 6, 3000 repetitions.
    # Each row is kept with probability 6/30 = 0.2: count ~ Binomial(3000, 0.2), sd 21.9.
    N, R, reps = 30, 6, 3000
    counts = np.zeros(N)
    for r in range(reps):
        rng = stream(r, "test.reservoir")
        res, seen = None, 0
        for start in range(0, N, 7):
            ch = _chunk(np.arange(start, min(start + 7, N)))
            res = _reservoir_update(res, ch, R, seen, rng)
            seen += len(ch)
        assert len(np.unique(res.row)) == R
        counts[res.row] += 1
    assert np.abs(counts - reps * R / N).max() < 4.5 * np.sqrt(reps * 0.2 * 0.8)
    # The last row and the first row are equally likely (a naive "fill then stop" or
    # "keep the last R" scheme fails this).
    assert abs(counts[0] - counts[-1]) < 6 * np.sqrt(reps * 0.2 * 0.8)


def test_bernoulli_fraction_and_cap(avazu_file):
    X, _ = load_avazu(avazu_file, hash_dim=8, sample="bernoulli", fraction=1.0, rng=stream(0, "b"))
    assert X.shape[0] == 3000
    X, _ = load_avazu(avazu_file, hash_dim=8, sample="bernoulli", fraction=0.3, rng=stream(0, "b"))
    assert abs(X.shape[0] - 900) < 4 * np.sqrt(3000 * 0.3 * 0.7)
    X, _ = load_avazu(
        avazu_file, hash_dim=8, rows=123, sample="bernoulli", fraction=0.5, rng=stream(0, "b")
    )
    assert X.shape[0] == 123


def test_synthetic_writer_deterministic_and_detected(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    write_synthetic_avazu(a, 500, seed=9, chunk_rows=200)
    write_synthetic_avazu(b, 500, seed=9, chunk_rows=200)
    assert a.read_bytes() == b.read_bytes()
    assert is_avazu_file(a)
    c = tmp_path / "c.csv"
    write_rows(c, [["1", "2"]], header=["x", "label"])
    assert not is_avazu_file(c)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(sample="reservoir", rng=None, rows=5), "rng must be a numpy.random.Generator"),
        (dict(sample="reservoir", rng=stream(0, "x")), "rows must be an integer"),
        (dict(sample="bernoulli", rng=stream(0, "x")), "fraction must be a real number"),
        (dict(sample="bernoulli", rng=stream(0, "x"), fraction=1.5), r"fraction .* got 1.5"),
        (dict(fraction=0.5), "fraction is only used with sample='bernoulli'"),
        (dict(sample="head"), "sample must be one of"),
        (dict(hash_dim=0), "hash_dim must be an integer"),
        (dict(rows=0), "rows must be an integer"),
        (dict(fields=["nope"]), "fields must be a non-empty subset"),
    ],
)
def test_bad_arguments(avazu_file, kwargs, match):
    kwargs = {"hash_dim": 8, **kwargs}
    with pytest.raises(ConfigError, match=match):
        load_avazu(avazu_file, **kwargs)


def test_bad_files(tmp_path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        load_avazu(missing)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ConfigError, match="is empty"):
        load_avazu(empty)
    header_only = tmp_path / "h.csv"
    write_rows(header_only, [])
    with pytest.raises(ConfigError, match="has no data rows"):
        load_avazu(header_only)
    no_click = tmp_path / "test.csv"  # Avazu's test file has no click column
    write_rows(no_click, [], header=[c for c in AVAZU_COLUMNS if c != "click"])
    with pytest.raises(ConfigError, match="missing label column 'click'"):
        load_avazu(no_click)
    bad_hour = tmp_path / "bh.csv"
    write_rows(bad_hour, [good_row(0), good_row(1, hour="2014-10")])
    with pytest.raises(ConfigError, match=r"'hour' must be YYMMDDHH; got '2014-10' at data row 1"):
        load_avazu(bad_hour)
