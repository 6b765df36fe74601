"""The privacy–utility frontier: every scheme calibrated to the same ε, utility against ε.

The papers compare schemes at equal noise *variance* (Rizk, Vlaski & Sayed, "Privatized
Graph Federated Learning", arXiv:2203.07105, §V); a user picks a target *ε*. For each
target ε* ∈ :data:`EPSILONS` at δ = 10⁻⁵ and a fixed number of iterations T, each scheme's
noise variance is the smallest with ε(T) ≤ ε* by the tight accountant (``pld``;
:func:`pgfl.privacy.accounting.calibrate`, bracketing and root-finding on the accountant's
own ε), then the real engine runs every scheme × ε as curves of one vectorized
:func:`pgfl.engine.simulate` (one batch: the curves share topology, data and schedule,
and common random numbers), and the steady-state centroid MSD (eq. 58), average
individual MSD (eq. 59) and, on the classification set-up, the centroid's test error are
plotted against ε, one line per scheme.

The ε of different schemes are *not* the same guarantee: each covers one link against
one adversary (:data:`SCHEMES` ``scope``, ``docs/privacy.md``). A client-level ε protects
a client against its own server; a server-level ε protects a unit's clients (together)
against the other servers and eavesdroppers, and graph-homomorphic noise does not cover
the centroid at all (it cancels there, eq. 46). The frontier is read along a scheme's line
and across schemes only for the adversary that matters to the user.

The schemes are read from the registry (:data:`SCHEMES`, :func:`registered_schemes`):
each mechanism class declares its lines (:attr:`pgfl.privacy.mechanisms.Mechanism.frontier`,
a :class:`~pgfl.privacy.mechanisms.base.FrontierLine` each), so a scheme registered later
is drawn with no edit here; ``pgfl reproduce frontier`` keeps the papers' nine
(:data:`PAPER_SCHEMES`). With a :class:`Tuning`, every point of a scheme's knob grid
(:func:`knob_grid`: the step size and the mechanism's own knobs) is calibrated to the
same ε and run, and the scheme is reported at its best point (:func:`choose`), searched on
the private data or on a synthetic proxy of the same shape (:func:`proxy_seed`).

Set-ups (:data:`SETUPS`): ``regression`` (preprint Fig. 2: P = 10, K = 100, L = 11,
μ = 0.7, B = 2) and ``logistic`` (conference Fig. 2: P = 10, K = 50, L = 10, μ = 0.1,
B = 5, a test set). Iteration counts: the papers' T = 1000 and T/10 (privacy favours
short runs: the same ε buys less noise per round); ``quick`` uses 200 and 20 with one
repetition.

Only ε(T) matters here, so the sub-runs read ε at iterations 1 and T only
(``privacy.epsilon_checkpoints = 2``; their ``curves.csv`` reports ε(T) from iteration 2
on, an upper bound).

Each (set-up, T) is an ordinary experiment run by :mod:`pgfl.apps.runner` in
``<out>/<setup>-T<T>/`` (its own ``summary.json``, partial files, ``--resume``); the
whole frontier is one owned output folder (:mod:`pgfl.folders`): its sub-runs and its own
files are written in the staging folder and replace the folder's only when the whole
frontier is done. The frontier's ``summary.json`` in ``<out>`` has ``curves`` entries
``{"label": scheme, "setup", "iterations", "x": [ε*...], "centroid_msd_db": [...],
"individual_msd_db": [...], "noise_variance": [...], "epsilon": [...], ...}`` with every
list aligned with ``x`` (``null`` where the run diverged); ``frontier.csv`` holds the same
points, ``frontier.png`` the figure.

>>> cfg = frontier_config("regression", 50, quick=True, epsilons=(1.0, 10.0),
...                       schemes=("random", "client_gaussian_models"))
>>> [c.label for c in cfg.curves]
['none', 'random@1', 'random@10', 'client_gaussian_models@1', 'client_gaussian_models@10']
>>> cfg.curves[1].privacy.target_epsilon, cfg.iterations
(1.0, 50)
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pgfl.apps.runner import run_plan
from pgfl.experiments.catalog import FRONTIER_TITLES
from pgfl.experiments.config import ExperimentConfig
from pgfl.experiments.loader import parse_config
from pgfl.experiments.partial import remove_partial
from pgfl.experiments.plan import Plan, prepare_experiment
from pgfl.experiments.presets import preset_text
from pgfl.files import write_csv, write_json
from pgfl.folders import STAGE, Output, check_output, digest_of, staged
from pgfl.plots import plot_frontier
from pgfl.privacy import mechanisms
from pgfl.privacy.mechanisms.base import FrontierLine
from pgfl.privacy.secagg.config import encodes_fixed_point
from pgfl.rng import stream
from pgfl.validation import ConfigError, check_choice, did_you_mean

__all__ = [
    "DELTA",
    "EPSILONS",
    "FrontierPlan",
    "PRESETS",
    "SCHEMES",
    "TITLES",
    "SETUPS",
    "Scheme",
    "coverage",
    "frontier_config",
    "frontier_configs",
    "frontier_summary",
    "plot_frontier",
    "prepare_frontier",
    "protecting",
    "rank_schemes",
    "run_frontier",
    "run_prepared_frontier",
]

#: Target ε values (the x axis).
EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0, 50.0)
#: δ of every target.
DELTA = 1e-5
#: The accountant the noise is calibrated with and whose ε is reported in ``epsilon``.
ACCOUNTANT = "pld"


@dataclass(frozen=True)
class Scheme:
    """One line of the frontier: a registered mechanism's :class:`FrontierLine` and its class.

    Attributes:
        name: the ``label`` of its frontier curves.
        legend: a short legend entry (mechanism; adversary).
        scope: what the ε protects and against whom (the caption).
        settings: the curve's settings by dotted name (``privacy.target_epsilon`` added
            per point).
        knobs: the settings tuning searches besides the step size, with their default grids.
        mechanism: the mechanism class whose noise a ``target_epsilon`` calibrates.
        by_adversary: drawn in ``pgfl reproduce frontier-adversary`` (its declaration).

    """

    name: str
    legend: str
    scope: str
    settings: Mapping[str, Any]
    knobs: Mapping[str, tuple[Any, ...]]
    mechanism: type[mechanisms.Mechanism]
    by_adversary: bool = False

    @property
    def privacy(self) -> dict[str, Any]:
        """The line's ``[privacy]`` settings (without the section)."""
        return {k[8:]: v for k, v in self.settings.items() if k.startswith("privacy.")}


def _lines(cls: type[mechanisms.Mechanism]) -> dict[str, FrontierLine]:
    """The frontier lines ``cls`` declares itself (:attr:`Mechanism.frontier`, not inherited).

    Undeclared: one line per name, without knobs, if it calibrates a noise level.
    """
    declared = vars(cls).get("frontier")
    if declared is not None:
        return dict(declared)
    if cls.calibrates is None:
        return {}
    return {n: FrontierLine({f"privacy.{cls.level}_noise": n}) for n in cls.names}


def registered_schemes() -> dict[str, Scheme]:
    """Every registered mechanism's frontier lines, in registration order (client level first).

    Read from the registry (:mod:`pgfl.privacy.mechanisms`) at each call, so a scheme
    registered later (a plug-in, a test) is on the frontier with no edit here.

    >>> s = registered_schemes()
    >>> s["random_gaussian"].privacy, s["hybrid"].mechanism.__name__
    ({'server_noise': 'random', 'server_distribution': 'gaussian'}, 'GraphHomomorphic')
    >>> s["pairwise_cancelling"].knobs
    {'privacy.pairwise_ratio': (0.0, 1.0, 2.0, 4.0, 8.0)}
    """
    out: dict[str, Scheme] = {}
    for table in (mechanisms.CLIENT, mechanisms.SERVER):
        for cls in dict.fromkeys(table.values()):  # a class once, whatever its names
            for name, line in _lines(cls).items():
                scope = line.scope or getattr(cls, "scope", "") or cls.covers
                out[name] = Scheme(name, line.legend or name, scope, dict(line.settings),
                                   dict(line.knobs), cls, line.by_adversary)  # fmt: skip
    return out


class _Registered(Mapping[str, Scheme]):
    """:func:`registered_schemes` as a mapping read at each use (never a stale copy)."""

    def __getitem__(self, name: str) -> Scheme:
        return registered_schemes()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(registered_schemes())

    def __len__(self) -> int:
        return len(registered_schemes())


#: The schemes the frontier can draw, by name: every registered mechanism's lines.
SCHEMES: Mapping[str, Scheme] = _Registered()
#: The schemes of ``pgfl reproduce frontier`` (the papers' and their variants), in legend order.
PAPER_SCHEMES = (
    "client_laplace_models", "client_gaussian_models", "client_laplace_updates",
    "client_gaussian_updates", "random", "random_gaussian", "random_per_link",
    "graph_homomorphic", "hybrid",
)  # fmt: skip


@dataclass(frozen=True)
class Setup:
    """A data/training set-up: the preset it comes from and what it changes in it.

    Attributes:
        preset: the paper preset whose topology, data and training it uses.
        description: one line for titles.
        secagg_clip: secure aggregation's clipping bound (models grow with the noise).
        training: settings that replace the preset's ``[training]`` ones.
        privacy: settings every privatized curve gets (e.g. ``neighbours``).
        iterations: the run lengths (default: the preset's T and T/10).

    """

    preset: str
    description: str
    secagg_clip: float
    training: Mapping[str, Any] = field(default_factory=dict)
    privacy: Mapping[str, Any] = field(default_factory=dict)
    iterations: tuple[int, ...] | None = None


#: The set-ups: the topology, data and training of a paper preset (its privacy dropped).
SETUPS: dict[str, Setup] = {
    "regression": Setup(
        "fig2", "least squares, preprint Fig. 2 (P=10, K=100, L=11, mu=0.7, B=2)", 1e6
    ),
    "logistic": Setup(
        "hybrid", "logistic regression, conference Fig. 2 (P=10, K=50, L=10, mu=0.1, B=5)", 1e6
    ),
    "regression-record": Setup(
        "fig2",
        "least squares, Fig. 2's data, one full-batch step per round, record-level "
        "neighbours (mu=0.7, B=1)",
        1e6,
        training={"epochs": 1, "batch": "full", "clip_norm": 1.0},
        privacy={"neighbours": "record"},
        iterations=(300,),
    ),
}
#: The papers' set-ups, those of ``pgfl reproduce frontier``.
PAPER_SETUPS = ("regression", "logistic")


def _label(scheme: str, eps: float, knobs: Mapping[str, Any] | None = None) -> str:
    """``SCHEME@EPS``, then ``|SETTING=VALUE`` per knob of a tuned point."""
    tail = "".join(f"|{k}={v:.6g}" if isinstance(v, float) else f"|{k}={v}"
                   for k, v in (knobs or {}).items())  # fmt: skip
    return f"{scheme}@{eps:g}{tail}"


def iteration_counts(setup: str, quick: bool) -> tuple[int, int]:
    """(the papers' T, T/10); ``quick``: (200, 20).

    >>> iteration_counts("regression", False), iteration_counts("regression", True)
    ((1000, 100), (200, 20))
    """
    if SETUPS[setup].iterations is not None:
        return SETUPS[setup].iterations
    if quick:
        return (200, 20)
    T = int(tomllib.loads(preset_text(SETUPS[setup].preset))["iterations"])
    return (T, T // 10)


@dataclass(frozen=True)
class Tuning:
    """How the frontier tunes each scheme at equal ε (``pgfl privacy frontier --tune``).

    Per scheme, set-up, T and target ε, every point of the scheme's knob grid
    (:func:`knob_grid`) is calibrated to the same ε and run; the frontier reports the point
    with the lowest ``metric``. Tuning on the private data spends privacy too (the chosen
    point depends on it, and no ε here counts that); ``on = "proxy"`` searches on
    synthetic data of the same shape drawn from another seed (:func:`proxy_seed`) and
    runs only the chosen points on the real data.

    Attributes:
        metric: what the best point minimises (``centroid_msd_db``, ``individual_msd_db``,
            ``test_error``).
        on: ``"private"`` (the search runs on the real data) or ``"proxy"``.
        grid: settings whose grid replaces the default one, each with its values; a
            ``training.*`` setting is searched for every scheme, another for the schemes
            that declare it a knob.

    """

    metric: str = "centroid_msd_db"
    on: str = "private"
    grid: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_choice("--tune-for", self.metric, tuple(METRIC_QUANTITY))
        check_choice("--tune-on", self.on, TUNE_ON)
        for name, values in self.grid.items():
            if not values or len(set(values)) != len(values):
                raise ConfigError(f"--grid {name}: give distinct values; got {list(values)}")


#: Where tuning searches: the private data itself, or a synthetic proxy of the same shape.
TUNE_ON = ("private", "proxy")
#: The step sizes tuning searches by default, as multiples of the set-up's μ.
MU_FACTORS = (0.25, 0.5, 1.0, 2.0)
#: How tuning on the proxy chose, printed with its results.
PROXY_NOTE = (
    "the knobs were chosen on synthetic data of the same shape drawn from another root seed "
    "(the search is in <setup>-T<T>-proxy), then only the chosen points ran on the real data"
)
#: What tuning on the private data costs, printed with its results (docs/privacy.md).
TUNING_SPENDS = (
    "tuning on the private data spends privacy too: the chosen point depends on the data "
    "and no epsilon here counts that (--tune-on proxy searches on synthetic data instead)"
)


def knob_grid(
    scheme: str, mu: float, grid: Mapping[str, Sequence[Any]] | None = None
) -> dict[str, tuple]:
    """The settings tuning searches for ``scheme`` and their values (the product is searched).

    The step size ``training.mu`` (:data:`MU_FACTORS` times the set-up's ``mu``) and the
    scheme's own knobs (:attr:`Scheme.knobs`); ``grid`` replaces a default grid, adds a
    ``training.*`` setting to every scheme, and another knob to the schemes that declare it.

    >>> knob_grid("gossip", 0.4)
    {'training.mu': (0.1, 0.2, 0.4, 0.8), 'privacy.gossip_steps': (1, 2, 4)}
    >>> knob_grid("random", 0.4, {"training.mu": (0.3,), "privacy.gossip_steps": (2,)})
    {'training.mu': (0.3,)}
    """
    out: dict[str, tuple] = {"training.mu": tuple(f * mu for f in MU_FACTORS)}
    out.update(SCHEMES[scheme].knobs)
    for name, values in (grid or {}).items():
        if name in out or name.startswith("training."):
            out[name] = tuple(values)
    return out


def proxy_seed(seed: int) -> int:
    """The root seed of the synthetic proxy tuning searches on (keyed on ``seed``, never it).

    >>> proxy_seed(0) != 0, proxy_seed(0) == proxy_seed(0)
    (True, True)
    """
    drawn = int(stream(seed, "frontier.proxy").integers(1, 2**31))
    return drawn if drawn != seed else drawn + 1


def _points(grid: Mapping[str, tuple]) -> list[dict[str, Any]]:
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


def _curve(scheme: Scheme, eps: float, knobs: Mapping[str, Any], adversary: str | None,
           tuned: bool) -> dict[str, Any]:  # fmt: skip
    """One curve of the frontier: the scheme's settings and knobs, its target ε."""
    curve: dict[str, Any] = {"label": _label(scheme.name, eps, knobs if tuned else None)}
    sections: dict[str, dict[str, Any]] = {"privacy": {}}
    for key, value in {**scheme.settings, **knobs}.items():
        section, _, name = key.partition(".")
        sections.setdefault(section, {})[name] = value
    sections["privacy"]["target_epsilon"] = float(eps)
    if adversary is not None:
        sections["privacy"]["adversary"] = adversary
    return curve | sections


def frontier_config(
    setup: str,
    iterations: int,
    *,
    quick: bool = False,
    seed: int | None = None,
    epsilons: Sequence[float] = EPSILONS,
    schemes: Sequence[str] | None = None,
    repetitions: int | None = None,
    mu: float | None = None,
    adversary: str | None = None,
    tuning: Tuning | None = None,
    chosen: Mapping[tuple[str, float], Mapping[str, Any]] | None = None,
) -> ExperimentConfig:
    """The experiment of one (set-up, T): a non-private curve and every scheme × ε*.

    Curve labels are ``none`` and ``SCHEME@EPS``; each private curve has
    ``privacy.target_epsilon = EPS`` at δ = :data:`DELTA`, so the runner calibrates its
    noise (:func:`pgfl.experiments.build.curve_settings`). ``repetitions`` (default:
    the preset's, 1 if ``quick``) and ``mu`` (default: the preset's step size) override
    the set-up. With ``adversary``, every scheme's noise is calibrated to what that
    adversary observes (``privacy.adversary``: amplification by client sampling where it
    holds). With ``tuning``, one curve ``SCHEME@EPS|SETTING=VALUE...`` per point of the
    scheme's :func:`knob_grid` (on ``tuning.on = "proxy"``, with the root seed
    :func:`proxy_seed`); with ``chosen`` (``(scheme, ε) → knobs``), only those points.
    Validated like any config.
    """
    if setup not in SETUPS:
        raise ConfigError(
            f"frontier set-up must be one of {', '.join(SETUPS)}; got {setup!r}"
            + did_you_mean(setup, SETUPS)
        )
    names = list(PAPER_SCHEMES) if schemes is None else list(schemes)
    known = registered_schemes()
    for name in names:
        if name not in known:
            raise ConfigError(
                f"frontier scheme must be one of {', '.join(known)}; got {name!r}"
                + did_you_mean(name, known)
            )
    base = tomllib.loads(preset_text(SETUPS[setup].preset))
    reps = repetitions if repetitions is not None else (1 if quick else base["repetitions"])
    plot = ["centroid_msd_db", "individual_msd_db"]
    if setup == "logistic":
        plot.append("test_error")
    # the frontier reads ε at T only; ε(i) before T is reported as ε(T), an upper bound
    privacy: dict[str, Any] = {
        "delta": DELTA,
        "accountants": [ACCOUNTANT],
        "epsilon_checkpoints": 2,
        **SETUPS[setup].privacy,
    }
    noises = ({"privacy.client_noise": known[n].privacy.get("client_noise", "none")} for n in names)
    if any(encodes_fixed_point(c) for c in noises):
        privacy["secagg_clip"] = SETUPS[setup].secagg_clip  # models grow with the noise
    training = {**base["training"], **SETUPS[setup].training, **({} if mu is None else {"mu": mu})}
    root = base["seed"] if seed is None else seed
    proxy = tuning is not None and tuning.on == "proxy" and chosen is None
    if tuning is not None:
        _check_tuning(tuning, [known[n] for n in names], setup, plot, base["data"]["kind"])
    curves: list[dict[str, Any]] = [{"label": "none"}]
    for name in names:
        grid = knob_grid(name, training["mu"], tuning.grid) if tuning else {}
        for eps in epsilons:
            if chosen is not None:
                points = [dict(chosen[(name, float(eps))])]
            else:
                points = _points(grid)
            for knobs in points:
                curves.append(_curve(known[name], eps, knobs, adversary, tuning is not None))
    raw = {
        "name": f"frontier-{setup}-T{iterations}" + ("-proxy" if proxy else ""),
        "title": f"privacy-utility frontier: {SETUPS[setup].description}, T={iterations}"
        + (" (tuning on a synthetic proxy)" if proxy else ""),
        "seed": proxy_seed(root) if proxy else root,
        "iterations": iterations,
        "repetitions": reps,
        "plot": plot,
        "topology": base["topology"],
        "data": base["data"],
        "training": training,
        "privacy": privacy,
        "curves": curves,
    }
    return parse_config(raw)


def _check_tuning(
    tuning: Tuning, schemes: Sequence[Scheme], setup: str, plot: Sequence[str], data: str
) -> None:
    """A grid setting some scheme drawn searches, a metric the set-up measures, a proxy."""
    knobs = sorted({k for s in schemes for k in s.knobs})
    for name in tuning.grid:
        if not name.startswith("training.") and name not in knobs:
            raise ConfigError(
                f"--grid {name}: not a knob of any scheme drawn (theirs: "
                f"{', '.join(knobs) or 'none'}; a training.* setting applies to all)"
            )
    if tuning.metric not in plot:
        raise ConfigError(f"--tune-for {tuning.metric}: set-up {setup} does not measure it "
                          f"(it measures {', '.join(plot)})")  # fmt: skip
    if tuning.on == "proxy" and data not in SYNTHETIC:
        raise ConfigError(f"--tune-on proxy needs synthetic data ({', '.join(SYNTHETIC)}); "
                          f"set-up {setup} has data.kind = {data!r}")  # fmt: skip


#: Data kinds drawn from a seed, that a synthetic proxy of the same shape can replace.
SYNTHETIC = ("regression", "logistic")


def frontier_configs(
    *,
    quick: bool = False,
    seed: int | None = None,
    setups: Sequence[str] = PAPER_SETUPS,
    iterations: Sequence[int] | None = None,
    epsilons: Sequence[float] | None = None,
    schemes: Sequence[str] | None = None,
    repetitions: int | None = None,
    mu: float | None = None,
    adversary: str | None = None,
    tuning: Tuning | None = None,
    chosen: Mapping[tuple[str, int, str, float], Mapping[str, Any]] | None = None,
) -> dict[str, ExperimentConfig]:
    """The experiments of the frontier by sub-folder name ``<setup>-T<T>``.

    ``iterations`` default: :func:`iteration_counts` of each set-up; the other arguments
    as in :func:`frontier_config`. Tuning on a proxy (``tuning.on = "proxy"``): without
    ``chosen``, the search, in ``<setup>-T<T>-proxy``; with ``chosen`` (``(setup, T,
    scheme, ε) → knobs``, :func:`choose`), the chosen points on the real data.
    """
    out = {}
    for setup in setups:
        if setup not in SETUPS:
            raise ConfigError(
                f"frontier set-up must be one of {', '.join(SETUPS)}; got {setup!r}"
                + did_you_mean(setup, SETUPS)
            )
        for T in iterations or iteration_counts(setup, quick):
            mine = None
            if chosen is not None:
                mine = {(n, e): k for (s, t, n, e), k in chosen.items() if (s, t) == (setup, T)}
            cfg = frontier_config(
                setup, T, quick=quick, seed=seed, epsilons=epsilons or EPSILONS, schemes=schemes,
                repetitions=repetitions, mu=mu, adversary=adversary, tuning=tuning, chosen=mine,
            )  # fmt: skip
            out[f"{setup}-T{T}" + ("-proxy" if cfg.name.endswith("-proxy") else "")] = cfg
    return out


def _split(label: str) -> tuple[str, float, list[str]]:
    """(scheme, ε, knob names) of a curve label ``SCHEME@EPS|SETTING=VALUE...``."""
    head, *knobs = label.split("|")
    name, _, eps = head.rpartition("@")
    return name, float(eps), [k.partition("=")[0] for k in knobs]


def grid_points(
    runs: Mapping[str, tuple[ExperimentConfig, Mapping[str, Any]]],
) -> list[dict[str, Any]]:
    """Every private curve of the runs as a point: scheme, set-up, T, ε, knobs and its entry.

    The knobs' values are the curve's own settings (never parsed back from its label).
    """
    points = []
    for key, (cfg, summary) in runs.items():
        setup = key.removesuffix("-proxy").rpartition("-T")[0]
        settings = {c.label: c.values() for c in cfg.curves}
        for entry in summary["curves"]:
            if entry["label"] == "none":
                continue
            name, eps, knobs = _split(entry["label"])
            points.append({"scheme": name, "setup": setup, "iterations": cfg.iterations,
                           "target_epsilon": eps,
                           "knobs": {k: settings[entry["label"]][k] for k in knobs},
                           "entry": entry})  # fmt: skip
    return points


def choose(points: Sequence[Mapping[str, Any]], metric: str) -> dict[tuple, dict[str, Any]]:
    """The best point per (set-up, T, scheme, ε): the lowest ``metric`` (``knobs`` of it).

    A diverged point (``null``) is never chosen over one that did not diverge; ties keep
    the grid's order (the first).

    >>> pts = [{"setup": "s", "iterations": 5, "scheme": "a", "target_epsilon": 1.0,
    ...         "knobs": {"training.mu": m}, "entry": {"c": v}}
    ...        for m, v in ((0.1, -3.0), (0.2, None), (0.4, -5.0), (0.8, -5.0))]
    >>> choose(pts, "c")
    {('s', 5, 'a', 1.0): {'training.mu': 0.4}}
    """
    best: dict[tuple, Mapping[str, Any]] = {}
    for p in points:
        key = (p["setup"], p["iterations"], p["scheme"], p["target_epsilon"])
        v = p["entry"].get(metric)
        old = best.get(key)
        w = None if old is None else old["entry"].get(metric)
        if old is None or (v is not None and (w is None or v < w)):
            best[key] = p
    return {k: dict(p["knobs"]) for k, p in best.items()}


#: The quantity each frontier metric is about (:data:`pgfl.privacy.mechanisms.QUANTITIES`).
METRIC_QUANTITY = {
    "centroid_msd_db": "centroid",
    "individual_msd_db": "models",
    "test_error": "centroid",
}


def coverage(scheme: str) -> tuple[str, dict[str, str]]:
    """What a frontier scheme's ε covers in words, and the metrics it does not cover, with why.

    Read from the calibrated mechanism's own declarations (its ``covers`` and
    ``uncovered``, :class:`pgfl.privacy.mechanisms.Mechanism`): a metric is covered when
    its quantity (:data:`METRIC_QUANTITY`) is.

    >>> coverage("random")[1]
    {}
    >>> words, uncovered = coverage("graph_homomorphic")
    >>> sorted(uncovered), "not the network average" in words
    (['centroid_msd_db', 'individual_msd_db', 'test_error'], True)
    """
    cls = _calibrated_class(scheme)
    words = "".join([cls.covers, *(f"; not {why}" for why in cls.uncovered.values())])
    return words, {
        m: f"not protected: {cls.uncovered[q]}"
        for m, q in METRIC_QUANTITY.items()
        if q in cls.uncovered
    }


def rank_schemes(curves: Sequence[dict[str, Any]]) -> None:
    """Rank the schemes per set-up, T, metric and target ε; write ``<metric>_rank`` in place.

    Rank 1 is the lowest value among the schemes whose ε covers the metric
    (``<metric>_covered``); a scheme that diverged comes after the covered ones that did
    not, and every scheme whose ε does not cover the metric comes after every covered one
    (so it is never ranked first, whatever its value). Ties keep the schemes' order.

    >>> cs = [{"setup": "s", "iterations": 1, "x": [1.0], "centroid_msd_db": [v],
    ...        "centroid_msd_db_covered": ok} for v, ok in ((-1.0, True), (-3.0, False),
    ...                                                      (None, True), (2.0, True))]
    >>> rank_schemes(cs)
    >>> [c["centroid_msd_db_rank"] for c in cs]
    [[1], [4], [3], [2]]
    """
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for c in curves:
        groups.setdefault((c["setup"], c["iterations"]), []).append(c)
    for group in groups.values():
        for metric in METRIC_QUANTITY:
            have = [c for c in group if metric in c]
            for c in have:
                c[f"{metric}_rank"] = [None] * len(c["x"])
            for x in {x for c in have for x in c["x"]}:
                points = [(c, c["x"].index(x)) for c in have if x in c["x"]]
                points.sort(key=lambda p: (not p[0][f"{metric}_covered"],
                                           p[0][metric][p[1]] is None,
                                           p[0][metric][p[1]] or 0.0))  # fmt: skip
                for rank, (c, j) in enumerate(points, start=1):
                    c[f"{metric}_rank"][j] = rank


def frontier_summary(
    runs: Mapping[str, tuple[ExperimentConfig, Mapping[str, Any]]],
    *,
    quick: bool,
    tuning: Tuning | None = None,
    search: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The frontier's summary from the runs' summaries (``key → (config, summary)``).

    One ``curves`` entry per scheme, set-up and T; lists aligned with ``x`` (target ε):
    ``centroid_msd_db``, ``individual_msd_db`` (``null`` where diverged), ``test_error``
    (logistic), ``noise_variance`` (of the calibrated link), ``epsilon`` (reported by
    :data:`ACCOUNTANT`), ``diverged``; per metric ``<metric>_covered`` (whether the ε covers
    the metric's quantity, :func:`coverage`) and ``<metric>_rank`` (:func:`rank_schemes`);
    ``epsilon_covers``, what the ε covers in words. ``baselines`` holds the non-private
    curve per run. With ``tuning``, each scheme is reported at its best point per ε
    (:func:`choose`; ``knobs`` aligned with ``x``), and ``tuning`` says how it was tuned
    and lists every point searched (``search``: the proxy's points, else ``runs``').
    """
    curves: list[dict[str, Any]] = []
    baselines: list[dict[str, Any]] = []
    points = grid_points(runs)
    chosen = choose(points, tuning.metric if tuning else "centroid_msd_db")
    for key, (cfg, summary) in runs.items():
        setup = key.rpartition("-T")[0]
        for entry in summary["curves"]:
            if entry["label"] == "none":
                base = {k: entry.get(k) for k in ("centroid_msd_db", "individual_msd_db")}
                if "test_error" in entry:
                    base["test_error"] = entry["test_error"]
                baselines.append({"setup": setup, "iterations": cfg.iterations, **base})
    by_scheme: dict[tuple[str, int, str], list[Mapping[str, Any]]] = {}
    for p in points:
        k = (p["setup"], p["iterations"], p["scheme"], p["target_epsilon"])
        if chosen[k] == p["knobs"]:
            by_scheme.setdefault(k[:3], []).append(p)
    for (setup, T, name), mine in by_scheme.items():
        mine.sort(key=lambda p: p["target_epsilon"])
        entries = [p["entry"] for p in mine]
        scheme = SCHEMES[name]
        item: dict[str, Any] = {
            "label": name,
            "setup": setup,
            "iterations": T,
            "repetitions": runs[f"{setup}-T{T}"][0].repetitions,
            "x": [p["target_epsilon"] for p in mine],
            "centroid_msd_db": [e["centroid_msd_db"] for e in entries],
            "individual_msd_db": [e["individual_msd_db"] for e in entries],
            "noise_variance": [e.get("noise_variance") for e in entries],
            "epsilon": [e.get("epsilon", {}).get(ACCOUNTANT) for e in entries],
            "diverged": [bool(e["diverged"]) for e in entries],
            "legend": scheme.legend,
            "scope": scheme.scope,
        }
        if tuning is not None:
            item["knobs"] = [p["knobs"] for p in mine]
        if any("test_error" in e for e in entries):
            item["test_error"] = [e.get("test_error") for e in entries]
        words, uncovered = coverage(name)
        for metric in METRIC_QUANTITY:
            if metric in item:
                item[f"{metric}_covered"] = metric not in uncovered
        item["epsilon_covers"] = words
        curves.append(item)
    rank_schemes(curves)
    out = {
        "experiment": "frontier",
        "quick": quick,
        "delta": DELTA,
        "accountant": ACCOUNTANT,
        "x": "target epsilon (each scheme's noise calibrated to it after T iterations)",
        "steady_state": "MSDs in dB and test error averaged over the last 10% of iterations",
        "setups": {k: v.description for k, v in SETUPS.items()},
        "runs": sorted(runs),
        "baselines": baselines,
        "curves": curves,
    }
    if tuning is not None:
        out["tuning"] = _tuning_summary(tuning, search if search is not None else points)
    return out


def _tuning_summary(tuning: Tuning, points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How the frontier was tuned, and every point searched with its metrics."""
    chosen = choose(points, tuning.metric)
    rows = []
    for p in points:
        k = (p["setup"], p["iterations"], p["scheme"], p["target_epsilon"])
        e = p["entry"]
        rows.append({"label": p["scheme"], "setup": p["setup"], "iterations": p["iterations"],
                     "target_epsilon": p["target_epsilon"], "knobs": p["knobs"],
                     **{m: e[m] for m in METRIC_QUANTITY if m in e},
                     "noise_variance": e.get("noise_variance"),
                     "chosen": chosen[k] == p["knobs"]})  # fmt: skip
    return {
        "metric": tuning.metric,
        "on": tuning.on,
        "grid": {k: list(v) for k, v in tuning.grid.items()},
        "mu_factors": list(MU_FACTORS),
        "spends_privacy": tuning.on == "private",
        "note": TUNING_SPENDS if tuning.on == "private" else PROXY_NOTE,
        "at_edge": at_edge(points, chosen),
        "points": rows,
    }


def at_edge(points: Sequence[Mapping[str, Any]], chosen: Mapping[tuple, Mapping[str, Any]]
            ) -> list[str]:  # fmt: skip
    """The chosen numeric knobs at the end of their grid (the best may lie beyond: widen it).

    >>> pts = [{"setup": "s", "iterations": 5, "scheme": "a", "target_epsilon": 1.0,
    ...         "knobs": {"training.mu": m}} for m in (0.1, 0.2, 0.4)]
    >>> at_edge(pts, {("s", 5, "a", 1.0): {"training.mu": 0.1}})
    ['a (s, T=5, ε=1): training.mu = 0.1, the smallest searched']
    >>> at_edge(pts, {("s", 5, "a", 1.0): {"training.mu": 0.2}})
    []
    """
    values: dict[tuple, dict[str, set]] = {}
    for p in points:
        key = (p["setup"], p["iterations"], p["scheme"], p["target_epsilon"])
        for k, v in p["knobs"].items():
            values.setdefault(key, {}).setdefault(k, set()).add(v)
    out = []
    for key, knobs in chosen.items():
        for k, v in knobs.items():
            grid = values[key][k]
            if len(grid) < 3 or isinstance(v, str) or v not in (min(grid), max(grid)):
                continue
            end = "smallest" if v == min(grid) else "largest"
            out.append(f"{key[2]} ({key[0]}, T={key[1]}, ε={key[3]:g}): {k} = {v:g}, the "
                       f"{end} searched")  # fmt: skip
    return out


def _csv_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for c in summary["curves"]:
        for j, x in enumerate(c["x"]):
            row = {"label": c["label"], "setup": c["setup"], "iterations": c["iterations"],
                   "target_epsilon": x}  # fmt: skip
            for key in ("epsilon", "noise_variance", "diverged"):
                row[key] = c[key][j]
            for metric in METRIC_QUANTITY:
                if metric in c:
                    row[metric] = c[metric][j]
                    row[f"{metric}_rank"] = c[f"{metric}_rank"][j]
                    row[f"{metric}_covered"] = c[f"{metric}_covered"]
            row["epsilon_covers"] = c["epsilon_covers"]
            for knob, value in c.get("knobs", [{}] * len(c["x"]))[j].items():
                row[knob] = value
            rows.append(row)
    return rows


@dataclass(frozen=True)
class FrontierPlan:
    """A frontier validated and ready to run (:func:`prepare_frontier`): nothing written yet.

    ``plans`` are its sub-runs' plans (into ``out/<key>``, written in the frontier's
    staging folder and each keeping ``partial/`` until the whole frontier is written);
    ``keep`` their own ``run.keep_partial``; ``output`` the folder as checked.
    ``tuning``: how the schemes are tuned (:class:`Tuning`); ``final``: when they are
    tuned on a proxy (``plans`` the search), the real-data configurations of the chosen
    points (``final(chosen) → configs``, :func:`choose`), prepared once the search ran.
    """

    out: Path
    plans: dict[str, Plan]
    keep: dict[str, bool]
    output: Output
    tuning: Tuning | None = None
    final: Callable[[dict[tuple, dict[str, Any]]], Mapping[str, ExperimentConfig]] | None = None
    resume: bool = False

    @property
    def runs(self) -> int:
        """How many sub-runs the frontier runs (the search on a proxy, then as many again)."""
        return len(self.plans) * (2 if self.final is not None else 1)


def _prepare(
    out: Path, configs: Mapping[str, ExperimentConfig], resume: bool,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[dict[str, Plan], dict[str, bool]]:  # fmt: skip
    """Each configuration prepared into ``out/<key>`` (staged, keeping ``partial/``).

    ``progress(key, curves done, curves in all)`` as each curve is calibrated.
    """
    keep = {key: cfg.run.keep_partial for key, cfg in configs.items()}
    configs = {k: replace(c, run=replace(c.run, keep_partial=True)) for k, c in configs.items()}
    plans = {}
    total, done = sum(len(c.curves) for c in configs.values()), [0]
    for key, cfg in configs.items():

        def on_curve(key: str = key) -> None:
            done[0] += 1
            if progress is not None:
                progress(key, done[0], total)

        plans[key] = prepare_experiment(cfg, out / key, resume=resume, work=out / STAGE / key,
                                        on_curve=on_curve)  # fmt: skip
    if progress is not None:
        progress("", total, total)
    return plans, keep


def prepare_frontier(
    out: str | Path,
    configs: Mapping[str, ExperimentConfig],
    *,
    resume: bool = False,
    force: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    tuning: Tuning | None = None,
    final: Callable[[dict[tuple, dict[str, Any]]], Mapping[str, ExperimentConfig]] | None = None,
) -> FrontierPlan:
    """Validate a frontier's ``configs`` and calibrate their noise; write nothing.

    Each configuration is prepared by :func:`pgfl.experiments.plan.prepare_experiment`
    into ``out/<key>``, then ``out`` is checked (:func:`pgfl.folders.check_output`;
    ``force`` accepts files pgfl did not write, or another frontier's results); any
    problem is one :class:`ConfigError` with ``out`` untouched. ``progress(key, done,
    total)`` is called as each curve is calibrated, counting the curves of every
    configuration, and at the end (calibrating every scheme to every ε, at every point
    of a tuning grid, is most of a frontier's preparation). ``tuning``, ``final``: see
    :class:`FrontierPlan` (the final configurations are validated after the search).
    """
    out = Path(out)
    plans, keep = _prepare(out, configs, resume, progress)
    digest = digest_of({key: plan.fingerprint for key, plan in plans.items()})
    resumed = any(p.resumed_from is not None for p in plans.values())
    dirs = tuple(plans) + tuple(k.removesuffix("-proxy") for k in plans if final is not None)
    output = check_output(out, digest=digest, what="a privacy-utility frontier", force=force,
                          resume=resumed, dirs=dirs)  # fmt: skip
    return FrontierPlan(out, plans, keep, output, tuning, final, resume)


def run_frontier(
    out: str | Path,
    *,
    quick: bool = False,
    seed: int | None = None,
    resume: bool = False,
    configs: Mapping[str, ExperimentConfig] | None = None,
    run: Callable[[Any], Mapping[str, Any]] | None = None,
    by_adversary: bool = False,
    force: bool = False,
    tuning: Tuning | None = None,
    final: Callable[[dict[tuple, dict[str, Any]]], Mapping[str, ExperimentConfig]] | None = None,
) -> dict[str, Any]:
    """Run the frontier into ``out``; write ``summary.json``, ``frontier.csv``, ``frontier.png``.

    ``configs`` (default :func:`frontier_configs`) are all validated and their noise
    calibrated before anything is written (:func:`prepare_frontier`); ``run(plan)`` runs
    one prepared plan (default :func:`pgfl.apps.runner.run_plan`). With
    ``resume``, the curves an interrupted run saved in a sub-folder are kept. The
    sub-runs keep their ``partial/`` folders until the whole frontier is written (an
    interrupted frontier resumes every finished sub-run), then they go unless a
    configuration's ``run.keep_partial`` is set. ``force``: see :func:`prepare_frontier`;
    ``tuning`` and ``final``: :class:`FrontierPlan` (tuned, ``grid.csv`` lists every
    point searched). Returns the frontier summary.
    """
    configs = dict(configs or frontier_configs(quick=quick, seed=seed))
    prepared = prepare_frontier(out, configs, resume=resume, force=force, tuning=tuning,
                                final=final)  # fmt: skip
    return run_prepared_frontier(prepared, quick=quick, run=run, by_adversary=by_adversary)


def run_prepared_frontier(
    prepared: FrontierPlan,
    *,
    quick: bool = False,
    run: Callable[[Any], Mapping[str, Any]] | None = None,
    by_adversary: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Run a frontier :func:`prepare_frontier` validated (see :func:`run_frontier`).

    ``progress``: as :func:`prepare_frontier`'s, for the chosen points a proxy's search
    leads to (calibrated once the search ran).
    """
    plans, keep = dict(prepared.plans), dict(prepared.keep)
    run = run or run_plan
    with staged(prepared.output) as stage:
        runs = {key: (plans[key].cfg, run(plans[key])) for key in plans}
        search = None
        if prepared.final is not None and prepared.tuning is not None:  # the chosen, for real
            search = grid_points(runs)
            configs = prepared.final(choose(search, prepared.tuning.metric))
            finals, kept = _prepare(prepared.out, configs, prepared.resume, progress)
            plans, keep = plans | finals, keep | kept
            runs = {key: (finals[key].cfg, run(finals[key])) for key in finals}
        summary = frontier_summary(runs, quick=quick, tuning=prepared.tuning, search=search)
        if by_adversary:
            summary["experiment"] = "frontier-adversary"
            summary["adversaries"] = {a: mechanisms.ADVERSARIES[a] for a in ADVERSARY_FRONTIER}
            summary["best"] = best_schemes(summary)
        write_json(stage / "summary.json", summary)
        write_csv(stage / "frontier.csv", _csv_rows(summary))
        if "tuning" in summary:
            write_csv(stage / "grid.csv", _grid_rows(summary["tuning"]["points"]))
        if not by_adversary:
            plot_frontier(summary, stage / "frontier.png")
        for a in ADVERSARY_FRONTIER if by_adversary else ():
            mine = {
                **summary,
                "adversaries": {a: mechanisms.ADVERSARIES[a]},
                "curves": [c for c in summary["curves"] if c["setup"] == a],
                "baselines": [b for b in summary["baselines"] if b["setup"] == a],
            }
            plot_frontier(mine, stage / f"frontier-{a}.png")
        for key, plan in plans.items():  # finished: --resume has nothing left to continue
            if not keep[key]:
                remove_partial(plan.work)
    return summary


def _grid_rows(points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``grid.csv``: one row per point searched, its knobs as columns."""
    knobs = list(dict.fromkeys(k for p in points for k in p["knobs"]))
    return [{**{k: v for k, v in p.items() if k != "knobs"},
             **{k: p["knobs"].get(k) for k in knobs}} for p in points]  # fmt: skip


#: ``pgfl reproduce`` presets that are not a single experiment: name → its experiments
#: (``configs(quick=..., seed=...)``), run by :func:`run_frontier`.
PRESETS: dict[str, Callable[..., dict[str, ExperimentConfig]]] = {"frontier": frontier_configs}


# ----------------------------------------------------------------- by adversary
#: The adversaries of ``pgfl reproduce frontier-adversary``, on the ``regression-record``
#: set-up; the schemes drawn for each are the lines that declare ``by_adversary`` and
#: protect against it (:func:`adversary_schemes`).
ADVERSARY_FRONTIER = ("link_eavesdropper", "other_server", "unit_client", "own_server")
#: Target ε of the frontier by adversary (ε ≤ 10: what a practitioner would accept).
ADVERSARY_EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0)


def adversary_schemes() -> tuple[str, ...]:
    """The frontier lines drawn per adversary: those whose mechanism declares ``by_adversary``.

    >>> adversary_schemes()
    ('client_gaussian_models', 'random_gaussian', 'graph_homomorphic_gaussian', 'central')
    """
    return tuple(name for name, s in SCHEMES.items() if s.by_adversary)


def _calibrated_class(scheme: str) -> type:
    """The mechanism class a frontier scheme's ``target_epsilon`` calibrates (the registry's)."""
    return SCHEMES[scheme].mechanism


def protecting(adversary: str) -> tuple[str, ...]:
    """The registered schemes whose calibrated mechanism protects against ``adversary``.

    >>> "central" in protecting("other_server"), "central" in protecting("link_eavesdropper")
    (True, False)
    """
    return tuple(s for s in SCHEMES if _protects(s, adversary))


def _protects(scheme: str, adversary: str) -> bool:
    """Whether a frontier scheme's calibrated mechanism protects against ``adversary``."""
    return adversary in _calibrated_class(scheme).protects


def _trusts(scheme: str) -> bool:
    """Whether a frontier scheme's ε trusts a party (a trusted aggregator, a dealer)."""
    priv = SCHEMES[scheme].privacy
    server = mechanisms.SERVER[priv.get("server_noise", "none")]
    client = mechanisms.CLIENT[priv.get("client_noise", "none")]
    return bool(server.trusted or client.trusted)


def adversary_configs(
    *, quick: bool = False, seed: int | None = None, repetitions: int | None = None
) -> dict[str, ExperimentConfig]:
    """One experiment per adversary, in sub-folder ``<adversary>-T<T>``.

    Every scheme of :func:`adversary_schemes` that protects against it, calibrated to what
    it observes (``privacy.adversary``), on the ``regression-record`` set-up.
    """
    out = {}
    repetitions = repetitions if repetitions is not None else (1 if quick else 2)
    for a in ADVERSARY_FRONTIER:
        names = [s for s in adversary_schemes() if _protects(s, a)]
        for T in iteration_counts("regression-record", quick):
            out[f"{a}-T{T}"] = frontier_config(
                "regression-record", T, quick=quick, seed=seed, epsilons=ADVERSARY_EPSILONS,
                schemes=names, repetitions=repetitions, adversary=a,
            )  # fmt: skip
    return out


def best_schemes(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per adversary and target ε, the scheme with the lowest centroid MSD (dB).

    ``best``/``best_db`` over every scheme whose ε covers the centroid (:func:`coverage`),
    ``distributed``/``distributed_db`` over those of them
    that trust no party (a trusted aggregator, a dealer: the mechanisms' ``trusted``).
    """
    rows: dict[tuple[str, float], dict[str, Any]] = {}
    for c in summary["curves"]:
        for x in c["x"]:
            rows.setdefault((c["setup"], x), {"adversary": c["setup"], "target_epsilon": x})
        if "centroid_msd_db" in coverage(c["label"])[1]:
            continue  # never the best on a quantity its ε does not cover
        trusted = _trusts(c["label"])
        for x, db in zip(c["x"], c["centroid_msd_db"], strict=True):
            row = rows[(c["setup"], x)]
            for key in ("best", "distributed") if not trusted else ("best",):
                if db is not None and (key not in row or db < row[key + "_db"]):
                    row[key], row[key + "_db"] = c["label"], db
    return [rows[k] for k in sorted(rows, key=lambda k: (ADVERSARY_FRONTIER.index(k[0]), k[1]))]


PRESETS["frontier-adversary"] = adversary_configs
#: Their one-line descriptions (``pgfl reproduce --list``), kept in the light catalog module.
TITLES = FRONTIER_TITLES
