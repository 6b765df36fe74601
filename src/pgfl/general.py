"""Settings no single concept owns: top level, [quick], [model], training's μ, L, ..., [run].

The top-level settings, ``[quick]``, ``[model]``, training's μ, L, sharing and clipping,
and ``[run]`` are declared here, below every concept's module, so that the command line
checks an option that mirrors one of them (``--seed``, ``--backend``, ``--workers``)
without importing the whole table: :data:`pgfl.params.PARAMS` imports the privacy
mechanisms, and with them ``dp_accounting`` and scipy (about a second of CPU).
:data:`PARAMS` here holds only these settings; :data:`pgfl.params.PARAMS` collects them
with every other one, in reference order, so each range still lives in one place.

>>> PARAMS.check("seed", 3)
3
>>> PARAMS["run.backend"].check("ray")
'ray'
"""

from __future__ import annotations

import math

from pgfl.param import Param, ParamTable, When, folder_name, kind_is, ref

__all__ = [
    "ACTIVATIONS",
    "BACKENDS",
    "FIGURES",
    "METRICS",
    "MODEL",
    "MODEL_KINDS",
    "PARAMS",
    "RAY_MODES",
    "RUN",
    "SHARE",
    "TEST_METRICS",
    "TOP",
    "TRAINING",
]

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
#: What ``figure.png`` shows (``figure``): the curves per iteration, their steady states, or
#: their steady states against the population P·K.
FIGURES = ("iterations", "steady", "population")
BACKENDS = ("local", "ray")
RAY_MODES = ("tasks", "actors")

RAY = When('run.backend = "ray"', lambda c: c["run.backend"] == "ray")
ACTORS = When('run.backend = "ray" and run.mode = "actors"',
              lambda c: c["run.backend"] == "ray" and c["run.mode"] == "actors")  # fmt: skip

TOP = (
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
    Param("figure", "choice", "iterations", "What `figure.png` shows: `iterations`, each "
          "metric per iteration, a line per curve; `steady`, every curve's steady state as a "
          "dot, curves grouped by scheme side by side with their values (the per-iteration "
          "curves then in `iterations.png`); `population`, every curve's steady state against "
          "its number of clients P·K, a line per scheme (curves differ in `topology.P` or "
          "`data.K`; the per-iteration curves in `iterations.png`).", choices=FIGURES),
    Param("usable_db", "real", None, "The level (dB) of the first plotted metric at or below "
          "which a model counts as usable: a dotted line in `figure = \"population\"`'s "
          "figure, and `usable_db` in `summary.json`.", applies=When('figure = "population"',
          lambda c: c["figure"] == "population")),
    # [quick]: the --quick variant
    Param("quick.iterations", "int", None, "Iterations with `--quick` (unset: `iterations`).",
          lo=1),
    Param("quick.repetitions", "int", None, "Repetitions with `--quick` (unset: "
          "`repetitions`).", lo=1),
    Param("quick.curves", "strings", None, "Labels of the curves `--quick` runs, in the "
          "file's order (unset: every curve).", nonempty=True),
)  # fmt: skip

MODEL = (
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

TRAINING = (
    Param("training.mu", "real", 0.7, "Step size μ; a client's SGD step is μ/E_pk (eq. 3).",
          lo=0, lo_open=True, batched=True),
    Param("training.L", "int", 11, "Clients sampled per unit and iteration.", lo=1,
          hi_ref=ref("data.K")),
    Param("training.share", "choice", "models", "What clients share: models, or averaged "
          "updates (journal §3.4, eqs. 54-55).", choices=SHARE, batched=True),
    Param("training.clip_norm", "real", math.inf, "Per-sample gradient clipping norm B "
          "(`inf`: none); bounds ε.", lo=0, lo_open=True, inf_ok=True, batched=True),
)  # fmt: skip
RUN = (
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


#: The settings declared here (the whole table: :data:`pgfl.params.PARAMS`).
PARAMS = ParamTable([*TOP, *MODEL, *TRAINING, *RUN])
