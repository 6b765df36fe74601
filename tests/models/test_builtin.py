"""Built-in models (softmax, MLP, CNN), the [model] table and the digits data."""

import numpy as np
import pytest

pytest.importorskip("jax")

from pgfl.data.digits import digits_federated_data, load_digits_arrays  # noqa: E402
from pgfl.experiments.build import build_network  # noqa: E402
from pgfl.experiments.loader import parse_config  # noqa: E402
from pgfl.models.builtin import (  # noqa: E402
    build_model,
    init_params,
    logits_fn,
    model_dim,
    sample_norms_fn,
)
from pgfl.param import SettingWarning  # noqa: E402
from pgfl.validation import ConfigError  # noqa: E402


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_softmax_gradient_equals_closed_form():
    rng = np.random.default_rng(0)
    F, C, B = 5, 4, 6
    p = build_model("softmax", F, C, rng, rho=0.05)
    W, b = rng.standard_normal((F, C)), rng.standard_normal(C)
    flat = np.concatenate([b, W.ravel()])  # ravel_pytree orders the dict keys: b, w
    np.testing.assert_array_equal(p.unravel(flat)["w"], W)
    X, y = rng.standard_normal((B, F)), rng.integers(0, C, B).astype(float)
    weight = np.full(B, 1 / B)
    R = _softmax(X @ W + b) - np.eye(C)[y.astype(int)]  # dℓ/dz per sample
    want = np.concatenate([R.mean(0), (X.T @ R / B).ravel()]) + 2 * 0.05 * flat
    got = p.gradient(flat[:, None], X, y, weight)[:, 0]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def _fd_check(p, w, X, y, coords, h=1e-6):
    weight = np.full(len(y), 1 / len(y))
    g = p.gradient(w[:, None], X, y, weight)[:, 0]

    def J(v):
        return float(np.mean(p._chunked(p._losses, v, X, y))) + p.rho * v @ v

    for i in coords:
        e = np.zeros_like(w)
        e[i] = h
        fd = (J(w + e) - J(w - e)) / (2 * h)
        assert abs(g[i] - fd) < 1e-6 * max(1.0, abs(fd)), (i, g[i], fd)


def test_mlp_gradient_equals_finite_differences():
    rng = np.random.default_rng(1)
    p = build_model("mlp", 6, 3, rng, rho=0.01, hidden=(5, 4), activation="tanh")
    assert p.dim(6) == model_dim("mlp", 6, 3, hidden=(5, 4)) == 7 * 5 + 6 * 4 + 5 * 3
    X, y = rng.standard_normal((7, 6)), rng.integers(0, 3, 7).astype(float)
    _fd_check(p, p.initial + 0.1 * rng.standard_normal(p.initial.size), X, y, range(0, 74, 7))


def _cnn_logits_loop(params, x, side=8):
    """Slow reference: explicit 3x3 'same' convolution, ReLU, 2x2 average pooling."""
    img = np.pad(x.reshape(side, side), 1)
    k, kb = params["conv"], params["conv_b"]
    ch = k.shape[0]
    h = np.zeros((ch, side, side))
    for c in range(ch):
        for i in range(side):
            for j in range(side):
                h[c, i, j] = (img[i : i + 3, j : j + 3] * k[c, 0]).sum() + kb[c]
    h = np.maximum(h, 0)
    pooled = h.reshape(ch, side // 2, 2, side // 2, 2).mean(axis=(2, 4))
    return pooled.ravel() @ params["w"] + params["b"]


def test_cnn_equals_an_explicit_convolution_and_its_gradient_finite_differences():
    rng = np.random.default_rng(2)
    p = build_model("cnn", 64, 10, rng, channels=3)
    X, y = load_digits_arrays()
    params = p.unravel(p.initial)
    params = {k: np.asarray(v) + 0.05 for k, v in params.items()}  # non-zero biases too
    x = X[7]
    want = _cnn_logits_loop(params, x)
    got = np.asarray(p.predict(p._params.__class__(params), x))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    w = np.concatenate([np.ravel(params[k]) for k in sorted(params)])
    _fd_check(p, w, X[:5], y[:5], [0, 5, 20, 40, 100, 300])


def test_initial_parameters_come_from_the_seed():
    a = init_params("mlp", 64, 10, np.random.default_rng(3))
    b = init_params("mlp", 64, 10, np.random.default_rng(3))
    c = init_params("mlp", 64, 10, np.random.default_rng(4))
    np.testing.assert_array_equal(a["w0"], b["w0"])
    assert not np.array_equal(a["w0"], c["w0"])
    # He initialization: std sqrt(2/64); 4,096 draws give the std within 5%
    assert abs(a["w0"].std() / np.sqrt(2 / 64) - 1) < 0.05
    assert not a["b0"].any()


def _raw(**over):
    raw = {
        "name": "m",
        "iterations": 2,
        "topology": {"P": 3, "kind": "ring"},
        "data": {"kind": "digits", "K": 4},
        "model": {"kind": "mlp", "hidden": [8]},
        "training": {"L": 2, "epochs": 1, "batch": 4, "mu": 0.1},
        "plot": ["test_accuracy"],
    }
    for k, v in over.items():
        raw[k] = v
    return raw


@pytest.mark.parametrize(
    ("over", "message"),
    [
        (
            {"data": {"kind": "regression", "K": 4}, "plot": ["centroid_msd_db"]},
            'model.kind = "mlp" needs classification data .* data.kind = "regression"',
        ),
        ({"model": {"kind": "none"}}, 'data.kind = "digits" .* needs a multi-class model'),
        (
            {"data": {"kind": "logistic", "K": 4, "M": 3}, "model": {"kind": "cnn"}},
            r'model.kind = "cnn" needs 8x8 images \(64 features\); data.M = 3',
        ),
        ({"model": {"kind": "mlp", "hidden": []}}, "model.hidden must be a non-empty list"),
        ({"model": {"kind": "mlp", "hidden": [0]}}, r"model.hidden\[0\] must be an integer"),
        ({"model": {"kind": "rnn"}}, "model.kind must be one of"),
    ],
)
def test_bad_model_configs_are_one_line_errors(over, message):
    with pytest.raises(ConfigError, match=message) as info:
        parse_config(_raw(**over))
    assert "\n" not in str(info.value)


def test_a_model_setting_without_effect_is_a_warning():
    with pytest.warns(SettingWarning, match='model.hidden = .* has no effect: no curve has '
                      'model.kind = "mlp"'):  # fmt: skip
        cfg = parse_config(_raw(model={"kind": "softmax", "hidden": [8]}))
    assert cfg.curves[0].model.kind == "softmax"


def test_cnn_on_tabular_data_stops_at_build_time():
    cfg = parse_config(
        _raw(
            data={"kind": "classification", "source": "breast_cancer", "K": 4, "rows": 300},
            model={"kind": "cnn"},
        )
    )
    with pytest.raises(ConfigError, match=r"needs 8x8 images \(64 features\); .* has 31"):
        build_network(cfg.curves[0], 0)


def test_model_config_builds_a_network_with_seeded_initial_parameters():
    cfg = parse_config(_raw())
    a, b = build_network(cfg.curves[0], 0), build_network(cfg.curves[0], 0)
    c = build_network(cfg.curves[0], 1)
    assert a.dim == model_dim("mlp", 64, 10, hidden=(8,))
    np.testing.assert_array_equal(a.problem.initial, b.problem.initial)
    assert not np.array_equal(a.problem.initial, c.problem.initial)


def test_repetition_blocks_give_the_bits_of_the_whole_run():
    # what Ray sweeps rely on: repetitions simulated in another block (another batch size
    # of every compiled call) give the same models and the same test metrics, bit for bit
    from pgfl.engine import simulate
    from pgfl.experiments.build import curve_settings

    raw = _raw(iterations=3, repetitions=3, model={"kind": "softmax"})
    raw["training"] = {**raw["training"], "clip_norm": 2.0}
    raw["curves"] = [{"label": "a"}, {"label": "b", "training": {"mu": 0.3}}]
    cfg = parse_config(raw)
    net = build_network(cfg.curves[0], 0)
    settings = [curve_settings(c, 3, net) for c in cfg.curves]
    whole = simulate(net, settings, iterations=3, repetitions=3)
    tail = simulate(net, settings, iterations=3, repetitions=1, first_repetition=2)
    np.testing.assert_array_equal(whole.W[:, 2:], tail.W)
    for name in ("test_log_loss", "test_error", "server_test_loss"):
        np.testing.assert_array_equal(getattr(whole, name)[:, :, 2:], getattr(tail, name))


def test_digits_split_is_non_iid_and_unequal():
    X, y = load_digits_arrays()
    n_test = 297
    d = digits_federated_data(5, 6, seed=0, label_skew=0.3, test_size=n_test)
    assert d.counts.sum() == len(y) - n_test and d.counts.min() >= 8
    assert d.counts.max() > 2 * d.counts.min()  # unequal client sizes
    # every class is in the test set in about its share (random split of the whole set)
    share = np.bincount(d.y_test.astype(int), minlength=10) / n_test
    assert np.abs(share - 0.1).max() < 0.06

    def unit_tv(data):  # mean total-variation distance of unit label shares from global
        hist = np.stack(
            [np.bincount(data.y[p][data.mask[p]].astype(int), minlength=10) for p in range(5)]
        )
        hist = hist / hist.sum(1, keepdims=True)
        return 0.5 * np.abs(hist - hist.mean(0)).sum(1).mean()

    iid = np.mean([unit_tv(digits_federated_data(5, 6, seed=s)) for s in range(3)])
    skew = np.mean([unit_tv(digits_federated_data(5, 6, seed=s, label_skew=0.3)) for s in range(3)])
    assert iid < 0.1 < 0.3 < skew


CUSTOM = """
import jax, jax.numpy as jnp, numpy as np

def logits(p, x):
    return x @ p["w"] + p["b"]

def make(features, classes, rng):
    params = {"w": rng.normal(0, 0.01, (features, classes)), "b": np.zeros(classes)}
    loss = lambda p, x, y: jax.nn.logsumexp(logits(p, x)) - logits(p, x)[y.astype(int)]
    return loss, params, logits

def vector_loss(features, classes, rng):
    return (lambda p, x, y: logits(p, x)), {"w": np.zeros((features, classes)),
                                            "b": np.zeros(classes)}, logits

def nan_params(features, classes, rng):
    return make(features, classes, rng)[0], {"w": np.full((features, classes), np.nan),
                                             "b": np.zeros(classes)}, logits
"""


def test_custom_jax_model_from_a_config(tmp_path):
    path = tmp_path / "mymodel.py"
    path.write_text(CUSTOM)
    cfg = parse_config(_raw(model={"kind": "custom", "source": f"{path}:make"}))
    net = build_network(cfg.curves[0], 0)
    assert net.dim == 65 * 10 and net.problem.classifier
    # the softmax model built in and the user's one give the same gradient at a point
    ref = build_model("softmax", 64, 10, np.random.default_rng(0), rho=cfg.curves[0].training.rho)
    rng = np.random.default_rng(1)
    w = rng.normal(size=650)
    X, y = rng.random((5, 64)), rng.integers(0, 10, 5).astype(float)
    np.testing.assert_allclose(
        net.problem.gradient(w[:, None], X, y, np.full(5, 0.2), 1.0),
        ref.gradient(w[:, None], X, y, np.full(5, 0.2), 1.0),
        rtol=0,
        atol=1e-12,
    )
    for name, message in (
        ("vector_loss", r"must return a scalar per sample; got shape \(10,\)"),
        ("nan_params", "model initial parameters must be finite real numbers; got nan"),
        ("missing", "has no function 'missing'"),
    ):
        cfg = parse_config(_raw(model={"kind": "custom", "source": f"{path}:{name}"}))
        with pytest.raises(ConfigError, match=message):
            build_network(cfg.curves[0], 0)
    with pytest.raises(ConfigError, match="model.source is required when model.kind"):
        parse_config(_raw(model={"kind": "custom"}))


def test_editing_a_custom_model_changes_the_resume_fingerprint(tmp_path):
    # partial results of the old code must not be resumed as if they were the new code's
    from pgfl.experiments.partial import config_fingerprint as _config_fingerprint

    path = tmp_path / "mymodel.py"
    path.write_text(CUSTOM)
    cfg = parse_config(_raw(model={"kind": "custom", "source": f"{path}:make"}))
    before = _config_fingerprint(cfg)
    assert _config_fingerprint(cfg) == before
    path.write_text(CUSTOM + "\n# edited\n")
    assert _config_fingerprint(cfg) != before


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: model_dim("rnn", 64, 10), "model.kind must be one of 'softmax', 'mlp', 'cnn'"),
        # an unknown kind used to build a CNN's logits without a word
        (lambda: logits_fn("sofmax"), r"model.kind .*; got 'sofmax' \(did you mean 'softmax'\?\)"),
        (lambda: sample_norms_fn("none"), "model.kind must be one of .*; got 'none'"),
        (
            lambda: build_model("mlp", 64, 10, np.random.default_rng(0), activation="gelu"),
            "model.activation must be one of 'relu', 'tanh', 'sigmoid', 'elu'; got 'gelu'",
        ),
        (
            lambda: init_params("mlp", 64, 10, np.random.default_rng(0), hidden=(32, 0)),
            r"model.hidden\[1\] must be an integer in \[1, inf\]; got 0",
        ),
        (
            lambda: init_params("cnn", 64, 10, np.random.default_rng(0), channels=0),
            r"model.channels must be an integer in \[1, inf\]; got 0",
        ),
    ],
)
def test_the_builders_check_their_arguments_by_the_model_settings(call, message):
    with pytest.raises(ConfigError, match=message) as info:
        call()
    assert "\n" not in str(info.value)
