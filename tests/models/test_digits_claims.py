"""The claim of issue 11 on the ``digits-mlp`` preset, across three seeds (statistical),
and the output contract of ``digits-mlp`` and ``digits-cnn``.

At equal noise variance (σ_g² = 0.015, Gaussian) on the MLP: GFL without noise reaches
at least 90% test accuracy; graph-homomorphic noise, which cancels in the centroid
("Privatized Graph Federated Learning", arXiv:2203.07105, eq. 46), stays within 3 points
of it although the servers' models are noisy and the model is non-convex; random noise
of the same variance is at least 10 points worse (or diverges). Run at the preset's full
size (300 iterations; at the ``--quick`` size of 150 the no-noise accuracy of seed 2 is
90.2%, too close to the bound), seeds 0, 1, 2, each seed a new data split, schedule and
initialization.
"""

import tomllib

import pytest

pytest.importorskip("jax")

from pgfl.apps.runner import run_experiment  # noqa: E402
from pgfl.experiments.loader import parse_config  # noqa: E402
from pgfl.experiments.presets import preset_text  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_graph_homomorphic_noise_keeps_the_mlp_accuracy_random_noise_does_not(seed, tmp_path):
    raw = tomllib.loads(preset_text("digits-mlp"))
    raw["seed"] = seed
    raw["curves"] = [
        c for c in raw["curves"] if c["label"] in ("none", "graph_homomorphic", "random")
    ]
    summary = run_experiment(parse_config(raw), tmp_path)
    acc = {c["label"]: c["test_accuracy"] for c in summary["curves"]}
    print(f"seed {seed}: {acc}")
    assert 0.0 <= acc["none"] <= 1.0
    assert acc["none"] >= 0.90, acc
    assert acc["graph_homomorphic"] >= acc["none"] - 0.03, acc
    assert acc["random"] is None or acc["random"] <= acc["none"] - 0.10, acc


@pytest.mark.parametrize("preset", ["digits-mlp", "digits-cnn"])
def test_digits_output_contract(preset, tmp_path):
    raw = tomllib.loads(preset_text(preset))
    raw["iterations"] = 4
    summary = run_experiment(parse_config(raw), tmp_path)
    curves = {c["label"]: c for c in summary["curves"]}
    assert {"none", "graph_homomorphic", "random", "hybrid"} <= set(curves)
    for c in curves.values():
        assert 0.0 <= c["test_accuracy"] <= 1.0
        assert c["test_accuracy"] == pytest.approx(1 - c["test_error"])
        assert c["centroid_msd_db"] is None  # a neural network has no w°
        assert len(c["server_test_loss"]) == 6
    eps = [c for c in curves.values() if "target_epsilon" in c]
    assert {c["label"] for c in eps} == {"graph_homomorphic_eps", "random_eps", "hybrid_eps"}
    for c in eps:  # calibrated: the reported ε meets the target
        assert c["epsilon"]["pld"] == pytest.approx(c["target_epsilon"], rel=1e-3)
    assert (tmp_path / "curves.csv").is_file() and (tmp_path / "figure.png").is_file()
