"""ε per adversary: what each observer of a curve sees, from both levels' mechanisms.

Every mechanism says what each of the :data:`~pgfl.privacy.mechanisms.base.ADVERSARIES`
observes (:meth:`~pgfl.privacy.mechanisms.base.Mechanism.views`: a transcript, or
``None`` where it does not protect). A curve runs a client-level and a server-level
mechanism; each protecting view bounds the adversary's privacy loss on its own (the other
level's noise is independent of it), so a curve's ε against an adversary is the smallest
over the levels that protect against it, and ``None`` — not protected — where neither does.
The ε is read with the ``pld`` accountant, which takes the smaller of its privacy-loss
distribution and the Rényi bound (where amplification by client sampling is credited).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pgfl.privacy.accounting import epsilon_curve
from pgfl.privacy.accounting.releases import Transcript
from pgfl.privacy.mechanisms.base import ADVERSARIES, Mechanism, ReleaseContext

__all__ = ["adversary_views", "epsilon_by_adversary", "transcript_epsilon"]


def adversary_views(
    client: Mechanism, server: Mechanism, ctx: ReleaseContext
) -> dict[str, list[Transcript]]:
    """Per adversary, the transcripts of the levels that protect against it (maybe none)."""
    levels = (client.views(ctx), server.views(ctx))
    return {a: [v[a] for v in levels if v[a] is not None] for a in ADVERSARIES}


def transcript_epsilon(
    t: Transcript,
    delta: float,
    accountant: str = "pld",
    known: dict[Transcript, float] | None = None,
) -> float:
    """ε(T) of one transcript (``inf`` when it has no noise or no gradient bound).

    With amplification by sampling, the smaller of the amplified and the plain reading
    (both are bounds; near q = 1 the amplified pure-DP reading of Laplace noise is the
    looser one). ``known``: ε(T) of transcripts already accounted (read and filled).
    """
    if t.reason is not None:
        return math.inf
    known = {} if known is None else known

    def final(x: Transcript) -> float:
        if x not in known:
            curve = epsilon_curve(x, delta=delta, accountants=(accountant,), checkpoints=2)
            known[x] = float(curve.final()[accountant])
        return known[x]

    plain = final(dataclasses.replace(t, sampling=None))
    return plain if t.sampling is None else min(plain, final(t))


def epsilon_by_adversary(
    client: Mechanism,
    server: Mechanism,
    ctx: ReleaseContext,
    delta: float,
    known: dict[Transcript, float] | None = None,
) -> dict[str, float | None]:
    """ε(T) at ``delta`` against each adversary; ``None`` where no level protects.

    ``known``: ε(T) by the ``pld`` accountant of transcripts already accounted at this
    ``delta`` (e.g. the curve's own link), reused instead of recomputed.

    >>> from pgfl.privacy.mechanisms import GraphHomomorphic, Mean
    >>> ctx = ReleaseContext(mu=0.1, clip=1.0, iterations=10, dim=2)
    >>> eps = epsilon_by_adversary(Mean(), GraphHomomorphic(std=5.0), ctx, 1e-5)
    >>> eps["unit_client"] is None, eps["own_server"] is None, eps["neighbour_server"] > 0
    (True, True, True)
    """
    out: dict[str, Any] = {}
    known = {} if known is None else dict(known)  # adversaries often see the same transcript
    for a, views in adversary_views(client, server, ctx).items():
        out[a] = min((transcript_epsilon(t, delta, known=known) for t in views), default=None)
    return out
