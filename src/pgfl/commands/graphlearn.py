"""``pgfl graphlearn ...`` subcommands: federated graph-topology learning."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from pgfl.commands.common import ForceOpt

app = typer.Typer(
    help="Federated graph-topology learning under differential privacy.", no_args_is_help=True
)


@app.command("run")
def run(
    config: Annotated[Path, typer.Argument(help="TOML config (schema: docs/config.md).")],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Output folder (default: runs/NAME, NAME the file's name without .toml)."
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Root seed >= 0 (overrides the config's).")
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Learn personalized + consensus graphs from a config; write summary.json and curves.csv."""
    from pgfl.graphlearn.config import load_config, run_config  # lazy: the solvers, numba
    from pgfl.graphlearn.params import PARAMS

    if seed is not None:
        seed = PARAMS["seed"].named("seed (--seed)").check(seed)
    cfg = load_config(config)
    out = out or Path("runs") / config.stem
    if seed is not None:
        cfg = replace(cfg, seed=seed)
    summary = run_config(cfg, out, force=force)  # checks --out, reads every file first
    for c in summary.get("curves", []):
        eps = f" (ε̄={c['epsilon']:g})" if "epsilon" in c else ""
        typer.echo(f"{c['label']}{eps}: MCC {c['mcc'][0]:.3f}  RE {c['relative_error'][0]:.3f}")
    typer.echo(f"wrote {out / 'summary.json'}")


@app.command("presets")
def presets() -> None:
    """List the graph-learning presets (run them with ``pgfl reproduce NAME``)."""
    from pgfl.graphlearn.presets import PRESETS  # lazy: the solvers

    for name in PRESETS:
        typer.echo(name)
