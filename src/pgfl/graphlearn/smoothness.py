"""The smoothness model of graph learning (Zhang & Wang, eqs. 2–7; Kalofolias 2016).

A graph on ``d`` vertices is stored as the vector ``w`` of its ``p = d(d-1)/2``
upper-triangular edge weights, in row-major order of ``numpy.triu_indices(d, 1)``:
``w = [W01, W02, ..., W0(d-1), W12, ...]``. Signals are rows of ``X`` (shape
``[N, d]``: ``N`` observations of a signal on ``d`` vertices, scikit-learn layout);
the paper's ``X_i`` is the transpose.

The local cost of client ``i`` (eq. 7 / the ``g_i`` of eq. 8) is

    g_i(w) = (2/N_i) Σ_n z_{i,n}ᵀ w − α 1ᵀ log(S w) + 2β ‖w‖²,     w ≥ 0,

where ``z_{i,n}[(j,k)] = (x_n[j] − x_n[k])²`` are the pairwise squared distances of
signal ``n`` and ``S`` is the degree operator, ``S w = W 1``. Only the average
``z̄_i = (1/N_i) Σ_n z_{i,n}`` enters the cost, so the solvers take ``zbar``.

Conventions (they differ between implementations): the data term is ``2 z̄ᵀw`` (each
unordered pair once, hence the 2 of ``‖W∘Z‖₁ = 2 zᵀw``), the ridge is ``2β‖w‖²``
(``β‖W‖_F²``). The gradient is ``2 z̄ − α Sᵀ(1/(S w)) + 4β w`` (text under eq. 16).

>>> z = np.array([1.0, 4.0, 1.0])          # d = 3: pairs (0,1), (0,2), (1,2)
>>> degree_operator(np.array([1.0, 2.0, 3.0]), 3)   # S w = W 1
array([3., 4., 5.])
>>> degree_adjoint(np.array([1.0, 10.0, 100.0]), 3)  # (Sᵀ y)_(j,k) = y_j + y_k
array([ 11., 101., 110.])
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import scipy.sparse as sp

from pgfl.validation import ConfigError, check_finite, check_real

__all__ = [
    "clip_factors",
    "degree_adjoint",
    "degree_operator",
    "edge_count",
    "lipschitz_constant",
    "local_cost",
    "local_cost_and_gradient",
    "local_gradient",
    "mat_to_vec",
    "num_nodes",
    "pairwise_sq_distances",
    "per_sample_z_norms",
    "validate_signals",
    "vec_to_mat",
    "zero_data_optimum",
]


def edge_count(d: int) -> int:
    """Return the number of free edge weights ``p = d(d-1)/2`` of a graph on ``d`` vertices.

    >>> edge_count(20)
    190
    """
    return d * (d - 1) // 2


def num_nodes(p: int) -> int:
    """Inverse of :func:`edge_count`: ``d`` with ``d(d-1)/2 = p``; raises if none.

    >>> num_nodes(190)
    20
    """
    d = int(round((1 + math.sqrt(1 + 8 * p)) / 2))
    if edge_count(d) != p or d < 2:
        raise ConfigError(f"edge vector length must be d(d-1)/2 for some d >= 2; got {p}")
    return d


@lru_cache(maxsize=16)
def _pairs(d: int) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = np.triu_indices(d, 1)
    rows.setflags(write=False)
    cols.setflags(write=False)
    return rows, cols


@lru_cache(maxsize=8)
def _degree_matrix(d: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Sparse ``S`` (``d × p``, 2p ones) and ``Sᵀ`` in CSR: O(p) memory, never dense."""
    rows, cols = _pairs(d)
    p = rows.size
    e = np.arange(p)
    S = sp.csr_matrix(
        (np.ones(2 * p), (np.concatenate([rows, cols]), np.concatenate([e, e]))), shape=(d, p)
    )
    return S, S.T.tocsr()


def _apply(M: sp.csr_matrix, v: np.ndarray) -> np.ndarray:
    lead = v.shape[:-1]
    flat = v.reshape(-1, v.shape[-1])
    out = (M @ flat.T).T if flat.shape[0] > 1 else (M @ flat[0])[None, :]
    return np.ascontiguousarray(out).reshape(*lead, M.shape[0])


def degree_operator(w: np.ndarray, d: int) -> np.ndarray:
    """Degrees ``S w = W 1`` without forming a dense ``S`` (shape ``[..., p] -> [..., d]``).

    Batched over any leading axes (clients, repetitions). Cost O(p) per graph: ``S`` is
    held as a sparse matrix with two ones per column (edge ``(j,k)`` adds to ``j`` and ``k``).
    """
    w = np.asarray(w, dtype=float)
    return _apply(_degree_matrix(d)[0], w)


def degree_adjoint(y: np.ndarray, d: int) -> np.ndarray:
    """Adjoint ``Sᵀ y``: entry ``(j, k)`` is ``y_j + y_k`` (shape ``[..., d] -> [..., p]``)."""
    y = np.asarray(y, dtype=float)
    return _apply(_degree_matrix(d)[1], y)


def vec_to_mat(w: np.ndarray) -> np.ndarray:
    """Symmetric adjacency ``W`` with zero diagonal from ``w`` (``[..., p] -> [..., d, d]``).

    >>> vec_to_mat(np.array([1.0, 2.0, 3.0]))
    array([[0., 1., 2.],
           [1., 0., 3.],
           [2., 3., 0.]])
    """
    w = np.asarray(w, dtype=float)
    d = num_nodes(w.shape[-1])
    rows, cols = _pairs(d)
    W = np.zeros((*w.shape[:-1], d, d))
    W[..., rows, cols] = w
    W[..., cols, rows] = w
    return W


def mat_to_vec(W: np.ndarray) -> np.ndarray:
    """Upper-triangular edge vector ``w`` of adjacency ``W`` (``[..., d, d] -> [..., p]``)."""
    W = np.asarray(W, dtype=float)
    rows, cols = _pairs(W.shape[-1])
    return W[..., rows, cols]


def validate_signals(X: object, name: str = "X") -> np.ndarray:
    """Return signals as a float ``[N, d]`` array; raise :class:`ConfigError` on bad input.

    Rejects non-2-D input, fewer than 2 nodes, no samples, and non-finite values.
    """
    arr = np.asarray(X, dtype=float)
    if arr.ndim != 2:
        raise ConfigError(f"{name} must be a 2-D array [N signals, d nodes]; got shape {arr.shape}")
    if arr.shape[1] < 2:
        raise ConfigError(f"{name} must have at least 2 nodes (columns); got {arr.shape[1]}")
    if arr.shape[0] < 1:
        raise ConfigError(f"{name} must have at least 1 signal (row); got 0")
    return check_finite(name, arr)


def per_sample_z_norms(X: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Euclidean norms ``‖z_n‖₂`` of the per-signal pairwise squared-distance vectors.

    Closed form without forming ``z_n`` (O(d) per signal): with ``a = x_n − mean(x_n)``,
    ``‖z_n‖² = Σ_{j<k} (a_j − a_k)⁴ = d Σ a⁴ + 3 (Σ a²)²`` (the odd moments vanish).

    >>> per_sample_z_norms(np.array([[0.0, 1.0, 3.0]]))  # z = (1, 9, 4)
    array([9.89949494])
    """
    X = np.asarray(X, dtype=float)
    d = X.shape[1]
    out = np.empty(X.shape[0])
    for s in range(0, X.shape[0], chunk):
        a = X[s : s + chunk]
        a = a - a.mean(axis=1, keepdims=True)
        a2 = a * a
        out[s : s + chunk] = np.sqrt(d * (a2 * a2).sum(axis=1) + 3.0 * a2.sum(axis=1) ** 2)
    return out


def clip_factors(X: np.ndarray, clip: float) -> np.ndarray:
    """Per-signal clipping factors ``1/max(1, ‖z_n‖/C)`` (paper §IV-D, below eq. 32)."""
    C = check_real("clip", clip, lo=0.0, lo_open=True)
    return 1.0 / np.maximum(1.0, per_sample_z_norms(X) / C)


def pairwise_sq_distances(
    X: np.ndarray, weights: np.ndarray | None = None, chunk: int = 8192
) -> np.ndarray:
    """Average pairwise squared distance vector ``z̄ = (1/N) Σ_n c_n z_n`` (eq. 6, shape ``[p]``).

    ``z̄[(j,k)] = (1/N) Σ_n c_n (x_n[j] − x_n[k])²`` with optional per-signal weights
    ``c_n`` (clipping factors; default 1). Computed from the weighted Gram matrix of the
    centred columns, in chunks of signals, so memory is O(d² + chunk·d) whatever ``N``;
    tiny negative round-off is clipped at 0.

    >>> pairwise_sq_distances(np.array([[0.0, 1.0, 3.0], [0.0, 0.0, 0.0]]))
    array([0.5, 4.5, 2. ])
    """
    X = np.asarray(X, dtype=float)
    N, d = X.shape
    c = np.ones(N) if weights is None else np.asarray(weights, dtype=float)
    G = np.zeros((d, d))
    for s in range(0, N, chunk):
        a = X[s : s + chunk]
        a = a - a.mean(axis=1, keepdims=True)  # per-signal shift: differences unchanged
        G += (a * c[s : s + chunk, None]).T @ a
    G /= N
    diag = np.diag(G)
    rows, cols = _pairs(d)
    z = diag[rows] + diag[cols] - 2.0 * G[rows, cols]
    return np.maximum(z, 0.0)


def local_cost(w: np.ndarray, zbar: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """Cost ``g(w) = 2 z̄ᵀw − α 1ᵀ log(S w) + 2β‖w‖²`` (eq. 7), batched over leading axes.

    Returns ``+inf`` where a degree is not positive (outside the domain of the log).
    """
    w = np.asarray(w, dtype=float)
    d = num_nodes(w.shape[-1])
    deg = degree_operator(w, d)
    with np.errstate(divide="ignore", invalid="ignore"):
        logdeg = np.where(deg > 0, np.log(np.where(deg > 0, deg, 1.0)), -np.inf)
    return (
        2.0 * np.sum(zbar * w, axis=-1)
        - alpha * logdeg.sum(axis=-1)
        + 2.0 * beta * np.sum(w * w, axis=-1)
    )


def local_gradient(
    w: np.ndarray, zbar: np.ndarray, alpha: float, beta: float, min_degree: float = 0.0
) -> np.ndarray:
    """Gradient ``∇g(w) = 2 z̄ − α Sᵀ(1/(S w)) + 4β w`` (text under eq. 16), batched.

    ``min_degree > 0`` evaluates ``1/max(Sw, min_degree)``: the exact gradient wherever
    every degree is at least ``min_degree`` (the region ``deg ≥ deg_min`` of Proposition
    1), and a bounded one elsewhere, so a fixed-step method cannot blow up at a vertex
    whose edges were all projected to zero.
    """
    w = np.asarray(w, dtype=float)
    d = num_nodes(w.shape[-1])
    deg = degree_operator(w, d)
    inv = 1.0 / np.maximum(deg, max(min_degree, np.finfo(float).tiny))
    return 2.0 * zbar - alpha * degree_adjoint(inv, d) + 4.0 * beta * w


def local_cost_and_gradient(
    w: np.ndarray, zbar: np.ndarray, alpha: float, beta: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(g(w), ∇g(w))`` sharing one degree computation (batched; cost ``+inf`` off-domain)."""
    w = np.asarray(w, dtype=float)
    d = num_nodes(w.shape[-1])
    deg = degree_operator(w, d)
    pos = deg > 0
    logdeg = np.where(pos, np.log(np.where(pos, deg, 1.0)), -np.inf)
    cost = (
        2.0 * np.sum(zbar * w, axis=-1)
        - alpha * logdeg.sum(axis=-1)
        + 2.0 * beta * np.sum(w * w, axis=-1)
    )
    with np.errstate(over="ignore", invalid="ignore"):
        inv = 1.0 / np.maximum(deg, np.finfo(float).tiny)
        grad = 2.0 * zbar - alpha * degree_adjoint(inv, d) + 4.0 * beta * w
    return cost, grad


def lipschitz_constant(
    d: int, alpha: float, beta: float, deg_min: float, rho_gamma: float = 0.0
) -> float:
    """Proposition 1: ``L_i = 4β + 2α(d−1)/deg_min² + ργ_i``.

    Uses ``‖S‖₂² = 2(d−1)`` (the eigenvalues of ``S Sᵀ = (d−2) I + 11ᵀ`` are ``2d−2`` and
    ``d−2``). Valid on the region where every degree is at least ``deg_min``.

    >>> lipschitz_constant(20, alpha=2.0, beta=1.5, deg_min=1.0)
    82.0
    """
    return 4.0 * beta + 2.0 * alpha * (d - 1) / deg_min**2 + rho_gamma


def zero_data_optimum(d: int, alpha: float, beta: float) -> float:
    """Return the minimizer ``c = sqrt(α/(2β(d−1)))`` of ``g(c 1)`` when ``z̄ = 0``.

    Used as a data-independent starting point (Theorem 3 needs one). From
    ``d/dc [−α d log((d−1)c) + 2β p c²] = −αd/c + 4βpc = 0``.

    >>> zero_data_optimum(3, alpha=4.0, beta=1.0)
    1.0
    """
    return math.sqrt(alpha / (2.0 * beta * (d - 1)))
