"""The clipping piece: each client's message bounded in ℓ2 norm before its noise.

DP-FedAvg's clipping (McMahan, Ramage, Talwar & Zhang, "Learning Differentially Private
Recurrent Language Models", ICLR 2018, arXiv:1710.06963, Alg. 1: each client's update is
projected onto the ball of radius S before the server adds noise): what a client shares is
its model change ``Δ_pk = w_pk − w_{p,i−1}`` (``training.share = "models"``) or its update
``u_pk = (w_{p,i−1} − w_pk)/μ`` (``"updates"``); the piece scales it by ``min(1, S/‖·‖₂)``.
A piece of a stack (:mod:`~pgfl.privacy.mechanisms.chain`): ``["clip", "gaussian"]``,
``["clip", "gaussian", "secure_aggregation"]``.

The bound it gives the accountant: replacing one client's data moves its message by at
most ``2S``, and by at most what the per-sample gradient bound B gives (``2μB/r`` for a
model, ``2B/r`` for an update, r the records a step averages), since a projection onto a
convex set never moves two points apart (:meth:`MessageClip.bounded`). So a stack with the
clipping piece has a finite ε even without ``training.clip_norm``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pgfl.param import Param, When
from pgfl.privacy.mechanisms.base import (
    Aggregate,
    ClientAggregation,
    Mechanism,
    ReleaseContext,
    declared,
)

__all__ = ["MESSAGE_CLIP", "MessageClip"]


def _clips(c: Mapping[str, Any]) -> bool:
    """Whether the curve's client scheme stacks the clipping piece."""
    cls = declared("client", c)
    return cls is not None and "clip" in getattr(cls, "stacks", {}).get(
        c["privacy.client_noise"], ()
    )


#: ``privacy.message_clip``: S, the ℓ2 bound of a client's message.
MESSAGE_CLIP = Param(
    "privacy.message_clip", "real", None, "S: each client's message is clipped to ℓ2 norm S "
    "before its noise (its model change w_pk − w_{p,i−1}, or its update with `training.share "
    "= \"updates\"`; DP-FedAvg's clipping).", lo=0, lo_open=True, batched=True,
    required=True, applies=When('privacy.client_noise a stack that begins with "clip"', _clips),
)  # fmt: skip


@dataclass(frozen=True)
class MessageClip(ClientAggregation):
    """Each client's message clipped to ℓ2 norm ``bound`` (module doc).

    Attributes:
        bound: S > 0.

    >>> import numpy as np
    >>> start = np.zeros((1, 1, 1, 2))                  # [C', R, P_b, M]
    >>> local = np.array([[[[[3.0, 4.0], [0.3, 0.4]]]]])  # [C', R, P_b, L, M]: ‖Δ‖ = 5, 0.5
    >>> MessageClip(1.0).clip([MessageClip(1.0)], start, local, np.array([0.1]),
    ...                       np.array([False]))[0, 0, 0].round(12).tolist()
    [[0.6, 0.8], [0.3, 0.4]]

    """

    bound: float
    names: ClassVar[tuple[str, ...]] = ("clip",)
    params: ClassVar[tuple[Param, ...]] = (MESSAGE_CLIP,)

    def __post_init__(self) -> None:
        MESSAGE_CLIP.named("bound").check(self.bound)

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """The bound ``privacy.message_clip``."""
        return cls(s["privacy.message_clip"])

    @classmethod
    def clip(cls, schemes, start, local, mu, updates) -> np.ndarray:
        """The local models whose messages are clipped, ``[C', R, P_b, L, M]``.

        The model change ``Δ = w_pk − w_{p,i−1}`` is scaled by ``min(1, S/‖Δ‖)`` (a model)
        or ``min(1, μS/‖Δ‖)`` (an update ``−Δ/μ`` of norm at most S).
        """
        bound = np.array([s.bound for s in schemes]) * np.where(updates, mu, 1.0)
        change = local - start[:, :, :, None, :]
        norm = np.linalg.norm(change, axis=-1, keepdims=True)
        factor = np.minimum(1.0, bound[:, None, None, None, None] / np.maximum(norm, 1e-300))
        return start[:, :, :, None, :] + change * factor

    @classmethod
    def perturb(cls, schemes, start, local, mu, updates, ctx) -> np.ndarray:
        """A piece of a stack: :meth:`clip` (no draws)."""
        return cls.clip(schemes, start, local, mu, updates)

    @classmethod
    def aggregate(cls, schemes, start, local, mu, updates, ctx) -> Aggregate:
        """The mean of the clipped messages (the piece alone: no noise, no ε)."""
        return Aggregate(cls.clip(schemes, start, local, mu, updates).mean(axis=3))

    def bounded(self, ctx: ReleaseContext) -> ReleaseContext:
        """The context whose gradient bound gives the clipped message's sensitivity.

        A client's message moves by at most ``min(2μB/r, 2S)`` (a model; an update:
        ``min(2B/r, 2S)``), which is ``2μB'/r`` (``2B'/r``) for the bound
        ``B' = min(B, rS/μ)`` (``min(B, rS)``): the noise piece reads ``B'`` as its
        gradient bound. ``B`` unset: ``B'`` from S alone.

        >>> ctx = ReleaseContext(mu=0.1, clip=None, iterations=1)
        >>> MessageClip(0.05).bounded(ctx).clip      # 2μB' = 2S = 0.1
        0.5
        """
        per = self.bound * ctx.records / (ctx.mu if ctx.share == "models" else 1.0)
        clip = per if ctx.clip is None else min(ctx.clip, per)
        return dataclasses.replace(ctx, clip=clip)
