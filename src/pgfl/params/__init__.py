"""Every user-facing setting of an experiment configuration, in one declarative table.

:data:`PARAMS` maps a setting's dotted name (``training.L``, ``privacy.secagg_frac_bits``)
to a :class:`~pgfl.param.Param`: its type, allowed range or choices, default and a one-line
doc, in the spirit of scikit-learn's parameter constraints. Each setting is declared once,
by the module that owns its concept — the graph (:data:`pgfl.topology.PARAMS`), the data
(:data:`pgfl.data.params.PARAMS`), the loss (:data:`pgfl.problems.RHO`), a client's
schedule (:data:`pgfl.data.synthetic.SCHEDULE_PARAMS`), the privacy mechanisms
(:func:`pgfl.privacy.mechanisms.params`, secure aggregation's
:data:`pgfl.privacy.secagg.PARAMS`) — or here for the rest; this module collects them in
reference order. The vocabularies of ``privacy.client_noise`` and ``privacy.server_noise``
are the mechanism registry's names (:mod:`pgfl.privacy.mechanisms`). The config loader, the
engine and the commands check values here; the configuration reference ``docs/config.md``
is generated from the same table (``python -m pgfl.commands.config_reference > docs/config.md``).

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

from collections.abc import Mapping
from typing import Any

from pgfl.data.params import DATA_KINDS
from pgfl.data.params import PARAMS as DATA_PARAMS
from pgfl.data.synthetic import SCHEDULE_PARAMS
from pgfl.general import (
    ACTIVATIONS,
    BACKENDS,
    METRICS,
    MODEL,
    MODEL_KINDS,
    RAY_MODES,
    RUN,
    SHARE,
    TEST_METRICS,
    TOP,
    TRAINING,
)
from pgfl.param import Param, ParamTable, When
from pgfl.privacy import mechanisms
from pgfl.privacy.accounting.accountants import ACCOUNTANTS
from pgfl.privacy.mechanisms.base import ADVERSARIES, NEIGHBOURING, client_stack, declared
from pgfl.privacy.mechanisms.client import CLIENT_VARIANCE, DISTRIBUTIONS
from pgfl.privacy.mechanisms.server import SERVER_DISTRIBUTION, SERVER_VARIANCE
from pgfl.privacy.secagg import PARAMS as SECAGG_PARAMS
from pgfl.problems import RHO
from pgfl.topology import PARAMS as TOPOLOGY_PARAMS
from pgfl.topology import TOPOLOGIES, WEIGHT_RULES
from pgfl.validation import ConfigError

__all__ = [
    "ACCOUNTANTS",
    "ACTIVATIONS",
    "BACKENDS",
    "GENERAL_RULES",
    "DATA_KINDS",
    "DISTRIBUTIONS",
    "DP_CLIENT",
    "METRICS",
    "MODEL_KINDS",
    "PARAMS",
    "RAY_MODES",
    "SECTIONS",
    "SHARE",
    "TEST_METRICS",
    "TOPOLOGIES",
    "WEIGHT_RULES",
    "check",
    "dp_client",
    "dp_link",
    "markdown",
    "section_params",
]

#: Sections of a configuration, in the order of the reference; "" is the top level.
SECTIONS = ("", "quick", "topology", "data", "model", "training", "privacy", "run", "deploy")


def dp_client(c: Mapping[str, Any]) -> bool:
    """Whether a curve's client scheme adds DP noise: it declares a noise level (``calibrates``).

    >>> dp_client({"privacy.client_noise": "skellam"}), dp_client({"privacy.client_noise": "none"})
    (True, False)
    """
    cls = declared("client", c)
    return cls is not None and cls.calibrates is not None


def dp_link(c: Mapping[str, Any]) -> bool:
    """Whether a curve's settings (dotted names) put DP noise on some link (an ε to report)."""
    return c["privacy.server_noise"] != "none" or dp_client(c)


#: Where client noise settings have an effect: the client scheme has a noise level.
DP_CLIENT = When(
    "privacy.client_noise a scheme with a noise level (`laplace`, `gaussian`, distributed DP)",
    dp_client,
)
#: Where the accounting settings have an effect: some link carries DP noise.
DP_LINK = When(
    'privacy.server_noise other than "none" or privacy.client_noise a scheme with a noise '
    "level (`laplace`, `gaussian`, distributed DP)",
    dp_link,
)
_T = {p.name: p for p in (RHO, *TRAINING[:2], *SCHEDULE_PARAMS, *TRAINING[2:])}

_PRIVACY = (
    Param("privacy.client_noise", "choice", "none", "Client→server link: DP noise on what a "
          "client shares, or secure aggregation; or the same as a stack of pieces run in "
          "order on a client's message (a list: `[]` is `none`, `[\"gaussian\"]`, "
          "`[\"secure_aggregation\"]`, `[\"discrete_gaussian_shares\", "
          "\"secure_aggregation\"]` is `distributed_gaussian`, `[\"skellam_shares\", "
          "\"secure_aggregation\"]` is `skellam`, `[\"gaussian\", \"secure_aggregation\"]` is "
          "`gaussian+secure_aggregation`, composed from its pieces; docs/privacy.md).",
          choices=lambda: mechanisms.names("client"), batched=True,
          checker=lambda p, value, c: client_stack(p.name, value)),
    CLIENT_VARIANCE,
    Param("privacy.server_noise", "choice", "none", "Server→server links: random (eq. 8), "
          "graph-homomorphic (eq. 47), independent per link, `central` (a trusted aggregator "
          "returns the network average plus one draw: the central-DP ceiling), "
          "`pairwise_cancelling` (DECOR: pairwise terms that cancel in the centroid), "
          "`gossip` (Muffliato: local noise, then K gossip steps) or `topology_optimized` "
          "(CorN: a covariance optimised for the topology, drawn by a trusted dealer).",
          choices=lambda: mechanisms.names("server"), batched=True),
    SERVER_VARIANCE,
    SERVER_DISTRIBUTION,
    Param("privacy.client_noise_multiplier", "real", None, "Client noise as a noise "
          "multiplier z = σ/Δ (Opacus' `noise_multiplier`) instead of "
          "`privacy.client_variance` (`privacy.ddp_variance` for distributed noise: σ on a "
          "unit's sum): σ = z·Δ, Δ the L2 sensitivity of a client's message in one round "
          "(2μB for a model, 2B for an update; divided by the records with "
          "`privacy.neighbours = \"record\"`; distributed noise: in real units, before its "
          "integer encoding). Needs training.clip_norm.", lo=0, lo_open=True, batched=True,
          applies=DP_CLIENT),
    Param("privacy.server_noise_multiplier", "real", None, "Server noise as a noise "
          "multiplier z = σ/Δ₁ instead of `privacy.server_variance`: σ = z·Δ₁, Δ₁ the L2 "
          "sensitivity of a server's first message (later messages' grow with the "
          "iteration for the schemes whose sensitivity accumulates, preprint eq. 52). Needs "
          "training.clip_norm.", lo=0, lo_open=True, batched=True,
          applies=When('privacy.server_noise other than "none"',
                       lambda c: c["privacy.server_noise"] != "none")),
    Param("privacy.target_epsilon", "real", None, "ε after T iterations: calibrates the "
          "variance of the privatized link (needs training.clip_norm).", lo=0, lo_open=True,
          batched=True, applies=DP_LINK),
    Param("privacy.delta", "real", 1e-5, "δ of (ε, δ)-DP.", lo=0, hi=1, lo_open=True,
          hi_open=True, batched=True, applies=DP_LINK),
    NEIGHBOURING,
    Param("privacy.adversary", "choice", None, "The adversary a `target_epsilon` is "
          "calibrated against, with amplification by client sampling where it holds (unset: "
          "the privatized link's own ε, as the papers). See docs/privacy.md.",
          choices=lambda: tuple(ADVERSARIES), batched=True,
          applies=When("privacy.target_epsilon is set",
                       lambda c: c["privacy.target_epsilon"] is not None)),
    Param("privacy.accountants", "choices", ("pld", "paper"), "ε reported per curve: `pld` "
          "the tight sound one (printed first), `paper` the papers' published bound, for "
          "reference (under-reports for M > 1); see docs/privacy.md.", choices=ACCOUNTANTS,
          batched=True, applies=DP_LINK),
    Param("privacy.epsilon_checkpoints", "int", 64, "Iterations at which ε(i) is read by "
          "`pld` (and by `basic`/`advanced`/`kairouz` for Gaussian noise), log-spaced "
          "including 1 and T; every other iteration reports the next read-out, an upper bound "
          "(ε never decreases). ε(T) does not depend on it; fewer read-outs cost less "
          "accounting time.", lo=2, batched=True, applies=DP_LINK),
    *SECAGG_PARAMS,
)  # fmt: skip


DEPLOY_MODES = ("simulation", "deployment")


def _address(p: Param, value: Any, context: Mapping[str, Any]) -> str:
    """``host:port`` with a port in 1..65535."""
    host, _, port = str(value).rpartition(":") if isinstance(value, str) else ("", "", "")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ConfigError(f"{p.name} must be an address host:port (port 1..65535); got {value!r}")
    return value


def _addresses(p: Param, value: Any, context: Mapping[str, Any]) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(
            f"{p.name} must be a list of addresses host:port, one per unit; got {value!r}"
        )
    return tuple(_address(p, v, context) for v in value)


_DEPLOY = (
    # [deploy]: how `pgfl deploy` runs the parties (not part of the results' fingerprint)
    Param("deploy.mode", "choice", "simulation", "`simulation`: every party draws the "
          "simulator's keyed numbers from the seed (the deployed run reproduces `pgfl run`; "
          "no secrecy); `deployment`: every party draws from its own cryptographically secure "
          "generator, pairs of servers from their X25519 agreement (docs/deploy.md).",
          choices=DEPLOY_MODES),
    Param("deploy.servers", "paths", None, "The unit servers' addresses `host:port`, one per "
          "unit in order (without `--local`: the parties run on these hosts).",
          checker=_addresses, allowed_doc="P addresses host:port"),
    Param("deploy.aggregator", "string", None, "The trusted aggregator's address `host:port` "
          "(central curves, without `--local`).", checker=_address,
          allowed_doc="an address host:port"),
    Param("deploy.dealer", "string", None, "The trusted dealer's address `host:port` "
          "(topology-optimized curves, without `--local`).", checker=_address,
          allowed_doc="an address host:port"),
    Param("deploy.certs", "string", None, "Folder of the deployment's certificates (`ca.pem`, "
          "`NAME.pem`, `NAME.key`; `pgfl deploy CONFIG --make-certs DIR`); unset with "
          "`--local`: fresh ones for the run.", nonempty=True),
    Param("deploy.client_timeout", "real", 30.0, "Seconds a server waits for its clients' "
          "answers at each step of a round; a client silent longer has dropped out.",
          lo=0, lo_open=True),
    Param("deploy.round_timeout", "real", 120.0, "Seconds a server waits for its neighbours' "
          "messages of a round (and the coordinator for a round); then the run stops, naming "
          "the silent party, resumable with `--resume`.", lo=0, lo_open=True),
    Param("deploy.connect_timeout", "real", 60.0, "Seconds the parties have to start and "
          "connect (and a client to reconnect to its server).", lo=0, lo_open=True),
    Param("deploy.max_message_bytes", "int", 64 << 20, "Largest message a party accepts "
          "(gRPC refuses larger ones).", lo=1024),
    Param("deploy.record", "bool", False, "Each party records every payload it sends and "
          "receives (`OUT/transcripts/batch-NNN/NAME.pgflwire`; `pgfl privacy audit "
          "--transcript`)."),
)  # fmt: skip


def _table() -> list[Param]:
    """The settings in reference order; mechanism settings not listed above come last.

    Read again whenever the mechanism registry changes (:func:`pgfl.privacy.mechanisms.version`),
    so a registered mechanism's own settings are part of the table.
    """
    ordered = [
        *TOP,
        *TOPOLOGY_PARAMS,
        *DATA_PARAMS,
        *MODEL,
        *_T.values(),
        *_PRIVACY,
    ]
    listed = {p.name for p in ordered}
    ordered += [p for p in mechanisms.params() if p.name not in listed]
    return [*ordered, *RUN, *_DEPLOY]


#: The table: dotted name → :class:`~pgfl.param.Param`, in the order of the reference
#: (it follows the mechanism registry).
PARAMS: ParamTable = ParamTable(_table, version=mechanisms.version)


def section_params(section: str) -> list[Param]:
    """The settings of one table (``""``: the top level), in reference order."""
    return PARAMS.section(section)


def check(name: str, value: Any, **context: Any) -> Any:
    """Validate ``value`` for setting ``name``; return it normalized (lists → tuples).

    ``context`` gives the values of the settings a bound refers to, by short name when
    unambiguous (``K=100``, ``L=11``, ``secagg_modulus_bits=32``) or by dotted name
    (``**{"data.K": 100}``). Raises :class:`~pgfl.validation.ConfigError` with the
    setting, its allowed range and the value; ``KeyError`` for an unknown name.

    >>> check("privacy.secagg_threshold", 5, L=20, secagg_neighbours=4)  # h = 4 + 1
    5
    """
    return PARAMS.check(name, value, **context)


# -------------------------------------------------------------------------- reference
#: Principles of every configuration, stated in the reference; the rules between
#: settings that code enforces are data beside their checks
#: (:data:`pgfl.experiments.config.CURVE_RULES`, the mechanisms' ``rules_doc``,
#: :data:`pgfl.experiments.loader.EXPERIMENT_RULES`).
GENERAL_RULES = (
    "A setting given where it has no effect (column *only with*) is ignored with a one-line "
    "warning: in a curve, when that curve does not meet the condition; in a shared table, "
    "when no curve does. A value equal to the default never warns.",
    "Unknown keys are rejected everywhere, including inside `[quick]` (with or without `--quick`).",
    "Secure aggregation: `privacy.secagg_threshold` ≤ the neighbourhood size (L, or "
    "`secagg_neighbours + 1` for SecAgg+), and `2^(k−1) > L · rint(secagg_clip · 2^f)` "
    "for k = `secagg_modulus_bits`, f = `secagg_frac_bits` (the settings' ranges above).",
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
    "run": "`[run]`: where the simulation runs, what it keeps (overridden by `--backend` etc.)",
    "deploy": "`[deploy]`: the parties of `pgfl deploy` (docs/deploy.md)",
}


def markdown(rules: tuple[str, ...] = ()) -> str:
    """The experiments' part of the configuration reference (``docs/config.md``).

    ``rules`` are the rules between settings that code enforces, listed after
    :data:`GENERAL_RULES`; the whole reference, with them and the graph-learning settings,
    is :func:`pgfl.commands.config_reference.reference`.
    """
    lines = [
        "An experiment is a TOML file (`pgfl run FILE.toml`) with top-level settings, the",
        "tables below, and a list of `[[curves]]`, each with a unique `label` and any of the",
        "tables `topology`, `data`, `training`, `privacy` overriding the shared ones.",
        "Curves that share everything but the settings marked † run as one vectorized",
        "simulation. Every bad value stops with one line naming the setting, its allowed",
        "range and the value, e.g.",
        "`error: training.L must be an integer in [1, data.K=100]; got 120`.",
        "",
    ]
    lines += PARAMS.markdown(SECTIONS, _TITLES, level="##")
    lines += ["## Rules across settings", ""]
    lines += [f"- {rule}" for rule in (*GENERAL_RULES, *rules)]
    return "\n".join(lines) + "\n"
