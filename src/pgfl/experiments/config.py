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

Every setting's type, range, default and the condition under which it has an effect
are in one table, :data:`pgfl.params.PARAMS` (rendered as ``docs/config.md``); the
dataclasses below take their defaults and checks from it. Unknown keys, wrong types,
out-of-range values, settings given where they have no effect and sizes that cannot fit
in memory raise :class:`ConfigError` naming the key
(``training.L must be an integer in [1, data.K=100]; got 120``). Noise is given by its
*variance* (the papers' ``sigma_g^2``); the engine works with standard deviations.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar

from pgfl.engine import CurveSettings
from pgfl.params import DP_NOISE, PARAMS, TEST_METRICS, section_params
from pgfl.privacy.secagg import SecAggConfig
from pgfl.validation import ConfigError

__all__ = [
    "PER_CURVE",
    "SECTIONS",
    "CurveConfig",
    "DataConfig",
    "ExperimentConfig",
    "ModelConfig",
    "PrivacyConfig",
    "RunConfig",
    "TopologyConfig",
    "TrainingConfig",
    "load_config",
    "parse_config",
    "read_toml",
    "validate_experiment",
]


def _default(name: str) -> Any:
    """The dataclass default of setting ``name``, from the table."""
    return field(default=PARAMS[name].default)


class _Section:
    """A table of settings; every field is checked against :data:`pgfl.params.PARAMS`.

    Bounds that refer to settings of the same table are applied here (in table order);
    bounds that refer to other tables are applied by :class:`CurveConfig`.
    """

    SECTION: ClassVar[str]

    def __post_init__(self) -> None:
        checked: dict[str, Any] = {}
        for p in section_params(self.SECTION):
            value = p.check(getattr(self, p.key), checked)
            object.__setattr__(self, p.key, value)
            checked[p.name] = value
        for p in section_params(self.SECTION):
            if p.required and checked[p.name] is None and p.applies.test(checked):
                raise ConfigError(f"{p.name} is required when {p.applies.text}")

    def values(self) -> dict[str, Any]:
        """The settings by dotted name (``{"training.L": 11, ...}``)."""
        return {f"{self.SECTION}.{f.name}": getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class TopologyConfig(_Section):
    """The graph of servers: a named topology with a weight rule, an edge list or a matrix."""

    SECTION: ClassVar[str] = "topology"
    kind: str = _default("topology.kind")
    P: int = _default("topology.P")
    weights: str = _default("topology.weights")
    probability: float = _default("topology.probability")
    radius: float = _default("topology.radius")
    rows: int | None = _default("topology.rows")
    edges: tuple | None = _default("topology.edges")
    matrix: tuple | None = _default("topology.matrix")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rows is not None and self.P % self.rows:
            raise ConfigError(f"topology.rows must divide topology.P={self.P}; got {self.rows}")


@dataclass(frozen=True)
class DataConfig(_Section):
    """The federated data set.

    ``kind``: ``regression`` (preprint §V-A, synthetic), ``logistic`` (conference §V,
    synthetic) or ``classification`` (real data, preprint §V-B: ``source`` is ``fair``,
    ``breast_cancer``, a path to an Avazu CSV, or ``csv:<path>:<label>``; ``rows``
    training samples split unequally over the clients with per-client feature noise in
    ``feature_noise``, and ``test_size`` clean test samples; see ``docs/data.md``).
    """

    SECTION: ClassVar[str] = "data"
    kind: str = _default("data.kind")
    K: int = _default("data.K")
    N: int | tuple = _default("data.N")
    M: int = _default("data.M")
    eigenvalues: tuple = _default("data.eigenvalues")
    noise_variance: tuple = _default("data.noise_variance")
    feature_variance: tuple = _default("data.feature_variance")
    test_size: int = _default("data.test_size")
    source: str = _default("data.source")
    rows: int | None = _default("data.rows")
    hash_dim: int | None = _default("data.hash_dim")
    feature_noise: float | tuple = _default("data.feature_noise")
    label_skew: float | None = _default("data.label_skew")
    size_skew: float = _default("data.size_skew")


@dataclass(frozen=True)
class ModelConfig(_Section):
    """A built-in multi-class model (``softmax``, ``mlp``, ``cnn``; see ``docs/models.md``).

    ``kind = "none"`` keeps the closed-form loss of the data kind (least squares or
    logistic). The initial parameters come from the run's seed (stream ``model``).
    """

    SECTION: ClassVar[str] = "model"
    kind: str = _default("model.kind")
    source: str | None = _default("model.source")
    hidden: tuple = _default("model.hidden")
    activation: str = _default("model.activation")
    channels: int = _default("model.channels")


@dataclass(frozen=True)
class TrainingConfig(_Section):
    """Local training and aggregation: ``rho``, ``mu``, ``L``, ``E_pk``, ``B_pk``, sharing mode."""

    SECTION: ClassVar[str] = "training"
    rho: float = _default("training.rho")
    mu: float = _default("training.mu")
    L: int = _default("training.L")
    epochs: int | tuple = _default("training.epochs")
    batch: int | tuple | str = _default("training.batch")
    share: str = _default("training.share")
    clip_norm: float = _default("training.clip_norm")


@dataclass(frozen=True)
class PrivacyConfig(_Section):
    """Noise at the client→server and server→server links, and its accounting.

    Noise is given by its variance (the papers' ``sigma_g^2``), or by a ``target_epsilon``
    (at ``delta``) after the run's iterations, from which the variance of the privatized
    link (server level if any, else client level) is calibrated; that needs a gradient
    bound, ``training.clip_norm``. ``accountants`` are the ε reported for every
    privatized curve (see ``docs/privacy.md``).
    """

    SECTION: ClassVar[str] = "privacy"
    client_noise: str = _default("privacy.client_noise")
    client_variance: float = _default("privacy.client_variance")
    server_noise: str = _default("privacy.server_noise")
    server_variance: float = _default("privacy.server_variance")
    server_distribution: str = _default("privacy.server_distribution")
    target_epsilon: float | None = _default("privacy.target_epsilon")
    delta: float = _default("privacy.delta")
    accountants: tuple = _default("privacy.accountants")
    dropout: float = _default("privacy.dropout")
    secagg_protocol: str = _default("privacy.secagg_protocol")
    secagg_modulus_bits: int = _default("privacy.secagg_modulus_bits")
    secagg_frac_bits: int = _default("privacy.secagg_frac_bits")
    secagg_clip: float = _default("privacy.secagg_clip")
    secagg_threshold: int | None = _default("privacy.secagg_threshold")
    secagg_neighbours: int | None = _default("privacy.secagg_neighbours")

    def secagg_config(self) -> SecAggConfig:
        """Secure-aggregation settings (``secagg_*`` keys; see ``docs/secagg.md``)."""
        return SecAggConfig(
            modulus_bits=self.secagg_modulus_bits,
            frac_bits=self.secagg_frac_bits,
            clip=self.secagg_clip,
            threshold=self.secagg_threshold,
            neighbours=self.secagg_neighbours,
        )

    @property
    def scheme(self) -> str | None:
        """The link ε is reported for: the server level if noisy, else the client level."""
        if self.server_noise != "none":
            return self.server_noise
        if self.client_noise in DP_NOISE:
            return "client"
        return None  # secure aggregation adds no DP noise: the server sees only the sum


@dataclass(frozen=True)
class RunConfig(_Section):
    """Where the simulation runs: ``[run]`` (the CLI's ``--backend`` etc. override it).

    Not part of the results: every backend gives the same bits, so the table is left out
    of the configuration's fingerprint and a run can resume on another backend. A
    setting given where it has no effect (``workers`` without ``backend = "ray"``) is
    rejected.

    >>> RunConfig(backend="ray", workers=2).mode
    'tasks'
    >>> RunConfig(workers=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: run.workers = 2 has no effect: it applies only with ...
    """

    SECTION: ClassVar[str] = "run"
    backend: str = _default("run.backend")
    address: str | None = _default("run.address")
    workers: int | None = _default("run.workers")
    mode: str = _default("run.mode")
    actors: int | None = _default("run.actors")
    checkpoint_every: int = _default("run.checkpoint_every")

    def __post_init__(self) -> None:
        super().__post_init__()
        ctx = self.values()
        for p in section_params(self.SECTION):
            value = ctx[p.name]
            if p.applies is not None and value != p.default and not p.applies.test(ctx):
                raise ConfigError(
                    f"{p.name} = {value!r} has no effect: it applies only with "
                    f"{p.applies.text}; remove it"
                )


SECTIONS: dict[str, type] = {
    "topology": TopologyConfig,
    "data": DataConfig,
    "model": ModelConfig,
    "training": TrainingConfig,
    "privacy": PrivacyConfig,
}
#: Keys that may differ between curves batched in one simulation (all else is structural).
PER_CURVE = {s: {p.key for p in section_params(s) if p.batched} for s in SECTIONS}


def _cross_section(p: Any) -> bool:
    refs = [r for r in (p.lo_ref, p.hi_ref) if r is not None]
    return any(n.rpartition(".")[0] != p.section for r in refs for n in r.needs)


#: Settings whose bounds refer to other tables: checked once a curve is complete.
_CROSS = [p for p in PARAMS.values() if p.section in SECTIONS and _cross_section(p)]


@dataclass(frozen=True)
class CurveConfig:
    """One curve: a label and the fully resolved sections.

    Checks the bounds across tables (``training.L ≤ data.K``, the secure-aggregation
    ranges that depend on L) and the rules between settings of one curve.
    """

    label: str
    topology: TopologyConfig
    data: DataConfig
    training: TrainingConfig
    privacy: PrivacyConfig
    model: ModelConfig = field(default_factory=ModelConfig)

    def __post_init__(self) -> None:
        ctx = self.values()
        for p in _CROSS:
            if p.applies is None or p.applies.test(ctx):
                p.check(ctx[p.name], ctx)
        _curve_rules(self, ctx)

    def values(self) -> dict[str, Any]:
        """Every setting of the curve by dotted name."""
        out: dict[str, Any] = {}
        for s in SECTIONS:
            out.update(getattr(self, s).values())
        return out

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
            client_std=math.sqrt(p.client_variance) if p.client_noise in DP_NOISE else 0.0,
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
        return (self.topology, self.data, self.model, training)


def _curve_rules(curve: CurveConfig, ctx: Mapping[str, Any]) -> None:
    """Rules between the settings of one curve, each with a one-line message."""
    priv, who = curve.privacy, f"curve {curve.label!r}"
    model, data = curve.model.kind, curve.data.kind
    if model != "none" and data == "regression":
        raise ConfigError(
            f'model.kind = "{model}" needs classification data (data.kind = "digits", '
            f'"classification" or "logistic"); data.kind = "regression" has real-valued '
            f"targets ({who})"
        )
    if model == "none" and data == "digits":
        raise ConfigError(
            'data.kind = "digits" (10 classes) needs a multi-class model: set model.kind to '
            f'"softmax", "mlp" or "cnn" ({who})'
        )
    if model == "cnn" and data == "logistic" and curve.data.M != 64:
        raise ConfigError(
            f'model.kind = "cnn" needs 8x8 images (64 features); data.M = {curve.data.M} ({who})'
        )
    if data != "regression" and model == "none" and curve.training.rho == 0:
        raise ConfigError(
            f"training.rho must be a real number in (0, inf) for data.kind = "
            f"{curve.data.kind!r} (the logistic risk needs rho > 0 for a unique optimum); got 0"
        )
    if priv.target_epsilon is not None:
        if priv.scheme is None:
            raise ConfigError(
                "privacy.target_epsilon needs a privatized link (server_noise or client_noise); "
                f"{who} has none"
            )
        if math.isinf(curve.training.clip_norm):
            raise ConfigError(
                f"privacy.target_epsilon needs a gradient bound: set training.clip_norm ({who})"
            )
    calibrated = priv.target_epsilon is not None
    if priv.server_noise != "none" and priv.server_variance == 0 and not calibrated:
        raise ConfigError(
            f"privacy.server_noise = {priv.server_noise!r} needs privacy.server_variance > 0 or "
            f"privacy.target_epsilon; {who} has server_variance = 0 (no noise)"
        )
    client_calibrated = calibrated and priv.server_noise == "none"
    if priv.client_noise in DP_NOISE and priv.client_variance == 0 and not client_calibrated:
        raise ConfigError(
            f"privacy.client_noise = {priv.client_noise!r} needs privacy.client_variance > 0 or "
            f"privacy.target_epsilon; {who} has client_variance = 0 (no noise)"
        )
    if priv.server_noise == "graph_homomorphic":
        if curve.topology.P == 1:
            raise ConfigError(
                "privacy.server_noise = 'graph_homomorphic' needs topology.P > 1: with one "
                f"server the noise cancels exactly ({who})"
            )
        if curve.topology.kind == "matrix":
            import numpy as np

            A = np.array(curve.topology.matrix)
            if A.diagonal().min() <= 0:
                p = int(np.argmin(A.diagonal()))
                raise ConfigError(
                    "topology.matrix needs a_pp > 0 for graph-homomorphic noise "
                    f"(eq. 47 divides by it); got a_pp = 0 at p = {p} ({who})"
                )


@dataclass(frozen=True)
class ExperimentConfig:
    """A whole experiment: shared settings, curves, iterations, repetitions, seed, plot."""

    name: str
    curves: tuple[CurveConfig, ...]
    iterations: int = _default("iterations")
    repetitions: int = _default("repetitions")
    seed: int = _default("seed")
    plot: tuple[str, ...] = _default("plot")
    title: str = _default("title")
    source: dict = field(default_factory=dict, compare=False, repr=False)
    run: RunConfig = field(default_factory=lambda: RunConfig(), compare=False)

    def __post_init__(self) -> None:
        for p in section_params(""):
            object.__setattr__(self, p.key, p.check(getattr(self, p.key)))
        if not self.curves:
            raise ConfigError("curves must list at least one curve; got none")
        labels = [c.label for c in self.curves]
        if len(set(labels)) != len(labels):
            dup = next(lab for lab in labels if labels.count(lab) > 1)
            raise ConfigError(f"curve labels must be unique; got {dup!r} twice")

    def to_dict(self) -> dict[str, Any]:
        """The configuration as given (before resolution), for ``config.json``."""
        return dict(self.source)


def _table(name: str, values: Any, allowed: set[str] | list[str]) -> Mapping[str, Any]:
    if not isinstance(values, Mapping):
        raise ConfigError(f"{name} must be a table of settings; got {values!r}")
    for key in values:
        if key not in allowed:
            raise ConfigError(
                f"unknown setting {name}.{key}; allowed: {', '.join(sorted(allowed))}"
            )
    return values


def _section(name: str, values: Any, base: Any = None) -> Any:
    cls = SECTIONS[name]
    values = _table(name, values, {f.name for f in fields(cls)})
    # lists are checked as given (so messages show them) and stored as tuples
    return replace(base, **values) if base is not None else cls(**values)


TOP_LEVEL = {p.name for p in section_params("")} | {"curves", "quick", "run", *SECTIONS}


def _no_effect(name: str, value: Any, ctxs: list[dict[str, Any]], where: str) -> str | None:
    """A message if setting ``name`` (given, not its default) has no effect in any ``ctxs``."""
    p = PARAMS[name]
    if p.applies is None or value == p.default or any(p.applies.test(c) for c in ctxs):
        return None
    scope = "this curve does not" if where else "no curve does"
    shown = list(value) if isinstance(value, tuple) else value
    return (
        f"{where}{name} = {shown!r} has no effect: it applies only with {p.applies.text}, "
        f"which {scope}; remove it"
    )


def _reject_settings_without_effect(
    raw: Mapping[str, Any],
    base: Mapping[str, Any],
    specs: list[Mapping[str, Any]],
    curves: list[CurveConfig],
) -> None:
    """Reject a setting given where it has no effect (shared: in no curve; per curve: there)."""
    ctxs = [c.values() for c in curves]
    for s, section in base.items():
        for key in raw.get(s, {}):
            message = _no_effect(f"{s}.{key}", getattr(section, key), ctxs, "")
            if message:
                raise ConfigError(message)
    for i, (spec, ctx) in enumerate(zip(specs, ctxs, strict=True)):
        for s in SECTIONS:
            for key in spec.get(s, {}):
                message = _no_effect(f"{s}.{key}", ctx[f"{s}.{key}"], [ctx], f"curves[{i}].")
                if message:
                    raise ConfigError(f"{message} (curve {curves[i].label!r})")


def validate_experiment(cfg: ExperimentConfig, *, available: int | None = None) -> None:
    """Checks of a whole configuration that need every curve; raise :class:`ConfigError`.

    * ``plot`` names a test metric only if some curve has a test set, and
      ``disagreement_db`` only if some curve has more than one unit (else the panel is
      empty);
    * the run fits in memory (:func:`pgfl.resources.check_experiment_fits`; ``available``
      overrides the machine's available bytes).

    :func:`parse_config` calls it; a caller that builds an :class:`ExperimentConfig`
    itself should call it before creating any output.
    """
    from pgfl.resources import check_experiment_fits

    has_test = any(
        c.data.kind in ("classification", "digits")
        or c.data.kind == "logistic"
        and c.data.test_size > 0
        for c in cfg.curves
    )
    for metric in cfg.plot:
        if metric in TEST_METRICS and not has_test:
            raise ConfigError(
                f"plot {metric!r} needs a test set (data.kind = 'classification', or 'logistic' "
                "with data.test_size > 0); no curve has one, the panel would be empty"
            )
        if metric == "disagreement_db" and all(c.topology.P == 1 for c in cfg.curves):
            raise ConfigError(
                "plot 'disagreement_db' needs topology.P > 1: a single unit has no disagreement"
            )
    check_experiment_fits(cfg, available=available)


def parse_config(raw: Mapping[str, Any], *, quick: bool = False) -> ExperimentConfig:
    """Validate a configuration mapping (as read from TOML) into an :class:`ExperimentConfig`.

    ``quick`` applies the ``[quick]`` table (fewer iterations/repetitions) if present; the
    table is validated either way. Ends with :func:`validate_experiment`.

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
    run = _table("run", raw.pop("run", {}), [p.key for p in section_params("run")])
    run_config = RunConfig(**run)
    q = _table("quick", raw.get("quick", {}), [p.key for p in section_params("quick")])
    q = {k: PARAMS[f"quick.{k}"].check(v) for k, v in q.items()}
    if quick:
        raw.update(q)
    name = PARAMS["name"].check(raw.get("name", PARAMS["name"].default))
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
        curves.append(CurveConfig(label=label, **sections))
    _reject_settings_without_effect(raw, base, curve_specs, curves)
    top = {p.key: raw[p.key] for p in section_params("") if p.key in raw}
    cfg = ExperimentConfig(
        curves=tuple(curves), source=_thaw(raw), run=run_config, **{**top, "name": name}
    )
    validate_experiment(cfg)
    return cfg


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    if dataclasses.is_dataclass(value):
        return _thaw(dataclasses.asdict(value))
    return value


def read_toml(path: str | Path) -> dict[str, Any]:
    """The table of a TOML file; a bad file raises :class:`ConfigError` naming it.

    Bad: missing, a folder, unreadable, not UTF-8, or not valid TOML.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    if not path.is_file():
        raise ConfigError(f"config file {path} is not a file")
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None


def load_config(path: str | Path, *, quick: bool = False) -> ExperimentConfig:
    """Read and validate a TOML experiment file."""
    return parse_config(read_toml(path), quick=quick)
