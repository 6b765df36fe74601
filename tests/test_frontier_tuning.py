"""The frontier's schemes come from the registry, and tuning at equal ε (issue 28 item 1).

What is checked, independently of the code under test: a mechanism registered here (no
edit to the frontier) is drawn with its own knob searched; the tuned point is the best of
the grid points, each also run on its own as an untuned frontier at that step size; tuning
on a proxy runs its search on another root seed before any run on the real one, and runs
only the chosen points there; a scheme whose ε does not cover the centroid is never ranked
first however it is tuned.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import ClassVar

import pytest

from pgfl.apps.frontier import (
    MU_FACTORS,
    SCHEMES,
    Tuning,
    frontier_config,
    frontier_configs,
    knob_grid,
    proxy_seed,
    run_frontier,
)
from pgfl.privacy import mechanisms
from pgfl.privacy.mechanisms import RandomNoise
from pgfl.privacy.mechanisms.base import FrontierLine
from pgfl.validation import ConfigError

SETUP, T, EPS = "regression-record", 4, (1.0,)


@dataclass(frozen=True, kw_only=True)
class Knobbed(RandomNoise):
    """Random server noise under a new name whose frontier line searches the distribution."""

    names: ClassVar[tuple[str, ...]] = ("test_knobbed",)
    frontier: ClassVar = {
        "test_knobbed": FrontierLine(
            {"privacy.server_noise": "test_knobbed"},
            {"privacy.server_distribution": ("laplace", "gaussian")},
        )
    }


@dataclass(frozen=True, kw_only=True)
class Plain(RandomNoise):
    """A registered scheme that declares no frontier line: the default, one, no knob."""

    names: ClassVar[tuple[str, ...]] = ("test_plain",)


@pytest.fixture
def registered():
    for cls in (Knobbed, Plain):
        mechanisms.register(cls)
    yield
    for name in ("test_knobbed", "test_plain"):
        del mechanisms.SERVER[name]


def test_a_mechanism_registered_in_a_test_is_on_the_frontier_with_its_knob(registered, tmp_path):
    assert SCHEMES["test_plain"].knobs == {} and SCHEMES["test_plain"].mechanism is Plain
    grid = knob_grid("test_knobbed", 0.7)
    assert grid["privacy.server_distribution"] == ("laplace", "gaussian")
    cfg = frontier_config(SETUP, T, epsilons=EPS, schemes=("test_knobbed", "test_plain"),
                          repetitions=1, tuning=Tuning())  # fmt: skip
    searched = {(c.privacy.server_noise, c.privacy.server_distribution, c.training.mu)
                for c in cfg.curves[1:]}  # fmt: skip
    mus = {0.7 * f for f in MU_FACTORS}
    assert searched == {("test_knobbed", d, m) for d in ("laplace", "gaussian") for m in mus} | {
        ("test_plain", "laplace", m) for m in mus
    }
    summary = run_frontier(tmp_path, configs={f"{SETUP}-T{T}": cfg}, tuning=Tuning())
    (c,) = [c for c in summary["curves"] if c["label"] == "test_knobbed"]
    assert c["knobs"][0]["privacy.server_distribution"] in ("laplace", "gaussian")
    assert len([p for p in summary["tuning"]["points"] if p["label"] == "test_knobbed"]) == 8
    paper = frontier_config(SETUP, T, epsilons=EPS, repetitions=1)  # the papers' schemes only
    assert not any(c.label.startswith("test_") for c in paper.curves)


def test_the_registry_covers_every_calibrated_mechanism():
    for table in (mechanisms.CLIENT, mechanisms.SERVER):
        for name, cls in table.items():
            if vars(cls).get("frontier") == {}:  # declares itself no line: a composed stack
                assert not any(s.mechanism is cls for s in SCHEMES.values()), name
            elif cls.calibrates is not None:
                assert any(s.mechanism is cls for s in SCHEMES.values()), name
    for name in ("central", "pairwise_cancelling", "topology_optimized", "gossip"):
        assert name in SCHEMES
    assert "privacy.pairwise_ratio" in SCHEMES["pairwise_cancelling"].knobs
    assert "privacy.gossip_steps" in SCHEMES["gossip"].knobs


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """random_gaussian and graph-homomorphic tuned over three step sizes at ε = 1."""
    tuning = Tuning(metric="centroid_msd_db", grid={"training.mu": (0.1, 0.35, 0.7)})
    out = tmp_path_factory.mktemp("tuned")
    configs = frontier_configs(setups=(SETUP,), iterations=(T,), epsilons=EPS, repetitions=1,
                               schemes=("random_gaussian", "graph_homomorphic_gaussian"),
                               tuning=tuning)  # fmt: skip
    return tuning, out, run_frontier(out, configs=configs, tuning=tuning)


def test_tuning_reports_the_best_of_the_grid_points_run_alone(tuned, tmp_path):
    tuning, out, summary = tuned
    (c,) = [c for c in summary["curves"] if c["label"] == "random_gaussian"]
    alone = {}
    for mu in tuning.grid["training.mu"]:
        configs = frontier_configs(setups=(SETUP,), iterations=(T,), epsilons=EPS,
                                   repetitions=1, schemes=("random_gaussian",), mu=mu)  # fmt: skip
        s = run_frontier(tmp_path / f"mu{mu}", configs=configs)
        alone[mu] = s["curves"][0]["centroid_msd_db"][0]
    best = min(alone, key=lambda m: alone[m])
    assert c["knobs"] == [{"training.mu": best}]
    assert c["centroid_msd_db"][0] == pytest.approx(alone[best], abs=1e-9)
    assert c["epsilon"][0] <= 1.0 * (1 + 1e-9)  # every point calibrated to the target
    rows = [json.loads(json.dumps(p)) for p in summary["tuning"]["points"]]
    assert sum(p["chosen"] for p in rows) == 2 and len(rows) == 6
    assert (out / "grid.csv").read_text().count("\n") == 1 + 6
    assert "training.mu" in (out / "frontier.csv").read_text().splitlines()[0]
    assert summary["tuning"]["spends_privacy"] is True


def test_tuning_never_ranks_an_uncovered_scheme_first(tuned):
    _, _, summary = tuned
    by = {c["label"]: c for c in summary["curves"]}
    gh = by["graph_homomorphic_gaussian"]
    assert gh["centroid_msd_db_covered"] is False
    assert gh["centroid_msd_db_rank"] == [2]
    assert by["random_gaussian"]["centroid_msd_db_rank"] == [1]


def test_proxy_tuning_searches_on_another_seed_then_runs_only_the_chosen_points(tmp_path):
    tuning = Tuning(metric="individual_msd_db", on="proxy", grid={"training.mu": (0.2, 0.7)})
    args = dict(setups=(SETUP,), iterations=(T,), epsilons=(1.0, 5.0), repetitions=1,
                schemes=("random_gaussian", "central"), tuning=tuning)  # fmt: skip
    search = frontier_configs(**args)
    real = frontier_configs(**{**args, "tuning": None})[f"{SETUP}-T{T}"].seed
    seen = []

    def run(plan):
        from pgfl.apps.runner import run_plan

        seen.append((plan.cfg.seed, [c.label for c in plan.cfg.curves]))
        return run_plan(plan)

    summary = run_frontier(tmp_path, configs=search, tuning=tuning, run=run,
                           final=lambda c: frontier_configs(**args, chosen=c))  # fmt: skip
    (first, labels), (second, final) = seen
    assert first == proxy_seed(real) != real  # the search never ran on the real seed
    assert len(labels) == 1 + 2 * 2 * 2 and second == real
    chosen = {(p["label"], p["target_epsilon"]): p["knobs"]
              for p in summary["tuning"]["points"] if p["chosen"]}  # fmt: skip
    assert len(final) == 1 + 4  # one point per scheme and ε on the real data
    for c in summary["curves"]:
        for x, knobs in zip(c["x"], c["knobs"], strict=True):
            assert knobs == chosen[(c["label"], x)]
    assert summary["tuning"]["spends_privacy"] is False
    assert (tmp_path / f"{SETUP}-T{T}-proxy" / "summary.json").is_file()
    assert (tmp_path / f"{SETUP}-T{T}" / "summary.json").is_file()


def test_tuning_is_validated_at_the_boundary():
    with pytest.raises(ConfigError, match="--tune-for"):
        Tuning(metric="accuracy")
    with pytest.raises(ConfigError, match="--tune-on"):
        Tuning(on="public")
    with pytest.raises(ConfigError, match="distinct"):
        Tuning(grid={"training.mu": (0.1, 0.1)})
    assert math.isclose(sum(knob_grid("central", 1.0)["training.mu"]), sum(MU_FACTORS))


def test_cli_tunes_and_says_that_tuning_spends_privacy(tmp_path, cli):
    code, stdout, err = cli(
        ["privacy", "frontier", "--setup", SETUP, "--iterations", "3", "--epsilon", "1",
         "--scheme", "gossip", "--grid", "training.mu=0.35,0.7", "--grid",
         "privacy.gossip_steps=1,2", "--out", str(tmp_path)])  # fmt: skip
    assert code == 0, err
    assert "spends privacy" in " ".join(stdout.split())
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert len(summary["tuning"]["points"]) == 4
    assert set(summary["curves"][0]["knobs"][0]) == {"training.mu", "privacy.gossip_steps"}


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["--grid", "training.mu"], "--grid"),
        (["--grid", "training.muu=0.1"], "training.mu"),
        (["--grid", "training.mu=-1"], "training.mu"),
        (["--tune", "--tune-on", "public"], "--tune-on"),
        (["--adversary", "nobody"], "--adversary"),
        (["--scheme", "central", "--grid", "privacy.gossip_steps=1,2"], "privacy.gossip_steps"),
        (["--setup", "regression", "--tune", "--tune-for", "test_error"], "--tune-for"),
    ],
)
def test_cli_tuning_options_are_refused_in_one_line(args, what, tmp_path, cli):
    code, _, err = cli(["privacy", "frontier", "--out", str(tmp_path / "x"), *args])
    assert code == 2 and what in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_calibration_progress_counts_every_curve_of_every_configuration(tmp_path):
    from pgfl.apps.frontier import prepare_frontier

    configs = frontier_configs(setups=(SETUP,), iterations=(2, 3), epsilons=(1.0, 5.0),
                               repetitions=1, schemes=("random_gaussian", "central"))  # fmt: skip
    calls = []
    prepare_frontier(tmp_path, configs, progress=lambda *a: calls.append(a))
    total = sum(len(c.curves) for c in configs.values())
    assert total == 2 * (1 + 2 * 2)
    assert [c[1] for c in calls] == [*range(1, total + 1), total]
    assert {c[2] for c in calls} == {total} and calls[0][0] == f"{SETUP}-T2"
    assert not any(tmp_path.iterdir())  # preparing writes nothing
