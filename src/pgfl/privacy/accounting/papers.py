"""The papers' ε(i) bounds, exactly as published, and the sensitivities they rest on.

Published formulas (each cites theorem and equation; "as published" means we keep the
papers' reading of the Laplace density, |·| applied to a vector as if ℓ₂ were ℓ₁):

* :func:`preprint_theorem2_epsilon` / :func:`preprint_theorem2_sigma` — GFL with
  graph-homomorphic Laplace noise, σ_g = √2 μ B (1+i) i / ε(i) (preprint Thm 2, eqs. 51–52,
  App. F eq. 86).
* :func:`book_theorem_11_1_epsilon` — privatized diffusion, ε(i) = μ G (i² + i) / b_v
  (book Thm 11.1). Same bound as the preprint's with b_v = σ_g/√2 and G = B.
* :func:`journal_theorem3_epsilon` — the high-probability version (journal Thm 3, App. 4–5).
* :func:`graph_topology_sigma`, :func:`graph_topology_epsilon` — Gaussian noise on the
  last local gradient step, composed by eq. (32) (graph-topology paper Thm 3, App. C).

What the papers leave loose, and what the mechanisms' rigorous reading does
(:mod:`pgfl.privacy.mechanisms`):

1. **ℓ₁ vs ℓ₂.** Per-coordinate Laplace noise of scale b has density ∝ exp(−‖x‖₁/b), so
   the Laplace mechanism needs the **ℓ₁** sensitivity. The bounds B on gradients are
   ℓ₂ norms; in M dimensions ‖v‖₁ ≤ √M ‖v‖₂, so Δ₁ ≤ √M Δ₂ and the rigorous ε is up to
   √M times the published one (equal for M = 1).
2. **B is enforced, not assumed.** Lemma 4 of the preprint asserts gradients bounded by
   B along the trajectory; the journal drops that assumption and gets a guarantee only
   with high probability. pgfl makes B the per-sample clipping norm: each client clips
   every per-sample gradient to ‖·‖₂ ≤ B, so every mini-batch average, every average
   over local epochs and every aggregate over clients is bounded by B as well, and the
   bound holds with probability one.
3. **Trajectory sensitivity (eq. 52).** With clipped gradients, one iteration moves a
   model by μ times an average of clipped gradients, so two runs that differ in one
   client's data drift apart by at most 2μB per iteration: Δ(j) ≤ 2μBj (ℓ₂). For the
   graph-homomorphic scheme this growth is real: conditioning on the released messages,
   server p's own state differs exactly by the difference of its message centres (its
   self-loop weight −(1−a_pp)/a_pp cancels its noise), so the sensitivity of message j
   accumulates all earlier gradient differences. For schemes whose self-copy is noised
   as well the same bound holds (it is then loose).
4. **Graph-topology sensitivity (eq. 58).** The proof bounds ‖z¹ − z²‖₂ by max ‖z‖₂
   "since all z are non-negative"; that is false in general (z¹ = (C, 0), z² = (0, C)
   gives √2 C). The rigorous ℓ₂ sensitivity of the noisy gradient step is 2√2 C / N
   (and the classic σ bound it uses needs each per-round ε < 1).
"""

from __future__ import annotations

import math

import numpy as np

from pgfl.validation import ConfigError, check_int, check_real

from .mechanisms import kairouz_epsilon

__all__ = [
    "book_theorem_11_1_epsilon",
    "graph_topology_epsilon",
    "graph_topology_sensitivity",
    "graph_topology_sigma",
    "journal_theorem3_epsilon",
    "preprint_theorem2_epsilon",
    "preprint_theorem2_sigma",
    "trajectory_sensitivities",
]


def _iterations(i: int | np.ndarray) -> np.ndarray:
    arr = np.asarray(i)
    if arr.dtype.kind not in "iu" or np.any(arr < 0):
        raise ConfigError(f"iteration must be an integer (or integer array) in [0, inf); got {i!r}")
    return arr.astype(float)


def preprint_theorem2_epsilon(
    i: int | np.ndarray, *, mu: float, bound: float, sigma_g: float
) -> np.ndarray:
    """ε(i) of GFL with graph-homomorphic Laplace noise, as published (preprint Thm 2).

    Theorem 2 states σ_g = √2 μ B (1+i) i / ε(i); solved for ε:

        ε(i) = √2 μ B i (i + 1) / σ_g = Σ_{j=0}^{i} 2μBj / b,   b = σ_g/√2,

    i.e. the Laplace mechanism (scale b, per-coordinate std σ_g) applied at every
    iteration j = 0..i to a message of sensitivity 2μBj (eq. 52), composed by adding
    the epsilons (App. F, eq. 86). Covers what server p sends over its links.

    Args:
        i: iteration index (scalar or array) ≥ 0.
        mu: step size μ > 0.
        bound: gradient bound B ≥ 0 (in pgfl: the per-sample clipping norm).
        sigma_g: per-coordinate standard deviation of the Laplace noise, > 0.

    Returns:
        ε(i), same shape as ``i``.

    >>> float(preprint_theorem2_epsilon(3, mu=0.5, bound=1.0, sigma_g=math.sqrt(2)))
    6.0

    """
    ii = _iterations(i)
    m = check_real("mu", mu, lo=0.0, lo_open=True)
    b = check_real("bound", bound, lo=0.0)
    s = check_real("sigma_g", sigma_g, lo=0.0, lo_open=True)
    return math.sqrt(2.0) * m * b * ii * (ii + 1.0) / s


def preprint_theorem2_sigma(epsilon: float, i: int, *, mu: float, bound: float) -> float:
    """σ_g = √2 μ B (1 + i) i / ε(i): the noise Theorem 2 (preprint) asks for ε(i)-DP at time i.

    >>> preprint_theorem2_sigma(6.0, 3, mu=0.5, bound=1.0) == math.sqrt(2)
    True
    """
    e = check_real("epsilon", epsilon, lo=0.0, lo_open=True)
    ii = check_int("i", i, lo=0)
    m = check_real("mu", mu, lo=0.0, lo_open=True)
    b = check_real("bound", bound, lo=0.0)
    return math.sqrt(2.0) * m * b * (1 + ii) * ii / e


def book_theorem_11_1_epsilon(
    i: int | np.ndarray, *, mu: float, grad_bound: float, b_v: float
) -> np.ndarray:
    """ε(i) = μ G (i² + i) / b_v of privatized diffusion (Vlaski & Sayed, book Thm 11.1).

    What agent 1 sends to its neighbours over iterations 0..i, with gradients bounded by
    G (Lemma 11.4: Δ(i) ≤ 2μGi) and Laplace noise of scale b_v.

    >>> float(book_theorem_11_1_epsilon(3, mu=0.5, grad_bound=1.0, b_v=1.0))
    6.0
    """
    ii = _iterations(i)
    m = check_real("mu", mu, lo=0.0, lo_open=True)
    g = check_real("grad_bound", grad_bound, lo=0.0)
    bv = check_real("b_v", b_v, lo=0.0, lo_open=True)
    return m * g * (ii**2 + ii) / bv


def journal_theorem3_epsilon(
    i: int | np.ndarray,
    *,
    sigma_g: float,
    bound: float,
    bound_prime: float,
    optimum_gap: float = 0.0,
    n_servers: int = 1,
) -> np.ndarray:
    """ε(i) of the journal's Theorem 3 (holds only *with high probability*).

    The journal bounds the sensitivity by Δ(i) ≤ B + B′ + √P ‖w° − w′°‖ (§4 and App. 4),
    where B, B′ bound the network error norms ‖W̃_i‖, ‖W̃′_i‖ of the two runs (not the
    gradients), and composes i + 1 Laplace releases (App. 5):

        ε(i) = √2 (B + B′ + √P ‖w° − w′°‖)(i + 1) / σ_g.

    The theorem statement prints "B + B′√P‖w° − w′°‖" and App. 5 drops the √P; we use the
    sensitivity bound as stated in §4/App. 4 (the statement's product mixes units). The
    bound holds on the event {‖W̃_i‖ ≤ B, ‖W̃′_i‖ ≤ B′}, whose probability the journal
    bounds by Markov's inequality with unspecified O(μ), O(μ⁻¹) constants — so this ε is
    **not** a worst-case guarantee and pgfl never reports it as one.

    >>> float(journal_theorem3_epsilon(1, sigma_g=math.sqrt(2), bound=1.0, bound_prime=2.0))
    6.0
    """
    ii = _iterations(i)
    s = check_real("sigma_g", sigma_g, lo=0.0, lo_open=True)
    b = check_real("bound", bound, lo=0.0)
    bp = check_real("bound_prime", bound_prime, lo=0.0)
    gap = check_real("optimum_gap", optimum_gap, lo=0.0)
    p = check_int("n_servers", n_servers, lo=1)
    return math.sqrt(2.0) * (b + bp + math.sqrt(p) * gap) * (ii + 1.0) / s


def graph_topology_sensitivity(clip: float, n_samples: int, *, rigorous: bool = True) -> float:
    """ℓ₂ sensitivity of the noisy gradient in federated graph learning (App. C, eq. 58).

    The gradient's data term is (2/N) Σ_n z_n; replacing one z changes it by
    (2/N)‖z¹ − z²‖₂. The paper bounds this by 2C/N; for non-negative vectors of norm
    ≤ C the true worst case is √2 C, hence 2√2 C/N (``rigorous=True``).

    >>> graph_topology_sensitivity(25.0, 50, rigorous=False)
    1.0
    >>> round(graph_topology_sensitivity(25.0, 50), 6)
    1.414214
    """
    c = check_real("clip", clip, lo=0.0)
    n = check_int("n_samples", n_samples, lo=1)
    return (2.0 * math.sqrt(2.0) if rigorous else 2.0) * c / n


def graph_topology_sigma(epsilon_t: float, delta_t: float, *, clip: float, n_samples: int) -> float:
    """σ_i^t ≥ 2 √(2 ln(1.25/δ_i^t)) B_z / (N_i ε_i^t) (graph-topology paper, Thm 3 / eq. 60).

    The classic Gaussian mechanism with the paper's sensitivity 2B_z/N (B_z → C with
    clipping); valid only for ε_i^t < 1 (Dwork & Roth Thm A.1), which we enforce.

    >>> round(graph_topology_sigma(0.5, 1e-5, clip=1.0, n_samples=2), 4)
    9.6896
    """
    e = check_real("epsilon_t", epsilon_t, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    d = check_real("delta_t", delta_t, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    c = check_real("clip", clip, lo=0.0)
    n = check_int("n_samples", n_samples, lo=1)
    return 2.0 * math.sqrt(2.0 * math.log(1.25 / d)) * c / (n * e)


def graph_topology_epsilon(
    epsilons_t: float | np.ndarray, deltas_t: float | np.ndarray, delta_bar: float
) -> tuple[float, float]:
    """(ε̄, δ_total) of T rounds by eq. (32) (graph-topology paper, Thm 3; KOV 2015, Thm 3.5).

    δ_total = 1 − (1 − δ̄) Π_t (1 − δ_t). See :func:`~.mechanisms.kairouz_epsilon` for
    the one typesetting correction (√(Σ ε_t²)/δ̄, not √(Σ ε_t²/δ̄)).

    >>> e, d = graph_topology_epsilon(np.full(8, 0.1), np.zeros(8), 1e-5)
    >>> round(e, 6), round(d, 12)    # Σ ε_t = 0.8 is the smallest of the three terms here
    (0.8, 1e-05)
    """
    eps = np.atleast_1d(np.asarray(epsilons_t, dtype=float))
    dts = np.broadcast_to(np.asarray(deltas_t, dtype=float), eps.shape)
    if np.any(~np.isfinite(dts)) or np.any(dts < 0) or np.any(dts >= 1):
        raise ConfigError(f"deltas_t must hold real numbers in [0, 1); got {deltas_t!r}")
    db = check_real("delta_bar", delta_bar, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    e = kairouz_epsilon(eps, db)
    return e, float(1.0 - (1.0 - db) * np.prod(1.0 - dts))


def trajectory_sensitivities(
    iterations: int, *, mu: float, clip: float, slack: float = 0.0
) -> np.ndarray:
    """Δ₂(j) = (2μB + e)·j, j = 1..T: the sensitivity of the j-th message (preprint eq. 52).

    Two runs that differ in one client's data drift apart by at most 2μB per iteration
    (clipped gradients; book Lemma 11.4: Δ(i) ≤ 2μGi), plus ``slack`` e per iteration for
    an aggregate computed with an error (secure aggregation's rounding); the message of
    iteration j carries all j increments when nothing re-synchronizes the two runs.

    Args:
        iterations: T ≥ 1.
        mu: step size μ > 0.
        clip: B ≥ 0, the per-sample gradient clipping norm.
        slack: e ≥ 0 added to every increment.

    Returns:
        Array of shape (T,).

    >>> trajectory_sensitivities(3, mu=0.5, clip=1.0)
    array([1., 2., 3.])

    """
    j = np.arange(1, iterations + 1, dtype=float)
    return (2.0 * mu * clip + slack) * j
