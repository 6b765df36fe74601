"""The privatized GFL engine: one iteration vectorized over curves, repetitions, units and clients.

One GFL iteration ``i`` (preprint eqs. 6-8; SPEC §1):

1. server ``p`` samples ``L`` of its ``K`` clients without replacement;
2. each sampled client starts from ``w_{p,i-1}`` and runs ``E_pk`` SGD steps of size
   ``mu / E_pk`` on mini-batches of ``B_pk`` samples (eq. 3);
3. the server aggregates the shared messages (eq. 7):
   ``psi_p = (1/L) sum_k (w_pk + g_pk)`` when clients share models, or
   ``psi_p = w_{p,i-1} - mu (1/L) sum_k (u_pk + g_pk)`` when they share their averaged
   updates ``u_pk = (w_{p,i-1} - w_pk) / mu`` (journal §3.4, eqs. 54-55);
4. servers combine over the graph (eq. 8): ``w_p = sum_m a_pm (psi_m + g_pm)``.

Server-level noise ``g_pm`` (std ``sigma_g`` per coordinate):

* ``random``: server ``m`` draws ``g_m`` and sends ``psi_m + g_m`` to every neighbour and
  to itself, so the noise term is ``(A g)_p``;
* ``graph_homomorphic`` (eq. 47): ``g_pm = g_m`` for ``p != m`` and
  ``g_mm = -((1 - a_mm)/a_mm) g_m``; the noise term is ``((A - I) g)_p``, whose network
  average ``1^T (A - I) g / P`` is exactly zero (eq. 46);
* ``random_per_link``: an independent draw on every link ``m -> p`` (and the self-copy).

Array layout: a leading *curve* axis ``C`` (settings that vary between curves: step
size, noise, sharing mode, clipping) and a *repetition* axis ``R`` share the work of one
vectorized computation. Server models are ``W[C, R, P, M]``; sampled clients'
models ``Wk[C, R, P, L, M]``. Every random draw has a leading ``R`` axis and is shared
by all curves (common random numbers), so curves differ only by their settings.

The round is split in a *local phase* (clients' updates and the unit aggregate;
needs only the unit's own data) and a *combine phase* (needs the neighbours'
messages), so that a distributed backend can run blocks of units apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from pgfl.data.federated import FederatedData
from pgfl.privacy.secagg import SecAggAbort, SecAggConfig, SecureAggregation, quantized_mean
from pgfl.problems import _Problem
from pgfl.topology import check_combination_matrix
from pgfl.validation import ConfigError, check_choice, check_int, check_real

SERVER_NOISE = ("none", "random", "graph_homomorphic", "random_per_link")
CLIENT_NOISE = ("none", "laplace", "gaussian", "secure_aggregation")
SECAGG_PROTOCOLS = ("simulated", "cryptographic")
DISTRIBUTIONS = ("laplace", "gaussian")
SHARE = ("models", "updates")

#: A server model entry above this in magnitude (or non-finite) marks a repetition as diverged.
DIVERGENCE_BOUND = 1e6
#: Rounds with at most this many mini-batch samples (all epochs) are gathered in one call.
GATHER_AT_ONCE = 1 << 16
#: Iterations whose models are kept before their metrics are computed in one batch.
METRICS_CHUNK = 64


@dataclass(frozen=True)
class CurveSettings:
    """Settings that may differ between the curves of one batched simulation.

    Attributes:
        mu: step size ``mu`` (> 0); a client's SGD step is ``mu / E_pk``.
        share: ``"models"`` or ``"updates"`` (journal §3.4).
        client_noise: ``"none"``, ``"laplace"`` or ``"gaussian"`` noise on what a client
            shares, or ``"secure_aggregation"`` (pairwise masks that cancel in the unit's
            sum; :mod:`pgfl.privacy.secagg`).
        client_std: its standard deviation per coordinate.
        server_noise: one of :data:`SERVER_NOISE`.
        server_std: ``sigma_g``, std per coordinate of the server-level noise.
        server_distribution: ``"laplace"`` (the papers) or ``"gaussian"``.
        clip_norm: per-sample gradient clipping norm (``inf``: no clipping).
        secagg: encoding/threshold settings of secure aggregation (default settings if
            ``None``); used when ``client_noise == "secure_aggregation"``.
        secagg_protocol: ``"simulated"`` (the exact fixed-point equivalent, vectorized) or
            ``"cryptographic"`` (the real protocol per unit and round; slow, same bits).
        dropout: probability that a sampled client drops out of secure aggregation after
            sharing its keys (each round, independently).

    """

    mu: float
    share: str = "models"
    client_noise: str = "none"
    client_std: float = 0.0
    server_noise: str = "none"
    server_std: float = 0.0
    server_distribution: str = "laplace"
    clip_norm: float = float("inf")
    secagg: SecAggConfig | None = None
    secagg_protocol: str = "simulated"
    dropout: float = 0.0

    def __post_init__(self) -> None:
        check_real("training.mu", self.mu, lo=0, lo_open=True)
        check_choice("training.share", self.share, SHARE)
        check_choice("privacy.client_noise", self.client_noise, CLIENT_NOISE)
        check_real("privacy.client_std", self.client_std, lo=0)
        check_choice("privacy.server_noise", self.server_noise, SERVER_NOISE)
        check_real("privacy.server_std", self.server_std, lo=0)
        check_choice("privacy.server_distribution", self.server_distribution, DISTRIBUTIONS)
        if not (self.clip_norm == float("inf")):
            check_real("training.clip_norm", self.clip_norm, lo=0, lo_open=True)
        check_choice("privacy.secagg_protocol", self.secagg_protocol, SECAGG_PROTOCOLS)
        check_real("privacy.dropout", self.dropout, lo=0, hi=1, hi_open=True)
        if self.client_noise == "secure_aggregation" and self.secagg is None:
            object.__setattr__(self, "secagg", SecAggConfig())


@dataclass(frozen=True)
class Network:
    """What the curves of one batched simulation share: data, loss, graph and schedule.

    Attributes:
        data: the federated data set (``P`` units of ``K`` clients).
        problem: the loss (``LeastSquares`` or ``Logistic``).
        A: combination matrix ``[P, P]`` (checked against Assumption 1).
        L: clients sampled per unit and iteration, in ``[1, K]``.
        epochs: local epochs ``E_pk``, int ``[P, K]``.
        batch: mini-batch sizes ``B_pk``, int ``[P, K]``; ``None`` means full batch
            (every sample of the client in every epoch).

    """

    data: FederatedData
    problem: _Problem
    A: np.ndarray
    L: int
    epochs: np.ndarray
    batch: np.ndarray | None
    iota2: float = field(init=False)
    link_weights: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        P, K, _, _ = self.data.shape
        if self.A.shape != (P, P):
            raise ConfigError(f"combination matrix must be P x P with P={P}; got {self.A.shape}")
        object.__setattr__(self, "iota2", check_combination_matrix(self.A))
        # [P, nnz(A)]: column e carries a_pm for the e-th link m -> p (row-major order)
        rows, cols = np.nonzero(self.A)
        links = np.zeros((P, rows.size))
        links[rows, np.arange(rows.size)] = self.A[rows, cols]
        object.__setattr__(self, "link_weights", links)
        check_int("training.L", self.L, lo=1, hi=K, hi_name="K")
        for name, arr in (("epochs", self.epochs), ("batch", self.batch)):
            if arr is None:
                continue
            if arr.shape != (P, K) or arr.min() < 1:
                raise ConfigError(f"training.{name} must be positive integers of shape {(P, K)}")


class RoundDraws(NamedTuple):
    """The random draws of one iteration (each with a leading repetition axis ``R``).

    Attributes:
        clients: sampled client indices ``[R, P, L]`` (distinct within a unit).
        batches: sample indices ``[E_max, R, P, L, B_max]`` within each client's data
            (uniform with replacement), or ``None`` for full batches.
        client_noise: unit-variance noise ``[R, P, L, M]`` per distribution name.
        server_noise: unit-variance noise ``[R, P, M]`` per distribution name.
        link_noise: unit-variance noise ``[R, nnz(A), M]`` per distribution name.
        dropout: uniform draws ``[R, P, L]`` (a client drops if its draw is below the
            curve's dropout probability), or ``None`` without secure aggregation.
        iteration: the iteration number ``i`` (1-based), the secure-aggregation round.

    """

    clients: np.ndarray
    batches: np.ndarray | None
    client_noise: dict[str, np.ndarray]
    server_noise: dict[str, np.ndarray]
    link_noise: dict[str, np.ndarray]
    dropout: np.ndarray | None = None
    iteration: int = 1


class Streams(NamedTuple):
    """Independent generators for the random draws of a simulation."""

    sampling: np.random.Generator
    batches: np.random.Generator
    client_noise: np.random.Generator
    server_noise: np.random.Generator
    dropout: np.random.Generator


def unit_variance(
    rng: np.random.Generator, distribution: str, shape: tuple[int, ...]
) -> np.ndarray:
    """Zero-mean, unit-variance noise: ``Lap(0, 1/sqrt(2))`` or ``N(0, 1)``.

    Scaled by ``sigma`` it is the papers' ``Lap(0, sigma/sqrt(2))`` of variance ``sigma^2``.
    """
    if distribution == "laplace":
        return rng.laplace(0.0, 1.0 / np.sqrt(2.0), size=shape)
    return rng.standard_normal(shape)


def sample_clients(rng: np.random.Generator, R: int, P: int, K: int, L: int) -> np.ndarray:
    """``[R, P, L]`` indices: ``L`` distinct clients of ``K`` per unit, uniformly at random."""
    if L == K:
        return np.broadcast_to(np.arange(K), (R, P, K))
    keys = rng.random((R, P, K))
    return np.argpartition(keys, L - 1, axis=-1)[..., :L]


class _CurveArrays(NamedTuple):
    """Per-curve settings as arrays broadcastable against ``[C, R, P, ...]``."""

    mu: np.ndarray  # [C]
    updates: np.ndarray  # [C] bool
    client_std: dict[str, np.ndarray]  # distribution -> [C]
    server_random: dict[str, np.ndarray]  # distribution -> [C], coefficient of A g
    server_self: dict[str, np.ndarray]  # distribution -> [C], coefficient of g
    link_std: dict[str, np.ndarray]  # distribution -> [C]
    clip: np.ndarray | None  # [C] or None if no curve clips
    secagg: tuple[tuple[int, CurveSettings], ...]  # curves aggregated securely


def _curve_arrays(curves: Sequence[CurveSettings]) -> _CurveArrays:
    C = len(curves)
    mu = np.array([c.mu for c in curves])
    updates = np.array([c.share == "updates" for c in curves])
    client_std: dict[str, np.ndarray] = {}
    server_random: dict[str, np.ndarray] = {}
    server_self: dict[str, np.ndarray] = {}
    link_std: dict[str, np.ndarray] = {}
    for i, c in enumerate(curves):
        if c.client_noise in DISTRIBUTIONS and c.client_std > 0:
            client_std.setdefault(c.client_noise, np.zeros(C))[i] = c.client_std
        d, s = c.server_distribution, c.server_std
        if s > 0 and c.server_noise in ("random", "graph_homomorphic"):
            server_random.setdefault(d, np.zeros(C))[i] = s
            server_self.setdefault(d, np.zeros(C))
            if c.server_noise == "graph_homomorphic":
                server_self[d][i] = s
        elif s > 0 and c.server_noise == "random_per_link":
            link_std.setdefault(d, np.zeros(C))[i] = s
    clips = np.array([c.clip_norm for c in curves])
    clip = clips if np.isfinite(clips).any() else None
    secagg = tuple((i, c) for i, c in enumerate(curves) if c.client_noise == "secure_aggregation")
    return _CurveArrays(mu, updates, client_std, server_random, server_self, link_std, clip, secagg)


def draw_round(
    streams: Streams, net: Network, curves: _CurveArrays, R: int, iteration: int = 1
) -> RoundDraws:
    """Draw every random quantity of one iteration, in a fixed order per stream."""
    P, K, _, M = net.data.shape
    clients = sample_clients(streams.sampling, R, P, K, net.L)
    batches = None
    if net.batch is not None:
        e_max, b_max = int(net.epochs.max()), int(net.batch.max())
        batches = streams.batches.random((e_max, R, P, net.L, b_max))
    client_noise = {
        d: unit_variance(streams.client_noise, d, (R, P, net.L, M)) for d in curves.client_std
    }
    server_noise = {
        d: unit_variance(streams.server_noise, d, (R, P, M)) for d in curves.server_random
    }
    nnz = net.link_weights.shape[1]
    link_noise = {d: unit_variance(streams.server_noise, d, (R, nnz, M)) for d in curves.link_std}
    dropout = streams.dropout.random((R, P, net.L)) if curves.secagg else None
    return RoundDraws(clients, batches, client_noise, server_noise, link_noise, dropout, iteration)


def local_phase(
    W: np.ndarray, net: Network, curves: _CurveArrays, draws: RoundDraws
) -> tuple[np.ndarray, np.ndarray]:
    """Clients' local SGD and the unit aggregate ``psi`` (eqs. 6-7); ``[C,R,P,M]`` → same.

    Also returns which units aborted secure aggregation this round (``[C, R, P]`` bool;
    such a unit's ``psi`` is its previous model).

    The sampled clients of every repetition and unit are flattened into one axis and
    sorted by their number of epochs (most first), so that the clients still training
    at epoch ``e`` are a prefix of that axis: an epoch costs only its active clients.
    The curve axis is moved last (``Wk[n, M, C]``) so that every epoch is two batched
    matrix products shared by all curves (:meth:`_Problem.gradient`).
    """
    data = net.data
    P, K, N, M = data.shape
    R, _, L = draws.clients.shape
    unit = np.arange(P)[None, :, None]
    E_f = net.epochs[unit, draws.clients].reshape(-1)
    order = np.argsort(-E_f, kind="stable")
    E_sorted = E_f[order]
    active = np.searchsorted(-E_sorted, -np.arange(int(E_sorted[0])), side="left")  # #{E > e}
    n_f = data.counts[unit, draws.clients].reshape(-1)[order]
    base = ((unit * K + draws.clients) * N).reshape(-1)[order]  # flat index of 1st sample
    Z = data.Xy.reshape(-1, M + 1)  # features and target side by side: one gather per batch
    step = curves.mu / E_sorted[:, None, None]  # [n, 1, C]
    clip = curves.clip
    start = np.moveaxis(W, 0, -1).reshape(R * P, M, -1)  # each client starts at its unit's model
    Wk = np.take(start, order // L, axis=0)
    if net.batch is None:
        rows = base[:, None] + np.arange(N)
        weight = (np.arange(N) < n_f[:, None]) / n_f[:, None]
        batch = np.take(Z, rows, axis=0)
    else:
        B_f = net.batch[unit, draws.clients].reshape(-1)[order]
        weight = (np.arange(draws.batches.shape[-1]) < B_f[:, None]) / B_f[:, None]
        position = draws.batches.reshape(draws.batches.shape[0], R * P * L, -1)[:, order]
        rows = base[:, None] + (position * n_f[:, None]).astype(np.int64)  # [E_max, n, B]
        # small rounds gather every epoch's batches at once (fewer calls); large rounds
        # gather each epoch's active prefix only (less memory traffic)
        gathered = np.take(Z, rows, axis=0) if rows.size <= GATHER_AT_ONCE else None
    for e, k in enumerate(active):
        if net.batch is not None:
            batch = gathered[e] if gathered is not None else np.take(Z, rows[e, :k], axis=0)
        U, d = batch[:k, :, :M], batch[:k, :, M]
        Wk[:k] -= step[:k] * net.problem.gradient(Wk[:k], U, d, weight[:k], clip)
    unsorted = np.empty_like(Wk)
    unsorted[order] = Wk
    unsorted = unsorted.reshape(R, P, L, M, -1)
    psi = unsorted.mean(axis=2)  # [R, P, M, C]
    aborted = np.zeros((W.shape[0], R, P), dtype=bool)
    for c, settings in curves.secagg:
        psi[..., c], aborted[c] = secure_aggregate(W[c], unsorted[..., c], settings, draws)
    for dist, std in curves.client_std.items():
        # models: psi = mean(w_k + g_k); updates: psi = w - mu mean(u_k + g_k), u_k = (w - w_k)/mu
        scale = std * np.where(curves.updates, -curves.mu, 1.0)
        psi += draws.client_noise[dist].mean(axis=2)[..., None] * scale
    return np.moveaxis(psi, -1, 0), aborted


def secure_aggregate(
    W: np.ndarray, Wk: np.ndarray, settings: CurveSettings, draws: RoundDraws
) -> tuple[np.ndarray, np.ndarray]:
    """The unit aggregate under secure aggregation (preprint eq. 48; Bonawitz et al. 2017).

    Clients share their models (or updates) masked; the masks cancel in the unit's sum,
    so the server obtains the fixed-point mean of the surviving clients' messages
    (``W [R, P, M]``: previous models; ``Wk [R, P, L, M]``: clients' models). Clients drop
    out with probability ``settings.dropout``; a unit with fewer survivors than the
    threshold aborts the round and keeps its previous model (``psi_p = w_{p,i-1}``).
    Returns ``psi [R, P, M]`` and the aborted units ``[R, P]`` (bool).
    """
    R, P, L, _ = Wk.shape
    survivors = draws.dropout >= settings.dropout
    updates = settings.share == "updates"
    messages = (W[:, :, None] - Wk) / settings.mu if updates else Wk
    unit = np.broadcast_to(np.arange(P)[None, :], (R, P))
    if settings.secagg_protocol == "simulated":
        mean = quantized_mean(
            messages, survivors, settings.secagg, unit=unit, round=draws.iteration
        )
    else:
        protocol = SecureAggregation(settings.secagg, num_clients=L)
        mean = np.empty(messages.shape[:2] + messages.shape[3:])
        for r in range(R):  # the real protocol runs unit by unit
            for p in range(P):
                try:
                    mean[r, p] = protocol.aggregate(
                        messages[r, p], unit=p, round=draws.iteration, dropped=~survivors[r, p]
                    )
                except SecAggAbort:
                    mean[r, p] = np.nan
    psi = W - settings.mu * mean if updates else mean
    aborted = np.isnan(mean).any(axis=-1)
    return np.where(aborted[..., None], W, psi), aborted


def combine_phase(
    psi: np.ndarray, net: Network, curves: _CurveArrays, draws: RoundDraws
) -> np.ndarray:
    """Diffusion combination with server-level noise (eq. 8); ``[C,R,P,M]`` → same."""
    A = net.A
    W = A @ psi  # eq. 8 without noise, for every curve and repetition
    for dist, g in draws.server_noise.items():
        Ag = A @ g
        W += curves.server_random[dist][:, None, None, None] * Ag
        W -= curves.server_self[dist][:, None, None, None] * g
    for dist, g in draws.link_noise.items():
        noise = np.einsum("pe,red->rpd", net.link_weights, g)
        W += curves.link_std[dist][:, None, None, None] * noise
    return W


@dataclass
class Trajectory:
    """Per-iteration metrics of a batched simulation (axes ``[iteration, curve, repetition]``).

    Attributes:
        centroid_msd: ``||w_c,i - w°||^2`` (preprint eq. 58).
        individual_msd: ``(1/P) sum_p ||w_p,i - w°||^2`` (eq. 59).
        disagreement: ``(1/P) sum_p ||w_p,i - w_c,i||^2`` (eq. 30).
        test_error: centroid test error (classification with a test set), else ``None``.
        test_log_loss: centroid test log-loss (same condition), else ``None``.
        server_test_error: each server's test error ``[iteration, curve, repetition, P]``.
        diverged_at: first iteration (1-based) at which a repetition diverged (a server
            model entry non-finite or above :data:`DIVERGENCE_BOUND`), ``-1`` if never;
            shape ``[curve, repetition]``.
        W: final server models ``[C, R, P, M]``.
        aborted: unit-rounds whose secure aggregation aborted, per curve ``[C]``.
        abort_log: ``(curve, repetition, iteration, unit)`` of every abort (the run log).

    """

    centroid_msd: np.ndarray
    individual_msd: np.ndarray
    disagreement: np.ndarray
    test_error: np.ndarray | None
    test_log_loss: np.ndarray | None
    server_test_error: np.ndarray | None
    diverged_at: np.ndarray
    W: np.ndarray
    aborted: np.ndarray | None = None
    abort_log: list[tuple[int, int, int, int]] = field(default_factory=list)


def simulate(
    net: Network,
    curves: Sequence[CurveSettings],
    *,
    iterations: int,
    repetitions: int = 1,
    seed: int = 0,
    w_opt: np.ndarray | None = None,
    w0: np.ndarray | None = None,
    progress: Callable[[int], None] | None = None,
) -> Trajectory:
    """Run ``iterations`` GFL iterations for every curve and repetition at once.

    Args:
        net: the shared network, data, loss and schedule.
        curves: per-curve settings; all curves see the same random draws.
        iterations: number of iterations ``i = 1..T``.
        repetitions: Monte-Carlo repetitions ``R`` (independent draws).
        seed: root seed; streams ``sampling``, ``batches``, ``client_noise``,
            ``server_noise`` derive from it (:func:`pgfl.rng.stream`).
        w_opt: ``w°`` for the MSD metrics (default: ``net.problem.optimum(net.data)``).
        w0: initial model of every server (default zeros).
        progress: called with the number of finished iterations.

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
    from pgfl.rng import stream

    iterations = check_int("iterations", iterations, lo=1)
    R = check_int("repetitions", repetitions, lo=1)
    if not curves:
        raise ConfigError("curves must list at least one curve; got none")
    for c in curves:
        if c.server_noise == "graph_homomorphic" and c.server_std > 0:
            check_combination_matrix(net.A, need_self_weights=True)
    ca = _curve_arrays(curves)
    P, _, _, M = net.data.shape
    C = len(curves)
    w_opt = net.problem.optimum(net.data) if w_opt is None else np.asarray(w_opt, float)
    W = np.zeros((C, R, P, M))
    if w0 is not None:
        W += np.asarray(w0, float)
    streams = Streams(*(stream(seed, n) for n in Streams._fields))
    has_test = net.data.X_test is not None and net.problem.name == "logistic"
    shape = (iterations, C, R)
    out = {k: np.empty(shape) for k in ("centroid", "individual", "disagreement")}
    test_error = np.empty(shape) if has_test else None
    test_log_loss = np.empty(shape) if has_test else None
    server_test_error = np.empty((*shape, P)) if has_test else None
    diverged_at = np.full((C, R), -1)
    aborts = np.zeros(C, dtype=np.int64)
    abort_log: list[tuple[int, int, int, int]] = []
    history = np.empty((min(METRICS_CHUNK, iterations), C, R, P, M))

    def record(stop: int, n: int) -> None:
        """Metrics of the ``n`` iterations ending at ``stop``, from the kept models."""
        Wh = history[:n]
        wc = Wh.mean(axis=3)
        span = slice(stop - n, stop)
        out["centroid"][span] = np.sum((wc - w_opt) ** 2, axis=-1)
        out["individual"][span] = np.sum((Wh - w_opt) ** 2, axis=-1).mean(axis=-1)
        out["disagreement"][span] = np.sum((Wh - wc[..., None, :]) ** 2, axis=-1).mean(axis=-1)
        if has_test:
            X_test, y_test = net.data.X_test, net.data.y_test
            test_error[span] = net.problem.test_error(wc, X_test, y_test)
            test_log_loss[span] = net.problem.test_loss(wc, X_test, y_test)
            server_test_error[span] = net.problem.test_error(Wh, X_test, y_test)

    with np.errstate(all="ignore"):
        for i in range(iterations):
            draws = draw_round(streams, net, ca, R, i + 1)
            psi, aborted = local_phase(W, net, ca, draws)
            W = combine_phase(psi, net, ca, draws)
            if aborted.any():
                aborts += aborted.sum(axis=(1, 2))
                log = zip(*np.nonzero(aborted), strict=True)
                abort_log.extend((c, r, i + 1, p) for c, r, p in log)
            bad = ~(np.abs(W).max(axis=(2, 3)) <= DIVERGENCE_BOUND)
            if bad.any():
                new = bad & (diverged_at < 0)
                diverged_at[new] = i + 1
                W[bad] = np.nan
            history[i % METRICS_CHUNK] = W
            if (i + 1) % METRICS_CHUNK == 0 or i + 1 == iterations:
                record(i + 1, i % METRICS_CHUNK + 1)
            if progress is not None:
                progress(i + 1)
    return Trajectory(
        out["centroid"],
        out["individual"],
        out["disagreement"],
        test_error,
        test_log_loss,
        server_test_error,
        diverged_at,
        W,
        aborts,
        abort_log,
    )
