"""scikit-learn's bundled digits (offline) split non-iid over units and clients.

1,797 images of 8×8 pixels with 16 grey levels, 10 classes (``sklearn.datasets.load_digits``,
shipped inside scikit-learn: no network). Pixels are scaled to ``[0, 1]`` (row-major, 64
features); labels are class indices ``0..9`` (stored as floats, as every target).

Split (named streams of :func:`pgfl.rng.stream` under the run's seed):

1. a clean test set of ``test_size`` images drawn at random (``data.digits.split``);
2. **label skew across units** (the usual Dirichlet partition of Hsu, Qi & Brown,
   "Measuring the Effects of Non-Identical Data Distribution for Federated Visual
   Classification", arXiv:1909.06335): the training images of class ``c`` are shared out
   over the ``P`` units with proportions ``q_c ~ Dirichlet(α 1_P)`` (``label_skew = α``;
   small α: units hold few classes; unset: iid), redrawn until every unit has at least
   ``K · min_per_client`` images (``data.digits.units``);
3. **unequal client sizes** within a unit: ``min_per_client`` each plus a multinomial
   share with proportions ``Dirichlet(size_skew 1_K)``
   (:func:`pgfl.data.partition.client_sizes`), the unit's images shuffled over its
   clients (``data.digits.clients``).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from pgfl.data.federated import FederatedData
from pgfl.data.params import PARAMS as DATA_PARAMS
from pgfl.data.partition import client_sizes
from pgfl.rng import stream
from pgfl.topology import PARAMS as TOPOLOGY_PARAMS
from pgfl.validation import ConfigError

_P = {p.name: p for p in (*DATA_PARAMS, *TOPOLOGY_PARAMS)}

__all__ = ["CLASSES", "DEFAULT_TEST_SIZE", "digits_federated_data", "load_digits_arrays"]

CLASSES = 10
DEFAULT_TEST_SIZE = 297
#: Redraws of the unit proportions before giving up on the minimum unit size.
MAX_DRAWS = 1000


@lru_cache(maxsize=1)
def load_digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """``X [1797, 64]`` in ``[0, 1]`` and labels ``y [1797]`` (floats ``0..9``)."""
    from sklearn.datasets import load_digits  # lazy: scikit-learn, only for this data set

    d = load_digits()
    return d.data.astype(np.float64) / 16.0, d.target.astype(np.float64)


def digits_federated_data(
    P: int,
    K: int,
    *,
    seed: int,
    test_size: int = DEFAULT_TEST_SIZE,
    label_skew: float | None = None,
    size_skew: float = 1.0,
    min_per_client: int = 8,
) -> FederatedData:
    """The digits over ``P`` units of ``K`` clients (non-iid, see the module docstring).

    >>> d = digits_federated_data(4, 5, seed=0, label_skew=0.5)
    >>> d.shape[0], d.shape[1], d.shape[3], int(d.counts.sum()), d.X_test.shape
    (4, 5, 64, 1500, (297, 64))
    """
    P, K = _P["topology.P"].check(P), _P["data.K"].check(K)
    X, y = load_digits_arrays()
    n = len(y)
    test_size = _P["data.test_size"].check(test_size)
    if not 1 <= test_size < n:
        raise ConfigError(
            f"data.test_size must leave the {n} digits images a training set: an integer in "
            f"[1, {n - 1}]; got {test_size}"
        )
    order = stream(seed, "data.digits.split").permutation(n)
    test, train = order[:test_size], order[test_size:]
    need = K * min_per_client
    if len(train) < P * need:
        raise ConfigError(
            f"data.K must leave every client {min_per_client} digits images: P*K*"
            f"{min_per_client} = {P * need} > {len(train)} training images; got data.K = {K}"
        )
    rng = stream(seed, "data.digits.units")
    if label_skew is None:
        units = np.array_split(rng.permutation(train), P)
    else:
        alpha = _P["data.label_skew"].check(label_skew)
        for _ in range(MAX_DRAWS):
            parts: list[list[np.ndarray]] = [[] for _ in range(P)]
            for c in range(CLASSES):
                rows = rng.permutation(train[y[train] == c])
                cuts = (np.cumsum(rng.dirichlet(np.full(P, alpha))) * len(rows)).astype(int)
                for p, part in enumerate(np.split(rows, cuts[:-1])):
                    parts[p].append(part)
            units = [np.concatenate(u) for u in parts]
            if min(len(u) for u in units) >= need:
                break
        else:
            raise ConfigError(
                f"data.label_skew = {alpha} leaves a unit fewer than data.K*{min_per_client} = "
                f"{need} images in {MAX_DRAWS} draws; raise it or lower data.K"
            )
    crng = stream(seed, "data.digits.clients")
    Xs, ys = [], []
    for u in units:
        sizes = client_sizes(
            len(u), 1, K, rng=crng, size_alpha=size_skew, min_per_client=min_per_client
        )[0]
        rows = np.split(crng.permutation(u), np.cumsum(sizes)[:-1])
        Xs.append([X[r] for r in rows])
        ys.append([y[r] for r in rows])
    return FederatedData.from_client_lists(Xs, ys, X_test=X[test], y_test=y[test])
