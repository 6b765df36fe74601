"""Decentralized accounting II: local noise then gossip (Muffliato), pairwise network DP.

Muffliato (Cyffers, Even, Bellet, Massoulié, "Muffliato: Peer-to-Peer Privacy
Amplification for Decentralized Optimization and Averaging", NeurIPS 2022,
arXiv:2206.05091): every node u adds η_u ~ N(0, σ²) to its value x_u once, then the
network runs K synchronous gossip steps y^{t+1} = W y^t (or their Chebyshev
acceleration), so y^t = P_t(W)(x + η) for a polynomial P_t with P_t(1) = 1.

**Threat model (pairwise network DP).** One honest-but-curious node v; the graph and W
are public; nobody else colludes or eavesdrops. v's view is every message it receives,
y_w^t for each neighbour w ∈ N(v) (w ≠ v with W_vw > 0) and every step t = 0..K (the
final iterate counts as sent; to leave it out, pass K − 1), **plus its own x_v and η_v**
(it drew them). v's own iterates y_v^t add nothing: they are computed from the
received messages and y_v^0. The guarantee is a matrix ε_{u→v}.

**Exact view.** Stack the received rows into A_v = [P_t(W)_{w,:}]_{t ≤ K, w ∈ N(v)}
((K+1)|N(v)| × n). Knowing x_v + η_v, v subtracts column v; what remains is
Y = B(x_{−v} + η_{−v}), B = A_v without column v. Changing u's data by Δ shifts Y by Δ B e_u
under noise N(0, σ² B Bᵀ), so (Gaussians with one, possibly singular, covariance; the
shift lies in its range)

    D_α = (α Δ²/(2σ²)) e_uᵀ Bᵀ (B Bᵀ)⁺ B e_u = (α Δ²/(2σ²)) ‖Proj_{row(B)} e_u‖²,

the squared norm of e_u's projection on the row space of B: always ≤ local DP's αΔ²/(2σ²),
and 0 when u is farther than K + 1 hops. The paper's accountant instead adds one
Gaussian mechanism per message (sensitivity Δ|P_t(W)_{wu}|, noise σ‖P_t(W)_{w,:}‖):

    ε_{u→v}(α) = (α Δ²/(2σ²)) Σ_{t=0}^{K} Σ_{w ∈ N(v)} P_t(W)_{wu}² / ‖P_t(W)_{w,:}‖²

(arXiv:2206.05091, the privacy theorem of Muffliato's gossip averaging, with the polynomial
actually run). The messages share one noise vector, so this sum is **not** an upper bound
on the exact divergence in general: on the path 0 – 1 – 2 with K = 1 node 2 reads
y_1^0 = x_1 + η_1 and y_1^1 = (y_0^0 + y_1^0 + y_2^0)/3, hence y_0^0 = x_0 + η_0 exactly
(local DP: α/2 for Δ = σ = 1), while the sum charges α/6; see the doctest of
:func:`muffliato_epsilon_matrix`. It still fails if v's own noise is treated as unknown
(``own_noise_known=False``: 2/3 of local DP at distance 2 on a ring, K = 1, against the
sum's 1/3). More generally, on a ring or a path v peels off one node per step
(y_w^{t+1} − known terms reveals the next node's y^0), so the exact loss is local DP for
every u within K + 1 hops and 0 beyond; on grids and random graphs it is fractional but
still well above the sum at distance ≥ 2.

Two consequences of the exact formula: it depends on the polynomials only through the
space they span, so plain and Chebyshev gossip (deg P_t = t) leak exactly the same
(the choice matters for the per-message sum only, which for Chebyshev is not even
monotone in the distance on a path); and it never exceeds local DP, which remains the
valid bound where the numerical rank is in doubt (:func:`muffliato_rdp_matrix`).

* :func:`gossip_polynomials`, :func:`gossip` — the iteration and its matrices P_t(W).
* :func:`muffliato_rdp_matrix`, :func:`muffliato_epsilon_matrix` — ρ_{u→v} and ε_{u→v}.
* :func:`certified_view_matrix` — the exact view's ‖Proj e_u‖² where floating point
  certifies it, local DP where it cannot: the bound a run's ε may use.
* :func:`worst_pair_epsilon`, :func:`distance_profile` — summaries.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.sparse.csgraph import shortest_path

from pgfl.validation import ConfigError, check_choice, check_int, check_real

from .decentralized import check_adjacency, check_mixing, gaussian_composition_epsilon

__all__ = [
    "GOSSIP_KINDS",
    "DistanceProfile",
    "certified_view_matrix",
    "distance_profile",
    "gossip",
    "gossip_polynomials",
    "muffliato_epsilon_matrix",
    "muffliato_rdp_matrix",
    "worst_pair_epsilon",
]

#: The gossip iterations :func:`gossip_polynomials` knows.
GOSSIP_KINDS = ("plain", "chebyshev")


def _second_modulus(w: np.ndarray) -> float:
    """λ = max(|λ_2|, |λ_n|) of a symmetric stochastic W (0 for one node)."""
    if w.shape[0] == 1:
        return 0.0
    lam = np.sort(np.linalg.eigvalsh(w))
    return float(min(max(abs(lam[0]), abs(lam[-2])), 1.0))


def _momenta(w: np.ndarray, steps: int, kind: str, spectral_radius: float | None) -> np.ndarray:
    """γ_t, t = 0..K−1, of y^{t+1} = γ_t W y^t + (1 − γ_t) y^{t−1} (γ = 1: plain gossip).

    Chebyshev: P_t(x) = T_t(x/λ)/T_t(1/λ), the polynomial of degree t with P_t(1) = 1 and the
    smallest sup on [−λ, λ]. With c_t = T_t(1/λ) and T_{t+1}(z) = 2z T_t(z) − T_{t−1}(z):
    P_{t+1} = γ_t x P_t + (1 − γ_t) P_{t−1} with γ_t = 2c_t/(λ c_{t+1}); then
    c_{t+1} = (2/λ)c_t − c_{t−1} gives γ_0 = 1 (P_1 = x), γ_1 = 2/(2 − λ²) and
    γ_t = 1/(1 − λ² γ_{t−1}/4) for t ≥ 2.
    """
    gam = np.ones(steps)
    if kind == "plain" or steps < 2:
        return gam
    lam = _second_modulus(w) if spectral_radius is None else spectral_radius
    gam[1] = 2.0 / (2.0 - lam**2)
    for t in range(2, steps):
        gam[t] = 1.0 / (1.0 - lam**2 * gam[t - 1] / 4.0)
    return gam


def _gossip_args(
    mixing: object, steps: int, kind: str, spectral_radius: float | None
) -> tuple[np.ndarray, int, np.ndarray]:
    w = check_mixing(mixing)
    k = check_int("steps", steps, lo=0)
    check_choice("kind", kind, GOSSIP_KINDS)
    if spectral_radius is not None:
        spectral_radius = check_real("spectral_radius", spectral_radius, lo=0.0, hi=1.0)
    return w, k, _momenta(w, k, kind, spectral_radius)


def gossip_polynomials(
    mixing: object, steps: int, kind: str = "plain", *, spectral_radius: float | None = None
) -> np.ndarray:
    """The matrices P_t(W), t = 0..K, of the gossip actually run: y^t = P_t(W) y^0.

    ``plain``: P_t = W^t. ``chebyshev``: P_0 = I, P_1 = W, P_{t+1} = γ_t W P_t + (1 − γ_t) P_{t−1}
    with the Chebyshev momenta from λ = max(|λ_2(W)|, |λ_n(W)|) (1 − λ is the spectral
    gap), so P_t(x) = T_t(x/λ)/T_t(1/λ) on W's spectrum (the accelerated gossip of
    arXiv:2206.05091; λ = 0 reduces to plain gossip). Each P_t is symmetric with unit
    row sums.

    Args:
        mixing: (n, n) symmetric doubly-stochastic W.
        steps: K ≥ 0.
        kind: ``"plain"`` or ``"chebyshev"``.
        spectral_radius: λ in [0, 1] to use instead of W's (Chebyshev only).

    Returns:
        Array of shape (K + 1, n, n).

    >>> w = [[0.75, 0.25], [0.25, 0.75]]           # λ = 1/2: P_2(x) = (8x² − 1)/7
    >>> gossip_polynomials(w, 2)[2].tolist()
    [[0.625, 0.375], [0.375, 0.625]]
    >>> [round(float(p), 12) for p in gossip_polynomials(w, 2, "chebyshev")[2, 0]]  # 4/7, 3/7
    [0.571428571429, 0.428571428571]

    """
    w, k, gam = _gossip_args(mixing, steps, kind, spectral_radius)
    n = w.shape[0]
    out = np.empty((k + 1, n, n))
    out[0] = np.eye(n)
    for t in range(k):
        prev = out[t - 1] if t > 0 else out[0]
        out[t + 1] = gam[t] * (w @ out[t]) + (1.0 - gam[t]) * prev
    return out


def gossip(
    mixing: object,
    x: object,
    steps: int,
    kind: str = "plain",
    *,
    spectral_radius: float | None = None,
) -> np.ndarray:
    """Run K gossip steps on node values x: y^0 = x, y^{t+1} = γ_t W y^t + (1 − γ_t) y^{t−1}.

    The vector recursion (what the nodes compute, one message per edge and step); equal
    to P_K(W) x (:func:`gossip_polynomials`).

    Args:
        mixing: (n, n) symmetric doubly-stochastic W.
        x: values of shape (n,) or (n, d).
        steps: K ≥ 0.
        kind: ``"plain"`` or ``"chebyshev"``.
        spectral_radius: optional λ for Chebyshev.

    Returns:
        y^K, the shape of ``x``.

    >>> gossip([[0.5, 0.5], [0.5, 0.5]], [1.0, 3.0], 1).tolist()
    [2.0, 2.0]

    """
    w, k, gam = _gossip_args(mixing, steps, kind, spectral_radius)
    y = np.asarray(x, dtype=float)
    if y.ndim not in (1, 2) or y.shape[0] != w.shape[0] or not np.all(np.isfinite(y)):
        raise ConfigError(
            f"x must be finite of shape ({w.shape[0]},) or ({w.shape[0]}, d); got {y.shape}"
        )
    prev = y
    for t in range(k):
        y, prev = gam[t] * (w @ y) + (1.0 - gam[t]) * prev, y
    return y


def muffliato_rdp_matrix(
    mixing: object,
    steps: int,
    sigma: float,
    *,
    sensitivity: float = 1.0,
    kind: str = "plain",
    exact: bool = True,
    own_noise_known: bool = True,
    spectral_radius: float | None = None,
) -> np.ndarray:
    """Rényi slopes ρ_{u→v} of one noise-then-gossip run: RDP_α(u → v) = α ρ_{u→v}.

    ``exact=True``: the joint Gaussian view (module docstring),
    ρ = (Δ²/(2σ²)) ‖Proj_{row(B_v)} e_u‖², computed from the SVD of B_v with numpy's
    numerical rank (singular values above max(shape)·eps·s_max count). An exact rank
    deficiency (rows that are combinations of others) is correctly dropped; directions
    whose singular values fall below the threshold are unresolvable in double precision
    and dropped too, which can only *under*-state the loss (the true value lies between
    the result and local DP). Against exact rational arithmetic the two agree to 1e-10
    on the Metropolis 3 × 3 grid with K = 3 (tests; also checked on 4 × 4 with K ≤ 6);
    for much larger K the Krylov rows grow ill-conditioned, so prefer local DP as the
    bound there.

    ``own_noise_known=False`` keeps v's column, treating η_v as unknown to v (the
    divergence of the received messages alone).

    ``exact=False``: the paper's per-message sum
    ρ = (Δ²/(2σ²)) Σ_{t=0}^{K} Σ_{w∈N(v)} P_t(W)_{wu}²/‖P_t(W)_{w,:}‖² (full-row norms, as
    published; ``own_noise_known`` does not apply). Not a valid bound in general (see the
    module docstring); kept to compare with the paper.

    Args:
        mixing: (n, n) symmetric doubly-stochastic W; neighbours are its off-diagonal support.
        steps: K ≥ 0 gossip steps (v receives y_w^t for t = 0..K).
        sigma: σ > 0, std of the noise each node adds once.
        sensitivity: Δ ≥ 0.
        kind: ``"plain"`` or ``"chebyshev"``.
        exact: joint view (True) or per-message sum (False).
        own_noise_known: v knows η_v (True, default; the honest reading of "v drew it").
        spectral_radius: optional λ for Chebyshev.

    Returns:
        (n, n) array, entry [u, v] = ρ_{u→v}; the diagonal is 0 by convention.

    >>> w = [[2/3, 1/3, 0], [1/3, 1/3, 1/3], [0, 1/3, 2/3]]   # path 0 - 1 - 2
    >>> muffliato_rdp_matrix(w, 0, 1.0).tolist()               # K = 0: neighbours only
    [[0.0, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.0]]

    """
    w, k, _ = _gossip_args(mixing, steps, kind, spectral_radius)
    s = check_real("sigma", sigma, lo=0.0, lo_open=True)
    sens = check_real("sensitivity", sensitivity, lo=0.0)
    polys = gossip_polynomials(w, k, kind, spectral_radius=spectral_radius)
    n = w.shape[0]
    out = np.zeros((n, n))
    for v in range(n):
        nbrs = np.nonzero((w[v] > 0) & (np.arange(n) != v))[0]
        if nbrs.size == 0:
            continue
        rows = polys[:, nbrs, :].reshape(-1, n)  # ((K+1)|N(v)|, n)
        if not exact:
            out[:, v] = np.sum(rows**2 / np.sum(rows**2, axis=1, keepdims=True), axis=0)
            continue
        keep = np.arange(n) != v if own_noise_known else np.ones(n, dtype=bool)
        b = rows[:, keep]
        _, sv, vt = np.linalg.svd(b, full_matrices=False)
        rank = int(np.sum(sv > sv[0] * max(b.shape) * np.finfo(float).eps)) if sv[0] > 0 else 0
        out[keep, v] = np.minimum(np.sum(vt[:rank] ** 2, axis=0), 1.0)
    np.fill_diagonal(out, 0.0)
    return 0.5 * (sens / s) ** 2 * out


#: Smallest s_min/s_max of B_v at which the floating-point row space is trusted.
CERTIFIED_CONDITION = 1e-8


def certified_view_matrix(
    mixing: object, steps: int, kind: str = "plain", *, spectral_radius: float | None = None
) -> np.ndarray:
    """Upper bounds f_{u→v} on ‖Proj_{row(B_v)} e_u‖² that floating point can vouch for.

    The exact view's loss is ρ_{u→v} = (Δ²/(2σ²)) ‖Proj_{row(B_v)} e_u‖² (module doc), a
    quantity that jumps with the rank of B_v: a direction of row(B_v) counts in full however
    small its singular value, so a rounding-level singular value cannot be told from a zero
    one, and :func:`muffliato_rdp_matrix`'s numerical rank may under-state the loss. Here:

    * u farther than K + 1 hops from v: f = 0 exactly (no received row involves u: B_v's
      column u is zero by the graph's structure, not by arithmetic);
    * otherwise, with the columns of the nodes within K + 1 hops (v's own removed), B_v is
      certified when it has full rank r = min(rows, columns) with s_r ≥ 10⁻⁸ s_1: its
      computed SVD is exact for B_v + E, ‖E‖ ≤ ε_B = 10 (K + 1) max(shape) · eps · s_1
      (backward-stable SVD and the rounding of P_t(W)), so the rank is r in exact
      arithmetic too and the row spaces differ by an angle θ with sin θ ≤ ε_B/(s_r − ε_B)
      (Wedin's theorem); then f = min(1, ‖V_r e_u‖² + sin θ) (|‖P e‖² − ‖P′ e‖²| ≤ ‖P − P′‖
      = sin θ for projectors of equal rank);
    * otherwise (B_v rank-deficient or ill-conditioned): f = 1, local DP, always valid.

    So ρ_{u→v} ≤ (Δ²/(2σ²)) f_{u→v} for the matrix as given, whatever the rounding.

    Args:
        mixing: (n, n) symmetric doubly-stochastic W.
        steps: K ≥ 0.
        kind: ``"plain"`` or ``"chebyshev"``.
        spectral_radius: optional λ for Chebyshev.

    Returns:
        (n, n) array, entry [u, v] = f_{u→v} ∈ [0, 1] (diagonal 0).

    >>> w = [[2/3, 1/3, 0], [1/3, 1/3, 1/3], [0, 1/3, 2/3]]   # path, K = 1: local DP
    >>> certified_view_matrix(w, 1).tolist()
    [[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]]

    """
    w, k, _ = _gossip_args(mixing, steps, kind, spectral_radius)
    polys = gossip_polynomials(w, k, kind, spectral_radius=spectral_radius)
    n = w.shape[0]
    support = (w != 0) & ~np.eye(n, dtype=bool)
    dist = shortest_path((support | support.T).astype(float), unweighted=True, directed=False)
    out = np.zeros((n, n))
    for v in range(n):
        nbrs = np.nonzero(support[v])[0]
        cols = (dist[:, v] <= k + 1) & (np.arange(n) != v)
        if nbrs.size == 0 or not cols.any():
            continue
        b = polys[:, nbrs, :].reshape(-1, n)[:, cols]
        _, sv, vt = np.linalg.svd(b, full_matrices=False)
        r = min(b.shape)
        if sv[0] == 0 or sv[r - 1] < CERTIFIED_CONDITION * sv[0]:
            out[cols, v] = 1.0
            continue
        err = 10.0 * (k + 1) * max(b.shape) * np.finfo(float).eps * sv[0]
        sin_theta = err / (sv[r - 1] - err)
        out[cols, v] = np.minimum(np.sum(vt[:r] ** 2, axis=0) + sin_theta, 1.0)
    np.fill_diagonal(out, 0.0)
    return out


def muffliato_epsilon_matrix(
    mixing: object,
    steps: int,
    sigma: float,
    *,
    sensitivity: float = 1.0,
    kind: str = "plain",
    exact: bool = True,
    alpha: float | None = None,
    rounds: int = 1,
    delta: float | None = None,
    own_noise_known: bool = True,
    spectral_radius: float | None = None,
) -> np.ndarray:
    """ε_{u→v} of T noise-then-gossip rounds, at a Rényi order α or as (ε, δ).

    Give exactly one of ``alpha`` (returns the RDP ε = α T ρ_{u→v}: RDP adds up over
    rounds) or ``delta`` (returns the (ε, δ) ε). For (ε, δ): the per-round view is one
    Gaussian mechanism with sensitivity-to-noise ratio μ = √(2ρ) (exact=True); T rounds
    with fresh noise compose to a Gaussian with ratio √(2Tρ), converted exactly by the
    analytic Gaussian mechanism (:func:`.decentralized.gaussian_composition_epsilon`).
    For ``exact=False`` the same conversion is what the paper's per-message argument
    would give (each message a Gaussian mechanism, composed); it inherits that
    argument's flaw. The composition assumes each round's view is a fresh Gaussian
    mechanism given the past (T independent averaging runs, or the paper's per-iteration
    accounting of Muffliato-GD); the iterates coupling the rounds of an optimization are
    not a whole-transcript analysis.

    Args:
        mixing: (n, n) symmetric doubly-stochastic W.
        steps: K ≥ 0.
        sigma: σ > 0.
        sensitivity: Δ ≥ 0.
        kind: ``"plain"`` or ``"chebyshev"``.
        exact: joint view (True) or the paper's per-message sum (False).
        own_noise_known: as in :func:`muffliato_rdp_matrix`.
        spectral_radius: optional λ for Chebyshev.
        alpha: Rényi order α > 1.
        rounds: T ≥ 1.
        delta: δ in (0, 1).

    Returns:
        (n, n) array, entry [u, v] = ε_{u→v} (diagonal 0).

    >>> w = [[2/3, 1/3, 0], [1/3, 1/3, 1/3], [0, 1/3, 2/3]]   # path, K = 1, Δ = σ = 1
    >>> muffliato_epsilon_matrix(w, 1, 1.0, alpha=2.0, exact=True).round(6).tolist()
    [[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]]
    >>> muffliato_epsilon_matrix(w, 1, 1.0, alpha=2.0, exact=False).round(6).tolist()
    [[0.0, 1.8, 0.333333], [1.333333, 0.0, 1.333333], [0.333333, 1.8, 0.0]]

    """
    t = check_int("rounds", rounds, lo=1)
    if (alpha is None) == (delta is None):
        raise ConfigError(
            f"give exactly one of alpha and delta; got alpha={alpha!r}, delta={delta!r}"
        )
    rho = muffliato_rdp_matrix(
        mixing,
        steps,
        sigma,
        sensitivity=sensitivity,
        kind=kind,
        exact=exact,
        own_noise_known=own_noise_known,
        spectral_radius=spectral_radius,
    )
    if alpha is not None:
        a = check_real("alpha", alpha, lo=1.0, lo_open=True)
        return a * t * rho
    out = np.asarray(gaussian_composition_epsilon(rho, t, delta), dtype=float)
    np.fill_diagonal(out, 0.0)
    return out


def worst_pair_epsilon(matrix: object) -> float:
    """max_{u ≠ v} ε_{u→v} of an (n, n) matrix (the diagonal is ignored).

    >>> worst_pair_epsilon([[9.0, 0.5], [0.25, 9.0]])
    0.5
    """
    m = _check_square(matrix)
    if m.shape[0] < 2:
        return 0.0
    return float(np.max(m[~np.eye(m.shape[0], dtype=bool)]))


def _check_square(matrix: object) -> np.ndarray:
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or not np.all(np.isfinite(m)):
        raise ConfigError(f"matrix must be a finite square array; got shape {m.shape}")
    return m


@dataclasses.dataclass(frozen=True)
class DistanceProfile:
    """ε_{u→v} over pairs u ≠ v grouped by graph distance d(u, v).

    Attributes:
        distances: (D,) int array of the distances present (1, 2, …; unreachable omitted).
        max: (D,) largest ε at each distance.
        mean: (D,) mean ε at each distance.
        count: (D,) number of ordered pairs at each distance.

    """

    distances: np.ndarray
    max: np.ndarray
    mean: np.ndarray
    count: np.ndarray


def distance_profile(matrix: object, graph: object) -> DistanceProfile:
    """Max and mean of ε_{u→v} at each hop distance d(u, v) (Muffliato's claim: it decays).

    Args:
        matrix: (n, n) ε or ρ matrix, entry [u, v] for u → v.
        graph: (n, n) 0/1 adjacency, or a mixing matrix (its off-diagonal support is used).

    Returns:
        :class:`DistanceProfile`.

    >>> p = distance_profile([[0, 2, 1], [2, 0, 2], [1, 2, 0]], [[0, 1, 0], [1, 0, 1], [0, 1, 0]])
    >>> p.distances.tolist(), p.max.tolist(), p.mean.tolist(), p.count.tolist()
    ([1, 2], [2.0, 1.0], [2.0, 1.0], [4, 2])

    """
    m = _check_square(matrix)
    g = np.asarray(graph, dtype=float)
    if g.shape != m.shape:
        raise ConfigError(f"graph must have the shape of matrix {m.shape}; got {g.shape}")
    support = (g != 0) & ~np.eye(g.shape[0], dtype=bool)
    adj = check_adjacency(support | support.T, name="graph")
    dist = shortest_path(adj.astype(float), unweighted=True, directed=False)
    off = ~np.eye(m.shape[0], dtype=bool) & np.isfinite(dist)
    ds = np.unique(dist[off]).astype(int)
    mx = np.array([m[off & (dist == d)].max() for d in ds])
    mean = np.array([m[off & (dist == d)].mean() for d in ds])
    cnt = np.array([int(np.sum(off & (dist == d))) for d in ds])
    return DistanceProfile(distances=ds, max=mx, mean=mean, count=cnt)
