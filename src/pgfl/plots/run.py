"""The figures of a run, and :func:`plot_run`, which draws them from a results folder.

``figure.png`` against the iteration (:func:`iteration_figure`) and ``sweep.png``
(:func:`sweep_figure`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pgfl.files import read_csv, read_json
from pgfl.plots.base import (
    _SHORT,
    _YLABEL,
    ALPHA_RANGE,
    INSIDE_LEGEND,
    MAX_PANEL_CURVES,
    PLAIN_CURVES,
    Coincidences,
    PlotCurve,
    _base_label,
    _curve_name,
    _plt,
    _styles,
    _suptitle,
    _wrap,
    draw_curves,
    legend_handles,
    readable,
    save_figure,
)
from pgfl.plots.steady import population_figure, steady_figure
from pgfl.plots.sweeps import (
    SWEPT,
    Sweep,
    _power_law_text,
    _value,
    find_sweeps,
    local_slopes,
    power_law_ranges,
)
from pgfl.style import SCHEMES, CurveStyle

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


# --- figure.png ------------------------------------------------------------------------------


def _series(rows: Sequence[Mapping[str, str]]) -> dict[str, dict[str, np.ndarray]]:
    """``curves.csv`` rows as ``label -> {"iteration": it, metric: values}``."""
    by_label: dict[str, list[Mapping[str, str]]] = {}
    for r in rows:
        by_label.setdefault(r["label"], []).append(r)
    out = {}
    for label, rs in by_label.items():
        cols = {"iteration": np.array([int(r["iteration"]) for r in rs])}
        for key in rs[0]:
            if key not in ("label", "iteration"):
                cols[key] = np.array([_value(r.get(key)) for r in rs])
        out[label] = cols
    return out


def _alpha(rank: int, n: int) -> float:
    """Opacity of the rank-th of n increasing swept values: light (small) to opaque (large)."""
    lo, hi = ALPHA_RANGE
    return hi if n < 2 else lo + (hi - lo) * rank / (n - 1)


@dataclass
class _Row:
    """A row of panels of ``figure.png``: a title, its members and a legend title."""

    title: str
    members: list[tuple[int, str, CurveStyle]]  # (curve index, legend name, style)
    legend_title: str = ""


@readable
def iteration_figure(summary: Mapping[str, Any], rows: Sequence[Mapping[str, str]]) -> Figure:
    """The per-iteration figure (``figure.png``): metrics of ``summary["plot"]`` per iteration.

    Drawn from ``summary.json`` (its curves, their ``settings``) and ``curves.csv`` (the
    values). One column per metric that has data. Up to :data:`PLAIN_CURVES` curves, or
    without a sweep: one row, every curve in its scheme's style (curves of a sweep lighter
    for smaller swept values) and one legend right of the panels; more than
    :data:`MAX_PANEL_CURVES` curves without a sweep: one row per scheme. With more curves
    and a sweep: one row per swept line (its scheme's colour, opacity = swept value, the
    noise-free reference in black, a legend per row) and a last row for curves in no
    sweep. Diverged curves are drawn up to their divergence and marked in the legend;
    curves that coincide stay visible and say so in the legend.
    """
    plt = _plt()
    curves = summary["curves"]
    data = _series(rows)
    metrics = [
        m
        for m in (summary.get("plot") or ["centroid_msd_db"])
        if any(np.isfinite(d.get(m, np.zeros(0))).any() for d in data.values())
    ] or list(summary.get("plot") or ["centroid_msd_db"])[:1]
    styles = _styles(curves)
    sweeps = find_sweeps(curves)
    alpha: dict[int, float] = {}
    for sw in sweeps:
        for ln in sw.lines:
            for k, i in enumerate(ln.curves):
                alpha.setdefault(i, _alpha(k, len(ln.curves)))

    def plain(idx: Sequence[int]) -> list[tuple[int, str, CurveStyle]]:
        return [
            (i, _curve_name(curves[i]), replace(styles[i], alpha=alpha.get(i, 1.0))) for i in idx
        ]

    groups = _figure_rows(curves, styles, sweeps, plain, metrics[0])
    many = len(groups) > 1
    heights = [2.9 if many else 3.8] * len(groups)  # grown below to fit each row's legend
    width = 5.4 if len(metrics) > 1 or many else 6.4
    fig, axes = plt.subplots(
        len(groups),
        len(metrics),
        figsize=(width * len(metrics) + 3.2, sum(heights) + 0.9),
        squeeze=False,
        sharex=True,
        sharey="col" if many else False,
        layout="constrained",
        gridspec_kw={"height_ratios": heights},
    )
    for r, (row, group) in enumerate(zip(axes, groups, strict=True)):
        seen = Coincidences()
        for ax, metric in zip(row, metrics, strict=True):
            items = []
            for i, name, style in group.members:
                d = data.get(curves[i]["label"])
                if d is None or metric not in d or not np.isfinite(d[metric]).any():
                    continue
                ref = styles[i].scheme == "none" and bool(group.legend_title)
                items.append(
                    PlotCurve(curves[i]["label"], name, d["iteration"], d[metric], style,
                           zorder=1.5 if ref else 2.0)
                )  # fmt: skip
            seen.add(_SHORT.get(metric, metric), items, draw_curves(ax, items))
            if metric == "centroid_msd_db":
                _bias_floors(ax, [(curves[i], name, style) for i, name, style in group.members])
            ax.set_ylabel(_YLABEL.get(metric, metric))
            ax.grid(True, alpha=0.3)
            if r == len(groups) - 1:
                ax.set_xlabel("iteration i")
            if group.title:
                ax.set_title(group.title)
        legend = _row_legend(fig, row, seen, group.legend_title, figure_level=not many)
        if legend is not None and many:  # the row is as tall as its legend (or taller)
            heights[r] = max(heights[r], _legend_height(legend) + 0.5)
    if many:
        row[0].get_gridspec().set_height_ratios(heights)
        fig.set_figheight(sum(heights) + 0.9)
    _suptitle(fig, summary.get("title") or summary.get("experiment", ""))
    return fig


def _bias_floors(ax: Axes, members: Sequence[tuple[Mapping[str, Any], str, CurveStyle]]) -> None:
    """A dotted line at each curve's ``centroid_bias_db``: where its centroid MSD levels off.

    Graph-homomorphic noise on a non-linear loss moves the centroid's fixed point to the
    noise-smoothed optimum (:mod:`pgfl.engine.floor`); the line, in the curve's colour,
    shows the floor the curve meets however long it runs.
    """
    for curve, name, style in members:
        floor = curve.get("centroid_bias_db")
        if floor is None or not np.isfinite(floor):
            continue
        kw = {"color": style.color, "linestyle": ":", "linewidth": 1.4}
        line = ax.axhline(floor, zorder=1.2, label=f"{name}: floor (noise-smoothed optimum)", **kw)
        line.set_gid(f"{curve['label']}\0floor")
        line.pgfl_legend = kw


#: Dash patterns of a swept line's curves, smallest value first (with the opacity, what
#: tells the values apart where the curves overlap).
_SWEEP_DASHES = ("-", (0, (5, 1.5)), (0, (1, 1.2)), (0, (7, 2, 1.5, 2)), (0, (2, 2)))


def _steady_text(entry: Mapping[str, Any], metric: str) -> str:
    """``": -15.2 dB"``: a curve's steady state of ``metric`` for its legend (or ``""``)."""
    value = entry.get(metric)
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return ""
    return f": {value:.1f} dB" if metric.endswith("_db") else f": {value:.3g}"


def _figure_rows(curves, styles, sweeps, plain, metric: str) -> list[_Row]:
    """The rows of ``figure.png``: one per swept line (and the rest), or one per scheme.

    In a swept line's row each curve has its own dash pattern besides its opacity, and its
    legend entry gives its steady state of the first metric (``μ=0.5: -15.2 dB``): curves
    of one scheme that overlap still compare at a glance.
    """
    if not (sweeps and len(curves) > PLAIN_CURVES):
        return _by_scheme(range(len(curves)), curves, styles, plain, "")
    groups: list[_Row] = []
    shown: set[int] = set()
    for sw in sweeps:
        label, sym = SWEPT[sw.parameter]
        for ln in sw.lines:
            members = [
                (i, _curve_name(curves[i], f"{sym}={x:g}{_steady_text(curves[i], metric)}"),
                 replace(styles[i], alpha=_alpha(k, len(ln.x)),
                         linestyle=_SWEEP_DASHES[k % len(_SWEEP_DASHES)]))
                for k, (i, x) in enumerate(zip(ln.curves, ln.x, strict=True))
            ]  # fmt: skip
            members += [(i, _curve_name(curves[i]), styles[i]) for i in sw.baselines]
            shown.update(i for i, _, _ in members)
            title = f"{ln.scheme}: {sym} swept"
            groups.append(_Row(title, members, f"{label}\n(lighter: smaller {sym})"))
    rest = [i for i in range(len(curves)) if i not in shown]
    if rest:
        groups += _by_scheme(rest, curves, styles, plain, "other curves")
    return groups


def _legend_height(legend: Any) -> float:
    """About how tall a legend is, in inches, from its lines of text at its font size."""
    texts = [t.get_text() for t in legend.get_texts()]
    title = legend.get_title().get_text()
    ncol = max(1, getattr(legend, "_ncols", 1))
    lines = -(-sum(t.count("\n") + 1 for t in texts) // ncol) + (
        title.count("\n") + 1 if title else 0
    )
    size = legend.get_texts()[0].get_fontsize() if texts else 9.0
    return lines * size * 1.55 / 72 + 0.3


def _by_scheme(idx, curves, styles, plain, title: str) -> list[_Row]:
    """One row of the given curves, or one per scheme when they are too many for a panel."""
    idx = list(idx)
    if len(idx) <= MAX_PANEL_CURVES:
        return [_Row(title, plain(idx))]
    order: dict[str, list[int]] = {}
    for i in idx:
        order.setdefault(styles[i].scheme or styles[i].color, []).append(i)
    rows = []
    for key, members in order.items():
        name = key if key in SCHEMES else "other"
        bases = list(dict.fromkeys(_base_label(curves[i]["label"]) for i in members))
        if len(bases) == 1:  # the curves' own name ("local"), not the scheme's ("client_noise")
            name = bases[0]
        rows.append(_Row(f"{title + ': ' if title else ''}{name}", plain(members), name))
    return rows


def _row_legend(fig, row, seen: Coincidences, title: str, *, figure_level: bool) -> Any:
    """The legend of a row (right of its last panel) or of the figure (right of the panels).

    Names of curves that coincide with another get the note, with the panels where they
    do unless it is all the panels both are drawn in.
    """
    lines = [ln for ax in row for ln in ax.lines]
    handles, labels = legend_handles(lines)
    if not handles:
        return None
    labels = [_wrap(seen.label(h.get_gid(), t), 40) for h, t in zip(handles, labels, strict=True)]
    if figure_level:
        return fig.legend(handles, labels, loc="outside right center", title=title or None)
    last = [ax for ax in row if ax.lines][-1]
    return last.legend(
        handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), title=title or None,
        ncol=-(-len(handles) // 14),
    )  # fmt: skip


# --- sweep.png -------------------------------------------------------------------------------


@readable
def sweep_figure(summary: Mapping[str, Any], sweeps: Sequence[Sweep]) -> Figure:
    """Steady-state values against each swept parameter (``sweep.png``), one line per scheme.

    Drawn from ``summary.json`` only (its curves' steady-state values and ``settings``).
    One row per sweep, one column per metric of ``summary["plot"]`` that has a finite
    value; lines in their scheme's style, the noise-free baselines as dashed black
    horizontal lines. For a metric in dB, a panel below shows the local slopes between
    neighbouring points (dB per decade, with guides at 0 and ±10) and the legend gives the
    power-law slope only over the ranges where one holds (:func:`power_law_ranges`).
    Points of diverged curves (no steady state) are left out and named in the legend.
    """
    plt = _plt()
    metrics_all = list(summary.get("plot") or ["centroid_msd_db"])
    curves = summary["curves"]
    styles = _styles(curves)
    metrics = [
        m
        for m in metrics_all
        if any(
            math.isfinite(_value(curves[i].get(m)))
            for sw in sweeps
            for ln in sw.lines
            for i in ln.curves
        )
    ] or metrics_all[:1]
    # many lines: each panel's legend beside it, in a column of its own, and one row per
    # (sweep, metric) so that the figure does not grow too wide
    beside = max(len(sw.lines) + len(sw.baselines) for sw in sweeps) > INSIDE_LEGEND
    nrows, ncols = (len(sweeps) * len(metrics), 2) if beside else (len(sweeps), len(metrics))
    heights = [5.4] * nrows
    fig = plt.figure(
        figsize=(9.8 if beside else max(6.8, 6.0 * len(metrics)), sum(heights) + 0.6),
        layout="constrained",
    )
    grid = fig.add_gridspec(nrows, ncols, width_ratios=(6.0, 3.8) if beside else None)
    for r, sw in enumerate(sweeps):
        xlabel, sym = SWEPT[sw.parameter]
        ticks = sorted({x for ln in sw.lines for x in ln.x})
        for c, metric in enumerate(metrics):
            row = r * len(metrics) + c if beside else r
            cell = grid[row, 0] if beside else grid[r, c]
            if metric.endswith("_db"):
                sub = cell.subgridspec(2, 1, height_ratios=(3.0, 1.3), hspace=0.05)
                ax = fig.add_subplot(sub[0])
                ax_s = fig.add_subplot(sub[1], sharex=ax)
            else:
                ax, ax_s = fig.add_subplot(cell), None
            legend = _sweep_panel(ax, ax_s, sw, metric, curves, styles, beside=beside)
            if legend is not None and beside:  # in the column kept free for it
                legend.set_in_layout(False)
                heights[row] = max(heights[row], _legend_height(legend) + 0.8)
            for a in (ax, ax_s):
                if a is None:
                    continue
                a.set_xscale("log")
                a.set_xticks(ticks, [f"{t:g}" for t in ticks])
                a.minorticks_off()
                a.grid(True, alpha=0.3)
            bottom = ax_s if ax_s is not None and ax_s.lines else ax
            bottom.set_xlabel(xlabel)
            if bottom is not ax:
                ax.tick_params(labelbottom=False)
            ax.set_ylabel(f"steady-state {_YLABEL.get(metric, metric)}")
            if ax_s is not None and not ax_s.lines:
                ax_s.remove()
                ax.tick_params(labelbottom=True)
                ax.set_xlabel(xlabel)
    grid.set_height_ratios(heights)
    fig.set_figheight(sum(heights) + 0.6)
    title = summary.get("title") or summary.get("experiment", "")
    steady = summary.get("steady_state")
    _suptitle(fig, title, f"steady state: {steady}" if steady else "")
    return fig


def _sweep_panel(ax, ax_s, sw: Sweep, metric: str, curves, styles, *, beside: bool) -> Any:
    """One metric of one sweep: the lines, baselines, local slopes and the legend (returned).

    ``beside``: the legend goes right of the panel (else inside it, where it hides least).
    """
    sym = SWEPT[sw.parameter][1]
    items = []
    for ln in sw.lines:
        y = np.array([_value(curves[i].get(metric)) for i in ln.curves])
        x = np.array(ln.x)
        ok = np.isfinite(y)
        label = ln.scheme
        lost = [f"{v:g}" for v, i in zip(ln.x, ln.curves, strict=True) if curves[i].get("diverged")]
        if ax_s is not None and ok.sum() >= 2:
            label += ": " + _power_law_text(power_law_ranges(x, y), x[ok].tolist(), sym)
            mid, s = local_slopes(x, y)
            st = styles[ln.curves[0]]
            ax_s.plot(mid, s, **st.kwargs(), gid=ln.scheme)
        if lost:
            label += f" (diverged at {sym}={', '.join(lost)})"
        if not ok.any():
            continue
        items.append(PlotCurve(ln.scheme, label, x[ok], y[ok], styles[ln.curves[0]], ref=ln.scheme))
    seen = Coincidences()
    seen.add(metric, items, draw_curves(ax, items, sparse=False))
    for line in ax.lines:
        line.set_label(seen.label(line.get_gid(), line.get_label()))
    for i in sw.baselines:
        y0 = _value(curves[i].get(metric))
        if math.isfinite(y0):
            ref = {"color": "black", "linestyle": "--", "linewidth": 1.2}
            ax.axhline(y0, **ref, label=curves[i]["label"], zorder=1)
            ax.lines[-1].set_gid(curves[i]["label"])
            ax.lines[-1].pgfl_legend = ref
    if ax_s is not None:
        for level, ls in ((0, "-"), (10, ":"), (-10, ":")):
            ax_s.axhline(level, color="0.5", lw=0.8, ls=ls, zorder=0)
        ax_s.set_ylabel("local slope\n(dB/decade)")
    if not ax.lines:
        ax.text(0.5, 0.5, "no finite steady-state value", ha="center", transform=ax.transAxes)
        return None
    handles, labels = legend_handles(ax.lines)
    if not beside:
        return ax.legend(handles, [_wrap(t, 48) for t in labels], loc="best", framealpha=0.9)
    return ax.legend(handles, [_wrap(t, 40) for t in labels], loc="upper left",
                     bbox_to_anchor=(1.03, 1.0))  # fmt: skip


def plot_run(out: str | Path, filename: str = "figure.png") -> list[Path]:
    """Write ``figure.png`` and, when the curves hold a sweep, ``sweep.png`` into ``out``.

    Both are drawn from ``out/summary.json`` and ``out/curves.csv`` only
    (:func:`iteration_figure`, :func:`sweep_figure`). A ``sweep.png`` left from an earlier
    run into the same folder is removed when this run has no sweep. With
    ``figure = "steady"`` the figure is :func:`steady_figure` (``"population"``:
    :func:`population_figure`) and the per-iteration curves go to ``iterations.png``.

    Returns:
        The paths written, the per-iteration figure first.

    """
    out = Path(out)
    summary = read_json(out / "summary.json")
    rows = read_csv(out / "curves.csv")
    sweeps = find_sweeps(summary["curves"])
    answer = {"steady": steady_figure, "population": population_figure}.get(
        summary.get("figure", "iterations")
    )
    if answer is not None:  # the answer first; the curves beside it
        figures = {
            filename: answer(summary),
            "iterations.png": iteration_figure(summary, rows),
        }
    else:
        figures = {filename: iteration_figure(summary, rows)}
        (out / "iterations.png").unlink(missing_ok=True)
    if sweeps:
        figures["sweep.png"] = sweep_figure(summary, sweeps)
    else:
        (out / "sweep.png").unlink(missing_ok=True)
    return [save_figure(fig, out / name) for name, fig in figures.items()]
