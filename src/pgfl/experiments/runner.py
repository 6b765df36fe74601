"""Run an experiment: build the network, simulate batched curves, save results, plot.

Curves that share their structure (topology, data, everything in training but the
step size, sharing mode and clipping) run as one vectorized simulation. A run has two
steps: :func:`prepare_experiment` validates everything (output folder, topology, data
files, every curve's settings) without writing anything, then :func:`run_plan` creates
the folder and simulates. After each batch, every curve's per-iteration metrics are
saved in ``<out>/partial/curve-NNN.npz`` with the configuration's fingerprint; an
interrupted run keeps them and ``resume=True`` skips the curves whose file matches
(a stale or unreadable file is recomputed, never deleted up front).

Output files (the contract other tools read):

* ``summary.json``: ``{"experiment", "iterations", "repetitions", "curves": [{"label",
  "centroid_msd_db", "individual_msd_db", "disagreement_db", "diverged", ...}], ...}``,
  where a dB value is ``10 log10`` of the MSD averaged over repetitions and over the last
  10% of iterations (``null`` for a diverged curve);
* ``curves.csv``: one row per curve and iteration with the same metrics (in dB);
* ``figure.png``: plotted from those two files.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from pgfl.backends import Backend, make_backend
from pgfl.data.datasets import classification_federated_data
from pgfl.data.digits import CLASSES as DIGIT_CLASSES
from pgfl.data.digits import DEFAULT_TEST_SIZE as DIGITS_TEST_SIZE
from pgfl.data.digits import digits_federated_data
from pgfl.data.federated import DataOutline, FederatedData
from pgfl.data.synthetic import client_schedule, logistic_data, regression_data, sample_counts
from pgfl.engine import CurveSettings, Network, Trajectory
from pgfl.engine.compiled import local_phase_kind
from pgfl.engine.network import UnitBlock
from pgfl.experiments.config import CurveConfig, ExperimentConfig
from pgfl.experiments.results import _jsonable, read_json, write_atomic, write_csv, write_json
from pgfl.files import FileError, check_output_folder, writing
from pgfl.problems import LeastSquares, Logistic, _Problem
from pgfl.rng import stream
from pgfl.topology import (
    build_graph,
    check_combination_matrix,
    combination_matrix,
    graph_from_edges,
)
from pgfl.validation import ConfigError

#: Fraction of the final iterations averaged into the summary's steady-state values.
STEADY_FRACTION = 0.1


def build_matrix(cfg: CurveConfig, seed: int) -> np.ndarray:
    """The combination matrix of a curve's topology section."""
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
    from pgfl.models.builtin import build_model, check_fits, load_custom

    check_fits(m.kind, data.shape[-1])
    if cfg.data.kind == "digits":
        classes = DIGIT_CLASSES
    else:  # binary labels ±1 become class indices 0/1
        classes = 2
        y01 = lambda y: None if y is None else (y > 0).astype(np.float64)  # noqa: E731
        data = replace(data, y=y01(data.y), y_test=y01(data.y_test))
    if m.kind == "custom":
        model = load_custom(
            m.source, data.shape[-1], classes, stream(seed, "model"), rho=cfg.training.rho
        )
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
            test_size=d.test_size or DIGITS_TEST_SIZE,
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
            test_size=d.test_size,
            units=units,
        )
    else:
        data = classification_federated_data(
            d.source,
            P=P,
            K=d.K,
            rows=d.rows,
            test_size=d.test_size or 256,
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
    N = int(sample_counts(stream(seed, "data"), P, d.K, d.N).max())
    problem = LeastSquares if d.kind == "regression" else Logistic
    return DataOutline((P, d.K, N, d.M)), problem(cfg.training.rho)


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
    return Network(data, problem, build_matrix(cfg, seed), cfg.training.L, E, B)


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


def _db(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 10.0 * np.log10(x)


def curve_metrics(traj: Trajectory, c: int) -> dict[str, np.ndarray]:
    """Repetition-averaged per-iteration metrics of curve ``c`` (MSDs in linear scale)."""
    diverged = traj.diverged_at[c]
    out = {
        "centroid_msd": traj.centroid_msd[:, c].mean(axis=-1),
        "individual_msd": traj.individual_msd[:, c].mean(axis=-1),
        "disagreement": traj.disagreement[:, c].mean(axis=-1),
        "diverged_at": np.array(diverged[diverged >= 0].min() if (diverged >= 0).any() else -1),
    }
    if traj.test_error is not None:
        out["test_error"] = traj.test_error[:, c].mean(axis=-1)
        out["test_log_loss"] = traj.test_log_loss[:, c].mean(axis=-1)
        out["server_test_error"] = traj.server_test_error[:, c].mean(axis=-2)  # [T, P]
        if traj.server_test_loss is not None:
            out["server_test_loss"] = traj.server_test_loss[:, c].mean(axis=-2)  # [T, P]
    return out


def summarize_curve(label: str, m: dict[str, np.ndarray]) -> dict[str, Any]:
    """The ``summary.json`` entry of one curve from its saved metrics."""
    T = m["centroid_msd"].shape[0]
    tail = slice(T - max(1, int(round(STEADY_FRACTION * T))), T)
    diverged_at = int(m["diverged_at"])
    diverged = diverged_at >= 0
    entry: dict[str, Any] = {"label": label}
    for key in ("centroid_msd", "individual_msd", "disagreement"):
        value = float(_db(m[key][tail].mean())) if not diverged else None
        entry[f"{key}_db"] = None if value is not None and math.isnan(value) else value
    entry["diverged"] = diverged
    entry["diverged_at"] = diverged_at if diverged else None
    if "test_error" in m:
        entry["test_error"] = None if diverged else float(m["test_error"][tail].mean())
        entry["test_accuracy"] = None if diverged else 1.0 - entry["test_error"]
        entry["test_log_loss"] = None if diverged else float(m["test_log_loss"][tail].mean())
        entry["server_test_error"] = (
            None if diverged else m["server_test_error"][tail].mean(axis=0).tolist()
        )
        if "server_test_loss" in m:
            entry["server_test_loss"] = (
                None if diverged else m["server_test_loss"][tail].mean(axis=0).tolist()
            )
    if "privacy" in m:
        entry.update(json.loads(str(m["privacy"])))
    return entry


def epsilon_inputs(
    cfg: CurveConfig, settings: CurveSettings, A: np.ndarray, level: str
) -> dict[str, Any] | None:
    """Arguments of the accountant for a curve's ``level`` (``server``/``client``) link.

    ``None`` when that link carries no DP noise. ``clients_per_round`` is the fewest
    clients a unit averages, which bounds how much one client moves the aggregate: L, or
    with secure aggregation its threshold t, since the protocol completes with any
    n ≥ t survivors (dropout); secure aggregation's fixed-point rounding adds its error
    bound 2^-(f+1) (times μ on the models a mean of updates gives) to the server-level
    sensitivities. ``random_per_link`` is accounted for an adversary who sees all of a
    server's outgoing links, its off-diagonal non-zeros (a_pp may be zero).
    """
    priv, training = cfg.privacy, cfg.training
    if level == "server":
        if priv.server_noise == "none":
            return None
        args = {
            "scheme": priv.server_noise,
            "sigma": settings.server_std,
            "distribution": priv.server_distribution,
        }
        if priv.server_noise == "random_per_link":
            sends = (A != 0) & ~np.eye(A.shape[0], dtype=bool)  # m → p where a_pm ≠ 0
            args["observed_links"] = max(1, int(sends.sum(axis=0).max()))
        if settings.client.name == "secure_aggregation":
            secagg = settings.client.config
            scale = training.mu if training.share == "updates" else 1.0
            args["clients_per_round"] = secagg.threshold_for(training.L)
            args["aggregation_error"] = scale * secagg.quantization_bound
    else:
        if priv.client_noise not in ("laplace", "gaussian"):
            return None
        args = {
            "scheme": training.share,
            "sigma": settings.client_std,
            "distribution": priv.client_noise,
        }
    clip = None if math.isinf(training.clip_norm) else training.clip_norm
    return {"clients_per_round": training.L, **args, "mu": training.mu, "clip": clip}


def _primary_level(cfg: CurveConfig) -> str | None:
    """The link a curve's ε and ``target_epsilon`` refer to: the server level if noisy."""
    return {None: None, "client": "client"}.get(cfg.privacy.scheme, "server")


def curve_settings(cfg: CurveConfig, iterations: int, net: Network) -> CurveSettings:
    """The engine settings of a curve; a ``target_epsilon`` is turned into a noise variance.

    The variance of the privatized link (server level if noisy, else client level) is the
    smallest that keeps ε(T) at most the target by the tight accountant
    (:func:`pgfl.privacy.accounting.calibrate`).
    """
    settings = cfg.settings()
    priv = cfg.privacy
    if priv.target_epsilon is None:
        return settings
    level = _primary_level(cfg)
    args = None if level is None else epsilon_inputs(cfg, settings, net.A, level)
    if args is None:
        raise ConfigError(
            "privacy.target_epsilon needs a privatized link (server_noise or client_noise); "
            f"curve {cfg.label!r} has none"
        )
    if args["clip"] is None:
        raise ConfigError(
            "privacy.target_epsilon needs a gradient bound: set training.clip_norm "
            f"(curve {cfg.label!r})"
        )
    from pgfl.privacy.accounting import calibrate  # dp_accounting takes ~1 s to import

    args.pop("sigma")
    sigma = calibrate(priv.target_epsilon, priv.delta, iterations, **args, dim=net.dim)
    field = "server_std" if level == "server" else "client_std"
    return replace(settings, **{field: sigma})


def curve_epsilon(
    cfg: CurveConfig, settings: CurveSettings, iterations: int, net: Network
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """ε(i) per accountant and the ``summary.json`` privacy entry of one curve.

    The entry is for the curve's primary link (server level if it has noise of positive
    variance, else the client level); with noise at both levels, ``epsilon_client`` adds
    the client level's final ε, which is what applies against the client's own server.
    A privatized link with variance 0 reports ε = ∞ and the reason.
    """
    level = _primary_level(cfg)
    args = None if level is None else epsilon_inputs(cfg, settings, net.A, level)
    if args is None:
        return {}, {}
    client = epsilon_inputs(cfg, settings, net.A, "client") if level == "server" else None
    if args["sigma"] == 0 and client is not None and client["sigma"] > 0:
        args, client = client, None  # server-level noise of variance 0 protects nothing
    from pgfl.privacy.accounting import epsilon_curve

    common = {
        "iterations": iterations,
        "delta": cfg.privacy.delta,
        "dim": net.dim,
        "accountants": list(cfg.privacy.accountants),
        "checkpoints": cfg.privacy.epsilon_checkpoints,
    }
    eps = epsilon_curve(**args, **common)  # σ = 0: ε = ∞ with the reason
    entry = eps.summary()
    entry["noise_variance"] = args["sigma"] ** 2
    if client is not None and client["sigma"] > 0:
        entry["epsilon_client"] = epsilon_curve(**client, **common).final()
    return {f"epsilon_{k}": np.asarray(v) for k, v in eps.items()}, entry


def secagg_entry(settings: CurveSettings, traj: Trajectory, c: int, L: int) -> dict[str, Any]:
    """The ``summary.json`` record of a securely aggregated curve, with its abort log."""
    scheme = settings.client
    cfg = scheme.config
    log = [
        f"iteration {i}, repetition {r}, unit {p}: secure aggregation aborted "
        f"(fewer than t={cfg.threshold_for(L)} of L={L} clients survived); "
        "the unit kept its previous model"
        for cc, r, i, p in traj.abort_log
        if cc == c
    ]
    return {
        "protocol": scheme.protocol,
        "threshold": cfg.threshold_for(L),
        "dropout": scheme.dropout,
        "quantization_bound": cfg.quantization_bound,
        "aborted_unit_rounds": int(traj.aborted[c].sum()),
        "clip": cfg.clip,
        "clipped_messages": int(traj.clipped[c].sum()),
        "log": log,
    }


def _partial_path(out: Path, index: int) -> Path:
    return out / "partial" / f"curve-{index:03d}.npz"


def write_partial(path: Path, fingerprint: str, arrays: dict[str, np.ndarray]) -> None:
    """Write a partial-result file atomically (a ``.tmp`` file renamed over the old one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.npz")
    np.savez(tmp, fingerprint=np.array(fingerprint), **arrays)
    tmp.replace(path)


def read_partial(path: Path, fingerprint: str, redo: str) -> dict[str, np.ndarray] | None:
    """The arrays of a partial-result file of this configuration, or None.

    None if the file is absent or was written by another configuration (its stored
    fingerprint differs); an unreadable one (truncated, corrupt, pickled objects) is
    ignored with a :class:`PartialResultWarning` naming it and what happens instead
    (``redo``). Nothing is deleted: the file is replaced when its work is done again.
    """
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            if "fingerprint" not in f.files or str(f["fingerprint"]) != fingerprint:
                return None
            return {k: f[k] for k in f.files if k != "fingerprint"}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        warnings.warn(
            f"{path} is unreadable ({type(exc).__name__}: {exc}); {redo}",
            PartialResultWarning,
            stacklevel=3,
        )
        return None


def _save_partial(
    out: Path, index: int, label: str, fingerprint: str, metrics: dict[str, np.ndarray]
) -> None:
    write_partial(_partial_path(out, index), fingerprint, {"label": np.array(label), **metrics})


def _load_partial(
    out: Path, index: int, label: str, fingerprint: str
) -> dict[str, np.ndarray] | None:
    """The saved metrics of curve ``index``, or None if absent, stale or unreadable.

    A file of another configuration (its stored fingerprint differs) is ignored; an
    unreadable one (truncated, corrupt) is ignored with a warning naming it. Either way
    the curve is recomputed and its file replaced when done.
    """
    path = _partial_path(out, index)
    arrays = read_partial(path, fingerprint, f"recomputing curve {label!r}")
    if arrays is None or str(arrays.pop("label", "")) != label:
        return None
    return arrays


class PartialResultWarning(UserWarning):
    """A saved partial result could not be used and its curve is computed again."""


def saved_curves(cfg: ExperimentConfig, out: str | Path) -> int:
    """How many curves of ``cfg`` have a valid partial result in ``out/partial``."""
    out, fingerprint = Path(out), _config_fingerprint(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PartialResultWarning)
        return sum(
            _load_partial(out, i, c.label, fingerprint) is not None
            for i, c in enumerate(cfg.curves)
        )


def _config_fingerprint(cfg: ExperimentConfig) -> str:
    """What a partial result depends on: the configuration and any user model's code."""
    return json.dumps(
        _jsonable(
            {
                "config": cfg.to_dict(),
                "iterations": cfg.iterations,
                "repetitions": cfg.repetitions,
                "seed": cfg.seed,
                "model_code": _model_code_digests(cfg),
            }
        ),
        sort_keys=True,
    )


def _model_code_digests(cfg: ExperimentConfig) -> dict[str, str]:
    """SHA-256 of each ``model.source`` file, so that editing a user's model is not resumed."""
    out = {}
    for c in cfg.curves:
        if c.model.kind == "custom":
            path = c.model.source.rpartition(":")[0]
            try:
                out[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            except OSError:
                out[path] = "unreadable"
    return out


@dataclass(frozen=True)
class Batch:
    """Curves simulated together: their indices in the config, network and settings."""

    indices: tuple[int, ...]
    net: Network
    settings: tuple[CurveSettings, ...]


@dataclass(frozen=True)
class Plan:
    """A validated experiment ready to run: nothing of it has touched the output folder.

    Attributes:
        cfg: the configuration.
        out: the output folder (checked writable, not yet created).
        fingerprint: the configuration's identity, stored in ``config.json`` and in
            every partial file.
        loaded: metrics of curves resumed from ``out/partial`` (by curve index).
        batches: the curves still to simulate, grouped by shared structure.
        resume: whether a backend may reuse its own partial results in ``out/partial``.

    """

    cfg: ExperimentConfig
    out: Path
    fingerprint: str
    loaded: dict[int, dict[str, np.ndarray]]
    batches: tuple[Batch, ...]
    resume: bool = False


def check_batch(net: Network, settings: tuple[CurveSettings, ...]) -> None:
    """Checks the engine makes when a simulation starts, made before anything is written.

    Graph-homomorphic noise needs self-weights ``a_pp > 0`` (preprint eq. 47); secure
    aggregation needs its modulus and threshold to fit L clients.
    """
    for s in settings:
        s.client.validate(net)
        s.server.validate(net)


def prepare_experiment(cfg: ExperimentConfig, out: str | Path, *, resume: bool = False) -> Plan:
    """Validate everything a run needs, without writing anything.

    Checks the output folder (not a file, not under a file, writable), that ``--resume``
    continues the same configuration, builds every network that still has curves to
    run (topology, data files) and every curve's settings (including the noise a
    ``target_epsilon`` needs); any problem raises :class:`ConfigError` (or its
    :class:`~pgfl.files.FileError`) and leaves ``out`` exactly as it was.

    With ``resume``, a batch is skipped only if every one of its curves has a valid
    partial file; otherwise it runs whole (a curve recomputed with fewer batch mates
    would differ in rounding), so a resumed run gives the bits of an uninterrupted one.
    """
    out = check_output_folder(out)
    fingerprint = _config_fingerprint(cfg)
    config_path = out / "config.json"
    if resume and config_path.is_file():
        try:
            same = json.dumps(read_json(config_path), sort_keys=True) == fingerprint
        except (OSError, ValueError) as exc:
            raise FileError(f"--resume: cannot read {config_path} ({exc})") from exc
        if not same:
            raise ConfigError(
                f"--resume: {config_path} was written by a different configuration; "
                "use a new --out directory or drop --resume"
            )
    loaded: dict[int, dict[str, np.ndarray]] = {}
    if resume:
        for i, c in enumerate(cfg.curves):
            metrics = _load_partial(out, i, c.label, fingerprint)
            if metrics is not None:
                loaded[i] = metrics
    # units held by Ray actors: the driver plans from an outline, never the clients' data
    outline = cfg.run.backend == "ray" and cfg.run.mode == "actors"
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(cfg.curves):
        groups.setdefault(c.structure(), []).append(i)
    batches = []
    for indices in groups.values():
        if all(i in loaded for i in indices):
            continue
        for i in indices:  # a batch runs whole: the same bits as an uninterrupted run
            loaded.pop(i, None)
        net = build_network(cfg.curves[indices[0]], cfg.seed, outline=outline)
        settings = tuple(curve_settings(cfg.curves[i], cfg.iterations, net) for i in indices)
        check_batch(net, settings)
        batches.append(Batch(tuple(indices), net, settings))
    return Plan(cfg, out, fingerprint, loaded, tuple(batches), resume)


def run_plan(
    plan: Plan,
    *,
    on_progress: Callable[[str, int, int], None] | None = None,
    backend: Backend | None = None,
) -> dict[str, Any]:
    """Simulate a prepared experiment, saving each batch in ``out/partial``; write results.

    ``config.json`` is written first; a partial file from an earlier run is replaced only
    when its curve finishes again, so an interrupted rerun never loses results.
    ``backend`` simulates the batches (default: the one the configuration's ``[run]``
    table names, :func:`~pgfl.backends.make_backend`; without it this process); every
    backend gives the same bits. The privacy accounting of the curves (which does not
    depend on the simulation) is computed once the backend has started, so it overlaps
    a backend that works elsewhere (Ray).
    """
    cfg, out = plan.cfg, plan.out
    backend = backend or make_backend(cfg.run)
    start = getattr(backend, "start", None)
    if start is not None and plan.batches:
        start()  # e.g. join a Ray cluster: a bad address fails before anything is written
    with writing(out):
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "config.json", json.loads(plan.fingerprint))
    started = time.perf_counter()
    metrics = dict(plan.loaded)
    iota: dict[str, float] = {}
    progress = None
    if on_progress is not None:

        def progress(batch: Batch, done: int) -> None:
            labels = ", ".join(cfg.curves[i].label for i in batch.indices)
            on_progress(labels, done, cfg.iterations)

    kinds: set[str] = set()
    results = backend.trajectories(plan, progress)
    try:
        accounted = {
            i: curve_epsilon(cfg.curves[i], batch.settings[c], cfg.iterations, batch.net)
            for batch in plan.batches
            for c, i in enumerate(batch.indices)
        }
        for batch, traj in results:
            net, settings = batch.net, batch.settings
            kinds.add(local_phase_kind(net.problem))
            iota[cfg.curves[batch.indices[0]].topology.kind] = net.iota2
            for c, i in enumerate(batch.indices):
                metrics[i] = curve_metrics(traj, c)
                eps, entry = accounted[i]
                metrics[i].update(eps)
                if settings[c].client.name == "secure_aggregation":
                    entry["secure_aggregation"] = secagg_entry(settings[c], traj, c, net.L)
                metrics[i]["privacy"] = np.array(json.dumps(_jsonable(entry)))
                with writing(out):
                    _save_partial(out, i, cfg.curves[i].label, plan.fingerprint, metrics[i])
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()  # an interrupted backend stops its unfinished work
    with writing(out):
        elapsed = time.perf_counter() - started
        engine = {"local_phase": "+".join(sorted(kinds)) or "none (all curves resumed)"}
        return write_results(cfg, out, metrics, elapsed=elapsed, iota2=iota, engine=engine)


def run_experiment(
    cfg: ExperimentConfig,
    out: str | Path,
    *,
    resume: bool = False,
    on_progress: Callable[[str, int, int], None] | None = None,
    backend: Backend | None = None,
) -> dict[str, Any]:
    """Run every curve of ``cfg``, write the results into ``out``, return the summary.

    ``on_progress(batch_labels, done, total)`` is called after every iteration.
    With ``resume``, curves already saved in ``out/partial`` by an earlier run of the
    same configuration are loaded instead of recomputed. Everything is validated
    (:func:`prepare_experiment`) before ``out`` is created or touched. ``backend``
    (default: the configuration's ``[run]`` table) simulates; e.g.
    ``backend=pgfl.backends.ray_sweeps.RaySweeps(workers=2)`` runs on a local Ray.
    """
    plan = prepare_experiment(cfg, out, resume=resume)
    return run_plan(plan, on_progress=on_progress, backend=backend)


def write_results(
    cfg: ExperimentConfig,
    out: Path,
    metrics: dict[int, dict[str, np.ndarray]],
    *,
    elapsed: float,
    iota2: dict[str, float],
    engine: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Write ``summary.json``, ``curves.csv`` and ``figure.png``; return the summary.

    ``engine`` (e.g. ``{"local_phase": "compiled"}``, which local-phase implementation ran)
    goes into the summary and the first line of ``run.log``.
    """
    curves = [summarize_curve(c.label, metrics[i]) for i, c in enumerate(cfg.curves)]
    for entry, c in zip(curves, cfg.curves, strict=True):
        entry["settings"] = {
            "mu": c.training.mu,
            "share": c.training.share,
            "client_noise": c.privacy.client_noise,
            "client_variance": c.privacy.client_variance,
            "server_noise": c.privacy.server_noise,
            "server_variance": c.privacy.server_variance,
        }
        if c.model.kind != "none":
            entry["settings"]["model"] = c.model.kind
        if c.privacy.target_epsilon is not None:
            entry["target_epsilon"] = c.privacy.target_epsilon
    summary = {
        "experiment": cfg.name,
        "title": cfg.title,
        "iterations": cfg.iterations,
        "repetitions": cfg.repetitions,
        "seed": cfg.seed,
        "steady_state": f"mean over the last {STEADY_FRACTION:.0%} of iterations",
        "iota2": iota2,
        "elapsed_s": round(elapsed, 3),
        "plot": list(cfg.plot),
        "curves": curves,
    }
    if engine is not None:
        summary["engine"] = engine
    rows = []
    for i, c in enumerate(cfg.curves):
        m = metrics[i]
        db = {k: _db(m[k]) for k in ("centroid_msd", "individual_msd", "disagreement")}
        for t in range(cfg.iterations):
            row = {
                "label": c.label,
                "iteration": t + 1,
                "centroid_msd_db": db["centroid_msd"][t],
                "individual_msd_db": db["individual_msd"][t],
                "disagreement_db": db["disagreement"][t],
            }
            if "test_error" in m:
                row["test_error"] = m["test_error"][t]
                row["test_log_loss"] = m["test_log_loss"][t]
                row["test_accuracy"] = 1.0 - m["test_error"][t]
                row["server_test_error_mean"] = m["server_test_error"][t].mean()
                if "server_test_loss" in m:
                    row["server_test_loss_mean"] = m["server_test_loss"][t].mean()
            for key in m:
                if key.startswith("epsilon_"):
                    row[key] = m[key][t]
            rows.append(row)
    write_csv(out / "curves.csv", rows)
    log = [f"engine: {k}={v}" for k, v in (engine or {}).items()]
    log += [
        f"{entry['label']}: {line}"
        for entry in curves
        for line in entry.get("secure_aggregation", {}).pop("log", [])
    ]
    if log:
        write_atomic(out / "run.log", "\n".join(log) + "\n")
    write_json(out / "summary.json", summary)
    from pgfl.plots import plot_run

    plot_run(out)
    return summary
