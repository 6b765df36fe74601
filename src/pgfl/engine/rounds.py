"""Whole GFL rounds in compiled code, several per call (numba, extra ``fast``).

:func:`pgfl.engine.simulate` runs its rounds here when the loss is a built-in one (the
compiled local phase, :mod:`pgfl.engine.compiled`) and every curve's mechanisms are among
:data:`CLIENT_CODES` and :data:`SERVER_CODES`; otherwise (secure aggregation, correlated,
gossip or topology-optimized noise, a scheme of your own, a JAX model or a loss of your
own) it runs :func:`pgfl.engine.step.round_step` round by round, whose functions define
what a round computes. A call here runs up to :data:`ROUNDS_PER_CALL` rounds of every
curve and repetition (sampling, local SGD, aggregation with client noise, link noise,
messages, combination, divergence and the history of models) with no Python in between;
everything about the run (arrays, settings, thread count, the local phase chosen by
``PGFL_LOCAL_PHASE``) is prepared once, by :meth:`CompiledRounds.prepare`.

The results are those of :func:`~pgfl.engine.step.round_step`, bit for bit
(:mod:`pgfl.engine._round_kernels` repeats numpy's summation orders). The noise values
are computed by numpy before each call (:func:`pgfl.rng.unit_noise`, vectorized over the
call's rounds), because numpy's ``log1p`` and the C library's differ in the last bit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from pgfl.engine import compiled
from pgfl.engine.network import Network, scans_clients
from pgfl.engine.settings import CurveBatch
from pgfl.privacy.mechanisms import (
    CentralNoise,
    ClientNoise,
    GraphHomomorphic,
    Mean,
    PerLinkNoise,
    RandomNoise,
)
from pgfl.privacy.mechanisms.server import AGGREGATOR
from pgfl.rng import stream_key, unit_noise

#: Client aggregations the compiled rounds run (exactly these classes): the mean, and the
#: mean plus the clients' averaged noise (:meth:`ClientNoise.aggregate`).
CLIENT_CODES: dict[type, int] = {Mean: 0, ClientNoise: 1}
#: Server schemes the compiled rounds run (exactly these classes; silent ones add nothing):
#: 1 one draw per sender times a coefficient per link (:meth:`RandomNoise.link_noise`,
#: :meth:`GraphHomomorphic.coefficients`), 2 one draw per link, 3 the aggregator's draw.
SERVER_CODES: dict[type, int] = {
    RandomNoise: 1,
    GraphHomomorphic: 1,
    PerLinkNoise: 2,
    CentralNoise: 3,
}
#: The stream family of the client noise (0) and of each server code.
FAMILIES = {0: "client_noise", 1: "server_noise", 2: "link_noise", 3: "central_noise"}
#: False: :func:`pgfl.engine.simulate` runs every batch round by round (the same bits;
#: for comparisons).
WHOLE_ROUNDS = True
#: Most rounds per call (also the metrics' chunk: :data:`pgfl.engine.simulate.METRICS_CHUNK`).
ROUNDS_PER_CALL = 64
#: Bytes of noise drawn ahead per call: runs with much noise per round make shorter calls.
NOISE_BYTES = 8 << 20
#: Sampling cells a worker takes at a time in a parallel call, per thread: a few claims each.
_CLAIMS_PER_THREAD = 8
#: Calls after which the thread count that ran slower is timed again (:class:`_Pace`).
RETRY_CALLS = 8
#: False: every call of a run whose rounds are large enough for the threads runs on all of
#: them (``pgfl bench --threads`` measures so); True: :class:`_Pace` chooses per call.
ADAPTIVE = True


def unsupported(net: Network, batch: CurveBatch) -> str | None:
    """Why the compiled rounds cannot run this batch (``None``: they can).

    >>> from pgfl.engine.settings import CurveSettings
    >>> from pgfl.privacy.mechanisms import SecureAggregationScheme
    >>> from pgfl.privacy.secagg import SecAggConfig
    >>> secagg = SecureAggregationScheme(SecAggConfig())
    >>> unsupported(None, CurveBatch.of([CurveSettings(mu=0.1, client=secagg)]))
    'client aggregation SecureAggregationScheme'
    """
    for group in batch.client_groups:
        if group.cls not in CLIENT_CODES:
            return f"client aggregation {group.cls.__name__}"
    for group in batch.server_groups:
        if group.cls not in SERVER_CODES:
            return f"server noise {group.cls.__name__}"
    kind = compiled.local_phase_kind(net.problem)
    if kind != "compiled":
        return f"loss {type(net.problem).__name__} (local phase {kind})"
    return None


@dataclass
class _Noise:
    """One stream family's noise for a call, ``values[D, T, R, rows, n]``, and how to draw it.

    Entry ``[d, t, r, i, j]`` is the unit-variance noise of distribution ``dists[d]`` at
    counter ``counters[i, j]`` of cell ``(reps[r], rows[i])`` of stream
    ``family.<distribution>`` in round ``rnd0 + t``: what :meth:`pgfl.rng.KeyedDraws.noise`
    (and ``noise_at``) give for those rounds.
    """

    family: str
    dists: tuple[str, ...]
    rows: np.ndarray
    counters: np.ndarray
    values: np.ndarray

    def draw(self, seed: int, rnd0: int, reps: np.ndarray, T: int, kernels: Any) -> None:
        """Rounds ``rnd0..rnd0+T-1``'s noise into ``values[:, :T]``."""
        if not self.dists:
            return
        u = np.empty((T, *self.values.shape[2:]))
        for d, dist in enumerate(self.dists):
            key = np.uint64(stream_key(seed, f"{self.family}.{dist}"))
            kernels.keyed_uniforms(key, rnd0, reps, self.rows, self.counters, u)
            self.values[d, :T] = unit_noise(u, dist)


class CompiledRounds:
    """A run's rounds in compiled code: every argument prepared once (:meth:`prepare`).

    :meth:`run` computes the rounds after round ``first`` from the models ``W`` after it,
    as many as ``history`` holds (at most :attr:`T`), writing them into
    ``history[n, C, R, P, M]`` and the rounds at which repetitions diverge into
    ``diverged[C, R]`` (frozen at NaN from then on), exactly as
    :func:`pgfl.engine.simulate` does round by round:

    >>> from pgfl.data.synthetic import regression_data
    >>> from pgfl.engine.settings import CurveSettings
    >>> from pgfl.engine.step import gfl_round
    >>> from pgfl.privacy.mechanisms import ClientNoise
    >>> from pgfl.problems import LeastSquares
    >>> data = regression_data(np.random.default_rng(0), P=3, K=5, N=8)
    >>> E, B = np.ones((3, 5), dtype=int), np.full((3, 5), 4)
    >>> net = Network(data, LeastSquares(0.1), np.full((3, 3), 1 / 3), L=2, epochs=E, batch=B)
    >>> curves = [CurveSettings(mu=0.5, client=ClientNoise(std=0.1))]
    >>> run = CompiledRounds.prepare(net, CurveBatch.of(curves, net), seed=7, reps=[0])
    >>> W, history = np.zeros((1, 1, 3, 2)), np.empty((4, 1, 1, 3, 2))
    >>> _ = run is None or run.run(W, 0, history, np.full((1, 1), -1))  # 4 rounds (numba)
    >>> for i in range(1, 5):
    ...     W = gfl_round(W, net, curves, seed=7, iteration=i).W
    >>> run is None or bool((history[-1] == W).all())
    True
    """

    def __init__(self, net: Network, batch: CurveBatch, seed: int, reps: np.ndarray) -> None:
        block = net.block()
        P, K, _, _ = net.data.shape
        self.seed, self.reps = seed, np.ascontiguousarray(reps, dtype=np.int64)
        C, R, L, M = len(batch), self.reps.size, net.L, net.dim
        Xy, epochs, bsize, counts, rho, loss, full, e_max, b_max, per_client = (
            compiled._block_arrays(block)
        )
        links, units = net.links, np.ascontiguousarray(block.units, dtype=np.int64)
        kinds, noise = _codes(batch, links, units, L, M)
        per_round = sum(n.values.nbytes for n in noise) * R * 4  # values and numpy's temporaries
        self.T = T = int(min(ROUNDS_PER_CALL, max(1, NOISE_BYTES // max(per_round, 1))))
        # one parallel region per call of T rounds (its workers wait for each phase spinning,
        # then yielding, never sleeping): waking the workers is paid once per T rounds
        threads = compiled._threads()
        work = C * R * P * L * per_client * M * T
        parallel = threads > 1 and work >= compiled._threshold(compiled.PARALLEL_WORK)
        self.workers = threads if parallel else 1
        for n in noise:
            n.values = np.zeros((len(n.dists), T, R, *n.values.shape[3:]))
        self.noise = noise
        client, server, link, central = (n.values for n in noise)
        sample = L < K
        clients = np.empty((T, R, P, L), dtype=np.int64)
        if not sample:  # every client, every round
            clients[...] = np.arange(L)
        first = np.searchsorted(links.dst, np.arange(P + 1))
        self._state = (np.empty((C, R, P, L, M)), clients)
        self._draws = (
            sample, scans_clients(K, L), np.uint64(stream_key(seed, "sampling")),
            np.uint64(stream_key(seed, "batches")),
        )  # fmt: skip
        self._data = (
            self.reps, units, K, Xy, epochs, bsize, counts,
            np.ascontiguousarray(batch.mu, dtype=np.float64),
            np.full(C, np.inf) if batch.clip is None else np.asarray(batch.clip, np.float64),
            rho, loss, full, batch.clip is not None, compiled.SAMPLE_LOOP, e_max, b_max,
            Xy.shape[2] if full else b_max,
        )  # fmt: skip
        self._mechanisms = (
            *kinds[:3], client.reshape(*client.shape[:4], L, M), *kinds[3:],
            server, link, central.reshape(*central.shape[:3], M),
            np.ascontiguousarray(links.src, dtype=np.int64),
            np.ascontiguousarray(links.weight, dtype=np.float64),
            np.ascontiguousarray(first, dtype=np.int64), int(np.diff(first).max()),
        )  # fmt: skip
        # per thread count: the chunks of a round's local SGD (filled by the kernel when
        # there are several) and the sampling cells a worker takes at a time
        self._split = {}
        for n in {1, self.workers}:
            chunks = 1 if n == 1 else n * compiled.CHUNKS_PER_THREAD
            bounds = np.zeros((T, chunks + 1), dtype=np.int64)
            bounds[:, 1] = R * P * L  # one chunk of every work item
            per_claim = max(1, T * R * P // (1 if n == 1 else n * _CLAIMS_PER_THREAD))
            self._split[n] = ((bounds, np.ones(T, dtype=np.int64)), (chunks, per_claim))
        self._pace = _Pace(self.workers)
        self._ctl = np.zeros(2 * (2 + 2 * T), dtype=np.int64)
        self._kernels = compiled._round_kernels()

    @classmethod
    def prepare(
        cls, net: Network, batch: CurveBatch, *, seed: int, reps: np.ndarray
    ) -> CompiledRounds | None:
        """The run's compiled rounds, or ``None`` where :func:`unsupported` says why not."""
        if not WHOLE_ROUNDS or unsupported(net, batch) is not None:
            return None
        return cls(net, batch, seed, reps)

    def run(self, W: np.ndarray, first: int, history: np.ndarray, diverged: np.ndarray) -> None:
        """Rounds ``first + 1 .. first + n`` (``n = len(history) ≤ T``) from ``W[C, R, P, M]``."""
        n = history.shape[0]
        rnd0 = first + 1
        for noise in self.noise:
            noise.draw(self.seed, rnd0, self.reps, n, self._kernels)
        self._ctl[:] = 0
        workers = self._pace.choose()
        bounds, chunks = self._split[workers]
        args = (self._ctl, np.ascontiguousarray(W, dtype=np.float64), history, *self._state,
                *bounds, diverged, *self._draws, rnd0, *self._data, *chunks,
                *self._mechanisms)  # fmt: skip
        start = time.perf_counter()
        if workers > 1:
            compiled._launch(self._kernels.rounds_parallel, workers, *args)
        else:
            self._kernels.rounds_serial(*args)
        self._pace.record(workers, (time.perf_counter() - start) / n)


class _Pace:
    """One thread or all of them for the next call: whichever ran rounds faster lately.

    Both give the same bits, so the choice is speed alone: the machine's other jobs decide
    it (two threads are faster on idle cores, one is when another job holds a core and the
    workers would wait for each other). The slower choice is timed again after
    :data:`RETRY_CALLS` calls, twice as many after each time it loses again.
    """

    def __init__(self, workers: int) -> None:
        self.choices = (workers, 1) if workers > 1 and ADAPTIVE else (workers,)
        self.seconds: dict[int, float] = {}  # per round, the latest call of each choice
        self.wait = dict.fromkeys(self.choices, RETRY_CALLS)
        self.since = dict.fromkeys(self.choices, 0)

    def choose(self) -> int:
        """The thread count of the next call."""
        for n in self.choices:
            if n not in self.seconds:
                return n
        best = min(self.choices, key=self.seconds.__getitem__)
        for n in self.choices:
            if n != best and self.since[n] >= self.wait[n]:
                return n
        return best

    def record(self, n: int, seconds: float) -> None:
        """A call on ``n`` threads took ``seconds`` per round."""
        for m in self.choices:
            self.since[m] = 0 if m == n else self.since[m] + 1
        retried = n in self.seconds
        self.seconds[n] = seconds
        if retried:
            lost = seconds > min(self.seconds.values())
            self.wait[n] = min(self.wait[n] * 2, 1 << 10) if lost else RETRY_CALLS


def _codes(batch: CurveBatch, links: Any, units: np.ndarray, L: int, M: int) -> tuple:
    """Per-curve codes of the mechanisms, and the noise streams they draw from.

    Returns ``(client_kind, client_dist, client_scale, server_kind, server_dist,
    server_std, coef)`` and the four :class:`_Noise` families (client, server, link,
    central), their values only shaped ``[D, 1, 1, rows, n]``.
    """
    C = len(batch)
    client_kind = np.zeros(C, dtype=np.int64)
    client_dist = np.zeros(C, dtype=np.int64)
    client_scale = np.zeros(C)
    server_kind = np.zeros(C, dtype=np.int64)
    server_dist = np.zeros(C, dtype=np.int64)
    server_std = np.zeros(C)
    coef = np.zeros((C, links.src.size))
    used: dict[str, set[str]] = {f: set() for f in FAMILIES.values()}
    for group in batch.client_groups:
        i = group.index
        client_kind[i] = CLIENT_CODES[group.cls]
        if group.cls is ClientNoise:  # ClientNoise.aggregate's arithmetic
            std = np.array([s.std for s in group.schemes])
            client_scale[i] = std * np.where(batch.updates[i], -batch.mu[i], 1.0)
            used["client_noise"] |= {s.distribution for s in group.schemes}
    for group in batch.server_groups:
        code = server_kind[group.index] = SERVER_CODES[group.cls]
        server_std[group.index] = [s.std for s in group.schemes]
        if code in (1, 3):  # server noise's c_pm; central: 1/a_pp on the self-copies
            coef[group.index] = group.cls.coefficients(links)
        used[FAMILIES[code]] |= {s.distribution for s in group.schemes}
    dists = {k: tuple(sorted(v)) for k, v in used.items()}
    for group in batch.client_groups:
        if group.cls is ClientNoise:
            names = dists["client_noise"]
            client_dist[group.index] = [names.index(s.distribution) for s in group.schemes]
    for group in batch.server_groups:
        names = dists[FAMILIES[SERVER_CODES[group.cls]]]
        server_dist[group.index] = [names.index(s.distribution) for s in group.schemes]
    P = units.size
    per_unit = np.tile(np.arange(M), (P, 1))
    cells = {
        "client_noise": (units, np.tile(np.arange(L * M), (P, 1))),
        "server_noise": (units, per_unit),
        "link_noise": (np.ascontiguousarray(links.src, dtype=np.int64),
                       np.ascontiguousarray(links.dst[:, None] * M + np.arange(M), dtype=np.int64)),
        "central_noise": (np.array([AGGREGATOR], dtype=np.int64), np.arange(M)[None, :]),
    }  # fmt: skip
    noise = tuple(
        _Noise(f, dists[f], rows, np.ascontiguousarray(counters, dtype=np.int64),
               np.zeros((len(dists[f]), 1, 1, *counters.shape)))
        for f, (rows, counters) in cells.items()
    )  # fmt: skip
    kinds = (client_kind, client_dist, client_scale, server_kind, server_dist, server_std, coef)
    return kinds, noise
