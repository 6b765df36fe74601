"""Synthetic federated data sets of the papers, and per-client training schedules.

* :func:`regression_data`: Rizk, Vlaski & Sayed, "Privatized Graph Federated Learning",
  arXiv:2203.07105, §V-A of v1 (the *preprint*) / §5.1 of v2 (the *journal* version),
  ``d = u^T w* + v`` (eq. 53) with a random covariance ``R_{u,pk}`` and noise variance
  ``sigma^2_{v,pk}`` per client (non-iid).
* :func:`logistic_data`: Rizk & Sayed, "A Graph Federated Architecture with Privacy
  Preserving Learning", SPAWC 2021, arXiv:2104.13215 (the *conference paper*), §V,
  ``gamma = ±1`` and ``h | gamma ~ N(gamma 1, sigma^2_{h,pk} I)`` with a variance per client.
* :func:`client_schedule`: local epochs ``E_pk`` and mini-batch sizes ``B_pk``, drawn
  uniformly from integer ranges (experiments: ``E in [1, 10]``, ``B in [5, 10]``).

All draws come from the generator passed in. ``units=(start, stop)`` returns only those
units' clients, with the bits of the whole data set's rows ``start..stop-1``: the draws of
every unit are made in order (in chunks of :data:`DRAW_CHUNK_BYTES`) and only the block's
are kept, so a process can build its block of a large network without holding the rest
(:mod:`pgfl.backends.ray_actors`). It still draws the whole network's numbers: time
``O(P)``, memory ``O(block)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pgfl.data.federated import FederatedData
from pgfl.data.params import PARAMS as DATA_PARAMS
from pgfl.param import Param
from pgfl.topology import PARAMS as TOPOLOGY_PARAMS
from pgfl.validation import ConfigError

#: The settings of a client's schedule: local epochs and mini-batch sizes (eq. 3).
SCHEDULE_PARAMS = (
    Param("training.epochs", "int_pair", (1, 10), "Local epochs E_pk, or a `[low, high]` range "
          "drawn per client.", lo=1),
    Param("training.batch", "int_pair", (5, 10), "Mini-batch size B_pk, a `[low, high]` range "
          'per client, or `"full"` (every sample, every epoch).', lo=1, choices=("full",)),
)  # fmt: skip
_P = {p.name: p for p in (*DATA_PARAMS, *TOPOLOGY_PARAMS, *SCHEDULE_PARAMS)}


def _range(name: str, value: float | Sequence[float]) -> tuple[float, float]:
    """A ``(low, high)`` pair from a number or a ``[low, high]`` pair, checked by the setting."""
    v = _P[name].check(tuple(value) if isinstance(value, (list, tuple, np.ndarray)) else value)
    return v if isinstance(v, tuple) else (v, v)


#: Largest temporary array (bytes) of a draw over the units when only a block is kept.
DRAW_CHUNK_BYTES = 1 << 20


def _draw_units(draw, shape: tuple[int, ...], units: tuple[int, int] | None) -> np.ndarray:
    """``draw(shape)`` — or only its rows ``units[0]..units[1]-1`` along axis 0.

    The rows are drawn in order in chunks (numpy's generators fill arrays sequentially,
    so chunked calls consume the stream exactly as one call does) and only the kept rows
    are stored; the stream ends where the whole draw would leave it.
    """
    if units is None:
        return draw(shape)
    start, stop = units
    row = 8 * int(np.prod(shape[1:], dtype=np.int64))
    step = max(1, DRAW_CHUNK_BYTES // max(row, 1))
    kept = np.empty((stop - start, *shape[1:]))
    for a in range(0, shape[0], step):
        b = min(a + step, shape[0])
        chunk = draw((b - a, *shape[1:]))
        lo, hi = max(a, start), min(b, stop)
        if lo < hi:
            kept[lo - start : hi - start] = chunk[lo - a : hi - a]
    return kept


#: Samples are generated a chunk of clients at a time: about 1/128 of the data set, at
#: most this many bytes (at least one client), so the generator's temporaries stay a few
#: percent of the one array the samples are written into.
GENERATE_CHUNK_BYTES = 16 << 20


def _client_chunks(
    P: int, K: int, client_bytes: int, units: tuple[int, int] | None
) -> list[tuple[int, int, bool]]:
    """Chunks ``(a, b, kept)`` of clients ``a..b-1`` (``p·K + k``) covering all ``P·K`` in order.

    Each holds about 1/128 of the samples (at most :data:`GENERATE_CHUNK_BYTES`, at least a
    client, ``client_bytes`` each) and lies wholly inside or outside the kept ``units``
    (all units when ``None``).

    >>> chunks = _client_chunks(4, 128, 1000, (1, 3))  # 4 clients of 1,000 bytes each
    >>> len(chunks), chunks[0], chunks[31], chunks[32], chunks[95], chunks[96]
    (128, (0, 4, False), (124, 128, False), (128, 132, True), (380, 384, True), (384, 388, False))
    """
    start, stop = (0, P) if units is None else units
    size = min(GENERATE_CHUNK_BYTES, P * K * client_bytes // 128)
    step = max(1, size // max(client_bytes, 1))
    out = []
    for lo, hi, kept in ((0, start, False), (start, stop, True), (stop, P, False)):
        out.extend((c, min(c + step, hi * K), kept) for c in range(lo * K, hi * K, step))
    return out


def _check_units(units: tuple[int, int] | None, P: int) -> tuple[int, int] | None:
    if units is None:
        return None
    start, stop = (int(u) for u in units)
    if not 0 <= start < stop <= P:
        raise ConfigError(f"units must satisfy 0 <= start < stop <= P={P}; got {units!r}")
    return start, stop


def sample_counts(rng: np.random.Generator, P: int, K: int, N) -> np.ndarray:
    """Samples per client ``N_pk``, ``[P, K]`` (``N``, or uniform in ``[N[0], N[1]]``)."""
    lo, hi = _range("data.N", N)
    return rng.integers(lo, hi + 1, size=(P, K))


def regression_data(
    rng: np.random.Generator,
    *,
    P: int,
    K: int,
    N: int | Sequence[int] = 100,
    M: int = 2,
    eigenvalues: Sequence[float] = (0.05, 0.1),
    noise_variance: Sequence[float] = (0.01, 0.1),
    w_star: np.ndarray | None = None,
    units: tuple[int, int] | None = None,
) -> FederatedData:
    """Non-iid linear-regression data of preprint §V-A.

    Client ``(p, k)`` draws ``N_pk`` samples (``N`` or uniform in ``[N[0], N[1]]``)
    ``u ~ N(0, R_pk)`` with ``R_pk = Q diag(lambda) Q^T`` (``Q`` a random rotation,
    ``lambda`` uniform in ``eigenvalues``) and ``d = u^T w* + v``, ``v ~ N(0, sigma_v^2)``
    with ``sigma_v^2`` uniform in ``noise_variance``. ``w*`` is a uniformly random unit
    vector unless given (unit norm keeps the MSD scale the same across seeds).

    The papers do not state the covariance scale; the default eigenvalue range keeps
    every step size of Fig. 4 (``mu`` up to 5 with ``mu/E`` per epoch) stable.

    ``units=(start, stop)``: only those units (module doc), padded to the network's
    ``N_max``.

    >>> d = regression_data(np.random.default_rng(0), P=2, K=3, N=4)
    >>> d.shape, d.w_star.shape
    ((2, 3, 4, 2), (2,))
    >>> part = regression_data(np.random.default_rng(0), P=2, K=3, N=4, units=(1, 2))
    >>> bool(np.array_equal(part.X, d.X[1:]))
    True
    """
    P, K, M = (_P[n].check(v) for n, v in (("topology.P", P), ("data.K", K), ("data.M", M)))
    ev_lo, ev_hi = _range("data.eigenvalues", eigenvalues)
    nv_lo, nv_hi = _range("data.noise_variance", noise_variance)
    units = _check_units(units, P)
    counts = sample_counts(rng, P, K, N)
    n_max = int(counts.max())
    keep = slice(None) if units is None else slice(*units)
    if w_star is None:
        direction = rng.standard_normal(M)
        w_star = direction / np.linalg.norm(direction)
    w_star = np.asarray(w_star, dtype=float)
    if w_star.shape != (M,):
        raise ConfigError(f"data.w_star must have {M} entries; got shape {w_star.shape}")
    # random rotations via QR of Gaussian matrices, sign-fixed so Q is Haar distributed;
    # the stream holds every client's rotation, then the eigenvalues, samples and noise: the
    # samples are written a chunk of clients at a time into the one array Xy, each chunk's
    # rotations drawn again from the state saved at their place in the stream
    chunks = _client_chunks(P, K, n_max * (M + 1) * 8, units)
    rotations = []
    for a, b, kept in chunks:
        rotations.append(rng.bit_generator.state if kept else None)
        rng.standard_normal((1, b - a, M, M))  # walked over: drawn again below
    lam = _draw_units(lambda size: rng.uniform(ev_lo, ev_hi, size=size), (P, K, M), units)
    lam = lam.reshape(-1, M)
    first = 0 if units is None else units[0] * K  # the first kept client
    Xy = np.empty((P if units is None else units[1] - units[0], K, n_max, M + 1))
    rows = Xy.reshape(-1, n_max, M + 1)  # [kept clients, N, M + 1]
    for (a, b, kept), state in zip(chunks, rotations, strict=True):
        if not kept:
            rng.standard_normal((1, b - a, n_max, M))
            continue
        here = rng.bit_generator.state
        rng.bit_generator.state = state
        Q, Rq = np.linalg.qr(rng.standard_normal((1, b - a, M, M)))
        rng.bit_generator.state = here
        Q = Q * np.sign(np.diagonal(Rq, axis1=-2, axis2=-1))[..., None, :]
        root = Q * np.sqrt(lam[None, a - first : b - first])[..., None, :]  # R = root root^T
        z = rng.standard_normal((1, b - a, n_max, M))
        rows[a - first : b - first, :, :M] = np.einsum("pkij,pknj->pkni", root, z)[0]
    sigma_v = np.sqrt(rng.uniform(nv_lo, nv_hi, size=(P, K)))[keep].reshape(-1)
    counts = counts[keep]
    mask = (np.arange(n_max) < counts[..., None]).reshape(-1, n_max)
    for a, b, kept in chunks:
        v = rng.standard_normal((1, b - a, n_max))
        if kept:
            c = slice(a - first, b - first)
            X = np.ascontiguousarray(rows[None, c, :, :M])
            rows[c, :, M] = ((X @ w_star + v * sigma_v[None, c, None]) * mask[None, c])[0]
            rows[c, :, :M] = (X * mask[None, c, :, None])[0]
    return FederatedData(Xy[..., :M], Xy[..., M], counts, w_star=w_star)


def logistic_data(
    rng: np.random.Generator,
    *,
    P: int,
    K: int,
    N: int | Sequence[int] = 100,
    M: int = 2,
    feature_variance: Sequence[float] = (0.5, 2.0),
    test_size: int = 0,
    units: tuple[int, int] | None = None,
) -> FederatedData:
    """Binary classification data of the conference paper §V.

    Labels ``gamma = ±1`` with probability 1/2; features
    ``h | gamma ~ N(gamma 1_M, sigma^2_{h,pk} I_M)`` with ``sigma^2_{h,pk}`` uniform in
    ``feature_variance`` per client. ``test_size`` clean samples with the mean variance
    go to ``X_test``/``y_test``. ``units=(start, stop)``: only those units' clients (module
    doc; the test set is the same).

    >>> d = logistic_data(np.random.default_rng(0), P=2, K=3, N=5, test_size=4)
    >>> sorted(set(d.y[d.mask].tolist())), d.X_test.shape
    ([-1.0, 1.0], (4, 2))
    """
    P, K, M = (_P[n].check(v) for n, v in (("topology.P", P), ("data.K", K), ("data.M", M)))
    fv_lo, fv_hi = _range("data.feature_variance", feature_variance)
    units = _check_units(units, P)
    keep = slice(None) if units is None else slice(*units)
    counts = sample_counts(rng, P, K, N)
    n_max = int(counts.max())
    counts = counts[keep]
    mask = np.arange(n_max) < counts[..., None]
    chunks = _client_chunks(P, K, n_max * (M + 1) * 8, units)
    first = 0 if units is None else units[0] * K  # the first kept client
    Xy = np.empty((P if units is None else units[1] - units[0], K, n_max, M + 1))
    rows = Xy.reshape(-1, n_max, M + 1)  # [kept clients, N, M + 1]
    for a, b, kept in chunks:  # the labels first (every client's), into the target column
        gamma = np.where(rng.random((1, b - a, n_max)) < 0.5, -1.0, 1.0)
        if kept:
            rows[a - first : b - first, :, M] = gamma[0]
    sigma = np.sqrt(rng.uniform(fv_lo, fv_hi, size=(P, K)))[keep].reshape(-1)
    mask = mask.reshape(-1, n_max)
    for a, b, kept in chunks:
        z = rng.standard_normal((1, b - a, n_max, M))
        if kept:
            c = slice(a - first, b - first)
            z *= sigma[None, c, None, None]
            X = np.add(rows[None, c, :, M, None], z, out=z)
            X *= mask[None, c, :, None]
            rows[c, :, :M] = X[0]
            rows[c, :, M] *= mask[c]
    extra: dict[str, np.ndarray] = {}
    if test_size:
        test_size = _P["data.test_size"].check(test_size)
        g = np.where(rng.random(test_size) < 0.5, -1.0, 1.0)
        s = np.sqrt(0.5 * (fv_lo + fv_hi))
        extra = {"X_test": g[:, None] + s * rng.standard_normal((test_size, M)), "y_test": g}
    return FederatedData(Xy[..., :M], Xy[..., M], counts, **extra)


def client_schedule(
    rng: np.random.Generator,
    P: int,
    K: int,
    *,
    epochs: int | Sequence[int] = (1, 10),
    batch: int | Sequence[int] = (5, 10),
) -> tuple[np.ndarray, np.ndarray]:
    """Local epochs ``E_pk`` and mini-batch sizes ``B_pk``, uniform over integer ranges.

    Returns two int arrays of shape ``[P, K]``.

    >>> E, B = client_schedule(np.random.default_rng(0), 2, 3, epochs=1, batch=(5, 5))
    >>> E.tolist(), B.tolist()
    ([[1, 1, 1], [1, 1, 1]], [[5, 5, 5], [5, 5, 5]])
    """
    e_lo, e_hi = _range("training.epochs", epochs)
    b_lo, b_hi = _range("training.batch", batch)
    E = rng.integers(e_lo, e_hi + 1, size=(P, K))
    B = rng.integers(b_lo, b_hi + 1, size=(P, K))
    return E, B
