"""Differential-privacy accounting: ε for every run, noise calibrated to a target ε.

Mechanisms are *described* (small frozen releases), accountants *compose* them, as in
Google's ``dp_accounting`` — which does the tight work here (privacy-loss distributions,
Rényi DP, the analytic Gaussian, the calibration bisection). This package adds what is
specific to pgfl: the papers' ε(i) bounds as published, the sensitivity of the GFL
trajectory, and a rigorous reading of both. What each guarantee covers, and against
whom, is written down in ``docs/privacy.md``.

Engine-facing API
-----------------
``epsilon_curve(*, scheme, sigma, mu, clip, iterations, delta=1e-5, distribution="laplace",
dim=1, observed_links=1, rigorous=True, accountants=None, checkpoints=64) -> EpsilonCurve``
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
dim=1, observed_links=1, rigorous=True, accountant="pld", rtol=1e-4) -> float``
    The smallest σ with ε(T) ≤ ``target_epsilon`` (round trip guaranteed on the private side).

Building blocks: :func:`laplace_epsilon`, :func:`randomized_response_epsilon`,
:func:`gaussian_sigma`, :func:`basic_composition`, :func:`advanced_composition_epsilon`,
:func:`kairouz_epsilon` (eq. 32), :func:`kairouz_optimal_epsilon`,
:func:`gaussian_epsilon_pld`, :func:`laplace_epsilon_pld` (+ RDP twins); releases and the
facade :func:`epsilon` (accountants ``paper``, ``basic``, ``advanced``, ``kairouz``,
``pld``, ``rdp``); the papers' formulas in :mod:`.papers`.

>>> c = epsilon_curve(scheme="graph_homomorphic", sigma=2.0, mu=0.1, clip=1.0, iterations=10, dim=2)
>>> c.final()["pld"] <= c.final()["basic"]
True
"""

from __future__ import annotations

from .composition import (
    ACCOUNTANTS,
    GaussianRelease,
    LaplaceRelease,
    PureDpRelease,
    Release,
    epsilon,
    to_dp_event,
)
from .curves import (
    DISTRIBUTIONS,
    FLOATING_POINT_CAVEAT,
    SCOPES,
    TIGHT_ACCOUNTANT,
    EpsilonCurve,
    calibrate,
    default_accountants,
    epsilon_curve,
    releases_for,
)
from .mechanisms import (
    DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
    advanced_composition_epsilon,
    basic_composition,
    gaussian_epsilon_classic,
    gaussian_epsilon_pld,
    gaussian_epsilon_rdp,
    gaussian_sigma,
    gaussian_sigma_analytic,
    kairouz_epsilon,
    kairouz_optimal_epsilon,
    laplace_epsilon,
    laplace_epsilon_pld,
    laplace_epsilon_rdp,
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
    "EpsilonCurve",
    "GaussianRelease",
    "LaplaceRelease",
    "PureDpRelease",
    "Release",
    "advanced_composition_epsilon",
    "basic_composition",
    "book_theorem_11_1_epsilon",
    "calibrate",
    "default_accountants",
    "epsilon",
    "epsilon_curve",
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
    "preprint_theorem2_epsilon",
    "preprint_theorem2_sigma",
    "randomized_response_epsilon",
    "releases_for",
    "to_dp_event",
]
