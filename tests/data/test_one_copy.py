"""FederatedData holds its samples once (Xy, with X and y views); the generators write it."""

import pickle
import tracemalloc
from dataclasses import replace

import numpy as np
import pytest

from pgfl.data.federated import FederatedData
from pgfl.data.synthetic import logistic_data, regression_data
from pgfl.validation import ConfigError


def test_separate_arrays_are_copied_once_into_xy():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 4))
    d = FederatedData(X, y, np.full((2, 3), 4))
    assert d.Xy.shape == (2, 3, 4, 6) and d.Xy.flags.c_contiguous
    assert np.array_equal(d.X, X) and np.array_equal(d.y, y)
    assert np.shares_memory(d.X, d.Xy) and np.shares_memory(d.y, d.Xy)
    assert not np.shares_memory(d.Xy, X)  # the caller's arrays can go


def test_views_of_one_array_are_kept_as_they_are():
    Xy = np.random.default_rng(1).standard_normal((2, 3, 4, 6))
    d = FederatedData(Xy[..., :5], Xy[..., 5], np.full((2, 3), 4))
    assert d.Xy is Xy
    # not such views: a copy (a non-contiguous base, or columns in another order)
    wide = np.random.default_rng(2).standard_normal((2, 3, 4, 7))
    assert FederatedData(wide[..., :5], wide[..., 5], np.full((2, 3), 4)).Xy is not wide
    swapped = FederatedData(Xy[..., 1:], Xy[..., 0], np.full((2, 3), 4))
    assert np.array_equal(swapped.y, Xy[..., 0]) and swapped.Xy is not Xy


def test_pickling_and_copies_keep_one_array():
    d = regression_data(np.random.default_rng(3), P=3, K=20, N=50, M=2)
    back = pickle.loads(pickle.dumps(d))
    assert np.array_equal(back.Xy, d.Xy) and np.shares_memory(back.X, back.Xy)
    assert len(pickle.dumps(d)) < 1.1 * d.Xy.nbytes  # X and y are not pickled again
    part = d.copy_units(1, 3)
    assert np.array_equal(part.X, d.X[1:3]) and np.shares_memory(part.y, part.Xy)
    assert not np.shares_memory(part.Xy, d.Xy)
    relabelled = replace(d, y=np.zeros_like(d.y))
    assert np.array_equal(relabelled.X, d.X) and not relabelled.y.any()
    assert np.array_equal(d.units(1, 2).Xy, d.Xy[1:2])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_samples_are_refused(bad):
    X = np.zeros((1, 2, 3, 2))
    X[0, 1, 2, 1] = bad
    with pytest.raises(ConfigError, match="finite"):
        FederatedData(X, np.zeros((1, 2, 3)), np.full((1, 2), 3))
    y = np.zeros((1, 2, 3))
    y[0, 0, 0] = bad
    with pytest.raises(ConfigError, match="finite"):
        FederatedData(np.zeros((1, 2, 3, 2)), y, np.full((1, 2), 3))


@pytest.mark.parametrize("make", [regression_data, logistic_data])
def test_generators_hold_little_more_than_the_data(make):
    """The peak of generating a data set is at most 1.2× its one array (a chunk at a time)."""
    make(np.random.default_rng(4), P=1, K=2, N=5, M=2)  # numpy's first-use allocations
    tracemalloc.start()
    try:
        d = make(np.random.default_rng(4), P=6, K=40, N=(50, 100), M=12)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert d.Xy.base is None and np.shares_memory(d.X, d.Xy)
    assert peak <= 1.2 * d.Xy.nbytes, (peak, d.Xy.nbytes)
