"""Client-level pieces composed: clip, then noise on each message, then the aggregation.

A client scheme is a stack of pieces run in order on each sampled client's message, as
optax's ``chain`` runs gradient transformations (and as TensorFlow Federated's
aggregators nest clipping, noise and secure summation): an optional *clipping piece*
bounds the message (:class:`~pgfl.privacy.mechanisms.clip.MessageClip`, DP-FedAvg's ℓ2
clipping to S), a *noise piece* perturbs it (a scheme with a ``perturb`` class method,
such as :class:`~pgfl.privacy.mechanisms.client.ClientNoise`: continuous Laplace or
Gaussian noise of std σ per coordinate), and the server gets the messages by plain
averaging (:class:`~pgfl.privacy.mechanisms.client.Mean`) or through an *aggregating
piece* that sums them (a scheme with
:attr:`~pgfl.privacy.mechanisms.base.ClientAggregation.summed`, such as
:class:`~pgfl.privacy.mechanisms.secure_aggregation.SecureAggregationScheme`: the server
learns only the fixed-point sum). :func:`compose` makes the scheme of such a stack; its
names are the pieces' names joined by ``+`` (``["clip", "gaussian",
"secure_aggregation"]`` is ``"clip+gaussian+secure_aggregation"``). Stacks a scheme
declares as its own (noise shares inside secure aggregation:
:class:`~pgfl.privacy.mechanisms.distributed.DistributedNoise`) stay that scheme.

**The clipping piece** bounds what one client's data can move its message: by
``min(2μB/r, 2S)`` (a model; an update: ``min(2B/r, 2S)``), so the noise piece is
accounted on that bound (:meth:`~pgfl.privacy.mechanisms.clip.MessageClip.bounded`), and
the ε is finite without ``training.clip_norm``. Server-level noise does not run beside it
(:meth:`Chain.check_settings`).

**The accountant follows the composition.** With plain averaging, the unit's mean of the
noisy messages is exact, and the noise piece's own views hold (the servers' side sees the
mean of n messages: Δ/n, σ/√n). Under a summing piece every adversary sees at most a
function of the sampled clients' perturbed messages: secure aggregation's fixed-point
encoding rounds and clips each noisy message on its own before the sum, so what the server
decodes is a post-processing of the n noisy messages, not of their real sum. With
client-level neighbours only the target's message differs, so every view is bounded by the
noise piece's release of one client's message (sensitivity Δ = 2μB for a model, 2B for an
update; std σ): the local-DP ε, on the client sample where the adversary does not know it
(:func:`~pgfl.privacy.mechanisms.base.subsampled`; secure aggregation reveals the sample
to the unit's clients). The sum of n messages does **not** buy the σ√n of central DP here:
that needs noise the sum keeps exact, integer noise shares added to the integer codes
(Kairouz, Liu & Steinke, "The Distributed Discrete Gaussian Mechanism for Federated
Learning with Secure Aggregation", ICML 2021, arXiv:2102.06387, §1 and §4). What secure
aggregation adds is computational: an observer of the uploads sees masked messages
(Bonawitz et al., CCS 2017).

>>> from pgfl.privacy.mechanisms.base import ReleaseContext
>>> m = NoisySecureAggregation(noise=ClientNoise(distribution="gaussian", variance=4.0),
...                            aggregator=SecureAggregationScheme())
>>> m.name, m.std, m.noise.name, m.aggregator.name
('gaussian+secure_aggregation', 2.0, 'gaussian', 'secure_aggregation')
>>> ctx = ReleaseContext(mu=0.1, clip=1.0, iterations=3, clients=10, sampled=10,
...                      clients_per_round=10, sample_revealed=True)
>>> own = m.views(ctx)["own_server"]
>>> own.sensitivities, own.std      # one client's model, 2μB, noise σ: not Δ/n, σ/√n
((0.2, 0.2, 0.2), 2.0)
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pgfl.privacy.accounting.releases import Transcript
from pgfl.privacy.mechanisms.base import (
    ADVERSARIES,
    Aggregate,
    ClientAggregation,
    Mechanism,
    NoiseLaw,
    ReleaseContext,
)
from pgfl.privacy.mechanisms.client import ClientNoise, Mean
from pgfl.privacy.mechanisms.clip import MessageClip
from pgfl.privacy.mechanisms.secure_aggregation import SecureAggregationScheme

__all__ = [
    "Chain",
    "ClippedNoise",
    "ClippedNoisySecureAggregation",
    "NoisySecureAggregation",
    "compose",
]


@dataclass(frozen=True, kw_only=True)
class Chain(ClientAggregation):
    """Pieces run in order on each client's message: clip, noise, aggregate (module doc).

    Attributes:
        noise: the noise piece (an instance of the class's ``noise_piece``).
        aggregator: the aggregating piece (``aggregator_piece``: plain averaging,
            :class:`~pgfl.privacy.mechanisms.client.Mean`, or a ``summed`` one).
        clip: the clipping piece before the noise (``clip_piece``), or ``None``.

    Its noise level, calibration, noise law and release are the noise piece's (on the
    clipping piece's bound); its threshold, aggregation error, validation and
    ``summary.json`` record the aggregator's. Use :func:`compose` to make the scheme of
    a stack of piece classes.

    """

    noise: Mechanism
    aggregator: ClientAggregation = Mean()
    clip: MessageClip | None = None
    #: The piece classes (set by :func:`compose`).
    noise_piece: ClassVar[type[Mechanism]]
    aggregator_piece: ClassVar[type[ClientAggregation]] = Mean
    clip_piece: ClassVar[type[MessageClip] | None] = None
    protects: ClassVar[tuple[str, ...]] = tuple(ADVERSARIES)
    amplified: ClassVar[bool] = True
    not_deployed: ClassVar[str | None] = (
        "a composed stack runs in the simulator only: the deployed clients add noise or run "
        "secure aggregation, and do not clip their messages"
    )

    @property
    def parts(self) -> tuple[Mechanism, ...]:
        """The pieces in the order they run (plain averaging left out: it has no name)."""
        out = (self.clip, self.noise, self.aggregator)
        return tuple(p for p in out if p is not None and not isinstance(p, Mean))

    @property
    def name(self) -> str:
        """The pieces' names joined by ``+`` (``"gaussian+secure_aggregation"``)."""
        return "+".join(p.name for p in self.parts)

    @property
    def std(self) -> float:  # type: ignore[override]
        """The noise piece's per-coordinate std σ."""
        return float(self.noise.std or 0.0)

    @property
    def variance(self) -> float:
        """The noise piece's per-coordinate variance σ²."""
        return float(self.noise.variance or 0.0)  # type: ignore[attr-defined]

    @property
    def distribution(self) -> str | None:  # type: ignore[override]
        """The noise piece's distribution."""
        return self.noise.distribution

    def law(self, scale: float = 1.0) -> NoiseLaw | None:
        """The noise piece's law on one message."""
        return self.noise.law(scale)

    @classmethod
    def _pieces(cls, s: Mapping[str, Any]) -> dict[type, dict[str, Any]]:
        """Each piece class with the settings it reads: the curve's, under the piece's name."""
        names = dict(zip(cls._classes(), cls.stacks[s["privacy.client_noise"]], strict=False))
        if cls.aggregator_piece is Mean:
            names[Mean] = "none"
        return {c: {**s, "privacy.client_noise": n} for c, n in names.items()}

    @classmethod
    def _classes(cls) -> tuple[type, ...]:
        """The piece classes in the order of the stack's names."""
        return tuple(c for c in (cls.clip_piece, cls.noise_piece, cls.aggregator_piece)
                     if c is not None)  # fmt: skip

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """Each piece from the curve's settings (dotted names), under its own name."""
        built = {c: c.from_settings(settings) for c, settings in cls._pieces(s).items()}
        clip = built.get(cls.clip_piece) if cls.clip_piece is not None else None
        return cls(noise=built[cls.noise_piece], aggregator=built[cls.aggregator_piece],
                   clip=clip)  # type: ignore[arg-type]  # fmt: skip

    @classmethod
    def check_settings(cls, s: Mapping[str, Any]) -> str | None:
        """Each piece's own rules in order; the clipping piece runs without server noise.

        Server-level noise whose ε accumulates over the rounds rests on a client moving its
        server's model by at most 2μB per round from *any* start; clipping the change
        relative to the start is not that (from two starts it may move them 3 times as far
        apart), so a stack that clips runs with ``privacy.server_noise = "none"``.
        """
        for piece, settings in cls._pieces(s).items():
            message = piece.check_settings(settings)
            if message is not None:
                return message
        if cls.clip_piece is not None and s["privacy.server_noise"] != "none":
            return (
                f"privacy.client_noise = {s['privacy.client_noise']!r} (a stack that clips) runs "
                f"with privacy.server_noise = 'none'; got {s['privacy.server_noise']!r}"
            )
        return None

    def validate(self, net: Any) -> None:
        """Each piece's check on the network."""
        for p in self.parts:
            p.validate(net)

    def with_std(self, std: float) -> Mechanism:
        """The same stack with the noise piece at std ``std`` (calibration's factory)."""
        return dataclasses.replace(self, noise=self.noise.with_std(std))

    def fewest_clients(self, L: int) -> int:
        """The aggregator's fewest clients (secure aggregation: its threshold t)."""
        return self.aggregator.fewest_clients(L)

    def aggregation_error(self, mu: float, share: str) -> float:
        """The aggregator's per-coordinate error bound (fixed-point rounding)."""
        return self.aggregator.aggregation_error(mu, share)

    def record(self, L, dim, aborted, clipped, aborts) -> dict[str, dict[str, Any]]:
        """The aggregator's ``summary.json`` record (secure aggregation's aborts, clips)."""
        return self.aggregator.record(L, dim, aborted, clipped, aborts)

    def message_context(self, ctx: ReleaseContext) -> ReleaseContext:
        """The context the noise piece is accounted in: the clipping piece's bound, if any."""
        return ctx if self.clip is None else self.clip.bounded(ctx)

    def transcript(self, ctx: ReleaseContext) -> Transcript | None:
        """The noise piece's release of one client's message (on the clipping piece's bound).

        Under a summing aggregator every adversary sees a function of the perturbed
        messages alone (module doc), so this release bounds each view.
        """
        own = self.noise.transcript(self.message_context(ctx))
        if own is None or not own.sensitivities or not self.aggregator.summed:
            return own
        return dataclasses.replace(
            own,
            scope=f"covers one client's noisy message under {self.aggregator.name}: every "
            "adversary sees at most a function of the noisy messages (the fixed-point sum "
            "rounds and clips each on its own), so one message's noise bounds its view",
        )

    def views(self, ctx: ReleaseContext) -> dict[str, Transcript | None]:
        """Plain averaging: the noise piece's own views (the exact mean); summed: one message's.

        Both on the clipping piece's bound; on the client sample where the adversary does
        not know it.
        """
        if not self.aggregator.summed:
            return self.noise.views(self.message_context(ctx))
        return super().views(ctx)

    @classmethod
    def aggregate(cls, schemes, start, local, mu, updates, ctx) -> Aggregate:
        """The pieces in order on every message: clip, noise; then the aggregating piece."""
        if cls.clip_piece is not None:
            local = cls.clip_piece.perturb([s.clip for s in schemes], start, local, mu, updates,
                                           ctx)  # fmt: skip
        local = cls.noise_piece.perturb(  # type: ignore[attr-defined]
            [s.noise for s in schemes], start, local, mu, updates, ctx
        )
        return cls.aggregator_piece.aggregate([s.aggregator for s in schemes], start, local, mu,
                                              updates, ctx)  # fmt: skip


def compose(
    noise: type[Mechanism],
    aggregator: type[ClientAggregation] = Mean,
    *,
    clip: type[MessageClip] | None = None,
    name: str,
) -> type[Chain]:
    """The scheme that runs ``clip`` (if any), then ``noise`` on each message, then ``aggregator``.

    Args:
        noise: a noise piece: a client-level class with a ``perturb`` class method
            (``perturb(schemes, start, local, mu, updates, ctx)`` returns the local models
            whose messages carry the noise, ``[C', R, P_b, L, M]``) and a noise level.
        aggregator: how the server gets the messages: plain averaging (``Mean``, the
            default) or a piece that sums them
            (:attr:`~pgfl.privacy.mechanisms.base.ClientAggregation.summed`).
        clip: a clipping piece before the noise (``perturb`` and ``bounded(ctx)``).
        name: the new class's name (assign it to a module attribute of that name, so
            that it pickles to other processes).

    Returns:
        A :class:`Chain` subclass named ``name`` (not registered: pass it to
        :func:`pgfl.privacy.mechanisms.register`), with the names ``"c+n+a"`` and the
        stacks ``(c, n, a)`` of every name of its pieces (plain averaging has none), and
        every piece's settings.

    >>> Mine = compose(ClientNoise, SecureAggregationScheme, clip=MessageClip, name="Mine")
    >>> Mine.stacks["clip+laplace+secure_aggregation"], Mine.calibrates
    (('clip', 'laplace', 'secure_aggregation'), 'privacy.client_variance')

    """
    if not hasattr(noise, "perturb") or noise.calibrates is None:
        raise TypeError(f"compose needs a noise piece with perturb(); got {noise.__name__}")
    if aggregator is not Mean and not aggregator.summed:
        raise TypeError(f"compose needs Mean or a summing aggregator; got {aggregator.__name__}")
    lists = [clip.names] if clip is not None else []
    lists += [noise.names] + ([aggregator.names] if aggregator is not Mean else [])
    stacks = {"+".join(p): p for p in itertools.product(*lists)}
    pieces = (clip, noise, aggregator) if clip is not None else (noise, aggregator)
    params = {p.name: p for cls in pieces for p in cls.params}
    summed = aggregator.summed
    attrs = {
        "__module__": __name__,
        "__qualname__": name,
        "__doc__": " then ".join(c.__name__ for c in pieces) + " (:class:`Chain`).",
        "noise_piece": noise,
        "aggregator_piece": aggregator,
        "clip_piece": clip,
        "names": tuple(stacks),
        "stacks": stacks,
        "params": tuple(params.values()),
        # no frontier line (a class's own declaration: not inherited); a stack is a choice
        # of protocol, docs/privacy.md §2.4
        "frontier": {},
        "calibrates": noise.calibrates,
        "bounds_messages": clip is not None,
        "reveals_sample": aggregator.reveals_sample,
        "summed": summed,
        "trusted": {k: v for cls in pieces for k, v in cls.trusted.items()},
        "covers": noise.covers
        if not summed
        else f"one client's noisy message under "
        f"{aggregator.names[0]}, and everything computed from it",
        "notes": {}
        if not summed
        else {
            "upload_eavesdropper": "masked uploads (hidden "
            f"computationally by {aggregator.names[0]}); the epsilon is that of the "
            "noisy messages they hide"
        },  # fmt: skip
    }
    return dataclass(frozen=True, kw_only=True)(type(name, (Chain,), attrs))


#: Continuous client noise (Laplace, Gaussian) under fixed-point secure aggregation:
#: ``privacy.client_noise = ["gaussian", "secure_aggregation"]``.
NoisySecureAggregation = compose(
    ClientNoise, SecureAggregationScheme, name="NoisySecureAggregation"
)
#: DP-FedAvg's local form: each message clipped to S, then its noise: ``["clip", "gaussian"]``.
ClippedNoise = compose(ClientNoise, clip=MessageClip, name="ClippedNoise")
#: Clipped, noisy, securely aggregated: ``["clip", "gaussian", "secure_aggregation"]``.
ClippedNoisySecureAggregation = compose(
    ClientNoise, SecureAggregationScheme, clip=MessageClip, name="ClippedNoisySecureAggregation"
)
