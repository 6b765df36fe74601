"""Run many GFL iterations for a batch of curves and repetitions, with their metrics.

Metrics (equation numbers of "Privatized Graph Federated Learning", arXiv:2203.07105):
centroid MSD ``‖w_c,i − w°‖²`` (eq. 58), average individual MSD
``(1/P) Σ_p ‖w_p,i − w°‖²`` (eq. 59), network disagreement ``(1/P) Σ_p ‖w_p,i − w_c,i‖²``
(eq. 30), and on classification data with a test set the centroid's and every server's
test error and loss. A problem without a closed-form optimum (``optimum`` returns
``None``, e.g. a neural network) has no MSD: those metrics are NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from pgfl.engine import metrics
from pgfl.engine.compiled import local_phase_kind
from pgfl.engine.network import Network
from pgfl.engine.rounds import CompiledRounds
from pgfl.engine.settings import CurveBatch, CurveSettings
from pgfl.engine.step import round_step
from pgfl.general import PARAMS
from pgfl.resources import check_fits, simulation_memory
from pgfl.validation import check_int

#: Iterations whose models are kept before their metrics are computed in one batch.
METRICS_CHUNK = 64


@dataclass
class Trajectory:
    """Per-iteration metrics of a batched simulation (axes ``[iteration, curve, repetition]``).

    Attributes:
        centroid_msd: ``‖w_c,i − w°‖²`` (eq. 58).
        individual_msd: ``(1/P) Σ_p ‖w_p,i − w°‖²`` (eq. 59).
        disagreement: ``(1/P) Σ_p ‖w_p,i − w_c,i‖²`` (eq. 30).
        test_error: centroid test error (classification with a test set), else ``None``.
        test_log_loss: centroid test log-loss (same condition), else ``None``.
        server_test_error: each server's test error ``[iteration, curve, repetition, P]``.
        server_test_loss: each server's test loss (same shape), or ``None``.
        diverged_at: first iteration (1-based) at which a repetition diverged (a server
            model entry non-finite or above :data:`~pgfl.engine.metrics.DIVERGENCE_BOUND`),
            ``-1`` if never;
            shape ``[curve, repetition]``.
        W: final server models ``[C, R, P, M]``.
        aborted: unit-rounds whose secure aggregation aborted, ``[C, R]``.
        clipped: client messages clipped by the aggregation (secure aggregation's range),
            ``[C, R]``.
        abort_log: ``(curve, repetition, iteration, unit)`` of every abort (the run log);
            repetitions by their global id.
        reps: global ids of the repetitions, ``[R]``.

    """

    centroid_msd: np.ndarray
    individual_msd: np.ndarray
    disagreement: np.ndarray
    test_error: np.ndarray | None
    test_log_loss: np.ndarray | None
    server_test_error: np.ndarray | None
    diverged_at: np.ndarray
    W: np.ndarray
    aborted: np.ndarray
    clipped: np.ndarray
    abort_log: list[tuple[int, int, int, int]] = field(default_factory=list)
    reps: np.ndarray | None = None
    server_test_loss: np.ndarray | None = None

    #: Fields whose repetition axis is 2 (per iteration) or 1 (per curve).
    _REP_AXIS = {
        "centroid_msd": 2,
        "individual_msd": 2,
        "disagreement": 2,
        "test_error": 2,
        "test_log_loss": 2,
        "server_test_error": 2,
        "diverged_at": 1,
        "W": 1,
        "aborted": 1,
        "clipped": 1,
        "reps": 0,
        "server_test_loss": 2,
    }

    @classmethod
    def concat(cls, parts: Sequence[Trajectory]) -> Trajectory:
        """Join trajectories of consecutive repetition blocks along the repetition axis.

        The simulation of repetitions ``a..b`` equals the rows ``a..b`` of the simulation of
        all of them, bit for bit, so joining blocks reproduces the whole run exactly.
        """
        out = {}
        for f in fields(cls):
            values = [getattr(p, f.name) for p in parts]
            if f.name == "abort_log":  # in the order of one run: iteration, curve, rep, unit
                out[f.name] = sorted((x for v in values for x in v), key=_log_order)
            elif values[0] is None:
                out[f.name] = None
            else:
                out[f.name] = np.concatenate(values, axis=cls._REP_AXIS[f.name])
        return cls(**out)


def _log_order(entry: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    c, r, i, p = entry
    return i, c, r, p


def simulate(
    net: Network,
    curves: Sequence[CurveSettings] | CurveBatch,
    *,
    iterations: int,
    repetitions: int = 1,
    seed: int = 0,
    w_opt: np.ndarray | None = None,
    w0: np.ndarray | None = None,
    progress: Callable[[int], None] | None = None,
    first_repetition: int = 0,
    block_size: int | None = None,
) -> Trajectory:
    """Run ``iterations`` GFL iterations for every curve and repetition at once.

    Args:
        net: the shared network, data, loss and schedule.
        curves: per-curve settings, checked against ``net`` (their mechanisms' ``validate``);
            or a :class:`~pgfl.engine.settings.CurveBatch` already checked
            (``CurveBatch.of(curves, net)``). All curves see the same random draws.
        iterations: number of iterations ``i = 1..T``.
        repetitions: Monte-Carlo repetitions ``R`` (independent draws).
        seed: root seed; every draw is keyed by it (:class:`pgfl.rng.KeyedDraws`).
        w_opt: ``w°`` for the MSD metrics (default: ``net.problem.optimum(net.data)``;
            ``None`` there, e.g. for a neural network, makes the MSD metrics NaN).
        w0: initial model of every server (default ``net.problem.initial`` if the problem
            has one, else zeros).
        progress: called with the number of finished iterations (after every compiled
            call of up to 64 rounds, or every round).
        first_repetition: global id of the first repetition: repetitions
            ``first_repetition..first_repetition+R−1`` are simulated, and a block of
            repetitions gives the same bits as those rows of a larger run.
        block_size: units per block of the local phase when rounds run one by one (memory;
            same bits for any value); the compiled rounds hold one round of local models.

    Returns:
        A :class:`Trajectory`.

    One epoch, full participation and full batches make GFL gradient descent on eq. 1,
    so the centroid reaches ``w°`` to machine precision:

    >>> from pgfl.data.synthetic import regression_data
    >>> from pgfl.problems import LeastSquares
    >>> data = regression_data(np.random.default_rng(0), P=3, K=4, N=20)
    >>> one = np.ones((3, 4), dtype=int)
    >>> net = Network(data, LeastSquares(0.1), np.full((3, 3), 1 / 3), L=4, epochs=one, batch=None)
    >>> t = simulate(net, [CurveSettings(mu=0.5)], iterations=400)
    >>> bool(t.centroid_msd[-1, 0, 0] < 1e-20)
    True

    """
    iterations = PARAMS["iterations"].check(iterations)
    R = PARAMS["repetitions"].check(repetitions)
    first = check_int("first_repetition", first_repetition, lo=0)
    batch = curves if isinstance(curves, CurveBatch) else CurveBatch.of(curves, net)
    _check_memory(net, len(batch), R, iterations)
    reps = np.arange(first, first + R)
    blocks = net.blocks(block_size)
    P, M = net.data.shape[0], net.dim
    w_opt = net.problem.optimum(net.data) if w_opt is None else np.asarray(w_opt, float)
    if w_opt is None:  # no closed-form optimum: MSD metrics are not defined
        w_opt = np.full(M, np.nan)
    W = np.zeros((len(batch), R, P, M))
    w0 = getattr(net.problem, "initial", None) if w0 is None else w0
    if w0 is not None:
        W += np.asarray(w0, float)
    rec = _Recorder(net, iterations, len(batch), R, w_opt)
    fast = CompiledRounds.prepare(net, batch, seed=seed, reps=reps)
    if fast is not None:
        W = _compiled_rounds(fast, W, rec, iterations, progress)
    else:
        W = _rounds(net, blocks, batch, W, rec, iterations, progress, seed, reps)
    return rec.trajectory(W, reps)


def _compiled_rounds(fast, W, rec, iterations, progress) -> np.ndarray:
    """The run's rounds in compiled calls of several rounds, up to the next metrics chunk."""
    i = 0
    while i < iterations:
        at = i % METRICS_CHUNK
        n = min(fast.T, METRICS_CHUNK - at, iterations - i)
        fast.run(W, i, rec.history[at : at + n], rec.diverged_at)
        W = rec.history[at + n - 1].copy()
        i += n
        rec.kept(i - 1)
        if progress is not None:
            progress(i)
    return W


def _rounds(net, blocks, batch, W, rec, iterations, progress, seed, reps) -> np.ndarray:
    """The run's rounds one by one (:func:`~pgfl.engine.step.round_step`)."""
    kind = local_phase_kind(net.problem)  # the environment, read once
    # A diverging repetition may overflow inside a round; it is detected right after the
    # round, reported in diverged_at and frozen at NaN (NaN arithmetic is quiet).
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(1, iterations + 1):
            r = round_step(
                W, blocks, net.links, batch, seed=seed, iteration=i, reps=reps, kind=kind
            )
            W = r.W
            rec.round(i, r, reps)
            W[rec.diverged_at >= 0] = np.nan
            rec.keep(i - 1, W)
            if progress is not None:
                progress(i)
    return W


def _check_memory(net: Network, C: int, R: int, iterations: int) -> None:
    """Refuse a simulation whose arrays cannot fit in memory (one line)."""
    P, K, N, _ = net.data.shape
    M = net.dim
    check_fits(
        f"iterations={iterations}, repetitions={R} with {C} curves on P={P}, K={K}, N={N}, M={M}",
        simulation_memory(
            P=P, K=K, N=N, M=M, L=net.L, E=int(net.epochs.max()),
            B=None if net.batch is None else int(net.batch.max()), C=C, R=R, T=iterations,
            test_size=0 if net.data.X_test is None else len(net.data.X_test), covariances=False,
        ),
    )  # fmt: skip


class _Recorder:
    """Per-iteration metrics of a run, computed a chunk of kept models at a time."""

    def __init__(self, net: Network, T: int, C: int, R: int, w_opt: np.ndarray) -> None:
        P, M = net.data.shape[0], net.dim
        self.net, self.T, self.P, self.w_opt = net, T, P, w_opt
        self.has_test = net.data.X_test is not None and getattr(net.problem, "classifier", False)
        shape = (T, C, R)
        names = ["centroid", "individual", "disagreement"]
        if self.has_test:
            names += ["test_error", "test_log_loss"]
        self.out = {k: np.empty(shape) for k in names}
        if self.has_test:
            self.out["server_test_error"] = np.empty((*shape, P))
            self.out["server_test_loss"] = np.empty((*shape, P))
        self.diverged_at = np.full((C, R), -1)
        self.aborted = np.zeros((C, R), dtype=np.int64)
        self.clipped = np.zeros((C, R), dtype=np.int64)
        self.abort_log: list[tuple[int, int, int, int]] = []
        self.history = np.empty((min(METRICS_CHUNK, T), C, R, P, M))

    def round(self, i: int, r, reps: np.ndarray) -> None:
        """Count round ``i``'s aborts and clipped messages; mark repetitions that diverged."""
        if r.aborted.any():
            self.aborted += r.aborted.sum(axis=2)
            log = zip(*np.nonzero(r.aborted), strict=True)
            self.abort_log.extend((c, int(reps[k]), i, p) for c, k, p in log)
        self.clipped += r.clipped
        bad = metrics.diverged(r.W)
        self.diverged_at[bad & (self.diverged_at < 0)] = i

    def keep(self, i: int, W: np.ndarray) -> None:
        """Keep iteration ``i``'s models (0-based); a full chunk (or the last) is recorded."""
        self.history[i % METRICS_CHUNK] = W
        self.kept(i)

    def kept(self, i: int) -> None:
        """Iterations up to ``i`` (0-based) are kept: record a full chunk (or the last)."""
        if (i + 1) % METRICS_CHUNK == 0 or i + 1 == self.T:
            self.record(i + 1, i % METRICS_CHUNK + 1)

    def record(self, stop: int, n: int) -> None:
        """Metrics of the ``n`` iterations ending at ``stop``, from the kept models."""
        Wh, P, w_opt, out = self.history[:n], self.P, self.w_opt, self.out
        wc = metrics.centroid([metrics.model_sum(Wh)], P)
        span = slice(stop - n, stop)
        out["centroid"][span] = metrics.centroid_msd(wc, w_opt)
        errors = metrics.reduce_errors([metrics.error_sums(Wh, w_opt, wc)], P)
        out["individual"][span] = errors["individual"]
        out["disagreement"][span] = errors["disagreement"]
        if self.has_test:
            problem, X_test, y_test = self.net.problem, self.net.data.X_test, self.net.data.y_test
            out["test_error"][span] = problem.test_error(wc, X_test, y_test)
            out["test_log_loss"][span] = problem.test_loss(wc, X_test, y_test)
            out["server_test_error"][span] = problem.test_error(Wh, X_test, y_test)
            out["server_test_loss"][span] = problem.test_loss(Wh, X_test, y_test)

    def trajectory(self, W: np.ndarray, reps: np.ndarray) -> Trajectory:
        """The run's :class:`Trajectory`."""
        out = self.out
        return Trajectory(
            out["centroid"], out["individual"], out["disagreement"], out.get("test_error"),
            out.get("test_log_loss"), out.get("server_test_error"), self.diverged_at, W,
            self.aborted, self.clipped, self.abort_log, reps, out.get("server_test_loss"),
        )  # fmt: skip
