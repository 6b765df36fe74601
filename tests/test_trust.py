"""Faults that must never lose or silently mix results (each failed before its fix).

Edited data between an interrupted run and ``--resume``; two runs into one folder; an
earlier run's results mixed with a new ``config.json``; a half-written figure; a ``name``
that leaves the output folder; a curve with some diverged repetitions; Ray beside a
running cluster; a singular risk found after ``config.json`` was written.
"""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from pgfl.apps.runner import run_experiment, run_plan
from pgfl.commands.printing import print_summary
from pgfl.experiments.loader import parse_config
from pgfl.experiments.plan import prepare_experiment
from pgfl.experiments.results import curve_metrics, summarize_curve
from pgfl.files import LOCK_NAME, FileError, output_lock, read_json
from pgfl.validation import ConfigError

SMALL = {
    "name": "trust",
    "iterations": 12,
    "repetitions": 2,
    "seed": 5,
    "topology": {"kind": "ring", "P": 3},
    "data": {"K": 4, "N": 8},
    "training": {"L": 2, "mu": 0.3},
    "curves": [{"label": "a"}, {"label": "b", "training": {"mu": 0.2}}],
}


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _write_table(path, flip: bool) -> None:
    """A two-class table whose label follows column ``a`` (or its opposite, ``flip``)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(600)
    b = rng.standard_normal(600)
    y = ((a > 0) != flip).astype(int)
    lines = ["a,b,y", *(f"{x:.6f},{z:.6f},{t}" for x, z, t in zip(a, b, y, strict=True))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_resume_refuses_an_edited_data_file(tmp_path):
    data = tmp_path / "table.csv"
    _write_table(data, flip=False)
    raw = {
        "name": "csv",
        "iterations": 5,
        "topology": {"kind": "ring", "P": 2},
        "data": {
            "kind": "classification",
            "source": f"csv:{data}:y",
            "K": 3,
            "rows": 300,
            "test_size": 100,
        },
        "training": {"L": 2, "mu": 0.2},
    }
    out = tmp_path / "out"
    run_experiment(parse_config(raw), out)
    before = _snapshot(out)
    _write_table(data, flip=True)  # same shape, different content
    with pytest.raises(ConfigError, match=r"table\.csv changed since the interrupted run"):
        run_experiment(parse_config(raw), out, resume=True)
    assert _snapshot(out) == before  # refused before anything was written


def test_a_second_run_into_a_locked_folder_stops_naming_the_lock(tmp_path):
    out = tmp_path / "out"
    cfg = parse_config(SMALL)
    with output_lock(out):  # another run holds the folder
        with pytest.raises(FileError, match=LOCK_NAME.replace(".", r"\.")) as err:
            run_experiment(cfg, out)
        assert "in use by another pgfl run" in str(err.value)
        assert "\n" not in str(err.value)
        assert not (out / "config.json").exists()
    run_experiment(cfg, out)  # released: the folder is usable again
    assert (out / "summary.json").is_file()


def test_an_interrupted_rerun_leaves_the_earlier_results_unmixed(tmp_path):
    out = tmp_path / "out"
    run_experiment(parse_config(SMALL), out)
    assert all((out / f).exists() for f in ("summary.json", "curves.csv", "figure.png"))
    before = _snapshot(out)

    class Interrupted:
        def trajectories(self, plan, progress=None):
            raise KeyboardInterrupt
            yield  # pragma: no cover - a generator

    other = parse_config({**SMALL, "seed": 6})
    with pytest.raises(KeyboardInterrupt):
        run_plan(prepare_experiment(other, out, force=True), backend=Interrupted())
    # the earlier results, beside their own config.json: nothing of the new run among them
    assert read_json(out / "config.json")["seed"] == 5
    assert {k: v for k, v in _snapshot(out).items() if not k.startswith(".pgfl-run")} == before


def test_a_figure_is_written_atomically(tmp_path, monkeypatch):
    import matplotlib.figure

    from pgfl.plots import save_figure

    path = tmp_path / "figure.png"
    path.write_bytes(b"the earlier figure")

    def dies_half_way(self, fname, **kwargs):
        fname.write(b"\x89PNG half")  # into the file object savefig is given
        raise KeyboardInterrupt

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        save_figure(matplotlib.figure.Figure(), path)
    assert path.read_bytes() == b"the earlier figure"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.png"]  # no temporary left


@pytest.mark.parametrize("name", ["..", ".", "a/..", "../x"])
def test_name_cannot_leave_the_output_folder(name):
    with pytest.raises(ConfigError, match=r"^name must be"):
        parse_config({**SMALL, "name": name})


def test_the_cli_refuses_dot_dot_as_name_and_writes_nothing(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('name = ".."\niterations = 3\n', encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "pgfl.cli", "run", str(cfg)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2
    assert "name must be a folder name" in run.stderr
    assert list(work.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == [
        "cfg.toml",
        "work",
    ]


def _trajectory(msd: np.ndarray, diverged_at: np.ndarray) -> SimpleNamespace:
    """A one-curve trajectory with MSD ``[T, R]`` and each repetition's divergence."""
    T, R = msd.shape
    return SimpleNamespace(
        centroid_msd=msd[:, None, :],
        individual_msd=2 * msd[:, None, :],
        disagreement=msd[:, None, :] / 2,
        diverged_at=diverged_at[None, :],
        test_error=None,
    )


@pytest.mark.parametrize("bad", [[1], [0, 5], [2, 3, 4, 6, 7]])
def test_a_partly_diverged_curve_keeps_its_finite_repetitions(bad):
    rng = np.random.default_rng(len(bad))
    R, T = 8, 20
    msd = rng.uniform(0.01, 0.1, (T, R))
    at = np.full(R, -1)
    for r in bad:
        at[r] = 3 + r
        msd[at[r] - 1 :, r] = np.nan  # frozen at NaN from the round it diverged
    m = curve_metrics(_trajectory(msd, at), 0)
    finite = [r for r in range(R) if r not in bad]
    np.testing.assert_allclose(m["centroid_msd"], msd[:, finite].mean(axis=1), rtol=1e-12)
    entry = summarize_curve("x", m)
    assert entry["diverged"] is (2 * len(finite) < R)  # fewer than half stayed finite
    assert entry["diverged_repetitions"] == len(bad) and entry["finite_repetitions"] == len(finite)
    assert entry["diverged_at"] == 3 + min(bad)
    tail = msd[-2:, finite].mean()
    assert entry["centroid_msd_db"] == pytest.approx(10 * np.log10(tail), rel=1e-12)


def test_a_fully_diverged_curve_is_null():
    msd = np.full((10, 3), 0.1)
    msd[4:] = np.nan
    entry = summarize_curve("x", curve_metrics(_trajectory(msd, np.array([5, 5, 5])), 0))
    assert entry["diverged"] is True and entry["centroid_msd_db"] is None
    assert entry["diverged_repetitions"] == 3


def test_the_printed_summary_counts_divergences_aborts_and_clipping(capsys):
    summary = {
        "experiment": "x",
        "repetitions": 8,
        "curves": [
            {
                "label": "part",
                "centroid_msd_db": -20.0,
                "diverged": False,
                "diverged_at": 7,
                "diverged_repetitions": 2,
                "secure_aggregation": {
                    "aborted_unit_rounds": 3,
                    "threshold": 4,
                    "clipped_messages": 11,
                    "clip": 2.0,
                },
            }
        ],
    }
    print_summary(summary)
    text = " ".join(capsys.readouterr().out.split())
    assert "2 of 8 repetitions diverged" in text and "the other 6" in text
    assert "aborted in 3 unit-rounds" in text and "t=4" in text
    assert "11 client messages clipped" in text


def test_the_printed_faults_come_from_any_record_a_scheme_wrote(capsys):
    # the records are read by their fields, whatever the scheme calls them: a new scheme's
    # record (own name) and a distributed-DP one, each with its own count of clipping
    records = {
        "new_protocol": {"aborted_unit_rounds": 5, "threshold": 3, "log": []},
        "distributed_dp": {"clipped_or_wrapped": 7, "clip": 0.5, "bits": 12},
    }
    curves = [{"label": name, "centroid_msd_db": -20.0, name: r} for name, r in records.items()]
    print_summary({"experiment": "x", "repetitions": 1, "curves": curves})
    text = " ".join(capsys.readouterr().out.split())
    assert "curve new_protocol: secure aggregation aborted in 5 unit-rounds" in text
    assert "(fewer than t=3 clients survived" in text
    assert "curve distributed_dp: 7 client messages clipped to norm 0.5" in text
    assert "modulus 2^12" in text and "clipped_messages" not in text


def test_a_resumed_run_keeps_iota2_and_the_local_phase(tmp_path):
    cfg = parse_config({**SMALL, "run": {"keep_partial": True}})
    first = run_experiment(cfg, tmp_path)
    again = run_experiment(cfg, tmp_path, resume=True)  # every curve from partial files
    assert first["iota2"] and again["iota2"] == first["iota2"]
    assert again["engine"] == first["engine"]
    assert again["curves"] == first["curves"]


def test_a_singular_risk_is_refused_before_anything_is_written(tmp_path):
    raw = {**SMALL, "data": {"K": 4, "N": 8, "eigenvalues": [0.0, 0.0]}}
    raw["training"] = {**SMALL["training"], "rho": 0.0}
    with pytest.raises(ConfigError, match=r"^training\.rho = 0: .*no unique minimizer"):
        prepare_experiment(parse_config(raw), tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.ray
def test_ray_starts_its_own_cluster_beside_a_ray_address(tmp_path):
    pytest.importorskip("ray")
    code = (
        "from pgfl.backends.session import ray_session\n"
        "ray = ray_session(workers=1)\n"
        "print(int(ray.cluster_resources()['CPU']))\n"
        "ray.shutdown()\n"
    )
    # a RAY_ADDRESS nothing listens on: joining it fails, a local Ray of its own does not
    env = {**os.environ, "RAY_ADDRESS": "127.0.0.1:9", "RAY_USAGE_STATS_ENABLED": "0"}
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=110
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "1"


def test_summary_entries_of_older_partial_files_still_read():
    # a partial file written before diverged_repetitions existed: the old meaning
    m = {
        "centroid_msd": np.full(10, np.nan),
        "individual_msd": np.full(10, np.nan),
        "disagreement": np.full(10, np.nan),
        "diverged_at": np.array(4),
        "privacy": np.array(json.dumps({})),
    }
    entry = summarize_curve("old", m)
    assert entry["diverged"] is True and entry["diverged_repetitions"] == 1
