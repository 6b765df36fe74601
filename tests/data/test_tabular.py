import numpy as np
import pandas as pd
import pytest

from pgfl.data.hashing import hash_fields, hashed_to_dense
from pgfl.data.tabular import TabularEncoder, encode_labels, infer_columns, load_tabular, read_table
from pgfl.validation import ConfigError


@pytest.fixture
def frame():
    return pd.DataFrame(
        {
            "age": [20.0, 30.0, 40.0, 50.0],
            "n": [1, 1, 1, 1],  # constant
            "city": ["a", "b", "a", None],
            "flag": [True, False, True, True],
            "y": ["no", "yes", "yes", "no"],
        }
    )


def test_standardization_closed_form_and_hashing(frame, tmp_path):
    X, y = load_tabular(frame, label="y", hash_dim=8)
    assert X.shape == (4, 3 + 8)
    age = np.array([20.0, 30, 40, 50])
    assert np.allclose(X[:, 0], (age - 35.0) / np.sqrt(125.0))
    assert np.array_equal(X[:, 1], np.zeros(4))  # constant column centred only
    assert np.allclose(X[:, 2], (np.array([1, 0, 1, 1]) - 0.75) / np.sqrt(0.1875))
    idx, sign = hash_fields({"city": ["a", "b", "a", None]}, 8)
    assert np.array_equal(X[:, 3:], hashed_to_dense(idx, sign, 8))
    assert y.tolist() == [-1.0, 1.0, 1.0, -1.0]
    # Same result through a CSV file (None becomes an empty cell -> NaN -> "<NA>").
    p = tmp_path / "t.csv"
    frame.to_csv(p, index=False)
    Xf, yf = load_tabular(p, label="y", hash_dim=8)
    assert np.allclose(Xf, X) and np.array_equal(yf, y)


def test_train_only_statistics():
    train = pd.DataFrame({"a": [0.0, 2.0, 4.0]})
    test = pd.DataFrame({"a": [100.0]})
    enc = TabularEncoder.fit(train, numeric=["a"])
    assert enc.mean_.tolist() == [2.0]
    assert np.allclose(enc.transform(test), [[(100.0 - 2.0) / np.sqrt(8 / 3)]])
    assert enc.dim == 1 and enc.feature_names == ["a"]


def test_categorical_override_and_drop(frame):
    num, cat = infer_columns(frame, label="y", categorical=["n"], drop=["flag"])
    assert num == ("age",) and cat == ("n", "city")


@pytest.mark.parametrize(
    ("values", "positive", "want"),
    [
        ([0, 1, 1], None, [-1, 1, 1]),
        ([-1, 1, -1], None, [-1, 1, -1]),
        ([True, False], None, [1, -1]),
        (["cat", "dog"], None, [-1, 1]),
        (["cat", "dog"], "cat", [1, -1]),
        ([2.5, 7.0, 2.5], 7.0, [-1, 1, -1]),
    ],
)
def test_label_mapping(values, positive, want):
    y, _ = encode_labels(values, positive=positive)
    assert y.tolist() == [float(v) for v in want]


def test_label_errors():
    with pytest.raises(ConfigError, match=r"exactly two distinct values; got 3: 0, 1, 2"):
        encode_labels([0, 1, 2], name="label")
    with pytest.raises(ConfigError, match="exactly two distinct values; got 1"):
        encode_labels([1, 1])
    with pytest.raises(ConfigError, match="positive must be one of"):
        encode_labels([0, 1], positive=5)
    with pytest.raises(ConfigError, match=r"missing value at data row 1"):
        encode_labels([0, None, 1])


def test_nan_and_inf_reported_with_row_and_column(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("a,b,y\n1,2,0\n3,,1\n5,6,1\n")
    with pytest.raises(ConfigError, match=r"column 'b' has NaN at data row 1 \(line 3 of"):
        load_tabular(p, label="y")
    df = pd.DataFrame({"a": [1.0, np.inf, 2.0], "y": [0, 1, 0]})
    with pytest.raises(ConfigError, match="column 'a' has inf at data row 1"):
        load_tabular(df, label="y")


def test_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        load_tabular(tmp_path / "missing.csv", label="y")
    e = tmp_path / "e.csv"
    e.write_text("")
    with pytest.raises(ConfigError, match="is empty"):
        load_tabular(e, label="y")
    h = tmp_path / "h.csv"
    h.write_text("a,y\n")
    with pytest.raises(ConfigError, match="no data rows"):
        load_tabular(h, label="y")
    d = tmp_path / "d.csv"
    d.write_text("a,b\n1,2\n")
    with pytest.raises(
        ConfigError, match=r"label column 'y' not found; the columns are \['a', 'b'\]"
    ):
        load_tabular(d, label="y")
    with pytest.raises(ConfigError, match="no feature columns"):
        load_tabular(d, label="a", drop=["b"])


def test_rows_limit(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("a,y\n" + "".join(f"{i},{i % 2}\n" for i in range(10)) + "oops,7\n")
    X, y = load_tabular(p, label="y", rows=10)
    assert X.shape == (10, 1)
    assert read_table(p, rows=3).shape == (3, 2)


def test_parquet_needs_pyarrow_or_roundtrips(tmp_path, frame):
    p = tmp_path / "d.parquet"
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        p.write_bytes(b"PAR1")
        with pytest.raises(ConfigError, match=r"needs pyarrow: pip install 'pgfl\[parquet\]'"):
            load_tabular(p, label="y")
    else:
        frame.to_parquet(p)
        X, y = load_tabular(p, label="y", hash_dim=8)
        Xr, yr = load_tabular(frame, label="y", hash_dim=8)
        assert np.allclose(X, Xr) and np.array_equal(y, yr)
