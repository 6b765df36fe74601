"""Differential-privacy accounting: ε for every run, noise calibrated to a target ε.

Mechanisms are *described* (small frozen releases, :mod:`.releases`), accountants
*compose* them (:mod:`.accountants`), as in Google's ``dp_accounting`` — which does the
tight work here (privacy-loss distributions, Rényi DP). This package adds what is
specific to pgfl: the papers' ε(i) bounds as published (:mod:`.papers`), the
sensitivity of the GFL trajectory, the worst direction of M-dimensional Laplace noise,
and a rigorous reading of all of it. The neighbouring relation is replace-one
everywhere (:mod:`.releases`). What each guarantee covers, and against whom, is written
down in ``docs/privacy.md``.

Accountants (``compose(release, count) -> self``, ``get_epsilon(delta) -> float``)
----------------------------------------------------------------------------------
:class:`PaperAccountant` (``paper``), :class:`BasicAccountant` (``basic``),
:class:`AdvancedAccountant` (``advanced``), :class:`KairouzAccountant` (``kairouz``),
:class:`PldAccountant` (``pld``), :class:`RdpAccountant` (``rdp``);
:func:`make_accountant(name, **options) <make_accountant>`; the one facade
:func:`epsilon(releases, delta, accountant) <epsilon>`.

Releases
--------
An open set: every release subclasses :class:`Release` (its ``kind``, ``count``, a
one-line ``describe()``, its ``note`` on an accountant's line, and its routes: a pure
``epsilon0``, a ``dp_event()``, an ``rdp(orders)`` curve). Built in:
:class:`LaplaceRelease` (Δ₁, b), :class:`VectorLaplaceRelease` (Δ₂, b, M),
:class:`GaussianRelease` (Δ₂, σ), :class:`PureDpRelease` (ε), and in :mod:`.releases` the
sampled Gaussians and the distributed discrete sums. Each accountant declares what it
``supports`` and refuses the rest in one line (:func:`refusal`, :func:`check_composable`).

Over iterations, and calibration
--------------------------------
``accountant_curve(accountant, releases, delta, *, checkpoints=None) -> np.ndarray``
    ε(i) of composing one release per iteration onto any accountant (the one loop).
``calibrate_releases(releases_at, target_epsilon, delta, *, accountant="pld", guess=None,
rtol=1e-4) -> float``
    Smallest noise scale meeting a target, by bracketing and root-finding.

On a mechanism's transcript
---------------------------
``epsilon_curve(transcript, *, delta=1e-5, accountants=None, checkpoints=64) -> EpsilonCurve``
    ε(i), i = 1..T, of one privatized curve from what its mechanism says the adversary
    observes (:class:`Transcript`, :meth:`pgfl.privacy.mechanisms.base.Mechanism.transcript`).
    The result is a read-only mapping accountant → ``np.ndarray`` of shape (T,), with
    ``.delta``, ``.reason`` (why ε = ∞: no clipping bound or no noise), ``.notes``,
    ``.scope``, ``.final()`` → {acc: ε(T)}, ``.summary()`` → the ``summary.json`` entry
    ``{"epsilon": {...}, "delta": δ, ...}`` and ``.rows()`` → per-iteration rows for
    ``curves.csv``. Keys: ``paper`` (published bound) and ``pld`` (tight) always;
    ``basic``, ``advanced``, ``kairouz``, ``rdp`` by default for Laplace, ``rdp`` for Gaussian.

``calibrate(transcript_at, target_epsilon, delta, *, accountant="pld", rtol=1e-4) -> float``
    The smallest σ with ε(T) ≤ ``target_epsilon`` (σ/(1 + rtol) misses it), from a factory
    σ ↦ transcript.

Building blocks in closed form: :mod:`.mechanisms`; the papers' formulas: :mod:`.papers`.

>>> c = epsilon_curve(Transcript((0.2,) * 10, std=2.0, dim=2))
>>> c.final()["pld"] <= c.final()["basic"]
True
"""

from __future__ import annotations

from .accountants import (
    ACCOUNTANTS,
    Accountant,
    AdvancedAccountant,
    BasicAccountant,
    KairouzAccountant,
    PaperAccountant,
    PldAccountant,
    RdpAccountant,
    make_accountant,
    refusal,
    supporting,
)
from .curves import (
    FLOATING_POINT_CAVEAT,
    TIGHT_ACCOUNTANT,
    EpsilonCurve,
    accountant_curve,
    calibrate,
    calibrate_releases,
    check_composable,
    default_accountants,
    epsilon,
    epsilon_curve,
)
from .mechanisms import (
    DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
    advanced_composition_epsilon,
    basic_composition,
    gaussian_epsilon_analytic,
    gaussian_epsilon_classic,
    gaussian_sigma,
    gaussian_sigma_analytic,
    kairouz_epsilon,
    kairouz_optimal_epsilon,
    laplace_epsilon,
    laplace_scale,
    randomized_response_epsilon,
)
from .papers import (
    book_theorem_11_1_epsilon,
    graph_topology_epsilon,
    graph_topology_sensitivity,
    graph_topology_sigma,
    journal_theorem3_epsilon,
    preprint_theorem2_epsilon,
    preprint_theorem2_sigma,
    trajectory_sensitivities,
)
from .releases import (
    GaussianRelease,
    LaplaceRelease,
    PureDpRelease,
    Release,
    Transcript,
    VectorLaplaceRelease,
    to_dp_event,
)

__all__ = [
    "ACCOUNTANTS",
    "DEFAULT_VALUE_DISCRETIZATION_INTERVAL",
    "FLOATING_POINT_CAVEAT",
    "TIGHT_ACCOUNTANT",
    "Accountant",
    "AdvancedAccountant",
    "BasicAccountant",
    "EpsilonCurve",
    "GaussianRelease",
    "KairouzAccountant",
    "LaplaceRelease",
    "PaperAccountant",
    "PldAccountant",
    "PureDpRelease",
    "RdpAccountant",
    "Release",
    "Transcript",
    "VectorLaplaceRelease",
    "accountant_curve",
    "advanced_composition_epsilon",
    "basic_composition",
    "book_theorem_11_1_epsilon",
    "calibrate",
    "calibrate_releases",
    "check_composable",
    "default_accountants",
    "epsilon",
    "epsilon_curve",
    "gaussian_epsilon_analytic",
    "gaussian_epsilon_classic",
    "gaussian_sigma",
    "gaussian_sigma_analytic",
    "graph_topology_epsilon",
    "graph_topology_sensitivity",
    "graph_topology_sigma",
    "journal_theorem3_epsilon",
    "kairouz_epsilon",
    "kairouz_optimal_epsilon",
    "laplace_epsilon",
    "laplace_scale",
    "make_accountant",
    "preprint_theorem2_epsilon",
    "preprint_theorem2_sigma",
    "randomized_response_epsilon",
    "refusal",
    "supporting",
    "to_dp_event",
    "trajectory_sensitivities",
]
