"""``pgfl run``, ``pgfl reproduce`` and ``pgfl bench``: experiments and the engine's speed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from pgfl.commands.common import (
    ActorsOpt,
    AddressOpt,
    BackendOpt,
    JsonOpt,
    KeepPartialOpt,
    ModeOpt,
    OutOpt,
    ResumeOpt,
    WorkersOpt,
    checked,
    err,
    out,
    report,
    run_experiment_command,
    run_frontier_command,
    with_run_options,
)
from pgfl.files import read_toml, reading
from pgfl.validation import ConfigError, check_real

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
) -> None:
    """Run the experiment described by CONFIG (TOML)."""
    from pgfl.experiments.loader import parse_config  # lazy: the experiments' modules

    seed = checked("seed", seed, "--seed")
    with reading(config, what="config file"):  # not UTF-8, unreadable: one line
        raw = read_toml(config)
    if seed is not None:
        raw["seed"] = seed
    cfg = parse_config(raw, quick=quick, base=config.parent)
    cfg = with_run_options(
        cfg, backend=backend, address=address, workers=workers, mode=mode, actors=actors,
        keep_partial=keep_partial or None,
    )  # fmt: skip
    run_experiment_command(cfg, out_dir or Path("runs") / cfg.name, resume=resume, as_json=as_json)


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
    keep_partial: KeepPartialOpt = False,
) -> None:
    """Reproduce a figure of the papers with the papers' parameters."""
    from pgfl.experiments.frontier import PRESETS as FRONTIER  # lazy: the experiments
    from pgfl.experiments.muffliato import PRESETS as ACCOUNTING
    from pgfl.experiments.presets import fit_split, load_preset, preset_names, preset_text
    from pgfl.files import check_output_folder, writing
    from pgfl.graphlearn.presets import PRESETS as GRAPHLEARN
    from pgfl.graphlearn.presets import preset_config

    names = preset_names() + sorted(FRONTIER) + sorted(ACCOUNTING) + sorted(GRAPHLEARN)
    if list_ or not name:
        sys.stdout.write(_preset_list(names))
        return
    if name not in names:
        raise ConfigError(f"preset must be one of {', '.join(names)}; got {name!r}")
    seed = checked("seed", seed, "--seed")
    folder = out_dir or Path("runs") / name
    if name in GRAPHLEARN and print_config:
        sys.stdout.write(preset_config(name, quick=quick, seed=0 if seed is None else seed))
        return
    if name in GRAPHLEARN or name in ACCOUNTING:
        what = "a graph-learning" if name in GRAPHLEARN else "an accounting-only"
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
            "--keep-partial": keep_partial,
        }
        unused = [opt for opt, value in given.items() if value not in (None, False)]
        if unused:
            raise ConfigError(
                f"{', '.join(unused)}: only for the GFL presets (fig2, ...); {name!r} is "
                f"{what} preset"
            )
        check_output_folder(folder)
        run = GRAPHLEARN[name] if name in GRAPHLEARN else ACCOUNTING[name]
        with writing(folder):
            summary = run(quick, folder, 0 if seed is None else seed)
        report(summary, folder, as_json)
        return
    run_options = {
        "backend": backend, "address": address, "workers": workers, "mode": mode,
        "actors": actors, "keep_partial": keep_partial or None,
    }  # fmt: skip
    if name in FRONTIER:
        given = {"--print-config": print_config, "--data": data, "--rows": rows}
        unused = [opt for opt, value in given.items() if value not in (None, False)]
        if unused:
            raise ConfigError(
                f"{', '.join(unused)}: not for the frontier preset (it runs generated "
                "configurations; see 'pgfl privacy frontier --help' to choose them)"
            )
        configs = FRONTIER[name](quick=quick, seed=seed)
        run_frontier_command(
            folder, configs, quick=quick, resume=resume, as_json=as_json,
            run_options=run_options, by_adversary=name == "frontier-adversary",
        )  # fmt: skip
        return
    if print_config:
        sys.stdout.write(preset_text(name))
        return
    overrides: dict[str, object] = {}
    if rows is not None:
        overrides["rows"] = rows
    if (data is not None or rows is not None) and load_preset(name).curves[0].data.kind != (
        "classification"
    ):
        raise ConfigError(f"--data/--rows apply to real-data presets (fig7); got preset {name!r}")
    if data is not None:  # a split that fits the data (a small CSV: fewer test rows)
        overrides, note = fit_split(name, data, rows)
        if note:
            print(f"note: {note}", file=sys.stderr)
    cfg = load_preset(name, quick=quick, seed=seed, data=overrides)
    cfg = with_run_options(cfg, **run_options)
    run_experiment_command(cfg, folder, resume=resume, as_json=as_json)


def _preset_list(names: list[str]) -> str:
    """One line per preset: its name, padded to the longest, and its description."""
    from pgfl.experiments.frontier import TITLES as FRONTIER  # lazy: the experiments
    from pgfl.experiments.muffliato import TITLES as ACCOUNTING
    from pgfl.experiments.presets import preset_names, preset_title
    from pgfl.graphlearn.presets import TITLES as GRAPHLEARN

    gfl = set(preset_names())
    width = max(map(len, names))
    titles = {**FRONTIER, **ACCOUNTING, **GRAPHLEARN}
    rows = [(n, preset_title(n) if n in gfl else titles.get(n, "")) for n in names]
    return "".join(f"{n:<{width}}  {title}".rstrip() + "\n" for n, title in rows)


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
