"""The centroid's bias under graph-homomorphic noise: the noise-smoothed optimum.

Graph-homomorphic noise cancels in the network average (eq. 47 ⇒ eq. 46): the centroid
recursion sees no noise. It does not cancel in the servers' models: server ``p`` combines
``w_p = Σ_m a_pm (ψ_m + g_pm)`` with ``g_pm = g_m`` and ``g_pp = −((1 − a_pp)/a_pp) g_p``, so
its model carries ``n_p = ((A − I) g)_p``, and its clients compute their gradients at
``w_c + (w_p − w_c)``. The deviations obey ``x_i = B x_{i−1} + (A − I) g_i`` with
``B = A − 11ᵀ/P`` (spectral radius ι₂ < 1; the O(μ) gradient terms aside), whose stationary
covariance per coordinate is ``X = Σ_k Bᵏ (A − I)(A − I)ᵀ (Bᵏ)ᵀ σ_g²``
(:func:`deviation_variance`).

When the gradient is linear in the model (least squares, the papers' set-up) the noise
averages out of the centroid's fixed point. When it is not (logistic regression, a neural
network), the centroid converges to the minimizer ``w̃`` of the smoothed risk
``(1/P) Σ_p E J_p(w + n_p)``
(:meth:`~pgfl.problems._Problem.smoothed_optimum`), offset from ``w°`` by a bias
proportional to σ_g²: its centroid MSD levels off at ``‖w̃ − w°‖²`` ∝ σ_g⁴ however long it
runs (:func:`centroid_bias`). On the conference paper's set-up (``pgfl reproduce hybrid``,
σ_g² = 0.04) that floor is about −34 dB, which the non-private scheme passes after about
400 iterations.
"""

from __future__ import annotations

import numpy as np

from pgfl.data.federated import FederatedData
from pgfl.engine.network import Network
from pgfl.engine.settings import CurveSettings

__all__ = ["centroid_bias", "deviation_variance"]


def deviation_variance(A: np.ndarray, variance: float) -> np.ndarray:
    """Stationary variance per coordinate of ``w_p − w_c`` from graph-homomorphic noise, ``[P]``.

    The diagonal of ``X = Σ_k Bᵏ N (Bᵏ)ᵀ`` with ``B = A − 11ᵀ/P`` and
    ``N = σ² (A − I)(A − I)ᵀ`` (module doc), summed by doubling: after ``j`` steps the sum
    holds ``2ʲ`` terms.

    >>> A = np.full((4, 4), 0.25)   # a complete graph, uniform weights: B = 0
    >>> deviation_variance(A, 0.1).round(6).tolist()   # one round's noise only: σ²(1 − 1/P)
    [0.075, 0.075, 0.075, 0.075]
    """
    P = A.shape[0]
    D = A - np.eye(P)
    X = variance * D @ D.T
    B = A - np.full((P, P), 1.0 / P)
    for _ in range(64):  # ι₂ < 1: Bᵏ vanishes; 2⁶⁴ terms are far more than enough
        step = B @ X @ B.T
        X = X + step
        B = B @ B
        if not np.any(B):
            break
    return np.diag(X).copy()


def centroid_bias(net: Network, settings: CurveSettings, w_opt: np.ndarray | None) -> float | None:
    """``‖w̃ − w°‖²``: the floor of a curve's centroid MSD from its noise-smoothed optimum.

    Defined for a curve with graph-homomorphic server noise, a client level that adds no
    noise (plain averaging or secure aggregation) and a loss with a closed-form optimum
    (:meth:`~pgfl.problems._Problem.smoothed_optimum`); ``None`` otherwise, or without the
    clients' data (Ray actors plan on an outline). Zero for least squares. The smoothing
    is Gaussian with the deviations' stationary variance (:func:`deviation_variance`); the
    engine's Laplace noise has the same variance, and the bias is a second-order effect,
    so it agrees to first order in σ_g².
    """
    smoothed = getattr(net.problem, "smoothed_optimum", None)
    if (
        settings.server.name != "graph_homomorphic"
        or settings.client.calibrates is not None  # client noise: not only the server's
        or smoothed is None
        or w_opt is None
        or not isinstance(net.data, FederatedData)
    ):
        return None
    if getattr(net.problem, "linear_gradient", False):
        return 0.0  # E ∇J(w + n) = ∇J(w): no bias (not a rounding error of the quadrature)
    variance = deviation_variance(net.A, settings.server.variance)
    return float(np.sum((smoothed(net.data, variance) - w_opt) ** 2))
