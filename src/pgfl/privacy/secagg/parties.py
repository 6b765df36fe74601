"""The secure-aggregation protocol split between its parties: each client, and the server.

:func:`~pgfl.privacy.secagg.protocol.run_secagg_round` runs every party of a unit in one
program. Here each party of one round of one unit is its own object, holding only its own
secrets and producing only what it sends in Bonawitz et al.'s protocol ("Practical secure
aggregation for privacy-preserving machine learning", CCS 2017, Fig. 4; the SecAgg+
neighbour graph of Bell et al., CCS 2020), so that the parties can live in different
processes (:mod:`pgfl.deploy`). The cryptography is the module's own
(:mod:`~pgfl.privacy.secagg.crypto`: X25519, HKDF-SHA256 with the same labels and
``info``, AES-256-CTR masks, ChaCha20-Poly1305 share channel; Shamir over GF(2^21 − 9)),
and the server's decoded mean equals :func:`~pgfl.privacy.secagg.quantized_mean` bit for bit
(the masks cancel exactly modulo 2^k).

0. :meth:`SecAggClient.advertise` → the server (:meth:`SecAggServer.keys`) broadcasts U1's keys;
1. :meth:`SecAggClient.share` (ciphertexts, one per holder) → :meth:`SecAggServer.relay`;
2. :meth:`SecAggClient.masked_input` ``y_u`` → :meth:`SecAggServer.requests` (U3 announced);
3. :meth:`SecAggClient.unmask` (shares) → :meth:`SecAggServer.result`.

A client may vanish after any step; the server proceeds with whoever answered and aborts
(:class:`~pgfl.privacy.secagg.SecAggAbort`) as the single-program protocol does. ``extra``
integer words ride in the masked vector after the ``M`` codes (the deployment's count of
clipped and non-finite messages): the server learns only their sum.

>>> from pgfl.privacy.secagg import SecAggConfig, quantized_mean
>>> cfg = SecAggConfig(frac_bits=8, clip=4.0)
>>> x = np.array([[0.5, -1.0], [1.5, 2.0], [1.0, 0.0]])
>>> clients = [SecAggClient(cfg, unit=0, round=1, client=u, L=3) for u in range(3)]
>>> server = SecAggServer(cfg, unit=0, round=1, L=3)
>>> keys = server.keys({u: c.advertise() for u, c in enumerate(clients)})
>>> inbox = server.relay({u: c.share(keys) for u, c in enumerate(clients)})
>>> y = {u: c.masked_input(inbox[u], x[u]) for u, c in enumerate(clients) if u != 1}
>>> asks = server.requests(y)                            # client 1 dropped after sharing
>>> mean, _ = server.result({v: clients[v].unmask(*asks[v]) for v in asks})
>>> mean.tolist() == quantized_mean(x, np.array([True, False, True]), cfg).tolist()
True
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Mapping

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from pgfl.privacy.secagg import shamir
from pgfl.privacy.secagg.config import SecAggAbort, SecAggConfig, SecAggProtocolError
from pgfl.privacy.secagg.crypto import SECRET_BYTES, hkdf_sha256, info, keystream
from pgfl.privacy.secagg.fixed_point import decode_mean, encode, reduce_mod
from pgfl.privacy.secagg.graph import neighbour_graph, sparse_abort_reason
from pgfl.privacy.secagg.protocol import ShareVault, recover_secrets

__all__ = ["KEY_BYTES", "SecAggClient", "SecAggServer"]

#: Bytes of a raw X25519 public key.
KEY_BYTES = 32
RandBytes = Callable[[int], bytes]
_PACK = struct.Struct("<II").pack


def _nonce(u: int, v: int) -> bytes:
    """One message per direction per round under a per-round key: nonce = (from, to)."""
    return _PACK(u, v) + b"\x00" * 4


def _mask(key: bytes, words: int, dtype: type) -> np.ndarray:
    """``words`` mask words of AES-256-CTR keystream under ``key`` (little-endian)."""
    return np.frombuffer(keystream(key, words * np.dtype(dtype).itemsize), dtype=dtype)


class SecAggClient:
    """Client ``client`` (its slot among the ``L`` sampled) of one round of one unit.

    Its secrets — the two X25519 private keys, the self-mask seed ``b_u``, the Shamir
    coefficients and the shares it holds for others — stay in this object.
    """

    def __init__(
        self,
        config: SecAggConfig,
        *,
        unit: int,
        round: int,
        client: int,
        L: int,
        randbytes: RandBytes = os.urandom,
    ) -> None:
        self.config, self.unit, self.round, self.u, self.L = config, unit, round, client, L
        self.t = config.threshold_for(L)
        self.holders = neighbour_graph(L, config, unit=unit, round=round)[client]  # N[u], u 1st
        self.randbytes = randbytes
        self.vault = ShareVault(client, self.t)
        self.public: dict[int, tuple[bytes, bytes]] = {}
        self._u2: set[int] = set()

    def secrets(self) -> list[tuple[str, bytes]]:
        """The client's own secrets drawn so far, labelled (for a test that none leaks)."""
        out = []
        for label, attr in (("x25519-channel", "_c"), ("x25519-mask", "_s")):
            if hasattr(self, attr):
                out.append((label, getattr(self, attr).private_bytes_raw()))
        if hasattr(self, "_b"):
            out.append(("self-mask-seed", self._b))
        return out

    def advertise(self) -> tuple[bytes, bytes]:
        """Round 0: fresh key pairs for the share channel and the masks; their public keys."""
        self._c = X25519PrivateKey.from_private_bytes(self.randbytes(32))
        self._s = X25519PrivateKey.from_private_bytes(self.randbytes(32))
        return self._c.public_key().public_bytes_raw(), self._s.public_key().public_bytes_raw()

    def _channel(self, v: int) -> ChaCha20Poly1305:
        a, b = min(self.u, v), max(self.u, v)
        peer = X25519PublicKey.from_public_bytes(self.public[v][0])
        shared = self._c.exchange(peer)
        return ChaCha20Poly1305(hkdf_sha256(shared, info(b"channel", self.unit, self.round, a, b)))

    def share(self, public: Mapping[int, tuple[bytes, bytes]]) -> dict[int, bytes]:
        """Round 1: ``b_u`` and ``s_u^SK`` Shamir-shared over N[u]; one ciphertext per holder.

        ``public``: the keys the server broadcast (U1). Holders that did not advertise get
        nothing; the client keeps its own share.
        """
        self.public = {int(v): k for v, k in public.items()}
        self._b = self.randbytes(SECRET_BYTES)
        raw_s = self._s.private_bytes_raw()
        secrets = np.concatenate(
            [shamir.bytes_to_field([self._b]), shamir.bytes_to_field([raw_s])], axis=1
        )
        shares = shamir.share_field(secrets, self.holders + 1, self.t, randbytes=self.randbytes)
        self._chunks = shamir.chunks_for(SECRET_BYTES)
        self._keep(self.u, shares[0, 0])
        out = {}
        for j, v in enumerate(self.holders.tolist()):
            if v == self.u or v not in self.public:
                continue
            aad = info(b"share", self.unit, self.round, self.u, v)
            data = shares[0, j].astype("<u4").tobytes()
            out[v] = self._channel(v).encrypt(_nonce(self.u, v), data, aad)
        return out

    def _keep(self, owner: int, share: np.ndarray) -> None:
        C = self._chunks
        self.vault.b[owner] = np.asarray(share[:C], dtype=np.int64)
        self.vault.s[owner] = np.asarray(share[C:], dtype=np.int64)

    def masked_input(
        self, inbox: Mapping[int, bytes], x: np.ndarray, extra: np.ndarray | None = None
    ) -> np.ndarray:
        """Round 2: the shares addressed to u decrypted and kept; ``y_u`` (codes, extra words).

        ``inbox``: ciphertexts from the holders that shared (U2 as relayed by the server);
        ``x``: the client's real vector ``[M]`` (finite); ``extra``: integer words added
        after it. ``y_u = q(x) ‖ extra + PRG(b_u) ± Σ_{v ∈ N(u) ∩ U2} PRG(s_uv)  (mod 2^k)``.
        """
        C = 2 * shamir.chunks_for(SECRET_BYTES)
        for v, ct in inbox.items():
            v = int(v)
            if v == self.u or v not in self.public or v not in self.holders:
                raise SecAggProtocolError(f"client {self.u}: unexpected share from {v}")
            aad = info(b"share", self.unit, self.round, v, self.u)
            try:
                data = self._channel(v).decrypt(_nonce(v, self.u), bytes(ct), aad)
            except InvalidTag as exc:
                raise SecAggProtocolError(
                    f"client {self.u}: share from {v} failed authentication"
                ) from exc
            share = np.frombuffer(data, dtype="<u4")
            if share.size != C:
                raise SecAggProtocolError(f"client {self.u}: malformed share from {v}")
            self._keep(v, share)
        self._u2 = {int(v) for v in inbox} | {self.u}
        cfg, dtype = self.config, self.config.dtype
        words = [encode(x, cfg)]
        if extra is not None:
            words.append(np.asarray(extra, dtype=np.uint64).astype(dtype))
        y = np.concatenate(words)
        key = hkdf_sha256(self._b, info(b"self", self.unit, self.round, self.u, 0))
        y += _mask(key, y.size, dtype)
        for v in sorted(self._u2 - {self.u}):
            a, b = min(self.u, v), max(self.u, v)
            shared = self._s.exchange(X25519PublicKey.from_public_bytes(self.public[v][1]))
            m = _mask(hkdf_sha256(shared, info(b"pairwise", self.unit, self.round, a, b)),
                      y.size, dtype)  # fmt: skip
            y = y + m if self.u < v else y - m  # wraps modulo 2^32 / 2^64
        return reduce_mod(y, cfg)

    def unmask(
        self, included: np.ndarray, b_for: np.ndarray, s_for: np.ndarray
    ) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        """Round 3: shares of ``b_u`` for u ∈ U3 and of ``s_u^SK`` for u ∉ U3 — never both."""
        included = np.asarray(included, dtype=bool)
        return self.vault.reveal(b_for, s_for, int(included.sum()), included)


class SecAggServer:
    """The server of one round of one unit: relays, collects, reconstructs, decodes.

    ``extra``: integer words the clients add after their ``M`` codes (summed, not decoded).
    """

    def __init__(
        self, config: SecAggConfig, *, unit: int, round: int, L: int, extra: int = 0
    ) -> None:
        self.config, self.unit, self.round, self.L, self.extra = config, unit, round, L, extra
        self.t = config.threshold_for(L)
        self.holders = neighbour_graph(L, config, unit=unit, round=round)
        self.u1 = self.u2 = self.u3 = np.zeros(L, dtype=bool)

    def _abort(self, reason: str, survivors: int) -> SecAggAbort:
        return SecAggAbort(reason, unit=self.unit, round=self.round, survivors=survivors)

    def _members(self, got: Mapping[int, object], within: np.ndarray, what: str) -> np.ndarray:
        """The clients whose answers arrived (bool ``[L]``), refusing strangers."""
        out = np.zeros(self.L, dtype=bool)
        for u in got:
            if not (isinstance(u, (int, np.integer)) and 0 <= u < self.L and within[u]):
                raise SecAggProtocolError(f"unit {self.unit}: {what} from unexpected client {u}")
            out[u] = True
        return out

    def keys(self, advertised: Mapping[int, tuple[bytes, bytes]]) -> dict[int, tuple[bytes, bytes]]:
        """Round 0: U1 and the keys to broadcast; abort below t."""
        self.u1 = self._members(advertised, np.ones(self.L, dtype=bool), "keys")
        for u, pair in advertised.items():
            if len(pair) != 2 or any(len(bytes(k)) != KEY_BYTES for k in pair):
                raise SecAggProtocolError(f"unit {self.unit}: malformed keys from client {u}")
        self.pub = {int(u): (bytes(c), bytes(s)) for u, (c, s) in advertised.items()}
        n = int(self.u1.sum())
        if n < self.t:
            raise self._abort(f"{n} clients advertised keys < threshold t={self.t}", n)
        return dict(self.pub)

    def relay(self, sent: Mapping[int, Mapping[int, bytes]]) -> dict[int, dict[int, bytes]]:
        """Round 1: U2; each holder's inbox of ciphertexts from U2 (the server sees only those)."""
        self.u2 = self._members(sent, self.u1, "shares")
        n = int(self.u2.sum())
        if n < self.t:
            raise self._abort(f"{n} clients shared keys < threshold t={self.t}", n)
        inbox: dict[int, dict[int, bytes]] = {int(v): {} for v in np.flatnonzero(self.u2)}
        for u, cts in sent.items():
            for v, ct in cts.items():
                if int(v) in inbox and int(v) != int(u):
                    inbox[int(v)][int(u)] = ct
        return inbox

    def requests(self, masked: Mapping[int, np.ndarray]) -> dict[int, tuple]:
        """Round 2: U3 announced; per v ∈ U3 ``(U3, b-shares for, key shares for)``."""
        self.u3 = self._members(masked, self.u2, "a masked input")
        width = None
        for u, y in masked.items():
            y = np.asarray(y)
            width = y.size if width is None else width
            if y.dtype != self.config.dtype or y.ndim != 1 or y.size != width:
                raise SecAggProtocolError(f"unit {self.unit}: malformed masked input from {u}")
        n3 = int(self.u3.sum())
        if n3 < self.t:
            raise self._abort(f"{n3} survivors < threshold t={self.t}", n3)
        self.y = {int(u): np.asarray(y) for u, y in masked.items()}
        out = {}
        for v in np.flatnonzero(self.u3).tolist():
            nb = self.holders[v]
            out[v] = (self.u3.copy(), nb[self.u3[nb]], nb[self.u2[nb] & ~self.u3[nb]])
        return out

    def result(
        self, answers: Mapping[int, tuple[Mapping[int, np.ndarray], Mapping[int, np.ndarray]]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Round 3: the mean over U3 ``[M]`` and the sums of the extra words.

        ``answers``: per responding v, its revealed shares ``(b, s)`` by owner.
        """
        u4 = self._members(answers, self.u3, "shares")
        reason = sparse_abort_reason(self.holders, self.u2, self.u3, u4, self.t)
        if reason is not None:
            raise self._abort(reason, int(self.u3.sum()))
        C = shamir.chunks_for(SECRET_BYTES)
        got_b = {int(u): [] for u in np.flatnonzero(self.u3)}
        got_s = {int(u): [] for u in np.flatnonzero(self.u2 & ~self.u3)}
        for v in sorted(answers):
            b, s = answers[v]
            for got, shares in ((got_b, b), (got_s, s)):
                for u, sh in shares.items():
                    sh = np.asarray(sh, dtype=np.int64)
                    if int(u) not in got or v not in self.holders[int(u)] or sh.shape != (C,):
                        raise SecAggProtocolError(f"unit {self.unit}: unexpected share from {v}")
                    got[int(u)].append((int(v), sh))
        dtype = self.config.dtype
        words = next(iter(self.y.values())).size
        total = np.zeros(words, dtype=dtype)
        for u in sorted(self.y):
            total += self.y[u]
        for u, bu in recover_secrets(got_b, self.t).items():
            total -= _mask(
                hkdf_sha256(bu, info(b"self", self.unit, self.round, u, 0)), words, dtype
            )
        for u, raw in recover_secrets(got_s, self.t).items():
            key_u = X25519PrivateKey.from_private_bytes(raw)
            if key_u.public_key().public_bytes_raw() != self.pub[u][1]:
                raise SecAggProtocolError(f"reconstructed key of client {u} does not match its key")
            for v in self.holders[u, 1:].tolist():
                if not self.u3[v]:
                    continue
                a, b = min(u, v), max(u, v)
                shared = key_u.exchange(X25519PublicKey.from_public_bytes(self.pub[v][1]))
                m = _mask(hkdf_sha256(shared, info(b"pairwise", self.unit, self.round, a, b)),
                          words, dtype)  # fmt: skip
                total = total - m if v < u else total + m  # undo what v applied
        total = reduce_mod(total, self.config)
        M = words - self.extra
        mean = decode_mean(total[:M], int(self.u3.sum()), self.config)
        return mean, total[M:].astype(np.int64)
