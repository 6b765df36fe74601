"""Synthetic graphs and smooth signals of the paper's experiments (§V-A 1–2).

* :func:`rbf_graph`: the Gaussian RBF random graph of Dong et al. (2016): ``d`` vertices
  uniform in the unit square, weight ``exp(−dist²/(2σ²))`` with kernel width ``σ = 0.5``,
  edges with weight below ``0.75`` removed (Dong et al.'s threshold).
* :func:`heterogeneous_graphs`: a consensus graph keeps a random fraction ``q`` of the
  edges of ``G0`` (with their weights); each client graph adds ``(1−q)|E0|`` random new
  edges (pairs outside the consensus), whose weights are drawn from ``G0``'s edge
  weights, so every client graph has ``|E0|`` edges and ``1 − q`` measures heterogeneity.
* :func:`smooth_signals`: ``x ~ N(0, (L + σ_w² I)†)`` (eq. 33), ``σ_w = 0.1``.

All randomness comes from an explicit :class:`numpy.random.Generator`.
"""

from __future__ import annotations

import numpy as np

from pgfl.graphlearn.smoothness import degree_operator, num_nodes, vec_to_mat
from pgfl.validation import check_int, check_real

__all__ = ["derived_graphs", "heterogeneous_graphs", "laplacian", "rbf_graph", "smooth_signals"]


def rbf_graph(
    d: int, rng: np.random.Generator, *, width: float = 0.5, threshold: float = 0.75
) -> tuple[np.ndarray, np.ndarray]:
    """Random RBF graph: return ``(w [p], positions [d, 2])``.

    ``W_jk = exp(−‖u_j − u_k‖²/(2 width²))`` if that is ``≥ threshold``, else 0, with
    positions ``u`` uniform in ``[0, 1]²``.

    >>> w, u = rbf_graph(20, np.random.default_rng(0))
    >>> w.shape, bool(((w == 0) | (w >= 0.75)).all())
    ((190,), True)
    """
    d = check_int("d", d, lo=2)
    width = check_real("width", width, lo=0.0, lo_open=True)
    u = rng.random((d, 2))
    rows, cols = np.triu_indices(d, 1)
    dist2 = np.sum((u[rows] - u[cols]) ** 2, axis=1)
    w = np.exp(-dist2 / (2.0 * width**2))
    w[w < threshold] = 0.0
    return w, u


def heterogeneous_graphs(
    w0: np.ndarray, q: float, n_clients: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Consensus + client graphs from ``G0`` (§V-A 1): return ``(w_con [p], w_clients [I, p])``.

    The consensus keeps ``round(q |E0|)`` edges of ``G0`` chosen at random; each client adds
    ``|E0| − round(q|E0|)`` new edges chosen uniformly among the pairs outside the
    consensus, with weights resampled from ``G0``'s edge weights.

    >>> w0, _ = rbf_graph(20, np.random.default_rng(1))
    >>> con, cl = heterogeneous_graphs(w0, 0.5, 5, np.random.default_rng(2))
    >>> int((con > 0).sum()) == round(0.5 * (w0 > 0).sum()), cl.shape
    (True, (5, 190))
    >>> bool(np.all((cl > 0).sum(axis=1) == (w0 > 0).sum()))
    True
    """
    q = check_real("q", q, lo=0.0, hi=1.0)
    n_clients = check_int("n_clients", n_clients, lo=1)
    w0 = np.asarray(w0, dtype=float)
    edges = np.flatnonzero(w0 > 0)
    n_keep = int(round(q * edges.size))
    keep = rng.choice(edges, size=n_keep, replace=False)
    w_con = np.zeros_like(w0)
    w_con[keep] = w0[keep]
    free = np.flatnonzero(w_con == 0)
    n_add = edges.size - n_keep
    clients = np.repeat(w_con[None, :], n_clients, axis=0)
    # independent random subsets per client: argsort of uniform keys, vectorized
    keys = rng.random((n_clients, free.size))
    picks = free[np.argsort(keys, axis=1)[:, :n_add]]
    weights = rng.choice(w0[edges], size=(n_clients, n_add), replace=True)
    np.put_along_axis(clients, picks, weights, axis=1)
    return w_con, clients


def derived_graphs(w1: np.ndarray, qs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Graphs derived from ``G1`` for Table I: client 1 is ``G1``, client ``k`` keeps ``q_k``.

    Client ``k ≥ 2`` keeps ``round(q_k |E1|)`` random edges of ``G1`` and adds the rest at
    random (as :func:`heterogeneous_graphs` with one client). Returns ``[1 + len(qs), p]``.
    """
    out = [np.asarray(w1, dtype=float)]
    for q in qs:
        _, cl = heterogeneous_graphs(w1, float(q), 1, rng)
        out.append(cl[0])
    return np.stack(out)


def laplacian(w: np.ndarray) -> np.ndarray:
    """Combinatorial Laplacian ``L = diag(W1) − W`` of edge vector(s) ``w`` (batched)."""
    W = vec_to_mat(w)
    d = W.shape[-1]
    deg = degree_operator(np.asarray(w, dtype=float), d)
    return deg[..., :, None] * np.eye(d) - W


def smooth_signals(
    w: np.ndarray, n: int, rng: np.random.Generator, *, sigma_w: float = 0.1
) -> np.ndarray:
    """Draw ``n`` signals ``x ~ N(0, (L + σ_w² I)†)`` on graph ``w`` (eq. 33); shape ``[n, d]``.

    ``L + σ_w² I`` is positive definite for ``σ_w > 0``, so ``†`` is the inverse; sampling is
    ``x = V diag((λ + σ_w²)^{-1/2}) ε`` with ``L = V diag(λ) Vᵀ`` and ``ε ~ N(0, I)``.

    >>> X = smooth_signals(np.array([1.0, 0.0, 0.0]), 4000, np.random.default_rng(0))
    >>> v = np.var(X[:, 0] - X[:, 1]) < np.var(X[:, 0] - X[:, 2])   # 0–1 connected
    >>> bool(v)
    True
    """
    n = check_int("n", n, lo=1)
    sigma_w = check_real("sigma_w", sigma_w, lo=0.0, lo_open=True)
    w = np.asarray(w, dtype=float)
    num_nodes(w.size)
    lam, V = np.linalg.eigh(laplacian(w))
    lam = np.maximum(lam, 0.0)
    eps = rng.standard_normal((n, V.shape[0]))
    return (eps / np.sqrt(lam + sigma_w**2)) @ V.T
