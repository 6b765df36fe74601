"""Non-iid partitioning of a labelled table over ``P × K`` clients → :class:`FederatedData`.

The classification experiment of Rizk, Vlaski & Sayed, "Privatized Graph Federated
Learning", arXiv:2203.07105 (§V-B of v1, the *preprint*; §5.3 of v2) splits 5,101
samples *unequally* over ``P K = 50`` agents (``P = 5`` units of ``K = 10``), "adds
non-iid noise to the data at each agent to change their distributions", and tests on
256 clean samples. Three independent knobs reproduce that:

1. **Unequal sizes** ``N_{p,k}`` (:func:`client_sizes`): every client first gets
   ``min_per_client`` samples, the other ``n − C·min`` are spread by a multinomial draw
   with proportions ``π ~ Dirichlet(size_alpha · 1_C)`` (``sizes="dirichlet"``; smaller
   ``size_alpha`` = more unequal; ``size_alpha → ∞`` tends to equal sizes) or
   ``π ∝ exp(size_sigma · ξ_c)``, ``ξ_c ~ N(0, 1)`` (``"lognormal"``), or
   ``"equal"`` (sizes differ by at most one), or an explicit ``[P, K]`` array.
2. **Label skew** (:func:`label_skew_counts`, optional): client ``c`` wants label
   proportions ``q_c ~ Dirichlet(α · (π_-, π_+))`` around the global ones ``π``; the
   ``C × 2`` table ``N_c q_c`` is made consistent with the client sizes (rows) and the
   label totals (columns) by iterative proportional fitting, then rounded with the
   largest-remainder rule (both margins exact). ``α → ∞`` is iid labels, ``α → 0``
   gives clients holding mostly one label.
3. **Per-client feature noise** ("non-iid noise added per agent"): client ``c`` draws a
   scale ``s_c ~ Uniform[lo, hi]`` and an optional shift ``δ_c ~ N(0, feature_shift² I)``
   once, and every one of its rows becomes ``x ← x + δ_c + s_c ξ``, ``ξ ~ N(0, I)``
   fresh per row — the feature covariance of client ``c`` is inflated by ``s_c² I``
   and its mean moved by ``δ_c``, differently for each client. The intercept column and
   the test set are never perturbed.

Randomness: named streams of :func:`pgfl.rng.stream` under one ``seed``
(``data.partition.sizes``, ``.labels``, ``.assign``, ``.noise``).

>>> import numpy as np
>>> X = np.arange(24.0).reshape(12, 2); y = np.where(np.arange(12) % 2 == 0, 1.0, -1.0)
>>> fd = partition(X, y, P=2, K=3, sizes="equal", min_per_client=1, seed=0)
>>> fd.shape, fd.counts.tolist()
((2, 3, 2, 2), [[2, 2, 2], [2, 2, 2]])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pgfl.data.federated import FederatedData
from pgfl.rng import stream
from pgfl.validation import ConfigError, check_choice, check_int, check_real

__all__ = [
    "client_counts",
    "client_sizes",
    "label_skew_counts",
    "noise_scales",
    "partition",
    "add_intercept",
]

SIZE_SCHEMES = ("equal", "dirichlet", "lognormal")


def client_sizes(
    n: int,
    P: int,
    K: int,
    *,
    rng: np.random.Generator,
    sizes: str = "dirichlet",
    size_alpha: float = 1.0,
    size_sigma: float = 1.0,
    min_per_client: int = 1,
) -> np.ndarray:
    """Draw unequal client sizes ``N_{p,k}`` summing to ``n``.

    ``N = min_per_client + Multinomial(n − P K min_per_client, π)`` with ``π`` as in the
    module docstring; ``"equal"`` gives ``⌊n / PK⌋`` or one more.

    Returns:
        ``int64`` ``[P, K]``, each ``≥ min_per_client``, summing to ``n``.

    Raises:
        ConfigError: fewer rows than ``P K min_per_client``, or a bad scheme/parameter.

    >>> client_sizes(10, 2, 2, rng=np.random.default_rng(0), sizes="equal").tolist()
    [[3, 3], [2, 2]]

    """
    P = check_int("P", P, lo=1)
    K = check_int("K", K, lo=1)
    C = P * K
    min_per_client = check_int("min_per_client", min_per_client, lo=1)
    n = check_int("rows", n, lo=0)
    check_choice("sizes", sizes, SIZE_SCHEMES)
    if n < C * min_per_client:
        raise ConfigError(
            f"rows must be at least P*K*min_per_client = {P}*{K}*{min_per_client} = "
            f"{C * min_per_client} (every client needs {min_per_client} sample(s)); got {n}"
        )
    if sizes == "equal":
        counts = np.full(C, n // C, dtype=np.int64)
        counts[: n % C] += 1
        return counts.reshape(P, K)
    if sizes == "dirichlet":
        size_alpha = check_real("size_alpha", size_alpha, lo=0.0, lo_open=True)
        pi = rng.dirichlet(np.full(C, size_alpha))
    else:
        size_sigma = check_real("size_sigma", size_sigma, lo=0.0)
        w = np.exp(size_sigma * rng.standard_normal(C))
        pi = w / w.sum()
    extra = rng.multinomial(n - C * min_per_client, pi)
    return (min_per_client + extra).astype(np.int64).reshape(P, K)


def _largest_remainder(a: np.ndarray, total: int) -> np.ndarray:
    base = np.floor(a).astype(np.int64)
    short = int(total - base.sum())
    if short > 0:
        order = np.argsort(-(a - base), kind="stable")
        base[order[:short]] += 1
    return base


def label_skew_counts(
    counts: np.ndarray,
    n_pos: int,
    *,
    alpha: float,
    rng: np.random.Generator,
    iterations: int = 200,
) -> np.ndarray:
    """Positives per client under Dirichlet label skew, with exact margins.

    Args:
        counts: client sizes ``N_c`` (any shape, flattened internally).
        n_pos: number of ``+1`` labels available (``Σ_c`` of the result).
        alpha: concentration ``α > 0`` of ``q_c ~ Dirichlet(α (π_-, π_+))``.
        rng: the Generator.
        iterations: iterative-proportional-fitting sweeps.

    Returns:
        ``int64`` array shaped like ``counts``: ``0 ≤ a_c ≤ N_c``, ``Σ a_c = n_pos``.

    >>> label_skew_counts(np.array([5, 5]), 5, alpha=1e6, rng=np.random.default_rng(1)).sum()
    np.int64(5)

    """
    alpha = check_real("label_skew", alpha, lo=0.0, lo_open=True)
    shape = np.shape(counts)
    N = np.asarray(counts, dtype=np.float64).ravel()
    n = N.sum()
    n_pos = check_int("n_pos", n_pos, lo=0, hi=int(n))
    if n_pos in (0, int(n)):
        return (N if n_pos else np.zeros_like(N)).astype(np.int64).reshape(shape)
    prior = np.array([n - n_pos, n_pos]) / n
    q = rng.dirichlet(alpha * prior, size=N.size)
    q = np.maximum(q, 1e-12)
    T = N[:, None] * q / q.sum(axis=1, keepdims=True)
    target = np.array([n - n_pos, n_pos], dtype=np.float64)
    for _ in range(iterations):
        T *= (target / T.sum(axis=0))[None, :]
        T *= (N / T.sum(axis=1))[:, None]
    a = np.clip(T[:, 1], 0.0, N)
    pos = _largest_remainder(a, n_pos)
    # Rounding can overshoot a full client only if IPF left a tiny error; repair.
    over = pos - N.astype(np.int64)
    while (over > 0).any():
        i = int(np.argmax(over))
        room = np.flatnonzero(pos < N)
        j = int(room[np.argmax(a[room] - pos[room])])
        pos[i] -= 1
        pos[j] += 1
        over = pos - N.astype(np.int64)
    return pos.reshape(shape)


def noise_scales(
    feature_noise: float | Sequence[float], C: int, rng: np.random.Generator
) -> np.ndarray:
    """Per-client noise scales ``s_c ~ Uniform[lo, hi]``; a float ``s`` means ``[0, s]``.

    >>> noise_scales(0.0, 3, np.random.default_rng(0)).tolist()
    [0.0, 0.0, 0.0]
    """
    if isinstance(feature_noise, (int, float)) and not isinstance(feature_noise, bool):
        lo, hi = 0.0, check_real("feature_noise", feature_noise, lo=0.0)
    else:
        try:
            lo, hi = (float(v) for v in feature_noise)  # type: ignore[union-attr]
        except (TypeError, ValueError) as e:
            raise ConfigError(
                f"feature_noise must be a scale >= 0 or a (lo, hi) pair; got {feature_noise!r}"
            ) from e
        check_real("feature_noise lo", lo, lo=0.0)
        check_real("feature_noise hi", hi, lo=lo, lo_name="lo")
    return lo + (hi - lo) * rng.random(C)


def add_intercept(X: np.ndarray) -> np.ndarray:
    """Append a column of ones (the bias feature) as the last column.

    >>> add_intercept(np.zeros((2, 1))).tolist()
    [[0.0, 1.0], [0.0, 1.0]]
    """
    return np.hstack([X, np.ones((X.shape[0], 1), dtype=X.dtype)])


def partition(
    X: np.ndarray,
    y: np.ndarray,
    *,
    P: int,
    K: int,
    seed: int,
    sizes: str | np.ndarray = "dirichlet",
    size_alpha: float = 1.0,
    size_sigma: float = 1.0,
    min_per_client: int = 1,
    label_skew: float | None = None,
    feature_noise: float | Sequence[float] = 0.0,
    feature_shift: float = 0.0,
    clean_columns: Sequence[int] = (),
    X_test: np.ndarray | None = None,
    y_test: np.ndarray | None = None,
) -> FederatedData:
    """Spread the rows of ``(X, y)`` over ``P × K`` clients, padded, with per-client noise.

    Args:
        X: features ``[n, M]`` (finite).
        y: labels ``[n]`` (``±1`` for label skew; any finite targets otherwise).
        P: number of units.
        K: clients per unit.
        seed: root seed of the named streams.
        sizes: ``"dirichlet"``, ``"lognormal"``, ``"equal"`` or an explicit ``[P, K]``
            integer array (sum ``≤ n``; a random subset of that many rows is used).
        size_alpha: Dirichlet concentration for ``"dirichlet"`` (1.0: sizes spread like
            exponential variables, the largest ~4× the mean for 50 clients).
        size_sigma: log-scale spread for ``"lognormal"``.
        min_per_client: guaranteed samples per client (set it ``≥`` the largest
            mini-batch the engine draws).
        label_skew: Dirichlet concentration ``α`` of the label proportions, or ``None``
            for labels spread at random (iid).
        feature_noise: per-client noise scale ``s_c ~ U[0, s]`` (a float ``s``) or
            ``U[lo, hi]`` (a pair); ``0`` disables it.
        feature_shift: standard deviation of the per-client mean shift ``δ_c``.
        clean_columns: feature columns never perturbed (e.g. the intercept).
        X_test: clean held-out features ``[N_test, M]``, passed through untouched.
        y_test: clean held-out labels ``[N_test]``.

    Returns:
        :class:`FederatedData` with ``X [P, K, N_max, M]``, ``y``, ``counts`` and the test set.

    Raises:
        ConfigError: shapes, non-finite values (row and column named), fewer rows than
            clients need, a client left with no samples, bad parameters.

    """
    P = check_int("P", P, lo=1)
    K = check_int("K", K, lo=1)
    X, y = _checked_rows(X, y)
    n, M = X.shape
    C = P * K
    counts = client_counts(n, P, K, seed, sizes, size_alpha, size_sigma, min_per_client)
    total = int(counts.sum())
    flat = counts.ravel()
    order = _assign_rows(y, flat, seed, label_skew, n)
    cid = np.repeat(np.arange(C), flat)
    start = np.concatenate([[0], np.cumsum(flat)[:-1]])
    slot = np.arange(total) - start[cid]
    N_max = int(flat.max())

    Xc = X[order]
    noise_rng = stream(seed, "data.partition.noise")
    scales = noise_scales(feature_noise, C, noise_rng)
    feature_shift = check_real("feature_shift", feature_shift, lo=0.0)
    noisy = np.ones(M, dtype=bool)
    for j in clean_columns:
        check_int("clean column", j, lo=-M, hi=M - 1)
        noisy[j] = False
    if scales.any() or feature_shift > 0:
        shift = feature_shift * noise_rng.standard_normal((C, M))
        xi = noise_rng.standard_normal((total, M))
        Xc = Xc + noisy * (shift[cid] + scales[cid, None] * xi)

    Xy = np.zeros((P, K, N_max, M + 1))  # the data's one array: features and target
    flat = Xy.reshape(C, N_max, M + 1)
    flat[cid, slot, :M] = Xc
    flat[cid, slot, M] = y[order]
    return FederatedData(
        Xy[..., :M],
        Xy[..., M],
        counts,
        X_test=None if X_test is None else np.asarray(X_test, dtype=np.float64),
        y_test=None if y_test is None else np.asarray(y_test, dtype=np.float64),
    )


def _checked_rows(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``X [n, M]`` and ``y [n]`` as float arrays; a non-finite value named by row and column."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ConfigError(f"X must be [n, M] and y [n]; got shapes {X.shape} and {y.shape}")
    bad = ~np.isfinite(X)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise ConfigError(f"X has a non-finite value ({X[i, j]}) at row {i}, column {j}")
    if not np.isfinite(y).all():
        raise ConfigError(
            f"y has a non-finite value at row {int(np.flatnonzero(~np.isfinite(y))[0])}"
        )
    return X, y


def client_counts(n, P, K, seed, sizes, size_alpha, size_sigma, min_per_client) -> np.ndarray:
    """Samples per client ``[P, K]`` that :func:`partition` gives ``n`` rows; none left empty.

    Drawn by the named scheme from the stream ``data.partition.sizes`` of ``seed`` (or
    given as an array): cheap, so the memory of a run is known before the data is loaded.
    """
    if isinstance(sizes, str):
        counts = client_sizes(
            n, P, K, rng=stream(seed, "data.partition.sizes"), sizes=sizes,
            size_alpha=size_alpha, size_sigma=size_sigma, min_per_client=min_per_client,
        )  # fmt: skip
    else:
        counts = np.asarray(sizes)
        if counts.shape != (P, K) or counts.dtype.kind not in "iu":
            raise ConfigError(f"sizes must be an integer array of shape {(P, K)}; got {sizes!r}")
        if counts.min() < 0 or counts.sum() > n:
            raise ConfigError(
                f"explicit sizes must be >= 0 and sum to at most the {n} rows; "
                f"got sum {int(counts.sum())}, min {int(counts.min())}"
            )
        counts = counts.astype(np.int64)
    empty = np.argwhere(counts == 0)
    if empty.size:
        p, k = (int(v) for v in empty[0])
        raise ConfigError(f"client (p={p}, k={k}) is left with no samples; every client needs one")
    return counts


def _assign_rows(
    y: np.ndarray, flat: np.ndarray, seed: int, label_skew: float | None, n: int
) -> np.ndarray:
    """The rows of each client in client order (``flat[c]`` each), with optional label skew."""
    total, C = int(flat.sum()), flat.size
    assign_rng = stream(seed, "data.partition.assign")
    pool = assign_rng.permutation(n)[:total]
    if label_skew is None:
        return pool
    if not np.isin(y, (-1.0, 1.0)).all():
        raise ConfigError("label_skew needs labels in {-1, +1}")
    pos_rows = pool[y[pool] > 0]
    neg_rows = pool[y[pool] <= 0]
    a = label_skew_counts(
        flat, len(pos_rows), alpha=label_skew, rng=stream(seed, "data.partition.labels")
    )
    # Client c takes the next a_c positives and N_c − a_c negatives.
    rows = np.concatenate([pos_rows, neg_rows])
    cid = np.concatenate([np.repeat(np.arange(C), a), np.repeat(np.arange(C), flat - a)])
    # Order rows by client, then shuffle within the client (stable over cid).
    key = assign_rng.permutation(total)
    return rows[np.lexsort((key, cid))]
