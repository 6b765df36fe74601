"""A party's random numbers: the simulator's keyed draws, or its own secure generator.

Every per-round draw of the engine (client sampling, mini-batches, dropout, client and
server noise) comes from an object with the interface of :class:`pgfl.rng.KeyedDraws`.
A deployment runs in one of two modes (``deploy.mode``):

* ``"simulation"``: the keyed draws themselves, from the root seed — a deployed run then
  reproduces ``pgfl run`` (the same numbers, the same order of operations). Anyone who
  knows the seed knows every draw: this mode is for checking the deployment, not for
  privacy.
* ``"deployment"``: :class:`SecretDraws`, a cryptographically secure generator per party.
  Each party draws a 32-byte key from the operating system (``os.urandom``) when it
  starts; a cell ``(stream, round, repetition, unit)`` is keyed by
  ``HKDF-SHA256(key, info = stream ‖ round ‖ repetition ‖ unit)`` and its ``n``-th number
  is the ``n``-th little-endian 64-bit word of the AES-256-CTR keystream under that key,
  mapped to a uniform in (0, 1) and to noise by the same inverse CDFs as the keyed draws
  (:func:`pgfl.rng.unit_noise`), so the distributions are the simulator's. A pair of servers
  draws its pairwise-cancelling terms from the secret of its X25519 agreement
  (:meth:`SecretDraws.edge_noise`). The key never leaves the party's process.

A client draws as the slot it holds in its unit's sample (:class:`SlotDraws`): in
simulation mode the keyed draws of its unit at that slot, so that a client alone computes
what the engine computes for it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence

import numpy as np

from pgfl.privacy.secagg.crypto import hkdf_sha256, keystream
from pgfl.rng import KeyedDraws, unit_noise
from pgfl.validation import ConfigError

__all__ = ["SECRETS_ENV", "SecretDraws", "SlotDraws", "new_key", "note_secret"]

#: Domain-separation label of a party's draws.
LABEL = b"pgfl-deploy-draws-v1/"


def new_key() -> bytes:
    """A party's 32-byte generator key, from the operating system's secure source."""
    return os.urandom(32)


def _uniforms(key: bytes, count: int) -> np.ndarray:
    """``count`` uniforms in (0, 1): AES-256-CTR words ``w``, ``(⌊w / 2^11⌋ + ½) · 2^-53``."""
    words = np.frombuffer(keystream(key, 8 * count), dtype="<u8")
    return ((words >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


class SecretDraws:
    """A party's secure draws for one round, with the interface of :class:`~pgfl.rng.KeyedDraws`.

    Args:
        key: the party's 32-byte key (:func:`new_key`).
        round: the iteration ``i``.
        reps: repetition ids ``[R]``; units: the cells' unit ids ``[P_b]``.
        edges: ``{(lo, hi): secret}`` of the pairwise terms this party shares.

    >>> d = SecretDraws(bytes(32), 1, [0, 1], [4])
    >>> u = d.uniform("batches", (3,))
    >>> u.shape, bool(((0 < u) & (u < 1)).all())
    ((2, 1, 3), True)
    >>> bool((u == SecretDraws(bytes(32), 1, [0, 1], [4]).uniform("batches", (3,))).all())
    True

    """

    def __init__(
        self,
        key: bytes,
        round: int,
        reps: Sequence[int],
        units: Sequence[int],
        edges: Mapping[tuple[int, int], bytes] | None = None,
    ) -> None:
        if len(key) != 32:
            raise ConfigError("a party's generator key must be 32 bytes")
        self._key = key
        self.round = int(round)
        self.reps = np.asarray(reps, dtype=np.int64)
        self.units = np.asarray(units, dtype=np.int64)
        self._edges = dict(edges or {})
        self._noise: dict[tuple, np.ndarray] = {}

    def _cell(self, stream_name: str, rep: int, unit: int) -> bytes:
        tag = struct.pack("<qqq", self.round, rep, unit)
        return hkdf_sha256(self._key, LABEL + stream_name.encode() + b"/" + tag)

    def uniform(self, stream_name: str, shape: tuple[int, ...]) -> np.ndarray:
        """Uniforms in (0, 1), ``[R, P_b, *shape]``."""
        n = int(np.prod(shape))
        out = np.empty((self.reps.size, self.units.size, n))
        for r, rep in enumerate(self.reps.tolist()):
            for p, unit in enumerate(self.units.tolist()):
                out[r, p] = _uniforms(self._cell(stream_name, rep, unit), n)
        return out.reshape(self.reps.size, self.units.size, *shape)

    def noise(self, stream_name: str, distribution: str, shape: tuple[int, ...]) -> np.ndarray:
        """Unit-variance noise ``[R, P_b, *shape]`` (cached for the round, read-only)."""
        key = (stream_name, distribution, tuple(shape))
        out = self._noise.get(key)
        if out is None:
            out = unit_noise(self.uniform(f"{stream_name}.{distribution}", shape), distribution)
            out.flags.writeable = False
            self._noise[key] = out
        return out

    def drawn(self) -> list[np.ndarray]:
        """The noise arrays drawn so far this round (for the test that none leaks)."""
        return [np.ascontiguousarray(a) for a in self._noise.values()]

    def uniform_at(self, stream_name: str, rows: np.ndarray, counters: np.ndarray) -> np.ndarray:
        """Uniforms ``[R, n, ...]``: entry ``counters[j, ...]`` of the cell of unit ``rows[j]``."""
        c = np.atleast_1d(np.asarray(counters, dtype=np.int64))
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((self.reps.size, *c.shape))
        for r, rep in enumerate(self.reps.tolist()):
            for j, row in enumerate(rows.tolist()):
                cell = self._cell(stream_name, rep, int(self.units[row]))
                out[r, j] = _uniforms(cell, int(c[j].max()) + 1)[c[j]]
        return out

    def noise_at(
        self, stream_name: str, distribution: str, rows: np.ndarray, counters: np.ndarray
    ) -> np.ndarray:
        """Unit-variance noise at sparse counters (see :meth:`uniform_at`)."""
        u = self.uniform_at(f"{stream_name}.{distribution}", rows, counters)
        return unit_noise(u, distribution)

    def cells(self, units: Sequence[int]) -> SecretDraws:
        """The same party's draws of other cells (a trusted party's own), same round and key."""
        return SecretDraws(self._key, self.round, self.reps, units, self._edges)

    def edge_noise(
        self, stream_name: str, distribution: str, lo: np.ndarray, hi: np.ndarray, dim: int
    ) -> np.ndarray:
        """``[R, e, dim]``: each edge's terms from the secret its two ends agreed on."""
        out = np.empty((self.reps.size, len(lo), dim))
        for j, edge in enumerate(
            zip(np.asarray(lo).tolist(), np.asarray(hi).tolist(), strict=True)
        ):
            secret = self._edges.get(edge)
            if secret is None:
                raise ConfigError(f"no agreed secret for the pairwise terms of edge {edge}")
            for r, rep in enumerate(self.reps.tolist()):
                tag = struct.pack("<qq", self.round, rep)
                cell = hkdf_sha256(secret, LABEL + stream_name.encode() + b"/edge/" + tag)
                out[r, j] = unit_noise(_uniforms(cell, dim), distribution)
        return out


class SlotDraws:
    """A client's draws as slot ``slots[r]`` of its unit's sample in each repetition ``r``.

    ``base``: the unit's draws for the repetitions the client was sampled in (keyed draws
    of cell ``(r, unit)``; the engine indexes a slot's numbers by slot first), ``L``: the
    unit's sample size. ``uniform(name, (1, *rest))`` is the engine's
    ``uniform(name, (L, *rest))`` of the unit at the client's slot, shaped
    ``[R', 1, 1, *rest]``: what the engine's one-client block needs.

    >>> base = KeyedDraws(0, 3, [0, 1], [2])
    >>> mine = SlotDraws(base, np.array([4, 0]), 5).uniform("batches", (1, 2))
    >>> whole = base.uniform("batches", (5, 2))
    >>> bool((mine[:, 0, 0] == whole[[0, 1], 0, [4, 0]]).all())
    True
    """

    def __init__(self, base: KeyedDraws, slots: np.ndarray, L: int) -> None:
        self.base, self.slots, self.L = base, np.asarray(slots, dtype=np.int64), int(L)
        self.reps, self.units, self.round = base.reps, base.units, base.round

    def _at_slot(self, whole: np.ndarray) -> np.ndarray:
        picked = whole[np.arange(self.slots.size), 0, self.slots]  # [R', *rest]
        return picked[:, None, None]

    def uniform(self, stream_name: str, shape: tuple[int, ...]) -> np.ndarray:
        """The unit's uniforms at the client's slot, ``[R', 1, 1, *shape[1:]]``."""
        return self._at_slot(self.base.uniform(stream_name, (self.L, *shape[1:])))

    def noise(self, stream_name: str, distribution: str, shape: tuple[int, ...]) -> np.ndarray:
        """The unit's noise at the client's slot, ``[R', 1, 1, *shape[1:]]``."""
        return self._at_slot(self.base.noise(stream_name, distribution, (self.L, *shape[1:])))


#: Environment variable naming a folder where each party lists the secrets it drew (for
#: the test that no other party's transcript or log contains them). Never set it in a
#: real deployment: it writes secrets to disk.
SECRETS_ENV = "PGFL_DEPLOY_SECRETS"
#: The name of the party this process runs (set by :mod:`pgfl.deploy.party`).
PARTY = {"name": ""}


def note_secret(label: str, data: bytes) -> None:
    """Test hook: append a secret this party drew to its list (only with :data:`SECRETS_ENV`)."""
    folder = os.environ.get(SECRETS_ENV)
    if not folder or not PARTY["name"]:
        return
    with open(os.path.join(folder, f"{PARTY['name']}.secrets"), "a", encoding="ascii") as f:
        f.write(f"{label} {data.hex()}\n")
