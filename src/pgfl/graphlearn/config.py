"""``pgfl graphlearn run CONFIG.toml``: a small, strict configuration schema.

Every table and key is optional except where stated; unknown tables or keys are errors.

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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfl.files import FileError, check_input_file, check_output_folder, read_toml, reading, writing
from pgfl.graphlearn.experiments import Params
from pgfl.validation import ConfigError, check_choice, check_int, check_real

__all__ = ["GraphLearnConfig", "load_config", "parse_config"]

_TABLES: dict[str, tuple[str, ...]] = {
    "data": ("kind", "nodes", "clients", "n_samples", "q", "sigma_w", "repetitions", "files"),
    "model": ("alpha", "beta", "rho", "lambda"),
    "algorithm": ("rounds", "local_steps", "local_solver", "step", "momentum"),
    "privacy": ("mechanism", "epsilon", "delta", "clip", "sensitivity", "dp_step"),
}


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


def parse_config(raw: dict[str, Any], base: Path = Path(".")) -> GraphLearnConfig:
    """Validate a parsed TOML document; raise :class:`ConfigError` with the offending key."""
    for key in raw:
        if key != "seed" and key not in _TABLES:
            allowed = ", ".join(["seed", *_TABLES])
            raise ConfigError(f"unknown key {key!r} in config; allowed: {allowed}")
    for table, keys in _TABLES.items():
        sub = raw.get(table, {})
        if not isinstance(sub, dict):
            raise ConfigError(f"[{table}] must be a table; got {sub!r}")
        for k in sub:
            if k not in keys:
                raise ConfigError(
                    f"unknown key '{table}.{k}' in config; allowed: {', '.join(keys)}"
                )
    data, model = raw.get("data", {}), raw.get("model", {})
    algo, priv = raw.get("algorithm", {}), raw.get("privacy")
    seed = check_int("seed", raw.get("seed", 0), lo=0)
    kind = check_choice("data.kind", data.get("kind", "synthetic"), ("synthetic", "files"))
    clients = check_int("data.clients", data.get("clients", 5), lo=1)
    ns = data.get("n_samples", 100)
    ns_list = [ns] * clients if not isinstance(ns, list) else ns
    if len(ns_list) != clients:
        raise ConfigError(
            f"data.n_samples must have one entry per client ({clients}); got {len(ns_list)}"
        )
    files: tuple[Path, ...] = ()
    if kind == "files":
        fl = data.get("files")
        if not isinstance(fl, list) or len(fl) < 1 or not all(isinstance(f, str) for f in fl):
            raise ConfigError(
                f"data.files must be a non-empty list of paths when data.kind = 'files'; got {fl!r}"
            )
        files = tuple((base / f) for f in fl)
    privacy = None
    if priv is not None:
        from pgfl.graphlearn.privacy import MECHANISMS

        privacy = {
            "mechanism": check_choice(
                "privacy.mechanism", priv.get("mechanism", "statistic"), MECHANISMS
            ),
            "epsilon": check_real(
                "privacy.epsilon", priv.get("epsilon", 1.0), lo=0.0, lo_open=True
            ),
            "delta": check_real(
                "privacy.delta", priv.get("delta", 1e-5), lo=0.0, hi=1.0, lo_open=True, hi_open=True
            ),
            "clip": check_real("privacy.clip", priv.get("clip", 25.0), lo=0.0, lo_open=True),
            "sensitivity": check_choice(
                "privacy.sensitivity", priv.get("sensitivity", "rigorous"), ("paper", "rigorous")
            ),
            "dp_step": check_real(
                "privacy.dp_step", priv.get("dp_step", 5e-4), lo=0.0, lo_open=True
            ),
        }
    beta = check_real("model.beta", model.get("beta", 0.05), lo=0.0, lo_open=True)
    rounds = check_int("algorithm.rounds", algo.get("rounds", 8), lo=1)
    if privacy is not None and privacy["mechanism"] == "last_step":
        per_round = privacy["epsilon"] / rounds  # the classic Gaussian bound of Theorem 3
        if not per_round < 1.0:
            raise ConfigError(
                "privacy.epsilon / algorithm.rounds must be a real number in (0, 1) for "
                f"privacy.mechanism = 'last_step'; got {privacy['epsilon']!r} / {rounds} = "
                f"{per_round!r}"
            )
    return GraphLearnConfig(
        seed=seed,
        kind=kind,
        nodes=check_int("data.nodes", data.get("nodes", 20), lo=2),
        clients=clients,
        n_samples=tuple(check_int("data.n_samples", v, lo=1) for v in ns_list),
        q=check_real("data.q", data.get("q", 0.5), lo=0.0, hi=1.0),
        sigma_w=check_real("data.sigma_w", data.get("sigma_w", 0.1), lo=0.0, lo_open=True),
        repetitions=check_int("data.repetitions", data.get("repetitions", 3), lo=1),
        files=files,
        params=Params(
            alpha=check_real("model.alpha", model.get("alpha", 2.0), lo=0.0, lo_open=True),
            beta=beta,
            beta_igl=beta,
            beta_fedavg=beta,
            rho=check_real("model.rho", model.get("rho", 0.3), lo=0.0, lo_open=True),
            lam=check_real("model.lambda", model.get("lambda", 0.02), lo=0.0),
            rounds=rounds,
            local_steps=check_int("algorithm.local_steps", algo.get("local_steps", 25), lo=1),
            local_solver=check_choice(
                "algorithm.local_solver",
                algo.get("local_solver", "backtracking"),
                ("backtracking", "fixed"),
            ),
            step=check_real("algorithm.step", algo.get("step", 5e-4), lo=0.0, lo_open=True),
            momentum=check_real("algorithm.momentum", algo.get("momentum", 0.9), lo=0.0, hi=1.0),
        ),
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
    import warnings

    import numpy as np

    from pgfl.graphlearn.smoothness import validate_signals

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


def run_config(cfg: GraphLearnConfig, out: Path) -> dict[str, Any]:
    """Run a validated config; write ``summary.json``, ``curves.csv``, ``graphs.npz``.

    The output folder is checked and the signal files are read before any work; the
    folder is created only when the results are ready.
    """
    import numpy as np

    from pgfl.files import write_csv, write_json
    from pgfl.graphlearn.experiments import draw_setting, evaluate
    from pgfl.graphlearn.federated import (
        client_distances,
        fedavg_graph_learning,
        federated_graph_learning,
        independent_graph_learning,
    )
    from pgfl.graphlearn.privacy import calibrate_noise, privacy_report, privatize_statistic
    from pgfl.rng import stream

    out = check_output_folder(out)
    signals = _load_client_signals(cfg.files) if cfg.kind == "files" else []
    p = cfg.params
    algo = dict(rounds=p.rounds, local_steps=p.local_steps)
    summary: dict[str, Any] = {
        "experiment": "graphlearn-run",
        "seed": cfg.seed,
        "config": _jsonable_cfg(cfg),
    }
    if cfg.kind == "synthetic":
        draws = draw_setting(
            cfg.seed,
            "run",
            cfg.repetitions,
            list(cfg.n_samples),
            q=cfg.q,
            d=cfg.nodes,
            sigma_w=cfg.sigma_w,
        )
        pv = cfg.privacy or {}
        dp = None if cfg.privacy is None else [(pv["epsilon"], pv["delta"])]
        res = evaluate(
            draws,
            p,
            dp=dp,
            clip=pv.get("clip", 25.0),
            seed=cfg.seed,
            sensitivity=pv.get("sensitivity", "rigorous"),
            dp_step=pv.get("dp_step", 5e-4),
            mechanisms=(pv.get("mechanism", "statistic"),),
        )
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
        rows = [
            {
                "label": c["label"],
                "x": cfg.q,
                "mcc": c["mcc"][0],
                "relative_error": c["relative_error"][0],
                **({"epsilon": c["epsilon"]} if "epsilon" in c else {}),
            }
            for c in curves
        ]
    else:
        clip = None if cfg.privacy is None else cfg.privacy["clip"]
        Z, counts = client_distances(signals)
        kw = dict(alpha=p.alpha, beta=p.beta, **algo)
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
            Zc, _ = client_distances(signals, clip=clip)
            cal = calibrate_noise(
                cfg.privacy["epsilon"],
                cfg.privacy["delta"],
                p.rounds,
                counts,
                clip,
                sensitivity=cfg.privacy["sensitivity"],
                mechanism=cfg.privacy["mechanism"],
            )
            rng = stream(cfg.seed, "graphlearn/run-dp")
            if cal.mechanism == "statistic":  # one noisy z̄ per client; the run post-processes it
                dpres = federated_graph_learning(
                    privatize_statistic(Zc, cal, rng), rho=p.rho, lam=p.lam, **kw, **solver
                )
            else:
                dpres = federated_graph_learning(
                    Zc,
                    rho=p.rho,
                    lam=p.lam,
                    noise_std=cal.sigma,
                    rng=rng,
                    dp_step=cfg.privacy["dp_step"],
                    **kw,
                    **solver,
                )
            graphs["fedgl_local_dp"] = dpres.w_local
            graphs["fedgl_consensus_dp"] = dpres.w_con
            summary["privacy"] = privacy_report(cal)
        summary["curves"] = []
        rows = [{"round": t, "objective": v} for t, v in enumerate(fed.objective.tolist())]
    with writing(out):  # nothing is written before every input was read and every run done
        out.mkdir(parents=True, exist_ok=True)
        if cfg.kind == "files":
            np.savez(out / "graphs.npz", **graphs)
        write_csv(out / "curves.csv", rows)
        write_json(out / "summary.json", summary)
    return summary


def _jsonable_cfg(cfg: GraphLearnConfig) -> dict[str, Any]:
    from dataclasses import asdict

    d = asdict(cfg)
    d["files"] = [str(f) for f in cfg.files]
    return d
