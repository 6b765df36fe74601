"""Figures of the graph-learning presets, drawn from the result data (Agg backend).

Curves are named by their ``summary.json`` labels (``igl``, ``fedavg``, ``fedgl_local``,
``fedgl_consensus``, ``fedgl_local_dp``, ``fedgl_local_dp_statistic``), as the printed
summary table names them, and drawn in the project's styles (:mod:`pgfl.style`): the
non-private methods in black and grey, the DP variants in their privacy scheme's colour.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from pgfl.graphlearn.metrics import DEFAULT_THRESHOLD, edge_support
from pgfl.plots import (
    ALPHA_RANGE,
    RC,
    Coincidences,
    PlotCurve,
    draw_curves,
    legend_handles,
    readable,
    save_figure,
)
from pgfl.style import CurveStyle, method_style

__all__ = [
    "convergence_figure",
    "curves_figure",
    "display_name",
    "learned_graphs_figure",
    "plot_bars",
    "plot_convergence",
    "plot_curves",
    "plot_learned_graphs",
    "spans_decades",
]


def _plt():
    import matplotlib  # lazy: matplotlib, only to draw

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: once the Agg backend is chosen

    return plt


def display_name(label: str, curve: Mapping[str, Any] | None = None) -> str:
    """A curve's name in figures: its ``summary.json`` label, as the printed table shows it.

    DP curves add their ``ε̄`` (the table prints it on its own line).

    Example:
        >>> display_name("fedgl_consensus"), display_name("fedgl_local_dp", {"epsilon": 0.3})
        ('fedgl_consensus', 'fedgl_local_dp ε̄=0.3')

    """
    if curve is not None and "epsilon" in curve:
        return f"{label} ε̄={curve['epsilon']:g}"
    return label


def _style(label: str, curve: Mapping[str, Any], dp_rank: float = 1.0) -> CurveStyle:
    """A method's style (:func:`pgfl.style.method_style`); a DP curve's opacity grows with ε̄.

    ``dp_rank`` in [0, 1] is the curve's place among the DP curves by ``ε̄`` (opaque =
    larger ``ε̄``, i.e. less noise).
    """
    style = method_style(label, curve.get("mechanism"))
    if "epsilon" in curve:
        lo, hi = ALPHA_RANGE
        style = replace(style, alpha=lo + (hi - lo) * dp_rank)
    return style


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


@readable
def curves_figure(
    curves: Sequence[Mapping[str, Any]], *, xlabel: str, title: str, logx: bool | None = None
):
    """MCC and relative error against the swept value, one line per method (a Figure).

    ``curves`` are ``summary.json``'s (``label``, ``x``, ``mcc``, ``relative_error``, and
    ``epsilon``/``mechanism`` for DP curves). Each method in its style
    (:func:`pgfl.style.method_style`: non-private methods black and grey, DP curves in
    their privacy scheme's colour, more opaque for larger ``ε̄``), named by its label as in
    the summary table (:func:`display_name`). One legend for both panels, below them, so
    that it hides no point; curves that coincide stay visible and say so. ``logx=None``
    puts the swept value on a log axis when it spans at least a decade
    (:func:`spans_decades`).
    """
    plt = _plt()
    if logx is None:
        logx = spans_decades([x for c in curves for x in c["x"]])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), layout="constrained")
    seen = Coincidences()
    for ax, key in zip(axes, ("mcc", "relative_error"), strict=True):
        items = [
            PlotCurve(display_name(c["label"], c), display_name(c["label"], c),
                      np.asarray(c["x"], dtype=float), np.asarray(c[key], dtype=float),
                      _style(c["label"], c, rank))
            for c, rank in zip(curves, _dp_ranks(curves), strict=True)
        ]  # fmt: skip
        seen.add(key.replace("_", " "), items, draw_curves(ax, items, sparse=False))
    ticks = sorted({float(x) for c in curves for x in c["x"]})
    for ax, key in zip(axes, ("MCC", "relative error"), strict=True):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
        if logx:
            ax.set_xscale("log")
        if logx or len(ticks) <= 12:  # the swept values themselves (clients 1..5, not 1.5)
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
    handles, labels = legend_handles([ln for ax in axes for ln in ax.lines])
    labels = [seen.label(h.get_gid(), t) for h, t in zip(handles, labels, strict=True)]
    fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)))
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
    """Save :func:`curves_figure` of ``summary.json``'s curves to ``path``."""
    fig = curves_figure(curves, xlabel=xlabel, title=title, logx=logx)
    save_figure(fig, path, dpi=120)


@readable
def convergence_figure(series: Mapping[str, np.ndarray], *, title: str):
    """The objective of eq. 8 per round (mean over repetitions), with and without DP.

    ``series`` is ``summary.json``'s ``convergence_at_n_100`` (``fedgl``,
    ``fedgl_dp@ε̄``, ``fedgl_dp_statistic@ε̄``), drawn under those names. The first round
    (the objective of the initial graphs) is far above the rest, so the y axis is
    symmetric-logarithmic.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9.6, 4.6), layout="constrained")
    eps = sorted({float(k.split("@")[1]) for k in series if "@" in k})
    items = []
    for name, v in series.items():
        curve: dict[str, Any] = {}
        if "@" in name:
            curve["epsilon"] = float(name.split("@")[1])
            curve["mechanism"] = "statistic" if "statistic" in name else "last_step"
        rank = eps.index(curve["epsilon"]) / max(1, len(eps) - 1) if curve else 1.0
        v = np.asarray(v, dtype=float)
        items.append(PlotCurve(name, name, np.arange(len(v)), v, _style(name, curve, rank)))
    seen = Coincidences()
    seen.add("objective", items, draw_curves(ax, items, sparse=False))
    ax.set_xlabel("round t")
    ax.set_ylabel("objective of eq. 8")
    values = np.concatenate([np.asarray(v, dtype=float).ravel() for v in series.values()])
    finite = np.abs(values[np.isfinite(values)])
    if finite.size and finite.max() > 20 * max(np.median(finite), 1e-12):
        ax.set_yscale("symlog", linthresh=max(float(np.median(finite)), 1e-12))
    ax.grid(alpha=0.3)
    handles, labels = legend_handles(ax.lines)
    labels = [seen.label(h.get_gid(), t) for h, t in zip(handles, labels, strict=True)]
    fig.legend(handles, labels, loc="outside right center")
    ax.set_title(title)
    return fig


def plot_convergence(series: Mapping[str, np.ndarray], path: Path, *, title: str) -> None:
    """Save :func:`convergence_figure` (objective of eq. 8 per round) to ``path``."""
    fig = convergence_figure(series, title=title)
    save_figure(fig, path, dpi=120)


#: Bars are series of values, not privacy schemes: greys and hatches, no scheme colour.
_BAR_FACES = ("#444444", "#9A9A9A", "#E0E0E0", "#6E6E6E", "#C4C4C4")
_BAR_HATCHES = ("", "//", "..", "xx", "\\\\")


def plot_bars(
    table: Mapping[str, Sequence[float]],
    groups: Sequence[str],
    path: Path,
    *,
    title: str,
    ylabel: str,
) -> None:
    """Grouped bars: ``table[series][g]`` for each group ``g`` (greys, one hatch per series).

    Drawn from ``summary.json`` tables (``gamma_table``, the digits ``table``); the group
    names are the summary's keys.
    """
    plt = _plt()
    with plt.rc_context(RC):
        n = len(table)
        fig, ax = plt.subplots(
            figsize=(max(6.0, 0.45 * len(groups) * max(1, n) + 2.0), 4.2), layout="constrained"
        )
        width = 0.8 / max(n, 1)
        xs = np.arange(len(groups))
        for k, (name, vals) in enumerate(table.items()):
            ax.bar(
                xs + (k - (n - 1) / 2) * width, vals, width, label=name,
                color=_BAR_FACES[k % len(_BAR_FACES)], edgecolor="black", linewidth=0.6,
                hatch=_BAR_HATCHES[k % len(_BAR_HATCHES)],
            )  # fmt: skip
        ax.set_xticks(xs)
        ax.set_xticklabels(groups)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
        fig.legend(loc="outside lower center", ncol=min(n, 4))
        fig.suptitle(title)
        save_figure(fig, path, dpi=120)


@readable
def learned_graphs_figure(
    positions: np.ndarray,
    truth_client: np.ndarray,
    truth_consensus: np.ndarray,
    learned: Mapping[str, np.ndarray],
    *,
    title: str,
    threshold: float = DEFAULT_THRESHOLD,
):
    """Fig. 4 style: one client's graphs; red = consensus edges, blue = client-specific edges.

    Edges are coloured by what they are in the ground truth: red if the edge belongs to
    the true consensus graph, blue if it is specific to this client, light gray dashed if
    it is not in the client's true graph (a false edge). The ground-truth panel comes first;
    the others are titled by ``learned``'s keys (the summary's labels: ``igl``, ``fedavg``,
    ``fedgl_local``, ``fedgl_consensus``). A legend below the panels names the edge kinds.
    """
    plt = _plt()
    from matplotlib.lines import Line2D  # lazy: matplotlib, only to draw

    panels = {"ground truth": truth_client, **learned}
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 4.0), layout="constrained")
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
        ax.set_title(name)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_aspect("equal")
    kinds = [
        Line2D([], [], color="tab:red", lw=2, label="consensus edge"),
        Line2D([], [], color="tab:blue", lw=2, label="client-specific edge"),
        Line2D([], [], color="0.6", ls="--", lw=1.5, label="false edge (not in the truth)"),
    ]
    fig.legend(handles=kinds, loc="outside lower center", ncol=3)
    fig.suptitle(f"{title}: one client's graphs (line width: edge weight)")
    return fig


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
    """Save :func:`learned_graphs_figure` to ``path``."""
    fig = learned_graphs_figure(
        positions, truth_client, truth_consensus, learned, title=title, threshold=threshold
    )
    save_figure(fig, path, dpi=120)
