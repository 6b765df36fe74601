"""Bring your own model: the problem interface the engine uses for every loss.

The GFL engine ("Privatized Graph Federated Learning", Rizk, Vlaski & Sayed,
arXiv:2203.07105, eq. 3) needs from a loss only the mini-batch gradient of

    Q(w; x, y) = ℓ(w; x, y) + ρ‖w‖²

over a *flat* parameter vector ``w`` of size ``M``, batched over everything a round
computes at once. A *problem* is any object with

* ``name`` (str), ``rho`` (float ≥ 0), ``classifier`` (bool: test error is defined),
  ``initial`` (``[M]`` initial parameters of every server, or ``None`` for zeros);
* ``dim(features) -> M``;
* ``gradient(W, U, d, weight, clip_norm=None)``: ``W [..., M, C]`` holds ``C`` models
  as columns (one per curve), ``U [..., B, F]`` / ``d [..., B]`` a mini-batch per leading
  index (clients), ``weight [..., B]`` the batch weights (``1/B``, 0 for padding); returns
  ``Σ_b weight_b ∇Q(w; x_b, y_b)`` as ``[..., M, C]``, each per-sample gradient of ``Q``
  first clipped to norm ``clip_norm[c]`` (broadcast against ``[..., C]``) when given —
  the bound the privacy accounting assumes (Abadi et al., "Deep Learning with Differential
  Privacy", arXiv:1607.00133, Algorithm 1);
* ``optimum(data)``: the minimizer ``w°`` of preprint eq. 1, or ``None`` (non-convex
  models: the MSD metrics are then not defined and reported as missing);
* ``test_loss(w, X, y)`` and, for classifiers, ``test_error(w, X, y)`` for models
  ``w [..., M]`` on a test set → ``[...]``.

Implementations:

* :class:`pgfl.problems.LeastSquares`, :class:`pgfl.problems.Logistic`: closed forms in
  numpy (and the compiled numba path, :mod:`pgfl.engine.compiled`);
* :class:`NumpyProblem`: a user's vectorized numpy per-sample gradient;
* :class:`pgfl.models.jax_adapter.JaxProblem`: a user's JAX ``loss(params, x, y)`` over a
  parameter pytree (extra ``pgfl[jax]``);
* :func:`pgfl.models.builtin.build_model`: ``softmax``, ``mlp`` and ``cnn`` classifiers
  from the ``[model]`` table of a configuration (through the JAX adapter).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pgfl.problems import RHO, clip_factor
from pgfl.validation import ConfigError

__all__ = ["NumpyProblem", "clipped_sum", "check_initial"]


def clipped_sum(
    G: np.ndarray,
    W: np.ndarray,
    weight: np.ndarray,
    rho: float,
    clip_norm: np.ndarray | float | None,
) -> np.ndarray:
    """``Σ_b weight_b clip(g_b + 2ρw)`` from per-sample loss gradients ``G [..., B, C, M]``.

    ``W [..., M, C]`` are the models, ``weight [..., B]``; clipping scales each per-sample
    gradient of ``Q`` to norm at most ``clip_norm`` (``[C]`` or a scalar; ``None``: no
    clipping, and the regularizer's gradient ``2ρw`` is added once, as in
    :meth:`pgfl.problems._Problem.gradient`). Result ``[..., M, C]``.

    >>> G = np.array([[[3.0, 4.0]]]); W = np.zeros((2, 1))  # one sample, one curve
    >>> clipped_sum(G, W, np.ones(1), 0.0, 1.0)[:, 0].tolist()
    [0.6000000000000001, 0.8]
    """
    Wt = np.swapaxes(W, -1, -2)  # [..., C, M]
    if clip_norm is None:
        return np.swapaxes(np.einsum("...b,...bcm->...cm", weight, G), -1, -2) + 2.0 * rho * W
    Q = G + (2.0 * rho) * Wt[..., None, :, :]
    scale = clip_factor(np.einsum("...bcm,...bcm->...bc", Q, Q), clip_norm) * weight[..., None]
    return np.swapaxes(np.einsum("...bc,...bcm->...cm", scale, Q), -1, -2)


def check_initial(params: np.ndarray, what: str = "model initial parameters") -> np.ndarray:
    """``params`` as a finite float64 vector, or a one-line :class:`ConfigError`.

    >>> try:
    ...     check_initial(np.array([0.0, np.nan]))
    ... except ConfigError as exc:
    ...     print(exc)
    model initial parameters must be finite real numbers; got nan at index 1 of 2
    """
    w = np.asarray(params, dtype=np.float64).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(w))
    if bad.size:
        raise ConfigError(
            f"{what} must be finite real numbers; got {w[bad[0]]} at index {bad[0]} of {w.size}"
        )
    return w


@dataclass(frozen=True, eq=False)
class NumpyProblem:
    """A user's loss as vectorized numpy callables.

    ``grad(w, x, y)`` returns the per-sample gradient of the loss ``ℓ`` (without the
    regularizer) for ``w [..., M]``, ``x [..., F]``, ``y [...]`` broadcast together →
    ``[..., M]``; ``loss(w, x, y)`` the per-sample loss ``[...]``; optional
    ``predict(w, x)`` the predicted label ``[...]`` (makes it a classifier). pgfl adds
    ``2ρw``, clips per sample and averages (:func:`clipped_sum`).

    Least squares written by hand equals the built-in closed form:

    >>> from pgfl.problems import LeastSquares
    >>> p = NumpyProblem(
    ...     grad=lambda w, x, y: 2 * ((x * w).sum(-1) - y)[..., None] * x,
    ...     loss=lambda w, x, y: ((x * w).sum(-1) - y) ** 2, features_to_dim=lambda f: f, rho=0.1)
    >>> r = np.random.default_rng(0); W = r.normal(size=(3, 2)); U = r.normal(size=(4, 3))
    >>> d = r.normal(size=4); wt = np.full(4, 0.25)
    >>> ref = LeastSquares(0.1).gradient(W, U, d, wt, 1.0)
    >>> bool(np.allclose(p.gradient(W, U, d, wt, 1.0), ref))
    True
    """

    grad: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    loss: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    features_to_dim: Callable[[int], int]
    rho: float = 0.0
    predict: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    initial: np.ndarray | None = None
    name: str = "numpy_model"
    classifier: bool = field(init=False)

    def __post_init__(self) -> None:
        RHO.check(self.rho)
        object.__setattr__(self, "classifier", self.predict is not None)
        if self.initial is not None:
            object.__setattr__(self, "initial", check_initial(self.initial))

    def dim(self, features: int) -> int:
        """``M`` for samples with ``features`` features."""
        return int(self.features_to_dim(features))

    def gradient(self, W, U, d, weight, clip_norm=None) -> np.ndarray:
        """The mini-batch gradient (see :mod:`pgfl.models`): ``[..., M, C]``."""
        w = np.swapaxes(W, -1, -2)[..., None, :, :]  # [..., 1, C, M]
        G = self.grad(w, U[..., :, None, :], d[..., :, None])  # [..., B, C, M]
        return clipped_sum(G, W, weight, self.rho, clip_norm)

    def optimum(self, data) -> None:
        """No closed form: ``None``."""
        return None

    def test_loss(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Mean per-sample loss of models ``w [..., M]`` on ``X [n, F]``, ``y [n]``."""
        w = np.asarray(w)[..., None, :]
        return self.loss(w, X, y).mean(axis=-1)

    def test_error(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Fraction of test samples whose predicted label differs from ``y``."""
        if self.predict is None:
            raise ConfigError("test error needs a predict function; this model has none")
        return np.mean(self.predict(np.asarray(w)[..., None, :], X) != y, axis=-1)
