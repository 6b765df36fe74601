"""Every user-facing setting of an experiment configuration, in one declarative table.

:data:`PARAMS` maps a setting's dotted name (``training.L``, ``privacy.secagg_frac_bits``)
to a :class:`Param`: its type, allowed range or choices, default and a one-line doc, in
the spirit of scikit-learn's parameter constraints. The config loader
(:mod:`pgfl.experiments.config`), secure aggregation (:class:`pgfl.privacy.secagg.SecAggConfig`)
and the engine check their values here, so each range is written once; the config
reference ``docs/config.md`` is generated from the same table
(``python -m pgfl.params > docs/config.md``).

A bound may depend on other settings (:class:`Ref`): ``training.L`` lies in
``[1, data.K]``; ``privacy.secagg_frac_bits`` in ``[0, privacy.secagg_modulus_bits − 2]``;
the modulus must hold the sum of L fixed-point codes, ``L · rint(clip · 2^f) < 2^(k−1)``
(Bonawitz et al.'s secure aggregation as used in "Privatized Graph Federated Learning",
Rizk, Vlaski & Sayed, arXiv:2203.07105, eq. 48). :func:`check` is given the values of
those other settings as keyword arguments, by short name (``K=100``) or dotted name
(``**{"data.K": 100}``); a bound whose settings are not given is not applied.

>>> check("training.L", 11, K=100)
11
>>> check("training.L", 120, K=100)
Traceback (most recent call last):
...
pgfl.validation.ConfigError: training.L must be an integer in [1, data.K=100]; got 120
>>> check("privacy.secagg_frac_bits", 30, secagg_modulus_bits=32)
30
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pgfl.validation import ConfigError, check_choice, check_int, check_real, check_string

__all__ = [
    "ACCOUNTANTS",
    "BACKENDS",
    "CLIENT_NOISE",
    "ACTIVATIONS",
    "DATA_KINDS",
    "MODEL_KINDS",
    "DISTRIBUTIONS",
    "METRICS",
    "PARAMS",
    "RAY_MODES",
    "SECAGG_PROTOCOLS",
    "SECTIONS",
    "SERVER_NOISE",
    "SHARE",
    "TEST_METRICS",
    "TOPOLOGIES",
    "WEIGHT_RULES",
    "Param",
    "Ref",
    "When",
    "check",
    "markdown",
    "max_code",
    "neighbourhood_size",
    "section_params",
]

TOPOLOGIES = ("ring", "grid", "torus", "complete", "star", "erdos_renyi", "random_geometric")
WEIGHT_RULES = ("metropolis", "max_degree")
SERVER_NOISE = ("none", "random", "graph_homomorphic", "random_per_link")
CLIENT_NOISE = ("none", "laplace", "gaussian", "secure_aggregation")
DP_NOISE = ("laplace", "gaussian")
SECAGG_PROTOCOLS = ("simulated", "cryptographic")
DISTRIBUTIONS = ("laplace", "gaussian")
SHARE = ("models", "updates")
DATA_KINDS = ("regression", "logistic", "classification", "digits")
MODEL_KINDS = ("none", "softmax", "mlp", "cnn", "custom")
ACTIVATIONS = ("relu", "tanh", "sigmoid", "elu")
ACCOUNTANTS = ("paper", "basic", "advanced", "kairouz", "pld", "rdp")
#: Metrics of the centroid and servers on a held-out test set (classification only).
TEST_METRICS = (
    "test_error",
    "test_accuracy",
    "test_log_loss",
    "server_test_error_mean",
    "server_test_loss_mean",
)
METRICS = ("centroid_msd_db", "individual_msd_db", "disagreement_db", *TEST_METRICS)
#: Sections of a configuration, in the order of the reference; "" is the top level.
SECTIONS = ("", "quick", "topology", "data", "model", "training", "privacy", "run")
BACKENDS = ("local", "ray")
RAY_MODES = ("tasks", "actors")


@dataclass(frozen=True)
class Ref:
    """A bound computed from other settings, shown as ``label=value`` in messages.

    Attributes:
        label: how the bound reads in messages and docs (``"data.K"``).
        needs: dotted names of the settings it needs; when one is missing from the
            context, the bound is not applied (the static bound still is).
        value: the bound from the context (a mapping of dotted names to values).

    """

    label: str
    needs: tuple[str, ...]
    value: Callable[[Mapping[str, Any]], float]


def ref(name: str, offset: int = 0) -> Ref:
    """The bound ``name + offset`` (another setting, possibly shifted)."""
    label = name if offset == 0 else f"{name}{offset:+d}"
    return Ref(label, (name,), lambda c: c[name] + offset)


@dataclass(frozen=True)
class When:
    """The condition under which a setting has an effect (``text`` for messages and docs)."""

    text: str
    test: Callable[[Mapping[str, Any]], bool]


def _kind_is(section: str, *kinds: str) -> When:
    text = " or ".join(f'"{k}"' for k in kinds)
    return When(f"{section}.kind = {text}", lambda c: c[f"{section}.kind"] in kinds)


def _dp_link(c: Mapping[str, Any]) -> bool:
    return c["privacy.server_noise"] != "none" or c["privacy.client_noise"] in DP_NOISE


SECURE_AGGREGATION = When(
    'privacy.client_noise = "secure_aggregation"',
    lambda c: c["privacy.client_noise"] == "secure_aggregation",
)
DP_LINK = When(
    'privacy.server_noise other than "none" or privacy.client_noise = "laplace"/"gaussian"',
    _dp_link,
)

_RAY = When('run.backend = "ray"', lambda c: c["run.backend"] == "ray")
_ACTORS = When('run.backend = "ray" and run.mode = "actors"',
               lambda c: c["run.backend"] == "ray" and c["run.mode"] == "actors")  # fmt: skip


def neighbourhood_size(L: int, neighbours: int | None) -> int:
    """Size h = |N[u]| of a closed neighbourhood in secure aggregation among L clients.

    L for the complete graph (original SecAgg; ``neighbours`` unset or ≥ L − 1), else
    ``neighbours + 1`` (the SecAgg+ graph of Bell et al., CCS 2020).

    >>> neighbourhood_size(20, 4), neighbourhood_size(5, 4), neighbourhood_size(5, None)
    (5, 5, 5)
    """
    return neighbours + 1 if neighbours is not None and neighbours < L - 1 else L


def max_code(clip: float, frac_bits: int) -> int:
    """Largest fixed-point code ``rint(clip · 2^f)`` (round half to even, as numpy's rint).

    >>> max_code(4.0, 8), max_code(0.25, 1)   # rint(0.5) = 0: no code is representable
    (1024, 0)
    """
    x = clip * 2.0**frac_bits
    return round(x) if x < 2.0**1000 else 2**1000  # beyond any modulus (and finite)


def modulus_bits_needed(c: Mapping[str, Any]) -> int:
    """Smallest k with ``L · rint(clip · 2^f) < 2^(k−1)`` (the sum of L codes cannot wrap)."""
    code = max_code(c["privacy.secagg_clip"], c["privacy.secagg_frac_bits"])
    return (c["training.L"] * code).bit_length() + 1


@dataclass(frozen=True)
class Param:
    """One setting: type, allowed values, default, doc line and when it has an effect.

    Attributes:
        name: dotted name (``section.key``; top-level settings have no dot).
        kind: ``int``, ``real``, ``choice``, ``choices`` (a list), ``string``,
            ``int_pair``/``real_pair`` (a number or a ``[low, high]`` pair), ``edges``,
            ``matrix``.
        default: value when the setting is not given (``None``: unset, see ``doc``).
        doc: one line for the reference.
        lo, hi, lo_open, hi_open: static bounds of numbers.
        lo_ref, hi_ref: bounds computed from other settings (combined with the static ones).
        choices: allowed strings (``choice``/``choices``), or extra words a pair accepts.
        inf_ok: ``inf`` is allowed (no limit). even: integers must be even.
        nonempty, forbid: for strings.
        applies: when the setting has an effect (``None``: always); a setting given
            where it has none is rejected by the config loader.
        required: must be given when ``applies`` holds.
        batched: may differ between curves that run in one vectorized simulation.

    """

    name: str
    kind: str
    default: Any
    doc: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    lo_ref: Ref | None = None
    hi_ref: Ref | None = None
    choices: tuple[str, ...] = ()
    inf_ok: bool = False
    even: bool = False
    nonempty: bool = False
    forbid: str = ""
    applies: When | None = None
    required: bool = False
    batched: bool = False
    allowed_doc: str = ""

    @property
    def section(self) -> str:
        """The table the setting lives in (``""`` for the top level)."""
        return self.name.rpartition(".")[0]

    @property
    def key(self) -> str:
        """The name inside its table."""
        return self.name.rpartition(".")[2]

    def bounds(self, context: Mapping[str, Any]) -> dict[str, Any]:
        """``lo``, ``hi`` and their names in a message, with the refs the context allows."""
        out = {"lo": self.lo, "hi": self.hi, "lo_name": None, "hi_name": None}
        for side, r, pick in (("lo", self.lo_ref, max), ("hi", self.hi_ref, min)):
            if r is None or any(context.get(n) is None for n in r.needs):
                continue
            v = r.value(context)
            static = out[side]
            if static is None or pick(static, v) == v:
                out[side], out[f"{side}_name"] = v, r.label
        return out

    def check(self, value: Any, context: Mapping[str, Any] | None = None) -> Any:
        """``value`` validated (and normalized: lists become tuples), or :class:`ConfigError`."""
        context = context or {}
        if value is None and self.default is None:
            return None
        return _CHECKERS[self.kind](self, value, context)

    def interval(self) -> str:
        """The allowed range as written in the reference (refs by their labels)."""
        lo = "-inf" if self.lo is None else _num(self.lo)
        if self.lo_ref is not None:
            lo = self.lo_ref.label if self.lo is None else f"max({lo}, {self.lo_ref.label})"
        hi = "inf" if self.hi is None else _num(self.hi)
        if self.hi_ref is not None:
            hi = self.hi_ref.label
        left = "(" if (self.lo_open or self.lo is None and self.lo_ref is None) else "["
        closed_hi = (
            self.kind in ("int", "int_pair")
            or self.inf_ok
            or self.hi is not None
            and not self.hi_open
        )
        right = "]" if closed_hi else ")"
        return f"{left}{lo}, {hi}{right}"

    def allowed(self) -> str:
        """Allowed values, one phrase for the reference."""
        if self.allowed_doc:
            return self.allowed_doc
        if self.kind in ("choice", "choices"):
            return ", ".join(f'`"{c}"`' for c in self.choices)
        if self.kind == "string":
            text = "non-empty" if self.nonempty else "any"
            return text + (
                f", without {' '.join(repr(c) for c in self.forbid)}" if self.forbid else ""
            )
        if self.kind == "edges":
            return "pairs of integers in [0, topology.P-1]; connected"
        if self.kind == "matrix":
            return "symmetric, doubly stochastic, connected (Assumption 1)"
        text = ("even, " if self.even else "") + self.interval()
        if self.kind.endswith("_pair"):
            text += " each, low ≤ high"
            if self.choices:
                text += ", or " + ", ".join(f'`"{c}"`' for c in self.choices)
        return text


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


# ------------------------------------------------------------------------ checkers
def _check_int(p: Param, value: Any, c: Mapping[str, Any]) -> int:
    return check_int(p.name, value, even=p.even, **p.bounds(c))


def _check_real(p: Param, value: Any, c: Mapping[str, Any]) -> float:
    return check_real(
        p.name, value, lo_open=p.lo_open, hi_open=p.hi_open, inf_ok=p.inf_ok, **p.bounds(c)
    )


def _check_choice(p: Param, value: Any, c: Mapping[str, Any]) -> str:
    return check_choice(p.name, value, p.choices)


def _check_choices(p: Param, value: Any, c: Mapping[str, Any]) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        options = ", ".join(map(repr, p.choices))
        raise ConfigError(f"{p.name} must be a non-empty list of {options}; got {value!r}")
    return tuple(check_choice(p.name, v, p.choices) for v in items)


def _check_string(p: Param, value: Any, c: Mapping[str, Any]) -> str:
    return check_string(p.name, value, nonempty=p.nonempty, forbid=p.forbid)


def _check_pair(p: Param, value: Any, c: Mapping[str, Any]) -> Any:
    """A number in the interval, or a ``[low, high]`` pair of them with low ≤ high."""
    if isinstance(value, str) and value in p.choices:
        return value
    number = check_int if p.kind == "int_pair" else check_real
    b = p.bounds(c)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        low = number(f"{p.name}[0]", value[0], **b)
        high = number(f"{p.name}[1]", value[1], **{**b, "lo": low, "lo_name": f"{p.name}[0]"})
        return (low, high)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number(p.name, value, **b)
    also = " or a [low, high] pair of them" + "".join(f" or {w!r}" for w in p.choices)
    return number(p.name, value, **b, also=also)  # a list of the wrong length fails here


def _check_edges(p: Param, value: Any, c: Mapping[str, Any]) -> tuple[tuple[int, int], ...]:
    """A list of ``[p, m]`` server pairs that connects all ``topology.P`` servers."""
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{p.name} must be a list of [p, m] pairs; got {value!r}")
    P = c.get("topology.P")
    hi = {"hi": None if P is None else P - 1, "hi_name": "topology.P-1"}
    edges = []
    for i, e in enumerate(value):
        if not isinstance(e, (list, tuple)) or len(e) != 2:
            raise ConfigError(f"{p.name}[{i}] must be a [p, m] pair; got {e!r}")
        edges.append(tuple(check_int(f"{p.name}[{i}]", v, lo=0, **hi) for v in e))
    if P is not None:
        # union-find over the servers the edges name (memory bounded by the list, not by P)
        root: dict[int, int] = {}

        def find(x: int) -> int:
            while root.setdefault(x, x) != x:
                root[x] = root[root[x]]
                x = root[x]
            return x

        for a, b in edges:
            root[find(a)] = find(b)
        parts = len({find(x) for x in list(root)}) + P - len(root)
        if parts > 1:
            raise ConfigError(
                f"{p.name} must connect all topology.P={P} servers; got {parts} components"
            )
    return tuple(edges)


def _check_matrix(p: Param, value: Any, c: Mapping[str, Any]) -> tuple[tuple[float, ...], ...]:
    """A ``P × P`` table of real numbers satisfying Assumption 1 (preprint §II)."""
    import numpy as np

    from pgfl.topology import check_combination_matrix

    P = c.get("topology.P")
    shape = f"a {P} x {P} table (topology.P={P})" if P is not None else "a square table"
    what = f"{p.name} must be {shape} of real numbers"
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{what}; got {value!r}")
    rows = []
    for i, row in enumerate(value):
        if not isinstance(row, (list, tuple)):
            raise ConfigError(f"{what}; got row {i} = {row!r}, not a list")
        for j, x in enumerate(row):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                raise ConfigError(f"{what}; got {x!r} at row {i}, column {j}")
        rows.append(tuple(float(x) for x in row))
    lengths = sorted({len(r) for r in rows})
    if len(lengths) > 1:
        raise ConfigError(f"{what}; got a ragged table (rows of {lengths} entries)")
    n = P if P is not None else len(rows)
    if (len(rows), lengths[0]) != (n, n):
        raise ConfigError(f"{what}; got {len(rows)} rows of {lengths[0]} entries")
    try:
        check_combination_matrix(np.array(rows))
    except ConfigError as exc:
        raise ConfigError(f"{p.name}: {exc}") from None
    return tuple(rows)


_CHECKERS: dict[str, Callable[[Param, Any, Mapping[str, Any]], Any]] = {
    "int": _check_int,
    "real": _check_real,
    "choice": _check_choice,
    "choices": _check_choices,
    "string": _check_string,
    "int_pair": _check_pair,
    "real_pair": _check_pair,
    "edges": _check_edges,
    "matrix": _check_matrix,
    "ints": lambda p, v, c: _check_ints(p, v, c),
}


def _check_ints(p: Param, value: Any, c: Mapping[str, Any]) -> tuple[int, ...]:
    """A non-empty list of integers in the interval."""
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(
            f"{p.name} must be a non-empty list of integers in {p.interval()}; got {value!r}"
        )
    return tuple(check_int(f"{p.name}[{i}]", v, **p.bounds(c)) for i, v in enumerate(value))


# --------------------------------------------------------------------------- table
_TABLE = (
    # top level
    Param("name", "string", "experiment", "Experiment name; the default output folder is "
          "`runs/NAME`.", nonempty=True, forbid="/\\"),
    Param("title", "string", "", "Figure title."),
    Param("seed", "int", 0, "Root seed: every random draw comes from a stream named under "
          "it.", lo=0),
    Param("iterations", "int", 1000, "Iterations T of every curve.", lo=1),
    Param("repetitions", "int", 1, "Independent Monte-Carlo repetitions R (averaged).", lo=1),
    Param("plot", "choices", ("centroid_msd_db",), "Metrics drawn in `figure.png`, one panel each "
          "(test metrics need a test set; disagreement needs P > 1).", choices=METRICS),
    # [quick]: the --quick variant
    Param("quick.iterations", "int", None, "Iterations with `--quick` (unset: `iterations`).",
          lo=1),
    Param("quick.repetitions", "int", None, "Repetitions with `--quick` (unset: "
          "`repetitions`).", lo=1),
    # [topology]
    Param("topology.kind", "choice", "erdos_renyi", "Graph of servers: a named family, an edge "
          "list or a combination matrix.", choices=(*TOPOLOGIES, "edges", "matrix")),
    Param("topology.P", "int", 10, "Number of federated units (servers) P.", lo=1),
    Param("topology.weights", "choice", "metropolis", "Combination weights from the graph.",
          choices=WEIGHT_RULES, applies=When('topology.kind other than "matrix"',
                                             lambda c: c["topology.kind"] != "matrix")),
    Param("topology.probability", "real", 0.4, "Edge probability (resampled until connected).",
          lo=0, hi=1, lo_open=True, applies=_kind_is("topology", "erdos_renyi")),
    Param("topology.radius", "real", 0.5, "Connection radius in the unit square (resampled "
          "until connected).", lo=0, lo_open=True,
          applies=_kind_is("topology", "random_geometric")),
    Param("topology.rows", "int", None, "Rows of the grid; must divide P (unset: the largest "
          "divisor of P not above √P).", lo=1, hi_ref=ref("topology.P"),
          applies=_kind_is("topology", "grid", "torus")),
    Param("topology.edges", "edges", None, "Undirected edges `[[p, m], ...]` between servers "
          "0..P-1; Metropolis or max-degree weights.", applies=_kind_is("topology", "edges"),
          required=True),
    Param("topology.matrix", "matrix", None, "The combination matrix A itself, P rows of P "
          "entries.", applies=_kind_is("topology", "matrix"), required=True),
    # [data]
    Param("data.kind", "choice", "regression", "`regression` (preprint §V-A), `logistic` "
          "(conference §V), real-data `classification` (preprint §V-B) or `digits` "
          "(scikit-learn's 8×8 digits, 10 classes; needs a `[model]`).", choices=DATA_KINDS),
    Param("data.K", "int", 100, "Clients per unit K.", lo=1),
    Param("data.N", "int_pair", 100, "Samples per client, or a `[low, high]` range drawn "
          "uniformly per client.", lo=1, applies=_kind_is("data", "regression", "logistic")),
    Param("data.M", "int", 2, "Model dimension M (features).", lo=1,
          applies=_kind_is("data", "regression", "logistic")),
    Param("data.eigenvalues", "real_pair", (0.05, 0.1), "Range of the eigenvalues of each "
          "client's feature covariance.", lo=0, applies=_kind_is("data", "regression")),
    Param("data.noise_variance", "real_pair", (0.01, 0.1), "Range of each client's "
          "observation-noise variance σ_v².", lo=0, applies=_kind_is("data", "regression")),
    Param("data.feature_variance", "real_pair", (0.5, 2.0), "Range of each client's feature "
          "variance σ_h² (features ~ N(γ1, σ_h² I)).", lo=0, applies=_kind_is("data", "logistic")),
    Param("data.test_size", "int", 0, "Clean held-out test samples (`classification`: 0 means "
          "256; `digits`: 0 means 297).", lo=0,
          applies=_kind_is("data", "logistic", "classification", "digits")),
    Param("data.source", "string", "fair", "`fair`, `breast_cancer`, an Avazu CSV path, or "
          "`csv:PATH:LABEL` (see docs/data.md).", nonempty=True,
          applies=_kind_is("data", "classification")),
    Param("data.rows", "int", 5101, "Training rows split unequally over the P·K clients "
          "(≥ 10 per client).", lo=1, applies=_kind_is("data", "classification")),
    Param("data.hash_dim", "int", None, "Hashed columns for categorical features (unset: 16 "
          "for tables, 256 for Avazu).", lo=1, applies=_kind_is("data", "classification")),
    Param("data.feature_noise", "real_pair", (0.0, 1.0), "Per-client feature-noise scale, "
          "uniform in `[low, high]` (a number s: `[0, s]`).", lo=0,
          applies=_kind_is("data", "classification")),
    Param("data.label_skew", "real", None, "Dirichlet concentration of label proportions: "
          "per client (`classification`), per unit over the classes (`digits`); unset: no "
          "skew.", lo=0, lo_open=True, applies=_kind_is("data", "classification", "digits")),
    Param("data.size_skew", "real", 1.0, "Dirichlet concentration of the client sizes "
          "within a unit (`digits`; smaller: more unequal).", lo=0, lo_open=True,
          applies=_kind_is("data", "digits")),
    # [model]
    Param("model.kind", "choice", "none", "`none`: the loss of data.kind (least squares or "
          "logistic, closed form); `softmax`, `mlp` or `cnn` (8×8 images): multi-class "
          "models through JAX (extra `pgfl[jax]`; docs/models.md); `custom`: your JAX "
          "model from `model.source`.", choices=MODEL_KINDS),
    Param("model.source", "string", None, "`FILE.py:FUNCTION`: your JAX model; "
          "`FUNCTION(features, classes, rng)` returns `(loss, params, predict)` "
          "(docs/models.md).", nonempty=True, applies=_kind_is("model", "custom"),
          required=True),
    Param("model.hidden", "ints", (64,), "Widths of the MLP's hidden layers.", lo=1,
          applies=_kind_is("model", "mlp")),
    Param("model.activation", "choice", "relu", "Activation of the hidden layers.",
          choices=ACTIVATIONS, applies=_kind_is("model", "mlp", "cnn")),
    Param("model.channels", "int", 8, "Filters of the CNN's 3×3 convolution.", lo=1,
          applies=_kind_is("model", "cnn")),
    # [training]
    Param("training.rho", "real", 0.1, "Regularization ρ of the risk (preprint eq. 54).", lo=0),
    Param("training.mu", "real", 0.7, "Step size μ; a client's SGD step is μ/E_pk (eq. 3).",
          lo=0, lo_open=True, batched=True),
    Param("training.L", "int", 11, "Clients sampled per unit and iteration.", lo=1,
          hi_ref=ref("data.K")),
    Param("training.epochs", "int_pair", (1, 10), "Local epochs E_pk, or a `[low, high]` range "
          "drawn per client.", lo=1),
    Param("training.batch", "int_pair", (5, 10), "Mini-batch size B_pk, a `[low, high]` range "
          'per client, or `"full"` (every sample, every epoch).', lo=1, choices=("full",)),
    Param("training.share", "choice", "models", "What clients share: models, or averaged "
          "updates (journal §3.4, eqs. 54-55).", choices=SHARE, batched=True),
    Param("training.clip_norm", "real", math.inf, "Per-sample gradient clipping norm B "
          "(`inf`: none); bounds ε.", lo=0, lo_open=True, inf_ok=True, batched=True),
    # [privacy]
    Param("privacy.client_noise", "choice", "none", "Client→server link: DP noise on what a "
          "client shares, or secure aggregation.", choices=CLIENT_NOISE, batched=True),
    Param("privacy.client_variance", "real", 0.0, "Variance of the client noise per "
          "coordinate.", lo=0, batched=True,
          applies=When('privacy.client_noise = "laplace"/"gaussian", not calibrated by '
                       "privacy.target_epsilon",
                       lambda c: c["privacy.client_noise"] in DP_NOISE
                       and (c["privacy.target_epsilon"] is None
                            or c["privacy.server_noise"] != "none"))),
    Param("privacy.server_noise", "choice", "none", "Server→server links: random (eq. 8), "
          "graph-homomorphic (eq. 47) or independent per link.", choices=SERVER_NOISE,
          batched=True),
    Param("privacy.server_variance", "real", 0.0, "Variance σ_g² of the server noise per "
          "coordinate.", lo=0, batched=True,
          applies=When('privacy.server_noise other than "none", not calibrated by '
                       "privacy.target_epsilon",
                       lambda c: c["privacy.server_noise"] != "none"
                       and c["privacy.target_epsilon"] is None)),
    Param("privacy.server_distribution", "choice", "laplace", "Distribution of the server "
          "noise.", choices=DISTRIBUTIONS, batched=True,
          applies=When('privacy.server_noise other than "none"',
                       lambda c: c["privacy.server_noise"] != "none")),
    Param("privacy.target_epsilon", "real", None, "ε after T iterations: calibrates the "
          "variance of the privatized link (needs training.clip_norm).", lo=0, lo_open=True,
          batched=True, applies=DP_LINK),
    Param("privacy.delta", "real", 1e-5, "δ of (ε, δ)-DP.", lo=0, hi=1, lo_open=True,
          hi_open=True, batched=True, applies=DP_LINK),
    Param("privacy.accountants", "choices", ("paper", "pld"), "ε reported per curve (see "
          "docs/privacy.md).", choices=ACCOUNTANTS, batched=True, applies=DP_LINK),
    Param("privacy.dropout", "real", 0.0, "Probability that a sampled client drops out of a "
          "round of secure aggregation.", lo=0, hi=1, hi_open=True, batched=True,
          applies=SECURE_AGGREGATION),
    Param("privacy.secagg_protocol", "choice", "simulated", "`simulated` (exact fixed-point "
          "equivalent) or `cryptographic` (the real protocol; same bits, slow).",
          choices=SECAGG_PROTOCOLS, batched=True, applies=SECURE_AGGREGATION),
    Param("privacy.secagg_modulus_bits", "int", 64, "k: arithmetic modulo 2^k; must hold "
          "L·rint(clip·2^f) < 2^(k−1).", lo=8, hi=64, batched=True, applies=SECURE_AGGREGATION,
          lo_ref=Ref("1+bit_length(training.L·rint(privacy.secagg_clip·2^privacy.secagg_frac_bits))",
                     ("training.L", "privacy.secagg_clip", "privacy.secagg_frac_bits"),
                     modulus_bits_needed),
          allowed_doc="[max(8, 1+bit_length(L·rint(clip·2^f))), 64]"),
    Param("privacy.secagg_frac_bits", "int", 24, "f: fixed-point fractional bits "
          "(quantization step 2^−f).", lo=0, hi=62, batched=True, applies=SECURE_AGGREGATION,
          hi_ref=ref("privacy.secagg_modulus_bits", -2)),
    Param("privacy.secagg_clip", "real", 1024.0, "Values are clipped to [−clip, clip] before "
          "encoding (clip·2^f must round to ≥ 1).", lo=0, lo_open=True, batched=True,
          applies=SECURE_AGGREGATION,
          lo_ref=Ref("2^-(privacy.secagg_frac_bits+1)", ("privacy.secagg_frac_bits",),
                     lambda c: 2.0 ** -(c["privacy.secagg_frac_bits"] + 1)),
          allowed_doc="(2^-(f+1), inf)"),
    Param("privacy.secagg_threshold", "int", None, "t: shares needed to rebuild a secret, "
          "within a neighbourhood of L clients, or secagg_neighbours+1 (unset: a majority).",
          lo=1, batched=True, applies=SECURE_AGGREGATION,
          hi_ref=Ref("neighbourhood size", ("training.L",),
                     lambda c: neighbourhood_size(c["training.L"],
                                                  c.get("privacy.secagg_neighbours")))),
    Param("privacy.secagg_neighbours", "int", None, "Degree of the SecAgg+ neighbour graph "
          "(unset, or ≥ L−1: complete graph).", lo=2, even=True, batched=True,
          applies=SECURE_AGGREGATION),
    # [run]: where the simulation runs (not part of the results: a run resumes on any backend)
    Param("run.backend", "choice", "local", "`local`: this process (the single-process "
          "engine); `ray`: a Ray cluster, same bits (docs/ray.md).", choices=BACKENDS),
    Param("run.address", "string", None, "Address of a running Ray cluster to join "
          "(`ray start --head` prints it; unset: start a local Ray on this machine).",
          nonempty=True, applies=_RAY),
    Param("run.workers", "int", None, "CPUs of the local Ray started without "
          "`run.address` (unset: every CPU of the machine).", lo=1,
          applies=When('run.backend = "ray" without run.address',
                       lambda c: c["run.backend"] == "ray" and c["run.address"] is None)),
    Param("run.mode", "choice", "tasks", "`tasks`: curves × repetition blocks as Ray tasks "
          "(sweeps); `actors`: one network's units held by Ray actors.", choices=RAY_MODES,
          applies=_RAY),
    Param("run.actors", "int", None, "Ray actors holding blocks of units (unset: one per "
          "CPU of the cluster, at most P).", lo=1, applies=_ACTORS),
    Param("run.checkpoint_every", "int", 16, "Rounds between checkpoints of each actor's "
          "block state (a restarted actor replays from the last one).", lo=1,
          applies=_ACTORS),
)  # fmt: skip

#: The table: dotted name → :class:`Param`, in the order of the reference.
PARAMS: dict[str, Param] = {p.name: p for p in _TABLE}
_BY_KEY: dict[str, list[str]] = {}
for _p in _TABLE:
    _BY_KEY.setdefault(_p.key, []).append(_p.name)


def section_params(section: str) -> list[Param]:
    """The settings of one table (``""``: the top level), in reference order."""
    return [p for p in PARAMS.values() if p.section == section]


def _dotted(context: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in context.items():
        if key in PARAMS:
            out[key] = value
            continue
        names = _BY_KEY.get(key, [])
        if len(names) != 1:
            raise TypeError(f"context {key!r} must be a dotted setting name; ambiguous or unknown")
        out[names[0]] = value
    return out


def check(name: str, value: Any, **context: Any) -> Any:
    """Validate ``value`` for setting ``name``; return it normalized (lists → tuples).

    ``context`` gives the values of the settings a bound refers to, by short name when
    unambiguous (``K=100``, ``L=11``, ``secagg_modulus_bits=32``) or by dotted name
    (``**{"data.K": 100}``). Raises :class:`~pgfl.validation.ConfigError` with the
    setting, its allowed range and the value; ``KeyError`` for an unknown name.

    >>> check("privacy.secagg_threshold", 5, L=20, secagg_neighbours=4)  # h = 4 + 1
    5
    """
    return PARAMS[name].check(value, _dotted(context))


# -------------------------------------------------------------------------- reference
#: Rules across settings that the config loader enforces (rendered in the reference).
CROSS_RULES = (
    "A setting given where it has no effect is rejected (column *only with*): in a "
    "curve, when that curve does not meet the condition; in a shared table, when no curve does. "
    "A value equal to the default is always accepted.",
    "Unknown keys are rejected everywhere, including inside `[quick]` (with or without `--quick`).",
    '`training.rho > 0` for `data.kind = "logistic"` or `"classification"` without a '
    "`[model]` (a unique optimum w°).",
    '`[model]`: `model.kind` other than `"none"` needs classification data (not '
    '`data.kind = "regression"`); `data.kind = "digits"` needs one; `"cnn"` needs 8×8 '
    "images (64 features). A model has no closed-form optimum: its MSD metrics are missing.",
    "`privacy.target_epsilon` needs a privatized link in every curve it reaches and a finite "
    "`training.clip_norm`.",
    'A noisy link needs noise: `privacy.server_noise` other than `"none"` needs '
    "`privacy.server_variance > 0` (or `privacy.target_epsilon`), and likewise "
    '`privacy.client_noise = "laplace"/"gaussian"` needs `privacy.client_variance > 0`.',
    '`privacy.server_noise = "graph_homomorphic"` needs P > 1 (with one server the noise '
    "cancels exactly) and `a_pp > 0` for a given `topology.matrix`.",
    "`plot` may name a test metric only if some curve has a test set (`data.kind = "
    '"classification"`, or `"logistic"` with `data.test_size > 0`), and '
    "`disagreement_db` only if some curve has P > 1.",
    "Secure aggregation: `privacy.secagg_threshold` ≤ the neighbourhood size (L, or "
    "`secagg_neighbours + 1` for SecAgg+), and `2^(k−1) > L · rint(secagg_clip · 2^f)` "
    "for k = `secagg_modulus_bits`, f = `secagg_frac_bits`.",
    "`[run]` says where the simulation runs, not what it computes: it is left out of the "
    "configuration's fingerprint (`config.json`), so `--resume` continues on any backend; "
    "the command line (`--backend`, `--address`, ...) overrides it.",
    "The run must fit in memory: the loader estimates the peak memory of the simulation "
    "(data, per-iteration metrics [T, C, R], models, a round's working set, ε accounting) "
    "and refuses a configuration that needs more than the machine has available.",
)

_TITLES = {
    "": "Top level",
    "quick": "`[quick]`: the `--quick` variant",
    "topology": "`[topology]`: the graph of servers",
    "data": "`[data]`: the federated data set",
    "model": "`[model]`: a built-in multi-class model instead of the closed-form loss",
    "training": "`[training]`: local training and aggregation",
    "privacy": "`[privacy]`: noise, secure aggregation and accounting",
    "run": "`[run]`: where the simulation runs (overridden by `--backend` etc.)",
}


def _toml(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, tuple):
        return "`[" + ", ".join(_toml(v).strip("`") for v in value) + "]`"
    if isinstance(value, float) and math.isinf(value):
        return "`inf`"
    return f"`{value}`"


_TYPES = {
    "int": "integer",
    "real": "real",
    "choice": "string",
    "choices": "list of strings",
    "string": "string",
    "int_pair": "integer or [low, high]",
    "real_pair": "real or [low, high]",
    "edges": "list of [p, m]",
    "matrix": "P×P reals",
    "ints": "list of integers",
}


def markdown() -> str:
    """The configuration reference (``docs/config.md``) as Markdown, from :data:`PARAMS`."""
    lines = [
        "# Configuration reference",
        "",
        "<!-- generated by `python -m pgfl.params > docs/config.md`; edit src/pgfl/params.py -->",
        "",
        "An experiment is a TOML file (`pgfl run FILE.toml`) with top-level settings, the",
        "tables below, and a list of `[[curves]]`, each with a unique `label` and any of the",
        "tables `topology`, `data`, `training`, `privacy` overriding the shared ones.",
        "Curves that share everything but the settings marked † run as one vectorized",
        "simulation. Every bad value stops with one line naming the setting, its allowed",
        "range and the value, e.g.",
        "`error: training.L must be an integer in [1, data.K=100]; got 120`.",
        "",
    ]
    for section in SECTIONS:
        lines += [f"## {_TITLES[section]}", ""]
        lines += ["| setting | type | allowed | default | only with | description |"]
        lines += ["|---|---|---|---|---|---|"]
        for p in section_params(section):
            name = f"`{p.name}`" + (" †" if p.batched else "")
            only = "" if p.applies is None else p.applies.text.replace('"', "`")
            if p.required:
                only += " (required then)"
            cells = [name, _TYPES[p.kind], p.allowed(), _toml(p.default), only, p.doc]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    lines += ["## Rules across settings", ""]
    lines += [f"- {rule}" for rule in CROSS_RULES]
    return "\n".join(lines) + "\n"
