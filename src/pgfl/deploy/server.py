"""A unit server party: its clients over Flower's message API, its peers over gRPC.

One process per unit ``p``. It serves, over one mutual-TLS gRPC port (:mod:`pgfl.deploy.wire`):

* ``pgfl.Fleet/Connect``: each of its clients keeps one bidirectional stream open (it
  dials out: a client needs no open port), over which Flower messages travel both
  ways; :class:`UnitGrid` is a Flower ``Grid`` over those streams, so the round below
  uses Flower's server-side message API (``send_and_receive``). A client whose stream
  breaks (a killed process) is a client that no longer answers: the secure-aggregation
  dropout path.
* ``pgfl.Peer/Deliver``: a neighbouring server's messages ``ψ_m + g_pm`` on the links into
  ``p`` (its round's barrier: ``p`` combines once every in-neighbour's message is in);
  ``pgfl.Peer/Agree``: the X25519 agreement of a pair's pairwise-cancelling secret.
* ``pgfl.Control/Start``, ``Round``, ``Stop``: the coordinator's calls.

A round (:meth:`UnitServer.round`) is the engine's step for a block of one unit
(:mod:`pgfl.engine.step`, eqs. 3, 7, 8 of *Privatized Graph Federated Learning*,
arXiv:2203.07105): sample ``L`` clients, have them train, aggregate their messages
(plain mean, noisy messages, or secure aggregation), add the server noise
(:func:`~pgfl.engine.step.server_messages`), send, receive, combine
(:func:`~pgfl.engine.step.combine_phase`). Central curves send ``ψ_p`` to the trusted
aggregator instead; topology-optimized noise comes from the dealer.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from flwr.app import Message
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.serverapp import Grid
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from pgfl.deploy import wire
from pgfl.deploy.draws import SecretDraws, note_secret
from pgfl.deploy.job import Job
from pgfl.deploy.rounds import aggregate, local_phase
from pgfl.deploy.trusted import agree
from pgfl.deploy.wire import Refused, array, decode, encode
from pgfl.engine.step import combine_phase, sample_clients, server_messages
from pgfl.experiments.partial import read_partial, write_partial
from pgfl.privacy.mechanisms.optimized import TopologyOptimized
from pgfl.rng import KeyedDraws

__all__ = ["UnitGrid", "UnitServer"]


class _Connection:
    """One client's stream: messages to send, and whether it is still connected."""

    def __init__(self) -> None:
        self.outbox: queue.Queue[bytes | None] = queue.Queue()
        self.alive = True


class UnitGrid(Grid):
    """A Flower ``Grid`` over the unit's client streams (node id = client index + 1)."""

    def __init__(self, transcript: wire.Transcript, unit: int) -> None:
        # the identity Flower stamps on the messages this process creates: run 0, the
        # server's node (Flower's SuperLink node id), task 0
        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 0, SUPERLINK_NODE_ID, 0
        self._run = Run.create_empty(0)
        self.transcript, self.unit = transcript, unit
        self.nodes: dict[int, _Connection] = {}
        self.replies: dict[str, Message] = {}
        self.sent: dict[str, int] = {}
        self.cond = threading.Condition()

    def set_run(self, run: Run) -> None:
        """Set the run (one per deployment)."""
        self._run = run

    @property
    def run(self) -> Run:
        """The run."""
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None) -> Message:
        """A Flower message to a client node."""
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        """The connected client nodes."""
        with self.cond:
            return [n for n, c in self.nodes.items() if c.alive]

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Queue each message on its node's stream; the ids of those sent."""
        ids = []
        with self.cond:
            for msg in messages:
                conn = self.nodes.get(msg.metadata.dst_node_id)
                if conn is None or not conn.alive:
                    continue
                msg.metadata.__dict__["_message_id"] = str(uuid.uuid4())
                data = wire.encode_message(msg)
                self.transcript.add("sent", _client(self.unit, msg.metadata.dst_node_id),
                                    msg.metadata.message_type, data)  # fmt: skip
                conn.outbox.put(data)
                self.sent[msg.metadata.message_id] = msg.metadata.dst_node_id
                ids.append(msg.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """The replies that arrived to ``message_ids``."""
        with self.cond:
            return [self.replies.pop(m) for m in list(message_ids) if m in self.replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None):
        """Send, then wait until every reply arrived, its node disconnected, or ``timeout``."""
        ids = set(self.push_messages(messages))
        end = time.monotonic() + (timeout if timeout is not None else 1e9)
        with self.cond:
            while True:
                waiting = {m for m in ids if m not in self.replies
                           and self.nodes[self.sent[m]].alive}  # fmt: skip
                left = end - time.monotonic()
                if not waiting or left <= 0:
                    break
                self.cond.wait(left)
            return [self.replies.pop(m) for m in ids if m in self.replies]

    def deliver(self, node: int, data: bytes) -> None:
        """A reply from ``node`` (checked: it answers a message sent to that node)."""
        msg = wire.decode_message(data)
        to = msg.metadata.reply_to_message_id
        with self.cond:
            if self.sent.get(to) != node:
                raise Refused(f"client {node - 1} answered a message it was not sent")
            self.replies[to] = msg
            self.cond.notify_all()


def _client(unit: int, node: int) -> str:
    return f"client-{unit}-{node - 1}"


def _why(exc: grpc.RpcError) -> str:
    """One line: a failed call's status and details."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return f"{getattr(code, 'name', 'error')}: {' '.join(str(details).split())}"


class UnitServer:
    """Server ``p`` of a deployed batch (module doc)."""

    def __init__(
        self, job: Job, unit: int, identity: Any, state: Path, key: bytes, transcript: Path | None
    ) -> None:
        self.job, self.p, self.identity, self.state = job, unit, identity, state
        self._key = key  # deployment mode: this server's generator key
        self.transcript = wire.Transcript(transcript)
        self.grid = UnitGrid(self.transcript, unit)
        self.W = np.zeros((job.C, job.R, job.M))
        if job.w0 is not None:
            self.W += job.w0
        self.done = 0
        self.addresses: dict[str, str] = {}
        self.channels: dict[str, grpc.Channel] = {}
        self.inbox: dict[tuple[int, int], np.ndarray] = {}
        self.cond = threading.Condition()
        self.edges: dict[tuple[int, int], bytes] = {}
        self.stopped = threading.Event()
        self.lock = threading.Lock()

    def log(self, line: str) -> None:
        """One line in the party's log (never a secret)."""
        wire.append_line(self.state / "party.log", line)

    # ------------------------------------------------------------------------ handlers
    def handlers(self) -> dict[str, dict[str, grpc.RpcMethodHandler]]:
        """The gRPC services this server offers."""
        return {
            "pgfl.Fleet": {"Connect": grpc.stream_stream_rpc_method_handler(self.connect)},
            "pgfl.Peer": {"Deliver": wire.unary(self.on_deliver, self.log),
                          "Agree": wire.unary(self.on_agree, self.log)},
            "pgfl.Control": {"Start": wire.unary(self.on_start, self.log),
                             "Round": wire.unary(self.on_round, self.log),
                             "Stop": wire.unary(self.on_stop, self.log)},
        }  # fmt: skip

    def _is_client(self, name: str) -> bool:
        prefix = f"client-{self.p}-"
        return name.startswith(prefix) and name[len(prefix):].isdigit() and \
            int(name[len(prefix):]) < self.job.K  # fmt: skip

    def connect(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        """A client's stream: instructions out, replies in (until either side closes)."""
        try:
            name = wire.authorise(context, self._is_client)
        except wire.Denied as exc:
            self.log(f"PERMISSION_DENIED to a client stream: {exc}")
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        node = int(name.rsplit("-", 1)[1]) + 1
        conn = _Connection()
        with self.grid.cond:
            old = self.grid.nodes.get(node)
            if old is not None:
                old.alive = False
                old.outbox.put(None)
            self.grid.nodes[node] = conn
            self.grid.cond.notify_all()
        self.log(f"{name} connected")

        def read() -> None:
            try:
                for data in requests:
                    self.transcript.add("received", name, "reply", data)
                    try:
                        self.grid.deliver(node, data)
                    except Refused as exc:
                        self.log(f"refused a reply from {name}: {exc}")
            except grpc.RpcError:
                pass
            finally:
                with self.grid.cond:
                    conn.alive = False
                    self.grid.cond.notify_all()
                conn.outbox.put(None)
                self.log(f"{name} disconnected")

        threading.Thread(target=read, daemon=True).start()
        while True:
            data = conn.outbox.get()
            if data is None or not context.is_active():
                return
            yield data

    def _peer_allowed(self, name: str) -> bool:
        return name in {f"server-{q}" for q in self.job.in_neighbours(self.p) if q != self.p}

    def on_deliver(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """A neighbour's messages on its links into this server for one round."""
        name = wire.authorise(context, self._peer_allowed)
        self.transcript.add("received", name, "Deliver", request)
        arrays, config = decode(request)
        q = int(name.split("-")[1])
        i = int(config.get("round", -1))
        n = int(((self.job.links.src == q) & (self.job.links.dst == self.p)).sum())
        m = array(arrays, "m", (self.job.C, self.job.R, n, self.job.M))
        with self.cond:
            if i not in (self.done + 1, self.done + 2):
                raise Refused(f"round {i} from {name}: this server is after round {self.done}")
            if (i, q) in self.inbox:
                raise Refused(f"round {i} from {name} delivered twice")
            self.inbox[(i, q)] = m
            self.cond.notify_all()
        return encode({}, {"ok": 1})

    def on_agree(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """The X25519 agreement of a pairwise-cancelling edge (the caller is its lower end)."""
        name = wire.authorise(context, lambda n: any(n == f"server-{min(e)}" and min(e) != self.p
                                                     for e in self.job.edges(self.p)))  # fmt: skip
        self.transcript.add("received", name, "Agree", request)
        arrays, _ = decode(request)
        q = int(name.split("-")[1])
        mine, secret = agree(array(arrays, "pk", (32,), "u").tobytes(), (q, self.p))
        self.edges[(q, self.p)] = secret
        note_secret("edge-secret", secret)
        return encode({"pk": np.frombuffer(mine, np.uint8)})

    def on_start(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """Set-up: the address book, a checkpoint to resume from, clients, pair secrets."""
        wire.authorise(context, lambda n: n == "coordinator")
        arrays, config = decode(request)
        self.addresses = {k[5:]: str(v) for k, v in config.items() if k.startswith("addr:")}
        resume = int(config.get("resume", 0))
        if resume:
            self._load(resume)
        end = time.monotonic() + self.job.deploy.connect_timeout
        with self.grid.cond:
            while len(self.grid.get_node_ids()) < self.job.K and time.monotonic() < end:
                self.grid.cond.wait(max(0.0, end - time.monotonic()))
        missing = self.job.K - len(list(self.grid.get_node_ids()))
        if missing:
            self.log(f"started with {missing} of {self.job.K} clients missing")
        if self.job.deploy.mode == "deployment":
            self._agree_edges()
        return encode({}, {"round": self.done, "clients": self.job.K - missing})

    def _agree_edges(self) -> None:
        for lo, hi in self.job.edges(self.p):
            if lo != self.p:
                continue
            mine, finish = agree(None, (lo, hi))
            reply = self._call(
                f"server-{hi}", "/pgfl.Peer/Agree", {"pk": np.frombuffer(mine, np.uint8)}, {}
            )
            self.edges[(lo, hi)] = finish(array(reply[0], "pk", (32,), "u").tobytes())
            note_secret("edge-secret", self.edges[(lo, hi)])
        with self.cond:
            self.cond.notify_all()

    def on_round(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """Run round ``i`` (the coordinator's call); the report: models, aborts, clips."""
        wire.authorise(context, lambda n: n == "coordinator")
        arrays, config = decode(request)
        i = int(config.get("round", -1))
        if i != self.done + 1:
            raise Refused(f"round {i} asked after round {self.done}")
        frozen = array(arrays, "frozen", (self.job.C, self.job.R), "b")
        with self.lock:
            W, aborted, clipped = self.round(i, frozen)
        reply = encode({"w": W, "aborted": aborted, "clipped": clipped}, {"round": i})
        self.transcript.add("sent", "coordinator", "Round", reply)
        return reply

    def on_stop(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """The coordinator ends the deployment."""
        wire.authorise(context, lambda n: n == "coordinator")
        self.stopped.set()
        return encode({}, {"ok": 1})

    def close_clients(self) -> None:
        """End every client's stream (the clients then exit)."""
        with self.grid.cond:
            for conn in self.grid.nodes.values():
                conn.alive = False
                conn.outbox.put(None)

    # ----------------------------------------------------------------------- transport
    def _call(
        self, peer: str, method: str, arrays: dict, config: dict, timeout: float | None = None
    ):
        """A unary call to ``peer``; its decoded reply (gRPC errors propagate)."""
        ch = self.channels.get(peer)
        if ch is None:
            ch = wire.channel(self.identity, self.addresses[peer], peer,
                              max_bytes=self.job.deploy.max_message_bytes)  # fmt: skip
            self.channels[peer] = ch
        data = encode(arrays, config)
        self.transcript.add("sent", peer, method, data)
        stub = ch.unary_unary(method)
        try:
            reply = stub(data, timeout=timeout or self.job.deploy.round_timeout)
        except grpc.RpcError as exc:
            raise wire.Unavailable(f"{peer} at {self.addresses[peer]}: {_why(exc)}") from None
        self.transcript.add("received", peer, method, reply)
        return decode(reply)

    # --------------------------------------------------------------------------- state
    def _save(self) -> None:
        """Checkpoint: this round's and the previous round's models.

        A partial file (:func:`~pgfl.experiments.partial.write_partial`: written atomically
        through an exclusive temporary file, stamped with the job and checksummed).
        """
        path = self.state / "checkpoint.npz"
        old = read_partial(path, self.job.identity, "the server keeps this round only")
        prev = {} if old is None else {"prev_round": old["round"], "prev_w": old["w"]}
        write_partial(path, self.job.identity, {"round": np.array(self.done), "w": self.W,
                                                **prev})  # fmt: skip

    def _load(self, r: int) -> None:
        path = self.state / "checkpoint.npz"
        ck = read_partial(path, self.job.identity, "it cannot resume from it")
        if ck is None:
            raise Refused(f"server-{self.p} has no checkpoint to resume round {r} from")
        if int(ck["round"]) == r:
            self.W = ck["w"].copy()
        elif "prev_round" in ck and int(ck["prev_round"]) == r:
            self.W = ck["prev_w"].copy()
        else:
            raise Refused(f"server-{self.p} has no checkpoint of round {r}")
        self.done = r

    # --------------------------------------------------------------------------- round
    def draws(self, i: int) -> Any:
        """The server's draws of round ``i`` (keyed, or its own generator)."""
        if self.job.deploy.mode == "simulation":
            return KeyedDraws(self.job.seed, i, self.job.reps, [self.p])
        return SecretDraws(self._key, i, self.job.reps, [self.p], self.edges)

    def round(self, i: int, frozen: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Round ``i``: local phase through the clients, server messages, combination."""
        job = self.job
        self.W[frozen] = np.nan
        draws = self.draws(i)
        K, L = job.K, job.L
        if L == K:
            clients = np.broadcast_to(np.arange(K), (job.R, 1, K))
        else:
            clients = sample_clients(draws.uniform("sampling", (K,)), L)
        replies = local_phase(self, i, clients[:, 0])
        with np.errstate(over="ignore", invalid="ignore"):
            psi, aborted, clipped = aggregate(self, i, clients[:, 0], replies)
            self.W = self._combine(i, psi, draws)
        if isinstance(draws, SecretDraws):  # the test hook of the secrets' test
            for noise in draws.drawn():
                note_secret("server-noise", noise.tobytes())
        self.done = i
        self._save()
        return self.W, aborted, clipped

    def _combine(self, i: int, psi: np.ndarray, draws: Any) -> np.ndarray:
        """``w_p = Σ_m a_pm (ψ_m + g_pm)``: through the aggregator, or with the neighbours."""
        job, p = self.job, self.p
        if job.central:
            arrays, _ = self._call(
                "aggregator", "/pgfl.Aggregator/Combine", {"psi": psi}, {"round": i}
            )
            return array(arrays, "w", psi.shape)
        links = job.links
        out_links = links.subset(links.out_of(p, p + 1))
        supplied = None
        if any(g.cls is TopologyOptimized for g in job.curves.server_groups):
            arrays, _ = self._call("dealer", "/pgfl.Dealer/Noise", {}, {"round": i})
            supplied = {
                TopologyOptimized: array(arrays, "g", (None, job.R, out_links.src.size, job.M))
            }
        messages = server_messages(psi[:, :, None], out_links, job.curves, draws, p, i, supplied)
        for q in job.out_neighbours(p):
            if q != p:
                self._call(f"server-{q}", "/pgfl.Peer/Deliver",
                           {"m": messages[:, :, out_links.dst == q]}, {"round": i})  # fmt: skip
        with self.cond:
            self.inbox[(i, p)] = messages[:, :, out_links.dst == p]
        into = links.subset(links.into(p, p + 1))
        incoming = np.empty((job.C, job.R, into.src.size, job.M))
        senders = self._wait(i)
        for q in senders:
            incoming[:, :, into.src == q] = self.inbox.pop((i, q))
        return combine_phase(incoming, into, p, p + 1)[:, :, 0]

    def _wait(self, i: int) -> list[int]:
        """The in-neighbours once all their round-``i`` messages arrived (the round's barrier)."""
        senders = self.job.in_neighbours(self.p)
        end = time.monotonic() + self.job.deploy.round_timeout
        with self.cond:
            while True:
                missing = [q for q in senders if (i, q) not in self.inbox]
                if not missing or time.monotonic() >= end:
                    break
                self.cond.wait(end - time.monotonic())
        if missing:
            names = ", ".join(f"server-{q}" for q in missing)
            raise wire.Unavailable(f"no message from {names} in round {i} within "
                          f"{self.job.deploy.round_timeout:g} s")  # fmt: skip
        return senders
