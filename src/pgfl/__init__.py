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

from pgfl.data.federated import FederatedData
from pgfl.engine import CurveSettings, Network, Trajectory, simulate
from pgfl.experiments.loader import load_config, parse_config
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
