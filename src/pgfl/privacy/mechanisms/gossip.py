"""Local noise, then K gossip steps between servers (Muffliato) — and what it is worth.

"Muffliato: Peer-to-Peer Privacy Amplification for Decentralized Optimization and
Averaging" (Cyffers, Even, Bellet & Massoulié, NeurIPS 2022, arXiv:2206.05091), with units of
clients behind each node. Every round server ``m`` draws **one** Gaussian ``η_m ~ N(0, σ² I)``
(stream ``server_noise``, like :class:`~pgfl.privacy.mechanisms.server.RandomNoise`) and adds
it to its aggregate; then the servers run K synchronous gossip steps on the topology's
combination matrix A (symmetric, doubly stochastic):

    y⁰ = ψ + η,   y^{t+1} = γ_t A y^t + (1 − γ_t) y^{t−1},   w = y^K = P_K(A)(ψ + η),

each step sending ``y_m^t`` over A's edges (plain gossip: γ = 1, P_K = A^K; Chebyshev
acceleration: the momenta of :func:`pgfl.privacy.accounting.gossip.gossip_polynomials`). The
engine applies the K steps' result in one combination, ``P_K(A)``
(:meth:`Gossip.combination`): the same models, one simulated exchange instead of K (its
links carry ``ψ_m + η_m`` along ``P_K(A)``'s support). The accountant is told what the
*protocol* sends: ``y^t`` on A's edges.

**What each adversary observes, one round (T = 1).**

* ``link_eavesdropper`` reads ``y⁰ = ψ + η`` on every edge: local DP, a Gaussian release of
  sensitivity Δ and std σ, amplified by client sampling.
* ``neighbour_server`` v receives ``y_u⁰ = ψ_u + η_u`` from each neighbour u: local DP too
  (gossip hides nothing from a neighbour).
* ``other_server`` v, not adjacent to u: Muffliato's pairwise network DP with the exact joint
  view (v knows its own ψ_v and η_v): ρ_{u→v} = (Δ²/(2σ²)) ‖Proj_{row(B_v)} e_u‖², worst over
  non-adjacent pairs, as certified in floating point
  (:func:`~pgfl.privacy.accounting.gossip.certified_view_matrix`). The paper's per-message
  sum is not used: the messages share one noise vector, and the sum under-reports (on a
  path or a ring, u two hops away is learnt exactly while the sum charges a fraction).
* ``unit_client`` of unit v sees ``w_v = Σ_u P_K(A)_vu (ψ_u + η_u)``, one Gaussian (it does
  not know η_v): (Δ²/(2σ²)) max_{u,v} P_K(A)_vu² / ‖P_K(A)_{v,:}‖².
* ``own_server``: sees its clients' aggregate before the noise — not protected.

**Over T > 1 rounds pgfl charges local DP against every adversary.** Amplification by gossip
holds for one averaging; over rounds of optimization the states leak. Composing the
one-round view over rounds would need round t to be a fresh Gaussian release *given the
adversary's view so far*: every message of round t other than the target's must have the
same centre in both worlds once conditioned on what v saw. It does not: round t's messages
``ψ_m^t = f_m(w_m^{t−1})`` start from states ``w^{t−1} = P_K(A)(ψ^{t−1} + η^{t−1})`` that a single
curious server does not see and that carry the target's earlier contributions, so the
target's influence spreads K + 1 hops further every round and reaches v through messages
whose centres move by unknown, state-dependent amounts (local SGD is nonlinear and clipped).
Per-round conditioning is valid only if the adversary is handed every server's state after
each round, and those states reveal ``ψ + η`` of every node (``P_K(A)`` is invertible for a
generic A): local DP. Local DP is also a bound for every adversary at any T: whatever any
adversary sees is a function of ``{y^{t,0}}``, and given ``y^{1,0}, …, y^{t−1,0}`` every state
is known, so round t releases ψ^t + η^t with only the target's unit moved (by Δ) — T
adaptive Gaussian releases, each on a fresh L-of-K client sample. A tighter multi-round
bound would need the law of the hidden states, which the nonlinear local phase does not give
in closed form; pgfl claims none. ``tests/privacy/test_gossip.py`` exhibits the failure of
per-round composition on a linear two-round example (ρ_{u→v} = 0 in each round alone, a
positive divergence over both). The same holds for ``unit_client`` (its models are functions
of the hidden states): local DP for T > 1.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from pgfl.param import Param, When
from pgfl.privacy.accounting.gossip import GOSSIP_KINDS, certified_view_matrix, gossip
from pgfl.privacy.accounting.releases import Transcript
from pgfl.privacy.mechanisms.base import (
    ADVERSARIES,
    SERVER_SIDE,
    Emitted,
    FrontierLine,
    Mechanism,
    ReleaseContext,
    subsampled,
)
from pgfl.privacy.mechanisms.server import RandomNoise
from pgfl.style import SchemeStyle
from pgfl.validation import ConfigError

__all__ = ["GOSSIP_KIND", "GOSSIP_STEPS", "Gossip", "gossip_fractions"]


def _gossip(c: Mapping[str, Any]) -> bool:
    return c["privacy.server_noise"] == "gossip"


_ONLY_GOSSIP = When('privacy.server_noise = "gossip"', _gossip)

#: ``privacy.gossip_steps``: K, the gossip steps per round.
GOSSIP_STEPS = Param(
    "privacy.gossip_steps", "int", 1, "Gossip steps K per round: each server adds its noise "
    "once, then the servers run K synchronous gossip steps on the topology's matrix A "
    "(Muffliato); the engine combines with their result P_K(A).", lo=1,
    applies=_ONLY_GOSSIP,
)  # fmt: skip
#: ``privacy.gossip_kind``: plain gossip (A^K) or its Chebyshev acceleration.
GOSSIP_KIND = Param(
    "privacy.gossip_kind", "choice", "plain", "Gossip iteration: `plain` (P_K = A^K) or "
    "`chebyshev` (Chebyshev-accelerated; the same exact leakage, a faster contraction).",
    choices=GOSSIP_KINDS, applies=_ONLY_GOSSIP,
)  # fmt: skip


@lru_cache(maxsize=32)
def _fractions(raw: bytes, n: int, steps: int, kind: str) -> tuple[float, float, float]:
    A = np.frombuffer(raw).reshape(n, n)
    f = certified_view_matrix(A, steps, kind)
    adjacent = (A != 0) & ~np.eye(n, dtype=bool)
    others = ~adjacent & ~np.eye(n, dtype=bool)
    other = float(f[others].max()) if others.any() else float(f.max())
    p = gossip(A, np.eye(n), steps, kind)  # P_K(A)
    client = float(np.max(p**2 / np.sum(p**2, axis=1, keepdims=True)))
    return 1.0, other, client


def gossip_fractions(A: np.ndarray, steps: int, kind: str) -> dict[str, float]:
    """One round's Rényi slope per adversary as a fraction of local DP's Δ²/(2σ²).

    ``link_eavesdropper`` and ``neighbour_server``: 1 (they read ``y⁰ = ψ + η``);
    ``other_server``: the worst certified exact view over non-adjacent pairs;
    ``unit_client``: max_{u,v} P_K(A)_vu² / ‖P_K(A)_{v,:}‖² (module doc).

    >>> ring = np.roll(np.eye(6), 1, 1) / 3 + np.roll(np.eye(6), -1, 1) / 3 + np.eye(6) / 3
    >>> f = gossip_fractions(ring, 1, "plain")
    >>> f["other_server"], round(f["unit_client"], 6)   # u two hops away: learnt exactly
    (1.0, 0.333333)
    """
    A = np.ascontiguousarray(A, dtype=float)
    eaves, other, client = _fractions(A.tobytes(), A.shape[0], int(steps), kind)
    return {"link_eavesdropper": eaves, "neighbour_server": eaves, "other_server": other,
            "unit_client": client}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Gossip(RandomNoise):
    """One Gaussian draw per server and round, then K gossip steps (module doc).

    Attributes:
        std: σ, the std per coordinate of each server's draw (or give ``variance``).
        variance: σ².
        steps: K ≥ 1, gossip steps per round.
        kind: ``"plain"`` or ``"chebyshev"``.

    >>> Gossip(variance=0.25, steps=3).std, Gossip(std=1.0).kind
    (0.5, 'plain')

    """

    steps: int = 1
    kind: str = "plain"
    distribution: str = "gaussian"
    names: ClassVar[tuple[str, ...]] = ("gossip",)
    style: ClassVar[SchemeStyle | None] = SchemeStyle("gossip", "gossip", "#661100", "X", order=10)
    not_deployed: ClassVar[str | None] = (
        "its K gossip steps exchange messages between servers K times a round, which the "
        "deployment does not run yet (the engine combines with the polynomial of A at once)"
    )
    distributions: ClassVar[tuple[str, ...]] = ("gaussian",)
    params: ClassVar[tuple[Param, ...]] = (GOSSIP_STEPS, GOSSIP_KIND)
    frontier: ClassVar[Mapping[str, FrontierLine] | None] = {
        "gossip": FrontierLine(
            {"privacy.server_noise": "gossip"}, {"privacy.gossip_steps": (1, 2, 4)}
        )
    }
    amplified: ClassVar[bool] = True
    protects: ClassVar[tuple[str, ...]] = (*SERVER_SIDE, "unit_client")
    exposes: ClassVar[Mapping[str, str]] = {
        "own_server": "a unit's server sees its clients' aggregate before adding the noise",
        "upload_eavesdropper": "server noise is added after the uploads, which it leaves as "
        "they are",
    }
    scope: ClassVar[str] = (
        "covers every message of the gossip (y⁰ = ψ + η and the K steps on the topology's "
        "edges) and everything computed from them: local DP per round; for one round (T = 1) "
        "a non-adjacent curious server and a unit's client get Muffliato's exact view"
    )
    rules_doc: ClassVar[str] = (
        '`privacy.server_noise = "gossip"` (Gaussian noise, whatever '
        "`privacy.server_distribution`) needs P > 1; the servers gossip on the topology's "
        "matrix (symmetric and doubly stochastic, Assumption 1)."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        GOSSIP_STEPS.named("steps").check(self.steps)
        GOSSIP_KIND.named("kind").check(self.kind)
        if self.distribution != "gaussian":
            raise ConfigError(
                "privacy.server_noise = 'gossip' is Gaussian noise (Muffliato's analysis); "
                f"got distribution {self.distribution!r}"
            )

    @classmethod
    def check_settings(cls, s: Mapping[str, Any]) -> str | None:
        """More than one server."""
        if s["topology.P"] == 1:
            return (
                "privacy.server_noise = 'gossip' needs topology.P > 1 (neighbours to gossip with)"
            )
        return None

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """σ² = ``privacy.server_variance``, K = ``privacy.gossip_steps``, its kind."""
        return cls(
            **cls.level_of(s),
            steps=s["privacy.gossip_steps"],
            kind=s["privacy.gossip_kind"],
        )

    @classmethod
    def combination(cls, mixing: np.ndarray, s: Mapping[str, Any]) -> np.ndarray:
        """``P_K(A)``: the K gossip steps' result, ``w = P_K(A)(ψ + η)``."""
        n = mixing.shape[0]
        steps, kind = s["privacy.gossip_steps"], s["privacy.gossip_kind"]
        return gossip(mixing, np.eye(n), steps, kind)

    @classmethod
    def combination_key(cls, s: Mapping[str, Any]) -> tuple:
        """K and the kind: they change ``P_K(A)``."""
        return ("gossip", s["privacy.gossip_steps"], s["privacy.gossip_kind"])

    def _settings(self) -> dict[str, Any]:
        return {"privacy.gossip_steps": self.steps, "privacy.gossip_kind": self.kind}

    def validate(self, net: Any) -> None:
        """The network must combine with ``P_K(A)`` of its topology (as the experiment builds)."""
        expected = self.combination(net.mixing, self._settings())
        if net.A.shape != expected.shape or not np.allclose(net.A, expected, atol=1e-12):
            raise ConfigError(
                f"privacy.server_noise = 'gossip' (K = {self.steps}, {self.kind}) needs the "
                "network to combine with P_K(A) of its topology matrix A: "
                "Network(..., A=P_K(A), mixing=A); the experiment builds it"
            )

    def _local(self, ctx: ReleaseContext) -> Transcript:
        base = RandomNoise.transcript(self, ctx)
        return dataclasses.replace(base, paper_sensitivities=None, scope=self.scope)

    def transcript(self, ctx: ReleaseContext) -> Transcript:
        """Local DP: every adversary's bound at any T (no sampling credit)."""
        return self._local(ctx)

    def views(self, ctx: ReleaseContext) -> dict[str, Transcript | None]:
        """Local DP for T > 1; for T = 1 Muffliato's exact views where they are smaller."""
        local = self._local(ctx)
        seen = dict.fromkeys(self.protects, local)
        if ctx.iterations == 1 and ctx.combination is not None and local.reason is None:
            for a, f in gossip_fractions(ctx.combination, self.steps, self.kind).items():
                if f < 1.0:  # f > 0: some row of the view involves every u (module doc)
                    seen[a] = dataclasses.replace(local, std=self.std / math.sqrt(f))
        out: dict[str, Transcript | None] = dict.fromkeys(ADVERSARIES)
        for a, t in seen.items():
            out[a] = subsampled(t, ctx, a)
        return out

    def observe(self, adversary: str, seen: Emitted) -> list[tuple[np.ndarray, bool]]:
        """What servers receive during the K gossip steps, computed from the engine's ``y⁰``.

        The engine's links carry ``y⁰_m = ψ_m + η_m`` (every link of sender m the same);
        step t of the protocol sends ``y^t = P_t(A) y⁰`` on A's edges. A curious server
        (or coalition) receives ``y^t_w`` from each neighbour w outside it, t = 0..K−1;
        the others as by default.
        """
        if adversary not in SERVER_SIDE or adversary == "link_eavesdropper":
            return super().observe(adversary, seen)
        R, P, M = seen.W.shape
        first = np.array([np.flatnonzero(seen.src == m)[0] for m in range(P)])
        y0 = seen.messages[:, first]  # [R, P, M]
        A = seen.mixing
        members = np.asarray(seen.observers(adversary))
        if members.size == 0:
            return [(np.zeros((R, 0)), True)]
        near = (A[members] != 0).any(axis=0)
        near[members] = False
        flat = y0.transpose(1, 0, 2).reshape(P, -1)
        steps = [gossip(A, flat, t, self.kind)[near] for t in range(self.steps)]
        view = np.stack(steps).reshape(self.steps, int(near.sum()), R, M)
        return [(view.transpose(2, 0, 1, 3).reshape(R, -1), False)]
