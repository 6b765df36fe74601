"""Topology-optimized correlated noise between servers (CorN-DSGD / Whisper).

"Optimizing Privacy-Utility Trade-off in Decentralized Learning with Generalized Correlated
Noise" (Rodio, Chen & Larsson, arXiv:2501.14644): choose the covariance Σ of the servers'
noise to minimise what is left after combining, tr(A Σ Aᵀ), under a per-node privacy
constraint [Σ⁻¹]_ii ≤ b. pgfl solves it over the family Σ = s I + Σ_e c_e L_e
(:func:`pgfl.privacy.accounting.decentralized.optimize_covariance`, started at the best
DECOR design and never worse) for the topology's combination matrix A, at b = 1, and
normalises it to Σ₀ with max_i [Σ₀⁻¹]_ii = 1 exactly. A curve's noise is Σ = σ² Σ₀: each
round server m sends ``ψ_m + g_m`` on every link and its own copy, with

    g = σ Σ₀^{1/2} ξ,   ξ ~ N(0, I_P) per coordinate, drawn network-wide,

``ξ`` from one cell of the keyed draws (the dealer's, :data:`DEALER`; stream
``topology_noise``), so every block of units draws the same numbers.

**Trust: a dealer.** pgfl samples g jointly, as a trusted dealer (or a multi-party
computation among the servers) would: it draws g every round and hands server m its g_m
alone over a private channel. The dealer sees no data, only noise; colluding with anyone
who reads the messages it removes the noise (not one of the adversaries below). This
optimised Σ₀ happens to be non-zero off the diagonal only on edges, so per-edge secrets
(DECOR's sampler, :class:`~pgfl.privacy.mechanisms.correlated.PairwiseCancelling`) could
draw it too; but then a curious server learns each of its edges' terms, not just their sum,
and keeps only the honest subgraph's residual — strictly weaker. The dealer's guarantee is
the one accounted here.

**Accounting.** One round is a Gaussian mechanism with covariance σ² Σ₀ over servers:
replacing a client of unit i moves message i by Δ, so ρ_i = (Δ²/(2σ²)) [Σ₀⁻¹]_ii, and the
worst unit's effective std is σ/√max_i [Σ₀⁻¹]_ii = σ — a Gaussian of std σ per round, as
independent noise of std σ would be (local DP), at a smaller tr(A Σ Aᵀ). Against one curious
server c (who also knows g_c) the honest part's residual covariance is the conditional
Σ_HH − Σ_Hc Σ_cc⁻¹ Σ_cH, whose inverse is the HH block of Σ⁻¹
(:func:`~pgfl.privacy.accounting.decentralized.dealer_rdp_slopes`): the same ρ_i. Every
state is a function of the messages (w = A(ψ + g)), so rounds compose adaptively; a round
depends on a client only if it is sampled (amplification by client sampling). A unit's
client sees its server's model, a function of the messages. So ``link_eavesdropper``,
``neighbour_server``, ``other_server``, any coalition of servers (the same block-inverse
argument with C of any size) and ``unit_client`` all see a Gaussian of std σ per round;
``own_server`` is not protected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from pgfl.param import Param
from pgfl.privacy.accounting.decentralized import optimize_covariance
from pgfl.privacy.accounting.releases import Transcript
from pgfl.privacy.mechanisms.base import SERVER_SIDE, Mechanism, ReleaseContext, RoundContext
from pgfl.privacy.mechanisms.server import AGGREGATOR, RandomNoise
from pgfl.style import SchemeStyle
from pgfl.validation import ConfigError

__all__ = ["DEALER", "TopologyOptimized", "topology_design"]

#: The unit id of the dealer's cell in the keyed draws (no network has it).
DEALER = AGGREGATOR + 1


@lru_cache(maxsize=16)
def _design(raw: bytes, n: int) -> tuple[np.ndarray, np.ndarray]:
    A = np.frombuffer(raw).reshape(n, n)
    adjacency = ((A != 0) & (A.T != 0) & ~np.eye(n, dtype=bool)).astype(int)
    design = optimize_covariance(A, adjacency, 1.0)
    cov = design.covariance * design.max_inverse_diagonal  # max_i [Σ₀⁻¹]_ii = 1
    lam, vec = np.linalg.eigh(cov)
    root = (vec * np.sqrt(np.clip(lam, 0.0, None))) @ vec.T
    cov.flags.writeable = root.flags.writeable = False
    return cov, root


def topology_design(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(Σ₀, Σ₀^{1/2})`` for the combination matrix A: the optimised covariance, normalised.

    Σ₀ minimises tr(A Σ Aᵀ) over s I + Σ_e c_e L_e with max_i [Σ⁻¹]_ii ≤ 1 (cached per A).

    >>> A = np.array([[0.75, 0.25], [0.25, 0.75]])   # one edge: DECOR's design, s = 3/4
    >>> cov, root = topology_design(A)
    >>> cov.round(6).tolist(), float(np.linalg.inv(cov).diagonal().max().round(9))
    ([[1.125, -0.375], [-0.375, 1.125]], 1.0)
    """
    A = np.ascontiguousarray(A, dtype=float)
    return _design(A.tobytes(), A.shape[0])


@dataclass(frozen=True, kw_only=True)
class TopologyOptimized(RandomNoise):
    """Noise g = σ Σ₀^{1/2} ξ drawn jointly (a dealer), Σ₀ optimised for the topology (module doc).

    Attributes:
        std: σ, the std of the Gaussian each round is worth (or give ``variance``); what a
            ``target_epsilon`` calibrates. Server m's own noise has std σ √[Σ₀]_mm ≥ σ.
        variance: σ².
        covariance: Σ₀ of the network it runs on (set by :meth:`on_network`).
        root: Σ₀^{1/2} (set with ``covariance``).

    >>> TopologyOptimized(variance=0.25).std
    0.5

    """

    distribution: str = "gaussian"
    covariance: np.ndarray | None = field(default=None, compare=False, repr=False)
    root: np.ndarray | None = field(default=None, compare=False, repr=False)
    names: ClassVar[tuple[str, ...]] = ("topology_optimized",)
    style: ClassVar[SchemeStyle | None] = SchemeStyle(
        "topology_optimized", "topology-optimized noise", "#888888", "*", order=11
    )
    distributions: ClassVar[tuple[str, ...]] = ("gaussian",)
    params: ClassVar[tuple[Param, ...]] = ()
    amplified: ClassVar[bool] = True
    protects: ClassVar[tuple[str, ...]] = (*SERVER_SIDE, "unit_client")
    exposes: ClassVar[Mapping[str, str]] = {
        "own_server": "a unit's server sees its clients' aggregate before adding the noise",
        "upload_eavesdropper": "server noise is added after the uploads, which it leaves as "
        "they are",
    }
    trusted: ClassVar[Mapping[str, str]] = {
        "dealer": "draws every server's correlated noise and hands each its share; it sees "
        "no data, but with the messages it would remove the noise",
    }
    scope: ClassVar[str] = (
        "covers every server-to-server message and everything computed from them, against an "
        "eavesdropper on every link and one curious server who knows its own noise (a trusted "
        "dealer draws the correlated noise jointly; the dealer is trusted)"
    )
    rules_doc: ClassVar[str] = (
        '`privacy.server_noise = "topology_optimized"` (Gaussian noise, whatever '
        "`privacy.server_distribution`) needs P > 1; its covariance is optimised for the "
        "topology's matrix and drawn by a trusted dealer (docs/privacy.md)."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.distribution != "gaussian":
            raise ConfigError(
                "privacy.server_noise = 'topology_optimized' is Gaussian noise; got "
                f"distribution {self.distribution!r}"
            )

    @classmethod
    def check_settings(cls, s: Mapping[str, Any]) -> str | None:
        """More than one server."""
        if s["topology.P"] == 1:
            return "privacy.server_noise = 'topology_optimized' needs topology.P > 1"
        return None

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """σ² = ``privacy.server_variance``."""
        return cls(**cls.level_of(s))

    def on_network(self, net: Any) -> TopologyOptimized:
        """The design for ``net``'s topology matrix (Σ₀ and its square root)."""
        cov, root = topology_design(net.mixing)
        worst = float(np.linalg.inv(cov).diagonal().max())
        if abs(worst - 1.0) > 1e-6:  # the normalisation every ε below relies on
            raise ConfigError(f"topology_optimized: max_i [Σ₀⁻¹]_ii = {worst:.9g}, not 1")
        return type(self)(std=self.std, covariance=cov, root=root)

    def transcript(self, ctx: ReleaseContext) -> Transcript:
        """Every message: per round a Gaussian of std σ/√max_i [Σ₀⁻¹]_ii = σ (no sampling)."""
        base = RandomNoise.transcript(self, ctx)
        return dataclasses.replace(base, paper_sensitivities=None, scope=self.scope)

    def secrets(
        self, members: np.ndarray, links: Any, dim: int, ctx: RoundContext
    ) -> np.ndarray | None:
        """The members' shares ``g_c = σ (Σ₀^{1/2} ξ)_c``: the dealer hands each its own."""
        members = np.asarray(members)
        if members.size == 0 or self.root is None:
            return None
        g = self._noise(ctx, dim)[:, members]  # [R, k, M]
        return self.std * g.reshape(g.shape[0], -1)

    def _noise(self, ctx: RoundContext, dim: int) -> np.ndarray:
        """``Σ₀^{1/2} ξ`` over every server, ``[R, P, M]`` (ξ from the dealer's cell)."""
        draws = ctx.draws.cells([DEALER])  # the dealer's own cell
        P = self.root.shape[0]
        xi = draws.noise("topology_noise", "gaussian", (P, dim))[:, 0]  # [R, P, M]
        return np.einsum("pq,rqm->rpm", self.root, xi)

    @classmethod
    def link_noise(cls, schemes, links, dim, ctx) -> np.ndarray:
        """``σ (Σ₀^{1/2} ξ)_m`` on every link of sender m; ξ from the dealer's cell."""
        R = ctx.draws.reps.size
        out = np.empty((len(schemes), R, links.src.size, dim))
        sender = links.src
        done: dict[int, np.ndarray] = {}
        for c, s in enumerate(schemes):
            if s.root is None:
                raise ConfigError(
                    "topology_optimized noise needs its network's design: build the batch with "
                    "CurveBatch.of(curves, net)"
                )
            if id(s.root) not in done:
                done[id(s.root)] = s._noise(ctx, dim)[:, sender]
            out[c] = s.std * done[id(s.root)]
        return out
