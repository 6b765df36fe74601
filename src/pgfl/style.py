"""One visual style per privacy scheme, shared by every figure pgfl draws.

A curve's *scheme* decides its colour and marker; its *variant* (what is shared, the noise
distribution, the horizon) decides the line style; everything else a figure needs to tell
curves of one scheme apart (a swept value) is an alpha or a panel, never another colour.
So the same scheme has the same colour in every figure: graph-homomorphic noise is blue in
``figure.png``, ``sweep.png``, ``frontier.png`` and the ε plots alike.

A scheme's style (:class:`SchemeStyle`: colour, marker, words, the label patterns that
name it) is declared by its mechanism (``Mechanism.style``, :mod:`pgfl.privacy.mechanisms`)
and joins :data:`SCHEMES` when the mechanism is registered (:func:`add_style`); a
scheme that is two mechanisms together (secure aggregation with graph-homomorphic
noise) is a style naming the pair (:attr:`SchemeStyle.of`). This module names no scheme:
the built-in colours are listed in ``docs/privacy.md`` ("Figure colours"), Okabe & Ito's
colour-blind-safe set for the papers' schemes and Paul Tol's for the later ones (no set of
twelve colours is colour-blind-safe, so every scheme also has its own marker shape). The
styles are read on first use: :data:`SCHEMES` runs the sources given to
:func:`add_source` (``pgfl/__init__.py`` gives the registry) before it answers.

Variants are line styles: models ``-``, updates ``--``; Gaussian noise draws the dash-dot
(models) or dotted (updates) line and hollow markers, Laplace solid or dashed lines and
filled markers; a shorter horizon (T/10 next to T) a thinner, lighter line.

A curve's scheme is read from its ``summary.json`` entry's ``settings`` (``client_noise``,
``server_noise``, ``share``, ...; :func:`scheme_of`); figures that only have labels fall
back on the label (``"hybrid@1"``, ``"noisy_updates"``, ``"random_gaussian"``: the
patterns the styles declare). A scheme without a declared style, and an unknown label, get
colours from :data:`FALLBACK_COLORS`, starting at a place fixed by the name
(:func:`fallback_color`), so the same name keeps its colour too.

This module imports nothing from pgfl and not matplotlib: styles are plain values
(colour strings, matplotlib line-style specs) handed to ``Axes.plot`` by the callers.

Example:
    >>> s = curve_style({"client_noise": "gaussian", "share": "updates", "server_noise": "none"})
    >>> s.scheme, s.color == SCHEMES["client_noise"].color, s.linestyle, s.markerfacecolor
    ('client_noise', True, ':', 'white')
    >>> curve_style(label="hybrid@0.5").color == SCHEMES["hybrid"].color
    True

"""

from __future__ import annotations

import fnmatch
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "FALLBACK_COLORS",
    "GRAPH_METHODS",
    "NONE",
    "SCHEMES",
    "CurveStyle",
    "SchemeStyle",
    "add_source",
    "add_style",
    "coincidence_style",
    "curve_style",
    "fallback_color",
    "method_style",
    "named",
    "remove_style",
    "scheme_of",
    "variant_of",
]


@dataclass(frozen=True)
class SchemeStyle:
    """What every curve of one scheme shares (a mechanism's declared ``style``).

    Attributes:
        name: the scheme's key (``"graph_homomorphic"``).
        words: a short description for captions.
        color: a hex colour.
        marker: a matplotlib marker.
        order: its place among the schemes (:data:`SCHEMES` is kept in this order, which
            staggers sparse markers between schemes, :attr:`CurveStyle.phase`); ``None``:
            after the ordered ones, in the order they were added.
        labels: the patterns (:mod:`fnmatch`, on the label in lower case with ``_`` for
            ``-`` and spaces, before any ``@``) of the labels that name the scheme in a
            figure without settings; ``None``: its name anywhere (``"*name*"``).
        of: ``(client scheme, server scheme)``: the scheme a curve is when it runs these
            two together (secure aggregation with graph-homomorphic noise is ``hybrid``);
            ``()``: none.

    """

    name: str
    words: str
    color: str
    marker: str
    order: int | None = None
    labels: tuple[str, ...] | None = None
    of: tuple[str, ...] = ()

    def patterns(self) -> tuple[str, ...]:
        """The label patterns that name the scheme (:attr:`labels`, else its name anywhere)."""
        return (f"*{self.name}*",) if self.labels is None else self.labels


class _Styles(Mapping[str, SchemeStyle]):
    """The schemes' styles by key, in their declared order; filled by :func:`add_style`.

    Every read first runs the sources :func:`add_source` gave (once each), so that the
    styles the mechanisms declare are there whichever module reads first.
    """

    def __init__(self) -> None:
        self._styles: dict[str, SchemeStyle] = {}
        self._named: dict[tuple[str, str], str] = {}
        self._sources: list[Callable[[], object]] = []

    def _ready(self) -> dict[str, SchemeStyle]:
        while self._sources:
            self._sources.pop(0)()
        return self._styles

    def __getitem__(self, name: str) -> SchemeStyle:
        return self._ready()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ready())

    def __len__(self) -> int:
        return len(self._ready())

    def __repr__(self) -> str:
        return f"SCHEMES({list(self)})"

    def add(self, style: SchemeStyle) -> None:
        """Add ``style`` (an error if its key has another), keeping the declared order."""
        if self._styles.get(style.name, style) != style:
            raise ValueError(f"scheme {style.name!r} has a style already")
        self._styles[style.name] = style
        ordered = sorted(self._styles.values(), key=lambda s: (s.order is None, s.order or 0))
        self._styles = {s.name: s for s in ordered}

    def remove(self, name: str) -> None:
        """Remove the style of ``name`` (if any), and the names drawn in it."""
        self._styles.pop(name, None)
        self._named = {k: v for k, v in self._named.items() if v != name}

    def assign(self, level: str, names: Iterable[str], scheme: str) -> None:
        """``names`` of ``level`` draw in ``scheme``."""
        self._named.update(((level, n), scheme) for n in names)

    def named(self, level: str, name: str) -> str:
        """The scheme ``name`` of ``level`` draws in (:func:`named`)."""
        self._ready()
        return self._named.get((level, name), name)

    def source(self, source: Callable[[], object]) -> None:
        """Run ``source`` before the next read."""
        self._sources.append(source)


_STYLES = _Styles()
#: Schemes by key, in their declared order (:attr:`SchemeStyle.order`; the order also
#: staggers markers between schemes). Read-only: :func:`add_style` fills it.
SCHEMES: Mapping[str, SchemeStyle] = _STYLES


#: The configuration's name for "no noise" at a level (``privacy.*_noise``'s default): the
#: server level names a curve's scheme unless it is this.
NONE = "none"

#: Colours for names with no declared style (none of them a scheme's), tried in turn from
#: a place fixed by the name.
FALLBACK_COLORS = (
    "#4477AA",
    "#EE6677",
    "#228833",
    "#CCBB44",
    "#66CCEE",
    "#997700",
    "#555555",
)
_FALLBACK_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")

#: Graph-topology learning's methods (``pgfl.graphlearn``): the non-private ones in black
#: and greys (no privacy, like ``none``), told apart by marker and line style; the DP
#: variants take the colour of their privacy scheme (:func:`method_style`).
GRAPH_METHODS: dict[str, tuple[str, str, str]] = {
    "fedgl_local": ("#000000", "-", "o"),
    "fedgl": ("#000000", "-", "o"),
    "fedgl_consensus": ("#000000", "--", "D"),
    "igl": ("#777777", "-", "s"),
    "fedavg": ("#777777", "-.", "^"),
}

# (share, distribution) -> line style
_LINESTYLE = {
    ("models", "laplace"): "-",
    ("models", "gaussian"): "-.",
    ("updates", "laplace"): "--",
    ("updates", "gaussian"): ":",
}
_DISTRIBUTIONS = {dist for _, dist in _LINESTYLE}


@dataclass(frozen=True)
class CurveStyle:
    """How to draw one curve: pass :meth:`kwargs` to ``Axes.plot``.

    Attributes:
        scheme: a key of :data:`SCHEMES`, or ``""`` for an unknown label.
        color: the scheme's colour (the same for every variant and swept value).
        linestyle: a matplotlib line style (the variant).
        marker: the scheme's marker.
        markerfacecolor: the colour, or ``"white"`` (hollow) for Gaussian noise.
        linewidth: line width in points.
        alpha: opacity (a swept value or a shorter horizon is lighter).
        phase: the scheme's place in :data:`SCHEMES`, to stagger sparse markers.
        markersize: marker size in points.

    """

    scheme: str
    color: str
    linestyle: Any = "-"
    marker: str = "o"
    markerfacecolor: str = ""
    linewidth: float = 1.4
    alpha: float = 1.0
    phase: int = 0
    markersize: float = 5.0

    def kwargs(self, *, markers: bool = True) -> dict[str, Any]:
        """Keyword arguments for ``Axes.plot`` (``markers=False``: no marker)."""
        kw: dict[str, Any] = {
            "color": self.color,
            "linestyle": self.linestyle,
            "linewidth": self.linewidth,
            "alpha": self.alpha,
        }
        if markers:
            kw.update(
                marker=self.marker,
                markersize=self.markersize,
                markerfacecolor=self.markerfacecolor or self.color,
                markeredgecolor=self.color,
            )
        return kw


def _norm(text: str) -> str:
    return text.lower().replace("-", "_").replace(" ", "_")


def _rank(pattern: str, name: str) -> int:
    """0: the scheme's name anywhere in a label; 1: another word anywhere; 2: a start."""
    if pattern == f"*{name}*":
        return 0
    return 1 if pattern.startswith("*") and pattern.endswith("*") else 2


def _scheme_from_label(label: str) -> str:
    """The scheme a label names, ``""`` if none (the label-based fallback).

    Every style's patterns (:meth:`SchemeStyle.patterns`) are tried: a scheme's name
    anywhere (``*name*``) first, then its other words anywhere (``*word*``), then the
    starts (``word*``); the longer first within each (``random_per_link`` before
    ``random``), ties in :data:`SCHEMES` order.

    >>> _scheme_from_label("gh@0.1"), _scheme_from_label("non-iid data")
    ('graph_homomorphic', '')
    """
    s = _norm(label).split("@")[0]
    patterns = [(p, style.name) for style in SCHEMES.values() for p in style.patterns()]
    patterns.sort(key=lambda pn: (_rank(*pn), -len(pn[0].strip("*"))))
    return next((name for p, name in patterns if fnmatch.fnmatchcase(s, p)), "")


def scheme_of(settings: Mapping[str, Any] | None = None, label: str | None = None) -> str:
    """The scheme of a curve: from its ``settings`` if given, else from its label.

    Each level's setting (``client_noise``, ``server_noise``) names a scheme
    (:func:`named`: the style its mechanism declares; a name not there is its own key). A
    style declared for the pair (:attr:`SchemeStyle.of`) names the curve's scheme;
    otherwise the server's scheme does, unless it is :data:`NONE`, and then the client's
    (client noise added to server noise counts as the server scheme). A ``scheme`` setting
    that is a style's key gives that scheme. A name with no declared style is its own key
    (a colour of its own from its name, :func:`curve_style`). ``""``: unknown.

    Example:
        >>> scheme_of({"client_noise": "secure_aggregation", "server_noise": "graph_homomorphic"})
        'hybrid'
        >>> scheme_of({"client_noise": "laplace", "server_noise": "random"})
        'random'
        >>> scheme_of({"server_noise": "central"}), scheme_of({"client_noise": "skellam"})
        ('central_dp', 'skellam')
        >>> scheme_of(label="noisy_updates"), scheme_of(label="fig3 thing")
        ('client_noise', '')
        >>> scheme_of({"server_noise": "staircase"})   # a new scheme: its own colour
        'staircase'

    """
    if not settings:
        return _scheme_from_label(label or "")
    if settings.get("scheme") in SCHEMES:
        return settings["scheme"]
    client = str(settings.get("client_noise", NONE))
    server = str(settings.get("server_noise", NONE))
    pair = (named("client", client), named("server", server))
    combined = [s.name for s in SCHEMES.values() if s.of == pair]
    return combined[0] if combined else pair[1] if server != NONE else pair[0]


def variant_of(settings: Mapping[str, Any] | None = None, label: str | None = None) -> dict:
    """The variant of a curve: ``share`` (models/updates) and ``distribution``.

    ``distribution`` is the client noise's when the client noise is named by its
    distribution (``laplace``, ``gaussian``), else the server's (``server_distribution``);
    where ``settings`` do not say (a run's ``settings`` do not record the server
    distribution), a label naming ``gaussian`` or ``laplace`` does.

    Example:
        >>> variant_of({"share": "updates", "client_noise": "gaussian"})
        {'share': 'updates', 'distribution': 'gaussian'}
        >>> variant_of({"server_noise": "random"}, "random_gaussian@1")
        {'share': 'models', 'distribution': 'gaussian'}

    """
    settings = settings or {}
    text = _norm(label or "")
    share = settings.get("share") or ("updates" if "update" in text else "models")
    client = settings.get("client_noise")
    if client in _DISTRIBUTIONS:
        dist = client
    else:
        dist = settings.get("server_distribution") or settings.get("distribution")
        if dist is None:
            dist = "gaussian" if "gaussian" in text else "laplace"
    return {"share": share, "distribution": dist}


def add_style(style: SchemeStyle, level: str = "", names: Iterable[str] = ()) -> None:
    """Give scheme ``style.name`` its style; ``names`` of ``level`` draw in it (:func:`named`).

    Called when a mechanism is registered, with its declared ``style`` and its
    configuration names. A different style under the same key is an error; the same one
    again (two mechanisms of one scheme) only adds names.

    >>> add_style(SchemeStyle("mine", "my scheme", "#123456", "o"), "server", ["my_noise"])
    >>> SCHEMES["mine"].color, scheme_of({"server_noise": "my_noise"})
    ('#123456', 'mine')
    >>> remove_style("mine"); "mine" in SCHEMES, named("server", "my_noise")
    (False, 'my_noise')
    """
    _STYLES.add(style)
    _STYLES.assign(level, names, style.name)


def remove_style(name: str) -> None:
    """Remove a style :func:`add_style` gave, and the configuration names drawn in it."""
    _STYLES.remove(name)


def named(level: str, name: str) -> str:
    """The key of the scheme a configuration name of ``level`` draws in (its own if none).

    ``level``: ``"client"`` or ``"server"`` (``privacy.client_noise`` /
    ``privacy.server_noise``), or another user's own vocabulary (graph learning's
    mechanisms); filled by :func:`add_style`.

    >>> named("client", "gaussian"), named("server", "staircase")
    ('client_noise', 'staircase')
    """
    return _STYLES.named(level, name)


def add_source(source: Callable[[], object]) -> None:
    """Run ``source`` (it adds styles: imports the registry) before :data:`SCHEMES` is read.

    Each source runs once, at the first read after it was given: the package gives the
    mechanisms' registry (``pgfl/__init__.py``), so that a figure drawn from any entry
    point has the declared styles, while this module stays below the mechanisms.
    """
    _STYLES.source(source)


def fallback_color(label: str, taken: Iterable[str] = ()) -> str:
    """A colour for a label that names no scheme: from :data:`FALLBACK_COLORS`.

    The search starts at a place fixed by the label (CRC-32), so a label keeps its colour
    from figure to figure, and skips the colours in ``taken`` (those already used in the
    figure) while any is left.

    Example:
        >>> fallback_color("pld") == fallback_color("pld")
        True
        >>> fallback_color("pld", taken=[fallback_color("pld")]) != fallback_color("pld")
        True

    """
    taken = set(taken)
    start = zlib.crc32(label.encode()) % len(FALLBACK_COLORS)
    order = FALLBACK_COLORS[start:] + FALLBACK_COLORS[:start]
    return next((c for c in order if c not in taken), order[0])


def curve_style(
    settings: Mapping[str, Any] | None = None,
    label: str | None = None,
    *,
    horizon: str = "full",
    taken: Iterable[str] = (),
) -> CurveStyle:
    """The style of a curve from its ``settings`` (else its label).

    Args:
        settings: the curve's ``settings`` in ``summary.json`` (or ``None``).
        label: its label (the fallback when ``settings`` are missing; also the source of
            a variant the settings do not record, and of an unknown label's colour).
        horizon: ``"full"`` (T) or ``"short"`` (T/10 next to T): thinner and lighter.
        taken: colours already used in the figure (only unknown labels avoid them).

    Returns:
        A :class:`CurveStyle`.

    """
    scheme = scheme_of(settings, label)
    var = variant_of(settings, label)
    ls = _LINESTYLE.get((var["share"], var["distribution"]), "-")
    hollow = var["distribution"] == "gaussian"
    if scheme in SCHEMES:
        base = SCHEMES[scheme]
        color, marker, phase = base.color, base.marker, list(SCHEMES).index(scheme)
    elif scheme:  # a scheme without a declared style: a colour of its own, from its name
        color = fallback_color(scheme)
        phase = FALLBACK_COLORS.index(color)
        marker = _FALLBACK_MARKERS[phase % len(_FALLBACK_MARKERS)]
    else:
        color = fallback_color(label or "", taken)
        phase = FALLBACK_COLORS.index(color)
        marker = _FALLBACK_MARKERS[phase % len(_FALLBACK_MARKERS)]
    style = CurveStyle(scheme, color, ls, marker, "white" if hollow else "", phase=phase)
    if horizon == "short":
        style = replace(style, linewidth=0.9, alpha=0.6)
    return style


def method_style(label: str, mechanism: str | None = None) -> CurveStyle:
    """The style of a graph-learning method (``summary.json`` curve labels).

    Non-private methods (:data:`GRAPH_METHODS`) are black or grey; the DP variants take
    the colour of the scheme their mechanism draws in (:func:`named` at level
    ``"graphlearn"``, declared with the schemes' styles): the noisy last local step
    (``fedgl_local_dp``, mechanism ``last_step``) is client noise on an update, the
    once-noised statistic (``fedgl_local_dp_statistic``, mechanism ``statistic``) local DP.

    Example:
        >>> method_style("fedgl_local_dp_statistic").color == SCHEMES["local_dp"].color
        True
        >>> method_style("fedgl_consensus").linestyle
        '--'

    """
    base = label.split("@")[0]
    if base in GRAPH_METHODS:
        color, ls, marker = GRAPH_METHODS[base]
        return CurveStyle(NONE, color, ls, marker, phase=0)
    if "dp" in base.split("_"):
        statistic = mechanism == "statistic" or base.endswith("statistic")
        kind = "statistic" if statistic else "last_step"
        scheme = SCHEMES[named("graphlearn", kind)]
        return CurveStyle(scheme.name, scheme.color, "--", scheme.marker, phase=1)
    return curve_style(label=label)


def coincidence_style(style: CurveStyle, rank: int, size: int) -> CurveStyle:
    """The style of the ``rank``-th of ``size`` curves that coincide to plotting precision.

    The first keeps its line, drawn underneath; each later one is a dash pattern that
    leaves gaps for the ones before it (offset by its rank), so every colour shows along
    the common line. Markers shrink with the rank so earlier ones show as rings.

    Example:
        >>> s = coincidence_style(curve_style(label="hybrid"), 1, 2)
        >>> s.linestyle, s.markersize
        ((0.0, (4.0, 4.0)), 5.0)
        >>> coincidence_style(curve_style(label="none"), 0, 2).markersize
        9.0

    """
    if size < 2:
        return style
    bigger = replace(style, markersize=style.markersize + 4.0 * (size - 1 - rank) / (size - 1))
    if rank == 0:
        return bigger
    dash = 4.0
    return replace(bigger, linestyle=(dash * (rank - 1), (dash, dash * (size - 1))))
