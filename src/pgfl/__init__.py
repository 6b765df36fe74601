"""pgfl: privacy-preserving graph federated learning.

The curated public API; see README.md for a tour and ARCHITECTURE.md for the layout.

>>> import pgfl
>>> cfg = pgfl.load_preset("fig2", quick=True)
>>> [c.label for c in cfg.curves]
['none', 'graph_homomorphic', 'random']
"""

from pgfl.data.federated import FederatedData
from pgfl.engine import CurveSettings, Network, Trajectory, simulate
from pgfl.experiments.config import load_config, parse_config
from pgfl.experiments.presets import load_preset, preset_names
from pgfl.experiments.runner import run_experiment
from pgfl.problems import LeastSquares, Logistic
from pgfl.topology import build_graph, check_combination_matrix, combination_matrix, iota2
from pgfl.validation import ConfigError

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
