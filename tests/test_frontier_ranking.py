"""The frontier's honest ranking (issue 28, item 2): a scheme whose ε does not cover the
ranked quantity is marked and never ranked first.

Which quantity a scheme's ε covers is the calibrated mechanism's own declaration
(``Mechanism.uncovered``); the reference for graph-homomorphic noise is the paper's eq. 46
(its noise cancels in the network centroid; tests/test_engine.py checks it on the engine).
"""

from __future__ import annotations

import csv
import json

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pgfl.apps.frontier import METRIC_QUANTITY, best_schemes, coverage, rank_schemes
from pgfl.privacy import mechanisms
from pgfl.privacy.mechanisms.base import QUANTITIES

# The issue's example, `pgfl privacy frontier --setup regression --iterations 50
# --epsilon 1 --mu 0.3`, with the schemes that decided it (common random numbers: the same
# values as with all of them).
EXAMPLE = ["privacy", "frontier", "--setup", "regression", "--iterations", "50", "--epsilon",
           "1", "--mu", "0.3", "--scheme", "graph_homomorphic_gaussian", "--scheme", "central",
           "--scheme", "random_gaussian", "--scheme", "client_gaussian_models"]  # fmt: skip


def test_the_issues_example_never_ranks_graph_homomorphic_noise_first(tmp_path, cli):
    code, stdout, err = cli([*EXAMPLE, "--out", str(tmp_path), "--json"])
    assert code == 0, err
    curves = {c["label"]: c for c in json.loads(stdout)["curves"]}
    gh = curves["graph_homomorphic_gaussian"]
    others = [c for name, c in curves.items() if name != "graph_homomorphic_gaussian"]
    # the issue's situation: its centroid MSD is the lowest of all ...
    assert all(gh["centroid_msd_db"][0] < c["centroid_msd_db"][0] for c in others)
    # ... yet its noise cancels in the centroid: marked, ranked after every covered scheme
    assert gh["centroid_msd_db_covered"] is False
    assert gh["centroid_msd_db_rank"] == [len(curves)]
    assert "not the network average" in gh["epsilon_covers"]
    # the covered schemes keep their order by value, the best of them first
    covered = sorted(others, key=lambda c: c["centroid_msd_db"][0])
    assert [c["centroid_msd_db_rank"][0] for c in covered] == [1, 2, 3]
    assert all(c["centroid_msd_db_covered"] for c in others)
    assert covered[0]["label"] == "central"
    # the CSV says it per row
    with (tmp_path / "frontier.csv").open() as fh:
        rows = {r["label"]: r for r in csv.DictReader(fh)}
    assert rows["graph_homomorphic_gaussian"]["centroid_msd_db_covered"] == "False"
    assert rows["graph_homomorphic_gaussian"]["centroid_msd_db_rank"] == str(len(curves))
    assert rows["central"]["centroid_msd_db_rank"] == "1"
    assert "network average" in rows["graph_homomorphic_gaussian"]["epsilon_covers"]
    # and the table, in words next to the number
    code, stdout, err = cli([*EXAMPLE, "--out", str(tmp_path), "--resume"])
    assert code == 0, err
    table = stdout[: stdout.index("average individual MSD")]
    line = next(ln for ln in table.splitlines() if "graph_homomorphic_gaussian" in ln)
    assert "graph_homomorphic_gaussian *" in line and f"#{len(curves)}" in line
    assert "#1" in next(ln for ln in table.splitlines() if "central" in ln)
    notes = " ".join(stdout[stdout.index("what each scheme's epsilon covers") :].split())
    assert "* = NOT PROTECTED" in notes
    words = notes[notes.index("graph_homomorphic_gaussian") :]
    assert "not the network average" in words[: words.index("#1 =")]


def test_every_mechanism_declares_the_quantities_its_epsilon_does_not_cover():
    for cls in (*mechanisms.CLIENT.values(), *mechanisms.SERVER.values()):
        assert set(cls.uncovered) <= set(QUANTITIES), cls.__name__
        assert cls.covers.strip(), cls.__name__
    assert "centroid" in mechanisms.GraphHomomorphic.uncovered
    for cls in (mechanisms.RandomNoise, mechanisms.CentralNoise, mechanisms.ClientNoise):
        assert cls.uncovered == {}
    assert set(METRIC_QUANTITY.values()) <= set(QUANTITIES)
    # the frontier reads them: hybrid's ε is its graph-homomorphic noise's
    assert set(coverage("hybrid")[1]) == set(METRIC_QUANTITY)
    assert coverage("random_gaussian")[1] == {}


@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.floats(-80, 80)), st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_uncovered_schemes_rank_last_and_covered_ones_keep_their_rank(points):
    def ranked(pts):
        cs = [{"setup": "s", "iterations": 1, "x": [1.0], "centroid_msd_db": [v],
               "centroid_msd_db_covered": ok} for v, ok in pts]  # fmt: skip
        rank_schemes(cs)
        return [c["centroid_msd_db_rank"][0] for c in cs]

    ranks = ranked(points)
    assert sorted(ranks) == list(range(1, len(points) + 1))
    covered = [i for i, (_, ok) in enumerate(points) if ok]
    uncovered = [i for i, (_, ok) in enumerate(points) if not ok]
    assert all(ranks[i] < ranks[j] for i in covered for j in uncovered)
    if covered:
        assert ranks.index(1) in covered  # never first when a covered scheme exists
    # removing the uncovered schemes changes no covered scheme's rank
    assert ranked([points[i] for i in covered]) == [ranks[i] for i in covered]
    # among the covered ones: finite values in increasing order, diverged (None) after them
    finite = [i for i in covered if points[i][0] is not None]
    by_value = sorted(finite, key=lambda i: (points[i][0], i))
    assert [ranks[i] for i in by_value] == list(range(1, len(finite) + 1))
    assert np.all([ranks[i] > len(finite) for i in covered if points[i][0] is None])


def test_the_best_scheme_per_adversary_is_one_whose_epsilon_covers_the_centroid():
    summary = {"curves": [
        {"label": "graph_homomorphic_gaussian", "setup": "other_server", "x": [1.0],
         "centroid_msd_db": [-50.0]},
        {"label": "central", "setup": "other_server", "x": [1.0], "centroid_msd_db": [-40.0]},
        {"label": "random_gaussian", "setup": "other_server", "x": [1.0],
         "centroid_msd_db": [-35.0]},
        {"label": "graph_homomorphic_gaussian", "setup": "link_eavesdropper", "x": [1.0],
         "centroid_msd_db": [-50.0]},
    ]}  # fmt: skip
    other, eavesdropper = sorted(
        best_schemes(summary), key=lambda b: b["adversary"] != "other_server"
    )
    assert (other["best"], other["distributed"]) == ("central", "random_gaussian")
    assert "best" not in eavesdropper  # no scheme drawn covers the centroid: none is best
