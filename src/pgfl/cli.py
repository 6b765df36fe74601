"""The ``pgfl`` command: run experiments, reproduce the papers, benchmark the engine.

Bad input never shows a traceback: any :class:`ConfigError` (or other ``ValueError``,
``TypeError``, missing file, usage error) becomes one line on stderr and exit code 2.
Ctrl-C keeps every finished curve on disk and exits with 130; ``--resume`` continues.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pgfl.graphlearn.cli import app as graphlearn_app
from pgfl.privacy.cli import app as privacy_app

app = typer.Typer(
    name="pgfl",
    help="Privacy-preserving graph federated learning: simulate, reproduce, benchmark.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(privacy_app, name="privacy")
app.add_typer(graphlearn_app, name="graphlearn")

err = Console(stderr=True)
out = Console()
if not out.is_terminal:  # pipes and CI logs: wide enough for the summary table
    out = Console(width=160)

OutOpt = Annotated[Path | None, typer.Option("--out", help="Output folder (default: runs/NAME).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the summary JSON to stdout.")]
ResumeOpt = Annotated[
    bool, typer.Option("--resume", help="Keep the curves an interrupted run saved in --out.")
]


_HEADERS = {
    "centroid_msd_db": "centroid MSD dB",
    "individual_msd_db": "indiv. MSD dB",
    "disagreement_db": "disagree. dB",
    "test_error": "test error",
    "test_log_loss": "test log-loss",
}


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def print_sweep(summary: dict[str, Any], folder: Path) -> None:
    """A table of swept curves (graph learning): one column per swept value ``x``."""
    curves = summary["curves"]
    name = summary.get("x_name", "x")
    table = Table(title=f"{summary.get('experiment', '')}: {folder}   (MCC / relative error)")
    table.add_column(f"curve \\ {name}")
    for x in curves[0]["x"]:
        table.add_column(str(x), justify="right")
    for c in curves:
        mcc, rel = c.get("mcc", []), c.get("relative_error", [])
        table.add_row(c["label"], *(f"{m:.2f} / {r:.2f}" for m, r in zip(mcc, rel, strict=False)))
    out.print(table)
    for c in curves:
        if "epsilon" in c:
            out.print(f"{c['label']}: epsilon {c['epsilon']}")
    for claim, holds in summary.get("claims", {}).items():
        out.print(f"claim {claim}: {'holds' if holds else 'does NOT hold'}")


def print_scores(summary: dict[str, Any], folder: Path) -> None:
    """A table of named score sets (e.g. clustering NMI / RI / FMI per method)."""
    rows = summary["table"]
    metrics = list(next(iter(rows.values()), {}))
    table = Table(title=f"{summary.get('experiment', '')}: {folder}")
    table.add_column("method")
    for m in metrics:
        table.add_column(m.upper(), justify="right")
    for name, scores in rows.items():
        table.add_row(name, *(_fmt(scores.get(m), 3) for m in metrics))
    out.print(table)


def print_summary(summary: dict[str, Any], folder: Path) -> None:
    """A table of the summary's curves (one row each), ε per accountant, divergences."""
    curves = summary.get("curves", [])
    if curves and isinstance(curves[0].get("x"), list):
        print_sweep(summary, folder)
        return
    if not curves and isinstance(summary.get("table"), dict):
        print_scores(summary, folder)
        return
    keys: list[str] = []
    for c in curves:
        for k, v in c.items():
            skip = k in ("label", "settings", "diverged_at", "delta", "noise_variance")
            if k not in keys and not skip and not isinstance(v, (dict, list, str)):
                keys.append(k)
    accountants: list[str] = []
    for c in curves:
        accountants += [a for a in c.get("epsilon", {}) if a not in accountants]
    table = Table(title=f"{summary.get('experiment', '')}: {folder}")
    table.add_column("curve")
    for k in keys:
        table.add_column(_HEADERS.get(k, k), justify="right")
    for a in accountants:
        table.add_column(f"ε {a}", justify="right")
    for c in curves:
        cells = [
            f"at {c.get('diverged_at')}"
            if k == "diverged" and c.get("diverged")
            else _fmt(c.get(k))
            for k in keys
        ]
        eps = c.get("epsilon", {})
        cells += [_fmt_eps(eps.get(a)) for a in accountants]
        table.add_row(c["label"], *cells)
    out.print(table)
    deltas = {c["delta"] for c in curves if "delta" in c}
    if deltas:
        out.print(
            f"ε after the last iteration at δ = {', '.join(f'{d:g}' for d in sorted(deltas))}; "
            "what each ε covers: summary.json (epsilon_scope) and docs/privacy.md"
        )
    for c in curves:
        if c.get("diverged"):
            out.print(f"curve {c['label']} diverged at iteration {c['diverged_at']}")
        if c.get("epsilon_reason"):
            out.print(f"curve {c['label']}: ε = ∞ ({c['epsilon_reason']})")


def _fmt_eps(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str) or value == float("inf"):
        return "∞"
    return f"{value:.3g}"


def _run(cfg: Any, folder: Path, *, resume: bool, as_json: bool) -> None:
    from pgfl.experiments.runner import run_experiment

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=as_json,
    ) as bar:
        tasks: dict[str, Any] = {}

        def on_progress(labels: str, done: int, total: int) -> None:
            if labels not in tasks:
                short = labels if len(labels) < 60 else labels[:57] + "..."
                tasks[labels] = bar.add_task(short, total=total)
            bar.update(tasks[labels], completed=done)

        try:
            summary = run_experiment(cfg, folder, resume=resume, on_progress=on_progress)
        except KeyboardInterrupt:
            saved = len(list((folder / "partial").glob("curve-*.npz")))
            print(
                f"interrupted: {saved} of {len(cfg.curves)} curves saved in {folder}; "
                "rerun with --resume to continue",
                file=sys.stderr,
            )
            raise typer.Exit(130) from None
    _report(summary, folder, as_json)


def _report(summary: dict[str, Any], folder: Path, as_json: bool) -> None:
    if as_json:
        from pgfl.experiments.results import _jsonable

        sys.stdout.write(json.dumps(_jsonable(summary), indent=2) + "\n")
        return
    print_summary(summary, folder)
    files = sorted(
        p.name for p in folder.iterdir() if p.suffix in (".json", ".csv", ".png", ".log")
    )
    out.print(f"results in {folder}: {', '.join(files)}")


@app.command()
def run(
    config: Annotated[Path, typer.Argument(help="Experiment TOML file.")],
    out_dir: OutOpt = None,
    quick: Annotated[bool, typer.Option("--quick", help="Apply the file's [quick] table.")] = False,
    resume: ResumeOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the experiment described by CONFIG (TOML)."""
    from pgfl.experiments.config import load_config

    cfg = load_config(config, quick=quick)
    _run(cfg, out_dir or Path("runs") / cfg.name, resume=resume, as_json=as_json)


@app.command()
def reproduce(
    name: Annotated[str, typer.Argument(help="Preset: fig2..fig6, ... (see --list).")] = "",
    out_dir: OutOpt = None,
    quick: Annotated[bool, typer.Option("--quick", help="Fewer iterations/repetitions.")] = False,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Root seed (default: the preset's).")
    ] = None,
    resume: ResumeOpt = False,
    as_json: JsonOpt = False,
    list_: Annotated[bool, typer.Option("--list", help="List the presets and exit.")] = False,
    print_config: Annotated[
        bool, typer.Option("--print-config", help="Print the preset's TOML and exit.")
    ] = False,
    data: Annotated[
        str | None,
        typer.Option(
            "--data", help="Real data: a data set name, an Avazu CSV path, or csv:PATH:LABEL."
        ),
    ] = None,
    rows: Annotated[
        int | None, typer.Option("--rows", help="Training rows to read from --data.")
    ] = None,
) -> None:
    """Reproduce a figure of the papers with the papers' parameters."""
    from pgfl.experiments.presets import load_preset, preset_names, preset_text
    from pgfl.graphlearn.presets import PRESETS as GRAPHLEARN
    from pgfl.validation import ConfigError

    names = preset_names() + sorted(GRAPHLEARN)
    if list_ or not name:
        out.print("\n".join(names))
        return
    if name not in names:
        raise ConfigError(f"preset must be one of {', '.join(names)}; got {name!r}")
    folder = out_dir or Path("runs") / name
    if name in GRAPHLEARN:
        summary = GRAPHLEARN[name](quick, folder, 0 if seed is None else seed)
        _report(summary, folder, as_json)
        return
    if print_config:
        sys.stdout.write(preset_text(name))
        return
    overrides: dict[str, object] = {}
    if data is not None:
        overrides["source"] = data
    if rows is not None:
        overrides["rows"] = rows
    cfg = load_preset(name, quick=quick, seed=seed, data=overrides)
    if overrides and cfg.curves[0].data.kind != "classification":
        raise ConfigError(f"--data/--rows apply to real-data presets (fig7); got preset {name!r}")
    _run(cfg, folder, resume=resume, as_json=as_json)


@app.command()
def bench(
    as_json: JsonOpt = False,
    scale: Annotated[str, typer.Option("--scale", help="paper, medium, large or all.")] = "paper",
    seconds: Annotated[float, typer.Option("--seconds", help="Target time per case.")] = 3.0,
) -> None:
    """Measure engine throughput (client updates per second) at paper and larger scales."""
    from pgfl.bench import run_bench

    result = run_bench(scale=scale, seconds=seconds, log=None if as_json else err.print)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return
    table = Table(title="pgfl bench")
    for col in ("case", "client_updates_per_s", "rounds_per_s", "trials", "peak_rss_gib"):
        table.add_column(col, justify="right")
    for case in result["cases"]:
        table.add_row(
            case["case"],
            f"{case['client_updates_per_s']:,.0f}",
            f"{case['rounds_per_s']:,.1f}",
            str(case["trials"]),
            f"{case.get('peak_rss_gib', 0):.2f}",
        )
    out.print(table)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app; bad input becomes one line on stderr and exit code 2."""
    from pgfl.validation import ConfigError

    try:
        code = app(args=argv, standalone_mode=False, prog_name="pgfl")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as exc:  # usage errors come from typer's (possibly vendored) click
        kind = type(exc).__name__
        if kind == "Abort":
            print("interrupted", file=sys.stderr)
            raise SystemExit(130) from None
        if kind == "Exit":
            raise SystemExit(getattr(exc, "exit_code", 0)) from None
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            message = exc.format_message()
        elif isinstance(exc, (ConfigError, ValueError, FileNotFoundError)):
            message = str(exc) or kind
        else:
            raise
        print("error: " + " ".join(message.split()), file=sys.stderr)
        raise SystemExit(2) from None
    if isinstance(code, int) and code:
        raise SystemExit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
