"""Figures of the graph-learning presets, drawn from the result data (Agg backend)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pgfl.graphlearn.metrics import DEFAULT_THRESHOLD, edge_support

__all__ = ["plot_bars", "plot_convergence", "plot_curves", "plot_learned_graphs"]

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


def _style(label: str, curve: Mapping[str, Any]) -> tuple[str, str | None, str]:
    if label in _STYLE:
        return _STYLE[label]
    if label.startswith("fedgl_local_dp"):
        palette = ("tab:purple", "tab:green", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
        color = palette[int(round(10 * float(curve.get("epsilon", 0)))) % len(palette)]
        if curve.get("mechanism") == "statistic":
            return (f"FedGL-DP noisy z̄ ε̄={curve.get('epsilon')}", color, "s")
        return (f"FedGL-DP last step ε̄={curve.get('epsilon')}", color, "x")
    return (label, None, ".")


def plot_curves(
    curves: Sequence[Mapping[str, Any]], path: Path, *, xlabel: str, title: str, logx: bool = False
) -> None:
    """MCC and relative error against the swept value, one line per method."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for c in curves:
        name, color, marker = _style(c["label"], c)
        ls = "--" if c["label"].startswith("fedgl_local_dp") else "-"
        for ax, key in zip(axes, ("mcc", "relative_error"), strict=True):
            ax.plot(c["x"], c[key], marker=marker, color=color, ls=ls, label=name)
    for ax, key in zip(axes, ("MCC", "relative error"), strict=True):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
        if logx:
            ax.set_xscale("log")
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
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
