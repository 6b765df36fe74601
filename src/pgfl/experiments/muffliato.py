"""``pgfl reproduce muffliato``: what one gossip averaging leaks, pair by pair (accounting only).

"Muffliato: Peer-to-Peer Privacy Amplification for Decentralized Optimization and Averaging"
(Cyffers, Even, Bellet & Massoulié, NeurIPS 2022, arXiv:2206.05091) claims that after local
Gaussian noise and K gossip steps, node u's privacy against a curious node v improves with
their graph distance. For one averaging (T = 1) on a ring of 16, a 4×4 grid and a random
geometric graph of 16 nodes (Metropolis weights), K ∈ {1, 2, 4, 8} plain and
Chebyshev-accelerated steps, this preset computes ε_{u→v} (δ = 10⁻⁵, σ set so that local DP,
one Gaussian release of sensitivity Δ = 1, has ε = 1) three ways
(:mod:`pgfl.privacy.accounting.gossip`):

* ``exact`` — v's joint Gaussian view of every message it receives, knowing its own noise
  (:func:`~pgfl.privacy.accounting.gossip.muffliato_rdp_matrix`, ``exact=True``);
* ``sum`` — the paper's accountant, one Gaussian mechanism per received message, summed
  (``exact=False``): **not an upper bound**, the messages share one noise vector;
* ``certified`` — the exact view where floating point vouches for it, local DP where it
  cannot (:func:`~pgfl.privacy.accounting.gossip.certified_view_matrix`): what a one-round
  run of ``privacy.server_noise = "gossip"`` may charge.

It writes ``summary.json`` (settings, the distance profiles, where the sum under-reports),
``profiles.csv`` (max and mean ε per graph distance), ``pairs.csv`` (every ε_{u→v}) and
``muffliato.png`` (the worst pair at each distance, exact against the sum).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize
from scipy.sparse.csgraph import shortest_path

from pgfl import plots
from pgfl.experiments.catalog import ACCOUNTING_TITLES
from pgfl.files import write_csv, write_json
from pgfl.privacy.accounting.decentralized import gaussian_composition_epsilon
from pgfl.privacy.accounting.gossip import (
    GOSSIP_KINDS,
    certified_view_matrix,
    distance_profile,
    muffliato_rdp_matrix,
)
from pgfl.rng import stream
from pgfl.topology import build_graph, combination_matrix

__all__ = ["DELTA", "GRAPHS", "PRESETS", "TITLES", "muffliato_graphs", "muffliato_summary", "run"]

#: δ of every ε.
DELTA = 1e-5
#: The graphs: name → (kind, P, radius) of :func:`pgfl.topology.build_graph`.
GRAPHS = {"ring": ("ring", 16, 0.0), "grid": ("grid", 16, 0.0),
          "geometric": ("random_geometric", 16, 0.45)}  # fmt: skip
#: How the three views are named in the files.
VIEWS = ("exact", "sum", "certified")


def _steps(quick: bool) -> tuple[int, ...]:
    return (1, 2, 4) if quick else (1, 2, 4, 8)


def local_dp_sigma(delta: float = DELTA, target: float = 1.0) -> float:
    """σ (Δ = 1) at which one Gaussian release has ε = ``target`` at ``delta``.

    >>> round(local_dp_sigma(), 4)
    3.7306
    """

    def gap(log_sigma: float) -> float:
        rho = 0.5 / np.exp(2 * log_sigma)
        return float(gaussian_composition_epsilon(rho, 1, delta)) - target

    return float(np.exp(optimize.brentq(gap, np.log(1e-2), np.log(1e3), xtol=1e-14)))


def muffliato_graphs(seed: int) -> dict[str, np.ndarray]:
    """The preset's combination matrices (Metropolis weights), by name."""
    out = {}
    for name, (kind, P, radius) in GRAPHS.items():
        rng = stream(seed, "topology", P)
        graph = build_graph(kind, P, rng=rng, radius=radius or 0.5)
        out[name] = combination_matrix(graph, "metropolis")
    return out


def _epsilons(W: np.ndarray, k: int, kind: str, sigma: float) -> dict[str, np.ndarray]:
    rho = {
        "exact": muffliato_rdp_matrix(W, k, sigma, kind=kind, exact=True),
        "sum": muffliato_rdp_matrix(W, k, sigma, kind=kind, exact=False),
        "certified": certified_view_matrix(W, k, kind) * 0.5 / sigma**2,
    }
    out = {}
    for view, r in rho.items():
        eps = np.asarray(gaussian_composition_epsilon(r, 1, DELTA), dtype=float)
        np.fill_diagonal(eps, 0.0)
        out[view] = eps
    return out


def _under_report(eps: dict[str, np.ndarray], dist: np.ndarray) -> dict[str, Any]:
    """Where the sum is below the exact view: pairs, the worst, and profile distances."""
    off = ~np.eye(dist.shape[0], dtype=bool)
    below = off & (eps["sum"] < eps["exact"] - 1e-9)
    ratio = np.where(below, eps["exact"] / np.maximum(eps["sum"], 1e-300), 0.0)
    u, v = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    worst = {"u": int(u), "v": int(v), "distance": int(dist[u, v]),
             "exact": float(eps["exact"][u, v]), "sum": float(eps["sum"][u, v])}  # fmt: skip
    return {
        "pairs": int(below.sum()),
        "of": int(off.sum()),
        "worst": worst if below.any() else None,
    }


def muffliato_summary(quick: bool, seed: int) -> tuple[dict[str, Any], list[dict], list[dict]]:
    """The summary, the profile rows and the pair rows (nothing written)."""
    sigma = local_dp_sigma()
    graphs = muffliato_graphs(seed)
    profiles, pairs, under = [], [], []
    for name, W in graphs.items():
        adj = (W != 0) & ~np.eye(W.shape[0], dtype=bool)
        for kind in GOSSIP_KINDS:
            for k in _steps(quick):
                eps = _epsilons(W, k, kind, sigma)
                key = {"graph": name, "kind": kind, "steps": k}
                for view in VIEWS:
                    p = distance_profile(eps[view], adj)
                    profiles.append({**key, "view": view, "distance": p.distances.tolist(),
                                     "max": p.max.tolist(), "mean": p.mean.tolist(),
                                     "count": p.count.tolist()})  # fmt: skip
                dist = _distances(adj)
                under.append({**key, **_under_report(eps, dist)})
                for u, v in zip(*np.nonzero(~np.eye(W.shape[0], dtype=bool)), strict=True):
                    values = {f"epsilon_{x}": float(eps[x][u, v]) for x in VIEWS}
                    pairs.append({**key, "u": int(u), "v": int(v),
                                  "distance": int(dist[u, v]), **values})  # fmt: skip
    summary = {
        "experiment": "muffliato",
        "title": "One gossip averaging: ε_{u→v} by graph distance, exact view vs Muffliato's sum",
        "quick": quick,
        "seed": seed,
        "delta": DELTA,
        "sigma": sigma,
        "sensitivity": 1.0,
        "local_dp_epsilon": 1.0,
        "graphs": {
            n: {"P": int(W.shape[0]), "edges": int(((W != 0).sum() - W.shape[0]) // 2)}
            for n, W in graphs.items()
        },  # fmt: skip
        "steps": list(_steps(quick)),
        "profiles": profiles,
        "under_reported": under,
    }
    return summary, _profile_rows(profiles), pairs


def _distances(adj: np.ndarray) -> np.ndarray:
    return shortest_path(adj.astype(float), unweighted=True, directed=False)


def _profile_rows(profiles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for p in profiles:
        for d, mx, mean, n in zip(p["distance"], p["max"], p["mean"], p["count"], strict=True):
            rows.append({"graph": p["graph"], "kind": p["kind"], "steps": p["steps"],
                         "view": p["view"], "distance": d, "max_epsilon": mx,
                         "mean_epsilon": mean, "pairs": n})  # fmt: skip
    return rows


def run(quick: bool, out: Path, seed: int) -> dict[str, Any]:
    """Compute, write ``summary.json``, ``profiles.csv``, ``pairs.csv``, ``muffliato.png``."""
    summary, profiles, pairs = muffliato_summary(quick, seed)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "summary.json", summary)
    write_csv(out / "profiles.csv", profiles)
    write_csv(out / "pairs.csv", pairs)
    plots.plot_muffliato(summary, out / "muffliato.png")
    return summary


#: ``pgfl reproduce`` presets that only account (no simulation): name → ``run``.
PRESETS = {"muffliato": run}

#: One line per preset for ``pgfl reproduce --list`` (kept in the light catalog module).
TITLES = ACCOUNTING_TITLES
