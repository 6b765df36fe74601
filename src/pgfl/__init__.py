"""pgfl: privacy-preserving graph federated learning.

The curated public API; see README.md for a tour and ARCHITECTURE.md for the layout.

Docstrings cite the papers by these short names, with their section and equation numbers:

* *preprint*: E. Rizk, S. Vlaski, A. H. Sayed, "Privatized Graph Federated Learning",
  arXiv:2203.07105 (v1); *journal*: its v2, the journal version (EURASIP J. Adv. Signal
  Process. 2023), which adds §3.4 (sharing gradients) and §5.2 (a single server);
* *conference paper*: E. Rizk, A. H. Sayed, "A Graph Federated Architecture with Privacy
  Preserving Learning", SPAWC 2021, arXiv:2104.13215;
* *book*: S. Vlaski, A. H. Sayed, "Privacy in distributed learning", chapter 11 (draft 2023);
* in :mod:`pgfl.graphlearn`: Zhang & Wang, "Graph Topology Learning Under Privacy
  Constraints", arXiv:2301.06662.

>>> import pgfl
>>> cfg = pgfl.load_preset("fig2", quick=True)
>>> [c.label for c in cfg.curves]
['none', 'graph_homomorphic', 'random']
"""

import importlib
from typing import Any

from pgfl import style as _style

#: The public names and the modules that define them, imported on first use, so that
#: ``import pgfl`` (and ``pgfl --help``) does not pay for numba, dp_accounting, scipy and
#: pandas until something needs them.
_LAZY = {
    "FederatedData": "pgfl.data.federated",
    "CurveSettings": "pgfl.engine",
    "Network": "pgfl.engine",
    "Trajectory": "pgfl.engine",
    "simulate": "pgfl.engine",
    "load_config": "pgfl.experiments.loader",
    "parse_config": "pgfl.experiments.loader",
    "load_preset": "pgfl.experiments.presets",
    "preset_names": "pgfl.experiments.presets",
    "run_experiment": "pgfl.apps.runner",
    "LeastSquares": "pgfl.problems",
    "Logistic": "pgfl.problems",
    "build_graph": "pgfl.topology",
    "check_combination_matrix": "pgfl.topology",
    "combination_matrix": "pgfl.topology",
    "iota2": "pgfl.topology",
    "ConfigError": "pgfl.validation",
}


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'pgfl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


def _declared_styles() -> None:
    """Register the mechanisms, whose declarations give the figures their styles."""
    from pgfl.privacy import mechanisms  # noqa: F401  # lazy: dp_accounting; on a style's first read


# the schemes' styles (pgfl.style.SCHEMES) are read from the registry, whoever reads first
_style.add_source(_declared_styles)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "CurveSettings",
    "FederatedData",
    "LeastSquares",
    "Logistic",
    "Network",
    "Trajectory",
    "build_graph",
    "check_combination_matrix",
    "combination_matrix",
    "iota2",
    "load_config",
    "load_preset",
    "parse_config",
    "preset_names",
    "run_experiment",
    "simulate",
]
