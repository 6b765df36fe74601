"""``pgfl graphlearn run CONFIG.toml``: a strict configuration, checked by its table.

Every setting's type, range and default is in :data:`pgfl.graphlearn.params.PARAMS`
(rendered in ``docs/config.md``); every table and key is optional except where stated;
unknown tables or keys are errors.

.. code-block:: toml

    seed = 0                      # root seed (the CLI's --seed overrides it)

    [data]
    kind = "synthetic"            # "synthetic" (RBF graphs of §V-A) or "files"
    nodes = 20                    # synthetic: vertices d >= 2
    clients = 5                   # synthetic: I >= 1
    n_samples = 100               # synthetic: N_i, an integer or one per client
    q = 0.5                       # synthetic: consensus fraction in [0, 1]
    sigma_w = 0.1                 # synthetic: noise of eq. 33
    repetitions = 3               # synthetic: independent draws
    files = ["c1.csv", "c2.csv"]  # files: one per client, rows = signals, columns = nodes
                                  #   (.csv with a comma delimiter, or .npy); relative to the config

    [model]
    alpha = 2.0                   # > 0
    beta = 0.05                   # > 0
    rho = 0.3                     # > 0
    lambda = 0.02                 # >= 0

    [algorithm]
    rounds = 8
    local_steps = 25
    local_solver = "backtracking" # or "fixed"
    step = 5e-4                   # "fixed" solver only
    momentum = 0.9                # "fixed" solver only

    [privacy]                     # optional: a DP variant (pgfl.graphlearn.privacy)
    mechanism = "statistic"       # noisy z̄ once, ε covers the graphs; or "last_step" (the
                                  #   paper's Theorem 3; needs ε̄/rounds < 1; ε does not
                                  #   cover the released graph)
    epsilon = 1.0                 # total ε̄
    delta = 1e-5
    clip = 25.0
    sensitivity = "rigorous"      # or "paper" (eq. 58, √2 too small)
    dp_step = 5e-4                # "last_step" only
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pgfl.files import (
    FileError,
    check_input_file,
    content_digest,
    read_toml,
    reading,
    write_csv,
    write_json,
    writing,
)
from pgfl.folders import check_output, digest_of, staged
from pgfl.graphlearn.experiments import Params, draw_setting, evaluate
from pgfl.graphlearn.federated import (
    client_distances,
    fedavg_graph_learning,
    federated_graph_learning,
    independent_graph_learning,
)
from pgfl.graphlearn.params import PARAMS, SECTIONS
from pgfl.graphlearn.privacy import calibrate_noise, privacy_report, privatize_statistic
from pgfl.graphlearn.smoothness import validate_signals
from pgfl.rng import stream
from pgfl.validation import ConfigError

__all__ = ["GraphLearnConfig", "load_config", "parse_config", "run_config"]


@dataclass(frozen=True)
class GraphLearnConfig:
    """Validated configuration (see the module docstring for the TOML schema)."""

    seed: int = 0
    kind: str = "synthetic"
    nodes: int = 20
    clients: int = 5
    n_samples: tuple[int, ...] = (100,) * 5
    q: float = 0.5
    sigma_w: float = 0.1
    repetitions: int = 3
    files: tuple[Path, ...] = ()
    params: Params = field(default_factory=Params)  # model and algorithm settings
    privacy: dict[str, Any] | None = field(default=None)


def parse_config(raw: Mapping[str, Any], base: Path = Path(".")) -> GraphLearnConfig:
    """Validate a parsed TOML document; raise :class:`ConfigError` with the offending key.

    Paths in ``data.files`` are relative to ``base`` (the configuration file's folder).
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"a configuration must be a table of settings; got {raw!r}")
    for key in raw:
        if key != "seed" and key not in SECTIONS:
            allowed = ", ".join(["seed", *SECTIONS[1:]])
            raise ConfigError(f"unknown setting {key!r}; allowed: {allowed}")
    top = PARAMS.check_table("", {k: v for k, v in raw.items() if k == "seed"})
    s = {**top}
    for section in SECTIONS[1:-1]:
        s.update(PARAMS.check_table(section, raw.get(section, {})))
    privacy = None
    if "privacy" in raw:
        priv = PARAMS.check_table("privacy", raw["privacy"], context=s)  # ε̄ < rounds needs T
        privacy = {k.removeprefix("privacy."): v for k, v in priv.items()}
    beta = s["model.beta"]
    return GraphLearnConfig(
        seed=s["seed"],
        kind=s["data.kind"],
        nodes=s["data.nodes"],
        clients=s["data.clients"],
        n_samples=s["data.n_samples"],
        q=s["data.q"],
        sigma_w=s["data.sigma_w"],
        repetitions=s["data.repetitions"],
        files=tuple(base / f for f in s["data.files"] or ()),
        params=Params(
            alpha=s["model.alpha"],
            beta=beta,
            beta_igl=beta,
            beta_fedavg=beta,
            rho=s["model.rho"],
            lam=s["model.lambda"],
            rounds=s["algorithm.rounds"],
            local_steps=s["algorithm.local_steps"],
            local_solver=s["algorithm.local_solver"],
            step=s["algorithm.step"],
            momentum=s["algorithm.momentum"],
        ),  # fmt: skip
        privacy=privacy,
    )


def load_config(path: Path) -> GraphLearnConfig:
    """Read and validate a TOML config file."""
    path = Path(path)
    with reading(path, what="config file"):  # not UTF-8, unreadable: one line
        raw = read_toml(path)
    return parse_config(raw, base=path.parent)


def load_signals(path: Path) -> Any:
    """One client's signals ``[N_i, d]`` (rows = signals, columns = nodes) from a file.

    ``.npy`` (a numeric array, never pickled objects) or comma-separated text. Every
    problem (missing, empty, unreadable, non-numeric, not 2-D, non-finite) raises a
    :class:`~pgfl.files.FileError` or :class:`ConfigError` naming the file.
    """
    path = check_input_file(path)
    name = f"data file {str(path)!r}"
    if path.stat().st_size == 0:
        raise FileError(f"{name} is empty; it must hold one signal per row, one node per column")
    with reading(path), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # loadtxt warns (with a path) about files without data
        if path.suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
        else:
            arr = np.loadtxt(path, delimiter=",", ndmin=2)
    if arr.dtype.kind not in "biuf":
        raise FileError(f"{name} holds {arr.dtype} values; signals must be real numbers")
    if arr.size == 0:
        raise FileError(f"{name} has no signals; it must hold one signal per row")
    return validate_signals(arr, name)


def _load_client_signals(files: tuple[Path, ...]) -> list[Any]:
    """Every client's signals; all files must observe the same nodes."""
    signals = [load_signals(f) for f in files]
    for f, x in zip(files, signals, strict=True):
        if x.shape[1] != signals[0].shape[1]:
            raise ConfigError(
                f"data.files must observe the same nodes: {str(f)!r} has {x.shape[1]} columns, "
                f"{str(files[0])!r} has {signals[0].shape[1]}"
            )
    return signals


def run_config(cfg: GraphLearnConfig, out: Path, *, force: bool = False) -> dict[str, Any]:
    """Run a validated config; write ``summary.json``, ``curves.csv``, ``graphs.npz``.

    The output folder is checked (:func:`pgfl.folders.check_output`: files pgfl did not
    write, or results of another configuration, are refused unless ``force``) and the
    signal files are read before any work; the results are written in the folder's
    staging folder once every run is done and replace the folder's results at once (a
    ``graphs.npz`` of an earlier run goes when this one learns no graphs from files).
    """
    signals = _load_client_signals(cfg.files) if cfg.kind != "synthetic" else None
    identity = {
        "config": _jsonable_cfg(cfg),
        "seed": cfg.seed,
        "files": {str(f): content_digest(f) for f in cfg.files},
    }
    output = check_output(out, digest=digest_of(identity), what="a graph-learning run",
                          force=force)  # fmt: skip
    out = output.path
    summary: dict[str, Any] = {
        "experiment": "graphlearn-run",
        "seed": cfg.seed,
        "config": _jsonable_cfg(cfg),
    }
    graphs: dict[str, np.ndarray] = {}
    if signals is None:
        rows = _run_synthetic(cfg, summary)
    else:
        rows, graphs = _run_files(cfg, signals, summary)
    # nothing is written before every input was read and every run done
    with staged(output) as stage, writing(out):
        if graphs:
            np.savez(stage / "graphs.npz", **graphs)
        write_csv(stage / "curves.csv", rows)
        write_json(stage / "summary.json", summary)
    return summary


def _run_synthetic(cfg: GraphLearnConfig, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Algorithm 1, IGL and FedAvg on drawn synthetic settings; MCC and relative error."""
    draws = draw_setting(
        cfg.seed, "run", cfg.repetitions, list(cfg.n_samples), q=cfg.q, d=cfg.nodes,
        sigma_w=cfg.sigma_w,
    )  # fmt: skip
    pv = cfg.privacy or {}
    dp = None if cfg.privacy is None else [(pv["epsilon"], pv["delta"])]
    res = evaluate(
        draws, cfg.params, dp=dp, clip=pv.get("clip", 25.0), seed=cfg.seed,
        sensitivity=pv.get("sensitivity", "rigorous"), dp_step=pv.get("dp_step", 5e-4),
        mechanisms=(pv.get("mechanism", "statistic"),),
    )  # fmt: skip
    curves = []
    for k, v in res.items():
        if k.startswith("_"):
            continue
        entry = {
            "label": k.split("@")[0],
            "x": [cfg.q],
            "mcc": [float(v["mcc"])],
            "relative_error": [float(v["relative_error"])],
        }
        if "epsilon" in v:
            entry["epsilon"] = v["epsilon"]
            summary["privacy"] = v["privacy"]
        curves.append(entry)
    summary["curves"] = curves
    return [
        {
            "label": c["label"],
            "x": cfg.q,
            "mcc": c["mcc"][0],
            "relative_error": c["relative_error"][0],
            **({"epsilon": c["epsilon"]} if "epsilon" in c else {}),
        }
        for c in curves
    ]


def _run_files(
    cfg: GraphLearnConfig, signals: list[np.ndarray], summary: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """Every learner on the clients' signals (and the DP variant); the learned graphs."""
    p = cfg.params
    Z, counts = client_distances(signals)
    kw = dict(alpha=p.alpha, beta=p.beta, rounds=p.rounds, local_steps=p.local_steps)
    solver = dict(local_solver=p.local_solver, step=p.step, momentum=p.momentum)
    fed = federated_graph_learning(Z, rho=p.rho, lam=p.lam, **kw, **solver)
    graphs = {
        "fedgl_local": fed.w_local,
        "fedgl_consensus": fed.w_con,
        "igl": independent_graph_learning(Z, alpha=p.alpha, beta=p.beta),
        "fedavg": fedavg_graph_learning(Z, counts, **kw, **solver),
    }
    summary["gamma"] = fed.gamma.tolist()
    summary["objective"] = fed.objective.tolist()
    if cfg.privacy is not None:
        pv, clip = cfg.privacy, cfg.privacy["clip"]
        Zc, _ = client_distances(signals, clip=clip)
        cal = calibrate_noise(
            pv["epsilon"], pv["delta"], p.rounds, counts, clip,
            sensitivity=pv["sensitivity"], mechanism=pv["mechanism"],
        )  # fmt: skip
        rng = stream(cfg.seed, "graphlearn/run-dp")
        if cal.mechanism == "statistic":  # one noisy z̄ per client; the run post-processes it
            noisy = dict(zbar=privatize_statistic(Zc, cal, rng))
        else:
            noisy = dict(zbar=Zc, noise_std=cal.sigma, rng=rng, dp_step=pv["dp_step"])
        dpres = federated_graph_learning(**noisy, rho=p.rho, lam=p.lam, **kw, **solver)
        graphs["fedgl_local_dp"] = dpres.w_local
        graphs["fedgl_consensus_dp"] = dpres.w_con
        summary["privacy"] = privacy_report(cal)
    summary["curves"] = []
    rows = [{"round": t, "objective": v} for t, v in enumerate(fed.objective.tolist())]
    return rows, graphs


def _jsonable_cfg(cfg: GraphLearnConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d["files"] = [str(f) for f in cfg.files]
    return d
