"""What every figure of :mod:`pgfl.plots` shares.

Sizes, the readable-figure decorator, curve styles and coincidences, legends, saving.
"""

from __future__ import annotations

import functools
import itertools
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pgfl.files import replacing
from pgfl.style import SCHEMES, CurveStyle, coincidence_style, curve_style

if TYPE_CHECKING:
    from matplotlib.axes import Axes
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

#: Short metric names for legend notes ("coincides with X: centroid MSD").
_SHORT = {
    "centroid_msd_db": "centroid MSD",
    "individual_msd_db": "individual MSD",
    "disagreement_db": "disagreement",
    "test_error": "test error",
    "test_accuracy": "test accuracy",
    "test_log_loss": "test log-loss",
    "server_test_loss_mean": "servers' test loss",
    "server_test_error_mean": "servers' test error",
}

#: Up to this many curves, ``figure.png`` keeps one panel per metric with every curve.
PLAIN_CURVES = 6
#: More curves than this in one panel (no sweep to group them by): one row per scheme.
MAX_PANEL_CURVES = 10

#: Two curves coincide when they differ by at most this fraction of the panel's y range
#: (about two pixels of a panel 400 pixels high).
COINCIDE = 0.005

#: Up to this many lines, a sweep panel's legend sits inside it (more: beside it).
INSIDE_LEGEND = 4

#: Markers per curve on a per-iteration line (sparse, staggered between curves).
MARKS = 8

#: Fonts readable at the figures' sizes and dpi.
RC = {
    "font.size": 10.5,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10.5,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9.5,
    "xtick.labelsize": 9.5,
    "ytick.labelsize": 9.5,
    "figure.titlesize": 12,
}

# line styles that tell apart curves whose scheme and variant are the same (e.g. one at
# equal noise, one at equal ε)
_DUPLICATE_STYLES = ((0, (1, 1.5)), (0, (6, 2, 1, 2)), (0, (3, 3)), (0, (8, 3)))

#: Opacity of the smallest and the largest value of a sweep (same colour, lighter = smaller).
ALPHA_RANGE = (0.35, 1.0)


# --- drawing helpers -------------------------------------------------------------------------


def _plt():
    import matplotlib  # lazy: matplotlib, only to draw

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: once the Agg backend is chosen

    return plt


def readable(build: Callable[..., Figure]) -> Callable[..., Figure]:
    """Build a figure under :data:`RC` (fonts readable at the figure's size)."""

    @functools.wraps(build)
    def wrapped(*args: Any, **kwargs: Any) -> Figure:
        with _plt().rc_context(RC):
            return build(*args, **kwargs)

    return wrapped


def _suptitle(fig: Figure, title: str, subtitle: str = "", width: float | None = None) -> None:
    """A figure title wrapped to the figure's width (or ``width`` inches), then a subtitle."""
    chars = int(10 * (width or fig.get_figwidth()))  # about 10 characters per inch at 12 pt
    text = "\n".join(textwrap.wrap(title, chars))
    if subtitle:
        text += "\n" + "\n".join(textwrap.wrap(subtitle, int(1.15 * chars)))
    fig.suptitle(text)


def _curve_name(entry: Mapping[str, Any], name: str | None = None) -> str:
    name = entry["label"] if name is None else name
    if entry.get("diverged"):
        name += f" (diverged at {entry.get('diverged_at')})"
    return name


def entry_style(entry: Mapping[str, Any], taken: Sequence[str] = ()) -> CurveStyle:
    """The :mod:`pgfl.style` style of a ``summary.json`` curve (settings, else label)."""
    return curve_style(entry.get("settings"), str(entry.get("label", "")), taken=taken)


def coinciding(
    ys: Sequence[np.ndarray], *, log: bool = False, fraction: float = COINCIDE
) -> list[list[int]]:
    """Groups of curves equal to plotting precision (indices into ``ys``, each sorted).

    Two curves of the same length coincide when they are finite at the same points (at
    least one) and differ there by at most ``fraction`` of the range all curves span
    (in log10 on a log axis). Groups are the connected components of that relation.

    Example:
        >>> a = np.array([0.0, 1.0, 2.0])
        >>> coinciding([a, a + 1e-9, a + 1.0, a + 1.0])
        [[0, 1], [2, 3]]

    """
    vals = []
    for y in ys:
        y = np.asarray(y, dtype=float)
        if log:
            with np.errstate(divide="ignore", invalid="ignore"):
                y = np.where(y > 0, np.log10(np.where(y > 0, y, 1.0)), np.nan)
        vals.append(y)
    finite = [v[np.isfinite(v)] for v in vals]
    if not any(f.size for f in finite):
        return []
    span = max(float(np.max(f)) for f in finite if f.size) - min(
        float(np.min(f)) for f in finite if f.size
    )
    tol = fraction * span if span > 0 else 1e-12
    parent = list(range(len(vals)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(vals)):
        for j in range(i + 1, len(vals)):
            a, b = vals[i], vals[j]
            if a.shape != b.shape:
                continue
            fa, fb = np.isfinite(a), np.isfinite(b)
            if not fa.any() or not np.array_equal(fa, fb):
                continue
            if float(np.max(np.abs(a[fa] - b[fa]))) <= tol:
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(vals)):
        groups.setdefault(root(i), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


@dataclass
class PlotCurve:
    """One curve to draw in a panel (:func:`draw_curves`).

    Attributes:
        gid: its identity (the curve's label), set as the line's gid.
        name: its legend name.
        x, y: its data.
        style: its :class:`pgfl.style.CurveStyle`.
        zorder: drawing order (references underneath).
        ref: the name other curves' coincidence notes use for it (default: ``name``).

    """

    gid: str
    name: str
    x: np.ndarray
    y: np.ndarray
    style: CurveStyle
    zorder: float = 2.0
    ref: str = ""


def draw_curves(
    ax: Axes, items: Sequence[PlotCurve], *, log: bool = False, sparse: bool = True
) -> list[tuple[str, str]]:
    """Draw curves in one panel; curves that coincide stay visible.

    Curves of identical style get distinct dash patterns; coinciding ones
    (:func:`coinciding`) interleaved dashes and larger markers underneath. ``sparse``:
    about :data:`MARKS` markers per curve, staggered between schemes.

    Returns:
        ``(later gid, earlier gid)`` for every pair of curves that coincide.

    """
    groups = coinciding([c.y for c in items], log=log) if len(items) > 1 else []
    rank = {}
    for g in groups:
        for k, i in enumerate(g):
            rank[i] = (k, len(g), g[0])
    seen: dict[tuple, int] = {}
    pairs = [(items[b].gid, items[a].gid) for g in groups for a, b in itertools.combinations(g, 2)]
    for i, c in enumerate(items):
        style = c.style
        key = (style.color, str(style.linestyle), style.marker, style.alpha)
        dup = seen.get(key, 0)
        seen[key] = dup + 1
        if dup:
            style = replace(style, linestyle=_DUPLICATE_STYLES[(dup - 1) % len(_DUPLICATE_STYLES)])
        k, size, _ = rank.get(i, (0, 1, i))
        legend_kw = style.kwargs()
        style = coincidence_style(style, k, size)
        kw = style.kwargs()
        n = len(c.x)
        if sparse and n > 2 * MARKS:
            step = max(1, n // MARKS)
            offset = (style.phase * step // len(SCHEMES) + k * step // max(size, 1)) % step
            kw["markevery"] = (offset, step)
        (line,) = ax.plot(c.x, c.y, label=c.name, zorder=c.zorder + 0.1 * k, **kw)
        line.set_gid(c.gid)
        line.pgfl_legend = legend_kw  # the legend shows the curve's own style
    return pairs


class Coincidences:
    """Which curves coincide in which panels of a figure, for the legend's notes."""

    def __init__(self, compact: Callable[[list[Any]], list[str]] | None = None) -> None:
        self.pairs: dict[tuple[str, str], list[Any]] = {}
        self.drawn: dict[str, set[Any]] = {}
        self.names: dict[str, str] = {}
        self.compact = compact or (lambda panels: [str(p) for p in panels])

    def add(self, panel: Any, items: Sequence[PlotCurve], pairs: Sequence[tuple[str, str]]) -> None:
        """Record a panel's curves and the pairs of them that coincide there."""
        for c in items:
            self.drawn.setdefault(c.gid, set()).add(panel)
            self.names.setdefault(c.gid, c.ref or c.name)
        for pair in pairs:
            self.pairs.setdefault(pair, []).append(panel)

    def label(self, gid: str, name: str) -> str:
        """``name`` with "(coincides with X)" for the earlier curves X it coincides with.

        The partner coinciding in the most panels first, then others only for panels not
        covered yet (coincidence is transitive: the partners' own notes tell the rest).
        Where two coincide in only some of the panels both are drawn in, the note names
        those panels.
        """
        partners = sorted(
            ((b, panels) for (a, b), panels in self.pairs.items() if a == gid),
            key=lambda bp: -len(bp[1]),
        )
        notes, covered = [], set()
        for b, panels in partners:
            if set(panels) <= covered:
                continue
            covered |= set(panels)
            common = self.drawn.get(gid, set()) & self.drawn.get(b, set())
            where = "" if set(panels) >= common else " in " + ", ".join(self.compact(panels))
            notes.append(self.names.get(b, b) + where)
        return f"{name} (coincides with {'; with '.join(notes)})" if notes else name


def legend_handles(lines: Sequence[Any]) -> tuple[list[Any], list[str]]:
    """One handle per gid in the curve's own style (not its coincidence style), and labels."""
    from matplotlib.lines import Line2D  # lazy: matplotlib, only to draw

    seen: dict[str, Any] = {}
    for ln in lines:
        gid = ln.get_gid()
        if gid is not None and gid not in seen:
            seen[gid] = ln
    handles = [
        Line2D([], [], **getattr(ln, "pgfl_legend", {"color": ln.get_color()}), gid=gid)
        for gid, ln in seen.items()
    ]
    return handles, [ln.get_label() for ln in seen.values()]


def _wrap(text: str, width: int = 44) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def save_figure(fig: Figure, path: str | Path, *, dpi: int = 110) -> Path:
    """Write ``fig`` to ``path`` atomically (format from the suffix, PNG without one).

    The figure is drawn into a temporary file beside ``path`` and renamed over it
    (:func:`pgfl.files.replacing`), so an interrupted run never leaves a truncated figure.
    Folders are created; the figure is closed. Returns the path.
    """
    plt = _plt()
    path = Path(path)
    try:
        with replacing(path, binary=True) as fh:
            fig.savefig(fh, dpi=dpi, format=path.suffix[1:].lower() or "png")
    finally:
        plt.close(fig)
    return path


def _styles(curves: Sequence[Mapping[str, Any]]) -> list[CurveStyle]:
    """Each curve's style; unknown labels get distinct fallback colours."""
    out: list[CurveStyle] = []
    taken: list[str] = []
    for c in curves:
        s = entry_style(c, taken)
        if not s.scheme:
            taken.append(s.color)
        out.append(s)
    return out


def _base_label(label: str) -> str:
    """A curve's label without its parenthetical variant: ``local (grid)`` → ``local``."""
    return label.split(" (", 1)[0]
