"""ε(i) over the iterations of a privatized GFL curve, and noise calibration to a target ε.

Engine-facing API (see the package docstring for the contract):

* :func:`epsilon_curve` — for one privatized curve's settings, ε(i) for i = 1..T by every
  applicable accountant, as an :class:`EpsilonCurve` (a read-only mapping
  accountant → array of shape (T,), plus ``delta``, ``reason`` and ``notes``).
* :func:`calibrate` — the smallest noise σ whose ε after T iterations meets a target.

Both rest on :func:`releases_for`, which turns the settings into the per-iteration
releases the adversary of the scheme observes (see ``docs/privacy.md``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import dp_accounting
import numpy as np
from dp_accounting import mechanism_calibration
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import RdpAccountant
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon as rdp_compute_epsilon

from pgfl.validation import ConfigError, check_choice, check_int, check_real

from .composition import ACCOUNTANTS, GaussianRelease, LaplaceRelease, Release
from .mechanisms import kairouz_epsilon, kairouz_optimal_epsilon
from .papers import SCHEMES, gfl_sensitivities

__all__ = [
    "DISTRIBUTIONS",
    "FLOATING_POINT_CAVEAT",
    "SCOPES",
    "TIGHT_ACCOUNTANT",
    "EpsilonCurve",
    "calibrate",
    "default_accountants",
    "epsilon_curve",
    "releases_for",
]

DISTRIBUTIONS = ("laplace", "gaussian")
#: The accountant pgfl calls "the tight one".
TIGHT_ACCOUNTANT = "pld"
#: Support size the adaptive PLD grid aims at (≈ 2·Σε / interval); see :func:`_pld_interval`.
_PLD_TARGET_POINTS = 2e4
#: Above this basic-composition ε the Laplace "pld" curve is the RDP one (grid > 1 needed).
_PLD_MAX_BASIC = 1e4

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

_NOTES = {
    "paper": (
        "as published: Laplace epsilon = sensitivity/b with the l2 sensitivity "
        "(preprint Thm 2 / book Thm 11.1 for server-level noise; per-round sum, book Lemma 11.2, "
        "for client-level noise, for which the papers give no closed form)"
    ),
    "paper_gaussian": (
        "classic Gaussian bound per iteration (valid only below 1) composed by eq. 32 "
        "(graph-topology paper Thm 3), delta split evenly"
    ),
    "basic": "sum of per-iteration epsilons (book Lemma 11.2), rigorous sensitivities",
    "advanced": "Dwork-Rothblum-Vadhan advanced composition (heterogeneous form)",
    "kairouz": "Kairouz-Oh-Viswanath: Thm 3.3 for equal steps, Thm 3.5 (eq. 32) otherwise",
    "pld": "privacy-loss distributions (dp_accounting), tight up to pessimistic discretization",
    "rdp": "Renyi DP (dp_accounting)",
}


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


# -------------------------------------------------------------------------------- inputs
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
    return _Settings(sch, dist, s, m, c, d, t, dl, links, bool(rigorous), n_l)


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
) -> list[Release]:
    """List the releases the adversary of ``scheme`` observes, one per iteration j = 1..T.

    Laplace noise of per-coordinate std σ has scale b = σ/√2 and is charged the ℓ₁
    sensitivity √M Δ₂(j) (``rigorous=True``) or Δ₂(j) (the papers' reading); Gaussian
    noise is charged Δ₂(j). For ``random_per_link`` an adversary on ``observed_links``
    links sees that many independent copies per iteration (``count``).

    >>> rel = releases_for(scheme="updates", sigma=math.sqrt(2), mu=0.1, clip=1.0, iterations=2)
    >>> [round(r.epsilon0, 12) for r in rel]   # Δ₁ = 2B = 2, b = σ/√2 = 1
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
    )
    if st.clip is None:
        raise ConfigError("clip must be a real number in [0, inf); got None")
    if st.sigma <= 0:
        raise ConfigError(f"sigma must be a real number in (0, inf); got {sigma!r}")
    return _releases(st)


def _releases(st: _Settings) -> list[Release]:
    if st.clip is None:  # callers return epsilon = inf before getting here
        raise RuntimeError("releases need a clipping bound; callers must check clip first")
    rule = "rigorous" if st.rigorous else "paper"
    if st.distribution == "laplace":
        norm = "l1" if st.rigorous else "l2"
        sens = gfl_sensitivities(
            st.iterations, scheme=st.scheme, mu=st.mu, clip=st.clip, dim=st.dim, norm=norm,
            rule=rule, clients_per_round=st.clients_per_round,
        )  # fmt: skip
        b = st.sigma / math.sqrt(2.0)
        return [LaplaceRelease(float(s), b, st.observed_links) for s in sens]
    sens = gfl_sensitivities(
        st.iterations, scheme=st.scheme, mu=st.mu, clip=st.clip, rule=rule,
        clients_per_round=st.clients_per_round,
    )  # fmt: skip
    return [GaussianRelease(float(s), st.sigma, st.observed_links) for s in sens]


# ------------------------------------------------------------------------- accountants
def _checkpoints(t: int, n: int) -> np.ndarray:
    """Up to n iterations (1-based, including 1 and T; n = 1: T only) where PLD is evaluated."""
    if n == 1:
        return np.array([t])
    if t <= n:
        return np.arange(1, t + 1)
    return np.unique(np.round(np.geomspace(1, t, n)).astype(int))


def _step_up(at: np.ndarray, values: np.ndarray, t: int) -> np.ndarray:
    """Fill ε(i) for i = 1..T from checkpoints: the value at the next checkpoint ≥ i.

    ε(i) is non-decreasing in i (more releases never cost less), so this is an upper
    bound at every i and exact at the checkpoints.
    """
    idx = np.searchsorted(at, np.arange(1, t + 1), side="left")
    return values[idx]


def _pld_interval(basic_total: float) -> float:
    """PLD grid: ≥ 1e-4, coarsened so the composed support stays around 2·10⁴ points.

    The accountant rounds pessimistically, so a coarser grid only loosens the bound (by at
    most one grid step per composed release); on the reference cases the coarsening moves ε
    by < 0.1 %.
    """
    return max(1e-4, 2.0 * basic_total / _PLD_TARGET_POINTS)


def _laplace_pld_curve(
    releases: Sequence[LaplaceRelease], delta: float, checkpoints: int
) -> np.ndarray:
    """Laplace ε(i) by PLD at up to ``checkpoints`` iterations (1: the last one only).

    Identical releases (client-level schemes) are composed by ``self_compose`` at each
    checkpoint on a grid of ε₀/100; growing ones (server level) incrementally on a grid
    sized to the basic-composition total (see :func:`_pld_interval`).
    """
    t = len(releases)
    total = sum(r.epsilon0 * r.count for r in releases)
    at = _checkpoints(t, checkpoints)
    first = releases[0]
    if all(r == first for r in releases):
        if first.sensitivity_l1 == 0:
            return np.zeros(t)
        step = first.epsilon0 * first.count
        vdi = max(1e-4, step / 100.0, 2.0 * total / 1e6)
        single = pld_lib.from_laplace_mechanism(
            first.scale / first.sensitivity_l1, value_discretization_interval=vdi
        )
        vals = []
        for k in at:
            with np.errstate(over="ignore", divide="ignore"):
                vals.append(
                    float(single.self_compose(int(k) * first.count).get_epsilon_for_delta(delta))
                )
        return _step_up(at, _repair(np.asarray(vals), at, releases, delta), t)
    if total > _PLD_MAX_BASIC:
        # A grid fine enough to matter would need > 10⁸ points: fall back to RDP, which is
        # never below the PLD answer (so still a valid bound) and is tight at this scale.
        return _rdp_curve(releases, delta, final_only=checkpoints == 1)
    vdi = _pld_interval(total)
    want = set(at.tolist())
    vals = []
    pld = None
    for j, r in enumerate(releases, start=1):
        if r.sensitivity_l1 > 0:
            p = pld_lib.from_laplace_mechanism(
                r.scale / r.sensitivity_l1, value_discretization_interval=vdi
            )
            if r.count > 1:
                p = p.self_compose(r.count)
            pld = p if pld is None else pld.compose(p)
        if j in want:
            with np.errstate(over="ignore", divide="ignore"):
                vals.append(0.0 if pld is None else float(pld.get_epsilon_for_delta(delta)))
    return _step_up(at, _repair(np.asarray(vals), at, releases, delta), t)


def _repair(
    vals: np.ndarray, at: np.ndarray, releases: Sequence[Release], delta: float
) -> np.ndarray:
    """Replace non-finite PLD values by the RDP bound at the same iteration; make monotone.

    ``dp_accounting`` 0.6 can return ∞ from ``get_epsilon_for_delta`` when the lower mass
    underflows to a subnormal (losses of several hundred); RDP is a valid bound there.
    """
    bad = ~np.isfinite(vals)
    if np.any(bad):
        rdp = _rdp_curve(releases, delta)
        vals = np.where(bad, rdp[at - 1], vals)
    return np.maximum.accumulate(vals)


def _gaussian_exact_curve(releases: Sequence[GaussianRelease], delta: float) -> np.ndarray:
    """Exact ε(i) of composed Gaussian releases: one Gaussian of multiplier 1/√(Σ c_j Δ_j²/σ²).

    Composition of Gaussian mechanisms is exactly a Gaussian mechanism (Dong, Roth & Su,
    GDP Cor. 3.3); its (ε, δ) curve is the analytic one of Balle & Wang (2018, Thm 8),
    ``dp_accounting.get_epsilon_gaussian`` — this *is* the PLD answer without discretization.
    """
    mu2 = np.cumsum([r.count * (r.sensitivity_l2 / r.sigma) ** 2 for r in releases])
    out = np.empty(len(releases))
    for k, m2 in enumerate(mu2):
        out[k] = (
            0.0
            if m2 == 0
            else float(dp_accounting.get_epsilon_gaussian(1.0 / math.sqrt(m2), delta))
        )
    return np.maximum.accumulate(out)


def _rdp_curve(releases: Sequence[Release], delta: float, final_only: bool = False) -> np.ndarray:
    """RDP ε(i) from cumulative per-order RDP (dp_accounting); final_only: ε(T) at every i."""
    orders = None
    per_step = []
    cache: dict[tuple[type, float], np.ndarray] = {}
    for r in releases:
        if isinstance(r, LaplaceRelease):
            key, z, sens = (
                LaplaceRelease,
                r.scale / r.sensitivity_l1 if r.sensitivity_l1 else 0.0,
                r.sensitivity_l1,
            )
        else:
            if not isinstance(r, GaussianRelease):
                raise TypeError(f"expected a Laplace or Gaussian release; got {type(r).__name__}")
            key, z, sens = (
                GaussianRelease,
                r.sigma / r.sensitivity_l2 if r.sensitivity_l2 else 0.0,
                r.sensitivity_l2,
            )
        ck = (key, z)
        if ck not in cache:
            acc = RdpAccountant()
            if sens > 0:
                ev = (
                    dp_accounting.LaplaceDpEvent(z)
                    if key is LaplaceRelease
                    else dp_accounting.GaussianDpEvent(z)
                )
                acc.compose(ev)
            cache[ck] = acc.rdp
            orders = acc.orders
        per_step.append(cache[ck] * r.count)
    cum = np.cumsum(np.asarray(per_step), axis=0)
    if final_only:
        row = cum[-1]
        return np.full(
            len(releases), rdp_compute_epsilon(orders, row, delta)[0] if np.any(row) else 0.0
        )
    out = np.array(
        [0.0 if not np.any(row) else rdp_compute_epsilon(orders, row, delta)[0] for row in cum]
    )
    return np.maximum.accumulate(out)


def _curve(st: _Settings, accountant: str, checkpoints: int) -> np.ndarray:
    """ε(i), i = 1..T, of the settings by one accountant (finite noise and clip)."""
    rel = _releases(st)
    t = st.iterations
    if st.distribution == "laplace":
        eps_t = np.array([r.epsilon0 * r.count for r in rel])  # per-iteration pure ε
        if accountant == "paper":
            sens = gfl_sensitivities(
                t, scheme=st.scheme, mu=st.mu, clip=st.clip, norm="l2", rule="paper"
            )
            return np.cumsum(sens * st.observed_links / (st.sigma / math.sqrt(2.0)))
        if accountant == "basic":
            return np.cumsum(eps_t)
        steps = np.concatenate([np.full(r.count, r.epsilon0) for r in rel])
        it_of_step = np.repeat(np.arange(t), [r.count for r in rel])
        if accountant == "advanced":
            vals = np.minimum(_advanced(steps, st.delta), np.cumsum(steps))
            return np.maximum.accumulate(_last_per_iteration(vals, it_of_step, t))
        if accountant == "kairouz":
            return _kairouz_curve(steps, it_of_step, t, st.delta)
        # Laplace steps are pure DP, so Σ ε_t (basic) bounds every prefix too: take the min
        # (a coarse PLD grid rounds pessimistically and may overshoot it for huge ε).
        if accountant == "pld":
            return np.minimum(_laplace_pld_curve(rel, st.delta, checkpoints), np.cumsum(eps_t))  # type: ignore[arg-type]
        return np.minimum(_rdp_curve(rel, st.delta, checkpoints == 1), np.cumsum(eps_t))
    # gaussian
    if accountant == "pld":
        return _gaussian_exact_curve(rel, st.delta)  # type: ignore[arg-type]
    if accountant == "rdp":
        return _rdp_curve(rel, st.delta, checkpoints == 1)
    return _gaussian_split_curve(rel, st.delta, accountant)


def _gaussian_split_curve(releases: Sequence[Release], delta: float, accountant: str) -> np.ndarray:
    """ε(i) of Gaussian releases by a pure-DP composition theorem, δ split over the T planned steps.

    Each of the n planned steps gets δ_t = δ/n (``basic``) or δ/(2n) with δ/2 left for the
    theorem (``paper``, ``advanced``, ``kairouz``), as the graph-topology paper splits its
    budget across its T rounds; any prefix then uses at most δ. Step ε_t is the classic
    bound for ``paper`` (∞ from the first step where it reaches 1) and the exact analytic
    Gaussian ε otherwise. Equal to :func:`~.composition.epsilon` at i = T.
    """
    n = sum(r.count for r in releases)
    t = len(releases)
    counts = np.array([r.count for r in releases])
    it_of_step = np.repeat(np.arange(t), counts)
    delta_t = delta / n if accountant == "basic" else delta / (2.0 * n)
    per = []
    for r in releases:
        if not isinstance(r, GaussianRelease):
            raise TypeError(f"expected a Gaussian release; got {type(r).__name__}")
        if r.sensitivity_l2 == 0:
            per.append(0.0)
        elif accountant == "paper":
            per.append(r.sensitivity_l2 * math.sqrt(2.0 * math.log(1.25 / delta_t)) / r.sigma)
        else:
            per.append(
                float(dp_accounting.get_epsilon_gaussian(r.sigma / r.sensitivity_l2, delta_t))
            )
    steps = np.repeat(np.asarray(per), counts)
    if accountant == "basic":
        return _last_per_iteration(np.cumsum(steps), it_of_step, t)
    if accountant == "advanced":
        vals = np.minimum(_advanced(steps, delta / 2.0), np.cumsum(steps))
        return np.maximum.accumulate(_last_per_iteration(vals, it_of_step, t))
    if accountant == "kairouz":
        return _kairouz_curve(steps, it_of_step, t, delta / 2.0)
    # paper: classic per-step bound, eq. (32) only
    out = _kairouz_curve(steps, it_of_step, t, delta / 2.0, optimal=False)
    bad = np.nonzero(np.asarray(per) >= 1.0)[0]
    if bad.size:
        out[bad[0] :] = math.inf
    return out


def _advanced(steps: np.ndarray, delta: float) -> np.ndarray:
    """Heterogeneous DRV bound for every prefix: √(2 ln(1/δ) Σ ε_t²) + Σ ε_t (e^{ε_t} − 1)."""
    with np.errstate(over="ignore"):  # huge ε_t: the bound is ∞ and the min with Σ ε_t wins
        drift = np.cumsum(steps * np.expm1(steps))
    return np.sqrt(2.0 * math.log(1.0 / delta) * np.cumsum(steps**2)) + drift


def _last_per_iteration(vals: np.ndarray, it_of_step: np.ndarray, t: int) -> np.ndarray:
    last = np.zeros(t, dtype=int)
    last[it_of_step] = np.arange(it_of_step.size)  # later steps overwrite earlier ones
    return vals[last]


def _kairouz_curve(
    steps: np.ndarray, it_of_step: np.ndarray, t: int, delta: float, *, optimal: bool = True
) -> np.ndarray:
    """Eq. (32) for every prefix (KOV Thm 3.5, cumulative sums); with equal steps also Thm 3.3."""
    drift = np.cumsum(np.tanh(steps / 2.0) * steps)
    sq = np.cumsum(steps**2)
    total = np.cumsum(steps)
    term2 = drift + np.sqrt(2.0 * sq * np.log(math.e + np.sqrt(sq) / delta))
    term3 = drift + np.sqrt(2.0 * sq * math.log(1.0 / delta))
    vals = np.minimum(np.minimum(total, term2), term3)
    out = _last_per_iteration(vals, it_of_step, t)
    if optimal and steps.size and np.all(steps == steps[0]) and steps[0] > 0:
        k_at = _last_per_iteration(np.arange(1, steps.size + 1), it_of_step, t)
        opt = np.array([kairouz_optimal_epsilon(float(steps[0]), int(k), delta) for k in k_at])
        out = np.minimum(out, opt)
    return np.maximum.accumulate(out)


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
        dim: model dimension M (Laplace, rigorous: Δ₁ = √M Δ₂).
        observed_links: links an adversary watches (``random_per_link`` only).
        clients_per_round: L, clients a server aggregates per iteration; only the
            ``random`` scheme uses it (rigorous sensitivity 2μB/L); 1 is always safe.
        rigorous: charge Laplace noise the ℓ₁ sensitivity and use the rigorous message
            sensitivities of :func:`~.papers.gfl_sensitivities` (default). ``paper`` always
            uses the published ℓ₂ reading.
        accountants: subset of :data:`ACCOUNTANTS`; default :func:`default_accountants`.
        checkpoints: iterations at which the Laplace PLD is evaluated (log-spaced, incl.
            T); in between, the next checkpoint's value (an upper bound) is reported.

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
    )
    accs = default_accountants(st.distribution) if accountants is None else tuple(accountants)
    if not accs:
        raise ConfigError(
            "accountants must name at least one of " + ", ".join(ACCOUNTANTS) + "; got none"
        )
    for a in accs:
        check_choice("accountant", a, ACCOUNTANTS)
    ncp = check_int("checkpoints", checkpoints, lo=2)
    notes = {
        a: _NOTES["paper_gaussian" if (a == "paper" and st.distribution == "gaussian") else a]
        for a in accs
    }
    if "pld" in notes and st.distribution == "gaussian":
        notes["pld"] = "exact: composed Gaussians are one Gaussian (GDP); analytic Gaussian epsilon"
    if not st.rigorous:
        for a in notes:
            if a != "paper":
                notes[a] += " [papers' reading: l2 sensitivity, eq. 52 growth for every scheme]"
    settings = dataclasses.asdict(st)
    reason = None
    if st.clip is None:
        reason = "no gradient bound: set a per-sample clipping norm (clip) to get a finite epsilon"
    elif st.sigma == 0:
        reason = "no noise (sigma = 0): the messages are released in the clear"
    if reason is not None:
        vals = {a: np.full(st.iterations, math.inf) for a in accs}
        return EpsilonCurve(vals, st.delta, reason, notes, settings)
    vals = {a: _curve(st, a, ncp) for a in accs}
    if "pld" in notes and st.distribution == "laplace":
        if sum(r.epsilon0 * r.count for r in _releases(st)) > _PLD_MAX_BASIC:  # type: ignore[union-attr]
            notes["pld"] += (
                "; here basic composition exceeds 1e4, so the value is the RDP bound "
                "(valid, never below PLD)"
            )
    return EpsilonCurve(vals, st.delta, None, notes, settings)


def _final_epsilon(st: _Settings, accountant: str) -> float:
    return float(_curve(st, accountant, checkpoints=1)[-1])


def _calibration_guess(st1: _Settings, eps_star: float) -> float:
    """A σ near the answer, from a closed form (settings ``st1`` at σ = 1)."""
    rel = _releases(st1)
    if st1.distribution == "gaussian":
        total = sum(r.count * r.sensitivity_l2**2 for r in rel)  # type: ignore[union-attr]
        return math.sqrt(total) * float(dp_accounting.get_sigma_gaussian(eps_star, st1.delta))
    steps1 = np.concatenate([np.full(r.count, r.epsilon0) for r in rel])  # type: ignore[union-attr]
    lo, hi = 1e-300, float(steps1.sum()) / eps_star  # basic composition: ε(hi) = ε*
    lo = hi * 1e-6
    for _ in range(100):  # bisection in log σ on the O(T) closed form
        mid = math.sqrt(lo * hi)
        if kairouz_epsilon(steps1 / mid, st1.delta) <= eps_star:
            hi = mid
        else:
            lo = mid
        if hi / lo < 1.0 + 1e-6:
            break
    return hi


class _FinalEpsilonEvent(dp_accounting.DpEvent):
    """A whole run at one noise level, for ``mechanism_calibration`` (internal)."""

    def __init__(self, settings: _Settings, accountant: str) -> None:
        object.__setattr__(self, "settings", settings)  # DpEvent subclasses are frozen attrs
        object.__setattr__(self, "accountant", accountant)


class _FinalEpsilonAccountant(dp_accounting.PrivacyAccountant):
    """Adapter letting ``dp_accounting.mechanism_calibration`` bisect over pgfl's accountants."""

    def __init__(self) -> None:
        super().__init__(dp_accounting.NeighboringRelation.REPLACE_ONE)
        self._event: _FinalEpsilonEvent | None = None

    def _maybe_compose(self, event: dp_accounting.DpEvent, count: int, do_compose: bool) -> Any:
        if not isinstance(event, _FinalEpsilonEvent):
            from dp_accounting.privacy_accountant import CompositionErrorDetails

            return CompositionErrorDetails(
                invalid_event=event, error_message="pgfl run events only"
            )
        if do_compose:
            self._event = event
        return None

    def get_epsilon(self, target_delta: float) -> float:
        if self._event is None:  # set by compose() inside the calibration loop
            raise RuntimeError("get_epsilon called before compose()")
        return _final_epsilon(self._event.settings, self._event.accountant)


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
    accountant: str = TIGHT_ACCOUNTANT,
    rtol: float = 1e-3,
) -> float:
    """Smallest noise σ (per-coordinate std) with ε(T) ≤ target by ``accountant``.

    ε(T) decreases in σ. Closed forms are inverted exactly: ``paper`` and ``basic`` for
    Laplace (ε ∝ 1/σ) and the exact Gaussian ``pld`` (σ = √(Σ Δ_j²) · σ₁(ε, δ), with σ₁
    the analytic single-Gaussian calibration). Everything else is bracketed and then
    bisected by ``dp_accounting.mechanism_calibration.calibrate_dp_mechanism`` (Brent's
    method, result guaranteed on the private side), to relative tolerance ``rtol``.

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
        clients_per_round: L (``random`` only, see :func:`epsilon_curve`).
        accountant: one of :data:`ACCOUNTANTS` (default: the tight ``pld``).
        rtol: relative tolerance on σ.

    Returns:
        σ with ``epsilon_curve(..., sigma=σ)[accountant][-1] <= target_epsilon``.

    >>> s = calibrate(6.0, 1e-5, 3, scheme="graph_homomorphic", mu=0.5, clip=1.0,
    ...               accountant="paper")
    >>> round(s, 12) == round(math.sqrt(2), 12)   # preprint Thm 2: σ_g = √2 μ B (1+i) i / ε
    True

    """
    eps_star = check_real("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    if clip is None:
        raise ConfigError(
            "clip must be a real number in (0, inf); got None (no bound, no finite epsilon)"
        )
    check_real("clip", clip, lo=0.0, lo_open=True)
    acc = check_choice("accountant", accountant, ACCOUNTANTS)
    tol = check_real("rtol", rtol, lo=0.0, hi=0.1, lo_open=True)
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
    )

    def at(sigma: float) -> _Settings:
        return dataclasses.replace(st, sigma=float(sigma))

    def eps_of(sigma: float) -> float:
        return _final_epsilon(at(sigma), acc)

    # exact inversions
    if (st.distribution == "laplace" and acc in ("paper", "basic")) or (
        st.distribution == "gaussian" and acc == "pld"
    ):
        if st.distribution == "laplace":
            sigma = eps_of(1.0) / eps_star  # ε(σ) = ε(1)/σ
        else:
            total = sum(r.count * r.sensitivity_l2**2 for r in _releases(at(1.0)))  # type: ignore[union-attr]
            sigma = math.sqrt(total) * float(dp_accounting.get_sigma_gaussian(eps_star, st.delta))
        for _ in range(8):  # guard against the last ulp
            if eps_of(sigma) <= eps_star:
                return sigma
            sigma = math.nextafter(sigma, math.inf) * (1.0 + 1e-12)
        return sigma

    # bracket [lo, hi] with ε(lo) > ε* ≥ ε(hi), stepping by 25 % from a cheap guess:
    # eq. (32) for Laplace (valid for any ε_t-DP steps, so at least the PLD/RDP answer),
    # the exact Gaussian (never above RDP) for Gaussian noise.
    guess = _calibration_guess(at(1.0), eps_star)
    if eps_of(guess) <= eps_star:
        hi, lo = guess, guess / 1.25
        while eps_of(lo) <= eps_star:
            hi, lo = lo, lo / 1.25
    else:
        lo, hi = guess, guess * 1.25
        for _ in range(400):
            if eps_of(hi) <= eps_star:
                break
            lo, hi = hi, hi * 1.25
        else:  # pragma: no cover - ε(σ) → 0 as σ → ∞ for every accountant
            raise ConfigError(f"target_epsilon={eps_star:g} cannot be reached by {acc!r}")
    root = mechanism_calibration.calibrate_dp_mechanism(
        _FinalEpsilonAccountant,
        lambda s: _FinalEpsilonEvent(at(s), acc),
        eps_star,
        st.delta,
        bracket_interval=mechanism_calibration.ExplicitBracketInterval(lo, hi),
        tol=tol * hi,
    )
    return float(root)
