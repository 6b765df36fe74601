"""Pairwise-cancelling noise (DECOR) in the engine and its SecLDP accounting.

Checked against computations written here from the paper (Allouah et al., ICML 2024,
arXiv:2405.01031): the covariance σ²I + σ_cor²L by brute-force inversion (and by sampling
the engine's own messages), the algorithm as a plain loop over nodes and rounds, and a
Monte-Carlo audit of one round.
"""

import dataclasses
import math
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from scipy import stats
from scipy.linalg import block_diag as scipy_block_diag

from pgfl.apps.runner import run_experiment
from pgfl.data.synthetic import regression_data
from pgfl.engine import CurveBatch, CurveSettings, Network, simulate
from pgfl.engine.step import combine_phase, server_messages
from pgfl.experiments.build import build_network, curve_settings
from pgfl.experiments.presets import load_preset
from pgfl.privacy.accounting import calibrate, epsilon
from pgfl.privacy.accounting.releases import GaussianRelease
from pgfl.privacy.mechanisms import PairwiseCancelling, ReleaseContext
from pgfl.privacy.mechanisms.adversaries import epsilon_by_adversary
from pgfl.privacy.mechanisms.client import Mean
from pgfl.privacy.mechanisms.correlated import effective_std
from pgfl.privacy.mechanisms.server import RandomNoise
from pgfl.problems import LeastSquares
from pgfl.rng import KeyedDraws
from pgfl.topology import combination_matrix
from pgfl.validation import ConfigError


def _network(graph: nx.Graph, M: int = 2, N: int = 20, seed: int = 0) -> Network:
    P = graph.number_of_nodes()
    data = regression_data(np.random.default_rng(seed), P=P, K=1, N=N, M=M)
    return Network(
        data, LeastSquares(0.1), combination_matrix(graph), 1, np.ones((P, 1), int), None
    )


def _noise(net, mech, R=3, seed=4, blocks=None):
    """The engine's link noise (ψ = 0) on every link, computed block by block."""
    P, M = net.A.shape[0], net.dim
    curves = CurveBatch.of([CurveSettings(mu=0.1, server=mech)], net)
    blocks = blocks or [(0, P)]
    out = np.empty((R, net.links.src.size, M))
    for a, b in blocks:
        idx = net.links.out_of(a, b)
        links = net.links.subset(idx)
        draws = KeyedDraws(seed, 1, range(R), range(a, b))
        out[:, idx] = server_messages(np.zeros((1, R, b - a, M)), links, curves, draws, a, 1)[0]
    return out


@pytest.mark.parametrize("graph", [nx.cycle_graph(7), nx.grid_2d_graph(3, 3), nx.complete_graph(5)])
def test_pairwise_terms_cancel_and_do_not_depend_on_blocks(graph):
    graph = nx.convert_node_labels_to_integers(graph)
    net = _network(graph)
    P = net.A.shape[0]
    mech = PairwiseCancelling(std=0.0, pairwise_std=3.0)
    whole = _noise(net, mech)
    split = _noise(net, mech, blocks=[(0, 2), (2, P - 1), (P - 1, P)])
    np.testing.assert_array_equal(whole, split)
    # one message per sender: the same noise on all its links; the senders' noises sum to 0
    per_sender = np.stack([whole[:, net.links.src == m][:, 0] for m in range(P)], axis=1)
    for m in range(P):
        np.testing.assert_array_equal(whole[:, net.links.src == m], per_sender[:, [m]].repeat(
            (net.links.src == m).sum(), axis=1))  # fmt: skip
    assert np.abs(per_sender.sum(axis=1)).max() < 1e-12
    # and the centroid of the combined models carries none of it
    W = combine_phase(whole[None], net.links, 0, P)
    assert np.abs(W.mean(axis=2)).max() < 1e-12


def test_engine_noise_has_the_covariance_sigma2_i_plus_sigma_cor2_laplacian():
    graph = nx.cycle_graph(5)
    net = _network(graph, M=1)
    sigma, cor, R = 0.7, 1.3, 20_000
    g = _noise(net, PairwiseCancelling(std=sigma, pairwise_std=cor), R=R)
    P = 5
    per_sender = np.stack([g[:, net.links.src == m][:, 0, 0] for m in range(P)], axis=1)
    L = nx.laplacian_matrix(graph).toarray()
    expected = sigma**2 * np.eye(P) + cor**2 * L
    sample = np.cov(per_sender, rowvar=False)
    # each entry's standard error is about sqrt((Σ_ii Σ_jj + Σ_ij²)/R) < 0.05
    np.testing.assert_allclose(sample, expected, atol=0.15)


@pytest.mark.parametrize("graph", [nx.cycle_graph(8), nx.path_graph(6), nx.star_graph(5)])
@pytest.mark.parametrize(("sigma", "cor"), [(1.0, 0.5), (0.3, 4.0)])
def test_effective_std_equals_the_brute_force_inverse(graph, sigma, cor):
    adj = nx.to_numpy_array(graph, dtype=int)
    P = adj.shape[0]
    L = np.diag(adj.sum(1)) - adj
    inv = np.linalg.inv(sigma**2 * np.eye(P) + cor**2 * L)
    assert effective_std(adj, sigma, cor) == pytest.approx(1 / math.sqrt(inv.diagonal().max()))
    for kind in ("neighbour", "other"):
        worst = 0.0
        for c in range(P):
            honest = [h for h in range(P) if h != c]
            sub = adj[np.ix_(honest, honest)]
            inv_h = np.linalg.inv(sigma**2 * np.eye(P - 1) + cor**2 * (np.diag(sub.sum(1)) - sub))
            for k, i in enumerate(honest):
                if (adj[c, i] != 0) == (kind == "neighbour"):
                    worst = max(worst, inv_h[k, k])
        if worst == 0.0:  # no such coalition: the coalition-free view
            worst = inv.diagonal().max()
        assert effective_std(adj, sigma, cor, kind) == pytest.approx(1 / math.sqrt(worst))


def test_epsilon_against_an_eavesdropper_is_the_gaussian_of_the_effective_std():
    graph = nx.cycle_graph(6)
    adj = nx.to_numpy_array(graph, dtype=int)
    ctx = ReleaseContext(mu=0.5, clip=1.0, iterations=40, dim=2, adjacency=adj)
    mech = PairwiseCancelling(std=0.8, pairwise_std=2.0)
    eps = epsilon_by_adversary(Mean(), mech, ctx, 1e-5)
    L = np.diag(adj.sum(1)) - adj
    s_eff = 1 / math.sqrt(np.linalg.inv(0.64 * np.eye(6) + 4.0 * L).diagonal().max())
    direct = epsilon([GaussianRelease(2 * 0.5 * 1.0, s_eff)] * 40, 1e-5, "pld")
    assert eps["link_eavesdropper"] == pytest.approx(direct, rel=1e-9)
    assert eps["neighbour_server"] >= eps["link_eavesdropper"]
    assert eps["own_server"] is None
    # cancelling noise is worth more than its independent part alone (local DP at σ)
    alone = epsilon([GaussianRelease(1.0, 0.8)] * 40, 1e-5, "pld")
    assert eps["link_eavesdropper"] < alone


def test_monte_carlo_audit_of_one_round_stays_below_its_epsilon():
    adj = nx.to_numpy_array(nx.cycle_graph(4), dtype=int)
    sigma, cor, delta, n = 0.5, 1.0, 1e-5, 300_000
    L = np.diag(adj.sum(1)) - adj
    cov = sigma**2 * np.eye(4) + cor**2 * L
    s_eff = effective_std(adj, sigma, cor)
    eps = epsilon([GaussianRelease(1.0, s_eff)], delta, "pld")
    rng = np.random.default_rng(11)
    chol = np.linalg.cholesky(cov)
    i = int(np.argmax(np.linalg.inv(cov).diagonal()))
    shift = np.eye(4)[i]
    a = rng.standard_normal((n, 4)) @ chol.T + shift  # node i's message moved by Δ = 1
    b = rng.standard_normal((n, 4)) @ chol.T
    direction = np.linalg.solve(cov, shift)  # the likelihood-ratio statistic
    sa, sb = a @ direction, b @ direction
    best = 0.0
    for t in np.quantile(sb, [0.99, 0.999, 0.9999]):
        fp, tp = (sb > t).sum(), (sa > t).sum()
        fpr_hi = stats.beta.ppf(1 - 1e-3, fp + 1, n - fp)
        tpr_lo = stats.beta.ppf(1e-3, tp, n - tp + 1)
        best = max(best, math.log(max(tpr_lo - delta, 1e-300) / fpr_hi))
    assert best <= eps
    assert best > 0.3 * eps


def test_one_tier_engine_equals_decor_written_as_a_loop():
    """K = L = 1, one full-batch step: x_i ← Σ_j W_ij (x_j − μ ḡ_j(x_j) + v̄_j + Σ_k v_jk)."""
    graph = nx.cycle_graph(5)
    P, M, N, T, R, seed, mu = 5, 2, 12, 6, 2, 9, 0.3
    sigma, cor, clip, rho = 0.2, 0.5, 1.5, 0.1
    net = _network(graph, M=M, N=N, seed=3)
    mech = PairwiseCancelling(std=sigma, pairwise_std=cor)
    traj = simulate(net, [CurveSettings(mu=mu, server=mech, clip_norm=clip)], iterations=T,
                    repetitions=R, seed=seed)  # fmt: skip
    W = net.A
    X, y, counts = net.data.X[:, 0], net.data.y[:, 0], net.data.counts[:, 0]
    w_opt = net.problem.optimum(net.data)
    edges = sorted((min(a, b), max(a, b)) for a, b in graph.edges)
    for r in range(R):
        x = np.zeros((P, M))
        for t in range(1, T + 1):
            draws = KeyedDraws(seed, t, [r], range(P))
            own = draws.noise("server_noise", "gaussian", (M,))[0]  # [P, M]
            v = {}
            for lo, hi in edges:
                cell = KeyedDraws(seed, t, [r], [lo])
                counters = np.array([[hi * M + c for c in range(M)]])
                v[(lo, hi)] = cell.noise_at("pairwise_noise", "gaussian", np.array([0]), counters)[
                    0, 0
                ]
            half = np.empty((P, M))
            for j in range(P):
                grads = []
                for s in range(counts[j]):
                    g = 2 * (X[j, s] @ x[j] - y[j, s]) * X[j, s] + 2 * rho * x[j]
                    norm = np.linalg.norm(g)
                    grads.append(g * min(1.0, clip / norm) if norm > 0 else g)
                noise = sigma * own[j]
                for (lo, hi), draw in v.items():
                    if j == lo:
                        noise = noise + cor * draw
                    elif j == hi:
                        noise = noise - cor * draw
                half[j] = x[j] - mu * np.mean(grads, axis=0) + noise
            x = W @ half
            centroid = x.mean(axis=0)
            expected = float(((centroid - w_opt) ** 2).sum())
            assert traj.centroid_msd[t - 1, 0, r] == pytest.approx(expected, rel=1e-9, abs=1e-15)


def _ring_only(cfg, labels):
    """The preset's curves with these labels (the claim's, not the other graphs' or schemes')."""
    return dataclasses.replace(cfg, curves=tuple(c for c in cfg.curves if c.label in labels))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_readme_claim_pairwise_cancelling_at_its_tuned_point(seed, tmp_path):
    """README: on the ring of 16 at ε = 1 (link eavesdropper; central: a curious server, it
    leaves its uplinks open), at the preset's tuned point (μ = 0.01, T = 18,000,
    σ_cor/σ = 4) pairwise-cancelling noise is within 9 dB of the central ceiling and at
    least 6 dB better than local DP on the individual models (within 5 dB and at least
    9 dB on the centroid); the issue's 6 dB and 10 dB on the individual models do not
    hold (seeds 0 / 1: 6.2 / 7.9 dB behind central, 7.3 / 8.4 dB ahead of local DP), nor,
    in expectation, at any point where both schemes are tuned (the closed form of
    docs/privacy.md §2.2, checked below by
    ``test_the_engine_meets_the_closed_form_steady_state_of_the_three_schemes``)."""
    cfg = load_preset("correlated-noise", quick=True, seed=seed)
    assert cfg.iterations == 18_000
    cfg = _ring_only(cfg, ("central", "pairwise_cancelling", "local"))
    by = {c["label"]: c for c in run_experiment(cfg, tmp_path)["curves"]}
    for metric, near, far in (("individual_msd_db", 9, 6), ("centroid_msd_db", 5, 9)):
        central, pair, local = (by[k][metric] for k in ("central", "pairwise_cancelling",
                                                          "local"))  # fmt: skip
        assert pair - central < near, (metric, pair - central)
        assert local - pair > far, (metric, local - pair)
    pair = by["pairwise_cancelling"]
    assert pair["pairwise_variance"] == pytest.approx(16 * pair["noise_variance"], rel=1e-12)
    for k in ("pairwise_cancelling", "local"):
        assert by[k]["epsilon_by_adversary"]["link_eavesdropper"] <= 1 + 1e-9
    # central: ε = 1 against a curious server; its uplinks are open to an eavesdropper
    assert by["central"]["epsilon_by_adversary"]["other_server"] <= 1 + 1e-9
    assert by["central"]["epsilon_by_adversary"]["link_eavesdropper"] is None
    # the price of per-edge trust: both neighbours of a server leave it its own draw (the
    # README's 3.13: local DP at the calibrated σ, T rounds of sensitivity 2μB/N)
    sigma = math.sqrt(pair["noise_variance"])
    alone = epsilon([GaussianRelease(2 * 0.01 * 1.0 / 100, sigma)] * 18_000, 1e-5, "pld")
    assert pair["epsilon_by_adversary"]["neighbour_coalition"] == pytest.approx(alone, rel=1e-6)
    assert round(alone, 2) == 3.13
    for k in ("central", "local"):
        assert by[k]["epsilon_by_adversary"]["neighbour_coalition"] <= 1 + 1e-9


@pytest.mark.parametrize("seed", [0, 1])
def test_readme_claim_in_gfl_local_dp_wins_on_the_servers_models(seed, tmp_path):
    """README: with units of 10 clients and secure aggregation (ring of 16, ε = 1 against a
    link eavesdropper, central against a curious server), pairwise-cancelling noise tuned
    for the individual models (σ_cor/σ = 2) is behind local DP on them (the 10 clients'
    noise averages in the unit) and ahead of random server noise; on the centroid it is
    within 8 dB of the central ceiling and ahead of local DP; local DP alone also protects
    against the own server."""
    cfg = load_preset("correlated-noise-gfl", quick=True, seed=seed)
    by = {c["label"]: c for c in run_experiment(cfg, tmp_path)["curves"]}
    keys = ("central", "pairwise_cancelling", "local", "random")
    ind = {k: by[k]["individual_msd_db"] for k in keys}
    cen = {k: by[k]["centroid_msd_db"] for k in keys}
    assert ind["central"] < ind["local"] < ind["pairwise_cancelling"] < ind["random"]
    assert cen["pairwise_cancelling"] - cen["central"] < 8
    assert cen["local"] - cen["pairwise_cancelling"] > 1
    assert cen["random"] > cen["local"]
    for k in keys:
        eps = by[k]["epsilon_by_adversary"]
        adversary = "other_server" if k == "central" else "link_eavesdropper"
        assert by[k]["calibrated_adversary"] == adversary
        assert eps[adversary] <= 1 + 1e-9
        assert (eps["link_eavesdropper"] is None) == (k == "central")
        assert (eps.get("own_server") is not None) == (k == "local")


# ---------------------------------------------------------------- coalitions of servers
def _brute_coalition_inverse(adj: np.ndarray, sigma: float, cor: float, k: int) -> float:
    """max over targets i and k-sets C ∌ i of [(σ²I + σ_cor² L_H)⁻¹]_ii, inverted directly."""
    import itertools

    P = adj.shape[0]
    worst = 0.0
    for members in itertools.combinations(range(P), k):
        honest = [h for h in range(P) if h not in members]
        sub = adj[np.ix_(honest, honest)]
        inv = np.linalg.inv(sigma**2 * np.eye(len(honest)) + cor**2 * (np.diag(sub.sum(1)) - sub))
        worst = max(worst, inv.diagonal().max())
    return worst


@pytest.mark.parametrize("graph", [nx.cycle_graph(7), nx.grid_2d_graph(3, 3), nx.petersen_graph()])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_coalition_std_is_the_worst_honest_subgraph_by_brute_force(graph, k):
    from pgfl.privacy.mechanisms.correlated import coalition_std

    adj = nx.to_numpy_array(nx.convert_node_labels_to_integers(graph), dtype=int)
    sigma, cor = 0.4, 2.0
    got = coalition_std(adj, sigma, cor, k)
    assert got == pytest.approx(1 / math.sqrt(_brute_coalition_inverse(adj, sigma, cor, k)))
    assert sigma <= got  # never worse than the independent part alone
    if k >= adj.sum(1).min():  # a coalition can hold every neighbour of a server
        assert got == sigma


def test_coalitions_cost_more_the_larger_and_all_neighbours_leave_local_dp():
    """ε against k curious servers grows with k; every neighbour of the target's server
    together leave it its own draw alone: local DP at the small independent σ."""
    graph = nx.petersen_graph()  # degree 3: k = 1, 2 leave some cancelling noise
    adj = nx.to_numpy_array(graph, dtype=int)
    T, sigma = 40, 0.8
    eps = {}
    for k in (1, 2, 3):
        ctx = ReleaseContext(mu=0.5, clip=1.0, iterations=T, dim=2, adjacency=adj)
        mech = PairwiseCancelling(std=sigma, pairwise_std=2.0, coalition=k)
        eps[k] = epsilon_by_adversary(Mean(), mech, ctx, 1e-5)
    local = epsilon([GaussianRelease(2 * 0.5 * 1.0, sigma)] * T, 1e-5, "pld")
    assert eps[1]["link_eavesdropper"] < eps[1]["server_coalition"] < eps[2]["server_coalition"]
    assert eps[2]["server_coalition"] < eps[3]["server_coalition"] == pytest.approx(local)
    assert eps[1]["neighbour_coalition"] == pytest.approx(local, rel=1e-12)
    assert eps[1]["server_coalition"] == max(eps[1]["neighbour_server"], eps[1]["other_server"])


def test_coalition_size_is_a_setting_of_pairwise_noise():
    from pgfl.experiments.loader import parse_config

    raw = {"name": "k", "iterations": 5, "topology": {"kind": "ring", "P": 6},
           "data": {"K": 1, "N": 5}, "training": {"L": 1, "clip_norm": 1.0},
           "privacy": {"server_noise": "pairwise_cancelling", "server_variance": 0.1,
                       "pairwise_variance": 1.0, "coalition_size": 3}}  # fmt: skip
    cfg = parse_config(raw)
    from pgfl.experiments.build import curve_mechanisms

    assert curve_mechanisms(cfg.curves[0])[1].coalition == 3
    raw["privacy"]["coalition_size"] = 0
    with pytest.raises(ConfigError, match="privacy.coalition_size"):
        parse_config(raw)


# ---------------------------------------------------------- the ratio r = σ_cor/σ (issue 28)
def _laplacian(adj: np.ndarray) -> np.ndarray:
    return np.diag(adj.sum(1)) - adj


def _gaussian(std: float) -> RandomNoise:
    """Independent Gaussian server noise: local DP at σ = std."""
    return RandomNoise(std=std, distribution="gaussian")


GRAPHS = [nx.cycle_graph(8), nx.convert_node_labels_to_integers(nx.grid_2d_graph(3, 3)),
          nx.complete_graph(6)]  # fmt: skip


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("ratio", [0.5, 2.4, 4.1])
def test_target_epsilon_calibrates_sigma_with_the_pairwise_part_at_a_fixed_ratio(graph, ratio):
    """Closed form: with σ_cor = rσ every round has covariance σ²(I + r²L), worth the
    std σ·g(r), g(r) = 1/√max_i [(I + r²L)⁻¹]_ii; so the calibrated σ is local DP's σ over
    g(r), and T Gaussian releases at σ·g(r), recomputed here, meet ε = 1."""
    adj = nx.to_numpy_array(graph, dtype=int)
    P = adj.shape[0]
    ctx = ReleaseContext(mu=0.5, clip=1.0, iterations=40, dim=2, adjacency=adj)
    mech = PairwiseCancelling(std=1.0, pairwise_ratio=ratio)
    sigma = calibrate(lambda s: mech.with_std(s).view(ctx, "link_eavesdropper"), 1.0, 1e-5)
    g = 1 / math.sqrt(np.linalg.inv(np.eye(P) + ratio**2 * _laplacian(adj)).diagonal().max())
    local = calibrate(lambda s: _gaussian(s).transcript(ctx), 1.0, 1e-5)
    assert sigma * g == pytest.approx(local, rel=3e-4)
    eps = epsilon([GaussianRelease(2 * 0.5 * 1.0, sigma * g)] * 40, 1e-5, "pld")
    assert 0.995 < eps <= 1 + 1e-9
    assert mech.with_std(sigma).sigma_cor == pytest.approx(ratio * sigma, rel=1e-12)


@pytest.mark.parametrize("graph", GRAPHS)
def test_at_a_fixed_ratio_the_round_is_worth_sigma_times_a_factor_so_epsilon_falls_with_sigma(
    graph,
):
    """Monotonicity of the calibration: effective_std(σ, rσ) = σ·effective_std(1, r) for
    every view, so ε(σ) at fixed r decreases strictly (bisection finds the one σ)."""
    adj = nx.to_numpy_array(graph, dtype=int)
    ctx = ReleaseContext(mu=0.5, clip=1.0, iterations=40, dim=2, adjacency=adj)
    for kind in ("none", "neighbour", "other"):
        unit = effective_std(adj, 1.0, 3.0, kind)
        for s in (0.1, 0.7, 5.0):
            assert effective_std(adj, s, 3.0 * s, kind) == pytest.approx(s * unit, rel=1e-9)
    eps = [epsilon_by_adversary(Mean(), PairwiseCancelling(std=s, pairwise_ratio=3.0), ctx,
                                1e-5)["neighbour_server"] for s in (0.5, 0.6, 0.7)]  # fmt: skip
    assert eps[0] > eps[1] > eps[2]


def test_ratio_zero_is_local_noise_calibration():
    """Limit case r = 0: no pairwise part, the independent σ alone: local DP's calibration."""
    adj = nx.to_numpy_array(nx.cycle_graph(6), dtype=int)
    ctx = ReleaseContext(mu=0.3, clip=1.0, iterations=60, dim=2, adjacency=adj)
    mech = PairwiseCancelling(std=1.0, pairwise_ratio=0.0)
    local = calibrate(lambda s: _gaussian(s).transcript(ctx), 2.0, 1e-5)
    for adversary in ("link_eavesdropper", "neighbour_server", "other_server"):
        sigma = calibrate(lambda s, a=adversary: mech.with_std(s).view(ctx, a), 2.0, 1e-5)
        assert sigma == local
    assert mech.with_std(local).sigma_cor == 0.0


def _ratio_config(tmp_path, privacy: str, name: str = "ratio") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\niterations = 30\nrepetitions = 1\n'
        '[topology]\nkind = "ring"\nP = 6\n[data]\nK = 1\nN = 20\n'
        '[training]\nL = 1\nmu = 0.2\nclip_norm = 1.0\nbatch = "full"\nepochs = 1\n'
        '[privacy]\nneighbours = "record"\naccountants = ["pld"]\nepsilon_checkpoints = 2\n'
        f'server_noise = "pairwise_cancelling"\n{privacy}\n'
    )
    return path


def test_a_run_at_a_ratio_meets_its_epsilon_recomputed_independently(tmp_path):
    """The configuration path: ``privacy.pairwise_ratio`` with a target ε calibrates σ with
    σ_cor = rσ (summary.json's ``pairwise_variance`` = r² ``noise_variance``), and the ε
    recomputed from σ here (brute-force inverse of I + r²L on the ring, 30 Gaussian rounds
    of sensitivity 2μB/N) is the summary's and meets the target."""
    from pgfl.experiments.loader import load_config

    path = _ratio_config(tmp_path, 'pairwise_ratio = 2.4\ntarget_epsilon = 1.0\n'
                                   'adversary = "link_eavesdropper"')  # fmt: skip
    curve = run_experiment(load_config(path), tmp_path / "out")["curves"][0]
    sigma2 = curve["noise_variance"]
    assert curve["pairwise_variance"] == pytest.approx(2.4**2 * sigma2, rel=1e-12)
    adj = nx.to_numpy_array(nx.cycle_graph(6), dtype=int)
    inv = np.linalg.inv(sigma2 * (np.eye(6) + 2.4**2 * _laplacian(adj)))
    s_eff = 1 / math.sqrt(inv.diagonal().max())
    direct = epsilon([GaussianRelease(2 * 0.2 * 1.0 / 20, s_eff)] * 30, 1e-5, "pld")
    assert curve["epsilon_by_adversary"]["link_eavesdropper"] == pytest.approx(direct, rel=1e-9)
    assert 0.995 < direct <= 1 + 1e-9


def test_old_pairwise_variance_loads_with_a_warning_and_its_exact_ratio(tmp_path):
    """``pairwise_variance`` keeps its absolute meaning (same σ_cor) and warns; with σ fixed
    the warning names the ratio it equals, which gives the same mechanism."""
    from pgfl.experiments.build import curve_mechanisms
    from pgfl.experiments.loader import load_config
    from pgfl.param import SettingWarning

    old = _ratio_config(tmp_path, "server_variance = 0.25\npairwise_variance = 2.25", "old")
    with pytest.warns(SettingWarning, match=r"pairwise_ratio = 3 \(σ_cor/σ\)") as caught:
        mech = curve_mechanisms(load_config(old).curves[0])[1]
    assert len(caught) == 1 and "deprecated" in str(caught[0].message)
    new = _ratio_config(tmp_path, "server_variance = 0.25\npairwise_ratio = 3.0", "new")
    again = curve_mechanisms(load_config(new).curves[0])[1]
    assert (mech.std, mech.sigma_cor) == (0.5, 1.5) == (again.std, again.sigma_cor)
    calibrated = _ratio_config(tmp_path, "pairwise_variance = 2.25\ntarget_epsilon = 1.0", "cal")
    with pytest.warns(SettingWarning, match="stays fixed while privacy.target_epsilon"):
        load_config(calibrated)


def test_pairwise_ratio_and_pairwise_variance_both_given_is_one_line_exit_2(tmp_path, capsys):
    import pgfl.cli

    both = _ratio_config(tmp_path, "server_variance = 0.25\npairwise_ratio = 3.0\n"
                                   "pairwise_variance = 2.25", "both")  # fmt: skip
    with pytest.raises(SystemExit) as stop:
        pgfl.cli.main(["run", str(both), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and len(err) == 1, err
    assert "privacy.pairwise_ratio and privacy.pairwise_variance" in err[0]
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match=r"pairwise_ratio must be a real number in \[0, inf\)"):
        PairwiseCancelling(std=1.0, pairwise_ratio=-1.0)
    with pytest.raises(ConfigError, match="not both"):
        PairwiseCancelling(std=1.0, pairwise_ratio=1.0, pairwise_std=1.0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_readme_claim_decor_gaps_on_the_individual_models(seed, tmp_path):
    """README, "DECOR's experiment": ``decor --quick`` (ring of 16, d = 10, client-level,
    ε = 1, T = 3,500, 8 repetitions): pairwise-cancelling noise within 3 dB of central DP
    on the individual models, local DP at least 8 dB behind both; the curves name their
    scheme, topology and target ε."""
    cfg = load_preset("decor", quick=True, seed=seed)
    assert (cfg.iterations, cfg.repetitions, len(cfg.curves)) == (3500, 8, 4)
    curves = run_experiment(cfg, tmp_path)["curves"]
    by = {c["scheme"]: c for c in curves if c.get("target_epsilon") == 1.0}
    assert {c["topology"] for c in curves} == {"ring"}
    ind = {k: c["individual_msd_db"] for k, c in by.items()}
    assert set(ind) == {"central_dp", "pairwise_cancelling", "client_noise"}
    assert abs(ind["pairwise_cancelling"] - ind["central_dp"]) < 3
    assert ind["client_noise"] - max(ind["central_dp"], ind["pairwise_cancelling"]) > 8
    assert all("centroid_msd_db" in c for c in by.values())
    assert by["pairwise_cancelling"]["pairwise_variance"] == pytest.approx(
        64 * by["pairwise_cancelling"]["noise_variance"], rel=1e-12
    )
    assert by["pairwise_cancelling"]["neighbours"] == "client"


# ------------------------------------------- the steady state in closed form (issue 28)
def _expected_msd_db(curve, seed: int, T: int) -> tuple[float, float]:
    """(centroid, individual) MSD in dB of the tail mean the summary reports, in expectation.

    Least squares without clipping is linear: with e_p = x_p − x*, one round is
    e ← (A ⊗ I)[blockdiag(I − μH_p) e − μ∇f_p(x*)] + n, n ~ N(0, Σ ⊗ I_M), Σ = σ²·11ᵀ for
    central DP (the broadcast draw), σ²AAᵀ for local DP, A(σ²I + σ_cor²L)Aᵀ for
    pairwise-cancelling noise (DECOR's σ²I + σ_cor²L sent, then combined). The mean and
    covariance of e are iterated exactly from e_0 = −x* and averaged over the last 10% of
    the rounds, as the summary averages its curves.
    """
    net = build_network(curve, seed)
    s = curve_settings(curve, T, net)
    A, P = net.A, net.A.shape[0]
    X, y = net.data.X[:, 0], net.data.y[:, 0]
    N, M = X.shape[1:]
    rho = curve.training.rho
    H = 2 * np.einsum("pni,pnj->pij", X, X) / N + 2 * rho * np.eye(M)
    w_opt = net.problem.optimum(net.data)
    grad = np.einsum("pij,j->pi", H, w_opt) - 2 * np.einsum("pn,pni->pi", y, X) / N
    if curve.label == "central":
        noise = s.server.std**2 * np.ones((P, P))
    elif curve.label == "local":
        noise = s.client.std**2 * A @ A.T
    else:
        adj = (net.mixing > 0) & ~np.eye(P, dtype=bool)
        noise = A @ (s.server.std**2 * np.eye(P) + s.server.sigma_cor**2 * _laplacian(adj)) @ A.T
    step = np.kron(A, np.eye(M)) @ scipy_block_diag(*(np.eye(M) - curve.training.mu * H))
    drift = -curve.training.mu * np.kron(A, np.eye(M)) @ grad.ravel()
    avg = np.kron(np.full((1, P), 1 / P), np.eye(M))
    mean, cov = np.tile(-w_opt, P), np.zeros((P * M, P * M))
    tail = T - max(1, round(0.1 * T))
    centroid = individual = 0.0
    for t in range(T):
        mean, cov = step @ mean + drift, step @ cov @ step.T + np.kron(noise, np.eye(M))
        if t >= tail:
            individual += (mean @ mean + np.trace(cov)) / P
            centroid += np.sum((avg @ mean) ** 2) + np.trace(avg @ cov @ avg.T)
    return 10 * math.log10(centroid / (T - tail)), 10 * math.log10(individual / (T - tail))


def test_the_engine_meets_the_closed_form_steady_state_of_the_three_schemes(tmp_path):
    """The analysis behind the tuning of ``correlated-noise`` (docs/privacy.md §2.2): on the
    ring of 16 at ε = 1, central DP, pairwise-cancelling noise (σ_cor/σ = 4) and local DP,
    each calibrated by the engine, reach the MSD the linear recursion predicts on both
    metrics. The clip bound is large enough never to act, so the recursion is exact in
    expectation; 16 repetitions over 15 relaxation times leave the tail mean of the
    noisiest curve (central: one draw per round) a spread of about 0.6 dB."""
    from pgfl.experiments.loader import parse_config

    eps = {"target_epsilon": 1.0}
    raw = {"name": "steady", "seed": 0, "iterations": 1500, "repetitions": 16,
           "topology": {"kind": "ring", "P": 16}, "data": {"K": 1, "N": 100, "M": 2},
           "training": {"rho": 0.1, "mu": 0.05, "L": 1, "epochs": 1, "batch": "full",
                        "clip_norm": 100.0},
           "privacy": {"delta": 1e-5, "neighbours": "record", "accountants": ["pld"],
                       "epsilon_checkpoints": 2},
           "curves": [
               {"label": "central", "privacy": {"server_noise": "central",
                "server_distribution": "gaussian", "adversary": "other_server", **eps}},
               {"label": "pairwise_cancelling", "privacy": {
                "server_noise": "pairwise_cancelling", "pairwise_ratio": 4.0,
                "adversary": "link_eavesdropper", **eps}},
               {"label": "local", "privacy": {"client_noise": "gaussian",
                "adversary": "link_eavesdropper", **eps}}]}  # fmt: skip
    cfg = parse_config(raw)
    entries = run_experiment(cfg, tmp_path)["curves"]
    predicted = {}
    for curve, entry in zip(cfg.curves, entries, strict=True):
        predicted[curve.label] = _expected_msd_db(curve, cfg.seed, cfg.iterations)
        measured = (entry["centroid_msd_db"], entry["individual_msd_db"])
        np.testing.assert_allclose(measured, predicted[curve.label], atol=1.5)
    # what the comparison rests on: the pairwise terms cancel in the centroid (within
    # 10·log10(16/g(4)²) = 3.1 dB of central DP, where local DP is 12 dB away) but leave
    # a disagreement that local DP's independent draws, averaged by gossip, do not
    cen = {k: v[0] for k, v in predicted.items()}
    excess = {k: v[1] - v[0] for k, v in predicted.items()}
    adj = nx.to_numpy_array(nx.cycle_graph(16), dtype=int)
    g2 = 1 / np.linalg.inv(np.eye(16) + 16 * _laplacian(adj)).diagonal().max()
    assert cen["pairwise_cancelling"] - cen["central"] == pytest.approx(
        10 * math.log10(16 / g2), abs=0.3
    )
    assert cen["local"] - cen["central"] == pytest.approx(10 * math.log10(16), abs=0.3)
    assert abs(excess["central"]) < 1e-9 and excess["pairwise_cancelling"] > excess["local"] + 3
