import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.reference import reference_round

from pgfl.data.synthetic import client_schedule, logistic_data, regression_data
from pgfl.engine import (
    CurveBatch,
    CurveSettings,
    Network,
    Trajectory,
    gfl_round,
    local_phase,
    sample_clients,
    simulate,
)
from pgfl.engine.step import combine_phase, server_messages
from pgfl.params import PARAMS
from pgfl.privacy import mechanisms
from pgfl.privacy.mechanisms import (
    SERVER,
    ClientNoise,
    GraphHomomorphic,
    Mechanism,
    PerLinkNoise,
    RandomNoise,
)
from pgfl.problems import LeastSquares, Logistic
from pgfl.rng import KeyedDraws
from pgfl.topology import combination_matrix
from pgfl.validation import ConfigError


def small_network(P=3, K=5, L=3, N=(4, 9), M=3, batch=True, problem="ls", seed=0, A=None):
    rng = np.random.default_rng(seed)
    if problem == "ls":
        data, prob = regression_data(rng, P=P, K=K, N=N, M=M), LeastSquares(0.1)
    else:
        data, prob = logistic_data(rng, P=P, K=K, N=N, M=M, test_size=5), Logistic(0.05)
    E, B = client_schedule(rng, P, K, epochs=(1, 4), batch=(2, 5))
    if A is None:
        A = combination_matrix(nx.cycle_graph(P) if P > 2 else nx.complete_graph(P))
    return Network(data, prob, A, L, E, B if batch else None)


def run_both(net, settings, R=2, rounds=3, seed=5, block_size=None):
    """Advance the engine and the loop reference from the same state with the same draws."""
    P, M = net.data.shape[0], net.data.shape[3]
    W = np.random.default_rng(1).standard_normal((len(settings), R, P, M)) * 0.3
    for i in range(1, rounds + 1):
        fast = gfl_round(W, net, settings, seed=seed, iteration=i, block_size=block_size).W
        slow = reference_round(W, net, settings, seed, i)
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)
        W = fast
    return W


ALL_SCHEMES = [
    CurveSettings(mu=0.3),
    CurveSettings(mu=0.5, server=GraphHomomorphic(std=0.4)),
    CurveSettings(mu=0.2, server=RandomNoise(std=0.3, distribution="gaussian")),
    CurveSettings(mu=0.4, server=PerLinkNoise(std=0.2)),
    CurveSettings(mu=0.3, client=ClientNoise(distribution="laplace", std=0.5)),
    CurveSettings(mu=0.3, share="updates", client=ClientNoise(distribution="gaussian", std=0.5)),
    CurveSettings(mu=0.3, clip_norm=0.5),
]


@pytest.mark.parametrize("problem", ["ls", "logistic"])
def test_engine_equals_loop_reference_every_scheme(problem):
    run_both(small_network(problem=problem), ALL_SCHEMES)


def registered_server_curves(variance=0.09, distribution="gaussian"):
    """A curve for every registered server scheme of the reference loop's model, from the registry.

    The model: messages on the topology's own links (no combination of its own), noise
    independent of what other servers hold (no shared secrets), the same on any network.
    The others (a trusted aggregator, gossip, correlated noise) have references of their own.
    """
    defaults = {name: p.default for name, p in PARAMS.items()}
    settings = {**defaults, "privacy.server_variance": variance,
                "privacy.server_distribution": distribution}  # fmt: skip
    out = {}
    for name, cls in mechanisms.SERVER.items():
        above = cls.__mro__[: cls.__mro__.index(Mechanism)]  # the scheme's own classes
        own = [hook for hook in ("combination", "secrets", "on_network") for k in above
               if hook in vars(k)]  # fmt: skip
        if cls.silent or any(own):
            continue
        server = mechanisms.build("server", {**settings, "privacy.server_noise": name})
        out[name] = CurveSettings(mu=0.3, clip_norm=1.0, server=server)
    return out


def test_engine_equals_loop_reference_for_every_registered_scheme():
    curves = registered_server_curves()
    assert {"random", "graph_homomorphic", "random_per_link"} <= set(curves)
    run_both(small_network(), list(curves.values()), rounds=2)


def test_engine_equals_loop_reference_full_batch_full_participation_one_epoch():
    net = small_network(L=5, batch=False)
    net = Network(net.data, net.problem, net.A, 5, np.ones_like(net.epochs), None)
    run_both(net, [CurveSettings(mu=0.4)], R=1, rounds=5)


def test_limit_case_full_participation_one_epoch_is_plain_gradient_descent_diffusion():
    # no noise, L = K, E = 1, full batch: w_p <- sum_m a_pm (w_m - mu grad J_m(w_m)),
    # where J_m is the average over unit m's clients of their empirical risks.
    net = small_network(P=4, K=3, L=3, batch=False, A=combination_matrix(nx.path_graph(4)))
    net = Network(net.data, net.problem, net.A, 3, np.ones((4, 3), dtype=int), None)
    mu, T = 0.3, 20
    traj = simulate(net, [CurveSettings(mu=mu)], iterations=T, w_opt=np.zeros(3))
    data = net.data
    W = np.zeros((4, 3))
    for _ in range(T):
        psi = np.zeros_like(W)
        for p in range(4):
            grads = []
            for k in range(3):
                n = data.counts[p, k]
                X, y = data.X[p, k, :n], data.y[p, k, :n]
                grads.append(2 * X.T @ (X @ W[p] - y) / n + 2 * 0.1 * W[p])
            psi[p] = W[p] - mu * np.mean(grads, axis=0)
        W = net.A @ psi
    np.testing.assert_allclose(traj.W[0, 0], W, atol=1e-12)


def test_p_equals_one_is_fedavg():
    net = small_network(P=1, K=6, L=4, A=np.ones((1, 1)))
    assert net.iota2 == 0.0
    W = run_both(
        net,
        [
            CurveSettings(mu=0.3),
            CurveSettings(mu=0.3, client=ClientNoise(distribution="laplace", std=0.1)),
        ],
    )
    assert W.shape == (2, 2, 1, 3)


def test_k1_l1_is_the_books_diffusion_recursion():
    # K = 1, L = 1, one epoch, full batch: each server is a single agent running
    # adapt-then-combine diffusion (book §11.3): phi = w - mu grad J(w); w = sum a phi.
    net = small_network(P=5, K=1, L=1, batch=False, A=combination_matrix(nx.cycle_graph(5)))
    net = Network(net.data, net.problem, net.A, 1, np.ones((5, 1), dtype=int), None)
    traj = simulate(net, [CurveSettings(mu=0.2)], iterations=15, w_opt=np.zeros(3))
    W = np.zeros((5, 3))
    for _ in range(15):
        phi = np.array(
            [
                W[k]
                - 0.2
                * (
                    2
                    * net.data.X[k, 0, : net.data.counts[k, 0]].T
                    @ (
                        net.data.X[k, 0, : net.data.counts[k, 0]] @ W[k]
                        - net.data.y[k, 0, : net.data.counts[k, 0]]
                    )
                    / net.data.counts[k, 0]
                    + 0.2 * W[k]
                )
                for k in range(5)
            ]
        )
        W = net.A @ phi
    np.testing.assert_allclose(traj.W[0, 0], W, atol=1e-12)


@st.composite
def valid_matrices(draw):
    P = draw(st.integers(2, 9))
    seed = draw(st.integers(0, 2**31 - 1))
    p = draw(st.floats(0.3, 1.0))
    rng = np.random.default_rng(seed)
    while True:
        g = nx.gnp_random_graph(P, p, seed=int(rng.integers(2**31)))
        if nx.is_connected(g):
            break
    rule = draw(st.sampled_from(["metropolis", "max_degree"]))
    return combination_matrix(g, rule), seed


def messages_and_combine(psi, net, curves, seed, R):
    """Server messages and combination of the whole network from aggregates psi."""
    P = net.data.shape[0]
    draws = KeyedDraws(seed, 1, range(R), range(P))
    batch = CurveBatch.of(curves)
    messages = server_messages(psi, net.links, batch, draws, 0, 1)
    return messages, combine_phase(messages, net.links, 0, P)


@settings(max_examples=60, deadline=None)
@given(valid_matrices(), st.integers(1, 4), st.integers(1, 3))
def test_graph_homomorphic_noise_has_zero_network_average(matrix_seed, M, R):
    A, seed = matrix_seed
    P = A.shape[0]
    rng = np.random.default_rng(seed)
    data = regression_data(rng, P=P, K=1, N=2, M=M)
    net = Network(data, LeastSquares(0.1), A, 1, np.ones((P, 1), int), None)
    curves = [CurveSettings(mu=0.1, server=GraphHomomorphic(std=s)) for s in (0.5, 3.0)]
    psi = rng.standard_normal((2, R, P, M))
    _, W = messages_and_combine(psi, net, curves, seed, R)
    noiseless = np.einsum("pm,crmd->crpd", A, psi)
    # eq. 46: sum_{p,m} a_pm g_pm = 0, so the centroid is exactly that of the noiseless step
    np.testing.assert_allclose(W.mean(axis=2), noiseless.mean(axis=2), atol=1e-12)
    assert np.abs(W - noiseless).max() > 1e-3  # the individual models are perturbed


@pytest.mark.parametrize("distribution", ["laplace", "gaussian"])
@pytest.mark.parametrize("scheme", ["random", "random_per_link"])
def test_random_server_noise_has_requested_variance(scheme, distribution):
    # On the complete graph a_pm = 1/P, so the combined noise has variance sigma^2 / P.
    P, M, R, var = 4, 3, 20000, 0.3
    data = regression_data(np.random.default_rng(0), P=P, K=1, N=2, M=M)
    A = combination_matrix(nx.complete_graph(P))
    net = Network(data, LeastSquares(0.1), A, 1, np.ones((P, 1), int), None)
    s = CurveSettings(mu=0.1, server=SERVER[scheme](std=np.sqrt(var), distribution=distribution))
    messages, g = messages_and_combine(np.zeros((1, R, P, M)), net, [s], 3, R)
    # random: W = A g, with a_pm = 1/P => var = var / P; per link: sum_m a_pm^2 var = var / P
    expected = var / P
    assert np.all(np.abs(g[0].var(axis=0) - expected) < 0.05 * expected)
    # what travels on each link has the requested variance and the right tails
    scaled = messages[0]
    assert abs(scaled.var() - var) < 0.03 * var
    kurt = ((scaled - scaled.mean()) ** 4).mean() / scaled.var() ** 2 - 3
    assert abs(kurt - (3.0 if distribution == "laplace" else 0.0)) < 0.4
    # random noise: every copy a server sends carries the same draw; per link: independent
    first = {m: messages[0, :, np.flatnonzero(net.links.src == m)] for m in range(P)}
    same = all(np.array_equal(v[0], v[1]) for v in first.values())
    assert same == (scheme == "random")


def test_client_noise_variance_on_the_aggregate():
    # psi = mean over L clients of (w_k + g_k): the noise part has variance sigma^2 / L.
    net = small_network(P=2, K=6, L=6, batch=False)
    var, R = 0.5, 4000
    draws = KeyedDraws(4, 1, range(R), range(2))
    noisy = CurveBatch.of(
        [CurveSettings(mu=1e-09, client=ClientNoise(distribution="laplace", std=var**0.5))]
    )
    plain = CurveBatch.of([CurveSettings(mu=1e-9)])
    W = np.zeros((1, R, 2, 3))
    block = net.block()
    noise = local_phase(W, block, noisy, draws, 1).psi - local_phase(W, block, plain, draws, 1).psi
    assert abs(noise.var() - var / 6) < 0.06 * var / 6


def test_client_sampling_is_without_replacement_and_uniform():
    u = KeyedDraws(0, 1, range(5000), range(2)).uniform("sampling", (10,))
    idx = sample_clients(u, 3)
    assert idx.shape == (5000, 2, 3)
    assert np.all(np.diff(idx, axis=-1) > 0)  # distinct (and listed in increasing order)
    freq = np.bincount(idx.ravel(), minlength=10) / idx.size
    assert np.allclose(freq, 0.1, atol=0.01)
    # every pair of clients is sampled together equally often (uniform subsets)
    pairs = np.zeros((10, 10))
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        np.add.at(pairs, (idx[..., a].ravel(), idx[..., b].ravel()), 1)
    together = (pairs + pairs.T)[np.triu_indices(10, 1)] / (5000 * 2)
    assert np.allclose(together, 3 * 2 / (10 * 9), atol=0.012)


def test_same_seed_bit_identical_and_different_seed_different():
    net = small_network()
    s = ALL_SCHEMES[:4]
    a = simulate(net, s, iterations=20, repetitions=2, seed=11)
    b = simulate(net, s, iterations=20, repetitions=2, seed=11)
    c = simulate(net, s, iterations=20, repetitions=2, seed=12)
    assert np.array_equal(a.W, b.W) and np.array_equal(a.centroid_msd, b.centroid_msd)
    assert not np.array_equal(a.W, c.W)


def test_divergence_is_reported_per_curve_and_others_continue():
    net = small_network(batch=False)
    traj = simulate(net, [CurveSettings(mu=0.3), CurveSettings(mu=50.0)], iterations=200)
    assert traj.diverged_at[0, 0] == -1
    assert 1 <= traj.diverged_at[1, 0] < 200
    assert np.isfinite(traj.centroid_msd[:, 0]).all()
    assert traj.centroid_msd[-1, 0] < traj.centroid_msd[0, 0]


def test_graph_homomorphic_needs_self_weights():
    # a valid (symmetric, doubly stochastic, connected) matrix with a_11 = 0
    A = np.array([[0.0, 0.5, 0.5], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5]])
    net = small_network(P=3, A=A)
    with pytest.raises(ConfigError, match="a_pp > 0"):
        simulate(
            net,
            [CurveSettings(mu=0.1, server=GraphHomomorphic(std=0.1))],
            iterations=1,
        )
    simulate(net, [CurveSettings(mu=0.1, server=RandomNoise(std=0.1))], iterations=1)


def test_network_rejects_l_above_k():
    net = small_network()
    with pytest.raises(
        ConfigError, match=r"training.L must be an integer in \[1, data.K=5\]; got 6"
    ):
        Network(net.data, net.problem, net.A, 6, net.epochs, net.batch)


def secagg(**kw):
    from pgfl.privacy.mechanisms import SecureAggregationScheme
    from pgfl.privacy.secagg import SecAggConfig

    return SecureAggregationScheme(SecAggConfig(clip=32.0, frac_bits=20, threshold=2), **kw)


EVERY_SCHEME = [
    *ALL_SCHEMES,
    CurveSettings(mu=0.3, client=secagg(dropout=0.3)),
    CurveSettings(
        mu=0.3, share="updates", server=GraphHomomorphic(std=0.2), client=secagg(dropout=0.2)
    ),
]


@pytest.mark.parametrize("batch", [True, False])
def test_any_block_of_units_gives_the_same_bits(batch):
    net = small_network(P=5, K=6, L=3, batch=batch)
    runs = [
        simulate(net, EVERY_SCHEME, iterations=12, repetitions=3, seed=9, block_size=b)
        for b in (None, 1, 2, 4)
    ]
    for t in runs[1:]:
        assert np.array_equal(t.W, runs[0].W, equal_nan=True)
        assert np.array_equal(t.centroid_msd, runs[0].centroid_msd, equal_nan=True)
        assert np.array_equal(t.aborted, runs[0].aborted)
    assert runs[0].aborted[len(ALL_SCHEMES)].sum() > 0  # dropouts did make units abort


def test_repetition_blocks_join_into_the_whole_run_bit_for_bit():
    net = small_network(P=4, K=5, L=2, problem="logistic")
    whole = simulate(net, EVERY_SCHEME, iterations=10, repetitions=5, seed=2)
    parts = [
        simulate(net, EVERY_SCHEME, iterations=10, repetitions=r, seed=2, first_repetition=f)
        for f, r in ((0, 2), (2, 1), (3, 2))
    ]
    joined = Trajectory.concat(parts)
    for name in ("W", "centroid_msd", "individual_msd", "test_error", "server_test_error"):
        assert np.array_equal(getattr(joined, name), getattr(whole, name), equal_nan=True), name
    assert np.array_equal(joined.aborted, whole.aborted)
    assert joined.abort_log == whole.abort_log  # the order of one run (the run log)
    assert joined.reps.tolist() == list(range(5))


def test_a_curve_sees_the_same_draws_whatever_it_is_batched_with():
    # common random numbers: a random-noise curve alone and next to Gaussian and per-link
    # curves gets the same noise (up to the last bits of the batched matrix products)
    net = small_network(P=4, K=5, L=2)
    mine = CurveSettings(mu=0.3, server=RandomNoise(std=0.3))
    others = [ALL_SCHEMES[2], ALL_SCHEMES[3], ALL_SCHEMES[5]]
    alone = simulate(net, [mine], iterations=15, repetitions=2, seed=4)
    batched = simulate(net, [*others, mine], iterations=15, repetitions=2, seed=4)
    np.testing.assert_allclose(batched.W[-1], alone.W[0], rtol=0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32),
    st.integers(1, 50),
    st.integers(1, 6),
    st.integers(1, 7),
    st.data(),
)
def test_keyed_draws_of_a_block_are_the_whole_networks_draws_for_it(seed, i, R, P, data):
    whole = KeyedDraws(seed, i, range(R), range(P)).uniform("s", (3, 2))
    r0 = data.draw(st.integers(0, R - 1))
    r1 = data.draw(st.integers(r0 + 1, R))
    p0 = data.draw(st.integers(0, P - 1))
    p1 = data.draw(st.integers(p0 + 1, P))
    part = KeyedDraws(seed, i, range(r0, r1), range(p0, p1)).uniform("s", (3, 2))
    assert np.array_equal(part, whole[r0:r1, p0:p1])
    assert ((whole > 0) & (whole < 1)).all()


def test_keyed_uniforms_are_uniform_and_streams_rounds_units_independent():
    from scipy import stats

    d = KeyedDraws(1, 7, range(200), range(50))
    u = d.uniform("a", (20,))
    assert stats.kstest(u.ravel(), "uniform").pvalue > 1e-3
    # neighbouring counters, units, repetitions, rounds and streams are uncorrelated
    others = {
        "next counter": u[..., 1:],
        "next unit": d.uniform("a", (20,))[:, 1:],
        "next repetition": d.uniform("a", (20,))[1:],
        "next round": KeyedDraws(1, 8, range(200), range(50)).uniform("a", (20,)),
        "other stream": d.uniform("b", (20,)),
        "other seed": KeyedDraws(2, 7, range(200), range(50)).uniform("a", (20,)),
    }
    for name, v in others.items():
        a = u[tuple(slice(0, n) for n in v.shape)]
        if name == "next counter":
            a = u[..., :-1]
        elif name == "next unit":
            a = u[:, :-1]
        elif name == "next repetition":
            a = u[:-1]
        r = np.corrcoef(a.ravel(), v.ravel())[0, 1]
        assert abs(r) < 4 / np.sqrt(a.size), name  # 4 standard errors of a null correlation
