"""Figures made from saved results (``summary.json`` + ``curves.csv``), never from memory.

Every curve is drawn in the style of its privacy scheme (:mod:`pgfl.style`): the same
scheme has the same colour in every figure; line styles tell variants apart (models or
updates, Laplace or Gaussian); a swept value is an opacity, never another colour.
Curves that coincide to plotting precision are drawn with interleaved dashes and
staggered markers so that each stays visible, and their legend entry says
"(coincides with X)".

Figures of a run (:func:`plot_run`):

* ``figure.png``: the metrics of ``summary["plot"]`` against the iteration, one column per
  metric. With more than :data:`PLAIN_CURVES` curves and a detected sweep, small
  multiples: one row per swept scheme (its curves in its colour, lighter for smaller
  values, with the noise-free reference in black) and one legend per row.
* ``sweep.png`` (only when a sweep is detected): the steady-state value of each metric
  against the swept parameter on a log axis, one line per scheme. For a metric in dB a
  small panel below shows the *local* slope between neighbouring points in dB per decade,
  and the legend gives a power-law slope only over the ranges where the local slopes
  agree (:func:`power_law_ranges`); the step-size laws of "Privatized Graph Federated
  Learning" (Rizk, Vlaski & Sayed, arXiv:2203.07105, §4) are such ranges: an ``O(μ)``
  steady state rises by 10 dB per decade of μ, an ``O(1/μ)`` one falls by 10.

Other figures: :func:`plot_frontier` (``frontier.png`` of ``pgfl reproduce frontier``, from
its ``summary.json``), :func:`plot_epsilon_curves` (ε(i) per curve or accountant),
:func:`plot_audit_tradeoff` (an audit's attack against the accountants' trade-off curves)
and :func:`plot_muffliato` (``pgfl reproduce muffliato``: ε_{u→v} by graph distance).

Sweeps are inferred from each curve's ``settings`` in ``summary.json`` (no config key):
see :func:`find_sweeps`.
"""

from __future__ import annotations

import functools
import itertools
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pgfl.files import read_csv, read_json, replacing
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

#: Parameters a sweep can run over: (axis label, symbol in legends).
SWEPT = {
    "mu": ("step size μ", "μ"),
    "server_variance": ("server noise variance σ_g²", "σ_g²"),
    "client_variance": ("client noise variance σ²", "σ²"),
    "target_epsilon": ("target ε (noise calibrated to it)", "ε*"),
}

#: A variance setting and the level of the scheme it is the noise level of.
_LEVEL_OF = {"server_variance": "server", "client_variance": "client"}


def _registered(level: str, name: str) -> Any:
    """The mechanism class registered as ``name`` at ``level`` (``None``: unknown)."""
    from pgfl.privacy import mechanisms  # lazy: the registry, dp_accounting (startup)

    return mechanisms.REGISTRY[level].get(name)


def _varies(settings: Mapping[str, Any], variance: str) -> bool:
    """Whether ``variance`` has an effect: the curve's scheme calibrates it (its declaration).

    A scheme the registry does not know (an older run's) counts as noisy unless ``"none"``.
    """
    level = _LEVEL_OF[variance]
    name = settings.get(f"{level}_noise", "none")
    cls = _registered(level, name)
    return name != "none" if cls is None else cls.calibrates == f"privacy.{variance}"


#: A sweep line needs at least this many distinct positive values of its parameter.
MIN_SWEEP_POINTS = 3

#: Up to this many curves, ``figure.png`` keeps one panel per metric with every curve.
PLAIN_CURVES = 6
#: More curves than this in one panel (no sweep to group them by): one row per scheme.
MAX_PANEL_CURVES = 10

#: Two curves coincide when they differ by at most this fraction of the panel's y range
#: (about two pixels of a panel 400 pixels high).
COINCIDE = 0.005

#: Up to this many lines, a sweep panel's legend sits inside it (more: beside it).
INSIDE_LEGEND = 4

#: Local slopes (dB/decade) of a power-law range differ by at most this much.
SLOPE_TOLERANCE = 2.5

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


# --- slopes ---------------------------------------------------------------------------------


def slope_db_per_decade(x: Sequence[float], y_db: Sequence[float]) -> float:
    """Least-squares slope of ``y_db`` against ``log10(x)``: dB per decade of ``x``.

    Fits ``y ≈ a + s·log10 x`` over the points where both are finite and ``x > 0``;
    ``s = Σ(t − t̄)(y − ȳ) / Σ(t − t̄)²`` with ``t = log10 x``. A steady state ``∝ x^k`` has
    ``s = 10k`` (``O(μ)``: +10, ``O(1/μ)``: −10). NaN with fewer than two distinct ``x``.
    Meaningful only where a power law holds: see :func:`power_law_ranges`.

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


def local_slopes(x: Sequence[float], y_db: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Slopes between neighbouring finite points, in dB per decade, at their geometric means.

    Example:
        >>> mid, s = local_slopes([0.01, 0.1, 1, 10], [0, 0, 10, 20])
        >>> mid.round(3).tolist(), s.round(6).tolist()
        ([0.032, 0.316, 3.162], [0.0, 10.0, 10.0])

    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y_db, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0)
    t, y = np.log10(x[ok]), y[ok]
    if t.size < 2:
        return np.zeros(0), np.zeros(0)
    return 10 ** ((t[1:] + t[:-1]) / 2), np.diff(y) / np.diff(t)


@dataclass(frozen=True)
class PowerLaw:
    """A range of a sweep over which the steady state follows a power law.

    Attributes:
        lo, hi: the range of the swept value (points at both ends included).
        slope: the least-squares slope over the range's points, dB per decade.
        points: how many points the range holds.

    """

    lo: float
    hi: float
    slope: float
    points: int


def power_law_ranges(
    x: Sequence[float],
    y_db: Sequence[float],
    *,
    tolerance: float = SLOPE_TOLERANCE,
    min_points: int = MIN_SWEEP_POINTS,
) -> list[PowerLaw]:
    """The ranges where a power law holds: consecutive local slopes that agree.

    Left to right, a range grows while the largest and smallest local slope
    (:func:`local_slopes`) in it differ by at most ``tolerance`` dB/decade; a range of at
    least ``min_points`` points is kept (its slope is :func:`slope_db_per_decade` of its
    points) and the next one starts at its last point. A flat-then-rising curve gives a
    flat range and a rising one, never one slope across the bend; a curve that bends
    everywhere gives none.

    Example:
        >>> r = power_law_ranges([0.001, 0.01, 0.1, 1, 10], [-44, -44, -44, -34, -24])
        >>> [(p.lo, p.hi, round(p.slope, 6)) for p in r]
        [(0.001, 0.1, 0.0), (0.1, 10.0, 10.0)]
        >>> power_law_ranges([0.1, 1, 10, 100], [0, 1, 6, 16])
        []

    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y_db, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0)
    x, y = x[ok], y[ok]
    order = np.argsort(x)
    x, y = x[order], y[order]
    _, s = local_slopes(x, y)
    out: list[PowerLaw] = []
    i = 0
    while i < s.size:
        j = i
        while j + 1 < s.size and max(s[i : j + 2]) - min(s[i : j + 2]) <= tolerance:
            j += 1
        if j - i + 2 >= min_points:
            pts = slice(i, j + 2)
            fit = slope_db_per_decade(x[pts], y[pts])
            out.append(PowerLaw(float(x[i]), float(x[j + 1]), fit, j - i + 2))
            i = j + 1
        else:
            i += 1
    return out


def _power_law_text(laws: Sequence[PowerLaw], x: Sequence[float], sym: str) -> str:
    """Legend text of a line's power-law ranges ("+10.0 dB/dec" over the whole range)."""
    if not laws:
        return "no power-law range"
    lo, hi = min(x), max(x)
    parts = []
    for p in laws:
        text = f"{p.slope:+.1f} dB/dec"
        if (p.lo, p.hi) != (lo, hi):
            text += f" for {sym} {p.lo:g}–{p.hi:g}"
        parts.append(text)
    return ", ".join(parts)


# --- schemes and sweeps ----------------------------------------------------------------------


def scheme_label(settings: Mapping[str, Any]) -> str:
    """The privacy scheme of a curve in words: client level (with what is shared), server level.

    A server noise distribution other than Laplace is named in brackets.

    Example:
        >>> scheme_label({"share": "updates", "client_noise": "laplace", "server_noise": "none"})
        'noisy updates (laplace)'
        >>> scheme_label({"share": "models", "client_noise": "none", "server_noise": "random"})
        'random'
        >>> scheme_label({"server_noise": "random", "server_distribution": "gaussian"})
        'random (gaussian)'
        >>> scheme_label({"client_noise": "secure_aggregation", "share": "updates"})
        'secure aggregation of updates'

    """
    client = settings.get("client_noise", "none")
    server = settings.get("server_noise", "none")
    share = settings.get("share", "models")
    parts = []
    cls = _registered("client", client) if client != "none" else None
    if cls is not None and cls.calibrates is None:  # no noise of its own
        words = SCHEMES[client].words if client in SCHEMES else client.replace("_", " ")
        parts.append(words + ("" if share == "models" else f" of {share}"))
    elif client != "none":
        parts.append(f"noisy {share} ({client})")
    elif share != "models":
        parts.append(f"sharing {share}")
    if server != "none":
        dist = settings.get("server_distribution") or "laplace"
        parts.append(server + ("" if dist == "laplace" else f" ({dist})"))
    return " + ".join(parts) or "no noise"


def _relevant(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A curve's settings as sweeps see them.

    Variances without effect (their noise is off, or calibrated to a target ε) are None;
    ``target_epsilon`` (kept beside the settings in ``summary.json``) is added; a server
    distribution the settings do not record is read from the label (``random_gaussian``).
    """
    s = dict(entry["settings"])
    s["target_epsilon"] = entry.get("target_epsilon")
    if s.get("server_noise", "none") != "none" and "server_distribution" not in s:
        label = str(entry.get("label", "")).lower()
        s["server_distribution"] = "gaussian" if "gaussian" in label else "laplace"
    for variance in _LEVEL_OF:
        if not _varies(s, variance):
            s[variance] = None
    if s["target_epsilon"] is not None:
        s["server_variance"] = s["client_variance"] = None
    return s


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def find_sweeps(curves: Sequence[Mapping[str, Any]]) -> list[Sweep]:
    """The sweeps in a run's curves, inferred from their ``settings``.

    For each parameter of :data:`SWEPT` (μ, the two noise variances, and the target ε that
    ``summary.json`` keeps beside the settings), curves are grouped by all their other
    settings; a group whose curves have distinct, positive values of the parameter, at
    least :data:`MIN_SWEEP_POINTS` of them, is one line. A variance counts only where its
    noise is on and not calibrated to a target ε. A group where two curves share a value
    differs in something ``settings`` does not record, so it is no sweep. Curves without
    ``settings`` are ignored.

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
    settings = [_relevant(c) if "settings" in c else None for c in curves]
    sweeps = []
    for p in SWEPT:
        groups: dict[tuple, list[int]] = {}
        for i, s in enumerate(settings):
            if s is None or not _value(s.get(p)) > 0:  # off (None), zero or negative
                continue
            key = tuple(sorted(((k, v) for k, v in s.items() if k != p), key=repr))
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
    """Curves with the swept variance's noise off and otherwise a line's settings.

    For a target-ε sweep: the curves without any privacy whose other settings (what is
    shared aside: without noise sharing models or updates is the same) equal a line's.
    """
    if p not in _LEVEL_OF and p != "target_epsilon":
        return ()
    noise = (
        ("client_noise", "server_noise", "share", "server_distribution", "client_variance",
         "server_variance")
        if p == "target_epsilon"
        else (f"{_LEVEL_OF[p]}_noise", "server_distribution")
    )  # fmt: skip
    in_lines = {i for _, idx, _ in found for i in idx}

    def rest(s: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in s.items() if k not in (p, *noise)}

    def off(s: Mapping[str, Any]) -> bool:
        if p == "target_epsilon":
            return s.get("client_noise") == "none" and s.get("server_noise") == "none"
        return s.get(p) is None

    line_rests = [rest(fixed) for fixed, _, _ in found]
    return tuple(
        i
        for i, s in enumerate(settings)
        if s is not None and i not in in_lines and off(s) and rest(s) in line_rests
    )


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


# --- figure.png as steady states (figure = "steady") ------------------------------------------

#: Markers of the variants of a scheme in :func:`steady_figure` (by topology, else in order).
VARIANT_MARKERS = {"ring": "o", "grid": "s", "complete": "^", "torus": "D", "star": "*"}
_MORE_MARKERS = ("v", "P", "X", "h", "<", ">")


def _base_label(label: str) -> str:
    """A curve's label without its parenthetical variant: ``local (grid)`` → ``local``."""
    return label.split(" (", 1)[0]


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
    in rank order (``<metric>_rank`` of :func:`pgfl.experiments.frontier.rank_schemes`:
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

    The summary is :func:`pgfl.experiments.frontier.frontier_summary`'s (``curves`` with
    ``label`` = scheme, ``setup``, ``iterations``, ``x`` = target ε and the metrics;
    ``baselines``; ``delta``; ``accountant``; ``setups``). Returns the path.
    """
    return save_figure(frontier_figure(summary), path, dpi=dpi)


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

    ``result`` is a :class:`pgfl.experiments.audit.AuditResult`: for each accountant with a
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
