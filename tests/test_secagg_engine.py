"""Secure aggregation inside the GFL engine: the protocol's bits, dropouts and aborts."""

import numpy as np
import pytest
from tests.test_engine import small_network

from pgfl.apps.runner import run_experiment
from pgfl.engine import CurveSettings, simulate
from pgfl.experiments.loader import parse_config
from pgfl.experiments.presets import load_preset
from pgfl.privacy.mechanisms import SecureAggregationScheme
from pgfl.privacy.secagg import SecAggConfig

CFG = SecAggConfig(clip=32.0, frac_bits=20, threshold=2)


@pytest.mark.parametrize("share", ["models", "updates"])
def test_cryptographic_protocol_gives_the_same_bits_as_the_simulation(share):
    net = small_network(P=2, K=5, L=3)
    sim = simulate(
        net,
        [CurveSettings(mu=0.3, share=share, client=SecureAggregationScheme(CFG, dropout=0.3))],
        iterations=4,
        repetitions=2,
        seed=3,
    )
    crypto = SecureAggregationScheme(CFG, "cryptographic", dropout=0.3)
    real = simulate(
        net,
        [CurveSettings(mu=0.3, share=share, client=crypto)],
        iterations=4,
        repetitions=2,
        seed=3,
    )
    assert np.array_equal(sim.W, real.W)
    assert np.array_equal(sim.aborted, real.aborted)


def test_without_dropout_secure_aggregation_is_the_plain_mean_up_to_quantization():
    net = small_network(P=3, K=5, L=4)
    plain, masked = (
        CurveSettings(mu=0.3),
        CurveSettings(mu=0.3, client=SecureAggregationScheme(CFG)),
    )
    t = simulate(net, [plain, masked], iterations=30, repetitions=2)
    gap = np.abs(t.W[0] - t.W[1]).max()
    assert 0 < gap < 30 * CFG.quantization_bound * 4  # quantization only, accumulated over rounds
    assert t.aborted.sum() == 0


def test_rounds_with_too_few_survivors_abort_and_keep_the_previous_model(tmp_path):
    raw = {
        "name": "drop",
        "iterations": 25,
        "repetitions": 2,
        "topology": {"kind": "ring", "P": 3},
        "data": {"K": 6, "N": 8},
        "training": {"L": 4, "mu": 0.3},
        "privacy": {"client_noise": "secure_aggregation", "dropout": 0.6, "secagg_threshold": 3},
        "curves": [{"label": "secagg"}, {"label": "plain", "privacy": {"client_noise": "none"}}],
    }
    summary = run_experiment(parse_config(raw), tmp_path)
    entry = summary["curves"][0]["secure_aggregation"]
    assert entry["aborted_unit_rounds"] > 0 and entry["threshold"] == 3
    log = (tmp_path / "run.log").read_text().splitlines()
    assert log[0] == "engine: backend=local" and log[1].startswith("engine: local_phase=")
    rounds = [line for line in log if line.startswith("round ")]
    assert len(rounds) == raw["iterations"] and rounds[-1].startswith(f"round {len(rounds)}/")
    log = [line for line in log[2:] if not line.startswith("round ")]
    assert len(log) == entry["aborted_unit_rounds"]
    assert "secure aggregation aborted (fewer than t=3 of L=4 clients survived)" in log[0]
    assert not summary["curves"][0]["diverged"]  # the run went on


def test_an_aborted_unit_keeps_its_model_exactly():
    net = small_network(P=2, K=4, L=3, batch=False)
    # dropout 0.99 with t = 3 of 3: essentially every round aborts, so nothing moves
    scheme = SecureAggregationScheme(SecAggConfig(threshold=3), dropout=0.99)
    t = simulate(net, [CurveSettings(mu=0.3, client=scheme)], iterations=5, w0=np.ones(3))
    assert t.aborted[0].sum() == 10  # 2 units x 5 rounds
    assert np.array_equal(t.W[0, 0], np.ones((2, 3)))


def test_hybrid_preset_tracks_the_non_private_scheme(tmp_path):
    s = {
        c["label"]: c for c in run_experiment(load_preset("hybrid", quick=True), tmp_path)["curves"]
    }
    assert s["hybrid"]["centroid_msd_db"] <= s["none"]["centroid_msd_db"] + 8
    assert s["iid"]["centroid_msd_db"] >= s["hybrid"]["centroid_msd_db"] + 10
    assert s["hybrid"]["secure_aggregation"]["protocol"] == "simulated"


def test_a_model_leaving_the_encodable_range_diverges_its_curve_only():
    # models beyond +-clip cannot be aggregated faithfully: that repetition is marked
    # diverged (not clipped silently), clipped messages are counted, other curves go on
    net = small_network(P=2, K=4, L=3, batch=False)
    narrow = SecureAggregationScheme(SecAggConfig(clip=0.5, frac_bits=20))
    wide = SecureAggregationScheme(SecAggConfig(clip=1e3, frac_bits=20))
    t = simulate(
        net,
        [CurveSettings(mu=0.3, client=narrow), CurveSettings(mu=0.3, client=wide)],
        iterations=20,
        w0=np.full(3, 2.0),
    )
    assert t.diverged_at[0, 0] == 1 and t.clipped[0, 0] > 0
    assert t.diverged_at[1, 0] == -1 and t.clipped[1, 0] == 0
    assert np.isfinite(t.centroid_msd[:, 1]).all()


def test_clipping_updates_is_counted_and_the_run_goes_on():
    net = small_network(P=2, K=4, L=3, batch=False)
    scheme = SecureAggregationScheme(SecAggConfig(clip=0.05, frac_bits=20))
    t = simulate(
        net,
        [CurveSettings(mu=0.3, share="updates", client=scheme)],
        iterations=10,
        w0=np.full(3, 2.0),
    )
    assert t.diverged_at[0, 0] == -1 and t.clipped[0, 0] > 0
