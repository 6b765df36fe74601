import numpy as np
import pandas as pd
import pytest

from pgfl.data.avazu import write_synthetic_avazu
from pgfl.data.datasets import (
    classification_federated_data,
    dataset_names,
    load_dataset,
    load_frame,
)
from pgfl.validation import ConfigError


def test_shipped_datasets_load_offline():
    from statsmodels.datasets import fair

    raw = fair.load_pandas().data
    X, y = load_dataset("fair")
    assert X.shape == (6366, 6 + 16)
    assert int((y > 0).sum()) == int((raw["affairs"] > 0).sum())
    frame, label, cats = load_frame("fair")
    assert "affairs" not in frame.columns  # the label's source is not a feature
    Xb, yb = load_dataset("breast_cancer", intercept=True)
    # Wisconsin diagnostic: 569 samples, 212 malignant, 357 benign (the +1 class).
    assert Xb.shape == (569, 31) and int((yb > 0).sum()) == 357
    assert np.array_equal(Xb[:, -1], np.ones(569))
    assert np.allclose(Xb[:, :-1].mean(axis=0), 0.0) and np.allclose(Xb[:, :-1].std(axis=0), 1.0)
    assert set(dataset_names()) >= {"fair", "breast_cancer"}


def test_builder_defaults_match_the_papers_setup():
    fd = classification_federated_data(P=5, K=10, seed=0)
    P, K, N_max, M = fd.shape
    assert (P, K) == (5, 10) and fd.counts.sum() == 5101 and fd.counts.min() >= 10
    assert len(np.unique(fd.counts)) > 10  # unequal split
    assert fd.X_test.shape == (256, M) and M == 6 + 16 + 1
    assert set(np.unique(fd.y[fd.mask])) == {-1.0, 1.0}
    assert set(np.unique(fd.y_test)) == {-1.0, 1.0}
    assert np.array_equal(fd.X[..., -1][fd.mask], np.ones(5101))
    assert np.array_equal(fd.X_test[:, -1], np.ones(256))


def test_builder_train_only_standardization_and_clean_test():
    clean = classification_federated_data(seed=4, feature_noise=0.0)
    noisy = classification_federated_data(seed=4)
    Xtr = clean.X[clean.mask][:, :6]
    assert np.allclose(Xtr.mean(axis=0), 0.0, atol=1e-12)
    assert np.allclose(Xtr.std(axis=0), 1.0)
    assert np.abs(clean.X_test[:, :6].mean(axis=0)).max() > 1e-3  # test stats not used
    # Noise touches training features only: same seed, same test set and labels.
    assert np.array_equal(clean.X_test, noisy.X_test)
    assert np.array_equal(clean.y, noisy.y) and np.array_equal(clean.counts, noisy.counts)
    diff = (noisy.X - clean.X)[noisy.mask]
    assert diff[:, :-1].std() > 0.1 and not diff[:, -1].any()
    # Per-client noise levels differ (non-iid).
    per_client = [
        diff_k.std()
        for p in range(5)
        for k in range(10)
        for diff_k in [(noisy.X - clean.X)[p, k, : clean.counts[p, k], :-1]]
    ]
    assert max(per_client) - min(per_client) > 0.5


def test_centralized_logistic_beats_majority_on_fair():
    # Statistical sanity: the pooled regularized logistic model (rho = 0.03) has a test
    # error clearly below the majority-class rate, averaged over seeds.
    from sklearn.linear_model import LogisticRegression

    errs, base = [], []
    for seed in range(3):
        fd = classification_federated_data(seed=seed)
        X, y = fd.X[fd.mask], fd.y[fd.mask]
        m = LogisticRegression(C=1 / (0.03 * len(y)), fit_intercept=False).fit(X, y)
        errs.append(1 - m.score(fd.X_test, fd.y_test))
        base.append(min((fd.y_test > 0).mean(), (fd.y_test < 0).mean()))
    assert np.mean(errs) < np.mean(base) - 0.02


def test_deterministic():
    a = classification_federated_data("breast_cancer", P=2, K=3, rows=300, test_size=50, seed=7)
    b = classification_federated_data("breast_cancer", P=2, K=3, rows=300, test_size=50, seed=7)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.X_test, b.X_test)


def test_csv_and_avazu_sources(tmp_path):
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "x1": rng.normal(size=400),
            "color": rng.choice(["r", "g"], 400),
            "y": rng.integers(0, 2, 400),
        }
    )
    p = tmp_path / "mine.csv"
    df.to_csv(p, index=False)
    fd = classification_federated_data(
        f"csv:{p}:y", P=2, K=2, rows=None, test_size=40, hash_dim=4, min_per_client=5, seed=0
    )
    assert fd.counts.sum() == 360 and fd.shape[3] == 1 + 4 + 1
    X, y = load_dataset(f"csv:{p}:y", hash_dim=4)
    assert X.shape == (400, 5)

    a = tmp_path / "train.csv"
    write_synthetic_avazu(a, 1200, seed=2)
    for src in (str(a), f"avazu:{a}"):
        fd = classification_federated_data(src, P=2, K=5, rows=1000, test_size=100, hash_dim=32)
        assert fd.shape[3] == 33 and fd.counts.sum() == 1000 and fd.X_test.shape == (100, 33)
    fd_r = classification_federated_data(
        str(a), P=2, K=5, rows=500, test_size=100, hash_dim=32, avazu_sample="reservoir"
    )
    assert fd_r.counts.sum() == 500


def test_bad_sources_and_sizes(tmp_path):
    with pytest.raises(ConfigError, match="unknown dataset 'iris'"):
        classification_federated_data("iris")
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        classification_federated_data(str(tmp_path / "nope.csv"))
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,0\n")
    with pytest.raises(ConfigError, match=r"not in the Avazu format .* 'csv:"):
        classification_federated_data(str(other))
    with pytest.raises(ConfigError, match="csv:<path>:<label column>"):
        load_dataset("csv:nolabel")
    with pytest.raises(ConfigError, match=r"label column 'zzz' not found"):
        classification_federated_data(f"csv:{other}:zzz", P=1, K=1, rows=None, test_size=0)
    with pytest.raises(ConfigError, match="rows \\+ test_size must be at most the 6366 rows"):
        classification_federated_data(rows=6200, test_size=256)
    with pytest.raises(ConfigError, match=r"P\*K\*min_per_client = 5\*10\*10 = 500"):
        classification_federated_data(rows=400)
    three = tmp_path / "three.csv"
    three.write_text("a,y\n" + "".join(f"{i},{i % 3}\n" for i in range(30)))
    with pytest.raises(ConfigError, match="exactly two distinct values; got 3"):
        classification_federated_data(
            f"csv:{three}:y", P=1, K=2, rows=20, test_size=5, min_per_client=1
        )
