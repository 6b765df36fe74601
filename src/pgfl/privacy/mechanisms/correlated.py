"""Correlated noise between servers: pairwise-cancelling noise (DECOR).

"The Privacy Power of Correlated Noise in Decentralized Learning" (Allouah, Koloskova,
El Firdoussi, Jaggi & Guerraoui, ICML 2024, arXiv:2405.01031), Algorithm 1, with units of
clients behind each node: every round server ``m`` sends

    ψ_m + v̄_m + Σ_{j ∼ m} v_mj        (the same message on every link and on its own copy)

with ``v̄_m ~ N(0, σ² I)`` its own and ``v_mj = −v_jm ~ N(0, σ_cor² I)`` drawn fresh each
round from a secret the two endpoints of edge ``{m, j}`` share. The simulator has no such
secret: the terms are the keyed stream ``pairwise_noise`` of the edge's cell (the lower
endpoint's, counter = the upper endpoint), a function of the configuration's seed in
every mode (``secagg_protocol`` concerns the clients' secure aggregation, not these terms;
a deployment would key the stream with, e.g., the pair's X25519 agreement instead;
docs/privacy.md §5.1). The pairwise terms
cancel in the network sum, so with a doubly stochastic ``A`` the centroid carries only
``(1/P) Σ_m v̄_m``, as central DP with variance σ²/P; the messages carry the covariance
``Σ = σ² I + σ_cor² L`` across servers (L the graph Laplacian).

Accounting (SecLDP): an eavesdropper on every link and a coalition C of curious servers
(who know their own edges' secrets) see, per round, a Gaussian mechanism whose noise has
the honest-subgraph covariance Σ_H = σ² I + σ_cor² L_H; replacing one client moves server
i's message by Δ, so the round is a Gaussian release of multiplier 1/(Δ √[Σ_H⁻¹]_ii)
(:func:`pgfl.privacy.accounting.decentralized.secldp_rdp_slopes`), composed over T rounds
by the tight accountants. ``link_eavesdropper`` and ``unit_client``: C = ∅;
``neighbour_server``/``other_server``: the worst single curious server adjacent/not
adjacent to i; ``server_coalition``: the worst k curious servers
(``privacy.coalition_size``; :func:`coalition_std`); ``neighbour_coalition``: every
neighbour of i, which isolates i in H: local DP at the small independent σ. A unit's own
server sees ψ_i: not protected.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from pgfl.param import Param, SettingWarning, When
from pgfl.privacy.accounting.decentralized import secldp_rdp_slopes
from pgfl.privacy.accounting.releases import Transcript
from pgfl.privacy.mechanisms.base import (
    ADVERSARIES,
    SERVER_SIDE,
    FrontierLine,
    Mechanism,
    ReleaseContext,
    RoundContext,
    noise_level,
    subsampled,
)
from pgfl.privacy.mechanisms.server import RandomNoise
from pgfl.style import SchemeStyle
from pgfl.validation import ConfigError

__all__ = [
    "COALITION_SIZE",
    "PAIRWISE_RATIO",
    "PAIRWISE_VARIANCE",
    "PairwiseCancelling",
    "coalition_std",
    "effective_std",
]

#: ``privacy.pairwise_ratio``: r = σ_cor/σ, the pairwise part relative to the independent one.
PAIRWISE_RATIO = Param(
    "privacy.pairwise_ratio", "real", None, "Ratio r = σ_cor/σ of the std of each edge's "
    "pairwise-cancelling term v_mj = −v_jm (DECOR) to the independent std σ "
    "(privacy.server_variance = σ²): a target ε calibrates σ with σ_cor = r σ, so r keeps "
    "its meaning when μ, T or ε change (DECOR reports σ_cor/σ_cdp). Unset (and no "
    "pairwise_variance): r = 0, local DP.", lo=0, batched=True,
    applies=When('privacy.server_noise = "pairwise_cancelling"',
                 lambda c: c["privacy.server_noise"] == "pairwise_cancelling"),
)  # fmt: skip

#: ``privacy.pairwise_variance``: σ_cor², the (absolute) variance of each edge's pairwise term.
PAIRWISE_VARIANCE = Param(
    "privacy.pairwise_variance", "real", None, "Deprecated (a warning): variance σ_cor² per "
    "coordinate of each edge's pairwise-cancelling term, fixed while a target ε calibrates "
    "σ, so its meaning changes with μ, T and ε; give privacy.pairwise_ratio instead (not "
    "both).", lo=0, batched=True,
    applies=When('privacy.server_noise = "pairwise_cancelling"',
                 lambda c: c["privacy.server_noise"] == "pairwise_cancelling"),
)  # fmt: skip

#: ``privacy.coalition_size``: k, the curious servers of the ``server_coalition`` adversary.
COALITION_SIZE = Param(
    "privacy.coalition_size", "int", 2, "Curious servers k of the `server_coalition` "
    "adversary: pairwise-cancelling noise reports the ε against the worst k servers that "
    "pool their views and their edges' secrets.", lo=1, batched=True,
    applies=When('privacy.server_noise = "pairwise_cancelling"',
                 lambda c: c["privacy.server_noise"] == "pairwise_cancelling"),
)  # fmt: skip

#: Above this many servers the coalition views are bounded by σ alone (no P eigensolves).
EXACT_COALITIONS = 200
#: Coalitions of k servers searched exhaustively up to this many subsets (else σ alone).
MAX_COALITIONS = 20_000


def effective_std(
    adjacency: np.ndarray, sigma: float, sigma_cor: float, coalitions: str = "none"
) -> float:
    """The std of the Gaussian one round is worth to the worst-placed server: 1/√max [Σ_H⁻¹]_ii.

    ``coalitions``: ``"none"`` (C = ∅), ``"neighbour"`` (one curious server adjacent to
    the target) or ``"other"`` (one not adjacent). Above :data:`EXACT_COALITIONS` servers
    a coalition is bounded by σ (Σ_H ⪰ σ² I), which is sound and loose.

    >>> ring = np.roll(np.eye(4), 1, 1) + np.roll(np.eye(4), -1, 1)
    >>> effective_std(ring, 1.0, 0.0) == 1.0, effective_std(ring, 1.0, 10.0) > 1.9
    (True, True)
    """
    if sigma_cor == 0 or sigma == 0:
        return float(sigma)
    P = adjacency.shape[0]
    if coalitions == "none":
        worst = np.nanmax(secldp_rdp_slopes(adjacency, sigma, sigma_cor))
    elif P > EXACT_COALITIONS:
        return float(sigma)
    else:
        worst = 0.0
        for c in range(P):
            rho = secldp_rdp_slopes(adjacency, sigma, sigma_cor, coalition=[c])
            near = adjacency[c] != 0
            mine = near if coalitions == "neighbour" else ~near
            mine[c] = False
            if mine.any():
                worst = max(worst, float(np.nanmax(rho[mine])))
        if worst == 0.0:  # no such coalition exists (e.g. no non-neighbour): C = ∅
            worst = np.nanmax(secldp_rdp_slopes(adjacency, sigma, sigma_cor))
    return float(1.0 / math.sqrt(2.0 * worst))  # ρ = [Σ_H⁻¹]_ii / 2 at Δ = 1


def coalition_std(adjacency: np.ndarray, sigma: float, sigma_cor: float, k: int) -> float:
    """The std one round is worth against the worst coalition of ``k`` curious servers.

    Over every target i and every set C of k servers without i, the largest
    [Σ_H⁻¹]_ii with Σ_H = σ² I + σ_cor² L_H (:func:`secldp_rdp_slopes`; a coalition that
    knows more can only learn more, so the worst one has exactly k members). If k is at
    least the smallest degree, some coalition holds every neighbour of a server, which is
    then left with its own draw: σ exactly (Σ_H ⪰ σ² I makes σ a bound for every C). With
    more than :data:`MAX_COALITIONS` subsets to try, σ (sound, loose).

    >>> ring = np.roll(np.eye(6), 1, 1) + np.roll(np.eye(6), -1, 1)
    >>> coalition_std(ring, 1.0, 3.0, 2)          # both neighbours of a node: local DP
    1.0
    >>> 1.0 < coalition_std(ring, 1.0, 3.0, 1) == effective_std(ring, 1.0, 3.0, "neighbour")
    True
    """
    adj = np.ascontiguousarray(np.asarray(adjacency) != 0)
    return _coalition_std(adj.tobytes(), adj.shape[0], float(sigma), float(sigma_cor), int(k))


@lru_cache(maxsize=256)
def _coalition_std(raw: bytes, P: int, sigma: float, sigma_cor: float, k: int) -> float:
    """Cached by the graph and the parameters (calibration asks again and again)."""
    adj = np.frombuffer(raw, dtype=bool).reshape(P, P)
    if sigma_cor == 0 or sigma == 0 or k >= int(adj.sum(axis=1).min()):
        return float(sigma)
    if math.comb(P, k) > MAX_COALITIONS:
        return float(sigma)
    worst = 0.0
    for members in itertools.combinations(range(P), k):
        rho = secldp_rdp_slopes(adj.astype(int), sigma, sigma_cor, coalition=members)
        worst = max(worst, float(np.nanmax(rho)))
    return float(1.0 / math.sqrt(2.0 * worst))  # ρ = [Σ_H⁻¹]_ii / 2 at Δ = 1


@dataclass(frozen=True, kw_only=True)
class PairwiseCancelling(RandomNoise):
    """DECOR's pairwise-cancelling Gaussian noise between servers (module doc).

    The pairwise part is given relative to the independent one, ``pairwise_ratio``
    r = σ_cor/σ (the quantity DECOR tunes and reports as σ_cor/σ_cdp), or absolutely,
    ``pairwise_std``/``pairwise_variance`` (the old form, fixed while σ changes), not
    both. With r, every round's covariance is σ² (I + r² L): the std one round is worth,
    ``1/√max_i [Σ_H⁻¹]_ii``, is σ times a factor of r and the graph alone
    (:func:`effective_std`), so a target ε calibrates σ exactly as for local DP and
    divides it by that factor (:meth:`with_std` keeps r).

    Attributes:
        std: σ, the independent part's std per coordinate (or give ``variance``);
            what a ``target_epsilon`` calibrates.
        variance: σ².
        pairwise_ratio: r = σ_cor/σ (then σ_cor follows σ), or ``None``.
        pairwise_std: σ_cor, each edge term's std, or ``None`` (or give ``pairwise_variance``).
        pairwise_variance: σ_cor², or ``None``.
        coalition: k, the curious servers of ``server_coalition``.

    Only what is given is stored (so that :func:`dataclasses.replace` works); σ_cor, given
    or derived (r σ), is :attr:`sigma_cor`.

    >>> PairwiseCancelling(variance=0.04, pairwise_variance=1.0).sigma_cor
    1.0
    >>> m = PairwiseCancelling(std=0.5, pairwise_ratio=3.0)
    >>> m.sigma_cor, m.with_std(2.0).sigma_cor, dataclasses.replace(m, pairwise_ratio=1.0).sigma_cor
    (1.5, 6.0, 0.5)

    """

    pairwise_ratio: float | None = None
    pairwise_std: float | None = None
    pairwise_variance: float | None = None
    coalition: int = 2
    distribution: str = "gaussian"
    names: ClassVar[tuple[str, ...]] = ("pairwise_cancelling",)
    style: ClassVar[SchemeStyle | None] = SchemeStyle(
        "pairwise_cancelling", "pairwise-cancelling noise", "#AA3377", "d", order=9
    )
    distributions: ClassVar[tuple[str, ...]] = ("gaussian",)
    params: ClassVar[tuple[Param, ...]] = (PAIRWISE_RATIO, PAIRWISE_VARIANCE, COALITION_SIZE)
    frontier: ClassVar[Mapping[str, FrontierLine] | None] = {"pairwise_cancelling": FrontierLine({"privacy.server_noise": "pairwise_cancelling"}, {"privacy.pairwise_ratio": (0.0, 1.0, 2.0, 4.0, 8.0)})}  # fmt: skip  # noqa: E501
    amplified: ClassVar[bool] = True
    protects: ClassVar[tuple[str, ...]] = (*SERVER_SIDE, "unit_client")
    exposes: ClassVar[Mapping[str, str]] = {
        "own_server": "a unit's server sees its clients' aggregate before adding the noise",
        "upload_eavesdropper": "server noise is added after the uploads, which it leaves as "
        "they are",
    }
    scope: ClassVar[str] = (
        "covers every server-to-server message (SecLDP: an eavesdropper on every link, with "
        "one curious server that knows its own edges' secrets), and everything computed from "
        "them; the pairwise terms cancel in the centroid; a coalition holding every "
        "neighbour of a server leaves it its own draw alone (local DP at sigma)"
    )
    rules_doc: ClassVar[str] = (
        '`privacy.server_noise = "pairwise_cancelling"` (Gaussian noise, whatever '
        "`privacy.server_distribution`) needs P > 1 and a symmetric combination matrix "
        "(doubly stochastic, so that the pairwise terms cancel in the centroid); "
        "`privacy.pairwise_ratio` and the deprecated `privacy.pairwise_variance` are not "
        "both given (the latter loads with a warning and keeps its old, absolute meaning)."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pairwise_ratio is None:
            noise_level(self.pairwise_std, self.pairwise_variance, PAIRWISE_VARIANCE)  # checks
        elif self.pairwise_std is not None or self.pairwise_variance is not None:
            raise ConfigError(
                "give pairwise_ratio (σ_cor/σ) or pairwise_std/pairwise_variance, not both; "
                f"got pairwise_ratio={self.pairwise_ratio!r}"
            )
        else:
            PAIRWISE_RATIO.named("pairwise_ratio").check(self.pairwise_ratio)
        COALITION_SIZE.named("coalition").check(self.coalition)
        if self.distribution != "gaussian":
            raise ConfigError(
                "privacy.server_noise = 'pairwise_cancelling' is Gaussian noise: set "
                f"privacy.server_distribution = 'gaussian'; got {self.distribution!r}"
            )

    @property
    def sigma_cor(self) -> float:
        """σ_cor, each edge term's std: r σ, or as given (0 where neither is given)."""
        if self.pairwise_ratio is not None:
            return self.pairwise_ratio * self.std
        return noise_level(self.pairwise_std, self.pairwise_variance, PAIRWISE_VARIANCE)[0]

    @classmethod
    def check_settings(cls, s: Mapping[str, Any]) -> str | None:
        """More than one server; one form of the pairwise part (the old one warns)."""
        if s["topology.P"] == 1:
            return "privacy.server_noise = 'pairwise_cancelling' needs topology.P > 1 (edges)"
        ratio, variance = s["privacy.pairwise_ratio"], s["privacy.pairwise_variance"]
        if ratio is not None and variance is not None:
            return (
                "privacy.pairwise_ratio and privacy.pairwise_variance both set the pairwise "
                "noise; give privacy.pairwise_ratio = σ_cor/σ alone"
            )
        if variance is not None:
            warnings.warn(_deprecated_variance(s), SettingWarning, stacklevel=2)
        return None

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """σ² = ``privacy.server_variance``; r = ``privacy.pairwise_ratio`` or σ_cor² given."""
        ratio, variance = s["privacy.pairwise_ratio"], s["privacy.pairwise_variance"]
        return cls(
            **cls.level_of(s),
            pairwise_ratio=ratio if variance is None else None,
            pairwise_variance=variance,
            coalition=s["privacy.coalition_size"],
        )

    def with_std(self, std: float) -> PairwiseCancelling:
        """The same pairwise part (the same r, or the same σ_cor) beside an independent σ = std."""
        if self.pairwise_ratio is not None:
            return type(self)(std=std, pairwise_ratio=self.pairwise_ratio, coalition=self.coalition)
        return type(self)(std=std, pairwise_std=self.sigma_cor, coalition=self.coalition)

    def validate(self, net: Any) -> None:
        """A symmetric combination matrix: its edges are the pairs, its columns sum to 1."""
        A = np.asarray(net.A)
        if not np.allclose(A, A.T):
            raise ConfigError(
                "privacy.server_noise = 'pairwise_cancelling' needs a symmetric combination "
                "matrix (pairs share an edge both ways; columns summing to 1 cancel the noise)"
            )

    def _view(self, ctx: ReleaseContext, coalitions: str) -> Transcript:
        base = RandomNoise.transcript(self, ctx)
        if base.reason is not None or ctx.adjacency is None:
            return base
        if coalitions == "k":
            k = min(self.coalition, ctx.units - 1)
            std = coalition_std(ctx.adjacency, self.std, self.sigma_cor, k)
        elif coalitions == "all":
            std = self.std  # every neighbour of the target: it keeps its own draw alone
        else:
            std = effective_std(ctx.adjacency, self.std, self.sigma_cor, coalitions)
        return dataclasses.replace(base, std=std, paper_sensitivities=None, scope=self.scope)

    def transcript(self, ctx: ReleaseContext) -> Transcript:
        """Every message, against the worst single curious server (no sampling credit)."""
        a, b = self._view(ctx, "neighbour"), self._view(ctx, "other")
        return a if a.std <= b.std else b

    #: The coalition each adversary brings (``_view``'s argument).
    COALITIONS: ClassVar[Mapping[str, str]] = {
        "link_eavesdropper": "none", "unit_client": "none", "neighbour_server": "neighbour",
        "other_server": "other", "server_coalition": "k", "neighbour_coalition": "all",
    }  # fmt: skip

    def views(self, ctx: ReleaseContext) -> dict[str, Transcript | None]:
        """No coalition for an eavesdropper and a unit's client; curious servers else."""
        out: dict[str, Transcript | None] = dict.fromkeys(ADVERSARIES)
        for a in self.COALITIONS:
            out[a] = self.view(ctx, a)
        return out

    def view(self, ctx: ReleaseContext, adversary: str) -> Transcript | None:
        """One adversary's view alone (no search over coalitions it does not bring)."""
        if adversary not in self.COALITIONS:
            return None
        return subsampled(self._view(ctx, self.COALITIONS[adversary]), ctx, adversary)

    def secrets(
        self, members: np.ndarray, links: Any, dim: int, ctx: RoundContext
    ) -> np.ndarray | None:
        """The members' own draws σ v̄_c and the pairwise terms σ_cor ξ of their edges."""
        members = np.asarray(members)
        if members.size == 0:
            return None
        own = ctx.draws.noise("server_noise", "gaussian", (dim,))[:, members - ctx.start]
        touch = (links.src != links.dst) & np.isin(links.src, members)
        src, dst = links.src[touch], links.dst[touch]
        keep = ~(np.isin(dst, members) & (dst < src))  # an edge inside the coalition once
        xi = _edge_draws(src[keep], dst[keep], dim, ctx)
        R = own.shape[0]
        return np.concatenate(
            [self.std * own.reshape(R, -1), self.sigma_cor * xi.reshape(R, -1)], axis=1
        )

    @classmethod
    def link_noise(cls, schemes, links, dim, ctx) -> np.ndarray:
        """``σ v̄_m + σ_cor Σ_{j∼m} ±ξ_{mj}`` on every link of sender ``m`` (one per round).

        ``ξ_{mj}`` is keyed by the edge (the lower endpoint's cell, counter = the upper
        endpoint's index × M + coordinate), so both endpoints, in any block, draw the same
        numbers and add them with opposite signs.
        """
        R = ctx.draws.reps.size
        senders = np.unique(links.src)
        own = ctx.draws.noise("server_noise", "gaussian", (dim,))[:, senders - ctx.start]
        pair = links.src != links.dst  # each sender's edges, once per out-link
        src, dst = links.src[pair], links.dst[pair]
        xi = _edge_draws(src, dst, dim, ctx)  # [R, e, M]
        signed = np.where(src < dst, 1.0, -1.0)[None, :, None] * xi
        per_sender = np.zeros((R, senders.size, dim))
        np.add.at(per_sender, (slice(None), np.searchsorted(senders, src)), signed)
        at = np.searchsorted(senders, links.src)
        out = np.empty((len(schemes), R, links.src.size, dim))
        for c, s in enumerate(schemes):
            out[c] = (s.std * own + s.sigma_cor * per_sender)[:, at]
        return out


def _edge_draws(src: np.ndarray, dst: np.ndarray, dim: int, ctx: RoundContext) -> np.ndarray:
    """``ξ`` of the edges ``{src, dst}``, ``[R, e, M]``: keyed by the edge, not the block.

    The lower endpoint's cell of the keyed draws (stream ``pairwise_noise``), counter =
    the upper endpoint's index × M + coordinate: both endpoints, in any block, draw the
    same numbers (:meth:`~pgfl.rng.KeyedDraws.edge_noise`; a deployment draws them from the
    secret the two ends agreed on).
    """
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    return ctx.draws.edge_noise("pairwise_noise", "gaussian", lo, hi, dim)


def _deprecated_variance(s: Mapping[str, Any]) -> str:
    """The warning for ``privacy.pairwise_variance``: its meaning, and the ratio it equals.

    The old knob is kept as given (σ_cor = √pairwise_variance, the same numbers as
    before); it equals ``pairwise_ratio = √(pairwise_variance/server_variance)`` exactly
    when σ is fixed (no target ε, no noise multiplier), and otherwise stands for a ratio
    that changes with μ, T and ε.
    """
    v = s["privacy.pairwise_variance"]
    head = f"privacy.pairwise_variance = {v!r} is deprecated (an absolute σ_cor²)"
    fixed = s["privacy.target_epsilon"] is None and s["privacy.server_noise_multiplier"] is None
    if fixed and s["privacy.server_variance"] > 0:
        r = math.sqrt(v / s["privacy.server_variance"])
        return f"{head}: it equals privacy.pairwise_ratio = {r:.6g} (σ_cor/σ); give that instead"
    return (
        f"{head}: it stays fixed while privacy.target_epsilon calibrates σ, so σ_cor/σ changes "
        "with μ, T and ε; give privacy.pairwise_ratio = σ_cor/σ instead"
    )
