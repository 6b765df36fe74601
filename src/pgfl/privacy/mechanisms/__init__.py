"""Privacy mechanisms of GFL, one object each, and the registry that names them.

A mechanism (:mod:`~pgfl.privacy.mechanisms.base`) draws its noise in the engine's round,
describes what it releases to the accountant (a
:class:`~pgfl.privacy.accounting.releases.Transcript`) and states whom it protects. The
registry maps the configuration's names (``privacy.client_noise``,
``privacy.server_noise``) to mechanism classes; the parameter table's vocabularies and the
documentation are read from it, so **a new scheme is one new module plus one call of
:func:`register`**.

Client level (:data:`CLIENT`): ``none`` (:class:`Mean`), ``laplace`` / ``gaussian``
(:class:`ClientNoise`), ``secure_aggregation`` (:class:`SecureAggregationScheme`),
``distributed_gaussian`` / ``skellam`` (:class:`DistributedNoise`: noise shares inside
secure aggregation, distributed DP), ``laplace+secure_aggregation`` /
``gaussian+secure_aggregation`` (:class:`NoisySecureAggregation`: client noise, then secure
aggregation), ``clip+laplace`` / ``clip+gaussian`` (:class:`ClippedNoise`: each message
clipped to ℓ2 norm S, then its noise: DP-FedAvg's), and ``clip+…+secure_aggregation``
(:class:`ClippedNoisySecureAggregation`), each composed from its pieces by :func:`compose`.
Server level (:data:`SERVER`): ``none`` (:class:`NoServerNoise`), ``random``
(:class:`RandomNoise`), ``graph_homomorphic`` (:class:`GraphHomomorphic`),
``random_per_link`` (:class:`PerLinkNoise`), ``central`` (:class:`CentralNoise`, the
central-DP ceiling: a trusted aggregator), ``pairwise_cancelling``
(:class:`PairwiseCancelling`, DECOR's correlated noise), ``gossip`` (:class:`Gossip`, local
noise then K gossip steps: Muffliato), ``topology_optimized`` (:class:`TopologyOptimized`,
CorN's covariance optimised for the topology, drawn by a dealer).

>>> build("server", {"privacy.server_noise": "graph_homomorphic",
...                  "privacy.server_variance": 0.09, "privacy.server_distribution": "laplace"})
GraphHomomorphic(std=0.3, variance=0.09, distribution='laplace')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pgfl.param import Param
from pgfl.privacy.mechanisms.base import (
    ADVERSARIES,
    NEIGHBOURS,
    REGISTRY,
    Aggregate,
    ClientAggregation,
    Mechanism,
    NoiseLaw,
    ReleaseContext,
    RoundContext,
    ServerNoise,
    add_adversary,
    declared,
    protected,
    remove_adversary,
    view_of,
)
from pgfl.privacy.mechanisms.chain import (
    Chain,
    ClippedNoise,
    ClippedNoisySecureAggregation,
    NoisySecureAggregation,
    compose,
)
from pgfl.privacy.mechanisms.client import ClientNoise, Mean
from pgfl.privacy.mechanisms.clip import MessageClip
from pgfl.privacy.mechanisms.correlated import PairwiseCancelling
from pgfl.privacy.mechanisms.distributed import DistributedNoise
from pgfl.privacy.mechanisms.gossip import Gossip
from pgfl.privacy.mechanisms.optimized import TopologyOptimized
from pgfl.privacy.mechanisms.secure_aggregation import SecureAggregationScheme
from pgfl.privacy.mechanisms.server import (
    HYBRID,
    CentralNoise,
    GraphHomomorphic,
    NoServerNoise,
    PerLinkNoise,
    RandomNoise,
)
from pgfl.style import SchemeStyle, add_style, remove_style

__all__ = [
    "ADVERSARIES",
    "CLIENT",
    "NEIGHBOURS",
    "REGISTRY",
    "SERVER",
    "Aggregate",
    "ClientAggregation",
    "CentralNoise",
    "Chain",
    "ClientNoise",
    "ClippedNoise",
    "ClippedNoisySecureAggregation",
    "DistributedNoise",
    "Gossip",
    "GraphHomomorphic",
    "Mean",
    "Mechanism",
    "MessageClip",
    "NoServerNoise",
    "NoisySecureAggregation",
    "NoiseLaw",
    "PairwiseCancelling",
    "PerLinkNoise",
    "RandomNoise",
    "ReleaseContext",
    "RoundContext",
    "SecureAggregationScheme",
    "ServerNoise",
    "TopologyOptimized",
    "add_adversary",
    "build",
    "compose",
    "declared",
    "names",
    "params",
    "protected",
    "register",
    "remove_adversary",
    "unregister",
    "version",
    "view_of",
]

#: ``privacy.client_noise`` name → mechanism class.
CLIENT: dict[str, type[ClientAggregation]] = REGISTRY["client"]  # type: ignore[assignment]
#: ``privacy.server_noise`` name → mechanism class.
SERVER: dict[str, type[ServerNoise]] = REGISTRY["server"]  # type: ignore[assignment]


_CHANGES = [0]  # how many times the registry changed (the parameter table follows it)


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Add a mechanism class under each of its ``names`` at its ``level``; return it.

    Usable as a class decorator. A name already taken by another class is an error. The
    settings the class declares (``params``) join the parameter table
    (:data:`pgfl.params.PARAMS`) at once: the loader accepts them, the reference lists them.
    """
    table: dict[str, Any] = CLIENT if cls.level == "client" else SERVER
    for name in cls.names:
        if table.get(name, cls) is not cls:
            raise ValueError(f"{cls.level} mechanism {name!r} is already {table[name].__name__}")
    for name in cls.names:
        table[name] = cls
    for name, style in _styles(cls).items():
        add_style(style, cls.level, (name,))
    _CHANGES[0] += 1
    return cls


def _styles(cls: type[Mechanism]) -> dict[str, SchemeStyle]:
    """The figure style of each of the class's names: its own ``style`` declaration.

    ``style`` is one :class:`~pgfl.style.SchemeStyle` for every name, or a mapping from
    name to style (a class whose names are different schemes). Only the class's own
    declaration counts: a subclass is another scheme, with a colour of its own (from its
    name) unless it declares one.
    """
    style = vars(cls).get("style")
    if style is None:
        return {}
    if isinstance(style, SchemeStyle):
        return dict.fromkeys(cls.names, style)
    return {name: style[name] for name in cls.names if name in style}


def unregister(cls: type[Mechanism]) -> None:
    """Remove a class :func:`register` added (its names and settings); a test's own scheme.

    >>> class Mine(RandomNoise):
    ...     names = ("mine",)
    >>> _ = register(Mine); "mine" in names("server")
    True
    >>> unregister(Mine); "mine" in names("server")
    False
    """
    table: dict[str, Any] = CLIENT if cls.level == "client" else SERVER
    for name in cls.names:
        if table.get(name) is cls:
            del table[name]
    for style in _styles(cls).values():
        remove_style(style.name)
    _CHANGES[0] += 1


def version() -> int:
    """A number that changes whenever a mechanism is registered or removed."""
    return _CHANGES[0]


for _cls in (
    Mean,
    ClientNoise,
    SecureAggregationScheme,
    DistributedNoise,
    NoisySecureAggregation,
    ClippedNoise,
    ClippedNoisySecureAggregation,
):
    register(_cls)
for _cls in (
    NoServerNoise,
    RandomNoise,
    GraphHomomorphic,
    PerLinkNoise,
    CentralNoise,
    PairwiseCancelling,
    Gossip,
    TopologyOptimized,
):
    register(_cls)
#: Local DP: each client noises what it shares about its own data (graph learning's noisy
#: statistic, :func:`pgfl.style.method_style`); no registered mechanism of this package.
LOCAL_DP = SchemeStyle("local_dp", "local DP", "#999933", "p", order=8,
                       labels=("*local_dp*", "local*"))  # fmt: skip
# styles of no one class: a pair of schemes (hybrid), graph learning's local DP; graph
# learning's private mechanisms (pgfl.graphlearn) draw in client noise's and local DP's
add_style(HYBRID)
add_style(LOCAL_DP, "graphlearn", ("statistic",))
add_style(ClientNoise.style, "graphlearn", ("last_step",))


def names(level: str) -> tuple[str, ...]:
    """The registered names of one level (``"client"`` or ``"server"``), ``"none"`` first.

    >>> names("server")[:4]
    ('none', 'random', 'graph_homomorphic', 'random_per_link')
    >>> names("server")[4:]
    ('central', 'pairwise_cancelling', 'gossip', 'topology_optimized')
    """
    return tuple(CLIENT if level == "client" else SERVER)


def params() -> tuple[Param, ...]:
    """The settings the registered mechanisms own, each once, in registration order."""
    out: dict[str, Param] = {}
    for cls in (*CLIENT.values(), *SERVER.values()):
        for p in cls.params:
            out.setdefault(p.name, p)
    return tuple(out.values())


def build(level: str, settings: Mapping[str, Any]) -> Mechanism:
    """The mechanism a curve's settings (dotted names) name at ``level``."""
    table: Mapping[str, type[Mechanism]] = CLIENT if level == "client" else SERVER
    return table[settings[f"privacy.{level}_noise"]].from_settings(settings)
