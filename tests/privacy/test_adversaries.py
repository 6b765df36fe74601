"""ε per adversary, amplification by client sampling, record-level neighbours, central DP.

Every new ε is checked against a computation that does not use the code under test:
the Rényi bound of subsampling without replacement against the general theorem of its
paper (an upper bound it must not exceed) and against the exact Rényi divergence of a
realizable pair (a lower bound it must not fall under); the pure-DP amplification against
the privacy loss of the pair that attains it; a Monte-Carlo audit of one sampled release.
"""

import math

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dp_rdp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from pgfl.data.synthetic import regression_data
from pgfl.engine import CurveBatch, CurveSettings, Network
from pgfl.engine.step import combine_phase, server_messages
from pgfl.experiments.loader import parse_config
from pgfl.experiments.plan import prepare_experiment
from pgfl.experiments.presets import load_preset
from pgfl.experiments.privacy import curve_epsilon
from pgfl.privacy.accounting import epsilon
from pgfl.privacy.accounting.releases import (
    GaussianRelease,
    SampledGaussianRelease,
    Transcript,
    amplified_epsilon,
)
from pgfl.privacy.mechanisms import (
    CentralNoise,
    ClientNoise,
    GraphHomomorphic,
    Mean,
    RandomNoise,
    ReleaseContext,
)
from pgfl.privacy.mechanisms.adversaries import (
    adversary_epsilons,
    epsilon_by_adversary,
    transcript_epsilon,
)
from pgfl.problems import LeastSquares
from pgfl.rng import KeyedDraws
from pgfl.validation import ConfigError

ORDERS = np.arange(2, 33)


# ------------------------------------------------------------ subsampled Gaussian, Rényi
def wbk_theorem9(q: float, z: float, alpha: int) -> float:
    """Rényi DP at integer ``alpha`` of a Gaussian (multiplier z) on an m-of-n subsample.

    The general bound of Wang, Balle & Kasiviswanathan (AISTATS 2019, arXiv:1808.00087,
    Theorem 9) with the Gaussian's ε(j) = j/(2z²) and ε(∞) = ∞, written out here from
    the paper: (1/(α−1)) log(1 + q² C(α,2) min{4(e^{ε(2)} − 1), 2 e^{ε(2)}}
    + Σ_{j≥3} 2 q^j C(α,j) e^{(j−1) ε(j)}), summed in log space.
    """
    eps = lambda j: j / (2.0 * z * z)  # noqa: E731
    log_comb = lambda j: (  # noqa: E731
        special.gammaln(alpha + 1) - special.gammaln(j + 1) - special.gammaln(alpha - j + 1)
    )
    second = min(math.log(4.0) + math.log(math.expm1(eps(2))), math.log(2.0) + eps(2))
    terms = [0.0, 2 * math.log(q) + log_comb(2) + second]
    terms += [
        math.log(2.0) + j * math.log(q) + log_comb(j) + (j - 1) * eps(j)
        for j in range(3, alpha + 1)
    ]
    return float(special.logsumexp(terms)) / (alpha - 1)


def renyi_mixture(q: float, z: float, alpha: int) -> float:
    """D_α((1−q) N(0,1) + q N(1/z, 1) ‖ N(0,1)) in closed form: a realizable pair.

    Unit noise and shift 1/z (multiplier z): the changed client is sampled with
    probability q and then moves the release by the full sensitivity; otherwise the
    release is the same in both runs. With the likelihood ratio 1 − q + q e^{x/z − 1/(2z²)}
    and E[e^{k x / z}] = e^{k²/(2z²)}, the binomial expansion gives
    E[ratio^α] = Σ_k C(α,k) (1−q)^{α−k} q^k e^{(k² − k)/(2z²)}.
    """
    k = np.arange(alpha + 1)
    logs = (
        special.gammaln(alpha + 1) - special.gammaln(k + 1) - special.gammaln(alpha - k + 1)
        + (alpha - k) * math.log1p(-q) + k * math.log(q) + (k * k - k) / (2 * z * z)
    )  # fmt: skip
    return float(special.logsumexp(logs)) / (alpha - 1)


@pytest.mark.parametrize(("q", "z"), [(0.11, 1.0), (0.05, 2.0), (0.3, 0.8), (0.11, 4.0)])
def test_sampled_gaussian_rdp_lies_between_a_realizable_pair_and_the_general_theorem(q, z):
    library = dp_rdp._compute_rdp_sample_wor_gaussian(q, z, ORDERS)
    for alpha, value in zip(ORDERS, library, strict=True):
        upper = wbk_theorem9(q, z, int(alpha))
        lower = renyi_mixture(q, z, int(alpha))
        assert lower <= value * (1 + 1e-9) + 1e-12, (alpha, lower, value)
        assert value <= upper * (1 + 1e-9) + 1e-12, (alpha, value, upper)


def test_amplification_shrinks_epsilon_and_vanishes_at_full_sampling():
    plain = epsilon([GaussianRelease(1.0, 2.0)] * 500, 1e-5, "rdp")
    full = epsilon([SampledGaussianRelease(1.0, 2.0, 1, 100, 100)] * 500, 1e-5, "rdp")
    tenth = epsilon([SampledGaussianRelease(1.0, 2.0, 1, 100, 10)] * 500, 1e-5, "rdp")
    assert full == pytest.approx(plain, rel=1e-12)  # q = 1: no credit
    assert tenth < plain / 4
    # every other accountant charges a sampled release as the plain Gaussian (sound)
    for acc in ("basic", "advanced", "kairouz"):
        sampled = epsilon([SampledGaussianRelease(1.0, 2.0, 1, 100, 10)] * 50, 1e-5, acc)
        assert sampled == pytest.approx(epsilon([GaussianRelease(1.0, 2.0)] * 50, 1e-5, acc))


def test_monte_carlo_audit_of_one_sampled_release_stays_below_its_epsilon():
    # one release, q = 0.5, multiplier 1: a privacy loss an audit of 400k draws can see
    q, z, delta, n = 0.5, 1.0, 1e-5, 400_000
    eps = epsilon([SampledGaussianRelease(1.0, z, 1, 10, 5)], delta, "pld")
    rng = np.random.default_rng(7)
    shifted = rng.random(n) < q
    p = rng.standard_normal(n) * z + shifted  # changed client sampled: moved by 1
    qq = rng.standard_normal(n) * z
    best = 0.0
    for t in np.quantile(qq, [0.99, 0.999, 0.9999]):
        tpr = (p > t).mean()
        fpr_hi = stats.beta.ppf(1 - 1e-3, (qq > t).sum() + 1, n - (qq > t).sum())
        tpr_lo = stats.beta.ppf(1e-3, (p > t).sum(), n - (p > t).sum() + 1)
        if tpr > 0:
            best = max(best, math.log(max(tpr_lo - delta, 1e-300) / fpr_hi))
    assert best <= eps
    assert best > 0.3 * eps  # the audit is not vacuous


# ------------------------------------------------------------------ Laplace, pure DP
@pytest.mark.parametrize(("eps0", "q"), [(0.3, 0.11), (1.0, 0.5), (4.0, 0.05)])
def test_pure_dp_amplification_is_the_loss_of_the_pair_that_attains_it(eps0, q):
    # (1 − q) Lap(0, 1) + q Lap(eps0, 1) against Lap(0, 1): the loss is largest for x ≥ eps0
    x = np.linspace(-20, 40, 200_001)
    p = (1 - q) * stats.laplace.pdf(x) + q * stats.laplace.pdf(x, loc=eps0)
    loss = np.max(np.log(p / stats.laplace.pdf(x)))
    assert amplified_epsilon(eps0, q) == pytest.approx(loss, rel=1e-9)


def test_laplace_transcript_with_sampling_composes_the_amplified_steps():
    t = Transcript((0.1,) * 20, std=math.sqrt(2.0), dim=1, sampling=(10, 2))
    # b = 1: each step is 0.1-DP, amplified to ln(1 + 0.2 (e^0.1 − 1)); basic sums them
    expected = 20 * math.log1p(0.2 * math.expm1(0.1))
    assert epsilon(t.releases(), 1e-5, "basic") == pytest.approx(expected, rel=1e-12)
    assert transcript_epsilon(t, 1e-5) <= expected + 1e-9


# ------------------------------------------------------------------ adversaries
CTX = ReleaseContext(mu=0.5, clip=1.0, iterations=50, dim=2, clients=100, sampled=10, units=10)


def test_graph_homomorphic_leaves_the_unit_clients_and_own_server_unprotected():
    eps = epsilon_by_adversary(Mean(), GraphHomomorphic(std=3.0), CTX, 1e-5)
    assert eps["unit_client"] is None and eps["own_server"] is None
    assert all(eps[a] > 0 for a in ("link_eavesdropper", "other_server", "neighbour_server"))


def test_random_noise_gains_amplification_against_everyone_but_its_own_server():
    for dist in ("laplace", "gaussian"):
        mech = RandomNoise(std=3.0, distribution=dist)
        eps = epsilon_by_adversary(Mean(), mech, CTX, 1e-5)
        plain = transcript_epsilon(mech.transcript(CTX), 1e-5)
        assert eps["own_server"] is None
        for a in ("link_eavesdropper", "other_server", "neighbour_server", "unit_client"):
            assert eps[a] < 0.5 * plain, (dist, a)
        # without sampling (L = K) nothing is credited
        full = ReleaseContext(
            mu=0.5, clip=1.0, iterations=50, dim=2, clients=10, sampled=10, units=10
        )
        assert epsilon_by_adversary(Mean(), mech, full, 1e-5)["other_server"] == pytest.approx(
            transcript_epsilon(mech.transcript(full), 1e-5)
        )


def test_local_noise_protects_against_its_own_server_and_better_downstream():
    eps = epsilon_by_adversary(
        ClientNoise(distribution="gaussian", std=2.0), RandomNoise(), CTX, 1e-5
    )
    assert eps["own_server"] is not None
    assert eps["link_eavesdropper"] < eps["own_server"]  # a mean of L messages, sampled


def test_central_noise_is_charged_one_pth_of_a_unit_message_and_leaves_the_uplinks_open():
    sigma = 0.05
    central = CentralNoise(std=sigma, distribution="gaussian").transcript(CTX)
    random = RandomNoise(std=sigma, distribution="gaussian").transcript(CTX)
    ratio = np.array(central.sensitivities) / np.array(random.sensitivities)
    np.testing.assert_allclose(ratio, 1 / CTX.units)
    by = adversary_epsilons(Mean(), CentralNoise(std=sigma, distribution="gaussian"), CTX, 1e-5)
    assert by["own_server"].epsilon is None and by["unit_client"].epsilon is not None
    # the uplinks carry every unit's aggregate in the clear: an eavesdropper on them wins
    assert by["link_eavesdropper"].epsilon is None
    assert "in the clear" in by["link_eavesdropper"].note
    for a in ("other_server", "neighbour_server", "server_coalition", "neighbour_coalition"):
        assert by[a].epsilon == by["other_server"].epsilon > 0


def test_central_engine_sends_the_uplinks_in_the_clear_and_broadcasts_one_shared_draw():
    P, M, R, sigma = 4, 3, 300, 0.3
    data = regression_data(np.random.default_rng(0), P=P, K=1, N=2, M=M)
    net = Network(data, LeastSquares(0.1), np.full((P, P), 1 / P), 1, np.ones((P, 1), int), None)
    curves = CurveBatch.of(
        [CurveSettings(mu=0.1, server=CentralNoise(std=sigma, distribution="gaussian"))]
    )
    psi = np.random.default_rng(1).standard_normal((1, R, P, M))
    # two blocks of units draw the same aggregator noise: split the senders
    out = []
    for start, stop in ((0, 2), (2, P)):
        links = net.links.subset(net.links.out_of(start, stop))
        draws = KeyedDraws(9, 1, range(R), range(start, stop))
        out.append((links, server_messages(psi[:, :, start:stop], links, curves, draws, start, 1)))
    for links, m in out:
        up = links.src != links.dst  # the uplinks: each unit's aggregate, exactly, no noise
        assert np.array_equal(m[:, :, up], psi[:, :, links.src[up]])
    own = [(m - psi[:, :, links.src])[:, :, links.src == links.dst] for links, m in out]
    np.testing.assert_allclose(own[0][:, :, :1], own[1][:, :, :1], atol=1e-12)  # one draw z·P
    messages = np.concatenate([m for _, m in out], axis=2)
    order = np.lexsort((np.concatenate([lk.src for lk, _ in out]),
                        np.concatenate([lk.dst for lk, _ in out])))  # fmt: skip
    W = combine_phase(messages[:, :, order], net.links, 0, P)
    noise = W - psi.mean(axis=2, keepdims=True)  # w_p − ψ̄
    np.testing.assert_allclose(noise, noise[:, :, :1].repeat(P, axis=2), atol=1e-12)
    chi = (noise[0, :, 0] ** 2).sum() / sigma**2  # χ² with R·M degrees of freedom
    assert stats.chi2.ppf(1e-4, R * M) < chi < stats.chi2.ppf(1 - 1e-4, R * M)


def test_central_needs_the_averaging_network():
    data = regression_data(np.random.default_rng(0), P=3, K=4, N=10)
    ones = np.ones((3, 4), dtype=int)
    ring = np.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.25, 0.25, 0.5]])
    net = Network(data, LeastSquares(0.1), ring, L=2, epochs=ones, batch=None)
    with pytest.raises(ConfigError, match="averaging combination"):
        CentralNoise(std=1.0).validate(net)


# ------------------------------------------------------------------ record-level sensitivity
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 40), clip=st.floats(0.05, 5.0))
def test_one_full_batch_step_moves_by_at_most_2_mu_clip_over_n_when_one_record_changes(
    seed, n, clip
):
    rng = np.random.default_rng(seed)
    mu, M = 0.7, 3
    U = rng.standard_normal((n, M)) * 3
    d = rng.standard_normal(n) * 3
    w = rng.standard_normal((M, 1))
    U2, d2 = U.copy(), d.copy()
    U2[0] = rng.standard_normal(M) * 10  # the replaced record
    d2[0] = rng.standard_normal() * 10
    prob = LeastSquares(0.1)
    weight = np.full(n, 1.0 / n)
    step = lambda U, d: w - mu * prob.gradient(w, U, d, weight, clip)  # noqa: E731
    moved = np.linalg.norm(step(U, d) - step(U2, d2))
    assert moved <= 2 * mu * clip / n * (1 + 1e-12)


def test_records_are_credited_only_for_one_full_batch_step_with_record_neighbours():
    data = regression_data(np.random.default_rng(0), P=2, K=3, N=20)
    ones = np.ones((2, 3), dtype=int)
    A = np.full((2, 2), 0.5)
    full = Network(data, LeastSquares(0.1), A, L=2, epochs=ones, batch=None)
    record = CurveSettings(mu=0.5, clip_norm=1.0, neighbours="record")
    client = CurveSettings(mu=0.5, clip_norm=1.0)
    assert record.release_context(full, 5).records == int(data.counts.min())
    assert client.release_context(full, 5).records == 1
    two = Network(data, LeastSquares(0.1), A, L=2, epochs=2 * ones, batch=None)
    batched = Network(data, LeastSquares(0.1), A, L=2, epochs=ones, batch=ones)
    assert record.release_context(two, 5).records == 1
    assert record.release_context(batched, 5).records == 1


# ------------------------------------------------------------------ in a run
def test_fig2_graph_homomorphic_reports_unit_client_null_and_random_gains_amplification():
    cfg = load_preset("fig2")
    plan = prepare_experiment(cfg, "/nonexistent/never-written")
    batch = plan.batches[0]
    by = {}
    for c, i in enumerate(batch.indices):
        _, entry = curve_epsilon(
            batch.settings[c], batch.net, cfg.iterations, delta=1e-5,
            accountants=("pld",), checkpoints=2,
        )  # fmt: skip
        by[cfg.curves[i].label] = entry
    gh, rnd = by["graph_homomorphic"], by["random"]
    assert gh["epsilon_by_adversary"]["unit_client"] is None
    assert rnd["epsilon_by_adversary"]["other_server"] < rnd["epsilon"]["pld"] / 2
    assert rnd["epsilon_by_adversary"]["own_server"] is None


def test_calibration_against_an_adversary_meets_its_target():
    raw = {
        "name": "cal",
        "iterations": 40,
        "topology": {"kind": "ring", "P": 4},
        "data": {"K": 20, "N": 10},
        "training": {"L": 4, "mu": 0.3, "epochs": 1, "batch": "full", "clip_norm": 1.0},
        "privacy": {"server_noise": "random", "server_distribution": "gaussian",
                    "target_epsilon": 1.0, "adversary": "other_server", "neighbours": "record"},
    }  # fmt: skip
    cfg = parse_config(raw)
    plan = prepare_experiment(cfg, "/nonexistent/never-written")
    b = plan.batches[0]
    _, entry = curve_epsilon(
        b.settings[0], b.net, cfg.iterations, delta=1e-5, accountants=("pld",), checkpoints=2
    )
    got = entry["epsilon_by_adversary"]["other_server"]
    assert 1.0 / (1 + 1e-3) <= got <= 1.0 + 1e-9


def test_an_adversary_the_mechanism_does_not_cover_is_refused():
    raw = {
        "name": "x",
        "training": {"clip_norm": 1.0},
        "privacy": {"server_noise": "graph_homomorphic", "target_epsilon": 1.0,
                    "adversary": "unit_client"},
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"privacy.adversary = 'unit_client'.*does not protect"):
        parse_config(raw)


def test_privacy_config_json_gives_epsilon_by_adversary(tmp_path):
    import json
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "pgfl.cli", "privacy", "config", "fig2", "--json"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    curves = json.loads(run.stdout)["curves"]
    for label in ("graph_homomorphic", "random"):
        by = curves[label]["epsilon_by_adversary"]
        assert set(by) == {"link_eavesdropper", "other_server", "neighbour_server",
                           "server_coalition", "neighbour_coalition", "own_server",
                           "unit_client", "upload_eavesdropper"}  # fmt: skip
        assert by["own_server"] is None and by["upload_eavesdropper"] is None
        notes = curves[label]["adversary_notes"]
        assert "in the clear" in notes["upload_eavesdropper"]
    assert curves["graph_homomorphic"]["epsilon_by_adversary"]["unit_client"] is None
    assert curves["random"]["epsilon_by_adversary"]["unit_client"] > 0


@pytest.mark.parametrize("seed", [0, 1])
def test_readme_claim_a_usable_model_at_epsilon_one(seed, tmp_path):
    """README: at ε = 1 against a curious server (δ = 1e-5, record-level) the regression
    set-up reaches below −30 dB centroid MSD with central DP, random server noise and local
    noise (no trusted party); the papers' calibration of the same noise stays above 0 dB.
    Central DP leaves an eavesdropper on its uplinks unprotected; the others give it ε ≤ 1."""
    from pgfl.apps.runner import run_experiment

    cfg = load_preset("useful-privacy", quick=True, seed=seed)
    by = {c["label"]: c for c in run_experiment(cfg, tmp_path)["curves"]}
    assert by["central"]["centroid_msd_db"] < -30
    assert by["random"]["centroid_msd_db"] < -30
    assert by["local"]["centroid_msd_db"] < -30
    assert by["central"]["centroid_msd_db"] < by["random"]["centroid_msd_db"]  # the ceiling
    assert by["papers' reading"]["centroid_msd_db"] > 0
    for label in ("central", "random", "local", "graph_homomorphic"):
        assert by[label]["calibrated_adversary"] == "other_server"
        assert by[label]["epsilon_by_adversary"]["other_server"] <= 1.0 + 1e-9
    for label in ("random", "local", "graph_homomorphic"):
        assert by[label]["epsilon_by_adversary"]["link_eavesdropper"] <= 1.0 + 1e-9
    assert by["central"]["epsilon_by_adversary"]["link_eavesdropper"] is None
    assert "aggregator" in by["central"]["trusted_parties"]


def test_frontier_by_adversary_draws_only_the_schemes_that_protect():
    from pgfl.apps.frontier import adversary_configs, best_schemes

    configs = adversary_configs(quick=True)
    labels = {k: {c.label.split("@")[0] for c in cfg.curves} for k, cfg in configs.items()}
    assert labels["own_server-T300"] == {"none", "client_gaussian_models"}
    assert "graph_homomorphic_gaussian" not in labels["unit_client-T300"]
    assert "graph_homomorphic_gaussian" in labels["link_eavesdropper-T300"]
    # central leaves its uplinks open: drawn against a curious server, not an eavesdropper
    assert "central" not in labels["link_eavesdropper-T300"]
    assert "central" in labels["other_server-T300"]
    for key, cfg in configs.items():
        for c in cfg.curves[1:]:
            assert c.privacy.adversary == key.rpartition("-T")[0]
            assert c.privacy.neighbours == "record"
    summary = {"curves": [
        {"label": "central", "setup": "unit_client", "x": [1.0, 2.0],
         "centroid_msd_db": [-40.0, -45.0]},
        {"label": "random_gaussian", "setup": "unit_client", "x": [1.0, 2.0],
         "centroid_msd_db": [-35.0, None]},
    ]}  # fmt: skip
    best = best_schemes(summary)
    assert [(b["best"], b.get("distributed")) for b in best] == [
        ("central", "random_gaussian"),
        ("central", None),
    ]


def test_record_level_accounting_is_the_same_on_an_outline_as_on_the_data():
    # Ray actors plan from an outline of the data: it must calibrate the same noise
    from pgfl.experiments.build import build_network, curve_settings

    cfg = load_preset("useful-privacy", quick=True)
    curve = next(c for c in cfg.curves if c.label == "random")
    full = build_network(curve, cfg.seed)
    outline = build_network(curve, cfg.seed, outline=True)
    a = curve_settings(curve, cfg.iterations, full)
    b = curve_settings(curve, cfg.iterations, outline)
    assert a.server.std == b.server.std
    assert a.release_context(full, 5).records == int(full.data.counts.min()) > 1
    assert b.release_context(outline, 5).records == a.release_context(full, 5).records


# ------------------------------------------------- a unit's client knows its own status
def renyi_status_mixture(parts, z: float, alpha: int) -> float:
    """D_α of a realizable joint pair (status, release): a lower bound on the truth.

    With probability w_s the observer's status is s and the changed client is in the
    sample with probability q_s: the release is (1 − q_s) N(0,1) + q_s N(1/z, 1) against
    N(0,1) (the pair of :func:`renyi_mixture`); the status is the same in both worlds, so
    exp((α−1) D_α) of the joint pair is Σ_s w_s exp((α−1) D_α,s).
    """

    def one(q: float) -> float:
        if q == 0:
            return 0.0
        return alpha / (2 * z * z) if q == 1 else renyi_mixture(q, z, alpha)

    logs = [math.log(w) + (alpha - 1) * one(q) for w, q in parts if w > 0]
    return float(special.logsumexp(logs)) / (alpha - 1)


def wbk_status_mixture(parts, z: float, alpha: int) -> float:
    """The same mixture of the general theorem's bounds (Wang, Balle & Kasiviswanathan, Thm 9)."""
    logs = []
    for w, q in parts:
        if w == 0:
            continue
        bound = 0.0 if q == 0 else (alpha / (2 * z * z) if q == 1 else wbk_theorem9(q, z, alpha))
        logs.append(math.log(w) + (alpha - 1) * bound)
    return float(special.logsumexp(logs)) / (alpha - 1)


@pytest.mark.parametrize(("K", "L", "z"), [(10, 1, 2.0), (10, 3, 1.0), (100, 11, 4.0), (5, 4, 1.5)])
def test_status_mixture_lies_between_a_realizable_pair_and_the_general_theorem(K, L, z):
    """The Rényi bound of a Gaussian seen by a client who knows whether it was sampled."""
    from pgfl.privacy.accounting.accountants import RdpAccountant
    from pgfl.privacy.accounting.releases import MixtureSampledGaussianRelease

    parts = ((1 - L / K, K - 1, L, z), (L / K, K - 1, L - 1, z))
    release = MixtureSampledGaussianRelease(1.0, z, components=parts)
    acc = RdpAccountant(ORDERS)
    ours = acc.mixture_rdp(release)
    rates = [(w, m / n) for w, n, m, _ in parts]
    for alpha, value in zip(ORDERS, ours, strict=True):
        lower = renyi_status_mixture(rates, z, int(alpha))
        upper = wbk_status_mixture(rates, z, int(alpha))
        assert lower <= value * (1 + 1e-9) + 1e-12, (alpha, lower, value)
        assert value <= upper * (1 + 1e-9) + 1e-12, (alpha, value, upper)
    # with an outside observer (another unit's client: an L-of-K sample) the larger holds
    both = MixtureSampledGaussianRelease(1.0, z, components=parts, outside=(K, L))
    assert np.all(acc.mixture_rdp(both) >= ours - 1e-15)
    plain = dp_rdp._compute_rdp_sample_wor_gaussian(L / K, z, ORDERS)
    assert np.all(acc.mixture_rdp(both) >= plain - 1e-12)


def _issue_context() -> ReleaseContext:
    # issue 25: ring of 8, K = 10, L = 1, T = 500, random Gaussian server noise
    return ReleaseContext(mu=0.5, clip=1.0, iterations=500, dim=2, clients=10, sampled=1,
                          units=8)  # fmt: skip


def test_a_unit_client_is_never_credited_the_l_of_k_sample_it_partly_knows():
    """Issue 25's numbers, from an independent recomputation: noise calibrated to ε = 1 for
    an L-of-K sample (the old credit) is ε = 1.060 for a client who knows its status (the
    mixture of an L-of-(K−1) and an (L−1)-of-(K−1) sample), 1.121 in its worse status."""
    import dataclasses

    from pgfl.privacy.accounting import calibrate

    ctx = _issue_context()
    old = lambda s: dataclasses.replace(  # noqa: E731
        RandomNoise(std=s, distribution="gaussian").transcript(ctx), sampling=(10, 1)
    )
    sigma = calibrate(old, 1.0, 1e-5)
    mech = RandomNoise(std=sigma, distribution="gaussian")
    eps = epsilon_by_adversary(Mean(), mech, ctx, 1e-5)
    assert eps["other_server"] == pytest.approx(1.0, abs=1e-3)  # servers lack the sample
    assert eps["unit_client"] == pytest.approx(1.060, abs=1e-3)
    worse = dataclasses.replace(mech.transcript(ctx), sampling=(9, 1))  # never sampled itself
    assert transcript_epsilon(worse, 1e-5) == pytest.approx(1.121, abs=1e-3)
    assert eps["unit_client"] < transcript_epsilon(worse, 1e-5)


def test_secure_aggregation_reveals_the_sample_to_a_units_clients():
    from pgfl.privacy.mechanisms import SecureAggregationScheme

    ctx = ReleaseContext(mu=0.5, clip=1.0, iterations=50, dim=2, clients=10, sampled=3,
                         units=4, sample_revealed=True)  # fmt: skip
    mech = RandomNoise(std=3.0, distribution="gaussian")
    eps = epsilon_by_adversary(SecureAggregationScheme(), mech, ctx, 1e-5)
    plain = transcript_epsilon(mech.transcript(ctx), 1e-5)
    assert eps["unit_client"] == pytest.approx(plain)  # no credit: it knows the sample
    assert eps["other_server"] < 0.7 * plain  # the servers still do not
    assert SecureAggregationScheme.reveals_sample


def test_a_sampled_client_knows_its_own_client_noise():
    """Gaussian client noise, all L = K = 4 clients sampled: a client of the unit sees the
    unit's mean of 4 noisy models, one of them its own, so 3 noises of std σ hide the
    target's Δ/4: the mean's std σ√3/4, not σ/2."""
    sigma, T = 2.0, 30
    ctx = ReleaseContext(mu=0.5, clip=1.0, iterations=T, dim=2, clients=4, sampled=4,
                         clients_per_round=4, units=3)  # fmt: skip
    eps = epsilon_by_adversary(ClientNoise(distribution="gaussian", std=sigma), RandomNoise(),
                               ctx, 1e-5)  # fmt: skip
    delta_mean = 2 * 0.5 * 1.0 / 4
    expected = epsilon([GaussianRelease(delta_mean, sigma * math.sqrt(3) / 4)] * T, 1e-5, "pld")
    servers = epsilon([GaussianRelease(delta_mean, sigma / 2)] * T, 1e-5, "pld")
    assert eps["unit_client"] == pytest.approx(expected, rel=1e-9)
    assert eps["other_server"] == pytest.approx(servers, rel=1e-9)
    assert eps["unit_client"] > eps["other_server"]


def test_laplace_client_noise_is_amplified_against_those_who_lack_the_sample():
    """fig5's case (client Laplace noise, L of K): the own server and an observer of the
    uploads see one message with no credit; the servers' side an L-of-K sample; a client of
    the unit, which knows its own status, the worse L-of-(K−1) one (pure DP: the worst
    status). Per round ε₀ = √M Δ₂/b composed by Σ, the bound the PLD never exceeds."""
    sigma, T, K, L, M = 40.0, 20, 50, 5, 2
    ctx = ReleaseContext(mu=0.2, clip=1.0, iterations=T, dim=M, clients=K, sampled=L, units=3)
    eps = epsilon_by_adversary(ClientNoise(std=sigma), RandomNoise(), ctx, 1e-5)
    e0 = math.sqrt(M) * 2 * 0.2 * 1.0 / (sigma / math.sqrt(2))
    assert eps["own_server"] == eps["upload_eavesdropper"]
    assert eps["own_server"] <= T * e0 + 1e-9
    assert eps["link_eavesdropper"] <= T * amplified_epsilon(e0, L / K) + 1e-9
    assert eps["unit_client"] <= T * amplified_epsilon(e0, L / (K - 1)) + 1e-9
    assert eps["link_eavesdropper"] < eps["unit_client"] < 0.5 * eps["own_server"]


def test_one_unit_lists_no_server_adversaries():
    """P = 1 (fig5): no other server, no links between servers."""
    cfg = load_preset("fig5")
    plan = prepare_experiment(cfg, "/nonexistent/never-written")
    b = plan.batches[0]
    for c in range(len(b.indices)):
        if b.settings[c].client.name == "none":
            continue
        _, entry = curve_epsilon(b.settings[c], b.net, cfg.iterations, delta=1e-5,
                                 accountants=("pld",), checkpoints=2)  # fmt: skip
        by = entry["epsilon_by_adversary"]
        assert set(by) == {"own_server", "unit_client", "upload_eavesdropper"}
        assert by["unit_client"] < by["own_server"]  # a sampled-status credit, not none


def test_uploads_are_protected_by_client_noise_only_and_masks_are_not_an_epsilon():
    from pgfl.privacy.mechanisms import SecureAggregationScheme

    ctx = ReleaseContext(mu=0.5, clip=1.0, iterations=10, dim=2, units=4)
    server = RandomNoise(std=3.0, distribution="gaussian")
    plain = adversary_epsilons(Mean(), server, ctx, 1e-5)["upload_eavesdropper"]
    assert plain.epsilon is None and "in the clear" in plain.note
    masked = adversary_epsilons(SecureAggregationScheme(), server, ctx, 1e-5)
    up = masked["upload_eavesdropper"]
    assert up.epsilon is None
    assert "masked" in up.note and "not a differential-privacy epsilon" in up.note
    noisy = epsilon_by_adversary(ClientNoise(std=2.0), server, ctx, 1e-5)
    assert noisy["upload_eavesdropper"] == noisy["own_server"] > 0


def test_trusted_parties_are_named_beside_the_numbers(capsys):
    from pgfl.commands.printing import print_adversaries
    from pgfl.privacy.mechanisms import TopologyOptimized
    from pgfl.privacy.mechanisms.adversaries import trusted_parties

    assert list(trusted_parties(Mean(), CentralNoise(std=1.0))) == ["aggregator"]
    assert list(trusted_parties(Mean(), TopologyOptimized(std=1.0))) == ["dealer"]
    assert trusted_parties(Mean(), RandomNoise(std=1.0)) == {}
    print_adversaries({"label": "c", "epsilon_by_adversary": {"other_server": 1.0,
                       "link_eavesdropper": None},
                       "adversary_notes": {"link_eavesdropper": "uplinks in the clear"},
                       "trusted_parties": {"aggregator": "sees every aggregate"}})  # fmt: skip
    text = " ".join(capsys.readouterr().out.split())
    assert "NOT protected against link_eavesdropper (uplinks in the clear)" in text
    assert "trusts the aggregator: sees every aggregate" in text


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_readme_claim_best_scheme_at_epsilon_one_per_adversary(seed, tmp_path):
    """README (best scheme at ε = 1 per adversary, frontier-adversary's set-up, T = 300):
    against an eavesdropper on the server links, local and random Gaussian noise are within
    1.5 dB of each other below −33 dB, graph-homomorphic noise above −10 dB, and central
    does not protect it; against a client of the unit, central is the best by more than
    3 dB. (Against a curious server: test_readme_claim_a_usable_model_at_epsilon_one.)"""
    from pgfl.apps.frontier import frontier_config
    from pgfl.apps.runner import run_experiment

    def run(adversary, schemes):
        cfg = frontier_config("regression-record", 300, quick=True, seed=seed, epsilons=(1.0,),
                              schemes=schemes, repetitions=1, adversary=adversary)  # fmt: skip
        out = run_experiment(cfg, tmp_path / adversary)["curves"]
        return {c["label"].split("@")[0]: c["centroid_msd_db"] for c in out}

    with pytest.raises(ConfigError, match="does not protect"):
        frontier_config("regression-record", 300, quick=True, epsilons=(1.0,),
                        schemes=["central"], adversary="link_eavesdropper")  # fmt: skip
    eaves = run("link_eavesdropper", ["client_gaussian_models", "random_gaussian",
                                      "graph_homomorphic_gaussian"])  # fmt: skip
    assert abs(eaves["client_gaussian_models"] - eaves["random_gaussian"]) < 1.5
    assert max(eaves["client_gaussian_models"], eaves["random_gaussian"]) < -33
    assert eaves["graph_homomorphic_gaussian"] > -10
    client = run("unit_client", ["central", "client_gaussian_models", "random_gaussian"])
    assert client["central"] < min(client["client_gaussian_models"], client["random_gaussian"]) - 3
