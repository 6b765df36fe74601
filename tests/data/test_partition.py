import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgfl.data.partition import (
    add_intercept,
    client_sizes,
    label_skew_counts,
    noise_scales,
    partition,
)
from pgfl.rng import stream
from pgfl.validation import ConfigError


def ids_data(n, M=3):
    """Row i carries its id in column 0 and label (-1)^i, so rows can be traced."""
    X = np.zeros((n, M))
    X[:, 0] = np.arange(n)
    X[:, 1:] = np.arange(n)[:, None] % 7
    y = np.where(np.arange(n) % 3 == 0, 1.0, -1.0)
    return X, y


def test_equal_sizes_closed_form():
    c = client_sizes(103, 2, 5, rng=stream(0, "t"), sizes="equal")
    assert c.tolist() == [[11, 11, 11, 10, 10], [10, 10, 10, 10, 10]]


@pytest.mark.parametrize("scheme", ["dirichlet", "lognormal"])
def test_unequal_sizes_sum_min_and_spread(scheme):
    c = client_sizes(5101, 5, 10, rng=stream(1, "t"), sizes=scheme, min_per_client=10)
    assert c.shape == (5, 10) and c.sum() == 5101 and c.min() >= 10
    assert c.max() > 2 * c.min()  # unequal


def test_dirichlet_sizes_unbiased_and_concentration_limit():
    # Statistical: E[N_c] = n / C for every client; averaged over 300 draws.
    draws = np.array(
        [client_sizes(1000, 2, 5, rng=stream(s, "t"), min_per_client=1).ravel() for s in range(300)]
    )
    assert np.abs(draws.mean(axis=0) - 100.0).max() < 4 * draws.std(axis=0).max() / np.sqrt(300)
    # Limit: a huge concentration gives (nearly) equal sizes.
    c = client_sizes(1000, 2, 5, rng=stream(0, "t"), size_alpha=1e9)
    assert np.abs(c - 100).max() <= 40  # multinomial noise only: sd ~ 9.5


def test_rows_fewer_than_clients():
    with pytest.raises(
        ConfigError, match=r"rows must be at least P\*K\*min_per_client = 5\*10\*10"
    ):
        client_sizes(499, 5, 10, rng=stream(0, "t"), min_per_client=10)
    with pytest.raises(ConfigError, match="got 49"):
        partition(*ids_data(49), P=5, K=10, seed=0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 40), min_size=1, max_size=30),
    st.floats(0.01, 100.0),
    st.integers(0, 10**6),
    st.floats(0.0, 1.0),
)
def test_label_skew_margins_exact(sizes, alpha, seed, frac):
    N = np.array(sizes)
    n_pos = int(round(frac * N.sum()))
    a = label_skew_counts(N, n_pos, alpha=alpha, rng=stream(seed, "t"))
    assert a.sum() == n_pos
    assert (a >= 0).all() and (a <= N).all()


def test_label_skew_limits():
    N = np.full(40, 100)
    iid = label_skew_counts(N, 1200, alpha=1e6, rng=stream(0, "t"))
    assert np.abs(iid - 30).max() <= 2  # proportional to the global rate 0.3
    skew = label_skew_counts(N, 1200, alpha=0.05, rng=stream(0, "t"))
    purity = np.maximum(skew, N - skew) / N
    assert (purity > 0.9).mean() > 0.6


def test_partition_is_a_permutation_of_rows_with_zero_padding():
    X, y = ids_data(600)
    fd = partition(X, y, P=3, K=4, seed=5, min_per_client=5)
    assert fd.counts.sum() == 600
    ids = fd.X[..., 0][fd.mask]
    assert np.array_equal(np.sort(ids), np.arange(600))
    # Labels travel with their rows; padding is zero.
    assert np.array_equal(fd.y[fd.mask], y[ids.astype(int)])
    assert not fd.X[~fd.mask].any() and not fd.y[~fd.mask].any()
    assert fd.shape[2] == fd.counts.max()


def test_partition_with_label_skew_keeps_rows_and_skews():
    X, y = ids_data(3000)
    fd = partition(X, y, P=2, K=10, seed=1, label_skew=0.1, sizes="equal")
    ids = fd.X[..., 0][fd.mask].astype(int)
    assert np.array_equal(np.sort(ids), np.arange(3000))
    assert np.array_equal(fd.y[fd.mask], y[ids])
    pos_frac = np.where(fd.mask, fd.y > 0, 0).sum(axis=2) / fd.counts
    iid = partition(X, y, P=2, K=10, seed=1, sizes="equal")
    pos_iid = np.where(iid.mask, iid.y > 0, 0).sum(axis=2) / iid.counts
    assert pos_frac.std() > 3 * pos_iid.std()


def test_feature_noise_per_client_scale_and_clean_columns():
    n, M = 20000, 4
    X = np.zeros((n, M))
    y = np.ones(n)
    Xt = np.full((7, M), 3.0)
    fd = partition(
        add_intercept(X),
        y,
        P=2,
        K=2,
        seed=3,
        sizes="equal",
        feature_noise=(0.5, 0.5),
        clean_columns=(M,),
        X_test=add_intercept(Xt),
        y_test=np.ones(7),
    )
    noise = fd.X[..., :M][fd.mask]
    # Closed form: lo = hi = 0.5 -> every perturbation is N(0, 0.25).
    assert abs(noise.std() - 0.5) < 0.01 and abs(noise.mean()) < 0.01
    assert np.array_equal(fd.X[..., M][fd.mask], np.ones(n))  # intercept untouched
    assert np.array_equal(fd.X_test, add_intercept(Xt))  # test set clean
    # Scales differ per client with a range; each lies in [0, 2].
    fd2 = partition(X, y, P=4, K=5, seed=3, sizes="equal", feature_noise=2.0)
    s = np.array([fd2.X[p, k, : fd2.counts[p, k]].std() for p in range(4) for k in range(5)])
    assert s.min() >= 0 and s.max() <= 2.0 + 0.1 and s.max() - s.min() > 0.5


def test_feature_shift_moves_client_means():
    X = np.zeros((4000, 3))
    fd = partition(X, np.ones(4000), P=2, K=2, seed=0, sizes="equal", feature_shift=1.0)
    means = fd.X.mean(axis=2)  # all rows real (equal sizes, no padding)
    assert (np.abs(means - means[0, 0]) > 1e-9).any()
    within = fd.X - fd.X.mean(axis=2, keepdims=True)
    assert np.abs(within).max() < 1e-12  # shift only, no per-row noise


def test_deterministic_and_seed_dependent():
    X, y = ids_data(500)
    a = partition(X, y, P=2, K=5, seed=11, feature_noise=1.0)
    b = partition(X, y, P=2, K=5, seed=11, feature_noise=1.0)
    c = partition(X, y, P=2, K=5, seed=12, feature_noise=1.0)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.counts, b.counts)
    assert not np.array_equal(a.counts, c.counts)


def test_client_left_without_samples_and_bad_inputs():
    X, y = ids_data(100)
    sizes = np.full((2, 5), 10)
    sizes[1, 3] = 0
    with pytest.raises(ConfigError, match=r"client \(p=1, k=3\) is left with no samples"):
        partition(X, y, P=2, K=5, seed=0, sizes=sizes)
    X[17, 2] = np.nan
    with pytest.raises(ConfigError, match=r"non-finite value \(nan\) at row 17, column 2"):
        partition(X, y, P=2, K=5, seed=0)
    X, y = ids_data(100)
    with pytest.raises(ConfigError, match="sizes must be one of"):
        partition(X, y, P=2, K=5, seed=0, sizes="zipf")
    with pytest.raises(ConfigError, match="feature_noise must be a scale"):
        partition(X, y, P=2, K=5, seed=0, feature_noise="big")
    with pytest.raises(ConfigError, match="feature_noise hi"):
        noise_scales((2.0, 1.0), 3, stream(0, "t"))
    with pytest.raises(ConfigError, match="label_skew needs labels"):
        partition(X, np.arange(100.0), P=2, K=5, seed=0, label_skew=1.0)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 4),
    st.integers(1, 6),
    st.integers(0, 200),
    st.sampled_from(["equal", "dirichlet", "lognormal"]),
    st.one_of(st.none(), st.floats(0.05, 50.0)),
    st.integers(0, 2**31),
)
def test_property_every_row_lands_exactly_once(P, K, extra, sizes, skew, seed):
    n = P * K * 2 + extra
    X, y = ids_data(n)
    fd = partition(X, y, P=P, K=K, seed=seed, sizes=sizes, min_per_client=2, label_skew=skew)
    ids = fd.X[..., 0][fd.mask].astype(int)
    assert np.array_equal(np.sort(ids), np.arange(n))
    assert np.array_equal(fd.y[fd.mask], y[ids])
    assert fd.counts.min() >= 2 and fd.counts.sum() == n
