"""Every setting of a graph-learning configuration (``pgfl graphlearn run``), as a table.

The same machinery as the experiments' table (:class:`pgfl.param.Param`): type, range,
default, doc and when a setting has an effect, one place each; the configuration
reference (``docs/config.md``) renders it beside the experiments' settings. Equation
numbers refer to "Graph Topology Learning Under Privacy Constraints" (Zhang & Wang,
arXiv:2301.06662).

>>> PARAMS.check("model.alpha", 2.0)
2.0
>>> PARAMS.check("algorithm.rounds", 0)
Traceback (most recent call last):
...
pgfl.validation.ConfigError: algorithm.rounds must be an integer in [1, inf]; got 0
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pgfl.param import Param, ParamTable, Ref, When, kind_is
from pgfl.validation import ConfigError, check_int

__all__ = ["MECHANISMS", "PARAMS", "SECTIONS", "TITLES"]

#: The DP variants of :mod:`pgfl.graphlearn.privacy` (``privacy.mechanism``), declared
#: here so that the table (and the functions that read their arguments' ranges from it)
#: load without dp_accounting.
MECHANISMS = ("statistic", "last_step")

#: Tables of a graph-learning configuration, in reference order ("" is the top level).
SECTIONS = ("", "data", "model", "algorithm", "privacy")
#: Their headings in the reference.
TITLES = {
    "": "Top level",
    "data": "`[data]`: synthetic graphs (§V-A) or your own signal files",
    "model": "`[model]`: the smoothness model (eqs. 7-8)",
    "algorithm": "`[algorithm]`: Algorithm 1 (local APGD, eqs. 14-16; consensus, eq. 19)",
    "privacy": "`[privacy]`: the DP variant (§IV; present: run it)",
}


def _check_samples(p: Param, value: Any, c: Mapping[str, Any]) -> tuple[int, ...]:
    """One count per client: an integer (every client) or a list of ``data.clients`` ones."""
    clients = c.get("data.clients")
    values = value if isinstance(value, (list, tuple)) else [value] * (clients or 1)
    if clients is not None and len(values) != clients:
        raise ConfigError(
            f"{p.name} must have one entry per client (data.clients={clients}); got {len(values)}"
        )
    return tuple(check_int(p.name, v, lo=1) for v in values)


def _check_files(p: Param, value: Any, c: Mapping[str, Any]) -> tuple[str, ...]:
    """A non-empty list of paths (relative to the configuration file)."""
    if (
        not isinstance(value, (list, tuple))
        or not value
        or not all(isinstance(f, str) and f for f in value)
    ):
        raise ConfigError(f"{p.name} must be a non-empty list of paths; got {value!r}")
    return tuple(value)


def _epsilon_limit(c: Mapping[str, Any]) -> int | None:
    """``algorithm.rounds`` for ``last_step`` (ε̄/T < 1), else no limit (``None``)."""
    return c["algorithm.rounds"] if c["privacy.mechanism"] == "last_step" else None


#: ``last_step`` calibrates each round by the classic Gaussian mechanism (Dwork & Roth,
#: Theorem A.1), whose guarantee holds only for a per-round ε_t = ε̄/T below 1.
PER_ROUND_BELOW_ONE = Ref(
    'algorithm.rounds (ε̄/T < 1 with privacy.mechanism = "last_step")',
    ("algorithm.rounds", "privacy.mechanism"),
    _epsilon_limit,
)

_SYNTHETIC = kind_is("data", "synthetic")
_FIXED = When('algorithm.local_solver = "fixed"', lambda c: c["algorithm.local_solver"] == "fixed")

#: The table: dotted name → :class:`~pgfl.param.Param`.
PARAMS = ParamTable((
    Param("seed", "int", 0, "Root seed (the CLI's `--seed` overrides it).", lo=0),
    Param("data.kind", "choice", "synthetic", "`synthetic`: RBF graphs and smooth signals "
          "(§V-A); `files`: one signal file per client.", choices=("synthetic", "files")),
    Param("data.nodes", "int", 20, "Vertices d of the synthetic graphs.", lo=2,
          applies=_SYNTHETIC),
    Param("data.clients", "int", 5, "Clients I.", lo=1, applies=_SYNTHETIC),
    Param("data.n_samples", "n_samples", 100, "Signals N_i per client: a number, or one per "
          "client.", applies=_SYNTHETIC, checker=_check_samples,
          allowed_doc="integer ≥ 1, or a list of data.clients of them"),
    Param("data.q", "real", 0.5, "Fraction of the RBF graph's edges the consensus keeps.",
          lo=0, hi=1, applies=_SYNTHETIC),
    Param("data.sigma_w", "real", 0.1, "Noise σ_w of the smooth signals (eq. 33).", lo=0,
          lo_open=True, applies=_SYNTHETIC),
    Param("data.repetitions", "int", 3, "Independent draws of the synthetic setting.", lo=1,
          applies=_SYNTHETIC),
    Param("data.files", "paths", None, "One file per client (rows = signals, columns = nodes; "
          "`.csv` comma-separated or `.npy`), relative to the configuration file.",
          applies=kind_is("data", "files"), required=True, checker=_check_files,
          allowed_doc="non-empty list of paths"),
    Param("model.alpha", "real", 2.0, "Weight α of the log-degree barrier (eq. 7).", lo=0,
          lo_open=True),
    Param("model.beta", "real", 0.05, "Ridge β of the edge weights (eq. 7).", lo=0, lo_open=True),
    Param("model.rho", "real", 0.3, "Coupling ρ of the personalized and consensus graphs "
          "(eq. 8).", lo=0, lo_open=True),
    Param("model.lambda", "real", 0.02, "Sparsity λ of the consensus graph (eq. 8).", lo=0),
    Param("algorithm.rounds", "int", 8, "Communication rounds T.", lo=1),
    Param("algorithm.local_steps", "int", 25, "Local APGD steps K_i^t per round.", lo=1),
    Param("algorithm.local_solver", "choice", "backtracking", "`backtracking` line search or "
          "a `fixed` step.", choices=("backtracking", "fixed")),
    Param("algorithm.step", "real", 5e-4, "Step η_w of the fixed solver.", lo=0, lo_open=True,
          applies=_FIXED),
    Param("algorithm.momentum", "real", 0.9, "Momentum ξ of the fixed solver.", lo=0, hi=1,
          applies=_FIXED),
    Param("privacy.mechanism", "choice", "statistic", "`statistic`: noisy z̄ once per round, "
          "ε covers the graphs; `last_step`: the paper's Theorem 3 (ε does not cover the "
          "released graph).", choices=MECHANISMS),
    Param("privacy.epsilon", "real", 1.0, "Total ε̄ over the rounds (`last_step`: ε̄/T < 1, "
          "the classic Gaussian bound of Theorem 3).", lo=0, lo_open=True, hi_open=True,
          hi_ref=PER_ROUND_BELOW_ONE,
          allowed_doc='(0, inf); (0, algorithm.rounds) with `privacy.mechanism = "last_step"`'),
    Param("privacy.delta", "real", 1e-5, "δ̄ of (ε̄, δ̄)-DP.", lo=0, hi=1, lo_open=True,
          hi_open=True),
    Param("privacy.clip", "real", 25.0, "Clipping norm C of each z_{i,n} (eq. 58).", lo=0,
          lo_open=True),
    Param("privacy.sensitivity", "choice", "rigorous", "`rigorous` (2√2 C/N) or the paper's "
          "`paper` (2C/N, √2 too small).", choices=("rigorous", "paper")),
    Param("privacy.dp_step", "real", 5e-4, "Step of the noisy last local step.", lo=0,
          lo_open=True, applies=When('privacy.mechanism = "last_step"',
                                     lambda c: c["privacy.mechanism"] == "last_step")),
))  # fmt: skip
