"""Privacy schemes of a GFL round as small pluggable objects, one interface per link.

Equation numbers refer to "Privatized Graph Federated Learning" (Rizk, Vlaski & Sayed,
arXiv:2203.07105) and its journal version.

**Client aggregation** (the client → server link, eq. 7): a :class:`ClientAggregation`
turns the sampled clients' local models ``w_pk`` into the unit's aggregate ``ψ_p``:

* :class:`Mean` — ``ψ_p = (1/L) Σ_k w_pk`` (no privacy);
* :class:`ClientNoise` — each client adds noise ``g_pk`` (std ``σ`` per coordinate) to what
  it shares: its model, ``ψ_p = (1/L) Σ_k (w_pk + g_pk)``, or its update
  ``u_pk = (w_{p,i−1} − w_pk)/μ``, ``ψ_p = w_{p,i−1} − μ (1/L) Σ_k (u_pk + g_pk)``
  (journal §3.4, eqs. 54–55);
* secure aggregation lives with the rest of the protocol in :mod:`pgfl.privacy`
  (:class:`pgfl.privacy.schemes.SecureAggregationScheme`): the engine does not know it.

**Server noise** (the server → server links, eq. 8): a :class:`ServerNoise` gives the noise
``g_pm`` on the message ``ψ_m + g_pm`` that server ``m`` sends to ``p`` (self-copy included),
after which ``w_p = Σ_m a_pm (ψ_m + g_pm)``:

* :class:`NoServerNoise`;
* :class:`RandomNoise` — ``g_pm = g_m``: one draw per server, on every copy;
* :class:`GraphHomomorphic` — ``g_pm = g_m`` for ``p ≠ m`` and
  ``g_mm = −((1 − a_mm)/a_mm) g_m`` (eq. 47), so that ``Σ_p a_pm g_pm = 0`` and the network
  centroid carries no noise (eq. 46);
* :class:`PerLinkNoise` — an independent draw on every link.

A scheme is one class. Curves of a batched simulation whose schemes have the same class are
handled together by one call of the class method (:meth:`ClientAggregation.aggregate`,
:meth:`ServerNoise.link_noise`) with all of their instances, so that the work stays
vectorized over curves, repetitions, units and clients. Draws come from the round's
:class:`pgfl.rng.KeyedDraws` (streams ``client_noise.<distribution>``,
``server_noise.<distribution>``, ``link_noise.<distribution>``): every curve with the same
distribution sees the same numbers (common random numbers), whatever else is batched with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from pgfl.params import check
from pgfl.rng import KeyedDraws
from pgfl.topology import check_combination_matrix
from pgfl.validation import check_real


class RoundContext(NamedTuple):
    """What a scheme may know about the round it runs in (one block of units).

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


class ClientAggregation:
    """How a server forms ``ψ_p`` from its sampled clients' local models (eq. 7)."""

    #: The ``privacy.client_noise`` name of the scheme (for records and logs).
    name: ClassVar[str] = "custom"

    def validate(self, net: Any) -> None:  # noqa: B027 - optional hook
        """Raise :class:`~pgfl.validation.ConfigError` if the scheme cannot run on ``net``."""

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


@dataclass(frozen=True)
class Mean(ClientAggregation):
    """``ψ_p = (1/L) Σ_k w_pk``: plain federated averaging, no privacy.

    Sharing updates gives the same aggregate: ``w − μ·mean((w − w_k)/μ) = mean(w_k)``.
    """

    name: ClassVar[str] = "none"

    @classmethod
    def aggregate(cls, schemes, start, local, mu, updates, ctx) -> Aggregate:
        """Mean of the local models over the sampled clients."""
        return Aggregate(local.mean(axis=3))


@dataclass(frozen=True)
class ClientNoise(ClientAggregation):
    """Each sampled client adds noise to what it shares (eq. 7; journal eqs. 54–55).

    Attributes:
        distribution: ``"laplace"`` (``Lap(0, σ/√2)``) or ``"gaussian"`` (``N(0, σ²)``).
        std: ``σ``, the standard deviation per coordinate.

    Noise on a model enters ``ψ_p`` as ``+ mean_k g_pk``; noise on an update as
    ``−μ mean_k g_pk`` (journal §3.4: O(μ) instead of O(1/μ) in the MSD).

    """

    distribution: str = "laplace"
    std: float = 0.0

    def __post_init__(self) -> None:
        check("privacy.client_noise", self.distribution)
        check_real("privacy.client_std", self.std, lo=0)

    @property
    def name(self) -> str:  # type: ignore[override]
        """The distribution, as in ``privacy.client_noise``."""
        return self.distribution

    @classmethod
    def aggregate(cls, schemes, start, local, mu, updates, ctx) -> Aggregate:
        """Mean of the local models plus each distribution's averaged client noise."""
        L, M = local.shape[-2:]
        psi = local.mean(axis=3)
        std = np.array([s.std for s in schemes])
        scale = std * np.where(updates, -mu, 1.0)
        for dist in sorted({s.distribution for s in schemes}):
            mine = np.array([s.distribution == dist for s in schemes])
            g = ctx.draws.noise("client_noise", dist, (L, M)).mean(axis=2)  # [R, P_b, M]
            psi[mine] += scale[mine, None, None, None] * g
        return Aggregate(psi)


class ServerNoise:
    """The noise ``g_pm`` on the message server ``m`` sends to server ``p`` (eq. 8)."""

    #: The ``privacy.server_noise`` name of the scheme (for records and logs).
    name: ClassVar[str] = "custom"
    #: True for schemes that add nothing (the engine skips them).
    silent: ClassVar[bool] = False

    def validate(self, net: Any) -> None:  # noqa: B027 - optional hook
        """Raise :class:`~pgfl.validation.ConfigError` if the scheme cannot run on ``net``."""

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


@dataclass(frozen=True)
class NoServerNoise(ServerNoise):
    """Servers send ``ψ_m`` as it is."""

    name: ClassVar[str] = "none"
    silent: ClassVar[bool] = True

    @classmethod
    def link_noise(cls, schemes, links, dim, ctx) -> np.ndarray:
        """Zero noise."""
        R = ctx.draws.reps.size
        return np.zeros((len(schemes), R, links.src.size, dim))


@dataclass(frozen=True)
class RandomNoise(ServerNoise):
    """Server ``m`` draws ``g_m`` (std ``σ`` per coordinate) and sends ``ψ_m + g_m`` on every link.

    Attributes:
        std: ``σ_g``, the standard deviation per coordinate.
        distribution: ``"laplace"`` (the papers) or ``"gaussian"``.

    """

    std: float = 0.0
    distribution: str = "laplace"
    name: ClassVar[str] = "random"

    def __post_init__(self) -> None:
        check_real("privacy.server_std", self.std, lo=0)
        check("privacy.server_distribution", self.distribution)

    @staticmethod
    def coefficients(links: Any) -> np.ndarray:
        """``g_pm = c_pm g_m``: the coefficient ``c_pm`` of each link, ``[n]``."""
        return np.ones(links.src.size)

    @classmethod
    def link_noise(cls, schemes, links, dim, ctx) -> np.ndarray:
        """``std · c_pm · g_m`` with one draw ``g_m`` per sender (stream ``server_noise``)."""
        R = ctx.draws.reps.size
        out = np.empty((len(schemes), R, links.src.size, dim))
        std = np.array([s.std for s in schemes])
        coef = cls.coefficients(links)[:, None]
        sender = links.src - ctx.start
        for dist in sorted({s.distribution for s in schemes}):
            mine = np.array([s.distribution == dist for s in schemes])
            g = ctx.draws.noise("server_noise", dist, (dim,))[:, sender] * coef  # [R, n, M]
            out[mine] = std[mine, None, None, None] * g
        return out


@dataclass(frozen=True)
class GraphHomomorphic(RandomNoise):
    """Graph-homomorphic perturbations (eq. 47): they cancel in the network centroid (eq. 46).

    Server ``m`` draws ``g_m`` and sends ``ψ_m + g_m`` to every neighbour; its own copy
    carries ``−((1 − a_mm)/a_mm) g_m``, so ``Σ_p a_pm g_pm = 0`` (needs ``a_mm > 0``).
    """

    name: ClassVar[str] = "graph_homomorphic"

    def validate(self, net: Any) -> None:
        """Every server needs a self weight ``a_mm > 0``."""
        if self.std > 0:
            check_combination_matrix(net.A, need_self_weights=True)

    @staticmethod
    def coefficients(links: Any) -> np.ndarray:
        """1 on links to neighbours, ``−(1 − a_mm)/a_mm`` on a server's copy to itself."""
        own = links.src == links.dst
        coef = np.ones(links.src.size)
        coef[own] = -(1.0 - links.self_weight[own]) / links.self_weight[own]
        return coef


@dataclass(frozen=True)
class PerLinkNoise(RandomNoise):
    """An independent draw ``g_pm`` on every link ``m → p`` (self-copy included).

    The draw of link ``m → p`` is keyed by the sender ``m`` and the receiver ``p``
    (stream ``link_noise``), so a server can draw its links' noise alone.
    """

    name: ClassVar[str] = "random_per_link"

    @classmethod
    def link_noise(cls, schemes, links, dim, ctx) -> np.ndarray:
        """``std · g_pm`` with one draw per link and coordinate."""
        R = ctx.draws.reps.size
        out = np.empty((len(schemes), R, links.src.size, dim))
        std = np.array([s.std for s in schemes])
        counters = links.dst[:, None] * dim + np.arange(dim)  # [n, M]
        sender = links.src - ctx.start
        for dist in sorted({s.distribution for s in schemes}):
            mine = np.array([s.distribution == dist for s in schemes])
            g = ctx.draws.noise_at("link_noise", dist, sender, counters)  # [R, n, M]
            out[mine] = std[mine, None, None, None] * g
        return out


#: ``privacy.server_noise`` names of the built-in server schemes.
SERVER_SCHEMES: dict[str, type[RandomNoise]] = {
    "random": RandomNoise,
    "graph_homomorphic": GraphHomomorphic,
    "random_per_link": PerLinkNoise,
}
