"""ε(i) over the iterations of a privatized curve, and noise calibration to a target ε.

Two layers:

* on any :class:`~.accountants.Accountant`: :func:`accountant_curve` (the one incremental
  loop: compose iteration by iteration, read ε at checkpoints) and
  :func:`calibrate_releases` (bracketing, then root-finding on the accountant's own ε);
* on a :class:`~.releases.Transcript` (what a mechanism says its adversary observes,
  :meth:`pgfl.privacy.mechanisms.base.Mechanism.transcript`): :func:`epsilon_curve` gives
  ε(i) by every requested accountant as an :class:`EpsilonCurve`, and :func:`calibrate`
  the smallest noise σ whose ε after T iterations meets a target, from a factory
  σ ↦ transcript.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import dp_accounting
import numpy as np

from pgfl.validation import ConfigError, check_choice, check_int, check_real

from .accountants import (
    ACCOUNTANTS,
    Accountant,
    PldAccountant,
    make_accountant,
    refusal,
    supporting,
)
from .releases import (
    Release,
    Transcript,
    check_release,
)

__all__ = [
    "FLOATING_POINT_CAVEAT",
    "TIGHT_ACCOUNTANT",
    "EpsilonCurve",
    "accountant_curve",
    "calibrate",
    "calibrate_releases",
    "check_composable",
    "default_accountants",
    "epsilon_curve",
    "epsilon",
]

#: The accountant pgfl calls "the tight one".
TIGHT_ACCOUNTANT = "pld"
#: (transcript at σ = 1, accountant, reading, rtol) → [(target ε, σ_pld/σ_rdp), ...] of recent PLD
#: calibrations of Laplace noise: the ratio corrects the Rényi starting guess for another
#: target of the same settings (a frontier's grid of ε). The answer is the same whatever
#: the guess (:func:`calibrate_releases`), so this only saves evaluations; it holds at
#: most this many settings.
_PLD_OVER_RDP: dict[tuple, list[tuple[float, float]]] = {}
_PLD_OVER_RDP_KEEP = 64
#: Support size the PLD grid aims at (≈ 2·Σε / interval); see :func:`pld_interval`.
_PLD_TARGET_POINTS = 2e4

#: Shown with every reported ε (docs/privacy.md, "Floating-point noise").
FLOATING_POINT_CAVEAT = (
    "epsilon is for ideal real-valued noise; pgfl samples noise in floating point, which "
    "leaks through the low-order bits (Mironov 2012): a simulation figure, not a deployment "
    "guarantee (docs/privacy.md)"
)


def default_accountants(transcript: Transcript) -> tuple[str, ...]:
    """Accountants :func:`epsilon_curve` reports by default for a transcript's release kind.

    The kind's own :attr:`~.releases.Release.accountants`, else every accountant that
    composes its releases (:func:`~.accountants.supporting`).

    >>> default_accountants(Transcript((1.0,), std=1.0, distribution="gaussian"))
    ('paper', 'pld', 'rdp')
    >>> len(default_accountants(Transcript((1.0,), std=1.0)))   # Laplace: all six
    6
    """
    kind = transcript.kind
    if kind.accountants is not None:
        return kind.accountants
    releases = transcript.releases()
    return supporting(releases[0]) if releases else ACCOUNTANTS


def check_composable(transcript: Transcript, accountants: Sequence[str]) -> None:
    """Raise the one-line :func:`~.accountants.refusal` if an accountant cannot compose it.

    Each accountant is asked about one release of each kind in the reading it composes
    (``paper``: the papers'); a transcript with ε = ∞ (``reason``) composes nothing.

    >>> t = Transcript((1.0,), std=2.0, distribution="skellam", shares=(3,))
    >>> check_composable(t, ["rdp"])
    >>> check_composable(t, ["kairouz"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: accountant 'kairouz' cannot compose a skellam sum release; ...
    """
    if transcript.reason is not None:
        return
    paper = "paper" in accountants and transcript.paper_sensitivities is not None
    rigorous = transcript.releases()
    _refuse_unsupported(accountants, rigorous, transcript.releases(True) if paper else rigorous)


def _refuse_unsupported(
    accountants: Sequence[str], rigorous: Sequence[Release], paper: Sequence[Release]
) -> None:
    """:func:`check_composable` on releases built already (``paper``: the papers' reading)."""
    for a in accountants:
        cls = type(make_accountant(a))
        for r in {type(r): r for r in (paper if a == "paper" else rigorous)}.values():
            if not cls.supports(r):
                raise ConfigError(refusal(a, r))


@dataclasses.dataclass(frozen=True, eq=False)
class EpsilonCurve(Mapping[str, np.ndarray]):
    """ε(i), i = 1..T, of one privatized curve, per accountant (a read-only mapping).

    Attributes:
        curves: accountant → float array of shape (T,) (non-decreasing; ``inf`` if none).
        delta: the δ every value is stated at (pure-DP accountants hold for any δ).
        reason: why ε is infinite (no clipping bound, no noise), else ``None``.
        notes: accountant → one line saying what the number is.
        settings: the inputs, for the record.
        scope: what the ε covers and against whom (the mechanism's threat model).
        sources: accountant → the bound its ε(T) came from, where that is another one
            (``pld`` takes the smallest of its PLD, the Rényi bound and Σ ε_t:
            ``{"pld": "rdp"}`` says the value is the Rényi bound).
        release: what one iteration releases, in one line (the last release's
            :meth:`~.releases.Release.describe`; ``""`` where nothing is released).

    """

    curves: dict[str, np.ndarray]
    delta: float
    reason: str | None = None
    notes: dict[str, str] = dataclasses.field(default_factory=dict)
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    scope: str = ""
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    release: str = ""

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

    def source(self, accountant: str) -> str:
        """The accountant whose bound ε(T) of ``accountant`` is (itself unless noted)."""
        return self.sources.get(accountant, accountant)

    def summary(self) -> dict[str, Any]:
        """Return the ``summary.json`` entry: ``{"epsilon": {...}, "delta": δ, ...}``."""
        out: dict[str, Any] = {"epsilon": self.final(), "delta": self.delta}
        if self.reason is not None:
            out["epsilon_reason"] = self.reason
        out["epsilon_notes"] = dict(self.notes)
        if self.release:
            out["epsilon_release"] = self.release
        if self.sources:
            out["epsilon_source"] = dict(self.sources)
        if self.scope:
            out["epsilon_scope"] = self.scope
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
    total = sum(r.count * r.epsilon0 for r in releases if r.epsilon0 is not None)
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
    >>> from .releases import LaplaceRelease
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


def epsilon(
    releases: Sequence[Release], delta: float, accountant: str = "pld", **options: Any
) -> float:
    """ε at ``delta`` of the adaptive composition of ``releases`` by one accountant.

    The one facade: :func:`accountant_curve` read at T only. The PLD accountant's grid is
    :func:`pld_interval` of the releases unless ``options`` give one
    (``value_discretization_interval``); other ``options`` go to the accountant.

    Raises:
        ConfigError: unknown accountant, δ ∉ (0, 1), empty or malformed releases.

    >>> from .releases import GaussianRelease, LaplaceRelease, PureDpRelease
    >>> epsilon([LaplaceRelease(1.0, 10.0, count=100)], 1e-5, "basic")
    10.0
    >>> round(epsilon([PureDpRelease(math.log(3))], 1e-5, "basic"), 6)  # randomized response
    1.098612
    >>> round(epsilon([GaussianRelease(1.0, 1.0, count=100)], 1e-5, "rdp"), 2)
    96.12

    """
    rel = [check_release(r) for r in releases]
    acc = make_accountant(accountant, **options) if options else _accountant_for(accountant, rel)
    return float(accountant_curve(acc, rel, delta, checkpoints=1)[-1])


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

    >>> from .releases import LaplaceRelease
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
            e = epsilon(releases_at(math.exp(k * h)), dlt, acc)
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


# ----------------------------------------------------------------------- transcripts
def _notes(
    t: Transcript, accs: Sequence[str], rigorous: Sequence[Release], paper: Sequence[Release]
) -> dict[str, str]:
    """What each accountant's number is: its own line, as the release kind words it.

    The last release's :meth:`~.releases.Release.note` (``paper``: of the papers'
    reading); a transcript that is not ``rigorous`` says so for every sound accountant.
    """
    notes = {}
    for a in accs:
        line = type(make_accountant(a)).note
        rel = paper if a == "paper" else rigorous
        notes[a] = rel[-1].note(a, line) if rel else line
    if not t.rigorous:
        for a in notes:
            if a != "paper":
                notes[a] += " [papers' reading: l2 sensitivity, eq. 52 growth for every scheme]"
    return notes


def _accountants(accountants: Sequence[str] | None, transcript: Transcript) -> tuple[str, ...]:
    accs = default_accountants(transcript) if accountants is None else tuple(accountants)
    if not accs:
        raise ConfigError(
            "accountants must name at least one of " + ", ".join(ACCOUNTANTS) + "; got none"
        )
    for a in accs:
        check_choice("accountant", a, ACCOUNTANTS)
    return accs


def epsilon_curve(
    transcript: Transcript,
    *,
    delta: float = 1e-5,
    accountants: Sequence[str] | None = None,
    checkpoints: int = 64,
) -> EpsilonCurve:
    """ε(i) for i = 1..T of one privatized curve, by every requested accountant.

    Args:
        transcript: what the adversary observes, from the mechanism
            (:meth:`pgfl.privacy.mechanisms.base.Mechanism.transcript`); a transcript with
            a ``reason`` (no clipping bound, no noise) gives ε = ∞ with that reason (never
            a made-up number).
        delta: δ in (0, 1) for the approximate-DP accountants.
        accountants: subset of :data:`ACCOUNTANTS`; default :func:`default_accountants`.
            ``paper`` composes the papers' reading of the releases.
        checkpoints: iterations at which the PLD (and, for Gaussian noise, the basic,
            advanced and Kairouz bounds) are read, log-spaced incl. T; in between, the
            next read-out's value (an upper bound) is reported, or the smallest ε(i) of
            the accountants read at every iteration when that is smaller.

    Returns:
        An :class:`EpsilonCurve`; ``curve["pld"]`` is the tight ε(i), ``curve["paper"]`` the
        published bound.

    >>> t = Transcript((1.0, 2.0, 3.0), std=math.sqrt(2))   # Laplace b = 1, Δ = j
    >>> epsilon_curve(t, accountants=["basic"])["basic"].tolist()
    [1.0, 3.0, 6.0]

    """
    check_real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    accs = _accountants(accountants, transcript)
    ncp = check_int("checkpoints", checkpoints, lo=2)
    settings = dict(transcript.settings)
    rigorous_rel = transcript.releases()
    paper_rel = transcript.releases(paper=True) if "paper" in accs else rigorous_rel
    _refuse_unsupported(accs, rigorous_rel, paper_rel)
    notes = _notes(transcript, accs, rigorous_rel, paper_rel)
    if transcript.reason is not None:
        vals = {a: np.full(transcript.iterations, math.inf) for a in accs}
        return EpsilonCurve(vals, delta, transcript.reason, notes, settings, transcript.scope)
    # ε of releases that are not pure DP is costly to read at every iteration
    impure = any(r.epsilon0 is None for r in rigorous_rel)
    vals = {}
    sources = {}
    sparse = {a for a in accs if a == "pld" or (impure and a in ("basic", "advanced", "kairouz"))}
    for a in accs:
        rel = paper_rel if a == "paper" else rigorous_rel
        acc = _accountant_for(a, rel)
        vals[a] = accountant_curve(acc, rel, delta, checkpoints=ncp if a in sparse else None)
        if isinstance(acc, PldAccountant):
            sources[a] = acc.source  # the bound ε(T) is, read last
            if acc.dropped:
                notes[a] += (
                    "; here basic composition exceeds 1e4, so the value is the RDP bound "
                    "(valid, never below PLD)"
                )
    _tighten_between_readouts(vals, sparse, _checkpoints(transcript.iterations, ncp))
    release = rigorous_rel[-1].describe()
    return EpsilonCurve(vals, delta, None, notes, settings, transcript.scope, sources, release)


def _tighten_between_readouts(
    vals: dict[str, np.ndarray], sparse: set[str], readouts: np.ndarray
) -> None:
    """Between read-outs, cap a sparse sound curve by the dense sound curves (in place).

    Between two read-outs a sparse curve holds the next read-out's value, an upper bound
    that can exceed a looser accountant read at that very iteration (``pld`` above
    ``basic`` at i = 5 when the next read-out is i = 7). Any sound accountant's ε(i)
    bounds the true ε(i), so the smaller of the two is still an upper bound; the values
    at the read-outs (ε(T) among them) are left as they are, and the curve is kept
    non-decreasing. The papers' bound (``paper``) is not sound and caps nothing.
    """
    dense = [vals[a] for a in vals if a not in sparse and a != "paper"]
    if not dense:
        return
    cap = np.minimum.reduce(dense)
    between = np.ones(cap.size, dtype=bool)
    between[readouts - 1] = False
    for a in sparse & vals.keys():
        tightened = np.where(between, np.minimum(vals[a], cap), vals[a])
        vals[a] = np.maximum.accumulate(tightened)


def calibrate(
    transcript_at: Callable[[float], Transcript],
    target_epsilon: float,
    delta: float,
    *,
    accountant: str = TIGHT_ACCOUNTANT,
    rtol: float = 1e-4,
) -> float:
    """Smallest noise σ (per-coordinate std) with ε(T) ≤ target by ``accountant``.

    :func:`calibrate_releases` on the releases of ``transcript_at(σ)`` (a factory
    σ ↦ transcript, e.g. ``lambda s: mechanism.with_std(s).transcript(ctx)``), started
    from a closed form: basic composition for Laplace (ε ∝ 1/σ, exact for ``paper`` and
    ``basic``; for ``pld``, the cheaper ``rdp`` calibration from there, an upper end since
    pld ≤ rdp, times σ_pld/σ_rdp of the nearest target calibrated before with the same
    transcript, if any: a frontier's grid of ε), the exact composed Gaussian for Gaussian
    noise. The answer is the smallest σ on the grid (1 + ``rtol``)^k that meets the target,
    whatever the start.

    Args:
        transcript_at: the transcript of the run at noise σ > 0.
        target_epsilon: ε* > 0.
        delta: δ in (0, 1).
        accountant: one of :data:`ACCOUNTANTS` (default: the tight ``pld``).
        rtol: relative precision of σ: σ/(1 + rtol) misses the target.

    Returns:
        σ with ``epsilon_curve(transcript_at(σ), ...)[accountant][-1] <= target_epsilon``.

    Raises:
        ConfigError: bad arguments, a transcript with ε = ∞ at every σ (no clipping
            bound), or no σ in [1e-300, 1e300] meets the target.

    >>> s = calibrate(lambda s: Transcript((1.0, 2.0, 3.0), std=s), 6.0, 1e-5,
    ...               accountant="basic")
    >>> abs(s / math.sqrt(2) - 1) < 1e-4    # Σ Δ_j / b = 6 / b = 6: b = 1
    True

    """
    eps_star = check_real("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    check_real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    acc = check_choice("accountant", accountant, ACCOUNTANTS)
    tol = check_real("rtol", rtol, lo=0.0, hi=0.1, lo_open=True)
    unit_t = transcript_at(1.0)
    if unit_t.reason is not None:
        raise ConfigError(f"cannot calibrate the noise: {unit_t.reason}")
    paper = acc == "paper" or not unit_t.rigorous

    def releases_at(sigma: float) -> list[Release]:
        return transcript_at(sigma).releases(paper=acc == "paper")

    key = (unit_t, acc, paper, tol)
    ratio = 1.0
    unit = unit_t.releases(paper=acc == "paper")
    check_composable(unit_t, [acc])
    pure = all(r.epsilon0 is not None for r in unit)
    l2 = [getattr(r, "sensitivity_l2", None) for r in unit]
    if pure:
        guess = sum(r.count * r.epsilon0 for r in unit) / eps_star  # type: ignore[operator]
        if acc == "pld":  # pld ≤ rdp: the cheap Rényi answer is an upper end to start from
            guess = calibrate_releases(
                releases_at, eps_star, delta, accountant="rdp", guess=guess, rtol=1e-3
            )
            known = _PLD_OVER_RDP.get(key)
            if known:  # σ_pld/σ_rdp varies slowly with the target: use the nearest one's
                ratio = min(known, key=lambda p: abs(math.log(p[0] / eps_star)))[1]
    elif None not in l2:  # Gaussian-like: the composed Gaussian's σ
        total = sum(r.count * d**2 for r, d in zip(unit, l2, strict=True))  # type: ignore[operator]
        guess = math.sqrt(total) * float(dp_accounting.get_sigma_gaussian(eps_star, delta))
    else:  # a kind with neither: start at σ = 1
        guess = 1.0
    sigma = calibrate_releases(
        releases_at, eps_star, delta, accountant=acc, guess=guess * ratio, rtol=tol
    )
    if acc == "pld" and pure:
        known = _PLD_OVER_RDP.pop(key, None) or []  # re-inserted last: most recent
        _PLD_OVER_RDP[key] = [*known[-7:], (eps_star, sigma / guess)]
        while len(_PLD_OVER_RDP) > _PLD_OVER_RDP_KEEP:
            del _PLD_OVER_RDP[next(iter(_PLD_OVER_RDP))]
    return sigma
