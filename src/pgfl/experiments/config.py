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
section dataclasses are made from it (:func:`section_class`: a field a setting, with its
default and check), so a setting a registered mechanism declares is accepted with no other
file touched. Unknown keys, wrong types,
out-of-range values and sizes that cannot fit in memory raise :class:`ConfigError` naming
the key (``training.L must be an integer in [1, data.K=100]; got 120``); a setting given
where it has no effect is a :class:`~pgfl.param.SettingWarning`. Noise is given by its
*variance* (the papers' ``sigma_g^2``). Reading a file and the checks that need the
whole configuration are in :mod:`pgfl.experiments.loader`; turning a curve into what the
engine runs in :mod:`pgfl.experiments.build`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any, ClassVar

from pgfl.param import Rule, check_changed_first, check_values
from pgfl.params import PARAMS, dp_client, dp_link, section_params
from pgfl.privacy import mechanisms
from pgfl.validation import ConfigError

__all__ = [
    "CURVE_RULES",
    "SECTIONS",
    "CurveConfig",
    "DataConfig",
    "DeployConfig",
    "ExperimentConfig",
    "ModelConfig",
    "PrivacyConfig",
    "RunConfig",
    "TopologyConfig",
    "TrainingConfig",
    "per_curve",
    "section_class",
]


def _default(name: str) -> Any:
    """The dataclass default of setting ``name``, from the table."""
    return field(default=PARAMS[name].default)


class _Section:
    """A table of settings; its fields are the table's settings of :attr:`SECTION`.

    The classes are made from :data:`pgfl.params.PARAMS` (:func:`section_class`), which
    follows the mechanism registry: a setting a mechanism declares is a field of its
    section with nothing else to edit. Bounds that refer to settings of the same table
    are applied here (each changed setting against those left at their defaults first,
    then in table order, then the required ones: :func:`~pgfl.param.check_values`);
    bounds that refer to other tables are applied by :class:`CurveConfig`.
    """

    SECTION: ClassVar[str]

    def __post_init__(self) -> None:
        params = [PARAMS[f"{self.SECTION}.{f.name}"] for f in fields(self)]
        checked = check_values(params, {p.name: getattr(self, p.key) for p in params})
        for p in params:
            object.__setattr__(self, p.key, checked[p.name])

    def values(self) -> dict[str, Any]:
        """The settings by dotted name (``{"training.L": 11, ...}``)."""
        return {f"{self.SECTION}.{f.name}": getattr(self, f.name) for f in fields(self)}

    def __reduce__(self) -> tuple:
        """Pickled by section and values: the class is remade from the table where it lands."""
        return (_remake, (self.SECTION, {f.name: getattr(self, f.name) for f in fields(self)}))


def _remake(section: str, values: dict[str, Any]) -> _Section:
    return section_class(section)(**values)


class _Topology(_Section):
    """The graph of servers: a named topology with a weight rule, an edge list or a matrix."""

    SECTION: ClassVar[str] = "topology"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rows is not None and self.P % self.rows:
            raise ConfigError(f"topology.rows must divide topology.P={self.P}; got {self.rows}")


class _Data(_Section):
    """The federated data set.

    ``kind``: ``regression`` (preprint §V-A, synthetic), ``logistic`` (conference §V,
    synthetic) or ``classification`` (real data, preprint §V-B: ``source`` is ``fair``,
    ``breast_cancer``, a path to an Avazu CSV, or ``csv:<path>:<label>``, a path absolute
    once loaded (:func:`pgfl.experiments.loader.resolve_paths`); ``rows``
    training samples split unequally over the clients with per-client feature noise in
    ``feature_noise``, and ``test_size`` clean test samples; see ``docs/data.md``).
    """

    SECTION: ClassVar[str] = "data"


class _Model(_Section):
    """A built-in multi-class model (``softmax``, ``mlp``, ``cnn``; see ``docs/models.md``).

    ``kind = "none"`` keeps the closed-form loss of the data kind (least squares or
    logistic); ``custom``: the user's JAX model ``source`` (``FILE.py:FUNCTION``, the path
    absolute once loaded). The initial parameters come from the run's seed (stream
    ``model``).
    """

    SECTION: ClassVar[str] = "model"


class _Training(_Section):
    """Local training and aggregation: ``rho``, ``mu``, ``L``, ``E_pk``, ``B_pk``, sharing mode."""

    SECTION: ClassVar[str] = "training"


class _Privacy(_Section):
    """Noise at the client→server and server→server links, and its accounting.

    Noise is given by its variance (the papers' ``sigma_g^2``), by a noise multiplier
    ``z = σ/Δ`` (Opacus' convention: ``client_noise_multiplier``, ``server_noise_multiplier``)
    or by a ``target_epsilon`` (at ``delta``) after the run's iterations, from which the
    variance of the privatized link (server level if any, else client level) is
    calibrated; the last two need a gradient bound, ``training.clip_norm``.
    ``accountants`` are the ε reported for every privatized curve (see ``docs/privacy.md``).
    The settings a registered mechanism declares are fields too.
    """

    SECTION: ClassVar[str] = "privacy"

    @property
    def noisy(self) -> bool:
        """Whether some link carries differentially private noise (an ε to report)."""
        return dp_link(self.values())


class _Run(_Section):
    """Where the simulation runs: ``[run]`` (the CLI's ``--backend`` etc. override it).

    Not part of the results: every backend gives the same bits, so the table is left out
    of the configuration's fingerprint and a run can resume on another backend. A
    setting given where it has no effect (``workers`` without ``backend = "ray"``) is a
    :class:`~pgfl.param.SettingWarning`.

    >>> RunConfig(backend="ray", workers=2).mode
    'tasks'
    """

    SECTION: ClassVar[str] = "run"

    def __post_init__(self) -> None:
        super().__post_init__()
        ctx = self.values()
        for p in section_params(self.SECTION):
            p.warn_without_effect(ctx[p.name], [ctx], who="it needs")


class _Deploy(_Section):
    """How ``pgfl deploy`` runs the parties: ``[deploy]`` (docs/deploy.md).

    Not part of the results' fingerprint, like ``[run]``: a deployed run in simulation
    mode gives the numbers of ``pgfl run``, so a run resumes either way.

    >>> DeployConfig().mode
    'simulation'
    """

    SECTION: ClassVar[str] = "deploy"


_BASES: dict[str, type[_Section]] = {
    b.SECTION: b for b in (_Topology, _Data, _Model, _Training, _Privacy, _Run, _Deploy)
}
_CLASSES: dict[tuple, type] = {}


def section_class(section: str) -> type:
    """The frozen dataclass of one table, its fields the table's settings now.

    Made from :data:`pgfl.params.PARAMS` (a field a setting, with its default) and kept
    while the table's settings of that section stay the same, so that configurations
    made under one registry compare equal.

    >>> [f.name for f in fields(section_class("training"))][:3]
    ['rho', 'mu', 'L']
    """
    params = section_params(section)
    key = (section, tuple((p.key, p.default) for p in params))
    cls = _CLASSES.get(key)
    if cls is None:
        base = _BASES[section]
        specs = [(p.key, Any, field(default=p.default)) for p in params]
        cls = make_dataclass(
            f"{section.capitalize()}Config", specs, bases=(base,), frozen=True,
            namespace={"__doc__": base.__doc__, "__module__": __name__},
        )  # fmt: skip
        _CLASSES[key] = cls
    return cls


TopologyConfig = section_class("topology")
DataConfig = section_class("data")
ModelConfig = section_class("model")
TrainingConfig = section_class("training")
PrivacyConfig = section_class("privacy")
RunConfig = section_class("run")
DeployConfig = section_class("deploy")

#: The tables a curve has, in the order of the reference.
SECTIONS: tuple[str, ...] = ("topology", "data", "model", "training", "privacy")


def per_curve(section: str) -> set[str]:
    """Keys that may differ between curves batched in one simulation (all else is structural)."""
    return {p.key for p in section_params(section) if p.batched}


def _cross_section(p: Any) -> bool:
    refs = [r for side in p.refs.values() for r in side]
    return any(n.rpartition(".")[0] != p.section for r in refs for n in r.needs)


def _cross() -> list:
    """Settings whose bounds refer to other tables: checked once a curve is complete."""
    return [p for p in PARAMS.values() if p.section in SECTIONS and _cross_section(p)]


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
    model: ModelConfig = field(default_factory=lambda: section_class("model")())

    def __post_init__(self) -> None:
        ctx = self.values()
        cross = [p for p in _cross() if p.applies is None or p.applies.test(ctx)]
        for section in SECTIONS:  # a conflict with a default of its table names the change
            group = [p for p in cross if p.section == section]
            others = {k: v for k, v in ctx.items() if k not in {p.name for p in group}}
            check_changed_first(group, ctx, others)
        for p in cross:
            p.check(ctx[p.name], ctx)
        _curve_rules(self)

    def values(self) -> dict[str, Any]:
        """Every setting of the curve by dotted name."""
        out: dict[str, Any] = {}
        for s in SECTIONS:
            out.update(getattr(self, s).values())
        return out

    def structure(self) -> tuple:
        """Hashable key of everything that must be shared to batch curves together."""
        batched = per_curve("training")
        training = tuple(
            (f.name, getattr(self.training, f.name))
            for f in fields(self.training)
            if f.name not in batched
        )
        server = mechanisms.SERVER[self.privacy.server_noise]
        combination = server.combination_key(self.values())  # an aggregator, gossip steps
        return (self.topology, self.data, self.model, training, combination)


def _model_needs_classes(c: CurveConfig) -> str | None:
    model, data = c.model.kind, c.data.kind
    if model != "none" and data == "regression":
        return (
            f'model.kind = "{model}" needs classification data (data.kind = "digits", '
            f'"classification" or "logistic"); data.kind = "regression" has real-valued targets'
        )
    if model == "none" and data == "digits":
        return (
            'data.kind = "digits" (10 classes) needs a multi-class model: set model.kind to '
            '"softmax", "mlp" or "cnn"'
        )
    if model == "cnn" and data == "logistic" and c.data.M != 64:
        return f'model.kind = "cnn" needs 8x8 images (64 features); data.M = {c.data.M}'
    return None


def _unique_optimum(c: CurveConfig) -> str | None:
    if c.data.kind != "regression" and c.model.kind == "none" and c.training.rho == 0:
        return (
            f"training.rho must be a real number in (0, inf) for data.kind = {c.data.kind!r} "
            "(the logistic risk needs rho > 0 for a unique optimum); got 0"
        )
    return None


def _target_needs_a_noisy_bounded_link(c: CurveConfig) -> str | None:
    if c.privacy.target_epsilon is None:
        return None
    if not c.privacy.noisy:
        return (
            "privacy.target_epsilon needs a privatized link (server_noise or client_noise); "
            "this curve has none"
        )
    if math.isinf(c.training.clip_norm) and not _calibrated(c.privacy)[1].bounds_messages:
        return "privacy.target_epsilon needs a gradient bound: set training.clip_norm"
    return None


def _calibrated(priv: PrivacyConfig) -> tuple[str, type[mechanisms.Mechanism]]:
    """The level a target ε calibrates (server level if noisy, else client) and its class."""
    level = "server" if priv.server_noise != "none" else "client"
    return level, mechanisms.REGISTRY[level][getattr(priv, f"{level}_noise")]


def _adversary_is_protected(c: CurveConfig) -> str | None:
    """A ``privacy.adversary`` must be one the calibrated (primary) mechanism protects against."""
    priv = c.privacy
    if priv.adversary is None or priv.target_epsilon is None:
        return None
    level, cls = _calibrated(priv)
    protects = mechanisms.protected(cls)
    if priv.adversary in protects:
        return None
    why = cls.exposes.get(priv.adversary, "it is not in its threat model")
    return (
        f"privacy.adversary = {priv.adversary!r}: privacy.{level}_noise = "
        f"{getattr(priv, f'{level}_noise')!r} does not protect against it ({why}); choose one "
        f"of {', '.join(protects)}"
    )


def _noise_given_once(c: CurveConfig) -> str | None:
    """A noise multiplier sets its level's noise: not beside a target ε for that level."""
    priv = c.privacy
    noisy = {"client": dp_client(c.values()), "server": priv.server_noise != "none"}
    for level in ("client", "server"):
        z = getattr(priv, f"{level}_noise_multiplier")
        if z is None or not noisy[level]:  # no noise at that level: ignored (a warning)
            continue
        cls = mechanisms.REGISTRY[level][getattr(priv, f"{level}_noise")]
        if math.isinf(c.training.clip_norm) and not cls.bounds_messages:
            return (
                f"privacy.{level}_noise_multiplier needs a gradient bound (σ = z·Δ, Δ a "
                "multiple of the clipping norm): set training.clip_norm"
            )
        calibrates = "server" if priv.server_noise != "none" else "client"
        if priv.target_epsilon is not None and calibrates == level:
            return (
                f"privacy.{level}_noise_multiplier and privacy.target_epsilon both set the "
                f"{level} noise; give one"
            )
    return None


def _noisy_link_needs_noise(c: CurveConfig) -> str | None:
    """A scheme with a noise level (its ``calibrates`` setting) needs it > 0, or a calibration."""
    priv = c.privacy
    given = {
        "server": priv.target_epsilon is not None or priv.server_noise_multiplier is not None,
        "client": priv.target_epsilon is not None
        and priv.server_noise == "none"
        or priv.client_noise_multiplier is not None,
    }
    values = c.values()
    for level in ("server", "client"):
        name = values[f"privacy.{level}_noise"]
        setting = mechanisms.REGISTRY[level][name].calibrates
        if setting is None or values[setting] != 0 or given[level]:
            continue
        short = setting.partition(".")[2]
        return (
            f"privacy.{level}_noise = {name!r} needs {setting} > 0 or privacy.target_epsilon; "
            f"got {short} = 0 (no noise)"
        )
    return None


def _mechanisms_own_rules(c: CurveConfig) -> str | None:
    values = c.values()
    for level, table in (("client", mechanisms.CLIENT), ("server", mechanisms.SERVER)):
        message = table[values[f"privacy.{level}_noise"]].check_settings(values)
        if message is not None:
            return message
    return None


#: The rules between the settings of one curve: each is a line of ``docs/config.md`` and
#: the check that enforces it when a configuration is loaded.
CURVE_RULES = (
    Rule('`[model]`: `model.kind` other than `"none"` needs classification data (not '
         '`data.kind = "regression"`); `data.kind = "digits"` needs one; `"cnn"` needs 8×8 '
         "images (64 features). A model has no closed-form optimum: its MSD metrics are "
         "missing.", _model_needs_classes),
    Rule('`training.rho > 0` for `data.kind = "logistic"` or `"classification"` without a '
         "`[model]` (a unique optimum w°).", _unique_optimum),
    Rule("`privacy.target_epsilon` needs a privatized link in every curve it reaches and a "
         "finite `training.clip_norm` (or a client stack that clips its messages, "
         "`privacy.message_clip`).", _target_needs_a_noisy_bounded_link),
    Rule("A noisy link needs noise: a scheme with a noise level needs the setting it is "
         "calibrated by > 0 (or a noise multiplier, or `privacy.target_epsilon`): "
         "`privacy.server_variance` for server noise, `privacy.client_variance` for "
         '`privacy.client_noise = "laplace"/"gaussian"`, `privacy.ddp_variance` for distributed '
         "DP.", _noisy_link_needs_noise),
    Rule("A noise multiplier (`privacy.client_noise_multiplier`, "
         "`privacy.server_noise_multiplier`; σ = z·Δ) replaces its level's variance, needs a "
         "finite `training.clip_norm` (or a stack that clips), and is not given beside a "
         "`privacy.target_epsilon` that calibrates the same level.", _noise_given_once),
    Rule("`privacy.adversary` must be an adversary the calibrated mechanism (server level if "
         "any, else client level) protects against (docs/privacy.md).",
         _adversary_is_protected),
    Rule("Each privacy mechanism checks its own rules (the next items).",
         _mechanisms_own_rules),
)  # fmt: skip


def _curve_rules(curve: CurveConfig) -> None:
    """Check :data:`CURVE_RULES`; the first violation stops with one line naming the curve."""
    for rule in CURVE_RULES:
        message = rule.check(curve)
        if message is not None:
            raise ConfigError(f"{message} (curve {curve.label!r})")


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
    figure: str = _default("figure")
    usable_db: float | None = _default("usable_db")
    source: dict = field(default_factory=dict, compare=False, repr=False)
    run: RunConfig = field(default_factory=lambda: RunConfig(), compare=False)
    deploy: DeployConfig = field(default_factory=lambda: DeployConfig(), compare=False)

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
        """The configuration as given, its file paths made absolute, for ``config.json``."""
        return dict(self.source)
