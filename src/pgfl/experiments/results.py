"""A run's results as data: ``summary.json`` and ``curves.csv``, then the figures.

Output files (the contract other tools read):

* ``summary.json``: ``{"experiment", "iterations", "repetitions", "warnings", "curves":
  [{"label", "centroid_msd_db", "individual_msd_db", "disagreement_db", "diverged",
  "diverged_repetitions", "finite_repetitions", ...}], ...}``, where a dB value is
  ``10 log10`` of the MSD averaged over the repetitions that stayed finite
  (``finite_repetitions`` of them) and over the last 10% of iterations (``null`` when
  every repetition diverged). ``"diverged": true`` when fewer than half the repetitions
  stayed finite: a value then comes from the few that did, and ``warnings`` (a list of
  one-line strings at the top of the summary) says so. A curve with graph-homomorphic
  noise on a non-linear loss also has ``centroid_bias_db``, the floor its centroid MSD
  levels off at (:func:`pgfl.engine.floor.centroid_bias`; absent where it is zero, as for
  least squares);
* ``curves.csv``: one row per curve and iteration with the same metrics (in dB);
* ``figure.png`` (and ``sweep.png`` for a sweep): plotted from those two files
  (:func:`pgfl.plots.plot_run`).

Files are written atomically (:mod:`pgfl.files`), so an interrupted run never leaves a
half-written result behind.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from pgfl.engine import Trajectory
from pgfl.experiments.config import ExperimentConfig
from pgfl.files import write_atomic, write_csv, write_json
from pgfl.plots import plot_run
from pgfl.privacy import mechanisms
from pgfl.style import scheme_of

__all__ = [
    "STEADY_FRACTION",
    "curve_metrics",
    "divergence_warnings",
    "round_lines",
    "summarize_curve",
    "write_results",
]

#: Fraction of the final iterations averaged into the summary's steady-state values.
STEADY_FRACTION = 0.1


def _db(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 10.0 * np.log10(x)


def curve_metrics(traj: Trajectory, c: int) -> dict[str, np.ndarray]:
    """Repetition-averaged per-iteration metrics of curve ``c`` (MSDs in linear scale).

    Repetitions that diverged (frozen at NaN by the engine) are left out of the averages
    while at least one repetition stayed finite; ``diverged_repetitions`` counts them and
    ``diverged_at`` is the first iteration at which one diverged (``-1``: none did).
    """
    diverged = traj.diverged_at[c]
    bad = diverged >= 0
    keep = None if bad.all() or not bad.any() else np.flatnonzero(~bad)

    def avg(a: np.ndarray, axis: int = -1) -> np.ndarray:
        """Mean over the repetitions (every one: the bits of a run without divergence)."""
        return (a if keep is None else np.take(a, keep, axis=axis)).mean(axis=axis)

    out = {
        "centroid_msd": avg(traj.centroid_msd[:, c]),
        "individual_msd": avg(traj.individual_msd[:, c]),
        "disagreement": avg(traj.disagreement[:, c]),
        "diverged_at": np.array(diverged[bad].min() if bad.any() else -1),
        "diverged_repetitions": np.array([int(bad.sum()), bad.size]),
    }
    if traj.test_error is not None:
        out["test_error"] = avg(traj.test_error[:, c])
        out["test_log_loss"] = avg(traj.test_log_loss[:, c])
        out["server_test_error"] = avg(traj.server_test_error[:, c], -2)  # [T, P]
        if traj.server_test_loss is not None:
            out["server_test_loss"] = avg(traj.server_test_loss[:, c], -2)  # [T, P]
    return out


#: Metrics of ``run.log``'s round lines: what ``curves.csv`` holds under each name.
_LOGGED = {
    "centroid_msd_db": ("centroid_msd", True),
    "individual_msd_db": ("individual_msd", True),
    "disagreement_db": ("disagreement", True),
    "test_error": ("test_error", False),
    "test_accuracy": ("test_error", False),
    "test_log_loss": ("test_log_loss", False),
}


def round_lines(
    T: int, names: list[str], curves: list[tuple[str, dict[str, np.ndarray]]]
) -> list[str]:
    """``run.log``'s line for every round: each metric of ``names``, every curve's value.

    ``curves``: ``(label, saved metrics)``. One line per round, as a federated-learning
    framework logs its rounds: ``round 17/1000: centroid_msd_db none=-12.31 iid=-3.10 |
    test_error none=0.0990 iid=0.1030`` (dB to 2 decimals, test metrics to 4; a metric a
    curve lacks, e.g. a neural network's MSD, is left out).

    >>> m = {"centroid_msd": np.array([1.0, 0.1]), "individual_msd": np.array([2.0, 0.2])}
    >>> round_lines(2, ["centroid_msd_db"], [("a", m)])
    ['round 1/2: centroid_msd_db a=0.00', 'round 2/2: centroid_msd_db a=-10.00']
    """
    columns = []
    for name in names:
        key, db = _LOGGED.get(name, (None, False))
        values = []
        for label, m in curves:
            if key not in m or not np.isfinite(m[key]).any():
                continue
            v = _db(m[key]) if db else (1.0 - m[key] if name == "test_accuracy" else m[key])
            values.append((label, v, "{:.2f}" if db else "{:.4f}"))
        if values:
            columns.append((name, values))
    return [
        f"round {t + 1}/{T}: "
        + " | ".join(
            f"{name} " + " ".join(f"{label}={fmt.format(v[t])}" for label, v, fmt in values)
            for name, values in columns
        )
        for t in range(T)
    ] if columns else []  # fmt: skip


def summarize_curve(label: str, m: dict[str, np.ndarray]) -> dict[str, Any]:
    """The ``summary.json`` entry of one curve from its saved metrics.

    ``diverged`` is true when fewer than half the repetitions stayed finite; the values
    are the mean over the ``finite_repetitions`` that did (``null`` when none did).
    """
    T = m["centroid_msd"].shape[0]
    tail = slice(T - max(1, int(round(STEADY_FRACTION * T))), T)
    diverged_at = int(m["diverged_at"])
    count, reps = (int(x) for x in m.get("diverged_repetitions", (diverged_at >= 0, 1)))
    finite = reps - count
    none_left = finite == 0  # every repetition diverged: no finite value to report
    entry: dict[str, Any] = {"label": label}
    for key in ("centroid_msd", "individual_msd", "disagreement"):
        value = float(_db(m[key][tail].mean())) if not none_left else None
        entry[f"{key}_db"] = None if value is not None and math.isnan(value) else value
    if "centroid_bias" in m and m["centroid_bias"] > 0:  # the noise-smoothed optimum's offset
        entry["centroid_bias_db"] = float(_db(m["centroid_bias"]))
    entry["diverged"] = 2 * finite < reps  # fewer than half stayed finite
    entry["diverged_at"] = diverged_at if count else None
    entry["diverged_repetitions"] = count
    entry["finite_repetitions"] = finite
    if "test_error" in m:
        entry["test_error"] = None if none_left else float(m["test_error"][tail].mean())
        entry["test_accuracy"] = None if none_left else 1.0 - entry["test_error"]
        entry["test_log_loss"] = None if none_left else float(m["test_log_loss"][tail].mean())
        entry["server_test_error"] = (
            None if none_left else m["server_test_error"][tail].mean(axis=0).tolist()
        )
        if "server_test_loss" in m:
            entry["server_test_loss"] = (
                None if none_left else m["server_test_loss"][tail].mean(axis=0).tolist()
            )
    if "privacy" in m:
        entry.update(json.loads(str(m["privacy"])))
    return entry


def divergence_warnings(curves: list[dict[str, Any]], repetitions: int) -> list[str]:
    """One line per curve whose values come from fewer than half its repetitions.

    >>> divergence_warnings([{"label": "a", "diverged": True, "finite_repetitions": 1,
    ...                       "diverged_repetitions": 7}], 8)
    ["curve 'a': 7 of 8 repetitions diverged; its values are those of the other 1"]
    """
    out = []
    for c in curves:
        if c["diverged"]:
            rest = c["finite_repetitions"]
            what = f"its values are those of the other {rest}" if rest else "it has no value"
            out.append(
                f"curve {c['label']!r}: {c['diverged_repetitions']} of {repetitions} "
                f"repetitions diverged; {what}"
            )
    return out


def _add_settings(
    cfg: ExperimentConfig, curves: list[dict[str, Any]], metrics: dict[int, dict[str, np.ndarray]]
) -> None:
    """Each curve's ``settings`` in its summary entry: what it ran with (sweeps read them).

    Beside them the curve's ``scheme`` (:func:`pgfl.style.scheme_of` of its settings: the
    name its colour is drawn by) and its graph, ``topology``, so that tables across
    schemes, topologies and targets (``target_epsilon``) read from the entries alone.
    """
    for i, (entry, c) in enumerate(zip(curves, cfg.curves, strict=True)):
        entry["settings"] = {
            "mu": c.training.mu,
            "share": c.training.share,
            "client_noise": c.privacy.client_noise,
            "client_variance": c.privacy.client_variance,
            "server_noise": c.privacy.server_noise,
            "server_variance": c.privacy.server_variance,
        }
        if "resolved" in metrics[i]:  # the noise the curve ran with (a calibrated variance)
            resolved = json.loads(str(metrics[i]["resolved"]))
            entry["settings"].update({k: v for k, v in resolved.items() if v is not None})
        if c.model.kind != "none":
            entry["settings"]["model"] = c.model.kind
        entry["scheme"] = scheme_of(entry["settings"])
        entry["topology"] = c.topology.kind
        if c.privacy.target_epsilon is not None:
            entry["target_epsilon"] = c.privacy.target_epsilon
        for level in ("client", "server"):  # the variance above is z·Δ's square
            z = getattr(c.privacy, f"{level}_noise_multiplier")
            scheme = mechanisms.REGISTRY[level][entry["settings"][f"{level}_noise"]]
            if z is not None and scheme.calibrates is not None:  # a scheme with a noise level
                entry["settings"][f"{level}_noise_multiplier"] = z


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

    ``engine`` (e.g. ``{"backend": "local", "local_phase": "compiled"}``: which backend
    simulated, which local-phase implementation ran) goes into the summary and the first
    lines of ``run.log``.
    """
    curves = [summarize_curve(c.label, metrics[i]) for i, c in enumerate(cfg.curves)]
    _add_settings(cfg, curves, metrics)
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
        "warnings": divergence_warnings(curves, cfg.repetitions),
        "curves": curves,
    }
    if cfg.figure != "iterations":
        summary["figure"] = cfg.figure
    if cfg.usable_db is not None:
        summary["usable_db"] = cfg.usable_db
    if len({c.topology.P * c.data.K for c in cfg.curves}) > 1 or cfg.figure == "population":
        for entry, c in zip(curves, cfg.curves, strict=True):  # population_figure's x
            entry["clients"] = c.topology.P * c.data.K
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
    log += round_lines(
        cfg.iterations, list(cfg.plot), [(c.label, metrics[i]) for i, c in enumerate(cfg.curves)]
    )
    log += [
        f"{entry['label']}: {line}"
        for entry in curves
        for record in entry.values()  # a mechanism's own records (Mechanism.record)
        if isinstance(record, dict)
        for line in record.pop("log", [])
    ]
    if log:
        write_atomic(out / "run.log", "\n".join(log) + "\n")
    write_json(out / "summary.json", summary)
    plot_run(out)
    return summary
