"""The trusted parties of two schemes, and the pairwise agreement between servers.

* :class:`Aggregator` — central DP's trusted aggregator (``privacy.server_noise =
  "central"``): every round each server sends it ``ψ_m`` in the clear (the uplink: no
  noise; its mutual-TLS channel hides it from the wire only); once all ``P`` are in, it
  adds its one draw ``z`` (its own cell of the keyed draws) and returns to each server
  ``w_p = ψ̄ + z``, ``ψ̄ = (1/P) Σ_m ψ_m`` — computed by the engine's server step over the
  whole network (:func:`~pgfl.engine.step.server_messages`,
  :func:`~pgfl.engine.step.combine_phase`, :class:`~pgfl.privacy.mechanisms.CentralNoise`:
  the same operations in the same order, so the same bits). It sees every unit's
  aggregate: it is trusted.
* :class:`Dealer` — the trusted dealer of topology-optimized noise (CorN-DSGD,
  arXiv:2501.14644; :class:`~pgfl.privacy.mechanisms.optimized.TopologyOptimized`): every
  round it draws the network's correlated noise once and hands server ``m`` its own
  ``g_m`` (on its links) and nothing else. It sees only noise.
* :func:`agree` — a pair of neighbouring servers' secret for their pairwise-cancelling
  terms (DECOR, arXiv:2405.01031): an X25519 agreement over their mutual-TLS channel,
  ``HKDF-SHA256(DH, info = edge)``; the secret never leaves either server.

Both trusted parties draw from the keyed draws in simulation mode, from their own key in
deployment mode (:mod:`pgfl.deploy.draws`).
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from pgfl.deploy import wire
from pgfl.deploy.draws import SecretDraws
from pgfl.deploy.job import Job
from pgfl.deploy.wire import Refused, array, decode, encode
from pgfl.engine.step import combine_phase, server_messages
from pgfl.privacy.mechanisms import RoundContext
from pgfl.privacy.mechanisms.optimized import TopologyOptimized
from pgfl.privacy.secagg.crypto import hkdf_sha256
from pgfl.rng import KeyedDraws

__all__ = ["Aggregator", "Dealer", "agree"]


def agree(peer: bytes | None, edge: tuple[int, int]) -> tuple[bytes, Any]:
    """One end of an edge's X25519 agreement: ``(my public key, secret or finish)``.

    With the peer's public key: the secret now; without: a function of the peer's key
    that gives it. ``secret = HKDF-SHA256(DH, info = "pgfl-deploy-pairwise" ‖ lo ‖ hi)``.

    >>> a_pub, finish = agree(None, (0, 1))
    >>> b_pub, b_secret = agree(a_pub, (0, 1))
    >>> finish(b_pub) == b_secret
    True
    """
    key = X25519PrivateKey.generate()
    mine = key.public_key().public_bytes_raw()
    tag = b"pgfl-deploy-pairwise-v1/" + struct.pack("<qq", *edge)

    def finish(other: bytes) -> bytes:
        return hkdf_sha256(key.exchange(X25519PublicKey.from_public_bytes(other)), tag)

    return mine, (finish if peer is None else finish(peer))


class _Trusted:
    """What the two trusted parties share: a job, a state folder, a key, a stop event."""

    name = ""

    def __init__(self, job: Job, state: Path, key: bytes, transcript: Path | None) -> None:
        self.job, self.state, self._key = job, state, key
        self.transcript = wire.Transcript(transcript)
        self.stopped = threading.Event()
        self.cond = threading.Condition()

    def log(self, line: str) -> None:
        """One line in the party's log (never a secret)."""
        wire.append_line(self.state / "party.log", line)

    def draws(self, i: int) -> Any:
        """The party's draws of round ``i`` (its own cell is reached through ``cells``)."""
        units = np.arange(self.job.P)
        if self.job.deploy.mode == "simulation":
            return KeyedDraws(self.job.seed, i, self.job.reps, units)
        return SecretDraws(self._key, i, self.job.reps, units)

    def _server(self, context: grpc.ServicerContext) -> int:
        name = wire.authorise(context, lambda n: n in {f"server-{p}" for p in range(self.job.P)})
        return int(name.split("-")[1])

    def on_stop(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """The coordinator ends the deployment."""
        wire.authorise(context, lambda n: n == "coordinator")
        self.stopped.set()
        return encode({}, {"ok": 1})

    def on_start(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """Nothing to set up (the coordinator checks that the party answers)."""
        wire.authorise(context, lambda n: n == "coordinator")
        return encode({}, {"ok": 1})

    def control(self) -> dict[str, grpc.RpcMethodHandler]:
        """The coordinator's calls."""
        return {"Start": wire.unary(self.on_start, self.log),
                "Stop": wire.unary(self.on_stop, self.log)}  # fmt: skip

    def _gather(self, i: int, m: int, value: np.ndarray, compute: Callable) -> Any:
        """Keep server ``m``'s value of round ``i``; once all P are in, ``compute`` them once."""
        with self.cond:
            got = self.rounds.setdefault(i, {})
            if m in got:
                raise Refused(f"server-{m} sent round {i} twice")
            got[m] = value
            self.cond.notify_all()
            end = time.monotonic() + self.job.deploy.round_timeout
            while len(got) < self.job.P and time.monotonic() < end:
                self.cond.wait(end - time.monotonic())
            if len(got) < self.job.P:
                missing = sorted(set(range(self.job.P)) - set(got))
                raise wire.Unavailable(
                    f"no aggregate from {', '.join(f'server-{q}' for q in missing)} in round {i}"
                )
            if i not in self.results:
                self.results[i] = compute(got)
                self.results.pop(i - 2, None)
                self.rounds.pop(i - 2, None)
            return self.results[i]


class Aggregator(_Trusted):
    """Central DP's trusted aggregator (module doc)."""

    name = "aggregator"

    def __init__(self, job: Job, state: Path, key: bytes, transcript: Path | None) -> None:
        super().__init__(job, state, key, transcript)
        self.rounds: dict[int, dict[int, np.ndarray]] = {}
        self.results: dict[int, np.ndarray] = {}

    def handlers(self) -> dict[str, dict[str, grpc.RpcMethodHandler]]:
        """The gRPC services of the aggregator."""
        return {"pgfl.Aggregator": {"Combine": wire.unary(self.on_combine, self.log)},
                "pgfl.Control": self.control()}  # fmt: skip

    def on_combine(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """Server m's ``ψ_m`` of a round in; its ``w_m`` out once every server's is in."""
        m = self._server(context)
        self.transcript.add("received", f"server-{m}", "Combine", request)
        arrays, config = decode(request)
        i = int(config.get("round", -1))
        job = self.job
        psi = array(arrays, "psi", (job.C, job.R, job.M))
        W = self._gather(i, m, psi, lambda got: self.combine(i, got))
        reply = encode({"w": W[:, :, m]}, {"round": i})
        self.transcript.add("sent", f"server-{m}", "Combine", reply)
        return reply

    def combine(self, i: int, got: dict[int, np.ndarray]) -> np.ndarray:
        """The engine's server step over the whole network: ``W [C, R, P, M]``."""
        job = self.job
        psi = np.stack([got[m] for m in range(job.P)], axis=2)
        with np.errstate(over="ignore", invalid="ignore"):
            messages = server_messages(psi, job.links, job.curves, self.draws(i), 0, i)
            return combine_phase(messages, job.links, 0, job.P)


class Dealer(_Trusted):
    """The trusted dealer of topology-optimized noise (module doc)."""

    name = "dealer"

    def __init__(self, job: Job, state: Path, key: bytes, transcript: Path | None) -> None:
        super().__init__(job, state, key, transcript)
        self.rounds: dict[int, dict[int, np.ndarray]] = {}
        self.results: dict[int, dict[int, np.ndarray]] = {}
        self.lock = threading.Lock()

    def handlers(self) -> dict[str, dict[str, grpc.RpcMethodHandler]]:
        """The gRPC services of the dealer."""
        return {
            "pgfl.Dealer": {"Noise": wire.unary(self.on_noise, self.log)},
            "pgfl.Control": self.control(),
        }

    def on_noise(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """Server m's own noise on its links in a round (drawn once per round for all)."""
        m = self._server(context)
        self.transcript.add("received", f"server-{m}", "Noise", request)
        _, config = decode(request)
        i = int(config.get("round", -1))
        if not 1 <= i <= self.job.iterations:
            raise Refused(f"round {i} outside 1..{self.job.iterations}")
        with self.lock:
            if i not in self.results:
                self.results[i] = self.deal(i)
                self.results.pop(i - 2, None)
            noise = self.results[i][m]
        reply = encode({"g": noise}, {"round": i})
        self.transcript.add("sent", f"server-{m}", "Noise", reply)
        return reply

    def deal(self, i: int) -> dict[int, np.ndarray]:
        """Every server's noise on its out-links, ``[C', R, n_m, M]``, by server."""
        job = self.job
        group = next(g for g in job.curves.server_groups if g.cls is TopologyOptimized)
        draws = self.draws(i)
        out = {}
        for m in range(job.P):
            links = job.links.subset(job.links.out_of(m, m + 1))
            ctx = RoundContext(draws, m, i)
            out[m] = TopologyOptimized.link_noise(group.schemes, links, job.M, ctx)
        return out
