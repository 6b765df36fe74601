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

Set-ups (:data:`SETUPS`): ``regression`` (preprint Fig. 2: P = 10, K = 100, L = 11,
μ = 0.7, B = 2) and ``logistic`` (conference Fig. 2: P = 10, K = 50, L = 10, μ = 0.1,
B = 5, a test set). Iteration counts: the papers' T = 1000 and T/10 (privacy favours
short runs: the same ε buys less noise per round); ``quick`` uses 200 and 20 with one
repetition.

Only ε(T) matters here, so the sub-runs read ε at iterations 1 and T only
(``privacy.epsilon_checkpoints = 2``; their ``curves.csv`` reports ε(T) from iteration 2
on, an upper bound).

Each (set-up, T) is an ordinary experiment run by :mod:`pgfl.experiments.runner` in
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

import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pgfl.experiments.catalog import FRONTIER_TITLES
from pgfl.experiments.config import ExperimentConfig
from pgfl.experiments.loader import parse_config
from pgfl.experiments.partial import remove_partial
from pgfl.experiments.plan import Plan, prepare_experiment
from pgfl.experiments.presets import preset_text
from pgfl.experiments.runner import run_plan
from pgfl.files import write_csv, write_json
from pgfl.folders import STAGE, Output, check_output, digest_of, staged
from pgfl.plots import plot_frontier
from pgfl.privacy import mechanisms
from pgfl.validation import ConfigError, did_you_mean

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
    """One line of the frontier: the privacy settings of a scheme and what its ε covers.

    Attributes:
        name: the ``label`` of its frontier curves.
        legend: a short legend entry (mechanism; adversary).
        scope: what the ε protects and against whom (the caption).
        privacy: the curve's ``[privacy]`` settings (``target_epsilon`` added per point).
        share: ``training.share`` (``models`` | ``updates``).

    """

    name: str
    legend: str
    scope: str
    privacy: Mapping[str, Any]
    share: str = "models"


def _client(dist: str, share: str) -> Scheme:
    what = "model" if share == "models" else "update"
    return Scheme(
        f"client_{dist}_{share}",
        f"client {dist.capitalize()} on {share} (vs own server)",
        f"client level: one client's noisy {what} against its own (honest-but-curious) "
        "server, and by post-processing everyone downstream",
        {"client_noise": dist},
        share,
    )


#: The schemes compared, in legend order.
SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        _client("laplace", "models"),
        _client("gaussian", "models"),
        _client("laplace", "updates"),
        _client("gaussian", "updates"),
        Scheme(
            "random",
            "random server noise, Laplace (vs other servers; covers the centroid)",
            "server level: a unit's messages (one noise per server and round) against the "
            "other servers and eavesdroppers; covers every model and the centroid; not the "
            "unit's clients against their own server",
            {"server_noise": "random"},
        ),
        Scheme(
            "random_gaussian",
            "random server noise, Gaussian (vs other servers; covers the centroid)",
            "as random, with Gaussian noise",
            {"server_noise": "random", "server_distribution": "gaussian"},
        ),
        Scheme(
            "random_per_link",
            "per-link noise, Laplace (vs all links of a server)",
            "server level: a unit's messages over all its outgoing links (independent noise "
            "per link) against an adversary who sees them all",
            {"server_noise": "random_per_link"},
        ),
        Scheme(
            "graph_homomorphic",
            "graph-homomorphic, Laplace (vs other servers; NOT the centroid)",
            "server level: a unit's messages against the other servers and eavesdroppers; "
            "NOT the centroid or the unit's own model, where the noise cancels (eq. 46)",
            {"server_noise": "graph_homomorphic"},
        ),
        Scheme(
            "hybrid",
            "secure aggregation + graph-homomorphic (server sees only sums; NOT the centroid)",
            "server level as graph-homomorphic; in addition a server sees only the sum of its "
            "clients' models (secure aggregation: no ε against the server, which learns the "
            "exact sum)",
            {"client_noise": "secure_aggregation", "server_noise": "graph_homomorphic"},
        ),
    )
}
#: The schemes of ``pgfl reproduce frontier`` (the papers' and their variants).
PAPER_SCHEMES = tuple(SCHEMES)
SCHEMES["central"] = Scheme(
    "central",
    "central DP: a trusted aggregator, Gaussian (the ceiling)",
    "a trusted aggregator adds one Gaussian draw to the network average each round; "
    "protects against everyone but the aggregator and a unit's own server",
    {"server_noise": "central", "server_distribution": "gaussian"},
)
SCHEMES["graph_homomorphic_gaussian"] = Scheme(
    "graph_homomorphic_gaussian",
    "graph-homomorphic, Gaussian (NOT the centroid or a unit's clients)",
    "as graph-homomorphic, with Gaussian noise",
    {"server_noise": "graph_homomorphic", "server_distribution": "gaussian"},
)


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


def _label(scheme: str, eps: float) -> str:
    return f"{scheme}@{eps:g}"


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
) -> ExperimentConfig:
    """The experiment of one (set-up, T): a non-private curve and every scheme × ε*.

    Curve labels are ``none`` and ``SCHEME@EPS``; each private curve has
    ``privacy.target_epsilon = EPS`` at δ = :data:`DELTA`, so the runner calibrates its
    noise (:func:`pgfl.experiments.build.curve_settings`). ``repetitions`` (default:
    the preset's, 1 if ``quick``) and ``mu`` (default: the preset's step size) override
    the set-up. With ``adversary``, every scheme's noise is calibrated to what that
    adversary observes (``privacy.adversary``: amplification by client sampling where it
    holds). Validated like any config.
    """
    if setup not in SETUPS:
        raise ConfigError(
            f"frontier set-up must be one of {', '.join(SETUPS)}; got {setup!r}"
            + did_you_mean(setup, SETUPS)
        )
    names = list(PAPER_SCHEMES) if schemes is None else list(schemes)
    for name in names:
        if name not in SCHEMES:
            raise ConfigError(
                f"frontier scheme must be one of {', '.join(SCHEMES)}; got {name!r}"
                + did_you_mean(name, SCHEMES)
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
    if any("secure_aggregation" in SCHEMES[n].privacy.values() for n in names):
        privacy["secagg_clip"] = SETUPS[setup].secagg_clip  # models grow with the noise
    curves: list[dict[str, Any]] = [{"label": "none"}]
    for name in names:
        s = SCHEMES[name]
        for eps in epsilons:
            curve: dict[str, Any] = {
                "label": _label(name, eps),
                "privacy": {**s.privacy, "target_epsilon": float(eps)},
            }
            if adversary is not None:
                curve["privacy"]["adversary"] = adversary
            if s.share != "models":
                curve["training"] = {"share": s.share}
            curves.append(curve)
    raw = {
        "name": f"frontier-{setup}-T{iterations}",
        "title": f"privacy-utility frontier: {SETUPS[setup].description}, T={iterations}",
        "seed": base["seed"] if seed is None else seed,
        "iterations": iterations,
        "repetitions": reps,
        "plot": plot,
        "topology": base["topology"],
        "data": base["data"],
        "training": {
            **base["training"],
            **SETUPS[setup].training,
            **({} if mu is None else {"mu": mu}),
        },
        "privacy": privacy,
        "curves": curves,
    }
    return parse_config(raw)


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
) -> dict[str, ExperimentConfig]:
    """The experiments of the frontier by sub-folder name ``<setup>-T<T>``.

    ``iterations`` default: :func:`iteration_counts` of each set-up; the other arguments
    as in :func:`frontier_config`.
    """
    out = {}
    for setup in setups:
        if setup not in SETUPS:
            raise ConfigError(
                f"frontier set-up must be one of {', '.join(SETUPS)}; got {setup!r}"
                + did_you_mean(setup, SETUPS)
            )
        for T in iterations or iteration_counts(setup, quick):
            out[f"{setup}-T{T}"] = frontier_config(
                setup, T, quick=quick, seed=seed, epsilons=epsilons or EPSILONS, schemes=schemes,
                repetitions=repetitions, mu=mu,
            )  # fmt: skip
    return out


def _split(label: str) -> tuple[str, float]:
    name, _, eps = label.rpartition("@")
    return name, float(eps)


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
    runs: Mapping[str, tuple[ExperimentConfig, Mapping[str, Any]]], *, quick: bool
) -> dict[str, Any]:
    """The frontier's summary from the runs' summaries (``key → (config, summary)``).

    One ``curves`` entry per scheme, set-up and T; lists aligned with ``x`` (target ε):
    ``centroid_msd_db``, ``individual_msd_db`` (``null`` where diverged), ``test_error``
    (logistic), ``noise_variance`` (of the calibrated link), ``epsilon`` (reported by
    :data:`ACCOUNTANT`), ``diverged``; per metric ``<metric>_covered`` (whether the ε covers
    the metric's quantity, :func:`coverage`) and ``<metric>_rank`` (:func:`rank_schemes`);
    ``epsilon_covers``, what the ε covers in words. ``baselines`` holds the non-private
    curve per run.
    """
    curves: list[dict[str, Any]] = []
    baselines: list[dict[str, Any]] = []
    for key, (cfg, summary) in runs.items():
        setup = key.rpartition("-T")[0]
        by_scheme: dict[str, list[tuple[float, Mapping[str, Any]]]] = {}
        for entry in summary["curves"]:
            if entry["label"] == "none":
                base = {k: entry.get(k) for k in ("centroid_msd_db", "individual_msd_db")}
                if "test_error" in entry:
                    base["test_error"] = entry["test_error"]
                baselines.append({"setup": setup, "iterations": cfg.iterations, **base})
                continue
            name, eps = _split(entry["label"])
            by_scheme.setdefault(name, []).append((eps, entry))
        for name, points in by_scheme.items():
            points.sort(key=lambda p: p[0])
            scheme = SCHEMES[name]
            item: dict[str, Any] = {
                "label": name,
                "setup": setup,
                "iterations": cfg.iterations,
                "repetitions": cfg.repetitions,
                "x": [p[0] for p in points],
                "centroid_msd_db": [p[1]["centroid_msd_db"] for p in points],
                "individual_msd_db": [p[1]["individual_msd_db"] for p in points],
                "noise_variance": [p[1].get("noise_variance") for p in points],
                "epsilon": [p[1].get("epsilon", {}).get(ACCOUNTANT) for p in points],
                "diverged": [bool(p[1]["diverged"]) for p in points],
                "legend": scheme.legend,
                "scope": scheme.scope,
            }
            if any("test_error" in p[1] for p in points):
                item["test_error"] = [p[1].get("test_error") for p in points]
            words, uncovered = coverage(name)
            for metric in METRIC_QUANTITY:
                if metric in item:
                    item[f"{metric}_covered"] = metric not in uncovered
            item["epsilon_covers"] = words
            curves.append(item)
    rank_schemes(curves)
    return {
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
            rows.append(row)
    return rows


@dataclass(frozen=True)
class FrontierPlan:
    """A frontier validated and ready to run (:func:`prepare_frontier`): nothing written yet.

    ``plans`` are its sub-runs' plans (into ``out/<key>``, written in the frontier's
    staging folder and each keeping ``partial/`` until the whole frontier is written);
    ``keep`` their own ``run.keep_partial``; ``output`` the folder as checked.
    """

    out: Path
    plans: dict[str, Plan]
    keep: dict[str, bool]
    output: Output


def prepare_frontier(
    out: str | Path,
    configs: Mapping[str, ExperimentConfig],
    *,
    resume: bool = False,
    force: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> FrontierPlan:
    """Validate a frontier's ``configs`` and calibrate their noise; write nothing.

    Each configuration is prepared by :func:`pgfl.experiments.plan.prepare_experiment`
    into ``out/<key>``, then ``out`` is checked (:func:`pgfl.folders.check_output`;
    ``force`` accepts files pgfl did not write, or another frontier's results); any
    problem is one :class:`ConfigError` with ``out`` untouched. ``progress(key, done,
    total)`` is called before each configuration and at the end (calibrating every scheme
    to every ε is most of a frontier's preparation).
    """
    out = Path(out)
    keep = {key: cfg.run.keep_partial for key, cfg in configs.items()}
    configs = {k: replace(c, run=replace(c.run, keep_partial=True)) for k, c in configs.items()}
    plans = {}
    for done, (key, cfg) in enumerate(configs.items()):
        if progress is not None:
            progress(key, done, len(configs))
        plans[key] = prepare_experiment(cfg, out / key, resume=resume, work=out / STAGE / key)
    if progress is not None:
        progress("", len(configs), len(configs))
    digest = digest_of({key: plan.fingerprint for key, plan in plans.items()})
    resumed = any(p.resumed_from is not None for p in plans.values())
    output = check_output(out, digest=digest, what="a privacy-utility frontier", force=force,
                          resume=resumed, dirs=tuple(plans))  # fmt: skip
    return FrontierPlan(out, plans, keep, output)


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
) -> dict[str, Any]:
    """Run the frontier into ``out``; write ``summary.json``, ``frontier.csv``, ``frontier.png``.

    ``configs`` (default :func:`frontier_configs`) are all validated and their noise
    calibrated before anything is written (:func:`prepare_frontier`); ``run(plan)`` runs
    one prepared plan (default :func:`pgfl.experiments.runner.run_plan`). With
    ``resume``, the curves an interrupted run saved in a sub-folder are kept. The
    sub-runs keep their ``partial/`` folders until the whole frontier is written (an
    interrupted frontier resumes every finished sub-run), then they go unless a
    configuration's ``run.keep_partial`` is set. ``force``: see :func:`prepare_frontier`.
    Returns the frontier summary.
    """
    configs = dict(configs or frontier_configs(quick=quick, seed=seed))
    prepared = prepare_frontier(out, configs, resume=resume, force=force)
    return run_prepared_frontier(prepared, quick=quick, run=run, by_adversary=by_adversary)


def run_prepared_frontier(
    prepared: FrontierPlan,
    *,
    quick: bool = False,
    run: Callable[[Any], Mapping[str, Any]] | None = None,
    by_adversary: bool = False,
) -> dict[str, Any]:
    """Run a frontier :func:`prepare_frontier` validated (see :func:`run_frontier`)."""
    plans = prepared.plans
    run = run or run_plan
    with staged(prepared.output) as stage:
        runs = {key: (plans[key].cfg, run(plans[key])) for key in plans}
        summary = frontier_summary(runs, quick=quick)
        if by_adversary:
            summary["experiment"] = "frontier-adversary"
            summary["adversaries"] = {a: mechanisms.ADVERSARIES[a] for a in ADVERSARY_FRONTIER}
            summary["best"] = best_schemes(summary)
        write_json(stage / "summary.json", summary)
        write_csv(stage / "frontier.csv", _csv_rows(summary))
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
            if not prepared.keep[key]:
                remove_partial(plan.work)
    return summary


#: ``pgfl reproduce`` presets that are not a single experiment: name → its experiments
#: (``configs(quick=..., seed=...)``), run by :func:`run_frontier`.
PRESETS: dict[str, Callable[..., dict[str, ExperimentConfig]]] = {"frontier": frontier_configs}


# ----------------------------------------------------------------- by adversary
#: The adversaries of ``pgfl reproduce frontier-adversary`` and the schemes drawn for each
#: (those that protect against it), on the ``regression-record`` set-up.
ADVERSARY_SCHEMES = ("central", "random_gaussian", "client_gaussian_models",
                     "graph_homomorphic_gaussian")  # fmt: skip
ADVERSARY_FRONTIER = ("link_eavesdropper", "other_server", "unit_client", "own_server")
#: Target ε of the frontier by adversary (ε ≤ 10: what a practitioner would accept).
ADVERSARY_EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0)


def _calibrated_class(scheme: str) -> type:
    """The mechanism class a frontier scheme's ``target_epsilon`` calibrates (the registry's)."""
    priv = SCHEMES[scheme].privacy
    server = priv.get("server_noise", "none")
    return (
        mechanisms.SERVER[server] if server != "none" else mechanisms.CLIENT[priv["client_noise"]]
    )


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

    Every scheme of :data:`ADVERSARY_SCHEMES` that protects against it, calibrated to what
    it observes (``privacy.adversary``), on the ``regression-record`` set-up.
    """
    out = {}
    repetitions = repetitions if repetitions is not None else (1 if quick else 2)
    for a in ADVERSARY_FRONTIER:
        names = [s for s in ADVERSARY_SCHEMES if _protects(s, a)]
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
