"""Experiment configuration: a TOML file (or a dict) validated into frozen dataclasses.

An experiment has shared sections and a list of curves that override them::

    name = "fig2"
    seed = 0
    iterations = 1000
    repetitions = 1

    [topology]          # kind, P, weights, probability, radius, rows, edges, matrix
    kind = "erdos_renyi"
    P = 10

    [data]              # kind, K, N, M, eigenvalues, noise_variance, feature_variance, ...
    kind = "regression"
    K = 100

    [training]          # rho, mu, L, epochs, batch, share, clip_norm
    mu = 0.7

    [privacy]           # client_noise, client_variance, server_noise, server_variance, ...
    server_variance = 0.1

    [[curves]]
    label = "graph_homomorphic"
    privacy = { server_noise = "graph_homomorphic" }

Unknown keys, wrong types and out-of-range values raise :class:`ConfigError` naming the
key (``training.L must be an integer in [1, K=100]; got 120``). Noise is given by its
*variance* (the papers' ``sigma_g^2``); the engine works with standard deviations.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from pgfl.engine import CLIENT_NOISE, DISTRIBUTIONS, SERVER_NOISE, SHARE, CurveSettings
from pgfl.privacy.secagg import SecAggConfig
from pgfl.topology import TOPOLOGIES, WEIGHT_RULES
from pgfl.validation import ConfigError, check_choice, check_int, check_real

DATA_KINDS = ("regression", "logistic", "classification")
METRICS = (
    "centroid_msd_db",
    "individual_msd_db",
    "disagreement_db",
    "test_error",
    "test_log_loss",
    "server_test_error_mean",
)


def _pair(name: str, value: Any, *, integer: bool = False) -> tuple | int | float:
    """A number or a ``[low, high]`` pair (stored as a tuple, so configs stay hashable)."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ConfigError(f"{name} must be a number or a [low, high] pair; got {list(value)!r}")
        check = check_int if integer else check_real
        lo = check(f"{name}[0]", value[0], lo=0)
        check(f"{name}[1]", value[1], lo=lo, lo_name=f"{name}[0]")
        return tuple(value)
    return check_int(name, value, lo=1) if integer else check_real(name, value, lo=0)


@dataclass(frozen=True)
class TopologyConfig:
    """The graph of servers: a named topology with a weight rule, an edge list or a matrix."""

    kind: str = "erdos_renyi"
    P: int = 10
    weights: str = "metropolis"
    probability: float = 0.4
    radius: float = 0.5
    rows: int | None = None
    edges: tuple | None = None
    matrix: tuple | None = None

    def __post_init__(self) -> None:
        check_choice("topology.kind", self.kind, (*TOPOLOGIES, "edges", "matrix"))
        check_int("topology.P", self.P, lo=1)
        check_choice("topology.weights", self.weights, WEIGHT_RULES)
        check_real("topology.probability", self.probability, lo=0, hi=1, lo_open=True)
        check_real("topology.radius", self.radius, lo=0, lo_open=True)
        if self.kind == "edges" and self.edges is None:
            raise ConfigError("topology.edges is required when topology.kind = 'edges'")
        if self.kind == "matrix" and self.matrix is None:
            raise ConfigError("topology.matrix is required when topology.kind = 'matrix'")


@dataclass(frozen=True)
class DataConfig:
    """The federated data set.

    ``kind``: ``regression`` (preprint §V-A, synthetic), ``logistic`` (conference §V,
    synthetic) or ``classification`` (real data, preprint §V-B: ``source`` is ``fair``,
    ``breast_cancer``, a path to an Avazu CSV, or ``csv:<path>:<label>``; ``rows``
    training samples split unequally over the clients with per-client feature noise in
    ``feature_noise``, and ``test_size`` clean test samples; see ``docs/data.md``).
    """

    kind: str = "regression"
    K: int = 100
    N: int | tuple = 100
    M: int = 2
    eigenvalues: tuple = (0.05, 0.1)
    noise_variance: tuple = (0.01, 0.1)
    feature_variance: tuple = (0.5, 2.0)
    test_size: int = 0
    source: str = "fair"
    rows: int | None = 5101
    hash_dim: int | None = None
    feature_noise: float | tuple = (0.0, 1.0)
    label_skew: float | None = None

    def __post_init__(self) -> None:
        check_choice("data.kind", self.kind, DATA_KINDS)
        check_int("data.K", self.K, lo=1)
        _pair("data.N", self.N, integer=True)
        check_int("data.M", self.M, lo=1)
        _pair("data.eigenvalues", self.eigenvalues)
        _pair("data.noise_variance", self.noise_variance)
        _pair("data.feature_variance", self.feature_variance)
        check_int("data.test_size", self.test_size, lo=0)
        if not isinstance(self.source, str) or not self.source:
            raise ConfigError(f"data.source must be a data set name or a path; got {self.source!r}")
        if self.rows is not None:
            check_int("data.rows", self.rows, lo=1)
        if self.hash_dim is not None:
            check_int("data.hash_dim", self.hash_dim, lo=1)
        _pair("data.feature_noise", self.feature_noise)
        if self.label_skew is not None:
            check_real("data.label_skew", self.label_skew, lo=0, lo_open=True)


@dataclass(frozen=True)
class TrainingConfig:
    """Local training and aggregation: ``rho``, ``mu``, ``L``, ``E_pk``, ``B_pk``, sharing mode."""

    rho: float = 0.1
    mu: float = 0.7
    L: int = 11
    epochs: int | tuple = (1, 10)
    batch: int | tuple | str = (5, 10)
    share: str = "models"
    clip_norm: float = math.inf

    def __post_init__(self) -> None:
        check_real("training.rho", self.rho, lo=0)
        check_real("training.mu", self.mu, lo=0, lo_open=True)
        check_int("training.L", self.L, lo=1)
        _pair("training.epochs", self.epochs, integer=True)
        if self.batch != "full":
            _pair("training.batch", self.batch, integer=True)
        check_choice("training.share", self.share, SHARE)
        if self.clip_norm != math.inf:
            check_real("training.clip_norm", self.clip_norm, lo=0, lo_open=True)


@dataclass(frozen=True)
class PrivacyConfig:
    """Noise at the client→server and server→server links, and its accounting.

    Noise is given by its variance (the papers' ``sigma_g^2``), or by a ``target_epsilon``
    (at ``delta``) after the run's iterations, from which the variance of the privatized
    link (server level if any, else client level) is calibrated; that needs a gradient
    bound, ``training.clip_norm``. ``accountants`` are the ε reported for every
    privatized curve (see ``docs/privacy.md``).
    """

    client_noise: str = "none"
    client_variance: float = 0.0
    server_noise: str = "none"
    server_variance: float = 0.0
    server_distribution: str = "laplace"
    target_epsilon: float | None = None
    delta: float = 1e-5
    accountants: tuple = ("paper", "pld")
    dropout: float = 0.0
    secagg_protocol: str = "simulated"
    secagg_modulus_bits: int = 64
    secagg_frac_bits: int = 24
    secagg_clip: float = 1024.0
    secagg_threshold: int | None = None
    secagg_neighbours: int | None = None

    def __post_init__(self) -> None:
        from pgfl.privacy.accounting import ACCOUNTANTS

        check_choice("privacy.client_noise", self.client_noise, CLIENT_NOISE)
        check_real("privacy.client_variance", self.client_variance, lo=0)
        check_choice("privacy.server_noise", self.server_noise, SERVER_NOISE)
        check_real("privacy.server_variance", self.server_variance, lo=0)
        check_choice("privacy.server_distribution", self.server_distribution, DISTRIBUTIONS)
        if self.target_epsilon is not None:
            check_real("privacy.target_epsilon", self.target_epsilon, lo=0, lo_open=True)
        check_real("privacy.delta", self.delta, lo=0, hi=1, lo_open=True, hi_open=True)
        accountants = (self.accountants,) if isinstance(self.accountants, str) else self.accountants
        if not accountants:
            raise ConfigError("privacy.accountants must list at least one accountant; got none")
        for a in accountants:
            check_choice("privacy.accountants", a, ACCOUNTANTS)
        object.__setattr__(self, "accountants", tuple(accountants))
        if self.client_noise == "secure_aggregation":
            self.secagg_config()

    def secagg_config(self) -> SecAggConfig:
        """Secure-aggregation settings (``secagg_*`` keys; see ``docs/secagg.md``)."""
        return SecAggConfig(
            modulus_bits=check_int(
                "privacy.secagg_modulus_bits", self.secagg_modulus_bits, lo=8, hi=64
            ),
            frac_bits=check_int("privacy.secagg_frac_bits", self.secagg_frac_bits, lo=0, hi=52),
            clip=check_real("privacy.secagg_clip", self.secagg_clip, lo=0, lo_open=True),
            threshold=self.secagg_threshold,
            neighbours=self.secagg_neighbours,
        )

    @property
    def scheme(self) -> str | None:
        """The link ε is reported for: the server level if noisy, else the client level."""
        if self.server_noise != "none":
            return self.server_noise
        if self.client_noise in ("laplace", "gaussian"):
            return "client"
        return None  # secure aggregation adds no DP noise: the server sees only the sum


SECTIONS: dict[str, type] = {
    "topology": TopologyConfig,
    "data": DataConfig,
    "training": TrainingConfig,
    "privacy": PrivacyConfig,
}
#: Keys that may differ between curves batched in one simulation (all else is structural).
PER_CURVE = {
    "training": {"mu", "share", "clip_norm"},
    "privacy": {f.name for f in fields(PrivacyConfig)},
}


@dataclass(frozen=True)
class CurveConfig:
    """One curve: a label and the fully resolved sections."""

    label: str
    topology: TopologyConfig
    data: DataConfig
    training: TrainingConfig
    privacy: PrivacyConfig

    def settings(self) -> CurveSettings:
        """The engine's per-curve settings (variances become standard deviations)."""
        from pgfl.privacy.schemes import SecureAggregationScheme

        t, p = self.training, self.privacy
        client: str | SecureAggregationScheme = p.client_noise
        if p.client_noise == "secure_aggregation":
            client = SecureAggregationScheme(p.secagg_config(), p.secagg_protocol, p.dropout)
        return CurveSettings(
            mu=t.mu,
            share=t.share,
            client_noise=client,
            client_std=math.sqrt(p.client_variance) if p.client_noise in DISTRIBUTIONS else 0.0,
            server_noise=p.server_noise,
            server_std=math.sqrt(p.server_variance),
            server_distribution=p.server_distribution,
            clip_norm=t.clip_norm,
        )

    def structure(self) -> tuple:
        """Hashable key of everything that must be shared to batch curves together."""
        per_curve = PER_CURVE["training"]
        training = tuple(
            (f.name, getattr(self.training, f.name))
            for f in fields(TrainingConfig)
            if f.name not in per_curve
        )
        return (self.topology, self.data, training)


@dataclass(frozen=True)
class ExperimentConfig:
    """A whole experiment: shared settings, curves, iterations, repetitions, seed, plot."""

    name: str
    curves: tuple[CurveConfig, ...]
    iterations: int = 1000
    repetitions: int = 1
    seed: int = 0
    plot: tuple[str, ...] = ("centroid_msd_db",)
    title: str = ""
    source: dict = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The configuration as given (before resolution), for ``config.json``."""
        return dict(self.source)


def _section(name: str, values: Any, base: Any = None) -> Any:
    cls = SECTIONS[name]
    if not isinstance(values, Mapping):
        raise ConfigError(f"{name} must be a table of settings; got {values!r}")
    allowed = {f.name for f in fields(cls)}
    for key in values:
        if key not in allowed:
            raise ConfigError(
                f"unknown setting {name}.{key}; allowed: {', '.join(sorted(allowed))}"
            )
    frozen = {k: _freeze(v) for k, v in values.items()}
    try:
        return replace(base, **frozen) if base is not None else cls(**frozen)
    except TypeError as exc:  # pragma: no cover - dataclass signature errors
        raise ConfigError(f"{name}: {exc}") from None


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


TOP_LEVEL = {
    "name",
    "title",
    "seed",
    "iterations",
    "repetitions",
    "plot",
    "curves",
    "quick",
    *SECTIONS,
}


def parse_config(raw: Mapping[str, Any], *, quick: bool = False) -> ExperimentConfig:
    """Validate a configuration mapping (as read from TOML) into an :class:`ExperimentConfig`.

    ``quick`` applies the ``[quick]`` table (fewer iterations/repetitions) if present.

    >>> cfg = parse_config({"name": "x", "training": {"L": 5}, "data": {"K": 10},
    ...                     "curves": [{"label": "a"}, {"label": "b", "training": {"mu": 0.1}}]})
    >>> [c.training.mu for c in cfg.curves]
    [0.7, 0.1]
    >>> parse_config({"name": "x", "training": {"L": 50}, "data": {"K": 10}})
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: training.L must be an integer in [1, data.K=10]; got 50
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"a configuration must be a table of settings; got {raw!r}")
    for key in raw:
        if key not in TOP_LEVEL:
            raise ConfigError(f"unknown setting {key!r}; allowed: {', '.join(sorted(TOP_LEVEL))}")
    raw = dict(raw)
    if quick and "quick" in raw:
        q = raw["quick"]
        if not isinstance(q, Mapping) or set(q) - {"iterations", "repetitions"}:
            raise ConfigError(f"quick must be a table with iterations/repetitions; got {q!r}")
        raw.update(q)
    name = raw.get("name", "experiment")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"name must be a non-empty string; got {name!r}")
    base = {s: _section(s, raw.get(s, {})) for s in SECTIONS}
    curve_specs = raw.get("curves") or [{"label": name}]
    if not isinstance(curve_specs, list):
        raise ConfigError(f"curves must be a list of tables; got {curve_specs!r}")
    curves = []
    for i, spec in enumerate(curve_specs):
        if not isinstance(spec, Mapping):
            raise ConfigError(f"curves[{i}] must be a table; got {spec!r}")
        for key in spec:
            if key != "label" and key not in SECTIONS:
                raise ConfigError(
                    f"unknown setting curves[{i}].{key}; allowed: label, {', '.join(SECTIONS)}"
                )
        label = spec.get("label", f"curve{i}")
        if not isinstance(label, str) or not label:
            raise ConfigError(f"curves[{i}].label must be a non-empty string; got {label!r}")
        sections = {s: _section(s, spec.get(s, {}), base[s]) for s in SECTIONS}
        curve = CurveConfig(label=label, **sections)
        check_int("training.L", curve.training.L, lo=1, hi=curve.data.K, hi_name="data.K")
        curves.append(curve)
    labels = [c.label for c in curves]
    if len(set(labels)) != len(labels):
        dup = next(lab for lab in labels if labels.count(lab) > 1)
        raise ConfigError(f"curve labels must be unique; got {dup!r} twice")
    plot = raw.get("plot", ["centroid_msd_db"])
    if isinstance(plot, str):
        plot = [plot]
    for m in plot:
        check_choice("plot", m, METRICS)
    title = raw.get("title", "")
    if not isinstance(title, str):
        raise ConfigError(f"title must be a string; got {title!r}")
    return ExperimentConfig(
        name=name,
        curves=tuple(curves),
        iterations=check_int("iterations", raw.get("iterations", 1000), lo=1),
        repetitions=check_int("repetitions", raw.get("repetitions", 1), lo=1),
        seed=check_int("seed", raw.get("seed", 0), lo=0),
        plot=tuple(plot),
        title=title,
        source=_thaw(raw),
    )


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    if dataclasses.is_dataclass(value):
        return _thaw(dataclasses.asdict(value))
    return value


def read_toml(path: str | Path) -> dict[str, Any]:
    """The table of a TOML file; a missing file or bad TOML raises :class:`ConfigError`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None


def load_config(path: str | Path, *, quick: bool = False) -> ExperimentConfig:
    """Read and validate a TOML experiment file."""
    return parse_config(read_toml(path), quick=quick)
