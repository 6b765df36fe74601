"""The coordinator: starts (locally) or joins the parties, paces the rounds, records the curves.

:class:`DeployBackend` is a :class:`~pgfl.backends.Backend`: ``pgfl deploy`` runs a
configuration through the same runner as ``pgfl run`` (:func:`pgfl.apps.runner.run_plan`:
validation, output folder, accounting, partial files, ``summary.json``, ``curves.csv``,
``figure.png``), with each batch of curves simulated by the deployed parties instead of
the engine. Per batch, the coordinator

1. in a local deployment (``--local``) makes a fresh CA and a certificate per party and
   starts every party as its own process on 127.0.0.1: a server per unit and any trusted
   party, then a client per client (:mod:`pgfl.deploy.party`); otherwise it uses
   ``deploy.servers`` (and ``deploy.aggregator``, ``deploy.dealer``) and ``deploy.certs``;
2. calls ``Start`` on every serving party (the address book; the round to resume from);
3. each round, calls ``Round`` on every server at once and, from the models ``w_p,i`` they
   report, computes the run's metrics exactly as :func:`pgfl.engine.simulate` does (the
   centroid MSD of eq. 58, the individual MSD of eq. 59, the disagreement of eq. 30, from
   :mod:`pgfl.engine.metrics`), freezes a diverged repetition as the engine does, and saves
   its progress (``partial/deploy/batch-NNN/progress.npz``) — every server keeps its
   own checkpoint, so ``--resume`` continues from the last round every party completed;
4. calls ``Stop``.

**Folders** (:mod:`pgfl.folders`: the output folder's rules). Everything a deployment
writes lives in the run's staging folder ``OUT/.pgfl-run`` (``plan.work``): while a batch
runs, its state — certificates and keys, each party's folder (log, checkpoints, port),
the coordinator's log and the parties' transcripts — is in ``partial/deploy/batch-NNN``,
which an interrupted run keeps for ``--resume``; a finished batch's logs and transcripts
wait in ``partial/deploy/{logs,transcripts}`` and its state is deleted; once every batch
is done they move to ``logs/`` and ``transcripts/``, results the commit moves into OUT
(listed in its marker). A failed or interrupted deployment leaves OUT's earlier results
as they were; its logs are in ``OUT/.pgfl-run/partial/deploy``. Batches are numbered by
their position among the configuration's structures, so a resumed run finds each one's
state whatever batches were already done. No link is followed below OUT: the folders are
opened with ``O_NOFOLLOW`` (:func:`pgfl.files.open_folder`), and so are the files the
parties append to.

The coordinator sees every server's model after every round (what a client of every unit
sees): it is the party that evaluates. A server that stops answering stops the run with
one line naming it (:class:`~pgfl.backends.RunStopped`); a client that stops answering is a
dropout (:mod:`pgfl.deploy.rounds`).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from pgfl.backends.local import Progress, RunStopped, batch_progress
from pgfl.deploy import wire
from pgfl.deploy.certs import Identity, make_certificates, party_names
from pgfl.deploy.client import local_kind
from pgfl.deploy.job import Job, Shard, check_deployable, trusted_parties
from pgfl.deploy.party import PartySpec, run_local_party
from pgfl.engine import CurveBatch, Trajectory, metrics
from pgfl.experiments.config import DeployConfig, ExperimentConfig
from pgfl.experiments.partial import read_partial, write_partial
from pgfl.experiments.plan import Batch, Plan
from pgfl.files import FileError, open_folder, write_atomic
from pgfl.privacy.mechanisms import SecureAggregationScheme
from pgfl.validation import ConfigError

__all__ = ["DeployBackend", "deploy_network", "make_job", "position"]


def position(plan: Plan, batch: Batch) -> int:
    """The batch's position among the configuration's structures (stable across resumes).

    A resumed plan holds only the batches still to run; this number is the same in every
    plan of the configuration, so a batch's state folder is found again.
    """
    structures: list[tuple] = []
    for c in plan.cfg.curves:
        if c.structure() not in structures:
            structures.append(c.structure())
    return structures.index(plan.cfg.curves[batch.indices[0]].structure())


def make_job(
    plan: Plan, index: int, batch: Batch, deploy: DeployConfig, reps: np.ndarray | None = None
) -> Job:
    """The public description of batch ``index`` of ``plan`` (checked deployable).

    ``reps``: the global repetition ids (default ``0..R−1``).
    """
    cfg, net = plan.cfg, batch.net
    labels = [cfg.curves[i].label for i in batch.indices]
    check_deployable(batch.settings, labels)
    return Job(
        name=cfg.name, batch=index, seed=cfg.seed, iterations=cfg.iterations,
        reps=np.arange(cfg.repetitions) if reps is None else np.asarray(reps),
        settings=batch.settings, labels=tuple(labels),
        A=np.asarray(net.A), K=int(net.data.shape[1]), L=int(net.L), M=int(net.dim),
        e_max=int(net.epochs.max()), b_max=1 if net.batch is None else int(net.batch.max()),
        recipe=cfg.curves[batch.indices[0]], deploy=deploy,
        trusted=trusted_parties(batch.settings), problem=net.problem,
        w0=getattr(net.problem, "initial", None),
    )  # fmt: skip


def deploy_network(
    cfg: ExperimentConfig, out: Path, batch: Batch, *, reps: np.ndarray, local: bool = True
) -> Trajectory:
    """One network's curves (``batch``) on local deployed parties, outside a run's runner.

    ``cfg``: its curves are the batch's (``batch.indices`` index them), its iterations and
    ``[deploy]`` apply; ``reps``: the global repetition ids. What the audit of a recorded
    transcript runs (:func:`pgfl.apps.audit.record_audit`): the canary worlds.
    ``out`` is written as a run's staging folder is (its caller holds the output folder):
    ``out/logs``, ``out/transcripts``.
    """
    out = Path(out)
    plan = Plan(cfg, out, fingerprint="deploy_network", loaded={}, batches=(batch,), work=out)
    backend = DeployBackend(cfg.deploy, local=local)
    job = make_job(plan, 0, batch, cfg.deploy, reps)
    backend.local_phase = f"{local_kind(job)} (on the clients)"
    trajectory = _Deployment(backend, plan, job, batch).go(None)
    publish(out)
    return trajectory


def as_run(batch: Batch) -> Batch:
    """The batch as the deployment ran it: secure aggregation by its cryptographic protocol.

    (A curve's ``privacy.secagg_protocol`` chooses how the engine computes the protocol's
    output; deployed, every client masks its own message: ``summary.json`` says so.)
    """
    settings = [
        replace(s, client=replace(s.client, protocol="cryptographic"))
        if isinstance(s.client, SecureAggregationScheme) else s
        for s in batch.settings
    ]  # fmt: skip
    return replace(batch, curves=CurveBatch.of(settings))


def shard(batch: Batch, p: int, k: int) -> Shard:
    """Client ``k`` of unit ``p``'s own data, from the planned network (a local deployment)."""
    net, d = batch.net, batch.net.data
    return Shard(
        X=np.array(d.X[p, k]), y=np.array(d.y[p, k]), count=int(d.counts[p, k]),
        epochs=int(net.epochs[p, k]), batch=None if net.batch is None else int(net.batch[p, k]),
    )  # fmt: skip


class DeployBackend:
    """Runs each batch of a plan on deployed parties (module doc).

    Args:
        deploy: the ``[deploy]`` settings.
        local: start every party on this machine (``--local``), else join the addresses.
        on_round: called as ``on_round(i, backend)`` after round ``i`` (tests: faults).

    """

    name = "deploy"

    def __init__(
        self,
        deploy: DeployConfig,
        *,
        local: bool = True,
        on_round: Callable[[int, DeployBackend], None] | None = None,
    ) -> None:
        self.deploy, self.local, self.on_round = deploy, local, on_round
        #: The local parties' processes of the batch running (name → ``multiprocessing.Process``).
        self.processes: dict[str, Any] = {}
        #: The parties' folders of the batch running (name → folder).
        self.folders: dict[str, Path] = {}
        self.parties = 0
        #: The local phase the clients ran (``summary.json``'s ``engine.local_phase``).
        self.local_phase: str | None = None

    def describe(self) -> str:
        """``deploy (local, N processes, simulation mode)``: what ran."""
        where = "local" if self.local else "hosts"
        count = f", {self.parties} processes" if self.parties else ""
        return f"deploy ({where}{count}, {self.deploy.mode} mode)"

    def start(self) -> None:
        """Check what joining needs before anything is written (addresses, certificates)."""
        if not self.local:
            if self.deploy.servers is None:
                raise ConfigError(
                    "pgfl deploy without --local needs deploy.servers (one address per unit)"
                )
            if self.deploy.certs is None:
                raise ConfigError("pgfl deploy without --local needs deploy.certs")

    def check(self, plan: Plan) -> None:
        """Every batch deployable, one batch across hosts: one line if not, nothing written."""
        for batch in plan.batches:
            make_job(plan, position(plan, batch), batch, self.deploy)
        if not self.local and len(plan.batches) > 1:
            raise ConfigError(
                "a deployment across hosts runs curves that share one structure (topology, "
                f"data, training but mu/share/clip); this one has {len(plan.batches)}: split it"
            )
        if not self.local and len(self.deploy.servers) != plan.batches[0].net.A.shape[0]:
            raise ConfigError(
                f"deploy.servers must list one address per unit (topology.P = "
                f"{plan.batches[0].net.A.shape[0]}); got {len(self.deploy.servers)}"
            )

    def trajectories(
        self, plan: Plan, progress: Progress | None = None
    ) -> Iterator[tuple[Batch, Trajectory]]:
        """Run each batch on its parties, in the plan's order; then publish logs, transcripts.

        A run that is not resumed first removes what an earlier run's deployment left.
        """
        if not plan.resume:
            shutil.rmtree(plan.work / DEPLOY, ignore_errors=True)
        for batch in plan.batches:
            job = make_job(plan, position(plan, batch), batch, self.deploy)
            self.local_phase = f"{local_kind(job)} (on the clients)"
            run = _Deployment(self, plan, job, batch)
            yield as_run(batch), run.go(batch_progress(progress, batch))
        publish(plan.work)


class _Deployment:
    """One batch on its parties: start, rounds, metrics, stop."""

    def __init__(self, backend: DeployBackend, plan: Plan, job: Job, batch: Batch) -> None:
        self.b, self.plan, self.job, self.batch = backend, plan, job, batch
        self.folder = plan.work / DEPLOY / f"batch-{job.batch:03d}"  # the batch's state
        self.record = self.folder / "transcripts"
        self.servers = [f"server-{p}" for p in range(job.P)]
        self.addresses: dict[str, str] = {}
        self.channels: dict[str, grpc.Channel] = {}

    # -------------------------------------------------------------------------- parties
    def _certs(self) -> Path:
        if not self.b.local:
            return Path(self.b.deploy.certs)
        names = party_names(self.job.P, self.job.K, self.job.trusted)
        folder = self.folder / "certs"
        _mkdir(folder)
        make_certificates(names, folder)
        return folder

    def _spawn(self, name: str, certs: Path, **kw: Any) -> None:
        state = self.folder / name
        _mkdir(state)
        (state / "ready").unlink(missing_ok=True)
        transcript = self.record / f"{name}.pgflwire" if self.job.deploy.record else None
        spec = PartySpec(name, self.job, state, certs, transcript=transcript, watch=os.getpid(),
                         environ=dict(os.environ), **kw)  # fmt: skip
        proc = _context().Process(target=run_local_party, args=(spec,), name=name, daemon=False)
        proc.start()
        self.b.processes[name] = proc
        self.b.folders[name] = state

    def _ready(self, names: list[str]) -> None:
        """Wait for each serving party's port (``STATE/ready``); one line if one fails."""
        end = time.monotonic() + self.job.deploy.connect_timeout
        for name in names:
            ready = self.b.folders[name] / "ready"
            while not ready.is_file():
                proc = self.b.processes[name]
                if not proc.is_alive() or time.monotonic() > end:
                    tail = _tail(self.b.folders[name] / "process.log")
                    raise RunStopped(f"{name} did not start ({tail})")
                time.sleep(0.05)
            self.addresses[name] = f"127.0.0.1:{int(ready.read_text())}"

    def launch(self) -> Path:
        """Start the local parties (servers and trusted first, then clients); the certs."""
        certs = self._certs()
        job = self.job
        if not self.b.local:
            self.addresses = {f"server-{p}": a for p, a in enumerate(self.b.deploy.servers)}
            for name in job.trusted:
                self.addresses[name] = getattr(self.b.deploy, name)
            return certs
        serving = [*self.servers, *job.trusted]
        for name in serving:
            self._spawn(name, certs)
        self._ready(serving)
        for p in range(job.P):
            for k in range(job.K):
                self._spawn(f"client-{p}-{k}", certs, server=self.addresses[f"server-{p}"],
                            shard=shard(self.batch, p, k))  # fmt: skip
        self.b.parties = len(self.b.processes)
        return certs

    def _channel(self, name: str) -> grpc.Channel:
        ch = self.channels.get(name)
        if ch is None:
            ch = wire.channel(self.identity, self.addresses[name], name,
                              max_bytes=self.job.deploy.max_message_bytes)  # fmt: skip
            self.channels[name] = ch
        return ch

    def call(
        self, name: str, method: str, arrays: dict, config: dict, timeout: float, wait: bool = False
    ) -> tuple:
        """A unary call to party ``name`` as the coordinator; the decoded reply.

        ``wait``: wait (up to ``timeout``) for the party to come up (parties on their hosts
        may start after the coordinator).
        """
        stub = self._channel(name).unary_unary(method)
        reply = stub(wire.encode(arrays, config), timeout=timeout, wait_for_ready=wait)
        return wire.decode(reply)

    def stop(self) -> None:
        """Stop every party (politely, then by force for local processes)."""
        for name in [*self.servers, *self.job.trusted]:
            if name in self.addresses:
                try:
                    self.call(name, "/pgfl.Control/Stop", {}, {}, timeout=5.0)
                except grpc.RpcError:
                    pass
        for ch in self.channels.values():
            ch.close()
        end = time.monotonic() + 10.0
        for proc in self.b.processes.values():
            proc.join(timeout=max(0.1, end - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()
        self.b.processes.clear()

    # --------------------------------------------------------------------------- rounds
    def go(self, progress: Callable[[int], None] | None) -> Trajectory:
        """Run the batch's rounds on its parties; the trajectory."""
        job = self.job
        series = _Series(self.batch, job)
        resume = series.load(self.folder / "progress.npz", self.plan) if self.plan.resume else 0
        if not resume:  # a fresh batch: an earlier run's state (logs, transcripts) goes
            shutil.rmtree(self.folder, ignore_errors=True)
        _mkdir(self.record if self.job.deploy.record else self.folder)
        self.b.processes.clear()
        t0 = time.perf_counter()
        try:
            certs = self.launch()
            self.identity = Identity.load(certs, "coordinator")
            self._start(resume)
            what = f"{self.b.parties} parties started" if self.b.local else "joined the parties"
            self.log(f"{what} in {time.perf_counter() - t0:.1f} s")
            for i in range(resume + 1, job.iterations + 1):
                t1 = time.perf_counter()
                reports = self._round(i, series.frozen())
                series.add(i, reports)
                series.save(self.folder / "progress.npz", self.plan)
                self.log(f"round {i}: {time.perf_counter() - t1:.2f} s")
                if progress is not None:
                    progress(i)
                if self.b.on_round is not None:
                    self.b.on_round(i, self.b)
            trajectory = series.trajectory()
        finally:
            self.stop()
        self.finish()
        return trajectory

    def log(self, line: str) -> None:
        """One line in the coordinator's log (the batch's state, then ``OUT/logs``)."""
        wire.append_line(self.folder / "coordinator.log", line)

    def finish(self) -> None:
        """A finished batch: its logs and transcripts kept (:data:`DEPLOY`), its state removed.

        The state folder holds the local certificates' private keys and the checkpoints,
        needed only to resume; the logs say what every party did; :func:`publish` moves
        the logs and transcripts into the run's folder once every batch is done.
        """
        batch = f"batch-{self.job.batch:03d}"
        logs = self.plan.work / DEPLOY / "logs" / batch
        texts = {"coordinator": _read(self.folder / "coordinator.log")}
        for name, state in self.b.folders.items():
            texts[name] = _read(state / "party.log") + _read(state / "process.log")
        for name, text in texts.items():
            if text:
                write_atomic(logs / f"{name}.log", text)
        if self.job.deploy.record:
            _move_files(self.record, self.plan.work / DEPLOY / "transcripts" / batch)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.b.folders.clear()

    def _start(self, resume: int) -> None:
        book = {f"addr:{k}": v for k, v in self.addresses.items()}
        names = [*self.job.trusted, *self.servers]
        timeout = 2 * self.job.deploy.connect_timeout
        with ThreadPoolExecutor(len(names)) as pool:
            config = {**book, "resume": resume}
            start = "/pgfl.Control/Start"
            futures = {n: pool.submit(self.call, n, start, {}, config, timeout, True)
                       for n in names}  # fmt: skip
            for name, f in futures.items():
                try:
                    f.result()
                except grpc.RpcError as exc:
                    raise RunStopped(
                        f"{name} at {self.addresses[name]} could not start ({_why(exc)})"
                    ) from None

    def _round(self, i: int, frozen: np.ndarray) -> list[tuple]:
        """Round ``i`` on every server at once; their reports in unit order.

        The first server to fail stops the round at once: the calls still waiting (on the
        failed server's messages) are cancelled.
        """
        job = self.job
        timeout = job.deploy.round_timeout + 4 * job.deploy.client_timeout + 10
        data = wire.encode({"frozen": frozen}, {"round": i})
        method = "/pgfl.Control/Round"
        calls = {s: self._channel(s).unary_unary(method).future(data, timeout=timeout)
                 for s in self.servers}  # fmt: skip
        done: dict[str, bytes] = {}
        errors: dict[str, Exception] = {}
        while len(done) + len(errors) < len(calls) and not errors:
            for name, call in calls.items():
                if name in done or name in errors or not call.done():
                    continue
                try:
                    done[name] = call.result()
                except grpc.RpcError as exc:
                    errors[name] = exc
            time.sleep(0.005)
        if errors:
            for call in calls.values():
                call.cancel()
            raise RunStopped(self._diagnose(i, errors))
        out = []
        for name in self.servers:
            arrays, _ = wire.decode(done[name])
            out.append((
                wire.array(arrays, "w", (job.C, job.R, job.M)),
                wire.array(arrays, "aborted", (job.C, job.R), "b"),
                wire.array(arrays, "clipped", (job.C, job.R), "i"),
            ))  # fmt: skip
        return out

    def _diagnose(self, i: int, errors: dict[str, Exception]) -> str:
        """One line: which party stopped the round, and how to go on."""
        dead = [n for n, proc in self.b.processes.items() if not proc.is_alive()
                and not n.startswith("client-")]  # fmt: skip
        lost = [n for n, e in errors.items() if isinstance(e, grpc.RpcError)
                and e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                and "no message from" not in (e.details() or "")]  # fmt: skip
        culprit = (dead or lost or list(errors))[0]
        why = _why(errors[culprit]) if culprit in errors else "its process exited"
        where = self.addresses.get(culprit, "?")
        return (
            f"{culprit} at {where} stopped answering in round {i} of {self.job.iterations} "
            f"({why}); rounds 1-{i - 1} are saved: rerun with --resume to continue"
        )


#: Where a run's deployment state lives, in its folder (kept for ``--resume``).
DEPLOY = Path("partial") / "deploy"


def _mkdir(folder: Path) -> None:
    """Create ``folder`` (and its parents); a link below an output folder is refused."""
    os.close(open_folder(folder))


def _read(path: Path) -> str:
    """A log's text ("" if none; a link is not read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    with os.fdopen(fd, encoding="utf-8", errors="replace") as f:
        return f.read()


def _move_files(src: Path, dst: Path) -> None:
    """Move the regular files of ``src`` into ``dst`` (recursively; no link followed)."""
    try:
        src_fd = open_folder(src, create=False)
    except (OSError, FileError):
        return
    try:
        with os.scandir(src_fd) as entries:
            found = [(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False))
                     for e in entries]  # fmt: skip
        dst_fd = open_folder(dst) if any(f for _, _, f in found) else None
        try:
            for name, is_dir, is_file in found:
                if is_file:
                    os.replace(name, name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
                elif is_dir:
                    _move_files(src / name, dst / name)
        finally:
            if dst_fd is not None:
                os.close(dst_fd)
    finally:
        os.close(src_fd)


def publish(work: Path) -> None:
    """Every batch done: the logs and transcripts go from :data:`DEPLOY` to ``work``.

    ``work/logs/batch-NNN/NAME.log`` and ``work/transcripts/batch-NNN/NAME.pgflwire``
    (committed into the output folder with the results); ``partial/deploy`` is removed.
    """
    for what in ("logs", "transcripts"):
        _move_files(work / DEPLOY / what, work / what)
    shutil.rmtree(work / DEPLOY, ignore_errors=True)
    try:
        (work / "partial").rmdir()  # if empty: the runner's files go their own way
    except OSError:
        pass


def _context() -> Any:
    """Processes forked from a server that imported the parties' code once (a "zygote").

    Every party process imports numpy, scipy, grpc, Flower and pgfl (about 2.4 s of CPU
    each): forking them from one process that did so makes 15 parties start in well under
    a second, sharing those pages. The fork server holds no gRPC channel or thread, so each
    party starts its own gRPC runtime after the fork.
    """
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["pgfl.deploy.party"])
    return ctx


def _why(exc: Exception) -> str:
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        return f"{exc.code().name}: {' '.join(str(exc.details()).split())}"
    return " ".join(str(exc).split())


def _tail(path: Path) -> str:
    """The last line of a party's log (why it did not start)."""
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "its process exited without a word"


class _Series:
    """The batch's per-iteration metrics, computed as :func:`pgfl.engine.simulate` does."""

    def __init__(self, batch: Batch, job: Job) -> None:
        net = batch.net
        self.job, self.net = job, net
        w_opt = batch.w_opt if batch.w_opt is not None else net.problem.optimum(net.data)
        self.w_opt = np.full(job.M, np.nan) if w_opt is None else np.asarray(w_opt, float)
        self.has_test = net.data.X_test is not None and getattr(net.problem, "classifier", False)
        shape = (job.iterations, job.C, job.R)
        names = ["centroid", "individual", "disagreement"]
        names += ["test_error", "test_log_loss"] if self.has_test else []
        self.v = {k: np.full(shape, np.nan) for k in names}
        if self.has_test:
            for k in ("server_test_error", "server_test_loss"):
                self.v[k] = np.full((*shape, job.P), np.nan)
        self.diverged_at = np.full((job.C, job.R), -1)
        self.aborted = np.zeros((job.C, job.R), dtype=np.int64)
        self.clipped = np.zeros((job.C, job.R), dtype=np.int64)
        self.abort_log: list[tuple[int, int, int, int]] = []
        self.W = np.zeros((job.C, job.R, job.P, job.M))
        self.done = 0

    def frozen(self) -> np.ndarray:
        """The repetitions frozen at NaN (diverged), ``[C, R]``."""
        return self.diverged_at >= 0

    def add(self, i: int, reports: list[tuple]) -> None:
        """Round ``i``'s reports: counts, divergence, then the metrics of the frozen models."""
        W = np.stack([r[0] for r in reports], axis=2)
        ab = np.stack([r[1] for r in reports], axis=2)
        if ab.any():
            self.aborted += ab.sum(axis=2)
            log = zip(*np.nonzero(ab), strict=True)
            self.abort_log.extend((int(c), int(self.job.reps[k]), i, int(p)) for c, k, p in log)
        self.clipped += sum(r[2] for r in reports)
        bad = metrics.diverged(W)
        self.diverged_at[bad & (self.diverged_at < 0)] = i
        W[self.diverged_at >= 0] = np.nan
        Wh, P, v = W[None], self.job.P, self.v
        wc = metrics.centroid([metrics.model_sum(Wh)], P)
        v["centroid"][i - 1] = metrics.centroid_msd(wc, self.w_opt)[0]
        errors = metrics.reduce_errors([metrics.error_sums(Wh, self.w_opt, wc)], P)
        v["individual"][i - 1] = errors["individual"][0]
        v["disagreement"][i - 1] = errors["disagreement"][0]
        if self.has_test:
            problem, d = self.net.problem, self.net.data
            v["test_error"][i - 1] = problem.test_error(wc, d.X_test, d.y_test)[0]
            v["test_log_loss"][i - 1] = problem.test_loss(wc, d.X_test, d.y_test)[0]
            v["server_test_error"][i - 1] = problem.test_error(Wh, d.X_test, d.y_test)[0]
            v["server_test_loss"][i - 1] = problem.test_loss(Wh, d.X_test, d.y_test)[0]
        self.W, self.done = W, i

    def save(self, path: Path, plan: Plan) -> None:
        """The progress so far (atomic), stamped with the configuration's fingerprint."""
        log = np.array(self.abort_log, dtype=np.int64).reshape(-1, 4)
        write_partial(path, plan.fingerprint, {**{f"v_{k}": a for k, a in self.v.items()},
                      "diverged_at": self.diverged_at, "aborted": self.aborted,
                      "clipped": self.clipped, "abort_log": log, "W": self.W,
                      "done": np.array(self.done)})  # fmt: skip

    def load(self, path: Path, plan: Plan) -> int:
        """The rounds done by an interrupted run of this configuration (0: none)."""
        saved = read_partial(path, plan.fingerprint, "the batch restarts from round 1")
        if saved is None:
            return 0
        for k in self.v:
            self.v[k] = saved[f"v_{k}"].copy()
        self.diverged_at = saved["diverged_at"].copy()
        self.aborted, self.clipped = saved["aborted"].copy(), saved["clipped"].copy()
        self.abort_log = [tuple(int(x) for x in row) for row in saved["abort_log"]]
        self.W, self.done = saved["W"].copy(), int(saved["done"])
        return self.done

    def trajectory(self) -> Trajectory:
        """The batch's :class:`~pgfl.engine.Trajectory` (final models frozen as the engine's)."""
        v = self.v
        return Trajectory(
            v["centroid"], v["individual"], v["disagreement"], v.get("test_error"),
            v.get("test_log_loss"), v.get("server_test_error"), self.diverged_at, self.W,
            self.aborted, self.clipped, self.abort_log, self.job.reps.copy(),
            v.get("server_test_loss"),
        )  # fmt: skip
