"""Releases: small frozen descriptions of what one noisy publication reveals.

A release says which mechanism was applied, with which sensitivity and noise, and how
many identical copies were published (``count``), as a ``dp_accounting.DpEvent`` does.
Accountants (:mod:`.accountants`) compose them.

**Neighbouring relation: replace-one, everywhere.** Two runs are neighbours if one unit
of privacy is *replaced* (GFL: one client's whole data set, the papers' Definition 1;
graph learning: one signal of one client). Every sensitivity in this package is the
largest change of the released quantity over such pairs, ``Δ = max ‖f(D) − f(D′)‖``.
An additive-noise release of sensitivity Δ is then dominated by the *shift pair*
(noise, noise + Δ e). In ``dp_accounting``'s vocabulary that pair is a Laplace or
Gaussian event of noise multiplier scale/Δ analysed under ``ADD_OR_REMOVE_ONE`` (its
``REPLACE_SPECIAL`` gives the same pair); its ``REPLACE_ONE`` would mean "every record
has norm ≤ Δ", a shift by 2Δ, and would double-count a sensitivity that already is a
replacement sensitivity. A generic ε-DP release is accounted as its worst case, binary
randomized response, whose ``REPLACE_ONE`` pair (input x vs x′) is exactly ε-DP.
:data:`SHIFT_PAIR` and :data:`RANDOMIZED_RESPONSE_RELATION` are the only two relations
pgfl ever passes to ``dp_accounting``.

**An open set of release kinds.** Every release subclasses :class:`Release`, which says
what any release says: its :attr:`~Release.kind` (words, for messages), its ``count``, a
one-line :meth:`~Release.describe` and its :meth:`~Release.note` on an accountant's line
(``summary.json``'s ``epsilon_notes`` come from there), and the *routes* by which an
accountant can compose it, each optional: a pure ε (:attr:`~Release.epsilon0`), a
``dp_accounting`` event (:meth:`~Release.dp_event`), a Rényi curve (:meth:`~Release.rdp`).
Each accountant declares which releases it supports
(:meth:`pgfl.privacy.accounting.accountants.Accountant.supports`) and refuses the others in
one line; a release kind defined anywhere (a test file, a contributor's module) works with
every accountant one of its routes reaches, with no edit here. A mechanism names the kind
of its releases in its :class:`Transcript` (``release``), whose :meth:`~Release.of` builds
one release per iteration.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import ClassVar

import dp_accounting
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant

from pgfl.privacy.distributed.accounting import (
    DISCRETE_NOISE,
    gaussian_dominance,
    subsampled_rdp,
    sum_rdp,
)
from pgfl.validation import ConfigError, check_int, check_real

__all__ = [
    "NOISE_RELEASES",
    "RANDOMIZED_RESPONSE_RELATION",
    "SHIFT_PAIR",
    "amplified_epsilon",
    "DiscreteSumRelease",
    "GaussianRelease",
    "LaplaceRelease",
    "MixtureSampledGaussianRelease",
    "PureDpRelease",
    "Release",
    "SampledGaussianRelease",
    "Transcript",
    "VectorLaplaceRelease",
    "check_release",
    "dp_event",
    "randomized_response_noise",
    "to_dp_event",
]

#: ``dp_accounting`` relation whose Laplace/Gaussian pair is the shift by one sensitivity.
SHIFT_PAIR = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
#: ``dp_accounting`` relation of randomized response with input x replaced by x′.
RANDOMIZED_RESPONSE_RELATION = dp_accounting.NeighboringRelation.REPLACE_ONE


class Release:
    """What every release says: kind, copies, a description, and how it may be composed.

    A release is a small frozen value (a frozen dataclass, so that equal releases compare
    and hash equal: accountants count copies of each distinct one). Subclasses set
    :attr:`kind` and ``count`` and give at least one route an accountant can take, as
    ``dp_accounting``'s events do:

    * :attr:`epsilon0` — the pure ε of one copy (any ε-DP release: every accountant
      composes it; the Rényi and PLD accountants as binary randomized response, its worst
      case);
    * :meth:`dp_event` — one copy as a ``dp_accounting`` event (the Rényi accountant
      composes it where ``dp_accounting``'s does, under :data:`RANDOMIZED_RESPONSE_RELATION`;
      the PLD accountant reports its Rényi bound);
    * :meth:`rdp` — its own Rényi curve per order (the Rényi accountant adds it up; the
      PLD accountant reports the Rényi bound).

    The built-in kinds below also have routes of their own (Laplace and Gaussian noise).

    Attributes:
        kind: words for the kind, in a message ("a {kind} release"), e.g. ``"gaussian"``.
        count: identical releases (≥ 1).
        accountants: the accountants reported by default for this kind (``None``: every
            one that supports it).

    """

    kind: ClassVar[str] = "custom"
    accountants: ClassVar[tuple[str, ...] | None] = None
    count: int

    @property
    def epsilon0(self) -> float | None:
        """Pure ε of one copy (``None``: not a pure-DP release)."""
        return None

    def dp_event(self) -> dp_accounting.DpEvent | None:
        """One copy as a ``dp_accounting`` event (``None``: none)."""
        return None

    def rdp(self, orders: np.ndarray) -> np.ndarray | None:
        """Rényi DP of one copy at each order > 1 (``None``: no curve of its own)."""
        return None

    def describe(self) -> str:
        """One line: what is released (for ``summary.json``'s ``epsilon_release``)."""
        return f"{self.kind} release"

    def note(self, accountant: str, line: str) -> str:
        """What ``accountant``'s ε is for this kind, given the accountant's own ``line``."""
        return line

    @classmethod
    def of(cls, t: Transcript, sensitivities: Sequence[float], paper: bool) -> list[Release]:
        """One release per iteration of ``t`` (Δ₂(j) = ``sensitivities[j]``).

        ``paper``: the papers' reading (the ``paper`` accountant). A kind a mechanism
        names in its :class:`Transcript` defines this.
        """
        raise NotImplementedError(f"{cls.__name__} does not say how a transcript builds it")


@dataclasses.dataclass(frozen=True)
class LaplaceRelease(Release):
    """``count`` releases of a query with ℓ₁ sensitivity Δ₁ plus i.i.d. Laplace(0, b) noise.

    Each release is exactly (Δ₁/b)-DP (book Lemma 11.1).

    Attributes:
        sensitivity_l1: Δ₁ ≥ 0 for replacing one unit of privacy.
        scale: b > 0 (per-coordinate standard deviation √2·b).
        count: number of identical releases ≥ 1.

    """

    kind: ClassVar[str] = "laplace"
    sensitivity_l1: float
    scale: float
    count: int = 1

    def __post_init__(self) -> None:
        check_real("sensitivity_l1", self.sensitivity_l1, lo=0.0)
        check_real("scale", self.scale, lo=0.0, lo_open=True)
        check_int("count", self.count, lo=1)

    @property
    def epsilon0(self) -> float:
        """Pure ε of one release, Δ₁ / b."""
        return float(self.sensitivity_l1) / float(self.scale)

    def dp_event(self) -> dp_accounting.DpEvent:
        """``LaplaceDpEvent(b/Δ₁)`` (:data:`SHIFT_PAIR`), or a no-op for Δ₁ = 0."""
        if self.epsilon0 == 0:
            return dp_accounting.NoOpDpEvent()
        return dp_accounting.LaplaceDpEvent(1.0 / self.epsilon0)

    def describe(self) -> str:
        """One line: one-dimensional Laplace noise."""
        return _copies("Laplace noise on a query of bounded l1 sensitivity", self.count)


@dataclasses.dataclass(frozen=True)
class VectorLaplaceRelease(Release):
    """``count`` releases of an M-vector with ℓ₂ sensitivity Δ₂ plus i.i.d. Laplace(0, b) noise.

    The shift v between neighbours can be any vector with ‖v‖₂ ≤ Δ₂ (clipped gradients
    bound the ℓ₂ norm, not the direction). One release is exactly (√M Δ₂/b)-DP: the
    privacy loss is at most ‖v‖₁/b and ‖v‖₁ ≤ √M ‖v‖₂, attained on the diagonal. Under
    composition the direction matters, and the accountants use what is proven:

    * pure-DP theorems and the PLD charge every release its ε₀ = √M Δ₂/b (the ℓ₁
      charge: a 1-D Laplace of scale b and sensitivity √M Δ₂, exact for one release);
    * Rényi DP charges the **diagonal** v = (Δ₂/√M)(±1, …, ±1), which is the worst
      shift on the ℓ₂ ball at every order α ≥ 1. Proof: per coordinate the Rényi
      divergence of Laplace with shift s (units of b) is
      f_α(s) = h(s)/(α − 1), h(s) = ln(A e^{(α−1)s} + B e^{−αs}), A = α/(2α−1),
      B = (α−1)/(2α−1) (Mironov 2017, Prop. 6). Then h′(s) = (2α−1)(σ(cs + d) − σ(d))
      with σ the logistic function, c = 2α − 1 and d = ln(A/B) > 0, so f′(s)/s is a
      secant slope of σ from d, which decreases because σ is concave on [0, ∞). Hence
      g(u) = f_α(√u) is increasing and concave, and Σ_j f_α(|v_j|) = Σ_j g(v_j²) ≤
      M g(Δ₂²/M) for every ‖v‖₂ ≤ Δ₂ (Jensen). Rényi divergences of an adaptive
      composition add up with each round's worst case (Mironov 2017, Prop. 1), so M
      Laplace releases of shift Δ₂/√M per round bound every adaptive sequence of
      directions. For privacy-loss distributions no single direction is worst (for one
      release the axis has the larger δ(ε) at small ε and the diagonal at large ε;
      tests check both), so the PLD accountant reports the smaller of its ℓ₁-charged
      PLD and this Rényi bound — both valid.

    Attributes:
        sensitivity_l2: Δ₂ ≥ 0 for replacing one unit of privacy.
        scale: b > 0, per coordinate.
        dim: M ≥ 1 (M = 1 is :class:`LaplaceRelease` with Δ₁ = Δ₂).
        count: number of identical releases ≥ 1.

    >>> VectorLaplaceRelease(1.0, 10.0, dim=4).epsilon0
    0.2

    """

    kind: ClassVar[str] = "vector laplace"
    sensitivity_l2: float
    scale: float
    dim: int
    count: int = 1

    def __post_init__(self) -> None:
        check_real("sensitivity_l2", self.sensitivity_l2, lo=0.0)
        check_real("scale", self.scale, lo=0.0, lo_open=True)
        check_int("dim", self.dim, lo=1)
        check_int("count", self.count, lo=1)

    @property
    def epsilon0(self) -> float:
        """Pure ε of one release, √M Δ₂ / b (the ℓ₁ charge)."""
        return math.sqrt(self.dim) * float(self.sensitivity_l2) / float(self.scale)

    @property
    def diagonal_multiplier(self) -> float:
        """Noise multiplier b / (Δ₂/√M) of each coordinate of the worst (diagonal) shift."""
        return float(self.scale) * math.sqrt(self.dim) / float(self.sensitivity_l2)

    def dp_event(self) -> dp_accounting.DpEvent:
        """``LaplaceDpEvent`` of the ℓ₁ charge Δ₁ = √M Δ₂ (valid for every library accountant)."""
        if self.epsilon0 == 0:
            return dp_accounting.NoOpDpEvent()
        return dp_accounting.LaplaceDpEvent(1.0 / self.epsilon0)

    def describe(self) -> str:
        """One line: M-dimensional Laplace noise."""
        what = f"{self.dim}-dimensional Laplace noise on a vector of bounded l2 sensitivity"
        return _copies(what, self.count)

    def note(self, accountant: str, line: str) -> str:
        """The PLD's line says which two bounds it takes the smaller of (M > 1)."""
        if accountant == "pld" and self.dim > 1:
            return line + (
                "; M-dimensional Laplace noise: the smaller of the PLD charged the l1 "
                "sensitivity sqrt(M)*l2 and the Renyi bound of the worst (diagonal) direction"
            )
        return line

    @classmethod
    def of(cls, t: Transcript, sensitivities: Sequence[float], paper: bool) -> list[Release]:
        """Laplace noise of std σ (b = σ/√2): the M-dimensional release of Δ₂(j) (rigorous).

        The papers' reading (``paper``, or a transcript that is not ``rigorous``): the 1-D
        :class:`LaplaceRelease` charged Δ₂(j). On a client sample the observer lacks
        (``sampling``): a :class:`PureDpRelease` of :func:`amplified_epsilon` of the
        round's ε₀ (its copies share the sample); with the observer's status known
        (``mixture``), the worst status's.
        """
        sens = [float(s) for s in sensitivities]
        b = t.std / math.sqrt(2.0)
        if paper or not t.rigorous:
            return [LaplaceRelease(s, b, t.copies) for s in sens]
        if t.mixture is not None:  # pure DP: the joint's ε is the worst status's
            parts = [(n, m, sd) for _, n, m, sd in t.mixture]
            if t.sampling is not None:
                parts.append((*t.sampling, t.std))
            return [
                PureDpRelease(max(
                    amplified_epsilon(
                        cls(s, sd / math.sqrt(2.0), t.dim).epsilon0 * t.copies, m / n)
                    for n, m, sd in parts))
                for s in sens
            ]  # fmt: skip
        if t.sampling is not None:
            n, m = t.sampling
            return [
                PureDpRelease(amplified_epsilon(e0 * t.copies, m / n))
                for e0 in (cls(s, b, t.dim).epsilon0 for s in sens)
            ]
        return [cls(s, b, t.dim, t.copies) for s in sens]


@dataclasses.dataclass(frozen=True)
class GaussianRelease(Release):
    """``count`` releases of a query with ℓ₂ sensitivity Δ₂ plus N(0, σ² I) noise.

    Attributes:
        sensitivity_l2: Δ₂ ≥ 0 for replacing one unit of privacy.
        sigma: σ > 0, the per-coordinate standard deviation.
        count: number of identical releases ≥ 1.

    """

    kind: ClassVar[str] = "gaussian"
    accountants: ClassVar[tuple[str, ...] | None] = ("paper", "pld", "rdp")
    sensitivity_l2: float
    sigma: float
    count: int = 1

    def __post_init__(self) -> None:
        check_real("sensitivity_l2", self.sensitivity_l2, lo=0.0)
        check_real("sigma", self.sigma, lo=0.0, lo_open=True)
        check_int("count", self.count, lo=1)

    @property
    def noise_multiplier(self) -> float:
        """σ / Δ₂ (``inf`` for a zero sensitivity)."""
        return math.inf if self.sensitivity_l2 == 0 else self.sigma / self.sensitivity_l2

    def dp_event(self) -> dp_accounting.DpEvent:
        """``GaussianDpEvent(σ/Δ₂)`` (:data:`SHIFT_PAIR`), or a no-op for Δ₂ = 0."""
        if self.sensitivity_l2 == 0:
            return dp_accounting.NoOpDpEvent()
        return dp_accounting.GaussianDpEvent(self.noise_multiplier)

    def describe(self) -> str:
        """One line: Gaussian noise."""
        return _copies("Gaussian noise on a vector of bounded l2 sensitivity", self.count)

    def note(self, accountant: str, line: str) -> str:
        """The papers' classic bound, and the PLD's exact composed Gaussian, in words."""
        if accountant == "paper":
            return (
                "classic Gaussian bound per iteration (valid only below 1) composed by eq. 32 "
                "(graph-topology paper Thm 3), delta split evenly"
            )
        if accountant == "pld":
            return "exact: composed Gaussians are one Gaussian (GDP); analytic Gaussian epsilon"
        return line

    @classmethod
    def of(cls, t: Transcript, sensitivities: Sequence[float], paper: bool) -> list[Release]:
        """Gaussian noise of std σ: a :class:`GaussianRelease` of Δ₂(j) and ``copies`` copies.

        On a client sample the observer lacks (``sampling``, not in the papers' reading):
        a :class:`SampledGaussianRelease` with the copies folded into one release of std
        σ/√copies (they share the sample); with its status known (``mixture``), a
        :class:`MixtureSampledGaussianRelease`.
        """
        sens = [float(s) for s in sensitivities]
        if t.mixture is not None and not paper:
            root = math.sqrt(t.copies)
            parts = tuple((w, n, m, sd / root) for w, n, m, sd in t.mixture)
            low = min(p[3] for p in parts)
            return [MixtureSampledGaussianRelease(s, low, 1, components=parts,
                                                  outside=t.sampling)
                    for s in sens]  # fmt: skip
        if t.sampling is not None and not paper:
            n, m = t.sampling
            std = t.std / math.sqrt(t.copies)
            return [SampledGaussianRelease(s, std, 1, n, m) for s in sens]
        return [GaussianRelease(s, t.std, t.copies) for s in sens]


@dataclasses.dataclass(frozen=True)
class SampledGaussianRelease(GaussianRelease):
    """A Gaussian release computed on a uniformly random ``sample`` of ``population``.

    Each of the ``count`` releases draws a fresh subset of fixed size m = ``sample`` of the
    n = ``population`` members (without replacement, as a unit samples L of its K
    clients); the changed member is in the subset with probability q = m/n, and only
    then does the release move (by at most Δ₂). Accounted as ``dp_accounting``'s
    ``SampledWithoutReplacementDpEvent`` under ``REPLACE_ONE`` — the amplification by
    subsampling bound of Wang, Balle & Kasiviswanathan, "Subsampled Rényi Differential
    Privacy and Analytical Moments Accountant", AISTATS 2019 (arXiv:1808.00087),
    Theorem 27 — by the Rényi accountant; every other accountant charges it as the
    unsampled :class:`GaussianRelease` (sound, no amplification credit).

    Attributes:
        population: n ≥ 1, the members a subset is drawn from.
        sample: m, 1 ≤ m ≤ n.

    >>> r = SampledGaussianRelease(1.0, 4.0, population=100, sample=10)
    >>> r.sampling_probability
    0.1

    """

    kind: ClassVar[str] = "sampled gaussian"
    population: int = 1
    sample: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("population", self.population, lo=1)
        check_int("sample", self.sample, lo=1, hi=self.population)

    def dp_event(self) -> dp_accounting.DpEvent:
        """``SampledWithoutReplacementDpEvent(n, m, GaussianDpEvent(σ/Δ₂))`` (m < n)."""
        event = super().dp_event()
        if self.sensitivity_l2 == 0 or self.sample == self.population:
            return event
        return dp_accounting.SampledWithoutReplacementDpEvent(self.population, self.sample, event)

    def describe(self) -> str:
        """One line: Gaussian noise on an m-of-n sample the observer does not see."""
        what = (f"Gaussian noise on a vector of bounded l2 sensitivity, computed on a random "
                f"{self.sample}-of-{self.population} sample")  # fmt: skip
        return _copies(what, self.count)

    @property
    def sampling_probability(self) -> float:
        """Q = m/n, the probability that the changed member is in a subset."""
        return self.sample / self.population


@dataclasses.dataclass(frozen=True)
class MixtureSampledGaussianRelease(GaussianRelease):
    """A Gaussian release on a random sample, seen by an observer who knows its own status.

    An observer inside the sampled population (a client of the unit) knows whether it was
    sampled itself: with probability ``weight_s`` its status is s, and then the release
    is computed on a uniformly random ``sample_s``-of-``population_s`` subset of the others
    (the changed member is among them) with noise std ``sigma_s`` (the observer may know
    its own share of the noise). Its status is independent of the data, so the Rényi
    divergence of the joint (status, release) pair is that of a mixture over statuses:

        exp((α − 1) D_α) = Σ_s weight_s · exp((α − 1) D_α,s),

    D_α,s the Rényi bound of sampling without replacement
    (:class:`SampledGaussianRelease`; 0 for an empty sample, the Gaussian's α/(2z²) for a
    full one). A sup over neighbouring pairs of the sum is at most the sum of the sups,
    so the per-status bounds compose into a valid one. With ``outside = (n, m)`` the
    observer may also sit outside the population (a client of another unit, whose status
    says nothing): it then sees an m-of-n subsample at std ``sigma``, and the bound is the
    larger of the two at every order (the library's bounds are not ordered by the
    sampling rate: the mixture can fall below the plain m-of-n one at small orders). Only
    the Rényi accountant credits it; every other accountant charges the unsampled
    Gaussian of the smallest std (``sigma``), which is sound.

    Attributes:
        components: ``(weight, population, sample, sigma)`` per status; weights sum to 1.
        outside: ``(population, sample)`` seen from outside, or ``None``.

    >>> r = MixtureSampledGaussianRelease(1.0, 2.0, components=((0.9, 9, 1, 2.0),
    ...                                                         (0.1, 9, 0, 2.0)))
    >>> r.sampling_probability   # the changed member's overall chance of being in a sample
    0.1

    """

    kind: ClassVar[str] = "status-mixture gaussian"
    components: tuple[tuple[float, int, int, float], ...] = ()
    outside: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.outside is not None:
            check_int("population", self.outside[0], lo=1)
            check_int("sample", self.outside[1], lo=1, hi=self.outside[0])
        if not self.components:
            raise ConfigError("components must list at least one (weight, n, m, sigma)")
        for w, n, m, sigma in self.components:
            check_real("weight", w, lo=0.0, hi=1.0)
            check_int("population", n, lo=1)
            check_int("sample", m, lo=0, hi=n)
            check_real("sigma", sigma, lo=self.sigma)  # sigma is the smallest
        total = sum(c[0] for c in self.components)
        if not math.isclose(total, 1.0, rel_tol=0.0, abs_tol=1e-12):
            raise ConfigError(f"component weights must sum to 1; got {total!r}")

    @property
    def sampling_probability(self) -> float:
        """Σ_s weight_s · m_s/n_s: the changed member's chance of being in a sample."""
        return sum(w * m / n for w, n, m, _ in self.components)

    def dp_event(self) -> dp_accounting.DpEvent:
        """The unsampled Gaussian of the smallest std (sound; only Rényi credits the mixture)."""
        return GaussianRelease.dp_event(self)

    def describe(self) -> str:
        """One line: a sampled Gaussian seen by an observer who knows its own status."""
        what = ("Gaussian noise on a vector of bounded l2 sensitivity, computed on a random "
                "client sample, seen by an observer who knows whether it was sampled")  # fmt: skip
        return _copies(what, self.count)


@dataclasses.dataclass(frozen=True)
class PureDpRelease(Release):
    """``count`` releases of any ε-DP mechanism (e.g. randomized response: ε = ln 3).

    Attributes:
        epsilon: ε ≥ 0 of one release.
        count: number of identical releases ≥ 1.

    """

    kind: ClassVar[str] = "pure-dp"
    epsilon: float
    count: int = 1

    def __post_init__(self) -> None:
        check_real("epsilon", self.epsilon, lo=0.0)
        check_int("count", self.count, lo=1)

    @property
    def epsilon0(self) -> float:
        """Pure ε of one release."""
        return float(self.epsilon)

    def dp_event(self) -> dp_accounting.DpEvent:
        """Binary ``RandomizedResponseDpEvent``, its worst case (under ``REPLACE_ONE``)."""
        if self.epsilon0 == 0:
            return dp_accounting.NoOpDpEvent()
        return dp_accounting.RandomizedResponseDpEvent(
            noise_parameter=randomized_response_noise(self.epsilon), num_buckets=2
        )

    def describe(self) -> str:
        """One line: an ε-DP release."""
        return _copies("a pure epsilon-DP release", self.count)


@dataclasses.dataclass(frozen=True)
class DiscreteSumRelease(Release):
    """``count`` releases of a sum of n clients' integer vectors plus n integer noise shares.

    Distributed DP under secure aggregation (:mod:`pgfl.privacy.distributed`): the server
    sees ``Σ_i (x̃_i + Z_i)`` over the survivors; one client's data moves ``Σ x̃_i`` by an
    integer vector of ℓ2 norm ≤ ``l2`` (grid units). Described by its Rényi curve
    (:meth:`rdp`, :func:`pgfl.privacy.distributed.accounting.sum_rdp`); only the Rényi
    accountants compose it (``rdp``, and ``pld`` through its Rényi bound).

    Attributes:
        noise: ``"discrete_gaussian"`` (shares ``N_Z(0, σ²)``) or ``"skellam"``
            (``Sk(λ, λ)``, σ² = 2λ).
        l2: Δ₂ of the integer sum, grid units.
        share_variance: σ² of one share, grid units².
        shares: the survivor counts a round may hold (t..L); charged the worst.
        dim: d, the coordinates of the integer vectors.
        grid: γ, real units per grid step (:attr:`sensitivity_l2` is ``l2·γ``).
        published: the papers' reading (KLS Proposition 14) for the discrete Gaussian.
        sampling: ``(K, m)``: computed on a fresh m-of-K client sample the observer does
            not know (Wang, Balle & Kasiviswanathan, Theorem 9), else ``None``.
        count: identical releases.

    >>> r = DiscreteSumRelease("skellam", 2.0, 50.0, (4,), dim=1)
    >>> round(float(r.rdp(np.array([2.0]))[0]), 6)          # 2·4/400 + (3·4 + 12)/160000
    0.02015

    """

    accountants: ClassVar[tuple[str, ...] | None] = ("paper", "pld", "rdp")
    noise: str
    l2: float
    share_variance: float
    shares: tuple[int, ...]
    dim: int = 1
    grid: float = 1.0
    published: bool = False
    sampling: tuple[int, int] | None = None
    count: int = 1

    def __post_init__(self) -> None:
        if self.noise not in DISCRETE_NOISE:
            raise ConfigError(
                f"noise must be one of {', '.join(DISCRETE_NOISE)}; got {self.noise!r}"
            )
        check_real("l2", self.l2, lo=0.0)
        check_real("share_variance", self.share_variance, lo=0.0, lo_open=True)
        for n in self.shares:
            check_int("shares", n, lo=1)
        check_int("dim", self.dim, lo=1)
        check_int("count", self.count, lo=1)

    @property
    def kind(self) -> str:  # type: ignore[override]
        """``"skellam sum"`` or ``"discrete gaussian sum"``."""
        return self.noise.replace("_", " ") + " sum"

    @property
    def sensitivity_l2(self) -> float:
        """Δ₂ in real units, ``l2·γ`` (a Gaussian-equivalent start for calibration)."""
        return self.l2 * self.grid

    def describe(self) -> str:
        """One line: a secure sum of integer vectors plus integer noise shares."""
        what = (f"a secure sum of {self.dim}-dimensional integer vectors plus "
                f"{self.noise.replace('_', ' ')} noise shares")  # fmt: skip
        if self.sampling is not None:
            what += f", computed on a random {self.sampling[1]}-of-{self.sampling[0]} sample"
        return _copies(what, self.count)

    def note(self, accountant: str, line: str) -> str:
        """Its Rényi bound, derived (``rdp``, ``pld``) or as published (``paper``)."""
        if accountant == "paper":
            return (
                "the papers' Renyi bound (KLS Proposition 14 with tau for the discrete "
                "Gaussian; Agarwal et al. for Skellam)"
            )
        derived = (
            "Renyi DP of the noisy integer sum (pgfl.privacy.distributed.accounting: the "
            "derived bound for a sum of discrete Gaussians, Agarwal et al.'s for Skellam), "
            "composed over iterations, converted by dp_accounting"
        )
        return derived + ("; no PLD is built for discrete sums" if accountant == "pld" else "")

    @classmethod
    def of(cls, t: Transcript, sensitivities: Sequence[float], paper: bool) -> list[Release]:
        """Distributed discrete noise: one sum per iteration (``paper``: KLS Proposition 14).

        Sensitivities and std are in grid units of ``t.grid``; ``t.shares`` the survivor
        counts a round's sum may hold.
        """
        if t.mixture is not None:  # no status-mixture bound for discrete sums
            raise ConfigError("a discrete sum has no status-mixture release")
        common = {"dim": t.dim, "grid": t.grid, "published": paper, "sampling": t.sampling,
                  "count": t.copies}  # fmt: skip
        var = t.std**2
        return [cls(t.distribution, float(s), var, t.shares, **common) for s in sensitivities]

    def gaussian_dominance(self) -> tuple[float, float] | None:
        """``(μ², κ)``: a post-processed Gaussian of ``μ`` up to a factor ``e^{±κ}``, or None.

        Discrete Gaussian shares only, without sampling credit, in the rigorous reading
        (:func:`pgfl.privacy.distributed.accounting.gaussian_dominance`).
        """
        if self.noise != "discrete_gaussian" or self.published:
            return None
        return gaussian_dominance(self.l2, self.share_variance, self.shares, self.dim)

    def rdp(self, orders: np.ndarray) -> np.ndarray:
        """Rényi DP of one release at each order (> 1)."""
        if self.l2 == 0:
            return np.zeros(np.shape(orders))

        def base(o: np.ndarray) -> np.ndarray:
            return sum_rdp(o, self.noise, self.l2, self.share_variance, self.shares, self.dim,
                           published=self.published)  # fmt: skip

        o = np.asarray(orders, dtype=float)
        plain = base(o)
        if self.sampling is None:
            return plain
        population, sample = self.sampling
        dominance = self.gaussian_dominance()
        if dominance is None:  # the general bound (Wang, Balle & Kasiviswanathan, Thm 9)
            return np.minimum(plain, subsampled_rdp(o, base, sample / population))
        # a post-processed Gaussian up to e^{±κ} per world, before and after sampling:
        # dp_accounting's sampled Gaussian plus (2α − 1)κ/(α − 1)
        mu2, kappa = dominance
        library = rdp_privacy_accountant.RdpAccountant(list(o), RANDOMIZED_RESPONSE_RELATION)
        event = dp_accounting.GaussianDpEvent(1.0 / math.sqrt(mu2))
        library.compose(dp_accounting.SampledWithoutReplacementDpEvent(population, sample, event))
        return np.minimum(plain, library.rdp + (2 * o - 1) * kappa / (o - 1))


#: The built-in additive noises by :attr:`Transcript.distribution`: the release kind each
#: one's transcript builds (a mechanism with a kind of its own names it in ``release``).
NOISE_RELEASES: dict[str, type[Release]] = {
    "laplace": VectorLaplaceRelease,
    "gaussian": GaussianRelease,
    **dict.fromkeys(DISCRETE_NOISE, DiscreteSumRelease),
}


def _copies(what: str, count: int) -> str:
    """``what``, with the number of copies where there is more than one."""
    return what if count == 1 else f"{what}, {count} independently noised copies"


def check_release(release: object) -> Release:
    """Return ``release`` if it is a :class:`Release`, else raise ConfigError."""
    if not isinstance(release, Release):
        raise ConfigError(f"release must be a pgfl Release; got {release!r}")
    return release


def amplified_epsilon(epsilon: float, q: float) -> float:
    """ε of an ε-DP mechanism run on a uniformly random fixed-size subsample, q = m/n.

    ``ln(1 + q (e^ε − 1))`` under replace-one (Balle, Barthe & Gaboardi, "Privacy
    Amplification by Subsampling: Tight Analyses via Couplings and Divergences", NeurIPS
    2018, arXiv:1807.01647, Theorem 9); tight: the pair ``(1 − q) Lap(0) + q Lap(Δ)`` vs
    ``Lap(0)`` attains it.

    >>> round(amplified_epsilon(1.0, 0.1), 6), amplified_epsilon(1.0, 1.0)
    (0.158565, 1.0)
    """
    if q >= 1.0:
        return float(epsilon)
    if q <= 0.0:
        return 0.0
    return math.log1p(q * math.expm1(epsilon)) if epsilon < 700 else epsilon + math.log(q)


def randomized_response_noise(epsilon: float) -> float:
    """Binary randomized response's noise parameter p = 2/(1 + e^ε) of an ε-DP step.

    >>> round(randomized_response_noise(math.log(3.0)), 12)   # keep the bit w.p. 3/4
    0.5
    """
    return 2.0 / (1.0 + math.exp(epsilon))


def dp_event(release: Release) -> dp_accounting.DpEvent:
    """One copy of a release as a ``dp_accounting`` event: :meth:`Release.dp_event`.

    Laplace → ``LaplaceDpEvent(b/Δ₁)``; vector Laplace → the same with its ℓ₁ charge
    Δ₁ = √M Δ₂ (valid for every ``dp_accounting`` accountant; pgfl's Rényi accountant is
    tighter, see :class:`VectorLaplaceRelease`); Gaussian → ``GaussianDpEvent(σ/Δ₂)``;
    generic ε-DP → binary ``RandomizedResponseDpEvent`` with noise
    :func:`randomized_response_noise`. Use :data:`SHIFT_PAIR` for the first three and
    :data:`RANDOMIZED_RESPONSE_RELATION` for the last. A sampled Gaussian →
    ``SampledWithoutReplacementDpEvent(n, m, GaussianDpEvent(σ/Δ₂))``, for the Rényi
    accountant under ``REPLACE_ONE`` (where the Gaussian of multiplier σ/Δ₂ is again the
    shift by Δ₂). A zero sensitivity gives a ``NoOpDpEvent``.

    Raises:
        ConfigError: a release without an event (a discrete sum: its Rényi curve).

    >>> dp_event(LaplaceRelease(2.0, 10.0))
    LaplaceDpEvent(noise_multiplier=5.0)

    """
    event = check_release(release).dp_event()
    if event is None:
        raise ConfigError(
            f"a {release.kind} release has no dp_accounting event: it is composed by its "
            "Renyi curve or its pure epsilon"
        )
    return event


def to_dp_event(release: Release) -> dp_accounting.DpEvent:
    """Describe a release with its copies as a ``dp_accounting`` event (:func:`dp_event`).

    >>> to_dp_event(LaplaceRelease(2.0, 10.0, count=3))
    SelfComposedDpEvent(event=LaplaceDpEvent(noise_multiplier=5.0), count=3)
    """
    event = dp_event(release)
    if release.count == 1 or isinstance(event, dp_accounting.NoOpDpEvent):
        return event
    return dp_accounting.SelfComposedDpEvent(event, release.count)


@dataclasses.dataclass(frozen=True)
class Transcript:
    """What one adversary observes of a privatized link over T iterations, as data.

    A mechanism describes its run to the accountant with this value
    (:meth:`pgfl.privacy.mechanisms.base.Mechanism.transcript`), as ``dp_accounting``'s
    events do: per iteration j = 1..T the sensitivity Δ₂(j) of the released vector, the
    noise (distribution, per-coordinate std σ), the dimension and how many independently
    noised copies the adversary sees (``copies``); the same in the papers' reading for the
    ``paper`` accountant. :meth:`releases` turns it into one release per iteration.

    Attributes:
        sensitivities: Δ₂(j), j = 1..T, for replacing one unit of privacy (empty when
            ``reason`` says ε = ∞).
        std: σ, the per-coordinate standard deviation of the noise (Laplace scale σ/√2).
        distribution: a built-in additive noise, a key of :data:`NOISE_RELEASES`
            (``"laplace"``, ``"gaussian"``, ``"discrete_gaussian"``, ``"skellam"``); it
            chooses the release kind unless ``release`` names one.
        dim: the model dimension M (per-coordinate Laplace noise is charged in M dims).
        copies: independently noised copies of the release observed per iteration.
        paper_sensitivities: the papers' Δ₂(j) (``None``: no published bound).
        rigorous: M-dimensional Laplace releases (else the papers' 1-D reading).
        scope: what the ε covers and against whom, in one sentence.
        reason: why ε is infinite (no clipping bound, no noise), else ``None``.
        iterations: T (default: the number of sensitivities).
        settings: what the transcript was built from, for the record (name, value pairs).
        sampling: ``(n, m)``: each release is computed on a fresh uniformly random
            ``m``-of-``n`` subsample the adversary does not see (Gaussian noise:
            :class:`SampledGaussianRelease`, copies folded into one release of std
            σ/√copies, as they share the subsample; Laplace noise: a
            :class:`PureDpRelease` of :func:`amplified_epsilon` of the round's ε₀;
            discrete noise: :class:`DiscreteSumRelease` with its sampling);
            ``None``: no amplification.
        shares: distributed discrete noise (``distribution`` one of ``"discrete_gaussian"``,
            ``"skellam"``): the survivor counts a round's sum may hold, each adding one
            share of std ``std``; sensitivities and std are then in grid units of ``grid``
            real units (:class:`DiscreteSumRelease`).
        grid: γ of distributed discrete noise (1 otherwise).
        mixture: ``((weight, n, m, std), ...)``: each release is computed on an
            ``m``-of-``n`` subsample with noise std ``std`` with probability ``weight``,
            the observer knowing which (a unit's client knows whether it was sampled
            itself; Gaussian noise: :class:`MixtureSampledGaussianRelease`, with
            ``sampling`` what an observer outside the population sees; Laplace noise: the
            worst status's :func:`amplified_epsilon`); ``None``: none.
        release: the :class:`Release` subclass of one iteration, for a mechanism with a
            release kind of its own (its :meth:`Release.of` reads the fields above it
            needs); ``None``: the kind of ``distribution`` (:attr:`kind`).

    >>> t = Transcript((1.0, 2.0), std=2 ** 0.5, scope="one message")
    >>> [r.epsilon0 for r in t.releases()], t.iterations   # Δ/b with b = σ/√2 = 1
    ([1.0, 2.0], 2)

    """

    sensitivities: tuple[float, ...]
    std: float = 0.0
    distribution: str = "laplace"
    dim: int = 1
    copies: int = 1
    paper_sensitivities: tuple[float, ...] | None = None
    rigorous: bool = True
    scope: str = ""
    reason: str | None = None
    iterations: int = 0
    settings: tuple[tuple[str, object], ...] = ()
    sampling: tuple[int, int] | None = None
    shares: tuple[int, ...] = ()
    grid: float = 1.0
    mixture: tuple[tuple[float, int, int, float], ...] | None = None
    release: type[Release] | None = None

    def __post_init__(self) -> None:
        if self.iterations == 0:
            object.__setattr__(self, "iterations", len(self.sensitivities))

    @property
    def kind(self) -> type[Release]:
        """The release kind of one iteration: ``release``, or the noise's built-in one."""
        if self.release is not None:
            return self.release
        if self.distribution not in NOISE_RELEASES:
            raise ConfigError(
                f"a transcript's distribution must be one of {', '.join(NOISE_RELEASES)}, or "
                f"it must name its release kind; got {self.distribution!r}"
            )
        return NOISE_RELEASES[self.distribution]

    @property
    def credited(self) -> bool:
        """Whether amplification by client sampling is credited (``sampling`` or ``mixture``)."""
        return self.sampling is not None or self.mixture is not None

    def uncredited(self) -> Transcript:
        """The same transcript without amplification by client sampling."""
        return dataclasses.replace(self, sampling=None, mixture=None)

    def releases(self, paper: bool = False) -> list[Release]:
        """One release per iteration: the rigorous reading, or the papers' (``paper``).

        Built by the kind's :meth:`Release.of` (:attr:`kind`): for the built-in noises,
        discrete distributed noise gives a :class:`DiscreteSumRelease` (``paper``: KLS's
        Proposition 14 for the discrete Gaussian); Gaussian noise a
        :class:`GaussianRelease` of Δ₂(j); Laplace noise an M-dimensional
        :class:`VectorLaplaceRelease` of Δ₂(j) (rigorous), or the papers' 1-D
        :class:`LaplaceRelease` charged Δ₂(j).
        """
        sens = self.sensitivities
        if paper and self.paper_sensitivities is not None:
            sens = self.paper_sensitivities
        return self.kind.of(self, sens, paper)
