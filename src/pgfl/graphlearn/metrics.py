"""Scores of a learned graph against the ground truth (§V-A 3, eqs. 34–35).

**Threshold rule (edge support).** The solvers return exact zeros only where the
projection is active; iterates stopped early (Algorithm 1 runs ``T·K`` steps) keep many
tiny positive weights. A learned edge therefore counts as present when its weight exceeds
``threshold`` times the largest learned weight of that graph (default ``0.1``; scale-free,
since the scale of ``w`` is set by ``α, β``). A graph whose weights are all zero has no
edges. The ground truth's support is ``w_gt > 0``.

MCC follows eq. 34 on edge counts (TP, TN, FP, FN over the ``p`` vertex pairs) and is 0
when a marginal is empty (scikit-learn's convention). The relative error is eq. 35,
``‖W − W_gt‖_F / ‖W_gt‖_F = ‖w − w_gt‖₂ / ‖w_gt‖₂`` (both norms double-count each edge).
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEFAULT_THRESHOLD", "edge_support", "mcc", "relative_error"]

DEFAULT_THRESHOLD = 0.1


def edge_support(w: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> np.ndarray:
    """Present edges of learned graph(s): ``w_e > threshold · max_e w_e`` (batched, ``[..., p]``).

    >>> edge_support(np.array([1.0, 0.05, 0.5, 0.0]))
    array([ True, False,  True, False])
    """
    w = np.asarray(w, dtype=float)
    top = np.max(w, axis=-1, keepdims=True)
    return (w > threshold * top) & (w > 0)


def mcc(w: np.ndarray, w_true: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> np.ndarray:
    """Matthews correlation of the learned edge support with the true one (eq. 34), batched.

    >>> float(mcc(np.array([1.0, 0.0, 0.9, 0.0]), np.array([0.8, 0.0, 0.7, 0.0])))
    1.0
    >>> float(mcc(np.array([0.0, 1.0, 0.0, 1.0]), np.array([0.8, 0.0, 0.7, 0.0])))
    -1.0
    """
    pred, true = np.broadcast_arrays(edge_support(w, threshold), np.asarray(w_true) > 0)
    tp = np.sum(pred & true, axis=-1).astype(float)
    tn = np.sum(~pred & ~true, axis=-1).astype(float)
    fp = np.sum(pred & ~true, axis=-1).astype(float)
    fn = np.sum(~pred & true, axis=-1).astype(float)
    den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(den > 0, (tp * tn - fp * fn) / np.where(den > 0, den, 1.0), 0.0)
    return out


def relative_error(w: np.ndarray, w_true: np.ndarray) -> np.ndarray:
    """``‖w − w_gt‖ / ‖w_gt‖`` (eq. 35), batched over leading axes.

    >>> float(relative_error(np.array([0.5, 1.0]), np.array([0.0, 1.0])))
    0.5
    """
    w = np.asarray(w, dtype=float)
    wt = np.asarray(w_true, dtype=float)
    return np.linalg.norm(w - wt, axis=-1) / np.linalg.norm(wt, axis=-1)
