"""Gossip between servers (Muffliato) in the engine, and what pgfl charges for it.

Every expected value is derived here, not read from the code under test: gossip as a plain
loop of K steps (Chebyshev's polynomial from the eigen-decomposition), the exact view of
one round in rational arithmetic, a unit client's single row by hand, and the linear
two-round example where composing the one-round views fails (the hidden state).
"""

import math
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest

from pgfl.apps.runner import run_experiment
from pgfl.data.synthetic import regression_data
from pgfl.engine import CurveBatch, CurveSettings, Network, simulate
from pgfl.engine.step import server_messages
from pgfl.experiments.build import build_network
from pgfl.experiments.loader import parse_config
from pgfl.param import SettingWarning
from pgfl.privacy.accounting import epsilon
from pgfl.privacy.accounting import gossip as gos
from pgfl.privacy.accounting.releases import GaussianRelease
from pgfl.privacy.mechanisms import Gossip, RandomNoise, ReleaseContext
from pgfl.privacy.mechanisms.adversaries import epsilon_by_adversary
from pgfl.privacy.mechanisms.client import Mean
from pgfl.problems import LeastSquares
from pgfl.rng import KeyedDraws
from pgfl.topology import combination_matrix
from pgfl.validation import ConfigError


def _graph(name: str) -> nx.Graph:
    graphs = {
        "ring8": nx.cycle_graph(8),
        "petersen": nx.petersen_graph(),
        "grid3": nx.grid_2d_graph(3, 3),
        "grid4": nx.grid_2d_graph(4, 4),
    }
    return nx.convert_node_labels_to_integers(graphs[name])


def _network(graph: nx.Graph, mech: Gossip, M: int = 2, N: int = 12, seed: int = 0) -> Network:
    P = graph.number_of_nodes()
    data = regression_data(np.random.default_rng(seed), P=P, K=1, N=N, M=M)
    W = combination_matrix(graph)
    A = Gossip.combination(
        W, {"privacy.gossip_steps": mech.steps, "privacy.gossip_kind": mech.kind}
    )
    return Network(data, LeastSquares(0.1), A, 1, np.ones((P, 1), int), None, mixing=W)


def _polynomial(W: np.ndarray, k: int, kind: str) -> np.ndarray:
    """P_K(W) from the spectrum: W^K, or T_K(W/λ)/T_K(1/λ), λ = max(|λ_2|, |λ_n|)."""
    lam, vec = np.linalg.eigh(W)
    if kind == "plain":
        return (vec * lam**k) @ vec.T
    rho = max(abs(lam[0]), abs(lam[-2]))
    T = lambda x: np.cosh(k * np.arccosh(x)) if x >= 1 else np.cos(k * np.arccos(x))  # noqa: E731
    return (vec * np.array([T(x / rho) for x in lam]) / T(1 / rho)) @ vec.T


# --------------------------------------------------------------------------- engine
@pytest.mark.parametrize("kind", ["plain", "chebyshev"])
def test_one_tier_engine_equals_noise_then_k_gossip_steps_written_as_a_loop(kind):
    """K = L = 1, one full-batch step: y⁰ = x − μ ḡ(x) + σ η, then K gossip steps."""
    graph = _graph("grid3")
    P, M, T, R, seed, mu, sigma, clip, rho, K = 9, 2, 4, 2, 5, 0.3, 0.4, 1.5, 0.1, 3
    mech = Gossip(std=sigma, steps=K, kind=kind)
    net = _network(graph, mech, M=M, seed=2)
    traj = simulate(net, [CurveSettings(mu=mu, server=mech, clip_norm=clip)], iterations=T,
                    repetitions=R, seed=seed)  # fmt: skip
    W = combination_matrix(graph)
    lam = np.sort(np.linalg.eigvalsh(W))
    radius = max(abs(lam[0]), abs(lam[-2]))
    X, y, counts = net.data.X[:, 0], net.data.y[:, 0], net.data.counts[:, 0]
    for r in range(R):
        x = np.zeros((P, M))
        for t in range(1, T + 1):
            eta = KeyedDraws(seed, t, [r], range(P)).noise("server_noise", "gaussian", (M,))[0]
            y0 = np.empty((P, M))
            for j in range(P):
                grads = []
                for s in range(counts[j]):
                    g = 2 * (X[j, s] @ x[j] - y[j, s]) * X[j, s] + 2 * rho * x[j]
                    norm = np.linalg.norm(g)
                    grads.append(g * min(1.0, clip / norm) if norm > 0 else g)
                y0[j] = x[j] - mu * np.mean(grads, axis=0) + sigma * eta[j]
            if kind == "plain":
                cur = y0
                for _ in range(K):
                    cur = W @ cur
            else:  # the three-term recurrence T_{k+1}(z) = 2z T_k(z) − T_{k−1}(z), in W
                prev, cur = y0, W @ y0
                c_prev, c = 1.0, 1.0 / radius
                for _ in range(K - 1):
                    c_next = 2 * c / radius - c_prev
                    nxt = (2 * c / (radius * c_next)) * (W @ cur) - (c_prev / c_next) * prev
                    prev, cur, c_prev, c = cur, nxt, c, c_next
            np.testing.assert_allclose(cur, _polynomial(W, K, kind) @ y0, atol=1e-12)
            x = cur
        np.testing.assert_allclose(traj.W[0, r], x, rtol=1e-10, atol=1e-12)


def test_noise_is_one_draw_per_server_on_every_link_and_does_not_depend_on_blocks():
    graph = _graph("ring8")
    mech = Gossip(std=1.0, steps=2)
    net = _network(graph, mech)
    P, M, R = 8, net.dim, 3
    curves = CurveBatch.of([CurveSettings(mu=0.1, server=mech)], net)

    def noise(blocks):
        out = np.empty((R, net.links.src.size, M))
        for a, b in blocks:
            idx = net.links.out_of(a, b)
            draws = KeyedDraws(7, 1, range(R), range(a, b))
            psi = np.zeros((1, R, b - a, M))
            out[:, idx] = server_messages(psi, net.links.subset(idx), curves, draws, a, 1)[0]
        return out

    whole = noise([(0, P)])
    np.testing.assert_array_equal(whole, noise([(0, 3), (3, 7), (7, 8)]))
    eta = KeyedDraws(7, 1, range(R), range(P)).noise("server_noise", "gaussian", (M,))
    np.testing.assert_array_equal(whole, eta[:, net.links.src])
    # the engine's links are those of P_2(W) = W²: every node within two hops, itself included
    assert net.links.src.size == P * 5


def test_the_network_must_combine_with_the_gossip_polynomial():
    graph = _graph("ring8")
    W = combination_matrix(graph)
    data = regression_data(np.random.default_rng(0), P=8, K=1, N=5, M=2)
    plain = Network(data, LeastSquares(0.1), W, 1, np.ones((8, 1), int), None)
    with pytest.raises(ConfigError, match="P_K"):
        CurveBatch.of([CurveSettings(mu=0.1, server=Gossip(std=1.0, steps=2))], plain)
    assert np.array_equal(plain.mixing, W)


# ------------------------------------------------------------------- configuration
def _config(curves, P=8, iterations=5, kind="ring", extra_topology=None):
    topology = {"kind": kind, "P": P, **(extra_topology or {})}
    return parse_config({
        "name": "g", "iterations": iterations, "repetitions": 1, "topology": topology,
        "data": {"kind": "regression", "K": 1, "N": 20, "M": 2},
        "training": {"mu": 0.3, "L": 1, "epochs": 1, "batch": "full", "clip_norm": 1.0},
        "privacy": {"delta": 1e-5, "accountants": ["pld"], "epsilon_checkpoints": 2},
        "curves": curves,
    })  # fmt: skip


def test_gossip_settings_apply_to_gossip_only_and_batch_curves_apart():
    with pytest.warns(SettingWarning, match="gossip_steps = 3 has no effect"):
        _config([{"label": "r", "privacy": {"server_noise": "random", "server_variance": 1.0,
                                            "gossip_steps": 3}}])  # fmt: skip
    with pytest.raises(ConfigError, match="gossip_steps must be an integer in \\[1, inf\\]"):
        _config([{"label": "g", "privacy": {"server_noise": "gossip", "server_variance": 1.0,
                                            "gossip_steps": 0}}])  # fmt: skip
    cfg = _config([
        {"label": "g1", "privacy": {"server_noise": "gossip", "server_variance": 1.0}},
        {"label": "g1b", "privacy": {"server_noise": "gossip", "server_variance": 2.0}},
        {"label": "g2", "privacy": {"server_noise": "gossip", "server_variance": 1.0,
                                    "gossip_steps": 2}},
        {"label": "g2c", "privacy": {"server_noise": "gossip", "server_variance": 1.0,
                                     "gossip_steps": 2, "gossip_kind": "chebyshev"}},
        {"label": "r", "privacy": {"server_noise": "random", "server_variance": 1.0}},
        {"label": "c", "privacy": {"server_noise": "central", "server_variance": 1.0}},
    ])  # fmt: skip
    keys = [c.structure() for c in cfg.curves]
    assert keys[0] == keys[1]  # only the variance differs: one vectorized simulation
    assert len({keys[0], keys[2], keys[3], keys[4], keys[5]}) == 5
    net = build_network(cfg.curves[2], cfg.seed)
    W = combination_matrix(nx.cycle_graph(8))
    np.testing.assert_allclose(net.mixing, W, atol=1e-15)
    np.testing.assert_allclose(net.A, W @ W, atol=1e-15)
    central = build_network(cfg.curves[5], cfg.seed)
    np.testing.assert_allclose(central.A, np.full((8, 8), 1 / 8))
    ctx = CurveSettings(mu=0.3, server=Gossip(std=1.0, steps=2)).release_context(net, 5)
    assert np.array_equal(ctx.combination, net.mixing)
    assert ctx.adjacency.sum() == 16  # the ring's edges, not W²'s


# ---------------------------------------------------------------- rational views
def _rational_metropolis(graph: nx.Graph) -> list[list[Fraction]]:
    n, deg = graph.number_of_nodes(), dict(graph.degree())
    w = [[Fraction(0)] * n for _ in range(n)]
    for i, j in graph.edges():
        w[i][j] = w[j][i] = Fraction(1, 1 + max(deg[i], deg[j]))
    for i in range(n):
        w[i][i] = 1 - sum(w[i][j] for j in range(n) if j != i)
    return w


def _projection(rows: list[list[Fraction]], col: int) -> Fraction:
    """‖Proj_{span(rows)} e_col‖² by Gram–Schmidt over the rationals (exact)."""
    basis: list[list[Fraction]] = []
    for r in rows:
        v = list(r)
        for b in basis:
            f = sum(x * y for x, y in zip(v, b, strict=True)) / sum(x * x for x in b)
            v = [x - f * y for x, y in zip(v, b, strict=True)]
        if any(v):
            basis.append(v)
    return sum(b[col] ** 2 / sum(x * x for x in b) for b in basis)


def rational_view(graph: nx.Graph, k: int) -> list[list[Fraction]]:
    """‖Proj_{row(B_v)} e_u‖², entry [u][v], plain gossip, exact arithmetic."""
    w = _rational_metropolis(graph)
    n = len(w)
    powers = [[[Fraction(int(i == j)) for j in range(n)] for i in range(n)]]
    for _ in range(k):
        q = powers[-1]
        powers.append([[sum(w[i][m] * q[m][j] for m in range(n)) for j in range(n)]
                       for i in range(n)])  # fmt: skip
    out = [[Fraction(0)] * n for _ in range(n)]
    for v in range(n):
        nbrs = [x for x in range(n) if x != v and w[v][x] != 0]
        rows = [[powers[t][x][c] for c in range(n) if c != v] for t in range(k + 1) for x in nbrs]
        for u in range(n):
            if u != v:
                out[u][v] = _projection(rows, u if u < v else u - 1)
    return out


@pytest.mark.parametrize(("name", "k"), [("petersen", 1), ("grid3", 2), ("grid4", 3)])
def test_certified_view_bounds_the_exact_view_and_equals_it_where_certified(name, k):
    graph = _graph(name)
    W = combination_matrix(graph)
    exact = rational_view(graph, k)
    cert = gos.certified_view_matrix(W, k)
    numeric = gos.muffliato_rdp_matrix(W, k, 1.0) * 2.0
    n = W.shape[0]
    dist = dict(nx.all_pairs_shortest_path_length(graph))
    fallback = 0
    for u in range(n):
        for v in range(n):
            if u == v:
                continue
            want = float(exact[u][v])
            assert cert[u, v] >= want - 1e-12  # sound
            if dist[u][v] > k + 1:
                assert cert[u, v] == 0.0 and want == 0.0
            if cert[u, v] == 1.0 and want < 1 - 1e-9:
                fallback += 1  # B_v rank-deficient: local DP charged
            else:
                assert cert[u, v] == pytest.approx(want, abs=1e-5)
                assert numeric[u, v] == pytest.approx(want, abs=1e-8)
    # the grids' symmetries make some views exactly rank-deficient: charged local DP there
    assert (fallback == 0) == (name == "petersen")


# ------------------------------------------------------------------ accounting
def _ctx(graph: nx.Graph, iterations: int, **kw) -> ReleaseContext:
    adj = nx.to_numpy_array(graph, dtype=int)
    return ReleaseContext(mu=0.5, clip=1.0, iterations=iterations, dim=2, adjacency=adj,
                          combination=combination_matrix(graph), **kw)  # fmt: skip


def test_one_round_views_per_adversary():
    graph = _graph("petersen")
    sigma, delta = 2.0, 1e-5
    mech = Gossip(std=sigma, steps=1)
    eps = epsilon_by_adversary(Mean(), mech, _ctx(graph, 1), delta)
    sens = 2 * 0.5 * 1.0
    local = epsilon([GaussianRelease(sens, sigma)], delta, "pld")
    assert eps["link_eavesdropper"] == pytest.approx(local, rel=1e-9)
    assert eps["neighbour_server"] == pytest.approx(local, rel=1e-9)  # it receives y_u⁰
    assert eps["own_server"] is None
    # the worst non-adjacent pair, in rational arithmetic
    exact = rational_view(graph, 1)
    adj = nx.to_numpy_array(graph)
    worst = max(exact[u][v] for u in range(10) for v in range(10) if u != v and not adj[u, v])
    assert worst == Fraction(1, 2)
    other = epsilon([GaussianRelease(sens, sigma / math.sqrt(0.5))], delta, "pld")
    assert eps["other_server"] == pytest.approx(other, rel=1e-6)
    # a unit's client sees one row of W (weights 1/4 on four entries): 1/16 over 4/16
    client = epsilon([GaussianRelease(sens, sigma / math.sqrt(0.25))], delta, "pld")
    assert eps["unit_client"] == pytest.approx(client, rel=1e-6)
    assert eps["unit_client"] < eps["other_server"] < eps["link_eavesdropper"]


def test_a_unit_client_sees_one_row_of_the_polynomial():
    # ring of 8, weights 1/3, K = 2: row of W² = (1/9)(1, 2, 3, 2, 1): max² / ‖·‖² = 9/19
    graph = _graph("ring8")
    f = gos.certified_view_matrix(combination_matrix(graph), 2)  # the ring: learnt exactly
    assert f[0, 2] == 1.0
    mech = Gossip(std=1.0, steps=2)
    view = mech.views(_ctx(graph, 1))["unit_client"]
    assert view.std == pytest.approx(1.0 / math.sqrt(9 / 19), rel=1e-12)


@pytest.mark.parametrize("T", [2, 30])
def test_more_than_one_round_is_charged_local_dp_against_everyone(T):
    graph = _graph("petersen")
    ctx = _ctx(graph, T, clients=10, sampled=3)
    gossip_eps = epsilon_by_adversary(Mean(), Gossip(std=1.5, steps=1), ctx, 1e-5)
    random_eps = epsilon_by_adversary(Mean(), RandomNoise(std=1.5, distribution="gaussian"),
                                      ctx, 1e-5)  # fmt: skip
    for a in ("link_eavesdropper", "neighbour_server", "other_server", "unit_client"):
        assert gossip_eps[a] == pytest.approx(random_eps[a], rel=1e-12)
    views = Gossip(std=1.5, steps=1).views(ctx)
    assert {views[a].std for a in ("other_server", "unit_client")} == {1.5}
    assert views["other_server"].sampling == (10, 3)  # amplified by client sampling


def test_per_round_composition_misses_the_hidden_state():
    """Ring of 8, K = 1, u three hops from v: each round alone shows v nothing of u
    (ρ_{u→v} = 0), but over two rounds v's view depends on u.

    Linear dynamics ψ^t = w^{t−1} + d (d the units' data; the target at u moves d_u by Δ),
    w^t = W(ψ^t + η^t), w⁰ = 0. Every quantity is a linear map of z = (d, η¹, η²).
    v observes y_w^{t,0} and y_w^{t,1} of its neighbours w and knows ψ_v^t, η_v^t and
    every d_m but d_u: the view is Gaussian with mean shift Δ·(d_u's column) and
    covariance σ²·(rows over the unknown η's)(…)ᵀ, so D_α = (αΔ²/2σ²) sᵀ(BBᵀ)⁺s.
    """
    n, u, v = 8, 0, 3
    W = combination_matrix(nx.cycle_graph(n))
    one_round = gos.muffliato_rdp_matrix(W, 1, 1.0)
    assert one_round[u, v] == 0.0 and gos.certified_view_matrix(W, 1)[u, v] == 0.0
    I, Z = np.eye(n), np.zeros((n, n))
    d, eta1, eta2 = np.hstack([I, Z, Z]), np.hstack([Z, I, Z]), np.hstack([Z, Z, I])
    y10 = d + eta1  # ψ¹ = w⁰ + d = d
    y11 = W @ y10
    psi2 = y11 + d
    y20 = psi2 + eta2
    y21 = W @ y20
    nbrs = [(v - 1) % n, (v + 1) % n]
    rows = np.vstack([y[nbrs] for y in (y10, y11, y20, y21)] + [psi2[[v]]])
    shift = rows[:, u]  # the d_u column: the view's mean moves by Δ·shift
    unknown = [n + m for m in range(n) if m != v] + [2 * n + m for m in range(n) if m != v]
    B = rows[:, unknown]
    divergence = float(shift @ np.linalg.pinv(B @ B.T) @ shift)  # in rounds of local DP
    assert np.linalg.matrix_rank(np.column_stack([B, shift])) == np.linalg.matrix_rank(B)
    assert divergence > 0.01  # > 0 = the per-round composition
    assert divergence <= 2.0 + 1e-9  # never above two rounds of local DP (1 each)


# ------------------------------------------------------------------------ end to end
def test_a_one_round_run_reports_muffliato_views_and_a_long_one_local_dp(tmp_path):
    edges = [list(e) for e in _graph("petersen").edges()]
    curves = [{"label": "gossip", "privacy": {"server_noise": "gossip", "server_variance": 4.0}}]
    short = _config(curves, P=10, iterations=1, kind="edges", extra_topology={"edges": edges})
    eps = run_experiment(short, tmp_path / "one")["curves"][0]["epsilon_by_adversary"]
    assert eps["other_server"] < eps["neighbour_server"] == eps["link_eavesdropper"]
    assert eps["unit_client"] < eps["other_server"]
    assert eps["own_server"] is None
    long = _config(curves, P=10, iterations=3, kind="edges", extra_topology={"edges": edges})
    eps = run_experiment(long, tmp_path / "three")["curves"][0]["epsilon_by_adversary"]
    assert len({eps[a] for a in ("link_eavesdropper", "other_server", "unit_client")}) == 1
