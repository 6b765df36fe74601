"""Mechanisms of the server → server links: random, graph-homomorphic and per-link noise.

Equation numbers refer to "Privatized Graph Federated Learning" (Rizk, Vlaski & Sayed,
arXiv:2203.07105). Server ``m`` sends ``ψ_m + g_pm`` to each neighbour ``p`` and itself;
``w_p = Σ_m a_pm (ψ_m + g_pm)`` (eq. 8):

* :class:`NoServerNoise` — ``g_pm = 0``;
* :class:`RandomNoise` — ``g_pm = g_m``: one draw per server, on every copy;
* :class:`GraphHomomorphic` — ``g_pm = g_m`` for ``p ≠ m`` and
  ``g_mm = −((1 − a_mm)/a_mm) g_m`` (eq. 47), so that ``Σ_p a_pm g_pm = 0`` and the network
  centroid carries no noise (eq. 46);
* :class:`PerLinkNoise` — an independent draw on every link;
* :class:`CentralNoise` — the central-DP ceiling: the units send their aggregates to a
  trusted aggregator, which broadcasts the network average plus one draw.

Draws come from the round's :class:`pgfl.rng.KeyedDraws` (streams
``server_noise.<distribution>``, ``link_noise.<distribution>``): every curve with the same
distribution sees the same numbers (common random numbers), whatever else is batched with
it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pgfl.param import Param, When
from pgfl.privacy.accounting.papers import trajectory_sensitivities
from pgfl.privacy.accounting.releases import Transcript
from pgfl.privacy.mechanisms.base import (
    SERVER_SIDE,
    UPLOADS,
    Emitted,
    FrontierLine,
    Mechanism,
    NoiseLevel,
    ReleaseContext,
    ServerNoise,
    declared,
)
from pgfl.privacy.mechanisms.client import DISTRIBUTIONS, NO_PRIVACY, no_noise_reason
from pgfl.style import SchemeStyle
from pgfl.topology import check_combination_matrix
from pgfl.validation import ConfigError

__all__ = [
    "AGGREGATOR",
    "HYBRID",
    "NO_PRIVACY",
    "SERVER_DISTRIBUTION",
    "SERVER_VARIANCE",
    "CentralNoise",
    "GraphHomomorphic",
    "NoServerNoise",
    "PerLinkNoise",
    "RandomNoise",
]

#: ``privacy.server_variance``: σ_g², the variance of the server noise per coordinate.
SERVER_VARIANCE = Param(
    "privacy.server_variance", "real", 0.0, "Variance σ_g² of the server noise per "
    "coordinate.", lo=0, batched=True,
    applies=When('privacy.server_noise other than "none", not calibrated by '
                 "privacy.target_epsilon nor given as privacy.server_noise_multiplier",
                 lambda c: c["privacy.server_noise"] != "none"
                 and c["privacy.target_epsilon"] is None
                 and c.get("privacy.server_noise_multiplier") is None),
)  # fmt: skip


def _chooses_distribution(c: Mapping[str, Any]) -> bool:
    """Whether the curve's server scheme offers a choice of distribution (its declaration)."""
    cls = declared("server", c)
    return cls is not None and len(cls.distributions) > 1


#: ``privacy.server_distribution``: Laplace (the papers) or Gaussian server noise.
SERVER_DISTRIBUTION = Param(
    "privacy.server_distribution", "choice", "laplace", "Distribution of the server noise.",
    choices=DISTRIBUTIONS, batched=True,
    applies=When("privacy.server_noise a scheme whose noise may be Laplace or Gaussian (not "
                 "one whose noise is Gaussian only: its `distributions`)",
                 _chooses_distribution),
)  # fmt: skip


#: Secure aggregation at the clients with graph-homomorphic noise between the servers: the
#: papers' hybrid scheme, a style of its own (a curve of the pair is ``hybrid``).
HYBRID = SchemeStyle("hybrid", "secure aggregation + graph-homomorphic", "#009E73", "D",
                     order=3, of=("secure_aggregation", "graph_homomorphic"))  # fmt: skip


@dataclass(frozen=True)
class NoServerNoise(ServerNoise):
    """Servers send ``ψ_m`` as it is."""

    names: ClassVar[tuple[str, ...]] = ("none",)
    style: ClassVar[SchemeStyle | None] = NO_PRIVACY
    not_deployed: ClassVar[str | None] = None  # pgfl.deploy runs it
    silent: ClassVar[bool] = True

    @classmethod
    def link_noise(cls, schemes, links, dim, ctx) -> np.ndarray:
        """Zero noise."""
        R = ctx.draws.reps.size
        return np.zeros((len(schemes), R, links.src.size, dim))


@dataclass(frozen=True, kw_only=True)
class RandomNoise(NoiseLevel, ServerNoise):
    """Server ``m`` draws ``g_m`` (std ``σ`` per coordinate) and sends ``ψ_m + g_m`` on every link.

    Attributes:
        std: ``σ_g``, the standard deviation per coordinate (or give ``variance``).
        variance: ``σ_g²`` (or give ``std``).
        distribution: ``"laplace"`` (the papers) or ``"gaussian"``.

    The ε covers the messages one server sends and everything computed from them: a
    neighbour, an eavesdropper on any set of links, the servers' models and the centroid.

    >>> RandomNoise(variance=0.09).std
    0.3

    """

    distribution: str = "laplace"
    names: ClassVar[tuple[str, ...]] = ("random",)
    style: ClassVar[SchemeStyle | None] = SchemeStyle(
        "random", "random server noise", "#CC3311", "^", order=5,
        labels=("*random*", "iid*", "independent*"))  # fmt: skip
    not_deployed: ClassVar[str | None] = None  # pgfl.deploy runs it (and its subclasses')
    params: ClassVar[tuple[Param, ...]] = (SERVER_VARIANCE, SERVER_DISTRIBUTION)
    variance_param: ClassVar[Param] = SERVER_VARIANCE
    distributions: ClassVar[tuple[str, ...]] = DISTRIBUTIONS
    amplified: ClassVar[bool] = True
    protects: ClassVar[tuple[str, ...]] = (*SERVER_SIDE, "unit_client")
    exposes: ClassVar[Mapping[str, str]] = {
        "own_server": "a unit's server sees its clients' aggregate before adding the noise",
        "upload_eavesdropper": "server noise is added after the uploads, which it leaves as "
        "they are",
    }
    covers: ClassVar[str] = "each server's messages, and everything computed from them"
    frontier: ClassVar[Mapping[str, FrontierLine] | None] = {
        "random": FrontierLine(
            {"privacy.server_noise": "random"},
            legend="random server noise, Laplace (vs other servers; covers the centroid)",
            scope="server level: a unit's messages (one noise per server and round) against "
            "the other servers and eavesdroppers; covers every model and the centroid; not "
            "the unit's clients against their own server",
        ),
        "random_gaussian": FrontierLine(
            {"privacy.server_noise": "random", "privacy.server_distribution": "gaussian"},
            legend="random server noise, Gaussian (vs other servers; covers the centroid)",
            scope="as random, with Gaussian noise",
            by_adversary=True,
        ),
    }
    #: What the ε covers (the summary's ``epsilon_scope``).
    scope: ClassVar[str] = (
        "covers the messages one server sends over its links (one noise draw per server and "
        "iteration, the same copy on every link and on its own copy) and everything computed "
        "from them, including the servers' final models and the centroid; adversary: a "
        "neighbouring server or an eavesdropper on any set of links"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        SERVER_DISTRIBUTION.named("distribution").check(self.distribution)

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """Noise of variance ``privacy.server_variance`` (0 until a target ε calibrates it)."""
        return cls(**cls.level_of(s), distribution=s["privacy.server_distribution"])

    def noiseless(self) -> Mechanism:
        """No server noise."""
        return NoServerNoise()

    def sensitivities(self, ctx: ReleaseContext, rule: str) -> np.ndarray:
        """Δ₂(j) of the message ψ_{p,j} a server sends at iteration j = 1..T.

        Rigorous rule: the constant ``2μB/(n r) + 2√M e`` (``n`` the fewest clients a unit
        averages, ``r`` the records one local step averages (``ctx.records``: 1 but for
        record-level neighbours and one full-batch step), ``e`` the aggregation error).
        Analysed by the chain rule over the released messages (condition on them and on
        all randomness independent of the client): the server feeds its own noisy message
        to itself, so its state ``w_p = Σ_m a_pm y_m`` is the same in both runs, and
        ``ψ_{p,j}`` differs only through the changed client's averaged clipped gradient,
        weighted ``1/n``. An aborted round of secure aggregation
        keeps ``w_{p,i−1}``, a function of earlier messages. Papers' rule: ``2μBj``
        (preprint eq. 52).
        """
        if rule == "paper":
            return trajectory_sensitivities(ctx.iterations, mu=ctx.mu, clip=ctx.clip)
        slack = 2.0 * math.sqrt(ctx.dim) * ctx.aggregation_error
        step = 2.0 * ctx.mu * ctx.clip / (ctx.clients_per_round * ctx.records)
        return np.full(ctx.iterations, step + slack)

    def copies(self, ctx: ReleaseContext) -> int:
        """Independently noised copies of a message an adversary sees per iteration."""
        return 1  # identical copies on every link: seeing more of them reveals nothing new

    def transcript(self, ctx: ReleaseContext) -> Transcript:
        """The messages one server sends over its links, one release per iteration."""
        common = {"std": self.std, "distribution": self.distribution, "dim": ctx.dim,
                  "copies": self.copies(ctx), "rigorous": ctx.rigorous, "scope": self.scope,
                  "iterations": ctx.iterations,
                  "settings": (("mechanism", self.name), ("sigma", self.std), ("mu", ctx.mu),
                               ("clip", ctx.clip), ("clients_per_round", ctx.clients_per_round),
                               ("aggregation_error", ctx.aggregation_error))}  # fmt: skip
        reason = no_noise_reason(ctx, self.std)
        if reason is not None:
            return Transcript((), reason=reason, **common)
        paper = tuple(self.sensitivities(ctx, "paper").tolist())
        rigorous = tuple(self.sensitivities(ctx, "rigorous").tolist()) if ctx.rigorous else paper
        return Transcript(rigorous, paper_sensitivities=paper, **common)

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


@dataclass(frozen=True, kw_only=True)
class GraphHomomorphic(RandomNoise):
    """Graph-homomorphic perturbations (eq. 47): they cancel in the network centroid (eq. 46).

    Server ``m`` draws ``g_m`` and sends ``ψ_m + g_m`` to every neighbour; its own copy
    carries ``−((1 − a_mm)/a_mm) g_m``, so ``Σ_p a_pm g_pm = 0`` (needs ``a_mm > 0``).
    """

    names: ClassVar[tuple[str, ...]] = ("graph_homomorphic",)
    style: ClassVar[SchemeStyle | None] = SchemeStyle(
        "graph_homomorphic", "graph-homomorphic server noise", "#0072B2", "s", order=4,
        labels=("*graph_homomorphic*", "*homomorphic*", "gh*"))  # fmt: skip
    amplified: ClassVar[bool] = False  # message j carries every earlier round's difference
    protects: ClassVar[tuple[str, ...]] = SERVER_SIDE
    exposes: ClassVar[Mapping[str, str]] = {
        "own_server": "a unit's server sees its clients' aggregate before adding the noise",
        "unit_client": "the server's own model carries no noise of its own (the self-copy "
        "cancels it); a client who also sees one neighbour's message removes the noise",
        "upload_eavesdropper": "server noise is added after the uploads, which it leaves as "
        "they are",
    }
    covers: ClassVar[str] = "each server's messages to the other servers"
    frontier: ClassVar[Mapping[str, FrontierLine] | None] = {
        "graph_homomorphic": FrontierLine(
            {"privacy.server_noise": "graph_homomorphic"},
            legend="graph-homomorphic, Laplace (vs other servers; NOT the centroid)",
            scope="server level: a unit's messages against the other servers and "
            "eavesdroppers; NOT the centroid or the unit's own model, where the noise cancels "
            "(eq. 46)",
        ),
        "hybrid": FrontierLine(
            {"privacy.client_noise": "secure_aggregation",
             "privacy.server_noise": "graph_homomorphic"},
            legend="secure aggregation + graph-homomorphic (server sees only sums; NOT the "
            "centroid)",
            scope="server level as graph-homomorphic; in addition a server sees only the sum "
            "of its clients' models (secure aggregation: no ε against the server, which "
            "learns the exact sum)",
        ),
        "graph_homomorphic_gaussian": FrontierLine(
            {"privacy.server_noise": "graph_homomorphic",
             "privacy.server_distribution": "gaussian"},
            legend="graph-homomorphic, Gaussian (NOT the centroid or a unit's clients)",
            scope="as graph-homomorphic, with Gaussian noise",
            by_adversary=True,
        ),
    }  # fmt: skip
    uncovered: ClassVar[Mapping[str, str]] = {
        "centroid": "the network average, where the noise cancels (eq. 46)",
        "models": "a server's own model, where its self-copy cancels its noise (eq. 47)",
    }
    scope: ClassVar[str] = (
        "covers the messages one server sends over its links (adversary: a neighbouring server "
        "or an eavesdropper on any set of links); NOT the centroid or that server's own model, "
        "where the graph-homomorphic noise cancels, nor a coalition including the server itself"
    )

    rules_doc: ClassVar[str] = (
        '`privacy.server_noise = "graph_homomorphic"` needs P > 1 (with one server the noise '
        "cancels exactly) and `a_pp > 0` for a given `topology.matrix`."
    )

    @classmethod
    def check_settings(cls, s: Mapping[str, Any]) -> str | None:
        """More than one server (with one the noise cancels exactly), ``a_pp > 0`` if given."""
        if s["topology.P"] == 1:
            return (
                "privacy.server_noise = 'graph_homomorphic' needs topology.P > 1: with one "
                "server the noise cancels exactly"
            )
        if s["topology.kind"] == "matrix":
            diagonal = [row[p] for p, row in enumerate(s["topology.matrix"])]
            if min(diagonal) <= 0:
                return (
                    "topology.matrix needs a_pp > 0 for graph-homomorphic noise (eq. 47 "
                    f"divides by it); got a_pp = 0 at p = {diagonal.index(min(diagonal))}"
                )
        return None

    def validate(self, net: Any) -> None:
        """Every server needs a self weight ``a_mm > 0``."""
        if self.std > 0:
            check_combination_matrix(net.A, need_self_weights=True)

    def sensitivities(self, ctx: ReleaseContext, rule: str) -> np.ndarray:
        """``(2μB + 2√M e)·j`` under both rules (preprint eq. 52).

        Conditioning on the released messages, server p's own state differs exactly by the
        difference of its message centres (its self-loop weight −(1−a_pp)/a_pp cancels its
        noise), so the sensitivity of message j accumulates all earlier gradient
        differences: the growth is real, whatever the number of clients averaged.
        """
        slack = 0.0 if rule == "paper" else 2.0 * math.sqrt(ctx.dim) * ctx.aggregation_error
        return trajectory_sensitivities(ctx.iterations, mu=ctx.mu, clip=ctx.clip, slack=slack)

    @staticmethod
    def coefficients(links: Any) -> np.ndarray:
        """1 on links to neighbours, ``−(1 − a_mm)/a_mm`` on a server's copy to itself."""
        own = links.src == links.dst
        coef = np.ones(links.src.size)
        coef[own] = -(1.0 - links.self_weight[own]) / links.self_weight[own]
        return coef


@dataclass(frozen=True, kw_only=True)
class PerLinkNoise(RandomNoise):
    """An independent draw ``g_pm`` on every link ``m → p`` (self-copy included).

    The draw of link ``m → p`` is keyed by the sender ``m`` and the receiver ``p``
    (stream ``link_noise``), so a server can draw its links' noise alone. Accounted for an
    adversary who sees all of a server's links to others (``observed_links`` copies per
    iteration); its self-copy carries independent noise, so the sensitivity grows as in
    eq. 52.
    """

    frontier: ClassVar[Mapping[str, FrontierLine] | None] = {
        "random_per_link": FrontierLine(
            {"privacy.server_noise": "random_per_link"},
            legend="per-link noise, Laplace (vs all links of a server)",
            scope="server level: a unit's messages over all its outgoing links (independent "
            "noise per link) against an adversary who sees them all",
        ),
    }
    names: ClassVar[tuple[str, ...]] = ("random_per_link",)
    style: ClassVar[SchemeStyle | None] = SchemeStyle(
        "random_per_link", "per-link server noise", "#CC79A7", ">", order=6,
        labels=("*random_per_link*", "*per_link*", "*perlink*"))  # fmt: skip
    amplified: ClassVar[bool] = False
    scope: ClassVar[str] = (
        "covers the messages one server sends over the observed links (independent noise per "
        "link); an adversary watching k links sees k copies per iteration. The proof covers an "
        "adversary who sees all of the server's links: set observed_links to its degree"
    )

    sensitivities = GraphHomomorphic.sensitivities

    def copies(self, ctx: ReleaseContext) -> int:
        """The links an adversary watches: each carries an independent copy."""
        return ctx.observed_links

    def views(self, ctx: ReleaseContext) -> dict[str, Transcript | None]:
        """A neighbouring server sees one link's copy; the others every out-link's."""
        out = super().views(ctx)
        if out["neighbour_server"] is not None:
            out["neighbour_server"] = dataclasses.replace(out["neighbour_server"], copies=1)
        return out

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


#: The unit id of the trusted aggregator's cell in the keyed draws (no network has it).
AGGREGATOR = 1 << 40


@dataclass(frozen=True, kw_only=True)
class CentralNoise(RandomNoise):
    """The central-DP ceiling: units upload to a trusted aggregator, which broadcasts ``ψ̄ + z``.

    **Protocol.** Every round each unit m sends its aggregate ``ψ_m`` to the aggregator
    (the *uplink*); the aggregator broadcasts the network average
    ``ψ̄ = (1/P) Σ_m ψ_m`` plus one draw ``z`` (std ``σ`` per coordinate; stream
    ``central_noise``, in the aggregator's own cell of the keyed draws, :data:`AGGREGATOR`),
    and every unit takes ``w_p = ψ̄ + z``. No server sends to another.

    **In the engine** the combination is ``A = 11ᵀ/P`` (:meth:`combination`): each unit
    computes the aggregator's average itself from the uplinks, which travel on the links
    ``m → p`` (m ≠ p) exactly as sent, ``ψ_m``, no noise; the broadcast's draw rides on
    each unit's copy to itself, ``ψ_p + z/a_pp`` (a copy no wire carries), so that
    ``w_p = Σ_m a_pm ψ_m + z = ψ̄ + z``. The uplinks and the broadcast are the engine's
    arrays (:meth:`observe`).

    **Whom it protects.** A curious server, any coalition of servers and a unit's client
    see the broadcast ``ψ̄ + z``: one record moves ``ψ̄`` by 1/P of what it moves one
    unit's aggregate, and no scheme without a trusted party does better against them.
    The uplinks carry each unit's aggregate in the clear: the aggregator (trusted) and
    an eavesdropper on them (``link_eavesdropper``: **not protected**) see them, as does a
    unit's own server (``own_server``) its clients' uploads.
    """

    frontier: ClassVar[Mapping[str, FrontierLine] | None] = {
        "central": FrontierLine(
            {"privacy.server_noise": "central", "privacy.server_distribution": "gaussian"},
            legend="central DP: a trusted aggregator, Gaussian (the ceiling)",
            scope="a trusted aggregator adds one Gaussian draw to the network average each "
            "round; protects against everyone but the aggregator and a unit's own server",
            by_adversary=True,
        ),
    }
    names: ClassVar[tuple[str, ...]] = ("central",)
    style: ClassVar[SchemeStyle | None] = SchemeStyle(
        "central_dp", "central DP", "#332288", "h", order=7, labels=("*central_dp*", "central*")
    )
    amplified: ClassVar[bool] = True
    protects: ClassVar[tuple[str, ...]] = (
        "other_server", "neighbour_server", "server_coalition", "neighbour_coalition",
        "unit_client",
    )  # fmt: skip
    exposes: ClassVar[Mapping[str, str]] = {
        "link_eavesdropper": "the uplinks carry every unit's aggregate in the clear to the "
        "trusted aggregator, and no mechanism pgfl runs protects them",
        "own_server": "a unit's server sees its clients' aggregate before the aggregator "
        "adds the noise",
        "upload_eavesdropper": "server noise is added after the uploads, which it leaves as "
        "they are",
    }
    trusted: ClassVar[Mapping[str, str]] = {
        "aggregator": "receives every unit's aggregate in the clear and draws the noise",
    }
    covers: ClassVar[str] = (
        "the noisy average the trusted aggregator broadcasts, and everything computed from it"
    )
    scope: ClassVar[str] = (
        "covers the network average plus noise the trusted aggregator broadcasts every "
        "iteration, and everything computed from it; adversary: any curious server or "
        "coalition of servers, a unit's clients; NOT the uplinks (each unit's aggregate in "
        "the clear to the aggregator), nor a unit's own server"
    )

    @classmethod
    def combination(cls, mixing: np.ndarray, s: Mapping[str, Any]) -> np.ndarray:
        """``11ᵀ/P``: every unit receives the network average, whatever the topology."""
        P = mixing.shape[0]
        return np.full((P, P), 1.0 / P)

    @classmethod
    def combination_key(cls, s: Mapping[str, Any]) -> tuple:
        """The average: the same for every central curve."""
        return ("average",)

    def sensitivities(self, ctx: ReleaseContext, rule: str) -> np.ndarray:
        """``(2μB/(n r) + 2√M e)/P``: one unit's message sensitivity, averaged over P units.

        The same under both rules (the papers give no bound for a central aggregator).
        """
        return RandomNoise.sensitivities(self, ctx, "rigorous") / ctx.units

    @staticmethod
    def coefficients(links: Any) -> np.ndarray:
        """``1/a_pp`` on a unit's copy to itself (the broadcast's draw), 0 on the uplinks."""
        own = links.src == links.dst
        return np.where(own, 1.0 / np.where(own, links.weight, 1.0), 0.0)

    @classmethod
    def link_noise(cls, schemes, links, dim, ctx) -> np.ndarray:
        """``std · z / a_pp`` on each unit's self-copy, ``z`` the aggregator's draw; 0 elsewhere."""
        R = ctx.draws.reps.size
        out = np.empty((len(schemes), R, links.src.size, dim))
        std = np.array([s.std for s in schemes])
        coef = cls.coefficients(links)[:, None]
        draws = ctx.draws.cells([AGGREGATOR])  # the aggregator's own cell
        for dist in sorted({s.distribution for s in schemes}):
            mine = np.array([s.distribution == dist for s in schemes])
            z = draws.noise("central_noise", dist, (dim,))[:, :1]  # [R, 1, M]
            out[mine] = std[mine, None, None, None] * (z * coef)
        return out

    def observe(self, adversary: str, seen: Emitted) -> list[tuple[np.ndarray, bool]]:
        """Uplinks ``ψ_m`` (the links m → p, m ≠ p) and the broadcast ``w_p = ψ̄ + z``.

        An eavesdropper reads both; a curious server, a coalition and a unit's client
        the broadcast (every unit gets the same); the uploads as by default.
        """
        if adversary in UPLOADS:
            return super().observe(adversary, seen)
        broadcast = (seen.W[:, seen.target], True)
        if adversary != "link_eavesdropper":
            return [broadcast]
        uplinks = seen.src != seen.dst
        R = seen.W.shape[0]
        return [(seen.messages[:, uplinks].reshape(R, -1), True), broadcast]

    def validate(self, net: Any) -> None:
        """The network must average (``A = 11ᵀ/P``), as the experiment builds it."""
        P = net.A.shape[0]
        if not np.allclose(net.A, 1.0 / P):
            raise ConfigError(
                'privacy.server_noise = "central" needs the averaging combination A = 11ᵀ/P '
                "(a trusted aggregator); the experiment builds it for central curves"
            )
