"""Figures made from saved results (``summary.json`` + ``curves.csv``), never from memory.

Two figures per run:

* ``figure.png``: the metrics of ``summary["plot"]`` against the iteration. With more than
  :data:`PLAIN_CURVES` curves and a detected sweep, one row of panels per sweep; each
  scheme gets its own colour map and the shade grows with the swept value.
* ``sweep.png`` (only when a sweep is detected): the steady-state value of each metric
  against the swept parameter on a log axis, one line per scheme, with the least-squares
  slope in dB per decade in the legend. The step-size laws of "Privatized Graph Federated
  Learning" (Rizk, Vlaski & Sayed, arXiv:2203.07105, §4) are straight lines there: an
  ``O(μ)`` steady state rises by 10 dB per decade of μ, an ``O(1/μ)`` one falls by 10.

Sweeps are inferred from each curve's ``settings`` in ``summary.json`` (no config key):
see :func:`find_sweeps`.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pgfl.files import read_csv, read_json

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_YLABEL = {
    "centroid_msd_db": "centroid MSD (dB)",
    "individual_msd_db": "average individual MSD (dB)",
    "disagreement_db": "network disagreement (dB)",
    "test_error": "test error of the centroid",
    "test_accuracy": "test accuracy of the centroid",
    "server_test_loss_mean": "average test loss of the servers' models",
    "test_log_loss": "test log-loss of the centroid",
    "server_test_error_mean": "average test error of the servers' models",
}

#: Parameters a sweep can run over: (axis label, symbol in legends).
SWEPT = {
    "mu": ("step size μ", "μ"),
    "server_variance": ("server noise variance σ_g²", "σ_g²"),
    "client_variance": ("client noise variance σ²", "σ²"),
}

#: The setting that decides whether a variance has any effect (``"none"``: it has none).
_NOISE_OF = {"server_variance": "server_noise", "client_variance": "client_noise"}

#: Client-level schemes that draw no noise, so ``client_variance`` does nothing.
_NOISELESS_CLIENT = ("none", "secure_aggregation")

#: A sweep line needs at least this many distinct positive values of its parameter.
MIN_SWEEP_POINTS = 3

#: Entries per column of an outside legend (more curves: more columns, a taller row).
LEGEND_ROWS = 28
#: Up to this many curves, ``figure.png`` keeps one panel per metric with a plain legend.
PLAIN_CURVES = 6

_CMAPS = ("Blues", "Reds", "Greens", "Purples", "Oranges", "Greys")
_MARKERS = ("o", "s", "^", "D", "v", "P")


@dataclass(frozen=True)
class SweepLine:
    """Curves that differ only in the swept parameter, sorted by its value.

    Attributes:
        scheme: legend label (the privacy scheme, plus any setting telling lines apart).
        curves: indices into ``summary["curves"]``, in increasing order of ``x``.
        x: the swept parameter's values, increasing and distinct.

    """

    scheme: str
    curves: tuple[int, ...]
    x: tuple[float, ...]


@dataclass(frozen=True)
class Sweep:
    """All lines of one swept parameter, plus noise-free reference curves.

    Attributes:
        parameter: a key of :data:`SWEPT`.
        lines: one per scheme.
        baselines: indices of curves without noise at the swept variance's level whose other
            settings equal a line's (drawn as horizontal references); empty for ``mu``.

    """

    parameter: str
    lines: tuple[SweepLine, ...]
    baselines: tuple[int, ...] = ()


def _value(v: Any) -> float:
    """A summary/CSV value as a float (``None``, ``""`` and ``"None"`` are NaN)."""
    if v is None or v in ("", "None"):
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def slope_db_per_decade(x: Sequence[float], y_db: Sequence[float]) -> float:
    """Least-squares slope of ``y_db`` against ``log10(x)``: dB per decade of ``x``.

    Fits ``y ≈ a + s·log10 x`` over the points where both are finite and ``x > 0``;
    ``s = Σ(t − t̄)(y − ȳ) / Σ(t − t̄)²`` with ``t = log10 x``. A steady state ``∝ x^k`` has
    ``s = 10k`` (``O(μ)``: +10, ``O(1/μ)``: −10). NaN with fewer than two distinct ``x``.

    Args:
        x: the swept values, shape ``[n]``.
        y_db: the steady-state values in dB, shape ``[n]``.

    Returns:
        The slope in dB per decade.

    Example:
        >>> slope_db_per_decade([1, 10, 100], [0.0, 10.0, 11.0])
        5.5
        >>> round(slope_db_per_decade([0.1, 1, 5], [10 * np.log10(3 / x) for x in (0.1, 1, 5)]), 9)
        -10.0

    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y_db, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0)
    t, y = np.log10(x[ok]), y[ok]
    if np.unique(t).size < 2:
        return math.nan
    dt = t - t.mean()
    return float(np.dot(dt, y - y.mean()) / np.dot(dt, dt))


def scheme_label(settings: Mapping[str, Any]) -> str:
    """The privacy scheme of a curve in words: client level (with what is shared), server level.

    Example:
        >>> scheme_label({"share": "updates", "client_noise": "laplace", "server_noise": "none"})
        'noisy updates (laplace)'
        >>> scheme_label({"share": "models", "client_noise": "none", "server_noise": "random"})
        'random'

    """
    client = settings.get("client_noise", "none")
    server = settings.get("server_noise", "none")
    share = settings.get("share", "models")
    parts = []
    if client == "secure_aggregation":
        parts.append("secure aggregation" + ("" if share == "models" else f" of {share}"))
    elif client != "none":
        parts.append(f"noisy {share} ({client})")
    elif share != "models":
        parts.append(f"sharing {share}")
    if server != "none":
        parts.append(server)
    return " + ".join(parts) or "no noise"


def _relevant(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings with variances that have no effect (their noise is off) set to None."""
    s = dict(settings)
    if s.get("server_noise") == "none":
        s["server_variance"] = None
    if s.get("client_noise") in _NOISELESS_CLIENT:
        s["client_variance"] = None
    return s


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def find_sweeps(curves: Sequence[Mapping[str, Any]]) -> list[Sweep]:
    """The sweeps in a run's curves, inferred from their ``settings``.

    For each parameter of :data:`SWEPT`, curves are grouped by all their other settings;
    a group whose curves have distinct, positive values of the parameter, at least
    :data:`MIN_SWEEP_POINTS` of them, is one line. A variance counts only where its noise
    is on. A group where two curves share a value differs in something ``settings`` does
    not record, so it is no sweep. Curves without ``settings`` are ignored.

    Args:
        curves: ``summary["curves"]``.

    Returns:
        One :class:`Sweep` per parameter with at least one line, in the order of
        :data:`SWEPT`. A curve may belong to several sweeps (the centre of a μ sweep is
        often a point of a variance sweep too).

    Example:
        >>> mk = lambda mu, noise: {"settings": {"mu": mu, "share": "models",
        ...     "client_noise": "none", "client_variance": 0.0, "server_noise": noise,
        ...     "server_variance": 0.1}}
        >>> curves = [mk(m, n) for n in ("random", "graph_homomorphic") for m in (0.1, 1, 5)]
        >>> [(s.parameter, [(ln.scheme, ln.x) for ln in s.lines]) for s in find_sweeps(curves)]
        [('mu', [('random', (0.1, 1.0, 5.0)), ('graph_homomorphic', (0.1, 1.0, 5.0))])]

    """
    settings = [_relevant(c["settings"]) if "settings" in c else None for c in curves]
    sweeps = []
    for p in SWEPT:
        groups: dict[tuple, list[int]] = {}
        for i, s in enumerate(settings):
            if s is None or not _value(s.get(p)) > 0:  # off (None), zero or negative
                continue
            key = tuple(sorted((k, v) for k, v in s.items() if k != p))
            groups.setdefault(key, []).append(i)
        found = []
        for key, idx in groups.items():
            xs = [float(settings[i][p]) for i in idx]
            if len(set(xs)) != len(xs) or len(xs) < MIN_SWEEP_POINTS:
                continue
            order = sorted(range(len(idx)), key=lambda k: xs[k])
            found.append((dict(key), tuple(idx[k] for k in order), tuple(xs[k] for k in order)))
        if not found:
            continue
        lines = _label_lines(found)
        sweeps.append(Sweep(p, lines, _baselines(p, settings, found)))
    return sweeps


def _label_lines(found: list[tuple[dict[str, Any], tuple[int, ...], tuple[float, ...]]]):
    """Name each line by its scheme, adding the settings that still tell lines apart."""
    schemes = [scheme_label(fixed) for fixed, _, _ in found]
    lines = []
    for (fixed, idx, xs), scheme in zip(found, schemes, strict=True):
        twins = [f for (f, _, _), s in zip(found, schemes, strict=True) if s == scheme]
        extra = [
            f"{SWEPT[k][1] if k in SWEPT else k}={_fmt(v)}"
            for k, v in fixed.items()
            if len({_fmt(t.get(k)) for t in twins}) > 1
        ]
        lines.append(SweepLine(", ".join([scheme, *extra]), idx, xs))
    return tuple(lines)


def _baselines(p: str, settings: list[dict[str, Any] | None], found) -> tuple[int, ...]:
    """Curves with the swept variance's noise off and otherwise a line's settings."""
    if p not in _NOISE_OF:
        return ()
    noise = _NOISE_OF[p]
    in_lines = {i for _, idx, _ in found for i in idx}

    def rest(s: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in s.items() if k not in (p, noise)}

    line_rests = [rest(fixed) for fixed, _, _ in found]
    return tuple(
        i
        for i, s in enumerate(settings)
        if s is not None and i not in in_lines and s.get(p) is None and rest(s) in line_rests
    )


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _scheme_colormaps(sweeps: Sequence[Sweep]) -> dict[str, Any]:
    """One sequential colour map per scheme, in order of first appearance."""
    plt = _plt()
    names: list[str] = []
    for sw in sweeps:
        names.extend(ln.scheme for ln in sw.lines if ln.scheme not in names)
    return {n: plt.get_cmap(_CMAPS[k % len(_CMAPS)]) for k, n in enumerate(names)}


def _shade(k: int, n: int) -> float:
    """Colour-map position of the k-th of n increasing values: light (small) to dark."""
    return 0.35 + 0.6 * (k / (n - 1) if n > 1 else 1.0)


def _suptitle(fig: Figure, title: str, subtitle: str = "") -> None:
    """A figure title wrapped to the figure's width, with an optional smaller second line."""
    chars = int(11 * fig.get_figwidth())  # about 11 characters per inch at 11 pt
    text = "\n".join(textwrap.wrap(title, chars))
    if subtitle:
        text += "\n" + "\n".join(textwrap.wrap(subtitle, int(1.2 * chars)))
    fig.suptitle(text, fontsize=11)


def _curve_name(entry: Mapping[str, Any], name: str | None = None) -> str:
    name = entry["label"] if name is None else name
    if entry.get("diverged"):
        name += f" (diverged at {entry.get('diverged_at')})"
    return name


def iteration_figure(summary: Mapping[str, Any], rows: Sequence[Mapping[str, str]]) -> Figure:
    """The per-iteration figure: metrics of ``summary["plot"]`` against the iteration.

    Up to :data:`PLAIN_CURVES` curves, or without a sweep: one panel per metric, every
    curve in it. Otherwise one row of panels per sweep (its curves shaded by the swept
    value within their scheme's colour map, its baselines in black, legend outside on the
    right) and a last row for curves in no sweep. Diverged curves are drawn up to their
    divergence and marked in the legend.
    """
    plt = _plt()
    panels = list(summary.get("plot") or ["centroid_msd_db"])
    curves = summary["curves"]
    sweeps = find_sweeps(curves) if len(curves) > PLAIN_CURVES else []
    by_label: dict[str, list[Mapping[str, str]]] = {}
    for r in rows:
        by_label.setdefault(r["label"], []).append(r)

    # groups: (row title, [(curve index, colour, legend name)])
    groups: list[tuple[str, list[tuple[int, Any, str]]]] = []
    if sweeps:
        cmaps = _scheme_colormaps(sweeps)
        shown: set[int] = set()
        for sw in sweeps:
            sym = SWEPT[sw.parameter][1]
            members = [
                (i, cmaps[ln.scheme](_shade(k, len(ln.x))), f"{ln.scheme}, {sym}={x:g}")
                for ln in sw.lines
                for k, (i, x) in enumerate(zip(ln.curves, ln.x, strict=True))
            ]
            members += [(i, "black", curves[i]["label"]) for i in sw.baselines]
            shown.update(i for i, _, _ in members)
            groups.append((f"{SWEPT[sw.parameter][0]} swept", members))
        rest = [i for i in range(len(curves)) if i not in shown]
        if rest:
            tab = plt.get_cmap("tab10")
            groups.append(
                ("other curves", [(i, tab(k % 10), curves[i]["label"]) for k, i in enumerate(rest)])
            )
    else:
        n = max(1, len(curves))
        colors = plt.cm.tab10(np.arange(n) % 10) if n <= 10 else plt.cm.tab20(np.linspace(0, 1, n))
        groups.append(("", [(i, colors[i], curves[i]["label"]) for i in range(len(curves))]))

    outside = len(curves) > PLAIN_CURVES
    # an outside legend of many curves gets columns of at most LEGEND_ROWS entries and a
    # row tall enough for them (else constrained layout collapses the axes to nothing)
    ncols = [-(-len(members) // LEGEND_ROWS) if outside else 1 for _, members in groups]
    heights = [
        max(4.0, 0.17 * min(len(members), LEGEND_ROWS) + 1.0) if outside else 4.0
        for _, members in groups
    ]
    fig, axes = plt.subplots(
        len(groups),
        len(panels),
        figsize=(5.6 * len(panels) + (2.6 * max(ncols) if outside else 0.8), sum(heights)),
        squeeze=False,
        layout="constrained",
        gridspec_kw={"height_ratios": heights},
    )
    for row, (title, members), ncol in zip(axes, groups, ncols, strict=True):
        for ax, metric in zip(row, panels, strict=True):
            for i, color, name in members:
                series = by_label.get(curves[i]["label"], [])
                if not series or metric not in series[0]:
                    continue
                it = np.array([int(r["iteration"]) for r in series])
                val = np.array([_value(r[metric]) for r in series])
                ax.plot(it, val, color=color, label=_curve_name(curves[i], name), linewidth=1.0)
            ax.set_xlabel("iteration i")
            ax.set_ylabel(_YLABEL.get(metric, metric))
            ax.grid(True, alpha=0.3)
            if title:
                ax.set_title(title, fontsize=9)
            if ax.lines and not outside:
                ax.legend(fontsize=7)
        drawn = [ax for ax in row if ax.lines]
        if drawn and outside:  # one legend per row, right of its last panel
            drawn[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), ncol=ncol)
    _suptitle(fig, summary.get("title") or summary.get("experiment", ""))
    return fig


def sweep_figure(summary: Mapping[str, Any], sweeps: Sequence[Sweep]) -> Figure:
    """Steady-state values against each swept parameter (log axis), one line per scheme.

    One row per sweep, one column per metric of ``summary["plot"]``. For a metric in dB
    the legend gives each line's :func:`slope_db_per_decade`; points of diverged curves
    (no steady state) are left out and named in the legend; baselines are dashed black
    horizontal lines.
    """
    plt = _plt()
    panels = list(summary.get("plot") or ["centroid_msd_db"])
    curves = summary["curves"]
    cmaps = _scheme_colormaps(sweeps)
    fig, axes = plt.subplots(
        len(sweeps),
        len(panels),
        figsize=(max(6.4, 5.2 * len(panels)), 4.6 * len(sweeps)),
        squeeze=False,
        layout="constrained",
    )
    for row, sw in zip(axes, sweeps, strict=True):
        xlabel, sym = SWEPT[sw.parameter]
        ticks = sorted({x for ln in sw.lines for x in ln.x})
        for ax, metric in zip(row, panels, strict=True):
            in_db = metric.endswith("_db")
            for k, ln in enumerate(sw.lines):
                y = np.array([_value(curves[i].get(metric)) for i in ln.curves])
                x = np.array(ln.x)
                label = ln.scheme
                slope = slope_db_per_decade(x, y) if in_db else math.nan
                if not math.isnan(slope):
                    label += f"  slope {slope:+.1f} dB/dec"
                lost = [
                    f"{v:g}"
                    for v, i in zip(ln.x, ln.curves, strict=True)
                    if curves[i].get("diverged")
                ]
                if lost:
                    label += f"  (diverged at {sym}={', '.join(lost)})"
                ok = np.isfinite(y)
                if not ok.any():
                    continue
                ax.plot(
                    x[ok],
                    y[ok],
                    marker=_MARKERS[k % len(_MARKERS)],
                    color=cmaps[ln.scheme](0.8),
                    label=label,
                )
            for i in sw.baselines:
                y0 = _value(curves[i].get(metric))
                if math.isfinite(y0):
                    ax.axhline(y0, color="black", ls="--", lw=1.0, label=curves[i]["label"])
            ax.set_xscale("log")
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
            ax.set_xlabel(xlabel)
            ax.set_ylabel(f"steady-state {_YLABEL.get(metric, metric)}")
            ax.grid(True, alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16))
            else:
                ax.text(
                    0.5, 0.5, "no finite steady-state value", ha="center", transform=ax.transAxes
                )
    title = summary.get("title") or summary.get("experiment", "")
    steady = summary.get("steady_state")
    _suptitle(fig, title, f"steady state: {steady}" if steady else "")
    return fig


def plot_run(out: str | Path, filename: str = "figure.png") -> list[Path]:
    """Write ``figure.png`` and, when the curves hold a sweep, ``sweep.png`` into ``out``.

    Both are drawn from ``out/summary.json`` and ``out/curves.csv`` only. A ``sweep.png``
    left from an earlier run into the same folder is removed when this run has no sweep.

    Returns:
        The paths written, the per-iteration figure first.

    """
    plt = _plt()
    out = Path(out)
    summary = read_json(out / "summary.json")
    rows = read_csv(out / "curves.csv")
    sweeps = find_sweeps(summary["curves"])
    figures = {filename: iteration_figure(summary, rows)}
    if sweeps:
        figures["sweep.png"] = sweep_figure(summary, sweeps)
    else:
        (out / "sweep.png").unlink(missing_ok=True)
    for name, fig in figures.items():
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
    return [out / name for name in figures]
