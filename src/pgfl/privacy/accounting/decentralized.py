"""Decentralized accounting I: pairwise-cancelling correlated noise (DECOR) and its design.

Nodes are the n servers of a graph with 0/1 adjacency ``Adj`` (symmetric, no self-loops),
Laplacian L = D − Adj, and W a symmetric doubly-stochastic mixing matrix. Δ is the ℓ₂
sensitivity of one node's contribution in one round (replace-one, as everywhere in
:mod:`pgfl.privacy.accounting`). All noise is Gaussian and independent across
coordinates with the same covariance Σ over nodes, so one coordinate's analysis
suffices: the Rényi divergence of N(0, Σ ⊗ I_d) against its shift by e_i ⊗ s is
(α/2) ‖s‖² [Σ⁻¹]_ii, which depends on s only through ‖s‖ = Δ.

**DECOR** (Allouah, Koloskova, El Firdoussi, Jaggi, Guerraoui, "The Privacy Power of
Correlated Noise in Decentralized Learning", ICML 2024, arXiv:2405.01031, Algorithm 1):
every round node i adds v̄_i ~ N(0, σ_cdp²) and Σ_{j∼i} v_ij with v_ij = −v_ji ~ N(0, σ_cor²)
drawn fresh per edge from a secret the two endpoints share. Threat model (SecLDP): the
adversary reads every message on every link in every round and knows everything a
coalition C of nodes knows (their data, their v̄, the v_ij of every edge that touches C).

* :func:`pairwise_noise` — Σ_j v_ij per node from per-edge draws; sums to zero.
* :func:`laplacian`, :func:`pairwise_covariance` — Σ_H = σ_cdp² I + σ_cor² L_H.
* :func:`secldp_rdp_slopes`, :func:`secldp_rdp_slope` — ρ_i = (Δ²/2)[Σ_H⁻¹]_ii, RDP_α = α ρ.
* :func:`secldp_spectral_bound` — the algebraic-connectivity bound on ρ.
* :func:`secldp_epsilon` (exact, analytic Gaussian) and :func:`secldp_epsilon_rdp`
  (Tρ + 2√(Tρ ln(1/δ))) after T rounds; :func:`gaussian_composition_epsilon`.

**Topology-optimized covariance** (Rodio, Chen, Larsson, "Optimizing Privacy-Utility
Trade-off in Decentralized Learning with Generalized Correlated Noise" (CorN-DSGD),
arXiv:2501.14644): choose Σ to minimise the noise tr(W Σ Wᵀ) left after one combine step
under [Σ⁻¹]_ii ≤ b for every node, here over the family Σ = s I + Σ_e c_e L_e that
per-edge secrets can sample (:func:`decor_design`, :func:`optimize_covariance`,
:class:`CovarianceDesign`). Drawn jointly by a trusted dealer instead, a curious node learns
only its own noise, and loses nothing against an eavesdropper (:func:`dealer_rdp_slopes`).

The gossip accountant (Muffliato) is in :mod:`.gossip`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np
from scipy import optimize
from scipy.sparse.csgraph import connected_components

from pgfl.validation import ConfigError, check_int, check_real

from .mechanisms import gaussian_epsilon_analytic

__all__ = [
    "CovarianceDesign",
    "covariance_from_edges",
    "dealer_rdp_slopes",
    "decor_design",
    "edges_of",
    "gaussian_composition_epsilon",
    "laplacian",
    "optimize_covariance",
    "pairwise_covariance",
    "pairwise_noise",
    "secldp_epsilon",
    "secldp_epsilon_rdp",
    "secldp_rdp_slope",
    "secldp_rdp_slopes",
    "secldp_spectral_bound",
]


# ------------------------------------------------------------------------- validation
def check_adjacency(adjacency: object, name: str = "adjacency") -> np.ndarray:
    """Return ``adjacency`` as a boolean (n, n) array, or raise a one-line ConfigError.

    >>> check_adjacency([[0, 1], [1, 0]]).tolist()
    [[False, True], [True, False]]
    >>> check_adjacency([[0, 1], [0, 0]])
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: adjacency must be symmetric (undirected); got a[i, j] != a[j, i]
    """
    try:
        a = np.asarray(adjacency, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a square 0/1 matrix; got {adjacency!r}") from None
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 1:
        raise ConfigError(f"{name} must be a square 0/1 matrix; got shape {a.shape}")
    if not np.all((a == 0) | (a == 1)):
        bad = float(a[~((a == 0) | (a == 1))][0])
        raise ConfigError(f"{name} must hold only 0 and 1; got {bad!r}")
    if not np.array_equal(a, a.T):
        raise ConfigError(f"{name} must be symmetric (undirected); got a[i, j] != a[j, i]")
    if np.any(np.diag(a) != 0):
        raise ConfigError(f"{name} must have a zero diagonal (no self-loops); got a[i, i] = 1")
    return a.astype(bool)


def check_mixing(mixing: object, name: str = "mixing") -> np.ndarray:
    """Return a symmetric doubly-stochastic (n, n) float array, or raise a ConfigError.

    >>> check_mixing([[0.5, 0.5], [0.5, 0.5]]).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    >>> check_mixing([[0.5, 0.4], [0.4, 0.5]])
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: mixing rows must sum to 1 (doubly stochastic); got a row sum 0.9
    """
    try:
        w = np.asarray(mixing, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a square real matrix; got {mixing!r}") from None
    if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] < 1:
        raise ConfigError(f"{name} must be a square real matrix; got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < -1e-12):
        raise ConfigError(
            f"{name} must hold finite non-negative reals; got min {float(np.min(w))!r}"
        )
    if not np.allclose(w, w.T, rtol=0.0, atol=1e-10):
        raise ConfigError(
            f"{name} must be symmetric; got max |W - W^T| = {np.abs(w - w.T).max():g}"
        )
    rows = w.sum(axis=1)
    if not np.allclose(rows, 1.0, rtol=0.0, atol=1e-9):
        bad = rows[np.argmax(np.abs(rows - 1.0))]
        raise ConfigError(f"{name} rows must sum to 1 (doubly stochastic); got a row sum {bad:g}")
    return np.clip((w + w.T) / 2.0, 0.0, None)


def _check_coalition(coalition: Iterable[int], n: int) -> np.ndarray:
    try:
        members = sorted({check_int("coalition member", c, lo=0, hi=n - 1) for c in coalition})
    except TypeError:
        raise ConfigError(
            f"coalition must be an iterable of node indices; got {coalition!r}"
        ) from None
    if len(members) >= n:
        raise ConfigError(f"coalition must leave at least one honest node; got all {n} nodes")
    return np.asarray(members, dtype=int)


def _noise_args(sigma_cdp: float, sigma_cor: float, sensitivity: float) -> tuple[float, ...]:
    s_cdp = check_real("sigma_cdp", sigma_cdp, lo=0.0, lo_open=True)
    s_cor = check_real("sigma_cor", sigma_cor, lo=0.0)
    sens = check_real("sensitivity", sensitivity, lo=0.0)
    return s_cdp, s_cor, sens


# ----------------------------------------------------------------------- graph algebra
def edges_of(adjacency: object) -> np.ndarray:
    """Edges (i, j), i < j, of an undirected 0/1 adjacency, in row-major order.

    Args:
        adjacency: (n, n) symmetric 0/1 matrix with a zero diagonal.

    Returns:
        int array of shape (m, 2).

    >>> edges_of([[0, 1, 0], [1, 0, 1], [0, 1, 0]]).tolist()
    [[0, 1], [1, 2]]

    """
    a = check_adjacency(adjacency)
    i, j = np.nonzero(np.triu(a, k=1))
    return np.stack([i, j], axis=1).astype(int)


def laplacian(adjacency: object) -> np.ndarray:
    """Graph Laplacian L = D − Adj of an unweighted undirected graph, shape (n, n).

    L = Σ_e L_e with L_e = (e_i − e_j)(e_i − e_j)ᵀ for every edge e = (i, j), so L ⪰ 0,
    L 1 = 0, and its kernel is spanned by the indicator vectors of the connected
    components.

    >>> laplacian([[0, 1, 0], [1, 0, 1], [0, 1, 0]]).tolist()
    [[1.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 1.0]]
    """
    a = check_adjacency(adjacency).astype(float)
    return np.diag(a.sum(axis=1)) - a


def pairwise_noise(edges: object, draws: object, n: int | None = None) -> np.ndarray:
    """Per-node pairwise noise Σ_{j∼i} v_ij from one draw per edge, with v_ji = −v_ij.

    Edge k = (i, j) contributes +draws[k] to node i and −draws[k] to node j, which is
    DECOR's v_ij = −v_ji (arXiv:2405.01031, Algorithm 1). Every draw enters the total
    once with each sign, so Σ_i (result)_i = 0 exactly in exact arithmetic; the network
    average carries none of this noise.

    Args:
        edges: int array-like of shape (m, 2), node indices (any order within a pair).
        draws: shape (m,) or (m, d): the edge's draw v_ij (per coordinate).
        n: number of nodes (default: largest index + 1).

    Returns:
        Array of shape (n,) + draws.shape[1:].

    >>> pairwise_noise([(0, 1), (1, 2)], [0.5, 2.0]).tolist()
    [0.5, 1.5, -2.0]

    """
    e = np.asarray(edges)
    if e.size == 0:
        e = e.reshape(0, 2)
    if e.ndim != 2 or e.shape[1] != 2 or (e.size and e.dtype.kind not in "iu"):
        raise ConfigError(f"edges must be an integer array of shape (m, 2); got shape {e.shape}")
    v = np.asarray(draws, dtype=float)
    if v.ndim < 1 or v.shape[0] != e.shape[0] or not np.all(np.isfinite(v)):
        raise ConfigError(
            f"draws must be finite with one row per edge ({e.shape[0]}); got shape {v.shape}"
        )
    top = int(e.max()) + 1 if e.size else 0
    size = top if n is None else check_int("n", n, lo=max(top, 1))
    if e.size and (e.min() < 0 or np.any(e[:, 0] == e[:, 1])):
        raise ConfigError("edges must join two different nodes with indices >= 0; got a self-loop")
    out = np.zeros((size,) + v.shape[1:])
    np.add.at(out, e[:, 0], v)
    np.add.at(out, e[:, 1], -v)
    return out


def _honest_spectrum(
    adjacency: np.ndarray, coalition: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Honest node indices, and the eigen-decomposition of L_H with exact zeros.

    The kernel of a Laplacian has dimension = number of connected components; eigh
    returns those eigenvalues as ±1e-15-sized numbers, which σ_cor² can blow up. They
    are set to 0 exactly (eigh sorts ascending, so they come first).
    """
    n = adjacency.shape[0]
    honest = np.setdiff1d(np.arange(n), coalition)
    sub = adjacency[np.ix_(honest, honest)]
    lap = np.diag(sub.sum(axis=1).astype(float)) - sub
    lam, vec = np.linalg.eigh(lap)
    components = connected_components(sub, directed=False)[0]
    lam[:components] = 0.0
    return honest, np.clip(lam, 0.0, None), vec


def pairwise_covariance(
    adjacency: object, sigma_cdp: float, sigma_cor: float, coalition: Iterable[int] = ()
) -> np.ndarray:
    """Covariance over honest nodes of DECOR's residual noise: Σ_H = σ_cdp² I + σ_cor² L_H.

    Derivation. Node i's noise is n_i = v̄_i + Σ_{j∼i} v_ij. The v̄ are independent, and
    the only pairs of pairwise terms that correlate are v_ij and v_ji = −v_ij, so
    Var n_i = σ_cdp² + deg(i) σ_cor² and Cov(n_i, n_j) = −σ_cor² for an edge i∼j, 0
    otherwise: Cov n = σ_cdp² I + σ_cor² L (arXiv:2405.01031, Section 3). A coalition C
    knows v̄_c and every v_cj with c ∈ C; subtracting the known terms leaves each honest
    node h with r_h = v̄_h + Σ_{j∼h, j∉C} v_hj, whose covariance is the same computation on
    the subgraph induced by the honest nodes H: Σ_H = σ_cdp² I + σ_cor² L_H. The coalition's
    own messages are then fully known and independent of r_H, so the adversary's view
    of one round is (known terms) + g_H + r_H. A node whose neighbours are all in C has
    an isolated vertex in H: its residual is v̄_h alone (local DP at σ_cdp).

    Args:
        adjacency: (n, n) 0/1 symmetric matrix, zero diagonal.
        sigma_cdp: σ_cdp > 0, std of the private part v̄_i.
        sigma_cor: σ_cor ≥ 0, std of each pairwise term v_ij.
        coalition: indices of colluding nodes (default: none).

    Returns:
        Σ_H of shape (h, h) over the honest nodes in increasing index order.

    >>> path = [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    >>> pairwise_covariance(path, 1.0, 1.0).tolist()
    [[2.0, -1.0, 0.0], [-1.0, 3.0, -1.0], [0.0, -1.0, 2.0]]
    >>> pairwise_covariance(path, 1.0, 1.0, coalition=[1]).tolist()   # leaves isolated
    [[1.0, 0.0], [0.0, 1.0]]

    """
    a = check_adjacency(adjacency)
    s_cdp, s_cor, _ = _noise_args(sigma_cdp, sigma_cor, 0.0)
    members = _check_coalition(coalition, a.shape[0])
    honest = np.setdiff1d(np.arange(a.shape[0]), members)
    sub = a[np.ix_(honest, honest)].astype(float)
    return s_cdp**2 * np.eye(honest.size) + s_cor**2 * (np.diag(sub.sum(axis=1)) - sub)


# ---------------------------------------------------------------------- SecLDP (DECOR)
def secldp_rdp_slopes(
    adjacency: object,
    sigma_cdp: float,
    sigma_cor: float,
    sensitivity: float = 1.0,
    coalition: Iterable[int] = (),
) -> np.ndarray:
    """Per-node Rényi slope ρ_i of one DECOR round under SecLDP: RDP_α = α ρ_i.

    Derivation. Changing node i's data shifts the adversary's view (g_H + r_H per
    coordinate, :func:`pairwise_covariance`) by Δ e_i, and r_H ~ N(0, Σ_H). The Rényi
    divergence of two Gaussians with one covariance is D_α(N(μ, Σ) ‖ N(μ′, Σ)) =
    (α/2)(μ − μ′)ᵀ Σ⁻¹ (μ − μ′), hence ρ_i = (Δ²/2) [Σ_H⁻¹]_ii (the Gaussian mechanism with
    correlated noise; DECOR's SecLDP accountant, arXiv:2405.01031). [Σ_H⁻¹]_ii is computed
    from the eigen-decomposition L_H = U Λ Uᵀ: [Σ_H⁻¹]_ii = Σ_k U_ik² / (σ_cdp² + σ_cor² λ_k),
    which stays accurate for σ_cor ≫ σ_cdp (the kernel's eigenvalues are set to 0 exactly).

    Args:
        adjacency: (n, n) 0/1 symmetric matrix, zero diagonal.
        sigma_cdp: σ_cdp > 0.
        sigma_cor: σ_cor ≥ 0 (0: local DP at σ_cdp, ρ = Δ²/(2σ_cdp²)).
        sensitivity: Δ ≥ 0, ℓ₂ sensitivity of one node's contribution per round.
        coalition: colluding nodes; their entries are NaN (they are not protected).

    Returns:
        Array of shape (n,).

    >>> k2 = [[0, 1], [1, 0]]   # Σ = [[2, -1], [-1, 2]], Σ⁻¹_00 = 2/3, ρ = 1/3
    >>> [round(float(r), 12) for r in secldp_rdp_slopes(k2, 1.0, 1.0)]
    [0.333333333333, 0.333333333333]

    """
    a = check_adjacency(adjacency)
    s_cdp, s_cor, sens = _noise_args(sigma_cdp, sigma_cor, sensitivity)
    members = _check_coalition(coalition, a.shape[0])
    honest, lam, vec = _honest_spectrum(a, members)
    inv_diag = (vec**2) @ (1.0 / (s_cdp**2 + s_cor**2 * lam))
    out = np.full(a.shape[0], np.nan)
    out[honest] = 0.5 * sens**2 * inv_diag
    return out


def secldp_rdp_slope(
    adjacency: object,
    sigma_cdp: float,
    sigma_cor: float,
    sensitivity: float = 1.0,
    coalition: Iterable[int] = (),
) -> float:
    """Worst honest node's Rényi slope ρ = max_i (Δ²/2)[Σ_H⁻¹]_ii (see :func:`secldp_rdp_slopes`).

    >>> secldp_rdp_slope([[0, 1, 0], [1, 0, 1], [0, 1, 0]], 1.0, 5.0, coalition=[1])
    0.5
    """
    return float(
        np.nanmax(secldp_rdp_slopes(adjacency, sigma_cdp, sigma_cor, sensitivity, coalition))
    )


def secldp_spectral_bound(
    adjacency: object, sigma_cdp: float, sigma_cor: float, sensitivity: float = 1.0
) -> float:
    """Upper bound on ρ from the algebraic connectivity a(G) (all nodes honest).

    With L = Σ_k λ_k u_k u_kᵀ, λ_1 = 0, u_1 = 1/√n and λ_k ≥ a(G) for k ≥ 2 (connected G),

        [Σ⁻¹]_ii = 1/(n σ_cdp²) + Σ_{k≥2} u_ki²/(σ_cdp² + σ_cor² λ_k)
                 ≤ 1/(n σ_cdp²) + (1 − 1/n)/(σ_cdp² + σ_cor² a(G)),

    using Σ_k u_ki² = 1 (DECOR's spectral reading of its privacy bound, arXiv:2405.01031).
    Equality holds for the complete graph (λ_k = n for all k ≥ 2). Returns (Δ²/2) × the
    right-hand side; for a disconnected graph a(G) = 0 and the bound is local DP's.

    >>> secldp_spectral_bound([[0, 1], [1, 0]], 1.0, 1.0)   # K2 is complete: = 1/3
    0.3333333333333333
    """
    a = check_adjacency(adjacency)
    s_cdp, s_cor, sens = _noise_args(sigma_cdp, sigma_cor, sensitivity)
    n = a.shape[0]
    _, lam, _ = _honest_spectrum(a, np.zeros(0, dtype=int))
    conn = float(lam[1]) if n > 1 else 0.0
    bound = 1.0 / (n * s_cdp**2) + (1.0 - 1.0 / n) / (s_cdp**2 + s_cor**2 * conn)
    return 0.5 * sens**2 * bound


def gaussian_composition_epsilon(
    rdp_slope: float | np.ndarray, rounds: int, delta: float
) -> float | np.ndarray:
    """Exact ε at δ of ``rounds`` adaptive Gaussian mechanisms, each of Rényi slope ρ.

    A Gaussian mechanism of Rényi slope ρ (RDP_α = α ρ) has sensitivity-to-noise ratio
    μ = √(2ρ) (ρ = μ²/2 for N(0, 1) against N(μ, 1)). T adaptively composed μ-GDP
    mechanisms are √T μ-GDP (Dong, Roth & Su, "Gaussian Differential Privacy",
    arXiv:1905.02383, Cor. 3.3): the T-round privacy loss is that of one Gaussian with
    ratio √(2Tρ). Its exact ε(δ) is the analytic Gaussian mechanism (Balle & Wang 2018,
    Thm 8), :func:`.mechanisms.gaussian_epsilon_analytic` with noise multiplier 1/√(2Tρ).

    Args:
        rdp_slope: ρ ≥ 0, scalar or array (0: nothing leaks, ε = 0).
        rounds: T ≥ 1.
        delta: δ in (0, 1).

    Returns:
        ε, a float for a scalar ρ, else an array of ρ's shape.

    >>> round(gaussian_composition_epsilon(0.5, 100, 1e-5), 2)   # μ = 1 per round, z = 0.1
    91.82

    """
    rho = np.asarray(rdp_slope, dtype=float)
    if not np.all(np.isfinite(rho)) or np.any(rho < 0):
        raise ConfigError(f"rdp_slope must hold finite reals in [0, inf); got {rdp_slope!r}")
    t = check_int("rounds", rounds, lo=1)
    dlt = check_real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    mu = np.sqrt(2.0 * t * rho)
    with np.errstate(divide="ignore"):
        z = np.where(mu > 0, 1.0 / np.where(mu > 0, mu, 1.0), np.inf)
    eps = np.asarray(gaussian_epsilon_analytic(z, dlt), dtype=float)
    return float(eps) if eps.ndim == 0 else eps


def secldp_epsilon(
    adjacency: object,
    sigma_cdp: float,
    sigma_cor: float,
    *,
    rounds: int,
    delta: float,
    sensitivity: float = 1.0,
    coalition: Iterable[int] = (),
) -> float:
    """Exact SecLDP ε of T DECOR rounds for the worst honest node (analytic Gaussian).

    The rounds use fresh noise, and at round t the adversary already knows every model
    (they are linear in the messages it read), so the T rounds are an adaptive
    composition of Gaussian mechanisms of slope ρ_i (:func:`secldp_rdp_slopes`): the
    composed privacy loss is that of one Gaussian with sensitivity-to-noise ratio
    √(T Δ² [Σ_H⁻¹]_ii) (:func:`gaussian_composition_epsilon`). ε(δ) grows with that ratio, so
    the worst node is the one with the largest [Σ_H⁻¹]_ii. Never above
    :func:`secldp_epsilon_rdp` (the RDP conversion is a valid, looser bound).

    >>> k2 = [[0, 1], [1, 0]]   # σ_cor = 0: local DP, 100 rounds of ratio 1 = one of ratio 10
    >>> round(secldp_epsilon(k2, 1.0, 0.0, rounds=100, delta=1e-5), 2)
    91.82
    >>> secldp_epsilon(k2, 1.0, 1.0, rounds=10, delta=1e-5) < secldp_epsilon_rdp(
    ...     k2, 1.0, 1.0, rounds=10, delta=1e-5)
    True
    """
    rho = secldp_rdp_slope(adjacency, sigma_cdp, sigma_cor, sensitivity, coalition)
    return float(gaussian_composition_epsilon(rho, rounds, delta))


def secldp_epsilon_rdp(
    adjacency: object,
    sigma_cdp: float,
    sigma_cor: float,
    *,
    rounds: int,
    delta: float,
    sensitivity: float = 1.0,
    coalition: Iterable[int] = (),
) -> float:
    """DECOR's RDP conversion after T rounds: ε = Tρ + 2√(Tρ ln(1/δ)).

    T rounds are (α, αTρ)-RDP for every α > 1 (RDP adds up), hence (αTρ + ln(1/δ)/(α−1), δ)-DP
    (Mironov 2017, "Rényi Differential Privacy", arXiv:1702.07476, Prop. 3). Minimising
    over α: α − 1 = √(ln(1/δ)/(Tρ)) gives ε = Tρ + 2√(Tρ ln(1/δ)) (the form of DECOR's
    accountant, arXiv:2405.01031).

    >>> k2 = [[0, 1], [1, 0]]   # ρ = 1/3, T = 3, ln(1/δ) = 1: ε = 1 + 2·1
    >>> round(secldp_epsilon_rdp(k2, 1.0, 1.0, rounds=3, delta=math.exp(-1)), 12)
    3.0
    """
    rho = secldp_rdp_slope(adjacency, sigma_cdp, sigma_cor, sensitivity, coalition)
    t = check_int("rounds", rounds, lo=1)
    dlt = check_real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    total = t * rho
    return float(total + 2.0 * math.sqrt(total * math.log(1.0 / dlt)))


# --------------------------------------------------- topology-optimized covariance
#: Largest ratio c_e/s the designs use (conditioning of Σ; see :func:`decor_design`).
_MAX_RATIO = 1e6


@dataclasses.dataclass(frozen=True)
class CovarianceDesign:
    """A noise covariance Σ = s I + Σ_e c_e L_e over nodes, with its cost and privacy.

    Sampling it needs only per-edge secrets: node i draws v̄_i ~ N(0, s) privately and,
    for each edge e = (i, j), the endpoints share v_e ~ N(0, c_e) and add +v_e and −v_e
    (DECOR's trust assumption, :func:`pairwise_noise`).

    Attributes:
        scale: s = σ_cdp² > 0, the private variance.
        edges: (m, 2) int array of the graph's edges.
        edge_variances: (m,) array c_e ≥ 0 (all equal: DECOR; all 0: local DP).
        covariance: (n, n) Σ.
        noise_after_mixing: tr(W Σ Wᵀ), the variance left after one combine step (summed
            over nodes, one coordinate).
        max_inverse_diagonal: max_i [Σ⁻¹]_ii (≤ the budget b); ρ = Δ²/2 × this.
        kind: ``"decor"`` (best equal-weight design) or ``"optimized"``.

    """

    scale: float
    edges: np.ndarray
    edge_variances: np.ndarray
    covariance: np.ndarray
    noise_after_mixing: float
    max_inverse_diagonal: float
    kind: str

    def rdp_slope(self, sensitivity: float = 1.0) -> float:
        """Worst node's Rényi slope (Δ²/2) max_i [Σ⁻¹]_ii (no coalition)."""
        sens = check_real("sensitivity", sensitivity, lo=0.0)
        return 0.5 * sens**2 * self.max_inverse_diagonal


def covariance_from_edges(
    n: int, edges: object, scale: float, edge_variances: object
) -> np.ndarray:
    """Σ = s I + Σ_e c_e (e_i − e_j)(e_i − e_j)ᵀ, shape (n, n).

    With all c_e = σ_cor² this is DECOR's σ_cdp² I + σ_cor² L (:func:`pairwise_covariance`).

    >>> covariance_from_edges(2, [(0, 1)], 1.0, [0.5]).tolist()
    [[1.5, -0.5], [-0.5, 1.5]]
    """
    size = check_int("n", n, lo=1)
    e = np.asarray(edges, dtype=int).reshape(-1, 2)
    s = check_real("scale", scale, lo=0.0, lo_open=True)
    c = np.asarray(edge_variances, dtype=float).reshape(-1)
    if c.shape[0] != e.shape[0] or not np.all(np.isfinite(c)) or np.any(c < 0):
        raise ConfigError(
            f"edge_variances must be {e.shape[0]} finite reals >= 0; got {edge_variances!r}"
        )
    if e.size and (e.min() < 0 or e.max() >= size):
        raise ConfigError(f"edges must index nodes in [0, {size - 1}]; got {e.min()}..{e.max()}")
    inc = np.zeros((size, e.shape[0]))
    inc[e[:, 0], np.arange(e.shape[0])] = 1.0
    inc[e[:, 1], np.arange(e.shape[0])] = -1.0
    return s * np.eye(size) + (inc * c) @ inc.T


def _design_inputs(
    mixing: object, adjacency: object, budget: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    w = check_mixing(mixing)
    a = check_adjacency(adjacency)
    if a.shape != w.shape:
        raise ConfigError(f"adjacency must have the shape of mixing {w.shape}; got {a.shape}")
    b = check_real("budget", budget, lo=0.0, lo_open=True)
    e = edges_of(a)
    return w, a, e, b


def _make_design(
    w: np.ndarray, e: np.ndarray, s: float, c: np.ndarray, kind: str
) -> CovarianceDesign:
    cov = covariance_from_edges(w.shape[0], e, s, c)
    inv = np.linalg.inv(cov)
    return CovarianceDesign(
        scale=float(s),
        edges=e,
        edge_variances=np.asarray(c, dtype=float),
        covariance=cov,
        noise_after_mixing=float(np.trace(w @ cov @ w.T)),
        max_inverse_diagonal=float(np.max(np.diag(inv))),
        kind=kind,
    )


def dealer_rdp_slopes(
    covariance: object, sensitivity: float = 1.0, coalition: Iterable[int] = ()
) -> np.ndarray:
    """Per-node Rényi slope ρ_i of one round of jointly drawn noise g ~ N(0, Σ), coalition C.

    A dealer draws g for every node and hands node m its g_m alone; node m sends
    ψ_m + g_m. The adversary reads every message and knows, for each c ∈ C, ψ_c and g_c.
    Given g_C the honest part is g_H | g_C ~ N(Σ_HC Σ_CC⁻¹ g_C, S) with the conditional
    covariance S = Σ_HH − Σ_HC Σ_CC⁻¹ Σ_CH (a known mean, the same in both worlds), so
    replacing node i's data (i ∈ H) shifts the view by Δ e_i under N(0, S):
    ρ_i = (Δ²/2) [S⁻¹]_ii. By the block inverse, S⁻¹ is the HH block of Σ⁻¹ (S is the Schur
    complement of Σ_CC), hence

        ρ_i = (Δ²/2) [Σ⁻¹]_ii   whatever C,

    the coalition-free value: knowing g_C reveals nothing an eavesdropper (who, under the
    DP worst case, knows ψ_C and thus g_C from the messages) lacked. Contrast per-edge
    secrets (:func:`pairwise_covariance`), where a node also learns each of its edges'
    terms and the honest residual shrinks to the subgraph's.

    Args:
        covariance: (n, n) symmetric positive-definite Σ.
        sensitivity: Δ ≥ 0.
        coalition: the curious nodes; their entries are NaN.

    Returns:
        Array of shape (n,).

    >>> sigma = [[2.0, -1.0, 0.0], [-1.0, 3.0, -1.0], [0.0, -1.0, 2.0]]
    >>> [round(float(r), 6) for r in dealer_rdp_slopes(sigma, coalition=[1])]
    [0.3125, nan, 0.3125]

    """
    cov = np.asarray(covariance, dtype=float)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1] or not np.all(np.isfinite(cov)):
        raise ConfigError(f"covariance must be a finite square matrix; got shape {cov.shape}")
    if not np.allclose(cov, cov.T, rtol=0.0, atol=1e-10 * max(1.0, np.abs(cov).max())):
        raise ConfigError("covariance must be symmetric")
    lam, vec = np.linalg.eigh((cov + cov.T) / 2.0)
    if lam[0] <= 0:
        raise ConfigError(f"covariance must be positive definite; got eigenvalue {lam[0]:g}")
    sens = check_real("sensitivity", sensitivity, lo=0.0)
    members = _check_coalition(coalition, cov.shape[0])
    out = 0.5 * sens**2 * ((vec**2) @ (1.0 / lam))
    out[members] = np.nan
    return out


def decor_design(mixing: object, adjacency: object, budget: float) -> CovarianceDesign:
    """The best DECOR covariance σ_cdp² I + σ_cor² L with max_i [Σ⁻¹]_ii ≤ b.

    For a ratio r = σ_cor²/σ_cdp², Σ = σ_cdp² (I + r L) and the tight constraint gives
    σ_cdp² = m(r)/b with m(r) = max_i [(I + r L)⁻¹]_ii. The cost is then
    tr(W Σ Wᵀ) = (m(r)/b)(‖W‖_F² + r tr(W L Wᵀ)), a function of r alone, minimised over
    r ∈ {0} ∪ [1e-6, 1e6] on a log grid and refined by bounded scalar minimisation
    (r = 0 is local DP; r → ∞ approaches m = 1/n, the central-DP level, which pays off
    only when tr(W L Wᵀ) = 0, i.e. W = J/n; the cap r ≤ 1e6 keeps Σ's condition number
    ≤ 1 + 1e6·n, so [Σ⁻¹]_ii is verified to ~1e-9, and costs at most ~1e-6 relative).

    Args:
        mixing: (n, n) symmetric doubly-stochastic W.
        adjacency: (n, n) 0/1 graph whose edges carry the pairwise secrets.
        budget: b > 0, the bound on every [Σ⁻¹]_ii (ρ = Δ² b / 2).

    Returns:
        :class:`CovarianceDesign` with ``kind="decor"``.

    >>> w = [[0.75, 0.25], [0.25, 0.75]]   # cost (1/2)(1 + 1/u)(1 + u/4), u = 1 + 2r: u = 2
    >>> d = decor_design(w, [[0, 1], [1, 0]], 1.0)
    >>> round(d.noise_after_mixing, 6), round(d.scale, 6), round(float(d.edge_variances[0]), 6)
    (1.125, 0.75, 0.375)

    """
    w, a, e, b = _design_inputs(mixing, adjacency, budget)
    _, lam, vec = _honest_spectrum(a, np.zeros(0, dtype=int))
    frob = float(np.sum(w**2))
    spread = float(np.trace(w @ laplacian(a) @ w.T))

    def cost(log_r: float) -> float:
        r = 0.0 if log_r == -np.inf else math.exp(log_r)
        m = float(np.max((vec**2) @ (1.0 / (1.0 + r * lam))))
        return m * (frob + r * spread) / b

    grid = np.concatenate([[-np.inf], np.linspace(math.log(1e-6), math.log(_MAX_RATIO), 121)])
    values = np.array([cost(x) for x in grid])
    k = int(np.argmin(values))
    best_x, best = grid[k], values[k]
    if 0 < k < grid.size - 1 and e.shape[0]:
        lo = grid[k - 1] if k > 1 else grid[1] - 0.2
        res = optimize.minimize_scalar(
            cost, bounds=(lo, grid[k + 1]), method="bounded", options={"xatol": 1e-10}
        )
        if res.fun < best:
            best_x, best = float(res.x), float(res.fun)
    r = 0.0 if best_x == -np.inf else math.exp(best_x)
    m = float(np.max((vec**2) @ (1.0 / (1.0 + r * lam))))
    s = m / b
    return _make_design(w, e, s, np.full(e.shape[0], r * s), "decor")


def optimize_covariance(
    mixing: object, adjacency: object, budget: float, *, maxiter: int = 500
) -> CovarianceDesign:
    """Minimise tr(W Σ Wᵀ) over Σ = s I + Σ_e c_e L_e subject to [Σ⁻¹]_ii ≤ b for all i.

    The CorN-DSGD programme (arXiv:2501.14644: minimise the noise left after gossip under
    DECOR's per-node privacy constraint) restricted to a family solvable without an SDP
    solver and **samplable with per-edge secrets alone** (see :class:`CovarianceDesign`):
    a general Σ (e.g. correlating non-adjacent nodes) would need a trusted dealer or a
    multi-party sampler. The family contains local DP (c = 0) and DECOR (c_e all equal).

    The problem is convex: the cost is linear in (s, c) (tr(W L_e Wᵀ) = ‖W(e_i − e_j)‖²),
    Σ is affine in (s, c), and Σ ↦ e_iᵀ Σ⁻¹ e_i is convex on positive-definite matrices.
    Solved for b = 1 (then scaled by 1/b: [Σ⁻¹]_ii scales as 1/scale) by SLSQP with
    exact gradients, ∂[Σ⁻¹]_ii/∂c_e = −((Σ⁻¹)_{i,p} − (Σ⁻¹)_{i,q})² for e = (p, q) and
    ∂[Σ⁻¹]_ii/∂s = −[Σ⁻²]_ii, started at the best DECOR (:func:`decor_design`). The result
    is rescaled to be exactly feasible, and the DECOR design is returned instead if the
    solver does not improve on it (by 1e-9 relative), so it is never worse than DECOR at
    the same budget. Bounds (at b = 1): s ≥ 1/n, which every feasible point meets (1/√n
    is an eigenvector of Σ with eigenvalue s, so [Σ⁻¹]_ii ≥ 1/(n s)), and
    0 ≤ c_e ≤ 1e6/n, which keeps Σ's condition number ≤ 1 + 1e6·2·(max degree) so that
    the constraint is verified to ~1e-9 (as for :func:`decor_design`).

    Args:
        mixing: (n, n) symmetric doubly-stochastic W.
        adjacency: (n, n) 0/1 graph whose edges may carry pairwise secrets.
        budget: b > 0.
        maxiter: SLSQP iteration cap ≥ 1.

    Returns:
        :class:`CovarianceDesign` (``kind`` = ``"optimized"``, or ``"decor"`` if no gain).

    >>> w = [[0.75, 0.25], [0.25, 0.75]]   # one edge: the family is DECOR's
    >>> round(optimize_covariance(w, [[0, 1], [1, 0]], 1.0).noise_after_mixing, 6)
    1.125

    """
    w, a, e, b = _design_inputs(mixing, adjacency, budget)
    iters = check_int("maxiter", maxiter, lo=1)
    start = decor_design(w, a, 1.0)
    m = e.shape[0]
    if m == 0:
        return decor_design(w, a, b)
    n = w.shape[0]
    inc = np.zeros((n, m))
    inc[e[:, 0], np.arange(m)] = 1.0
    inc[e[:, 1], np.arange(m)] = -1.0
    grad_cost = np.concatenate([[np.sum(w**2)], np.sum((w @ inc) ** 2, axis=0)])

    def inverse(x: np.ndarray) -> np.ndarray:
        return np.linalg.inv(x[0] * np.eye(n) + (inc * x[1:]) @ inc.T)

    def slack(x: np.ndarray) -> np.ndarray:
        return 1.0 - np.diag(inverse(x))

    def slack_jac(x: np.ndarray) -> np.ndarray:
        inv = inverse(x)
        return np.column_stack([np.sum(inv**2, axis=1), (inv @ inc) ** 2])

    x0 = np.concatenate([[start.scale], start.edge_variances])
    res = optimize.minimize(
        lambda x: float(grad_cost @ x),
        x0,
        jac=lambda x: grad_cost,
        method="SLSQP",
        bounds=[(1.0 / n, None)] + [(0.0, _MAX_RATIO / n)] * m,
        constraints=[{"type": "ineq", "fun": slack, "jac": slack_jac}],
        options={"maxiter": iters, "ftol": 1e-12},
    )
    x = np.clip(np.asarray(res.x, dtype=float), 0.0, _MAX_RATIO / n)
    x[0] = max(float(res.x[0]), 1.0 / n)
    if not np.all(np.isfinite(x)):
        return decor_design(w, a, b)
    kappa = float(np.max(np.diag(inverse(x))))  # rescale: exactly feasible at b = 1
    x = x * kappa
    if float(grad_cost @ x) >= start.noise_after_mixing * (1.0 - 1e-9):
        return decor_design(w, a, b)
    return _make_design(w, e, x[0] / b, x[1:] / b, "optimized")
