"""The memory an experiment needs, from its configuration, before anything is allocated.

:func:`experiment_memory` takes the largest batch of curves of a configuration (batches
run one after the other), estimates its simulation with
:func:`pgfl.resources.simulation_memory`, and adds what the run keeps for every curve
(saved metrics and the rows of ``curves.csv``) and the ε accounting of a privatized curve;
:func:`check_experiment_fits` refuses a configuration that needs more than the machine has
available, in one line naming the setting that makes it large.
"""

from __future__ import annotations

import math
from typing import Any

from pgfl.experiments.config import CurveConfig, ExperimentConfig
from pgfl.models.builtin import model_dim
from pgfl.resources import (
    CSV_ROW_BYTES,
    FLOAT,
    accounting_memory,
    check_fits,
    simulation_memory,
)

__all__ = ["check_experiment_fits", "experiment_memory"]


def _curve_sizes(curve: CurveConfig, cfg: ExperimentConfig, C: int) -> dict[str, Any]:
    """The sizes of :func:`simulation_memory` for a batch of ``C`` curves like ``curve``."""
    d, t = curve.data, curve.training
    high = lambda v: v[1] if isinstance(v, tuple) else v  # noqa: E731
    if d.kind == "classification":
        # the real data's dimension is known only after loading: a lower bound (hashed
        # columns and an intercept), its rows spread evenly over the clients
        P, K = curve.topology.P, d.K
        N = math.ceil((d.rows or 1) / (P * K))
        M = (d.hash_dim or 16) + 1
        test = d.test_size or 256
    elif d.kind == "digits":
        # 1,500 training images spread unequally: a generous bound on the longest client
        P, K = curve.topology.P, d.K
        N = min(1797, 4 * math.ceil(1500 / (P * K)))
        M, test = 64, d.test_size or 297
    else:
        N, M, test = high(d.N), d.M, d.test_size if d.kind == "logistic" else 0
    if curve.model.kind in ("softmax", "mlp", "cnn"):
        classes = 10 if d.kind == "digits" else 2
        m = curve.model
        M = model_dim(m.kind, M, classes, hidden=m.hidden, channels=m.channels)
    return {
        "P": curve.topology.P,
        "K": d.K,
        "N": N,
        "M": M,
        "L": t.L,
        "E": high(t.epochs),
        "B": None if t.batch == "full" else high(t.batch),
        "C": C,
        "R": cfg.repetitions,
        "T": cfg.iterations,
        "test_size": test,
        "covariances": d.kind == "regression",
    }


_SETTINGS = {
    "P": "topology.P",
    "K": "data.K",
    "N": "data.N",
    "M": "data.M",
    "L": "training.L",
    "E": "training.epochs",
    "B": "training.batch",
    "C": "curves in a batch",
    "R": "repetitions",
    "curves": "curves",
    "T": "iterations",
}


def experiment_memory(cfg: ExperimentConfig) -> tuple[dict[str, int], dict[str, Any]]:
    """Estimated peak bytes of running ``cfg`` by term, and the sizes behind them.

    Batches of curves run one after the other, so the largest batch counts; what the run
    keeps for every curve (its metrics and ``curves.csv`` rows) and the ε accounting of
    one privatized curve come on top.
    """
    batches: dict[tuple, list[CurveConfig]] = {}
    for c in cfg.curves:
        batches.setdefault(c.structure(), []).append(c)
    estimates = []
    for curves in batches.values():
        sizes = _curve_sizes(curves[0], cfg, len(curves))
        estimates.append((simulation_memory(**sizes), sizes))
    terms, sizes = max(estimates, key=lambda e: sum(e[0].values()))
    T, curves = cfg.iterations, len(cfg.curves)
    test = 2 + sizes["P"] if sizes["test_size"] else 0
    accountants = [c.privacy.accountants for c in cfg.curves if c.privacy.noisy]
    terms = {
        **terms,
        "results [T, curves]": T * curves * (FLOAT * (3 + test + 6) + CSV_ROW_BYTES),
        "ε accounting [T]": max((accounting_memory(T, a) for a in accountants), default=0),
    }
    return terms, {**sizes, "curves": curves}


def check_experiment_fits(cfg: ExperimentConfig, *, available: int | None = None) -> int:
    """:func:`check_fits` for a whole configuration; the message names the largest size.

    The subject is the setting with the largest value among those the largest term grows
    with (``iterations=10000000000`` for the metrics ``[T, C, R]``).
    """
    terms, sizes = experiment_memory(cfg)
    largest = max(terms, key=terms.__getitem__)
    inside = largest[largest.index("[") + 1 : largest.index("]")]
    symbols = [s.strip().removesuffix("+1") for s in inside.split(",")]
    symbols = [s for s in symbols if s in _SETTINGS] or ["T"]
    culprit = max(symbols, key=lambda s: sizes[s] or 0)
    return check_fits(f"{_SETTINGS[culprit]}={sizes[culprit]}", terms, available=available)
