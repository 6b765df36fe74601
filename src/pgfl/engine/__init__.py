"""The privatized GFL engine: rounds vectorized over curves, repetitions, units and clients.

One GFL iteration (eqs. 3–8 of "Privatized Graph Federated Learning", Rizk, Vlaski & Sayed,
arXiv:2203.07105) is a pure step over blocks of units (:mod:`pgfl.engine.step`): the local
phase of a block needs only its clients' data, models and keyed draws; the combination
needs only the messages arriving at it. The privacy schemes of the client → server and
server → server links are pluggable objects (:mod:`pgfl.engine.schemes`).

Modules: :mod:`~pgfl.engine.network` (network, links, blocks of units),
:mod:`~pgfl.engine.schemes` (client aggregation and server noise),
:mod:`~pgfl.engine.settings` (per-curve settings), :mod:`~pgfl.engine.step` (one round),
:mod:`~pgfl.engine.simulate` (many rounds and their metrics).
"""

from pgfl.engine.network import Links, Network, UnitBlock
from pgfl.engine.schemes import (
    Aggregate,
    ClientAggregation,
    ClientNoise,
    GraphHomomorphic,
    Mean,
    NoServerNoise,
    PerLinkNoise,
    RandomNoise,
    RoundContext,
    ServerNoise,
)
from pgfl.engine.settings import CurveBatch, CurveSettings
from pgfl.engine.simulate import DIVERGENCE_BOUND, Trajectory, simulate
from pgfl.engine.step import RoundResult, gfl_round, local_phase, sample_clients

__all__ = [
    "DIVERGENCE_BOUND",
    "Aggregate",
    "ClientAggregation",
    "ClientNoise",
    "CurveBatch",
    "CurveSettings",
    "GraphHomomorphic",
    "Links",
    "Mean",
    "Network",
    "NoServerNoise",
    "PerLinkNoise",
    "RandomNoise",
    "RoundContext",
    "RoundResult",
    "ServerNoise",
    "Trajectory",
    "UnitBlock",
    "gfl_round",
    "local_phase",
    "sample_clients",
    "simulate",
]
