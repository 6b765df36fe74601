"""Presets reproducing the graph-topology-learning paper (filled in by the graphlearn work).

``PRESETS`` maps a preset name (``graphlearn-...``) to a function
``run(quick: bool, out: pathlib.Path, seed: int) -> dict`` that writes ``summary.json``,
``curves.csv`` and figures into ``out`` and returns the summary.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

PRESETS: dict[str, Callable[[bool, Path, int], dict[str, Any]]] = {}
