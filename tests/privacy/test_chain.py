"""Pieces composed generically: continuous client noise, then secure aggregation.

The engine against a loop that adds each client's noise to its message and hands the
messages to the real protocol (X25519, AES-CTR masks), unit by unit; the noise-free limit
(secure aggregation itself, bit for bit); and the accountant against the closed form of
the composed Gaussian mechanism: every view is one client's message (Δ, σ), never the
sum's (Δ/n, σ/√n), because the fixed-point encoding rounds each noisy message on its own.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm
from tests.reference import unit_draws
from tests.test_engine import small_network

from pgfl.engine import CurveSettings
from pgfl.engine.step import gfl_round
from pgfl.privacy.mechanisms import (
    ClientNoise,
    NoisySecureAggregation,
    SecureAggregationScheme,
    compose,
    register,
    unregister,
)
from pgfl.privacy.mechanisms.adversaries import epsilon_by_adversary
from pgfl.privacy.mechanisms.base import ReleaseContext, stacks
from pgfl.privacy.mechanisms.server import NoServerNoise
from pgfl.privacy.secagg import SecAggConfig, SecureAggregation

SEED, ITERATION = 5, 2


def chain(std: float, distribution: str = "gaussian", config: SecAggConfig | None = None):
    return NoisySecureAggregation(
        noise=ClientNoise(distribution=distribution, std=std),
        aggregator=SecureAggregationScheme(config or SecAggConfig()),
    )


def one_round(net, curves, R=3):
    W = np.random.default_rng(1).standard_normal((len(curves), R, *net.data.shape[::3])) * 0.3
    return W, gfl_round(W, net, curves, seed=SEED, iteration=ITERATION)


@pytest.mark.parametrize("share", ["models", "updates"])
@pytest.mark.parametrize("distribution", ["laplace", "gaussian"])
def test_the_engine_adds_each_clients_noise_then_runs_the_real_protocol(share, distribution):
    net = small_network(P=3, K=5, L=3, M=3)
    s = CurveSettings(mu=0.3, clip_norm=1.0, share=share, client=chain(0.2, distribution))
    W, out = one_round(net, [s])
    _, R, P, M = W.shape
    L = net.L
    protocol = SecureAggregation(s.client.aggregator.config, num_clients=L)
    for r in range(R):
        for p in range(P):
            z = unit_draws(SEED, ITERATION, r, p).noise("client_noise", distribution, (L, M))
            local = out.local[0, r, p]  # [L, M], the clients' own models
            sent = local if share == "models" else (W[0, r, p] - local) / s.mu
            mean = protocol.aggregate(sent + 0.2 * z[0, 0], unit=p, round=ITERATION)
            psi = mean if share == "models" else W[0, r, p] - s.mu * mean
            np.testing.assert_allclose(out.psi[0, r, p], psi, rtol=0, atol=1e-15)


def test_without_noise_it_is_secure_aggregation_bit_for_bit():
    net = small_network(P=3, K=5, L=3, M=3)
    plain = CurveSettings(mu=0.3, clip_norm=1.0, client=SecureAggregationScheme(SecAggConfig()))
    stacked = CurveSettings(mu=0.3, clip_norm=1.0, client=chain(0.0))
    (_, a), (_, b) = one_round(net, [plain]), one_round(net, [stacked])
    assert np.array_equal(a.W, b.W) and np.array_equal(a.psi, b.psi)
    assert stacked.client.noiseless() == plain.client


def composed_gaussian_epsilon(mu_total: float, delta: float) -> float:
    """ε of a Gaussian mechanism of sensitivity/std ratio ``mu_total`` at ``delta`` (exact).

    Balle & Wang, "Improving the Gaussian Mechanism for Differential Privacy", ICML 2018,
    Thm. 8: δ(ε) = Φ(−ε/m + m/2) − e^ε Φ(−ε/m − m/2); T rounds compose to m = √T·Δ/σ.
    """

    def gap(eps: float) -> float:
        m = mu_total
        return norm.cdf(-eps / m + m / 2) - math.exp(eps) * norm.cdf(-eps / m - m / 2) - delta

    return brentq(gap, 1e-9, 500.0)


def test_every_view_is_one_clients_noisy_message_never_the_sums():
    T, mu, B, sigma, n, delta = 20, 0.1, 1.0, 0.5, 4, 1e-5
    ctx = ReleaseContext(mu=mu, clip=B, iterations=T, dim=3, clients_per_round=n, units=3,
                         clients=n, sampled=n, sample_revealed=True)  # fmt: skip
    one = composed_gaussian_epsilon(math.sqrt(T) * 2 * mu * B / sigma, delta)  # Δ = 2μB
    summed = composed_gaussian_epsilon(math.sqrt(T) * 2 * mu * B / n / (sigma / math.sqrt(n)),
                                       delta)  # fmt: skip
    assert summed < 0.7 * one  # the two readings differ enough to tell apart
    eps = epsilon_by_adversary(chain(sigma), NoServerNoise(), ctx, delta)
    for adversary, value in eps.items():
        assert value == pytest.approx(one, rel=2e-3), adversary
    # plain averaging of the same noise releases the real mean: the servers' side gets Δ/n, σ/√n
    local = epsilon_by_adversary(ClientNoise(distribution="gaussian", std=sigma),
                                 NoServerNoise(), ctx, delta)  # fmt: skip
    assert local["other_server"] == pytest.approx(summed, rel=2e-3)
    assert local["own_server"] == pytest.approx(one, rel=2e-3)


def test_sampling_amplifies_only_where_the_sample_is_not_known():
    ctx = ReleaseContext(mu=0.1, clip=1.0, iterations=20, dim=3, clients_per_round=2, units=3,
                         clients=10, sampled=2, sample_revealed=True)  # fmt: skip
    eps = epsilon_by_adversary(chain(0.5), NoServerNoise(), ctx, 1e-5)
    assert eps["other_server"] < eps["own_server"]  # 2 of 10 clients, sample unknown
    assert eps["unit_client"] == eps["own_server"] == eps["upload_eavesdropper"]  # it is known


def test_a_new_noise_piece_composes_in_one_line():
    class Hush(ClientNoise):  # a noise piece of its own: the same noise under another name
        names = ("hush",)
        distributions = ("gaussian",)

    Mine = compose(Hush, SecureAggregationScheme, "Mine")
    register(Mine)
    try:
        assert stacks()[("hush", "secure_aggregation")] == "hush+secure_aggregation"
        assert Mine.calibrates == "privacy.client_variance"
        assert Mine.reveals_sample and Mine.summed
    finally:
        unregister(Mine)
    assert ("hush", "secure_aggregation") not in stacks()
    with pytest.raises(TypeError, match="needs a noise piece with perturb"):
        compose(SecureAggregationScheme, SecureAggregationScheme, "Twice")


@pytest.mark.parametrize("share", ["models", "updates"])
def test_the_model_is_local_dps_to_within_the_rounding(share):
    # the same draws as plain client noise: ψ_p moves by at most the rounding, 2^-(f+1)
    # per coordinate (times μ on the models a mean of updates gives)
    net = small_network(P=3, K=5, L=3, M=3)
    config = SecAggConfig()
    stacked = CurveSettings(mu=0.3, clip_norm=1.0, share=share, client=chain(0.2, config=config))
    local = CurveSettings(mu=0.3, clip_norm=1.0, share=share,
                          client=ClientNoise(distribution="gaussian", std=0.2))  # fmt: skip
    (_, a), (_, b) = one_round(net, [stacked]), one_round(net, [local])
    bound = config.quantization_bound * (0.3 if share == "updates" else 1.0)
    gap = np.abs(a.psi - b.psi).max()
    assert 0 < gap <= bound * (1 + 1e-9)
    quiet = CurveSettings(mu=0.3, clip_norm=1.0, share=share, client=chain(0.0, config=config))
    _, c = one_round(net, [quiet])
    assert np.abs(a.psi - c.psi).max() > 1e3 * bound  # the noise itself is far above it
