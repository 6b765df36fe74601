"""Presets reproducing the graph-topology-learning paper's experiments (§V-B, §V-C 2).

``PRESETS`` maps a preset name (``graphlearn-...``) to a function
``run(quick: bool, out: pathlib.Path, seed: int) -> dict`` that writes ``summary.json``,
``curves.csv`` and figures into ``out`` and returns the summary; ``TITLES`` gives each a
one-line description (``pgfl reproduce --list``) and :func:`preset_config` its settings as
TOML (``pgfl reproduce NAME --print-config``): one point of its sweep as a
``pgfl graphlearn run`` configuration, the sweep and the tuning in comments.

``summary.json`` holds ``{"experiment", "quick", "seed", "curves": [...], ...}``; each
curve is ``{"label", "x", "mcc", "relative_error", ...}`` with lists aligned with ``x``
and averaged over repetitions (labels ``igl``, ``fedavg``, ``fedgl_local``,
``fedgl_consensus``; DP runs add ``fedgl_local_dp`` (the paper's last-step noise) and
``fedgl_local_dp_statistic`` (the rigorous noisy statistic) entries carrying ``epsilon``,
``mechanism``, ``epsilon_pld`` and ``epsilon_covers``).

Paper settings kept: 20 vertices, RBF kernel width 0.5, ``σ_w = 0.1``, 5 clients,
``α = 2``, ``T = 8``, ``K_i = 25``, ``C = 25``, ``δ̄ = 1e-5``; ``β, ρ, λ`` are tuned per
setting on separate draws (see :mod:`pgfl.graphlearn.experiments`; the paper's
``β = 1.5`` belongs to its own data scale, which the text does not pin down).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from pgfl.experiments.catalog import GRAPHLEARN_TITLES
from pgfl.files import write_csv, write_json
from pgfl.graphlearn import digits, plots
from pgfl.graphlearn.experiments import Params, draw_setting, evaluate, tune
from pgfl.graphlearn.federated import federated_graph_learning, independent_graph_learning
from pgfl.graphlearn.metrics import mcc, relative_error
from pgfl.graphlearn.params import PARAMS

__all__ = ["PRESETS", "TITLES", "preset_config"]

METHODS = ("igl", "fedavg", "fedgl_local", "fedgl_consensus")
N_CLIENTS = 5
DELTA_BAR = 1e-5
CLIP = 25.0

#: The swept values of each preset: name → (full run, ``--quick``).
SWEEPS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "datasize": ((10, 20, 40, 60, 80, 100), (20, 50, 100)),
    "imbalance": ((20, 40, 60, 80, 100), (20, 40, 60, 80, 100)),
    "heterogeneity": ((0.2, 0.35, 0.5, 0.65, 0.8), (0.2, 0.5, 0.8)),
    "sensitivity-lambda": ((0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0), (0.01, 0.05, 0.2, 1.0)),
    "sensitivity-rho": ((0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 50.0), (0.1, 1.0, 10.0, 50.0)),
    "dp": ((50, 100, 200, 500, 1000), (50, 200, 1000)),
    "dp-epsilon": ((0.3, 0.5, 1.0, 2.0), (0.3, 1.0)),
}


def _swept(name: str, quick: bool) -> list[Any]:
    """The values preset sweep ``name`` runs (``--quick``: fewer)."""
    return list(SWEEPS[name][quick])


def _reps(quick: bool) -> tuple[int, int]:
    """(tuning repetitions, evaluation repetitions)."""
    return (2, 3) if quick else (4, 20)


def _f(v: Any) -> Any:
    return np.asarray(v).tolist()


def _params_dict(p: Params) -> dict[str, Any]:
    d = asdict(p)
    d.pop("extra", None)
    return d


def _write(out: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """Write ``summary.json`` and ``curves.csv`` (one row per curve point)."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for c in summary["curves"]:
        extra = {
            k: v
            for k, v in c.items()
            if k not in ("x", "mcc", "relative_error") and not isinstance(v, (list, dict))
        }
        for i, x in enumerate(c["x"]):
            rows.append(
                {
                    "experiment": summary["experiment"],
                    **extra,
                    "x": x,
                    "mcc": c["mcc"][i],
                    "relative_error": c["relative_error"][i],
                }
            )
    write_json(out / "summary.json", summary)
    write_csv(out / "curves.csv", rows)
    return summary


def _sweep_curves(
    xs: list[Any], results: list[dict[str, Any]], labels=METHODS
) -> list[dict[str, Any]]:
    curves = []
    for lab in labels:
        curves.append(
            {
                "label": lab,
                "x": list(xs),
                "mcc": [float(r[lab]["mcc"]) for r in results],
                "relative_error": [float(r[lab]["relative_error"]) for r in results],
            }
        )
    dp_keys = [k for k in results[0] if k.startswith("fedgl_local_dp")]
    for k in dp_keys:
        report = results[0][k]["privacy"]
        curves.append(
            {
                "label": k.split("@")[0],
                "mechanism": results[0][k]["mechanism"],
                "epsilon": results[0][k]["epsilon"],
                "delta": DELTA_BAR,
                "epsilon_pld": report["epsilon"]["pld"],
                "epsilon_covers": report["epsilon_covers"],
                "x": list(xs),
                "mcc": [float(r[k]["mcc"]) for r in results],
                "relative_error": [float(r[k]["relative_error"]) for r in results],
            }
        )
    return curves


def _learned_graphs_figure(
    draws, res, out: Path, title: str, name: str = "learned_graphs.png"
) -> None:
    g = res["_graphs"]
    plots.plot_learned_graphs(
        draws.positions[0],
        draws.w_clients[0, 0],
        draws.w_con[0],
        {
            "igl": g["igl"][0, 0],
            "fedavg": g["fedavg"][0],
            "fedgl_local": g["fedgl_local"][0, 0],
            "fedgl_consensus": g["fedgl_consensus"][0],
        },
        out / name,
        title=title,
    )


def _claims(r: dict[str, Any]) -> dict[str, bool]:
    return {
        "fedgl_local_beats_igl_mcc": bool(r["fedgl_local"]["mcc"] > r["igl"]["mcc"]),
        "fedgl_local_beats_igl_relative_error": bool(
            r["fedgl_local"]["relative_error"] < r["igl"]["relative_error"]
        ),
        "fedgl_local_beats_fedavg_mcc": bool(r["fedgl_local"]["mcc"] > r["fedavg"]["mcc"]),
    }


def run_datasize(quick: bool, out: Path, seed: int) -> dict[str, Any]:
    """Fig. 2 (a)–(b): equal data sizes ``N_i = N`` swept, ``q = 0.5``."""
    xs = _swept("datasize", quick)
    rt, re_ = _reps(quick)
    out.mkdir(parents=True, exist_ok=True)
    results, params = [], {}
    for n in xs:
        p = tune(draw_setting(seed, f"datasize/tune/{n}", rt, [n] * N_CLIENTS), quick=quick)
        d = draw_setting(seed, f"datasize/eval/{n}", re_, [n] * N_CLIENTS)
        r = evaluate(d, p, seed=seed, keep_graphs=n == xs[-1])
        results.append(r)
        params[str(n)] = _params_dict(p)
        if n == xs[-1]:
            _learned_graphs_figure(d, r, out, f"q = 0.5, N_i = {n}")
    summary = {
        "experiment": "graphlearn-datasize",
        "quick": quick,
        "seed": seed,
        "x_name": "N_i",
        "q": 0.5,
        "repetitions": re_,
        "params": params,
        "curves": _sweep_curves(xs, results),
        "claims_at_largest_N": _claims(results[-1]),
    }
    _write(out, summary)
    plots.plot_curves(
        summary["curves"], out / "datasize.png", xlabel="data size N_i", title="Data size (q = 0.5)"
    )
    return summary


def run_imbalance(quick: bool, out: Path, seed: int) -> dict[str, Any]:
    """Fig. 2 (c)–(d): ``N_i = 20, 40, 60, 80, 100``; metrics per client."""
    counts = _swept("imbalance", quick)
    rt, re_ = _reps(quick)
    p = tune(draw_setting(seed, "imbalance/tune", rt, counts), quick=quick)
    d = draw_setting(seed, "imbalance/eval", re_, counts)
    r = evaluate(d, p, seed=seed, per_client=True)
    xs = list(range(1, N_CLIENTS + 1))
    curves = []
    for lab in METHODS:
        m, e = (
            np.broadcast_to(r[lab]["mcc"], (N_CLIENTS,)),
            np.broadcast_to(r[lab]["relative_error"], (N_CLIENTS,)),
        )
        curves.append(
            {"label": lab, "x": xs, "n_samples": counts, "mcc": _f(m), "relative_error": _f(e)}
        )
    summary = {
        "experiment": "graphlearn-imbalance",
        "quick": quick,
        "seed": seed,
        "x_name": "client index (N_i = 20, 40, 60, 80, 100)",
        "q": 0.5,
        "repetitions": re_,
        "params": _params_dict(p),
        "curves": curves,
        "small_client_gain_mcc": float(r["fedgl_local"]["mcc"][0] - r["igl"]["mcc"][0]),
    }
    _write(out, summary)
    plots.plot_curves(
        curves,
        out / "imbalance.png",
        xlabel="client (N_i = 20·index)",
        title="Imbalanced data sizes (q = 0.5)",
    )
    return summary


def run_heterogeneity(quick: bool, out: Path, seed: int) -> dict[str, Any]:
    """Fig. 3: ``N_i = 50``, consensus fraction ``q`` swept (heterogeneity ``1 − q``)."""
    xs = _swept("heterogeneity", quick)
    rt, re_ = _reps(quick)
    out.mkdir(parents=True, exist_ok=True)
    results, params = [], {}
    for q in xs:
        p = tune(
            draw_setting(seed, f"heterogeneity/tune/{q}", rt, [50] * N_CLIENTS, q=q), quick=quick
        )
        d = draw_setting(seed, f"heterogeneity/eval/{q}", re_, [50] * N_CLIENTS, q=q)
        r = evaluate(d, p, seed=seed, keep_graphs=q == 0.5)
        if q == 0.5:
            _learned_graphs_figure(d, r, out, "q = 0.5, N_i = 50")
        results.append(r)
        params[str(q)] = _params_dict(p)
    fa = [float(r["fedavg"]["mcc"]) for r in results]
    summary = {
        "experiment": "graphlearn-heterogeneity",
        "quick": quick,
        "seed": seed,
        "x_name": "q (consensus fraction; heterogeneity = 1 - q)",
        "n_samples": 50,
        "repetitions": re_,
        "params": params,
        "curves": _sweep_curves(xs, results),
        "claims": {
            "fedavg_mcc_drops_as_heterogeneity_grows": bool(fa[0] < fa[-1]),
            "fedgl_local_beats_fedavg_at_highest_heterogeneity": bool(
                results[0]["fedgl_local"]["mcc"] > fa[0]
            ),
        },
    }
    _write(out, summary)
    plots.plot_curves(
        summary["curves"],
        out / "heterogeneity.png",
        xlabel="q (1 − q = heterogeneity)",
        title="Data heterogeneity (N_i = 50)",
    )
    return summary


def run_weights(quick: bool, out: Path, seed: int) -> dict[str, Any]:
    """Table I: adaptive weights ``γ_i`` vs data size and vs similarity to client 1."""
    rt, re_ = _reps(quick)
    counts = [20, 40, 60, 80, 100]
    p = tune(draw_setting(seed, "weights/tune", rt, counts), quick=quick)
    d_size = draw_setting(seed, "weights/datasize", re_, counts)
    r_size = evaluate(d_size, p, seed=seed, per_client=True)
    qs = [0.8, 0.6, 0.4, 0.2]
    d_het = draw_setting(
        seed, "weights/heterogeneity", re_, [100] * N_CLIENTS, qs_derived=np.array(qs)
    )
    r_het = federated_graph_learning(
        d_het.zbar,
        alpha=p.alpha,
        beta=p.beta,
        rho=p.rho,
        lam=p.lam,
        rounds=p.rounds,
        local_steps=p.local_steps,
    )
    g_size = np.asarray(r_size["fedgl_local"]["gamma"])
    g_het = r_het.gamma.mean(axis=0)
    xs = list(range(1, N_CLIENTS + 1))
    curves = []
    for lab in METHODS:
        m = np.broadcast_to(r_size[lab]["mcc"], (N_CLIENTS,))
        e = np.broadcast_to(r_size[lab]["relative_error"], (N_CLIENTS,))
        curves.append(
            {"label": lab, "x": xs, "n_samples": counts, "mcc": _f(m), "relative_error": _f(e)}
        )
    summary = {
        "experiment": "graphlearn-weights",
        "quick": quick,
        "seed": seed,
        "repetitions": re_,
        "params": _params_dict(p),
        "gamma_table": {
            "client": xs,
            "data_size": {
                "n_samples": counts,
                "gamma": _f(g_size),
                "gamma_normalized": _f(g_size / g_size.sum()),
            },
            "graph_heterogeneity": {
                "q_vs_client_1": [1.0, *qs],
                "gamma": _f(g_het),
                "gamma_normalized": _f(g_het / g_het.sum()),
            },
        },
        "claims": {
            "gamma_grows_with_data_size": bool(np.corrcoef(counts, g_size)[0, 1] > 0),
            "gamma_grows_with_similarity": bool(np.corrcoef([1.0, *qs], g_het)[0, 1] > 0),
        },
        "curves": curves,
    }
    _write(out, summary)
    plots.plot_bars(
        {
            "data size (N_i = 20..100)": g_size / g_size.sum(),
            "similarity (q = 1, .8, .6, .4, .2)": g_het / g_het.sum(),
        },
        [f"client {i}" for i in xs],
        out / "weights.png",
        title="Learned adaptive weights γ (Table I), normalized",
        ylabel="γ_i / Σγ",
    )
    return summary


def run_sensitivity(quick: bool, out: Path, seed: int) -> dict[str, Any]:
    """Fig. 5: sensitivity to ``λ`` (``ρ`` fixed) and to ``ρ`` (``λ`` fixed), q = 0.5, N_i = 100."""
    rt, re_ = _reps(quick)
    p = tune(draw_setting(seed, "sensitivity/tune", rt, [100] * N_CLIENTS), quick=quick)
    d = draw_setting(seed, "sensitivity/eval", re_, [100] * N_CLIENTS)
    lams = np.array(_swept("sensitivity-lambda", quick))
    rhos = np.array(_swept("sensitivity-rho", quick))
    igl = independent_graph_learning(d.zbar, alpha=p.alpha, beta=p.beta_igl, tol=1e-6)
    curves: list[dict[str, Any]] = []
    for name, grid, rho, lam in (("lambda", lams, p.rho, lams), ("rho", rhos, rhos, p.lam)):
        Zg = np.broadcast_to(d.zbar, (grid.size, *d.zbar.shape))
        r = federated_graph_learning(
            Zg,
            alpha=p.alpha,
            beta=p.beta,
            rho=np.broadcast_to(np.asarray(rho, dtype=float), grid.shape)[:, None],
            lam=np.broadcast_to(np.asarray(lam, dtype=float), grid.shape)[:, None],
            rounds=p.rounds,
            local_steps=p.local_steps,
        )
        fixed = {"rho": p.rho} if name == "lambda" else {"lambda": p.lam}
        curves.append(
            {
                "label": "fedgl_local",
                "parameter": name,
                **fixed,
                "x": _f(grid),
                "mcc": _f(mcc(r.w_local, d.w_clients).mean(axis=(1, 2))),
                "relative_error": _f(relative_error(r.w_local, d.w_clients).mean(axis=(1, 2))),
            }
        )
        curves.append(
            {
                "label": "fedgl_consensus",
                "parameter": name,
                **fixed,
                "x": _f(grid),
                "mcc": _f(mcc(r.w_con, d.w_con).mean(axis=1)),
                "relative_error": _f(relative_error(r.w_con, d.w_con).mean(axis=1)),
            }
        )
        curves.append(
            {
                "label": "igl",
                "parameter": name,
                "x": _f(grid),
                "mcc": [float(mcc(igl, d.w_clients).mean())] * grid.size,
                "relative_error": [float(relative_error(igl, d.w_clients).mean())] * grid.size,
            }
        )
    summary = {
        "experiment": "graphlearn-sensitivity",
        "quick": quick,
        "seed": seed,
        "q": 0.5,
        "n_samples": 100,
        "repetitions": re_,
        "params": _params_dict(p),
        "curves": curves,
    }
    _write(out, summary)
    for name, xl in (("lambda", "λ"), ("rho", "ρ")):
        cs = [c for c in curves if c["parameter"] == name]
        plots.plot_curves(
            cs, out / f"sensitivity_{name}.png", xlabel=xl, title=f"Sensitivity to {xl}", logx=True
        )
    return summary


def run_dp(quick: bool, out: Path, seed: int) -> dict[str, Any]:
    """Fig. 6: DP at ``ε̄`` over ``T = 8`` rounds, ``δ̄ = 1e-5``, ``C = 25``; ``N_i`` swept.

    Two mechanisms at the same ``ε̄`` (:mod:`pgfl.graphlearn.privacy`): the paper's noisy
    last local step (Theorem 3 noise, rigorous sensitivity; its ε does not cover the
    released graph) and the rigorous one, a once-privatized statistic ``z̄_i`` (its ε
    covers everything). ``mcc_at_equal_epsilon`` puts their MCC side by side.
    """
    xs = _swept("dp", quick)
    epsilons = _swept("dp-epsilon", quick)
    mechanisms = ("last_step", "statistic")
    rt, re_ = _reps(quick)
    p = tune(draw_setting(seed, "dp/tune", rt, [100] * N_CLIENTS), quick=quick)
    dp = [(e, DELTA_BAR) for e in epsilons]
    results = []
    for n in xs:
        d = draw_setting(seed, f"dp/eval/{n}", re_, [n] * N_CLIENTS)
        results.append(evaluate(d, p, dp=dp, clip=CLIP, seed=seed, mechanisms=mechanisms))
    d100 = draw_setting(seed, "dp/convergence", re_, [100] * N_CLIENTS)
    conv = evaluate(d100, p, dp=dp, clip=CLIP, seed=seed, mechanisms=mechanisms)["_convergence"]
    key = {"last_step": "fedgl_local_dp", "statistic": "fedgl_local_dp_statistic"}
    privacy: dict[str, Any] = {}
    for m in mechanisms:  # the report's σ is for N = xs[0]; ε does not depend on N
        privacy[m] = {
            f"{e:g}": {**results[0][f"{key[m]}@{e:g}"]["privacy"], "sigma_at_n_samples": xs[0]}
            for e in epsilons
        }
    curves = _sweep_curves(xs, results)
    mcc = {c["label"]: c["mcc"] for c in curves}
    summary = {
        "experiment": "graphlearn-dp",
        "quick": quick,
        "seed": seed,
        "x_name": "N_i",
        "q": 0.5,
        "repetitions": re_,
        "params": _params_dict(p),
        "clip": CLIP,
        "delta": DELTA_BAR,
        "dp_step": 5e-4,
        "sensitivity": "rigorous",
        "privacy": privacy,
        "mcc_at_equal_epsilon": {
            f"{e:g}": {
                "n_samples": xs,
                "last_step": [float(r[f"fedgl_local_dp@{e:g}"]["mcc"]) for r in results],
                "statistic": [float(r[f"fedgl_local_dp_statistic@{e:g}"]["mcc"]) for r in results],
                "non_private": mcc["fedgl_local"],
            }
            for e in epsilons
        },
        "curves": curves,
        "convergence_at_n_100": {k: _f(v) for k, v in conv.items()},
    }
    _write(out, summary)
    plots.plot_curves(
        summary["curves"],
        out / "dp.png",
        xlabel="data size N_i",
        title="Differential privacy (δ̄ = 1e-5, T = 8): last-step noise vs noisy statistic",
        logx=True,
    )
    plots.plot_convergence(conv, out / "dp_convergence.png", title="Convergence (N_i = 100)")
    return summary


def _digits(quick: bool, out: Path, seed: int) -> dict[str, Any]:
    return digits.run_digits(quick, out, seed)


PRESETS: dict[str, Callable[[bool, Path, int], dict[str, Any]]] = {
    "graphlearn-datasize": run_datasize,
    "graphlearn-imbalance": run_imbalance,
    "graphlearn-heterogeneity": run_heterogeneity,
    "graphlearn-weights": run_weights,
    "graphlearn-sensitivity": run_sensitivity,
    "graphlearn-dp": run_dp,
    "graphlearn-digits": _digits,
}

#: One line per preset (``pgfl reproduce --list``; kept in the light catalog module).
TITLES = GRAPHLEARN_TITLES


def _last(sweep: str) -> Callable[[bool], Any]:
    return lambda quick: _swept(sweep, quick)[-1]


def _every(sweep: str) -> Callable[[bool], Any]:
    return lambda quick: _swept(sweep, quick)


#: Per synthetic preset: the point of its sweep its printed configuration holds (settings
#: of ``pgfl graphlearn run``; a callable takes ``quick``), and what it runs, in words.
_POINTS: dict[str, tuple[dict[str, Any], str]] = {
    "graphlearn-datasize": (
        {"data.n_samples": _last("datasize")},
        "sweeps data.n_samples (equal N_i) over {datasize}"),
    "graphlearn-imbalance": (
        {"data.n_samples": _every("imbalance")},
        "runs one setting, N_i = {imbalance}, and reports each client's metrics"),
    "graphlearn-heterogeneity": (
        {"data.n_samples": 50, "data.q": _last("heterogeneity")},
        "sweeps data.q over {heterogeneity}"),
    "graphlearn-weights": (
        {"data.n_samples": _every("imbalance")},
        "reports the adaptive weights for N_i = {imbalance}, then for clients derived from "
        "client 1 (q = 1, 0.8, 0.6, 0.4, 0.2)"),
    "graphlearn-sensitivity": (
        {"data.n_samples": 100},
        "sweeps model.lambda over {sensitivity-lambda}, then model.rho over "
        "{sensitivity-rho}, the other one at its tuned value"),
    "graphlearn-dp": (
        {"data.n_samples": 100, "privacy.epsilon": 1.0},
        "sweeps data.n_samples over {dp} and privacy.epsilon over {dp-epsilon}, with both "
        "privacy.mechanism values"),
}  # fmt: skip


def _comment(text: str) -> list[str]:
    """A paragraph as TOML comment lines of at most 90 characters."""
    return ["# " + line for line in textwrap.wrap(text, 88)]


def _toml(value: Any) -> str:
    """A value in TOML syntax (strings quoted, lists bracketed)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def _tables(settings: dict[str, Any]) -> list[str]:
    """TOML lines of dotted settings: the top level first, then one table per section."""
    lines = [f"{k} = {_toml(v)}" for k, v in settings.items() if "." not in k]
    sections = dict.fromkeys(k.partition(".")[0] for k in settings if "." in k)
    for section in sections:
        lines += ["", f"[{section}]"]
        lines += [
            f"{k.partition('.')[2]} = {_toml(v)}"
            for k, v in settings.items()
            if k.startswith(section + ".")
        ]
    return lines


def _digits_config(quick: bool, seed: int) -> list[str]:
    """The digits preset's settings, for reading (its data are built in)."""
    grid = digits.GRIDS[quick]
    return [
        *_comment(
            "A Python-defined preset (pgfl.graphlearn.digits) on scikit-learn's bundled "
            "digits, which a `pgfl graphlearn run` configuration cannot name: these are the "
            "settings it runs with, for reading. Every method gets the grid values that "
            f"maximize its mean NMI over {grid['draws']} tuning draws distinct from the "
            "evaluation draw."
        ),
        *_tables(
            {
                "seed": seed,
                "classes": list(digits.CLASSES),
                "clients": digits.N_CLIENTS,
                "images_per_class_per_client": digits.PER_CLASS,
                "tuning.beta": grid["beta"],
                "tuning.rho": grid["rho"],
                "tuning.lambda": grid["lambda"],
                "tuning.draws": grid["draws"],
                "algorithm.rounds": PARAMS["algorithm.rounds"].default,
                "privacy.mechanism": "last_step",
                "privacy.epsilon": list(digits.EPSILONS),
                "privacy.delta": DELTA_BAR,
                "privacy.clip": CLIP,
            }
        ),  # fmt: skip
    ]


def preset_config(name: str, *, quick: bool = False, seed: int = 0) -> str:
    """Graph-learning preset ``name``'s settings as TOML (``pgfl reproduce NAME --print-config``).

    The presets are Python: each sweeps a setting and tunes β, ρ, λ per point on
    separate draws, which no single configuration expresses. A synthetic preset prints
    one point of its sweep as a ``pgfl graphlearn run`` configuration (β, ρ, λ at the
    table's defaults), with the sweep and the tuning in comments; the digits preset its
    settings, for reading.

    >>> text = preset_config("graphlearn-heterogeneity", quick=True)
    >>> "q = 0.8" in text and "data.q over [0.2, 0.5, 0.8]" in text
    True
    """
    lines = [f"# {name}: {TITLES[name]}"]
    if name == "graphlearn-digits":
        return "\n".join([*lines, *_digits_config(quick, seed)]) + "\n"
    spec, what = _POINTS[name]
    point = {k: v(quick) if callable(v) else v for k, v in spec.items()}
    words = {k: str(_swept(k, quick)) for k in SWEEPS}
    tune_reps, eval_reps = _reps(quick)
    at = ", ".join(f"{k} = {_toml(v)}" for k, v in point.items())
    lines += _comment(
        f"A Python-defined preset (pgfl.graphlearn.presets): `pgfl reproduce {name}` "
        f"{what.format(**words)}. For each setting, every method gets its own model.beta "
        "(the federated model also model.rho and model.lambda) tuned on "
        f"{tune_reps} separate draws, then runs {eval_reps} repetitions. Below, one "
        f"setting ({at}) as a `pgfl graphlearn run` configuration, with model.beta, "
        "model.rho and model.lambda at their defaults (the preset tunes them)."
    )
    settings: dict[str, Any] = {"seed": seed, "data.kind": "synthetic", "data.clients": N_CLIENTS}
    for key in ("data.nodes", "data.n_samples", "data.q", "data.sigma_w"):
        settings[key] = point.get(key, PARAMS[key].default)
    settings["data.repetitions"] = eval_reps
    for key in ("model.alpha", "model.beta", "model.rho", "model.lambda", "algorithm.rounds",
                "algorithm.local_steps", "algorithm.local_solver"):  # fmt: skip
        settings[key] = PARAMS[key].default
    if "privacy.epsilon" in point:
        settings.update({
            "privacy.mechanism": "statistic", "privacy.epsilon": point["privacy.epsilon"],
            "privacy.delta": DELTA_BAR, "privacy.clip": CLIP,
        })  # fmt: skip
    return "\n".join([*lines, *_tables(settings)]) + "\n"
