"""Federated learning of personalized graphs and a consensus graph (Algorithm 1), and baselines.

Everything is vectorized over clients *and* over any leading "trial" axes (repetitions,
sweep values): ``zbar`` has shape ``[..., I, p]``; one call runs every trial at once.

**Algorithm 1** (eqs. 13–20). Round ``t``: client ``i`` runs ``K_i`` accelerated projected
gradient steps on ``f_i(w) = g_i(w) + (ργ_i/2)‖w − w_con‖²`` (eqs. 14–16),

    w_ex = w^{k} + ξ (w^{k} − w^{k−1}),
    w̌ = w_ex − η (∇g_i(w_ex) + ργ_i (w_ex − w_con)),
    w^{k+1} = max(w̌, 0),

starting from where it stopped in the previous round (momentum carries over, line 5).
The server forms ``w_con = prox_{μ‖·‖₁}(Σ γ_i w_i / Σ γ_i)`` with ``μ = λ/(ρ Σ γ_i)``
(eq. 19) and ``γ_i = 1/(‖w_i − w_con‖ + ε_γ)`` (eq. 20); ``γ_i⁰ = 1/I``.

**DP variants** (:mod:`pgfl.graphlearn.privacy`). The paper's (eqs. 25–28,
``noise_std``): in each client's last local step of every round Gaussian noise
``s_i^t ~ N(0, σ_i² I_p)`` is added to ``∇g_i`` (eq. 26); with clipping the data term
uses clipped distance vectors ``z̃_{i,n}`` (pass the clipped ``zbar``). The client sends
the unprojected ``w̃``; the server projects it (eq. 28), which equals the client's
projected state, so the code keeps one array. Its ε does not cover the first ``K_i − 1``
steps. The rigorous one needs nothing here: run this function, without ``noise_std``, on
the once-privatized statistic ``privatize_statistic(zbar, ...)`` — every step is then
post-processing.

**Starting point.** Every graph starts at the data-independent zero-data optimum
``sqrt(α/(2β(d−1))) 1`` (Theorem 3 needs a starting point independent of the data).

**Baselines.** IGL: each client solves eq. 7 alone (to convergence, :func:`solve_apgd`).
FedAvg (eq. 36): one global graph; each round every client runs ``K_i`` APGD steps on its
own ``g_i`` from the global graph and the server averages with weights ``N_i/N``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from pgfl.graphlearn.params import PARAMS
from pgfl.graphlearn.smoothness import (
    clip_factors,
    degree_operator,
    local_cost,
    local_gradient,
    num_nodes,
    pairwise_sq_distances,
    validate_signals,
    zero_data_optimum,
)
from pgfl.graphlearn.solver import solve_apgd
from pgfl.param import Param
from pgfl.validation import ConfigError, check_each, check_finite, check_real

__all__ = [
    "FedGLResult",
    "client_distances",
    "consensus_update",
    "fedavg_graph_learning",
    "federated_graph_learning",
    "federated_objective",
    "independent_graph_learning",
    "soft_threshold",
]


def client_distances(
    signals: Sequence[np.ndarray], clip: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-client (clipped) average distance vectors ``z̄_i`` and sample counts ``N_i``.

    Args:
        signals: one array ``[N_i, d]`` per client (signals as rows, nodes as columns);
            all clients must observe the same ``d`` nodes.
        clip: clipping norm ``C`` of the per-signal ``z_{i,n}`` (§IV-D), or None.

    Returns:
        ``(zbar [I, p], counts [I])``.

    >>> z, n = client_distances([np.array([[0.0, 1.0, 3.0]]), np.zeros((2, 3))])
    >>> np.round(z, 12).tolist(), n.tolist()
    ([[1.0, 9.0, 4.0], [0.0, 0.0, 0.0]], [1, 2])

    """
    if len(signals) < 1:
        raise ConfigError("signals must hold at least one client; got 0")
    arrs = [validate_signals(x, f"signals[{i}]") for i, x in enumerate(signals)]
    d0 = arrs[0].shape[1]
    for i, x in enumerate(arrs):
        if x.shape[1] != d0:
            raise ConfigError(
                f"clients must share the same node set: client {i} has {x.shape[1]} nodes, "
                f"client 0 has {d0}"
            )
    zs = [pairwise_sq_distances(x, None if clip is None else clip_factors(x, clip)) for x in arrs]
    return np.stack(zs), np.array([x.shape[0] for x in arrs])


def soft_threshold(v: np.ndarray, mu: np.ndarray | float) -> np.ndarray:
    """``prox_{μ‖·‖₁}(v) = sign(v) max(|v| − μ, 0)`` (eq. 19), ``μ`` broadcast on the last axis.

    >>> soft_threshold(np.array([3.0, -0.5, 1.0]), 1.0)
    array([ 2., -0.,  0.])
    """
    mu = np.asarray(mu, dtype=float)
    if mu.ndim:
        mu = mu[..., None]
    return np.sign(v) * np.maximum(np.abs(v) - mu, 0.0)


def consensus_update(
    w_local: np.ndarray, gamma: np.ndarray, rho: np.ndarray | float, lam: np.ndarray | float
) -> np.ndarray:
    """Server step (eq. 19): ``prox_{λ/(ρ Σγ)}(Σ γ_i w_i / Σ γ_i)``, ``[..., I, p] -> [..., p]``.

    >>> consensus_update(np.array([[1.0, 0.2], [3.0, 0.0]]), np.array([1.0, 1.0]), 1.0, 0.4)
    array([1.8, 0. ])
    """
    cg = gamma.sum(axis=-1)
    avg = np.sum(gamma[..., None] * w_local, axis=-2) / cg[..., None]
    return soft_threshold(avg, np.asarray(lam) / (np.asarray(rho) * cg))


def federated_objective(
    w_local: np.ndarray, w_con: np.ndarray, zbar: np.ndarray, alpha: float, beta: float, rho, lam
) -> np.ndarray:
    """Objective of eq. 8: ``Σ_i g_i(w_i) + ρ Σ_i ‖w_i − w_con‖ + λ‖w_con‖₁`` (shape ``[...]``)."""
    g = local_cost(w_local, zbar, alpha, beta).sum(axis=-1)
    dist = np.linalg.norm(w_local - w_con[..., None, :], axis=-1).sum(axis=-1)
    return g + np.asarray(rho) * dist + np.asarray(lam) * np.abs(w_con).sum(axis=-1)


@dataclass(frozen=True)
class FedGLResult:
    """Output of :func:`federated_graph_learning`.

    Attributes:
        w_local: personalized graphs ``w_i^T``, shape ``[..., I, p]``.
        w_con: consensus graph ``w_con^T``, shape ``[..., p]``.
        gamma: adaptive weights ``γ_i^T`` (eq. 20), shape ``[..., I]``.
        objective: eq. 8 after each round (row 0: start), shape ``[T + 1, ...]``.
        gamma_history: ``γ^t`` for ``t = 0..T``, shape ``[T + 1, ..., I]``.
        local_history: ``w_i^t`` per round if requested (``[T + 1, ..., I, p]``), else None.
        con_history: ``w_con^t`` per round if requested (``[T + 1, ..., p]``), else None.

    """

    w_local: np.ndarray
    w_con: np.ndarray
    gamma: np.ndarray
    objective: np.ndarray
    gamma_history: np.ndarray
    local_history: np.ndarray | None = None
    con_history: np.ndarray | None = None


#: The settings of the graph-learning table (:data:`pgfl.graphlearn.params.PARAMS`) that
#: the functions' arguments mirror, by argument: their ranges are read from there.
_SETTINGS = {
    "alpha": "model.alpha",
    "beta": "model.beta",
    "rho": "model.rho",
    "lam": "model.lambda",
    "rounds": "algorithm.rounds",
    "local_steps": "algorithm.local_steps",
    "local_solver": "algorithm.local_solver",
    "step": "algorithm.step",
    "momentum": "algorithm.momentum",
    "dp_step": "privacy.dp_step",
}


def _arg(name: str) -> Param:
    """The setting that argument ``name`` mirrors, under the argument's name.

    >>> _arg("lam").check(-1.0)
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: lam must be a real number in [0, inf); got -1.0
    """
    return PARAMS[_SETTINGS[name]].named(name)


def _check_common(zbar, alpha, beta, rounds, local_steps, step, momentum):
    Z = np.asarray(zbar, dtype=float)
    if Z.ndim < 2:
        raise ConfigError(f"zbar must have shape [..., I clients, p]; got shape {Z.shape}")
    num_nodes(Z.shape[-1])
    check_finite("zbar", Z)
    a = _arg("alpha").check(alpha)
    b = _arg("beta").check(beta)
    T = _arg("rounds").check(rounds)
    K = check_each(
        _arg("local_steps").check, np.broadcast_to(np.asarray(local_steps), (Z.shape[-2],))
    )
    eta = _arg("step").check(step)
    xi = _arg("momentum").check(momentum)
    return Z, a, b, T, K.astype(int), eta, xi


def _check_noise(noise_std, rng, dp_step, shape):
    """``σ_i`` of eq. 26 broadcast to ``shape`` (``[..., I]``; None: no noise), checked."""
    if noise_std is None:
        return None
    sigma = np.broadcast_to(np.asarray(noise_std, dtype=float), shape)
    check_each(partial(check_real, "noise_std", lo=0.0), sigma)
    if rng is None:
        raise ConfigError("rng is required when noise_std is given")
    if dp_step is not None:
        _arg("dp_step").check(dp_step)
    return sigma


def federated_graph_learning(
    zbar: np.ndarray,
    *,
    alpha: float = 2.0,
    beta: float = 1.5,
    rho: np.ndarray | float = 0.3,
    lam: np.ndarray | float = 0.2,
    rounds: int = 8,
    local_steps: int | np.ndarray = 25,
    local_solver: str = "backtracking",
    step: float = 5e-4,
    momentum: float = 0.9,
    eps_gamma: float = 1e-8,
    noise_std: np.ndarray | float | None = None,
    rng: np.random.Generator | None = None,
    dp_step: float | None = 5e-4,
    keep_history: bool = False,
) -> FedGLResult:
    """Run Algorithm 1 (optionally with the DP noise of eq. 26) on stacked client data.

    Two local solvers run the ``K_i`` local steps of round ``t`` on
    ``f_i = g_i + (ργ_i/2)‖w − w_con‖²`` (eq. 13):

    * ``"fixed"``: eqs. 14–16 verbatim: fixed step ``η_w``, constant momentum ``ξ``
      carried across rounds (line 5 of Algorithm 1). Assumption 3 needs
      ``η_w ≤ 1/L_i``; the log-degree curvature ``α Sᵀdiag(1/deg²)S`` is unbounded near
      zero degrees, so too large a step diverges (reported as an error) and too small a
      step (the paper's ``5e-4`` on data of another scale) leaves ``T·K`` steps far from
      the solution of eq. 13.
    * ``"backtracking"`` (default): the same accelerated projected gradient with the step
      set per client by backtracking on the local Lipschitz constant (warm-started
      across rounds) and function-value restart (:func:`solve_apgd`), i.e. Assumption 3
      enforced adaptively; momentum restarts each round.

    With ``noise_std`` the last of the ``K_i`` steps is the noisy step of eqs. 25–27:
    ``w̃ = w_ex − η (∇g_i(w_ex) + s_i^t + ργ_i (w_ex − w_con))`` with
    ``s_i^t ~ N(0, σ_i² I)`` (``w_ex`` extrapolated with ``ξ`` for ``"fixed"``; the
    backtracking solver restarts momentum, so ``w_ex = w``). Its step is ``dp_step``
    (default the paper's ``η_w = 5e-4``; ``None``: the solver's own step). Theorem 3's
    guarantee does not depend on this step (sensitivity and noise both scale with it),
    but the noise left in the released graph is ``η σ_i`` per edge — see
    :mod:`pgfl.graphlearn.privacy` for what this says about the guarantee.

    Args:
        zbar: per-client average (clipped, for DP) distance vectors, ``[..., I, p]``.
        alpha: ``α`` of eq. 7 (paper: 2).
        beta: ``β`` of eq. 7.
        rho: ``ρ > 0`` of eq. 8; scalar or array over the trial axes.
        lam: ``λ ≥ 0`` of eq. 8; scalar or array over the trial axes.
        rounds: ``T`` (paper: 8).
        local_steps: ``K_i^t`` (int or one per client; paper: 25).
        local_solver: ``"backtracking"`` or ``"fixed"`` (see above).
        step: ``η_w`` for ``"fixed"`` (paper: 5e-4).
        momentum: ``ξ ∈ [0, 1]`` for ``"fixed"`` (paper: 0.9).
        eps_gamma: ``ε_γ`` of eq. 20.
        noise_std: ``σ_i`` of the Gaussian noise of eq. 26; scalar or ``[..., I]``; ``None``
            is Algorithm 1 without privacy.
        rng: generator for the noise (required when ``noise_std`` is given).
        dp_step: step of the noisy last local step (see above).
        keep_history: keep ``w_i^t`` and ``w_con^t`` for every round.

    Returns:
        :class:`FedGLResult`.

    >>> z = np.tile(np.array([0.1, 5.0, 5.0]), (2, 1))   # two clients, same data
    >>> r = federated_graph_learning(z, beta=0.5)
    >>> bool(np.allclose(r.w_local[0], r.w_local[1])), bool(r.w_local[0, 0] > r.w_local[0, 1])
    (True, True)

    """
    Z, a, b, T, K, eta, xi = _check_common(zbar, alpha, beta, rounds, local_steps, step, momentum)
    solver = _arg("local_solver").check(local_solver)
    lead, I, p = Z.shape[:-2], Z.shape[-2], Z.shape[-1]
    d = num_nodes(p)
    rho_a = check_each(_arg("rho").check, np.broadcast_to(np.asarray(rho, dtype=float), lead))
    lam_a = check_each(_arg("lam").check, np.broadcast_to(np.asarray(lam, dtype=float), lead))
    check_real("eps_gamma", eps_gamma, lo=0.0)
    sigma = _check_noise(noise_std, rng, dp_step, (*lead, I))
    c0 = zero_data_optimum(d, a, b)
    floor = 1e-2 * c0 * (d - 1)  # degree floor of the fixed-step gradient
    w = np.full(Z.shape, c0)
    w_prev = w.copy()
    w_con = np.full((*lead, p), c0)
    gamma = np.full((*lead, I), 1.0 / I)
    lip = None
    objs = [federated_objective(w, w_con, Z, a, b, rho_a, lam_a)]
    gammas = [gamma.copy()]
    loc_h = [w.copy()] if keep_history else None
    con_h = [w_con.copy()] if keep_history else None
    n_clean = K - (0 if sigma is None else 1)  # steps before the noisy one
    for t in range(T):
        kappa = rho_a[..., None] * gamma  # [..., I]
        center = np.broadcast_to(w_con[..., None, :], Z.shape)
        if solver == "backtracking":
            w, lip = _local_backtracking(w, Z, a, b, kappa, center, n_clean, lip)
            step_now = 1.0 / lip
        else:
            w, w_prev = _local_fixed(w, w_prev, Z, a, b, kappa, center, n_clean, eta, xi, floor)
            step_now = np.full(Z.shape[:-1], eta)
        if sigma is not None:
            # eq. 25 (extrapolation; the backtracking solver restarts momentum each round)
            w_ex = w + xi * (w - w_prev) if solver == "fixed" else w
            noise = sigma[..., None] * rng.standard_normal(Z.shape)
            grad = local_gradient(w_ex, Z, a, b, floor) + noise  # eq. 26
            eta_dp = step_now[..., None] if dp_step is None else dp_step
            w_tilde = w_ex - eta_dp * (grad + kappa[..., None] * (w_ex - center))
            w_prev = w
            # eqs. 27/28: projection; a 1e-12·c₀ floor keeps every degree positive (log domain)
            w = np.maximum(w_tilde, 1e-12 * c0)
        if not np.isfinite(w).all():
            raise ConfigError(
                f"federated graph learning diverged in round {t}: step={eta:g} is too large "
                "for the curvature of the log-degree term (Assumption 3: step <= 1/L_i)"
            )
        w_con = consensus_update(w, gamma, rho_a, lam_a)
        gamma = 1.0 / (np.linalg.norm(w - w_con[..., None, :], axis=-1) + eps_gamma)
        objs.append(federated_objective(w, w_con, Z, a, b, rho_a, lam_a))
        gammas.append(gamma.copy())
        if keep_history:
            loc_h.append(w.copy())
            con_h.append(w_con.copy())
    return FedGLResult(
        w_local=w,
        w_con=w_con,
        gamma=gamma,
        objective=np.array(objs),
        gamma_history=np.array(gammas),
        local_history=None if loc_h is None else np.array(loc_h),
        con_history=None if con_h is None else np.array(con_h),
    )


def _local_backtracking(w, Z, a, b, kappa, center, K, lip):
    """``K_i`` APGD iterations with backtracking for every client (flattened batch)."""
    shape = w.shape
    flat = (-1, shape[-1])
    out = w.copy()
    lip_out = np.empty(shape[:-1]) if lip is None else lip.copy()
    kk = np.broadcast_to(K, shape[:-1])
    for k_val in np.unique(K):
        if k_val <= 0:
            if lip is None:
                deg = np.maximum(degree_operator(w, num_nodes(shape[-1])).min(axis=-1), 1e-12)
                lip_out = 4 * b + 2 * a * (num_nodes(shape[-1]) - 1) / deg**2 + kappa
            continue
        sel = kk == k_val
        res = solve_apgd(
            Z[sel].reshape(flat),
            a,
            b,
            kappa=kappa[sel].ravel(),
            center=center[sel].reshape(flat),
            w0=w[sel].reshape(flat),
            max_iter=int(k_val),
            tol=0.0,
            lipschitz0=None if lip is None else lip[sel].ravel(),
        )
        out[sel] = res.w
        lip_out[sel] = res.lipschitz
    return out, lip_out


def _local_fixed(w, w_prev, Z, a, b, kappa, center, K, eta, xi, floor):
    """Eqs. 14–16 with a fixed step and constant momentum, ``K_i`` steps per client."""
    uniform = bool(np.all(K == K[0]))
    for k in range(int(K.max())):
        w_ex = w + xi * (w - w_prev)
        grad = local_gradient(w_ex, Z, a, b, floor) + kappa[..., None] * (w_ex - center)
        w_new = np.maximum(w_ex - eta * grad, 0.0)
        if uniform:
            w_prev, w = w, w_new
        else:
            act = (k < K)[:, None]
            w_prev, w = np.where(act, w, w_prev), np.where(act, w_new, w)
    return w, w_prev


def independent_graph_learning(
    zbar: np.ndarray,
    *,
    alpha: float = 2.0,
    beta: float = 1.5,
    tol: float = 1e-8,
    max_iter: int = 5000,
) -> np.ndarray:
    """IGL baseline: every client (and trial) solves eq. 7 alone; ``[..., I, p] -> [..., I, p]``."""
    Z = np.asarray(zbar, dtype=float)
    a = _arg("alpha").check(alpha)
    b = _arg("beta").check(beta)
    flat = Z.reshape(-1, Z.shape[-1])
    return solve_apgd(flat, a, b, tol=tol, max_iter=max_iter).w.reshape(Z.shape)


def fedavg_graph_learning(
    zbar: np.ndarray,
    counts: np.ndarray,
    *,
    alpha: float = 2.0,
    beta: float = 1.5,
    rounds: int = 8,
    local_steps: int | np.ndarray = 25,
    local_solver: str = "backtracking",
    step: float = 5e-4,
    momentum: float = 0.9,
) -> np.ndarray:
    """FedAvg baseline for eq. 36: one global graph for all clients; returns ``[..., p]``.

    Each round, every client starts from the global graph (momentum reset), runs ``K_i``
    APGD steps (eqs. 14–16 without the consensus term; ``local_solver`` as in
    :func:`federated_graph_learning`) on its own ``g_i``, and the server averages the
    local graphs with weights ``N_i / N`` (``counts``: ``[I]`` or ``[..., I]``).
    """
    Z, a, b, T, K, eta, xi = _check_common(zbar, alpha, beta, rounds, local_steps, step, momentum)
    solver = _arg("local_solver").check(local_solver)
    n = np.broadcast_to(np.asarray(counts, dtype=float), Z.shape[:-1])
    check_each(partial(check_real, "counts", lo=0.0, lo_open=True), n)
    share = n / n.sum(axis=-1, keepdims=True)
    d = num_nodes(Z.shape[-1])
    c0 = zero_data_optimum(d, a, b)
    w_glob = np.full((*Z.shape[:-2], Z.shape[-1]), c0)
    zero = np.zeros(Z.shape[:-1])
    lip = None
    for _t in range(T):
        w = np.repeat(w_glob[..., None, :], Z.shape[-2], axis=-2)
        if solver == "backtracking":
            w, lip = _local_backtracking(w, Z, a, b, zero, w, K, lip)
        else:
            w, _ = _local_fixed(w, w.copy(), Z, a, b, zero, w, K, eta, xi, 1e-2 * c0 * (d - 1))
        w_glob = np.sum(share[..., None] * w, axis=-2)
        if not np.isfinite(w_glob).all():
            raise ConfigError(f"FedAvg graph learning diverged: step={eta:g} is too large")
    return w_glob
