"""The empirical privacy audit (pgfl.privacy.audit, `pgfl privacy audit`).

References are independent of the code under test: the Laplace mechanism's ε in closed
form (ℓ1 sensitivity √M·Δ₂ along the diagonal), scipy's exact binomial intervals, the
accountant's sensitivity formula 2μB/t written out here, and the engine's own runs.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import binomtest

from pgfl.apps.audit import (
    audit,
    canary_networks,
    clopper_pearson,
    coupled_message_gap,
    epsilon_lower_bound,
    tradeoff_curve,
)
from pgfl.experiments.build import build_network, curve_settings
from pgfl.experiments.loader import parse_config

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")
MU, B = 0.5, 1.0


def _raw(server="random", client="none", *, L=1, K=1, M=2, target=1.0, extra=None, T=1):
    privacy = {"server_noise": server, "client_noise": client, "target_epsilon": target}
    privacy.update(extra or {})
    return {
        "name": "audit-test", "seed": 3, "iterations": T, "repetitions": 1,
        "topology": {"kind": "matrix", "P": 2, "matrix": [[0.5, 0.5], [0.5, 0.5]]},
        "data": {"kind": "regression", "K": K, "N": 6, "M": M},
        "training": {"mu": MU, "L": L, "epochs": [2, 3], "batch": [2, 3], "clip_norm": B,
                     "rho": 0.0},
        "privacy": privacy,
        "curves": [{"label": "c"}],
    }  # fmt: skip


def _cfg(*args, **kw):
    return parse_config(_raw(*args, **kw))


# ----------------------------------------------------------------------- statistics
@pytest.mark.parametrize(("k", "n"), [(0, 50), (7, 50), (50, 50), (4000, 10000)])
def test_clopper_pearson_matches_scipys_exact_interval(k, n):
    # a two-sided exact interval at level 1 − 2α has the one-sided bounds at α as its ends
    ci = binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
    lo, hi = clopper_pearson(k, n, 0.05)
    assert lo == pytest.approx(ci.low, abs=1e-12)
    assert hi == pytest.approx(ci.high, abs=1e-12)


def test_lower_bound_closed_form_and_no_signal():
    lo, hi = clopper_pearson(800, 1000, 0.025)[0], clopper_pearson(100, 1000, 0.025)[1]
    assert epsilon_lower_bound(800, 1000, 100, 1000, 0.95, 0.0) == pytest.approx(
        max(math.log(lo / hi), math.log((1 - hi) / clopper_pearson(200, 1000, 0.025)[1]))
    )
    assert epsilon_lower_bound(500, 1000, 500, 1000, 0.95, 1e-5) == 0.0


def test_tradeoff_curve_of_pure_dp_is_the_two_lines():
    a = np.array([0.0, 0.1, 0.5, 1.0])
    f = tradeoff_curve(1.0, 0.0, a)
    assert f.tolist() == pytest.approx(
        [max(0, 1 - math.e * x, (1 - x) / math.e) for x in a.tolist()]
    )


def test_tradeoff_curve_of_an_epsilon_beyond_float_range():
    # an audit of a run whose accountant gives ε ~ 1e5 plots this curve (docs/privacy.md)
    f = tradeoff_curve(1e5, 1e-5, np.array([0.0, 1e-300, 0.5, 1.0]))
    assert f.tolist() == [1 - 1e-5, 0.0, 0.0, 0.0]


# -------------------------------------------------------------------------- canary
def test_canary_saturates_the_clipping_bound_in_every_epoch_and_batch():
    # through the real engine: the canary client's local model moves by exactly ±μB v
    cfg = _cfg("none", "none", target=None)
    net = build_network(cfg.curves[0], cfg.seed)
    from pgfl.engine import CurveSettings
    from pgfl.engine.step import gfl_round

    v = np.full(2, 1 / math.sqrt(2))
    for sign, world in zip((1, -1), canary_networks(net), strict=True):
        r = gfl_round(np.zeros((1, 1, 2, 2)), world, [CurveSettings(mu=MU, clip_norm=B)],
                      seed=0, iteration=1)  # fmt: skip
        assert r.local[0, 0, 0, 0] == pytest.approx(sign * MU * B * v, rel=1e-8)


# ---------------------------------------------------------------- audits vs accountants
@pytest.mark.parametrize("server", ["random", "graph_homomorphic"])
def test_one_laplace_message_is_audited_tightly(server):
    # one client per unit: both schemes charge the first message 2μB (ℓ2), Laplace noise is
    # calibrated to ε = 1 by the tight accountant, which is √M·Δ₂/b for a pure-DP release
    r = audit(_cfg(server), "c", "message", trials=100_000, accountants=["pld", "basic"])
    assert r.protected and r.attack == "likelihood_ratio"
    assert r.epsilon["basic"] == pytest.approx(1.0, rel=1e-3)
    for name in ("pld", "basic"):
        assert r.epsilon_lower < r.epsilon[name]
        assert r.ratio[name] >= 0.9
    assert r.refuted == ()


def test_one_gaussian_message_stays_below_the_accountant():
    cfg = _cfg("random", extra={"server_distribution": "gaussian"})
    r = audit(cfg, "c", "message", trials=40_000, accountants=["pld", "rdp"])
    assert r.refuted == ()
    assert 0.3 < r.ratio["pld"] < 1.0  # δ = 1e-5 is out of reach of 4·10⁴ trials


def test_papers_l2_reading_of_laplace_sensitivity_is_refuted():
    # regression: the papers charge M-dimensional Laplace noise its ℓ2 sensitivity, ε = Δ₂/b;
    # the diagonal canary reaches √M·Δ₂/b = √2 times that
    r = audit(_cfg("random"), "c", "message", trials=100_000, accountants=["paper", "pld"])
    assert r.epsilon["paper"] == pytest.approx(r.epsilon["pld"] / math.sqrt(2), rel=1e-3)
    assert r.epsilon_lower > r.epsilon["paper"]
    assert r.refuted == ("paper",)


def test_graph_homomorphic_centroid_is_not_protected_and_broken():
    r = audit(_cfg("graph_homomorphic"), "c", "centroid", trials=2000)
    assert not r.protected and r.epsilon == {} and r.ratio == {}
    assert r.success >= 0.999 and r.tpr >= 0.999 and r.fpr <= 0.001


def test_random_noise_centroid_is_protected_and_consistent():
    r = audit(_cfg("random"), "c", "centroid", trials=20_000, accountants=["pld"])
    assert r.protected and r.attack == "projection" and r.refuted == ()


def test_client_update_view_needs_one_client_and_is_consistent():
    cfg = _cfg("none", "laplace")
    r = audit(cfg, "c", "client-update", trials=100_000, accountants=["pld"])
    assert r.level == "client" and r.refuted == ()
    assert r.ratio["pld"] >= 0.9
    from pgfl.validation import ConfigError

    with pytest.raises(ConfigError, match="training.L = 1"):
        audit(_cfg("none", "laplace", L=2, K=2), "c", "client-update", trials=200)


def test_several_rounds_say_the_bound_is_loose():
    r = audit(_cfg("random", target=4.0, T=3), "c", "message", trials=4000, rounds=3,
              accountants=["pld"])  # fmt: skip
    assert r.attack == "projection" and r.refuted == ()
    assert any("far below the composed epsilon" in n for n in r.notes)


# ---------------------------------------------------------------- coupled sensitivity
def test_coupled_runs_never_exceed_the_accountants_sensitivity_with_secagg_dropout():
    # secure aggregation, L = 4 of K = 4, threshold t = 2, dropout 0.5, several epochs and
    # mini-batches: a unit averages any n ≥ t survivors, so the canary moves the aggregate
    # by 2μB/n ≤ 2μB/t (+ fixed-point rounding), more than the 2μB/L an L-based
    # accountant would charge
    f = 16
    raw = _raw("random", "secure_aggregation", L=4, K=4, target=None,
               extra={"server_variance": 0.1, "dropout": 0.5, "secagg_threshold": 2,
                      "secagg_frac_bits": f, "secagg_neighbours": 4})  # fmt: skip
    cfg = parse_config(raw)
    ccfg = cfg.curves[0]
    net = build_network(ccfg, cfg.seed)
    settings = curve_settings(ccfg, 1, net)
    gaps = coupled_message_gap(net, settings, seed=cfg.seed, reps=np.arange(4000))[0]
    t, L = 2, 4
    rounding = 2 * math.sqrt(2) * 2.0 ** -(f + 1)
    # what the random scheme's mechanism charges the first message of this run
    charged = settings.server.transcript(settings.release_context(net, 1)).sensitivities[0]
    assert charged == pytest.approx(2 * MU * B / t + rounding)
    assert gaps.max() <= charged * (1 + 1e-9)
    assert gaps.max() > 2 * MU * B / L * 1.5  # the L-based charge is exceeded: caught
    assert gaps.max() >= 2 * MU * B / t - rounding  # n = t survivors with the canary occur


# ----------------------------------------------------------------------------- CLI
def _cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": os.path.abspath(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "pgfl.cli", "privacy", "audit", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=300,
    )  # fmt: skip


def _toml(tmp_path, server):
    lines = [
        'name = "t"', "seed = 3", "iterations = 1", "repetitions = 1",
        "[topology]", 'kind = "matrix"', "P = 2", "matrix = [[0.5, 0.5], [0.5, 0.5]]",
        "[data]", 'kind = "regression"', "K = 1", "N = 6", "M = 2",
        "[training]", f"mu = {MU}", "L = 1", "epochs = [2, 3]", "batch = [2, 3]",
        f"clip_norm = {B}", "rho = 0.0",
        "[privacy]", "target_epsilon = 1.0", 'accountants = ["paper", "pld"]',
        "[[curves]]", 'label = "c"', f'privacy = {{ server_noise = "{server}" }}',
    ]  # fmt: skip
    path = tmp_path / "t.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cli_json_contract_and_exit_code_3_when_refuted(tmp_path):
    path = _toml(tmp_path, "random")
    p = _cli(str(path), "--curve", "c", "--view", "message", "--trials", "20000", "--json",
             "--plot", str(tmp_path / "a.png"), cwd=tmp_path)  # fmt: skip
    assert p.returncode == 3, p.stderr  # the papers' ℓ2 reading is refuted
    out = json.loads(p.stdout)
    assert list(out)[:9] == ["view", "trials", "tpr", "fpr", "epsilon_lower", "confidence",
                             "epsilon", "ratio", "protected"]  # fmt: skip
    assert out["view"] == "message" and out["trials"] == 20000 and out["protected"] is True
    assert out["confidence"] == 0.95 and set(out["epsilon"]) == {"paper", "pld"}
    assert out["ratio"]["pld"] == pytest.approx(out["epsilon_lower"] / out["epsilon"]["pld"])
    assert out["epsilon_lower"] < out["epsilon"]["pld"]
    assert (tmp_path / "a.png").stat().st_size > 0
    # comparing with the tight accountant only: consistent, exit 0, text says "lower bound"
    p = _cli(str(path), "--curve", "c", "--trials", "2000", "--accountant", "pld", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "lower bound" in p.stdout and "not a proof" in " ".join(p.stdout.split())


def _main(args, capsys):
    from pgfl.cli import main

    code = 0
    try:
        main(["privacy", "audit", *args])
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_unprotected_view_and_bad_input(tmp_path, capsys):
    path = _toml(tmp_path, "graph_homomorphic")
    code, stdout, _ = _main([str(path), "--curve", "c", "--view", "centroid", "--trials", "1000",
                             "--json"], capsys)  # fmt: skip
    assert code == 0
    out = json.loads(stdout)
    assert out["protected"] is False and out["epsilon"] == {} and out["ratio"] == {}
    assert out["tpr"] == 1.0 and out["fpr"] == 0.0
    for bad, what in ((["--view", "model"], "--view"), (["--trials", "10"], "--trials"),
                      (["--confidence", "1.5"], "--confidence"),
                      (["--accountant", "exact"], "--accountant")):  # fmt: skip
        code, _, err = _main([str(path), "--curve", "c", *bad], capsys)
        assert code == 2 and what in err and err.count("\n") == 1
    code, _, err = _main([str(path), "--curve", "nope"], capsys)
    assert code == 2 and "--curve must be one of c" in err


def test_a_later_round_is_audited_against_that_rounds_epsilon():
    # --round 3: the earlier noise is secret, so the generic projection attack; the
    # accountant's ε compared with is ε(3) of the run, which exceeds the one-round ε(1)
    cfg = _cfg("random", target=4.0, T=3)
    later = audit(cfg, "c", "message", trials=4000, round=3, accountants=["pld"])
    first = audit(cfg, "c", "message", trials=4000, accountants=["pld"])
    assert later.round == 3 and later.rounds == 1 and later.attack == "projection"
    assert later.refuted == () and later.epsilon["pld"] > first.epsilon["pld"]
    assert any("a later round" in n for n in later.notes)
    assert not any("several rounds" in n for n in later.notes)


def test_rounds_past_the_runs_iterations_are_refused():
    from pgfl.validation import ConfigError

    with pytest.raises(ConfigError, match="at most iterations = 3; got --round 2 --rounds 3"):
        audit(_cfg("random", target=4.0, T=3), "c", "message", trials=200, round=2, rounds=3)


def test_a_model_config_is_refused_in_one_line():
    # the canary is a regression/logistic sample; a [model] classifier has class labels
    from pgfl.validation import ConfigError

    raw = _raw("random")
    raw["data"] = {"kind": "digits", "K": 2}
    raw["model"] = {"kind": "softmax"}
    with pytest.raises(ConfigError, match="model.kind = 'softmax'"):
        audit(parse_config(raw), "c", "message", trials=200)


def test_cli_text_says_not_protected_and_lower_bound(tmp_path, capsys):
    path = _toml(tmp_path, "graph_homomorphic")
    code, stdout, _ = _main([str(path), "--curve", "c", "--view", "centroid", "--trials", "1000",
                             "--plot", str(tmp_path / "c.png")], capsys)  # fmt: skip
    text = " ".join(stdout.split())
    assert code == 0 and "not protected" in text and "lower bound" in text
    assert (tmp_path / "c.png").stat().st_size > 0


def test_server_model_view_is_covered_by_the_server_level_epsilon():
    # a neighbour's model after the round is post-processing of the messages it received
    r = audit(_cfg("random"), "c", "server-model", trials=20_000, accountants=["pld"])
    assert r.protected and r.level == "server" and r.refuted == ()
    assert r.attack == "projection" and 0 < r.epsilon_lower < r.epsilon["pld"]


# ------------------------------------------------------------ neighbouring relation
def _one_step(neighbours, **kw):
    # one full-batch local step per round: record-level neighbours credit 1/N_min (N = 6)
    raw = _raw(extra={"neighbours": neighbours, **kw.pop("extra", {})}, **kw)
    raw["training"].update(batch="full", epochs=1)
    return parse_config(raw)


def test_record_level_epsilon_is_audited_with_a_record_level_canary():
    # regression: the canary was a whole client (every record, sensitivity 2μB) while the
    # ε compared with was record-level (2μB/6, noise calibrated to it), so a sound
    # accountant was refuted: before the fix this audit gave ε_lower = 5.85 > ε = 1.0 for
    # both accountants (exit 3). The canary is now one of the client's 6 records.
    r = audit(_one_step("record"), "c", "message", trials=20_000, accountants=["pld", "basic"])
    assert r.neighbours == "record" and r.adversary == "link"
    assert r.epsilon["basic"] == pytest.approx(1.0, rel=1e-3)  # calibrated record-level ε
    assert r.refuted == ()
    for name in ("pld", "basic"):
        assert r.epsilon_lower <= r.epsilon[name]
        # tight: the canary record realises the 2μB/6 the accountant charges (a canary
        # weaker than the charge would land far below; Laplace LR test, cf. the client case)
        assert r.ratio[name] >= 0.85
    out = r.to_json()
    assert out["neighbours"] == "record" and out["adversary"] == "link"
    assert any("record-level neighbours" in n and "1/6" in n for n in r.notes)


def test_record_canary_moves_one_full_batch_step_by_the_credited_fraction():
    # through the engine: the canary client keeps N_min records (here 4, the fewest of any
    # client, held by a client of unit 1), so one record moves its full-batch step by
    # exactly 2μB/N_min along v, what the accountant divides the client's 2μB by
    from pgfl.apps.audit import canary_records
    from pgfl.data.federated import FederatedData
    from pgfl.engine import Network
    from pgfl.engine.step import gfl_round

    cfg = _one_step("record", server="none", target=None)
    net = build_network(cfg.curves[0], cfg.seed)
    d = net.data
    counts = d.counts.copy()
    counts[1, 0] = 4
    data = FederatedData(d.X, d.y, counts, d.X_test, d.y_test, d.w_star)
    net = Network(data, net.problem, net.A, net.L, net.epochs, net.batch, mixing=net.mixing)
    settings = curve_settings(cfg.curves[0], 1, net)
    assert canary_records(settings, net, 1) == 4
    w0, w1 = canary_networks(net, records=canary_records(settings, net, 1))
    assert w0.data.counts[0, 0] == 4 and w0.data.counts.min() == 4
    assert settings.release_context(w0, 1) == settings.release_context(net, 1)  # same ε
    outs = [gfl_round(np.zeros((1, 1, 2, 2)), w, [settings], seed=0, iteration=1) for w in (w0, w1)]
    v = np.full(2, 1 / math.sqrt(2))
    gap = outs[0].local[0, 0, 0, 0] - outs[1].local[0, 0, 0, 0]
    assert gap == pytest.approx(2 * MU * B / 4 * v, rel=1e-8)
    # the other clients and unit 1 are the same in both worlds
    assert np.array_equal(outs[0].local[0, 0, 1], outs[1].local[0, 0, 1])


def test_client_level_audit_is_unchanged_and_record_equals_client_where_nothing_is_credited():
    # client-level neighbours: the ε compared is the link's transcript on the configured
    # network (what the audit compared with before record-level canaries existed)
    from pgfl.privacy.accounting import epsilon_curve

    cfg = _cfg("random", extra={"neighbours": "client"})
    client = audit(cfg, "c", "message", trials=4000, accountants=["pld"])
    ccfg = cfg.curves[0]
    net = build_network(ccfg, cfg.seed)
    settings = curve_settings(ccfg, 1, net)
    transcript = settings.server.transcript(settings.release_context(net, 1))
    assert client.epsilon["pld"] == float(epsilon_curve(transcript, delta=1e-5,
                                                        accountants=["pld"])["pld"][0])  # fmt: skip
    assert client.neighbours == "client"
    assert any("client-level neighbours" in n for n in client.notes)
    # mini-batches (epochs 2-3, batches 2-3): a record is charged as a whole client, and the
    # record canary is a one-record client whose every mini-batch is the canary, as every
    # batch of the client canary's copies is: the two relations give the same numbers
    record = audit(_cfg("random", extra={"neighbours": "record"}), "c", "message",
                   trials=4000, accountants=["pld"])  # fmt: skip
    assert record.neighbours == "record"
    assert (record.epsilon_lower, record.tpr, record.fpr, record.epsilon) == (
        client.epsilon_lower,
        client.tpr,
        client.fpr,
        client.epsilon,
    )
    assert any("the only record of client 0" in n for n in record.notes)


def test_privacy_adversary_calibration_is_audited_against_the_links_own_epsilon():
    # Gaussian noise calibrated to a neighbouring server's ε with amplification by sampling
    # L = 2 of K = 4 clients: the attack knows the sample, so the ε compared is the
    # link's own transcript (larger than the calibrated target), and the output says so
    cfg = _one_step("record", L=2, K=4, extra={"server_distribution": "gaussian",
                                               "adversary": "neighbour_server"})  # fmt: skip
    r = audit(cfg, "c", "message", trials=2000, accountants=["pld"])
    assert r.adversary == "link" and r.neighbours == "record" and r.refuted == ()
    assert r.epsilon["pld"] > 1.0 + 1e-3  # not the amplified target ε = 1
    assert any("privacy.adversary = 'neighbour_server'" in n for n in r.notes)


def test_cli_record_level_audit_exits_0_and_names_the_relation(tmp_path, capsys):
    # before the fix: exit 3 (the client canary against the record-level ε)
    path = _toml(tmp_path, "random")
    text = path.read_text().replace('"pld"]', '"pld"]\nneighbours = "record"')
    text = text.replace("epochs = [2, 3]", "epochs = 1").replace("batch = [2, 3]", 'batch = "full"')
    path.write_text(text)
    code, stdout, _ = _main([str(path), "--curve", "c", "--trials", "2000", "--accountant", "pld",
                             "--json"], capsys)  # fmt: skip
    out = json.loads(stdout)
    assert code == 0 and out["refuted"] == [] and out["neighbours"] == "record"
    assert out["epsilon_lower"] <= out["epsilon"]["pld"]
    code, stdout, _ = _main([str(path), "--curve", "c", "--trials", "2000", "--accountant", "pld"],
                            capsys)  # fmt: skip
    assert code == 0 and "record-level neighbours" in " ".join(stdout.split())


# --------------------------------------------------------- a trusted aggregator (central)
def _central(**extra):
    """Issue 25's case: a ring of 16, K = L = 1, T = 1, central calibrated to ε = 1."""
    privacy = {"server_noise": "central", "server_distribution": "gaussian",
               "target_epsilon": 1.0, "accountants": ["pld"], **extra}  # fmt: skip
    return parse_config({
        "name": "central", "seed": 0, "iterations": 1, "repetitions": 1,
        "topology": {"kind": "ring", "P": 16},
        "data": {"kind": "regression", "K": 1, "N": 100, "M": 2},
        "training": {"rho": 0.1, "mu": 0.3, "L": 1, "epochs": 1, "batch": "full",
                     "clip_norm": 1.0},
        "privacy": privacy, "curves": [{"label": "central"}],
    })  # fmt: skip


def test_central_uplinks_are_not_protected_and_no_longer_refute_anything():
    """Regression (issue 25): the engine put ψ_m + z on every link, so two messages
    differed by no noise and the message audit refuted ε = 1 with a lower bound of 7.19.
    The uplinks now carry ψ_m as the protocol does, in the clear: not protected, and the
    attack on them wins outright; the broadcast a curious server sees holds its ε."""
    up = audit(_central(), "central", "message", trials=4000, accountants=["pld"])
    assert not up.protected and up.refuted == () and up.epsilon == {}
    assert up.tpr == 1.0 and up.fpr == 0.0 and "in the clear" in up.scope
    eaves = audit(_central(), "central", adversary="link_eavesdropper", trials=4000)
    assert not eaves.protected and eaves.success == 1.0
    server = audit(_central(adversary="other_server"), "central", adversary="other_server",
                   trials=20_000, accountants=["pld"])  # fmt: skip
    assert server.protected and server.refuted == () and server.attack == "likelihood_ratio"
    assert server.epsilon["pld"] == pytest.approx(1.0, rel=1e-3)
    assert 0 < server.epsilon_lower <= server.epsilon["pld"]
    assert "aggregator" in server.trusted


def test_cli_audits_an_adversary_and_names_the_trusted_party(tmp_path, capsys):
    path = tmp_path / "central.toml"
    path.write_text("\n".join([
        'name = "c"', "seed = 0", "iterations = 1",
        "[topology]", 'kind = "ring"', "P = 6",
        "[data]", 'kind = "regression"', "K = 1", "N = 10", "M = 2",
        "[training]", "mu = 0.3", "L = 1", "epochs = 1", 'batch = "full"', "clip_norm = 1.0",
        "[privacy]", 'server_noise = "central"', 'server_distribution = "gaussian"',
        "target_epsilon = 1.0", 'adversary = "unit_client"', 'accountants = ["pld"]',
        "[[curves]]", 'label = "c"',
    ]) + "\n")  # fmt: skip
    code, stdout, _ = _main([str(path), "--curve", "c", "--adversary", "unit_client",
                             "--trials", "2000", "--json"], capsys)  # fmt: skip
    out = json.loads(stdout)
    assert code == 0 and out["adversary"] == "unit_client" and out["protected"] is True
    assert out["epsilon_lower"] <= out["epsilon"]["pld"] and "aggregator" in out["trusted_parties"]
    code, stdout, _ = _main([str(path), "--curve", "c", "--adversary", "unit_client",
                             "--trials", "2000"], capsys)  # fmt: skip
    assert code == 0 and "trusts the aggregator" in " ".join(stdout.split())
    code, _, err = _main([str(path), "--curve", "c", "--adversary", "spy"], capsys)
    assert code == 2 and "--adversary must be one of" in err
