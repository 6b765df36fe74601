"""``pgfl privacy ...`` subcommands: ε(i) over iterations, and the noise a target ε needs.

``pgfl privacy epsilon --mu 0.7 --clip 10 --sigma 0.3162 --iterations 100 --dim 2`` prints ε(i) by
every accountant (the papers' bound and the tight PLD one among them); ``--plot FILE``
draws the curves, ``--json`` prints machine-readable output.
``pgfl privacy audit fig2 --curve random --view message`` attacks one release of the
real engine and prints an empirical lower bound on ε (:mod:`pgfl.apps.audit`).
``pgfl privacy calibrate --target-epsilon 8 --iterations 100 --mu 0.7 --clip 10 --dim 2`` prints
the per-coordinate noise std σ needed. Bad input raises :class:`~pgfl.validation.ConfigError`,
which the ``pgfl`` entry point turns into one line on stderr and exit code 2.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from pgfl.commands.common import (
    ForceOpt,
    checked,
    default_folder,
    load_experiment,
    run_frontier_command,
)
from pgfl.commands.printing import (
    PAPER_NOTE,
    accountant_header,
    accountant_order,
    calibration_line,
    epsilon_columns,
    out,
    print_adversaries,
)
from pgfl.files import FileError, check_output_file, jsonable, writing
from pgfl.plots import plot_audit_tradeoff, plot_epsilon_curves
from pgfl.validation import ConfigError, check_choice, check_int, did_you_mean

app = typer.Typer(
    help="Differential-privacy accounting: epsilon over iterations, noise calibration.",
    no_args_is_help=True,
)

SchemeOpt = Annotated[
    str,
    typer.Option(
        "--scheme",
        help="graph_homomorphic | random | random_per_link (server level) or models | updates "
        "(client level).",
    ),
]
DistOpt = Annotated[str, typer.Option("--distribution", help="laplace | gaussian.")]
MuOpt = Annotated[float, typer.Option("--mu", help="Step size mu.")]
DeltaOpt = Annotated[float, typer.Option("--delta", help="delta of (epsilon, delta)-DP.")]
DimOpt = Annotated[
    int,
    typer.Option(
        "--dim",
        help="Model dimension M, required (Laplace noise is charged l1 = sqrt(M) l2; every "
        "preset has M >= 2: see 'pgfl privacy config' for a preset's own epsilon).",
    ),
]
LinksOpt = Annotated[
    int, typer.Option("--links", help="Links the adversary watches (random_per_link only).")
]
ClientsOpt = Annotated[
    int,
    typer.Option(
        "--clients-per-round",
        help="L, the fewest clients a server averages per iteration (with secure aggregation "
        "its threshold t); random scheme: sensitivity 2 mu B/L.",
    ),
]
PaperOpt = Annotated[
    bool,
    typer.Option(
        "--paper-reading",
        help="Charge Laplace noise the l2 sensitivity as the papers do (default: rigorous l1).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout instead of a table.")]
#: Where ``pgfl privacy frontier`` writes by default (``pgfl reproduce frontier``: runs/frontier).
FRONTIER_FOLDER = "privacy-frontier"


def _fmt(x: float) -> str:
    if math.isinf(x):
        return "inf"
    return f"{x:.4g}" if abs(x) < 1e5 else f"{x:.3e}"


def _transcript_at(
    *, scheme: str, distribution: str, mu: float, clip: float | None, iterations: int,
    dim: int, links: int, clients_per_round: int, paper_reading: bool,
) -> Any:  # fmt: skip
    """The factory σ ↦ transcript of ``--scheme`` with the command's options (checked)."""
    from pgfl.privacy import mechanisms  # lazy: dp_accounting imports in ~1 s

    noisy = [n for n, cls in mechanisms.SERVER.items() if cls.calibrates is not None]
    check_choice("--scheme", scheme, (*noisy, "models", "updates"))
    dist = checked("privacy.server_distribution", distribution, "--distribution")
    if scheme in ("models", "updates"):
        mechanism: Any = mechanisms.ClientNoise(distribution=dist, std=1.0)
    else:
        mechanism = mechanisms.SERVER[scheme](std=1.0, distribution=dist)
    ctx = mechanisms.ReleaseContext(
        mu=checked("training.mu", mu, "--mu"),
        clip=checked("training.clip_norm", clip, "--clip"),
        share=scheme if scheme in ("models", "updates") else "models",
        iterations=checked("iterations", iterations, "--iterations"),
        dim=checked("data.M", dim, "--dim"),
        clients_per_round=checked("training.L", clients_per_round, "--clients-per-round"),
        observed_links=check_int("--links", links, lo=1),
        rigorous=not paper_reading,
    )
    return lambda sigma: mechanism.with_std(sigma).transcript(ctx)


def _sigma_from(
    sigma: float | None, variance: float | None, multiplier: float | None, transcript_at: Any
) -> float:
    if sum(x is not None for x in (sigma, variance, multiplier)) != 1:
        raise ConfigError("give exactly one of --sigma, --variance and --noise-multiplier")
    if variance is not None:
        return math.sqrt(checked("privacy.server_variance", variance, "--variance"))
    if multiplier is not None:  # σ = z·Δ₁, converted where every configuration's is
        from pgfl.experiments.privacy import multiplier_std  # lazy: the experiments

        z = checked("privacy.server_noise_multiplier", multiplier, "--noise-multiplier")
        return multiplier_std(z, transcript_at, "--noise-multiplier")
    from pgfl.params import PARAMS  # lazy: dp_accounting

    return PARAMS["privacy.server_variance"].named("--sigma").check(sigma)  # a std: same range


def _check_fits(iterations: int, accountants: Sequence[str]) -> None:
    """Refuse ``--iterations`` whose ε accounting cannot fit in memory (one line)."""
    from pgfl.resources import accounting_memory, check_fits  # lazy: for this check alone

    needed = {"ε accounting [T]": accounting_memory(iterations, accountants)}
    check_fits(f"--iterations={iterations}", needed)


def _rows_to_show(t: int, n: int) -> list[int]:
    if t <= n:
        return list(range(1, t + 1))
    return sorted(set(np.unique(np.round(np.geomspace(1, t, n)).astype(int)).tolist()) | {t})


def _plot_format(path: Path) -> str:
    """The image format of a ``--plot`` path: its suffix, PNG without one."""
    return path.suffix[1:].lower() or "png"


def _check_plot(path: Path | None) -> None:
    """Before any work: ``--plot`` must name a writable file of an image format."""
    if path is None:
        return
    check_output_file(path, what="--plot file")
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: matplotlib, --plot

    formats = FigureCanvasAgg.get_supported_filetypes()
    if _plot_format(path) not in formats:
        raise FileError(
            f"--plot file {path}: unknown image format {_plot_format(path)!r}; "
            f"use one of {', '.join(sorted(formats))}"
        )


@app.command("epsilon")
def epsilon_command(
    mu: MuOpt,
    iterations: Annotated[int, typer.Option("--iterations", help="Number of iterations T.")],
    dim: DimOpt,
    sigma: Annotated[
        float | None,
        typer.Option("--sigma", help="Per-coordinate noise std (Laplace scale sigma/sqrt 2)."),
    ] = None,
    variance: Annotated[
        float | None,
        typer.Option("--variance", help="Per-coordinate noise variance (instead of --sigma)."),
    ] = None,
    noise_multiplier: Annotated[
        float | None,
        typer.Option(
            "--noise-multiplier",
            help="Noise as a multiple z of the first message's sensitivity, sigma = z * Delta "
            "(Opacus' noise_multiplier; instead of --sigma, needs --clip).",
        ),
    ] = None,
    clip: Annotated[
        float | None,
        typer.Option(
            "--clip", help="Per-sample gradient clipping norm B (omit: no bound, eps=inf)."
        ),
    ] = None,
    delta: DeltaOpt = 1e-5,
    scheme: SchemeOpt = "graph_homomorphic",
    distribution: DistOpt = "laplace",
    links: LinksOpt = 1,
    clients_per_round: ClientsOpt = 1,
    paper_reading: PaperOpt = False,
    rows: Annotated[int, typer.Option("--rows", help="Iterations shown in the table (>= 2).")] = 12,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write a PNG of eps(i).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print epsilon(i) of a privatized run by every accountant."""
    from pgfl.params import ACCOUNTANTS  # lazy: dp_accounting

    _check_fits(iterations, ACCOUNTANTS)
    from pgfl.privacy import accounting as acc  # lazy: dp_accounting imports in ~1 s

    _check_plot(plot)
    rows = check_int("--rows", rows, lo=2)
    transcript_at = _transcript_at(
        scheme=scheme, distribution=distribution, mu=mu, clip=clip, iterations=iterations,
        dim=dim, links=links, clients_per_round=clients_per_round, paper_reading=paper_reading,
    )  # fmt: skip
    sigma = _sigma_from(sigma, variance, noise_multiplier, transcript_at)
    delta = checked("privacy.delta", delta, "--delta")
    curve = acc.epsilon_curve(transcript_at(sigma), delta=delta)
    title = (
        f"{scheme}, {distribution}, sigma={sigma:g}, mu={mu:g}, clip={clip}, M={dim}, "
        f"delta={delta:g}"
    )
    if plot is not None:
        with writing(plot):
            plot_epsilon_curves(dict(curve.items()), plot, title=title)
    if as_json:
        payload: dict[str, Any] = {
            "settings": curve.settings,
            **curve.summary(),
            "curve": {k: v.tolist() for k, v in curve.items()},
        }
        out.print_json(json.dumps(jsonable(payload)))
        return
    names = accountant_order(curve)
    table = Table(title=title)
    table.add_column("i", justify="right")
    for name in names:
        table.add_column(accountant_header(name), justify="right")
    for i in _rows_to_show(curve.iterations, rows):
        table.add_row(str(i), *(_fmt(float(curve[name][i - 1])) for name in names))
    out.print(table)
    if "paper" in names:
        out.print(PAPER_NOTE, markup=False, soft_wrap=True)
    if curve.reason:
        out.print(f"[bold]epsilon = inf[/bold]: {curve.reason}")
    for name, note in curve.notes.items():
        out.print(f"  [dim]{name}: {note}[/dim]")
    out.print(f"[bold]scope[/bold]: {curve.scope}")
    out.print(f"[bold]caveat[/bold]: {acc.FLOATING_POINT_CAVEAT}")
    if plot is not None:
        out.print(f"plot: {plot}", markup=False)


@app.command("calibrate")
def calibrate_command(
    target_epsilon: Annotated[float, typer.Option("--target-epsilon", help="Target epsilon.")],
    iterations: Annotated[int, typer.Option("--iterations", help="Number of iterations T.")],
    mu: MuOpt,
    clip: Annotated[float, typer.Option("--clip", help="Per-sample gradient clipping norm B.")],
    dim: DimOpt,
    delta: DeltaOpt = 1e-5,
    scheme: SchemeOpt = "graph_homomorphic",
    distribution: DistOpt = "laplace",
    links: LinksOpt = 1,
    clients_per_round: ClientsOpt = 1,
    paper_reading: PaperOpt = False,
    accountant: Annotated[
        list[str] | None,
        typer.Option(
            "--accountant",
            help="Accountant(s) to calibrate for (default: pld, the tight sound one; repeat "
            "the option for more, e.g. --accountant paper for the papers' bound).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the smallest noise std sigma meeting the target epsilon after T iterations."""
    names = accountant_order(accountant or ["pld"])
    _check_fits(iterations, names)
    from pgfl.privacy import accounting as acc  # lazy: dp_accounting imports in ~1 s

    kw = dict(
        scheme=scheme, mu=mu, clip=clip, distribution=distribution, dim=dim,
        links=links, clients_per_round=clients_per_round, paper_reading=paper_reading,
    )  # fmt: skip
    if clip is None:
        raise ConfigError("--clip is required: without a gradient bound no noise gives a finite ε")
    transcript_at = _transcript_at(iterations=iterations, **kw)
    target = checked("privacy.target_epsilon", target_epsilon, "--target-epsilon")
    delta = checked("privacy.delta", delta, "--delta")
    checked("privacy.accountants", names, "--accountant")
    result: dict[str, dict[str, float]] = {}
    for name in names:
        s = acc.calibrate(transcript_at, target, delta, accountant=name)
        achieved = acc.epsilon_curve(transcript_at(s), delta=delta, accountants=[name])[name][-1]
        result[name] = {"sigma": s, "variance": s * s, "epsilon": float(achieved)}
        if distribution == "laplace":
            result[name]["laplace_scale"] = s / math.sqrt(2.0)
    if as_json:
        payload = {
            "target_epsilon": target_epsilon, "delta": delta, "iterations": iterations,
            "scheme": scheme, "mu": mu, "clip": clip, "distribution": distribution, "dim": dim,
            "observed_links": links, "clients_per_round": clients_per_round,
            "rigorous": not paper_reading, "sigma": result,
        }  # fmt: skip
        out.print_json(json.dumps(payload))
        return
    table = Table(
        title=f"noise for epsilon={target_epsilon:g} at delta={delta:g} after T={iterations} "
        f"({scheme}, {distribution}, mu={mu:g}, clip={clip:g}, M={dim})"
    )
    table.add_column("accountant")
    table.add_column("sigma", justify="right")
    table.add_column("sigma^2", justify="right")
    if distribution == "laplace":
        table.add_column("Laplace b", justify="right")
    table.add_column("epsilon reached", justify="right")
    for name, r in result.items():
        cells = [_fmt(r["sigma"]), _fmt(r["variance"])]
        if distribution == "laplace":
            cells.append(_fmt(r["laplace_scale"]))
        table.add_row(accountant_header(name), *cells, _fmt(r["epsilon"]))
    out.print(table)
    if "paper" in result:
        out.print(PAPER_NOTE, markup=False, soft_wrap=True)


@app.command("config")
def config_command(
    config: Annotated[
        str, typer.Argument(help="Experiment TOML file, or the name of a preset (fig2, ...).")
    ],
    quick: Annotated[bool, typer.Option("--quick", help="Apply the \\[quick] table.")] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write epsilon(i) of every curve to this PNG.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print epsilon after the last iteration for every privatized curve of a config."""
    from pgfl.experiments.build import build_network, curve_settings  # lazy: the engine
    from pgfl.experiments.privacy import curve_epsilon

    _check_plot(plot)
    cfg = load_experiment(config, quick)
    nets: dict[tuple, Any] = {}
    report: dict[str, dict[str, Any]] = {}
    curves: dict[str, np.ndarray] = {}
    for curve in cfg.curves:
        key = curve.structure()
        if key not in nets:
            nets[key] = build_network(curve, cfg.seed)
        net = nets[key]
        settings = curve_settings(curve, cfg.iterations, net)
        priv = curve.privacy
        series, entry = curve_epsilon(
            settings, net, cfg.iterations, delta=priv.delta, accountants=priv.accountants,
            checkpoints=priv.epsilon_checkpoints, adversary=priv.adversary,
        )  # fmt: skip
        report[curve.label] = entry
        if series:
            curves[curve.label] = series.get("epsilon_pld", next(iter(series.values())))
    if as_json:
        out.print_json(
            json.dumps(
                jsonable({"experiment": cfg.name, "iterations": cfg.iterations, "curves": report})
            )
        )
        return
    rows = [{"label": label, **entry} for label, entry in report.items()]
    columns = epsilon_columns(rows)
    table = Table(title=f"{cfg.name}: epsilon after T={cfg.iterations} iterations")
    table.add_column("curve")
    table.add_column("noise variance", justify="right")
    for header, _ in columns:
        table.add_column(header, justify="right")
    table.add_column("delta", justify="right")
    for row in rows:
        table.add_row(
            row["label"],
            _fmt(row["noise_variance"]) if "noise_variance" in row else "-",
            *[cell(row) if "epsilon" in row else "-" for _, cell in columns],
            _fmt(row["delta"]) if "delta" in row else "-",
        )
    out.print(table)
    against = {r["label"]: r["calibrated_adversary"] for r in rows if "calibrated_adversary" in r}
    for line in (
        calibration_line(against),
        "link ε: the privatized link's own ε (what its transcript reveals), no sampling "
        "credit; rdp beside a value: the Rényi bound was the smaller",
    ):
        if line:
            out.print(line, markup=False, soft_wrap=True)
    if any("paper" in row.get("epsilon", {}) for row in rows):
        out.print(PAPER_NOTE, markup=False, soft_wrap=True)
    for label, entry in report.items():
        if entry.get("epsilon_release"):  # in the release's own words
            out.print(f"curve {label} releases: {entry['epsilon_release']}", markup=False,
                      soft_wrap=True)  # fmt: skip
        print_adversaries({"label": label, **entry})
    if plot is not None and curves:
        title = f"{cfg.name}: epsilon(i) by the tight accountant"
        with writing(plot):
            plot_epsilon_curves(curves, plot, title=title)
        out.print(f"plot: {plot}", markup=False)
    elif plot is not None:
        out.print(f"plot: not written ({cfg.name} has no privatized curve)", markup=False)


@app.command("audit")
def audit_command(
    config: Annotated[
        str, typer.Argument(help="Experiment TOML file, or the name of a preset (fig2, ...).")
    ],
    curve: Annotated[str, typer.Option("--curve", help="Label of the curve to audit.")],
    view: Annotated[
        str,
        typer.Option(
            "--view", help="message | server-model | centroid | client-update | own-server."
        ),
    ] = "message",
    adversary: Annotated[
        str | None,
        typer.Option(
            "--adversary",
            help="Attack this adversary's whole view instead of --view (an adversary of "
            "epsilon_by_adversary, docs/privacy.md section 2.1).",
        ),
    ] = None,
    trials: Annotated[int, typer.Option("--trials", help="Trials per world (>= 200).")] = 20000,
    round_: Annotated[int, typer.Option("--round", help="First audited iteration i.")] = 1,
    rounds: Annotated[
        int, typer.Option("--rounds", help="Consecutive rounds observed together.")
    ] = 1,
    confidence: Annotated[
        float, typer.Option("--confidence", help="Confidence of the Clopper-Pearson bounds.")
    ] = 0.95,
    accountant: Annotated[
        list[str] | None,
        typer.Option("--accountant", help="Compare with these accountants (default: the curve's)."),
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Apply the \\[quick] table.")] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write the trade-off plot to this PNG.")
    ] = None,
    transcript: Annotated[
        Path | None,
        typer.Option(
            "--transcript",
            help="Attack the messages deployed parties recorded in "
            "DIR (pgfl deploy's transcripts of the two canary worlds).",
        ),  # fmt: skip
    ] = None,
    deploy: Annotated[
        bool,
        typer.Option(
            "--deploy",
            help="First run the two canary worlds on local deployed "
            "parties (pgfl[deploy]) that record into --transcript DIR.",
        ),  # fmt: skip
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="--deploy: record into --transcript DIR although it holds files pgfl did "
            "not write or another recording (pgfl deletes nothing else).",
        ),  # fmt: skip
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Attack one release of the real engine: an empirical lower bound on epsilon.

    With --transcript, the release attacked is what deployed parties recorded on the wire.

    Exit code 3 if the lower bound exceeds an accountant's epsilon (that accountant is wrong).
    """
    from pgfl.apps.audit import audit, record_audit  # lazy: the engine

    _check_plot(plot)
    if accountant:
        checked("privacy.accountants", accountant, "--accountant")
    if deploy and transcript is None:
        raise ConfigError("--deploy records into --transcript DIR: give --transcript")
    cfg = load_experiment(config, quick)
    if deploy:
        record_audit(cfg, curve, view, transcript, trials=trials, round=round_, rounds=rounds,
                     adversary=adversary, force=force)  # fmt: skip
    result = audit(
        cfg, curve, view, adversary=adversary, trials=trials, round=round_, rounds=rounds,
        confidence=confidence, accountants=accountant, transcript=transcript,
    )  # fmt: skip
    if plot is not None:
        with writing(plot):
            plot_audit_tradeoff(result, plot)
    if as_json:
        out.print_json(json.dumps(jsonable(result.to_json())))
    else:
        rounds_text = (
            f"round {result.round}"
            if result.rounds == 1
            else f"rounds {result.round}..{result.round + result.rounds - 1}"
        )
        out.print(
            f"[bold]audit[/bold] of curve {result.curve!r}, {result.view} view, {rounds_text}: "
            f"{result.trials} trials per world, {result.attack} attack",
            highlight=False,
        )
        out.print(
            f"TPR = {result.tpr:.4f}, FPR = {result.fpr:.4f}, attack success (balanced accuracy) "
            f"= {result.success:.4f}",
            highlight=False,
        )
        out.print(
            f"epsilon lower bound = {result.epsilon_lower:.4g} at {result.confidence:g} confidence "
            f"(delta = {result.delta:g})",
            highlight=False,
        )
        if not result.protected:
            out.print(f"[bold]not protected[/bold]: {result.scope}", highlight=False)
        else:
            table = Table(
                title=f"accountants: epsilon for {result.neighbours}-level neighbours, "
                f"adversary {result.adversary!r}"
            )
            table.add_column("accountant")
            table.add_column("epsilon", justify="right")
            table.add_column("lower / epsilon", justify="right")
            table.add_column("verdict")
            for name, eps in result.epsilon.items():
                verdict = "REFUTED" if name in result.refuted else "consistent"
                table.add_row(name, _fmt(eps), _fmt(result.ratio[name]), verdict)
            out.print(table)
            out.print(f"[bold]scope[/bold]: {result.scope}", highlight=False)
        for party, what in result.trusted.items():
            out.print(f"[bold]trusts[/bold] the {party}: {what}", highlight=False)
        for note in result.notes:
            out.print(f"[dim]note: {note}[/dim]", highlight=False)
        if plot is not None:
            out.print(f"plot: {plot}", markup=False)
    if result.refuted:
        raise typer.Exit(3)


@app.command("frontier")
def frontier_command(
    setup: Annotated[
        list[str] | None,
        typer.Option(
            "--setup",
            help="regression | logistic | regression-record (repeatable; default: all).",
        ),
    ] = None,
    iterations: Annotated[
        list[int] | None,
        typer.Option(
            "--iterations", help="Iterations T (repeatable; default: the papers' T and T/10)."
        ),
    ] = None,
    epsilon: Annotated[
        list[float] | None,
        typer.Option("--epsilon", help="Target epsilon (repeatable; default 0.5 1 2 5 10 50)."),
    ] = None,
    scheme: Annotated[
        list[str] | None,
        typer.Option(
            "--scheme",
            help="Scheme to compare (repeatable; default: every registered one, or with "
            "--adversary those that protect against it).",
        ),
    ] = None,
    adversary: Annotated[
        str | None,
        typer.Option(
            "--adversary",
            help="Calibrate every scheme to what this adversary observes (privacy.adversary).",
        ),
    ] = None,
    tune: Annotated[
        bool,
        typer.Option(
            "--tune",
            help="Search each scheme's knobs (mu and its own) at equal epsilon; report its "
            "best point.",
        ),
    ] = False,
    tune_for: Annotated[
        str,
        typer.Option(
            "--tune-for",
            help="Metric the tuned point minimises: centroid_msd_db | individual_msd_db | "
            "test_error.",
        ),
    ] = "centroid_msd_db",
    tune_on: Annotated[
        str,
        typer.Option(
            "--tune-on",
            help="private (search on the real data: spends privacy) | proxy (synthetic data "
            "of the same shape, another seed; the chosen points then run on the real data).",
        ),
    ] = "private",
    grid: Annotated[
        list[str] | None,
        typer.Option(
            "--grid",
            help="SETTING=V1,V2,... replaces a knob's default grid (repeatable; implies "
            "--tune), e.g. training.mu=0.1,0.3 or privacy.pairwise_ratio=2,4.",
        ),
    ] = None,
    mu: Annotated[
        float | None, typer.Option("--mu", help="Step size mu (default: the set-up's).")
    ] = None,
    repetitions: Annotated[
        int | None,
        typer.Option("--repetitions", help="Repetitions (default: the set-up's; 1 with --quick)."),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Root seed >= 0.")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="T = 200 and 20, one repetition.")] = False,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help=f"Output folder (default: runs/{FRONTIER_FOLDER}, with --quick "
            f"runs/{FRONTIER_FOLDER}-quick).",
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Keep the curves an interrupted run saved in --out.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the frontier summary JSON to stdout.")
    ] = False,
    force: ForceOpt = False,
) -> None:
    """Privacy-utility frontier: each scheme's noise calibrated to each target epsilon.

    Runs the engine at delta = 1e-5 (pgfl.apps.frontier) and writes summary.json,
    frontier.csv and frontier.png into --out; ``pgfl reproduce frontier`` is the default.
    """
    from pgfl.apps.frontier import SCHEMES, SETUPS, frontier_configs, protecting
    from pgfl.privacy import mechanisms  # lazy: the registry, dp_accounting

    setups = [check_choice("--setup", s, tuple(SETUPS)) for s in setup or SETUPS]
    if adversary is not None:
        check_choice("--adversary", adversary, tuple(mechanisms.ADVERSARIES))
    default = protecting(adversary) if adversary is not None else tuple(SCHEMES)
    schemes = [check_choice("--scheme", s, tuple(SCHEMES)) for s in scheme or default]
    tuning = frontier_tuning(tune or bool(grid), tune_for, tune_on, grid or ())
    eps = [checked("privacy.target_epsilon", e, "--epsilon") for e in epsilon or ()]
    counts = [checked("iterations", t, "--iterations") for t in iterations or ()]
    for name, values in (("--setup", setups), ("--scheme", schemes), ("--epsilon", eps),
                         ("--iterations", counts)):  # fmt: skip
        if len(set(values)) != len(values):
            raise ConfigError(f"{name} values must be distinct; got {values}")
    mu = checked("training.mu", mu, "--mu")
    repetitions = checked("repetitions", repetitions, "--repetitions")
    seed = checked("seed", seed, "--seed")
    build = functools.partial(
        frontier_configs, quick=quick, seed=seed, setups=setups, iterations=counts or None,
        epsilons=sorted(eps) or None, schemes=schemes, repetitions=repetitions, mu=mu,
        adversary=adversary, tuning=tuning,
    )  # fmt: skip
    configs = build()
    proxy = tuning is not None and tuning.on == "proxy"
    folder = out_dir or default_folder(FRONTIER_FOLDER, quick=quick)
    run_frontier_command(folder, configs, quick=quick, resume=resume, as_json=as_json,
                         force=force, tuning=tuning,
                         final=(lambda c: build(chosen=c)) if proxy else None)  # fmt: skip


def frontier_tuning(tune: bool, metric: str, on: str, grid: Sequence[str]) -> Any:
    """The frontier's :class:`~pgfl.apps.frontier.Tuning` of the options (None: untuned).

    ``grid`` items are ``SETTING=V1,V2,...``; each value is checked against the parameter
    table (one line naming the option, the setting and the value).
    """
    from pgfl.apps.frontier import Tuning  # lazy: the experiments

    if not tune:
        return None
    from pgfl.params import PARAMS  # lazy: the mechanisms' registry, dp_accounting

    values: dict[str, tuple[Any, ...]] = {}
    for item in grid:
        name, sep, text = item.partition("=")
        if not sep or not text or name in values:
            raise ConfigError(f"--grid takes distinct SETTING=V1,V2,... items; got {item!r}")
        if name not in PARAMS:
            raise ConfigError(f"--grid: unknown setting {name!r}" + did_you_mean(name, PARAMS))
        values[name] = tuple(checked(name, _number(v), "--grid") for v in text.split(","))
    return Tuning(metric, on, values)


def _number(text: str) -> Any:
    """``text`` as an int, else a float, else itself (a choice)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
