"""From a recipe — one curve's configuration and the root seed — to what the engine runs.

Everything a curve needs is built from its configuration and the run's root seed, each
draw from a stream named for what it draws (:func:`pgfl.rng.stream`): the combination
matrix (``topology``), the federated data (``data``) and loss or model (``model``), the
clients' schedule (``schedule``). A block of units is built alone with the bits it has in
the whole network (:func:`build_block`), so a Ray actor builds only its own clients' data.
The curve's privacy mechanisms come from the registry (:func:`curve_mechanisms`), and a
``privacy.target_epsilon`` is turned into a noise level here (:func:`curve_settings`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from pgfl.data.datasets import classification_federated_data, real_split
from pgfl.data.digits import CLASSES as DIGIT_CLASSES
from pgfl.data.digits import DEFAULT_TEST_SIZE as DIGITS_TEST_SIZE
from pgfl.data.digits import digits_federated_data
from pgfl.data.federated import DataOutline, FederatedData
from pgfl.data.synthetic import client_schedule, logistic_data, regression_data, sample_counts
from pgfl.engine import CurveSettings, Network
from pgfl.engine.network import UnitBlock
from pgfl.experiments.config import CurveConfig
from pgfl.experiments.privacy import calibrated, check_accountants, with_noise_multiplier
from pgfl.models.builtin import build_model, check_fits, load_custom
from pgfl.privacy import mechanisms
from pgfl.problems import LeastSquares, Logistic, _Problem
from pgfl.rng import stream
from pgfl.topology import (
    build_graph,
    check_combination_matrix,
    combination_matrix,
    graph_from_edges,
)
from pgfl.validation import ConfigError

__all__ = [
    "build_block",
    "build_data",
    "build_matrix",
    "build_mixing",
    "build_network",
    "build_outline",
    "curve_mechanisms",
    "curve_settings",
]


def build_matrix(cfg: CurveConfig, seed: int) -> np.ndarray:
    """The matrix the engine combines a curve's messages with.

    The server mechanism's :meth:`~pgfl.privacy.mechanisms.Mechanism.combination` of the
    topology's matrix (:func:`build_mixing`): the topology's own for most schemes, the
    average ``11ᵀ/P`` with a trusted aggregator (``privacy.server_noise = "central"``),
    the K-step gossip polynomial ``P_K(A)`` for ``"gossip"``.
    """
    return _combination(cfg, build_mixing(cfg, seed))


def _combination(cfg: CurveConfig, mixing: np.ndarray) -> np.ndarray:
    return mechanisms.SERVER[cfg.privacy.server_noise].combination(mixing, cfg.values())


def build_mixing(cfg: CurveConfig, seed: int) -> np.ndarray:
    """The combination matrix A of a curve's topology section (the servers' graph)."""
    t = cfg.topology
    if t.kind == "matrix":
        A = np.asarray(t.matrix, dtype=float)
        if A.shape != (t.P, t.P):
            raise ConfigError(f"topology.matrix must be P x P with P={t.P}; got shape {A.shape}")
        check_combination_matrix(A)
        return A
    if t.kind == "edges":
        graph = graph_from_edges(t.P, t.edges)
    else:
        graph = build_graph(
            t.kind,
            t.P,
            rng=stream(seed, "topology"),
            probability=t.probability,
            radius=t.radius,
            rows=t.rows,
        )
    return combination_matrix(graph, t.weights)


def build_data(
    cfg: CurveConfig, seed: int, units: tuple[int, int] | None = None
) -> tuple[FederatedData, Any]:
    """The federated data set and the problem (loss or ``[model]``) of a curve.

    ``units=(start, stop)``: only those units' clients, the same bits as the rows of the
    whole data set (synthetic data is drawn in order and only the block kept; a data file
    or the digits are read whole and the block copied out).
    """
    data, problem = _build_data(cfg, seed, units)
    m = cfg.model
    if m.kind == "none":
        return data, problem
    check_fits(m.kind, data.shape[-1])
    if cfg.data.kind == "digits":
        classes = DIGIT_CLASSES
    else:  # binary labels ±1 become class indices 0/1
        classes = 2
        y01 = lambda y: None if y is None else (y > 0).astype(np.float64)  # noqa: E731
        data = replace(data, y=y01(data.y), y_test=y01(data.y_test))
    if m.kind == "custom":
        model = load_custom(
            m.source, data.shape[-1], classes, stream(seed, "model"), rho=cfg.training.rho,
            timeout=m.timeout,
        )  # fmt: skip
        model.dim(data.shape[-1])  # a loss that is not a scalar per sample stops here
        return data, model
    model = build_model(
        m.kind,
        data.shape[-1],
        classes,
        stream(seed, "model"),
        rho=cfg.training.rho,
        hidden=m.hidden,
        activation=m.activation,
        channels=m.channels,
    )
    return data, model


def _build_data(
    cfg: CurveConfig, seed: int, units: tuple[int, int] | None
) -> tuple[FederatedData, _Problem | None]:
    d, P = cfg.data, cfg.topology.P
    rng = stream(seed, "data")
    if d.kind == "digits":
        data = digits_federated_data(
            P,
            d.K,
            seed=seed,
            test_size=DIGITS_TEST_SIZE if d.test_size is None else d.test_size,
            label_skew=d.label_skew,
            size_skew=d.size_skew,
        )
        return (data if units is None else data.copy_units(*units)), None
    if d.kind == "regression":
        data = regression_data(
            rng,
            P=P,
            K=d.K,
            N=d.N,
            M=d.M,
            eigenvalues=d.eigenvalues,
            noise_variance=d.noise_variance,
            units=units,
        )
        return data, LeastSquares(cfg.training.rho)
    if d.kind == "logistic":
        data = logistic_data(
            rng,
            P=P,
            K=d.K,
            N=d.N,
            M=d.M,
            feature_variance=d.feature_variance,
            test_size=d.test_size or 0,
            units=units,
        )
    else:
        rows, test_size = real_split(d.source, d.rows, d.test_size)
        data = classification_federated_data(
            d.source,
            P=P,
            K=d.K,
            rows=rows,
            test_size=test_size,
            categorical=d.categorical,
            drop=d.drop,
            hash_dim=d.hash_dim,
            feature_noise=d.feature_noise,
            label_skew=d.label_skew,
            seed=seed,
        )
        if units is not None:
            data = data.copy_units(*units)
    return data, Logistic(cfg.training.rho)


def build_outline(cfg: CurveConfig, seed: int) -> tuple[DataOutline | FederatedData, _Problem]:
    """The data section's sizes and loss without the samples (synthetic data).

    Synthetic data draws its per-client sample counts first, so ``N_max`` needs only those
    ``P × K`` integers; a data file is read to learn its sizes (the data set is returned
    whole).
    """
    d, P = cfg.data, cfg.topology.P
    if d.kind not in ("regression", "logistic") or cfg.model.kind != "none":
        return build_data(cfg, seed)
    counts = sample_counts(stream(seed, "data"), P, d.K, d.N)
    problem = LeastSquares if d.kind == "regression" else Logistic
    return DataOutline((P, d.K, int(counts.max()), d.M), counts=counts), problem(cfg.training.rho)


def _schedule(cfg: CurveConfig, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    t = cfg.training
    E, B = client_schedule(
        stream(seed, "schedule"),
        cfg.topology.P,
        cfg.data.K,
        epochs=t.epochs,
        batch=(1, 1) if t.batch == "full" else t.batch,
    )
    return E, None if t.batch == "full" else B


def build_network(cfg: CurveConfig, seed: int, *, outline: bool = False) -> Network:
    """Everything the curves of one batch share, built from the root seed.

    ``outline``: without the clients' data (:func:`build_outline`): enough to validate,
    plan and account a run whose units are held elsewhere (Ray actors), not to simulate.
    """
    data, problem = (build_outline if outline else build_data)(cfg, seed)
    E, B = _schedule(cfg, seed)
    mixing = build_mixing(cfg, seed)
    A = _combination(cfg, mixing)
    return Network(data, problem, A, cfg.training.L, E, B, mixing=mixing)


def build_block(cfg: CurveConfig, seed: int, start: int, stop: int) -> UnitBlock:
    """The :class:`~pgfl.engine.network.UnitBlock` of units ``start..stop-1``, from the recipe.

    Only those units' clients' data is built (:func:`build_data` with ``units``): the same
    bits as ``build_network(cfg, seed).block(start, stop)`` without the rest of the network.
    """
    data, problem = build_data(cfg, seed, (start, stop))
    E, B = _schedule(cfg, seed)
    return UnitBlock(
        start=start,
        data=data,
        problem=problem,
        L=cfg.training.L,
        epochs=E[start:stop],
        batch=None if B is None else B[start:stop],
        e_max=int(E.max()),
        b_max=1 if B is None else int(B.max()),
    )


def curve_mechanisms(cfg: CurveConfig) -> tuple[Any, Any]:
    """The curve's client- and server-level mechanisms, from the registry's names."""
    values = cfg.values()
    return mechanisms.build("client", values), mechanisms.build("server", values)


def curve_settings(cfg: CurveConfig, iterations: int, net: Network) -> CurveSettings:
    """The engine settings of a curve; a ``privacy.target_epsilon`` sets the noise level.

    The noise of the privatized link (server level if noisy, else client level) is the
    smallest that keeps ε(T) at most the target by the tight accountant
    (:func:`pgfl.experiments.privacy.calibrated`); a ``privacy.*_noise_multiplier`` sets
    its level's noise std to z·Δ₁ (:func:`pgfl.experiments.privacy.with_noise_multiplier`).
    Every level's releases must be composable by the curve's ``privacy.accountants``
    (:func:`pgfl.experiments.privacy.check_accountants`: one line, before anything runs).
    """
    client, server = curve_mechanisms(cfg)
    t, priv = cfg.training, cfg.privacy
    settings = CurveSettings(t.mu, t.share, client, server, t.clip_norm, priv.neighbours)
    for level in ("client", "server"):  # a noise multiplier z: σ = z·Δ (Opacus' convention)
        z = getattr(priv, f"{level}_noise_multiplier")
        if z is not None and getattr(settings, level).calibrates is not None:  # a noisy link
            settings = with_noise_multiplier(settings, net, iterations, level, z)
    if priv.target_epsilon is not None:
        settings = calibrated(
            settings, net, iterations, priv.target_epsilon, priv.delta, adversary=priv.adversary
        )
    check_accountants(settings, net, iterations, priv.accountants)
    return settings
