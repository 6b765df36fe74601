"""Sweeps and slopes, read from saved results.

Which curves form a sweep (:func:`find_sweeps`), the slope of a steady state in dB per
decade, power-law ranges, a scheme in words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pgfl.style import SCHEMES

if TYPE_CHECKING:
    pass


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

#: Local slopes (dB/decade) of a power-law range differ by at most this much.
SLOPE_TOLERANCE = 2.5


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
