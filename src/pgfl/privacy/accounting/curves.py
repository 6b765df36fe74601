"""ε(i) over the iterations of a privatized GFL curve, and noise calibration to a target ε.

Two layers:

* generic, on top of any :class:`~.accountants.Accountant`: :func:`accountant_curve`
  (the one incremental loop: compose iteration by iteration, read ε at checkpoints) and
  :func:`calibrate_releases` (bracketing, then root-finding on the accountant's own ε);
* GFL-specific: :func:`releases_for` turns a curve's settings into the per-iteration
  releases its adversary observes (``docs/privacy.md``), :func:`epsilon_curve` gives
  ε(i) by every requested accountant as an :class:`EpsilonCurve`, and :func:`calibrate`
  the smallest noise σ whose ε after T iterations meets a target.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import dp_accounting
import numpy as np

from pgfl.validation import ConfigError, check_choice, check_int, check_real

from .accountants import ACCOUNTANTS, Accountant, PaperAccountant, PldAccountant, make_accountant
from .papers import SCHEMES, gfl_sensitivities
from .releases import GaussianRelease, LaplaceRelease, Release, VectorLaplaceRelease

__all__ = [
    "DISTRIBUTIONS",
    "FLOATING_POINT_CAVEAT",
    "SCOPES",
    "TIGHT_ACCOUNTANT",
    "EpsilonCurve",
    "accountant_curve",
    "calibrate",
    "calibrate_releases",
    "default_accountants",
    "epsilon_curve",
    "final_epsilon",
    "releases_for",
]

DISTRIBUTIONS = ("laplace", "gaussian")
#: The accountant pgfl calls "the tight one".
TIGHT_ACCOUNTANT = "pld"
#: (settings, accountant, reading, rtol) → [(target ε, σ_pld/σ_rdp), ...] of recent PLD
#: calibrations of Laplace noise: the ratio corrects the Rényi starting guess for another
#: target of the same settings (a frontier's grid of ε). The answer is the same whatever
#: the guess (:func:`calibrate_releases`), so this only saves evaluations; it holds at
#: most this many settings.
_PLD_OVER_RDP: dict[tuple, list[tuple[float, float]]] = {}
_PLD_OVER_RDP_KEEP = 64
#: Support size the PLD grid aims at (≈ 2·Σε / interval); see :func:`pld_interval`.
_PLD_TARGET_POINTS = 2e4

#: What each scheme's ε covers and against whom (docs/privacy.md has the full story).
SCOPES = {
    "graph_homomorphic": (
        "covers the messages one server sends over its links (adversary: a neighbouring server "
        "or an eavesdropper on any set of links); NOT the centroid or that server's own model, "
        "where the graph-homomorphic noise cancels, nor a coalition including the server itself"
    ),
    "random": (
        "covers the messages one server sends over its links (one noise draw per server and "
        "iteration, the same copy on every link and on its own copy) and everything computed "
        "from them, including the servers' final models and the centroid; adversary: a "
        "neighbouring server or an eavesdropper on any set of links"
    ),
    "random_per_link": (
        "covers the messages one server sends over the observed links (independent noise per "
        "link); an adversary watching k links sees k copies per iteration. The proof covers an "
        "adversary who sees all of the server's links: set observed_links to its degree"
    ),
    "models": (
        "covers what one client sends its server (noisy model); adversary: the honest-but-curious "
        "server, and by post-processing anyone downstream"
    ),
    "updates": (
        "covers what one client sends its server (noisy update); adversary: the honest-but-curious "
        "server, and by post-processing anyone downstream"
    ),
}
#: Shown with every reported ε (docs/privacy.md, "Floating-point noise").
FLOATING_POINT_CAVEAT = (
    "epsilon is for ideal real-valued noise; pgfl samples noise in floating point, which "
    "leaks through the low-order bits (Mironov 2012): a simulation figure, not a deployment "
    "guarantee (docs/privacy.md)"
)


def default_accountants(distribution: str) -> tuple[str, ...]:
    """Accountants :func:`epsilon_curve` reports by default for a noise distribution.

    >>> default_accountants("gaussian")
    ('paper', 'pld', 'rdp')
    """
    dist = check_choice("distribution", distribution, DISTRIBUTIONS)
    return ACCOUNTANTS if dist == "laplace" else ("paper", "pld", "rdp")


@dataclasses.dataclass(frozen=True, eq=False)
class EpsilonCurve(Mapping[str, np.ndarray]):
    """ε(i), i = 1..T, of one privatized curve, per accountant (a read-only mapping).

    Attributes:
        curves: accountant → float array of shape (T,) (non-decreasing; ``inf`` if none).
        delta: the δ every value is stated at (pure-DP accountants hold for any δ).
        reason: why ε is infinite (no clipping bound, no noise), else ``None``.
        notes: accountant → one line saying what the number is.
        settings: the inputs, for the record.

    """

    curves: dict[str, np.ndarray]
    delta: float
    reason: str | None = None
    notes: dict[str, str] = dataclasses.field(default_factory=dict)
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.curves[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.curves)

    def __len__(self) -> int:
        return len(self.curves)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EpsilonCurve):
            return NotImplemented
        return (
            self.curves.keys() == other.curves.keys()
            and all(np.array_equal(v, other.curves[k]) for k, v in self.curves.items())
            and (self.delta, self.reason, self.settings)
            == (other.delta, other.reason, other.settings)
        )

    __hash__ = None  # type: ignore[assignment]  # holds arrays

    @property
    def iterations(self) -> int:
        """T, the number of iterations covered."""
        return int(next(iter(self.curves.values())).shape[0]) if self.curves else 0

    def final(self) -> dict[str, float]:
        """ε after the last iteration, per accountant."""
        return {k: float(v[-1]) for k, v in self.curves.items()}

    def summary(self) -> dict[str, Any]:
        """Return the ``summary.json`` entry: ``{"epsilon": {...}, "delta": δ, ...}``."""
        out: dict[str, Any] = {"epsilon": self.final(), "delta": self.delta}
        if self.reason is not None:
            out["epsilon_reason"] = self.reason
        out["epsilon_notes"] = dict(self.notes)
        scheme = self.settings.get("scheme")
        if scheme in SCOPES:
            out["epsilon_scope"] = SCOPES[scheme]
        out["epsilon_caveat"] = FLOATING_POINT_CAVEAT
        return out

    def rows(self, prefix: str = "epsilon_") -> list[dict[str, float]]:
        """Rows ``{"iteration": i, "epsilon_<acc>": ε(i), ...}`` for ``curves.csv``."""
        t = self.iterations
        return [
            {"iteration": i + 1, **{f"{prefix}{k}": float(v[i]) for k, v in self.curves.items()}}
            for i in range(t)
        ]


# ------------------------------------------------------------- generic, any accountant
def _checkpoints(t: int, n: int | None) -> np.ndarray:
    """Iterations (1-based) where ε is read: all (``None``), T only (1), or ≤ n log-spaced."""
    if n is None or t <= n:
        return np.arange(1, t + 1)
    if n == 1:
        return np.array([t])
    return np.unique(np.round(np.geomspace(1, t, n)).astype(int))


def pld_interval(releases: Sequence[Release]) -> float:
    """PLD grid for composing ``releases``: in [1e-4, 1], coarsened to ~2·10⁴ support points.

    The grid is 2·Σε₀/2·10⁴ (the composed support spans ±Σε₀). The accountant rounds
    pessimistically, so a coarser grid only loosens the bound; on the reference cases
    the coarsening moves ε by < 0.1 % (tests compare with a fine numerical reference).
    Beyond Σε₀ = 10⁴ the PLD accountant stops building its PLD anyway.
    """
    total = sum(r.count * r.epsilon0 for r in releases if not isinstance(r, GaussianRelease))
    return min(1.0, max(1e-4, 2.0 * total / _PLD_TARGET_POINTS))


def _accountant_for(name: str, releases: Sequence[Release]) -> Accountant:
    if name == "pld":
        return PldAccountant(pld_interval(releases))
    return make_accountant(name)


def accountant_curve(
    accountant: Accountant,
    releases: Sequence[Release],
    delta: float,
    *,
    checkpoints: int | None = None,
) -> np.ndarray:
    """ε(i), i = 1..T, of composing ``releases[0..i-1]`` onto ``accountant``: the one loop.

    ``releases[j]`` is what iteration j + 1 publishes. Runs of identical releases between
    two read-outs are composed in one call (a PLD self-composes them). ε is read at every
    iteration (``checkpoints=None``) or at up to ``checkpoints`` log-spaced iterations
    including 1 and T (1: T only); in between, each iteration gets the next read-out's
    value, an upper bound since ε(i) never decreases. The result is made non-decreasing.

    Args:
        accountant: any accountant (its earlier releases, if any, are kept).
        releases: one release per iteration, T ≥ 1 of them.
        delta: δ in (0, 1).
        checkpoints: ``None`` or the number of read-outs ≥ 1.

    Returns:
        Array of shape (T,).

    >>> from .accountants import BasicAccountant
    >>> accountant_curve(BasicAccountant(), [LaplaceRelease(1.0, 2.0)] * 3, 1e-5).tolist()
    [0.5, 1.0, 1.5]

    """
    t = len(releases)
    if t == 0:
        raise ConfigError("releases must hold at least one release; got none")
    check_real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    n = None if checkpoints is None else check_int("checkpoints", checkpoints, lo=1)
    at = _checkpoints(t, n)
    vals = np.empty(at.size)
    done = 0
    for c, k in enumerate(at):
        while done < k:
            run = done + 1
            while run < k and releases[run] == releases[done]:
                run += 1
            accountant.compose(releases[done], run - done)
            done = run
        vals[c] = accountant.get_epsilon(delta)
    filled = vals[np.searchsorted(at, np.arange(1, t + 1), side="left")]
    return np.maximum.accumulate(filled)


def final_epsilon(releases: Sequence[Release], delta: float, accountant: str = "pld") -> float:
    """ε after all ``releases`` by the named accountant (PLD on the grid of :func:`pld_interval`).

    >>> final_epsilon([LaplaceRelease(1.0, 10.0, count=100)], 1e-5, "basic")
    10.0
    """
    return float(
        accountant_curve(_accountant_for(accountant, releases), releases, delta, checkpoints=1)[-1]
    )


def calibrate_releases(
    releases_at: Callable[[float], Sequence[Release]],
    target_epsilon: float,
    delta: float,
    *,
    accountant: str = TIGHT_ACCOUNTANT,
    guess: float | None = None,
    rtol: float = 1e-4,
) -> float:
    """Smallest noise scale s with ε(``releases_at(s)``) ≤ target, by the accountant's own ε.

    ε decreases in the noise scale. The answer lies on the grid s_k = (1 + ``rtol``)^k: it
    is s_k for the smallest k whose ε meets the target, certified by ε(s_k) ≤ target <
    ε(s_{k−1}) — so it meets the target, noise smaller by a factor 1 + ``rtol`` does not,
    and it does not depend on ``guess`` or on the path of the search (only on ε at two
    grid points). The search works on f(ln s) = ln(ε/target), which is close to linear
    (ε ∝ 1/s for pure-DP steps, ∝ 1/s + O(1/s²) for Gaussian ones): from ``guess``, Newton
    steps with slope −1 and then secant slopes, each aimed at the grid point just across
    the estimated root, until the root is bracketed; inside the bracket, regula falsi on
    the same grid, with bisection when the bracket stops halving or ε is infinite. With
    a guess within a few per cent this takes 3-4 evaluations of ε.

    Args:
        releases_at: the releases of a run at noise scale s > 0.
        target_epsilon: ε* > 0.
        delta: δ in (0, 1).
        accountant: one of :data:`ACCOUNTANTS`.
        guess: a starting scale (default 1).
        rtol: ratio of neighbouring grid points minus one, in (0, 0.1].

    Raises:
        ConfigError: bad arguments, or no scale in [1e-300, 1e300] meets the target.

    >>> s = calibrate_releases(lambda s: [LaplaceRelease(1.0, s, count=10)], 2.0, 1e-5,
    ...                        accountant="basic")
    >>> round(s, 3)                                  # 10 · 1/s = 2
    5.0

    """
    eps_star = check_real("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    dlt = check_real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    acc = check_choice("accountant", accountant, ACCOUNTANTS)
    tol = check_real("rtol", rtol, lo=0.0, hi=0.1, lo_open=True)
    s0 = 1.0 if guess is None else check_real("guess", guess, lo=0.0, lo_open=True)

    # aim 1e-9 below the target: composing the same releases in another order (one
    # iteration at a time in epsilon_curve) may round the last digit up
    aim = eps_star * (1.0 - 1e-9)
    h = math.log1p(tol)  # grid step in ln s
    values: dict[int, float] = {}

    def f(k: int) -> float:  # ln(ε/aim) at s_k: > 0 where the noise is too small
        if k not in values:
            if abs(k * h) > 690:
                what = "no" if k > 0 else "every"
                raise ConfigError(
                    f"target_epsilon={eps_star:g}: {what} noise scale in [1e-300, 1e300] meets "
                    f"it by {acc!r}"
                )
            e = final_epsilon(releases_at(math.exp(k * h)), dlt, acc)
            values[k] = math.inf if e == math.inf else (math.log(e / aim) if e > 0 else -math.inf)
        return values[k]

    def root_estimate(k1: int, k2: int | None) -> float | None:
        """The ln s where f = 0 on the line through k1 and k2 (slope −1 without k2), or None."""
        f1 = f(k1)
        if not math.isfinite(f1):
            return None
        slope = -1.0
        if k2 is not None and math.isfinite(f(k2)) and f(k2) != f1:
            slope = min(-1 / 8, max(-8.0, (f1 - f(k2)) / ((k1 - k2) * h)))
        return k1 * h - f1 / slope

    # bracket: lo with f > 0 (too little noise), hi with f ≤ 0
    k = round(math.log(s0) / h)
    prev: int | None = None
    tries = 0
    while True:
        up = f(k) > 0  # the answer lies above k
        root = root_estimate(k, prev)
        if root is None:  # ε infinite or zero: double the step
            step = (2**tries) * math.log(2.0) / h
            nxt = k + max(1, math.ceil(step)) * (1 if up else -1)
        else:  # the grid point just across the root, overshooting more after each miss
            across = math.ceil(root / h - 1e-9) - (0 if up else 1)
            extra = 2**tries - 1
            nxt = max(across + extra, k + 1) if up else min(across - extra, k - 1)
        prev, k = k, nxt
        tries += 1
        if (f(k) > 0) != up:
            lo, hi = (prev, k) if up else (k, prev)
            break

    # refine on the grid: regula falsi aimed across the root, bisection if it stalls
    stalled = 0
    while hi - lo > 1:
        width = hi - lo
        c = (lo + hi) // 2
        if math.isfinite(f(lo)) and math.isfinite(f(hi)) and stalled < 2:
            root = lo * h + f(lo) * width * h / (f(lo) - f(hi))
            c = min(max(math.ceil(root / h - 1e-9), lo + 1), hi - 1)
        if f(c) > 0:
            lo = c
        else:
            hi = c
        stalled = 0 if 2 * (hi - lo) <= width else stalled + 1
    return math.exp(hi * h)


# ------------------------------------------------------------------------ GFL settings
@dataclasses.dataclass(frozen=True)
class _Settings:
    scheme: str
    distribution: str
    sigma: float
    mu: float
    clip: float | None
    dim: int
    iterations: int
    delta: float
    observed_links: int
    rigorous: bool
    clients_per_round: int = 1
    aggregation_error: float = 0.0


def _settings(
    *,
    scheme: str,
    distribution: str,
    sigma: float | None,
    mu: float,
    clip: float | None,
    dim: int,
    iterations: int,
    delta: float,
    observed_links: int,
    rigorous: bool,
    clients_per_round: int = 1,
    aggregation_error: float = 0.0,
) -> _Settings:
    sch = check_choice("scheme", scheme, SCHEMES)
    dist = check_choice("distribution", distribution, DISTRIBUTIONS)
    s = 0.0 if sigma is None else check_real("sigma", sigma, lo=0.0)
    m = check_real("mu", mu, lo=0.0, lo_open=True)
    # an infinite clipping norm (the configs' default) is the same as no bound
    c = None if (clip is None or clip == math.inf) else check_real("clip", clip, lo=0.0)
    d = check_int("dim", dim, lo=1)
    t = check_int("iterations", iterations, lo=1)
    dl = check_real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    links = check_int("observed_links", observed_links, lo=1)
    if links > 1 and sch != "random_per_link":
        links = 1  # identical copies on every link: seeing more of them reveals nothing new
    n_l = check_int("clients_per_round", clients_per_round, lo=1)
    err = check_real("aggregation_error", aggregation_error, lo=0.0)
    return _Settings(sch, dist, s, m, c, d, t, dl, links, bool(rigorous), n_l, err)


def releases_for(
    *,
    scheme: str,
    sigma: float,
    mu: float,
    clip: float,
    iterations: int,
    distribution: str = "laplace",
    dim: int = 1,
    observed_links: int = 1,
    rigorous: bool = True,
    clients_per_round: int = 1,
    aggregation_error: float = 0.0,
) -> list[Release]:
    """List the releases the adversary of ``scheme`` observes, one per iteration j = 1..T.

    Rigorous reading (default): Laplace noise of per-coordinate std σ (scale b = σ/√2)
    is an M-dimensional :class:`~.releases.VectorLaplaceRelease` with the ℓ₂
    sensitivity Δ₂(j) of :func:`~.papers.gfl_sensitivities`; Gaussian noise a
    :class:`~.releases.GaussianRelease` with Δ₂(j). The papers' reading
    (``rigorous=False``): a 1-D :class:`~.releases.LaplaceRelease` charged Δ₂(j) of the
    papers' rule. For ``random_per_link`` an adversary on ``observed_links`` links sees
    that many independent copies per iteration (``count``).

    >>> rel = releases_for(scheme="updates", sigma=math.sqrt(2), mu=0.1, clip=1.0, iterations=2)
    >>> [round(r.epsilon0, 12) for r in rel]   # Δ₂ = 2B = 2, b = σ/√2 = 1
    [2.0, 2.0]
    """
    st = _settings(
        scheme=scheme,
        distribution=distribution,
        sigma=sigma,
        mu=mu,
        clip=clip,
        dim=dim,
        iterations=iterations,
        delta=0.5,
        observed_links=observed_links,
        rigorous=rigorous,
        clients_per_round=clients_per_round,
        aggregation_error=aggregation_error,
    )
    if st.clip is None:
        raise ConfigError("clip must be a real number in [0, inf); got None")
    if st.sigma <= 0:
        raise ConfigError(f"sigma must be a real number in (0, inf); got {sigma!r}")
    return _releases(st, paper=not st.rigorous)


def _releases(st: _Settings, *, paper: bool) -> list[Release]:
    """Per-iteration releases by the papers' rule and reading (``paper``) or the rigorous one."""
    if st.clip is None:  # callers return epsilon = inf before getting here
        raise RuntimeError("releases need a clipping bound; callers must check clip first")
    sens = gfl_sensitivities(
        st.iterations, scheme=st.scheme, mu=st.mu, clip=st.clip, dim=st.dim,
        rule="paper" if paper else "rigorous", clients_per_round=st.clients_per_round,
        aggregation_error=0.0 if paper else st.aggregation_error,
    )  # fmt: skip
    links = st.observed_links
    if st.distribution == "gaussian":
        return [GaussianRelease(float(s), st.sigma, links) for s in sens]
    b = st.sigma / math.sqrt(2.0)
    if paper:
        return [LaplaceRelease(float(s), b, links) for s in sens]
    return [VectorLaplaceRelease(float(s), b, st.dim, links) for s in sens]


def _notes(st: _Settings, accs: Sequence[str]) -> dict[str, str]:
    notes = {}
    for a in accs:
        cls = type(make_accountant(a))
        notes[a] = cls.note
        if a == "paper" and st.distribution == "gaussian":
            notes[a] = PaperAccountant.note_gaussian
    if "pld" in notes and st.distribution == "gaussian":
        notes["pld"] = "exact: composed Gaussians are one Gaussian (GDP); analytic Gaussian epsilon"
    elif "pld" in notes and st.rigorous and st.dim > 1:
        notes["pld"] += (
            "; M-dimensional Laplace noise: the smaller of the PLD charged the l1 "
            "sensitivity sqrt(M)*l2 and the Renyi bound of the worst (diagonal) direction"
        )
    if not st.rigorous:
        for a in notes:
            if a != "paper":
                notes[a] += " [papers' reading: l2 sensitivity, eq. 52 growth for every scheme]"
    return notes


# ---------------------------------------------------------------------------- public API
def epsilon_curve(
    *,
    scheme: str,
    sigma: float | None,
    mu: float,
    clip: float | None,
    iterations: int,
    delta: float = 1e-5,
    distribution: str = "laplace",
    dim: int = 1,
    observed_links: int = 1,
    rigorous: bool = True,
    clients_per_round: int = 1,
    aggregation_error: float = 0.0,
    accountants: Sequence[str] | None = None,
    checkpoints: int = 64,
) -> EpsilonCurve:
    """ε(i) for i = 1..T of one privatized GFL curve, by every requested accountant.

    Args:
        scheme: ``graph_homomorphic`` | ``random`` | ``random_per_link`` (server level:
            what one server sends over its links, adversary = a neighbouring server or an
            eavesdropper) or ``models`` | ``updates`` (client level: what one client sends
            its server, adversary = the honest-but-curious server).
        sigma: per-coordinate standard deviation of the noise (Laplace scale σ/√2);
            ``None`` or 0 ⇒ no noise ⇒ ε = ∞.
        mu: step size μ.
        clip: per-sample gradient clipping norm B; ``None`` or ``inf`` ⇒ no bound ⇒ ε = ∞
            (never a made-up number).
        iterations: T.
        delta: δ in (0, 1) for the approximate-DP accountants.
        distribution: ``laplace`` | ``gaussian``.
        dim: model dimension M (Laplace noise is M-dimensional, see
            :class:`~.releases.VectorLaplaceRelease`).
        observed_links: links an adversary watches (``random_per_link`` only).
        clients_per_round: the fewest clients a unit averages per iteration: L, or the
            secure-aggregation threshold t (a unit then averages any n ≥ t survivors);
            only the ``random`` scheme uses it (rigorous sensitivity 2μB/L); 1 is safe.
        aggregation_error: per-coordinate bound on the error of a unit's aggregate
            (secure aggregation's fixed-point rounding), added to every sensitivity.
        rigorous: M-dimensional Laplace releases with the rigorous message sensitivities
            of :func:`~.papers.gfl_sensitivities` (default); ``False``: the papers' 1-D
            reading for every accountant. ``paper`` always uses the papers' reading.
        accountants: subset of :data:`ACCOUNTANTS`; default :func:`default_accountants`.
        checkpoints: iterations at which the PLD (and, for Gaussian noise, the basic,
            advanced and Kairouz bounds) are read, log-spaced incl. T; in between, the
            next read-out's value (an upper bound) is reported.

    Returns:
        An :class:`EpsilonCurve`; ``curve["pld"]`` is the tight ε(i), ``curve["paper"]`` the
        published bound.

    >>> c = epsilon_curve(scheme="graph_homomorphic", sigma=math.sqrt(2), mu=0.5, clip=1.0,
    ...                   iterations=3, accountants=["paper", "basic"])
    >>> c["paper"].tolist()      # √2 μ B i (i+1) / σ = i (i+1) / 2
    [1.0, 3.0, 6.0]
    >>> c2 = epsilon_curve(scheme="models", sigma=1.0, mu=0.5, clip=None, iterations=2)
    >>> c2["pld"].tolist(), c2.reason
    ([inf, inf], 'no gradient bound: set a per-sample clipping norm (clip) to get a finite epsilon')

    """
    st = _settings(
        scheme=scheme,
        distribution=distribution,
        sigma=sigma,
        mu=mu,
        clip=clip,
        dim=dim,
        iterations=iterations,
        delta=delta,
        observed_links=observed_links,
        rigorous=rigorous,
        clients_per_round=clients_per_round,
        aggregation_error=aggregation_error,
    )
    accs = default_accountants(st.distribution) if accountants is None else tuple(accountants)
    if not accs:
        raise ConfigError(
            "accountants must name at least one of " + ", ".join(ACCOUNTANTS) + "; got none"
        )
    for a in accs:
        check_choice("accountant", a, ACCOUNTANTS)
    ncp = check_int("checkpoints", checkpoints, lo=2)
    notes = _notes(st, accs)
    settings = dataclasses.asdict(st)
    reason = None
    if st.clip is None:
        reason = "no gradient bound: set a per-sample clipping norm (clip) to get a finite epsilon"
    elif st.sigma == 0:
        reason = "no noise (sigma = 0): the messages are released in the clear"
    if reason is not None:
        vals = {a: np.full(st.iterations, math.inf) for a in accs}
        return EpsilonCurve(vals, st.delta, reason, notes, settings)
    rigorous_rel = _releases(st, paper=not st.rigorous)
    paper_rel = _releases(st, paper=True) if "paper" in accs else rigorous_rel
    gaussian = st.distribution == "gaussian"
    vals = {}
    for a in accs:
        rel = paper_rel if a == "paper" else rigorous_rel
        acc = _accountant_for(a, rel)
        sparse = a == "pld" or (gaussian and a in ("basic", "advanced", "kairouz"))
        vals[a] = accountant_curve(acc, rel, st.delta, checkpoints=ncp if sparse else None)
        if isinstance(acc, PldAccountant) and acc.dropped:
            notes[a] += (
                "; here basic composition exceeds 1e4, so the value is the RDP bound "
                "(valid, never below PLD)"
            )
    return EpsilonCurve(vals, st.delta, None, notes, settings)


def calibrate(
    target_epsilon: float,
    delta: float,
    iterations: int,
    *,
    scheme: str,
    mu: float,
    clip: float,
    distribution: str = "laplace",
    dim: int = 1,
    observed_links: int = 1,
    rigorous: bool = True,
    clients_per_round: int = 1,
    aggregation_error: float = 0.0,
    accountant: str = TIGHT_ACCOUNTANT,
    rtol: float = 1e-4,
) -> float:
    """Smallest noise σ (per-coordinate std) with ε(T) ≤ target by ``accountant``.

    :func:`calibrate_releases` on the releases of :func:`epsilon_curve`, started from a
    closed form: basic composition for Laplace (ε ∝ 1/σ, exact for ``paper`` and
    ``basic``; for ``pld``, the cheaper ``rdp`` calibration from there, an upper end
    since pld ≤ rdp, times σ_pld/σ_rdp of the nearest target calibrated before with the
    same settings, if any: a frontier's grid of ε), the exact composed Gaussian for
    Gaussian noise. The answer is the smallest σ on the grid
    (1 + ``rtol``)^k that meets the target, whatever the start.

    Args:
        target_epsilon: ε* > 0.
        delta: δ in (0, 1).
        iterations: T ≥ 1.
        scheme: as in :func:`epsilon_curve`.
        mu: step size μ > 0.
        clip: per-sample clipping norm B > 0 (required: without a bound no σ suffices).
        distribution: ``laplace`` | ``gaussian``.
        dim: model dimension M.
        observed_links: links the adversary watches (``random_per_link``).
        rigorous: rigorous sensitivities (see :func:`epsilon_curve`).
        clients_per_round: L or the secure-aggregation threshold t (``random`` only).
        aggregation_error: see :func:`epsilon_curve`.
        accountant: one of :data:`ACCOUNTANTS` (default: the tight ``pld``).
        rtol: relative precision of σ: σ/(1 + rtol) misses the target.

    Returns:
        σ with ``epsilon_curve(..., sigma=σ)[accountant][-1] <= target_epsilon``.

    >>> s = calibrate(6.0, 1e-5, 3, scheme="graph_homomorphic", mu=0.5, clip=1.0,
    ...               accountant="paper")
    >>> abs(s / math.sqrt(2) - 1) < 1e-4    # preprint Thm 2: σ_g = √2 μ B (1+i) i / ε
    True

    """
    eps_star = check_real("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    if clip is None:
        raise ConfigError(
            "clip must be a real number in (0, inf); got None (no bound, no finite epsilon)"
        )
    check_real("clip", clip, lo=0.0, lo_open=True)
    acc = check_choice("accountant", accountant, ACCOUNTANTS)
    st = _settings(
        scheme=scheme,
        distribution=distribution,
        sigma=1.0,
        mu=mu,
        clip=clip,
        dim=dim,
        iterations=iterations,
        delta=delta,
        observed_links=observed_links,
        rigorous=rigorous,
        clients_per_round=clients_per_round,
        aggregation_error=aggregation_error,
    )
    paper = acc == "paper" or not st.rigorous
    tol = check_real("rtol", rtol, lo=0.0, hi=0.1, lo_open=True)

    def releases_at(sigma: float) -> list[Release]:
        return _releases(dataclasses.replace(st, sigma=sigma), paper=paper)

    key = (st, acc, paper, tol)
    ratio = 1.0
    unit = releases_at(1.0)
    if st.distribution == "laplace":
        guess = sum(r.count * r.epsilon0 for r in unit) / eps_star
        if acc == "pld":  # pld ≤ rdp: the cheap Rényi answer is an upper end to start from
            guess = calibrate_releases(
                releases_at, eps_star, st.delta, accountant="rdp", guess=guess, rtol=1e-3
            )
            known = _PLD_OVER_RDP.get(key)
            if known:  # σ_pld/σ_rdp varies slowly with the target: use the nearest one's
                ratio = min(known, key=lambda p: abs(math.log(p[0] / eps_star)))[1]
    else:
        total = sum(r.count * r.sensitivity_l2**2 for r in unit)  # type: ignore[union-attr]
        guess = math.sqrt(total) * float(dp_accounting.get_sigma_gaussian(eps_star, st.delta))
    sigma = calibrate_releases(
        releases_at, eps_star, st.delta, accountant=acc, guess=guess * ratio, rtol=tol
    )
    if acc == "pld" and st.distribution == "laplace":
        known = _PLD_OVER_RDP.pop(key, None) or []  # re-inserted last: most recent
        _PLD_OVER_RDP[key] = [*known[-7:], (eps_star, sigma / guess)]
        while len(_PLD_OVER_RDP) > _PLD_OVER_RDP_KEEP:
            del _PLD_OVER_RDP[next(iter(_PLD_OVER_RDP))]
    return sigma
