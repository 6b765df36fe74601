"""Output folders pgfl owns: nothing it did not write is touched, a failed rerun loses nothing.

Each test is a failure found by probing pgfl as a co-tenant of a shared folder would
(issue 26): a ``partial`` symlink into a data folder, another tool's files where ``--out``
points, a symlink planted at a temporary name, a mistyped rerun interrupted, litter of
killed runs; and the default folders of ``--quick`` and of the two frontier commands.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pgfl
from pgfl.apps.runner import run_experiment, run_plan
from pgfl.cli import main
from pgfl.experiments.loader import parse_config
from pgfl.experiments.plan import prepare_experiment
from pgfl.files import LOCK_NAME, FileError, read_json, write_json
from pgfl.folders import MARKER, STAGE

SMALL = {
    "name": "owned",
    "iterations": 10,
    "repetitions": 2,
    "seed": 5,
    "topology": {"kind": "ring", "P": 3},
    "data": {"K": 4, "N": 8},
    "training": {"L": 2, "mu": 0.3},
    "curves": [{"label": "a"}, {"label": "b", "training": {"mu": 0.2}}],
}
TOML = """name = "owned"
iterations = 10
repetitions = 2
seed = {seed}
[topology]
kind = "ring"
P = 3
[data]
K = 4
N = 8
[training]
L = 2
"""
SRC = str(Path(pgfl.__file__).resolve().parents[1])


def _snapshot(folder: Path) -> dict[str, bytes | str | None]:
    """Every entry under ``folder`` (links not followed): bytes, link target or None."""
    out: dict[str, bytes | str | None] = {}
    for p in sorted(folder.rglob("*")):
        key = str(p.relative_to(folder))
        if p.is_symlink():
            out[key] = "-> " + os.readlink(p)
        elif p.is_file():
            out[key] = p.read_bytes()
        else:
            out[key] = None
    return out


def _cli(capsys, *args: str) -> tuple[int, list[str]]:
    """``pgfl ARGS`` in this process: its exit code and its stderr lines."""
    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err.strip().splitlines()


def _user_files(folder: Path) -> dict[str, bytes]:
    """A user's own files, in the names a pgfl run would use."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "partial/my_experiment.npz": b"my own arrays",
        "partial/notes.tmp": b"my notes",
        "config.json": b'{"tool": "another"}',
        "summary.json": b'{"mine": true}',
        "run.log": b"another tool's log\n",
        "curves.csv": b"x,y\n1,2\n",
        "figure.png": b"not pgfl's figure",
    }
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return files


# ------------------------------------------------------- 1. a partial symlink is not followed
def test_a_partial_symlink_into_a_data_folder_loses_no_file(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("a.npz", "b.npz", "c.tmp"):
        (data / name).write_bytes(name.encode())
    before = _snapshot(data)
    out = tmp_path / "out"
    out.mkdir()
    (out / "partial").symlink_to(data, target_is_directory=True)
    (tmp_path / "c.toml").write_text(TOML.format(seed=1), encoding="utf-8")
    code, err = _cli(capsys, "run", str(tmp_path / "c.toml"), "--out", str(out))
    assert code == 2 and len(err) == 1, err
    assert "pgfl did not write" in err[0] and "partial" in err[0] and "--force" in err[0]
    assert _snapshot(data) == before
    # --force writes beside the link, never through it, and leaves the link as it was
    code, err = _cli(capsys, "run", str(tmp_path / "c.toml"), "--out", str(out), "--force")
    assert code == 0, err
    assert _snapshot(data) == before and (out / "partial").is_symlink()
    assert read_json(out / "summary.json")["experiment"] == "owned"
    # --keep-partial would write into it: refused before any work, the link followed never
    code, err = _cli(capsys, "run", str(tmp_path / "c.toml"), "--out", str(out), "--force",
                     "--keep-partial")  # fmt: skip
    assert code == 2 and len(err) == 1 and "symbolic link" in err[0], err
    assert _snapshot(data) == before


def test_the_cleanup_of_partial_files_refuses_links(tmp_path):
    from pgfl.experiments.partial import remove_partial

    data = tmp_path / "data"
    data.mkdir()
    (data / "curve-000.npz").write_bytes(b"a user's file of that name")
    out = tmp_path / "out"
    out.mkdir()
    (out / "partial").symlink_to(data, target_is_directory=True)
    remove_partial(out)
    assert (data / "curve-000.npz").read_bytes() == b"a user's file of that name"


# ------------------------------------------------------------ 2. files pgfl did not write
def test_a_folder_of_another_tools_files_is_refused_and_left_as_it_was(tmp_path, capsys):
    out = tmp_path / "shared"
    files = _user_files(out)
    before = _snapshot(out)
    (tmp_path / "c.toml").write_text(TOML.format(seed=1), encoding="utf-8")
    code, err = _cli(capsys, "run", str(tmp_path / "c.toml"), "--out", str(out))
    assert code == 2 and len(err) == 1, err
    assert str(out) in err[0] and "pgfl did not write" in err[0] and "--force" in err[0]
    assert _snapshot(out) == before
    # --force: the run writes its results; files it does not write stay untouched
    code, err = _cli(capsys, "run", str(tmp_path / "c.toml"), "--out", str(out), "--force")
    assert code == 0, err
    for name in ("partial/my_experiment.npz", "partial/notes.tmp"):
        assert (out / name).read_bytes() == files[name]
    assert read_json(out / "summary.json")["experiment"] == "owned"
    marker = read_json(out / MARKER)
    assert "partial/my_experiment.npz" not in marker["files"]
    assert {"summary.json", "config.json", "curves.csv", "figure.png"} <= set(marker["files"])
    # a rerun of the same configuration: still the user's files beside pgfl's, so --force
    code, err = _cli(capsys, "run", str(tmp_path / "c.toml"), "--out", str(out))
    assert code == 2 and "partial" in err[0] and "--force" in err[0], err


def test_pgfl_deletes_only_the_files_it_listed(tmp_path):
    out = tmp_path / "out"
    run_experiment(parse_config(SMALL), out)
    listed = set(read_json(out / MARKER)["files"])
    assert listed == {p.name for p in out.iterdir() if p.name != MARKER}
    (out / "mine.txt").write_text("a note of mine")
    # a forged marker naming a file outside the folder is never followed
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    marker = read_json(out / MARKER)
    write_json(out / MARKER, {**marker, "files": [*marker["files"], "../victim.txt"]})
    run_experiment(parse_config({**SMALL, "seed": 6}), out, force=True)
    assert (out / "mine.txt").read_text() == "a note of mine"
    assert victim.read_text() == "keep me"


def test_results_of_another_configuration_are_refused_unless_forced(tmp_path, capsys):
    out = tmp_path / "out"
    (tmp_path / "a.toml").write_text(TOML.format(seed=1), encoding="utf-8")
    (tmp_path / "b.toml").write_text(TOML.format(seed=2), encoding="utf-8")
    assert _cli(capsys, "run", str(tmp_path / "a.toml"), "--out", str(out))[0] == 0
    before = _snapshot(out)
    code, err = _cli(capsys, "run", str(tmp_path / "b.toml"), "--out", str(out))
    assert code == 2 and len(err) == 1, err
    assert "another configuration" in err[0] and "--force" in err[0]
    assert _snapshot(out) == before
    # the same configuration again: a warning that its results are replaced, then done
    code, err = _cli(capsys, "run", str(tmp_path / "a.toml"), "--out", str(out))
    assert code == 0 and len(err) == 1 and err[0].startswith("warning: "), err
    assert "replace" in err[0] and str(out) in err[0]
    code, err = _cli(capsys, "run", str(tmp_path / "b.toml"), "--out", str(out), "--force")
    assert code == 0, err
    assert read_json(out / "config.json")["seed"] == 2


# ------------------------------------------------- 3. no write through a planted symlink
def test_a_symlink_at_a_temporary_name_is_never_written_through(tmp_path):
    out = tmp_path / "out"
    run_experiment(parse_config(SMALL), out)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    # the names an earlier pgfl used for its temporary files, predictable from the pid
    for name in ("summary.json", "curves.csv", "config.json", "figure.png"):
        (out / f".{name}.{os.getpid()}.tmp").symlink_to(victim)
    with pytest.raises(FileError, match="pgfl did not write"):
        run_experiment(parse_config(SMALL), out)
    run_experiment(parse_config(SMALL), out, force=True)
    assert victim.read_text() == "keep me"
    assert read_json(out / "summary.json")["experiment"] == "owned"
    # and the writers themselves: a new name every time, created exclusively
    target = tmp_path / "plain" / "summary.json"
    target.parent.mkdir()
    (target.parent / f".summary.json.{os.getpid()}.tmp").symlink_to(victim)
    write_json(target, {"a": 1})
    assert victim.read_text() == "keep me" and read_json(target) == {"a": 1}


def test_a_stage_replaced_by_a_symlink_is_refused(tmp_path):
    out = tmp_path / "out"
    run_experiment(parse_config(SMALL), out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / STAGE).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(FileError, match="symbolic link"):
        run_experiment(parse_config(SMALL), out, force=True)
    assert list(elsewhere.iterdir()) == []


# ------------------------------------------------- 4. a mistyped rerun destroys nothing
class _Interrupted:
    """A backend interrupted (Ctrl-C) before its first batch finishes."""

    def trajectories(self, plan, progress=None):
        raise KeyboardInterrupt
        yield  # pragma: no cover - a generator


class _Failing:
    def trajectories(self, plan, progress=None):
        raise RuntimeError("the engine broke")
        yield  # pragma: no cover - a generator


@pytest.mark.parametrize("backend", [_Interrupted, _Failing])
@pytest.mark.parametrize("seed", [5, 6])  # the same configuration, and an edited one
def test_an_interrupted_or_failed_rerun_keeps_the_earlier_results(tmp_path, backend, seed):
    out = tmp_path / "out"
    run_experiment(parse_config(SMALL), out)
    before = _snapshot(out)
    plan = prepare_experiment(parse_config({**SMALL, "seed": seed}), out, force=True)
    with pytest.raises((KeyboardInterrupt, RuntimeError)):
        run_plan(plan, backend=backend())
    after = {k: v for k, v in _snapshot(out).items() if not k.startswith(STAGE)}
    assert after == before  # results, config.json and marker: the earlier run's, unmixed


def test_a_finished_rerun_replaces_every_result_and_removes_the_stage(tmp_path):
    out = tmp_path / "out"
    sweep = {**SMALL, "curves": [{"label": f"mu={m}", "training": {"mu": m}}
                                 for m in (0.1, 0.2, 0.3)]}  # fmt: skip
    run_experiment(parse_config(sweep), out)
    run_experiment(parse_config(SMALL), out, force=True)
    assert read_json(out / "summary.json")["curves"][0]["label"] == "a"
    assert not (out / STAGE).exists() and not (out / LOCK_NAME).exists()
    assert set(read_json(out / MARKER)["files"]) == {
        p.name for p in out.iterdir() if p.name != MARKER
    }


def test_resume_is_bit_identical_from_the_stage(tmp_path):
    cfg = parse_config({**SMALL, "curves": [{"label": "a"}, {"label": "b", "training": {"L": 1}}]})
    full = run_experiment(cfg, tmp_path / "full")
    seen = []

    def interrupt_second_batch(labels, done, total):
        seen.append(labels)
        if len(set(seen)) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, tmp_path / "part", on_progress=interrupt_second_batch)
    assert sorted(p.name for p in (tmp_path / "part" / STAGE / "partial").iterdir()) == [
        "curve-000.npz"
    ]
    resumed = run_experiment(cfg, tmp_path / "part", resume=True)
    assert resumed["curves"] == full["curves"]
    for name in ("curves.csv", "config.json"):
        assert (tmp_path / "part" / name).read_bytes() == (tmp_path / "full" / name).read_bytes()


# ------------------------------------------------------------ 8. litter of killed runs
def test_litter_of_a_killed_run_is_cleaned_and_no_lock_file_stays(tmp_path):
    out = tmp_path / "out"
    run_experiment(parse_config(SMALL), out)
    assert not (out / LOCK_NAME).exists()  # a finished run leaves no lock file
    litter = [".figure.png.4242.tmp", ".summary.json.4242.tmp", ".curves.csv.abc123ef.tmp"]
    for name in litter:
        (out / name).write_bytes(b"half written")
    (out / LOCK_NAME).write_text("")  # a killed run's lock file (no process holds it)
    (out / STAGE / "partial").mkdir(parents=True)
    (out / STAGE / "partial" / ".curve-000.npz.4242.tmp.npz").write_bytes(b"half")
    run_experiment(parse_config(SMALL), out)
    listed = read_json(out / MARKER)["files"]
    assert sorted(p.name for p in out.iterdir()) == sorted([*listed, MARKER])


def test_the_lock_still_excludes_a_second_run(tmp_path):
    from pgfl.files import output_lock

    out = tmp_path / "out"
    out.mkdir()
    with output_lock(out), pytest.raises(FileError, match="in use by another pgfl run"):
        run_experiment(parse_config(SMALL), out)
    run_experiment(parse_config(SMALL), out)
    assert not (out / LOCK_NAME).exists()


# ---------------------------------------------- config edge cases at the output folder
def test_a_dangling_symlink_as_out_is_named(tmp_path, capsys):
    (tmp_path / "c.toml").write_text(TOML.format(seed=1), encoding="utf-8")
    link = tmp_path / "gone"
    link.symlink_to(tmp_path / "nowhere" / "x")
    code, err = _cli(capsys, "run", str(tmp_path / "c.toml"), "--out", str(link))
    assert code == 2 and len(err) == 1, err
    assert "broken symbolic link" in err[0] and "File exists" not in err[0]
    assert not (tmp_path / "nowhere").exists()


# ----------------------------------------------- issue 29 item 7: distinct default folders
def _pgfl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "pgfl.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)  # fmt: skip


def test_quick_results_have_their_own_default_folder(tmp_path):
    (tmp_path / "c.toml").write_text(TOML.format(seed=1) + "[quick]\niterations = 4\n")
    assert _pgfl("run", "c.toml", cwd=tmp_path).returncode == 0
    quick = _pgfl("run", "c.toml", "--quick", cwd=tmp_path)
    assert quick.returncode == 0, quick.stderr
    assert read_json(tmp_path / "runs" / "owned" / "summary.json")["iterations"] == 10
    assert read_json(tmp_path / "runs" / "owned-quick" / "summary.json")["iterations"] == 4
    assert "results in runs/owned-quick" in quick.stdout


def test_the_frontier_commands_default_to_distinct_folders():
    from pgfl.commands.common import default_folder

    assert default_folder("fig2", quick=False) == Path("runs/fig2")
    assert default_folder("fig2", quick=True) == Path("runs/fig2-quick")
    from pgfl.commands import privacy

    assert privacy.FRONTIER_FOLDER != "frontier"
    assert default_folder(privacy.FRONTIER_FOLDER, quick=False) != default_folder(
        "frontier", quick=False
    )


def test_results_of_pgfl_older_than_the_marker_are_foreign(tmp_path):
    """A folder without the marker is not pgfl's, whatever its file names say."""
    out = tmp_path / "out"
    run_experiment(parse_config(SMALL), out)
    (out / MARKER).unlink()
    with pytest.raises(FileError, match="pgfl did not write"):
        prepare_experiment(parse_config(SMALL), out)
    assert np.isfinite(run_experiment(parse_config(SMALL), out, force=True)["curves"][0][
        "centroid_msd_db"])  # fmt: skip
    shutil.rmtree(out)


def test_resume_does_not_replace_results_of_another_kind_of_run(tmp_path):
    from pgfl.folders import check_output, staged

    out = tmp_path / "out"
    with staged(
        check_output(out, digest="a graph-learning run's", what="a graph-learning run")
    ) as s:
        (s / "summary.json").write_text("{}")
    with pytest.raises(FileError, match="another configuration"):
        prepare_experiment(parse_config(SMALL), out, resume=True)
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "summary.json"]
