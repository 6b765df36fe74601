import json

import numpy as np
import pytest

from pgfl.apps.runner import run_experiment
from pgfl.experiments.loader import parse_config
from pgfl.files import read_csv, read_json
from pgfl.folders import STAGE
from pgfl.validation import ConfigError

RAW = {
    "name": "tiny",
    "iterations": 30,
    "repetitions": 2,
    "seed": 3,
    "topology": {"kind": "ring", "P": 4},
    "data": {"K": 6, "N": 10},
    "training": {"L": 3, "mu": 0.5},
    "privacy": {"server_variance": 0.05},
    "plot": ["centroid_msd_db", "individual_msd_db"],
    "curves": [
        {"label": "none"},
        {"label": "graph_homomorphic", "privacy": {"server_noise": "graph_homomorphic"}},
        {"label": "small_L", "training": {"L": 2}},
        {"label": "blowup", "training": {"L": 2, "mu": 80.0}},
    ],
}


def test_outputs_follow_the_summary_contract(tmp_path):
    summary = run_experiment(parse_config(RAW), tmp_path)
    on_disk = read_json(tmp_path / "summary.json")
    assert on_disk["curves"] == json.loads(json.dumps(summary["curves"]))
    assert (
        on_disk["experiment"] == "tiny"
        and on_disk["iterations"] == 30
        and on_disk["repetitions"] == 2
    )
    for c in on_disk["curves"]:
        assert set(c) >= {
            "label",
            "centroid_msd_db",
            "individual_msd_db",
            "disagreement_db",
            "diverged",
        }
    by = {c["label"]: c for c in on_disk["curves"]}
    assert by["blowup"]["diverged"] and by["blowup"]["centroid_msd_db"] is None
    assert not by["none"]["diverged"] and isinstance(by["none"]["centroid_msd_db"], float)
    rows = read_csv(tmp_path / "curves.csv")
    assert len(rows) == 4 * 30
    # the summary's steady state is the dB of the mean of the last 10% (3 iterations)
    lin = [10 ** (float(r["centroid_msd_db"]) / 10) for r in rows if r["label"] == "none"][-3:]
    assert by["none"]["centroid_msd_db"] == pytest.approx(10 * np.log10(np.mean(lin)), abs=1e-9)
    assert (tmp_path / "figure.png").stat().st_size > 10_000


def test_interrupted_run_keeps_finished_curves_and_resume_is_identical(tmp_path):
    cfg = parse_config(RAW)
    full = run_experiment(cfg, tmp_path / "full")

    calls = {"batches": set()}

    def interrupt_second_batch(labels, done, total):
        calls["batches"].add(labels)
        if len(calls["batches"]) == 2:  # at its first progress (compiled calls: 64 rounds)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, tmp_path / "part", on_progress=interrupt_second_batch)
    saved = sorted(p.name for p in (tmp_path / "part" / STAGE / "partial").glob("curve-*.npz"))
    assert saved == ["curve-000.npz", "curve-001.npz"]  # the first batch finished

    seen = []
    resumed = run_experiment(
        cfg, tmp_path / "part", resume=True, on_progress=lambda l, d, t: seen.append(l)
    )
    assert set(seen) == {"small_L, blowup"}  # only the unfinished batch ran again
    for a, b in zip(full["curves"], resumed["curves"], strict=True):
        assert a == b
    # finished: --resume has nothing left to continue, the partial files are gone
    assert not (tmp_path / "part" / "partial").exists()
    assert not (tmp_path / "part" / STAGE).exists()
    assert not (tmp_path / "full" / "partial").exists()


def test_keep_partial_keeps_the_partial_files_of_a_finished_run(tmp_path):
    run_experiment(parse_config(dict(RAW, run={"keep_partial": True})), tmp_path)
    saved = sorted(p.name for p in (tmp_path / "partial").glob("curve-*.npz"))
    assert saved == [f"curve-{i:03d}.npz" for i in range(len(RAW["curves"]))]


def test_resume_refuses_a_different_configuration(tmp_path):
    run_experiment(parse_config(RAW), tmp_path)
    other = dict(RAW, seed=4)
    with pytest.raises(ConfigError, match="different configuration"):
        run_experiment(parse_config(other), tmp_path, resume=True)


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("privacy", "needle"),
    [
        ({"target_epsilon": 1.0}, "privatized link"),
        ({"target_epsilon": 1.0, "server_noise": "random"}, "training.clip_norm"),
    ],
)
def test_a_failed_start_leaves_an_existing_results_folder_untouched(tmp_path, privacy, needle):
    run_experiment(parse_config(dict(RAW, run={"keep_partial": True})), tmp_path)
    before = _snapshot(tmp_path)
    assert any(name.startswith("partial") for name in before)
    bad = dict(RAW, privacy={**RAW["privacy"], **privacy})
    with pytest.raises(ConfigError, match=needle):
        run_experiment(parse_config(bad), tmp_path)
    assert _snapshot(tmp_path) == before


def test_a_failed_start_creates_no_folder(tmp_path):
    bad = dict(RAW, topology={"kind": "erdos_renyi", "P": 40, "probability": 0.001})
    with pytest.raises(ConfigError, match="no connected graph"):
        run_experiment(parse_config(bad), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_partial_files_of_another_configuration_are_recomputed_not_resumed(tmp_path):
    """A rerun keeps the old partial files until its own batches replace them; a resume
    of the new configuration ignores those of the old one (their fingerprint differs)."""
    run_experiment(parse_config(dict(RAW, run={"keep_partial": True})), tmp_path / "run")
    other = parse_config(dict(RAW, seed=4))
    expected = run_experiment(other, tmp_path / "reference")

    def interrupt(labels, done, total):  # in the first batch, at its first progress
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # --force: the folder holds RAW's results
        run_experiment(other, tmp_path / "run", on_progress=interrupt, force=True)
    assert len(list((tmp_path / "run" / "partial").glob("curve-*.npz"))) == 4  # the old ones
    seen = set()
    resumed = run_experiment(
        other, tmp_path / "run", resume=True, on_progress=lambda l, d, t: seen.add(l)
    )
    assert seen == {"none, graph_homomorphic", "small_L, blowup"}  # nothing old was reused
    assert resumed["curves"] == expected["curves"]
