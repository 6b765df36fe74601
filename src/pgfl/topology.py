"""Graphs of servers and their combination matrices (Assumption 1 of the papers).

The servers of a graph federated learning (GFL) network combine their neighbours'
messages with a combination matrix ``A`` (``P x P``) that must satisfy Assumption 1
(Rizk, Vlaski & Sayed, "Privatized Graph Federated Learning", arXiv:2203.07105 — the
*preprint* — eqs. 10-11): symmetric, doubly stochastic, nonnegative, ``a_pm > 0`` only on
edges and the diagonal, and a connected graph so that

    iota_2 = rho(A - 11^T / P) < 1.

Graph-homomorphic perturbations (preprint eq. 47) also need ``a_pp > 0`` for every server.

>>> A = combination_matrix(nx.cycle_graph(4))   # Metropolis-Hastings weights on a ring
>>> A.round(3).tolist()[0]
[0.333, 0.333, 0.0, 0.333]
>>> round(iota2(A), 6)
0.333333
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np

from pgfl.param import Param, When, kind_is, ref
from pgfl.validation import ConfigError, check_int

__all__ = [
    "PARAMS",
    "TOPOLOGIES",
    "WEIGHT_RULES",
    "build_graph",
    "check_combination_matrix",
    "combination_matrix",
    "graph_from_edges",
    "iota2",
]

_MAX_RESAMPLES = 1000
#: Named graph families.
TOPOLOGIES = ("ring", "grid", "torus", "complete", "star", "erdos_renyi", "random_geometric")
#: Rules that turn a graph into combination weights.
WEIGHT_RULES = ("metropolis", "max_degree")


def _check_edges(p: Param, value: Any, c: Mapping[str, Any]) -> tuple[tuple[int, int], ...]:
    """A list of ``[p, m]`` server pairs that connects all ``topology.P`` servers."""
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{p.name} must be a list of [p, m] pairs; got {value!r}")
    P = c.get("topology.P")
    hi = {"hi": None if P is None else P - 1, "hi_name": "topology.P-1"}
    edges = []
    for i, e in enumerate(value):
        if not isinstance(e, (list, tuple)) or len(e) != 2:
            raise ConfigError(f"{p.name}[{i}] must be a [p, m] pair; got {e!r}")
        edges.append(tuple(check_int(f"{p.name}[{i}]", v, lo=0, **hi) for v in e))
    if P is not None:
        # union-find over the servers the edges name (memory bounded by the list, not by P)
        root: dict[int, int] = {}

        def find(x: int) -> int:
            while root.setdefault(x, x) != x:
                root[x] = root[root[x]]
                x = root[x]
            return x

        for a, b in edges:
            root[find(a)] = find(b)
        parts = len({find(x) for x in list(root)}) + P - len(root)
        if parts > 1:
            raise ConfigError(
                f"{p.name} must connect all topology.P={P} servers; got {parts} components"
            )
    return tuple(edges)


def _check_matrix(p: Param, value: Any, c: Mapping[str, Any]) -> tuple[tuple[float, ...], ...]:
    """A ``P × P`` table of real numbers satisfying Assumption 1 (preprint §II)."""
    P = c.get("topology.P")
    shape = f"a {P} x {P} table (topology.P={P})" if P is not None else "a square table"
    what = f"{p.name} must be {shape} of real numbers"
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{what}; got {value!r}")
    rows = []
    for i, row in enumerate(value):
        if not isinstance(row, (list, tuple)):
            raise ConfigError(f"{what}; got row {i} = {row!r}, not a list")
        for j, x in enumerate(row):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                raise ConfigError(f"{what}; got {x!r} at row {i}, column {j}")
        rows.append(tuple(float(x) for x in row))
    lengths = sorted({len(r) for r in rows})
    if len(lengths) > 1:
        raise ConfigError(f"{what}; got a ragged table (rows of {lengths} entries)")
    n = P if P is not None else len(rows)
    if (len(rows), lengths[0]) != (n, n):
        raise ConfigError(f"{what}; got {len(rows)} rows of {lengths[0]} entries")
    try:
        check_combination_matrix(np.array(rows))
    except ConfigError as exc:
        raise ConfigError(f"{p.name}: {exc}") from None
    return tuple(rows)


#: The ``[topology]`` settings of a configuration.
PARAMS = (
    Param("topology.kind", "choice", "erdos_renyi", "Graph of servers: a named family, an edge "
          "list or a combination matrix.", choices=(*TOPOLOGIES, "edges", "matrix")),
    Param("topology.P", "int", 10, "Number of federated units (servers) P.", lo=1),
    Param("topology.weights", "choice", "metropolis", "Combination weights from the graph.",
          choices=WEIGHT_RULES, applies=When('topology.kind other than "matrix"',
                                             lambda c: c["topology.kind"] != "matrix")),
    Param("topology.probability", "real", 0.4, "Edge probability (resampled until connected).",
          lo=0, hi=1, lo_open=True, applies=kind_is("topology", "erdos_renyi")),
    Param("topology.radius", "real", 0.5, "Connection radius in the unit square (resampled "
          "until connected).", lo=0, lo_open=True,
          applies=kind_is("topology", "random_geometric")),
    Param("topology.rows", "int", None, "Rows of the grid; must divide P (unset: the largest "
          "divisor of P not above √P).", lo=1, hi_ref=ref("topology.P"),
          applies=kind_is("topology", "grid", "torus")),
    Param("topology.edges", "edges", None, "Undirected edges `[[p, m], ...]` between servers "
          "0..P-1; Metropolis or max-degree weights.", applies=kind_is("topology", "edges"),
          required=True, checker=_check_edges,
          allowed_doc="pairs of integers in [0, topology.P-1]; connected"),
    Param("topology.matrix", "matrix", None, "The combination matrix A itself, P rows of P "
          "entries.", applies=kind_is("topology", "matrix"), required=True,
          checker=_check_matrix,
          allowed_doc="symmetric, doubly stochastic, connected (Assumption 1)"),
)  # fmt: skip
_P = {p.name: p for p in PARAMS}


def build_graph(
    kind: str,
    P: int,
    *,
    rng: np.random.Generator | None = None,
    probability: float = 0.3,
    radius: float = 0.5,
    rows: int | None = None,
) -> nx.Graph:
    """A connected undirected graph of ``P`` servers of the given ``kind``.

    ``erdos_renyi`` (edge ``probability``) and ``random_geometric`` (unit square,
    connection ``radius``) are resampled from ``rng`` until connected. ``grid``/``torus``
    use ``rows`` rows (default: the largest divisor of ``P`` not above ``sqrt(P)``).

    >>> sorted(build_graph("ring", 4).edges())
    [(0, 1), (0, 3), (1, 2), (2, 3)]
    """
    _P["topology.kind"].check(kind)
    P = _P["topology.P"].check(P)
    if kind == "ring":
        return nx.cycle_graph(P) if P > 2 else nx.path_graph(P)
    if kind == "complete":
        return nx.complete_graph(P)
    if kind == "star":
        return nx.star_graph(P - 1) if P > 1 else nx.empty_graph(1)
    if kind in ("grid", "torus"):
        if rows is None:
            rows = max(r for r in range(1, int(np.sqrt(P)) + 1) if P % r == 0)
        rows = _P["topology.rows"].check(rows, {"topology.P": P})
        if P % rows:
            raise ConfigError(f"topology.rows must divide P={P}; got {rows}")
        g = nx.grid_2d_graph(rows, P // rows, periodic=(kind == "torus"))
        return nx.convert_node_labels_to_integers(g, ordering="sorted")
    if rng is None:
        raise ConfigError(f"topology.kind={kind!r} is random and needs a generator (rng)")
    if kind == "erdos_renyi":
        probability = _P["topology.probability"].check(probability)
        for _ in range(_MAX_RESAMPLES):
            g = nx.gnp_random_graph(P, probability, seed=int(rng.integers(2**32)))
            if nx.is_connected(g):
                return g
    else:
        radius = _P["topology.radius"].check(radius)
        for _ in range(_MAX_RESAMPLES):
            g = nx.random_geometric_graph(P, radius, seed=int(rng.integers(2**32)))
            if nx.is_connected(g):
                return g
    raise ConfigError(
        f"topology.kind={kind!r} with P={P} gave no connected graph in {_MAX_RESAMPLES} draws; "
        "raise topology.probability / topology.radius"
    )


def graph_from_edges(P: int, edges: Sequence[Sequence[int]]) -> nx.Graph:
    """Undirected graph on nodes ``0..P-1`` from an edge list ``[(p, m), ...]``.

    >>> graph_from_edges(3, [(0, 1), (1, 2)]).number_of_edges()
    2
    """
    P = _P["topology.P"].check(P)
    g = nx.empty_graph(P)
    for p, m in _P["topology.edges"].check(edges, {"topology.P": P}):
        if p != m:
            g.add_edge(p, m)
    return g


def combination_matrix(graph: nx.Graph, rule: str = "metropolis") -> np.ndarray:
    """Symmetric doubly-stochastic combination matrix of ``graph``.

    Rules (degrees ``n_p`` exclude the self-loop):

    * ``metropolis`` (Metropolis-Hastings, the default):
      ``a_pm = 1 / (1 + max(n_p, n_m))`` on edges, ``a_pp = 1 - sum_{m != p} a_pm``;
    * ``max_degree``: ``a_pm = 1 / (1 + n_max)`` on edges, ``a_pp = 1 - n_p / (1 + n_max)``.

    Both give ``a_pp > 0``, as graph-homomorphic perturbations need.

    >>> (3 * combination_matrix(nx.path_graph(3))).round(12).tolist()
    [[2.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 2.0]]
    """
    _P["topology.weights"].check(rule)
    nodes = sorted(graph.nodes())
    P = len(nodes)
    if nodes != list(range(P)):
        graph = nx.convert_node_labels_to_integers(graph, ordering="sorted")
    adj = nx.to_numpy_array(graph, nodelist=range(P), weight=None)
    np.fill_diagonal(adj, 0.0)
    adj = (adj > 0).astype(float)
    deg = adj.sum(axis=1)
    if rule == "metropolis":
        A = adj / (1.0 + np.maximum(deg[:, None], deg[None, :]))
    else:
        A = adj / (1.0 + deg.max(initial=0.0))
    np.fill_diagonal(A, 1.0 - A.sum(axis=1))
    return A


def iota2(A: np.ndarray) -> float:
    """``iota_2 = rho(A - 11^T/P)`` (preprint eq. 11), the mixing rate of a symmetric ``A``.

    >>> iota2(np.full((3, 3), 1 / 3))
    0.0
    """
    P = A.shape[0]
    eig = np.linalg.eigvalsh(A - np.full((P, P), 1.0 / P))
    return float(max(abs(eig.min()), abs(eig.max()))) if abs(eig).max() > 1e-14 else 0.0


def check_combination_matrix(
    A: Any, *, need_self_weights: bool = False, signed: bool = False, tol: float = 1e-9
) -> float:
    """Check Assumption 1 on ``A`` and return ``iota_2``; raise :class:`ConfigError` otherwise.

    Rejects a matrix that is not square, not symmetric, has a negative entry (unless
    ``signed``: a polynomial of a combination matrix, such as Chebyshev-accelerated gossip,
    whose rows still sum to 1), is not doubly stochastic, is disconnected
    (``iota_2 >= 1``), or, when ``need_self_weights`` (graph-homomorphic noise), has some
    ``a_pp = 0``.

    >>> check_combination_matrix(np.eye(2))
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: combination matrix must be connected (iota_2 < 1); got iota_2=1
    """
    A = np.asarray(A, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
        raise ConfigError(f"combination matrix must be square P x P; got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ConfigError("combination matrix must be finite; got NaN or inf entries")
    asym = float(np.abs(A - A.T).max())
    if asym > tol:
        raise ConfigError(
            f"combination matrix must be symmetric (|A - A^T| <= {tol:g}); got {asym:.3g}"
        )
    if A.min() < -tol and not signed:
        raise ConfigError(f"combination matrix entries must be in [0, 1]; got {A.min():.6g}")
    row_err = float(np.abs(A.sum(axis=1) - 1).max())
    if row_err > tol:
        raise ConfigError(
            f"combination matrix must be doubly stochastic (rows and columns sum to 1); "
            f"got a sum off by {row_err:.3g}"
        )
    rate = iota2(A)
    if rate >= 1 - tol:
        raise ConfigError(
            f"combination matrix must be connected (iota_2 < 1); got iota_2={rate:.6g}"
        )
    if need_self_weights and A.diagonal().min() <= 0:
        p = int(np.argmin(A.diagonal()))
        raise ConfigError(
            f"graph-homomorphic noise needs a_pp > 0 for every server; got a_pp=0 at p={p}"
        )
    return rate
