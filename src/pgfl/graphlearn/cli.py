"""``pgfl graphlearn ...`` subcommands."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Federated graph-topology learning under differential privacy.", no_args_is_help=True
)
