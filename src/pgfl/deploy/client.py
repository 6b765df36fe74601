"""A client party: its own data, its local training, its side of the privacy mechanisms.

The client is a Flower ``ClientApp`` (``flwr.clientapp``): the unit server sends it Flower
messages (:mod:`pgfl.deploy.server`) and it answers each with a reply ``Message``.

* ``train``: the server's model ``w_{p,i−1}`` for the repetitions in which the client was
  sampled and its slot in each; the client runs its local SGD (eq. 3 of *Privatized Graph
  Federated Learning*, arXiv:2203.07105; :func:`pgfl.engine.step.local_models` on a block
  of one client) and replies with its message per curve: its model, or its update
  ``(w_{p,i−1} − w_pk)/μ`` (journal §3.4).
* :func:`noise_mod` (a Flower mod): on the way out, a curve with client noise
  (``ClientNoise``) gets the client's own noise added to its message (eq. 7; journal eqs.
  54–55), drawn by the client: the server never sees the message without it.
* :func:`secagg_mod` (a Flower mod): the client's side of secure aggregation
  (:class:`~pgfl.privacy.secagg.parties.SecAggClient`): it answers the server's
  ``query.secagg_advertise``, ``query.secagg_share`` and ``query.secagg_unmask`` itself,
  and on the way out of ``train`` replaces a secure-aggregation curve's message by its
  masked input ``y_u`` (with two counted words: the message was clipped, or not finite).
  A client that drops out (``privacy.dropout``: after sharing its keys) sends no ``y_u``
  and does not unmask.

In simulation mode every draw is the engine's keyed draw at the client's slot
(:class:`~pgfl.deploy.draws.SlotDraws`), so the client computes what the engine computes
for it; in deployment mode its draws come from its own key
(:class:`~pgfl.deploy.draws.SecretDraws`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp

from pgfl.data.federated import FederatedData
from pgfl.deploy.draws import SecretDraws, SlotDraws, note_secret
from pgfl.deploy.job import Job, Shard
from pgfl.deploy.wire import Refused, array, records, unpack
from pgfl.engine import compiled
from pgfl.engine.network import UnitBlock
from pgfl.engine.step import local_models
from pgfl.privacy.mechanisms import ClientNoise, SecureAggregationScheme
from pgfl.privacy.secagg import shamir
from pgfl.privacy.secagg.config import SecAggProtocolError
from pgfl.privacy.secagg.crypto import SECRET_BYTES
from pgfl.privacy.secagg.parties import KEY_BYTES, SecAggClient
from pgfl.rng import KeyedDraws

__all__ = ["ClientNode", "local_kind", "make_app"]

#: Flower message types of the secure-aggregation stages (``query.<action>``).
ADVERTISE, SHARE, UNMASK = "query.secagg_advertise", "query.secagg_share", "query.secagg_unmask"


def _block(job: Job, unit: int, shard: Shard) -> UnitBlock:
    """The engine's block of this one client (its unit's id: the keys of its draws)."""
    data = FederatedData(shard.X[None, None], shard.y[None, None], np.array([[shard.count]]))
    return UnitBlock(
        start=unit,
        data=data,
        problem=job.problem,
        L=1,
        epochs=np.array([[shard.epochs]]),
        batch=None if shard.batch is None else np.array([[shard.batch]]),
        e_max=job.e_max,
        b_max=job.b_max,
    )


class ClientNode:
    """Client ``k`` of unit ``p``: its data, its key (deployment mode), its secagg state."""

    def __init__(self, job: Job, unit: int, client: int, shard: Shard, key: bytes) -> None:
        self.job, self.unit, self.client = job, unit, client
        self.block = _block(job, unit, shard)
        self._key = key
        self.kind = local_kind(job)
        self.secagg: dict[tuple[int, int], SecAggClient] = {}
        self.round = 0
        self.events: list[str] = []

    # ---------------------------------------------------------------------------- draws
    def draws(self, i: int, reps: np.ndarray, slots: np.ndarray) -> Any:
        """The client's draws in round ``i`` (its slot in the unit's sample, or its own)."""
        if self.job.deploy.mode == "simulation":
            base = KeyedDraws(self.job.seed, i, reps, [self.unit])
            return SlotDraws(base, slots, self.job.L)
        return SecretDraws(self._key, i, reps, [self.unit])

    def _round_args(self, arrays: dict, config: dict) -> tuple[int, np.ndarray, np.ndarray]:
        i = int(config.get("round", -1))
        if not 1 <= i <= self.job.iterations:
            raise Refused(f"round {i} outside 1..{self.job.iterations}")
        reps = array(arrays, "reps", (None,), "i")
        slots = array(arrays, "slots", (reps.size,), "i")
        known = np.isin(reps, self.job.reps).all()
        if not known or ((slots < 0) | (slots >= self.job.L)).any():
            raise Refused("unknown repetition or slot")
        return i, reps, slots

    # ---------------------------------------------------------------------------- train
    def train(self, msg: Message) -> Message:
        """Local SGD from the server's models; the messages ``[C, R', M]`` (clear)."""
        arrays, config = unpack(msg.content)
        i, reps, slots = self._round_args(arrays, config)
        job = self.job
        W = array(arrays, "w", (job.C, reps.size, job.M))
        curves = job.curves
        with np.errstate(over="ignore", invalid="ignore"):
            local = self.local(i, W, reps, slots)
            x = local.copy()
            for c in np.flatnonzero(curves.updates):
                x[c] = (W[c] - local[c]) / curves.mu[c]
        self.round = i
        return Message(records({"x": x}, {"round": i}), reply_to=msg)

    def local(self, i: int, W: np.ndarray, reps: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """The client's local models ``[C, R', M]`` from its unit's models ``W [C, R', M]``.

        Simulation mode, with the engine's compiled kernel (numba): the kernel of a block of
        this one client, in every slot of the unit's sample (the keys of its mini-batch
        draws), of which the client keeps its own — the engine's bits, at L times the
        client's work. Otherwise the engine's numpy step on the client's block with its
        slot's draws (:class:`~pgfl.deploy.draws.SlotDraws`) or its own generator.
        """
        job = self.job
        if self.kind == "compiled":
            base = KeyedDraws(job.seed, i, reps, [self.unit])
            every = np.zeros((reps.size, 1, job.L), dtype=np.int64)
            out = compiled.local_models(W[:, :, None], self.block, job.curves, base, every)
            return out[:, np.arange(reps.size), 0, slots]
        draws = self.draws(i, reps, slots)
        one = np.zeros((reps.size, 1, 1), dtype=np.int64)
        return local_models(W[:, :, None], self.block, job.curves, draws, one)[:, :, 0, 0]

    # ---------------------------------------------------------------------------- noise
    def noise_mod(self, msg: Message, ctx: Context, call_next: Any) -> Message:
        """Flower mod: add the client's own noise to a client-noise curve's message."""
        reply = call_next(msg, ctx)
        if msg.metadata.message_type != "train" or reply.has_error():
            return reply
        arrays, config = unpack(reply.content)
        a_in, c_in = unpack(msg.content)
        i, reps, slots = self._round_args(a_in, c_in)
        draws = self.draws(i, reps, slots)
        x = arrays["x"]
        M = self.job.M
        for c, s in enumerate(self.job.settings):
            if isinstance(s.client, ClientNoise) and s.client.std > 0:
                g = draws.noise("client_noise", s.client.distribution, (1, M))[:, 0, 0]
                x[c] = x[c] + s.client.std * g
                if self.job.deploy.mode != "simulation":
                    note_secret("client-noise", np.ascontiguousarray(g).tobytes())
        return Message(records({"x": x}, config), reply_to=msg)

    # --------------------------------------------------------------------------- secagg
    def _instances(self, arrays: dict) -> list[tuple[int, int, int]]:
        """The secure-aggregation instances of a message: ``(curve, rep, slot)`` each."""
        cur = array(arrays, "inst_curve", (None,), "i")
        rep = array(arrays, "inst_rep", (cur.size,), "i")
        slot = array(arrays, "inst_slot", (cur.size,), "i")
        out = []
        for c, r, u in zip(cur.tolist(), rep.tolist(), slot.tolist(), strict=True):
            ok = 0 <= c < self.job.C and r in self.job.reps and 0 <= u < self.job.L
            if not ok or not isinstance(self.job.settings[c].client, SecureAggregationScheme):
                raise Refused(f"no secure-aggregation instance ({c}, {r}, {u})")
            out.append((c, r, u))
        return out

    def secagg_mod(self, msg: Message, ctx: Context, call_next: Any) -> Message:
        """Flower mod: the client's side of secure aggregation (module doc)."""
        kind = msg.metadata.message_type
        if kind not in (ADVERTISE, SHARE, UNMASK, "train"):
            return call_next(msg, ctx)
        arrays, config = unpack(msg.content)
        i = int(config.get("round", -1))
        if kind == ADVERTISE:
            return self._advertise(msg, arrays, i)
        if kind == SHARE:
            return self._share(msg, arrays, config)
        if kind == UNMASK:
            return self._unmask(msg, arrays)
        reply = call_next(msg, ctx)
        if "inst_curve" not in arrays or reply.has_error():
            return reply
        return self._masked(msg, reply, arrays, config)

    def _advertise(self, msg: Message, arrays: dict, i: int) -> Message:
        self.secagg = {}
        keys = []
        for c, r, u in self._instances(arrays):
            cfg = self.job.settings[c].client.config
            party = SecAggClient(cfg, unit=self.unit, round=i, client=u, L=self.job.L)
            self.secagg[(c, r)] = party
            keys.append(party.advertise())
        n = len(keys)
        c_pk = np.frombuffer(b"".join(k[0] for k in keys), np.uint8).reshape(n, KEY_BYTES)
        s_pk = np.frombuffer(b"".join(k[1] for k in keys), np.uint8).reshape(n, KEY_BYTES)
        return Message(records({"c_pk": c_pk, "s_pk": s_pk}), reply_to=msg)

    def _party(self, c: int, r: int) -> SecAggClient:
        party = self.secagg.get((c, r))
        if party is None:
            raise Refused(f"secure-aggregation instance ({c}, {r}) was not advertised")
        return party

    def _share(self, msg: Message, arrays: dict, config: dict) -> Message:
        inst = self._instances(arrays)
        L = self.job.L
        keys_c = array(arrays, "keys_c", (len(inst), L, KEY_BYTES), "u")
        keys_s = array(arrays, "keys_s", (len(inst), L, KEY_BYTES), "u")
        has = array(arrays, "advertised", (len(inst), L), "b")
        cts, to, at = [], [], []
        for n, (c, r, _) in enumerate(inst):
            public = {v: (keys_c[n, v].tobytes(), keys_s[n, v].tobytes())
                      for v in np.flatnonzero(has[n]).tolist()}  # fmt: skip
            for v, ct in self._party(c, r).share(public).items():
                cts.append(ct)
                to.append(v)
                at.append(n)
        out = {"ct_inst": np.array(at, np.int64), "ct_to": np.array(to, np.int64)}
        return Message(records(out, {"ct": cts}), reply_to=msg)

    def _masked(self, msg: Message, reply: Message, arrays: dict, config: dict) -> Message:
        """``y_u`` for each instance the client stays in; its clear message withheld."""
        inst = self._instances(arrays)
        cts = list(config.get("ct", []))
        ct_inst = array(arrays, "ct_inst", (len(cts),), "i")
        ct_from = array(arrays, "ct_from", (len(cts),), "i")
        out, r_cfg = unpack(reply.content)
        x = out["x"]
        i, reps, slots = self._round_args(arrays, config)
        u = self.draws(i, reps, slots).uniform("dropout", (1,))[:, 0, 0]
        rep_index = {int(r): j for j, r in enumerate(reps.tolist())}
        ys, kept = [], []
        for n, (c, r, _) in enumerate(inst):
            scheme = self.job.settings[c].client
            message = x[c, rep_index[r]]
            if u[rep_index[r]] < scheme.dropout:  # drops out after sharing its keys
                self.events.append(f"round {i}: dropped out of curve {c}, repetition {r}")
                continue
            finite = bool(np.isfinite(message).all())
            message = message if finite else np.zeros_like(message)
            over = bool((np.abs(message) > scheme.config.clip).any())
            inbox = {int(f): cts[j] for j, f in enumerate(ct_from.tolist()) if ct_inst[j] == n}
            try:
                y = self._party(c, r).masked_input(inbox, message, np.array([over, not finite]))
            except SecAggProtocolError as exc:
                raise Refused(str(exc)) from None
            ys.append(y)
            kept.append(n)
        for c, s in enumerate(self.job.settings):  # never sent in the clear
            if isinstance(s.client, SecureAggregationScheme):
                x[c] = 0.0
        dtype = ys[0].dtype if ys else np.uint64
        y = np.stack(ys) if ys else np.zeros((0, self.job.M + 2), dtype)
        new = {"x": x, "y": y, "y_inst": np.array(kept, np.int64)}
        return Message(records(new, r_cfg), reply_to=msg)

    def _unmask(self, msg: Message, arrays: dict) -> Message:
        inst = self._instances(arrays)
        L = self.job.L
        u3 = array(arrays, "u3", (len(inst), L), "b")
        b_inst, b_owner = (
            array(arrays, "b_inst", (None,), "i"),
            array(arrays, "b_owner", (None,), "i"),
        )
        s_inst, s_owner = (
            array(arrays, "s_inst", (None,), "i"),
            array(arrays, "s_owner", (None,), "i"),
        )
        rows = {"b": [], "s": []}
        for n, (c, r, _) in enumerate(inst):
            b_for, s_for = b_owner[b_inst == n], s_owner[s_inst == n]
            try:
                b, s = self._party(c, r).unmask(u3[n], b_for, s_for)
            except SecAggProtocolError as exc:
                raise Refused(str(exc)) from None
            rows["b"] += [(n, o, sh) for o, sh in b.items()]
            rows["s"] += [(n, o, sh) for o, sh in s.items()]
        out = {}
        for kind, got in rows.items():
            out[f"{kind}_inst"] = np.array([g[0] for g in got], np.int64)
            out[f"{kind}_owner"] = np.array([g[1] for g in got], np.int64)
            shares = np.array([g[2] for g in got], np.int64)
            out[f"{kind}_share"] = shares.reshape(len(got), shamir.chunks_for(SECRET_BYTES))
        return Message(records(out), reply_to=msg)


def local_kind(job: Job) -> str:
    """The local phase the clients run: ``compiled`` (simulation mode, numba) or ``numpy``."""
    if job.deploy.mode == "simulation" and compiled.local_phase_kind(job.problem) == "compiled":
        return "compiled"
    return "numpy"


def make_app(node: ClientNode) -> ClientApp:
    """The client's Flower ``ClientApp``: ``train`` and the secure-aggregation queries.

    Mods (outermost first): :meth:`ClientNode.secagg_mod`, :meth:`ClientNode.noise_mod`.
    """
    app = ClientApp(mods=[node.secagg_mod, node.noise_mod])

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return node.train(msg)

    def stage(msg: Message, context: Context) -> Message:  # answered by secagg_mod
        raise Refused(f"{msg.metadata.message_type} is answered by the secure-aggregation mod")

    for action in ("secagg_advertise", "secagg_share", "secagg_unmask"):
        app.query(action)(stage)
    return app


def new_context(node_id: int, unit: int, client: int) -> Context:
    """The Flower ``Context`` of a client node (its state stays in its process)."""
    return Context(
        run_id=0,
        node_id=node_id,
        node_config={"unit": unit, "client": client},
        state=RecordDict(),
        run_config={},
    )


def client_key() -> bytes:
    """The client's generator key (deployment mode), from the operating system."""
    return os.urandom(32)
