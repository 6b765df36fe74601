"""Correlated noise between servers: pairwise-cancelling noise (DECOR).

"The Privacy Power of Correlated Noise in Decentralized Learning" (Allouah, Koloskova,
El Firdoussi, Jaggi & Guerraoui, ICML 2024, arXiv:2405.01031), Algorithm 1, with units of
clients behind each node: every round server ``m`` sends

    ψ_m + v̄_m + Σ_{j ∼ m} v_mj        (the same message on every link and on its own copy)

with ``v̄_m ~ N(0, σ² I)`` its own and ``v_mj = −v_jm ~ N(0, σ_cor² I)`` drawn fresh each
round from a secret the two endpoints of edge ``{m, j}`` share (in the simulator: the keyed
stream ``pairwise_noise`` of the edge's cell, the lower endpoint's, counter = the upper
endpoint; with ``secagg_protocol = "cryptographic"`` the seed would come from the pair's
X25519 agreement — the draws are the same function of a per-edge key). The pairwise terms
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
adjacent to i; a unit's own server sees ψ_i: not protected.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pgfl.param import Param, When
from pgfl.privacy.accounting.decentralized import secldp_rdp_slopes
from pgfl.privacy.accounting.releases import Transcript
from pgfl.privacy.mechanisms.base import (
    ADVERSARIES,
    SAMPLING_SECRET,
    Mechanism,
    ReleaseContext,
    subsampled,
)
from pgfl.privacy.mechanisms.client import noise_level
from pgfl.privacy.mechanisms.server import RandomNoise
from pgfl.validation import ConfigError

__all__ = ["PAIRWISE_VARIANCE", "PairwiseCancelling", "effective_std"]

#: ``privacy.pairwise_variance``: σ_cor², the variance of each edge's pairwise term.
PAIRWISE_VARIANCE = Param(
    "privacy.pairwise_variance", "real", 0.0, "Variance σ_cor² per coordinate of each edge's "
    "pairwise-cancelling term v_mj = −v_jm (DECOR); the independent part is "
    "privacy.server_variance.", lo=0, batched=True,
    applies=When('privacy.server_noise = "pairwise_cancelling"',
                 lambda c: c["privacy.server_noise"] == "pairwise_cancelling"),
)  # fmt: skip

#: Above this many servers the coalition views are bounded by σ alone (no P eigensolves).
EXACT_COALITIONS = 200


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


@dataclass(frozen=True, kw_only=True)
class PairwiseCancelling(RandomNoise):
    """DECOR's pairwise-cancelling Gaussian noise between servers (module doc).

    Attributes:
        std: σ, the independent part's std per coordinate (or give ``variance``);
            what a ``target_epsilon`` calibrates.
        variance: σ².
        pairwise_std: σ_cor, each edge term's std (or give ``pairwise_variance``).
        pairwise_variance: σ_cor².

    >>> PairwiseCancelling(variance=0.04, pairwise_variance=1.0).pairwise_std
    1.0

    """

    pairwise_std: float | None = None
    pairwise_variance: float | None = None
    distribution: str = "gaussian"
    names: ClassVar[tuple[str, ...]] = ("pairwise_cancelling",)
    params: ClassVar[tuple[Param, ...]] = (PAIRWISE_VARIANCE,)
    amplified: ClassVar[bool] = True
    protects: ClassVar[tuple[str, ...]] = tuple(SAMPLING_SECRET)
    exposes: ClassVar[Mapping[str, str]] = {
        "own_server": "a unit's server sees its clients' aggregate before adding the noise",
    }
    scope: ClassVar[str] = (
        "covers every server-to-server message (SecLDP: an eavesdropper on every link, with "
        "one curious server that knows its own edges' secrets), and everything computed from "
        "them; the pairwise terms cancel in the centroid"
    )
    rules_doc: ClassVar[str] = (
        '`privacy.server_noise = "pairwise_cancelling"` (Gaussian noise, whatever '
        "`privacy.server_distribution`) needs P > 1 and a symmetric combination matrix "
        "(doubly stochastic, so that the pairwise terms cancel in the centroid)."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        std, variance = noise_level(self.pairwise_std, self.pairwise_variance, PAIRWISE_VARIANCE)
        object.__setattr__(self, "pairwise_std", std)
        object.__setattr__(self, "pairwise_variance", variance)
        if self.distribution != "gaussian":
            raise ConfigError(
                "privacy.server_noise = 'pairwise_cancelling' is Gaussian noise: set "
                f"privacy.server_distribution = 'gaussian'; got {self.distribution!r}"
            )

    @classmethod
    def check_settings(cls, s: Mapping[str, Any]) -> str | None:
        """More than one server."""
        if s["topology.P"] == 1:
            return "privacy.server_noise = 'pairwise_cancelling' needs topology.P > 1 (edges)"
        return None

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """σ² = ``privacy.server_variance``, σ_cor² = ``privacy.pairwise_variance``."""
        return cls(
            variance=s["privacy.server_variance"], pairwise_variance=s["privacy.pairwise_variance"]
        )

    def with_std(self, std: float) -> PairwiseCancelling:
        """The same pairwise part with an independent part of std ``std``."""
        return type(self)(std=std, pairwise_std=self.pairwise_std)

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
        std = effective_std(ctx.adjacency, self.std, self.pairwise_std, coalitions)
        return dataclasses.replace(base, std=std, paper_sensitivities=None, scope=self.scope)

    def transcript(self, ctx: ReleaseContext) -> Transcript:
        """Every message, against the worst single curious server (no sampling credit)."""
        a, b = self._view(ctx, "neighbour"), self._view(ctx, "other")
        return a if a.std <= b.std else b

    def views(self, ctx: ReleaseContext) -> dict[str, Transcript | None]:
        """No coalition for an eavesdropper and a unit's client; one curious server else."""
        plain = self._view(ctx, "none")
        seen = {
            "link_eavesdropper": plain,
            "unit_client": plain,
            "neighbour_server": self._view(ctx, "neighbour"),
            "other_server": self._view(ctx, "other"),
        }
        out: dict[str, Transcript | None] = dict.fromkeys(ADVERSARIES)
        for a, t in seen.items():
            out[a] = subsampled(t, ctx)
        return out

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
        lo, hi = np.minimum(src, dst), np.maximum(src, dst)
        xi = ctx.draws.edge_noise("pairwise_noise", "gaussian", lo, hi, dim)  # [R, e, M]
        signed = np.where(src < dst, 1.0, -1.0)[None, :, None] * xi
        per_sender = np.zeros((R, senders.size, dim))
        np.add.at(per_sender, (slice(None), np.searchsorted(senders, src)), signed)
        at = np.searchsorted(senders, links.src)
        out = np.empty((len(schemes), R, links.src.size, dim))
        for c, s in enumerate(schemes):
            out[c] = (s.std * own + s.pairwise_std * per_sender)[:, at]
        return out
