"""``pgfl run``, ``pgfl reproduce`` and ``pgfl bench``: experiments and the engine's speed."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from pgfl.commands.common import (
    ActorsOpt,
    AddressOpt,
    BackendOpt,
    ForceOpt,
    JsonOpt,
    KeepPartialOpt,
    ModeOpt,
    OutOpt,
    ResumeOpt,
    WorkersOpt,
    check_run_options,
    checked,
    default_folder,
    err,
    execute,
    out,
    prepare_frontier_command,
    progress_display,
    report,
    run_experiment_command,
    run_frontier_plan,
    with_run_options,
)
from pgfl.files import jsonable, read_toml, reading
from pgfl.validation import ConfigError, check_real, did_you_mean

__all__ = ["bench", "reproduce", "run"]

SeedOpt = Annotated[
    int | None, typer.Option("--seed", help="Root seed >= 0 (overrides the file's seed).")
]


def run(
    config: Annotated[Path, typer.Argument(help="Experiment TOML file.")],
    out_dir: OutOpt = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Apply the file's \\[quick] table.")
    ] = False,
    seed: SeedOpt = None,
    resume: ResumeOpt = False,
    as_json: JsonOpt = False,
    backend: BackendOpt = None,
    address: AddressOpt = None,
    workers: WorkersOpt = None,
    mode: ModeOpt = None,
    actors: ActorsOpt = None,
    keep_partial: KeepPartialOpt = False,
    force: ForceOpt = False,
) -> None:
    """Run the experiment described by CONFIG (TOML), into runs/NAME (--quick: runs/NAME-quick)."""
    seed = checked("seed", seed, "--seed")
    run_options = {
        "backend": backend, "address": address, "workers": workers, "mode": mode,
        "actors": actors, "keep_partial": keep_partial or None,
    }  # fmt: skip
    check_run_options(**run_options)  # the options first: before the heavy imports
    with reading(config, what="config file"):  # not UTF-8, unreadable: one line
        raw = read_toml(config)
    if seed is not None:
        raw["seed"] = seed
    from pgfl.experiments.loader import parse_config  # lazy: the experiments' modules

    cfg = parse_config(raw, quick=quick, base=config.parent)
    cfg = with_run_options(cfg, **run_options)
    folder = out_dir or default_folder(cfg.name, quick=quick)
    run_experiment_command(cfg, folder, resume=resume, as_json=as_json, force=force)


PresetsArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="Presets: fig2..fig7, hybrid, ... (see --list), or 'all'.",
        metavar="NAME",
        show_default=False,
    ),
]


def reproduce(
    names: PresetsArg = None,
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
    keep_partial: KeepPartialOpt = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            help="Presets run at once, each in a process of its own (1: one after another "
            "in this process). Not with Ray.",
        ),
    ] = 1,
    force: ForceOpt = False,
) -> None:
    """Reproduce figures of the papers with the papers' parameters.

    Results go to runs/NAME (--quick: runs/NAME-quick), or to --out.

    Several presets run one after another in one process, into runs/NAME (--out DIR: DIR/NAME).

    'all': the papers' GFL figures fig2, fig3, fig4, fig5, fig6, fig7, hybrid, diffusion.

    Every name and option is checked for every preset before any runs.

    --json with several presets prints one JSON list: a summary per preset, in order.

    --jobs 2 runs two presets at a time (same results; each summary printed in order).
    """
    from pgfl.experiments import catalog  # lazy: the catalog, names and titles only

    if list_ or not names:
        sys.stdout.write(_preset_list(catalog.all_names()))
        return
    names = _expand(names)
    seed = checked("seed", seed, "--seed")
    several = len(names) > 1
    if several and print_config:
        raise ConfigError(
            f"--print-config: one preset at a time; got {len(names)} ({', '.join(names)})"
        )
    options = {
        "quick": quick, "seed": seed, "resume": resume, "as_json": as_json,
        "print_config": print_config, "data": data, "rows": rows, "force": force,
        "run_options": {
            "backend": backend, "address": address, "workers": workers, "mode": mode,
            "actors": actors, "keep_partial": keep_partial or None,
        },
    }  # fmt: skip
    if jobs < 1:
        raise ConfigError(f"--jobs must be an integer >= 1; got {jobs}")
    check_run_options(**options["run_options"])  # every option before the heavy imports
    if jobs > 1 and several and (backend == "ray" or address is not None):
        raise ConfigError(
            "--jobs: runs presets in processes of their own, each its own engine; with "
            "--backend ray give --jobs 1 (Ray spreads one preset over the cluster)"
        )
    with progress_display(as_json or print_config) as bar:
        work = []
        checking = bar.add_task("checking", total=len(names), unit="presets") if several else None
        for name in names:  # validate every preset (writing nothing) before running any
            if out_dir is None:
                folder = default_folder(name, quick=quick)
            else:
                folder = out_dir / name if several else out_dir
            if checking is not None:
                bar.update(checking, description=f"checking {name}")
            job = _prepare(name, folder, **options)
            if job is None:  # --print-config: printed
                return
            work.append((name, folder, job))
            if checking is not None:
                bar.advance(checking)
        if checking is not None:
            bar.remove_task(checking)
        if jobs > 1 and several:
            results = _in_processes([(n, f) for n, f, _ in work], options, jobs)
        else:
            results = (job() for _, _, job in work)
        first = f"presets: {work[0][0]}"
        running = bar.add_task(first, total=len(work), unit="presets") if several else None
        summaries = []
        for k, ((_, folder, _), summary) in enumerate(zip(work, results, strict=True)):
            if several and as_json:
                summaries.append(jsonable(summary))
            else:
                report(summary, folder, as_json)
            if running is not None:
                following = f"presets: {work[k + 1][0]}" if k + 1 < len(work) else "presets"
                bar.update(running, advance=1, description=following)
    if several and as_json:
        sys.stdout.write(json.dumps(summaries, indent=2) + "\n")


def _in_processes(
    work: list[tuple[str, Path]], options: dict[str, Any], jobs: int
) -> Iterator[dict[str, Any]]:
    """The summaries of the presets ``work`` names, run ``jobs`` at a time, in order.

    Each preset runs in a worker process of its own (spawned: no thread of this process
    is copied), which prepares it again as :func:`_prepare` did here; the first error
    cancels the presets not yet started and is raised here. The workers end with this
    process, even one killed by SIGKILL (:func:`pgfl.workers.exit_with`).
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from pgfl.workers import exit_with  # lazy: as the rest of this function's imports

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        min(jobs, len(work)), mp_context=context, initializer=exit_with,
        initargs=(os.getpid(),),
    ) as pool:  # fmt: skip
        futures = [pool.submit(_run_preset, name, folder, options) for name, folder in work]
        try:
            for future in futures:
                yield future.result()
        finally:
            for future in futures:  # an error, Ctrl-C: start no other preset
                future.cancel()


def _run_preset(name: str, folder: Path, options: dict[str, Any]) -> dict[str, Any]:
    """Run preset ``name`` in a worker process of :func:`_in_processes`; its summary.

    The parent checked it and showed its warnings and notes: here they are not repeated,
    and no progress bar competes with the other workers'.
    """
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        job = _prepare(name, folder, **{**options, "as_json": True})
    if job is None:  # --print-config takes one preset and is refused with --jobs
        raise RuntimeError(f"preset {name!r} was sent to a worker with --print-config")
    return job()


def _expand(names: list[str]) -> list[str]:
    """The presets named, ``all`` replaced by :data:`~pgfl.experiments.catalog.ALL`.

    An unknown name, or one named twice, is one :class:`ConfigError` line.
    """
    from pgfl.experiments import catalog  # lazy: the catalog, for this command

    known = catalog.all_names()
    expanded: list[str] = []
    for name in names:
        if name != "all" and name not in known:
            raise ConfigError(
                f"preset must be one of {', '.join(known)} (or all); got {name!r}"
                + did_you_mean(name, [*known, "all"])
            )
        for one in catalog.ALL if name == "all" else (name,):
            if one in expanded:
                raise ConfigError(
                    f"preset {one!r} named twice (with 'all': {', '.join(catalog.ALL)})"
                    if "all" in names
                    else f"preset {one!r} named twice"
                )
            expanded.append(one)
    return expanded


def _prepare(
    name: str, folder: Path, *, quick: bool, seed: int | None, resume: bool, as_json: bool,
    print_config: bool, data: str | None, rows: int | None, run_options: dict[str, object],
    force: bool = False,
) -> Callable[[], dict[str, Any]] | None:  # fmt: skip
    """Validate preset ``name`` into ``folder`` and return what runs it (its summary).

    Nothing is written: a problem is one :class:`ConfigError` line. ``None``: the preset's
    configuration was printed (``--print-config``), nothing to run.
    """
    from pgfl.experiments import catalog  # lazy: the catalog, for this command

    what = catalog.kind(name)
    if what == "graphlearn" and print_config:
        from pgfl.graphlearn.presets import preset_config  # lazy: the experiments

        sys.stdout.write(preset_config(name, quick=quick, seed=0 if seed is None else seed))
        return None
    if what in ("graphlearn", "accounting"):
        from pgfl.files import writing  # lazy: data digests, for this branch alone
        from pgfl.folders import check_output, digest_of, staged

        article = "a graph-learning" if what == "graphlearn" else "an accounting-only"
        given = {
            "--print-config": print_config, "--resume": resume, "--data": data,
            "--rows": rows, **{f"--{k.replace('_', '-')}": v for k, v in run_options.items()},
        }  # fmt: skip
        unused = [opt for opt, value in given.items() if value not in (None, False)]
        if unused:
            raise ConfigError(
                f"{', '.join(unused)}: only for the GFL presets (fig2, ...); {name!r} is "
                f"{article} preset"
            )
        seed = 0 if seed is None else seed
        output = check_output(
            folder, digest=digest_of({"preset": name, "quick": quick, "seed": seed}),
            what=f"preset {name!r}", force=force,
        )  # fmt: skip
        if what == "graphlearn":
            from pgfl.graphlearn.presets import PRESETS  # lazy: the experiments
        else:
            from pgfl.experiments.muffliato import PRESETS  # lazy: the experiments

        def run_other() -> dict[str, Any]:
            with staged(output) as stage, writing(folder):
                return PRESETS[name](quick, stage, seed)

        return run_other
    if what == "frontier":
        given = {"--print-config": print_config, "--data": data, "--rows": rows}
        unused = [opt for opt, value in given.items() if value not in (None, False)]
        if unused:
            raise ConfigError(
                f"{', '.join(unused)}: not for the frontier preset (it runs generated "
                "configurations; see 'pgfl privacy frontier --help' to choose them)"
            )
        from pgfl.apps.frontier import PRESETS as FRONTIER  # lazy: the experiments

        configs = FRONTIER[name](quick=quick, seed=seed)
        prepared = prepare_frontier_command(
            folder, configs, resume=resume, run_options=run_options, as_json=as_json, force=force
        )
        return lambda: run_frontier_plan(
            prepared, quick=quick, as_json=as_json, by_adversary=name == "frontier-adversary"
        )
    if print_config:  # the shipped TOML: nothing to import
        sys.stdout.write(catalog.preset_text(name))
        return None
    if (data is not None or rows is not None) and catalog.data_kind(name) != "classification":
        raise ConfigError(f"--data/--rows apply to real-data presets (fig7); got preset {name!r}")
    from pgfl.experiments.plan import prepare_experiment  # lazy: the experiments, numba
    from pgfl.experiments.presets import fit_split, load_preset

    overrides: dict[str, object] = {}
    if rows is not None:
        overrides["rows"] = rows
    if data is not None:  # a split that fits the data (a small CSV: fewer test rows)
        overrides, note = fit_split(name, data, rows)
        if note:
            print(f"note: {note}", file=sys.stderr)
    cfg = load_preset(name, quick=quick, seed=seed, data=overrides)
    cfg = with_run_options(cfg, **run_options)
    plan = prepare_experiment(cfg, folder, resume=resume, force=force)  # writes nothing
    return lambda: execute(plan, as_json)


def _preset_list(names: list[str]) -> str:
    """One line per preset: its name, padded to the longest, and its description."""
    from pgfl.experiments.catalog import title  # lazy: the catalog, for this command

    width = max(map(len, names))
    return "".join(f"{n:<{width}}  {title(n)}".rstrip() + "\n" for n in names)


def bench(
    as_json: JsonOpt = False,
    scale: Annotated[
        str, typer.Option("--scale", help="paper, medium, large, wide or all.")
    ] = "paper",
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
    from pgfl.bench import bench_threads, run_bench, thread_counts  # lazy: the engine, numba
    from pgfl.bench import compare as run_compare

    seconds = check_real("--seconds", seconds, lo=0.0, lo_open=True)
    log = None if as_json else err.print
    counts = None
    if threads:
        from pgfl.engine.compiled import max_threads  # lazy: the engine, numba

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
    title, columns, rows, notes = _bench_table(result, compare=compare, threads=threads)
    table = Table(title=title)
    for col in columns:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*row)
    out.print(table)
    for note in notes:
        out.print(note)


def _bench_table(result: dict, *, compare: bool, threads: bool) -> tuple:
    """Title, columns, rows and notes of the ``pgfl bench`` table."""
    if compare:
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
        return "pgfl bench --compare (client updates per second)", columns, rows, []
    if threads:
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
        return title, columns, rows, _amdahl_notes(result["amdahl"])
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
    return "pgfl bench", columns, rows, []


def _amdahl_notes(amdahl: dict) -> list[str]:
    """One line per case of ``pgfl bench --threads``: its Amdahl fit, or why there is none."""
    notes = []
    for name, fit in amdahl.items():
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
    return notes
