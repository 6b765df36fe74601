"""The protocol's cryptography: key derivation, the mask PRG and the per-pair work.

X25519 key agreement, HKDF-SHA256 (RFC 5869), AES-256-CTR as the mask PRG (zero IV; each
key is used for exactly one stream, read as little-endian ``uint32``/``uint64``) and
ChaCha20-Poly1305 for the share channel, all from the ``cryptography`` package
(Bonawitz et al., "Practical secure aggregation for privacy-preserving machine learning",
CCS 2017, Fig. 4). :class:`PairTask` is the picklable per-pair work of rounds 1-2 that
runs on worker processes (:mod:`~pgfl.privacy.secagg.pool`).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from pgfl.privacy.secagg.config import SecAggProtocolError

__all__ = ["PairTask", "hkdf_sha256", "info", "keystream", "public_keys", "run_pairs",
           "undo_pair_masks"]  # fmt: skip

#: Domain-separation label of every key derivation.
LABEL = b"pgfl-secagg-v1/"
#: Bytes of a secret (a self-mask seed, an X25519 private key).
SECRET_BYTES = 32


def hkdf_sha256(ikm: bytes, info: bytes, length: int = 32, salt: bytes = b"") -> bytes:
    """HKDF-SHA256 (RFC 5869) from the ``cryptography`` package: extract, then expand.

    An empty ``salt`` means the RFC's default, ``HashLen`` zero bytes (§2.2). A test
    checks the three SHA-256 test vectors of RFC 5869, Appendix A.1-A.3.

    >>> hkdf_sha256(bytes([0x0B]) * 22, b"", 42).hex()[:16]   # RFC 5869, Appendix A.3
    '8da4e775a563c18f'
    """
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt or None, info=info).derive(ikm)


def info(kind: bytes, unit: int, round: int, a: int, b: int) -> bytes:
    """The HKDF ``info`` of a derivation: label, kind, unit, round and the two clients."""
    return LABEL + kind + struct.pack("<QQII", unit, round, a, b)


def keystream(key: bytes, nbytes: int) -> bytes:
    """``nbytes`` of AES-256-CTR keystream under ``key`` (zero IV): the mask PRG."""
    enc = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
    return enc.update(bytes(nbytes))


def public_keys(raw: list[bytes]) -> list[bytes]:
    """Raw X25519 public keys of private keys given as 32 secret bytes each."""
    return [X25519PrivateKey.from_private_bytes(r).public_key().public_bytes_raw() for r in raw]


@dataclass(eq=False, kw_only=True)
class PairTask:
    """Picklable per-pair work of rounds 1-2 for a range of pairs (run in a worker process).

    ``edges[i] = (u, v, slot of v in N[u], slot of u in N[v], channel?, mask?)`` with
    u < v: the channel key ``HKDF(DH(c_u^SK, c_v^PK))``, u's share for v and v's share
    for u encrypted and decrypted (ChaCha20-Poly1305; the server relays only the
    ciphertext), then the mask seed ``HKDF(DH(s_u^SK, s_v^PK))`` expanded and added to
    u's / subtracted from v's vector. ``self_seeds`` are the self masks ``PRG(HKDF(b_u))``.
    Key material travels as raw bytes: all parties of a unit are simulated by one program,
    whose worker processes are part of it.
    """

    unit: int
    round: int
    dtype: str
    M: int
    L: int
    c_sk: list[bytes]
    c_pk: list[bytes]
    s_sk: list[bytes]
    s_pk: list[bytes]
    payload: np.ndarray
    owner_of: np.ndarray
    edges: list[list[int]]
    self_seeds: list[tuple[int, bytes]]


class _PairWork:
    """What :func:`run_pairs` accumulates: delivered shares, masks to apply, timings."""

    def __init__(self, task: PairTask) -> None:
        self.task = task
        self.keys: dict[tuple[int, int], X25519PrivateKey | X25519PublicKey] = {}
        payload = task.payload  # [owners, h, 2C] little-endian uint32
        self.row = payload.shape[-1] * 4
        self.blob = memoryview(payload.tobytes())
        self.stride_owner = payload.shape[1] * self.row
        self.nbytes = task.M * np.dtype(task.dtype).itemsize
        self.dest: list[tuple[int, int]] = []
        self.pts: list[bytes] = []
        self.plus: list[int] = []  # mask i is added to client plus[i], subtracted from minus[i]
        self.minus: list[int] = []
        self.streams: list[bytes] = []
        self.times = {"key_agreement": 0.0, "share_transport": 0.0, "mask_expansion": 0.0}

    def key(self, kind: int, u: int) -> X25519PrivateKey | X25519PublicKey:
        """Key object ``kind`` (c_sk, c_pk, s_sk, s_pk) of client u, made once per task."""
        k = self.keys.get((kind, u))
        if k is None:  # making a private key costs about one X25519 agreement
            t = self.task
            raw = (t.c_sk, t.c_pk, t.s_sk, t.s_pk)[kind][u]
            make = X25519PrivateKey.from_private_bytes if kind % 2 == 0 else None
            k = make(raw) if make else X25519PublicKey.from_public_bytes(raw)
            self.keys[(kind, u)] = k
        return k

    def channel(self, a: int, b: int, j_ab: int, j_ba: int) -> None:
        """The share channel of a pair: both shares encrypted, relayed, decrypted."""
        t, perf = self.task, time.perf_counter
        c0 = perf()
        shared = self.key(0, a).exchange(self.key(1, b))
        aead = ChaCha20Poly1305(hkdf_sha256(shared, info(b"channel", t.unit, t.round, a, b)))
        c1 = perf()
        for u, v, j_uv, j_vu in ((a, b, j_ab, j_ba), (b, a, j_ba, j_ab)):
            # one message per direction per round under a per-round key: nonce = (from, to)
            nonce = _PACK(u, v) + b"\x00" * 4
            aad = info(b"share", t.unit, t.round, u, v)
            off = int(t.owner_of[u]) * self.stride_owner + j_uv * self.row
            ct = aead.encrypt(nonce, self.blob[off : off + self.row], aad)
            # --- relayed by the server, which sees only ct; v decrypts with its key ---
            try:
                self.pts.append(aead.decrypt(nonce, ct, aad))
            except InvalidTag as exc:  # pragma: no cover - only on tampering
                raise SecAggProtocolError(f"share from {u} to {v} failed authentication") from exc
            self.dest.append((v, j_vu))
        self.times["key_agreement"] += c1 - c0
        self.times["share_transport"] += perf() - c1

    def mask(self, a: int, b: int) -> None:
        """The pair's mask: ``y_a`` gets +PRG(s_ab), ``y_b`` −PRG(s_ab) (a < b)."""
        t, perf = self.task, time.perf_counter
        c0 = perf()
        shared = self.key(2, a).exchange(self.key(3, b))
        sd = hkdf_sha256(shared, info(b"pairwise", t.unit, t.round, a, b))
        c1 = perf()
        self.streams.append(keystream(sd, self.nbytes))
        self.plus.append(a)
        self.minus.append(b)
        self.times["key_agreement"] += c1 - c0
        self.times["mask_expansion"] += perf() - c1


_PACK = struct.Struct("<II").pack


def run_pairs(task: PairTask) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, float]]:
    """Do ``task``: (mask sum ``[L, M]``, receivers ``[n, 2]`` (v, slot), shares, times)."""
    dtype = np.dtype(task.dtype)
    work = _PairWork(task)
    cpu0 = time.process_time()
    for a, b, j_ab, j_ba, channel, mask in task.edges:
        if channel:
            work.channel(a, b, j_ab, j_ba)
        if mask:
            work.mask(a, b)
    c0 = time.perf_counter()
    for u, seed in task.self_seeds:
        key = hkdf_sha256(seed, info(b"self", task.unit, task.round, u, 0))
        work.streams.append(keystream(key, work.nbytes))
        work.plus.append(u)
    c1 = time.perf_counter()
    work.times["mask_expansion"] += c1 - c0
    y = np.zeros((task.L, task.M), dtype=dtype)
    if work.streams:
        m = np.frombuffer(b"".join(work.streams), dtype=dtype).reshape(-1, task.M)
        np.add.at(y, np.array(work.plus, dtype=np.int64), m)  # wraps modulo 2^32 / 2^64
        np.subtract.at(y, np.array(work.minus, dtype=np.int64), m[: len(work.minus)])
    width = task.payload.shape[-1]
    shares = np.frombuffer(b"".join(work.pts), dtype="<u4").reshape(len(work.pts), width)
    times = {
        **work.times,
        "masking": time.perf_counter() - c1,
        "pairs_cpu": time.process_time() - cpu0,
    }
    return y, np.array(work.dest, dtype=np.int64).reshape(-1, 2), shares, times


def undo_pair_masks(
    items: list[tuple[X25519PrivateKey, int, int]],
    s_pk: list[X25519PublicKey],
    unit: int,
    round: int,
    M: int,
    dtype: type[np.unsignedinteger],
) -> np.ndarray:
    """Sum of the pairwise masks a surviving v applied with a dropped u (to subtract)."""
    out = np.zeros(M, dtype=dtype)
    nbytes = M * np.dtype(dtype).itemsize
    for key_u, u, v in items:
        a, b = (u, v) if u < v else (v, u)
        sd = hkdf_sha256(key_u.exchange(s_pk[v]), info(b"pairwise", unit, round, a, b))
        m = np.frombuffer(keystream(sd, nbytes), dtype=dtype)
        # v added +m if v < u (v is the lower end), −m otherwise; undo it
        if v < u:
            out += m
        else:
            out -= m
    return out
