"""A unit server's local phase over Flower messages, and its aggregate ``ψ_p``.

:func:`local_phase` asks the round's sampled clients, through the unit's Flower ``Grid``
(``send_and_receive`` with ``deploy.client_timeout``), for their messages: with secure
aggregation first its key advertisement and key sharing (``query.secagg_advertise``,
``query.secagg_share``), then ``train`` (their messages, masked for secure aggregation),
then ``query.secagg_unmask`` (:class:`~pgfl.privacy.secagg.parties.SecAggServer` per
instance: one curve and repetition). :func:`aggregate` forms ``ψ_p`` as the engine's client
mechanisms do (eq. 7 of *Privatized Graph Federated Learning*, arXiv:2203.07105; journal
eqs. 54–55): the mean of the messages received (models), or ``w_{p,i−1} − μ·mean``
(updates). A sampled client that does not answer ``train`` leaves its unit without the
mean of L messages the ε of a plain mean was computed for: for such a curve the unit keeps
``w_{p,i−1}`` (an aborted round, as secure aggregation below its threshold t); secure
aggregation proceeds with the survivors (its dropout path) while at least t remain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import Message

from pgfl.deploy.client import ADVERTISE, SHARE, UNMASK
from pgfl.deploy.wire import Refused, array, records, unpack
from pgfl.privacy.mechanisms import SecureAggregationScheme
from pgfl.privacy.secagg.config import SecAggAbort, SecAggProtocolError
from pgfl.privacy.secagg.parties import KEY_BYTES, SecAggServer

__all__ = ["Replies", "aggregate", "local_phase"]


@dataclass
class Replies:
    """What the clients sent in a round.

    Attributes:
        x: clear messages ``[C, R, L, M]`` (NaN where none arrived).
        got: clients whose ``train`` reply arrived, ``[R, L]``.
        secagg: per instance ``(curve, rep index)``: ``(mean [M], counted words [2])``, or the
            abort's reason (a string).

    """

    x: np.ndarray
    got: np.ndarray
    secagg: dict[tuple[int, int], Any] = field(default_factory=dict)


def _ask(srv: Any, kind: str, i: int, per_client: dict[int, tuple[dict, dict]]) -> dict[int, tuple]:
    """Send each client its message; the decoded replies by client (malformed ones dropped).

    A reply is attributed to the client its TLS identity names (the grid checks that it
    answers a message sent to that client), never to what its metadata claims.
    """
    msgs = [Message(records(a, {"round": i, **c}), k + 1, kind, group_id=str(i))
            for k, (a, c) in per_client.items()]  # fmt: skip
    out = {}
    for reply in srv.grid.send_and_receive(msgs, timeout=srv.job.deploy.client_timeout):
        k = srv.grid.sent[reply.metadata.reply_to_message_id] - 1
        if reply.has_error():
            srv.log(f"round {i}: client {k} answered {kind} with an error")
            continue
        try:
            out[k] = unpack(reply.content)
        except Refused as exc:
            srv.log(f"round {i}: refused {kind} reply of client {k}: {exc}")
    return out


def local_phase(srv: Any, i: int, clients: np.ndarray) -> Replies:
    """The sampled clients' messages of round ``i`` (``clients [R, L]``, slot order)."""
    job = srv.job
    R, L = clients.shape
    slots = {int(k): np.argwhere(clients == k) for k in np.unique(clients)}  # k → [(r, l)]
    sa = [c for c, s in enumerate(job.settings) if isinstance(s.client, SecureAggregationScheme)]
    inst = {(c, r): SecAggServer(job.settings[c].client.config, unit=srv.p, round=i, L=L, extra=2)
            for c in sa for r in range(R)}  # fmt: skip
    out = Replies(np.full((job.C, R, L, job.M), np.nan), np.zeros((R, L), dtype=bool))
    inbox: dict[tuple[int, int], dict[int, dict[int, bytes]]] = {}
    if inst:
        _keys_and_shares(srv, i, slots, inst, inbox, out)
    lists = {k: _mine(k, rl, inst, out) for k, rl in slots.items()}
    train = {}
    for k, rl in slots.items():
        reps = rl[:, 0]
        a = {"reps": job.reps[reps], "slots": rl[:, 1], "w": srv.W[:, reps]}
        a.update(_inst_arrays(job, lists[k]))
        cts, ct_inst, ct_from = [], [], []
        for n, (c, r, u) in enumerate(lists[k]):
            for v, ct in inbox.get((c, r), {}).get(u, {}).items():
                cts.append(ct)
                ct_inst.append(n)
                ct_from.append(v)
        a.update(ct_inst=np.array(ct_inst, np.int64), ct_from=np.array(ct_from, np.int64))
        train[k] = (a, {"ct": cts} if cts else {})
    masked: dict[tuple[int, int], dict[int, np.ndarray]] = {key: {} for key in inst}
    for k, (arrays, _) in _ask(srv, "train", i, train).items():
        rl, mine = slots[k], lists[k]
        try:
            x = array(arrays, "x", (job.C, rl.shape[0], job.M))
            y_inst = array(arrays, "y_inst", (None,), "i")
            y = array(arrays, "y", (y_inst.size, job.M + 2), "u")
            if ((y_inst < 0) | (y_inst >= len(mine))).any():
                raise Refused("masked input for an unknown instance")
        except Refused as exc:
            srv.log(f"round {i}: refused the train reply of client {k}: {exc}")
            continue
        out.x[:, rl[:, 0], rl[:, 1]] = x
        out.got[rl[:, 0], rl[:, 1]] = True
        for n, row in zip(y_inst.tolist(), y, strict=True):
            c, r, u = mine[n]
            masked[(c, r)][u] = row.astype(job.settings[c].client.config.dtype)
    if inst:
        _unmask(srv, i, slots, inst, masked, out)
    return out


def _mine(k: int, rl: np.ndarray, inst: dict, out: Replies) -> list[tuple[int, int, int]]:
    """Client k's live instances ``(curve, rep index, slot)``, in a fixed order."""
    res = []
    for c, r in sorted(inst):
        if (c, r) in out.secagg:  # aborted already
            continue
        hit = rl[rl[:, 0] == r]
        if hit.size:
            res.append((c, r, int(hit[0, 1])))
    return res


def _inst_arrays(job: Any, mine: list[tuple[int, int, int]]) -> dict:
    return {
        "inst_curve": np.array([c for c, _, _ in mine], np.int64),
        "inst_rep": np.array([job.reps[r] for _, r, _ in mine], np.int64),
        "inst_slot": np.array([u for _, _, u in mine], np.int64),
    }


def _abort(out: Replies, key: tuple[int, int], exc: Exception) -> None:
    out.secagg[key] = str(exc)


def _keys_and_shares(srv, i, slots, inst, inbox, out) -> None:
    """Rounds 0-1 of secure aggregation: keys advertised and broadcast, shares relayed."""
    job, L = srv.job, srv.job.L
    lists = {k: _mine(k, rl, inst, out) for k, rl in slots.items()}
    ask = {k: (_inst_arrays(job, lists[k]), {}) for k in slots}
    adv: dict[tuple[int, int], dict] = {key: {} for key in inst}
    for k, (arrays, _) in _ask(srv, ADVERTISE, i, ask).items():
        mine = lists[k]
        try:
            c_pk = array(arrays, "c_pk", (len(mine), KEY_BYTES), "u")
            s_pk = array(arrays, "s_pk", (len(mine), KEY_BYTES), "u")
        except Refused as exc:
            srv.log(f"round {i}: refused the keys of client {k}: {exc}")
            continue
        for n, (c, r, u) in enumerate(mine):
            adv[(c, r)][u] = (c_pk[n].tobytes(), s_pk[n].tobytes())
    keys = {}
    for key, server in inst.items():
        try:
            keys[key] = server.keys(adv[key])
        except (SecAggAbort, SecAggProtocolError) as exc:
            _abort(out, key, exc)
    lists = {k: _mine(k, rl, inst, out) for k, rl in slots.items()}
    ask = {}
    for k, mine in lists.items():
        kc = np.zeros((len(mine), L, KEY_BYTES), np.uint8)
        ks, has = np.zeros_like(kc), np.zeros((len(mine), L), bool)
        for n, (c, r, _) in enumerate(mine):
            for v, (a, b) in keys[(c, r)].items():
                kc[n, v] = np.frombuffer(a, np.uint8)
                ks[n, v] = np.frombuffer(b, np.uint8)
                has[n, v] = True
        ask[k] = ({**_inst_arrays(job, mine), "keys_c": kc, "keys_s": ks, "advertised": has}, {})
    sent: dict[tuple[int, int], dict[int, dict[int, bytes]]] = {key: {} for key in inst}
    for k, (arrays, config) in _ask(srv, SHARE, i, ask).items():
        mine = lists[k]
        cts = list(config.get("ct", []))
        try:
            at = array(arrays, "ct_inst", (len(cts),), "i")
            to = array(arrays, "ct_to", (len(cts),), "i")
        except Refused as exc:
            srv.log(f"round {i}: refused the shares of client {k}: {exc}")
            continue
        for n, (c, r, u) in enumerate(mine):
            sent[(c, r)][u] = {int(v): bytes(ct) for j, (v, ct)
                               in enumerate(zip(to, cts, strict=True)) if at[j] == n}  # fmt: skip
    for key, server in inst.items():
        if key in out.secagg:
            continue
        try:
            inbox[key] = server.relay({u: m for u, m in sent[key].items()})
        except (SecAggAbort, SecAggProtocolError) as exc:
            _abort(out, key, exc)


def _unmask(srv, i, slots, inst, masked, out) -> None:
    """Rounds 2-3: U3 announced, shares revealed, each instance's mean and counted words."""
    job = srv.job
    requests = {}
    for key, server in inst.items():
        if key in out.secagg:
            continue
        try:
            requests[key] = server.requests(masked[key])
        except (SecAggAbort, SecAggProtocolError) as exc:
            _abort(out, key, exc)
    lists = {k: [(c, r, u) for c, r, u in _mine(k, rl, inst, out) if u in requests[(c, r)]]
             for k, rl in slots.items()}  # fmt: skip
    ask = {}
    for k, mine in lists.items():
        a = _inst_arrays(job, mine)
        a["u3"] = np.array([requests[(c, r)][u][0] for c, r, u in mine], bool).reshape(-1, job.L)
        for kind, col in (("b", 1), ("s", 2)):
            inst_ix = [n for n, (c, r, u) in enumerate(mine) for _ in requests[(c, r)][u][col]]
            owners = [int(o) for c, r, u in mine for o in requests[(c, r)][u][col]]
            a[f"{kind}_inst"], a[f"{kind}_owner"] = (
                np.array(inst_ix, np.int64),
                np.array(owners, np.int64),
            )
        ask[k] = (a, {})
    answers: dict[tuple[int, int], dict[int, tuple[dict, dict]]] = {key: {} for key in inst}
    for k, (arrays, _) in _ask(srv, UNMASK, i, {k: v for k, v in ask.items() if lists[k]}).items():
        mine = lists[k]
        try:
            got = {}
            for kind in ("b", "s"):
                ix = array(arrays, f"{kind}_inst", (None,), "i")
                owner = array(arrays, f"{kind}_owner", (ix.size,), "i")
                share = array(arrays, f"{kind}_share", (ix.size, None), "i")
                if ((ix < 0) | (ix >= len(mine))).any():
                    raise Refused("shares for an unknown instance")
                got[kind] = (ix, owner, share)
        except Refused as exc:
            srv.log(f"round {i}: refused the shares of client {k}: {exc}")
            continue
        for n, (c, r, u) in enumerate(mine):
            pick = [{int(o): sh for j, o, sh in zip(*got[kind], strict=True) if j == n}
                    for kind in ("b", "s")]  # fmt: skip
            answers[(c, r)][u] = (pick[0], pick[1])
    for key, server in inst.items():
        if key in out.secagg:
            continue
        try:
            out.secagg[key] = server.result(answers[key])
        except (SecAggAbort, SecAggProtocolError) as exc:
            _abort(out, key, exc)


def aggregate(srv: Any, i: int, clients: np.ndarray, rep: Replies) -> tuple:
    """``ψ_p [C, R, M]``, aborted ``[C, R]`` and clipped counts ``[C, R]`` of round ``i``."""
    job, W = srv.job, srv.W
    C, R = job.C, job.R
    psi = np.empty_like(W)
    aborted = np.zeros((C, R), dtype=bool)
    clipped = np.zeros((C, R), dtype=np.int64)
    for c, s in enumerate(job.settings):
        mu, updates = job.curves.mu[c], bool(job.curves.updates[c])
        if isinstance(s.client, SecureAggregationScheme):
            for r in range(R):
                res = rep.secagg[(c, r)]
                if isinstance(res, str):
                    srv.log(f"round {i}: curve {c} repetition {job.reps[r]}: secure "
                            f"aggregation aborted ({res}); the unit keeps its model")  # fmt: skip
                    psi[c, r], aborted[c, r] = W[c, r], True
                    continue
                mean, counted = res
                clipped[c, r] = counted[0]
                psi[c, r] = W[c, r] - mu * mean if updates else mean
                if counted[1] > 0 or (not updates and counted[0] > 0):
                    psi[c, r] = np.nan  # a message left the protocol's range: diverged
            continue
        for r in range(R):
            if not rep.got[r].all():
                missing = clients[r][~rep.got[r]].tolist()
                srv.log(f"round {i}: curve {c} repetition {job.reps[r]}: clients {missing} did "
                        "not answer; without secure aggregation the unit keeps its model"
                        )  # fmt: skip
                psi[c, r], aborted[c, r] = W[c, r], True
                continue
            mean = rep.x[c, r][None, None].mean(axis=2)[0, 0]  # the engine's mean over L
            psi[c, r] = W[c, r] - mu * mean if updates else mean
    return psi, aborted, clipped
