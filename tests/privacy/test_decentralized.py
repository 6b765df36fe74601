"""Tests for the decentralized accountants (DECOR SecLDP, Muffliato gossip, covariance design).

Ladder: closed forms derived by hand (2-node, complete graph, path) → limit cases
(σ_cor = 0, K = 0, coalition = all neighbours) → independent slow references (dense
linear algebra, numerical integration of the hockey-stick divergence, Monte-Carlo
privacy loss from dense Gaussian densities, dp_accounting's PLD) → hypothesis
properties → bad input.
"""

from __future__ import annotations

import math
from fractions import Fraction

import dp_accounting
import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.polynomial import chebyshev
from scipy import integrate, stats

from pgfl.privacy.accounting import decentralized as dec
from pgfl.privacy.accounting import gossip as gos
from pgfl.validation import ConfigError

DELTA = 1e-5
FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------ graphs
def adjacency_of(graph: nx.Graph) -> np.ndarray:
    return nx.to_numpy_array(graph, nodelist=sorted(graph.nodes()))


def ring(n: int) -> np.ndarray:
    return adjacency_of(nx.cycle_graph(n))


def path(n: int) -> np.ndarray:
    return adjacency_of(nx.path_graph(n))


def complete(n: int) -> np.ndarray:
    return adjacency_of(nx.complete_graph(n))


def grid(k: int) -> np.ndarray:
    return adjacency_of(nx.convert_node_labels_to_integers(nx.grid_2d_graph(k, k)))


def geometric() -> np.ndarray:
    g = nx.random_geometric_graph(20, 0.4, seed=7)
    assert nx.is_connected(g)
    return adjacency_of(g)


def metropolis(adjacency: np.ndarray) -> np.ndarray:
    """Metropolis–Hastings weights 1/(1 + max(d_i, d_j)), written out independently."""
    deg = adjacency.sum(axis=1)
    n = adjacency.shape[0]
    w = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if adjacency[i, j]:
                w[i, j] = 1.0 / (1.0 + max(deg[i], deg[j]))
        w[i, i] = 1.0 - w[i].sum()
    return w


def lazy_ring(n: int, self_weight: float) -> np.ndarray:
    w = self_weight * np.eye(n)
    for i in range(n):
        w[i, (i + 1) % n] += (1 - self_weight) / 2
        w[i, (i - 1) % n] += (1 - self_weight) / 2
    return w


@st.composite
def connected_graphs(draw, min_n: int = 2, max_n: int = 9) -> np.ndarray:
    """A random spanning tree plus random extra edges: every connected graph can occur."""
    n = draw(st.integers(min_n, max_n))
    a = np.zeros((n, n))
    for i in range(1, n):
        j = draw(st.integers(0, i - 1))
        a[i, j] = a[j, i] = 1
    extra = draw(st.lists(st.booleans(), min_size=n * (n - 1) // 2, max_size=n * (n - 1) // 2))
    k = 0
    for i in range(n):
        for j in range(i + 1, n):
            if extra[k]:
                a[i, j] = a[j, i] = 1
            k += 1
    return a


def edge_sum_covariance(adjacency, sigma_cdp, sigma_cor, honest):
    """Σ_H built edge by edge (not through D − A): σ_cdp² I + σ_cor² Σ_e (e_i − e_j)(e_i − e_j)ᵀ."""
    h = len(honest)
    pos = {node: k for k, node in enumerate(honest)}
    cov = sigma_cdp**2 * np.eye(h)
    for i in honest:
        for j in honest:
            if i < j and adjacency[i, j]:
                d = np.zeros(h)
                d[pos[i]], d[pos[j]] = 1.0, -1.0
                cov += sigma_cor**2 * np.outer(d, d)
    return cov


# ============================================================== 1. DECOR, pairwise noise
def test_pairwise_noise_matches_a_loop_and_cancels():
    rng = np.random.default_rng(1)
    a = geometric()
    edges = dec.edges_of(a)
    draws = rng.normal(scale=1e3, size=(edges.shape[0], 5))
    noise = dec.pairwise_noise(edges, draws, n=a.shape[0])
    ref = np.zeros((a.shape[0], 5))
    for k, (i, j) in enumerate(edges):  # v_ij = draw, v_ji = −draw
        ref[i] += draws[k]
        ref[j] -= draws[k]
    np.testing.assert_allclose(noise, ref, rtol=0, atol=1e-9)
    assert np.max(np.abs(noise.sum(axis=0))) <= 1e-12 * np.abs(draws).sum()
    assert np.max(np.abs(noise)) > 100.0  # the per-node noise itself is large


@given(
    st.lists(
        st.tuples(st.integers(0, 7), st.integers(0, 7)).filter(lambda e: e[0] != e[1]),
        max_size=20,
    ),
    st.integers(0, 2**32 - 1),
)
@FAST
def test_pairwise_noise_sums_to_zero_for_any_edge_list(edges, seed):
    draws = np.random.default_rng(seed).normal(size=len(edges))
    noise = dec.pairwise_noise(np.asarray(edges, dtype=int).reshape(-1, 2), draws, n=8)
    assert abs(noise.sum()) <= 1e-12 * max(1.0, np.abs(draws).sum())


def test_covariance_is_laplacian_form_and_matches_edge_sum():
    a = grid(3)
    for coalition in [(), (4,), (0, 8), (1, 3, 5, 7)]:
        honest = [i for i in range(9) if i not in coalition]
        got = dec.pairwise_covariance(a, 0.7, 1.3, coalition)
        np.testing.assert_allclose(got, edge_sum_covariance(a, 0.7, 1.3, honest), atol=1e-12)


def test_covariance_of_residual_noise_monte_carlo():
    # Simulate DECOR's noise with the real sampler; subtract what coalition {2} knows.
    rng = np.random.default_rng(20240501)
    a = grid(2) + 0.0  # 4-cycle 0-1-3-2-0 plus nothing
    a[0, 3] = a[3, 0] = 1  # one chord: 0-3
    edges = dec.edges_of(a)
    s_cdp, s_cor, draws_n = 0.8, 1.5, 200_000
    bar = rng.normal(scale=s_cdp, size=(4, draws_n))
    pair = rng.normal(scale=s_cor, size=(edges.shape[0], draws_n))
    noise = bar + dec.pairwise_noise(edges, pair, n=4)
    known = np.zeros_like(noise)  # coalition {2}: every edge touching 2
    for k, (i, j) in enumerate(edges):
        if 2 in (i, j):
            known[i] += pair[k]
            known[j] -= pair[k]
    honest = [0, 1, 3]
    residual = (noise - known)[honest]
    emp = np.cov(residual)
    theory = dec.pairwise_covariance(a, s_cdp, s_cor, coalition=[2])
    # each entry's standard error is ≤ √(2/N)·(largest variance): allow 6 of them
    se = math.sqrt(2 / draws_n)
    np.testing.assert_allclose(emp, theory, rtol=0, atol=6 * se * theory.max())
    full_theory = dec.pairwise_covariance(a, s_cdp, s_cor)
    full = np.cov(noise)
    np.testing.assert_allclose(full, full_theory, rtol=0, atol=6 * se * full_theory.max())
    assert full[0, 2] == pytest.approx(-(s_cor**2), abs=0.1)  # the known edge 0-2 correlates
    assert full[0, 0] - emp[0, 0] == pytest.approx(s_cor**2, abs=0.15)  # and is removed


# ------------------------------------------------------------------------ closed forms
def test_two_node_closed_form():
    # Σ = [[a+c, −c], [−c, a+c]], det = a(a+2c): [Σ⁻¹]_00 = (a+c)/(a(a+2c))
    for s_cdp, s_cor, sens in [(1.0, 1.0, 1.0), (0.3, 2.0, 1.7), (2.0, 0.1, 0.5)]:
        a, c = s_cdp**2, s_cor**2
        want = 0.5 * sens**2 * (a + c) / (a * (a + 2 * c))
        got = dec.secldp_rdp_slopes([[0, 1], [1, 0]], s_cdp, s_cor, sens)
        np.testing.assert_allclose(got, [want, want], rtol=1e-13)


@pytest.mark.parametrize("n", [2, 3, 5, 16])
def test_complete_graph_eigen_formula_and_limit(n):
    # L(K_n) = nI − J: eigenvalue 0 on 1, n on 1⊥, so
    # [Σ⁻¹]_ii = 1/(n σ_cdp²) + (1 − 1/n)/(σ_cdp² + n σ_cor²)
    s_cdp = 1.3
    central = 1.0 / (n * s_cdp**2)
    previous = math.inf
    for s_cor in [0.0, 0.5, 1.0, 10.0, 1e3, 1e6]:
        want = central + (1 - 1 / n) / (s_cdp**2 + n * s_cor**2)
        got = 2 * dec.secldp_rdp_slope(complete(n), s_cdp, s_cor)
        assert got == pytest.approx(want, rel=1e-12)
        assert central < got < previous  # decreases towards central DP, from above
        previous = got
    assert 2 * dec.secldp_rdp_slope(complete(n), s_cdp, 1e6) == pytest.approx(central, rel=1e-10)


def test_ring_approaches_central_dp_at_the_rate_of_the_pseudoinverse():
    # [Σ⁻¹]_ii = 1/(nσ²) + [L⁺]_ii/σ_cor² + O(σ_cor⁻⁴); for the n-cycle [L⁺]_ii = (n² − 1)/(12n)
    n, s_cor = 16, 300.0
    lplus = np.linalg.pinv(dec.laplacian(ring(n)))[0, 0]
    assert lplus == pytest.approx((n * n - 1) / (12 * n), rel=1e-10)
    got = 2 * dec.secldp_rdp_slope(ring(n), 1.0, s_cor)
    assert got - 1 / n == pytest.approx(lplus / s_cor**2, rel=1e-3)


def test_sigma_cor_zero_is_local_dp():
    for a in [ring(7), grid(3), complete(4), geometric()]:
        got = dec.secldp_rdp_slopes(a, 0.9, 0.0, sensitivity=2.0)
        np.testing.assert_allclose(got, 4.0 / (2 * 0.81), rtol=1e-13)


def test_coalition_holding_all_neighbours_leaves_local_dp_at_sigma_cdp():
    star = adjacency_of(nx.star_graph(5))  # centre 0
    got = dec.secldp_rdp_slopes(star, 2.0, 50.0, coalition=[0])
    assert np.isnan(got[0])
    np.testing.assert_allclose(got[1:], 1.0 / (2 * 4.0), rtol=1e-13)
    # the middle of a path whose two neighbours collude
    assert dec.secldp_rdp_slopes(path(5), 2.0, 50.0, coalition=[1, 3])[2] == pytest.approx(1 / 8)
    # one honest neighbour left: much better than local DP
    assert dec.secldp_rdp_slopes(path(5), 2.0, 50.0, coalition=[1])[2] < 0.6 / 8


def test_coalition_equals_removing_the_nodes():
    a = geometric()
    coalition = [0, 3, 11]
    honest = [i for i in range(a.shape[0]) if i not in coalition]
    with_c = dec.secldp_rdp_slopes(a, 1.0, 4.0, coalition=coalition)
    sub = dec.secldp_rdp_slopes(a[np.ix_(honest, honest)], 1.0, 4.0)
    np.testing.assert_allclose(with_c[honest], sub, rtol=1e-12)
    dense = 0.5 * np.diag(np.linalg.inv(edge_sum_covariance(a, 1.0, 4.0, honest)))
    np.testing.assert_allclose(sub, dense, rtol=1e-10)


@given(connected_graphs(), st.floats(0.1, 3.0), st.floats(0.0, 30.0))
@FAST
def test_spectral_bound_holds_and_is_tight_on_complete_graphs(a, s_cdp, s_cor):
    exact = dec.secldp_rdp_slope(a, s_cdp, s_cor)
    bound = dec.secldp_spectral_bound(a, s_cdp, s_cor)
    # independent: algebraic connectivity from networkx, inverse by dense algebra
    n = a.shape[0]
    conn = np.linalg.eigvalsh(np.diag(a.sum(1)) - a)[1] if n > 1 else 0.0
    by_hand = 0.5 * (1 / (n * s_cdp**2) + (1 - 1 / n) / (s_cdp**2 + s_cor**2 * conn))
    assert bound == pytest.approx(by_hand, rel=1e-6)
    dense = 0.5 * np.max(
        np.diag(np.linalg.inv(s_cdp**2 * np.eye(n) + s_cor**2 * (np.diag(a.sum(1)) - a)))
    )
    assert exact == pytest.approx(dense, rel=1e-9)
    assert exact <= bound * (1 + 1e-9)
    assert exact >= 0.5 / (n * s_cdp**2) * (1 - 1e-12)  # never below central DP
    if a.sum() == n * (n - 1):
        assert exact == pytest.approx(bound, rel=1e-9)


@given(connected_graphs(min_n=3), st.data())
@FAST
def test_a_larger_coalition_never_helps_an_honest_node(a, data):
    n = a.shape[0]
    c = data.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n - 2))
    extra = data.draw(st.integers(0, n - 1).filter(lambda x: x not in c))
    before = dec.secldp_rdp_slopes(a, 1.0, 3.0, coalition=c)
    after = dec.secldp_rdp_slopes(a, 1.0, 3.0, coalition=[*c, extra])
    honest = [i for i in range(n) if i not in c and i != extra]
    assert np.all(after[honest] >= before[honest] * (1 - 1e-10))


# ------------------------------------------------------------------ ε over T rounds
def hockey_stick_numeric(mu: float, eps: float) -> float:
    """δ(ε) of N(μ, 1) vs N(0, 1) by numerical integration of (p − e^ε q)_+ (no Φ formula)."""
    start = eps / mu + mu / 2  # p/q = exp(μx − μ²/2) ≥ e^ε from here on

    def integrand(x):
        return stats.norm.pdf(x - mu) - math.exp(eps) * stats.norm.pdf(x)

    value, _ = integrate.quad(integrand, start, start + 40.0, epsabs=1e-15, epsrel=1e-10, limit=200)
    return value


@pytest.mark.parametrize("s_cor,rounds", [(0.0, 1), (1.0, 10), (5.0, 200)])
def test_exact_epsilon_solves_the_numerical_hockey_stick(s_cor, rounds):
    a = ring(8)
    eps = dec.secldp_epsilon(a, 1.0, s_cor, rounds=rounds, delta=DELTA)
    inv_ii = np.max(np.diag(np.linalg.inv(edge_sum_covariance(a, 1.0, s_cor, list(range(8))))))
    mu = math.sqrt(rounds * inv_ii)  # the composed ratio √(T Δ² [Σ⁻¹]_ii)
    assert hockey_stick_numeric(mu, eps) == pytest.approx(DELTA, rel=1e-5)
    assert hockey_stick_numeric(mu, 0.98 * eps) > 1.05 * DELTA  # it is tight, not just valid


def test_exact_epsilon_agrees_with_dp_accounting_pld():
    a, rounds = grid(3), 50
    rho = dec.secldp_rdp_slope(a, 1.0, 2.0)
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.GaussianDpEvent(1.0 / math.sqrt(2 * rho)), rounds)
    pld = acc.get_epsilon(DELTA)
    exact = dec.secldp_epsilon(a, 1.0, 2.0, rounds=rounds, delta=DELTA)
    assert exact == pytest.approx(pld, rel=2e-3)


def test_transcript_privacy_loss_monte_carlo():
    # Two rounds on the path 0-1-2, noise drawn by the real sampler, privacy loss from the
    # dense 6-dimensional Gaussian densities; δ̂(ε) = E_P[(1 − e^{ε − L})_+].
    rng = np.random.default_rng(7)
    a, s_cdp, s_cor, rounds, samples, target = path(3), 1.0, 1.0, 2, 200_000, 0.05
    cov = edge_sum_covariance(a, s_cdp, s_cor, [0, 1, 2])
    node = int(np.argmax(np.diag(np.linalg.inv(cov))))
    edges = dec.edges_of(a)
    shift = np.zeros(3 * rounds)
    shift[[node + 3 * r for r in range(rounds)]] = 1.0  # Δ = 1 in node's coordinate each round
    draws = []
    for _ in range(rounds):
        bar = rng.normal(scale=s_cdp, size=(3, samples))
        pair = rng.normal(scale=s_cor, size=(edges.shape[0], samples))
        draws.append(bar + dec.pairwise_noise(edges, pair, n=3))
    y = np.concatenate(draws).T + shift  # samples from P (the shifted world)
    big = np.kron(np.eye(rounds), cov)
    loss = stats.multivariate_normal(shift, big).logpdf(y) - stats.multivariate_normal(
        np.zeros(3 * rounds), big
    ).logpdf(y)

    def delta_hat(e):
        return float(np.mean(np.clip(1 - np.exp(e - loss), 0, None)))

    eps = dec.secldp_epsilon(a, s_cdp, s_cor, rounds=rounds, delta=target)
    assert delta_hat(eps) == pytest.approx(target, abs=0.0025)  # ≈ 5 standard errors
    assert delta_hat(0.8 * eps) > target + 0.006  # a 20% smaller ε is clearly not enough
    assert delta_hat(dec.secldp_epsilon_rdp(a, s_cdp, s_cor, rounds=rounds, delta=target)) < target


@given(
    connected_graphs(),
    st.floats(0.2, 3.0),
    st.floats(0.0, 20.0),
    st.integers(1, 500),
    st.floats(1e-9, 0.1),
)
@FAST
def test_exact_epsilon_never_above_the_rdp_conversion(a, s_cdp, s_cor, rounds, delta):
    exact = dec.secldp_epsilon(a, s_cdp, s_cor, rounds=rounds, delta=delta)
    rdp = dec.secldp_epsilon_rdp(a, s_cdp, s_cor, rounds=rounds, delta=delta)
    assert 0 <= exact <= rdp * (1 + 1e-9)


def test_rdp_conversion_closed_form():
    # ρ = 1/2 (σ_cor = 0, σ = Δ = 1); T = 8, ln(1/δ) = 2: ε = 4 + 2√8
    got = dec.secldp_epsilon_rdp(ring(5), 1.0, 0.0, rounds=8, delta=math.exp(-2))
    assert got == pytest.approx(4 + 2 * math.sqrt(8), rel=1e-13)


# ============================================================== 2. Muffliato (gossip)
GOSSIP_CASES = {
    "ring": lazy_ring(9, 1 / 3),
    "path": metropolis(path(7)),
    "grid": metropolis(grid(3)),
    "geometric": metropolis(geometric()),
}


@pytest.mark.parametrize("name", sorted(GOSSIP_CASES))
def test_gossip_polynomials_plain_and_chebyshev_closed_forms(name):
    w = GOSSIP_CASES[name]
    k = 7
    plain = gos.gossip_polynomials(w, k)
    for t in range(k + 1):
        np.testing.assert_allclose(plain[t], np.linalg.matrix_power(w, t), atol=1e-13)
    # Chebyshev: P_t(x) = T_t(x/λ)/T_t(1/λ) on W's spectrum
    lam, vec = np.linalg.eigh(w)
    rad = max(abs(lam[0]), abs(np.sort(lam)[-2]))
    cheb = gos.gossip_polynomials(w, k, "chebyshev")
    for t in range(k + 1):
        coef = np.zeros(t + 1)
        coef[t] = 1.0
        vals = chebyshev.chebval(lam / rad, coef) / chebyshev.chebval(1 / rad, coef)
        np.testing.assert_allclose(cheb[t], (vec * vals) @ vec.T, atol=1e-11)
        np.testing.assert_allclose(cheb[t].sum(axis=1), 1.0, atol=1e-12)
    # the minimax property: on 1⊥, Chebyshev contracts at least as much as W^K
    off = np.eye(w.shape[0]) - 1 / w.shape[0]
    assert np.linalg.norm(cheb[k] @ off, 2) <= np.linalg.norm(plain[k] @ off, 2) + 1e-12
    assert np.linalg.norm(cheb[k] @ off, 2) == pytest.approx(
        1 / chebyshev.chebval(1 / rad, [0] * k + [1]), rel=1e-6
    )


@given(st.sampled_from(sorted(GOSSIP_CASES)), st.integers(0, 12), st.sampled_from(gos.GOSSIP_KINDS))
@FAST
def test_gossip_recursion_equals_the_polynomial(name, k, kind):
    w = GOSSIP_CASES[name]
    x = np.random.default_rng(k).normal(size=(w.shape[0], 3))
    want = gos.gossip_polynomials(w, k, kind)[k] @ x
    np.testing.assert_allclose(gos.gossip(w, x, k, kind), want, atol=1e-11)
    np.testing.assert_allclose(gos.gossip(w, x[:, 0], k, kind), want[:, 0], atol=1e-11)
    np.testing.assert_allclose(gos.gossip(w, x, k, kind).mean(axis=0), x.mean(axis=0), atol=1e-12)


def view_divergence_reference(w, k, kind, u, v):
    """Slow reference: the joint Gaussian of (received messages, η_v), pseudo-inverse.

    Y = A(x + η) and v's own η_v; Cov = σ²[[AAᵀ, A e_v], [e_vᵀAᵀ, 1]] (σ = 1), the shift for
    u ≠ v is (A e_u, 0); ρ = ½ sᵀ Cov⁺ s.
    """
    polys = gos.gossip_polynomials(w, k, kind)
    n = w.shape[0]
    rows = [polys[t, nb] for t in range(k + 1) for nb in range(n) if nb != v and w[v, nb] > 0]
    a = np.array(rows)
    ev = np.zeros(n)
    ev[v] = 1.0
    full = np.vstack([a, ev])  # the view is full @ (x + η) with its last entry noise-only
    shift = np.concatenate([a[:, u], [0.0]])
    cov = full @ full.T
    return 0.5 * shift @ np.linalg.pinv(cov, rcond=1e-10, hermitian=True) @ shift


@pytest.mark.parametrize("name", ["path", "grid", "geometric"])
@pytest.mark.parametrize("kind", gos.GOSSIP_KINDS)
def test_exact_matrix_matches_the_pseudoinverse_reference(name, kind):
    w = GOSSIP_CASES[name]
    k = 2
    got = gos.muffliato_rdp_matrix(w, k, 1.0, kind=kind, exact=True)
    n = w.shape[0]
    for u in range(0, n, 3):
        for v in range(1, n, 2):
            if u != v:
                assert got[u, v] == pytest.approx(
                    view_divergence_reference(w, k, kind, u, v), abs=1e-8
                )


def _rref(rows):
    """Reduced row echelon form over the rationals (nonzero rows only)."""
    rows = [list(r) for r in rows]
    r = 0
    for c in range(len(rows[0])):
        p = next((i for i in range(r, len(rows)) if rows[i][c] != 0), None)
        if p is None:
            continue
        rows[r], rows[p] = rows[p], rows[r]
        rows[r] = [x / rows[r][c] for x in rows[r]]
        for i in range(len(rows)):
            if i != r and rows[i][c] != 0:
                f = rows[i][c]
                rows[i] = [a - f * b for a, b in zip(rows[i], rows[r], strict=True)]
        r += 1
        if r == len(rows):
            break
    return rows[:r]


def rational_view_divergence(graph: nx.Graph, k: int, u: int, v: int) -> Fraction:
    """‖Proj_{row(B_v)} e_u‖² in exact rational arithmetic (Metropolis weights, plain gossip)."""
    n = graph.number_of_nodes()
    deg = dict(graph.degree())
    w = [[Fraction(0)] * n for _ in range(n)]
    for i, j in graph.edges():
        w[i][j] = w[j][i] = Fraction(1, 1 + max(deg[i], deg[j]))
    for i in range(n):
        w[i][i] = 1 - sum(w[i][j] for j in range(n) if j != i)
    powers = [[[Fraction(int(i == j)) for j in range(n)] for i in range(n)]]
    for _ in range(k):
        q = powers[-1]
        powers.append(
            [[sum(w[i][m] * q[m][j] for m in range(n)) for j in range(n)] for i in range(n)]
        )
    nbrs = [x for x in range(n) if x != v and w[v][x] != 0]
    rows = [[powers[t][x][c] for c in range(n) if c != v] for t in range(k + 1) for x in nbrs]
    basis = _rref(rows)
    col = u if u < v else u - 1
    gram = [
        [sum(a * b for a, b in zip(p, q, strict=True)) for q in basis] + [p[col]] for p in basis
    ]
    coef = [row[-1] for row in _rref(gram)]
    return sum(c * p[col] for c, p in zip(coef, basis, strict=True))


def test_exact_matrix_matches_rational_arithmetic():
    # the floating-point rank decision against exact arithmetic on a 3×3 grid, K = 3
    g = nx.convert_node_labels_to_integers(nx.grid_2d_graph(3, 3))
    got = gos.muffliato_rdp_matrix(metropolis(adjacency_of(g)), 3, 1.0) / 0.5
    values = set()
    for u, v in [(0, 8), (8, 0), (0, 5), (1, 7), (4, 0), (2, 6), (3, 5)]:
        want = rational_view_divergence(g, 3, u, v)
        assert got[u, v] == pytest.approx(float(want), abs=1e-10)
        values.add(want)
    assert any(0 < x < 1 for x in values)  # fractional losses occur, not only 0 and 1


def test_k0_exact_and_sum_are_local_dp_on_neighbours_only():
    for w in GOSSIP_CASES.values():
        support = (w > 0) & ~np.eye(w.shape[0], dtype=bool)
        for exact in (True, False):
            got = gos.muffliato_rdp_matrix(w, 0, 2.0, sensitivity=3.0, exact=exact)
            np.testing.assert_allclose(got, np.where(support, 9.0 / 8.0, 0.0), atol=1e-12)


def test_path_k1_closed_form_and_counterexample_to_the_per_message_sum():
    # path 0-1-2, Metropolis weights, K = 1: node 2 reads y_1^0 and
    # y_1^1 = (y_0^0 + y_1^0 + y_2^0)/3 and knows y_2^0, so it learns y_0^0 = x_0 + η_0.
    w = metropolis(path(3))
    exact = gos.muffliato_rdp_matrix(w, 1, 1.0, exact=True)
    paper = gos.muffliato_rdp_matrix(w, 1, 1.0, exact=False)
    assert exact[0, 2] == pytest.approx(0.5)  # local DP
    assert paper[0, 2] == pytest.approx(0.5 * (1 / 9) / (3 / 9))  # 1/6
    assert exact[0, 2] > 2.9 * paper[0, 2]
    # where the sum does dominate: u a neighbour of v (t = 0 already leaks all)
    assert paper[1, 2] == pytest.approx(0.5 * (1 + 1 / 3))
    assert exact[1, 2] == pytest.approx(0.5)
    assert exact[1, 2] < paper[1, 2]


def test_ring_counterexample_also_without_knowing_own_noise():
    # ring of 16, weights 1/3, K = 1, d(u, v) = 2: the paper charges 1/3 of local DP;
    # the received messages alone give 2/3 (GLS on y_0+η_2 and η_2+y_4), with η_v known 1.
    w = lazy_ring(16, 1 / 3)
    ldp = 0.5
    paper = gos.muffliato_rdp_matrix(w, 1, 1.0, exact=False)[0, 2] / ldp
    blind = gos.muffliato_rdp_matrix(w, 1, 1.0, own_noise_known=False)[0, 2] / ldp
    known = gos.muffliato_rdp_matrix(w, 1, 1.0)[0, 2] / ldp
    assert (paper, blind, known) == pytest.approx((1 / 3, 2 / 3, 1.0))


@pytest.mark.parametrize("k", [0, 1, 3, 6])
def test_ring_exact_is_local_dp_within_k_plus_one_hops_and_zero_beyond(k):
    # peeling: y_w^{t+1} = (y_{w'}^t + y_w^t + y_v^t)/3 reveals the next node's value
    n = 16
    w = lazy_ring(n, 1 / 3)
    for kind in gos.GOSSIP_KINDS:
        got = gos.muffliato_rdp_matrix(w, k, 1.0, kind=kind) / 0.5
        dist = np.array([[min(abs(i - j), n - abs(i - j)) for j in range(n)] for i in range(n)])
        want = np.where((dist >= 1) & (dist <= k + 1), 1.0, 0.0)
        np.testing.assert_allclose(got, want, atol=1e-8)


@given(connected_graphs(min_n=3, max_n=8), st.integers(0, 5), st.sampled_from(gos.GOSSIP_KINDS))
@FAST
def test_exact_is_between_zero_and_local_dp_and_local_dp_on_neighbours(a, k, kind):
    w = metropolis(a)
    exact = gos.muffliato_rdp_matrix(w, k, 1.0, kind=kind)
    assert np.all(exact >= 0) and np.all(exact <= 0.5 + 1e-12)
    np.testing.assert_allclose(exact[a > 0], 0.5, atol=1e-9)  # neighbours: exactly local DP
    paper = gos.muffliato_rdp_matrix(w, k, 1.0, kind=kind, exact=False)
    assert np.all(paper[a > 0] >= 0.5 - 1e-12)  # the sum charges neighbours ≥ local DP
    # exact is the same for any polynomial family of degrees 0..K (same Krylov row space)
    other = "plain" if kind == "chebyshev" else "chebyshev"
    np.testing.assert_allclose(exact, gos.muffliato_rdp_matrix(w, k, 1.0, kind=other), atol=1e-7)
    # beyond K + 1 hops nothing reaches v
    dist = nx.floyd_warshall_numpy(nx.from_numpy_array(a))
    assert np.all(exact[dist > k + 1] < 1e-20) and np.all(paper[dist > k + 1] < 1e-30)


@given(
    st.integers(3, 14),
    st.integers(0, 10),
    st.floats(0.05, 0.9),
    st.booleans(),
    st.sampled_from([(True, "plain"), (True, "chebyshev"), (False, "plain")]),
)
@FAST
def test_loss_is_non_increasing_with_distance_on_rings_and_paths(n, k, self_weight, is_ring, case):
    exact, kind = case
    w = lazy_ring(n, self_weight) if is_ring else metropolis(path(n))
    rho = gos.muffliato_rdp_matrix(w, k, 1.0, kind=kind, exact=exact)
    for v in range(n):
        sides = (
            [range(v + 1, n), range(v - 1, -1, -1)]
            if not is_ring
            else [range(v + 1, v + n // 2 + 1)]
        )
        for side in sides:
            seq = [rho[u % n, v] for u in side]
            assert np.all(np.diff(seq) <= 1e-12), (v, np.round(seq, 4))
    prof = gos.distance_profile(rho, w)
    if is_ring:
        assert np.all(np.diff(prof.max) <= 1e-12)


def test_chebyshev_per_message_sum_is_not_monotone_on_a_path():
    # Chebyshev polynomials oscillate; near the path's end their squared entries grow:
    # the paper's sum charges node 0 more than node 1 as seen from node 4 (K = 6).
    rho = gos.muffliato_rdp_matrix(metropolis(path(8)), 6, 1.0, kind="chebyshev", exact=False)
    assert rho[0, 4] > rho[1, 4] * 1.1
    plain = gos.muffliato_rdp_matrix(metropolis(path(8)), 6, 1.0, kind="plain", exact=False)
    assert plain[0, 4] < plain[1, 4]


def test_epsilon_matrix_over_rounds_matches_dp_accounting():
    w = GOSSIP_CASES["grid"]
    rho = gos.muffliato_rdp_matrix(w, 2, 1.5, sensitivity=1.0)
    eps = gos.muffliato_epsilon_matrix(w, 2, 1.5, rounds=30, delta=DELTA)
    rdp = gos.muffliato_epsilon_matrix(w, 2, 1.5, rounds=30, alpha=8.0)
    np.testing.assert_allclose(rdp, 8.0 * 30 * rho, rtol=1e-13)
    u, v = np.unravel_index(np.argmax(rho), rho.shape)
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.GaussianDpEvent(1.0 / math.sqrt(2 * rho[u, v])), 30)
    assert eps[u, v] == pytest.approx(acc.get_epsilon(DELTA), rel=2e-3)
    assert gos.worst_pair_epsilon(eps) == pytest.approx(eps[u, v])
    far = np.nonzero(rho == 0)
    assert np.all(eps[far] == 0)


def test_distance_profile_by_hand():
    # ring of 4: distances 1 (8 ordered pairs) and 2 (4 pairs)
    m = np.array([[0, 1, 5, 3], [2, 0, 1, 7], [4, 1, 0, 1], [1, 6, 2, 0]], dtype=float)
    prof = gos.distance_profile(m, ring(4))
    assert prof.distances.tolist() == [1, 2]
    assert prof.count.tolist() == [8, 4]
    assert prof.max.tolist() == [3.0, 7.0]
    assert prof.mean.tolist() == [pytest.approx((1 + 3 + 2 + 1 + 1 + 1 + 1 + 2) / 8), 5.5]


# ============================================= 3. topology-optimized covariance design
DESIGN_CASES = {
    "ring": ring(12),
    "grid": grid(4),
    "complete": complete(6),
    "geometric": geometric(),
}


def test_family_contains_decor_and_local_dp():
    a = grid(3)
    edges = dec.edges_of(a)
    np.testing.assert_allclose(
        dec.covariance_from_edges(9, edges, 0.49, np.full(len(edges), 1.69)),
        dec.pairwise_covariance(a, 0.7, 1.3),
        atol=1e-12,
    )
    np.testing.assert_allclose(
        dec.covariance_from_edges(9, edges, 2.0, np.zeros(len(edges))), 2.0 * np.eye(9)
    )


def test_two_node_design_closed_form():
    # W = [[3/4, 1/4], [1/4, 3/4]]: ‖W‖_F² = 5/4, tr(W L W) = 1/2, m(r) = (1 + 1/(1+2r))/2;
    # cost(u = 1 + 2r) = (1 + 1/u)(1 + u/4)/2, minimal at u = 2: 9/8, s = 3/4, c = 3/8.
    w = [[0.75, 0.25], [0.25, 0.75]]
    for b in (1.0, 4.0):
        d = dec.optimize_covariance(w, complete(2), b)
        assert d.noise_after_mixing == pytest.approx(1.125 / b, rel=1e-7)
        assert d.scale == pytest.approx(0.75 / b, rel=1e-5)
        assert d.edge_variances[0] == pytest.approx(0.375 / b, rel=1e-4)
        assert d.max_inverse_diagonal == pytest.approx(b, rel=1e-9)


@pytest.mark.parametrize("name", sorted(DESIGN_CASES))
def test_best_decor_is_optimal_on_a_dense_grid_of_ratios(name):
    a = DESIGN_CASES[name]
    w = metropolis(a)
    d = dec.decor_design(w, a, 1.0)
    lap = np.diag(a.sum(1)) - a
    n = a.shape[0]
    best = math.inf
    for r in np.concatenate([[0.0], np.logspace(-4, 6, 400)]):  # independent brute force
        cov = np.eye(n) + r * lap
        s = np.max(np.diag(np.linalg.inv(cov)))
        best = min(best, s * np.trace(w @ cov @ w.T))
    assert d.noise_after_mixing <= best * (1 + 1e-6)
    assert d.max_inverse_diagonal <= 1 + 1e-9


@pytest.mark.parametrize("name", sorted(DESIGN_CASES))
def test_optimized_design_is_feasible_never_worse_than_decor_and_locally_optimal(name):
    a = DESIGN_CASES[name]
    w = metropolis(a)
    n = a.shape[0]
    b = 2.5
    decor = dec.decor_design(w, a, b)
    opt = dec.optimize_covariance(w, a, b)
    assert opt.max_inverse_diagonal <= b * (1 + 1e-9)
    assert np.max(np.diag(np.linalg.inv(opt.covariance))) <= b * (1 + 1e-9)
    assert opt.noise_after_mixing <= decor.noise_after_mixing * (1 + 1e-9)
    assert opt.noise_after_mixing >= 1 / (n * b) * (1 - 1e-9)  # central-DP floor
    assert opt.noise_after_mixing <= np.sum(w**2) / b  # local DP (c = 0) is in the family
    assert opt.noise_after_mixing == pytest.approx(np.trace(w @ opt.covariance @ w.T))
    assert np.all(opt.edge_variances >= 0) and opt.scale > 0
    # random feasible perturbations (rescaled to the budget) never do better
    rng = np.random.default_rng(3)
    edges = opt.edges
    for _ in range(100):
        s = opt.scale * math.exp(rng.normal(scale=0.05))
        c = np.clip(opt.edge_variances * np.exp(rng.normal(scale=0.05, size=len(edges))), 0, None)
        c = c + rng.exponential(scale=1e-3 / b, size=len(edges)) * (rng.random(len(edges)) < 0.2)
        cov = dec.covariance_from_edges(n, edges, s, c)
        kappa = np.max(np.diag(np.linalg.inv(cov))) / b
        assert kappa * np.trace(w @ cov @ w.T) >= opt.noise_after_mixing * (1 - 1e-6)


def test_optimized_beats_decor_where_the_graph_is_irregular_and_ties_where_symmetric():
    gains = {}
    for name, a in DESIGN_CASES.items():
        w = metropolis(a)
        decor = dec.decor_design(w, a, 1.0).noise_after_mixing
        gains[name] = 1 - dec.optimize_covariance(w, a, 1.0).noise_after_mixing / decor
    assert gains["grid"] > 0.05  # boundary nodes get different edge weights
    assert gains["geometric"] > 0.01
    assert gains["ring"] == pytest.approx(0, abs=1e-6)  # edge-transitive: DECOR is optimal
    assert gains["complete"] == pytest.approx(0, abs=1e-6)


def test_design_privacy_is_the_secldp_slope():
    a = grid(3)
    d = dec.optimize_covariance(metropolis(a), a, 0.8)
    assert d.rdp_slope(2.0) == pytest.approx(0.5 * 4.0 * 0.8, rel=1e-9)
    decor = dec.decor_design(metropolis(a), a, 0.8)
    s_cor = math.sqrt(decor.edge_variances[0])
    assert dec.secldp_rdp_slope(a, math.sqrt(decor.scale), s_cor) == pytest.approx(
        decor.rdp_slope(), rel=1e-9
    )


# ================================================================= bad input, one line
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: dec.laplacian([[0, 1], [0, 0]]), "adjacency must be symmetric"),
        (lambda: dec.laplacian([[0, 2], [2, 0]]), "adjacency must hold only 0 and 1; got 2.0"),
        (lambda: dec.laplacian([[1, 0], [0, 0]]), "adjacency must have a zero diagonal"),
        (lambda: dec.laplacian([[0, 1, 0]]), "adjacency must be a square 0/1 matrix; got shape"),
        (
            lambda: dec.pairwise_covariance(ring(3), 0.0, 1.0),
            "sigma_cdp must be a real number in (0, inf); got 0.0",
        ),
        (
            lambda: dec.pairwise_covariance(ring(3), 1.0, -1.0),
            "sigma_cor must be a real number in [0, inf); got -1.0",
        ),
        (
            lambda: dec.secldp_rdp_slope(ring(3), 1.0, 1.0, coalition=[0, 1, 2]),
            "coalition must leave at least one honest node",
        ),
        (
            lambda: dec.secldp_rdp_slope(ring(3), 1.0, 1.0, coalition=[5]),
            "coalition member must be an integer in [0, 2]; got 5",
        ),
        (
            lambda: dec.secldp_epsilon(ring(3), 1.0, 1.0, rounds=0, delta=DELTA),
            "rounds must be an integer in [1, inf]; got 0",
        ),
        (
            lambda: dec.secldp_epsilon_rdp(ring(3), 1.0, 1.0, rounds=1, delta=1.0),
            "delta must be a real number in (0, 1); got 1.0",
        ),
        (
            lambda: dec.pairwise_noise([(0, 1)], [1.0, 2.0]),
            "draws must be finite with one row per edge (1)",
        ),
        (lambda: dec.pairwise_noise([(0, 0)], [1.0]), "edges must join two different nodes"),
        (lambda: gos.gossip_polynomials([[0.5, 0.5], [0.4, 0.6]], 2), "mixing must be symmetric"),
        (lambda: gos.gossip_polynomials([[0.5, 0.4], [0.4, 0.5]], 2), "mixing rows must sum to 1"),
        (
            lambda: gos.gossip_polynomials(lazy_ring(4, 0.5), 2, "fast"),
            "kind must be one of 'plain', 'chebyshev'; got 'fast'",
        ),
        (
            lambda: gos.gossip_polynomials(lazy_ring(4, 0.5), -1),
            "steps must be an integer in [0, inf]; got -1",
        ),
        (
            lambda: gos.gossip(lazy_ring(4, 0.5), [1.0, 2.0], 1),
            "x must be finite of shape (4,) or (4, d)",
        ),
        (
            lambda: gos.muffliato_epsilon_matrix(lazy_ring(4, 0.5), 1, 1.0),
            "give exactly one of alpha and delta",
        ),
        (
            lambda: gos.muffliato_epsilon_matrix(lazy_ring(4, 0.5), 1, 1.0, alpha=1.0),
            "alpha must be a real number in (1, inf); got 1.0",
        ),
        (
            lambda: gos.muffliato_rdp_matrix(lazy_ring(4, 0.5), 1, 0.0),
            "sigma must be a real number in (0, inf); got 0.0",
        ),
        (
            lambda: dec.optimize_covariance(lazy_ring(4, 0.5), ring(5), 1.0),
            "adjacency must have the shape of mixing (4, 4)",
        ),
        (
            lambda: dec.optimize_covariance(lazy_ring(4, 0.5), ring(4), 0.0),
            "budget must be a real number in (0, inf); got 0.0",
        ),
    ],
)
def test_bad_inputs_raise_one_line_config_errors(call, message):
    with pytest.raises(ConfigError) as info:
        call()
    text = str(info.value)
    assert message in text and "\n" not in text
