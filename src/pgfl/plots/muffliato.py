"""``muffliato.png`` of ``pgfl reproduce muffliato`` (:func:`plot_muffliato`).

ε_{u→v} by graph distance.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgfl.plots.base import _plt, _suptitle, readable, save_figure
from pgfl.style import SCHEMES

if TYPE_CHECKING:
    from matplotlib.figure import Figure


# --- muffliato.png ---------------------------------------------------------------------------


@readable
def muffliato_figure(summary: Mapping[str, Any]) -> Figure:
    """ε_{u→v} against the graph distance: exact view vs Muffliato's per-message sum.

    One row per number of gossip steps K, one column per graph, all in the gossip scheme's
    colour: the exact view's worst pair at each distance (solid; the same for plain and
    Chebyshev gossip, whose polynomials span the same space) and its mean over pairs
    (solid, light), the paper's sum's worst pair for plain (dashed) and Chebyshev (dash-dot)
    gossip; local DP (ε of one release of ψ + η) is the dotted black line.
    """
    plt = _plt()
    from matplotlib.lines import Line2D  # lazy: matplotlib, only to draw

    graphs, steps = list(summary["graphs"]), list(summary["steps"])
    fig, axes = plt.subplots(len(steps), len(graphs), figsize=(4.3 * len(graphs),
                             2.9 * len(steps) + 1.2), sharey=True, squeeze=False,
                             layout="constrained")  # fmt: skip
    color, marker = SCHEMES["gossip"].color, SCHEMES["gossip"].marker
    lines = (  # (view, kind, statistic, line style, opacity, marker face, legend)
        ("exact", "plain", "max", "-", 1.0, color, "exact view, worst pair"),
        ("exact", "plain", "mean", "-", 0.35, color, "exact view, mean over pairs"),
        ("sum", "plain", "max", "--", 1.0, "white", "Muffliato's sum, plain gossip, worst pair"),
        ("sum", "chebyshev", "max", "-.", 1.0, "white",
         "Muffliato's sum, Chebyshev gossip, worst pair"),
    )  # fmt: skip
    by = {(p["graph"], p["kind"], p["steps"], p["view"]): p for p in summary["profiles"]}
    for (row, k), (col, graph) in itertools.product(enumerate(steps), enumerate(graphs)):
        ax = axes[row][col]
        ax.axhline(summary["local_dp_epsilon"], color="black", ls=":", lw=1.2)
        for view, kind, stat, ls, alpha, face, _ in lines:
            p = by[(graph, kind, k, view)]
            ax.plot(p["distance"], p[stat], color=color, ls=ls, lw=1.7, alpha=alpha,
                    marker=marker, markersize=6, markerfacecolor=face)  # fmt: skip
        ax.set_title(f"{graph} (P = {summary['graphs'][graph]['P']}), K = {k}")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(True, alpha=0.3)
        if row == len(steps) - 1:
            ax.set_xlabel("graph distance d(u, v)")
        if col == 0:
            ax.set_ylabel("ε_{u→v}")
    handles = [Line2D([], [], color=color, ls=ls, alpha=alpha, marker=marker,
                      markerfacecolor=face, label=label)
               for _, _, _, ls, alpha, face, label in lines]  # fmt: skip
    handles.append(Line2D([], [], color="black", ls=":", label="local DP (one release of ψ + η)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=3, framealpha=0.9)
    _suptitle(
        fig,
        summary["title"],
        f"one averaging (T = 1), δ = {summary['delta']:g}, "
        f"σ = {summary['sigma']:.3g}: local DP has ε = {summary['local_dp_epsilon']:g}",
    )
    return fig


def plot_muffliato(summary: Mapping[str, Any], path: str | Path, *, dpi: int = 100) -> Path:
    """Write :func:`muffliato_figure` to ``path``; returns the path."""
    return save_figure(muffliato_figure(summary), path, dpi=dpi)
