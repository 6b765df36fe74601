"""Distributed DP: noise shares added by the clients inside secure aggregation.

Each sampled client encodes what it shares (the change of its model, ``w_pk − w_{p,i−1}``,
or its update ``(w_{p,i−1} − w_pk)/μ`` with ``training.share = "updates"``) as integers
mod 2^b (clip to ``c``, scale, randomized Hadamard rotation, randomized rounding:
:mod:`pgfl.privacy.distributed.encoding`), adds an integer noise share, and secure
aggregation releases only the sum mod 2^b to the unit's server, which decodes the noisy
sum of the survivors' messages. The distributed discrete Gaussian (Kairouz, Liu &
Steinke, "The Distributed Discrete Gaussian Mechanism for Federated Learning with Secure
Aggregation", ICML 2021, arXiv:2102.06387: shares ``N_Z(0, σ²/t)``) and the Skellam
mechanism (Agarwal, Kairouz & Liu, "The Skellam Mechanism for Differentially Private
Federated Learning", NeurIPS 2021, arXiv:2110.04995: shares ``Sk(λ, λ)``, 2λ = σ²/t).
So a unit's own server, who sees its clients' aggregate, is protected at central-DP
utility, trusting the cryptography of secure aggregation and that no client colludes with
it (a colluding client knows its own share).

Adversaries (:meth:`DistributedNoise.views`): the own server decodes the noisy sum and
knows the sample (no sampling credit); an observer of the uploads sees masked codes,
hidden computationally, and at most what the server decodes from them (the same ε); a
client of the unit knows the sample (secure aggregation's keys) and its own share; the
servers' side sees functions of the unit's decoded sum, on a sample it does not know.

Dropout: every client adds the share for the worst allowed dropout, the threshold t of
secure aggregation (fewer survivors abort the round), and the accountant charges each
round the survivors count that gives the largest divergence, n = t
(:mod:`pgfl.privacy.distributed.accounting`).

Protocols: ``simulated`` (keyed draws, the sum mod 2^b vectorized) and ``cryptographic``
(the real secure aggregation of :mod:`pgfl.privacy.secagg` on the same codes; the client's
rounding and noise from ``os.urandom`` through exact integer samplers,
:mod:`pgfl.privacy.distributed.samplers`). Given the same codes both return the same sum.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import lru_cache
from typing import Any, ClassVar, NamedTuple

import numpy as np

from pgfl.param import Param, When
from pgfl.privacy.accounting.releases import Transcript
from pgfl.privacy.distributed.accounting import rounded_sensitivity
from pgfl.privacy.distributed.encoding import (
    choose_scale,
    clip_l2,
    decode,
    padded_dim,
    randomized_round,
    rotate,
    rounded_norm_bound,
    to_residues,
)
from pgfl.privacy.distributed.samplers import (
    KeyedWords,
    SystemWords,
    discrete_gaussian,
    discrete_gaussian_keyed,
    exact_variance,
    poisson_exact,
    poisson_keyed,
)
from pgfl.privacy.mechanisms.base import (
    ADVERSARIES,
    SERVER_SIDE,
    Aggregate,
    ClientAggregation,
    Mechanism,
    NoiseLevel,
    ReleaseContext,
    subsampled,
)
from pgfl.privacy.mechanisms.client import Mean
from pgfl.privacy.secagg import PARAMS as SECAGG_PARAMS
from pgfl.privacy.secagg import SecAggAbort, SecAggConfig, completes, run_secagg_round
from pgfl.privacy.secagg.protocol import DROP_AFTER_SHARE, NEVER_DROP
from pgfl.style import SchemeStyle
from pgfl.validation import ConfigError

__all__ = ["DDP_BETA", "DDP_BITS", "DDP_NAMES", "DDP_VARIANCE", "DistributedNoise", "Grid"]

#: ``privacy.client_noise`` names of distributed DP, and the integer noise each adds.
DDP_NAMES = {"distributed_gaussian": "discrete_gaussian", "skellam": "skellam"}
_DDP = When('privacy.client_noise = "distributed_gaussian" or "skellam"',
            lambda c: c["privacy.client_noise"] in DDP_NAMES)  # fmt: skip

DDP_VARIANCE = Param(
    "privacy.ddp_variance", "real", 0.0, "σ²: variance per coordinate of the noise on a unit's "
    "sum of client messages (a client's model change, or its update with `training.share = "
    "\"updates\"`), at t survivors: each sampled client adds a share σ²/t.", lo=0, batched=True,
    applies=When('privacy.client_noise = "distributed_gaussian"/"skellam", not calibrated by '
                 "privacy.target_epsilon nor given as privacy.client_noise_multiplier",
                 lambda c: c["privacy.client_noise"] in DDP_NAMES
                 and c["privacy.target_epsilon"] is None
                 and c.get("privacy.client_noise_multiplier") is None),
)  # fmt: skip
DDP_BITS = Param(
    "privacy.ddp_bits", "int", 16, "b: bits per coordinate of a client's code and of the "
    "unit's sum (secure aggregation modulo 2^b).", lo=8, hi=32, batched=True, applies=_DDP,
)  # fmt: skip
DDP_BETA = Param(
    "privacy.ddp_beta", "real", None, "β of conditional randomized rounding (a rounded vector "
    "above KLS's norm bound is redrawn, which happens w.p. ≤ β; 0: unconditional). Unset: "
    "e^(−1/2) for client-level neighbours, 0 for record-level (conditional rounding breaks "
    "the coupling a record's small sensitivity rests on).", lo=0, hi=1, hi_open=True,
    batched=True, applies=_DDP,
)  # fmt: skip
#: Standard deviations of the noisy sum the modulus holds (KLS: 4 for the discrete Gaussian).
K_STDDEVS = 4.0
#: Relative margin on the encoded norms, covering the floating-point encoding's rounding.
MARGIN = 1e-9
_SECAGG = {p.name: p for p in SECAGG_PARAMS}


class Grid(NamedTuple):
    """The integer encoding of one unit-round: grid, dimension and the exact noise share.

    Attributes:
        scale: γ, real units per grid step.
        dim: d, the padded dimension.
        variance: the variance of one client's share, grid units² (exactly representable:
            ``t·m`` for the discrete Gaussian, ``2λ`` for Skellam; 0: no noise).
        t, m: ``σ² = t·m`` of the discrete Gaussian share (0, 0 otherwise).
        lam: λ of the Skellam share (0 otherwise).

    """

    scale: float
    dim: int
    variance: float
    t: int
    m: int
    lam: int


@lru_cache(maxsize=256)
def _grid(noise: str, std: float, clip: float, bits: int, clients: int, dim: int,
          threshold: int) -> Grid:  # fmt: skip
    """:meth:`DistributedNoise.grid` (cached: a pure function of the settings)."""
    d = padded_dim(dim)
    share_std = std / math.sqrt(threshold)
    scale = choose_scale(bits, clip, clients, d, share_std, K_STDDEVS)
    if std == 0:
        return Grid(scale, d, 0.0, 0, 0, 0)
    v = (share_std / scale) ** 2
    if noise == "skellam":
        lam = max(1, math.ceil(v / 2.0))
        return Grid(scale, d, 2.0 * lam, 0, 0, lam)
    t, m = exact_variance(v)
    return Grid(scale, d, float(t * m), t, m, 0)


@dataclass(frozen=True, kw_only=True)
class DistributedNoise(NoiseLevel, ClientAggregation):
    """Noise shares inside secure aggregation: the distributed discrete Gaussian or Skellam.

    Attributes:
        noise: ``"discrete_gaussian"`` or ``"skellam"``.
        std: σ, per-coordinate std of the noise on a unit's sum of t messages (or give
            ``variance``); each client adds a share of variance σ²/t.
        variance: σ² (or give ``std``).
        clip: c, the ℓ2 bound of a client's message: ``μB`` (its model change) or ``B``
            (its update), B the per-sample gradient clipping norm.
        bits: b, every code and the sum live mod 2^b.
        beta: conditional rounding's β (0: unconditional).
        config: secure aggregation's threshold and neighbour graph
            (:class:`~pgfl.privacy.secagg.SecAggConfig`; its fixed-point settings unused).
        protocol: ``"simulated"`` or ``"cryptographic"``.
        dropout: probability that a sampled client drops out after sharing its keys.

    >>> m = DistributedNoise(std=1.0, clip=0.3, bits=16)
    >>> g = m.grid(clients=10, dim=2, threshold=10)
    >>> g.dim, g.t * g.m == g.variance
    (2, True)

    """

    noise: str = "discrete_gaussian"
    clip: float = 1.0
    bits: int = 16
    beta: float = 0.0
    config: SecAggConfig = field(default_factory=SecAggConfig)
    protocol: str = "simulated"
    dropout: float = 0.0
    names: ClassVar[tuple[str, ...]] = tuple(DDP_NAMES)
    #: Each name's figure style (distributed DP, with Skellam shares a colour of its own).
    style: ClassVar[Mapping[str, SchemeStyle]] = {
        "distributed_gaussian": SchemeStyle(
            "distributed_dp", "distributed DP (noise shares in secure aggregation)", "#117733",
            "<", order=12),
        "skellam": SchemeStyle("skellam", "distributed DP with Skellam shares", "#44AA99", "H",
                               order=13),
    }  # fmt: skip
    #: Each client adds a noise share, secure aggregation sums the shares with the codes.
    stacks: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "distributed_gaussian": ("discrete_gaussian_shares", "secure_aggregation"),
        "skellam": ("skellam_shares", "secure_aggregation"),
    }
    params: ClassVar[tuple[Param, ...]] = (DDP_VARIANCE, DDP_BITS, DDP_BETA)
    variance_param: ClassVar[Param] = DDP_VARIANCE
    protects: ClassVar[tuple[str, ...]] = tuple(ADVERSARIES)
    covers: ClassVar[str] = (
        "the noisy sum of a unit's clients that secure aggregation reveals, and everything "
        "computed from it"
    )
    amplified: ClassVar[bool] = True
    reveals_sample: ClassVar[bool] = True
    summed: ClassVar[bool] = True
    not_deployed: ClassVar[str | None] = (
        "distributed DP's clients encode their messages as integers with noise shares inside "
        "secure aggregation, which the deployed clients do not run yet"
    )
    trusted: ClassVar[Mapping[str, str]] = {
        "secure-aggregation cryptography": "X25519 key agreement, AES-CTR masks and Shamir "
        "recovery hide each client's masked code from its server and from an observer of "
        "the uploads (computationally, not by DP; docs/secagg.md)",
        "clients": "no client of a unit colludes with its server: a colluding client "
        "removes its own noise share from the sum the server decodes, and t of them could "
        "unmask another client's code",
    }
    notes: ClassVar[Mapping[str, str]] = {
        "upload_eavesdropper": "masked codes, hidden computationally by secure aggregation; "
        "what they reveal beyond that is at most the noisy sum the server decodes from them "
        "(the own server's epsilon, who sees them all)",
    }
    rules_doc: ClassVar[str] = (
        '`privacy.client_noise = "distributed_gaussian"/"skellam"` needs a finite '
        "`training.clip_norm` (a message's norm bound c = μB, or B for updates) and "
        '`privacy.server_noise = "none"` (its ε already covers every adversary).'
    )

    def __post_init__(self) -> None:
        if self.noise not in DDP_NAMES.values():
            raise ConfigError(
                f"noise must be one of 'discrete_gaussian', 'skellam'; got {self.noise!r}"
            )
        super().__post_init__()
        if not (0 < self.clip < math.inf):
            raise ConfigError(f"clip must be a real number in (0, inf); got {self.clip!r}")
        DDP_BITS.named("bits").check(self.bits)
        DDP_BETA.named("beta").check(self.beta)
        _SECAGG["privacy.secagg_protocol"].named("protocol").check(self.protocol)
        _SECAGG["privacy.dropout"].named("dropout").check(self.dropout)

    @property
    def name(self) -> str:
        """``"distributed_gaussian"`` or ``"skellam"``, as in ``privacy.client_noise``."""
        return "skellam" if self.noise == "skellam" else "distributed_gaussian"

    @classmethod
    def check_settings(cls, s: Mapping[str, Any]) -> str | None:
        """A finite gradient bound (the message bound), and no server-level noise."""
        name = s["privacy.client_noise"]
        if math.isinf(s["training.clip_norm"]):
            return (f"privacy.client_noise = {name!r} needs training.clip_norm: a client's "
                    "message is clipped to c = mu*B (B for updates)")  # fmt: skip
        if s["privacy.server_noise"] != "none":
            return (
                f"privacy.client_noise = {name!r} runs with privacy.server_noise = 'none' "
                f"(its epsilon covers every adversary); got {s['privacy.server_noise']!r}"
            )
        return None

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """The curve's noise, bits, β (unset: by neighbouring relation) and secure aggregation."""
        clip = s["training.clip_norm"] * (
            1.0 if s["training.share"] == "updates" else s["training.mu"]
        )
        beta = s["privacy.ddp_beta"]
        if beta is None:
            beta = math.exp(-0.5) if s["privacy.neighbours"] == "client" else 0.0
        secagg = SecAggConfig(threshold=s["privacy.secagg_threshold"],
                              neighbours=s["privacy.secagg_neighbours"])  # fmt: skip
        return cls(noise=DDP_NAMES[s["privacy.client_noise"]], **cls.level_of(s),
                   clip=clip, bits=s["privacy.ddp_bits"], beta=beta, config=secagg,
                   protocol=s["privacy.secagg_protocol"], dropout=s["privacy.dropout"])  # fmt: skip

    def noiseless(self) -> Mechanism:
        """The plain mean (no rounding, no noise): the audit's noise-free centres."""
        return Mean()

    def record(self, L, dim, aborted, clipped, aborts) -> dict[str, dict[str, Any]]:
        """``summary.json``'s ``distributed_dp`` record: encoding, costs, aborts.

        Costs: each client sends ``d`` codes of ``b`` bits per round (``d`` the model
        dimension padded to a power of two), besides secure aggregation's own messages.
        """
        t = self.fewest_clients(L)
        g = self.grid(L, dim, t)
        log = [
            f"iteration {i}, repetition {r}, unit {p}: secure aggregation aborted "
            f"(fewer than t={t} of L={L} clients survived); the unit kept its previous model"
            for r, i, p in aborts
        ]
        return {"distributed_dp": {
            "noise": self.noise, "protocol": self.protocol, "threshold": t,
            "dropout": self.dropout, "bits": self.bits, "beta": self.beta, "clip": self.clip,
            "grid": g.scale, "share_variance_grid": g.variance, "coordinates_sent": g.dim,
            "bits_per_client_round": self.bits * g.dim,
            "bits_per_model_coordinate": self.bits * g.dim / dim,
            "aborted_unit_rounds": aborted, "clipped_or_wrapped": clipped, "log": log,
        }}  # fmt: skip

    def fewest_clients(self, L: int) -> int:
        """The threshold t: fewer survivors abort the round."""
        return self.config.threshold_for(L)

    def validate(self, net: Any) -> None:
        """L clients must fit the threshold (and the modulus holds their sum)."""
        self.secagg_config().check_clients(net.L)

    def secagg_config(self) -> SecAggConfig:
        """The protocol's settings for codes mod 2^b (threshold and graph as configured)."""
        return SecAggConfig(
            modulus_bits=max(8, self.bits),
            frac_bits=0,
            clip=1.0,
            threshold=self.config.threshold,
            neighbours=self.config.neighbours,
        )

    def grid(self, clients: int, dim: int, threshold: int) -> Grid:
        """The encoding of a round of ``clients`` sampled L, M coordinates, threshold t.

        γ from :func:`~pgfl.privacy.distributed.encoding.choose_scale` (L messages of norm ≤ c,
        shares of std σ/√t, :data:`K_STDDEVS`), the share's variance rounded up to an exactly
        sampled one (:func:`~pgfl.privacy.distributed.samplers.exact_variance`; Skellam:
        ``2λ``, λ an integer).
        """
        return _grid(self.noise, float(self.std), float(self.clip), int(self.bits), int(clients),
                     int(dim), int(threshold))  # fmt: skip

    @property
    def caveat(self) -> str:
        """What the ε rests on beyond the mathematics (the summary's ``epsilon_caveat``)."""
        if self.protocol == "cryptographic":
            return (
                "exact noise: integer shares from exact samplers (Canonne, Kamath & Steinke's "
                "discrete Gaussian; Poisson by exact rejection) driven by os.urandom, summed "
                "mod 2^b by secure aggregation; the encoding (clip, rotation, rounding) runs "
                "in floating point, its norm bound covered by a relative margin of 1e-9"
            )
        return ("simulated protocol: keyed pseudo-random draws (the discrete Gaussian by "
                "inverting a floating-point table of its CDF, Poisson by floating-point PTRS): a "
                "simulation figure; the cryptographic protocol draws every share exactly from "
                "os.urandom (privacy.secagg_protocol = 'cryptographic')")  # fmt: skip

    def transcript(self, ctx: ReleaseContext) -> Transcript:
        """The noisy integer sum a unit's own server decodes each round (no sampling credit).

        Replacing the client's data (given the server's model, which both worlds share)
        moves its message by ``2μB/r`` (``2B/r`` for updates; r the records a step
        averages), at most ``2c`` (in real units: the setting ``message_sensitivity``, the
        Δ of a noise multiplier σ/Δ); in grid units after rounding
        (:func:`~pgfl.privacy.distributed.accounting.rounded_sensitivity`). The sum holds
        n ∈ [t, L] shares; each round is charged the worst.
        """
        L = ctx.sampled or ctx.clients_per_round
        t = ctx.clients_per_round
        g = self.grid(L, ctx.dim, t)
        scope = ("covers the noisy sum of a unit's clients' messages that secure aggregation "
                 "releases to the unit's server every round, and everything computed from it; "
                 "adversary: the unit's own server (honest-but-curious, knows the sample), and "
                 "by post-processing anyone; trusted: the secure-aggregation cryptography, and "
                 "no client colluding with the server")  # fmt: skip
        whole = 2.0 * self.clip
        if ctx.clip is None:
            shift = whole
        else:
            step = ctx.mu * ctx.clip if ctx.share == "models" else ctx.clip
            shift = min(2.0 * step / ctx.records, whole)
        settings = (("mechanism", self.name), ("sigma", self.std), ("bits", self.bits),
                    ("grid", g.scale), ("share_variance_grid", g.variance), ("beta", self.beta),
                    ("clip", self.clip), ("threshold", t), ("sampled", L),
                    ("message_sensitivity", shift))  # fmt: skip
        common = {"std": math.sqrt(g.variance), "distribution": self.noise, "dim": g.dim,
                  "scope": scope, "iterations": ctx.iterations, "settings": settings,
                  "shares": tuple(range(t, L + 1)), "grid": g.scale}  # fmt: skip
        if self.std == 0:
            return Transcript((), reason="no noise (sigma = 0): the sum is released in the clear",
                              **common)  # fmt: skip
        pad = (1.0 + MARGIN) / g.scale
        l2 = rounded_sensitivity(shift * pad, self.clip * pad, g.dim, self.beta)
        return Transcript((l2,) * ctx.iterations, **common)

    def views(self, ctx: ReleaseContext) -> dict[str, Transcript | None]:
        """What each adversary observes of the noisy sums (the own server's: :meth:`transcript`).

        * ``own_server``: the sum it decodes, on a sample it draws: no sampling credit;
        * ``upload_eavesdropper``: the masked codes, computationally hidden; whatever they
          reveal is a function of the server's view (the server receives every upload),
          which secure aggregation reduces to the sum: the own server's transcript, no
          credit (it sees who uploads);
        * ``unit_client``: its server's model, a function of the sum; it knows the sample
          (secure aggregation routes the sampled clients' keys to them: no credit) and,
          when it is sampled with the target, its own share: the sum then holds n − 1
          shares it does not know, n ∈ [max(t, 2), L] survivors (charged the fewest);
        * the servers' side (eavesdropper, other and neighbouring servers, coalitions):
          functions of the units' decoded sums and of noise independent of the target's,
          on a client sample they do not know: the sum's transcript with amplification by
          sampling (:func:`~pgfl.privacy.mechanisms.base.subsampled`). No secret is shared
          between servers, so a coalition sees no more than an eavesdropper.

        >>> m = DistributedNoise(std=20.0, clip=0.3, config=SecAggConfig(threshold=4))
        >>> v = m.views(ReleaseContext(mu=0.3, clip=1.0, iterations=2, dim=2,
        ...                            clients_per_round=4, clients=20, sampled=5))
        >>> v["own_server"].shares, v["unit_client"].shares, v["other_server"].sampling
        ((4, 5), (3, 4, 5), (20, 5))
        """
        own = self.transcript(ctx)
        out: dict[str, Transcript | None] = dict.fromkeys(ADVERSARIES, own)
        if not own.sensitivities:
            return out
        for a in SERVER_SIDE:
            out[a] = subsampled(own, ctx, a)
        L, t = ctx.sampled or ctx.clients_per_round, ctx.clients_per_round
        if L >= 2:  # a client of the unit may be a survivor with the target
            unknown = tuple(range(max(t, 2) - 1, L + 1))
            scope = ("covers the noisy sums of its unit a client sees through its server's "
                     "model, less its own share when it is sampled; adversary: a client of "
                     "the unit (knows the sample); trusted: the secure-aggregation "
                     "cryptography")  # fmt: skip
            out["unit_client"] = replace(own, shares=unknown, scope=scope)
        return out

    @classmethod
    def aggregate(cls, schemes, start, local, mu, updates, ctx) -> Aggregate:
        """The decoded noisy sum over the survivors, per curve (a loop over ``C'``)."""
        C, R, P, L, _ = local.shape
        u = ctx.draws.uniform("dropout", (L,)) if any(s.dropout > 0 for s in schemes) else None
        psi = np.empty(start.shape)
        aborted = np.zeros((C, R, P), dtype=bool)
        clipped = np.zeros((C, R), dtype=np.int64)
        for j, s in enumerate(schemes):
            survivors = np.ones((R, P, L), dtype=bool) if u is None else u >= s.dropout
            w0 = start[j][:, :, None]
            messages = (w0 - local[j]) / mu[j] if updates[j] else local[j] - w0
            finite = np.isfinite(messages).all(axis=-1)
            broken = ~(finite | ~survivors).all(axis=(1, 2))
            messages = np.where(finite[..., None], messages, 0.0)
            total, ok, hits = s.noisy_sum(messages, survivors, ctx)
            mean = total / np.maximum(survivors.sum(-1), 1)[..., None]
            unit = start[j] - mu[j] * mean if updates[j] else start[j] + mean
            aborted[j] = ~ok
            clipped[j] = hits
            psi[j] = np.where(ok[..., None], unit, start[j])
            psi[j][broken] = np.nan
        return Aggregate(psi, aborted, clipped)

    def noisy_sum(
        self, messages: np.ndarray, survivors: np.ndarray, ctx: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The decoded noisy sum of the survivors' messages, and what went wrong.

        Returns the sum ``[R, P, M]``, which rounds completed ``[R, P]``, and per repetition
        the messages clipped plus the sums that wrapped around the modulus ``[R]``.
        """
        R, P, L, M = messages.shape
        g = self.grid(L, M, self.fewest_clients(L))
        signs = np.where(ctx.draws.uniform("ddp_signs", (g.dim,)) < 0.5, -1.0, 1.0)
        codes, hit = self.codes(messages, signs, ctx)
        units = ctx.start + np.arange(P)
        if self.protocol == "cryptographic":
            total, ok = self.secure_sum(codes, survivors, units, ctx.iteration)
            wrapped = np.zeros(R, dtype=np.int64)
        else:
            total, ok, wrapped = self.simulated_sum(codes, survivors, units, ctx.iteration)
        real = decode(total, signs, g.scale, self.bits, M)
        return real, ok, (hit & survivors).sum(axis=(1, 2)) + wrapped

    def codes(
        self, messages: np.ndarray, signs: np.ndarray, ctx: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every client's integer code plus noise share, and which messages were clipped.

        Codes ``int64 [R, P, L, d]`` (before mod 2^b); clipped ``[R, P, L]``.

        Keyed draws (streams ``ddp_rounding``, ``ddp_noise``) in the simulated protocol,
        ``os.urandom`` through the exact samplers in the cryptographic one.
        """
        R, P, L, M = messages.shape
        g = self.grid(L, M, self.fewest_clients(L))
        x, hit = clip_l2(messages, self.clip)
        y = rotate(x / g.scale, signs[:, :, None, :]).reshape(-1, g.dim)
        bound = rounded_norm_bound(self.clip / g.scale, g.dim, self.beta) if self.beta else None
        crypto = self.protocol == "cryptographic"
        keys = lambda name: KeyedWords(ctx.draws.keys(name), L * g.dim)  # noqa: E731
        rounding = SystemWords() if crypto else keys("ddp_rounding")
        codes = randomized_round(y, rounding, np.arange(R * P * L), bound).reshape(R, P, L, g.dim)
        return codes + self._shares(codes.shape, crypto, keys, g), hit

    def simulated_sum(
        self, codes: np.ndarray, survivors: np.ndarray, units: np.ndarray, iteration: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What secure aggregation outputs, vectorized.

        The survivors' codes summed mod 2^b ``[R, P, d]``, which rounds complete ``[R, P]``
        (:func:`~pgfl.privacy.secagg.completes`) and per repetition the sums that wrapped
        around the modulus ``[R]``.
        """
        exact = np.where(survivors[..., None], codes, 0).sum(axis=2)
        ok = completes(survivors, self.secagg_config(), unit=units[None, :], round=iteration)
        half = 1 << (self.bits - 1)
        wrapped = ((exact < -half) | (exact >= half)).any(-1).sum(-1)
        return to_residues(exact, self.bits), ok, wrapped

    def secure_sum(
        self, codes: np.ndarray, survivors: np.ndarray, units: np.ndarray, iteration: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The real protocol, unit by unit, on the codes mod 2^b: their sum, and completion.

        The survivors' masked inputs reach the server; the others drop after sharing their
        keys (the hard case: their masks are removed by Shamir recovery).
        """
        R, P = codes.shape[:2]
        cfg = self.secagg_config()
        residues = to_residues(codes, self.bits)
        total = np.zeros(residues.shape[:2] + residues.shape[3:], dtype=residues.dtype)
        ok = np.ones((R, P), dtype=bool)
        for r, p in np.ndindex(R, P):
            stage = np.where(survivors[r, p], NEVER_DROP, DROP_AFTER_SHARE)
            try:
                res = run_secagg_round(residues[r, p], cfg, unit=int(units[p]), round=iteration,
                                       drop_stage=stage, encoded=True)  # fmt: skip
            except SecAggAbort:
                ok[r, p] = False
                continue
            total[r, p] = res.sum_residues
        return total, ok

    def _shares(self, shape: tuple, crypto: bool, keys: Any, g: Grid) -> np.ndarray:
        """Every client's integer noise share ``[R, P, L, d]`` (zeros without noise)."""
        n = int(np.prod(shape))
        if g.variance == 0:
            return np.zeros(shape, dtype=np.int64)
        idx = np.arange(n)
        if self.noise == "discrete_gaussian":
            if crypto:
                return discrete_gaussian(SystemWords(), idx, g.t, g.m).reshape(shape)
            return discrete_gaussian_keyed(keys("ddp_noise"), idx, g.t, g.m).reshape(shape)
        if crypto:
            src = SystemWords()
            lam = Fraction(g.lam)
            return (poisson_exact(src, lam, n) - poisson_exact(src, lam, n)).reshape(shape)
        plus = poisson_keyed(keys("ddp_noise"), idx, float(g.lam))
        minus = poisson_keyed(keys("ddp_noise.minus"), idx, float(g.lam))
        return (plus - minus).reshape(shape)
