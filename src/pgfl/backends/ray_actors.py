"""Units as actors: one network's units in contiguous blocks, each held by a Ray actor.

The system of "Privatized Graph Federated Learning" (Rizk, Vlaski & Sayed,
arXiv:2203.07105) is a network of servers, each with its own clients, that exchange only
the messages ``ψ_m + g_pm`` of eq. 8 with their neighbours. Here a block of units
``start..stop−1`` lives in one Ray actor (:class:`BlockActor`):

* **data**: the actor builds its units' clients' data itself, from the *recipe* — the
  curve's configuration, the root seed and its unit range
  (:func:`pgfl.experiments.build.build_block`); the driver holds only an outline of the
  network (sizes, topology, schedule), never a sample;
* **round i** (:meth:`BlockActor.send`, :meth:`BlockActor.receive`): the actor runs the
  local phase of its units (eqs. 3, 7; :func:`pgfl.engine.step.local_phase`), draws its
  units' noise with the keyed draws (:class:`pgfl.rng.KeyedDraws`, keyed by unit, so the
  numbers are those of the single-process engine), and returns one array of messages
  ``ψ_m + g_pm`` per receiving block; the driver passes those *object references* on to
  the receiving actors (large arrays go between nodes through Ray's object store; Ray
  relays return values under ~100 KiB through their owner, the driver's process), which
  combine them, ``w_p = Σ_m a_pm (ψ_m + g_pm)`` (eq. 8,
  :func:`pgfl.engine.step.combine_phase`);
* **metrics** without gathering models: each round an actor returns its block's sum
  ``Σ_{p∈b} w_p`` (``[C, R, M]``) and divergence flags (``[C, R]``); every
  ``checkpoint_every`` rounds the driver sends the centroids ``w_c,i`` back and each actor
  returns its partial sums of ``‖w_p,i − w°‖²`` (eq. 59) and ``‖w_p,i − w_c,i‖²`` (eq. 30)
  (:mod:`pgfl.engine.metrics`: the engine's own partial sums and reduction); ``w°`` itself
  is the problem's map-reduce optimum (:func:`pgfl.problems.solve_optimum` over the
  blocks' :meth:`~pgfl.problems._Problem.optimum_terms`);
* **faults**: after those metrics every actor's state (its models) is checkpointed as an
  object owned by the driver; an actor that dies is recreated from the recipe, every
  actor rolls back to the checkpoint and the rounds are replayed (the draws are keyed, so
  the replay gives the same numbers). After ``max_restarts`` failures the run stops with
  :class:`~pgfl.backends.RunStopped`, the batches already finished being saved by the runner.

Server models ``W`` are bit-identical to :func:`pgfl.engine.simulate` (the block step is
the engine's own); the metrics equal it up to the order of the sums over units (≤ 1e-12
relative). See ``docs/ray.md``, "Units as actors", for who sees what.

>>> [(p.start, p.stop) for p in plan_blocks(Links.from_matrix(np.full((3, 3), 1 / 3)), 2)]
[(0, 1), (1, 3)]
"""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pgfl.backends.local import Progress, RunStopped, batch_progress
from pgfl.backends.ray_sweeps import split_range
from pgfl.backends.session import ray_session
from pgfl.engine import CurveSettings, Trajectory, compiled, metrics
from pgfl.engine.network import Links, Network
from pgfl.engine.settings import CurveBatch
from pgfl.engine.step import combine_phase, local_phase, server_messages
from pgfl.experiments.build import build_block, build_network
from pgfl.experiments.config import CurveConfig
from pgfl.experiments.plan import Batch, Plan
from pgfl.extras import available
from pgfl.problems import solve_optimum
from pgfl.rng import KeyedDraws

__all__ = ["BlockActor", "BlockPlan", "RayActors", "plan_blocks"]


@dataclass(frozen=True)
class BlockPlan:
    """Where a block's messages go and come from (no data: topology only).

    Attributes:
        index: the block's position among the blocks.
        start, stop: its units ``start..stop−1``.
        out_links: the links it sends (senders in the block), in link order.
        sends: ``(receiving block, positions in out_links)``, by receiving block.
        in_links: the links into the block (receiver-major, as ``combine_phase`` needs).
        receives: ``(sending block, positions in in_links)``, by sending block.

    """

    index: int
    start: int
    stop: int
    out_links: Links
    sends: tuple[tuple[int, np.ndarray], ...]
    in_links: Links
    receives: tuple[tuple[int, np.ndarray], ...]

    @property
    def remote_sends(self) -> list[int]:
        """The other blocks this block sends to, in order (one return value each)."""
        return [r for r, _ in self.sends if r != self.index]

    @property
    def remote_receives(self) -> list[int]:
        """The other blocks this block receives from, in order (one argument each)."""
        return [q for q, _ in self.receives if q != self.index]


def plan_blocks(links: Links, blocks: int) -> list[BlockPlan]:
    """``blocks`` contiguous near-equal blocks of units and their message routes.

    Sender ``q``'s message to block ``b`` holds the links ``q → b`` in link order; the
    receiver puts them at the same links' positions among its incoming links, so it
    combines exactly what the single-process engine combines, in the same order.
    """
    P = int(links.dst.max()) + 1
    bounds = split_range(0, P, blocks)
    block_of = np.empty(P, dtype=np.int64)
    for b, (start, stop) in enumerate(bounds):
        block_of[start:stop] = b
    plans = []
    for b, (start, stop) in enumerate(bounds):
        out_links = links.subset(links.out_of(start, stop))
        in_links = links.subset(links.into(start, stop))
        to, frm = block_of[out_links.dst], block_of[in_links.src]
        plans.append(
            BlockPlan(
                b,
                start,
                stop,
                out_links,
                tuple((int(r), np.flatnonzero(to == r)) for r in np.unique(to)),
                in_links,
                tuple((int(q), np.flatnonzero(frm == q)) for q in np.unique(frm)),
            )
        )
    return plans


def _kind(x: Any) -> tuple[str, tuple[int, ...]]:
    """What an argument is, for the record of what reaches an actor."""
    if isinstance(x, np.ndarray):
        return ("array", tuple(x.shape))
    return (type(x).__name__, ())


class _Budget:
    """A cap on the peak of an actor's own allocations; over it, :class:`MemoryError`.

    Traced by ``tracemalloc``: numpy arrays and Python objects, not Ray's runtime. It
    starts after the actor has loaded its code (:func:`pgfl.engine.compiled.load`): the
    numba objects a first kernel call creates, about 15 MiB whatever the network, are not
    allocations of the block.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        tracemalloc.start()

    def check(self, where: str) -> None:
        peak = tracemalloc.get_traced_memory()[1]
        if peak > self.limit:
            raise MemoryError(
                f"the actor's allocations reached {peak / 2**20:.1f} MiB {where}, over its "
                f"limit of {self.limit / 2**20:.1f} MiB"
            )


class BlockActor:
    """One block of units of a network: its clients' data, its models, its half of a round.

    Created by :class:`RayActors` as a Ray actor; plain Python otherwise (tests).

    Args:
        recipe: the curve configuration the network is built from
            (:class:`~pgfl.experiments.config.CurveConfig`).
        seed: the root seed.
        plan: the block's units and message routes (:class:`BlockPlan`).
        settings: the curves simulated together (checked by the driver).
        repetitions: ``R``.
        record: keep the kind and shape of everything that reaches the actor (tests).
        memory_limit: cap in bytes on the peak of the actor's own allocations (numpy
            arrays and Python objects, traced by ``tracemalloc``; not Ray's runtime):
            exceeding it raises :class:`MemoryError` (tests).

    """

    def __init__(
        self,
        recipe: CurveConfig,
        seed: int,
        plan: BlockPlan,
        settings: Sequence[CurveSettings],
        repetitions: int,
        record: bool = False,
        memory_limit: int | None = None,
    ) -> None:
        self.log: list[tuple[str, str, tuple[int, ...]]] | None = [] if record else None
        self._record("init", recipe, seed, plan, settings, repetitions)
        if available("numba"):  # the compiled path's numba objects, before any data
            compiled.load()
        self.budget = None if memory_limit is None else _Budget(memory_limit)
        self.block = build_block(recipe, seed, plan.start, plan.stop)
        if self.budget is not None:
            self.block.data.Xy  # noqa: B018 - the features+target copy the rounds use
            self.budget.check("building its block")
        self.plan, self.seed = plan, seed
        self.curves = CurveBatch.of(list(settings))  # checked against the network by the driver
        self.reps = np.arange(repetitions)
        M = self.block.problem.dim(self.block.data.X.shape[-1])
        self.W = np.zeros((len(settings), repetitions, self.block.size, M))
        initial = getattr(self.block.problem, "initial", None)  # a [model]'s parameters
        if initial is not None:
            self.W += np.asarray(initial, float)
        self.round = 0
        self.history: list[np.ndarray] = []
        self.own: np.ndarray | None = None

    def _record(self, method: str, *args: Any) -> None:
        if self.log is not None:
            self.log.extend((method, *_kind(a)) for a in args)

    def ping(self) -> int:
        """The last finished round (the actor is alive)."""
        return self.round

    def received(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """``(method, kind, shape)`` of every argument received (``record`` only)."""
        return list(self.log or [])

    def peak_memory(self) -> int:
        """Peak bytes of the actor's own allocations (with ``memory_limit``; else 0)."""
        return 0 if self.budget is None else tracemalloc.get_traced_memory()[1]

    def pid(self) -> int:
        """The actor's process id."""
        return os.getpid()

    # ------------------------------------------------------------------------ set-up
    def optimum_terms(self, w: np.ndarray | None, clients: int) -> tuple:
        """The block's share of ``w°`` at ``w`` (:meth:`~pgfl.problems._Problem.optimum_terms`)."""
        self._record("optimum_terms", w, clients)
        return self.block.problem.optimum_terms(self.block.data, w, clients)

    def test_set(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The network's clean test set (not client data), if it has one."""
        d = self.block.data
        return None if d.X_test is None else (d.X_test, d.y_test)

    # ------------------------------------------------------------------------ a round
    def send(self, iteration: int, *bad: np.ndarray) -> Any:
        """Local phase and server messages of round ``iteration``.

        ``bad``: every block's divergence flags ``[C, R]`` of the last round (a repetition
        that diverged anywhere is frozen at NaN everywhere, as in the engine). Returns the
        report ``(aborted [C, R, P_b], clipped [C, R])`` followed by one array of messages
        ``[C, R, n, M]`` per other receiving block (:attr:`BlockPlan.remote_sends`).
        """
        self._record("send", iteration, *bad)
        if iteration != self.round + 1:
            raise RuntimeError(f"block {self.plan.index}: round {iteration} after {self.round}")
        if bad:
            self.W[np.logical_or.reduce(bad)] = np.nan
        draws = KeyedDraws(self.seed, iteration, self.reps, self.block.units)
        with np.errstate(over="ignore", invalid="ignore"):
            out = local_phase(self.W, self.block, self.curves, draws, iteration)
            messages = server_messages(
                out.psi, self.plan.out_links, self.curves, draws, self.plan.start, iteration
            )
        outgoing = []
        for r, positions in self.plan.sends:
            if r == self.plan.index:
                self.own = messages[:, :, positions]
            else:
                outgoing.append(messages[:, :, positions])
        report = (out.aborted, out.clipped)
        return (report, *outgoing) if outgoing else report

    def receive(self, iteration: int, *incoming: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Combine the messages into the block (eq. 8); ``incoming`` by sending block.

        Returns the divergence flags ``[C, R]`` and the block's model sum ``[C, R, M]``.
        """
        self._record("receive", iteration, *incoming)
        C, R, _, M = self.W.shape
        messages = np.empty((C, R, self.plan.in_links.src.size, M))
        others = iter(incoming)
        for q, positions in self.plan.receives:
            messages[:, :, positions] = self.own if q == self.plan.index else next(others)
        with np.errstate(over="ignore", invalid="ignore"):
            self.W = combine_phase(messages, self.plan.in_links, self.plan.start, self.plan.stop)
            bad = metrics.diverged(self.W)
        self.own, self.round = None, iteration
        self.history.append(self.W)
        if self.budget is not None:
            self.budget.check(f"in round {iteration}")
        return bad, metrics.model_sum(self.W)

    def metrics(
        self,
        first: int,
        centroid: np.ndarray,
        w_opt: np.ndarray,
        diverged_at: np.ndarray,
        test: tuple[np.ndarray, np.ndarray] | None,
    ) -> dict[str, np.ndarray]:
        """Partial sums over the block of the rounds kept since the last call.

        ``centroid[n, C, R, M]``: ``w_c,i`` of those rounds (from ``first``). Returns
        ``individual`` ``Σ_p ‖w_p − w°‖²`` and ``disagreement`` ``Σ_p ‖w_p − w_c‖²``
        (``[n, C, R]``), and ``server_test_error``, ``server_test_loss`` ``[n, C, R, P_b]``
        for a classifier with a test set (``test``).
        Repetitions that diverged are NaN from ``diverged_at`` on (the engine's freeze).
        """
        self._record("metrics", first, centroid, w_opt, diverged_at, test)
        Wh = np.stack(self.history)
        self.history = []
        rounds = first + np.arange(len(Wh))
        frozen = (diverged_at > 0) & (rounds[:, None, None] >= diverged_at)
        Wh[frozen] = np.nan
        out = metrics.error_sums(Wh, w_opt, centroid)
        if test is not None:
            out["server_test_error"] = self.block.problem.test_error(Wh, *test)
            out["server_test_loss"] = self.block.problem.test_loss(Wh, *test)
        return out

    def checkpoint(self) -> tuple[int, np.ndarray]:
        """The block's state after its last round: ``(round, W_b)``."""
        return self.round, self.W.copy()

    def restore(self, state: tuple[int, np.ndarray]) -> int:
        """Go back to a checkpoint (:meth:`checkpoint`); returns its round."""
        self.round, W = state
        self.W = W.copy()
        self.history, self.own = [], None
        return self.round

    def final(self) -> np.ndarray:
        """The block's server models ``[C, R, P_b, M]`` (gathered once, at the end)."""
        return self.W


class RayActors:
    """Backend holding one network's units in Ray actors (module doc).

    Args:
        actors: blocks of units, one actor each (default: one per CPU of the cluster;
            at most ``P``).
        checkpoint_every: rounds between metric reductions and checkpoints.
        address: a running cluster to join; ``None`` starts a local Ray.
        workers: CPUs of the local Ray (without ``address``).
        max_restarts: actor failures a run survives before it stops (:class:`RunStopped`).
        cpus_per_actor: Ray CPUs reserved per actor (default ``min(1, CPUs / actors)``).
        record: actors keep what reaches them (:attr:`received`; tests of the trust boundary).
        memory_limit: cap on each actor's own allocations, bytes (:class:`BlockActor`; tests).
        on_round: ``on_round(iteration, actors)`` after each round is submitted (fault tests).

    >>> RayActors(actors=4).checkpoint_every
    16

    """

    name = "ray-actors"

    def __init__(
        self,
        actors: int | None = None,
        checkpoint_every: int = 16,
        address: str | None = None,
        workers: int | None = None,
        *,
        max_restarts: int = 3,
        cpus_per_actor: float | None = None,
        record: bool = False,
        memory_limit: int | None = None,
        on_round: Callable[[int, list[Any]], None] | None = None,
    ) -> None:
        self.actors = actors
        self.checkpoint_every = checkpoint_every
        self.address, self.workers = address, workers
        self.max_restarts = max_restarts
        self.cpus_per_actor = cpus_per_actor
        self.record, self.memory_limit = record, memory_limit
        self.on_round = on_round
        #: Actor failures recovered from in the last run.
        self.restarts = 0
        #: ``record``: what reached each block's actor(s), by block (last run).
        self.received: list[list[tuple[str, str, tuple[int, ...]]]] = []
        #: Bytes of messages passed between actors per round (last run).
        self.message_bytes = 0
        #: Driver time spent submitting rounds (last run), seconds.
        self.submit_seconds = 0.0
        #: ``memory_limit``: each actor's peak allocations in bytes (last run).
        self.peak_memory: list[int] = []
        #: Actors (blocks of units) of the last run (``None``: none ran yet).
        self.blocks: int | None = None

    def describe(self) -> str:
        """``"ray (actors, N actors)"`` (``at ADDRESS`` when a cluster was joined)."""
        at = f" at {self.address}" if self.address else ""
        if self.blocks is None:
            return f"ray (actors{at})"
        return f"ray (actors, {self.blocks} actors{at})"

    def start(self) -> None:
        """Start or join the Ray cluster (:func:`~pgfl.backends.ray_session`); idempotent."""
        ray_session(self.address, self.workers)

    def trajectories(
        self, plan: Plan, progress: Progress | None = None
    ) -> Iterator[tuple[Batch, Trajectory]]:
        """Simulate each batch on actors, in the plan's order."""
        cfg = plan.cfg
        for batch in plan.batches:
            step = batch_progress(progress, batch)
            traj = self.simulate(
                cfg.curves[batch.indices[0]],
                batch.curves,
                iterations=cfg.iterations,
                repetitions=cfg.repetitions,
                seed=cfg.seed,
                net=batch.net,
                progress=step,
            )
            yield batch, traj

    # ------------------------------------------------------------------------ one run
    def simulate(
        self,
        recipe: CurveConfig,
        settings: Sequence[CurveSettings] | CurveBatch,
        *,
        iterations: int,
        repetitions: int = 1,
        seed: int = 0,
        net: Network | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> Trajectory:
        """:func:`pgfl.engine.simulate` of the network ``recipe`` describes, on actors.

        ``net``: the network's outline (``build_network(recipe, seed, outline=True)`` if not
        given): topology and schedule; its data, if any, is not used. ``settings`` are
        checked against it unless they come as a checked
        :class:`~pgfl.engine.settings.CurveBatch`.
        """
        ray = ray_session(self.address, self.workers)
        if net is None:
            net = build_network(recipe, seed, outline=True)
        if not isinstance(settings, CurveBatch):
            settings = CurveBatch.of(settings, net)
        settings = settings.settings
        P, K = net.A.shape[0], net.epochs.shape[1]
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        plans = plan_blocks(net.links, min(self.actors or cpus, P))
        self.blocks = len(plans)
        per_actor = self.cpus_per_actor or min(1.0, cpus / len(plans))
        remote = ray.remote(BlockActor).options(  # blocks spread over the nodes (memory)
            num_cpus=per_actor, max_restarts=0, scheduling_strategy="SPREAD"
        )
        args = (recipe, seed)

        def spawn(p: BlockPlan) -> Any:
            return remote.remote(*args, p, tuple(settings), repetitions, self.record,
                                 self.memory_limit)  # fmt: skip

        actors = [spawn(p) for p in plans]
        self.restarts, self.received, self.submit_seconds = 0, [], 0.0
        try:
            run = _Run(self, ray, net, plans, len(settings), repetitions, iterations, K)
            return run.go(actors, spawn, progress)
        finally:
            if self.record:
                self.received = _logs(ray, actors, "received")
            if self.memory_limit is not None:
                self.peak_memory = _logs(ray, actors, "peak_memory")
            for a in actors:
                ray.kill(a)


def _logs(ray: Any, actors: list[Any], method: str) -> list[Any]:
    """``method()`` of every actor still alive (``None`` for a dead one)."""
    out = []
    for a in actors:
        try:
            out.append(ray.get(getattr(a, method).remote()))
        except ray.exceptions.RayError:
            out.append(None)
    return out


class _Run:
    """The driver's side of one run: rounds submitted, reports reduced, faults handled."""

    def __init__(self, backend, ray, net, plans, C, R, T, K) -> None:
        self.b, self.ray, self.net, self.plans = backend, ray, net, plans
        self.C, self.R, self.T, self.K = C, R, T, K
        self.P = net.A.shape[0]

    def optimum(self, actors: list[Any]) -> np.ndarray:
        """``w°`` from the blocks' terms (:func:`pgfl.problems.solve_optimum`, map-reduce).

        A problem without a closed-form optimum (a ``[model]``) gives NaN MSD metrics, as
        in the engine.
        """
        ray, problem, M = self.ray, self.net.problem, self.net.dim
        if not hasattr(problem, "optimum_terms"):
            return np.full(M, np.nan)
        clients = self.P * self.K

        def terms_at(w: np.ndarray | None) -> list[tuple]:
            return ray.get([a.optimum_terms.remote(w, clients) for a in actors])

        return solve_optimum(problem, terms_at, clients, M)

    def rounds(
        self, actors: list[Any], first: int, stop: int, frozen: np.ndarray
    ) -> list[tuple[list, list]]:
        """Submit rounds ``first+1..stop``; per round the send reports and receive results.

        ``frozen[C, R]``: the repetitions that diverged up to round ``first`` (applied
        before the first local phase: a checkpoint is taken before the last flags are).
        """
        out: list[tuple[list, list]] = []
        bad: list[Any] = [frozen] if frozen.any() else []
        for i in range(first + 1, stop + 1):
            sent = []
            for a, p in zip(actors, self.plans, strict=True):
                n = 1 + len(p.remote_sends)
                refs = a.send.options(num_returns=n).remote(i, *bad)
                sent.append([refs] if n == 1 else refs)
            results = []
            for a, p in zip(actors, self.plans, strict=True):
                incoming = [sent[q][1 + self.plans[q].remote_sends.index(p.index)]
                            for q in p.remote_receives]  # fmt: skip
                results.append(a.receive.options(num_returns=2).remote(i, *incoming))
            bad = [r[0] for r in results]
            out.append(([s[0] for s in sent], results))
            if self.b.on_round is not None:
                self.b.on_round(i, actors)
        return out

    def start(self, actors: list[Any]) -> tuple[np.ndarray, tuple | None]:
        """``w°`` and the test set (``None`` without one), or :class:`RunStopped`."""
        ray = self.ray
        try:
            w_opt = self.optimum(actors)
            test = ray.get(actors[0].test_set.remote())
        except ray.exceptions.RayActorError as exc:  # e.g. its data does not fit
            lines = [x.strip() for x in str(exc).splitlines() if "Error" in x]
            reason = (lines[-1] if lines else type(exc).__name__)[:200]
            raise RunStopped(
                f"a Ray actor holding units could not build its block ({reason}); "
                "use more actors (--actors) or machines with more memory"
            ) from None
        has_test = test is not None and getattr(self.net.problem, "classifier", False)
        return w_opt, test if has_test else None

    def chunk(
        self, actors: list[Any], done: int, stop: int, diverged_at: np.ndarray, w_opt, test
    ) -> dict[str, Any]:
        """Rounds ``done+1..stop``: the reports, centroids, metric sums and new checkpoints."""
        ray, C, R, P = self.ray, self.C, self.R, self.P
        t0 = time.perf_counter()
        submitted = self.rounds(actors, done, stop, diverged_at >= 0)
        self.b.submit_seconds += time.perf_counter() - t0
        reports = ray.get([r for sends, _ in submitted for r in sends])
        results = ray.get([x for _, res in submitted for r in res for x in r])
        div = diverged_at.copy()
        n, A = stop - done, len(actors)
        wc = np.empty((n, C, R, self.net.dim))
        for k in range(n):
            flags = results[2 * A * k : 2 * A * (k + 1) : 2]
            wc[k] = metrics.centroid(results[2 * A * k + 1 : 2 * A * (k + 1) : 2], P)
            bad = np.logical_or.reduce(flags)
            div[bad & (div < 0)] = done + k + 1
        rounds = done + 1 + np.arange(n)
        wc[(div > 0) & (rounds[:, None, None] >= div)] = np.nan
        parts = ray.get([a.metrics.remote(done + 1, wc, w_opt, div, test) for a in actors])
        ckpt = [a.checkpoint.remote() for a in actors]
        ray.wait(ckpt, num_returns=len(ckpt))
        return {"reports": reports, "diverged_at": div, "centroid": wc, "parts": parts,
                "checkpoint": ckpt}  # fmt: skip

    def go(self, actors: list[Any], spawn: Callable, progress: Callable | None) -> Trajectory:
        """Run every round on the actors, a chunk of ``checkpoint_every`` at a time."""
        ray, T = self.ray, self.T
        w_opt, test = self.start(actors)
        acc = _Series(T, self.C, self.R, self.P, has_test=test is not None)
        ckpt = [a.checkpoint.remote() for a in actors]
        done = 0
        while done < T:
            stop = min(done + self.b.checkpoint_every, T)
            try:
                chunk = self.chunk(actors, done, stop, acc.diverged_at, w_opt, test)
            except ray.exceptions.RayActorError as exc:
                self.b.restarts += 1
                if self.b.restarts > self.b.max_restarts:
                    raise RunStopped(
                        f"a Ray actor holding units died ({type(exc).__name__}) and "
                        f"{self.b.max_restarts} restart(s) ran out at round {done + 1} of {T}; "
                        "finished batches are saved: rerun with --resume to continue"
                    ) from None
                actors[:] = self.recover(actors, ckpt, spawn)
                continue
            except ray.exceptions.RayTaskError as exc:
                raise exc.cause from None  # an error of the simulation itself
            acc.commit(chunk, done, stop, w_opt, self.net.problem, test, len(actors))
            ckpt, done = chunk["checkpoint"], stop
            if progress is not None:
                progress(done)
        self.b.message_bytes = bytes_per_round(self.plans, self.C, self.R, self.net.dim)
        W = np.concatenate(ray.get([a.final.remote() for a in actors]), axis=2)
        W[acc.diverged_at >= 0] = np.nan
        return acc.trajectory(W)

    def recover(self, actors: list[Any], ckpt: list[Any], spawn: Callable) -> list[Any]:
        """Recreate dead actors from the recipe; roll every actor back to the checkpoint."""
        ray = self.ray
        alive = []
        for a, p in zip(actors, self.plans, strict=True):
            try:
                ray.get(a.ping.remote(), timeout=120)
                alive.append(a)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                ray.kill(a)
                alive.append(spawn(p))
        ray.get([a.restore.remote(c) for a, c in zip(alive, ckpt, strict=True)])
        return alive


class _Series:
    """The run's per-iteration metrics and counters, committed a chunk at a time."""

    def __init__(self, T: int, C: int, R: int, P: int, *, has_test: bool) -> None:
        shape = (T, C, R)
        self.P = P
        self.values = {k: np.empty(shape) for k in ("centroid", "individual", "disagreement")}
        if has_test:
            for k in ("test_error", "test_log_loss"):
                self.values[k] = np.empty(shape)
            self.values["server_test_error"] = np.empty((*shape, P))
            self.values["server_test_loss"] = np.empty((*shape, P))
        self.diverged_at = np.full((C, R), -1)
        self.aborted = np.zeros((C, R), dtype=np.int64)
        self.clipped = np.zeros((C, R), dtype=np.int64)
        self.abort_log: list[tuple[int, int, int, int]] = []

    def commit(self, chunk: dict, done: int, stop: int, w_opt, problem, test, A: int) -> None:
        """Reduce a complete chunk's partial sums (:mod:`pgfl.engine.metrics`) and reports."""
        v, wc, parts = self.values, chunk["centroid"], chunk["parts"]
        self.diverged_at = chunk["diverged_at"]
        span = slice(done, stop)
        v["centroid"][span] = metrics.centroid_msd(wc, w_opt)
        errors = metrics.reduce_errors(parts, self.P)
        v["individual"][span], v["disagreement"][span] = (
            errors["individual"],
            errors["disagreement"],
        )
        if test is not None:
            v["test_error"][span] = problem.test_error(wc, *test)
            v["test_log_loss"][span] = problem.test_loss(wc, *test)
            for k in ("server_test_error", "server_test_loss"):
                v[k][span] = np.concatenate([p[k] for p in parts], axis=-1)
        reports = chunk["reports"]
        for k in range(stop - done):
            ab = np.concatenate([reports[A * k + b][0] for b in range(A)], axis=2)
            self.clipped += sum(reports[A * k + b][1] for b in range(A))
            if ab.any():
                self.aborted += ab.sum(axis=2)
                log = zip(*np.nonzero(ab), strict=True)
                self.abort_log.extend((int(c), int(r), done + k + 1, int(p)) for c, r, p in log)

    def trajectory(self, W: np.ndarray) -> Trajectory:
        """The run's :class:`~pgfl.engine.Trajectory`."""
        v = self.values
        return Trajectory(
            centroid_msd=v["centroid"],
            individual_msd=v["individual"],
            disagreement=v["disagreement"],
            test_error=v.get("test_error"),
            test_log_loss=v.get("test_log_loss"),
            server_test_error=v.get("server_test_error"),
            diverged_at=self.diverged_at,
            W=W,
            aborted=self.aborted,
            clipped=self.clipped,
            abort_log=self.abort_log,
            reps=np.arange(W.shape[1]),
            server_test_loss=v.get("server_test_loss"),
        )


def bytes_per_round(plans: Sequence[BlockPlan], curves: int, reps: int, dim: int) -> int:
    """Bytes of server messages that cross actor boundaries in one round (float64)."""
    links = sum(pos.size for p in plans for q, pos in p.receives if q != p.index)
    return int(links) * curves * reps * dim * 8
