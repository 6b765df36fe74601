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

import math
from collections.abc import Mapping
from typing import Any

from pgfl.data.params import DATA_KINDS
from pgfl.data.params import PARAMS as DATA_PARAMS
from pgfl.data.synthetic import SCHEDULE_PARAMS
from pgfl.param import Param, ParamTable, When, folder_name, kind_is, ref
from pgfl.privacy import mechanisms
from pgfl.privacy.accounting.accountants import ACCOUNTANTS
from pgfl.privacy.mechanisms.base import ADVERSARIES, NEIGHBOURS
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
    "DP_NOISE",
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
    "dp_link",
    "markdown",
    "section_params",
]

#: Client noise that is differentially private (the client-level mechanisms with an ε).
DP_NOISE = (*DISTRIBUTIONS, "distributed_gaussian", "skellam")
SHARE = ("models", "updates")
MODEL_KINDS = ("none", "softmax", "mlp", "cnn", "custom")
ACTIVATIONS = ("relu", "tanh", "sigmoid", "elu")
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
SECTIONS = ("", "quick", "topology", "data", "model", "training", "privacy", "run", "deploy")
BACKENDS = ("local", "ray")
RAY_MODES = ("tasks", "actors")


def dp_link(c: Mapping[str, Any]) -> bool:
    """Whether a curve's settings (dotted names) put DP noise on some link (an ε to report)."""
    return c["privacy.server_noise"] != "none" or c["privacy.client_noise"] in DP_NOISE


#: Where the accounting settings have an effect: some link carries DP noise.
DP_LINK = When(
    'privacy.server_noise other than "none" or privacy.client_noise = "laplace"/"gaussian"/'
    '"distributed_gaussian"/"skellam"',
    dp_link,
)
RAY = When('run.backend = "ray"', lambda c: c["run.backend"] == "ray")
ACTORS = When('run.backend = "ray" and run.mode = "actors"',
              lambda c: c["run.backend"] == "ray" and c["run.mode"] == "actors")  # fmt: skip

_TOP = (
    Param("name", "string", "experiment", "Experiment name; the default output folder is "
          "`runs/NAME`.", checker=folder_name,
          allowed_doc="a folder name: non-empty, without '/' '\\\\', not '.' or '..'"),
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
)  # fmt: skip

_MODEL = (
    Param("model.kind", "choice", "none", "`none`: the loss of data.kind (least squares or "
          "logistic, closed form); `softmax`, `mlp` or `cnn` (8×8 images): multi-class "
          "models through JAX (extra `pgfl[jax]`; docs/models.md); `custom`: your JAX "
          "model from `model.source`.", choices=MODEL_KINDS),
    Param("model.source", "string", None, "`FILE.py:FUNCTION`: your JAX model, FILE "
          "relative to the configuration file's folder; `FUNCTION(features, classes, rng)` "
          "returns `(loss, params, predict)`. What the file must define, shapes and when "
          "pgfl calls what: docs/models.md, \"A model in a configuration\".", nonempty=True,
          applies=kind_is("model", "custom"), required=True),
    Param("model.hidden", "ints", (64,), "Widths of the MLP's hidden layers.", lo=1,
          applies=kind_is("model", "mlp")),
    Param("model.activation", "choice", "relu", "Activation of the hidden layers.",
          choices=ACTIVATIONS, applies=kind_is("model", "mlp", "cnn")),
    Param("model.channels", "int", 8, "Filters of the CNN's 3×3 convolution.", lo=1,
          applies=kind_is("model", "cnn")),
    Param("model.timeout", "real", 300.0, "Seconds the code of `model.source` may run on "
          "its first call (the file's import, `FUNCTION`, the first trace of `loss` and "
          "`predict`) before pgfl stops it as hung and names the line it was running.",
          lo=0, lo_open=True, applies=kind_is("model", "custom")),
)  # fmt: skip

_TRAINING = (
    Param("training.mu", "real", 0.7, "Step size μ; a client's SGD step is μ/E_pk (eq. 3).",
          lo=0, lo_open=True, batched=True),
    Param("training.L", "int", 11, "Clients sampled per unit and iteration.", lo=1,
          hi_ref=ref("data.K")),
    Param("training.share", "choice", "models", "What clients share: models, or averaged "
          "updates (journal §3.4, eqs. 54-55).", choices=SHARE, batched=True),
    Param("training.clip_norm", "real", math.inf, "Per-sample gradient clipping norm B "
          "(`inf`: none); bounds ε.", lo=0, lo_open=True, inf_ok=True, batched=True),
)  # fmt: skip
_T = {p.name: p for p in (RHO, *_TRAINING[:2], *SCHEDULE_PARAMS, *_TRAINING[2:])}

_PRIVACY = (
    Param("privacy.client_noise", "choice", "none", "Client→server link: DP noise on what a "
          "client shares, or secure aggregation.", choices=lambda: mechanisms.names("client"),
          batched=True),
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
    Param("privacy.target_epsilon", "real", None, "ε after T iterations: calibrates the "
          "variance of the privatized link (needs training.clip_norm).", lo=0, lo_open=True,
          batched=True, applies=DP_LINK),
    Param("privacy.delta", "real", 1e-5, "δ of (ε, δ)-DP.", lo=0, hi=1, lo_open=True,
          hi_open=True, batched=True, applies=DP_LINK),
    Param("privacy.neighbours", "choice", "client", "Neighbouring data sets of every ε: "
          "`client` (one client's whole data replaced, the papers') or `record` (one sample; "
          "smaller only for one full-batch step per round, `training.batch = \"full\"`, "
          "`training.epochs = 1`).", choices=tuple(NEIGHBOURS), batched=True),
    Param("privacy.adversary", "choice", None, "The adversary a `target_epsilon` is "
          "calibrated against, with amplification by client sampling where it holds (unset: "
          "the privatized link's own ε, as the papers). See docs/privacy.md.",
          choices=tuple(ADVERSARIES), batched=True,
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

_RUN = (
    # [run]: where the simulation runs (not part of the results: a run resumes on any backend)
    Param("run.backend", "choice", "local", "`local`: this process (the single-process "
          "engine); `ray`: a Ray cluster, same bits (docs/ray.md).", choices=BACKENDS),
    Param("run.address", "string", None, "Address of a running Ray cluster to join "
          "(`ray start --head` prints it; `\"auto\"`: the one running on this machine or "
          "`RAY_ADDRESS`; unset: start a new local Ray, whatever else runs).",
          nonempty=True, applies=RAY),
    Param("run.workers", "int", None, "CPUs of the local Ray started without "
          "`run.address` (unset: every CPU of the machine).", lo=1,
          applies=When('run.backend = "ray" without run.address',
                       lambda c: c["run.backend"] == "ray" and c["run.address"] is None)),
    Param("run.mode", "choice", "tasks", "`tasks`: curves × repetition blocks as Ray tasks "
          "(sweeps); `actors`: one network's units held by Ray actors.", choices=RAY_MODES,
          applies=RAY),
    Param("run.actors", "int", None, "Ray actors holding blocks of units (unset: one per "
          "CPU of the cluster, at most P).", lo=1, applies=ACTORS),
    Param("run.checkpoint_every", "int", 16, "Rounds between checkpoints of each actor's "
          "block state (a restarted actor replays from the last one).", lo=1,
          applies=ACTORS),
    Param("run.keep_partial", "bool", False, "Keep `OUT/partial/` (each curve's saved "
          "metrics, Ray's task files) after the run finishes; an interrupted run always "
          "keeps it for `--resume` (the CLI's `--keep-partial`)."),
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


def _table() -> ParamTable:
    """The settings in reference order; mechanism settings not listed above come last."""
    ordered = [
        *_TOP,
        *TOPOLOGY_PARAMS,
        *DATA_PARAMS,
        *_MODEL,
        *_T.values(),
        *_PRIVACY,
    ]
    listed = {p.name for p in ordered}
    ordered += [p for p in mechanisms.params() if p.name not in listed]
    return ParamTable([*ordered, *_RUN, *_DEPLOY])


#: The table: dotted name → :class:`~pgfl.param.Param`, in the order of the reference.
PARAMS: ParamTable = _table()


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
