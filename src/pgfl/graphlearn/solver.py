"""Centralized smoothness-based graph learning by accelerated projected gradient (APGD).

Three layers (as scikit-learn's graphical lasso): the batched functional solver
:func:`solve_apgd` over stacked problems ``zbar[B, p]``; the public function
:func:`learn_graph` on signals; the thin estimator :class:`SmoothGraphLearner` whose
learned results end in ``_``.

The objective is ``F(w) = g(w) + (κ/2)‖w − c‖²`` on ``w ≥ 0`` with ``g`` of eq. 7 and an
optional proximal pull towards a centre ``c`` (the ``ργ_i/2 ‖w_i − w_con‖²`` of eq. 13;
``κ = 0`` gives plain eq. 7). The iteration is eqs. 14–16 (extrapolation, gradient step,
projection) with two safeguards a fixed step cannot give for the log-barrier term, whose
curvature ``α Sᵀ diag(1/(Sw)²) S`` is unbounded near zero degrees:

* **Backtracking** on the local Lipschitz constant (Beck & Teboulle 2009): start from
  Proposition 1's ``L = 4β + 2α(d−1)/deg_min² + κ`` at the initial point, accept a step
  when ``F(w⁺) ≤ F(y) + ⟨∇F(y), w⁺ − y⟩ + (L/2)‖w⁺ − y‖²``, else double ``L``; try
  ``0.8 L`` at the next iteration so the step can grow again.
* **Function-value restart** (O'Donoghue & Candès 2015): if ``F(w⁺) > F(w_k)`` the
  momentum is reset and the step is redone from ``w_k``, which makes the objective
  sequence monotonically non-increasing.

Momentum is Nesterov/FISTA's ``(t_k − 1)/t_{k+1}``; the problem is ``4β``-strongly convex,
so with restarts the convergence is linear.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pgfl.extras import available
from pgfl.graphlearn.smoothness import (
    _degree_matrix,
    degree_operator,
    local_cost,
    num_nodes,
    pairwise_sq_distances,
    validate_signals,
    vec_to_mat,
    zero_data_optimum,
)
from pgfl.validation import ConfigError, check_int, check_real

try:  # scipy's compiled CSR kernel, called directly (the public ``S @ w`` costs ~3× more)
    from scipy.sparse._sparsetools import csr_matvec as _csr_matvec
except ImportError:  # pragma: no cover - scipy moved it: fall back to the public product
    _csr_matvec = None

__all__ = ["APGDResult", "SmoothGraphLearner", "learn_graph", "objective", "solve_apgd"]

#: Compiled one-pass evaluations (numba, extra ``fast``) for a single problem: ``None`` =
#: whenever numba is importable; ``False`` forces the NumPy path (tests compare the two).
COMPILED: bool | None = None


def _kernels():
    """:mod:`pgfl.graphlearn._kernels` if the compiled path is on and numba importable."""
    if COMPILED is False or not available("numba"):
        return None
    from pgfl.graphlearn import _kernels  # lazy: numba kernels, only on the compiled path

    return _kernels


def objective(
    w: np.ndarray,
    zbar: np.ndarray,
    alpha: float,
    beta: float,
    kappa: np.ndarray | float = 0.0,
    center: np.ndarray | None = None,
) -> np.ndarray:
    """``F(w) = g(w) + (κ/2)‖w − c‖²`` (eq. 13 with ``κ = ργ_i``), batched; ``+inf`` off-domain."""
    f = local_cost(w, zbar, alpha, beta)
    if center is not None:
        diff = w - center
        f = f + 0.5 * np.asarray(kappa) * np.sum(diff * diff, axis=-1)
    return f


class _Model:
    """``F`` and ``∇F`` of :func:`objective` for the solver's stack, with few array passes.

    The same formulas as :func:`~pgfl.graphlearn.smoothness.local_cost_and_gradient` (eq. 7
    and the gradient under eq. 16, plus the proximal term), but the degree products go
    straight to the sparse kernel and row sums are single ``einsum`` passes: at 100
    vertices the solver's time was in per-call overhead, not arithmetic.
    """

    def __init__(self, d, Z, alpha, beta, kappa, center):
        self.d, self.Z, self.alpha, self.beta = d, Z, alpha, beta
        self.kappa, self.center = kappa, center
        self.S, self.ST = _degree_matrix(d)
        self.two_z = 2.0 * Z
        # one problem: one compiled pass over the edges per evaluation (numba, if present)
        self.k = _kernels() if Z.shape[0] == 1 else None
        if self.k is not None:
            self.args = (
                np.ascontiguousarray(self.two_z[0]),
                np.zeros(Z.shape[1]) if center is None else np.ascontiguousarray(center[0]),
                d, float(alpha), float(beta),
                0.0 if center is None else float(kappa[0]),
            )  # fmt: skip

    @staticmethod
    def _mv(M, v):
        if v.shape[0] == 1 and _csr_matvec is not None:
            out = np.zeros(M.shape[0])
            _csr_matvec(M.shape[0], M.shape[1], M.indptr, M.indices, M.data, v[0], out)
            return out[None, :]
        return np.ascontiguousarray((M @ v.T).T)

    def degrees(self, w):
        return self._mv(self.S, w)

    def _cost_from(self, w, deg):
        with np.errstate(divide="ignore", invalid="ignore"):
            logdeg = np.log(np.where(deg > 0, deg, 0.0))  # −inf off-domain ⇒ F = +inf
        f = np.einsum("bp,bp->b", self.two_z + 2.0 * self.beta * w, w) - self.alpha * logdeg.sum(
            axis=-1
        )
        if self.center is not None:
            diff = w - self.center
            f = f + 0.5 * self.kappa * np.einsum("bp,bp->b", diff, diff)
        return f

    def cost(self, w):
        if self.k is not None:
            return np.array([self.k.cost(np.ascontiguousarray(w[0]), *self.args)])
        return self._cost_from(w, self.degrees(w))

    def trial(self, y, scaled, gy, H, L):
        """Candidate ``P(y − scaled/L)``, ``F(cand)`` and ``⟨g, Δ⟩ + (L/2)‖Δ‖²_H`` per problem."""
        if self.k is not None:
            cand = np.empty_like(y)
            fc, b = self.k.trial(y[0], scaled[0], gy[0], H[0], float(L[0]), *self.args, cand[0])
            return cand, np.array([fc]), np.array([b])
        cand = np.maximum(y - scaled / L[:, None], 0.0)
        diff = cand - y
        b = np.einsum("bp,bp->b", gy + (0.5 * L)[:, None] * H * diff, diff)
        return cand, self.cost(cand), b

    def cost_grad(self, w):
        if self.k is not None:
            g = np.empty_like(w)
            f = self.k.cost_grad(np.ascontiguousarray(w[0]), *self.args, g[0])
            return np.array([f]), g
        deg = self.degrees(w)
        f = self._cost_from(w, deg)
        with np.errstate(over="ignore", invalid="ignore"):
            inv = 1.0 / np.maximum(deg, np.finfo(float).tiny)
            g = self.two_z + 4.0 * self.beta * w - self.alpha * self._mv(self.ST, inv)
        if self.center is not None:
            g = g + self.kappa[:, None] * (w - self.center)
        return f, g


@dataclass(frozen=True)
class APGDResult:
    """Result of :func:`solve_apgd`.

    Attributes:
        w: solutions, shape ``[B, p]``.
        costs: objective after each iteration, shape ``[n_iter + 1, B]`` (row 0: start).
        n_iter: iterations run.
        converged: per problem, whether the stopping rule was met, shape ``[B]``.
        lipschitz: final backtracked Lipschitz estimates, shape ``[B]``.

    """

    w: np.ndarray
    costs: np.ndarray
    n_iter: int
    converged: np.ndarray
    lipschitz: np.ndarray


def solve_apgd(
    zbar: np.ndarray,
    alpha: float,
    beta: float,
    *,
    kappa: np.ndarray | float = 0.0,
    center: np.ndarray | None = None,
    w0: np.ndarray | None = None,
    max_iter: int = 5000,
    tol: float = 1e-8,
    restart: bool = True,
    lipschitz0: np.ndarray | float | None = None,
    precondition: bool = True,
    metric_every: int = 25,
    check_every: int = 5,
) -> APGDResult:
    """Minimize ``F(w) = g(w) + (κ/2)‖w − c‖²`` over ``w ≥ 0`` for a stack of problems.

    Args:
        zbar: average pairwise squared distances, shape ``[B, p]`` (or ``[p]``).
        alpha: log-degree weight ``α > 0``.
        beta: ridge weight ``β > 0``.
        kappa: proximal weight(s) ``κ ≥ 0`` (scalar or ``[B]``); needs ``center``.
        center: proximal centre ``c``, shape ``[B, p]`` or ``[p]``.
        w0: starting point(s) with positive degrees; default the zero-data optimum
            ``sqrt(α/(2β(d−1))) 1`` (see :func:`~pgfl.graphlearn.smoothness.zero_data_optimum`).
        max_iter: iteration cap.
        tol: stop a problem when its natural KKT residual
            ``‖min(w, ∇F(w))‖_∞ = ‖w − P(w − ∇F(w))‖_∞`` is at most
            ``tol · max(1, 2‖z̄‖_∞)`` (zero iff ``w`` is optimal; a relative-step rule
            stops falsely when backtracking has made the step tiny), or when no step
            decreases the objective any more (round-off floor, about ``1e-7`` relative);
            ``converged`` then reports whether the residual is below ``max(tol, 1e-6)``.
        restart: function-value restart (makes the objective monotone).
        lipschitz0: starting Lipschitz estimate(s) (warm start); default Proposition 1
            at the minimum degree of ``w0`` (``1`` with ``precondition``).
        precondition: scale the step per edge by the inverse Hessian diagonal
            ``h_e = α(1/deg_j² + 1/deg_k²) + 4β + κ`` (projection onto ``w ≥ 0``
            commutes with a positive diagonal metric). Vertices whose optimal degree is
            tiny (isolated in the truth) make the problem ill-conditioned; the metric
            removes most of it. ``L`` is then a multiplier of ``h`` (backtracked the same way).
        metric_every: refresh the metric at the current point every so many iterations
            (momentum restarts on refresh).
        check_every: evaluate the KKT residual (one extra gradient) every so many
            iterations (and on a stall).

    Returns:
        :class:`APGDResult`; a 1-D ``zbar`` gives ``w`` of shape ``[1, p]``.

    >>> z = np.array([0.0, 10.0, 10.0])     # vertices 0 and 1 are close, 2 is far
    >>> r = solve_apgd(z, alpha=1.0, beta=1.0)
    >>> bool(r.w[0, 0] > r.w[0, 1]) and bool(np.isclose(r.w[0, 1], r.w[0, 2]))
    True

    """
    Z = np.atleast_2d(np.asarray(zbar, dtype=float))
    B, p = Z.shape
    d = num_nodes(p)
    kap = np.broadcast_to(np.asarray(kappa, dtype=float), (B,)).copy()
    C = None if center is None else np.broadcast_to(np.asarray(center, dtype=float), (B, p))
    if w0 is None:
        x = np.full((B, p), zero_data_optimum(d, alpha, beta))
    else:
        x = np.broadcast_to(np.asarray(w0, dtype=float), (B, p)).copy()
    run = _Apgd(_Model(d, Z, alpha, beta, kap, C), x, precondition)
    if lipschitz0 is None and precondition:
        run.L = np.ones(B)
    elif lipschitz0 is None:
        deg0 = np.maximum(degree_operator(x, d).min(axis=-1), 1e-12)
        run.L = 4.0 * beta + 2.0 * alpha * (d - 1) / deg0**2 + kap
    else:
        run.L = np.broadcast_to(np.asarray(lipschitz0, dtype=float), (B,)).copy()
    kkt_scale = np.maximum(1.0, 2.0 * np.max(np.abs(Z), axis=-1))
    costs = [run.fx.copy()]
    converged = np.zeros(B, dtype=bool)
    it = 0
    while it < max_iter and run.active.any():
        it += 1
        if precondition and it % metric_every == 0:  # refresh the metric, restart momentum
            run.refresh()
        check = it % check_every == 0 or it == max_iter
        resid, stalled = run.iterate(restart, check)
        done = run.active & ((resid <= tol * kkt_scale) | stalled)
        converged |= done & (resid <= max(tol, 1e-6) * kkt_scale)
        run.active &= ~done
        costs.append(run.fx.copy())
    return APGDResult(
        w=run.x, costs=np.array(costs), n_iter=it, converged=converged, lipschitz=run.L
    )


class _Apgd:
    """The state of :func:`solve_apgd`: iterate, momentum, metric, step sizes, active set."""

    def __init__(self, model: _Model, x: np.ndarray, precondition: bool) -> None:
        self.model, self.x, self.precondition = model, x, precondition
        self.fx = model.cost(x)
        if not np.all(np.isfinite(self.fx)):
            raise ConfigError("w0 must give every vertex a positive degree (finite objective)")
        B = x.shape[0]
        self.H = self.metric(x)
        self.t = np.ones(B)
        self.x_prev = x.copy()
        self.active = np.ones(B, dtype=bool)
        self.L = np.ones(B)

    def metric(self, v: np.ndarray) -> np.ndarray:
        """The diagonal metric ``h_e = α(1/deg_j² + 1/deg_k²) + 4β + κ`` at ``v`` (or 1)."""
        m = self.model
        if not self.precondition:
            return np.ones_like(v)
        inv2 = 1.0 / np.maximum(m.degrees(v), 1e-300) ** 2
        return m.alpha * m._mv(m.ST, inv2) + (4.0 * m.beta + m.kappa)[:, None]

    def refresh(self) -> None:
        """The metric at the current point; momentum restarted."""
        self.H = self.metric(self.x)
        self.t = np.ones_like(self.t)
        self.x_prev = self.x.copy()

    def step_from(self, y, L_try, mask, fy=None, gy=None):
        """Backtracked projected gradient step from ``y`` for the problems in ``mask``."""
        if fy is None:
            fy, gy = self.model.cost_grad(y)
        x, fx = self.x, self.fx
        xt, ft = x, fx  # copied on the first partial acceptance
        pending = mask.copy()
        scaled = gy / self.H  # the metric's step direction; the step is scaled / L
        for _ in range(60):
            cand, fc, b = self.model.trial(y, scaled, gy, self.H, L_try)
            bound = fy + b
            ok = pending & np.isfinite(fc) & (fc <= bound + 1e-12 * np.abs(bound))
            if ok.all():  # every problem accepts (the common case): no row copies
                xt, ft = cand, fc
            elif ok.any():
                if xt is x:
                    xt, ft = x.copy(), fx.copy()
                xt[ok], ft[ok] = cand[ok], fc[ok]
            pending &= ~ok
            if not pending.any():
                break
            L_try = np.where(pending, 2.0 * L_try, L_try)
        return xt, ft, L_try  # still-pending problems (numerical floor) keep x

    def iterate(self, restart: bool, check: bool) -> tuple[np.ndarray, np.ndarray]:
        """One accelerated step of the active problems: the KKT residual and the stalled."""
        x, fx, active, L, model = self.x, self.fx, self.active, self.L, self.model
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * self.t**2))
        y = x + ((self.t - 1.0) / t_next)[:, None] * (x - self.x_prev)
        fy, gy = model.cost_grad(y)
        off = active & ~np.isfinite(fy)  # extrapolation left the domain: use x
        if off.any():
            y[off] = x[off]
            fy, gy = model.cost_grad(y)
        L_try = np.where(active, 0.8 * L, L)
        xt, ft, L_new = self.step_from(y, L_try, active, fy, gy)
        if restart:
            worse = active & (ft > fx)
            if worse.any():  # restart: momentum off, redo from the current point
                t_next[worse] = 1.0
                y2 = np.where(worse[:, None], x, y)
                xt2, ft2, L2 = self.step_from(y2, np.where(worse, L_try, L), worse)
                if xt is x or ft is fx:  # never write into the current iterate
                    xt, ft = xt.copy(), ft.copy()
                xt[worse], ft[worse], L_new[worse] = xt2[worse], ft2[worse], L2[worse]
                still = worse & (ft > fx)  # never accept an increase (round-off)
                xt[still], ft[still] = x[still], fx[still]
        self.L = np.where(active, L_new, L)
        stalled = active & np.all(xt == x, axis=-1)  # no decrease left at round-off level
        if check or stalled.any():
            _, gx = model.cost_grad(xt)
            resid = np.max(np.abs(np.minimum(xt, gx)), axis=-1)  # ‖x − P(x − ∇F(x))‖_∞
        else:
            resid = np.full(x.shape[0], np.inf)
        if active.all():
            self.x_prev, self.x, self.fx = x, xt, ft
        else:
            self.x_prev = np.where(active[:, None], x, self.x_prev)
            self.x = np.where(active[:, None], xt, x)
            self.fx = np.where(active, ft, fx)
        self.t = np.where(active, t_next, self.t)
        return resid, stalled


def _check_params(alpha: float, beta: float) -> tuple[float, float]:
    a = check_real("alpha", alpha, lo=0.0, lo_open=True)
    b = check_real("beta", beta, lo=0.0, lo_open=True)
    return a, b


def learn_graph(
    X: np.ndarray, alpha: float = 2.0, beta: float = 1.0, *, max_iter: int = 5000, tol: float = 1e-8
) -> np.ndarray:
    """Learn one graph from smooth signals ``X`` (``[N, d]``) by eq. 7; return ``w`` (``[p]``).

    >>> rng = np.random.default_rng(0)
    >>> base = rng.standard_normal((200, 1))
    >>> noise = 0.01 * rng.standard_normal((200, 1))
    >>> X = np.hstack([base, base + noise, rng.standard_normal((200, 1))])
    >>> w = learn_graph(X, alpha=1.0, beta=1.0)
    >>> int(np.argmax(w))   # the edge between the two near-identical vertices
    0
    """
    a, b = _check_params(alpha, beta)
    Xv = validate_signals(X)
    z = pairwise_sq_distances(Xv)
    return solve_apgd(
        z, a, b, max_iter=check_int("max_iter", max_iter, lo=1), tol=check_real("tol", tol, lo=0.0)
    ).w[0]


class SmoothGraphLearner:
    """Scikit-learn style estimator for eq. 7 (Kalofolias's log-degree model).

    Args:
        alpha: log-degree weight ``α > 0`` (paper: 2).
        beta: ridge weight ``β > 0`` (controls sparsity: larger is denser).
        max_iter: APGD iteration cap.
        tol: KKT-residual stopping tolerance (see :func:`solve_apgd`).

    Attributes (after :meth:`fit`):
        weights_: learned edge vector ``w``, shape ``[p]``.
        adjacency_: learned ``W``, shape ``[d, d]``.
        n_iter_: iterations run.
        costs_: objective per iteration (monotone non-increasing).

    >>> rng = np.random.default_rng(1)
    >>> X = rng.standard_normal((50, 4))
    >>> est = SmoothGraphLearner(alpha=2.0, beta=1.0).fit(X)
    >>> est.adjacency_.shape, bool(np.all(np.diff(est.costs_) <= 1e-12))
    ((4, 4), True)

    """

    def __init__(
        self, alpha: float = 2.0, beta: float = 1.0, *, max_iter: int = 5000, tol: float = 1e-8
    ) -> None:
        self.alpha = alpha
        self.beta = beta
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, X: np.ndarray, y: object = None) -> SmoothGraphLearner:
        """Learn the graph from signals ``X`` of shape ``[N, d]``; ``y`` is ignored."""
        a, b = _check_params(self.alpha, self.beta)
        Xv = validate_signals(X)
        z = pairwise_sq_distances(Xv)
        res = solve_apgd(
            z,
            a,
            b,
            max_iter=check_int("max_iter", self.max_iter, lo=1),
            tol=check_real("tol", self.tol, lo=0.0),
        )
        self.weights_ = res.w[0]
        self.adjacency_ = vec_to_mat(res.w[0])
        self.n_iter_ = res.n_iter
        self.costs_ = res.costs[:, 0]
        self.converged_ = bool(res.converged[0])
        return self
