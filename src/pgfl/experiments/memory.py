"""The memory an experiment needs, from its configuration, before anything is allocated.

:func:`experiment_memory` takes the largest batch of curves of a configuration (batches
run one after the other), estimates its simulation with
:func:`pgfl.resources.simulation_memory`, and adds what the run keeps for every curve
(saved metrics and the rows of ``curves.csv``) and the ε accounting of a privatized curve.
Real data (``data.kind = "classification"``) is sized from its file without loading it
(:func:`pgfl.data.datasets.outline_source`: the header, the first rows, the size), and
its loading (:func:`pgfl.resources.loading_memory`) counts when it exceeds the data term;
:func:`check_experiment_fits` refuses a configuration that needs more than the machine has
available, in one line naming the setting that makes it large.
"""

from __future__ import annotations

import math
from typing import Any

from pgfl.data.datasets import PAPER_TEST, federated_counts, outline_source, split_sizes
from pgfl.data.digits import DEFAULT_TEST_SIZE as DIGITS_TEST_SIZE
from pgfl.experiments.config import CurveConfig, ExperimentConfig
from pgfl.models.builtin import model_dim
from pgfl.resources import (
    CSV_ROW_BYTES,
    FLOAT,
    accounting_memory,
    check_fits,
    loading_memory,
    simulation_memory,
)
from pgfl.validation import ConfigError

__all__ = ["check_experiment_fits", "experiment_memory"]


def _real_data(curve: CurveConfig, seed: int) -> tuple[int, int, int, dict[str, int]]:
    """``N``, ``M``, the test rows and the loading's sizes of real tabular data.

    ``N`` is the largest client, ``M`` counts the intercept; all from the file's header,
    first rows and size. The training rows (``data.rows``, or the file's rows less the
    test set when unset) are spread as the loader will: the clients' sizes are drawn
    from the seed (:func:`~pgfl.data.datasets.federated_counts`). An unreadable source
    (the loader will say why) gives a lower bound: hashed columns and an intercept, rows
    spread evenly.
    """
    d, P = curve.data, curve.topology.P
    o = outline_source(d.source, d.hash_dim)
    if o is None:
        test = PAPER_TEST if d.test_size is None else d.test_size
        return math.ceil((d.rows or 1) / (P * d.K)), (d.hash_dim or 16) + 1, test, {}
    rows, test = split_sizes(o.rows, d.rows, d.test_size)  # the loader's rule
    train = max(1, min(rows, o.rows - test))
    try:
        N = int(federated_counts(train, P=P, K=d.K, seed=seed).max())
    except ConfigError:  # too few rows for the clients: the loader says so
        N = math.ceil(train / (P * d.K))
    M = o.dim + 1
    loading = loading_memory(
        rows=o.rows, columns=o.columns, text_bytes=o.text_bytes, train=train, test=test,
        M=M, categorical=o.categorical, P=P, K=d.K, N=N,
    )  # fmt: skip
    return N, M, test, {"loading": loading, "rows": o.rows, "columns": o.columns}


def _curve_sizes(
    curve: CurveConfig, cfg: ExperimentConfig, C: int
) -> tuple[dict[str, Any], dict[str, int]]:
    """The sizes of :func:`simulation_memory` for a batch of ``C`` curves like ``curve``.

    Also those of loading its real data (empty for synthetic data).
    """
    d, t = curve.data, curve.training
    high = lambda v: v[1] if isinstance(v, tuple) else v  # noqa: E731
    loading: dict[str, int] = {}
    if d.kind == "classification":
        N, M, test, loading = _real_data(curve, cfg.seed)
    elif d.kind == "digits":
        # 1,500 training images spread unequally: a generous bound on the longest client
        P, K = curve.topology.P, d.K
        N = min(1797, 4 * math.ceil(1500 / (P * K)))
        M, test = 64, DIGITS_TEST_SIZE if d.test_size is None else d.test_size
    else:
        N, M, test = high(d.N), d.M, (d.test_size or 0) if d.kind == "logistic" else 0
    if curve.model.kind in ("softmax", "mlp", "cnn"):
        classes = 10 if d.kind == "digits" else 2
        m = curve.model
        M = model_dim(m.kind, M, classes, hidden=m.hidden, channels=m.channels)
    sizes = {
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
    return sizes, loading


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
    "rows": "rows of data.source",
    "columns": "columns of data.source",
}
#: The sizes of real data are not settings: what they come from.
_REAL_DATA = {"N": "samples of the largest client", "M": "features of data.source"}
_DATA = "data [P, K, N, M+1]"
_LOADING = "loading data.source [rows, columns]"


def experiment_memory(cfg: ExperimentConfig) -> tuple[dict[str, int], dict[str, Any]]:
    """Estimated peak bytes of running ``cfg`` by term, and the sizes behind them.

    Batches of curves run one after the other, so the largest batch counts; what the run
    keeps for every curve (its metrics and ``curves.csv`` rows) and the ε accounting of
    one privatized curve come on top. Real data is sized from its file (header, first
    rows, size) and counts by the larger of its loading
    (:func:`~pgfl.resources.loading_memory`) and its data term.
    """
    batches: dict[tuple, list[CurveConfig]] = {}
    for c in cfg.curves:
        batches.setdefault(c.structure(), []).append(c)
    estimates = []
    for curves in batches.values():
        sizes, loading = _curve_sizes(curves[0], cfg, len(curves))
        terms = simulation_memory(**sizes)
        if loading.get("loading", 0) > terms[_DATA]:
            # read, encoded and spread before the run: the larger of the two phases
            del terms[_DATA]
            terms[_LOADING] = loading["loading"]
        estimates.append((terms, {**sizes, **loading}))
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
    names = {**_SETTINGS, **(_REAL_DATA if "loading" in sizes else {})}
    return check_fits(f"{names[culprit]}={sizes[culprit]}", terms, available=available)
