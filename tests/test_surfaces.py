"""Consistent command-line surfaces: options every run command shares, what the commands
print and leave behind, and how they treat settings and data that do not fit.

`pgfl run --seed`, `pgfl reproduce --list` and `--print-config` (graph-learning presets
too), `pgfl graphlearn run`'s default folder, the backend named in `run.log` and
`summary.json`, `partial/` removed after a finished run, a narrow summary table, the
fig7 split fitted to a small CSV, and settings without effect as warnings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from pgfl.apps.frontier import PRESETS as FRONTIER
from pgfl.apps.frontier import frontier_configs, run_frontier
from pgfl.apps.runner import run_experiment, run_plan
from pgfl.cli import main
from pgfl.commands import printing
from pgfl.experiments.loader import parse_config
from pgfl.experiments.muffliato import PRESETS as ACCOUNTING
from pgfl.experiments.partial import remove_partial
from pgfl.experiments.plan import prepare_experiment
from pgfl.experiments.presets import MIN_PER_CLIENT, preset_names, preset_text
from pgfl.folders import STAGE
from pgfl.graphlearn.config import parse_config as parse_graphlearn
from pgfl.graphlearn.presets import PRESETS as GRAPHLEARN
from pgfl.graphlearn.presets import SWEEPS
from pgfl.param import SettingWarning
from pgfl.validation import ConfigError

TINY = """name = "tiny"
iterations = 12
repetitions = 2
[topology]
kind = "ring"
P = 3
[data]
K = 5
N = 6
[training]
L = 2
"""

RAW = {
    "name": "tiny",
    "iterations": 12,
    "repetitions": 2,
    "topology": {"kind": "ring", "P": 3},
    "data": {"K": 5, "N": 6},
    "training": {"L": 2},
    "privacy": {"server_variance": 0.05},
    "curves": [
        {"label": "none"},
        {"label": "gh", "privacy": {"server_noise": "graph_homomorphic"}},
        {"label": "small_L", "training": {"L": 1}},
    ],
}


def pgfl(*args: str, cwd: Path | None = None, columns: int | None = None):
    env = dict(os.environ)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "pgfl.cli", *args],
        capture_output=True, text=True, cwd=cwd, timeout=300, env=env,
    )  # fmt: skip


def cli_json(capsys, *args: str) -> dict:
    """``pgfl ARGS --json`` in this process: the summary it prints."""
    capsys.readouterr()
    main([*args, "--json"])
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------ 1. pgfl run --seed
def test_run_seed_overrides_the_files_seed(tmp_path, capsys):
    (tmp_path / "a.toml").write_text(TINY, encoding="utf-8")
    (tmp_path / "b.toml").write_text("seed = 7\n" + TINY, encoding="utf-8")
    by_option = cli_json(capsys, "run", str(tmp_path / "a.toml"), "--seed", "7",
                         "--out", str(tmp_path / "o1"))  # fmt: skip
    by_file = cli_json(capsys, "run", str(tmp_path / "b.toml"), "--out", str(tmp_path / "o2"))
    default = cli_json(capsys, "run", str(tmp_path / "a.toml"), "--out", str(tmp_path / "o3"))
    assert by_option["seed"] == by_file["seed"] == 7 != default["seed"]
    assert by_option["curves"] == by_file["curves"]
    assert by_option["curves"][0]["centroid_msd_db"] != default["curves"][0]["centroid_msd_db"]
    # the file's seed is overridden as well
    again = cli_json(capsys, "run", str(tmp_path / "b.toml"), "--seed", "0",
                     "--out", str(tmp_path / "o4"))  # fmt: skip
    assert again["curves"] == default["curves"]


def test_run_seed_is_checked_as_the_seed_setting(tmp_path, capsys):
    (tmp_path / "a.toml").write_text(TINY, encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(tmp_path / "a.toml"), "--seed", "-1", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert "seed (--seed) must be an integer in [0, inf]; got -1" in err
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------- 2. reproduce --list
def _listing(columns: int) -> str:
    result = pgfl("reproduce", "--list", columns=columns)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_list_names_every_preset_with_a_description_aligned_at_any_width():
    text = _listing(40)
    assert text == _listing(300)  # nothing depends on the terminal's width
    lines = text.splitlines()
    names = preset_names() + sorted(FRONTIER) + sorted(ACCOUNTING) + sorted(GRAPHLEARN)
    assert [line.split()[0] for line in lines] == names
    starts = set()
    for name, line in zip(names, lines, strict=True):
        description = line[len(name) :].strip()
        assert description, line
        starts.add(line.index(description, len(name)))
        if name in preset_names():  # the preset file's own title
            assert description == tomllib.loads(preset_text(name))["title"]
    assert len(starts) == 1  # one column for every description


# ------------------------------------------- 3. --print-config of graph-learning presets
@pytest.mark.parametrize("name", sorted(GRAPHLEARN))
def test_print_config_of_a_graph_learning_preset(name):
    full = pgfl("reproduce", name, "--print-config")
    quick = pgfl("reproduce", name, "--print-config", "--quick", "--seed", "5")
    assert full.returncode == 0 and quick.returncode == 0, full.stderr + quick.stderr
    raw = tomllib.loads(quick.stdout)  # valid TOML
    assert raw["seed"] == 5
    assert full.stdout.startswith(f"# {name}: ")
    if name == "graphlearn-digits":  # its data are built in: settings for reading
        assert raw["classes"] and "cannot name" in quick.stdout
        return
    cfg = parse_graphlearn(raw)  # a `pgfl graphlearn run` configuration
    assert cfg.seed == 5 and cfg.kind == "synthetic"
    assert cfg.repetitions < parse_graphlearn(tomllib.loads(full.stdout)).repetitions
    if name == "graphlearn-heterogeneity":
        full_sweep, quick_sweep = SWEEPS["heterogeneity"]
        assert str(list(quick_sweep)) in quick.stdout and str(list(full_sweep)) in full.stdout
        assert cfg.q == quick_sweep[-1]


def test_a_printed_graph_learning_config_runs(tmp_path):
    printed = pgfl("reproduce", "graphlearn-imbalance", "--print-config", "--quick")
    (tmp_path / "imbalance.toml").write_text(printed.stdout, encoding="utf-8")
    result = pgfl("graphlearn", "run", "imbalance.toml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "runs" / "imbalance" / "summary.json").read_text())
    assert summary["config"]["n_samples"] == list(SWEEPS["imbalance"][1])


def test_options_that_graph_learning_presets_do_not_take_are_still_refused():
    result = pgfl("reproduce", "graphlearn-weights", "--keep-partial")
    assert result.returncode == 2 and "--keep-partial" in result.stderr


# ------------------------------------------------ 4. graphlearn run: --out default
def test_graphlearn_run_writes_into_runs_name_by_default(tmp_path, monkeypatch, capsys):
    (tmp_path / "small-graphs.toml").write_text(
        "[data]\nnodes = 8\nclients = 2\nn_samples = 30\nrepetitions = 1\n"
        "[algorithm]\nrounds = 2\nlocal_steps = 5\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    main(["graphlearn", "run", "small-graphs.toml"])
    assert (tmp_path / "runs" / "small-graphs" / "summary.json").is_file()
    assert not (tmp_path / "results").exists()


# ------------------------------------------------------ 5. which backend ran
class _Described:
    """The local engine under another description (what a cluster backend would say)."""

    def __init__(self, text: str | None) -> None:
        from pgfl.backends import LocalBackend

        self.inner, self.text = LocalBackend(), text
        if text is not None:
            self.describe = lambda: self.text

    def trajectories(self, plan, progress=None):
        return self.inner.trajectories(plan, progress)


def test_run_log_and_summary_name_the_backend(tmp_path):
    cfg = parse_config(RAW)
    local = run_experiment(cfg, tmp_path / "local")
    assert local["engine"]["backend"] == "local"
    assert "engine: backend=local" in (tmp_path / "local" / "run.log").read_text().splitlines()
    other = run_plan(prepare_experiment(cfg, tmp_path / "o"), backend=_Described("ray (x, 3)"))
    assert other["engine"]["backend"] == "ray (x, 3)"
    on_disk = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert on_disk["engine"]["backend"] == "ray (x, 3)"
    assert "engine: backend=ray (x, 3)" in (tmp_path / "o" / "run.log").read_text()
    assert other["curves"] == local["curves"]  # the same numbers
    nameless = run_plan(prepare_experiment(cfg, tmp_path / "n"), backend=_Described(None))
    assert nameless["engine"]["backend"] == "_Described"


def test_a_resumed_run_names_the_backend_that_computed_its_curves(tmp_path):
    cfg = parse_config({**RAW, "run": {"keep_partial": True}})
    run_plan(prepare_experiment(cfg, tmp_path), backend=_Described("first"))
    again = run_plan(prepare_experiment(cfg, tmp_path, resume=True), backend=_Described("second"))
    assert again["engine"]["backend"] == "first"  # every curve came from the partial files


def test_ray_backends_describe_what_ran_without_starting_ray():
    from pgfl.backends.ray_actors import RayActors
    from pgfl.backends.ray_sweeps import RaySweeps

    sweeps = RaySweeps(workers=4)
    assert sweeps.describe() == "ray (tasks)"  # nothing ran yet
    sweeps.cluster_cpus = 4
    assert sweeps.describe() == "ray (tasks, 4 workers)"
    assert RaySweeps(address="h:6379").describe() == "ray (tasks at h:6379)"
    actors = RayActors(actors=3)
    actors.blocks = 3
    assert actors.describe() == "ray (actors, 3 actors)"


# ------------------------------------------------------------ 6. partial/ after a run
def _partial(folder: Path) -> list[str]:
    return sorted(p.name for p in (folder / "partial").glob("*")) if folder.exists() else []


def test_a_finished_run_removes_partial_unless_asked_to_keep_it(tmp_path):
    run_experiment(parse_config(RAW), tmp_path / "done")
    assert (tmp_path / "done" / "summary.json").is_file()
    assert not (tmp_path / "done" / "partial").exists()
    run_experiment(parse_config({**RAW, "run": {"keep_partial": True}}), tmp_path / "kept")
    assert _partial(tmp_path / "kept") == [f"curve-{i:03d}.npz" for i in range(3)]


def test_keep_partial_must_be_a_boolean():
    with pytest.raises(ConfigError, match=r"^run.keep_partial must be true or false; got 1$"):
        parse_config({**RAW, "run": {"keep_partial": 1}})


def test_an_interrupted_run_keeps_partial_and_resume_finishes_and_removes_it(tmp_path):
    cfg = parse_config(RAW)
    full = run_experiment(cfg, tmp_path / "full")
    seen: set[str] = set()

    def interrupt_second_batch(labels, done, total):
        seen.add(labels)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, tmp_path / "part", on_progress=interrupt_second_batch)
    kept = _partial(tmp_path / "part" / STAGE)  # the run's staging folder
    assert kept and len(kept) < len(RAW["curves"])  # the finished batch, not the other
    assert not (tmp_path / "part" / "summary.json").exists()
    resumed = run_experiment(cfg, tmp_path / "part", resume=True)
    assert resumed["curves"] == full["curves"]
    assert not (tmp_path / "part" / "partial").exists()
    assert not (tmp_path / "part" / STAGE).exists()


def test_cli_keep_partial(tmp_path, capsys):
    (tmp_path / "a.toml").write_text(TINY, encoding="utf-8")
    cli_json(capsys, "run", str(tmp_path / "a.toml"), "--out", str(tmp_path / "gone"))
    cli_json(capsys, "run", str(tmp_path / "a.toml"), "--out", str(tmp_path / "kept"),
             "--keep-partial")  # fmt: skip
    assert not (tmp_path / "gone" / "partial").exists()
    assert _partial(tmp_path / "kept") == ["curve-000.npz"]
    # a local run keeps the file's run.keep_partial when --backend local drops its Ray settings
    (tmp_path / "b.toml").write_text(
        TINY + '[run]\nbackend = "ray"\nworkers = 2\nkeep_partial = true\n', encoding="utf-8"
    )
    cli_json(capsys, "run", str(tmp_path / "b.toml"), "--out", str(tmp_path / "file"),
             "--backend", "local")  # fmt: skip
    assert _partial(tmp_path / "file") == ["curve-000.npz"]


def test_remove_partial_leaves_files_it_did_not_write(tmp_path):
    (tmp_path / "partial").mkdir()
    for name in ("curve-000.npz", "task-000-0000-0002.npz", ".curve-001.npz.12.tmp.npz"):
        (tmp_path / "partial" / name).write_bytes(b"x")
    (tmp_path / "partial" / "notes.txt").write_text("mine")
    remove_partial(tmp_path)
    assert _partial(tmp_path) == ["notes.txt"]
    (tmp_path / "partial" / "notes.txt").unlink()
    remove_partial(tmp_path)
    assert not (tmp_path / "partial").exists()


def _frontier_configs(**run):
    configs = frontier_configs(setups=("regression",), iterations=(2, 3), epsilons=(1.0,),
                               schemes=("random",), repetitions=1)  # fmt: skip
    if run:
        from dataclasses import replace

        configs = {k: replace(c, run=replace(c.run, **run)) for k, c in configs.items()}
    return configs


def test_a_finished_frontier_removes_its_sub_runs_partial_folders(tmp_path):
    run_frontier(tmp_path / "gone", configs=_frontier_configs())
    subs = sorted(p for p in (tmp_path / "gone").iterdir() if p.is_dir())
    assert [p.name for p in subs] == ["regression-T2", "regression-T3"]
    assert all((p / "summary.json").is_file() and not (p / "partial").exists() for p in subs)
    run_frontier(tmp_path / "kept", configs=_frontier_configs(keep_partial=True))
    assert _partial(tmp_path / "kept" / "regression-T2")


def test_an_interrupted_frontier_keeps_its_finished_sub_runs_for_resume(tmp_path):
    configs = _frontier_configs()
    calls = []

    def run(plan):
        calls.append(plan.out.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return run_plan(plan)

    with pytest.raises(KeyboardInterrupt):
        run_frontier(tmp_path, configs=configs, run=run)
    staged = tmp_path / STAGE / calls[0]  # in the frontier's staging folder
    assert _partial(staged)  # the finished sub-run, kept for --resume
    stamps = {p: p.stat().st_mtime_ns for p in (staged / "partial").iterdir()}
    seen = []

    def watch(plan):
        seen.append((plan.out.name, len(plan.batches)))
        return run_plan(plan)

    resumed = run_frontier(tmp_path, configs=configs, resume=True, run=watch)
    assert dict(seen)[calls[0]] == 0  # nothing of the finished sub-run ran again
    assert all(p.stat().st_mtime_ns == s for p, s in stamps.items() if p.exists())
    assert resumed == run_frontier(tmp_path / "fresh", configs=configs)
    assert not (tmp_path / calls[0] / "partial").exists()


# ----------------------------------------------------------- 7. the summary table
def _printed(summary: dict, width: int = 200) -> str:
    console = Console(width=width, file=None, record=True, force_terminal=False)
    old = printing.out
    printing.out = console
    try:
        with console.capture() as captured:
            printing.print_summary(summary)
    finally:
        printing.out = old
    return captured.get()


def _curve(label, rng, *, test=True, msd=True, P1=False, eps=True, target=None):
    c = {
        "label": label,
        "centroid_msd_db": float(rng.uniform(-50, 30)) if msd else None,
        "individual_msd_db": float(rng.uniform(-50, 30)) if msd else None,
        "disagreement_db": float("-inf") if P1 else float(rng.uniform(-60, 70)),
        "diverged": False,
        "diverged_at": None,
        "diverged_repetitions": 0,
    }
    if test:
        error = float(rng.uniform(0.01, 0.99))
        c.update(test_error=error, test_accuracy=1 - error,
                 test_log_loss=float(rng.uniform(0.1, 3)))  # fmt: skip
    if eps:
        c.update(epsilon={"paper": float(10 ** rng.uniform(-1, 9)),
                          "pld": float(10 ** rng.uniform(-1, 9))},
                 delta=1e-5, noise_variance=0.1)  # fmt: skip
    if target is not None:
        c["target_epsilon"] = target
    return c


WIDTH = 100  # the widest the table of a shipped preset may be


def _summaries():
    rng = np.random.default_rng(0)
    long = "graph_homomorphic_eps"  # the longest label of a shipped preset
    return {
        "fig7-like": {"experiment": "fig7", "curves": [
            _curve(n, rng, eps=n != "none") for n in ("none", "graph_homomorphic", "random")]},
        "digits-like": {"experiment": "digits-mlp", "curves": [
            _curve(n, rng, msd=False, target=2000.0 if n.endswith("_eps") else None)
            for n in ("none", "graph_homomorphic", "hybrid", long, "random_eps")]},
        "single-unit": {"experiment": "fl", "curves": [
            _curve(n, rng, P1=True, test=False) for n in ("none", "noisy_models")]},
        "regression": {"experiment": "fig2", "curves": [
            _curve(n, rng, test=False) for n in ("none", "graph_homomorphic", "random")]},
    }  # fmt: skip


@pytest.mark.parametrize("name", ["fig7-like", "digits-like", "single-unit", "regression"])
def test_the_summary_table_is_narrow_and_shows_accuracy_to_a_tenth_of_a_point(name):
    summary = _summaries()[name]
    text = _printed(summary)
    lines = text.splitlines()
    assert max(map(len, lines)) <= WIDTH, "\n" + text
    header = next(line for line in lines if "curve" in line)
    assert header.replace("dB", "db") == header.lower()  # lower-case headers (units aside)
    assert "diverged" not in header  # told below the table instead
    for c in summary["curves"]:
        row = next(line for line in lines if line.startswith(f"│ {c['label']} "))
        cells = [cell.strip() for cell in row.strip("│").split("│")]
        if "test_accuracy" in c:
            assert f"{100 * c['test_accuracy']:.1f}" in cells
    if name == "single-unit":  # P = 1: no disagreement column, no -inf
        assert "disagr" not in header and "inf" not in text
    if name == "digits-like":  # no MSD without a closed-form optimum
        assert "centroid" not in header
    if any("epsilon" in c for c in summary["curves"]):  # the sound ε first, the papers' marked
        above = lines[lines.index(header) - 1]
        assert header.index(" pld ") < header.index(" paper* ") and "link ε" in above
        assert "link ε: the link's own ε" in text and "no sampling credit" in text
        assert "* paper: the papers' published bound" in text and "M > 1" in text


@pytest.mark.parametrize("mixed", [False, True])
def test_the_first_epsilon_column_is_the_calibrated_adversarys_and_names_its_accountant(mixed):
    """The ε a curve was calibrated to comes first, against the adversary named in the header
    (or below it, when the curves' differ); the link's own ε without sampling credit second;
    a value that is the Rényi bound says so (an RDP bound is not labelled pld)."""
    rng = np.random.default_rng(4)
    curves = [_curve("none", rng, test=False, eps=False)]
    for label, adversary in (("central", "other_server" if mixed else "link_eavesdropper"),
                             ("pairwise_cancelling", "link_eavesdropper")):  # fmt: skip
        c = _curve(label, rng, test=False, target=1.0)
        c.update(calibrated_adversary=adversary,
                 epsilon_by_adversary={adversary: 1.0004, "own_server": None},
                 accountant_by_adversary={adversary: "rdp", "own_server": None},
                 epsilon={"pld": 4.861}, epsilon_source={"pld": "pld"})  # fmt: skip
        curves.append(c)
    text = _printed({"experiment": "x", "curves": curves})
    lines = text.splitlines()
    table = [line for line in lines if line[:1] in "┏┃┡│└"]
    assert max(map(len, table)) <= WIDTH, "\n" + text
    head = "\n".join(line for line in lines if line.startswith("┃"))
    assert head.index("ε vs") < head.index("link ε")
    row = next(line for line in lines if line.startswith("│ central "))
    assert "1.00 rdp" in row and "4.86" in row and "4.86 rdp" not in row
    if mixed:
        assert "calibrated" in head and "adversary" in head
        flat = " ".join(text.split())
        assert "ε vs calibrated adversary: " in flat
        assert "link_eavesdropper for pairwise_cancelling" in flat
        assert "other_server for central" in flat
        assert "rdp beside an ε: the Rényi bound" in text
    else:
        assert "eavesdropper" in head and "calibrated" not in head


def test_accuracies_a_tenth_of_a_point_apart_print_differently():
    rng = np.random.default_rng(1)
    a, b = _curve("a", rng), _curve("b", rng)
    a["test_accuracy"], b["test_accuracy"] = 0.9120, 0.9131
    text = _printed({"experiment": "x", "curves": [a, b]})
    assert "91.2" in text and "91.3" in text


def test_a_diverged_curve_is_told_below_the_table():
    rng = np.random.default_rng(2)
    bad = _curve("blowup", rng, test=False, eps=False)
    bad.update(centroid_msd_db=None, individual_msd_db=None, disagreement_db=None,
               diverged=True, diverged_at=7, diverged_repetitions=2)  # fmt: skip
    text = _printed({"experiment": "x", "repetitions": 2,
                     "curves": [_curve("ok", rng, test=False, eps=False), bad]})  # fmt: skip
    assert "curve blowup diverged at iteration 7" in text


def test_a_graph_learning_sweep_is_narrow_and_tells_its_private_curves_apart():
    rng = np.random.default_rng(3)
    xs = [10, 20, 40, 60, 80, 100]  # the widest shipped sweep

    def curve(label, eps=None):  # noqa: E306
        c = {"label": label, "x": xs, "mcc": rng.uniform(-1, 1, 6).tolist(),
             "relative_error": rng.uniform(0, 3, 6).tolist()}  # fmt: skip
        if eps is not None:
            c.update(epsilon=eps, delta=1e-5, epsilon_pld=eps / 3, epsilon_covers="one step")
        return c

    curves = [curve("fedgl_consensus"), curve("fedgl_local_dp_statistic", 0.3),
              curve("fedgl_local_dp_statistic", 1.0)]  # fmt: skip
    text = _printed({"experiment": "graphlearn-x", "curves": curves,
                           "x_name": "client index (N_i = 20, 40, 60, 80, 100)"})  # fmt: skip
    rows = [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]
    assert rows and max(map(len, rows)) <= WIDTH, "\n" + text
    labels = [line.split("│")[1].strip() for line in rows if line.startswith("│")]
    assert len(labels) == 2 * len(curves) == 2 * len(set(labels))  # two tables, rows distinct
    for c in curves:  # each value printed in its table, to 2 decimals
        assert all(f"{v:.2f}" in text for v in c["mcc"] + c["relative_error"])
    assert "ε̄=0.3" in text and "covers one step" in text


def test_the_frontier_tables_are_narrow(tmp_path):
    configs = frontier_configs(
        setups=("regression", "logistic"),
        iterations=(2,),
        epsilons=(0.5, 1.0, 2.0, 5.0, 10.0, 50.0),
        repetitions=1,
    )
    summary = run_frontier(tmp_path, configs=configs)  # fmt: skip
    text = _printed(summary)
    assert max(map(len, text.splitlines())) <= WIDTH, "\n" + text
    assert "test error %" in text  # the logistic set-up's second table
    c = next(c for c in summary["curves"] if c["setup"] == "logistic")
    shown = [f"{100 * e:.1f}" for e in c["test_error"] if e is not None]
    row = next(line for line in text.splitlines()[::-1] if line.startswith(f"│ {c['label']} "))
    assert all(s in row for s in shown)


# ------------------------------------------ 8. fig7 on a small CSV (--data without --rows)
def _csv(path: Path, rows: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 5))
    y = (X @ rng.normal(size=5) + 0.5 * rng.normal(size=rows) > 0).astype(int)
    lines = ["a,b,c,d,e,label"] + [",".join([*(f"{v:.4f}" for v in x), str(t)])
                                   for x, t in zip(X, y, strict=True)]  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f"csv:{path}:label"


def _fig7_clients() -> int:
    raw = tomllib.loads(preset_text("fig7"))
    return raw["topology"]["P"] * raw["data"]["K"]


def test_fig7_fits_its_split_to_a_small_csv(tmp_path):
    source = _csv(tmp_path / "small.csv", 569)
    result = pgfl("reproduce", "fig7", "--quick", "--data", source, "--out", "o", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and "569 rows" in notes[0]
    data = json.loads((tmp_path / "o" / "config.json").read_text())["config"]["data"]
    assert data["rows"] + data["test_size"] == 569
    assert data["rows"] >= _fig7_clients() * MIN_PER_CLIENT
    preset = tomllib.loads(preset_text("fig7"))["data"]
    assert 0 < data["test_size"] <= preset["test_size"]
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert all(c["test_accuracy"] is not None for c in summary["curves"])


def test_fig7_on_too_small_a_csv_names_what_to_change(tmp_path):
    too_small = _fig7_clients() * MIN_PER_CLIENT  # no room left for a test set
    source = _csv(tmp_path / "tiny.csv", too_small)
    result = pgfl("reproduce", "fig7", "--quick", "--data", source, "--out", "o", cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and f"has {too_small} rows" in line
    assert "topology.P" in line and "data.K" in line
    assert not (tmp_path / "o").exists()
    # --rows that leave too few test rows: one line naming --rows
    source = _csv(tmp_path / "small.csv", 569)
    result = pgfl("reproduce", "fig7", "--data", source, "--rows", "565", "--out", "o",
                  cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2 and "--rows" in result.stderr
    assert result.stderr.count("\n") == 1


def test_fig7_keeps_the_papers_split_when_the_data_hold_it(tmp_path):
    from pgfl.experiments.presets import fit_split

    preset = tomllib.loads(preset_text("fig7"))["data"]
    source = _csv(tmp_path / "big.csv", preset["rows"] + preset["test_size"])
    overrides, note = fit_split("fig7", source)
    assert overrides == {"source": source} and note == ""


# ------------------------------------------------- 9. settings without effect warn
NO_SERVER_NOISE = {
    "name": "quiet",
    "iterations": 8,
    "topology": {"kind": "ring", "P": 3},
    "data": {"K": 5, "N": 6},
    "training": {"L": 2},
    "privacy": {"server_variance": 0.1},
    "curves": [{"label": "a"}, {"label": "b", "training": {"mu": 0.3}}],
}


def test_a_setting_without_effect_warns_and_the_run_goes_on():
    with pytest.warns(SettingWarning) as caught:
        cfg = parse_config(NO_SERVER_NOISE)
    (w,) = [w for w in caught if w.category is SettingWarning]
    message = str(w.message)
    assert message.startswith("privacy.server_variance = 0.1 has no effect: no curve has ")
    assert 'privacy.server_noise other than "none"' in message
    assert [c.label for c in cfg.curves] == ["a", "b"]


def test_a_per_curve_setting_without_effect_names_the_curve():
    raw = {**NO_SERVER_NOISE, "privacy": {}}
    raw["curves"] = [{"label": "a"}, {"label": "b", "privacy": {"dropout": 0.2}}]
    with pytest.warns(SettingWarning, match=r"^curves\[1\]\.privacy\.dropout = 0\.2 has no "
                      r"effect: curve 'b' does not have privacy\.client_noise"):  # fmt: skip
        parse_config(raw)


def test_a_wrong_value_is_still_an_error_where_the_setting_has_no_effect():
    raw = {**NO_SERVER_NOISE, "privacy": {"server_variance": -1.0}}
    with pytest.raises(ConfigError, match=r"^privacy.server_variance must be"):
        parse_config(raw)


def test_a_default_value_never_warns():
    raw = {**NO_SERVER_NOISE, "privacy": {"server_distribution": "laplace"}}
    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingWarning)
        parse_config(raw)


def test_the_cli_prints_a_setting_without_effect_as_one_warning_line(tmp_path):
    text = TINY + "[privacy]\nserver_variance = 0.1\n"
    (tmp_path / "q.toml").write_text(text, encoding="utf-8")
    result = pgfl("run", "q.toml", "--out", "o", "--workers", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert (
        "warning: privacy.server_variance = 0.1 has no effect: no curve has "
        'privacy.server_noise other than "none"'
    ) in "\n".join(lines)
    assert any(line.startswith("warning: --workers = 2 has no effect") for line in lines)
    assert all(line.startswith("warning: ") for line in lines)
    assert (tmp_path / "o" / "summary.json").is_file()
