"""A corpus of bad inputs, each through the real CLI: one line, exit 2, nothing written.

Every case runs ``python -m pgfl.cli`` in a subprocess inside a fresh folder that holds
the case's input files and, for the ``existing`` variants, the results of an earlier good
run (``config.json``, ``partial/``, ``summary.json``, ...). The whole folder is
snapshotted byte for byte before and after: a bad input must leave every file as it was
and create none. Internal errors (exit 1) and the resume of a truncated partial file are
checked at the end. Nothing depends on the terminal width or on the length of paths:
the cases use short relative paths and only the stderr line (never wrapped) is read.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pgfl.apps.runner
import pgfl.backends
import pgfl.cli
from pgfl.data.avazu import write_synthetic_avazu

GOOD = """name = "cli"
iterations = 20
repetitions = 2
[topology]
kind = "ring"
P = 3
[data]
K = 5
N = 6
[training]
L = 2
[privacy]
server_variance = 0.01
[[curves]]
label = "none"
[[curves]]
label = "gh"
privacy = { server_noise = "graph_homomorphic" }
[[curves]]
label = "small_L"
training = { L = 1 }
"""

GRAPHLEARN = '[data]\nkind = "files"\nfiles = ["c0.csv", "{file}"]\n[algorithm]\nrounds = 2\n'


def _classification(source: str) -> str:
    return (
        'name = "cls"\niterations = 5\n[topology]\nkind = "ring"\nP = 2\n'
        f'[data]\nkind = "classification"\nsource = "{source}"\nK = 2\nrows = 60\n'
        "test_size = 10\n[training]\nL = 1\n"
    )


def _with(extra: dict[str, str]) -> str:
    """GOOD with keys added to its tables (``{"privacy": "target_epsilon = 1.0"}``)."""
    text = GOOD
    for table, lines in extra.items():
        text = text.replace(f"[{table}]\n", f"[{table}]\n{lines}\n", 1)
    return text


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "pgfl.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) under ``folder``, by relative path."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


def _inputs(folder: Path) -> None:
    """The input files every case may refer to (small, written fresh per case)."""
    (folder / "good.toml").write_text(GOOD, encoding="utf-8")
    (folder / "afile").write_text("I am a file\n", encoding="utf-8")
    (folder / "adir").mkdir()
    rng = np.random.default_rng(0)
    np.savetxt(folder / "c0.csv", rng.standard_normal((20, 5)), delimiter=",")
    np.savetxt(folder / "c1.csv", rng.standard_normal((20, 5)), delimiter=",")
    (folder / "gl.toml").write_text(GRAPHLEARN.replace("{file}", "c1.csv"), encoding="utf-8")
    # tabular data: 200 rows, then broken variants
    rows = "".join(f"{i % 7},{(i * 3) % 5},{i % 2}\n" for i in range(200))
    body = "a,b,y\n" + rows
    packed = gzip.compress(body.encode())
    (folder / "trunc.csv.gz").write_bytes(packed[: len(packed) // 2])
    (folder / "latin.csv").write_bytes(("a,b,y\n1,caf\xe9,0\n" + rows).encode("latin-1"))
    (folder / "extra.csv").write_text("a,b,y\n1,2,0\n3,4,1,5\n" + rows, encoding="utf-8")
    write_synthetic_avazu(folder / "av.csv", 300, seed=1)
    packed = gzip.compress((folder / "av.csv").read_bytes())
    (folder / "av.csv.gz").write_bytes(packed[: len(packed) // 2])
    (folder / "av.csv").unlink()
    (folder / "latin.toml").write_bytes(GOOD.replace('"cli"', '"caf\xe9"').encode("latin-1"))
    # graph-learning signal files
    np.save(folder / "pickled.npy", np.array([{"a": 1}, None], dtype=object))
    (folder / "garbage.npy").write_bytes(b"\x93NUMPY garbage that is not an array")
    good_npy = folder / "whole.npy"
    np.save(good_npy, rng.standard_normal((20, 5)))
    (folder / "trunc.npy").write_bytes(good_npy.read_bytes()[:200])
    good_npy.unlink()
    (folder / "text.csv").write_text("1,2,3,4,five\n1,2,3,4,5\n", encoding="utf-8")
    (folder / "ragged.csv").write_text("1,2,3,4,5\n1,2,3\n", encoding="utf-8")
    (folder / "latin_signals.csv").write_bytes("1,2,3,4,5\n1,2,3,4,\xe9\n".encode("latin-1"))
    (folder / "empty.csv").write_text("", encoding="utf-8")
    (folder / "blank.csv").write_text("\n\n\n", encoding="utf-8")
    np.save(folder / "strings.npy", np.array([["a", "b"], ["c", "d"]]))
    np.savetxt(folder / "c3nodes.csv", rng.standard_normal((20, 3)), delimiter=",")
    for name, source in {
        "trunc_csv": "csv:trunc.csv.gz:y",
        "latin_csv": "csv:latin.csv:y",
        "extra_csv": "csv:extra.csv:y",
        "trunc_avazu": "av.csv.gz",
        "missing_csv": "csv:missing.csv:y",
    }.items():
        (folder / f"{name}.toml").write_text(_classification(source), encoding="utf-8")
    for name, file in {
        "gl_pickled": "pickled.npy",
        "gl_garbage": "garbage.npy",
        "gl_trunc": "trunc.npy",
        "gl_text": "text.csv",
        "gl_ragged": "ragged.csv",
        "gl_latin": "latin_signals.csv",
        "gl_empty": "empty.csv",
        "gl_blank": "blank.csv",
        "gl_strings": "strings.npy",
        "gl_nodes": "c3nodes.csv",
        "gl_missing": "nope.csv",
    }.items():
        text = GRAPHLEARN.replace("{file}", file)
        (folder / f"{name}.toml").write_text(text, encoding="utf-8")
    configs = {
        "eps_no_clip": _with(
            {"privacy": 'target_epsilon = 1.0\nserver_noise = "graph_homomorphic"'}
        ),
        "eps_no_link": _with({"privacy": "target_epsilon = 1.0"}).replace(
            'privacy = { server_noise = "graph_homomorphic" }', ""
        ),
        "gh_no_self_weights": GOOD.replace(
            'kind = "ring"',
            'kind = "matrix"\nmatrix = [[0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]]',
        ),
        "never_connected": GOOD.replace(
            'kind = "ring"\nP = 3', 'kind = "erdos_renyi"\nP = 40\nprobability = 0.001'
        ),
        "secagg_modulus": _with(
            {
                "privacy": 'client_noise = "secure_aggregation"\nsecagg_modulus_bits = 8\n'
                "secagg_frac_bits = 4\nsecagg_clip = 7.0"
            }
        ),
        "other_seed": GOOD.replace('name = "cli"', 'name = "cli"\nseed = 5'),
    }
    for name, text in configs.items():
        (folder / f"{name}.toml").write_text(text, encoding="utf-8")


EPS = ["privacy", "epsilon", "--mu", "0.7", "--clip", "2", "--variance", "0.1"]
EPS += ["--iterations", "10", "--dim", "2"]

# (id, args, needles in the error line): the out folder, when there is one, is "out".
CASES = [
    # 1. file-system errors
    ("out-is-a-file", ["run", "good.toml", "--out", "afile"], ["afile", "existing file"]),
    ("out-under-a-file", ["run", "good.toml", "--out", "afile/sub"], ["afile", "is a file"]),
    ("preset-out-is-a-file", ["reproduce", "fig2", "--out", "afile"], ["afile", "existing file"]),
    (
        "graphlearn-run-out-is-a-file",
        ["graphlearn", "run", "gl.toml", "--out", "afile"],
        ["afile", "existing file"],
    ),
    (
        "graphlearn-preset-out-under-a-file",
        ["reproduce", "graphlearn-weights", "--quick", "--out", "afile/w"],
        ["afile", "is a file"],
    ),
    ("epsilon-plot-is-a-folder", [*EPS, "--plot", "adir"], ["--plot", "adir", "is a folder"]),
    (
        "config-plot-is-a-folder",
        ["privacy", "config", "fig2", "--quick", "--plot", "adir"],
        ["--plot", "adir", "is a folder"],
    ),
    ("plot-under-a-file", [*EPS, "--plot", "afile/e.png"], ["afile", "is a file"]),
    ("plot-unknown-format", [*EPS, "--plot", "e.txt"], ["e.txt", "unknown image format 'txt'"]),
    # 4. data files that cannot be read
    ("truncated-gzip-csv", ["run", "trunc_csv.toml"], ["trunc.csv.gz", "truncated"]),
    (
        "truncated-gzip-csv-by-option",
        ["reproduce", "fig7", "--quick", "--data", "csv:trunc.csv.gz:y", "--out", "out"],
        ["trunc.csv.gz", "truncated"],
    ),
    ("non-utf8-csv", ["run", "latin_csv.toml"], ["latin.csv", "not UTF-8"]),
    ("csv-row-with-extra-fields", ["run", "extra_csv.toml"], ["extra.csv", "line 3 has 4 fields"]),
    ("truncated-gzip-avazu", ["run", "trunc_avazu.toml"], ["av.csv.gz", "truncated"]),
    ("missing-data-file", ["run", "missing_csv.toml"], ["missing.csv", "not found"]),
    ("non-utf8-config", ["run", "latin.toml"], ["latin.toml", "not UTF-8"]),
    ("pickled-npy", ["graphlearn", "run", "gl_pickled.toml"], ["pickled.npy", "pickled"]),
    ("malformed-npy", ["graphlearn", "run", "gl_garbage.toml"], ["garbage.npy"]),
    ("truncated-npy", ["graphlearn", "run", "gl_trunc.toml"], ["trunc.npy"]),
    ("string-npy", ["graphlearn", "run", "gl_strings.toml"], ["strings.npy", "real numbers"]),
    ("non-numeric-csv", ["graphlearn", "run", "gl_text.toml"], ["text.csv", "five"]),
    ("ragged-csv", ["graphlearn", "run", "gl_ragged.toml"], ["ragged.csv", "columns"]),
    ("non-utf8-signals", ["graphlearn", "run", "gl_latin.toml"], ["latin_signals.csv", "UTF-8"]),
    ("node-count-differs", ["graphlearn", "run", "gl_nodes.toml"], ["c3nodes.csv", "c0.csv"]),
    ("missing-signal-file", ["graphlearn", "run", "gl_missing.toml"], ["nope.csv", "not found"]),
    # 8. an empty signal file: one line, no numpy warning before it
    ("empty-signal-file", ["graphlearn", "run", "gl_empty.toml"], ["empty.csv", "empty"]),
    ("blank-signal-file", ["graphlearn", "run", "gl_blank.toml"], ["blank.csv", "no signals"]),
    # 6. found only when the run is prepared (network, calibration, engine checks)
    ("target-eps-without-clip", ["run", "eps_no_clip.toml"], ["training.clip_norm"]),
    ("target-eps-without-noise", ["run", "eps_no_link.toml"], ["privatized link"]),
    ("gh-without-self-weights", ["run", "gh_no_self_weights.toml"], ["a_pp > 0"]),
    ("never-connected", ["run", "never_connected.toml"], ["no connected graph"]),
    (
        "secagg-modulus-too-small",
        ["run", "secagg_modulus.toml"],
        ["privacy.secagg_modulus_bits", "got 8"],
    ),
    # 7. CLI options
    ("bench-negative-seconds", ["bench", "--seconds", "-1"], ["--seconds", "(0, inf)", "-1"]),
    ("bench-nan-seconds", ["bench", "--seconds", "nan"], ["--seconds", "got nan"]),
    ("seed-not-a-number", ["reproduce", "fig2", "--seed", "abc"], ["--seed", "'abc'"]),
    ("graphlearn-seed-not-a-number", ["graphlearn", "run", "gl.toml", "--seed", "x1"], ["'x1'"]),
    ("negative-seed", ["reproduce", "fig2", "--seed", "-1"], ["--seed", "[0, inf]", "-1"]),
    ("graphlearn-negative-seed", ["graphlearn", "run", "gl.toml", "--seed", "-2"], ["-2"]),
    (
        "iterations-not-a-number",
        ["privacy", "epsilon", "--mu", "1", "--dim", "2", "--iterations", "1e"],
        ["1e"],
    ),
    ("epsilon-rows-too-small", [*EPS, "--rows", "1"], ["--rows", "[2, inf]", "got 1"]),
    (
        "option-not-for-graphlearn-presets",
        ["reproduce", "graphlearn-weights", "--resume"],
        ["--resume", "graphlearn-weights"],
    ),
]

#: One case of each kind that fails only when the run is prepared (a data file, the config
#: file, a calibration, an engine check, secure aggregation, graph learning), run again
#: against an existing results folder, which must stay byte for byte as it was.
WRITERS = {
    "truncated-gzip-csv",
    "non-utf8-config",
    "target-eps-without-clip",
    "gh-without-self-weights",
    "secagg-modulus-too-small",
    "pickled-npy",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """An earlier good run's results folder (with its partial files: --keep-partial)."""
    folder = tmp_path_factory.mktemp("good")
    (folder / "good.toml").write_text(GOOD, encoding="utf-8")
    done = run_cli("run", "good.toml", "--out", "out", "--keep-partial", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert len(list((folder / "out" / "partial").iterdir())) == 3
    return folder / "out"


def _check_one_line_and_nothing_written(folder: Path, args: list[str], needles: list[str]):
    _inputs(folder)
    before = snapshot(folder)
    result = run_cli(*args, cwd=folder)
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert snapshot(folder) == before


def _out_args(args: list[str]) -> list[str]:
    """Write into "out" (the results folder) if the case does not name an output."""
    if "--out" in args or args[0] not in ("run", "reproduce", "graphlearn"):
        return args
    return [*args, "--out", "out"]


@pytest.mark.parametrize(("args", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, needles):
    _check_one_line_and_nothing_written(tmp_path, _out_args(args), needles)


EXISTING = [
    pytest.param(_out_args(args), needles, id=name)
    for name, args, needles in CASES
    if name in WRITERS
]


@pytest.mark.parametrize(("args", "needles"), EXISTING)
def test_bad_input_leaves_an_existing_results_folder_unchanged(tmp_path, results, args, needles):
    shutil.copytree(results, tmp_path / "out")
    _check_one_line_and_nothing_written(tmp_path, args, needles)


def test_resume_with_another_configuration_leaves_the_results_unchanged(tmp_path, results):
    shutil.copytree(results, tmp_path / "out")
    args = ["run", "other_seed.toml", "--out", "out", "--resume"]
    _check_one_line_and_nothing_written(tmp_path, args, ["config.json", "different"])


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write read-only folders"
)
def test_out_in_a_read_only_folder(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        _check_one_line_and_nothing_written(
            tmp_path, ["run", "good.toml", "--out", "locked/out"], ["locked", "not writable"]
        )
    finally:
        locked.chmod(0o755)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "good.toml", "--out", "locked/out"],
        ["graphlearn", "run", "gl.toml", "--out", "locked/out"],
        [*EPS, "--plot", "locked/e.png"],
    ],
    ids=["run", "graphlearn-run", "plot"],
)
def test_read_only_folder_is_refused_before_any_work(tmp_path, monkeypatch, capsys, args):
    """Whoever runs the tests (root ignores permissions): the folder reports read-only."""
    _inputs(tmp_path)
    (tmp_path / "locked").mkdir()
    real_access = os.access
    locked = (tmp_path / "locked").resolve()
    monkeypatch.setattr(
        os, "access", lambda p, mode: Path(p).resolve() != locked and real_access(p, mode)
    )
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(SystemExit) as stop:
        pgfl.cli.main(args)
    err = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and len(err) == 1, err
    assert "locked" in err[0] and "not writable" in err[0]
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------------------------------
# Internal errors: exit 1, a hint to report, the traceback only on request.
# ---------------------------------------------------------------------------------------


def _crash(*args, **kwargs):
    return 1 / 0


@pytest.mark.parametrize("error", [ZeroDivisionError, ValueError, EOFError])
def test_an_internal_error_exits_1_with_a_report_hint(tmp_path, monkeypatch, capsys, error):
    """Not every ValueError is bad input; an EOFError is not an interrupt."""

    def crash(*args, **kwargs):
        raise error("something inside broke")

    (tmp_path / "good.toml").write_text(GOOD, encoding="utf-8")
    monkeypatch.setattr(pgfl.backends.local, "simulate", crash)
    monkeypatch.delenv("PGFL_DEBUG", raising=False)
    with pytest.raises(SystemExit) as stop:
        pgfl.cli.main(["run", str(tmp_path / "good.toml"), "--out", str(tmp_path / "o")])
    assert stop.value.code == 1
    err = capsys.readouterr().err.splitlines()
    if error is EOFError:  # the CLI framework writes an empty line before it re-raises
        err = [line for line in err if line]
    assert len(err) == 1, err
    assert err[0].startswith("error: internal error: ") and error.__name__ in err[0]
    assert "please report" in err[0] and "PGFL_DEBUG=1" in err[0] and "--debug" in err[0]


@pytest.mark.parametrize("how", ["env", "option"])
def test_debug_shows_the_traceback_of_an_internal_error(tmp_path, monkeypatch, capsys, how):
    (tmp_path / "good.toml").write_text(GOOD, encoding="utf-8")
    monkeypatch.setattr(pgfl.backends.local, "simulate", _crash)
    args = ["run", str(tmp_path / "good.toml"), "--out", str(tmp_path / "o")]
    if how == "env":
        monkeypatch.setenv("PGFL_DEBUG", "1")
    else:
        monkeypatch.delenv("PGFL_DEBUG", raising=False)
        args = ["--debug", *args]
    with pytest.raises(SystemExit) as stop:
        pgfl.cli.main(args)
    err = capsys.readouterr().err
    assert stop.value.code == 1
    assert "Traceback (most recent call last)" in err and "in _crash" in err
    assert err.splitlines()[-1].startswith("error: internal error: ZeroDivisionError")


def test_bad_input_stays_one_line_with_debug(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PGFL_DEBUG", "1")
    with pytest.raises(SystemExit) as stop:
        pgfl.cli.main(["bench", "--seconds", "0"])
    err = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and err == [
        "error: --seconds must be a real number in (0, inf); got 0.0"
    ]


def test_an_interrupt_keeps_finished_batches_and_says_how_many(tmp_path, monkeypatch, capsys):
    """Ctrl-C during the second batch: exit 130, the first batch's 2 curves are on disk."""
    (tmp_path / "good.toml").write_text(GOOD, encoding="utf-8")
    real = pgfl.backends.local.simulate
    calls = []

    def interrupt_the_second_batch(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(pgfl.backends.local, "simulate", interrupt_the_second_batch)
    out = tmp_path / "o"
    with pytest.raises(SystemExit) as stop:
        pgfl.cli.main(["run", str(tmp_path / "good.toml"), "--out", str(out)])
    assert stop.value.code == 130
    err = capsys.readouterr().err.splitlines()
    assert err == [f"interrupted: 2 of 3 curves saved in {out}; rerun with --resume to continue"]
    kept = out / ".pgfl-run" / "partial"  # the run's staging folder (pgfl.folders.STAGE)
    assert sorted(p.name for p in kept.iterdir()) == ["curve-000.npz", "curve-001.npz"]


# ---------------------------------------------------------------------------------------
# 3. Resume with a truncated partial file
# ---------------------------------------------------------------------------------------


def test_resume_recomputes_a_truncated_partial_file(tmp_path, results):
    shutil.copytree(results, tmp_path / "out")
    (tmp_path / "good.toml").write_text(GOOD, encoding="utf-8")
    damaged = tmp_path / "out" / "partial" / "curve-001.npz"
    damaged.write_bytes(damaged.read_bytes()[:300])
    intact = results / "partial" / "curve-000.npz"
    resumed = run_cli("run", "good.toml", "--out", "out", "--resume", "--json", "--keep-partial",
                      cwd=tmp_path)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    warning = resumed.stderr.splitlines()
    assert len(warning) == 1 and warning[0].startswith("warning: "), resumed.stderr
    assert "curve-001.npz" in warning[0] and "recomputing curve 'gh'" in warning[0]
    expected = json.loads((results / "summary.json").read_text(encoding="utf-8"))["curves"]
    assert json.loads(resumed.stdout)["curves"] == expected
    # the damaged file was replaced by a readable one; its batch mate holds the same arrays
    with np.load(damaged) as f:
        assert str(f["label"]) == "gh"
    with np.load(tmp_path / "out" / "partial" / "curve-000.npz") as f, np.load(intact) as g:
        assert f.files == g.files
        for key in f.files:
            assert np.array_equal(f[key], g[key]), key


def test_a_stale_partial_file_of_another_configuration_is_not_resumed(tmp_path, results):
    """Partial files carry the configuration's fingerprint; a foreign one is recomputed."""
    shutil.copytree(results, tmp_path / "out")
    other = tmp_path / "other"
    (tmp_path / "other.toml").write_text(GOOD.replace('name = "cli"', 'name = "cli"\nseed = 9'))
    done = run_cli("run", "other.toml", "--out", "other", "--keep-partial", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # plant the other configuration's curve 0 in the first run's folder, then resume it
    shutil.copy(other / "partial" / "curve-000.npz", tmp_path / "out" / "partial")
    (tmp_path / "good.toml").write_text(GOOD, encoding="utf-8")
    resumed = run_cli("run", "good.toml", "--out", "out", "--resume", "--json", cwd=tmp_path)
    assert resumed.returncode == 0 and resumed.stderr == "", resumed.stderr
    expected = json.loads((results / "summary.json").read_text(encoding="utf-8"))["curves"]
    assert json.loads(resumed.stdout)["curves"] == expected


def test_pickle_is_never_loaded_from_a_partial_file(tmp_path, results):
    """A partial file holding a pickled object is unreadable data, not code to run."""
    shutil.copytree(results, tmp_path / "out")
    (tmp_path / "good.toml").write_text(GOOD, encoding="utf-8")
    path = tmp_path / "out" / "partial" / "curve-002.npz"
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["centroid_msd"] = np.array([pickle.dumps(object)], dtype=object)
    np.savez(path, **arrays)
    resumed = run_cli("run", "good.toml", "--out", "out", "--resume", "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "curve-002.npz" in resumed.stderr and "recomputing curve 'small_L'" in resumed.stderr
    expected = json.loads((results / "summary.json").read_text(encoding="utf-8"))["curves"]
    assert json.loads(resumed.stdout)["curves"] == expected
