"""Real-data experiment in the spirit of the paper's COIL-20 study (§V-C 2, Table II).

Offline stand-in for COIL-20: scikit-learn's ``load_digits`` (8×8 images, 16 grey
levels). Four digit classes ``(1, 4, 7, 9)`` (two easily confused pairs, chosen before
any run) play the four objects; three "photographers" (clients) each hold 12 different
images of every class, 48 images in all. Images are the nodes (node ``12c + k`` is the
``k``-th image of class ``c`` at every client, so the node sets are aligned by class),
the 64 pixel intensities (scaled to ``[0, 1]``) are the signals: ``X_i`` is ``[64, 48]``.

Graphs are learned by IGL (one per client), FedAvg (one global graph) and the federated
model with and without DP (``ε̄ ∈ {0.5, 1}``, ``δ̄ = 1e-5``, ``C = 25``); communities are
found by Louvain (networkx, seeded) on the consensus graph for the federated model, and
scored against the classes by NMI, Rand index and Fowlkes–Mallows (scikit-learn).
Parameters: every method gets the grid values that maximize its mean NMI over three
seeded image draws distinct from the evaluation draw (the paper tunes on the data too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pgfl.files import write_csv, write_json
from pgfl.graphlearn.federated import (
    client_distances,
    fedavg_graph_learning,
    federated_graph_learning,
    independent_graph_learning,
)
from pgfl.graphlearn.metrics import edge_support
from pgfl.graphlearn.privacy import calibrate_noise, privacy_report
from pgfl.graphlearn.smoothness import vec_to_mat
from pgfl.rng import stream

__all__ = ["CLASSES", "communities", "digits_clients", "run_digits", "score_partition"]

CLASSES = (1, 4, 7, 9)
PER_CLASS = 12
N_CLIENTS = 3
#: Tuning grids of β, ρ, λ and the number of tuning draws: (full run, ``--quick``).
GRIDS = {
    False: {"beta": (0.1, 0.3, 1.0, 3.0, 10.0), "rho": (0.1, 0.3, 1.0, 3.0),
            "lambda": (0.0, 0.02, 0.1), "draws": 3},
    True: {"beta": (0.3, 1.0, 3.0), "rho": (0.3, 1.0), "lambda": (0.0, 0.05), "draws": 2},
}  # fmt: skip
#: ε̄ of the DP runs, at δ̄ = 1e-5, clipping C = 25, T = 8 rounds.
EPSILONS = (0.5, 1.0)


def digits_clients(seed: int, name: str = "digits") -> tuple[list[np.ndarray], np.ndarray]:
    """Three clients' signals ``[64, 48]`` and the node labels ``[48]`` (class per node)."""
    from sklearn.datasets import load_digits  # lazy: scikit-learn, only for this data set

    data = load_digits()
    images, target = data.data / 16.0, data.target
    rng = stream(seed, name)
    per_client = [[] for _ in range(N_CLIENTS)]
    for c in CLASSES:
        pick = rng.permutation(np.flatnonzero(target == c))[: N_CLIENTS * PER_CLASS]
        for i in range(N_CLIENTS):
            per_client[i].append(images[pick[i * PER_CLASS : (i + 1) * PER_CLASS]])
    signals = [np.concatenate(parts).T for parts in per_client]  # [64 pixels, 48 images]
    labels = np.repeat(np.arange(len(CLASSES)), PER_CLASS)
    return signals, labels


def communities(w: np.ndarray, seed: int) -> np.ndarray:
    """Louvain communities of the learned graph (edges above the metric threshold)."""
    import networkx as nx  # lazy: networkx, only for this figure's layout

    W = vec_to_mat(np.where(edge_support(w), w, 0.0))
    G = nx.from_numpy_array(W)
    parts = nx.community.louvain_communities(G, weight="weight", seed=seed)
    lab = np.empty(W.shape[0], dtype=int)
    for k, nodes in enumerate(parts):
        lab[list(nodes)] = k
    return lab


def score_partition(pred: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """NMI, Rand index and Fowlkes–Mallows index of a partition (scikit-learn)."""
    from sklearn import metrics  # lazy: scikit-learn, only for these scores

    return {
        "nmi": float(metrics.normalized_mutual_info_score(truth, pred)),
        "ri": float(metrics.rand_score(truth, pred)),
        "fmi": float(metrics.fowlkes_mallows_score(truth, pred)),
    }


def _methods(Z, counts, params, dp_sigma=None, rng=None) -> dict[str, np.ndarray]:
    b_i, b_f, b_g, rho, lam = params
    out = {}
    igl = independent_graph_learning(Z, beta=b_i, tol=1e-6)
    for i in range(Z.shape[-2]):
        out[f"igl_c{i + 1}"] = igl[..., i, :]
    out["fedavg"] = fedavg_graph_learning(Z, counts, beta=b_f)
    out["fedgl"] = federated_graph_learning(Z, beta=b_g, rho=rho, lam=lam).w_con
    return out


def run_digits(quick: bool, out: Path, seed: int) -> dict[str, Any]:
    """Table II on the digits stand-in; writes ``summary.json``, ``curves.csv``, figures."""
    grid = GRIDS[quick]
    betas, rhos, lams, tune_draws = grid["beta"], grid["rho"], grid["lambda"], grid["draws"]
    # tuning on separate draws: mean NMI per method and grid point
    Zt, lab_t = [], []
    for r in range(tune_draws):
        s, lab = digits_clients(seed, f"digits/tune/{r}")
        Zt.append(client_distances(s)[0])
        lab_t.append(lab)
    Zt = np.stack(Zt)
    counts = np.full(N_CLIENTS, 64)

    def nmi(w_batch, k):
        return np.mean(
            [
                score_partition(communities(w_batch[r], seed + k), lab_t[r])["nmi"]
                for r in range(len(lab_t))
            ]
        )

    igl_s = [
        np.mean(
            [
                nmi(independent_graph_learning(Zt, beta=b, tol=1e-6)[:, i], 0)
                for i in range(N_CLIENTS)
            ]
        )
        for b in betas
    ]
    fa_s = [nmi(fedavg_graph_learning(Zt, counts, beta=b), 0) for b in betas]
    best = (-1.0, None)
    for b in betas:
        for rho in rhos:
            for lam in lams:
                v = nmi(federated_graph_learning(Zt, beta=b, rho=rho, lam=lam).w_con, 0)
                if v > best[0]:
                    best = (v, (b, rho, lam))
    params = (betas[int(np.argmax(igl_s))], betas[int(np.argmax(fa_s))], *best[1])
    # evaluation draw
    signals, labels = digits_clients(seed, "digits/eval")
    Z, counts = client_distances(signals)
    graphs = _methods(Z, counts, params)
    Zc, _ = client_distances(signals, clip=25.0)
    privacy = {}
    for k, eps in enumerate(EPSILONS):
        cal = calibrate_noise(eps, 1e-5, 8, counts, 25.0)
        graphs[f"fedgl_dp@{eps:g}"] = federated_graph_learning(
            Zc,
            beta=params[2],
            rho=params[3],
            lam=params[4],
            noise_std=cal.sigma,
            rng=stream(seed, "digits/dp-noise", k),
        ).w_con
        privacy[f"{eps:g}"] = privacy_report(cal)
    table = {name: score_partition(communities(w, seed), labels) for name, w in graphs.items()}
    summary = {
        "experiment": "graphlearn-digits",
        "quick": quick,
        "seed": seed,
        "classes": list(CLASSES),
        "images_per_class_per_client": PER_CLASS,
        "params": dict(
            zip(("beta_igl", "beta_fedavg", "beta", "rho", "lam"), map(float, params), strict=True)
        ),
        "table": table,
        "privacy": privacy,
        "curves": [],
    }
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "summary.json", summary)
    write_csv(
        out / "curves.csv",
        [{"experiment": "graphlearn-digits", "method": k, **v} for k, v in table.items()],
    )
    _figures(graphs, table, out)
    return summary


def _figures(graphs: dict[str, np.ndarray], table: dict[str, dict[str, float]], out: Path) -> None:
    from pgfl.graphlearn.plots import _plt, plot_bars  # lazy: matplotlib, only to draw
    from pgfl.plots import save_figure

    names = list(table)
    plot_bars(
        {m: [table[n][m] for n in names] for m in ("nmi", "ri", "fmi")},
        names,
        out / "digits_scores.png",
        title="Louvain communities vs classes (Table II layout)",
        ylabel="score",
    )
    plt = _plt()
    show = ["igl_c1", "fedavg", "fedgl", "fedgl_dp@0.5"]
    fig, axes = plt.subplots(1, len(show), figsize=(3.2 * len(show), 3.3))
    for ax, n in zip(axes, show, strict=True):
        W = vec_to_mat(np.where(edge_support(graphs[n]), graphs[n], 0.0))
        ax.imshow(W, cmap="Greys")
        ax.set_title(n, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("Learned graphs (nodes ordered by class, 12 per class)", fontsize=9)
    fig.tight_layout()
    save_figure(fig, out / "digits_graphs.png", dpi=120)
