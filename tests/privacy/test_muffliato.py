"""``pgfl reproduce muffliato``: one gossip averaging, ε_{u→v} by graph distance.

The expected numbers are derived here: the analytic Gaussian mechanism's ε(δ) solved with
scipy's normal distribution, and Muffliato's per-message sum on the ring by hand.
"""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import optimize
from scipy.stats import norm

from pgfl.experiments.muffliato import muffliato_summary, run


def gdp_epsilon(mu: float, delta: float = 1e-5) -> float:
    """ε(δ) of a Gaussian of sensitivity-to-noise ratio μ: δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)."""
    f = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta  # noqa: E731
    return optimize.brentq(f, 0.0, 200.0, xtol=1e-13)


@pytest.fixture(scope="module")
def quick():
    return muffliato_summary(True, 0)


def _profile(summary, graph, kind, k, view):
    return next(
        p for p in summary["profiles"]
        if (p["graph"], p["kind"], p["steps"], p["view"]) == (graph, kind, k, view)
    )  # fmt: skip


def test_local_dp_is_calibrated_to_one(quick):
    summary, _, _ = quick
    assert gdp_epsilon(1.0 / summary["sigma"]) == pytest.approx(1.0, abs=1e-9)


def test_ring_k1_exact_view_and_the_papers_sum_by_hand(quick):
    """Ring of 16, weights 1/3, K = 1. v reads y_w⁰ and y_w¹ = (y_{w−1}⁰ + y_w⁰ + y_{w+1}⁰)/3 of
    its two neighbours. The sum charges u = w: 1 + 1/3 (its own message, then 1/9 of
    ‖row‖² = 3/9); u two hops away: 1/3; farther: 0. The exact view learns u two hops away
    entirely (v knows y_v⁰ and y_w⁰, so y_w¹ gives y_u⁰): local DP."""
    summary, _, _ = quick
    mu = 1.0 / summary["sigma"]
    exact, paper = (_profile(summary, "ring", "plain", 1, v) for v in ("exact", "sum"))
    assert exact["distance"][:3] == [1, 2, 3]
    np.testing.assert_allclose(exact["max"][:3], [1.0, 1.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(exact["mean"][:3], [1.0, 1.0, 0.0], atol=1e-9)
    want = [gdp_epsilon(mu * math.sqrt(4 / 3)), gdp_epsilon(mu * math.sqrt(1 / 3)), 0.0]
    np.testing.assert_allclose(paper["max"][:3], want, rtol=1e-6)
    assert paper["max"][1] < 0.6  # the sum under-reports u two hops away by almost half
    assert exact["count"][:2] == [32, 32]  # ordered pairs at distance 1 and 2 on a ring of 16
    assert f"{paper['max'][0]:.2f} {paper['max'][1]:.2f}" == "1.17 0.55"  # README, privacy.md


def test_ring_k4_five_hops_by_hand(quick):
    """K = 4: only the t = 4 row of the neighbour four hops from u involves u; W⁴'s row is the
    trinomial (1, 4, 10, 16, 19, 16, 10, 4, 1)/81, so the sum charges 1/1107 of local DP."""
    summary, _, _ = quick
    mu = 1.0 / summary["sigma"]
    exact, paper = (_profile(summary, "ring", "plain", 4, v) for v in ("exact", "sum"))
    row = np.array([1, 4, 10, 16, 19, 16, 10, 4, 1])
    assert np.sum(row**2) == 1107
    assert paper["max"][4] == pytest.approx(gdp_epsilon(mu / math.sqrt(1107)), rel=1e-6)
    np.testing.assert_allclose(exact["max"][:5], 1.0, atol=1e-9)  # peeled off step by step
    assert exact["max"][5] == 0.0 and f"{paper['max'][4]:.2f}" == "0.02"


def test_the_sum_under_reports_on_every_graph_and_the_exact_view_never_exceeds_local_dp(quick):
    summary, profiles, pairs = quick
    for u in summary["under_reported"]:
        assert u["pairs"] > 0
        assert u["worst"]["exact"] > 1.5 * u["worst"]["sum"]
    assert max(r["epsilon_exact"] for r in pairs) <= 1.0 + 1e-9
    assert max(r["epsilon_sum"] for r in pairs) > 1.0  # it over-charges neighbours instead
    for r in pairs:  # the certified bound is what a run may charge: never below the exact view
        assert r["epsilon_certified"] >= r["epsilon_exact"] - 1e-6
        if r["distance"] > r["steps"] + 1:  # nothing of u reaches v
            assert r["epsilon_exact"] == r["epsilon_certified"] == 0.0
    # plain and Chebyshev gossip leak exactly the same (their polynomials span one space)
    by = {(r["graph"], r["kind"], r["steps"], r["u"], r["v"]): r for r in pairs}
    for (g, kind, k, u, v), r in by.items():
        if kind == "chebyshev":
            assert r["epsilon_exact"] == pytest.approx(by[(g, "plain", k, u, v)]["epsilon_exact"],
                                                       abs=1e-6)  # fmt: skip
    assert {row["view"] for row in profiles} == {"exact", "sum", "certified"}


def test_the_cli_writes_the_files_and_prints_the_table(tmp_path):
    folder = tmp_path / "m"
    result = subprocess.run(
        [sys.executable, "-m", "pgfl.cli", "reproduce", "muffliato", "--quick", "--out",
         str(folder)], capture_output=True, text=True, timeout=300, env=dict(os.environ),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "the exact view" in result.stdout and "Muffliato's per-message sum" in result.stdout
    table_lines = [line for line in result.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert table_lines and max(map(len, table_lines)) <= 100  # two narrow tables
    for f in ("summary.json", "profiles.csv", "pairs.csv", "muffliato.png"):
        assert (folder / f).is_file()
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert summary["experiment"] == "muffliato" and summary["steps"] == [1, 2, 4]
    bad = subprocess.run([sys.executable, "-m", "pgfl.cli", "reproduce", "muffliato", "--resume",
                          "--out", str(tmp_path / "x")], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ))  # fmt: skip
    assert bad.returncode == 2 and "accounting-only preset" in bad.stderr


def test_run_is_deterministic_in_the_seed(tmp_path):
    a = run(True, tmp_path / "a", 3)
    b = muffliato_summary(True, 3)[0]
    assert json.dumps(a["profiles"]) == json.dumps(b["profiles"])
