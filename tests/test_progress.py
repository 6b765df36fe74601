"""Progress while a command works: bars on a terminal, nothing in logs; rounds in run.log.

Nothing here depends on the terminal's width or on timing: the bars' contents are checked
through the calls the commands make (which task, what total, how far), and "quiet" through
what a non-terminal stderr receives.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import numpy as np
from rich.console import Console

from pgfl.commands.common import execute, progress_display
from pgfl.experiments.loader import parse_config
from pgfl.experiments.plan import prepare_experiment

TINY = {
    "name": "tiny",
    "iterations": 12,
    "repetitions": 2,
    "plot": ["centroid_msd_db", "disagreement_db"],
    "topology": {"kind": "ring", "P": 3},
    "data": {"K": 4, "N": 6},
    "training": {"L": 2, "mu": 0.3},
    "curves": [
        {"label": "none"},
        {"label": "gh", "privacy": {"server_noise": "graph_homomorphic", "server_variance": 0.01}},
        {"label": "other_mu", "training": {"mu": 0.2, "epochs": 2}},
    ],
}


class Recorder:
    """The calls a command makes on its progress display."""

    def __init__(self, bar):
        self.tasks, self.updates = {}, []
        add, update = bar.add_task, bar.update

        def add_task(description, **kw):
            task = add(description, **kw)
            self.tasks[task] = {"description": description, **kw}
            return task

        def update_(task, **kw):
            self.updates.append((task, kw))
            return update(task, **kw)

        bar.add_task, bar.update = add_task, update_


def terminal():
    return Console(file=io.StringIO(), force_terminal=True, width=100)


def test_a_bar_per_batch_of_curves_counts_rounds_to_the_end(tmp_path, monkeypatch):
    from pgfl.engine import rounds

    # compiled rounds report after each call: at most 5 rounds a call here, so the bar
    # moves at least three times in 12 rounds (the round-by-round path: every round)
    monkeypatch.setattr(rounds, "ROUNDS_PER_CALL", 5)
    plan = prepare_experiment(parse_config(TINY), tmp_path / "out")
    assert len(plan.batches) == 2  # other_mu has other epochs: a batch of its own
    with progress_display(False, console=terminal()) as bar:
        assert not bar.disable
        seen = Recorder(bar)
        execute(plan, as_json=False)
    assert len(seen.tasks) == 2
    for task, info in seen.tasks.items():
        assert info["unit"] == "rounds" and info["total"] == TINY["iterations"]
        assert info["description"].startswith("tiny: ")
        done = [kw["completed"] for t, kw in seen.updates if t == task and "completed" in kw]
        steps = np.diff([0, *done])
        assert done[-1] == TINY["iterations"] and (steps >= 1).all() and (steps <= 5).all()
    names = sorted(info["description"] for info in seen.tasks.values())
    assert names == ["tiny: none, gh", "tiny: other_mu"]


def test_no_bars_under_json_or_without_a_terminal():
    with progress_display(True, console=terminal()) as bar:
        assert bar.disable
    with progress_display(False, console=Console(file=io.StringIO())) as bar:
        assert bar.disable  # a log file or a pipe: quiet


def test_a_piped_run_prints_no_progress_and_json_stays_pure(tmp_path):
    cfg = tmp_path / "tiny.toml"
    lines = [f"{k} = {json.dumps(v)}" for k, v in TINY.items() if not isinstance(v, (dict, list))]
    lines += ['plot = ["centroid_msd_db"]', "[topology]", 'kind = "ring"', "P = 3"]
    lines += ["[data]", "K = 4", "N = 6", "[training]", "L = 2", "mu = 0.3"]
    cfg.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-c", "from pgfl.cli import main; main()", "run", str(cfg)]
    done = subprocess.run(
        [*cmd, "--out", str(tmp_path / "o"), "--json"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["experiment"] == "tiny"
    assert "rounds" not in done.stderr and "\r" not in done.stderr


def test_run_log_has_every_round_of_every_curve_as_curves_csv(tmp_path):
    plan = prepare_experiment(parse_config(TINY), tmp_path / "out")
    execute(plan, as_json=True)
    log = (tmp_path / "out" / "run.log").read_text(encoding="utf-8").splitlines()
    rounds = [line for line in log if line.startswith("round ")]
    assert len(rounds) == TINY["iterations"]  # one line per round, every curve in it
    with (tmp_path / "out" / "curves.csv").open(newline="", encoding="utf-8") as fh:
        rows = {(r["label"], r["iteration"]): r for r in csv.DictReader(fh)}
    t = 7
    line = rounds[t - 1]
    assert line.startswith(f"round {t}/{TINY['iterations']}: centroid_msd_db ")
    for label in ("none", "gh", "other_mu"):
        for metric in TINY["plot"]:
            part = line.split(f"{metric} ")[1].split(" |")[0]
            logged = dict(kv.split("=") for kv in part.split())[label]
            assert float(logged) == round(float(rows[(label, str(t))][metric]), 2)


def test_run_log_grows_in_the_staging_folder_and_reaches_out_only_with_the_results(tmp_path):
    from pgfl.apps.runner import run_plan

    out = tmp_path / "out"
    plan = prepare_experiment(parse_config(TINY), out)
    seen, started = [], set()

    def on_progress(labels, done, total):
        if labels not in started:  # a batch starts: what the batches before it logged, where
            started.add(labels)
            staged = plan.work / "run.log"
            lines = staged.read_text(encoding="utf-8").splitlines() if staged.exists() else []
            seen.append((len(lines), (out / "run.log").exists()))

    run_plan(plan, on_progress=on_progress)
    assert plan.work != out and plan.work.is_relative_to(out)
    # the first batch's rounds are in the staging folder when the second starts; OUT has none
    assert seen == [(0, False), (TINY["iterations"], False)]
    log = (out / "run.log").read_text(encoding="utf-8").splitlines()
    assert len([line for line in log if line.startswith("round ")]) == TINY["iterations"]
    assert not (plan.work / "run.log").exists()
