"""``pgfl privacy ...`` subcommands."""

from __future__ import annotations

import typer

app = typer.Typer(help="Differential-privacy accounting: epsilon over iterations, noise calibration.", no_args_is_help=True)
