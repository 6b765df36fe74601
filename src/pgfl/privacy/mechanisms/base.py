"""What a privacy mechanism is: noise in the engine's step, a release, a threat model.

A mechanism of the client → server link (a :class:`ClientAggregation`) or of the server →
server links (a :class:`ServerNoise`) is one object that

(a) draws its noise inside the engine's round — :meth:`ClientAggregation.aggregate` turns
    the sampled clients' local models into the unit's aggregate ``ψ_p`` (eq. 7 of
    "Privatized Graph Federated Learning", Rizk, Vlaski & Sayed, arXiv:2203.07105),
    :meth:`ServerNoise.link_noise` gives the noise ``g_pm`` on the message ``ψ_m + g_pm``
    server ``m`` sends to ``p`` (eq. 8); both are class methods called once per round with
    every curve's instance of the class, so the work stays vectorized over curves;
(b) describes what it releases to the accountant, :meth:`Mechanism.transcript`: a frozen
    :class:`~pgfl.privacy.accounting.releases.Transcript` (one release per iteration —
    sensitivity, noise scale, distribution, copies — as ``dp_accounting``'s events), for
    the run's :class:`ReleaseContext` (step size, clipping, sizes);
(c) states its threat model (:attr:`Mechanism.protects`, :attr:`Mechanism.exposes`:
    which of the :data:`ADVERSARIES` its ε covers, and which it does not).

The engine knows a mechanism only through (a); the accountant only through (b).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from pgfl.param import Param
from pgfl.privacy.accounting.releases import Transcript
from pgfl.rng import KeyedDraws

__all__ = [
    "ADVERSARIES",
    "NEIGHBOURS",
    "SAMPLING_SECRET",
    "subsampled",
    "Aggregate",
    "ClientAggregation",
    "Mechanism",
    "ReleaseContext",
    "RoundContext",
    "ServerNoise",
]

#: The observers a mechanism may protect against, with what each sees.
ADVERSARIES: dict[str, str] = {
    "link_eavesdropper": "sees every server-to-server message (no downlink to clients)",
    "other_server": "a curious server that is not a neighbour of the unit",
    "neighbour_server": "a curious neighbouring server: sees the messages sent to it",
    "own_server": "a unit's own server, against its clients",
    "unit_client": "a client of a unit: sees its server's model every round",
}

#: Adversaries who do not learn which clients a unit sampled in a round (all but the
#: unit's own server, who does the sampling), so that client sampling amplifies against
#: them.
SAMPLING_SECRET = ("link_eavesdropper", "other_server", "neighbour_server", "unit_client")

#: Neighbouring relations: one client's whole data replaced (the papers' Definition 1),
#: or one record (sample) of one client replaced.
NEIGHBOURS = {
    "client": "one client's whole data set replaced",
    "record": "one record (sample) of one client replaced",
}


class RoundContext(NamedTuple):
    """What a mechanism may know about the round it runs in (one block of units).

    Attributes:
        draws: the keyed draws of the block's repetitions and units in this round.
        start: global id of the block's first unit.
        iteration: the iteration number ``i`` (1-based).

    """

    draws: KeyedDraws
    start: int
    iteration: int


class Aggregate(NamedTuple):
    """The result of a client aggregation for ``C'`` curves of one block.

    Attributes:
        psi: the units' aggregates ``ψ_p``, ``[C', R, P_b, M]``; a non-finite entry marks
            its repetition as diverged.
        aborted: units that aborted the round and kept ``w_{p,i−1}``, ``[C', R, P_b]``.
        clipped: messages (client vectors) with a coordinate clipped, ``[C', R]``.

    """

    psi: np.ndarray
    aborted: np.ndarray | None = None
    clipped: np.ndarray | None = None


@dataclass(frozen=True, kw_only=True)
class ReleaseContext:
    """What the accountant needs to know of a run besides the mechanism itself.

    Built from validated settings (:meth:`pgfl.engine.CurveSettings.release_context`, or a
    command's options checked against the parameter table); not re-validated here.

    Attributes:
        mu: step size μ.
        clip: the per-sample gradient clipping norm B (``None``: no bound, ε = ∞).
        share: ``"models"`` or ``"updates"`` (journal §3.4).
        iterations: T.
        dim: the model dimension M.
        clients_per_round: the fewest clients a unit averages per round: L, or with
            secure aggregation and dropout its threshold t.
        aggregation_error: per-coordinate bound on the error of a unit's aggregate
            (secure aggregation's fixed-point rounding).
        observed_links: links an adversary of one server's messages watches (the
            largest number of links a server sends to others).
        rigorous: M-dimensional Laplace releases with the rigorous sensitivities
            (default); ``False``: the papers' reading for every accountant.
        clients, sampled: K and L: each round a unit draws L of its K clients uniformly
            without replacement (``clients = 0``: no sampling to credit).
        records: how many records a client's one local step averages with equal weight
            when a changed record can enter it only once (record-level neighbours, one
            full-batch step per round: the fewest samples of a client), else 1.
        neighbours: the neighbouring relation (:data:`NEIGHBOURS`).
        units: P, the number of units (a central aggregator averages them).
        adjacency: the servers' graph, 0/1 ``[P, P]`` without self-loops (correlated
            noise is accounted on it); ``None`` where unknown.
        combination: the topology's combination matrix A ``[P, P]`` (before a scheme's
            own :meth:`Mechanism.combination`: gossip is accounted on A, not on the
            polynomial of A the engine applies); ``None`` where unknown.

    >>> ReleaseContext(mu=0.5, clip=1.0, iterations=3).clients_per_round
    1

    """

    mu: float
    clip: float | None
    iterations: int
    share: str = "models"
    dim: int = 1
    clients_per_round: int = 1
    aggregation_error: float = 0.0
    observed_links: int = 1
    rigorous: bool = True
    clients: int = 0
    sampled: int = 0
    records: int = 1
    neighbours: str = "client"
    units: int = 1
    adjacency: np.ndarray | None = dataclasses.field(default=None, compare=False, repr=False)
    combination: np.ndarray | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.clip is not None and math.isinf(self.clip):
            object.__setattr__(self, "clip", None)  # an infinite norm bounds nothing


class Mechanism:
    """A privacy mechanism (module doc): noise, its release, whom it protects.

    Class attributes:
        names: the configuration names of the mechanism (``privacy.client_noise`` or
            ``privacy.server_noise`` values); the first is its ``name``.
        level: ``"client"`` (client → server link) or ``"server"`` (server → server).
        params: settings the mechanism owns (its ranges live there).
        calibrates: the setting a ``privacy.target_epsilon`` replaces (``None``: none).
        protects: the :data:`ADVERSARIES` its ε covers.
        exposes: adversaries it does not protect against, with why.
        silent: adds nothing (the engine skips it).
        amplified: a round's release depends on a client only in the rounds it is
            sampled (so client sampling amplifies against :data:`SAMPLING_SECRET`); false
            where the release accumulates earlier rounds (a growing sensitivity).

    The engine combines the servers' messages with :meth:`combination` of the topology's
    matrix (the topology's own by default; a trusted aggregator's average, K gossip
    steps); :meth:`combination_key` says what that depends on, so that only curves with
    the same combination are batched together.
    """

    names: ClassVar[tuple[str, ...]] = ("custom",)
    level: ClassVar[str] = "server"
    params: ClassVar[tuple[Param, ...]] = ()
    calibrates: ClassVar[str | None] = None
    protects: ClassVar[tuple[str, ...]] = ()
    exposes: ClassVar[Mapping[str, str]] = {}
    silent: ClassVar[bool] = False
    amplified: ClassVar[bool] = False

    @property
    def name(self) -> str:
        """The configuration name of this instance."""
        return self.names[0]

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """The mechanism of a curve's settings (dotted names, e.g. ``privacy.server_variance``)."""
        return cls()

    @classmethod
    def combination(cls, mixing: np.ndarray, s: Mapping[str, Any]) -> np.ndarray:
        """The matrix the engine combines messages with, given the topology's ``mixing``.

        ``s``: the curve's settings (dotted names). Default: ``mixing`` itself (eq. 8).
        """
        return mixing

    @classmethod
    def combination_key(cls, s: Mapping[str, Any]) -> tuple:
        """What :meth:`combination` depends on besides the topology (``()``: nothing).

        Part of a curve's batching key (:meth:`pgfl.experiments.config.CurveConfig.structure`):
        curves whose combinations differ never share a simulation.
        """
        return ()

    def on_network(self, net: Any) -> Mechanism:
        """The mechanism as it runs on ``net`` (default: itself).

        Called once per batch when its curves meet their network
        (:meth:`pgfl.engine.CurveBatch.of`); a scheme whose noise depends on the topology
        (:class:`~pgfl.privacy.mechanisms.optimized.TopologyOptimized`) computes it here.
        """
        return self

    #: The mechanism's own rules as ``docs/config.md`` states them ("" if none).
    rules_doc: ClassVar[str] = ""

    @classmethod
    def check_settings(cls, s: Mapping[str, Any]) -> str | None:
        """The one-line message if a curve's settings (dotted names) cannot run it, else None.

        Called when a configuration is loaded, before any network is built
        (:attr:`rules_doc` says what is checked).
        """
        return None

    def validate(self, net: Any) -> None:  # noqa: B027 - optional hook
        """Raise :class:`~pgfl.validation.ConfigError` if the mechanism cannot run on ``net``."""

    def transcript(self, ctx: ReleaseContext) -> Transcript | None:
        """What one adversary observes over the run (``None``: no differentially private noise)."""
        return None

    def views(self, ctx: ReleaseContext) -> dict[str, Transcript | None]:
        """What each of the :data:`ADVERSARIES` observes (``None``: not protected).

        The adversaries in :attr:`protects` see :meth:`transcript`; with Gaussian noise
        and an :attr:`amplified` mechanism, those who do not know which clients were
        sampled (:data:`SAMPLING_SECRET`) see it on an L-of-K subsample
        (:func:`subsampled`). Mechanisms whose adversaries see different things override
        this.
        """
        t = self.transcript(ctx)
        out: dict[str, Transcript | None] = dict.fromkeys(ADVERSARIES)
        for a in self.protects:
            if t is not None:
                out[a] = subsampled(t, ctx) if self.amplified and a in SAMPLING_SECRET else t
        return out

    def noiseless(self) -> Mechanism:
        """The same mechanism with its noise switched off (the audit's noise-free centres)."""
        return self

    def with_std(self, std: float) -> Mechanism:
        """The same mechanism with noise of per-coordinate std ``std`` (calibration's factory)."""
        raise TypeError(f"{type(self).__name__} has no noise level to calibrate")


def subsampled(t: Transcript, ctx: ReleaseContext) -> Transcript:
    """``t`` released on each round's L-of-K client sample, where that is credited.

    Credited with L < K: Gaussian noise by the Rényi bound of subsampling without
    replacement (:class:`~pgfl.privacy.accounting.releases.SampledGaussianRelease`),
    Laplace noise by the tight pure-DP bound
    (:func:`~pgfl.privacy.accounting.releases.amplified_epsilon`); otherwise ``t``
    unchanged.

    >>> t = Transcript((0.1,) * 3, std=1.0, distribution="gaussian")
    >>> subsampled(t, ReleaseContext(mu=1, clip=1, iterations=3, clients=10, sampled=2)).sampling
    (10, 2)
    """
    if not t.sensitivities or not 0 < ctx.sampled < ctx.clients:
        return t
    return dataclasses.replace(t, sampling=(ctx.clients, ctx.sampled))


class ClientAggregation(Mechanism):
    """How a server forms ``ψ_p`` from its sampled clients' local models (eq. 7)."""

    level: ClassVar[str] = "client"

    def fewest_clients(self, L: int) -> int:
        """The fewest clients a unit averages per round (``L``; secure aggregation: its ``t``)."""
        return L

    def aggregation_error(self, mu: float, share: str) -> float:
        """Per-coordinate bound on the error of the aggregate (0: exact)."""
        return 0.0

    @classmethod
    def aggregate(
        cls,
        schemes: Sequence[ClientAggregation],
        start: np.ndarray,
        local: np.ndarray,
        mu: np.ndarray,
        updates: np.ndarray,
        ctx: RoundContext,
    ) -> Aggregate:
        """Aggregate ``C'`` curves at once.

        Args:
            schemes: the curves' instances of this class, ``C'`` of them.
            start: the units' models at the start of the round ``w_{p,i−1}``, ``[C', R, P_b, M]``.
            local: the sampled clients' local models ``w_pk``, ``[C', R, P_b, L, M]``.
            mu: the curves' step sizes, ``[C']``.
            updates: whether each curve shares updates (journal §3.4) rather than models, ``[C']``.
            ctx: the round's draws and position.

        """
        raise NotImplementedError


class ServerNoise(Mechanism):
    """The noise ``g_pm`` on the message server ``m`` sends to server ``p`` (eq. 8)."""

    level: ClassVar[str] = "server"

    @classmethod
    def link_noise(
        cls, schemes: Sequence[ServerNoise], links: Any, dim: int, ctx: RoundContext
    ) -> np.ndarray:
        """Noise on the block's outgoing links for ``C'`` curves at once.

        Args:
            schemes: the curves' instances of this class, ``C'`` of them.
            links: the :class:`~pgfl.engine.network.Links` sent by the block's units
                (``links.src - ctx.start`` are block-local sender indices).
            dim: ``M``, the model dimension.
            ctx: the round's draws and position.

        Returns:
            ``g_pm`` per curve, repetition and link, ``[C', R, n_links, M]``.

        """
        raise NotImplementedError
