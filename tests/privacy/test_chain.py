"""Pieces composed generically: continuous client noise, then secure aggregation.

The engine against a loop that adds each client's noise to its message and hands the
messages to the real protocol (X25519, AES-CTR masks), unit by unit; the noise-free limit
(secure aggregation itself, bit for bit); and the accountant against the closed form of
the composed Gaussian mechanism: every view is one client's message (Δ, σ), never the
sum's (Δ/n, σ/√n), because the fixed-point encoding rounds each noisy message on its own.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.stats import norm
from tests.reference import unit_draws
from tests.test_engine import small_network

from pgfl.engine import CurveSettings
from pgfl.engine.step import gfl_round
from pgfl.privacy import mechanisms
from pgfl.privacy.mechanisms import (
    Chain,
    ClientNoise,
    ClippedNoise,
    ClippedNoisySecureAggregation,
    MessageClip,
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


def clipped(std: float, bound: float, summed: bool = False):
    """``clip+gaussian`` (plain averaging) or ``clip+gaussian+secure_aggregation``."""
    noise = ClientNoise(distribution="gaussian", std=std)
    if summed:
        return ClippedNoisySecureAggregation(noise=noise, clip=MessageClip(bound),
                                             aggregator=SecureAggregationScheme())  # fmt: skip
    return ClippedNoise(noise=noise, clip=MessageClip(bound))


def one_round(net, curves, R=3):
    W = np.random.default_rng(1).standard_normal((len(curves), R, *net.data.shape[::3])) * 0.3
    return W, gfl_round(W, net, curves, seed=SEED, iteration=ITERATION)


def reference_message(w_start, w_local, mu, share, bound=None):
    """One client's message, clipped to ``bound`` by a loop of its own (DP-FedAvg)."""
    msg = w_local - w_start if share == "models" else (w_start - w_local) / mu
    if bound is not None:
        norm = math.sqrt(sum(float(x) ** 2 for x in msg))
        msg = msg * min(1.0, bound / norm) if norm > 0 else msg
    return w_start + msg if share == "models" else msg


STACKS = {
    "gaussian+secure_aggregation": lambda: chain(0.2),
    "laplace+secure_aggregation": lambda: chain(0.2, "laplace"),
    "clip+gaussian": lambda: clipped(0.2, 0.05),
    "clip+gaussian+secure_aggregation": lambda: clipped(0.2, 0.05, summed=True),
}


@pytest.mark.parametrize("share", ["models", "updates"])
@pytest.mark.parametrize("stack", sorted(STACKS))
def test_the_engine_runs_each_piece_on_each_message_then_aggregates(share, stack):
    # against a loop: clip (its own arithmetic), the client's noise, then the real
    # protocol (X25519, AES-CTR masks; secure aggregation) or the plain mean
    net = small_network(P=3, K=5, L=3, M=3)
    scheme = STACKS[stack]()
    s = CurveSettings(mu=0.3, clip_norm=1.0, share=share, client=scheme)
    W, out = one_round(net, [s])
    _, R, P, M = W.shape
    L, dist = net.L, scheme.noise.distribution
    bound = scheme.clip.bound if scheme.clip is not None else None
    summed = scheme.aggregator.summed
    protocol = SecureAggregation(SecAggConfig(), num_clients=L) if summed else None
    clipped_any = False
    for r in range(R):
        for p in range(P):
            z = unit_draws(SEED, ITERATION, r, p).noise("client_noise", dist, (L, M))[0, 0]
            sent = np.array([reference_message(W[0, r, p], out.local[0, r, p, k], s.mu, share,
                                               bound) for k in range(L)])  # fmt: skip
            if bound is not None:
                raw = [reference_message(W[0, r, p], out.local[0, r, p, k], s.mu, share)
                       for k in range(L)]  # fmt: skip
                clipped_any |= not np.allclose(sent, raw)
            noisy = sent + 0.2 * z
            mean = (protocol.aggregate(noisy, unit=p, round=ITERATION) if summed
                    else noisy.mean(axis=0))  # fmt: skip
            psi = mean if share == "models" else W[0, r, p] - s.mu * mean
            np.testing.assert_allclose(out.psi[0, r, p], psi, rtol=0, atol=1e-15 if summed
                                       else 1e-13)  # fmt: skip
    assert clipped_any or bound is None  # the bound binds somewhere: the test can tell


def test_without_noise_it_is_secure_aggregation_bit_for_bit():
    net = small_network(P=3, K=5, L=3, M=3)
    plain = CurveSettings(mu=0.3, clip_norm=1.0, client=SecureAggregationScheme(SecAggConfig()))
    stacked = CurveSettings(mu=0.3, clip_norm=1.0, client=chain(0.0))
    (_, a), (_, b) = one_round(net, [plain]), one_round(net, [stacked])
    assert np.array_equal(a.W, b.W) and np.array_equal(a.psi, b.psi)
    assert stacked.client.noiseless().std == 0  # the same stack, its noise off


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

    Mine = compose(Hush, SecureAggregationScheme, name="Mine")
    register(Mine)
    try:
        assert stacks()[("hush", "secure_aggregation")] == "hush+secure_aggregation"
        assert Mine.calibrates == "privacy.client_variance"
        assert Mine.reveals_sample and Mine.summed
    finally:
        unregister(Mine)
    assert ("hush", "secure_aggregation") not in stacks()
    with pytest.raises(TypeError, match="needs a noise piece with perturb"):
        compose(SecureAggregationScheme, SecureAggregationScheme, name="Twice")


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


# ---------------------------------------------------------------- the clipping piece
@given(st.lists(st.floats(-10, 10), min_size=3, max_size=3),
       st.lists(st.floats(-10, 10), min_size=3, max_size=3), st.floats(0.01, 5.0),
       st.booleans())  # fmt: skip
def test_clipping_bounds_each_message_and_never_moves_two_apart(a, b, bound, updates):
    # the two facts the sensitivity min(2μB/r, 2S) rests on: ‖clip(x)‖ ≤ S, and a
    # projection onto a ball is non-expansive, ‖clip(x) − clip(y)‖ ≤ ‖x − y‖
    mu = 0.3
    start = np.zeros((1, 1, 1, 3))
    local = np.array([a, b], dtype=float)[None, None, None]  # [1, 1, 1, 2, 3]
    out = MessageClip.clip([MessageClip(bound)], start, local, np.array([mu]),
                           np.array([updates]))[0, 0, 0]  # fmt: skip
    msg, raw = (out / mu, local[0, 0, 0] / mu) if updates else (out, local[0, 0, 0])
    assert (np.linalg.norm(msg, axis=-1) <= bound * (1 + 1e-12)).all()
    assert np.linalg.norm(msg[0] - msg[1]) <= np.linalg.norm(raw[0] - raw[1]) * (1 + 1e-12) + 1e-12
    small = np.linalg.norm(raw, axis=-1) <= bound
    assert np.array_equal(msg[small], raw[small])  # within the ball: untouched


@pytest.mark.parametrize(("B", "S", "records", "share", "expected"), [
    (1.0, 0.01, 1, "models", 0.02),      # 2S < 2μB = 0.2: the message bound
    (1.0, 1.0, 1, "models", 0.2),        # 2μB < 2S: the gradient bound
    (None, 0.01, 1, "models", 0.02),     # no gradient bound: S alone
    (1.0, 0.5, 1, "updates", 1.0),       # an update: min(2B, 2S)
    (1.0, 0.05, 4, "models", 0.05),      # record level: min(2μB/r, 2S) = min(0.05, 0.1)
    (1.0, 0.01, 4, "models", 0.02),      # ... = min(0.05, 0.02)
])  # fmt: skip
def test_a_clipped_message_moves_by_the_smaller_bound(B, S, records, share, expected):
    ctx = ReleaseContext(mu=0.1, clip=B, iterations=3, share=share, records=records,
                         clients_per_round=4, clients=4, sampled=4)  # fmt: skip
    own = clipped(0.5, S).views(ctx)["own_server"]
    assert own.sensitivities == pytest.approx((expected,) * 3, rel=1e-12)
    assert own.std == 0.5


def test_clip_then_noise_is_accounted_in_closed_form_with_plain_averaging_and_under_the_sum():
    T, mu, S, sigma, n, delta = 20, 0.1, 0.02, 0.2, 4, 1e-5
    ctx = ReleaseContext(mu=mu, clip=None, iterations=T, dim=3, clients_per_round=n, units=3,
                         clients=n, sampled=n)  # fmt: skip
    one = composed_gaussian_epsilon(math.sqrt(T) * 2 * S / sigma, delta)
    mean = composed_gaussian_epsilon(math.sqrt(T) * 2 * S / n / (sigma / math.sqrt(n)), delta)
    plain = epsilon_by_adversary(clipped(sigma, S), NoServerNoise(), ctx, delta)
    assert plain["own_server"] == pytest.approx(one, rel=2e-3)  # one message, Δ = 2S
    assert plain["other_server"] == pytest.approx(mean, rel=2e-3)  # the exact real mean
    summed = epsilon_by_adversary(
        clipped(sigma, S, summed=True),
        NoServerNoise(),
        dataclasses.replace(ctx, sample_revealed=True),
        delta,
    )
    assert summed["other_server"] == pytest.approx(one, rel=2e-3)  # the rounded sum: one message


STOP = """\
name = "clip"
iterations = 3
[topology]
kind = "ring"
P = 3
[training]
L = 2
[privacy]
client_noise = ["clip", "gaussian"]
client_variance = 0.01
{more}
"""


@pytest.mark.parametrize(("more", "why"), [
    ("", "privacy.message_clip is required when privacy.client_noise a stack that begins "
         'with "clip"'),
    ("message_clip = 0.0", "privacy.message_clip must be a real number in (0, inf); got 0.0"),
    ('message_clip = 0.1\nserver_noise = "random"\nserver_variance = 0.1',
     "(a stack that clips) runs with privacy.server_noise = 'none'; got 'random'"),
])  # fmt: skip
def test_a_clipping_stack_is_refused_in_one_line_where_it_cannot_run(cli, tmp_path, more, why):
    (tmp_path / "c.toml").write_text(STOP.format(more=more), encoding="utf-8")
    code, _, err = cli(["run", str(tmp_path / "c.toml"), "--out", str(tmp_path / "out")])
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert why in err
    assert not (tmp_path / "out").exists()


def test_a_clipping_stack_has_a_finite_epsilon_and_a_target_without_a_gradient_bound(cli, tmp_path):
    text = STOP.format(more="message_clip = 0.05\ntarget_epsilon = 3.0")
    (tmp_path / "c.toml").write_text(text.replace("client_variance = 0.01\n", ""),
                                     encoding="utf-8")  # fmt: skip
    code, out, err = cli(["run", str(tmp_path / "c.toml"), "--out", str(tmp_path / "o"), "--json"])
    assert code == 0, err
    curve = json.loads(out)["curves"][0]
    assert curve["epsilon_by_adversary"]["own_server"] == pytest.approx(3.0, rel=1e-3)


CLAIM = """\
name = "clip then noise"
iterations = 200
repetitions = 4
seed = {seed}
[topology]
kind = "ring"
P = 4
[data]
kind = "regression"
K = 8
N = 20
M = 2
[training]
L = 8
clip_norm = 1.0
[privacy]
target_epsilon = 4.0
adversary = "own_server"
[[curves]]
label = "gaussian"
privacy = {{ client_noise = "gaussian" }}
training = {{ mu = 0.05 }}
[[curves]]
label = "gaussian, small step"
privacy = {{ client_noise = "gaussian" }}
training = {{ mu = 0.005 }}
[[curves]]
label = "clip S=0.05"
privacy = {{ client_noise = ["clip", "gaussian"], message_clip = 0.05 }}
training = {{ mu = 0.05 }}
[[curves]]
label = "clip S=0.005"
privacy = {{ client_noise = ["clip", "gaussian"], message_clip = 0.005 }}
training = {{ mu = 0.05 }}
"""


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_clipping_messages_beats_the_smaller_step_at_the_same_epsilon(cli, tmp_path, seed):
    # README "Stacks of pieces" / docs/privacy.md §2.4, at their length (T = 200, 4 reps):
    # S = 0.005 is 8.6 dB below the best step of plain Gaussian noise on seed 0; claim ≥ 5
    (tmp_path / "c.toml").write_text(CLAIM.format(seed=seed), encoding="utf-8")
    code, out, err = cli(["run", str(tmp_path / "c.toml"), "--out", str(tmp_path / "o"), "--json"])
    assert code == 0, err
    curves = {c["label"]: c for c in json.loads(out)["curves"]}
    msd = {k: c["centroid_msd_db"] for k, c in curves.items()}
    assert msd["clip S=0.005"] < msd["gaussian, small step"] - 5.0, msd
    assert msd["clip S=0.005"] < msd["gaussian"] - 15.0, msd
    # 2S = 2μB and nothing clipped: the same curve, to the rounding of the summation order
    assert msd["clip S=0.05"] == pytest.approx(msd["gaussian"], abs=1e-9)
    for c in curves.values():
        assert c["epsilon_by_adversary"]["own_server"] == pytest.approx(4.0, rel=1e-3)


def test_a_composed_stack_is_no_line_of_the_frontier():
    # a stack's frontier declaration is its own class's (not inherited): none, so that the
    # frontier of every registered scheme needs no message_clip (pgfl privacy frontier)
    from pgfl.apps.frontier import registered_schemes  # lazy: the frontier app, this test only

    lines = registered_schemes()
    assert "client_gaussian_models" in lines
    composed = [n for n in mechanisms.CLIENT if issubclass(mechanisms.CLIENT[n], Chain)]
    assert len(composed) == 6
    for name, line in lines.items():
        assert not issubclass(line.mechanism, Chain), name
