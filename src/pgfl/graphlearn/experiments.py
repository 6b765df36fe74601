"""Synthetic experiments of §V-B as reusable, vectorized pieces (used by the presets and tests).

A *setting* is one point of a sweep: ``q`` (consensus fraction), per-client sample
counts ``N_i``, number of clients and vertices. :func:`draw_setting` draws ``R``
repetitions (graphs + signals) from named RNG streams; :func:`evaluate` runs IGL, FedAvg
and Algorithm 1 (optionally with DP) on all repetitions at once and returns metrics
averaged over repetitions (and clients, for personalized graphs).

**Parameter selection** (§V-A 5): ``α = 2``; every method gets the grid values that give
it the best tuning score, mean MCC minus mean relative error (MCC alone favours very
sparse, large-weight graphs with poor RE), on tuning draws: IGL and FedAvg their ``β``,
the federated model ``(β, ρ, λ)`` ("the value of ρ and λ are determined by grid search";
"all parameters of
baselines are selected as those that achieve the best MCC value"). Tuning uses its own
draws (stream ``"tune"``), never the evaluation draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pgfl.graphlearn.federated import (
    client_distances,
    fedavg_graph_learning,
    federated_graph_learning,
    independent_graph_learning,
)
from pgfl.graphlearn.generators import (
    derived_graphs,
    heterogeneous_graphs,
    rbf_graph,
    smooth_signals,
)
from pgfl.graphlearn.metrics import DEFAULT_THRESHOLD, mcc, relative_error
from pgfl.graphlearn.privacy import calibrate_noise, privacy_report, privatize_statistic
from pgfl.rng import stream

__all__ = [
    "BETA_GRID",
    "LAMBDA_GRID",
    "RHO_GRID",
    "Draws",
    "Params",
    "draw_setting",
    "evaluate",
    "tune",
]

BETA_GRID = (0.01, 0.02, 0.03, 0.05, 0.1, 0.2)
RHO_GRID = (0.1, 0.3, 0.6, 1.0, 2.0)
LAMBDA_GRID = (0.0, 0.02, 0.05, 0.1)


@dataclass(frozen=True)
class Draws:
    """``R`` repetitions of one synthetic setting.

    Attributes:
        signals: ``signals[r][i]`` is client ``i``'s ``[N_i, d]`` array in repetition ``r``.
        zbar: ``[R, I, p]`` average distance vectors (unclipped).
        w_clients: ground-truth personalized graphs ``[R, I, p]``.
        w_con: ground-truth consensus graphs ``[R, p]``.
        counts: ``N_i``, shape ``[I]``.
        positions: vertex positions of the RBF graphs ``[R, d, 2]`` (for pictures).

    """

    signals: list[list[np.ndarray]]
    zbar: np.ndarray
    w_clients: np.ndarray
    w_con: np.ndarray
    counts: np.ndarray
    positions: np.ndarray

    def clipped(self, clip: float) -> np.ndarray:
        """``[R, I, p]`` distance vectors from clipped ``z_{i,n}`` (norm ``≤ clip``)."""
        return np.stack([client_distances(s, clip)[0] for s in self.signals])


@dataclass(frozen=True)
class Params:
    """Model and algorithm settings of one evaluation (paper defaults)."""

    alpha: float = 2.0
    beta: float = 0.03
    beta_igl: float = 0.05
    beta_fedavg: float = 0.02
    rho: float = 0.3
    lam: float = 0.02
    rounds: int = 8
    local_steps: int = 25
    local_solver: str = "backtracking"
    step: float = 5e-4
    momentum: float = 0.9
    threshold: float = DEFAULT_THRESHOLD
    extra: dict[str, Any] = field(default_factory=dict)


def draw_setting(
    seed: int,
    name: str,
    reps: int,
    counts: np.ndarray | list[int],
    *,
    q: float = 0.5,
    d: int = 20,
    qs_derived: np.ndarray | None = None,
    sigma_w: float = 0.1,
) -> Draws:
    """Draw ``reps`` repetitions: an RBF graph, consensus/client graphs, smooth signals.

    With ``qs_derived`` (Table I, heterogeneity scenario) client 1 is the RBF graph and
    client ``k`` keeps a fraction ``qs_derived[k-2]`` of its edges; the "consensus" is then
    client 1's graph. Streams: ``(seed, name + "/graph", r)`` and ``(seed, name + "/signals", r)``.
    """
    counts = np.asarray(counts, dtype=int)
    n_clients = counts.size
    sig, zs, wcl, wcon, pos = [], [], [], [], []
    for r in range(reps):
        g = stream(seed, name + "/graph", r)
        w0, u = rbf_graph(d, g)
        pos.append(u)
        if qs_derived is None:
            con, cl = heterogeneous_graphs(w0, q, n_clients, g)
        else:
            cl = derived_graphs(w0, np.asarray(qs_derived), g)
            con = w0
        s = stream(seed, name + "/signals", r)
        xs = [smooth_signals(cl[i], int(counts[i]), s, sigma_w=sigma_w) for i in range(n_clients)]
        sig.append(xs)
        zs.append(client_distances(xs)[0])
        wcl.append(cl)
        wcon.append(con)
    return Draws(sig, np.stack(zs), np.stack(wcl), np.stack(wcon), counts, np.stack(pos))


def _score(w, truth, axis=None):
    """Tuning criterion: mean MCC minus mean relative error (both metrics of §V-A 3)."""
    return np.mean(mcc(w, truth), axis=axis) - np.mean(relative_error(w, truth), axis=axis)


def _scores(w, truth, thr):
    return mcc(w, truth, thr), relative_error(w, truth)


def tune(draws: Draws, *, rounds: int = 8, local_steps: int = 25, quick: bool = False) -> Params:
    """Grid search of §V-A 5 on tuning draws; returns :class:`Params`.

    Every method gets its own best score (MCC − RE): IGL over ``β``, FedAvg over ``β``, the
    federated model over ``(β, ρ, λ)`` (all ``(ρ, λ)`` pairs of one ``β`` in one
    vectorized run).
    """
    betas = BETA_GRID if not quick else (0.02, 0.03, 0.05)
    rhos = np.array(RHO_GRID if not quick else (0.3, 0.6, 1.0))
    lams = np.array(LAMBDA_GRID if not quick else (0.0, 0.05))
    Z, gt = draws.zbar, draws.w_clients
    igl_score = [_score(independent_graph_learning(Z, beta=b, tol=1e-6), gt) for b in betas]
    beta = betas[int(np.argmax(igl_score))]
    fa_score = []
    for b in betas:
        fa = fedavg_graph_learning(Z, draws.counts, beta=b, rounds=rounds, local_steps=local_steps)
        fa_score.append(_score(np.broadcast_to(fa[..., None, :], gt.shape), gt))
    beta_fa = betas[int(np.argmax(fa_score))]
    # all (ρ, λ) pairs at once on the trial axes [nρ, nλ, R, I, p]
    R = np.broadcast_to(rhos[:, None], (rhos.size, lams.size))
    L = np.broadcast_to(lams[None, :], (rhos.size, lams.size))
    Zg = np.broadcast_to(Z, (rhos.size, lams.size, *Z.shape))
    best = (-np.inf, None)
    for b in betas:
        res = federated_graph_learning(
            Zg, beta=b, rho=R[..., None], lam=L[..., None], rounds=rounds, local_steps=local_steps
        )
        score = _score(res.w_local, gt, axis=(-1, -2))
        i, j = np.unravel_index(int(np.argmax(score)), score.shape)
        if score[i, j] > best[0]:
            best = (score[i, j], (b, rhos[i], lams[j]))
    b_fed, rho, lam = best[1]
    return Params(
        beta=float(b_fed),
        beta_igl=float(beta),
        beta_fedavg=float(beta_fa),
        rho=float(rho),
        lam=float(lam),
        rounds=rounds,
        local_steps=local_steps,
    )


def evaluate(
    draws: Draws,
    params: Params,
    *,
    dp: list[tuple[float, float]] | None = None,
    clip: float = 25.0,
    seed: int = 0,
    per_client: bool = False,
    keep_graphs: bool = False,
    sensitivity: str = "rigorous",
    dp_step: float | None = 5e-4,
    mechanisms: Sequence[str] = ("last_step",),
) -> dict[str, Any]:
    """Run IGL, FedAvg, Algorithm 1 (and DP runs for each ``(ε̄, δ̄)`` in ``dp``) on all reps.

    Returns a dict ``label -> {"mcc", "relative_error", ...}`` with means over repetitions
    (and clients for personalized graphs; with ``per_client`` the per-client means over
    repetitions instead, shape ``[I]``). DP runs, one per ``(ε̄, δ̄)`` and mechanism of
    :mod:`pgfl.graphlearn.privacy` (``last_step``: the paper's noisy last local step;
    ``statistic``: Algorithm 1 on each client's once-privatized ``z̄_i``), are keyed
    ``fedgl_local_dp@ε̄`` and ``fedgl_local_dp_statistic@ε̄`` and carry ``epsilon``,
    ``mechanism`` and the privacy report.
    """
    Z, gt, con, thr = draws.zbar, draws.w_clients, draws.w_con, params.threshold
    axes = 0 if per_client else None
    out: dict[str, Any] = {}

    def put(label, w, truth, **extra):
        m, e = _scores(w, truth, thr)
        out[label] = {
            "mcc": np.mean(m, axis=axes),
            "relative_error": np.mean(e, axis=axes),
            **extra,
        }

    solver = {"local_solver": params.local_solver, "step": params.step, "momentum": params.momentum}
    w_igl = independent_graph_learning(Z, alpha=params.alpha, beta=params.beta_igl, tol=1e-6)
    put("igl", w_igl, gt)
    w_fa = fedavg_graph_learning(
        Z,
        draws.counts,
        alpha=params.alpha,
        beta=params.beta_fedavg,
        rounds=params.rounds,
        local_steps=params.local_steps,
        **solver,
    )
    put("fedavg", np.broadcast_to(w_fa[..., None, :], gt.shape), gt)
    fed = federated_graph_learning(
        Z,
        alpha=params.alpha,
        beta=params.beta,
        rho=params.rho,
        lam=params.lam,
        rounds=params.rounds,
        local_steps=params.local_steps,
        keep_history=True,
        **solver,
    )
    put("fedgl_local", fed.w_local, gt, gamma=fed.gamma.mean(axis=0))
    m, e = _scores(fed.w_con, con, thr)
    out["fedgl_consensus"] = {"mcc": float(np.mean(m)), "relative_error": float(np.mean(e))}
    out["_convergence"] = {"fedgl": fed.objective.mean(axis=1)}
    if keep_graphs:
        out["_graphs"] = {
            "igl": w_igl,
            "fedavg": w_fa,
            "fedgl_local": fed.w_local,
            "fedgl_consensus": fed.w_con,
        }
    for mech in mechanisms if dp else ():
        _evaluate_dp(draws, params, mech, dp, clip, seed, sensitivity, dp_step, put, out,
                     keep_graphs)  # fmt: skip
    return out


def _evaluate_dp(draws, params, mech, dp, clip, seed, sensitivity, dp_step, put, out, keep):
    """The DP runs of one mechanism, one per ``(ε̄, δ̄)``, recorded as :func:`evaluate` does."""
    Zc = draws.clipped(clip)
    solver = {"local_solver": params.local_solver, "step": params.step, "momentum": params.momentum}
    common = dict(alpha=params.alpha, beta=params.beta, rho=params.rho, lam=params.lam,
                  rounds=params.rounds, local_steps=params.local_steps, **solver)  # fmt: skip
    suffix = "" if mech == "last_step" else f"_{mech}"
    for k, (eps_bar, delta_bar) in enumerate(dp):
        cal = calibrate_noise(
            eps_bar, delta_bar, params.rounds, draws.counts, clip,
            sensitivity=sensitivity, mechanism=mech,
        )  # fmt: skip
        if mech == "statistic":  # one noisy z̄ per client; the run is post-processing
            noisy = privatize_statistic(Zc, cal, stream(seed, "graphlearn/dp-statistic", k))
            res = federated_graph_learning(noisy, **common)
        else:
            res = federated_graph_learning(
                Zc, noise_std=cal.sigma, rng=stream(seed, "graphlearn/dp-noise", k),
                dp_step=dp_step, **common,
            )  # fmt: skip
        label = f"{suffix}@{eps_bar:g}"
        put(f"fedgl_local_dp{label}", res.w_local, draws.w_clients, epsilon=eps_bar,
            mechanism=mech, privacy=privacy_report(cal))  # fmt: skip
        out["_convergence"][f"fedgl_dp{label}"] = res.objective.mean(axis=1)
        if keep:
            out["_graphs"][f"fedgl_dp{label}"] = res.w_local
