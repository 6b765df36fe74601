"""The PyTorch adapter (pgfl[torch]): the JAX adapter's contract through torch.func.

Skipped without torch (``make test`` installs it; see the Makefile). Ladder: closed form
(least squares, in the module's doctest) → the same gradients as the JAX adapter on the
digits MLP (another implementation) → the same run as the built-in JAX MLP through a
configuration (the file and config of docs/models.md, "A PyTorch model").
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("jax")

import torch.nn.functional as F  # noqa: E402

from pgfl.apps.runner import run_experiment  # noqa: E402
from pgfl.experiments.loader import parse_config  # noqa: E402
from pgfl.experiments.presets import load_preset  # noqa: E402
from pgfl.models.builtin import build_model, init_params  # noqa: E402
from pgfl.models.torch_adapter import TorchProblem  # noqa: E402
from pgfl.validation import ConfigError  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs" / "models.md"


def docs_file(name: str) -> str:
    """The text of the ``<!-- file: NAME -->`` block of docs/models.md."""
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(rf"<!-- file: {re.escape(name)} -->\n```\w+\n(.*?)```", text, re.S)
    assert found, f"docs/models.md has no file block {name}"
    return found.group(1)


class BuiltinMLP(torch.nn.Module):
    def __init__(self, params):
        super().__init__()
        for name in sorted(params):
            self.register_parameter(name, torch.nn.Parameter(torch.as_tensor(params[name])))

    def forward(self, x):
        return F.relu(x @ self.w0 + self.b0) @ self.w1 + self.b1


def xent(out, y):
    return F.cross_entropy(out, y.long())


def both(rho):
    jax_mlp = build_model("mlp", 64, 10, np.random.default_rng(3), rho=rho, hidden=(64,))
    params = init_params("mlp", 64, 10, np.random.default_rng(3), hidden=(64,))
    return jax_mlp, TorchProblem(BuiltinMLP(params), xent, rho)


@pytest.mark.parametrize("rho", [0.0, 0.01])
def test_the_same_gradients_as_the_jax_adapter(rho):
    jax_mlp, torch_mlp = both(rho)
    np.testing.assert_array_equal(torch_mlp.initial, jax_mlp.initial)  # same flat layout
    r = np.random.default_rng(0)
    n, B, C = 5, 6, 3
    W = jax_mlp.initial[None, :, None] + 0.3 * r.standard_normal((n, jax_mlp.initial.size, C))
    U = r.standard_normal((n, B, 64))
    d = r.integers(0, 10, (n, B)).astype(float)
    wt = np.where(np.arange(B) < 4, 0.25, 0.0) * np.ones((n, 1))  # two padded samples
    clip = np.array([0.1, 1.0, np.inf])
    for c in (None, clip):  # unclipped; clipped hard, mildly and not at all
        want = jax_mlp.gradient(W, U, d, wt, c)
        got = torch_mlp.gradient(W, U, d, wt, c)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    G = torch_mlp.sample_gradients(W[0, :, 0], U[0], d[0])
    np.testing.assert_allclose(G, jax_mlp.sample_gradients(W[0, :, 0], U[0], d[0]), atol=1e-12)
    Wm = np.swapaxes(W, 1, 2)  # models [n, C, M]
    X = r.standard_normal((40, 64))
    y = r.integers(0, 10, 40).astype(float)
    np.testing.assert_allclose(torch_mlp.test_loss(Wm, X, y), jax_mlp.test_loss(Wm, X, y))
    np.testing.assert_array_equal(torch_mlp.test_error(Wm, X, y), jax_mlp.test_error(Wm, X, y))


def test_a_model_chunk_and_a_pickle_give_the_same_bits():
    _, p = both(0.01)
    r = np.random.default_rng(1)
    W = p.initial[None, :, None] + 0.1 * r.standard_normal((4, p.initial.size, 2))
    U, d = r.standard_normal((4, 5, 64)), r.integers(0, 10, (4, 5)).astype(float)
    wt, clip = np.full((4, 5), 0.2), np.array([0.5, 2.0])
    whole = p.gradient(W, U, d, wt, clip)
    chunked = TorchProblem(p.model, xent, 0.01, model_chunk=3).gradient(W, U, d, wt, clip)
    again = pickle.loads(pickle.dumps(p)).gradient(W, U, d, wt, clip)
    np.testing.assert_allclose(chunked, whole, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(again, whole)


def test_bad_models_are_one_line():
    with pytest.raises(ConfigError, match="needs a torch.nn.Module"):
        TorchProblem(lambda x: x, xent)
    p = TorchProblem(torch.nn.Linear(3, 2), lambda out, y: out.sum(0))  # a vector per sample
    with pytest.raises(ConfigError, match="must return a scalar per sample; got \\(2,\\)"):
        p.dim(3)
    with pytest.raises(ConfigError, match="fails on a sample of 4 features"):
        TorchProblem(torch.nn.Linear(3, 2), xent).dim(4)


def digits(tmp_path, source, curves=("none", "graph_homomorphic", "random"), iterations=40):
    """The docs' digits-torch.toml with ``source``, a few curves and iterations."""
    import tomllib

    (tmp_path / "torch_model.py").write_text(docs_file("torch_model.py"), encoding="utf-8")
    raw = tomllib.loads(docs_file("digits-torch.toml"))
    raw["model"]["source"] = source
    raw["iterations"] = iterations
    raw["curves"] = [c for c in raw["curves"] if c["label"] in curves]
    if curves == ("none",):
        raw["privacy"] = {}  # no noisy curve: no noise settings (they would warn)
    return parse_config(raw, base=tmp_path)


def test_the_docs_torch_model_runs_the_digits_mlp_as_the_builtin_jax_mlp(tmp_path):
    torch_cfg = digits(tmp_path, "torch_model.py:make_like_builtin", ("none", "random"), 30)
    jax_raw = dict(torch_cfg.source)
    jax_raw["model"] = {"kind": "mlp", "hidden": [64], "activation": "relu"}
    jax_cfg = parse_config(jax_raw, base=tmp_path)
    with_torch = run_experiment(torch_cfg, tmp_path / "torch")
    with_jax = run_experiment(jax_cfg, tmp_path / "jax")
    for t, j in zip(with_torch["curves"], with_jax["curves"], strict=True):
        # measured on digits-mlp --quick, 7 curves: the same accuracy, log-loss within 1e-15
        assert abs(t["test_accuracy"] - j["test_accuracy"]) <= 1 / 297 + 1e-12, t["label"]
        assert t["test_log_loss"] == pytest.approx(j["test_log_loss"], rel=1e-9), t["label"]
    # the noise is what separates the curves (not a run that ignores its model)
    by = {c["label"]: c["test_accuracy"] for c in with_torch["curves"]}
    assert by["random"] < by["none"] - 0.05


def test_the_docs_plain_torch_model_runs_from_a_config(tmp_path):
    cfg = digits(tmp_path, "torch_model.py:make", curves=("none",), iterations=30)
    summary = run_experiment(cfg, tmp_path / "o")
    (c,) = summary["curves"]
    assert c["test_accuracy"] > 0.5  # 30 rounds of the MLP, far above chance (0.1)
    assert c["settings"]["model"] == "custom"
    assert "torch_model.py:make" in (tmp_path / "o" / "config.json").read_text()


def test_a_loss_that_raises_is_the_users_error(tmp_path):
    (tmp_path / "bad.py").write_text(
        "import torch\nfrom pgfl.models.torch_adapter import TorchProblem\n"
        "def boom(out, y):\n    raise ValueError('no loss here')\n"
        "def make(features, classes, rng):\n"
        "    return TorchProblem(torch.nn.Linear(features, classes), boom)\n",
        encoding="utf-8",
    )
    cfg = digits(tmp_path, "bad.py:make", curves=("none",), iterations=2)
    from pgfl.validation import UserCodeError

    with pytest.raises(UserCodeError, match=r"bad.py raised ValueError: no loss here \(bad.py:4"):
        run_experiment(cfg, tmp_path / "o")


def test_the_preset_the_comparison_stands_for_is_digits_mlp():
    # the docs' digits-torch.toml is digits-mlp with the model swapped (same network, data,
    # training and noise): the comparison above is the preset's
    import tomllib

    raw = tomllib.loads(docs_file("digits-torch.toml"))
    preset = load_preset("digits-mlp")
    cfg = parse_config(raw, base=".")
    for section in ("topology", "data", "training"):
        assert getattr(cfg.curves[0], section) == getattr(preset.curves[0], section), section
    assert cfg.iterations == preset.iterations
