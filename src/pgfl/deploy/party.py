"""One party's process: ``python -m pgfl.deploy.party SPEC`` (local) or ``pgfl deploy --party``.

A :class:`PartySpec` says who the party is and where it lives; :func:`run_party` runs it
until the coordinator stops it (or, in a local deployment, until the coordinator's process
is gone). A serving party (a unit server, the aggregator, the dealer) listens on its
address and writes the port it got to ``STATE/ready``; a client dials its unit server and
answers its messages until the server closes the stream, reconnecting for up to
``deploy.connect_timeout`` seconds when the connection drops.
"""

from __future__ import annotations

import os
import pickle
import queue
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from pgfl.deploy import wire
from pgfl.deploy.certs import Identity
from pgfl.deploy.client import ClientNode, make_app, new_context
from pgfl.deploy.draws import PARTY, new_key, note_secret
from pgfl.deploy.job import Job, Shard
from pgfl.deploy.server import UnitServer
from pgfl.deploy.trusted import Aggregator, Dealer
from pgfl.workers import INTERVAL, alive

__all__ = ["PartySpec", "main", "own_shard", "run_local_party", "run_party"]


@dataclass(frozen=True)
class PartySpec:
    """One party of a deployment.

    Attributes:
        name: ``server-P``, ``client-P-K``, ``aggregator`` or ``dealer``.
        job: the deployed batch (:class:`~pgfl.deploy.job.Job`).
        state: the party's own folder (checkpoints, log, ``ready``).
        certs: the certificates' folder (its key, its certificate, the CA's certificate).
        listen: ``host:port`` a serving party listens on (port 0: any free port).
        server: a client's unit server address ``host:port``.
        shard: a client's own data (``None``: built from the job's recipe).
        transcript: where the party records its payloads (``None``: not recorded).
        watch: the coordinator's process id (a local deployment: exit when it is gone).
        environ: the coordinator's environment when it started the party (a local
            deployment's parties are forked from a server started earlier).

    """

    name: str
    job: Job
    state: Path
    certs: Path
    listen: str = "127.0.0.1:0"
    server: str | None = None
    shard: Shard | None = None
    transcript: Path | None = None
    watch: int | None = None
    environ: dict[str, str] | None = None


def own_shard(job: Job, unit: int, client: int) -> Shard:
    """A client's data from the job's recipe (its unit's data built, its own kept)."""
    from pgfl.experiments.build import build_block  # lazy: the data builders

    block = build_block(job.recipe, job.seed, unit, unit + 1)
    d = block.data
    return Shard(
        X=np.array(d.X[0, client]),
        y=np.array(d.y[0, client]),
        count=int(d.counts[0, client]),
        epochs=int(block.epochs[0, client]),
        batch=None if block.batch is None else int(block.batch[0, client]),
    )


#: Seconds a party whose coordinator is gone has to stop cleanly before it exits anyway.
GRACE = 10.0


def _watch(pid: int | None, stop: threading.Event) -> None:
    """Set ``stop`` when process ``pid`` (the local coordinator) is gone; exit soon after.

    A coordinator killed by ``SIGKILL`` never calls ``Stop``: its parties look at it every
    :data:`pgfl.workers.INTERVAL` seconds (:func:`pgfl.workers.alive`: a zombie is gone),
    stop as if told to, and leave with ``os._exit`` if that takes more than :data:`GRACE`
    seconds. (Not :func:`pgfl.workers.exit_with` itself: a party first closes its
    streams, so that its clients end too, and flushes its transcript.)
    """
    if pid is None:
        return

    def loop() -> None:
        while not stop.wait(INTERVAL):
            if not alive(pid):
                stop.set()
                time.sleep(GRACE)
                os._exit(1)

    threading.Thread(target=loop, name="pgfl-exit-with-coordinator", daemon=True).start()


def _serve(spec: PartySpec, party: Any) -> None:
    """Serve ``party``'s handlers until it is stopped; the port goes to ``STATE/ready``."""
    identity = Identity.load(spec.certs, spec.name)
    server, port = wire.serve(identity, spec.listen, party.handlers(),
                              max_bytes=spec.job.deploy.max_message_bytes)  # fmt: skip
    ready = spec.state / "ready"
    tmp = spec.state / "ready.tmp"
    tmp.write_text(str(port))
    tmp.replace(ready)
    _watch(spec.watch, party.stopped)
    party.stopped.wait()
    if isinstance(party, UnitServer):
        party.close_clients()
    server.stop(grace=2.0).wait()
    party.transcript.close()


def _client(spec: PartySpec) -> None:
    """A client: answer the unit server's messages until it closes the stream."""
    job = spec.job
    _, p, k = spec.name.split("-")
    unit, client = int(p), int(k)
    shard = spec.shard if spec.shard is not None else own_shard(job, unit, client)
    key = new_key()
    note_secret("generator-key", key)
    node = ClientNode(job, unit, client, shard, key)
    app, ctx = make_app(node), new_context(client + 1, unit, client)
    identity = Identity.load(spec.certs, spec.name)
    transcript = wire.Transcript(spec.transcript)
    peer = f"server-{unit}"
    stop = threading.Event()
    _watch(spec.watch, stop)
    last_ok = time.monotonic()
    while not stop.is_set():
        outbox: queue.Queue[bytes | None] = queue.Queue()
        ch = wire.channel(identity, spec.server, peer, max_bytes=job.deploy.max_message_bytes)
        stream = ch.stream_stream("/pgfl.Fleet/Connect")
        try:
            for data in stream(iter(outbox.get, None)):
                last_ok = time.monotonic()
                transcript.add("received", peer, "message", data)
                reply = _answer(app, ctx, data, node)
                transcript.add("sent", peer, "reply", reply)
                outbox.put(reply)
            break  # the server closed the stream: the deployment is over
        except grpc.RpcError:
            if time.monotonic() - last_ok > job.deploy.connect_timeout:
                break
            time.sleep(0.5)
        finally:
            outbox.put(None)
            ch.close()
    transcript.close()


def _answer(app: Any, ctx: Any, data: bytes, node: ClientNode) -> bytes:
    """The reply to one message: the app's, or a Flower error reply when it is refused."""
    from flwr.app import Error, Message  # lazy: flwr loads with the client

    try:
        msg = wire.decode_message(data)
    except wire.Refused:
        return b""
    try:
        reply = app(msg, ctx)
    except wire.Refused as exc:  # a message out of protocol: refused, the client goes on
        reply = Message(Error(code=400, reason=str(exc)), reply_to=msg)
    except Exception as exc:  # noqa: BLE001 - a client never dies of one message
        traceback.print_exc()
        reply = Message(Error(code=500, reason=f"{type(exc).__name__}: {exc}"), reply_to=msg)
    for party in node.secagg.values():
        for label, raw in party.secrets():
            note_secret(label, raw)
    return wire.encode_message(reply)


def run_party(spec: PartySpec) -> None:
    """Run the party ``spec`` names until it is done (module doc)."""
    PARTY["name"] = spec.name
    spec.state.mkdir(parents=True, exist_ok=True)
    if spec.name.startswith("client-"):
        _client(spec)
        return
    key = new_key()
    note_secret("generator-key", key)
    if spec.name.startswith("server-"):
        identity = Identity.load(spec.certs, spec.name)
        party: Any = UnitServer(spec.job, int(spec.name.split("-")[1]), identity, spec.state,
                                key, spec.transcript)  # fmt: skip
    elif spec.name == "aggregator":
        party = Aggregator(spec.job, spec.state, key, spec.transcript)
    elif spec.name == "dealer":
        party = Dealer(spec.job, spec.state, key, spec.transcript)
    else:
        raise ValueError(f"unknown party {spec.name!r}")
    _serve(spec, party)


def run_local_party(spec: PartySpec) -> None:
    """A local deployment's party in a forked process: its output in ``STATE/process.log``."""
    spec.state.mkdir(parents=True, exist_ok=True)
    if spec.environ is not None:
        os.environ.clear()
        os.environ.update(spec.environ)
    fd = os.open(spec.state / "process.log",
                 os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)  # fmt: skip
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    run_party(spec)


def main(argv: list[str] | None = None) -> None:
    """``python -m pgfl.deploy.party SPEC_FILE``: a local deployment's party (a pickled spec).

    The spec file is written by the local coordinator into the party's own folder (mode
    0600): the same user, the same machine.
    """
    args = sys.argv[1:] if argv is None else argv
    with open(args[0], "rb") as f:
        spec = pickle.load(f)  # noqa: S301 - written by this user's own coordinator
    run_party(spec)


if __name__ == "__main__":
    main()
