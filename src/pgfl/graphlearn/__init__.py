"""Federated graph-topology learning under DP (Zhang & Wang, arXiv:2301.06662).

*Graph Topology Learning Under Privacy Constraints*; equation numbers in this package are
that paper's.

Public API (see ``docs/graphlearn.md``):

* model: :func:`pairwise_sq_distances`, :func:`degree_operator`, :func:`degree_adjoint`,
  :func:`local_cost`, :func:`local_gradient`, :func:`lipschitz_constant`;
* centralized solver: :class:`SmoothGraphLearner`, :func:`learn_graph`, :func:`solve_apgd`;
* federated: :func:`client_distances`, :func:`federated_graph_learning` (Algorithm 1, DP
  variant), :func:`independent_graph_learning` (IGL), :func:`fedavg_graph_learning`;
* privacy: :func:`calibrate_noise` (Theorem 3's last-step noise, or a once-privatized
  statistic), :func:`privatize_statistic`, :func:`privacy_report`;
* data and scores: :func:`rbf_graph`, :func:`heterogeneous_graphs`, :func:`smooth_signals`,
  :func:`mcc`, :func:`relative_error`.
"""

from pgfl.graphlearn.federated import (
    FedGLResult,
    client_distances,
    fedavg_graph_learning,
    federated_graph_learning,
    independent_graph_learning,
)
from pgfl.graphlearn.generators import heterogeneous_graphs, rbf_graph, smooth_signals
from pgfl.graphlearn.metrics import edge_support, mcc, relative_error
from pgfl.graphlearn.smoothness import (
    degree_adjoint,
    degree_operator,
    lipschitz_constant,
    local_cost,
    local_gradient,
    mat_to_vec,
    pairwise_sq_distances,
    vec_to_mat,
)
from pgfl.graphlearn.solver import APGDResult, SmoothGraphLearner, learn_graph, solve_apgd

__all__ = [
    "APGDResult",
    "DPCalibration",
    "FedGLResult",
    "SmoothGraphLearner",
    "calibrate_noise",
    "client_distances",
    "degree_adjoint",
    "degree_operator",
    "edge_support",
    "fedavg_graph_learning",
    "federated_graph_learning",
    "heterogeneous_graphs",
    "independent_graph_learning",
    "learn_graph",
    "lipschitz_constant",
    "local_cost",
    "local_gradient",
    "mat_to_vec",
    "mcc",
    "pairwise_sq_distances",
    "privacy_report",
    "privatize_statistic",
    "rbf_graph",
    "relative_error",
    "smooth_signals",
    "solve_apgd",
    "vec_to_mat",
]

#: Imported on first use: pgfl.graphlearn.privacy loads dp_accounting (seconds), which
#: ``pgfl --help`` and ``pgfl run`` without privacy do not need.
_LAZY = {"DPCalibration", "calibrate_noise", "privacy_report", "privatize_statistic"}


def __getattr__(name: str):
    if name in _LAZY:
        from pgfl.graphlearn import privacy  # lazy: dp_accounting (module doc above)

        return getattr(privacy, name)
    raise AttributeError(f"module 'pgfl.graphlearn' has no attribute {name!r}")
