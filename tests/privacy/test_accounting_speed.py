"""Fast paths of pgfl.privacy.accounting against slow references.

The references are ``dp_accounting`` used event by event (one ``LaplaceDpEvent`` per
release, one PLD composed at a time), quadrature, and the accountants' own answers for
the same releases composed in another order. Timings are never asserted.
"""

from __future__ import annotations

import math
import random

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant as dp_rdp
from scipy import integrate

from pgfl.privacy import accounting as acc
from pgfl.privacy.accounting.mechanisms import laplace_rdp
from pgfl.privacy.accounting.releases import RANDOMIZED_RESPONSE_RELATION, to_dp_event
from pgfl.privacy.mechanisms import GraphHomomorphic, PerLinkNoise, ReleaseContext
from pgfl.validation import ConfigError

DELTA = 1e-5
ORDERS = np.array(dp_rdp.DEFAULT_RDP_ORDERS)


# ------------------------------------------------------------------ vectorized Laplace RDP
@pytest.mark.parametrize("e0", [1e-6, 1e-3, 0.1, 1.0, 7.5, 300.0])
def test_laplace_rdp_equals_dp_accountings_event(e0):
    ref = dp_rdp.RdpAccountant().compose(dp_accounting.LaplaceDpEvent(1.0 / e0))
    np.testing.assert_allclose(laplace_rdp(e0, ORDERS), ref.rdp, rtol=1e-12, atol=0)


def _kl_by_quadrature(s: float) -> float:
    """KL(Lap(0, 1) ‖ Lap(s, 1)) = ∫ p (|x − s| − |x|) dx, numerically."""

    def integrand(x: float) -> float:
        return 0.5 * math.exp(-abs(x)) * (abs(x - s) - abs(x))

    return sum(integrate.quad(integrand, a, b)[0] for a, b in ((-60, 0), (0, s), (s, 60)))


@pytest.mark.parametrize("e0", [0.05, 1.0, 4.0])
def test_laplace_rdp_at_order_one_is_the_kl_divergence_and_continuous(e0):
    kl = _kl_by_quadrature(e0)
    values = laplace_rdp(e0, [1.0, 1.0 + 1e-7, 1.05])
    assert values[0] == pytest.approx(kl, rel=1e-9)
    assert values[1] == pytest.approx(kl, rel=1e-5)  # α → 1 from above: no cancellation
    assert kl < values[2] < e0  # increasing in α, below the pure ε₀


def test_laplace_rdp_broadcasts_and_rejects_bad_input():
    grid = laplace_rdp(np.array([0.5, 2.0]), ORDERS)
    assert grid.shape == (2, ORDERS.size)
    np.testing.assert_array_equal(grid[1], laplace_rdp(2.0, ORDERS))
    for bad_orders in ([0.5, 2.0], [], [[2.0]], [math.inf]):
        with pytest.raises(ConfigError, match="orders"):
            laplace_rdp(1.0, bad_orders)
    for bad in (-1.0, math.nan, [1.0, math.inf]):
        with pytest.raises(ConfigError, match="epsilon0"):
            laplace_rdp(bad, ORDERS)


def test_rdp_accountant_equals_dp_accounting_event_by_event():
    releases = [acc.LaplaceRelease(0.1 * j, 2.0) for j in range(1, 30)] + [
        acc.VectorLaplaceRelease(0.4, 3.0, dim=3, count=2),
        acc.GaussianRelease(1.0, 4.0, count=5),
        acc.PureDpRelease(0.3, count=2),
    ]
    ref = dp_rdp.RdpAccountant(neighboring_relation=RANDOMIZED_RESPONSE_RELATION)
    for r in releases:
        if isinstance(r, acc.VectorLaplaceRelease):  # M coordinates of the diagonal shift
            ref.compose(dp_accounting.LaplaceDpEvent(r.diagonal_multiplier), r.count * r.dim)
        else:
            ref.compose(to_dp_event(r))
    ours = acc.RdpAccountant()
    for r in releases:
        ours.compose(r)
    assert ours.get_epsilon(DELTA) == pytest.approx(ref.get_epsilon(DELTA), rel=1e-12)


# ------------------------------------------------------------ grouped PLD composition
def _one_at_a_time(shifts: list[float], copies: int, interval: float) -> float:
    """ε of Laplace releases (b = 1) composed one PLD at a time with dp_accounting."""
    out = None
    for s in shifts:
        single = pld_lib.from_laplace_mechanism(
            1.0, sensitivity=s, value_discretization_interval=interval
        )
        for _ in range(copies):
            out = single if out is None else out.compose(single)
    return float(out.get_epsilon_for_delta(DELTA))


@pytest.mark.parametrize(("copies", "count"), [(1, 1), (3, 1), (1, 3), (2, 2)])
def test_grouped_pld_equals_dp_accounting_one_release_at_a_time(copies, count):
    # growing sensitivities (graph-homomorphic noise) seen over `copies` links each
    shifts = [0.02 * j for j in range(1, 25)]
    pld = acc.PldAccountant(1e-3)
    for s in shifts:
        pld.compose(acc.LaplaceRelease(s, 1.0, count=copies), count)
    ref = _one_at_a_time(shifts, copies * count, 1e-3)
    assert pld.get_epsilon(DELTA) == pytest.approx(ref, rel=1e-9)


def test_pld_epsilon_does_not_depend_on_order_or_reads():
    releases = [acc.LaplaceRelease(0.03 * j, 1.0, count=2) for j in range(1, 40)]
    releases += [acc.LaplaceRelease(0.03, 1.0)] * 7 + [acc.PureDpRelease(0.2)] * 3
    once = acc.PldAccountant(1e-3)
    for r in releases:
        once.compose(r)
    shuffled = list(releases)
    random.Random(0).shuffle(shuffled)
    read = acc.PldAccountant(1e-3)
    for i, r in enumerate(shuffled):
        read.compose(r)
        if i % 5 == 0:
            read.get_epsilon(DELTA)
    assert read.get_epsilon(DELTA) == once.get_epsilon(DELTA)
    rdp_once, rdp_read = acc.RdpAccountant(), acc.RdpAccountant()
    for r in releases + [acc.GaussianRelease(1.0, 9.0, count=2)]:
        rdp_once.compose(r)
    for i, r in enumerate([acc.GaussianRelease(1.0, 9.0)] * 2 + shuffled):
        rdp_read.compose(r)
        if i % 5 == 0:
            rdp_read.get_epsilon(DELTA)
    assert rdp_read.get_epsilon(DELTA) == rdp_once.get_epsilon(DELTA)
    # a per-link curve read at every iteration ends where one read at T ends
    ctx = ReleaseContext(mu=0.1, clip=1.0, iterations=30, dim=2, observed_links=3)
    transcript = PerLinkNoise(std=40.0).transcript(ctx)
    full = acc.epsilon_curve(transcript, checkpoints=30, accountants=["pld"])["pld"]
    sparse = acc.epsilon_curve(transcript, checkpoints=2, accountants=["pld"])["pld"]
    assert full[-1] == sparse[-1]
    assert np.all(sparse >= full)


# ------------------------------------------------------------------------ calibration
def _counting(releases_at):
    calls = []

    def wrapped(s):
        calls.append(s)
        return releases_at(s)

    return wrapped, calls


@pytest.mark.parametrize("rtol", [1e-4, 1e-2])
def test_calibration_is_the_smallest_grid_point_whatever_the_guess(rtol):
    # basic accountant: ε(s) = 10/s exactly; the answer is (1 + rtol)^k for the smallest
    # k with 10/s ≤ target (aimed 1e-9 below it)
    target = 3.0
    h = math.log1p(rtol)
    k = math.ceil(math.log(10.0 / (target * (1 - 1e-9))) / h)
    expected = math.exp(k * h)
    assert 10.0 / expected <= target < 10.0 / math.exp((k - 1) * h)
    for guess in (1e-8, 0.5, 10 / 3, 3.4, 7e5):
        s = acc.calibrate_releases(
            lambda s: [acc.LaplaceRelease(1.0, s, count=10)], target, DELTA,
            accountant="basic", guess=guess, rtol=rtol,
        )  # fmt: skip
        assert s == expected, guess


@pytest.mark.parametrize(
    ("accountant", "release"),
    [
        ("pld", lambda s: [acc.LaplaceRelease(0.01 * j, s) for j in range(1, 41)]),
        ("pld", lambda s: [acc.GaussianRelease(1.0, s, count=50)]),
        ("rdp", lambda s: [acc.VectorLaplaceRelease(1.0, s, dim=3, count=30)]),
        ("kairouz", lambda s: [acc.LaplaceRelease(1.0, s, count=30)]),
    ],
)
def test_calibration_from_a_close_guess_takes_few_evaluations(accountant, release):
    target = 2.0
    exact = acc.calibrate_releases(release, target, DELTA, accountant=accountant)
    for guess, most in ((exact * 1.03, 5), (exact / 1.03, 5), (exact * 50, 12)):
        releases_at, calls = _counting(release)
        s = acc.calibrate_releases(releases_at, target, DELTA, accountant=accountant, guess=guess)
        assert s == exact
        assert len(calls) <= most, (guess / exact, len(calls))
        # certified: the answer meets the target, one grid step less noise does not
        assert acc.epsilon(release(s), DELTA, accountant) <= target
        assert acc.epsilon(release(s / (1 + 1e-4)), DELTA, accountant) > target * (1 - 1e-9)


# ------------------------------------------------------------- runner: read-outs of ε(i)
def test_runner_reads_epsilon_at_the_configured_checkpoints(tmp_path):
    from pgfl.apps.frontier import frontier_config
    from pgfl.experiments.plan import prepare_experiment
    from pgfl.experiments.privacy import curve_epsilon

    cfg = frontier_config("regression", 12, epsilons=(2.0,), schemes=("graph_homomorphic",),
                          repetitions=1)  # fmt: skip
    (curve,) = [c for c in cfg.curves if c.label != "none"]
    assert curve.privacy.epsilon_checkpoints == 2  # the frontier needs ε(T) only
    plan = prepare_experiment(cfg, tmp_path / "run")
    batch = plan.batches[0]
    c = batch.indices.index(cfg.curves.index(curve))
    kw = {"delta": curve.privacy.delta, "accountants": curve.privacy.accountants}
    sparse, entry = curve_epsilon(batch.settings[c], batch.net, cfg.iterations, checkpoints=2, **kw)
    full, _ = curve_epsilon(batch.settings[c], batch.net, cfg.iterations, checkpoints=12, **kw)
    s, f = sparse["epsilon_pld"], full["epsilon_pld"]
    assert s.shape == f.shape == (12,)
    assert s[0] == f[0] and s[-1] == f[-1] == entry["epsilon"]["pld"]
    assert np.all(s[1:] == s[-1])  # read at 1 and T; in between, the upper bound ε(T)
    assert np.all(np.diff(f) > 0) and np.all(s >= f)
    assert f[-1] == pytest.approx(2.0, rel=1e-3)  # calibrated to the target


def test_calibrated_noise_does_not_depend_on_earlier_calibrations():
    # the second and later targets of the same settings start from a remembered ratio
    # σ_pld/σ_rdp; the answer must be the one a fresh process finds
    from pgfl.privacy.accounting import curves

    ctx = ReleaseContext(mu=0.2, clip=1.0, iterations=15, dim=2)

    def transcript_at(s):
        return GraphHomomorphic(std=s).transcript(ctx)

    targets = (0.5, 5.0, 1.0, 20.0)
    fresh = {}
    for t in targets:
        curves._PLD_OVER_RDP.clear()
        fresh[t] = acc.calibrate(transcript_at, t, DELTA)
    curves._PLD_OVER_RDP.clear()
    for order in (targets, targets[::-1]):
        for t in order:
            assert acc.calibrate(transcript_at, t, DELTA) == fresh[t], (order, t)
    assert len(curves._PLD_OVER_RDP) == 1
    assert len(curves._PLD_OVER_RDP) <= curves._PLD_OVER_RDP_KEEP
