"""Per-curve settings, and the curves of one batched simulation as arrays and scheme groups."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from pgfl.engine.network import Network
from pgfl.general import PARAMS as GENERAL
from pgfl.privacy.mechanisms import (
    ClientAggregation,
    Mean,
    NoServerNoise,
    ReleaseContext,
    ServerNoise,
)
from pgfl.privacy.mechanisms.base import NEIGHBOURING
from pgfl.validation import ConfigError


@dataclass(frozen=True)
class CurveSettings:
    """Settings that may differ between the curves of one batched simulation.

    The privacy mechanisms are objects (:mod:`pgfl.privacy.mechanisms`): a client-level
    :class:`~pgfl.privacy.mechanisms.ClientAggregation` (plain averaging, client noise,
    secure aggregation or one of your own) and a server-level
    :class:`~pgfl.privacy.mechanisms.ServerNoise`.

    Attributes:
        mu: step size ``μ`` (> 0); a client's SGD step is ``μ / E_pk``.
        share: ``"models"`` or ``"updates"`` (journal §3.4).
        client: how a server aggregates its clients (default: the plain mean).
        server: the noise on the server → server links (default: none).
        clip_norm: per-sample gradient clipping norm (``inf``: no clipping).
        neighbours: the neighbouring relation of every ε (``"client"``: one client's
            data replaced, the papers'; ``"record"``: one record).

    >>> from pgfl.privacy.mechanisms import GraphHomomorphic
    >>> CurveSettings(mu=0.7, server=GraphHomomorphic(std=0.3)).server.variance
    0.09

    """

    mu: float
    share: str = "models"
    client: ClientAggregation = field(default_factory=Mean)
    server: ServerNoise = field(default_factory=NoServerNoise)
    clip_norm: float = float("inf")
    neighbours: str = "client"

    def __post_init__(self) -> None:
        GENERAL.check("training.mu", self.mu)
        NEIGHBOURING.check(self.neighbours)
        GENERAL.check("training.share", self.share)
        GENERAL.check("training.clip_norm", self.clip_norm)
        for name, obj, kind in (("client", self.client, ClientAggregation),
                                ("server", self.server, ServerNoise)):  # fmt: skip
            if not isinstance(obj, kind):
                raise ConfigError(
                    f"{name} must be a {kind.__name__} (pgfl.privacy.mechanisms); got {obj!r}"
                )

    def noiseless(self) -> CurveSettings:
        """The same curve with every mechanism's noise switched off."""
        return CurveSettings(
            self.mu,
            self.share,
            self.client.noiseless(),
            self.server.noiseless(),
            self.clip_norm,
            self.neighbours,
        )

    def release_context(self, net: Network, iterations: int) -> ReleaseContext:
        """What the accountant needs to know of this curve run on ``net`` for T iterations.

        The fewest clients a unit averages and the aggregation error come from the client
        mechanism (secure aggregation: its threshold and rounding bound); an adversary of
        one server's messages watches at most the largest number of links a server sends
        to others (the off-diagonal non-zeros of a column of A). Record-level neighbours
        credit ``records`` (a changed record moves one full-batch step by 1/N_pk of a
        client's) only where a round is one full-batch step from the unit's model
        (``training.batch = "full"``, ``training.epochs = 1``); with mini-batches drawn
        with replacement a record can fill a whole batch, and over several steps the
        models the record moved feed later steps, so a record then counts as a client.
        """
        sends = (net.A != 0) & ~np.eye(net.A.shape[0], dtype=bool)  # m → p where a_pm ≠ 0
        W = net.mixing  # the servers' graph (A but for a scheme's own combination)
        graph = (W != 0) & (W.T != 0) & ~np.eye(W.shape[0], dtype=bool)
        one_step = net.batch is None and int(net.epochs.max()) == 1
        counts = net.data.counts
        known = counts is not None and self.neighbours == "record" and one_step
        records = int(counts.min()) if known else 1  # an outline without counts: 1, sound
        return ReleaseContext(
            mu=self.mu,
            clip=self.clip_norm,
            share=self.share,
            iterations=iterations,
            dim=net.dim,
            clients_per_round=self.client.fewest_clients(net.L),
            aggregation_error=self.client.aggregation_error(self.mu, self.share),
            observed_links=max(1, int(sends.sum(axis=0).max())),
            clients=net.data.shape[1],
            sampled=net.L,
            records=records,
            neighbours=self.neighbours,
            units=net.A.shape[0],
            sample_revealed=self.client.reveals_sample,
            adjacency=graph.astype(int),
            combination=net.mixing,
        )


class SchemeGroup(NamedTuple):
    """Curves whose scheme has the same class: ``cls.method(schemes, ...)`` runs them at once."""

    cls: type
    index: np.ndarray  # curve indices [C']
    schemes: tuple


@dataclass(frozen=True)
class CurveBatch:
    """The curves of one batched simulation: per-curve arrays and scheme groups.

    Attributes:
        settings: the curves.
        mu: ``[C]`` step sizes.
        updates: ``[C]`` whether the curve shares updates.
        clip: ``[C]`` clipping norms, or ``None`` if no curve clips.
        client_groups: the curves grouped by client-aggregation class.
        server_groups: the curves grouped by server-noise class (silent schemes left out).

    """

    settings: tuple[CurveSettings, ...]
    mu: np.ndarray
    updates: np.ndarray
    clip: np.ndarray | None
    client_groups: tuple[SchemeGroup, ...]
    server_groups: tuple[SchemeGroup, ...]

    @classmethod
    def of(cls, curves: Sequence[CurveSettings], net: Network | None = None) -> CurveBatch:
        """Arrays and groups of ``curves`` (at least one), checked against ``net`` if given.

        The check is each mechanism's ``validate(net)`` (graph-homomorphic noise needs
        ``a_pp > 0``; secure aggregation needs L clients to fit its modulus and threshold):
        a batch built with the network it runs on is checked once, before anything runs.
        With ``net``, each mechanism is first replaced by its
        :meth:`~pgfl.privacy.mechanisms.Mechanism.on_network` (noise designed for the
        topology), so the batch's settings are what runs.
        """
        if not curves:
            raise ConfigError("curves must list at least one curve; got none")
        if net is not None:
            curves = [_on_network(c, net) for c in curves]
        for c in curves if net is not None else ():
            c.client.validate(net)
            c.server.validate(net)
        clips = np.array([c.clip_norm for c in curves])
        return cls(
            settings=tuple(curves),
            mu=np.array([c.mu for c in curves]),
            updates=np.array([c.share == "updates" for c in curves]),
            clip=clips if np.isfinite(clips).any() else None,
            client_groups=_groups([c.client for c in curves]),
            server_groups=_groups([c.server for c in curves], skip_silent=True),
        )

    def __len__(self) -> int:
        return len(self.settings)


def _on_network(c: CurveSettings, net: Network) -> CurveSettings:
    client, server = c.client.on_network(net), c.server.on_network(net)
    if client is c.client and server is c.server:
        return c
    return replace(c, client=client, server=server)


def _groups(schemes: list, *, skip_silent: bool = False) -> tuple[SchemeGroup, ...]:
    classes: dict[type, list[int]] = {}
    for i, s in enumerate(schemes):
        if not (skip_silent and getattr(s, "silent", False)):
            classes.setdefault(type(s), []).append(i)
    return tuple(
        SchemeGroup(k, np.array(idx), tuple(schemes[i] for i in idx)) for k, idx in classes.items()
    )
