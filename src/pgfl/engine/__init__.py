"""The privatized GFL engine: rounds vectorized over curves, repetitions, units and clients.

One GFL iteration (eqs. 3–8 of "Privatized Graph Federated Learning", Rizk, Vlaski & Sayed,
arXiv:2203.07105) is a pure step over blocks of units (:mod:`pgfl.engine.step`): the local
phase of a block needs only its clients' data, models and keyed draws; the combination
needs only the messages arriving at it. The privacy mechanisms of the client → server and
server → server links are objects of :mod:`pgfl.privacy.mechanisms`; the engine knows them
only through their two interfaces.

Modules: :mod:`~pgfl.engine.network` (network, links, blocks of units),
:mod:`~pgfl.engine.settings` (per-curve settings), :mod:`~pgfl.engine.step` (one round),
:mod:`~pgfl.engine.metrics` (metrics as partial sums over blocks, and their reduction),
:mod:`~pgfl.engine.simulate` (many rounds and their metrics), :mod:`~pgfl.engine.compiled`
(the local phase as one compiled kernel).
"""

from pgfl.engine.metrics import DIVERGENCE_BOUND
from pgfl.engine.network import Links, Network, UnitBlock
from pgfl.engine.settings import CurveBatch, CurveSettings
from pgfl.engine.simulate import Trajectory, simulate
from pgfl.engine.step import RoundResult, gfl_round, local_phase, sample_clients

__all__ = [
    "DIVERGENCE_BOUND",
    "CurveBatch",
    "CurveSettings",
    "Links",
    "Network",
    "RoundResult",
    "Trajectory",
    "UnitBlock",
    "gfl_round",
    "local_phase",
    "sample_clients",
    "simulate",
]
