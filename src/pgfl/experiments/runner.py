"""Run an experiment: build the network, simulate batched curves, save results, plot.

Curves that share their structure (topology, data, everything in training but the
step size, sharing mode and clipping) run as one vectorized simulation. After each such
batch, every curve's per-iteration metrics are saved in ``<out>/partial/``; an
interrupted run keeps them and ``resume=True`` skips the curves already there.

Output files (the contract other tools read):

* ``summary.json``: ``{"experiment", "iterations", "repetitions", "curves": [{"label",
  "centroid_msd_db", "individual_msd_db", "disagreement_db", "diverged", ...}], ...}``,
  where a dB value is ``10 log10`` of the MSD averaged over repetitions and over the last
  10% of iterations (``null`` for a diverged curve);
* ``curves.csv``: one row per curve and iteration with the same metrics (in dB);
* ``figure.png``: plotted from those two files.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from pgfl.data.datasets import classification_federated_data
from pgfl.data.federated import FederatedData
from pgfl.data.synthetic import client_schedule, logistic_data, regression_data
from pgfl.engine import CurveSettings, Network, Trajectory, simulate
from pgfl.experiments.config import CurveConfig, ExperimentConfig
from pgfl.experiments.results import _jsonable, read_json, write_atomic, write_csv, write_json
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


def build_data(cfg: CurveConfig, seed: int) -> tuple[FederatedData, _Problem]:
    """The federated data set and loss of a curve's data section."""
    d, P = cfg.data, cfg.topology.P
    rng = stream(seed, "data")
    if d.kind == "regression":
        data = regression_data(
            rng,
            P=P,
            K=d.K,
            N=d.N,
            M=d.M,
            eigenvalues=d.eigenvalues,
            noise_variance=d.noise_variance,
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
    return data, Logistic(cfg.training.rho)


def build_network(cfg: CurveConfig, seed: int) -> Network:
    """Everything the curves of one batch share, built from the root seed."""
    data, problem = build_data(cfg, seed)
    P, K = cfg.topology.P, cfg.data.K
    t = cfg.training
    E, B = client_schedule(
        stream(seed, "schedule"),
        P,
        K,
        epochs=t.epochs,
        batch=(1, 1) if t.batch == "full" else t.batch,
    )
    return Network(data, problem, build_matrix(cfg, seed), t.L, E, None if t.batch == "full" else B)


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
        entry[f"{key}_db"] = value
    entry["diverged"] = diverged
    entry["diverged_at"] = diverged_at if diverged else None
    if "test_error" in m:
        entry["test_error"] = None if diverged else float(m["test_error"][tail].mean())
        entry["test_log_loss"] = None if diverged else float(m["test_log_loss"][tail].mean())
        entry["server_test_error"] = (
            None if diverged else m["server_test_error"][tail].mean(axis=0).tolist()
        )
    if "privacy" in m:
        entry.update(json.loads(str(m["privacy"])))
    return entry


def _epsilon_inputs(
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
        if settings.client_noise == "secure_aggregation":
            secagg = settings.secagg
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
    args = None if level is None else _epsilon_inputs(cfg, settings, net.A, level)
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
    sigma = calibrate(priv.target_epsilon, priv.delta, iterations, **args, dim=net.data.shape[-1])
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
    args = None if level is None else _epsilon_inputs(cfg, settings, net.A, level)
    if args is None:
        return {}, {}
    client = _epsilon_inputs(cfg, settings, net.A, "client") if level == "server" else None
    if args["sigma"] == 0 and client is not None and client["sigma"] > 0:
        args, client = client, None  # server-level noise of variance 0 protects nothing
    from pgfl.privacy.accounting import epsilon_curve

    common = {
        "iterations": iterations,
        "delta": cfg.privacy.delta,
        "dim": net.data.shape[-1],
        "accountants": list(cfg.privacy.accountants),
    }
    eps = epsilon_curve(**args, **common)  # σ = 0: ε = ∞ with the reason
    entry = eps.summary()
    entry["noise_variance"] = args["sigma"] ** 2
    if client is not None and client["sigma"] > 0:
        entry["epsilon_client"] = epsilon_curve(**client, **common).final()
    return {f"epsilon_{k}": np.asarray(v) for k, v in eps.items()}, entry


def secagg_entry(settings: CurveSettings, traj: Trajectory, c: int, L: int) -> dict[str, Any]:
    """The ``summary.json`` record of a securely aggregated curve, with its abort log."""
    cfg = settings.secagg
    log = [
        f"iteration {i}, repetition {r}, unit {p}: secure aggregation aborted "
        f"(fewer than t={cfg.threshold_for(L)} of L={L} clients survived); "
        "the unit kept its previous model"
        for cc, r, i, p in traj.abort_log
        if cc == c
    ]
    return {
        "protocol": settings.secagg_protocol,
        "threshold": cfg.threshold_for(L),
        "dropout": settings.dropout,
        "quantization_bound": cfg.quantization_bound,
        "aborted_unit_rounds": int(traj.aborted[c]),
        "log": log,
    }


def _partial_path(out: Path, index: int) -> Path:
    return out / "partial" / f"curve-{index:03d}.npz"


def _save_partial(out: Path, index: int, label: str, metrics: dict[str, np.ndarray]) -> None:
    path = _partial_path(out, index)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.npz")
    np.savez(tmp, label=np.array(label), **metrics)
    tmp.replace(path)


def _load_partial(out: Path, index: int, label: str) -> dict[str, np.ndarray] | None:
    path = _partial_path(out, index)
    if not path.is_file():
        return None
    with np.load(path) as f:
        if str(f["label"]) != label:
            return None
        return {k: f[k] for k in f.files if k != "label"}


def _config_fingerprint(cfg: ExperimentConfig) -> str:
    return json.dumps(
        _jsonable(
            {
                "config": cfg.to_dict(),
                "iterations": cfg.iterations,
                "repetitions": cfg.repetitions,
                "seed": cfg.seed,
            }
        ),
        sort_keys=True,
    )


def run_experiment(
    cfg: ExperimentConfig,
    out: str | Path,
    *,
    resume: bool = False,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Run every curve of ``cfg``, write the results into ``out``, return the summary.

    ``on_progress(batch_labels, done, total)`` is called after every iteration.
    With ``resume``, curves already saved in ``out/partial`` by an earlier run of the
    same configuration are loaded instead of recomputed.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fingerprint = _config_fingerprint(cfg)
    config_path = out / "config.json"
    if resume and config_path.is_file():
        if json.dumps(read_json(config_path), sort_keys=True) != fingerprint:
            raise ConfigError(
                f"--resume: {config_path} was written by a different configuration; "
                "use a new --out directory or drop --resume"
            )
    elif not resume:
        for stale in (out / "partial").glob("curve-*.npz"):
            stale.unlink()
    write_json(config_path, json.loads(fingerprint))

    started = time.perf_counter()
    metrics: dict[int, dict[str, np.ndarray]] = {}
    if resume:
        for i, c in enumerate(cfg.curves):
            loaded = _load_partial(out, i, c.label)
            if loaded is not None:
                metrics[i] = loaded
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(cfg.curves):
        if i not in metrics:
            groups.setdefault(c.structure(), []).append(i)
    iota: dict[str, float] = {}
    for indices in groups.values():
        first = cfg.curves[indices[0]]
        net = build_network(first, cfg.seed)
        iota[first.topology.kind] = net.iota2
        labels = ", ".join(cfg.curves[i].label for i in indices)
        progress = None
        if on_progress is not None:

            def progress(done: int, labels: str = labels) -> None:
                on_progress(labels, done, cfg.iterations)

        settings = [curve_settings(cfg.curves[i], cfg.iterations, net) for i in indices]
        traj = simulate(
            net,
            settings,
            iterations=cfg.iterations,
            repetitions=cfg.repetitions,
            seed=cfg.seed,
            progress=progress,
        )
        for c, i in enumerate(indices):
            metrics[i] = curve_metrics(traj, c)
            eps, entry = curve_epsilon(cfg.curves[i], settings[c], cfg.iterations, net)
            metrics[i].update(eps)
            if settings[c].client_noise == "secure_aggregation":
                entry["secure_aggregation"] = secagg_entry(settings[c], traj, c, net.L)
            metrics[i]["privacy"] = np.array(json.dumps(_jsonable(entry)))
            _save_partial(out, i, cfg.curves[i].label, metrics[i])
    return write_results(cfg, out, metrics, elapsed=time.perf_counter() - started, iota2=iota)


def write_results(
    cfg: ExperimentConfig,
    out: Path,
    metrics: dict[int, dict[str, np.ndarray]],
    *,
    elapsed: float,
    iota2: dict[str, float],
) -> dict[str, Any]:
    """Write ``summary.json``, ``curves.csv`` and ``figure.png``; return the summary."""
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
                row["server_test_error_mean"] = m["server_test_error"][t].mean()
            for key in m:
                if key.startswith("epsilon_"):
                    row[key] = m[key][t]
            rows.append(row)
    write_csv(out / "curves.csv", rows)
    log = [
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
