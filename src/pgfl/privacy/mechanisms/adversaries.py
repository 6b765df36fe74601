"""ε per adversary: what each observer of a curve sees, from both levels' mechanisms.

Every mechanism says what each of the :data:`~pgfl.privacy.mechanisms.base.ADVERSARIES`
observes (:meth:`~pgfl.privacy.mechanisms.base.Mechanism.views`: a transcript, or
``None`` where it does not protect), and builds that observer's view from the arrays the
engine emits (:meth:`~pgfl.privacy.mechanisms.base.Mechanism.observe`: what the audit
attacks). A curve runs a client-level and a server-level mechanism; each protecting view
bounds the adversary's privacy loss on its own (the other level's noise is independent of
it), so a curve's ε against an adversary is the smallest over the levels that protect
against it, and ``None`` — not protected — where neither does. An adversary that does not
exist in the network (servers and links with one unit) is left out. The ε is read with
the ``pld`` accountant, which takes the smaller of its privacy-loss distribution and the
Rényi bound (where amplification by client sampling is credited, the Rényi bound); each
value says which of them it is (:class:`AdversaryEpsilon`).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from pgfl.privacy.accounting import epsilon_curve
from pgfl.privacy.accounting.releases import Transcript
from pgfl.privacy.mechanisms.base import (
    ADVERSARIES,
    LIKE,
    UPLOADS,
    Emitted,
    Mechanism,
    ReleaseContext,
    present,
    protected,
)

__all__ = [
    "AdversaryEpsilon",
    "accounted",
    "adversary_epsilons",
    "adversary_view",
    "adversary_views",
    "epsilon_by_adversary",
    "transcript_epsilon",
    "trusted_parties",
]


class AdversaryEpsilon(NamedTuple):
    """ε(T) against one adversary, the accountant that gave it, and what else to know.

    Attributes:
        epsilon: ε at the run's δ (``None``: not protected; ``inf``: no gradient bound).
        accountant: the bound the value is (``"pld"``, ``"rdp"``, ``"basic"``), ``None``
            if not protected.
        note: why it is not protected, or what the observer sees that is not a DP
            number (secure aggregation's masked uploads); ``""`` if nothing.

    """

    epsilon: float | None
    accountant: str | None = None
    note: str = ""


def adversary_views(
    client: Mechanism, server: Mechanism, ctx: ReleaseContext
) -> dict[str, list[Transcript]]:
    """Per adversary, the transcripts of the levels that protect against it (maybe none).

    An adversary added with :func:`~pgfl.privacy.mechanisms.base.add_adversary` sees, of
    each level that protects against it, what the adversary it is like sees.
    """
    out: dict[str, list[Transcript]] = {}
    for m, views in ((client, client.views(ctx)), (server, server.views(ctx))):
        for a in ADVERSARIES:
            if a in LIKE:
                seen = views.get(LIKE[a]) if a in protected(m) else None
            else:
                seen = views[a]
            out.setdefault(a, [])
            if seen is not None:
                out[a].append(seen)
    return out


def transcript_epsilon(
    t: Transcript,
    delta: float,
    accountant: str = "pld",
    known: dict[Transcript, tuple[float, str]] | None = None,
) -> float:
    """ε(T) of one transcript (``inf`` when it has no noise or no gradient bound).

    With amplification by sampling, the smaller of the amplified and the plain reading
    (both are bounds; near q = 1 the amplified pure-DP reading of Laplace noise is the
    looser one). ``known``: what was already accounted (read and filled).
    """
    return accounted(t, delta, accountant, known)[0]


def accounted(
    t: Transcript,
    delta: float,
    accountant: str = "pld",
    known: dict[Transcript, tuple[float, str]] | None = None,
) -> tuple[float, str]:
    """:func:`transcript_epsilon` and the bound it is: ``(ε, source)``.

    ``source`` is the accountant whose bound ε is (``pld`` reports the smaller of its PLD
    and the Rényi bound: ``"rdp"`` names the latter, so that a Rényi bound is never
    called a PLD).
    """
    if t.reason is not None:
        return math.inf, accountant
    known = {} if known is None else known

    def final(x: Transcript) -> tuple[float, str]:
        if x not in known:
            curve = epsilon_curve(x, delta=delta, accountants=(accountant,), checkpoints=2)
            known[x] = (float(curve.final()[accountant]), curve.source(accountant))
        return known[x]

    plain = final(t.uncredited())
    if not t.credited:
        return plain
    credited = final(t)
    return credited if credited[0] < plain[0] else plain


def _note(adversary: str, client: Mechanism, server: Mechanism) -> str:
    """Why neither level protects ``adversary``: the level that would, first."""
    first, second = (client, server) if adversary in UPLOADS else (server, client)
    for m in (first, second):
        if adversary in m.exposes:
            return m.exposes[adversary]
    return ""


def adversary_epsilons(
    client: Mechanism,
    server: Mechanism,
    ctx: ReleaseContext,
    delta: float,
    known: dict[Transcript, tuple[float, str]] | None = None,
) -> dict[str, AdversaryEpsilon]:
    """ε(T) at ``delta`` against each adversary present in the network, with its accountant.

    ``known``: ``(ε, source)`` by the ``pld`` accountant of transcripts already accounted
    at this ``delta`` (e.g. the curve's own link), reused instead of recomputed.
    """
    out: dict[str, AdversaryEpsilon] = {}
    known = {} if known is None else dict(known)  # adversaries often see the same transcript
    for a, views in adversary_views(client, server, ctx).items():
        if not present(a, ctx.units, ctx.adjacency):
            continue
        if not views:
            out[a] = AdversaryEpsilon(None, None, _note(a, client, server))
            continue
        value, source = min(accounted(t, delta, known=known) for t in views)
        note = client.notes.get(a) or server.notes.get(a) or ""
        out[a] = AdversaryEpsilon(value, source, note)
    return out


def epsilon_by_adversary(
    client: Mechanism,
    server: Mechanism,
    ctx: ReleaseContext,
    delta: float,
    known: dict[Transcript, tuple[float, str]] | None = None,
) -> dict[str, float | None]:
    """ε(T) at ``delta`` against each adversary present; ``None`` where no level protects.

    The values of :func:`adversary_epsilons`.

    >>> from pgfl.privacy.mechanisms import GraphHomomorphic, Mean
    >>> ctx = ReleaseContext(mu=0.1, clip=1.0, iterations=10, dim=2, units=4)
    >>> eps = epsilon_by_adversary(Mean(), GraphHomomorphic(std=5.0), ctx, 1e-5)
    >>> eps["unit_client"] is None, eps["own_server"] is None, eps["neighbour_server"] > 0
    (True, True, True)
    >>> one = ReleaseContext(mu=0.1, clip=1.0, iterations=10, dim=2)   # P = 1: no servers
    >>> sorted(epsilon_by_adversary(Mean(), GraphHomomorphic(std=5.0), one, 1e-5))
    ['own_server', 'unit_client', 'upload_eavesdropper']
    """
    return {a: e.epsilon for a, e in adversary_epsilons(client, server, ctx, delta, known).items()}


def trusted_parties(client: Mechanism, server: Mechanism) -> dict[str, str]:
    """The parties a curve's ε trusts (a trusted aggregator, a dealer), with what they could do.

    >>> from pgfl.privacy.mechanisms import CentralNoise, Mean
    >>> list(trusted_parties(Mean(), CentralNoise(std=1.0)))
    ['aggregator']
    """
    return {**client.trusted, **server.trusted}


def adversary_view(
    client: Mechanism, server: Mechanism, adversary: str, seen: Emitted
) -> list[tuple[np.ndarray, bool]]:
    """``adversary``'s view of one round, built from the arrays the engine emitted.

    The uploads are the client level's (:data:`~pgfl.privacy.mechanisms.base.UPLOADS`);
    everything between servers, and the models a unit's clients receive, the server
    level's protocol (a trusted aggregator's uplinks and broadcast, the gossip steps):
    :meth:`~pgfl.privacy.mechanisms.base.Mechanism.observe`. A unit's client also learns
    the sample where the client level reveals it (secure aggregation's keys).
    """
    adversary = LIKE.get(adversary, adversary)  # an added adversary: what it is like sees
    owner: Any = client if adversary in UPLOADS else server
    view = owner.observe(adversary, seen)
    if adversary == "unit_client" and getattr(client, "reveals_sample", False):
        view = [*view, (seen.sample(), True)]
    return view
