"""Privacy figures.

ε(i) per curve or accountant (:func:`plot_epsilon_curves`); an audit's attack against the
accountants' trade-off curves (:func:`plot_audit_tradeoff`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pgfl.plots.base import (
    Coincidences,
    PlotCurve,
    _plt,
    _suptitle,
    _wrap,
    draw_curves,
    legend_handles,
    readable,
    save_figure,
)
from pgfl.style import curve_style

if TYPE_CHECKING:
    from matplotlib.figure import Figure


# --- privacy figures -------------------------------------------------------------------------


@readable
def epsilon_figure(curves: Mapping[str, np.ndarray], *, title: str) -> Figure:
    """ε(i) per curve against the iteration i on a log axis (a Figure).

    ``curves`` maps a name (a curve label, styled by its scheme, or an accountant) to
    ε(1), …, ε(T). Values that are not finite and positive are not drawn; a curve with
    none is named in the legend as not drawn. Curves that coincide stay visible and say so.
    """
    plt = _plt()
    from matplotlib.lines import Line2D  # lazy: matplotlib, only to draw

    fig, ax = plt.subplots(figsize=(7.6, 4.6), layout="constrained")
    items, missing, taken = [], [], []
    for name, values in curves.items():
        v = np.asarray(values, dtype=float)
        v = np.where(np.isfinite(v) & (v > 0), v, np.nan)
        if not np.isfinite(v).any():
            missing.append(name)
            continue
        style = curve_style(label=name, taken=taken)
        if not style.scheme:
            taken.append(style.color)
        items.append(PlotCurve(name, name, np.arange(1, v.size + 1), v, style))
    seen = Coincidences()
    seen.add("ε", items, draw_curves(ax, items, log=True))
    for line in ax.lines:
        line.set_label(seen.label(line.get_gid(), line.get_label()))
    ax.set_xlabel("iteration i")
    ax.set_ylabel("ε(i)")
    ax.set_yscale("log")
    _suptitle(fig, title)
    ax.grid(True, which="both", alpha=0.3)
    handles, labels = legend_handles(ax.lines)
    labels = [_wrap(t, 40) for t in labels]
    for name in missing:
        handles.append(Line2D([], [], ls="none"))
        labels.append(f"{name}: ε = ∞ (not drawn)")
    if len(handles) <= 6:  # ε(i) grows: the lower right corner is free
        ax.legend(handles, labels, loc="lower right", framealpha=0.9)
    else:
        fig.legend(handles, labels, loc="outside right center")
    return fig


def plot_epsilon_curves(
    curves: Mapping[str, np.ndarray], path: str | Path, *, title: str, dpi: int = 120
) -> Path:
    """Write :func:`epsilon_figure` (ε(i) per curve, log y) to ``path``.

    For ``pgfl privacy epsilon --plot`` (one curve per accountant) and ``pgfl privacy
    config --plot`` (the tight accountant's ε(i) per privatized curve of a config).
    The format is the path's suffix (PNG without one). Returns the path.
    """
    return save_figure(epsilon_figure(curves, title=title), path, dpi=dpi)


@readable
def audit_figure(result: Any) -> Figure:
    """An audit's attack against the trade-off curves its ε claims imply (a Figure).

    ``result`` is a :class:`pgfl.apps.audit.AuditResult`: for each accountant with a
    finite ε, the f-DP trade-off curve of (ε, δ)
    (:func:`~pgfl.privacy.accounting.mechanisms.tradeoff_curve`); the attack's (FPR, FNR)
    points on the evaluation half; the chosen test with its ε lower bound; random
    guessing. A point below an accountant's curve refutes that accountant's ε.
    """
    plt = _plt()
    from pgfl.privacy.accounting.mechanisms import tradeoff_curve  # lazy: dp_accounting

    fig, ax = plt.subplots(figsize=(6.0, 5.6), layout="constrained")
    alpha = np.linspace(0.0, 1.0, 401)
    items, taken = [], []
    for name, eps in result.epsilon.items():
        if math.isfinite(eps):
            style = curve_style(label=name, taken=taken)
            taken.append(style.color)
            f = tradeoff_curve(eps, result.delta, alpha)
            items.append(PlotCurve(name, f"{name}: ε={eps:.3g}", alpha, f, style, ref=name))
    seen = Coincidences()
    seen.add("trade-off", items, draw_curves(ax, items))
    for line in ax.lines:
        line.set_label(seen.label(line.get_gid(), line.get_label()))
    fpr, tpr = result.roc
    ax.plot(fpr, 1.0 - np.asarray(tpr), "k.", ms=3, label="attack (evaluation half)")
    chosen = f"chosen test: ε ≥ {result.epsilon_lower:.3g}"
    ax.plot([result.fpr], [1.0 - result.tpr], "*", ms=15, mfc="#F0E442", mec="black", label=chosen)
    ax.plot(alpha, 1.0 - alpha, ":", color="0.5", lw=1.0, label="random guess")
    ax.set_xlabel("type I error (false positive rate)")
    ax.set_ylabel("type II error (false negative rate)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    state = "protected" if result.protected else "NOT protected"
    relation = getattr(result, "neighbours", None)  # of the canary and of the ε compared
    relation = f", {relation}-level neighbours" if relation else ""
    ax.set_title(
        f"audit: {result.curve}, {result.view} view, round {result.round}{relation} ({state})"
    )
    ax.legend(loc="upper right", framealpha=0.9)
    ax.grid(True, alpha=0.3)
    return fig


def plot_audit_tradeoff(result: Any, path: str | Path, *, dpi: int = 110) -> Path:
    """Write :func:`audit_figure` of an audit result to ``path`` (``pgfl privacy audit --plot``).

    The format is the path's suffix (PNG without one). Returns the path.
    """
    return save_figure(audit_figure(result), path, dpi=dpi)
