"""``figure.png`` as steady states, and against the population.

``figure = "steady"`` (:func:`steady_figure`), ``figure = "population"``
(:func:`population_figure`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pgfl.plots.base import _SHORT, _YLABEL, _base_label, _plt, _styles, _suptitle, _wrap, readable

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


# --- figure.png as steady states (figure = "steady") ------------------------------------------

#: Markers of the variants of a scheme in :func:`steady_figure` (by topology, else in order).
VARIANT_MARKERS = {"ring": "o", "grid": "s", "complete": "^", "torus": "D", "star": "*"}
_MORE_MARKERS = ("v", "P", "X", "h", "<", ">")


def _group_name(label: str, topologies: set[str]) -> str:
    """A group's tick label: its first curve's label less the words naming a topology."""
    base, _, rest = label.partition(" (")
    words = [w for w in rest.rstrip(")").split(", ") if w and w not in topologies]
    return f"{base} ({', '.join(words)})" if words else base


def _steady_panel(
    ax: Axes, metric: str, curves, styles, groups: list[list[int]], refs, marker
) -> None:
    """One panel of :func:`steady_figure`: ``metric``'s dots, values and reference lines."""
    top = []
    for g, idx in enumerate(groups):
        for k, i in enumerate(idx):
            c, x = curves[i], g + (k - (len(idx) - 1) / 2) * 0.3
            value = c.get(metric)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                top.append(x)
                continue
            shape = marker.get(c.get("topology"), styles[i].marker or "o")
            (dot,) = ax.plot([x], [value], ls="none", ms=9, color=styles[i].color,
                             marker=shape, markeredgecolor="black", markeredgewidth=0.6,
                             zorder=3)  # fmt: skip
            dot.set_gid(c["label"])
            beside = len(idx) == 1  # alone: its value to the right; else under each
            text = f"{value:.1f}" if metric.endswith("_db") else f"{value:.3g}"
            ax.annotate(text, (x, value),
                        xytext=(9, 0) if beside else (0, -9), textcoords="offset points",
                        va="center" if beside else "top", ha="left" if beside else "center",
                        fontsize=9)  # fmt: skip
    for i in refs:
        value = curves[i].get(metric)
        if isinstance(value, (int, float)) and math.isfinite(value):
            line = ax.axhline(value, color="black", ls="--", lw=1.2, zorder=1)
            line.set_gid(curves[i]["label"])
            ax.annotate(f"{curves[i]['label']}: {value:.1f}", (1.0, value), xytext=(-4, 4),
                        textcoords="offset points", xycoords=("axes fraction", "data"),
                        ha="right", fontsize=9)  # fmt: skip
    if top:
        ax.plot(top, [1.0] * len(top), "kx", ms=8, clip_on=False,
                transform=ax.get_xaxis_transform(), gid="diverged")  # fmt: skip
    ax.margins(y=0.12)  # room for the values under the lowest dots
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylabel(_YLABEL.get(metric, metric))
    ax.set_title(f"{_SHORT.get(metric, metric)} at the steady state")
    ax.grid(True, axis="y", alpha=0.3)


@readable
def _drawn_metrics(summary: Mapping[str, Any]) -> list[str]:
    """The ``plot`` metrics some curve of ``summary`` has a number for (default: centroid MSD)."""
    curves = summary["curves"]
    return [
        m
        for m in summary.get("plot") or ["centroid_msd_db"]
        if any(isinstance(c.get(m), (int, float)) for c in curves)
    ] or ["centroid_msd_db"]


def steady_figure(summary: Mapping[str, Any]) -> Figure:
    """The steady state of every curve as a dot, one panel per metric (``figure = "steady"``).

    Curves are grouped by their label before any parenthesis (``local``, ``local (grid)``,
    ``local (complete)``): one column per group, in the order of the curves, in the
    scheme's colour (:mod:`pgfl.style`); the curves of a group are told apart by their
    marker (the topology, when curves differ in it: ``summary.json``'s ``topology``) and
    stand side by side; each dot carries its value. The noise-free curve is a dashed line
    across the panel. A table of steady states, drawn: the comparison a dozen
    per-iteration panels spread out. Diverged curves are named on the top edge.
    """
    plt = _plt()
    from matplotlib.lines import Line2D  # lazy: matplotlib, only to draw

    curves = summary["curves"]
    metrics = _drawn_metrics(summary)
    styles = _styles(curves)
    refs = [i for i, s in enumerate(styles) if s.scheme == "none"]
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(curves):
        if i not in refs:
            groups.setdefault(_base_label(c["label"]), []).append(i)
    kinds = list(dict.fromkeys(c.get("topology") for c in curves if c.get("topology")))
    kinds = kinds if len(kinds) > 1 else []  # one graph: no marker per topology to explain
    extra = iter(_MORE_MARKERS)
    marker = {k: VARIANT_MARKERS.get(k) or next(extra, "o") for k in kinds}
    names = [_group_name(curves[idx[0]]["label"], set(kinds)) for idx in groups.values()]
    width = max(5.2, 1.05 * len(groups) + 1.6)
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(width * len(metrics) + 2.4, 4.9), squeeze=False,
        layout="constrained",
    )  # fmt: skip
    for ax, metric in zip(axes[0], metrics, strict=True):
        _steady_panel(ax, metric, curves, styles, list(groups.values()), refs, marker)
        ax.set_xticks(range(len(groups)), [_wrap(n, 20) for n in names])
    handles = [Line2D([], [], ls="none", marker=marker[k], color="white", markeredgecolor="black",
                      ms=8, label=k) for k in kinds]  # fmt: skip
    handles += [Line2D([], [], color="black", ls="--", label=curves[i]["label"]) for i in refs]
    if any(ax.get_lines() and "diverged" in [ln.get_gid() for ln in ax.get_lines()]
           for ax in axes[0]):  # fmt: skip
        handles.append(Line2D([], [], ls="none", marker="x", color="black", label="diverged"))
    if handles:
        fig.legend(handles=handles, loc="outside right center", title="topology" if kinds else None)
    reps = summary.get("repetitions")
    note = f"{summary.get('steady_state', 'steady state')}" + (
        f", {reps} repetitions" if reps else ""
    )
    _suptitle(fig, summary.get("title") or summary.get("experiment", ""), note)
    return fig


# --- figure.png against the population (figure = "population") ------------------------------


def _stacked_values(ax: Axes, values: Sequence[tuple[float, float, str]]) -> None:
    """Each dot's value to its right, the values at one x stacked so that none overlaps."""
    gap = 10.0  # points between two values' baselines
    to_points = 72.0 / ax.figure.dpi
    for x in sorted({v[0] for v in values}):
        column = sorted((v for v in values if v[0] == x), key=lambda v: -v[1])
        last = math.inf
        for _, y, color in column:
            at = ax.transData.transform((x, y))[1] * to_points  # the dot, in points
            place = min(at, last - gap)
            ax.annotate(f"{y:.1f}", (x, y), xytext=(7, place - at), textcoords="offset points",
                        va="center", fontsize=8, color=color,
                        bbox={"fc": "white", "ec": "none", "alpha": 0.75, "pad": 0.4})  # fmt: skip
            last = place


@readable
def population_figure(summary: Mapping[str, Any]) -> Figure:
    """Each scheme's steady state against the number of clients (``figure = "population"``).

    One panel per metric of ``summary["plot"]``; x is the population P·K of each curve
    (``summary.json``'s ``clients``) on a log axis. Curves are grouped into lines by their
    label before any parenthesis (``random (10^5)`` is a point of ``random``), in the
    scheme's style (:mod:`pgfl.style`), each dot with its value; the noise-free curves
    (``none``) are the black dashed reference. ``summary["usable_db"]``, where given, is a
    dotted line: a model at or below it counts as usable. Diverged points are left out
    and named in the legend. The legend sits outside the axes.
    """
    plt = _plt()

    curves = summary["curves"]
    metrics = _drawn_metrics(summary)
    styles = _styles(curves)
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(curves):
        if isinstance(c.get("clients"), int):
            groups.setdefault(_base_label(c["label"]), []).append(i)
    usable = summary.get("usable_db")
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(6.4 * len(metrics) + 3.2, 5.0), squeeze=False,
        layout="constrained",
    )  # fmt: skip
    handles: dict[str, Any] = {}
    for ax, metric in zip(axes[0], metrics, strict=True):
        values: list[tuple[float, float, str]] = []
        for name, idx in groups.items():
            idx = sorted(idx, key=lambda i: curves[i]["clients"])
            kept = [i for i in idx if isinstance(curves[i].get(metric), (int, float))
                    and math.isfinite(curves[i][metric])]  # fmt: skip
            if not kept:
                continue
            st = styles[idx[0]]
            ref = st.scheme == "none"
            xs = [curves[i]["clients"] for i in kept]
            ys = [curves[i][metric] for i in kept]
            gone = [curves[i]["clients"] for i in idx if i not in kept]
            label = name + (f" (diverged at P·K = {', '.join(map(str, gone))})" if gone else "")
            (line,) = ax.plot(xs, ys, color=st.color, ls="--" if ref else "-",
                              marker=st.marker or "o", ms=7, markeredgecolor="black",
                              markeredgewidth=0.5, lw=1.6, zorder=2 if ref else 3)  # fmt: skip
            line.set_gid(name)
            handles.setdefault(label, line)
            if not ref:
                values += [(x, y, st.color) for x, y in zip(xs, ys, strict=True)]
        if isinstance(usable, (int, float)) and metric == metrics[0]:
            line = ax.axhline(usable, color="grey", ls=":", lw=1.4, zorder=1)
            line.set_gid("usable")
            handles.setdefault(f"usable: at most {usable:g} dB", line)
        ax.set_xscale("log")
        _stacked_values(ax, values)
        ax.set_xlabel("clients P·K")
        ax.set_ylabel(_YLABEL.get(metric, metric))
        ax.set_title(f"{_SHORT.get(metric, metric)} at the steady state")
        ax.grid(True, which="both", alpha=0.3)
    if handles:
        fig.legend(list(handles.values()), [_wrap(k, 30) for k in handles],
                   loc="outside right center")  # fmt: skip
    reps = summary.get("repetitions")
    note = f"{summary.get('steady_state', 'steady state')}" + (
        f", {reps} repetitions" if reps else ""
    )
    _suptitle(fig, summary.get("title") or summary.get("experiment", ""), note)
    return fig
