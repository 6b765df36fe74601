"""Accountants: one class per composition rule, as ``dp_accounting`` designs them.

Every accountant starts empty, ``compose(release, count)`` adds ``count`` copies of a
release (:mod:`.releases`), and ``get_epsilon(delta)`` is the ε at δ of everything composed
so far; composing and querying interleave freely, which is what makes ε(i) over the
iterations of a run one incremental loop (:func:`.curves.accountant_curve`).

================ ==============================================================================
``paper``        :class:`PaperAccountant` — the rule the papers use: pure-DP steps add up (book
                 Lemma 11.2); Gaussian steps use the classic σ bound per step and eq. (32)
                 (graph-topology paper, Thm 3), δ split evenly: δ/2 over the n steps, δ/2 for
                 eq. (32); ∞ once a Gaussian step's classic ε reaches 1 (unproven there).
``basic``        :class:`BasicAccountant` — Σ ε_t (+ Σ δ_t): Gaussian steps get their exact
                 ε_t at δ_t = δ/n.
``advanced``     :class:`AdvancedAccountant` — Dwork–Rothblum–Vadhan, heterogeneous form
                 √(2 ln(1/δ′) Σ ε_t²) + Σ ε_t (e^{ε_t} − 1) (Dwork & Roth Thm 3.20), min Σ ε_t.
``kairouz``      :class:`KairouzAccountant` — KOV Thm 3.3 (optimal, at its corner points) when
                 all steps share one ε₀, and Thm 3.5 = eq. (32) always; the smaller.
``pld``          :class:`PldAccountant` — privacy-loss distributions (``dp_accounting.pld``),
                 tight up to a pessimistic discretization; Gaussian compositions exactly (one
                 Gaussian, GDP); capped by the Rényi bound and, for pure steps, by Σ ε_t.
``rdp``          :class:`RdpAccountant` — Rényi DP (``dp_accounting.rdp``), with the proven
                 worst-case direction for vector Laplace noise; capped by Σ ε_t for pure steps.
================ ==============================================================================

**What each composes.** Releases are an open set (:class:`~.releases.Release`); each
accountant declares the ones it supports (:meth:`Accountant.supports`, as
``dp_accounting``'s accountants do for events) and refuses any other in one line naming
itself, the release kind and the accountants that would compose it. The pure-DP theorems
(``basic``, ``advanced``, ``kairouz``, ``paper``) take releases with a pure ε and Gaussian
ones (``paper`` also the distributed discrete sums, by the papers' Rényi bound); ``rdp``
takes those and every release with a Rényi curve of its own or a ``dp_accounting`` event
its library composes; ``pld`` takes what ``rdp`` takes and reports the Rényi bound for
what it has no PLD of.

With Gaussian steps, ``advanced``/``kairouz`` turn each into (ε_t, δ/(2n)) with the exact
analytic ε and leave δ/2 for the theorem, so the total δ never exceeds the δ asked for.
n is the number of steps composed *so far*: ε after i iterations is the ε of a run of i
iterations. Every accountant states its sensitivities for the replace-one relation and
passes ``dp_accounting`` only the two relations of :mod:`.releases`.

>>> pld = PldAccountant().compose(LaplaceRelease(1.0, 10.0), count=100)
>>> basic = BasicAccountant().compose(LaplaceRelease(1.0, 10.0), count=100)
>>> round(pld.get_epsilon(1e-5), 2), round(basic.get_epsilon(1e-5), 6)
(4.22, 10.0)
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Iterable
from typing import Any, ClassVar

import dp_accounting
import numpy as np
from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant as dp_rdp

from pgfl.validation import ConfigError, check_choice, check_int, check_real

from .mechanisms import (
    DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
    drv_from_sums,
    gaussian_epsilon_analytic,
    kairouz_optimal_epsilon,
    kov_from_sums,
    laplace_hockey_stick,
    laplace_rdp,
)
from .releases import (
    RANDOMIZED_RESPONSE_RELATION,
    SHIFT_PAIR,
    DiscreteSumRelease,
    GaussianRelease,
    LaplaceRelease,
    MixtureSampledGaussianRelease,
    PureDpRelease,
    Release,
    VectorLaplaceRelease,
    check_release,
    randomized_response_noise,
)

__all__ = [
    "ACCOUNTANTS",
    "Accountant",
    "AdvancedAccountant",
    "BasicAccountant",
    "KairouzAccountant",
    "PaperAccountant",
    "PldAccountant",
    "RdpAccountant",
    "make_accountant",
    "refusal",
    "supporting",
]

#: A composed PLD whose pure-DP total exceeds this is not built: it would need a grid
#: coarser than 1 to stay small, and the Rényi bound is valid and tight at that scale.
MAX_PLD_PURE_TOTAL = 1e4


def _check_delta(delta: float) -> float:
    return check_real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)


class Accountant(abc.ABC):
    """Base class: ``compose(release, count)`` then ``get_epsilon(delta)``, any number of times.

    Attributes:
        name: the key of :data:`ACCOUNTANTS` (and of ``summary.json``'s ``"epsilon"``).
        note: one line saying what the number is.

    """

    name: ClassVar[str]
    note: ClassVar[str]

    def __init__(self) -> None:
        self._steps = 0

    @property
    def steps(self) -> int:
        """Number of releases composed so far (counts included)."""
        return self._steps

    @classmethod
    @abc.abstractmethod
    def supports(cls, release: Release) -> bool:
        """Whether this accountant composes ``release`` (else :meth:`compose` refuses it)."""

    def compose(self, release: Release, count: int = 1) -> Accountant:
        """Add ``count`` × ``release.count`` copies of ``release``; returns ``self``.

        Raises:
            ConfigError: not a release, a release this accountant does not support
                (:func:`refusal`), or ``count`` < 1.

        """
        rel = check_release(release)
        n = rel.count * check_int("count", count, lo=1)
        if not self.supports(rel):
            raise ConfigError(refusal(self.name, rel))
        self._compose(rel, n)
        self._steps += n
        return self

    def get_epsilon(self, delta: float) -> float:
        """ε at ``delta`` of everything composed so far (0 before any release).

        Raises:
            ConfigError: δ ∉ (0, 1).

        """
        dlt = _check_delta(delta)
        return 0.0 if self._steps == 0 else float(self._epsilon(dlt))

    @abc.abstractmethod
    def _compose(self, release: Release, n: int) -> None: ...

    @abc.abstractmethod
    def _epsilon(self, delta: float) -> float: ...


# --------------------------------------------------------------- pure-DP theorems
class _StepLedger(Accountant):
    """Per-step ε_t of pure-DP steps as running sums; Gaussian steps by noise multiplier.

    Pure steps (Laplace, vector Laplace with its ℓ₁ charge, generic ε-DP) contribute
    ε_t = ε₀; Gaussian steps are converted to (ε_t, δ_t) only when ε is asked for, since
    δ_t depends on how many steps there are (:meth:`_gaussian_steps`).
    """

    @classmethod
    def supports(cls, release: Release) -> bool:
        """Releases with a pure ε, and Gaussian ones."""
        return isinstance(release, GaussianRelease) or release.epsilon0 is not None

    def __init__(self) -> None:
        super().__init__()
        self._total = 0.0  # Σ ε_t      (pure steps)
        self._squares = 0.0  # Σ ε_t²
        self._tanh = 0.0  # Σ ε_t tanh(ε_t/2)            (KOV drift)
        self._expm1 = 0.0  # Σ ε_t (e^{ε_t} − 1)         (DRV drift)
        self._values: set[float] = set()  # distinct pure ε₀ (only "one or more" matters)
        self._gauss: dict[float, int] = {}  # noise multiplier → number of steps

    def _compose(self, release: Release, n: int) -> None:
        if isinstance(release, GaussianRelease):
            if release.sensitivity_l2 > 0:
                z = release.noise_multiplier
                self._gauss[z] = self._gauss.get(z, 0) + n
            else:
                self._values.add(0.0)
            return
        e0 = float(release.epsilon0)  # type: ignore[arg-type]  # pure: supports() says so
        self._total += n * e0
        self._squares += n * e0 * e0
        self._tanh += n * e0 * math.tanh(e0 / 2.0)
        self._expm1 += n * e0 * math.expm1(e0) if e0 < 700 else math.inf
        if len(self._values) < 2:
            self._values.add(e0)

    def _gaussian_steps(
        self, delta_t: float, classic: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(ε_t, counts) of the Gaussian steps at δ_t: exact analytic, or the classic bound."""
        if not self._gauss:
            return np.zeros(0), np.zeros(0)
        z = np.fromiter(self._gauss, dtype=float)
        counts = np.fromiter(self._gauss.values(), dtype=float)
        if classic:
            return np.sqrt(2.0 * math.log(1.25 / delta_t)) / z, counts
        return np.asarray(gaussian_epsilon_analytic(z, delta_t)), counts

    def _sums(self, eps_g: np.ndarray, counts: np.ndarray) -> tuple[float, float, float, float]:
        """(Σ ε_t, Σ ε_t², Σ ε_t tanh(ε_t/2), Σ ε_t (e^{ε_t} − 1)) over all steps."""
        with np.errstate(over="ignore"):
            return (
                self._total + float(np.dot(counts, eps_g)),
                self._squares + float(np.dot(counts, eps_g**2)),
                self._tanh + float(np.dot(counts, eps_g * np.tanh(eps_g / 2.0))),
                self._expm1 + float(np.dot(counts, eps_g * np.expm1(eps_g))),
            )

    def _theorem_inputs(
        self, delta: float
    ) -> tuple[float, tuple[float, float, float, float], np.ndarray]:
        """(slack δ′ for the theorem, :meth:`_sums`, Gaussian ε_t): ``advanced``, ``kairouz``.

        Gaussian steps are converted at δ/(2n) and leave δ/2 for the theorem; without
        them the whole δ is the slack.
        """
        eps_g, counts = self._gaussian_steps(delta / (2.0 * self._steps))
        return (delta / 2.0 if self._gauss else delta), self._sums(eps_g, counts), eps_g

    def _single_value(self, eps_g: np.ndarray) -> float | None:
        """The common ε₀ when every step has the same one (else None)."""
        values = self._values | set(eps_g.tolist())
        return next(iter(values)) if len(values) == 1 else None


class BasicAccountant(_StepLedger):
    """Σ ε_t (book Lemma 11.2; Dwork & Roth Thm 3.16); a Gaussian step at δ_t = δ/n.

    >>> BasicAccountant().compose(PureDpRelease(0.1), 100).get_epsilon(1e-5)
    10.0
    """

    name = "basic"
    note = "sum of per-iteration epsilons (book Lemma 11.2), rigorous sensitivities"

    def _epsilon(self, delta: float) -> float:
        eps_g, counts = self._gaussian_steps(delta / self._steps)
        return self._sums(eps_g, counts)[0]


class PaperAccountant(_StepLedger):
    """The papers' rule: pure steps add up; Gaussian steps classic bound + eq. (32).

    Laplace/pure-DP steps: Σ ε_t (book Lemma 11.2, preprint App. F eq. 86). With
    Gaussian steps: classic ε_t = Δ₂ √(2 ln(1.25/δ_t))/σ at δ_t = δ/(2n) (Dwork & Roth
    Thm A.1, valid only below 1: ∞ otherwise), composed by eq. (32) at δ/2
    (graph-topology paper, Thm 3). Distributed discrete sums (:class:`DiscreteSumRelease`,
    in the papers' reading, ``published``): the distributed-DP papers account by Rényi
    DP, so once one is composed the value is the Rényi accountant's of every release.
    """

    name = "paper"
    note = (
        "as published: Laplace epsilon = sensitivity/b with the l2 sensitivity "
        "(preprint Thm 2 / book Thm 11.1 for server-level noise; per-round sum, book Lemma 11.2, "
        "for client-level noise, for which the papers give no closed form)"
    )

    @classmethod
    def supports(cls, release: Release) -> bool:
        """Pure and Gaussian releases, and distributed discrete sums (by Rényi DP)."""
        return isinstance(release, DiscreteSumRelease) or super().supports(release)

    def __init__(self) -> None:
        super().__init__()
        self._renyi = RdpAccountant()  # everything, read once a discrete sum is composed
        self._discrete = False

    def _compose(self, release: Release, n: int) -> None:
        self._renyi.compose(release, n // release.count)  # n counts release.count already
        if isinstance(release, DiscreteSumRelease):
            self._discrete = True
        else:
            super()._compose(release, n)

    def _epsilon(self, delta: float) -> float:
        if self._discrete:
            return self._renyi.get_epsilon(delta)
        if not self._gauss:
            return self._total
        eps_g, counts = self._gaussian_steps(delta / (2.0 * self._steps), classic=True)
        if np.any(eps_g >= 1.0):
            return math.inf
        total, squares, tanh, _ = self._sums(eps_g, counts)
        return kov_from_sums(total, squares, tanh, delta / 2.0)


class AdvancedAccountant(_StepLedger):
    """Dwork–Rothblum–Vadhan, heterogeneous form (Dwork & Roth Thm 3.20), min Σ ε_t.

    >>> round(AdvancedAccountant().compose(PureDpRelease(0.1), 100).get_epsilon(1e-5), 2)
    5.85
    """

    name = "advanced"
    note = "Dwork-Rothblum-Vadhan advanced composition (heterogeneous form)"

    def _epsilon(self, delta: float) -> float:
        slack, (total, squares, _, drift), _ = self._theorem_inputs(delta)
        return min(drv_from_sums(squares, drift, slack), total)


class KairouzAccountant(_StepLedger):
    """KOV: Thm 3.3 (optimal corners) for equal steps, Thm 3.5 = eq. (32) always; the smaller.

    >>> round(KairouzAccountant().compose(PureDpRelease(0.1), 100).get_epsilon(1e-5), 2)
    4.4
    """

    name = "kairouz"
    note = "Kairouz-Oh-Viswanath: Thm 3.3 for equal steps, Thm 3.5 (eq. 32) otherwise"

    def _epsilon(self, delta: float) -> float:
        slack, (total, squares, tanh, _), eps_g = self._theorem_inputs(delta)
        out = kov_from_sums(total, squares, tanh, slack)
        e0 = self._single_value(eps_g)
        if e0 is not None and e0 > 0:
            out = min(out, kairouz_optimal_epsilon(e0, self._steps, slack))
        return out


# --------------------------------------------------------------- dp_accounting-backed
class RdpAccountant(Accountant):
    """Rényi DP through ``dp_accounting.rdp`` (Mironov 2017), one ledger for every release.

    Laplace: ``LaplaceDpEvent(b/Δ₁)``; vector Laplace: M × ``LaplaceDpEvent(b√M/Δ₂)``, the
    diagonal shift, which is the worst one at every order (proof in
    :class:`~.releases.VectorLaplaceRelease`); Gaussian: ``GaussianDpEvent(σ/Δ₂)``;
    generic ε-DP: binary randomized response under ``REPLACE_ONE``; a Gaussian seen by an
    observer who knows its own sampling status
    (:class:`~.releases.MixtureSampledGaussianRelease`): the mixture over statuses of the
    library's per-status Rényi bounds. Orders: the library's. When every step is pure DP,
    Σ ε_t is valid at every δ and caps the result.

    Releases are kept as counts per distinct release and summed at query time: Laplace
    steps with the vectorized formula :func:`~.mechanisms.laplace_rdp` (the one
    ``dp_accounting`` applies to a ``LaplaceDpEvent``, one order at a time), so a run of
    T distinct Laplace releases costs one array operation, the others through a fresh
    ``dp_accounting`` accountant; the conversion to (ε, δ) is ``dp_accounting``'s
    ``compute_epsilon``.

    >>> round(RdpAccountant().compose(GaussianRelease(1.0, 1.0), 100).get_epsilon(1e-5), 2)
    96.12
    """

    name = "rdp"
    note = "Renyi DP (dp_accounting); vector Laplace charged its worst (diagonal) direction"

    @classmethod
    def supports(cls, release: Release) -> bool:
        """Pure and Gaussian releases, and any with a Rényi curve or a library event."""
        if isinstance(release, GaussianRelease) or release.epsilon0 is not None:
            return True
        if _has_curve(release):
            return True
        event = release.dp_event()
        return event is not None and _LIBRARY.supports(event)

    def __init__(self, orders: Iterable[float] | None = None) -> None:
        super().__init__()
        self._order_list = None if orders is None else list(orders)
        self._orders = self._library().orders
        # the multiset of releases: (Laplace ε₀ of one coordinate | dp_accounting event |
        # a release with its own Rényi curve, one copy) → count
        self._laplace: dict[float, int] = {}
        self._events: dict[dp_accounting.DpEvent, int] = {}
        self._curves: dict[Release, int] = {}
        self._mixtures: dict[MixtureSampledGaussianRelease, int] = {}
        self._rdp: np.ndarray | None = None  # RDP per order (None: not summed yet)
        self._pure_total = 0.0
        self._gaussian = False

    def _library(self) -> dp_rdp.RdpAccountant:
        return dp_rdp.RdpAccountant(
            self._order_list,
            neighboring_relation=RANDOMIZED_RESPONSE_RELATION,  # shift pairs ignore it
        )

    def _compose(self, release: Release, n: int) -> None:
        self._rdp = None
        if isinstance(release, MixtureSampledGaussianRelease):
            self._gaussian = True
            if release.sensitivity_l2 > 0:
                key = dataclasses.replace(release, count=1)
                self._mixtures[key] = self._mixtures.get(key, 0) + n
            return
        if isinstance(release, GaussianRelease):
            self._gaussian = True
            if release.sensitivity_l2 > 0:
                event = release.dp_event()
                self._events[event] = self._events.get(event, 0) + n
            return
        pure = release.epsilon0
        if pure is None:
            self._gaussian = True  # not pure DP: Σ ε_t does not cap it
        else:
            self._pure_total += n * pure
            if pure == 0:
                return
        if isinstance(release, VectorLaplaceRelease):
            e0, n = 1.0 / release.diagonal_multiplier, n * release.dim
        elif isinstance(release, LaplaceRelease):
            e0 = release.epsilon0
        elif _has_curve(release):  # a discrete sum, or a kind with its own Rényi curve
            key = _one_copy(release)
            self._curves[key] = self._curves.get(key, 0) + n
            return
        else:  # its own event, else its pure ε as binary randomized response
            event = release.dp_event()
            if event is None:
                event = PureDpRelease(float(pure)).dp_event()  # type: ignore[arg-type]
            self._events[event] = self._events.get(event, 0) + n
            return
        self._laplace[e0] = self._laplace.get(e0, 0) + n

    def _rdp_values(self) -> np.ndarray:
        """RDP per order of everything composed so far, summed from the multiset.

        A deterministic function of {release: copies}, so ε after T releases is the same
        number whatever the order and grouping of the compositions and reads before.
        """
        if self._rdp is None:
            library = self._library()
            for event, count in sorted(self._events.items(), key=lambda kv: repr(kv[0])):
                library.compose(event, count)
            rdp = library.rdp
            for release, count in sorted(self._curves.items(), key=lambda kv: repr(kv[0])):
                rdp = rdp + count * release.rdp(self._orders)
            for release, count in sorted(self._mixtures.items(), key=lambda kv: repr(kv[0])):
                rdp = rdp + count * self.mixture_rdp(release)
            if self._laplace:
                e0 = np.array(sorted(self._laplace))
                counts = np.array([self._laplace[e] for e in e0], dtype=float)
                rdp = rdp + counts @ laplace_rdp(e0, self._orders)
            self._rdp = rdp
        return self._rdp

    def mixture_rdp(self, release: MixtureSampledGaussianRelease) -> np.ndarray:
        """RDP per order of one release seen with the observer's status known.

        ``(1/(α−1)) ln Σ_s w_s exp((α−1) R_s(α))``, R_s the library's bound for an
        m_s-of-n_s sample without replacement (0 for m_s = 0, the plain Gaussian for
        m_s = n_s), each at the component's noise multiplier σ_s/Δ₂; with
        ``release.outside``, the larger of that and the outside observer's R.
        """
        a1 = self._orders - 1.0
        logs = []
        for w, n, m, sigma in release.components:
            if w == 0:
                continue
            if m == 0:
                logs.append(np.full(self._orders.shape, math.log(w)))
                continue
            logs.append(math.log(w) + a1 * self._sampled_rdp(release.sensitivity_l2, sigma, n, m))
        with np.errstate(over="ignore"):
            rdp = np.logaddexp.reduce(np.array(logs), axis=0) / a1
        if release.outside is not None:
            n, m = release.outside
            rdp = np.maximum(rdp, self._sampled_rdp(release.sensitivity_l2, release.sigma, n, m))
        return rdp

    def _sampled_rdp(self, sensitivity: float, sigma: float, n: int, m: int) -> np.ndarray:
        """The library's RDP per order of a Gaussian on an m-of-n sample (m = n: none)."""
        event = dp_accounting.GaussianDpEvent(sigma / sensitivity)
        if m < n:
            event = dp_accounting.SampledWithoutReplacementDpEvent(n, m, event)
        one = self._library()
        one.compose(event)
        return np.asarray(one.rdp)

    def _epsilon(self, delta: float) -> float:
        rdp = self._rdp_values()
        eps = 0.0 if not np.any(rdp) else float(dp_rdp.compute_epsilon(self._orders, rdp, delta)[0])
        return eps if self._gaussian else min(eps, self._pure_total)


class PldAccountant(Accountant):
    """Privacy-loss distributions (``dp_accounting.pld``), pessimistically discretized.

    Laplace (and vector Laplace with its ℓ₁ charge) and generic ε-DP releases are
    composed as ``dp_accounting`` PLDs on a grid of ``value_discretization_interval``
    (Laplace: ``dp_accounting``'s pessimistic connect-the-dots PLD of the closed-form
    hockey-stick curve :func:`~.mechanisms.laplace_hockey_stick`, as its
    ``from_laplace_mechanism`` builds it; ε-DP: binary randomized response under
    ``REPLACE_ONE``). Gaussian releases compose exactly into one Gaussian of multiplier
    1/√(Σ (Δ₂/σ)²) (Dong, Roth & Su, GDP); alone they give the analytic ε
    (:func:`~.mechanisms.gaussian_epsilon_analytic`), with other releases their PLD is
    added at query time. The value reported is the smallest of three valid bounds on
    the same composition: this PLD, the Rényi bound of :class:`RdpAccountant` (tighter
    for vector Laplace noise, and a fallback where ``dp_accounting`` 0.6 returns ∞ from
    an underflow), and Σ ε_t when every step is pure DP. Above a pure-DP total of
    ``max_pure_total`` the PLD is dropped (``dropped`` is then true). ``source`` names
    the bound the last value came from, so that a Rényi bound is never reported as a PLD.

    Args:
        value_discretization_interval: PLD grid; coarser is faster and looser.
        max_pure_total: Σ ε_t beyond which the PLD is not built.

    """

    name = "pld"
    note = "privacy-loss distributions (dp_accounting), tight up to pessimistic discretization"

    @classmethod
    def supports(cls, release: Release) -> bool:
        """What :class:`RdpAccountant` supports (its bound where no PLD is built)."""
        return RdpAccountant.supports(release)

    def __init__(
        self,
        value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
        *,
        max_pure_total: float = MAX_PLD_PURE_TOTAL,
    ) -> None:
        super().__init__()
        self._vdi = check_real(
            "value_discretization_interval", value_discretization_interval, lo=0.0, lo_open=True
        )
        self._max_total = check_real("max_pure_total", max_pure_total, lo=0.0, lo_open=True)
        self._mu2 = 0.0  # Σ (Δ₂/σ)² of the Gaussian releases
        self._pure_total = 0.0
        self._gaussian = False
        self._rdp = RdpAccountant()
        self._singles: dict[tuple[type, float], Any] = {}
        self._counts: dict[tuple[type, float], int] = {}  # pure release → copies composed
        self._blocks: dict[tuple, Any] = {}  # leaves of an aligned block → its PLD
        self._powers: dict[tuple[type, float], list] = {}  # release → [P, P², P⁴, ...]
        self._pure: Any = None  # PLD of every pure release (None: not built yet)
        self.dropped = False
        self._renyi_only = False  # a discrete sum was composed: no PLD of it is built
        self._dominated: list[float] | None = [0.0, 0.0]  # discrete sums' Σμ², Σκ (or None)
        #: Which bound gave the last ε read: ``"pld"`` (the privacy-loss distribution, or
        #: the exact composed Gaussian), ``"rdp"`` (the Rényi bound) or ``"basic"`` (Σ ε_t).
        self.source = "pld"

    @property
    def value_discretization_interval(self) -> float:
        """The PLD grid."""
        return self._vdi

    def _single(self, release: Release) -> Any:
        key = (type(release), release.epsilon0)
        if key not in self._singles:
            if not isinstance(release, (LaplaceRelease, VectorLaplaceRelease)):  # any ε-DP:
                # binary randomized response, its worst case
                self._singles[key] = pld_lib.from_randomized_response(
                    noise_parameter=randomized_response_noise(release.epsilon0),
                    num_buckets=2,
                    value_discretization_interval=self._vdi,
                    neighboring_relation=RANDOMIZED_RESPONSE_RELATION,
                )
            else:  # Laplace, or vector Laplace charged ε₀ = √M Δ₂/b: connect the dots of
                # the closed-form δ(ε) (what from_laplace_mechanism does, without scipy.stats)
                e0, h = release.epsilon0, self._vdi
                grid = np.arange(math.floor(-e0 / h), math.ceil(e0 / h) + 1)
                with np.errstate(over="ignore"):  # a coarse grid: e^{h} − 1 may overflow to ∞
                    pmf = pld_pmf.create_pmf_pessimistic_connect_dots(
                        h, grid, laplace_hockey_stick(grid * h, e0)
                    )
                self._singles[key] = pld_lib.PrivacyLossDistribution(pmf)
        return self._singles[key]

    def _compose(self, release: Release, n: int) -> None:
        self._rdp.compose(release, n // release.count)  # n counts release.count already
        if release.epsilon0 is None and not isinstance(release, GaussianRelease):
            self._renyi_only = True  # a discrete sum, or a kind without a PLD here
            dominance = None
            if isinstance(release, DiscreteSumRelease):
                dominance = release.gaussian_dominance()
            if dominance is None or self._dominated is None:
                self._dominated = None
            else:
                self._dominated = [self._dominated[0] + n * dominance[0],
                                   self._dominated[1] + n * dominance[1]]  # fmt: skip
            return
        if isinstance(release, GaussianRelease):
            self._gaussian = True
            if release.sensitivity_l2 > 0:
                self._mu2 += n / release.noise_multiplier**2
            return
        self._pure_total += n * release.epsilon0  # type: ignore[operator]  # pure here
        if release.epsilon0 == 0 or self.dropped:
            return
        if self._pure_total > self._max_total:
            self.dropped = True
            self._counts, self._blocks, self._powers, self._pure = {}, {}, {}, None
            return
        key = (type(release), release.epsilon0)
        self._single(release)  # built once per distinct release
        self._counts[key] = self._counts.get(key, 0) + n
        self._pure = None

    def _block(self, leaves: list[tuple[Any, int]], lo: int, size: int, seen: dict) -> Any:
        """PLD of the aligned block ``leaves[lo:lo+size]`` (size a power of two), memoized."""
        spec = tuple(leaves[lo : lo + size])
        pld = seen.get(spec, self._blocks.get(spec))
        if pld is None:
            if size == 1:
                key, m = spec[0]
                pld = _power(self._powers.setdefault(key, [self._singles[key]]), m)
            else:
                half = size // 2
                left = self._block(leaves, lo, half, seen)
                pld = left.compose(self._block(leaves, lo + half, half, seen))
        seen[spec] = pld
        return pld

    def _pure_pld(self) -> Any:
        """The PLD of every pure-DP release so far: Π_k P_k^{n_k} = (Π_k P_k^{n_k/g})^g.

        A deterministic function of the multiset {release: copies}, whatever the order or
        grouping in which they were composed (composition is commutative): the distinct
        releases, sorted by ε₀, are composed in aligned power-of-two blocks (a balanced
        tree: log₂ K rounds of FFT convolutions of balanced sizes instead of K growing
        ones), the blocks folded largest first, and g = gcd of the copies (e.g. the
        observed links of per-link noise) composed once at the end. Powers P^m are
        products of the squares P^(2^b) over the binary digits of m (:func:`_power`), the
        squares kept per release. Blocks and squares are kept between queries, so reading
        ε at every checkpoint of a growing run rebuilds only what changed, and ε after T
        releases is the same number however often it was read before. Against composing
        one release at a time, the distribution is the same up to floating-point rounding
        and ``dp_accounting``'s 1e-15 tail truncation per composition (moved
        pessimistically to the infinity mass).
        """
        if self._pure is None and self._counts:
            items = sorted(self._counts.items(), key=lambda kv: (kv[0][1], kv[0][0].__name__))
            g = math.gcd(*(n for _, n in items))
            leaves = [(key, n // g) for key, n in items]
            seen: dict[tuple, Any] = {}
            pld, lo = None, 0
            for m in reversed(range(len(leaves).bit_length())):
                if len(leaves) >> m & 1:
                    block = self._block(leaves, lo, 1 << m, seen)
                    pld, lo = (block if pld is None else pld.compose(block)), lo + (1 << m)
            self._blocks = seen  # what this query used; stale blocks are dropped
            self._pure = _power([pld], g)
        return self._pure

    def _epsilon(self, delta: float) -> float:
        if self._renyi_only:  # distributed discrete noise: Rényi, or Gaussian dominance
            # (the exact composed Gaussian's ε, plus 2K: the source "pld", as for Gaussians)
            bounds = {"pld": self._dominated_epsilon(delta), "rdp": self._rdp.get_epsilon(delta)}
            self.source = min(("pld", "rdp"), key=bounds.__getitem__)
            return bounds[self.source]
        pure = None if self.dropped else self._pure_pld()
        bounds = {"rdp": self._rdp.get_epsilon(delta)}
        if not self._gaussian:
            bounds["basic"] = self._pure_total
        if not self.dropped:
            with np.errstate(over="ignore", divide="ignore"):
                if pure is None:
                    bounds["pld"] = (
                        0.0
                        if self._mu2 == 0
                        else float(gaussian_epsilon_analytic(1.0 / math.sqrt(self._mu2), delta))
                    )
                elif self._mu2 == 0:
                    bounds["pld"] = float(pure.get_epsilon_for_delta(delta))
                else:
                    gauss = pld_lib.from_gaussian_mechanism(
                        1.0 / math.sqrt(self._mu2),
                        value_discretization_interval=self._vdi,
                        neighboring_relation=SHIFT_PAIR,
                    )
                    bounds["pld"] = float(pure.compose(gauss).get_epsilon_for_delta(delta))
        # the bound that gives the value, the PLD's own first on a tie
        self.source = min(("pld", "rdp", "basic"), key=lambda k: bounds.get(k, math.inf))
        return bounds[self.source]

    def _dominated_epsilon(self, delta: float) -> float:
        """``ε_GDP(μ, δe^{−K}) + 2K``, the Gaussian-dominance bound, or ∞.

        Defined when every release is a discrete Gaussian sum or a Gaussian
        (:mod:`pgfl.privacy.distributed.accounting`).
        """
        if self._dominated is None or self._pure_total > 0:
            return math.inf
        mu2 = self._dominated[0] + self._mu2
        k = self._dominated[1]
        if mu2 == 0:
            return 2.0 * k
        eps = gaussian_epsilon_analytic(1.0 / math.sqrt(mu2), delta * math.exp(-k))
        return float(eps) + 2.0 * k


def _has_curve(release: Release) -> bool:
    """Whether ``release`` has a Rényi curve of its own (its class defines ``rdp``)."""
    return type(release).rdp is not Release.rdp


def _one_copy(release: Release) -> Release:
    """``release`` with ``count`` 1 where it is a dataclass field (a key for its copies)."""
    if dataclasses.is_dataclass(release) and "count" in {
        f.name for f in dataclasses.fields(release)
    }:
        return dataclasses.replace(release, count=1)
    return release


#: A ``dp_accounting`` Rényi accountant asked only whether it supports an event.
_LIBRARY = dp_rdp.RdpAccountant(neighboring_relation=RANDOMIZED_RESPONSE_RELATION)


def _power(squares: list[Any], m: int) -> Any:
    """P^m of the PLD ``squares[0]`` as Π over the binary digits b of m of P^(2^b).

    ``squares`` holds [P, P², P⁴, ...] and is extended in place (each square one FFT
    convolution), so the powers of one release for a growing m — its copies at every
    checkpoint of a run — reuse the squares, and P^m is the same number however m was
    reached. ``dp_accounting``'s ``self_compose`` would bound the tails by a Chernoff
    sum at 40 orders on every call, which costs more than the convolutions here.
    """
    while (1 << len(squares)) <= m:
        squares.append(squares[-1].compose(squares[-1]))
    out = None
    for b, square in enumerate(squares):
        if m >> b & 1:
            out = square if out is None else out.compose(square)
    return out


#: Accountant classes by name (the keys of ``summary.json``'s ``"epsilon"``).
_CLASSES: dict[str, type[Accountant]] = {
    "paper": PaperAccountant,
    "basic": BasicAccountant,
    "advanced": AdvancedAccountant,
    "kairouz": KairouzAccountant,
    "pld": PldAccountant,
    "rdp": RdpAccountant,
}
#: Names understood by :func:`make_accountant` and the curves (:mod:`.curves`).
ACCOUNTANTS = tuple(_CLASSES)


def supporting(release: Release) -> tuple[str, ...]:
    """The accountants that compose ``release``, in :data:`ACCOUNTANTS` order.

    >>> supporting(DiscreteSumRelease("skellam", 1.0, 4.0, (3,)))
    ('paper', 'pld', 'rdp')
    """
    return tuple(name for name, cls in _CLASSES.items() if cls.supports(release))


def refusal(accountant: str, release: Release) -> str:
    """The one line an accountant refuses an unsupported release with.

    >>> refusal("basic", DiscreteSumRelease("skellam", 1.0, 4.0, (3,)))
    "accountant 'basic' cannot compose a skellam sum release; use 'paper', 'pld' or 'rdp'"
    """
    others = [f"'{a}'" for a in supporting(release)]
    what = ("an " if release.kind[:1].lower() in "aeiou" else "a ") + f"{release.kind} release"
    if not others:
        return (
            f"accountant {accountant!r} cannot compose {what}, nor can any other: give the "
            "release a pure epsilon0, a dp_event() or an rdp(orders)"
        )
    use = others[0] if len(others) == 1 else ", ".join(others[:-1]) + " or " + others[-1]
    return f"accountant {accountant!r} cannot compose {what}; use {use}"


def make_accountant(name: str, **options: Any) -> Accountant:
    """A fresh accountant by name; ``options`` go to its constructor (e.g. the PLD grid).

    >>> type(make_accountant("kairouz")).__name__
    'KairouzAccountant'
    """
    cls = _CLASSES[check_choice("accountant", name, ACCOUNTANTS)]
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"accountant {name!r} does not take options {sorted(options)}") from exc
