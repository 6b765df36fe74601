"""The ``pgfl`` command: run experiments, reproduce the papers, benchmark the engine.

Exit codes: 0 success; 2 bad input, told in one line ``error: ...`` naming the setting or
file, its allowed range or problem and the value given (a :class:`ConfigError`, its
:class:`~pgfl.files.FileError`, or a usage error), with nothing written; 1 an internal
error (a bug: one line with a hint to report it; the traceback with ``pgfl --debug`` or
``PGFL_DEBUG=1``) or a run stopped by its backend (``run stopped: ...``, e.g. a Ray worker
lost for good; the finished work is saved and ``--resume`` continues); 130 interrupted
(Ctrl-C keeps every finished curve on disk; ``--resume`` continues). Warnings are one
line ``warning: ...``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import traceback
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pgfl.graphlearn.cli import app as graphlearn_app
from pgfl.privacy.cli import app as privacy_app
from pgfl.validation import ConfigError, check_int, check_real

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

#: Environment variable that, set to anything but "" or "0", shows internal tracebacks.
DEBUG_ENV = "PGFL_DEBUG"
_state = {"debug": False, "told_interrupt": False}


@app.callback()
def _options(
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help=f"Show the traceback of an internal error (or {DEBUG_ENV}=1)."
        ),
    ] = False,
) -> None:
    _state["debug"] = debug


def _debugging() -> bool:
    return _state["debug"] or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def _plain(text: str) -> None:
    """Print a line as is: no markup (paths may hold brackets), never wrapped."""
    out.print(text, markup=False, highlight=False, soft_wrap=True)


OutOpt = Annotated[Path | None, typer.Option("--out", help="Output folder (default: runs/NAME).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the summary JSON to stdout.")]
ResumeOpt = Annotated[
    bool, typer.Option("--resume", help="Keep the curves an interrupted run saved in --out.")
]

BackendOpt = Annotated[
    str | None,
    typer.Option("--backend", help="local (this process) or ray (default: the file's \\[run])."),
]
AddressOpt = Annotated[
    str | None,
    typer.Option("--address", help="Join the Ray cluster at this address (ray start --head)."),
]
WorkersOpt = Annotated[
    int | None, typer.Option("--workers", help="CPUs of the local Ray (default: all).")
]
ModeOpt = Annotated[
    str | None,
    typer.Option("--mode", help="Ray: tasks (curves x repetition blocks) or actors (units)."),
]
ActorsOpt = Annotated[int | None, typer.Option("--actors", help="Ray actors (--mode actors).")]


def _with_run_options(cfg: Any, **options: Any) -> Any:
    """``cfg`` with its ``[run]`` table overridden by the command-line options given.

    Each value is checked against its setting's range under the option's name; an option
    that has no effect (``--workers`` without ``--backend ray`` or ``run.backend = "ray"``)
    is refused in one line.
    """
    from dataclasses import replace

    from pgfl.params import PARAMS

    given = {k: v for k, v in options.items() if v is not None}
    if not given:
        return cfg
    for key, value in given.items():
        given[key] = replace(PARAMS[f"run.{key}"], name=f"--{key}").check(value)
    merged = {**{k: getattr(cfg.run, k) for k in ("backend", "mode", "address")}, **given}
    for key in given:
        rule = PARAMS[f"run.{key}"].applies
        ctx = {f"run.{k}": v for k, v in merged.items()}
        if rule is not None and not rule.test(ctx):
            needs = {"actors": "--mode actors", "workers": "--backend ray, no --address"}.get(
                key, "--backend ray"
            )
            raise ConfigError(
                f"--{key} has no effect: it applies only with {rule.text} (give {needs})"
            )
    if merged["backend"] != "ray":  # --backend local: the file's Ray settings do not apply
        return replace(cfg, run=type(cfg.run)())
    return replace(cfg, run=replace(cfg.run, **given))


_HEADERS = {
    "centroid_msd_db": "centroid MSD dB",
    "individual_msd_db": "indiv. MSD dB",
    "disagreement_db": "disagree. dB",
    "test_error": "test error",
    "test_log_loss": "test log-loss",
}


def _fmt(value: Any, digits: int = 2) -> str:
    """A table cell; ``—`` for no value (diverged) or a non-finite one (``-inf`` dB).

    A single unit has zero disagreement, whose dB value is ``10 log10 0 = -inf``.
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return escape(str(value))


def print_sweep(summary: dict[str, Any]) -> None:
    """A table of swept curves (graph learning): one column per swept value ``x``."""
    curves = summary["curves"]
    name = summary.get("x_name", "x")
    _plain(f"{summary.get('experiment', '')}: MCC / relative error per {name}")
    table = Table()
    table.add_column(f"curve \\ {escape(name)}")
    for x in curves[0]["x"]:
        table.add_column(str(x), justify="right")
    for c in curves:
        mcc, rel = c.get("mcc", []), c.get("relative_error", [])
        cells = (f"{_fmt(m)} / {_fmt(r)}" for m, r in zip(mcc, rel, strict=False))
        table.add_row(escape(c["label"]), *cells)
    out.print(table)
    for c in curves:
        if "epsilon" in c:
            _plain(f"{c['label']}: epsilon {c['epsilon']}")
    for claim, holds in summary.get("claims", {}).items():
        _plain(f"claim {claim}: {'holds' if holds else 'does NOT hold'}")


def print_frontier(summary: dict[str, Any]) -> None:
    """The privacy-utility frontier: per set-up and T, centroid MSD (dB) per target ε."""
    from itertools import groupby

    curves = summary["curves"]
    key = lambda c: (c["setup"], c["iterations"])  # noqa: E731
    for (setup, T), group in groupby(curves, key=key):
        group = list(group)
        has_test = "test_error" in group[0]
        what = "centroid MSD dB (test error)" if has_test else "centroid MSD dB"
        table = Table(title=f"{setup}, T={T}: {what} at target ε")
        table.add_column("scheme")
        for x in group[0]["x"]:
            table.add_column(f"ε={x:g}", justify="right")
        for c in group:
            errors = c.get("test_error", [None] * len(c["x"]))
            cells = [
                _fmt(m, 1) + (f" ({e:.3f})" if e is not None else "")
                for m, e in zip(c["centroid_msd_db"], errors, strict=True)
            ]
            table.add_row(escape(c["label"]), *cells)
        for b in summary.get("baselines", []):
            if (b["setup"], b["iterations"]) == (setup, T):
                err_ = f" ({b['test_error']:.3f})" if b.get("test_error") is not None else ""
                cell = _fmt(b["centroid_msd_db"], 1) + err_
                table.add_row("no privacy", *([cell] * len(group[0]["x"])))
        out.print(table)
    _plain(
        f"noise calibrated with the {summary['accountant']} accountant at delta = "
        f"{summary['delta']:g}; what each epsilon covers: summary.json (scope) and "
        "docs/privacy.md (— = diverged)"
    )


def print_scores(summary: dict[str, Any]) -> None:
    """A table of named score sets (e.g. clustering NMI / RI / FMI per method)."""
    rows = summary["table"]
    metrics = list(next(iter(rows.values()), {}))
    table = Table(title=escape(str(summary.get("experiment", ""))))
    table.add_column("method")
    for m in metrics:
        table.add_column(m.upper(), justify="right")
    for name, scores in rows.items():
        table.add_row(escape(name), *(_fmt(scores.get(m), 3) for m in metrics))
    out.print(table)


def print_summary(summary: dict[str, Any]) -> None:
    """A table of the summary's curves (one row each), ε per accountant, divergences."""
    curves = summary.get("curves", [])
    if summary.get("experiment") == "frontier":
        print_frontier(summary)
        return
    if curves and isinstance(curves[0].get("x"), list):
        print_sweep(summary)
        return
    if not curves and isinstance(summary.get("table"), dict):
        print_scores(summary)
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
    table = Table(title=escape(str(summary.get("experiment", ""))))
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
        table.add_row(escape(c["label"]), *cells)
    out.print(table)
    deltas = {c["delta"] for c in curves if "delta" in c}
    if deltas:
        out.print(
            f"ε after the last iteration at δ = {', '.join(f'{d:g}' for d in sorted(deltas))}; "
            "what each ε covers: summary.json (epsilon_scope) and docs/privacy.md"
        )
    for c in curves:
        if c.get("diverged"):
            _plain(f"curve {c['label']} diverged at iteration {c['diverged_at']}")
        if c.get("epsilon_reason"):
            _plain(f"curve {c['label']}: ε = ∞ ({c['epsilon_reason']})")


def _fmt_eps(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, str) or value == float("inf"):
        return "∞"
    return f"{value:.3g}"


def _execute(plan: Any, as_json: bool) -> dict[str, Any]:
    """Run a prepared plan with a progress bar on stderr; Ctrl-C says what was saved."""
    from pgfl.backends import make_backend
    from pgfl.experiments.runner import run_plan, saved_curves

    cfg, folder = plan.cfg, plan.out
    backend = make_backend(cfg.run)  # a missing pgfl[ray]: one line, nothing written
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=as_json or not err.is_terminal,  # no bar in logs and pipes
    ) as bar:
        tasks: dict[str, Any] = {}

        def on_progress(labels: str, done: int, total: int) -> None:
            if labels not in tasks:
                short = labels if len(labels) < 60 else labels[:57] + "..."
                tasks[labels] = bar.add_task(escape(short), total=total)
            bar.update(tasks[labels], completed=done)

        try:
            return run_plan(plan, on_progress=on_progress, backend=backend)
        except KeyboardInterrupt:
            bar.stop()
            tasks = len(list(folder.glob("partial/task-*.npz")))  # Ray sweeps' blocks
            also = f" (and {tasks} Ray task(s))" if tasks else ""
            print(
                f"interrupted: {saved_curves(cfg, folder)} of {len(cfg.curves)} curves{also} "
                f"saved in {folder}; rerun with --resume to continue",
                file=sys.stderr,
            )
            _state["told_interrupt"] = True
            raise typer.Exit(130) from None


def _run(cfg: Any, folder: Path, *, resume: bool, as_json: bool) -> None:
    from pgfl.experiments.runner import prepare_experiment

    plan = prepare_experiment(cfg, folder, resume=resume)  # validates; writes nothing
    _report(_execute(plan, as_json), folder, as_json)


def run_frontier_command(
    folder: Path, configs: dict[str, Any], *, quick: bool, resume: bool, as_json: bool,
    run_options: dict[str, Any] | None = None,
) -> None:  # fmt: skip
    """Run the privacy-utility frontier's experiments (``pgfl reproduce frontier``, ...)."""
    from pgfl.experiments.frontier import run_frontier

    configs = {k: _with_run_options(c, **(run_options or {})) for k, c in configs.items()}
    summary = run_frontier(
        folder, quick=quick, resume=resume, configs=configs,
        run=lambda plan: _execute(plan, as_json),
    )  # fmt: skip
    _report(summary, folder, as_json)


def _report(summary: dict[str, Any], folder: Path, as_json: bool) -> None:
    if as_json:
        from pgfl.experiments.results import _jsonable

        sys.stdout.write(json.dumps(_jsonable(summary), indent=2) + "\n")
        return
    print_summary(summary)
    files = sorted(
        p.name for p in folder.iterdir() if p.suffix in (".json", ".csv", ".png", ".log")
    )
    _plain(f"results in {folder}: {', '.join(files)}")


def _seed(seed: int | None) -> int | None:
    return None if seed is None else check_int("--seed", seed, lo=0)


@app.command()
def run(
    config: Annotated[Path, typer.Argument(help="Experiment TOML file.")],
    out_dir: OutOpt = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Apply the file's \\[quick] table.")
    ] = False,
    resume: ResumeOpt = False,
    as_json: JsonOpt = False,
    backend: BackendOpt = None,
    address: AddressOpt = None,
    workers: WorkersOpt = None,
    mode: ModeOpt = None,
    actors: ActorsOpt = None,
) -> None:
    """Run the experiment described by CONFIG (TOML)."""
    from pgfl.experiments.config import parse_config, read_toml
    from pgfl.files import reading

    with reading(config, what="config file"):  # not UTF-8, unreadable: one line
        raw = read_toml(config)
    cfg = parse_config(raw, quick=quick)
    cfg = _with_run_options(
        cfg, backend=backend, address=address, workers=workers, mode=mode, actors=actors
    )
    _run(cfg, out_dir or Path("runs") / cfg.name, resume=resume, as_json=as_json)


@app.command()
def reproduce(
    name: Annotated[str, typer.Argument(help="Preset: fig2..fig6, ... (see --list).")] = "",
    out_dir: OutOpt = None,
    quick: Annotated[bool, typer.Option("--quick", help="Fewer iterations/repetitions.")] = False,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Root seed >= 0 (default: the preset's).")
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
    backend: BackendOpt = None,
    address: AddressOpt = None,
    workers: WorkersOpt = None,
    mode: ModeOpt = None,
    actors: ActorsOpt = None,
) -> None:
    """Reproduce a figure of the papers with the papers' parameters."""
    from pgfl.experiments.frontier import PRESETS as FRONTIER
    from pgfl.experiments.presets import load_preset, preset_names, preset_text
    from pgfl.files import check_output_folder, writing
    from pgfl.graphlearn.presets import PRESETS as GRAPHLEARN

    names = preset_names() + sorted(FRONTIER) + sorted(GRAPHLEARN)
    if list_ or not name:
        _plain("\n".join(names))
        return
    if name not in names:
        raise ConfigError(f"preset must be one of {', '.join(names)}; got {name!r}")
    seed = _seed(seed)
    folder = out_dir or Path("runs") / name
    if name in GRAPHLEARN:
        given = {
            "--print-config": print_config,
            "--resume": resume,
            "--data": data,
            "--rows": rows,
            "--backend": backend,
            "--address": address,
            "--workers": workers,
            "--mode": mode,
            "--actors": actors,
        }
        unused = [opt for opt, value in given.items() if value not in (None, False)]
        if unused:
            raise ConfigError(
                f"{', '.join(unused)}: only for the GFL presets (fig2, ...); {name!r} is a "
                "graph-learning preset"
            )
        check_output_folder(folder)
        with writing(folder):
            summary = GRAPHLEARN[name](quick, folder, 0 if seed is None else seed)
        _report(summary, folder, as_json)
        return
    run_options = {
        "backend": backend, "address": address, "workers": workers, "mode": mode,
        "actors": actors,
    }  # fmt: skip
    if name in FRONTIER:
        given = {"--print-config": print_config, "--data": data, "--rows": rows}
        unused = [opt for opt, value in given.items() if value not in (None, False)]
        if unused:
            raise ConfigError(
                f"{', '.join(unused)}: not for the frontier preset (it runs generated "
                "configurations; see 'pgfl privacy frontier --help' to choose them)"
            )
        from pgfl.experiments.frontier import frontier_configs

        configs = frontier_configs(quick=quick, seed=seed)
        run_frontier_command(
            folder, configs, quick=quick, resume=resume, as_json=as_json,
            run_options=run_options,
        )  # fmt: skip
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
    cfg = _with_run_options(cfg, **run_options)
    _run(cfg, folder, resume=resume, as_json=as_json)


@app.command()
def bench(
    as_json: JsonOpt = False,
    scale: Annotated[str, typer.Option("--scale", help="paper, medium, large or all.")] = "paper",
    seconds: Annotated[
        float, typer.Option("--seconds", help="Target time per case, in seconds (> 0).")
    ] = 3.0,
    compare: Annotated[
        bool,
        typer.Option(
            "--compare", help="pgfl vs a per-client numpy loop on the same work (paper, flower)."
        ),
    ] = False,
    threads: Annotated[
        bool,
        typer.Option(
            "--threads",
            help="Measure on 1, 2, 4, ... threads up to the cores (compiled local phase) and fit "
            "Amdahl's serial fraction; with --compare, the ratio on each thread count.",
        ),
    ] = False,
) -> None:
    """Measure engine throughput (client updates per second) at paper and larger scales."""
    from pgfl.bench import bench_threads, run_bench, thread_counts
    from pgfl.bench import compare as run_compare

    seconds = check_real("--seconds", seconds, lo=0.0, lo_open=True)
    log = None if as_json else err.print
    counts = None
    if threads:
        from pgfl.engine.compiled import max_threads

        counts = thread_counts(max_threads())
    if compare:
        result = run_compare(seconds, log, counts)
    elif threads:
        result = bench_threads(scale, seconds, log, counts)
    else:
        result = run_bench(scale, seconds, log)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return
    notes = []
    if compare:
        title = "pgfl bench --compare (client updates per second)"
        columns = ("workload", "threads", "pgfl", "per-client loop", "ratio", "local phase")
        rows = [
            (
                r["workload"],
                str(r.get("threads", "-")),
                f"{r['pgfl_client_updates_per_s']:,.0f}",
                f"{r['loop_client_updates_per_s']:,.0f}",
                f"{r['ratio']:.1f}x",
                r["local_phase"],
            )
            for r in result["compare"]
        ]
    elif threads:
        workers = "spinning" if result["workers_spin"] else "sleeping"
        title = f"pgfl bench --threads (local phase: {result['local_phase']}, {workers} workers)"
        columns = ("case", "threads", "client_updates_per_s", "speed-up", "rounds_per_s", "trials")
        rows = [
            (
                c["case"],
                str(c["threads"]),
                f"{c['client_updates_per_s']:,.0f}",
                f"{c['speedup']:.2f}x",
                f"{c['rounds_per_s']:,.1f}",
                str(c["trials"]),
            )
            for c in result["curve"]
        ]
        for name, fit in result["amdahl"].items():
            if not fit["parallel_kernel"]:
                notes.append(f"{name}: below the parallel threshold (local SGD on one thread)")
            elif fit["serial_fraction"] is not None and fit["serial_fraction"] > 1.0:
                notes.append(f"{name}: no speed-up on more threads (other jobs on the cores?)")
            elif fit["serial_fraction"] is not None:
                notes.append(
                    f"{name}: Amdahl serial fraction {fit['serial_fraction']:.2f} "
                    f"(1 vs {fit['threads'][1]} threads); predicts "
                    f"{fit['predicted_speedup_16']:.1f}x on 16 threads"
                )
    else:
        title = "pgfl bench"
        columns = ("case", "client_updates_per_s", "rounds_per_s", "trials", "peak_rss_gib")
        rows = [
            (
                c["case"],
                f"{c['client_updates_per_s']:,.0f}",
                f"{c['rounds_per_s']:,.1f}",
                str(c["trials"]),
                f"{c.get('peak_rss_gib', 0):.2f}",
            )
            for c in result["cases"]
        ]
    table = Table(title=title)
    for col in columns:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*row)
    out.print(table)
    for note in notes:
        out.print(note)


def _usage_message(exc: Exception) -> str:
    """A usage error's message; a value that failed to parse is echoed (``got 'abc'``)."""
    message = exc.format_message()  # type: ignore[attr-defined]
    cause = exc.__cause__
    if cause is not None and hasattr(cause, "errors"):  # pydantic's ValidationError
        errors = cause.errors()
        if errors and "input" in errors[0]:
            message = f"{message.rstrip('.')}; got {errors[0]['input']!r}"
    return message


def _fail(code: int, message: str) -> SystemExit:
    print("error: " + " ".join(message.split()), file=sys.stderr)
    return SystemExit(code)


def _exit_for(exc: BaseException) -> SystemExit:
    """The exit (code, one line on stderr) for an exception escaping a command."""
    if isinstance(exc, typer.Exit):
        return SystemExit(exc.exit_code)
    if isinstance(exc, typer.Abort) and isinstance(exc.__cause__, Exception):
        exc = exc.__cause__  # the framework turns an EOFError into Abort: not an interrupt
    elif isinstance(exc, (typer.Abort, KeyboardInterrupt)):
        print("interrupted", file=sys.stderr)
        return SystemExit(130)
    if isinstance(exc, ConfigError):
        return _fail(2, str(exc) or type(exc).__name__)
    from pgfl.backends import RunStopped

    if isinstance(exc, RunStopped):  # finished work is saved; --resume continues
        return _fail(1, f"run stopped: {exc}")
    if isinstance(exc, typer.TyperException):  # click's usage errors: exit 2
        message = _usage_message(exc)
        if not message.strip():  # no arguments: the help was shown
            return SystemExit(2)
        return _fail(2, message)
    if _debugging():
        traceback.print_exception(exc, file=sys.stderr)
        hint = ""
    else:
        hint = f" (rerun as 'pgfl --debug ...' or with {DEBUG_ENV}=1 for the traceback)"
    if isinstance(exc, MemoryError):
        return _fail(1, f"out of memory: {exc}{hint}")
    if isinstance(exc, OSError):
        return _fail(1, f"{exc}{hint}")
    return _fail(
        1,
        f"internal error: {type(exc).__name__}: {exc}. This is a bug in pgfl; please report "
        f"it with the command you ran{hint}",
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app and turn what escapes it into an exit code (module doc)."""
    _state.update(debug=False, told_interrupt=False)
    with warnings.catch_warnings():
        full = warnings.showwarning

        def one_line(message, category, filename, lineno, file=None, line=None) -> None:
            if _debugging():
                full(message, category, filename, lineno, file, line)
            else:
                print("warning: " + " ".join(str(message).split()), file=sys.stderr)

        warnings.showwarning = one_line
        try:
            code = app(args=argv, standalone_mode=False, prog_name="pgfl")
        except (Exception, KeyboardInterrupt) as exc:
            raise _exit_for(exc) from None
    if code == 130 and not _state["told_interrupt"]:  # Ctrl-C, which the framework swallows
        print("interrupted", file=sys.stderr)
    if isinstance(code, int) and code:
        raise SystemExit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
