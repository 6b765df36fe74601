"""``frontier.png`` of the privacy–utility frontier (:func:`plot_frontier`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pgfl.plots.base import (
    _SHORT,
    Coincidences,
    PlotCurve,
    _plt,
    _suptitle,
    _wrap,
    draw_curves,
    readable,
    save_figure,
)
from pgfl.style import CurveStyle, curve_style

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


# --- frontier.png ----------------------------------------------------------------------------

_FRONTIER_METRICS = (
    ("centroid_msd_db", "centroid MSD (dB)"),
    ("individual_msd_db", "average individual MSD (dB)"),
    ("test_error", "test error of the centroid"),
)


def _frontier_style(c: Mapping[str, Any]) -> CurveStyle:
    """A frontier line's style from its scheme label (``client_gaussian_updates``, ...)."""
    return curve_style(label=c["label"])


@readable
def frontier_figure(summary: Mapping[str, Any]) -> Figure:
    """The privacy–utility frontier (``frontier.png``) from the frontier's ``summary.json``.

    One row per (set-up, T), one panel per metric the set-up has (centroid and individual
    MSD; test error for the logistic set-up): no empty panel. A line per scheme in its
    style (:mod:`pgfl.style`) against the target ε; the non-private run is a dashed grey
    line; points where a run diverged are ``x`` on the top edge. Panels of one set-up and
    metric share their y axis, so T and T/10 compare directly. One legend right of the
    panels says what each scheme's ε protects; lines that coincide (hybrid and
    graph-homomorphic noise at equal ε, client noise on models and on updates in the
    regression set-up) stay visible and the legend says where they coincide.
    """
    if len({x for c in summary["curves"] for x in c["x"]}) == 1:
        return frontier_bars(summary)  # one ε: markers at one x would stack
    plt = _plt()
    panels = _frontier_panels(summary)
    runs = list(panels)
    counts = sorted({len(p) for p in panels.values() if p})
    span = math.lcm(*counts) if counts else 1
    ncols = max(counts) if counts else 1
    fig = plt.figure(figsize=(4.3 * ncols + 1.0, 3.0 * len(runs) + 3.6), layout="constrained")
    grid = fig.add_gridspec(len(runs), span)
    share: dict[tuple[str, str], Any] = {}
    order = list(dict.fromkeys(c["label"] for c in summary["curves"]))
    legend = {c["label"]: c.get("legend", c["label"]) for c in summary["curves"]}
    seen = Coincidences(lambda ps: _compact(ps, panels))
    diverged = False
    delta = summary.get("delta", 0.0)
    for r, run in enumerate(runs):
        setup, T = run
        base = next(
            (b for b in summary.get("baselines", []) if (b["setup"], b["iterations"]) == run), {}
        )
        width = span // max(1, len(panels[run]))
        for k, (metric, title) in enumerate(panels[run]):
            ax = fig.add_subplot(grid[r, k * width : (k + 1) * width],
                                 sharey=share.get((setup, metric)))  # fmt: skip
            share.setdefault((setup, metric), ax)
            items, top = [], []
            for c in summary["curves"]:
                if (c["setup"], c["iterations"]) != run or metric not in c:
                    continue
                ys = np.array([math.nan if v is None else float(v) for v in c[metric]])
                items.append(PlotCurve(c["label"], legend[c["label"]], np.array(c["x"]), ys,
                                    _frontier_style(c), ref=c["label"]))  # fmt: skip
                top += [x for x, y in zip(c["x"], ys, strict=True) if math.isnan(y)]
            seen.add((setup, T, metric), items, draw_curves(ax, items, sparse=False))
            if base.get(metric) is not None:
                ax.axhline(base[metric], color="0.45", ls="--", lw=1.2, zorder=1)
                ax.lines[-1].set_gid("none")
            if top:  # on the top edge, wherever the shared y axis ends
                ax.plot(top, [1.0] * len(top), "kx", ms=7, clip_on=False, gid="diverged",
                        transform=ax.get_xaxis_transform())  # fmt: skip
                diverged = True
            _epsilon_ticks(ax, sorted({x for c in summary["curves"] for x in c["x"]}))
            ax.set_title(f"{setup}, T={T}: {title.split(' (')[0]}")
            ax.set_ylabel(title)
            ax.grid(True, which="both", alpha=0.3)
            if r == len(runs) - 1 or not any(len(panels[q]) > k for q in runs[r + 1 :]):
                ax.set_xlabel(f"target ε (δ={delta:g}, {summary.get('accountant', '')})")
    handles, labels = _frontier_legend(order, legend, seen, diverged)
    fig.legend(handles, labels, loc="outside lower center", ncols=2)  # clear of the title
    _suptitle(fig, *_frontier_heading(summary), width=4.3 * ncols + 1.0)
    return fig


def _frontier_heading(summary: Mapping[str, Any]) -> tuple[str, str]:
    """The frontier figure's title and caption (against one adversary, or every scheme's own).

    A tuned frontier says so in the title: each scheme at its best point for one metric.
    """
    title, caption = _frontier_scope(summary)
    tuning = summary.get("tuning")
    if tuning:
        title += (f"; each scheme at its best {tuning['metric']} point "
                  f"(tuned on the {tuning['on']} data)")  # fmt: skip
    return title, caption


def _frontier_scope(summary: Mapping[str, Any]) -> tuple[str, str]:
    """The frontier figure's untuned title and caption."""
    adversaries = summary.get("adversaries") or {}
    if len(adversaries) == 1:  # the frontier against one adversary: one guarantee
        ((name, sees),) = adversaries.items()
        return f"Privacy-utility frontier against {name.replace('_', ' ')}", (
            f"every scheme that protects against it, its noise calibrated to what it observes "
            f"({sees}), with amplification by client sampling where the adversary does not "
            "know the sample; record-level neighbours"
        )
    return "Privacy-utility frontier: every scheme's noise calibrated to the target ε", (
        "ε of different scopes are different guarantees: client level protects a client "
        "against its own server; server level protects a unit's data against the other "
        "servers; graph-homomorphic noise does not protect the centroid."
    )


def _frontier_panels(summary: Mapping[str, Any]) -> dict[tuple[str, int], list[tuple[str, str]]]:
    """``(setup, T) → [(metric, axis title)]`` in figure order: the metrics it has values of."""
    setups = list(summary.get("setups") or [])
    runs = sorted(
        {(c["setup"], c["iterations"]) for c in summary["curves"]},
        key=lambda r: (setups.index(r[0]) if r[0] in setups else len(setups), r[0], -r[1]),
    )
    return {
        run: [
            (m, title)
            for m, title in _FRONTIER_METRICS
            if any(
                (c["setup"], c["iterations"]) == run and any(v is not None for v in c.get(m) or [])
                for c in summary["curves"]
            )
        ]
        for run in runs
    }


@readable
def frontier_bars(summary: Mapping[str, Any]) -> Figure:
    """The frontier at a single target ε: per (set-up, T) and metric, the schemes ranked.

    With one ε a line per scheme is one marker per scheme, all stacked at the same x; here
    each panel is a horizontal bar chart instead: a bar per scheme from the non-private
    value (dashed line) to its own, in its colour and with its marker (:mod:`pgfl.style`),
    in rank order (``<metric>_rank`` of :func:`pgfl.apps.frontier.rank_schemes`:
    ``#1`` on top). A scheme whose ε does not cover the metric's quantity
    (``<metric>_covered`` false) is hatched and hollow, labelled ``not protected`` and
    ranked after every scheme whose ε covers it. A run that diverged is named, not drawn.
    The legend and caption lie outside the panels.
    """
    plt = _plt()
    from matplotlib.lines import Line2D  # lazy: matplotlib, only to draw
    from matplotlib.patches import Patch

    panels = _frontier_panels(summary)
    ncols = max((len(p) for p in panels.values()), default=1)
    n = max(len({c["label"] for c in summary["curves"] if (c["setup"], c["iterations"]) == r})
            for r in panels)  # fmt: skip
    size = (5.6 * ncols + 2.4, (0.34 * n + 1.2) * len(panels) + 2.0)
    fig, axes = plt.subplots(len(panels), ncols, squeeze=False, layout="constrained", figsize=size)
    x = summary["curves"][0]["x"][0]
    for r, (run, metrics) in enumerate(panels.items()):
        base = next((b for b in summary.get("baselines", [])
                     if (b["setup"], b["iterations"]) == run), {})  # fmt: skip
        for k in range(ncols):
            if k >= len(metrics):
                axes[r, k].set_visible(False)
                continue
            metric, title = metrics[k]
            curves = [c for c in summary["curves"] if (c["setup"], c["iterations"]) == run]
            _bars(axes[r, k], curves, metric, base.get(metric))
            axes[r, k].set_title(f"{run[0]}, T={run[1]}: {title.split(' (')[0]}")
            axes[r, k].set_xlabel(title)
    handles = [
        Patch(facecolor="0.55", edgecolor="0.3", label="ε covers the quantity (#1 = best)"),
        Patch(facecolor="none", edgecolor="0.3", hatch="///",
              label="not protected: ε does not cover the quantity (ranked last)"),
        Line2D([], [], color="0.45", ls="--", lw=1.2, label="no privacy (reference)"),
    ]  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    heading, caption = _frontier_heading(summary)
    accountant = f"δ = {summary.get('delta', 0.0):g}, {summary.get('accountant', '')}"
    _suptitle(fig, f"{heading} (ε = {x:g}, {accountant})", caption, width=5.6 * ncols + 2.4)
    return fig


def _bars(ax: Axes, curves: Sequence[Mapping[str, Any]], metric: str, base: float | None) -> None:
    """One panel of :func:`frontier_bars`: a bar per scheme, rank 1 on top."""
    curves = sorted(curves, key=lambda c: (c.get(f"{metric}_rank") or [0])[0] or 0)
    finite = [c[metric][0] for c in curves if c[metric][0] is not None]
    origin = base if base is not None else min([0.0, *finite])
    names = []
    for y, c in enumerate(curves):
        style = curve_style(label=c["label"])
        covered = c.get(f"{metric}_covered", True)
        rank = (c.get(f"{metric}_rank") or [None])[0]
        names.append(f"#{rank} {c['label']}" if rank is not None else c["label"])
        if not covered:
            names[-1] += " (not protected)"
        v = c[metric][0]
        if v is None:
            ax.text(origin, y, "  diverged", va="center", ha="left")
            continue
        ax.barh(y, v - origin, left=origin, height=0.62, color=style.color if covered else "none",
                edgecolor=style.color, hatch=None if covered else "///", lw=1.2,
                alpha=0.85 if covered else 1.0, gid=c["label"])  # fmt: skip
        face = style.color if covered else "white"
        ax.plot([v], [y], ls="none", marker=style.marker, ms=8, color=style.color, mfc=face,
                mec=style.color, gid=c["label"])  # fmt: skip
        text = f"{v:.1f}" if metric.endswith("_db") else f"{v:.3g}"
        ax.annotate(text, (v, y), xytext=(7, 0), textcoords="offset points", va="center")
    if base is not None:
        ax.axvline(base, color="0.45", ls="--", lw=1.2, zorder=1)
    lo, hi = min([origin, *finite]), max([origin, *finite])
    ax.set_xlim(lo - 0.04 * (hi - lo or 1.0), hi + 0.16 * (hi - lo or 1.0))  # room for values
    ax.set_yticks(range(len(curves)), names)
    ax.set_ylim(len(curves) - 0.4, -0.6)  # rank 1 on top
    ax.grid(True, axis="x", alpha=0.3)


def _epsilon_ticks(ax: Axes, values: Sequence[float]) -> None:
    """A log ε axis labelled at every target ε (0.5, 1, 2, 5, ...), not only at the decades."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # lazy: matplotlib

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(list(values)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())


def _frontier_legend(order, legend, seen: Coincidences, diverged: bool):
    """Proxy handles in each scheme's own style, names wrapped, coincidence notes added."""
    from matplotlib.lines import Line2D  # lazy: matplotlib, only to draw

    handles, labels = [], []
    for name in order:
        style = curve_style(label=name)
        handles.append(Line2D([], [], **style.kwargs()))
        labels.append(_wrap(seen.label(name, legend[name]), 46))
    handles.append(Line2D([], [], color="0.45", ls="--", lw=1.2))
    labels.append("no privacy (reference)")
    if diverged:
        handles.append(Line2D([], [], color="k", marker="x", ls="none", ms=7))
        labels.append("diverged (model entry > 1e6)")
    return handles, labels


def _compact(panels: Sequence[tuple[str, int, str]], layout: Mapping[Any, Any]) -> list[str]:
    """Frontier panels ``(setup, T, metric)`` in words, whole rows and set-ups merged.

    ``layout`` maps each ``(setup, T)`` to its ``[(metric, title)]``.
    """
    have = set(panels)
    runs = list(dict.fromkeys((s, t) for s, t, _ in panels))
    full = {r for r in runs if all((*r, m) in have for m, _ in layout[r])}
    out = []
    for setup in dict.fromkeys(s for s, _ in runs):
        of_setup = [r for r in layout if r[0] == setup]
        if all(r in full for r in of_setup):
            out.append(setup)
            continue
        for r in (r for r in runs if r[0] == setup):
            if r in full:
                out.append(f"{setup} T={r[1]}")
            else:
                out += [f"{setup} T={r[1]} {_SHORT.get(m, m)}" for s, t, m in panels if (s, t) == r]
    return out


def plot_frontier(summary: Mapping[str, Any], path: str | Path, *, dpi: int = 90) -> Path:
    """Write :func:`frontier_figure` of the frontier's ``summary.json`` to ``path``.

    The summary is :func:`pgfl.apps.frontier.frontier_summary`'s (``curves`` with
    ``label`` = scheme, ``setup``, ``iterations``, ``x`` = target ε and the metrics;
    ``baselines``; ``delta``; ``accountant``; ``setups``). Returns the path.
    """
    return save_figure(frontier_figure(summary), path, dpi=dpi)
