"""The wire: gRPC with mutual TLS, Flower's records as payloads, refusals, transcripts.

Every link of a deployment is a gRPC channel (``grpcio``) with mutual TLS: the serving
party presents its certificate and requires the caller's (``require_client_auth``), both
signed by the deployment's CA (:mod:`pgfl.deploy.certs`); a caller checks that the server's
certificate names the party it meant to reach (``grpc.ssl_target_name_override``), and a
server authorises each call by the caller's certificate name (:func:`peer_name`). No
payload is a home-made format: a payload is a Flower ``RecordDict`` (arrays in
``ArrayRecord``, NumPy's ``.npy`` format without pickles; scalars, strings and bytes in
``ConfigRecord``) serialised by Flower's protobuf schema (``flwr.common.serde``), and
between a unit server and its clients a whole Flower ``Message``.

What is refused, without taking the party down (the handler aborts that one call):

* a message larger than ``deploy.max_message_bytes``: gRPC itself (``RESOURCE_EXHAUSTED``);
* a caller without a certificate of the deployment's CA: the TLS handshake fails;
* a caller whose certificate names a party not allowed to make that call:
  ``PERMISSION_DENIED`` (:func:`authorise`);
* a payload that does not parse, or whose fields, shapes, types or round are not the
  expected ones: ``INVALID_ARGUMENT`` (:class:`Refused`, :func:`array`).

With ``deploy.record`` each party appends what it sends and receives to its transcript
(:class:`Transcript`): one record per payload, the payload's bytes as they crossed the
wire inside TLS.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.common.serde import (
    message_from_proto,
    message_to_proto,
    recorddict_from_proto,
    recorddict_to_proto,
)
from flwr.proto.message_pb2 import Message as ProtoMessage
from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict
from google.protobuf.message import DecodeError

from pgfl.deploy.certs import Identity

__all__ = [
    "Denied",
    "Refused",
    "Unavailable",
    "Transcript",
    "append_line",
    "array",
    "authorise",
    "channel",
    "decode",
    "decode_message",
    "encode",
    "encode_message",
    "peer_name",
    "read_transcript",
    "serve",
]


class Refused(Exception):
    """A payload this party does not accept (malformed, unexpected, out of protocol)."""


class Unavailable(Exception):
    """A party this one needs did not answer (named in the message)."""


class Denied(Exception):
    """A caller whose certificate names a party not allowed to make the call."""


def _options(max_bytes: int) -> list[tuple[str, int]]:
    return [
        ("grpc.max_receive_message_length", max_bytes),
        ("grpc.max_send_message_length", max_bytes),
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.keepalive_timeout_ms", 5_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def serve(
    identity: Identity,
    address: str,
    handlers: Mapping[str, Mapping[str, grpc.RpcMethodHandler]],
    *,
    max_bytes: int,
    workers: int = 16,
) -> tuple[grpc.Server, int]:
    """A started gRPC server on ``address`` (``host:port``; port 0 picks one) and its port.

    ``handlers``: service name → method name → handler (``grpc.*_rpc_method_handler``).
    Mutual TLS: the caller must present a certificate of the deployment's CA.
    """
    from concurrent import futures  # lazy: only a serving party needs the thread pool

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers),
        options=[*_options(max_bytes), ("grpc.http2.min_ping_interval_without_data_ms", 5_000)],
    )
    for service, methods in handlers.items():
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, methods),))
    creds = grpc.ssl_server_credentials(
        [(identity.key, identity.cert)], root_certificates=identity.ca, require_client_auth=True
    )
    port = server.add_secure_port(address, creds)
    if port == 0:
        raise OSError(f"{identity.name} cannot listen on {address}")
    server.start()
    return server, port


def channel(identity: Identity, address: str, peer: str, *, max_bytes: int) -> grpc.Channel:
    """A mutual-TLS channel to party ``peer`` at ``address``, checked to be that party."""
    creds = grpc.ssl_channel_credentials(
        root_certificates=identity.ca, private_key=identity.key, certificate_chain=identity.cert
    )
    options = [*_options(max_bytes), ("grpc.ssl_target_name_override", peer)]
    return grpc.secure_channel(address, creds, options=options)


def peer_name(context: grpc.ServicerContext) -> str:
    """The common name of the caller's certificate (mutual TLS), ``""`` if none."""
    names = context.auth_context().get("x509_common_name", [])
    return names[0].decode() if names else ""


def authorise(context: grpc.ServicerContext, allowed: Callable[[str], bool]) -> str:
    """The caller's name if ``allowed(name)``; else :class:`Denied` (PERMISSION_DENIED)."""
    name = peer_name(context)
    if not allowed(name):
        raise Denied(f"{name or 'anonymous'} may not call this")
    return name


# ------------------------------------------------------------------------------ payloads
def records(
    arrays: Mapping[str, np.ndarray], config: Mapping[str, Any] | None = None
) -> RecordDict:
    """A Flower ``RecordDict``: ``arrays`` in the ``ArrayRecord`` "a", ``config`` in "c"."""
    rd = RecordDict(
        {"a": ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in arrays.items()})}
    )
    if config:
        rd["c"] = ConfigRecord(dict(config))
    return rd


def unpack(rd: RecordDict) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and the config of a :func:`records` payload (:class:`Refused` if not one)."""
    try:
        arrays = {k: v.numpy() for k, v in rd["a"].items()} if "a" in rd else {}
        config = dict(rd["c"]) if "c" in rd else {}
    except (TypeError, ValueError, KeyError) as exc:
        raise Refused(f"malformed records ({exc})") from None
    return arrays, config


def encode(arrays: Mapping[str, np.ndarray], config: Mapping[str, Any] | None = None) -> bytes:
    """A payload: :func:`records` serialised by Flower's protobuf schema."""
    return recorddict_to_proto(records(arrays, config)).SerializeToString()


def decode(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and config of an :func:`encode` payload; :class:`Refused` if it is not one."""
    proto = ProtoRecordDict()
    try:
        proto.ParseFromString(data)
        rd = recorddict_from_proto(proto)
    except (DecodeError, TypeError, ValueError, KeyError) as exc:
        raise Refused(f"not a Flower RecordDict ({type(exc).__name__})") from None
    return unpack(rd)


def encode_message(message: Message) -> bytes:
    """A Flower ``Message`` in Flower's protobuf schema."""
    return message_to_proto(message).SerializeToString()


def decode_message(data: bytes) -> Message:
    """A Flower ``Message`` from its protobuf bytes; :class:`Refused` if it is not one."""
    proto = ProtoMessage()
    try:
        proto.ParseFromString(data)
        return message_from_proto(proto)
    except (DecodeError, TypeError, ValueError, KeyError) as exc:
        raise Refused(f"not a Flower Message ({type(exc).__name__})") from None


def array(
    arrays: Mapping[str, np.ndarray],
    name: str,
    shape: tuple[int | None, ...],
    kind: str = "f",
    *,
    finite: bool = False,
) -> np.ndarray:
    """``arrays[name]`` checked: its shape (``None``: any length), dtype kind, finiteness.

    >>> array({"x": np.zeros((2, 3))}, "x", (2, None)).shape
    (2, 3)
    >>> array({"x": np.zeros(3)}, "x", (2,))
    Traceback (most recent call last):
    ...
    pgfl.deploy.wire.Refused: field 'x' must have shape (2,) and kind 'f'; got (3,) float64
    """
    x = arrays.get(name)
    ok = (
        isinstance(x, np.ndarray)
        and x.ndim == len(shape)
        and all(s is None or s == n for s, n in zip(shape, x.shape, strict=True))
        and x.dtype.kind in kind
    )
    if not ok:
        got = "nothing" if x is None else f"{getattr(x, 'shape', '?')} {getattr(x, 'dtype', '?')}"
        raise Refused(f"field {name!r} must have shape {shape} and kind {kind!r}; got {got}")
    if finite and not np.isfinite(x).all():
        raise Refused(f"field {name!r} must be finite")
    return x


#: The status each refusal aborts its call with.
STATUS = {
    Refused: grpc.StatusCode.INVALID_ARGUMENT,
    Denied: grpc.StatusCode.PERMISSION_DENIED,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
}


def unary(
    handler: Callable[[bytes, grpc.ServicerContext], bytes],
    log: Callable[[str], None] | None = None,
) -> grpc.RpcMethodHandler:
    """A bytes → bytes method whose refusals abort only the call, each told in ``log``.

    :class:`Refused`: INVALID_ARGUMENT; :class:`Denied`: PERMISSION_DENIED;
    :class:`Unavailable`: UNAVAILABLE, naming the party that did not answer.
    """

    def call(request: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            return handler(request, context)
        except (Refused, Denied, Unavailable) as exc:
            code = STATUS[type(exc)]
            if log is not None:
                log(f"{code.name} to {peer_name(context) or 'anonymous'}: {exc}")
            context.abort(code, str(exc))
        raise AssertionError("unreachable: abort raises")

    return grpc.unary_unary_rpc_method_handler(call)


# ---------------------------------------------------------------------------- transcripts
def _open_append(path: Path) -> int:
    """``path`` opened to append (created ``0600``); a link there is refused, not followed."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(path, flags, 0o600)


def append_line(path: Path, line: str) -> None:
    """Append one line to a party's log ``path`` (:func:`_open_append`: no link followed)."""
    with os.fdopen(_open_append(path), "a", encoding="utf-8") as f:
        f.write(line + "\n")


_HEAD = struct.Struct("<II")


@dataclass(frozen=True)
class Entry:
    """One record of a transcript: who, which call, which way, and the payload."""

    seq: int
    time: float
    direction: str  # "sent" | "received"
    peer: str
    method: str
    payload: bytes


class Transcript:
    """A party's append-only record of every payload it sends and receives.

    File format: records of ``<u32 header length><u32 payload length><header JSON>
    <payload>``, the header ``{"seq", "time", "direction", "peer", "method"}``; the
    payload the bytes that crossed the wire (a Flower ``RecordDict`` or ``Message``).
    ``path = None``: nothing is recorded.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seq = 0
        self._file = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = os.fdopen(_open_append(path), "ab")  # held for the party's life

    def add(self, direction: str, peer: str, method: str, payload: bytes) -> None:
        """Append one record (thread-safe; flushed, so a killed party keeps what it wrote)."""
        if self._file is None:
            return
        with self._lock:
            head = json.dumps({"seq": self._seq, "time": time.time(), "direction": direction,
                               "peer": peer, "method": method}).encode()  # fmt: skip
            self._seq += 1
            self._file.write(_HEAD.pack(len(head), len(payload)) + head + payload)
            self._file.flush()

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None


def read_transcript(path: str | Path) -> Iterator[Entry]:
    """The records of a transcript file, in order (a truncated last record is dropped)."""
    data = Path(path).read_bytes()
    at = 0
    while at + _HEAD.size <= len(data):
        nh, npay = _HEAD.unpack_from(data, at)
        start = at + _HEAD.size
        if start + nh + npay > len(data):
            break
        head = json.loads(data[start : start + nh])
        payload = data[start + nh : start + nh + npay]
        yield Entry(head["seq"], head["time"], head["direction"], head["peer"], head["method"],
                    payload)  # fmt: skip
        at = start + nh + npay
