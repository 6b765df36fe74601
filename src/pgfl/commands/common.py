"""What every command shares: consoles, options, settings checked against the table, runs.

A command's option that mirrors a setting (``--seed``, ``--mu``, ``--backend``) is checked
with that setting's :class:`~pgfl.param.Param` from :data:`pgfl.params.PARAMS`
(:func:`checked`), so its range lives in one place and its error names the setting.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from pgfl.commands.printing import print_summary
from pgfl.files import jsonable, read_toml, reading

__all__ = [
    "check_run_options",
    "checked",
    "default_folder",
    "err",
    "execute",
    "load_experiment",
    "out",
    "plain",
    "prepare_frontier_command",
    "report",
    "run_experiment_command",
    "run_frontier_command",
    "run_frontier_plan",
    "setting",
    "state",
    "with_run_options",
]

err = Console(stderr=True)
out = Console()
if not out.is_terminal:  # pipes and CI logs: wide enough for the summary table
    out = Console(width=160)

#: What the entry point needs to know of the command that ran.
state = {"debug": False, "told_interrupt": False}


def plain(text: str) -> None:
    """Print a line as is: no markup (paths may hold brackets), never wrapped."""
    out.print(text, markup=False, highlight=False, soft_wrap=True)


def checked(name: str, value: Any, option: str) -> Any:
    """``value`` of command-line ``option`` checked as setting ``name`` (``None`` passes).

    >>> checked("seed", 3, "--seed")
    3
    >>> checked("training.mu", -1.0, "--mu")
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: training.mu (--mu) must be a real number in (0, inf); got -1.0
    """
    if value is None:
        return None
    return setting(name).named(f"{name} ({option})").check(value)


def setting(name: str) -> Any:
    """The :class:`~pgfl.param.Param` of setting ``name``, importing no more than it needs.

    The general settings (:mod:`pgfl.general`: the top level, ``[run]``, μ, ...) are read
    without the whole table, whose import loads the privacy mechanisms and
    ``dp_accounting`` (about a second): the options that mirror them are checked before
    any heavy import.
    """
    from pgfl import general  # lazy: the settings table without the mechanisms (startup)

    if name in general.PARAMS:
        return general.PARAMS[name]
    from pgfl.params import PARAMS  # lazy: the mechanisms' registry, dp_accounting

    return PARAMS[name]


OutOpt = Annotated[Path | None, typer.Option("--out", help="Output folder (default: runs/NAME).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the summary JSON to stdout.")]
ResumeOpt = Annotated[
    bool, typer.Option("--resume", help="Keep the curves an interrupted run saved in --out.")
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Write into --out although it holds files pgfl did not write or results of "
        "another configuration (pgfl replaces the files it writes, deletes nothing else).",
    ),
]


def default_folder(name: str, *, quick: bool) -> Path:
    """Where a command writes without ``--out``: ``runs/NAME``, ``runs/NAME-quick``.

    >>> str(default_folder("fig2", quick=True))
    'runs/fig2-quick'
    """
    return Path("runs") / (f"{name}-quick" if quick else name)


BackendOpt = Annotated[
    str | None,
    typer.Option("--backend", help="local (this process) or ray (default: the file's \\[run])."),
]
AddressOpt = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="Join the Ray cluster at this address (ray start --head prints it; 'auto': the "
        "one on this machine). Without it: a new local Ray.",
    ),
]
WorkersOpt = Annotated[
    int | None, typer.Option("--workers", help="CPUs of the local Ray (default: all).")
]
ModeOpt = Annotated[
    str | None,
    typer.Option("--mode", help="Ray: tasks (curves x repetition blocks) or actors (units)."),
]
ActorsOpt = Annotated[int | None, typer.Option("--actors", help="Ray actors (--mode actors).")]
KeepPartialOpt = Annotated[
    bool,
    typer.Option(
        "--keep-partial",
        help="Keep OUT/partial/ after the run finishes (run.keep_partial; an interrupted run "
        "always keeps it for --resume).",
    ),
]


def with_run_options(cfg: Any, **options: Any) -> Any:
    """``cfg`` with its ``[run]`` table overridden by the command-line options given.

    Each value is checked against its setting's range under the option's name (a wrong
    value: one line, exit 2); an option that has no effect (``--workers`` without
    ``--backend ray`` or ``run.backend = "ray"``) is ignored with a one-line
    :class:`~pgfl.param.SettingWarning` naming what it needs.
    """
    given = check_run_options(**options)
    if not given:
        return cfg
    merged = {**{k: getattr(cfg.run, k) for k in ("backend", "mode", "address")}, **given}
    ctx = {f"run.{k}": v for k, v in merged.items()}
    for key in list(given):
        needs = {"actors": "--mode actors", "workers": "--backend ray, no --address"}.get(
            key, "--backend ray"
        )
        param = setting(f"run.{key}")
        if param.warn_without_effect(
            given[key], [ctx], name=f"--{key}", who="it needs", hint=f"give {needs}"
        ):
            del given[key]
    if merged["backend"] != "ray":  # --backend local: the file's Ray settings do not apply
        return replace(cfg, run=type(cfg.run)(**{"keep_partial": cfg.run.keep_partial, **given}))
    return replace(cfg, run=replace(cfg.run, **given))


def check_run_options(**options: Any) -> dict[str, Any]:
    """The ``[run]`` options given (not ``None``), each checked as its setting, named as the option.

    >>> check_run_options(backend="ray", workers=None)
    {'backend': 'ray'}
    >>> check_run_options(mode="atcors")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: --mode must be one of ...; got 'atcors' (did you mean 'actors'?)
    """
    return {
        key: replace(setting(f"run.{key}"), name=f"--{key}").check(value)
        for key, value in options.items()
        if value is not None
    }


#: The progress display of the running command (``None`` when none is open): a command
#: that runs several presets or sub-runs shows them in one display, each run's batches
#: under the preset's own bar.
_display: dict[str, Any] = {"progress": None}


@contextlib.contextmanager
def progress_display(as_json: bool, console: Console | None = None) -> Iterator[Progress]:
    """The command's progress bars on stderr: per preset, per batch of curves, time left.

    One display for the whole command (a nested call returns the open one). Quiet with
    ``--json`` and when stderr is not a terminal (logs, pipes, CI): nothing is printed.
    Each bar shows what it counts (rounds, presets, configurations), done/total, the time
    spent and an estimate of the time left. ``console`` replaces stderr (tests).
    """
    if _display["progress"] is not None:
        yield _display["progress"]
        return
    console = console or err
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=24),
        TextColumn("{task.completed}/{task.total} {task.fields[unit]}"),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=as_json or not console.is_terminal,  # no bar in logs and pipes
        # what the command prints on stdout goes through the display only when stdout is
        # the same screen: a summary piped to a file stays on stdout
        redirect_stdout=sys.stdout.isatty(),
    )
    _display["progress"] = bar
    try:
        with bar:
            yield bar
    finally:
        _display["progress"] = None


def _short(text: str, width: int = 48) -> str:
    """``text`` cut to ``width`` characters (``...`` marks the cut), markup escaped."""
    return escape(text if len(text) <= width else text[: width - 3] + "...")


def execute(plan: Any, as_json: bool, backend: Any = None) -> dict[str, Any]:
    """Run a prepared plan with a progress bar per batch of curves; Ctrl-C says what was saved.

    ``backend``: what simulates the batches (default: the configuration's ``[run]``).
    """
    from pgfl.apps.runner import run_plan
    from pgfl.backends import make_backend  # lazy: the runner, engine, numba
    from pgfl.experiments.partial import saved_curves

    cfg, folder = plan.cfg, plan.out
    work = plan.work  # where the interrupted run's partial files are
    if backend is None:
        backend = make_backend(cfg.run)  # a missing pgfl[ray]: one line, nothing written
    with progress_display(as_json) as bar:
        tasks: dict[str, Any] = {}

        def on_progress(labels: str, done: int, total: int) -> None:
            if labels not in tasks:
                name = f"{cfg.name}: {labels}" if len(plan.batches) > 1 else cfg.name
                tasks[labels] = bar.add_task(_short(name), total=total, unit="rounds")
            bar.update(tasks[labels], completed=done)
            if done == total:  # finished: its line goes (a frontier runs hundreds)
                bar.remove_task(tasks[labels])

        try:
            return run_plan(plan, on_progress=on_progress, backend=backend)
        except KeyboardInterrupt:
            bar.stop()
            tasks = len(list(work.glob("partial/task-*.npz")))  # Ray sweeps' blocks
            also = f" (and {tasks} Ray task(s))" if tasks else ""
            print(
                f"interrupted: {saved_curves(cfg, work)} of {len(cfg.curves)} curves{also} "
                f"saved in {folder}; rerun with --resume to continue",
                file=sys.stderr,
            )
            state["told_interrupt"] = True
            raise typer.Exit(130) from None


def run_experiment_command(
    cfg: Any, folder: Path, *, resume: bool, as_json: bool, force: bool = False
) -> None:
    """Validate, plan and run ``cfg`` into ``folder``; print the summary (or its JSON)."""
    from pgfl.experiments.plan import prepare_experiment  # lazy: the engine, numba

    plan = prepare_experiment(cfg, folder, resume=resume, force=force)  # writes nothing
    report(execute(plan, as_json), folder, as_json)


def run_frontier_command(
    folder: Path, configs: dict[str, Any], *, quick: bool, resume: bool, as_json: bool,
    run_options: dict[str, Any] | None = None, by_adversary: bool = False, force: bool = False,
    tuning: Any = None, final: Any = None,
) -> None:  # fmt: skip
    """Run the privacy-utility frontier's experiments (``pgfl reproduce frontier``, ...).

    ``tuning``, ``final``: :class:`pgfl.apps.frontier.FrontierPlan`'s.
    """
    prepared = prepare_frontier_command(
        folder,
        configs,
        resume=resume,
        run_options=run_options,
        as_json=as_json,
        force=force,
        tuning=tuning,
        final=final,
    )
    summary = run_frontier_plan(prepared, quick=quick, as_json=as_json, by_adversary=by_adversary)
    report(summary, folder, as_json)


def prepare_frontier_command(
    folder: Path, configs: dict[str, Any], *, resume: bool, run_options: dict[str, Any] | None,
    as_json: bool = False, force: bool = False, tuning: Any = None, final: Any = None,
) -> Any:  # fmt: skip
    """A frontier's configurations with the command's ``[run]`` options, validated."""
    from pgfl.apps.frontier import prepare_frontier  # lazy: the engine, numba

    configs = {k: with_run_options(c, **(run_options or {})) for k, c in configs.items()}
    with progress_display(as_json) as bar:
        curves = sum(len(c.curves) for c in configs.values())
        task = bar.add_task("calibrating", total=curves, unit="curves")

        def calibrating(key: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total,
                       description=_short(f"calibrating {key}"))  # fmt: skip

        try:
            return prepare_frontier(folder, configs, resume=resume, force=force,
                                    progress=calibrating, tuning=tuning, final=final)  # fmt: skip
        finally:
            bar.remove_task(task)


def run_frontier_plan(
    prepared: Any, *, quick: bool, as_json: bool, by_adversary: bool = False
) -> dict[str, Any]:
    """Run a frontier :func:`prepare_frontier_command` validated; return its summary."""
    from pgfl.apps.frontier import run_prepared_frontier  # lazy: the experiments

    with progress_display(as_json) as bar:
        task = bar.add_task("frontier", total=prepared.runs, unit="runs")

        def run(plan: Any) -> dict[str, Any]:
            try:
                return execute(plan, as_json)
            finally:
                bar.advance(task)

        def calibrating(key: str, done: int, total: int) -> None:  # the proxy's chosen points
            bar.update(task, description=_short(f"frontier: calibrating {key} {done}/{total}"))

        try:
            return run_prepared_frontier(
                prepared, quick=quick, run=run, by_adversary=by_adversary, progress=calibrating
            )
        finally:
            bar.remove_task(task)


def report(summary: dict[str, Any], folder: Path, as_json: bool) -> None:
    """Print a run's summary and where its files are (or the summary's JSON)."""
    if as_json:
        sys.stdout.write(json.dumps(jsonable(summary), indent=2) + "\n")
        return
    print_summary(summary)
    files = sorted(
        p.name for p in folder.iterdir() if p.suffix in (".json", ".csv", ".png", ".log")
    )
    plain(f"results in {folder}: {', '.join(files)}")


def load_experiment(config: str | Path, quick: bool) -> Any:
    """A preset by name (unless a file of that name exists) or an experiment TOML file."""
    from pgfl.experiments.loader import parse_config  # lazy: the experiments' modules
    from pgfl.experiments.presets import load_preset, preset_names

    if str(config) in preset_names() and not Path(config).is_file():
        return load_preset(str(config), quick=quick)
    with reading(config, what="config file"):  # not UTF-8, unreadable: one line
        raw = read_toml(config)
    return parse_config(raw, quick=quick, base=Path(config).parent)
