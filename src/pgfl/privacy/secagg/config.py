"""Settings of secure aggregation, their ranges and the capacity arithmetic of the modulus.

The fixed-point codes of L clients are summed modulo 2^k; the sum decodes exactly when
``L · rint(clip · 2^f) < 2^(k−1)`` (the capacity bound; Bonawitz et al., "Practical
secure aggregation for privacy-preserving machine learning", CCS 2017, as used in
"Privatized Graph Federated Learning", Rizk, Vlaski & Sayed, arXiv:2203.07105, eq. 48).
The settings' ranges are declared once here, as :class:`~pgfl.param.Param` (the
``privacy.secagg_*`` settings of a configuration file, :data:`PARAMS`), and
:class:`SecAggConfig` checks its fields with them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pgfl.param import Param, Ref, When, check_changed_first, ref
from pgfl.privacy.secagg import shamir
from pgfl.validation import check_int

__all__ = [
    "PARAMS",
    "SecAggAbort",
    "SecAggConfig",
    "SecAggProtocolError",
    "clip_limit",
    "frac_bits_limit",
    "max_code",
    "modulus_bits_needed",
    "neighbourhood_size",
]


def neighbourhood_size(L: int, neighbours: int | None) -> int:
    """Size h = |N[u]| of a closed neighbourhood in secure aggregation among L clients.

    L for the complete graph (original SecAgg; ``neighbours`` unset or ≥ L − 1), else
    ``neighbours + 1`` (the SecAgg+ graph of Bell et al., CCS 2020).

    >>> neighbourhood_size(20, 4), neighbourhood_size(5, 4), neighbourhood_size(5, None)
    (5, 5, 5)
    """
    return neighbours + 1 if neighbours is not None and neighbours < L - 1 else L


def max_code(clip: float, frac_bits: int) -> int:
    """Largest fixed-point code ``rint(clip · 2^f)`` (round half to even, as numpy's rint).

    >>> max_code(4.0, 8), max_code(0.25, 1)   # rint(0.5) = 0: no code is representable
    (1024, 0)
    """
    x = clip * 2.0**frac_bits
    return round(x) if x < 2.0**1000 else 2**1000  # beyond any modulus (and finite)


def modulus_bits_needed(c: Mapping[str, Any]) -> int:
    """Smallest k with ``L · rint(clip · 2^f) < 2^(k−1)`` (the sum of L codes cannot wrap).

    >>> modulus_bits_needed({"training.L": 10, "privacy.secagg_clip": 4.0,
    ...                      "privacy.secagg_frac_bits": 8})        # 10 · 1024 < 2^14
    15
    """
    code = max_code(c["privacy.secagg_clip"], c["privacy.secagg_frac_bits"])
    return (c["training.L"] * code).bit_length() + 1


def _fits(c: Mapping[str, Any], clip: float, frac_bits: int) -> bool:
    """Whether L codes ``rint(clip · 2^f)`` sum below ``2^(k−1)`` (the capacity bound)."""
    limit = 2 ** (c["privacy.secagg_modulus_bits"] - 1)
    return c["training.L"] * max_code(clip, frac_bits) < limit


def frac_bits_limit(c: Mapping[str, Any]) -> int:
    """Largest f in [0, 62] with ``L · rint(clip · 2^f) < 2^(k−1)`` (−1 if none fits).

    The capacity bound read as a bound on ``privacy.secagg_frac_bits``: a user who sets
    only f too large for the (default) modulus is told about f.

    >>> frac_bits_limit({"training.L": 10, "privacy.secagg_clip": 4.0,
    ...                  "privacy.secagg_modulus_bits": 16})   # 10 · rint(4 · 2^9) < 2^15
    9
    """
    clip = c["privacy.secagg_clip"]
    return max((f for f in range(63) if _fits(c, clip, f)), default=-1)


def clip_limit(c: Mapping[str, Any]) -> float:
    """Smallest clip whose L codes ``rint(clip · 2^f)`` reach ``2^(k−1)`` (an open bound).

    The capacity bound read as a bound on ``privacy.secagg_clip``; exact in floating
    point (clip · 2^f is an exact scaling, and the code grows with the clip).

    >>> clip_limit({"training.L": 7, "privacy.secagg_frac_bits": 8,
    ...             "privacy.secagg_modulus_bits": 16})   # codes ≤ 4681; rint(4681.5) = 4682
    18.287109375
    """
    f = c["privacy.secagg_frac_bits"]
    codes = (2 ** (c["privacy.secagg_modulus_bits"] - 1) - 1) // c["training.L"]
    t = (codes + 0.5) * 2.0**-f
    while _fits(c, t, f):
        t = math.nextafter(t, math.inf)
    while t > 0 and not _fits(c, math.nextafter(t, 0.0), f):
        t = math.nextafter(t, 0.0)
    return t


_CAPACITY_NEEDS = ("training.L", "privacy.secagg_modulus_bits")
#: The capacity bound on the fractional bits (the modulus's bound, read the other way).
FRAC_BITS_CAPACITY = Ref(
    "max f with training.L·rint(privacy.secagg_clip·2^f) < 2^(privacy.secagg_modulus_bits-1)",
    (*_CAPACITY_NEEDS, "privacy.secagg_clip"),
    frac_bits_limit,
)
#: The capacity bound on the clip (the modulus's bound, read the other way).
CLIP_CAPACITY = Ref(
    "clip where training.L·rint(clip·2^privacy.secagg_frac_bits) reaches "
    "2^(privacy.secagg_modulus_bits-1)",
    (*_CAPACITY_NEEDS, "privacy.secagg_frac_bits"),
    clip_limit,
)


def _declared(c: Mapping[str, Any]) -> Any:
    """The class of the curve's client-level scheme (``None``: unknown name)."""
    from pgfl.privacy.mechanisms.base import declared  # lazy: the mechanisms import this module

    return declared("client", c)


def runs_secure_aggregation(c: Mapping[str, Any]) -> bool:
    """Whether a curve's client-level scheme runs secure aggregation: it declares ``summed``.

    >>> runs_secure_aggregation({"privacy.client_noise": "skellam"})
    True
    >>> runs_secure_aggregation({"privacy.client_noise": "gaussian"})
    False
    """
    cls = _declared(c)
    return cls is not None and cls.summed


def encodes_fixed_point(c: Mapping[str, Any]) -> bool:
    """Whether a curve's client-level scheme encodes in fixed point: it owns these settings.

    (Distributed DP's schemes encode their own messages, with their own settings.)

    >>> encodes_fixed_point({"privacy.client_noise": "secure_aggregation"})
    True
    >>> encodes_fixed_point({"privacy.client_noise": "skellam"})
    False
    """
    from pgfl.privacy.mechanisms.base import owns  # lazy: the mechanisms import this module

    return owns("client", c, "privacy.secagg_frac_bits")


#: Where the protocol's settings (threshold, graph, protocol, dropout) have an effect.
SECURE_AGGREGATION = When(
    "privacy.client_noise a scheme that runs secure aggregation (`secure_aggregation`, "
    "distributed DP's)",
    runs_secure_aggregation,
)
#: Where the fixed-point encoding's settings (modulus, fractional bits, clip) have an effect.
FIXED_POINT = When(
    "privacy.client_noise a scheme that encodes in fixed point (`secure_aggregation`)",
    encodes_fixed_point,
)

#: The ``privacy.secagg_*``, ``privacy.dropout`` and ``privacy.secagg_protocol`` settings.
PARAMS = (
    Param("privacy.dropout", "real", 0.0, "Probability that a sampled client drops out of a "
          "round of secure aggregation.", lo=0, hi=1, hi_open=True, batched=True,
          applies=SECURE_AGGREGATION),
    Param("privacy.secagg_protocol", "choice", "simulated", "`simulated` (exact fixed-point "
          "equivalent) or `cryptographic` (the real protocol; same bits, slow).",
          choices=("simulated", "cryptographic"), batched=True, applies=SECURE_AGGREGATION),
    Param("privacy.secagg_modulus_bits", "int", 64, "k: arithmetic modulo 2^k; must hold "
          "L·rint(clip·2^f) < 2^(k−1).", lo=8, hi=64, batched=True, applies=FIXED_POINT,
          lo_ref=Ref("1+bit_length(training.L·rint(privacy.secagg_clip·2^privacy.secagg_frac_bits))",
                     ("training.L", "privacy.secagg_clip", "privacy.secagg_frac_bits"),
                     modulus_bits_needed),
          allowed_doc="[max(8, 1+bit_length(L·rint(clip·2^f))), 64]"),
    Param("privacy.secagg_frac_bits", "int", 24, "f: fixed-point fractional bits "
          "(quantization step 2^−f).", lo=0, hi=62, batched=True, applies=FIXED_POINT,
          hi_ref=(ref("privacy.secagg_modulus_bits", -2), FRAC_BITS_CAPACITY),
          allowed_doc="[0, k−2], with L·rint(clip·2^f) < 2^(k−1)"),
    Param("privacy.secagg_clip", "real", 1024.0, "Values are clipped to [−clip, clip] before "
          "encoding (clip·2^f must round to ≥ 1).", lo=0, lo_open=True, hi_open=True,
          batched=True, applies=FIXED_POINT,
          lo_ref=Ref("2^-(privacy.secagg_frac_bits+1)", ("privacy.secagg_frac_bits",),
                     lambda c: 2.0 ** -(c["privacy.secagg_frac_bits"] + 1)),
          hi_ref=CLIP_CAPACITY, allowed_doc="(2^-(f+1), inf), with L·rint(clip·2^f) < 2^(k−1)"),
    Param("privacy.secagg_threshold", "int", None, "t: shares needed to rebuild a secret, "
          "within a neighbourhood of L clients, or secagg_neighbours+1 (unset: a majority).",
          lo=1, batched=True, applies=SECURE_AGGREGATION,
          hi_ref=Ref("neighbourhood size", ("training.L",),
                     lambda c: neighbourhood_size(c["training.L"],
                                                  c.get("privacy.secagg_neighbours")))),
    Param("privacy.secagg_neighbours", "int", None, "Degree of the SecAgg+ neighbour graph "
          "(unset, or ≥ L−1: complete graph).", lo=2, even=True, batched=True,
          applies=SECURE_AGGREGATION),
)  # fmt: skip
_P = {p.name: p for p in PARAMS}


class SecAggAbort(RuntimeError):
    """The round cannot complete without revealing more than the aggregate.

    Raised when fewer than t clients survive (globally, or among the share holders of a
    client whose secret must be reconstructed), or when the surviving clients' neighbour
    graph is disconnected (a sparse graph would then reveal per-component sums). The
    server has learnt nothing beyond masked vectors; the caller should keep the unit's
    previous model for this round. Never a wrong aggregate.

    Attributes:
        unit: federated unit id. round: round number. reason: human-readable cause.
        survivors: number of clients whose masked input arrived (|U3|).

    """

    def __init__(self, reason: str, *, unit: int, round: int, survivors: int):
        super().__init__(f"secure aggregation aborted (unit {unit}, round {round}): {reason}")
        self.reason = reason
        self.unit = unit
        self.round = round
        self.survivors = survivors


class SecAggProtocolError(RuntimeError):
    """A rule of the protocol was violated (never raised in a correct run).

    Examples: a client is asked for both its share of ``b_u`` and of ``s_u^SK``; a
    reconstructed secret key does not match the advertised public key; a ciphertext fails
    authentication.
    """


@dataclass(frozen=True, kw_only=True)
class SecAggConfig:
    """Settings of secure aggregation (immutable).

    Attributes:
        modulus_bits: k, arithmetic is modulo 2^k, in [8, 64]; k ≤ 32 uses ``uint32``
            masks (half the keystream), otherwise ``uint64``.
        frac_bits: f, fixed-point fractional bits, in [0, k − 2]; the quantization step
            is 2^−f and the decoded mean is within 2^−(f+1) of the true mean.
        clip: values are clipped to ``[−clip, clip]`` before encoding (document your
            range: a clipped value changes the aggregate).
        threshold: t, shares needed to reconstruct a secret, among the closed
            neighbourhood (L clients for the complete graph, k + 1 for a sparse one).
            ``None`` = a majority, ``⌊h/2⌋ + 1`` for neighbourhood size h.
        neighbours: k, even, the degree of the SecAgg+ neighbour graph; ``None`` (or
            k ≥ L − 1) = complete graph (original SecAgg).
        graph_seed: public seed of the neighbour graph's random permutation.

    >>> SecAggConfig(frac_bits=8, clip=4.0).max_clients   # (2^63 − 1) // 1024
    9007199254740991

    """

    modulus_bits: int = _P["privacy.secagg_modulus_bits"].default
    frac_bits: int = _P["privacy.secagg_frac_bits"].default
    clip: float = _P["privacy.secagg_clip"].default
    threshold: int | None = None
    neighbours: int | None = None
    graph_seed: int = 0

    def __post_init__(self) -> None:
        # the capacity bound is checked for one client here and for L in check_clients;
        # a setting given alone is named when it conflicts with the others' defaults
        given = {
            "privacy.secagg_modulus_bits": self.modulus_bits,
            "privacy.secagg_frac_bits": self.frac_bits,
            "privacy.secagg_clip": self.clip,
        }
        check_changed_first([_P[n] for n in given], given, {"training.L": 1})
        k = _P["privacy.secagg_modulus_bits"].check(self.modulus_bits)
        ctx: dict[str, Any] = {"privacy.secagg_modulus_bits": k}
        ctx["privacy.secagg_frac_bits"] = _P["privacy.secagg_frac_bits"].check(self.frac_bits, ctx)
        ctx["privacy.secagg_clip"] = _P["privacy.secagg_clip"].check(self.clip, ctx)
        _P["privacy.secagg_modulus_bits"].check(k, {**ctx, "training.L": 1})
        _P["privacy.secagg_threshold"].check(self.threshold)
        _P["privacy.secagg_neighbours"].check(self.neighbours)
        check_int("graph_seed", self.graph_seed, lo=0)

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> SecAggConfig:
        """The configuration of a curve's ``privacy.secagg_*`` settings (dotted names)."""
        return cls(
            modulus_bits=s["privacy.secagg_modulus_bits"],
            frac_bits=s["privacy.secagg_frac_bits"],
            clip=s["privacy.secagg_clip"],
            threshold=s["privacy.secagg_threshold"],
            neighbours=s["privacy.secagg_neighbours"],
        )

    @property
    def dtype(self) -> type[np.unsignedinteger]:
        """Unsigned integer type of codes and masks: ``uint32`` for k ≤ 32, else ``uint64``."""
        return np.uint32 if self.modulus_bits <= 32 else np.uint64

    @property
    def max_code(self) -> int:
        """Largest code magnitude ``rint(clip · 2^f)``."""
        return max_code(self.clip, self.frac_bits)

    @property
    def max_clients(self) -> int:
        """Largest L with ``L · max_code ≤ 2^(k−1) − 1`` (no overflow of the signed sum)."""
        return (2 ** (self.modulus_bits - 1) - 1) // self.max_code

    @property
    def quantization_bound(self) -> float:
        """Per-coordinate bound 2^−(f+1) on |decoded mean − mean of clipped inputs|."""
        return 2.0 ** -(self.frac_bits + 1)

    def is_sparse(self, num_clients: int) -> bool:
        """Whether L clients use a sparse (SecAgg+) graph rather than the complete one."""
        return self.neighbourhood_size(num_clients) < num_clients

    def neighbourhood_size(self, num_clients: int) -> int:
        """H = |N[u]|: L for the complete graph, k + 1 for a sparse one."""
        return neighbourhood_size(num_clients, self.neighbours)

    def threshold_for(self, num_clients: int) -> int:
        """Resolve and validate t for L clients (``1 ≤ t ≤ h``)."""
        h = self.neighbourhood_size(num_clients)
        if self.threshold is None:
            return h // 2 + 1
        ctx = {"training.L": num_clients, "privacy.secagg_neighbours": self.neighbours}
        return _P["privacy.secagg_threshold"].check(self.threshold, ctx)

    def check_clients(self, num_clients: int) -> int:
        """Validate L against the modulus (``L · max_code < 2^(k−1)``) and the threshold."""
        L = check_int("num_clients", num_clients, lo=1, hi=shamir.FIELD_PRIME - 2)
        ctx = {
            "training.L": L,
            "privacy.secagg_clip": self.clip,
            "privacy.secagg_frac_bits": self.frac_bits,
        }
        _P["privacy.secagg_modulus_bits"].check(self.modulus_bits, ctx)
        self.threshold_for(L)
        return L
