"""Figures of the graph-learning presets, drawn from the result data (Agg backend)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pgfl.graphlearn.metrics import DEFAULT_THRESHOLD, edge_support

__all__ = [
    "curves_figure",
    "plot_bars",
    "plot_convergence",
    "plot_curves",
    "plot_learned_graphs",
    "spans_decades",
]

_STYLE = {
    "igl": ("IGL", "tab:gray", "s"),
    "fedavg": ("FedAvg", "tab:orange", "^"),
    "fedgl_local": ("FedGL-Local", "tab:blue", "o"),
    "fedgl_consensus": ("FedGL-Common", "tab:red", "D"),
}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style(label: str, curve: Mapping[str, Any], dp_rank: float = 1.0):
    """(legend name, colour, marker) of a method; DP variants are shades of one colour map.

    ``dp_rank`` in [0, 1] is the curve's place among the DP curves by ``ε̄`` (darker =
    larger ``ε̄``, i.e. less noise).
    """
    if label in _STYLE:
        return _STYLE[label]
    if label.startswith("fedgl_local_dp"):
        if curve.get("mechanism") == "statistic":
            color = _plt().get_cmap("Greens")(0.45 + 0.5 * dp_rank)
            return (f"FedGL-DP noisy z̄ ε̄={curve.get('epsilon')}", color, "s")
        color = _plt().get_cmap("Purples")(0.45 + 0.5 * dp_rank)
        return (f"FedGL-DP last step ε̄={curve.get('epsilon')}", color, "x")
    return (label, None, ".")


def _dp_ranks(curves: Sequence[Mapping[str, Any]]) -> list[float]:
    """Each curve's rank in [0, 1] among the DP curves by ``ε̄`` (1.0 for the others)."""
    eps = sorted({float(c["epsilon"]) for c in curves if "epsilon" in c})
    return [
        eps.index(float(c["epsilon"])) / max(1, len(eps) - 1) if "epsilon" in c else 1.0
        for c in curves
    ]


def spans_decades(x: Sequence[float], decades: float = 1.0) -> bool:
    """Whether positive values ``x`` span at least ``decades`` decades (then a log axis).

    Example:
        >>> spans_decades([10, 20, 100]), spans_decades([20, 50, 100]), spans_decades([0, 10, 100])
        (True, False, False)

    """
    v = np.asarray(x, dtype=float)
    return bool(v.size and np.all(v > 0) and np.log10(v.max() / v.min()) >= decades - 1e-12)


def curves_figure(
    curves: Sequence[Mapping[str, Any]], *, xlabel: str, title: str, logx: bool | None = None
):
    """MCC and relative error against the swept value, one line per method (a Figure).

    One legend for both panels, below them, so that it hides no point. ``logx=None`` puts
    the swept value on a log axis when it spans at least a decade (:func:`spans_decades`).
    """
    plt = _plt()
    if logx is None:
        logx = spans_decades([x for c in curves for x in c["x"]])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
    for c, rank in zip(curves, _dp_ranks(curves), strict=True):
        name, color, marker = _style(c["label"], c, rank)
        ls = "--" if c["label"].startswith("fedgl_local_dp") else "-"
        for ax, key in zip(axes, ("mcc", "relative_error"), strict=True):
            ax.plot(c["x"], c[key], marker=marker, color=color, ls=ls, label=name)
    ticks = sorted({float(x) for c in curves for x in c["x"]})
    for ax, key in zip(axes, ("MCC", "relative error"), strict=True):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
        if logx:
            ax.set_xscale("log")
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)), fontsize=8)
    fig.suptitle(title)
    return fig


def plot_curves(
    curves: Sequence[Mapping[str, Any]],
    path: Path,
    *,
    xlabel: str,
    title: str,
    logx: bool | None = None,
) -> None:
    """Save :func:`curves_figure` to ``path``."""
    plt = _plt()
    fig = curves_figure(curves, xlabel=xlabel, title=title, logx=logx)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_convergence(series: Mapping[str, np.ndarray], path: Path, *, title: str) -> None:
    """Objective of eq. 8 per round (mean over repetitions), with and without DP."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for name, v in series.items():
        ax.plot(np.arange(len(v)), v, marker="o", label=name)
    ax.set_xlabel("round t")
    ax.set_ylabel("objective of eq. 8")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_bars(
    table: Mapping[str, Sequence[float]],
    groups: Sequence[str],
    path: Path,
    *,
    title: str,
    ylabel: str,
) -> None:
    """Grouped bars: ``table[series][g]`` for each group ``g``."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(groups) * max(1, len(table)) / 2), 3.6))
    n = len(table)
    width = 0.8 / max(n, 1)
    xs = np.arange(len(groups))
    for k, (name, vals) in enumerate(table.items()):
        ax.bar(xs + (k - (n - 1) / 2) * width, vals, width, label=name)
    ax.set_xticks(xs)
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_learned_graphs(
    positions: np.ndarray,
    truth_client: np.ndarray,
    truth_consensus: np.ndarray,
    learned: Mapping[str, np.ndarray],
    path: Path,
    *,
    title: str,
    threshold: float = DEFAULT_THRESHOLD,
) -> None:
    """Fig. 4 style: one client's graphs; red = consensus edges, blue = client-specific edges.

    Edges are coloured by what they are in the ground truth: red if the edge belongs to
    the true consensus graph, blue if it is specific to this client, light gray dashed if
    it is not in the client's true graph (a false edge). The ground-truth panel comes first.
    """
    plt = _plt()
    panels = {"ground truth": truth_client, **learned}
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.4))
    d = positions.shape[0]
    rows, cols = np.triu_indices(d, 1)
    con = truth_consensus > 0
    own = truth_client > 0
    for ax, (name, w) in zip(np.atleast_1d(axes), panels.items(), strict=True):
        sup = w > 0 if name == "ground truth" else edge_support(w, threshold)
        top = max(float(np.max(w)), 1e-12)
        for e in np.flatnonzero(sup):
            a, b = rows[e], cols[e]
            color, ls = (
                ("tab:red", "-") if con[e] else (("tab:blue", "-") if own[e] else ("0.6", "--"))
            )
            ax.plot(
                positions[[a, b], 0],
                positions[[a, b], 1],
                color=color,
                ls=ls,
                lw=0.4 + 2.0 * w[e] / top,
            )
        ax.scatter(positions[:, 0], positions[:, 1], s=18, c="k", zorder=3)
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_aspect("equal")
    fig.suptitle(
        title + "  (red: consensus edges, blue: client-specific, gray dashed: false)", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
