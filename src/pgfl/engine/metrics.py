"""The metrics of a run as partial sums over blocks of units, and their reduction.

Equation numbers refer to "Privatized Graph Federated Learning" (Rizk, Vlaski & Sayed,
arXiv:2203.07105). For kept server models ``W[n, C, R, P_b, M]`` of a block of units:

* :func:`model_sum` ``Σ_{p∈b} w_p`` — the blocks' sums give the centroid
  ``w_c = (1/P) Σ_p w_p`` (:func:`centroid`);
* :func:`error_sums` ``Σ_{p∈b} ‖w_p − w°‖²`` and ``Σ_{p∈b} ‖w_p − w_c‖²`` — the blocks'
  sums over ``P`` give the average individual MSD (eq. 59) and the network disagreement
  (eq. 30) (:func:`reduce_errors`);
* :func:`centroid_msd` ``‖w_c − w°‖²`` (eq. 58) of the reduced centroid.

:func:`pgfl.engine.simulate` runs them on the whole network (one block: the same bits as
the direct formulas), the Ray actors backend on each actor's block, reducing on the
driver. :func:`diverged` is the divergence test both apply after every round.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

import numpy as np

__all__ = [
    "DIVERGENCE_BOUND",
    "centroid",
    "centroid_msd",
    "diverged",
    "error_sums",
    "model_sum",
    "reduce_errors",
]

#: A server model entry above this in magnitude (or non-finite) marks a repetition as diverged.
DIVERGENCE_BOUND = 1e6


def diverged(W: np.ndarray) -> np.ndarray:
    """``[C, R]``: repetitions with a non-finite entry or one above :data:`DIVERGENCE_BOUND`.

    >>> diverged(np.array([[[[1.0]], [[np.nan]], [[2e6]]]])).tolist()
    [[False, True, True]]
    """
    return ~(np.abs(W).max(axis=(2, 3)) <= DIVERGENCE_BOUND)


def model_sum(Wh: np.ndarray) -> np.ndarray:
    """``Σ_{p∈b} w_p`` over the block's units: ``[..., P_b, M]`` → ``[..., M]``."""
    return Wh.sum(axis=-2)


def centroid(sums: Sequence[np.ndarray], P: int) -> np.ndarray:
    """``w_c = (1/P) Σ_p w_p`` from the blocks' :func:`model_sum`, in block order.

    >>> centroid([np.array([1.0, 2.0]), np.array([3.0, 0.0])], 2).tolist()
    [2.0, 1.0]
    """
    return reduce(np.add, sums) / P  # one block: the sum itself, bit for bit


def error_sums(Wh: np.ndarray, w_opt: np.ndarray, wc: np.ndarray) -> dict[str, np.ndarray]:
    """A block's ``Σ_p ‖w_p − w°‖²`` (``individual``) and ``Σ_p ‖w_p − w_c‖²`` (``disagreement``).

    ``Wh[..., P_b, M]`` the block's models, ``wc[..., M]`` the network's centroid; results
    ``[...]``.
    """
    return {
        "individual": np.sum((Wh - w_opt) ** 2, axis=-1).sum(axis=-1),
        "disagreement": np.sum((Wh - wc[..., None, :]) ** 2, axis=-1).sum(axis=-1),
    }


def reduce_errors(parts: Sequence[dict[str, np.ndarray]], P: int) -> dict[str, np.ndarray]:
    """Average individual MSD (eq. 59) and disagreement (eq. 30) from the blocks' sums."""
    return {k: reduce(np.add, [p[k] for p in parts]) / P for k in ("individual", "disagreement")}


def centroid_msd(wc: np.ndarray, w_opt: np.ndarray) -> np.ndarray:
    """``‖w_c − w°‖²`` (eq. 58) over the last axis."""
    return np.sum((wc - w_opt) ** 2, axis=-1)
