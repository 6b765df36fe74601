"""One visual style per privacy scheme, shared by every figure pgfl draws.

A curve's *scheme* decides its colour and marker; its *variant* (what is shared, the noise
distribution, the horizon) decides the line style; everything else a figure needs to tell
curves of one scheme apart (a swept value) is an alpha or a panel, never another colour.
So the same scheme has the same colour in every figure: graph-homomorphic noise is blue in
``figure.png``, ``sweep.png``, ``frontier.png`` and the ε plots alike.

Colours are Okabe & Ito's colour-blind-safe set for the schemes pgfl runs today (with Paul
Tol's red for random noise, further from the client noise's orange than Okabe & Ito's
vermillion) and Paul Tol's for the schemes reserved for later (no set of twelve colours is
colour-blind-safe, so every scheme also has its own marker shape):

=====================  =========  ======  ==================================================
scheme                 colour     marker  what
=====================  =========  ======  ==================================================
none                   #000000    o       no privacy (black: the reference)
client_noise           #E69F00    v       client Laplace/Gaussian noise on models or updates
secure_aggregation     #56B4E9    P       secure aggregation alone
hybrid                 #009E73    D       secure aggregation + graph-homomorphic
graph_homomorphic      #0072B2    s       graph-homomorphic server noise
random                 #CC3311    ^       random (iid) server noise
random_per_link        #CC79A7    >       independent noise per link
central_dp             #332288    h       reserved
local_dp               #999933    p       reserved (also graph learning's noisy statistic)
pairwise_cancelling    #AA3377    d       reserved
gossip                 #661100    X       reserved
topology_optimized     #888888    star    reserved
=====================  =========  ======  ==================================================

Variants are line styles: models ``-``, updates ``--``; Gaussian noise draws the dash-dot
(models) or dotted (updates) line and hollow markers, Laplace solid or dashed lines and
filled markers; a shorter horizon (T/10 next to T) a thinner, lighter line.

A curve's scheme is read from its ``summary.json`` entry's ``settings`` (``client_noise``,
``server_noise``, ``share``, ...; :func:`scheme_of`); figures that only have labels fall
back on the label (``"hybrid@1"``, ``"noisy_updates"``, ``"random_gaussian"``). Unknown
labels get colours from :data:`FALLBACK_COLORS`, starting at a place fixed by the label
(:func:`fallback_color`), so the same unknown label keeps its colour too.

This module imports nothing from pgfl and not matplotlib: styles are plain values
(colour strings, matplotlib line-style specs) handed to ``Axes.plot`` by the callers.

Example:
    >>> s = curve_style({"client_noise": "gaussian", "share": "updates", "server_noise": "none"})
    >>> s.scheme, s.color, s.linestyle, s.markerfacecolor
    ('client_noise', '#E69F00', ':', 'white')
    >>> curve_style(label="hybrid@0.5").color == SCHEMES["hybrid"].color
    True

"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "FALLBACK_COLORS",
    "GRAPH_METHODS",
    "SCHEMES",
    "CurveStyle",
    "SchemeStyle",
    "add_style",
    "coincidence_style",
    "curve_style",
    "fallback_color",
    "method_style",
    "remove_style",
    "scheme_of",
    "variant_of",
]


@dataclass(frozen=True)
class SchemeStyle:
    """What every curve of one scheme shares.

    Attributes:
        name: the scheme's key (``"graph_homomorphic"``).
        words: a short description for captions.
        color: a hex colour.
        marker: a matplotlib marker.

    """

    name: str
    words: str
    color: str
    marker: str


#: Schemes by key, in a fixed order (the order also staggers markers between schemes).
SCHEMES: dict[str, SchemeStyle] = {
    s.name: s
    for s in (
        SchemeStyle("none", "no privacy", "#000000", "o"),
        SchemeStyle("client_noise", "client Laplace/Gaussian noise", "#E69F00", "v"),
        SchemeStyle("secure_aggregation", "secure aggregation", "#56B4E9", "P"),
        SchemeStyle("hybrid", "secure aggregation + graph-homomorphic", "#009E73", "D"),
        SchemeStyle("graph_homomorphic", "graph-homomorphic server noise", "#0072B2", "s"),
        SchemeStyle("random", "random server noise", "#CC3311", "^"),
        SchemeStyle("random_per_link", "per-link server noise", "#CC79A7", ">"),
        SchemeStyle("central_dp", "central DP", "#332288", "h"),
        SchemeStyle("local_dp", "local DP", "#999933", "p"),
        SchemeStyle("pairwise_cancelling", "pairwise-cancelling noise", "#AA3377", "d"),
        SchemeStyle("gossip", "gossip", "#661100", "X"),
        SchemeStyle("topology_optimized", "topology-optimized noise", "#888888", "*"),
        SchemeStyle(
            "distributed_dp", "distributed DP (noise shares in secure aggregation)", "#117733", "<"
        ),
        SchemeStyle("skellam", "distributed DP with Skellam shares", "#44AA99", "H"),
    )
}

#: Colours for labels that name no scheme (none of them a scheme's), tried in turn from a
#: place fixed by the label.
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
_RESERVED = ("central_dp", "local_dp", "pairwise_cancelling", "gossip", "topology_optimized")

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


def _scheme_from_label(label: str) -> str:
    """The scheme a label names, ``""`` if none (the label-based fallback)."""
    s = _norm(label).split("@")[0]
    for name in sorted(SCHEMES, key=len, reverse=True):  # random_per_link before random
        if name != "none" and name in s:
            return name
    if "per_link" in s or "perlink" in s:
        return "random_per_link"
    if "graph_homomorphic" in s or s.startswith("gh") or "homomorphic" in s:
        return "graph_homomorphic"
    if "secure_aggregation" in s or "secagg" in s:
        return "secure_aggregation"
    if s.startswith(("random", "iid", "independent")):
        return "random"
    if s.startswith(("client", "noisy_model", "noisy_update")):
        return "client_noise"
    if s.startswith("central"):
        return "central_dp"
    if s.startswith("local"):
        return "local_dp"
    if s.startswith(("none", "no_noise", "no_privacy", "non_private", "nonprivate")):
        return "none"
    return ""


def scheme_of(settings: Mapping[str, Any] | None = None, label: str | None = None) -> str:
    """The scheme of a curve: from its ``settings`` if given, else from its label.

    Client noise (Laplace, Gaussian) is ``client_noise``; secure aggregation with
    graph-homomorphic server noise ``hybrid``, alone ``secure_aggregation``; otherwise the
    server noise names the scheme (client noise added to server noise counts as the server
    scheme). A setting (``scheme``, ``server_noise``, ``client_noise``) equal to a reserved
    name (``central_dp``, ``local_dp``, ``pairwise_cancelling``, ``gossip``,
    ``topology_optimized``) gives that scheme; any other scheme name is its own key (a
    registered mechanism's declared ``style``, else a colour of its own from its name,
    :func:`curve_style`). ``""``: unknown.

    Example:
        >>> scheme_of({"client_noise": "secure_aggregation", "server_noise": "graph_homomorphic"})
        'hybrid'
        >>> scheme_of({"client_noise": "laplace", "server_noise": "random"})
        'random'
        >>> scheme_of(label="noisy_updates"), scheme_of(label="fig3 thing")
        ('client_noise', '')
        >>> scheme_of({"server_noise": "staircase"})   # a new scheme: its own colour
        'staircase'

    """
    if not settings:
        return _scheme_from_label(label or "")
    for key in ("scheme", "server_noise", "client_noise"):
        if settings.get(key) in _RESERVED:
            return settings[key]
    if settings.get("scheme") in SCHEMES:
        return settings["scheme"]
    client = settings.get("client_noise", "none")
    server = settings.get("server_noise", "none")
    if client == "secure_aggregation" and server in ("none", "graph_homomorphic"):
        return "secure_aggregation" if server == "none" else "hybrid"
    if server == "central":  # privacy.server_noise = "central": the trusted aggregator
        return "central_dp"
    if server != "none":  # a registered scheme's name is its style's key
        return str(server)
    if client in ("laplace", "gaussian"):
        return "client_noise"
    if client == "distributed_gaussian":
        return "distributed_dp"
    if client == "skellam":
        return "skellam"
    return str(client)


def variant_of(settings: Mapping[str, Any] | None = None, label: str | None = None) -> dict:
    """The variant of a curve: ``share`` (models/updates) and ``distribution``.

    ``distribution`` is the client noise's when clients add noise, else the server's
    (``server_distribution``); where ``settings`` do not say (a run's ``settings`` do not
    record the server distribution), a label naming ``gaussian`` or ``laplace`` does.

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
    if client in ("laplace", "gaussian"):
        dist = client
    else:
        dist = settings.get("server_distribution") or settings.get("distribution")
        if dist is None:
            dist = "gaussian" if "gaussian" in text else "laplace"
    return {"share": share, "distribution": dist}


def add_style(style: SchemeStyle) -> None:
    """Give scheme ``style.name`` its style (a mechanism's declared ``style``, at registration).

    >>> add_style(SchemeStyle("mine", "my scheme", "#123456", "o")); SCHEMES["mine"].color
    '#123456'
    >>> remove_style("mine"); "mine" in SCHEMES
    False
    """
    if SCHEMES.get(style.name, style) != style:
        raise ValueError(f"scheme {style.name!r} has a style already")
    SCHEMES[style.name] = style


def remove_style(name: str) -> None:
    """Remove a style :func:`add_style` gave."""
    SCHEMES.pop(name, None)


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
    their privacy scheme's colour: the noisy last local step (``fedgl_local_dp``,
    mechanism ``last_step``) is client noise on an update, the once-noised statistic
    (``fedgl_local_dp_statistic``, mechanism ``statistic``) local DP.

    Example:
        >>> method_style("fedgl_local_dp_statistic").color == SCHEMES["local_dp"].color
        True
        >>> method_style("fedgl_consensus").linestyle
        '--'

    """
    base = label.split("@")[0]
    if base in GRAPH_METHODS:
        color, ls, marker = GRAPH_METHODS[base]
        return CurveStyle("none", color, ls, marker, phase=0)
    if "dp" in base.split("_"):
        statistic = mechanism == "statistic" or base.endswith("statistic")
        scheme = SCHEMES["local_dp" if statistic else "client_noise"]
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
