"""Secure aggregation as a client-aggregation scheme of the GFL engine.

Clients share their models (or updates) masked with pairwise masks that cancel in the
unit's sum (Bonawitz et al., "Practical secure aggregation for privacy-preserving machine
learning", CCS 2017; "Privatized Graph Federated Learning", arXiv:2203.07105, §III-C and
eq. 48; the hybrid scheme of "A Graph Federated Architecture with Privacy Preserving
Learning", arXiv:2104.13215, §III-D). The server learns only the fixed-point mean of the
surviving clients' messages (:func:`pgfl.privacy.secagg.quantized_mean`, or the real
protocol, same bits). The engine knows this class only through the
:class:`~pgfl.privacy.mechanisms.base.ClientAggregation` interface. Secure aggregation adds
no differentially private noise: it has no ε of its own, but it changes what a
server-level mechanism's ε rests on (the fewest clients averaged is the threshold ``t``;
the fixed-point rounding adds to every sensitivity).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from pgfl.param import Param
from pgfl.privacy.mechanisms.base import Aggregate, ClientAggregation, Mechanism
from pgfl.privacy.secagg import PARAMS as SECAGG_PARAMS
from pgfl.privacy.secagg import SecAggAbort, SecAggConfig, SecureAggregation, quantized_mean
from pgfl.style import SchemeStyle

_P = {p.name: p for p in SECAGG_PARAMS}


@dataclass(frozen=True)
class SecureAggregationScheme(ClientAggregation):
    """Secure aggregation of the sampled clients' messages, with dropouts and aborts.

    Attributes:
        config: encoding, clipping and threshold settings (:class:`SecAggConfig`).
        protocol: ``"simulated"`` (the exact fixed-point equivalent, vectorized) or
            ``"cryptographic"`` (X25519, HKDF, AES-CTR masks, Shamir recovery, unit by unit;
            same bits, slow).
        dropout: probability that a sampled client drops out after sharing its keys (each
            round, independently; stream ``dropout``).

    Each round a unit with fewer than ``t`` survivors aborts and keeps ``w_{p,i−1}``.
    The sampled clients receive each other's public keys, so a unit's clients learn
    which clients were sampled (``reveals_sample``: no amplification by client sampling
    against ``unit_client``). Messages are clipped to ``±config.clip`` before encoding;
    every clipped message is
    counted. When clients share *models*, a clipped message means the model left the range
    the protocol represents: the aggregate is no longer the mean, so the repetition is
    marked diverged (its ``ψ`` becomes NaN); when they share *updates*, clipping bounds the
    update and the run goes on. A non-finite message also marks its repetition diverged.

    """

    config: SecAggConfig = field(default_factory=SecAggConfig)
    protocol: str = "simulated"
    dropout: float = 0.0
    names: ClassVar[tuple[str, ...]] = ("secure_aggregation",)
    not_deployed: ClassVar[str | None] = None  # pgfl.deploy runs it
    style: ClassVar[SchemeStyle | None] = SchemeStyle(
        "secure_aggregation", "secure aggregation", "#56B4E9", "P", order=2,
        labels=("*secure_aggregation*", "*secagg*"),
    )  # fmt: skip
    params: ClassVar[tuple[Param, ...]] = SECAGG_PARAMS
    reveals_sample: ClassVar[bool] = True
    summed: ClassVar[bool] = True
    exposes: ClassVar[Mapping[str, str]] = {
        "upload_eavesdropper": "masked uploads: secure aggregation hides each client's model "
        "computationally (X25519 key agreement, AES-CTR masks; docs/secagg.md), which is not "
        "a differential-privacy epsilon",
        "own_server": "the server learns the exact sum of its clients' models (no noise)",
    }

    def __post_init__(self) -> None:
        _P["privacy.secagg_protocol"].named("protocol").check(self.protocol)
        _P["privacy.dropout"].named("dropout").check(self.dropout)

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """The protocol of a curve's ``privacy.secagg_*`` and ``privacy.dropout`` settings."""
        return cls(
            SecAggConfig.from_settings(s), s["privacy.secagg_protocol"], s["privacy.dropout"]
        )

    def validate(self, net: Any) -> None:
        """L clients must fit the modulus and the threshold."""
        self.config.check_clients(net.L)

    def record(self, L, dim, aborted, clipped, aborts) -> dict[str, dict[str, Any]]:
        """``summary.json``'s ``secure_aggregation`` record, with its abort log."""
        t = self.config.threshold_for(L)
        log = [
            f"iteration {i}, repetition {r}, unit {p}: secure aggregation aborted "
            f"(fewer than t={t} of L={L} clients survived); the unit kept its previous model"
            for r, i, p in aborts
        ]
        return {"secure_aggregation": {
            "protocol": self.protocol, "threshold": t, "dropout": self.dropout,
            "quantization_bound": self.config.quantization_bound, "aborted_unit_rounds": aborted,
            "clip": self.config.clip, "clipped_messages": clipped, "log": log,
        }}  # fmt: skip

    def fewest_clients(self, L: int) -> int:
        """The threshold t: the protocol completes with any n ≥ t survivors (dropout)."""
        return self.config.threshold_for(L)

    def aggregation_error(self, mu: float, share: str) -> float:
        """The rounding bound 2^-(f+1), times μ on the models a mean of updates gives."""
        scale = mu if share == "updates" else 1.0
        return scale * self.config.quantization_bound

    @classmethod
    def aggregate(cls, schemes, start, local, mu, updates, ctx) -> Aggregate:
        """Fixed-point mean of the survivors' messages, per curve (a loop over ``C'``)."""
        C, R, P, L, _ = local.shape
        units = np.broadcast_to(ctx.start + np.arange(P), (R, P))
        u = ctx.draws.uniform("dropout", (L,)) if any(s.dropout > 0 for s in schemes) else None
        psi = np.empty(start.shape)
        aborted = np.zeros((C, R, P), dtype=bool)
        clipped = np.zeros((C, R), dtype=np.int64)
        for j, s in enumerate(schemes):
            survivors = np.ones((R, P, L), dtype=bool) if u is None else u >= s.dropout
            messages = (start[j][:, :, None] - local[j]) / mu[j] if updates[j] else local[j]
            finite = np.isfinite(messages).all(axis=-1)
            over = (np.abs(np.where(finite[..., None], messages, 0.0)) > s.config.clip).any(-1)
            clipped[j] = (over & survivors).sum(axis=(1, 2))
            broken = ~(finite | ~survivors).all(axis=(1, 2))  # [R]
            if not updates[j]:
                broken |= (over & survivors).any(axis=(1, 2))
            messages = np.where(finite[..., None], messages, 0.0)
            mean = s._mean(messages, survivors, units, ctx.iteration)
            unit_psi = start[j] - mu[j] * mean if updates[j] else mean
            aborted[j] = np.isnan(mean).any(axis=-1)
            psi[j] = np.where(aborted[j][..., None], start[j], unit_psi)
            psi[j][broken] = np.nan
        return Aggregate(psi, aborted, clipped)

    def _mean(
        self, messages: np.ndarray, survivors: np.ndarray, units: np.ndarray, iteration: int
    ) -> np.ndarray:
        """``[R, P, M]`` mean of the survivors' messages; NaN where the unit aborted."""
        if self.protocol == "simulated":
            return quantized_mean(messages, survivors, self.config, unit=units, round=iteration)
        protocol = SecureAggregation(self.config, num_clients=messages.shape[2])
        mean = np.empty(messages.shape[:2] + messages.shape[3:])
        for r, p in np.ndindex(*messages.shape[:2]):  # the real protocol runs unit by unit
            try:
                mean[r, p] = protocol.aggregate(
                    messages[r, p], unit=int(units[r, p]), round=iteration, dropped=~survivors[r, p]
                )
            except SecAggAbort:
                mean[r, p] = np.nan
        return mean
