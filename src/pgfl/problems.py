"""Loss functions with batched mini-batch gradients and the exact optimum ``w°``.

Both problems of the papers, with ``Q(w; x) = loss(w; u, d) + rho ||w||^2``:

* :class:`LeastSquares`: ``Q = (d - u^T w)^2 + rho ||w||^2`` (preprint eq. 54), gradient
  ``-2 u (d - u^T w) + 2 rho w``;
* :class:`Logistic`: ``Q = ln(1 + exp(-d u^T w)) + rho ||w||^2`` with labels ``d = ±1``,
  gradient ``-d u sigmoid(-d u^T w) + 2 rho w``.

Both implement the problem interface of :mod:`pgfl.models` in closed form. The objective
is that of preprint eq. 1: every client counts equally whatever its number
of samples, ``J(w) = (1/P) sum_p (1/K) sum_k (1/N_pk) sum_n Q(w; x_pkn)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce

import numpy as np

from pgfl.data.federated import FederatedData
from pgfl.param import Param
from pgfl.validation import ConfigError

#: ``training.rho``: the regularization ρ of every risk.
RHO = Param("training.rho", "real", 0.1, "Regularization ρ of the risk (preprint eq. 54).", lo=0)


def clip_factor(norm2: np.ndarray, clip_norm: np.ndarray | float) -> np.ndarray:
    """``min(1, B/‖g‖)``: the factor that clips a gradient of squared norm ``norm2`` to ``B``.

    Per-sample clipping (the bound B the privacy analysis rests on): every per-sample
    gradient is scaled by it before averaging (the numba kernel and the JAX adapter compute
    the same factor in their own array languages).

    >>> clip_factor(np.array([25.0, 0.25]), 1.0).tolist()
    [0.2, 1.0]
    """
    return np.minimum(1.0, np.asarray(clip_norm) / np.sqrt(np.maximum(norm2, 1e-300)))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """Numerically stable logistic function ``1 / (1 + exp(-z))``."""
    return 0.5 * (1.0 + np.tanh(0.5 * z))


@dataclass(frozen=True)
class _Problem:
    rho: float = 0.0

    name = "problem"
    #: Whether a test error is defined (see :mod:`pgfl.models` for the interface).
    classifier = False
    #: Whether the gradient is linear in the model (zero-mean noise averages out of it).
    linear_gradient = False
    #: Initial parameters of every server (``None``: zeros).
    initial = None

    def __post_init__(self) -> None:
        RHO.check(self.rho)

    def dim(self, features: int) -> int:
        """Number of model parameters ``M`` for samples with ``features`` features."""
        return features

    # --- per-sample pieces (overridden) -------------------------------------------------
    def residual_weight(self, margin: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Scalar ``c`` with ``grad_w loss(w; u, d) = c * u``, from ``margin = u^T w``."""
        raise NotImplementedError

    def sample_loss(self, margin: np.ndarray, d: np.ndarray) -> np.ndarray:
        """``loss(w; u, d)`` from ``margin = u^T w`` (without the regularizer)."""
        raise NotImplementedError

    # --- batched gradients ----------------------------------------------------------------
    def gradient(
        self,
        W: np.ndarray,
        U: np.ndarray,
        d: np.ndarray,
        weight: np.ndarray,
        clip_norm: np.ndarray | float | None = None,
    ) -> np.ndarray:
        """Mini-batch gradients ``sum_b weight_b grad Q(w; u_b, d_b)``.

        Models are *columns*: ``W [..., M, C]`` holds ``C`` models (e.g. one per curve)
        evaluated on the same batch ``U [..., B, M]``, ``d [..., B]``, ``weight [..., B]``
        (``1/B`` for the batch's ``B`` samples, 0 for padding: weights sum to 1); the
        result is ``[..., M, C]``. Two
        batched matrix products do the work: ``margin = U W`` and ``grad = U^T c``.
        With ``clip_norm`` (broadcast against ``[..., C]``), every per-sample gradient of
        ``Q`` (regularizer included) is clipped to that norm before averaging, which
        enforces the gradient bound ``B`` that the privacy analysis assumes.

        >>> U = np.array([[1.0, 0.0], [0.0, 1.0]]); d = np.array([2.0, 0.0])
        >>> LeastSquares(rho=0.5).gradient(np.zeros((2, 1)), U, d, np.full(2, 0.5))[:, 0].tolist()
        [-2.0, 0.0]
        """
        margin = U @ W
        c = self.residual_weight(margin, d[..., None])
        if clip_norm is None:
            return np.swapaxes(U, -1, -2) @ (c * weight[..., None]) + (2.0 * self.rho) * W
        # ||c u + 2 rho w||^2 = c^2 ||u||^2 + 4 rho c u^T w + 4 rho^2 ||w||^2, without forming
        # the per-sample gradients
        u2 = np.einsum("...bm,...bm->...b", U, U)[..., None]
        w2 = np.einsum("...mc,...mc->...c", W, W)[..., None, :]
        norm2 = c * c * u2 + (4.0 * self.rho) * c * margin + (4.0 * self.rho**2) * w2
        kept = clip_factor(norm2, clip_norm) * weight[..., None]  # [..., B, C]
        reg = (2.0 * self.rho) * W * kept.sum(axis=-2)[..., None, :]
        return np.swapaxes(U, -1, -2) @ (c * kept) + reg

    def risk(self, w: np.ndarray, data: FederatedData) -> np.ndarray:
        """Objective ``J(w)`` of preprint eq. 1 for models ``w [..., M]``; result ``[...]``."""
        margin = np.einsum("pknm,...m->...pkn", data.X, w)
        loss = self.sample_loss(margin, data.y) * data.mask
        per_client = loss.sum(axis=-1) / data.counts
        return per_client.mean(axis=(-2, -1)) + self.rho * np.einsum("...m,...m->...", w, w)

    def full_gradient(self, w: np.ndarray, data: FederatedData) -> np.ndarray:
        """``grad J(w)`` of the objective of preprint eq. 1; ``w [M]`` → ``[M]``."""
        margin = data.X @ w
        c = self.residual_weight(margin, data.y) * data.mask / data.counts[..., None]
        g = np.einsum("pkn,pknm->m", c, data.X) / (data.counts.size)
        return g + 2.0 * self.rho * w

    def optimum(self, data: FederatedData) -> np.ndarray:
        """The minimizer ``w°`` of preprint eq. 1 (every client weighted equally).

        Map-reduce over the clients: :meth:`optimum_terms` of the data (one block here;
        a distributed backend sums the blocks' terms) and :meth:`optimum_update`.
        """
        clients, dim = data.counts.size, self.dim(data.shape[-1])
        return solve_optimum(self, lambda w: [self.optimum_terms(data, w, clients)], clients, dim)

    def optimum_start(self, dim: int) -> np.ndarray | None:
        """The first iterate of :meth:`optimum_update` (``None``: a closed form)."""
        return None

    def residual_slope(self, margin: np.ndarray, d: np.ndarray) -> np.ndarray:
        """``∂c/∂margin``: the per-sample Hessian is ``residual_slope · u uᵀ`` (+ 2ρI)."""
        raise NotImplementedError

    #: Gauss–Hermite nodes of :meth:`smoothed_optimum` (exact for polynomials of degree < 80).
    SMOOTHING_NODES = 40

    def smoothed_optimum(self, data: FederatedData, variance: np.ndarray) -> np.ndarray:
        """The minimizer ``w̃`` of the risk of models perturbed by noise: ``E_n J(w + n)``.

        ``variance [P]``: the variance per coordinate of a zero-mean Gaussian perturbation
        ``n_p`` of the model at which unit ``p``'s clients compute their gradients.
        ``w̃`` minimizes ``(1/P) Σ_p (1/K) Σ_k E J_pk(w + n_p)`` (preprint eq. 1 smoothed):
        a sample's margin ``uᵀ(w + n_p)`` is ``uᵀw + z`` with ``z ~ N(0, v_p ‖u‖²)``, whose
        expectation is taken by Gauss–Hermite quadrature (:data:`SMOOTHING_NODES`), and
        Newton's method starts at ``w°``. To first order in ``v``,
        ``w̃ − w° = −½ H⁻¹ (1/P) Σ_p v_p ∇ tr H_p(w°)``: proportional to the noise variance,
        and zero when the gradient is linear in the model (least squares: the smoothing
        only adds the constant ``v_p ‖u‖²`` to every squared error). Graph-homomorphic
        noise cancels in the centroid, but not in the models the clients start from: the
        centroid of GFL on a non-linear loss converges to ``w̃``, not ``w°``
        (:func:`pgfl.engine.floor.centroid_bias`).

        >>> from pgfl.data.synthetic import logistic_data, regression_data
        >>> rng = np.random.default_rng(0)
        >>> data = regression_data(rng, P=2, K=3, N=20)
        >>> ls = LeastSquares(0.1)
        >>> bool(np.allclose(ls.smoothed_optimum(data, np.array([0.5, 0.1])), ls.optimum(data)))
        True
        >>> data = logistic_data(rng, P=2, K=3, N=20)
        >>> lr = Logistic(0.01)
        >>> w0 = lr.optimum(data)
        >>> b1, b2 = (lr.smoothed_optimum(data, np.full(2, v)) - w0 for v in (1e-3, 2e-3))
        >>> round(float(np.linalg.norm(b2) / np.linalg.norm(b1)), 2)   # offset ∝ variance
        2.0
        """
        X, d = data.X, data.y
        z, weights = np.polynomial.hermite_e.hermegauss(self.SMOOTHING_NODES)
        weights = weights / weights.sum()
        norm2 = np.einsum("pknm,pknm->pkn", X, X)
        scale = np.sqrt(np.asarray(variance, float)[:, None, None] * norm2)
        share = data.mask / data.counts[..., None] / data.counts.size  # every client alike
        w = self.optimum(data)
        for _ in range(MAX_OPTIMUM_STEPS):
            margin = (X @ w)[..., None] + scale[..., None] * z  # [P, K, N, nodes]
            c = self.residual_weight(margin, d[..., None]) @ weights
            g = np.einsum("pkn,pknm->m", c * share, X) + 2.0 * self.rho * w
            if np.linalg.norm(g) <= 1e-12:
                return w
            slope = self.residual_slope(margin, d[..., None]) @ weights
            H = np.einsum("pkn,pkni,pknj->ij", slope * share, X, X)
            w = w - np.linalg.solve(H + 2.0 * self.rho * np.eye(w.size), g)
        raise RuntimeError(  # pragma: no cover - Newton on a strongly convex risk converges
            f"smoothed {self.name} optimum did not converge in {MAX_OPTIMUM_STEPS} steps"
        )

    def optimum_terms(self, data: FederatedData, w: np.ndarray | None, clients: int) -> tuple:
        """A block of clients' additive share of what :meth:`optimum_update` needs at ``w``.

        ``clients`` is the number of clients of the whole network (every client weighs
        ``1/clients`` in eq. 1).
        """
        raise NotImplementedError

    def optimum_update(
        self, terms: list[tuple], w: np.ndarray | None, clients: int
    ) -> tuple[np.ndarray, bool]:
        """The next iterate from every block's terms, and whether it is ``w°``."""
        raise NotImplementedError

    def test_error(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Fraction of misclassified test samples for models ``w [..., M]``; ``[...]``."""
        raise ConfigError(f"test error is defined for classification problems, not {self.name}")

    def test_loss(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Mean loss (without the regularizer) on a test set for models ``w [..., M]``."""
        margin = np.einsum("nm,...m->...n", X, w)
        return self.sample_loss(margin, y).mean(axis=-1)


@dataclass(frozen=True)
class LeastSquares(_Problem):
    """Regularized least squares ``Q = (d - u^T w)^2 + rho ||w||^2`` (preprint eq. 54).

    >>> w = np.array([1.0, 0.0]); U = np.array([[1.0, 0.0]]); d = np.array([2.0])
    >>> LeastSquares(rho=0.5).gradient(w[:, None], U, d, np.ones(1))[:, 0].tolist()
    [-1.0, 0.0]
    """

    name = "least_squares"
    #: The gradient is linear in the model: noise on the model averages out of it.
    linear_gradient = True

    def residual_weight(self, margin: np.ndarray, d: np.ndarray) -> np.ndarray:
        """``2 (u^T w - d)``."""
        return 2.0 * (margin - d)

    def sample_loss(self, margin: np.ndarray, d: np.ndarray) -> np.ndarray:
        """``(d - u^T w)^2``."""
        return (d - margin) ** 2

    def residual_slope(self, margin: np.ndarray, d: np.ndarray) -> np.ndarray:
        """``2``: the Hessian of a squared error does not depend on the model."""
        return np.full(np.broadcast_shapes(margin.shape, d.shape), 2.0)

    def optimum_terms(
        self, data: FederatedData, w: np.ndarray | None, clients: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(Σ_pk (1/N_pk) Σ_n u uᵀ, Σ_pk (1/N_pk) Σ_n d u)`` over the block's clients.

        The weight ``1/N_pk`` of every row is a broadcast view, not a ``[P, K, N]`` array
        (a third of the papers' data), when every client holds ``N_max`` samples and
        ``M > 1``: numpy's einsum then sums in the same order as over a full array (the
        same bits; ``tests/test_problems.py`` checks it). With ``M = 1`` a stride-0 weight
        changes the order of the ``d u`` sum, and padded rows need the mask.
        """
        P, K, N, M = data.shape
        if M > 1 and bool((data.counts == N).all()):
            weight = np.broadcast_to(1.0 / data.counts[..., None], (P, K, N))
        else:
            weight = data.mask / data.counts[..., None]
        R = np.einsum("pkn,pkni,pknj->ij", weight, data.X, data.X)
        r = np.einsum("pkn,pkn,pkni->i", weight, data.y, data.X)
        return R, r

    def optimum_update(
        self, terms: list[tuple], w: np.ndarray | None, clients: int
    ) -> tuple[np.ndarray, bool]:
        """Closed form ``w° = (R_u + rho I)^{-1} r_du`` (preprint eq. 55).

        Here ``R_u = (1/PK) sum_pk (1/N_pk) sum_n u u^T`` and ``r_du`` the same average of ``d u``.

        With ``d = u^T w* + v`` this is eq. 55's ``(R_u + rho I)^{-1} (R_u w* + r_uv)``.
        """
        R = reduce(np.add, [t[0] for t in terms]) / clients
        r = reduce(np.add, [t[1] for t in terms]) / clients
        A = R + self.rho * np.eye(R.shape[0])
        check_conditioned(self.rho, A)
        return np.linalg.solve(A, r), True


@dataclass(frozen=True)
class Logistic(_Problem):
    """Regularized logistic risk ``Q = ln(1 + exp(-d u^T w)) + rho ||w||^2``, ``d = ±1``.

    >>> Logistic(rho=0.0).gradient(np.zeros((1, 1)), np.array([[2.0]]), np.array([1.0]), np.ones(1))
    array([[-1.]])
    """

    name = "logistic"
    classifier = True

    def residual_weight(self, margin: np.ndarray, d: np.ndarray) -> np.ndarray:
        """``-d sigmoid(-d u^T w)``."""
        return -d * _sigmoid(-d * margin)

    def sample_loss(self, margin: np.ndarray, d: np.ndarray) -> np.ndarray:
        """``ln(1 + exp(-d u^T w))``."""
        return np.logaddexp(0.0, -d * margin)

    def residual_slope(self, margin: np.ndarray, d: np.ndarray) -> np.ndarray:
        """``σ(uᵀw) (1 − σ(uᵀw))`` (labels ``d = ±1``)."""
        s = _sigmoid(margin)
        return s * (1.0 - s) + 0.0 * d

    #: Newton's method stops at ``||grad J(w)|| <= OPTIMUM_TOL``.
    OPTIMUM_TOL = 1e-10

    def optimum_start(self, dim: int) -> np.ndarray:
        """Newton's method starts at ``w = 0`` (needs ρ > 0: a unique optimum)."""
        if self.rho <= 0:
            raise ConfigError(
                f"training.rho must be > 0 for a unique logistic optimum; got {self.rho}"
            )
        return np.zeros(dim)

    def optimum_terms(
        self, data: FederatedData, w: np.ndarray, clients: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The block's unscaled gradient ``Σ_pk (1/N_pk) Σ_n ∇ℓ`` and its Hessian share at ``w``."""
        margin = data.X @ w
        c = self.residual_weight(margin, data.y) * data.mask / data.counts[..., None]
        g = np.einsum("pkn,pknm->m", c, data.X)
        s = _sigmoid(margin)
        h = data.mask / data.counts[..., None] / clients * s * (1.0 - s)
        return g, np.einsum("pkn,pkni,pknj->ij", h, data.X, data.X)

    def optimum_update(
        self, terms: list[tuple], w: np.ndarray, clients: int
    ) -> tuple[np.ndarray, bool]:
        """One Newton step on preprint eq. 1; done when ``||grad J(w)|| <= OPTIMUM_TOL``."""
        g = reduce(np.add, [t[0] for t in terms]) / clients + 2.0 * self.rho * w
        if np.linalg.norm(g) <= self.OPTIMUM_TOL:
            return w, True
        H = reduce(np.add, [t[1] for t in terms]) + 2.0 * self.rho * np.eye(w.size)
        check_conditioned(self.rho, H)
        return w - np.linalg.solve(H, g), False

    def test_error(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Misclassification rate of ``sign(X w)`` against labels ``y = ±1``."""
        pred = np.einsum("nm,...m->...n", X, w)
        return np.mean(np.where(pred >= 0, 1.0, -1.0) != y, axis=-1)


PROBLEMS = {"least_squares": LeastSquares, "logistic": Logistic}

#: Newton steps (or closed-form solves) before :func:`solve_optimum` gives up.
MAX_OPTIMUM_STEPS = 100


#: Largest condition number of the system that gives ``w°``: beyond it ``w°`` is one
#: arbitrary point of (nearly) a family of minimizers, and the MSDs measured from it are
#: meaningless. At 1e12 a solve keeps at least 4 correct digits in double precision.
MAX_CONDITION = 1e12


def check_conditioned(rho: float, A: np.ndarray) -> None:
    """Refuse a symmetric positive semi-definite system ``A w = b`` that has no stable solution.

    ``A`` is the Hessian of the risk (``R_u + rho I`` for least squares, preprint eq. 55;
    the Newton Hessian for logistic regression). Its condition number
    ``λ_max / λ_min`` (eigenvalues of the symmetric ``A``) above :data:`MAX_CONDITION`,
    or a rank-deficient ``A``, raises :class:`~pgfl.validation.ConfigError` naming
    ``training.rho``.

    >>> check_conditioned(0.0, np.diag([1.0, 1e-3]))
    >>> check_conditioned(0.0, np.diag([1.0, 0.0]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: training.rho = 0: the risk has no unique minimizer w° ...
    """
    eig = np.linalg.eigvalsh(A)
    top, low = float(eig[-1]), float(eig[0])
    if not np.isfinite(eig).all():
        return  # non-finite data is refused elsewhere; solve raises on it
    if top <= 0 or low <= top / MAX_CONDITION:
        cond = "infinite" if low <= 0 else f"{top / low:.3g}"
        rank = int(np.sum(eig > top * A.shape[0] * np.finfo(float).eps)) if top > 0 else 0
        raise ConfigError(
            f"training.rho = {rho:g}: the risk has no unique minimizer w° (its Hessian has "
            f"rank {rank} of {A.shape[0]}, condition number {cond} > {MAX_CONDITION:g}); "
            "set training.rho > 0 (e.g. 0.01) or use more samples than features"
        )


def solve_optimum(
    problem: _Problem,
    terms_at: Callable[[np.ndarray | None], list[tuple]],
    clients: int,
    dim: int,
) -> np.ndarray:
    """``w°`` of a problem from the terms of its blocks of clients (map-reduce).

    ``terms_at(w)`` returns every block's :meth:`~_Problem.optimum_terms` at ``w`` (a
    list, in block order); ``clients`` is the number of clients of the network and ``dim``
    the model dimension M. One block gives the bits of :meth:`~_Problem.optimum`.
    A risk without a unique, stable minimizer (``rho = 0`` and a singular or
    ill-conditioned feature covariance, :func:`check_conditioned`) raises
    :class:`~pgfl.validation.ConfigError` naming ``training.rho``.
    """
    w = problem.optimum_start(dim)
    for _ in range(MAX_OPTIMUM_STEPS):
        try:
            w, done = problem.optimum_update(terms_at(w), w, clients)
        except np.linalg.LinAlgError:
            raise ConfigError(
                f"training.rho = {problem.rho:g}: the risk has no unique minimizer w° (its "
                "feature covariance is singular); set training.rho > 0 or use data of full rank"
            ) from None
        if done:
            return w
    raise RuntimeError(  # pragma: no cover - Newton on a strongly convex risk converges
        f"{problem.name} optimum did not converge in {MAX_OPTIMUM_STEPS} steps"
    )
