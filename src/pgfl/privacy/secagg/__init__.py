"""Secure aggregation with real cryptography and dropout recovery (Bonawitz et al. 2017).

Pairwise masks that cancel in a unit's sum hide each client's message from its server
("Privatized Graph Federated Learning", Rizk, Vlaski & Sayed, arXiv:2203.07105, §III-C,
eq. 48; the hybrid scheme of "A Graph Federated Architecture with Privacy Preserving
Learning", arXiv:2104.13215, §III-D). The package, bottom up:

* :mod:`~pgfl.privacy.secagg.config` — :class:`SecAggConfig`, the ``privacy.secagg_*``
  settings' ranges and the modulus's capacity arithmetic;
* :mod:`~pgfl.privacy.secagg.shamir` — Shamir t-of-n sharing over GF(2^21 − 9);
* :mod:`~pgfl.privacy.secagg.graph` — the SecAgg+ neighbour graph and when to abort;
* :mod:`~pgfl.privacy.secagg.fixed_point` — codes mod 2^k and :func:`quantized_mean`,
  the vectorized exact equivalent of the protocol's output;
* :mod:`~pgfl.privacy.secagg.crypto` — X25519, HKDF-SHA256, AES-CTR masks,
  ChaCha20-Poly1305 share channel, the per-pair work;
* :mod:`~pgfl.privacy.secagg.pool` — worker processes for the per-pair work;
* :mod:`~pgfl.privacy.secagg.protocol` — the full round (:func:`run_secagg_round`),
  :class:`SecureAggregation`, :func:`secure_mean`.
"""

from pgfl.privacy.secagg.config import (
    PARAMS,
    SecAggAbort,
    SecAggConfig,
    SecAggProtocolError,
    max_code,
    modulus_bits_needed,
    neighbourhood_size,
)
from pgfl.privacy.secagg.crypto import hkdf_sha256
from pgfl.privacy.secagg.fixed_point import completes, decode_mean, encode, quantized_mean
from pgfl.privacy.secagg.graph import neighbour_graph, sparse_abort_reason, suggested_neighbours
from pgfl.privacy.secagg.pool import default_workers
from pgfl.privacy.secagg.protocol import (
    DROP_AFTER_ADVERTISE,
    DROP_AFTER_MASKED_INPUT,
    DROP_AFTER_SHARE,
    NEVER_DROP,
    SecAggRoundResult,
    SecureAggregation,
    run_secagg_round,
    secure_mean,
)

__all__ = [
    "DROP_AFTER_ADVERTISE",
    "DROP_AFTER_MASKED_INPUT",
    "DROP_AFTER_SHARE",
    "NEVER_DROP",
    "PARAMS",
    "SecAggAbort",
    "SecAggConfig",
    "SecAggProtocolError",
    "SecAggRoundResult",
    "SecureAggregation",
    "completes",
    "decode_mean",
    "default_workers",
    "encode",
    "hkdf_sha256",
    "max_code",
    "modulus_bits_needed",
    "neighbour_graph",
    "neighbourhood_size",
    "quantized_mean",
    "run_secagg_round",
    "secure_mean",
    "sparse_abort_reason",
    "suggested_neighbours",
]
