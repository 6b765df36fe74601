"""Client-level pieces composed: a noise piece on each message, then the piece that aggregates.

A client scheme is a stack of pieces run in order on each sampled client's message, as
optax's ``chain`` runs gradient transformations: a *noise piece* perturbs the message (a
scheme that declares :meth:`perturb`, such as
:class:`~pgfl.privacy.mechanisms.client.ClientNoise`: continuous Laplace or Gaussian noise
of std σ per coordinate) and an *aggregating piece* hands the perturbed messages to the
server (a scheme with :attr:`~pgfl.privacy.mechanisms.base.ClientAggregation.summed`, such
as :class:`~pgfl.privacy.mechanisms.secure_aggregation.SecureAggregationScheme`: the server
learns only the fixed-point sum). :func:`compose` makes the scheme of such a pair; its
names are the pieces' names joined by ``+`` and its stacks the pairs
(``["gaussian", "secure_aggregation"]`` is ``"gaussian+secure_aggregation"``). Stacks a
scheme declares as its own (noise shares inside secure aggregation:
:class:`~pgfl.privacy.mechanisms.distributed.DistributedNoise`) stay that scheme.

**The accountant follows the composition.** Every adversary sees at most a function of
the sampled clients' perturbed messages: secure aggregation's fixed-point encoding rounds
and clips each noisy message on its own before the sum, so what the server decodes is a
post-processing of the n noisy messages, not of their real sum. With client-level
neighbours only the target's message differs, so every view is bounded by the noise
piece's release of one client's message (sensitivity Δ = 2μB for a model, 2B for an
update; std σ): the local-DP ε, on the client sample where the adversary does not know it
(:func:`~pgfl.privacy.mechanisms.base.subsampled`; secure aggregation reveals the sample
to the unit's clients). The sum of n messages does **not** buy the σ√n of central DP
here: that needs noise the sum keeps exact, integer noise shares added to the integer
codes (Kairouz, Liu & Steinke, "The Distributed Discrete Gaussian Mechanism for
Federated Learning with Secure Aggregation", ICML 2021, arXiv:2102.06387, §1 and §4).
What secure aggregation adds is computational: an observer of the uploads sees masked
messages (Bonawitz et al., CCS 2017).

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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pgfl.param import Param
from pgfl.privacy.accounting.releases import Transcript
from pgfl.privacy.mechanisms.base import (
    ADVERSARIES,
    Aggregate,
    ClientAggregation,
    FrontierLine,
    Mechanism,
    NoiseLaw,
    ReleaseContext,
)
from pgfl.privacy.mechanisms.client import ClientNoise
from pgfl.privacy.mechanisms.secure_aggregation import SecureAggregationScheme

__all__ = ["Chain", "NoisySecureAggregation", "compose"]


@dataclass(frozen=True, kw_only=True)
class Chain(ClientAggregation):
    """A noise piece on each client's message, then an aggregating piece (module doc).

    Attributes:
        noise: the noise piece (an instance of the class's ``pieces[0]``).
        aggregator: the aggregating piece (an instance of ``pieces[1]``).

    Its noise level, calibration, noise law and release are the noise piece's; its
    threshold, aggregation error, validation and ``summary.json`` record the
    aggregator's. Use :func:`compose` to make the scheme of a pair of piece classes.

    """

    noise: Mechanism
    aggregator: ClientAggregation
    #: The piece classes, in order: (noise, aggregator). Set by :func:`compose`.
    pieces: ClassVar[tuple[type[Mechanism], type[ClientAggregation]]]
    protects: ClassVar[tuple[str, ...]] = tuple(ADVERSARIES)
    amplified: ClassVar[bool] = True
    #: Not a frontier line by default: its ε is the noise piece's own (module doc), so it
    #: is never ahead of the noise piece alone.
    frontier: ClassVar[Mapping[str, FrontierLine] | None] = {}
    not_deployed: ClassVar[str | None] = (
        "a composed stack runs in the simulator only: the deployed clients add noise or run "
        "secure aggregation, not both"
    )

    @property
    def name(self) -> str:
        """The pieces' names joined by ``+`` (``"gaussian+secure_aggregation"``)."""
        return f"{self.noise.name}+{self.aggregator.name}"

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
    def _piece_settings(cls, s: Mapping[str, Any]) -> tuple[dict, dict]:
        """The settings each piece reads: the curve's, under the piece's own name."""
        noise, aggregator = cls.stacks[s["privacy.client_noise"]]
        return ({**s, "privacy.client_noise": noise},
                {**s, "privacy.client_noise": aggregator})  # fmt: skip

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """Each piece from the curve's settings (dotted names), under its own name."""
        noise, aggregator = cls._piece_settings(s)
        return cls(
            noise=cls.pieces[0].from_settings(noise),
            aggregator=cls.pieces[1].from_settings(aggregator),  # type: ignore[arg-type]
        )

    @classmethod
    def check_settings(cls, s: Mapping[str, Any]) -> str | None:
        """Each piece's own rules, the noise piece's first."""
        for piece, settings in zip(cls.pieces, cls._piece_settings(s), strict=True):
            message = piece.check_settings(settings)
            if message is not None:
                return message
        return None

    def validate(self, net: Any) -> None:
        """Each piece's check on the network."""
        self.noise.validate(net)
        self.aggregator.validate(net)

    def with_std(self, std: float) -> Mechanism:
        """The same stack with the noise piece at std ``std`` (calibration's factory)."""
        return dataclasses.replace(self, noise=self.noise.with_std(std))

    def noiseless(self) -> Mechanism:
        """The aggregating piece alone (the same protocol on the noise-free messages)."""
        return self.aggregator

    def fewest_clients(self, L: int) -> int:
        """The aggregator's fewest clients (secure aggregation: its threshold t)."""
        return self.aggregator.fewest_clients(L)

    def aggregation_error(self, mu: float, share: str) -> float:
        """The aggregator's per-coordinate error bound (fixed-point rounding)."""
        return self.aggregator.aggregation_error(mu, share)

    def record(self, L, dim, aborted, clipped, aborts) -> dict[str, dict[str, Any]]:
        """The aggregator's ``summary.json`` record (secure aggregation's aborts, clips)."""
        return self.aggregator.record(L, dim, aborted, clipped, aborts)

    def transcript(self, ctx: ReleaseContext) -> Transcript | None:
        """The noise piece's release of one client's message, which every view is bounded by.

        Under an aggregating piece every adversary sees a function of the perturbed
        messages alone (module doc), so the noise piece's release bounds it.
        """
        own = self.noise.transcript(ctx)
        if own is None or not own.sensitivities:
            return own
        return dataclasses.replace(
            own,
            scope=f"covers one client's noisy message under {self.aggregator.name}: every "
            "adversary sees at most a function of the noisy messages (the fixed-point sum "
            "rounds and clips each on its own), so one message's noise bounds its view",
        )

    @classmethod
    def aggregate(cls, schemes, start, local, mu, updates, ctx) -> Aggregate:
        """The noise piece perturbs every message; the aggregating piece aggregates them."""
        noisy = cls.pieces[0].perturb(  # type: ignore[attr-defined]
            [s.noise for s in schemes], local, mu, updates, ctx
        )
        return cls.pieces[1].aggregate([s.aggregator for s in schemes], start, noisy, mu,
                                       updates, ctx)  # fmt: skip


def compose(noise: type[Mechanism], aggregator: type[ClientAggregation], name: str) -> type[Chain]:
    """The scheme that runs ``noise`` on each client's message, then ``aggregator``.

    Args:
        noise: a noise piece: a client-level class with a ``perturb`` class method
            (``perturb(schemes, local, mu, updates, ctx)`` returns the local models whose
            messages carry the noise, ``[C', R, P_b, L, M]``) and a noise level.
        aggregator: an aggregating piece (a client-level class that hands the messages to
            the server: :attr:`~pgfl.privacy.mechanisms.base.ClientAggregation.summed`).
        name: the new class's name (assign it to a module attribute of that name, so
            that it pickles to other processes).

    Returns:
        A :class:`Chain` subclass named ``name`` (not registered: pass it to
        :func:`pgfl.privacy.mechanisms.register`), with the names ``"n+a"`` and the stacks
        ``(n, a)`` of every name ``n`` of ``noise`` and ``a`` of ``aggregator``, and both
        pieces' settings.

    >>> Mine = compose(ClientNoise, SecureAggregationScheme, "Mine")
    >>> Mine.stacks["laplace+secure_aggregation"], Mine.calibrates
    (('laplace', 'secure_aggregation'), 'privacy.client_variance')

    """
    if not hasattr(noise, "perturb") or not getattr(aggregator, "summed", False):
        raise TypeError(
            f"compose needs a noise piece with perturb() and a summing aggregator; got "
            f"{noise.__name__}, {aggregator.__name__}"
        )
    stacks = {f"{n}+{a}": (n, a) for n in noise.names for a in aggregator.names}
    params: dict[str, Param] = {p.name: p for p in (*noise.params, *aggregator.params)}
    attrs = {
        "__module__": __name__,
        "__qualname__": name,
        "__doc__": f"{noise.__name__} on each client's message, then "
        f"{aggregator.__name__} (:class:`Chain`).",
        "pieces": (noise, aggregator),
        "names": tuple(stacks),
        "stacks": stacks,
        "params": tuple(params.values()),
        "calibrates": noise.calibrates,
        "reveals_sample": aggregator.reveals_sample,
        "summed": aggregator.summed,
        "trusted": {**noise.trusted, **aggregator.trusted},
        "covers": f"one client's noisy message under {aggregator.names[0]}, and everything "
        "computed from it",
        "notes": {
            "upload_eavesdropper": "masked uploads (hidden computationally by "
            f"{aggregator.names[0]}); the epsilon is that of the noisy messages they "
            "hide"
        },  # fmt: skip
    }
    return dataclass(frozen=True, kw_only=True)(type(name, (Chain,), attrs))


#: Continuous client noise (Laplace, Gaussian) under fixed-point secure aggregation:
#: ``privacy.client_noise = ["gaussian", "secure_aggregation"]``.
NoisySecureAggregation = compose(ClientNoise, SecureAggregationScheme, "NoisySecureAggregation")
