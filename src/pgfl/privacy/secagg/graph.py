"""The neighbour graph of SecAgg+ (Bell et al., CCS 2020) and when unmasking must abort.

With the complete graph (original SecAgg) every client shares its secrets with all L
clients; with a sparse graph each client shares with its k graph neighbours only, and the
round aborts if the survivors' graph is disconnected or some client has fewer than t
responding share holders.
"""

from __future__ import annotations

import math

import numpy as np

from pgfl.privacy.secagg.config import SecAggConfig
from pgfl.rng import stream
from pgfl.validation import check_int

__all__ = ["edges", "neighbour_graph", "slot", "sparse_abort_reason", "suggested_neighbours"]


def neighbour_graph(num_clients: int, config: SecAggConfig, *, unit: int, round: int) -> np.ndarray:
    """Return the closed neighbourhoods ``N[u]`` as an ``int64 [L, h]`` array, u itself first.

    Complete graph: every row is all clients (u first). Sparse (SecAgg+): a *random
    Harary graph*: a public permutation π (from ``graph_seed``, unit and round; public
    randomness, so a numpy generator) places the clients on a ring, and each is joined to
    the k/2 nearest on each side: k-regular, connected, and after random dropouts
    disconnected only if k/2 ring-consecutive clients all drop.

    >>> neighbour_graph(4, SecAggConfig(), unit=0, round=0).tolist()
    [[0, 1, 2, 3], [1, 0, 2, 3], [2, 0, 1, 3], [3, 0, 1, 2]]
    """
    L = check_int("num_clients", num_clients, lo=1)
    if not config.is_sparse(L):
        u = np.arange(L)[:, None]
        j = np.arange(L - 1)[None, :]
        return np.concatenate([u, j + (j >= u)], axis=1)
    k = config.neighbours
    perm = stream(config.graph_seed, "secagg-neighbour-graph", unit, round).permutation(L)
    pos = np.empty(L, dtype=np.int64)
    pos[perm] = np.arange(L)
    offs = np.concatenate([np.arange(1, k // 2 + 1), -np.arange(1, k // 2 + 1)])
    nb = perm[(pos[:, None] + offs[None, :]) % L]
    nb = np.sort(nb, axis=1)
    return np.concatenate([np.arange(L)[:, None], nb], axis=1)


def edges(holders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Undirected edges (u < v) of the graph given by closed neighbourhoods."""
    L, h = holders.shape
    u = np.repeat(np.arange(L), h - 1)
    v = holders[:, 1:].reshape(-1)
    keep = u < v
    return u[keep], v[keep]


def sparse_abort_reason(
    holders: np.ndarray,
    shared: np.ndarray,
    included: np.ndarray,
    responders: np.ndarray,
    t: int,
) -> str | None:
    """Why the unmasking round must abort, or ``None`` if it can proceed safely.

    Args:
        holders: ``[L, h]`` closed neighbourhoods.
        shared: bool ``[L]``, U2 (sent their shares).
        included: bool ``[L]``, U3 (masked input arrived).
        responders: bool ``[L]``, the clients that answer the unmasking request.
        t: threshold.

    """
    n3 = int(included.sum())
    if n3 < t:
        return f"{n3} survivors < threshold t={t}"
    need = shared  # b_u for u in U3, s_u^SK for u in U2 \ U3: every u in U2
    avail = (responders[holders] & shared[holders]).sum(axis=1)
    short = need & (avail < t)
    if short.any():
        u = int(np.flatnonzero(short)[0])
        return (
            f"client {u} has {int(avail[u])} responding share holders < threshold t={t} "
            f"({int(short.sum())} clients short)"
        )
    L, h = holders.shape
    if h < L:  # sparse: the survivors' graph must be connected
        # min-label propagation over surviving edges; converges in ≤ diameter steps
        lab = np.where(included, np.arange(L), L)
        alive = included[holders]
        while True:
            nxt = np.where(alive, lab[holders], L).min(axis=1)
            nxt = np.where(included, np.minimum(lab, nxt), L)
            if np.array_equal(nxt, lab):
                break
            lab = nxt
        comps = np.unique(lab[included]).size
        if comps > 1:
            return (
                f"the survivors' neighbour graph has {comps} components; unmasking would "
                "reveal per-component sums (raise neighbours)"
            )
    return None


def slot(holders: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Position j of v in ``holders[u]`` (``holders[u, 1:]`` is sorted, v ≠ u a neighbour)."""
    L, h = holders.shape
    flat = (np.arange(L)[:, None] * L + holders[:, 1:]).reshape(-1)  # sorted row by row
    pos = np.searchsorted(flat, u * L + v)
    return pos - u * (h - 1) + 1


def suggested_neighbours(num_clients: int) -> int:
    """Return a heuristic SecAgg+ degree, ``2⌈1.5 log2 L⌉`` (even; see docs/secagg.md)."""
    return min(2 * math.ceil(1.5 * math.log2(max(num_clients, 2))), max(2, num_clients - 2))
