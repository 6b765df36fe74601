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
:func:`make_accountant(name, **options) <make_accountant>`; the facade
:func:`epsilon(releases, delta, accountant) <epsilon>`.

Releases
--------
:class:`LaplaceRelease` (Δ₁, b), :class:`VectorLaplaceRelease` (Δ₂, b, M),
:class:`GaussianRelease` (Δ₂, σ), :class:`PureDpRelease` (ε); each with ``count``.

Over iterations, and calibration
--------------------------------
``accountant_curve(accountant, releases, delta, *, checkpoints=None) -> np.ndarray``
    ε(i) of composing one release per iteration onto any accountant (the one loop).
``calibrate_releases(releases_at, target_epsilon, delta, *, accountant="pld", guess=None,
rtol=1e-4) -> float``
    Smallest noise scale meeting a target, by bracketing and root-finding.

Engine-facing API
-----------------
``epsilon_curve(*, scheme, sigma, mu, clip, iterations, delta=1e-5, distribution="laplace",
dim=1, observed_links=1, rigorous=True, clients_per_round=1, aggregation_error=0.0,
accountants=None, checkpoints=64) -> EpsilonCurve``
    ε(i), i = 1..T, of one privatized curve. ``scheme`` ∈ {``graph_homomorphic``,
    ``random``, ``random_per_link``} (server level) or {``models``, ``updates``} (client
    level); ``sigma`` is the per-coordinate std of the noise (Laplace scale σ/√2); ``clip``
    is the per-sample clipping norm B. The result is a read-only mapping accountant →
    ``np.ndarray`` of shape (T,), with ``.delta``, ``.reason`` (why ε = ∞: ``clip=None``
    or no noise), ``.notes``, ``.final()`` → {acc: ε(T)}, ``.summary()`` → the
    ``summary.json`` entry ``{"epsilon": {...}, "delta": δ, ...}`` and ``.rows()`` → per-iteration
    rows for ``curves.csv``. Keys: ``paper`` (published bound) and ``pld`` (tight) always;
    ``basic``, ``advanced``, ``kairouz``, ``rdp`` by default for Laplace, ``rdp`` for Gaussian.

``calibrate(target_epsilon, delta, iterations, *, scheme, mu, clip, distribution="laplace",
dim=1, observed_links=1, rigorous=True, clients_per_round=1, aggregation_error=0.0,
accountant="pld", rtol=1e-4) -> float``
    The smallest σ with ε(T) ≤ ``target_epsilon`` (σ/(1 + rtol) misses it).

Building blocks in closed form: :mod:`.mechanisms`; the papers' formulas: :mod:`.papers`.

>>> c = epsilon_curve(scheme="graph_homomorphic", sigma=2.0, mu=0.1, clip=1.0, iterations=10, dim=2)
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
    epsilon,
    gaussian_epsilon_pld,
    gaussian_epsilon_rdp,
    laplace_epsilon_pld,
    laplace_epsilon_rdp,
    make_accountant,
)
from .curves import (
    DISTRIBUTIONS,
    FLOATING_POINT_CAVEAT,
    SCOPES,
    TIGHT_ACCOUNTANT,
    EpsilonCurve,
    accountant_curve,
    calibrate,
    calibrate_releases,
    default_accountants,
    epsilon_curve,
    final_epsilon,
    releases_for,
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
    CLIENT_SCHEMES,
    SCHEMES,
    SERVER_SCHEMES,
    book_theorem_11_1_epsilon,
    gfl_sensitivities,
    graph_topology_epsilon,
    graph_topology_sensitivity,
    graph_topology_sigma,
    journal_theorem3_epsilon,
    preprint_theorem2_epsilon,
    preprint_theorem2_sigma,
)
from .releases import (
    GaussianRelease,
    LaplaceRelease,
    PureDpRelease,
    Release,
    VectorLaplaceRelease,
    to_dp_event,
)

__all__ = [
    "ACCOUNTANTS",
    "CLIENT_SCHEMES",
    "DEFAULT_VALUE_DISCRETIZATION_INTERVAL",
    "DISTRIBUTIONS",
    "FLOATING_POINT_CAVEAT",
    "SCHEMES",
    "SCOPES",
    "SERVER_SCHEMES",
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
    "VectorLaplaceRelease",
    "accountant_curve",
    "advanced_composition_epsilon",
    "basic_composition",
    "book_theorem_11_1_epsilon",
    "calibrate",
    "calibrate_releases",
    "default_accountants",
    "epsilon",
    "epsilon_curve",
    "final_epsilon",
    "gaussian_epsilon_analytic",
    "gaussian_epsilon_classic",
    "gaussian_epsilon_pld",
    "gaussian_epsilon_rdp",
    "gaussian_sigma",
    "gaussian_sigma_analytic",
    "gfl_sensitivities",
    "graph_topology_epsilon",
    "graph_topology_sensitivity",
    "graph_topology_sigma",
    "journal_theorem3_epsilon",
    "kairouz_epsilon",
    "kairouz_optimal_epsilon",
    "laplace_epsilon",
    "laplace_epsilon_pld",
    "laplace_epsilon_rdp",
    "laplace_scale",
    "make_accountant",
    "preprint_theorem2_epsilon",
    "preprint_theorem2_sigma",
    "randomized_response_epsilon",
    "releases_for",
    "to_dp_event",
]
