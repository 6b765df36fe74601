"""``pgfl reproduce`` with several presets (or ``all``) in one command.

The presets of one command give the files each gives alone; every name and option is
checked before anything runs (one line, exit 2, nothing written); ``all`` is the set the
help and the README name; ``--list`` reads no experiment module.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pgfl

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(Path(pgfl.__file__).resolve().parents[1])}
#: Quick and of three kinds: two GFL presets and an accounting-only one.
SEVERAL = ["diffusion", "fig2", "muffliato"]


def pgfl_cli(*args: str, cwd: Path | None = None, columns: int | None = None):
    env = dict(ENV) if columns is None else {**ENV, "COLUMNS": str(columns)}
    return subprocess.run(
        [sys.executable, "-m", "pgfl.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        env=env,
    )


def _without_elapsed(value):
    """``value`` with every ``elapsed_s`` dropped (wall time differs from run to run)."""
    if isinstance(value, dict):
        return {k: _without_elapsed(v) for k, v in value.items() if k != "elapsed_s"}
    if isinstance(value, list):
        return [_without_elapsed(v) for v in value]
    return value


def _summary(folder: Path) -> dict:
    return _without_elapsed(json.loads((folder / "summary.json").read_text(encoding="utf-8")))


def test_several_presets_in_one_command_give_what_each_gives_alone(tmp_path):
    for name in SEVERAL:
        alone = pgfl_cli("reproduce", name, "--quick", "--out", str(tmp_path / "alone" / name))
        assert alone.returncode == 0, alone.stderr
    for jobs in ("1", "2"):  # one after another in this process; two worker processes
        out = tmp_path / f"jobs{jobs}"
        together = pgfl_cli("reproduce", *SEVERAL, "--quick", "--out", str(out), "--json",
                            "--jobs", jobs)  # fmt: skip
        assert together.returncode == 0, together.stderr
        printed = json.loads(together.stdout)  # --json with several presets: one list
        assert isinstance(printed, list) and len(printed) == len(SEVERAL)
        assert sorted(p.name for p in out.iterdir()) == sorted(SEVERAL)
        for name, summary in zip(SEVERAL, printed, strict=True):
            mine, alone = out / name, tmp_path / "alone" / name
            assert _summary(mine) == _summary(alone), (jobs, name)
            assert _without_elapsed(summary) == _summary(mine), (jobs, name)  # in order
            for csv in sorted(p.name for p in alone.glob("*.csv")):
                assert (mine / csv).read_bytes() == (alone / csv).read_bytes(), (jobs, csv)


def test_two_jobs_print_each_summary_in_order(tmp_path):
    result = pgfl_cli("reproduce", "muffliato", "diffusion", "--quick", "--jobs", "2",
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    folders = [line.split(":")[0] for line in result.stdout.splitlines()
               if line.startswith("results in ")]  # fmt: skip
    assert folders == ["results in runs/muffliato-quick", "results in runs/diffusion-quick"]


def test_several_presets_without_out_write_runs_name_quick(tmp_path):
    result = pgfl_cli("reproduce", "diffusion", "muffliato", "--quick", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "diffusion-quick",
        "muffliato-quick",
    ]  # --quick: a folder of its own beside the full run's (runs/NAME)
    assert result.stdout.count("results in runs/") == 2


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["diffusion", "fig99", "fig2"], ["preset must be one of", "'fig99'"]),
        (["diffusion", "muffliato", "--resume"], ["--resume", "'muffliato'"]),
        (["diffusion", "fig2", "--data", "digits"], ["--data", "'diffusion'"]),
        (["fig2", "diffusion", "--print-config"], ["--print-config", "one preset"]),
        (["diffusion", "fig2", "diffusion"], ["'diffusion' named twice"]),
        (["all", "fig3"], ["'fig3' named twice"]),
        (["diffusion", "fig2", "--seed", "-1"], ["seed (--seed)", "-1"]),
        (["diffusion", "fig2", "--jobs", "0"], ["--jobs", "got 0"]),
        (["diffusion", "fig2", "--jobs", "2", "--backend", "ray"], ["--jobs", "ray"]),
    ],
)
def test_a_bad_name_or_option_among_several_writes_nothing(tmp_path, args, needles):
    work = tmp_path / "work"
    work.mkdir()
    for out in ([], ["--out", str(tmp_path / "o")]):
        result = pgfl_cli("reproduce", *args, "--quick", *out, cwd=work)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert all(n in lines[0] for n in needles), lines[0]
        assert result.stdout == ""
        assert list(work.iterdir()) == [] and not (tmp_path / "o").exists()


def test_a_folder_in_the_way_of_a_later_preset_stops_the_first_too(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "muffliato").write_text("a file, not a folder", encoding="utf-8")
    out = str(tmp_path / "o")
    result = pgfl_cli("reproduce", "diffusion", "muffliato", "--quick", "--out", out)
    assert result.returncode == 2 and "muffliato" in result.stderr, result.stderr
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["muffliato"]


def _documented_all() -> tuple[list[str], list[str]]:
    """The presets ``all`` runs, as the help and as the README say."""
    help_text = " ".join(pgfl_cli("reproduce", "--help", columns=400).stdout.split())
    said = re.search(r"'all': the papers' GFL figures ([\w, -]+?)\.", help_text)
    assert said, help_text
    in_help = [n.strip() for n in said.group(1).split(",")]
    readme = " ".join(ROOT.joinpath("README.md").read_text(encoding="utf-8").split())
    said = re.search(r"`pgfl reproduce all` runs the papers' figures \(([^)]*)\)", readme)
    assert said, "README: no sentence on `pgfl reproduce all`"
    return in_help, re.findall(r"`([\w-]+)`", said.group(1))


def test_all_is_the_documented_set():
    in_help, in_readme = _documented_all()
    assert in_help == in_readme
    assert {"fig2", "fig7", "hybrid", "diffusion"} <= set(in_help)
    # --print-config takes one preset: the refusal names what `all` stands for, in order
    result = pgfl_cli("reproduce", "all", "--print-config")
    assert result.returncode == 2, result.stderr
    said = re.search(r"got (\d+) \(([^)]*)\)", result.stderr)
    assert said, result.stderr
    assert said.group(2).split(", ") == in_help and int(said.group(1)) == len(in_help)


def test_list_reads_no_experiment_module():
    """``--list`` takes the names and titles from the catalog, not the experiments."""
    code = (
        "import sys; from pgfl.cli import main\n"
        "try:\n    main(['reproduce', '--list'])\nexcept SystemExit:\n    pass\n"
        "heavy = ['pgfl.apps.frontier', 'pgfl.experiments.muffliato',\n"
        "         'pgfl.graphlearn.presets', 'pgfl.experiments.presets', 'scipy',\n"
        "         'dp_accounting', 'numba']\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "[]"
    assert "frontier-adversary" in result.stdout.split()
