"""Built-in multi-class models for the ``[model]`` table: softmax, MLP and a small CNN.

Each is a per-sample cross-entropy loss ``ℓ(θ; x, y) = logsumexp(f_θ(x)) − f_θ(x)_y`` over
the logits ``f_θ(x)`` of ``classes`` classes (labels are class indices ``0..classes−1``),
run through the JAX adapter (:class:`pgfl.models.jax_adapter.JaxProblem`):

* ``softmax``: multinomial logistic regression, ``f(x) = xW + b``;
* ``mlp``: ``hidden`` dense layers with an activation, then a dense output layer;
* ``cnn``: for 8×8 single-channel images (64 features, row-major): a 3×3 convolution with
  ``channels`` filters (same padding), the activation, 2×2 average pooling (→ 4×4), then
  a dense output layer.

Initial parameters come from a numpy Generator (the run's ``model`` stream): weights
``N(0, g/fan_in)`` with ``g = 2`` for ``relu`` (He et al., arXiv:1502.01852) and ``g = 1``
otherwise (LeCun), biases zero; the softmax model starts at zero (its loss is convex).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pgfl.models.jax_adapter import JaxProblem, jax_module
from pgfl.validation import ConfigError

__all__ = [
    "ACTIVATIONS",
    "MODEL_KINDS",
    "build_model",
    "init_params",
    "load_custom",
    "logits_fn",
    "model_dim",
]

MODEL_KINDS = ("softmax", "mlp", "cnn")
ACTIVATIONS = ("relu", "tanh", "sigmoid", "elu")
#: The image side the CNN expects (scikit-learn's digits: 8×8).
CNN_SIDE = 8


def _activation(name: str):
    jax = jax_module()
    return {
        "relu": jax.nn.relu,
        "tanh": jax.numpy.tanh,
        "sigmoid": jax.nn.sigmoid,
        "elu": jax.nn.elu,
    }[name]


def check_fits(kind: str, features: int) -> None:
    """A model kind that cannot read samples of ``features`` features: one-line ConfigError.

    >>> try:
    ...     check_fits("cnn", 30)
    ... except ConfigError as exc:
    ...     print(exc)
    model.kind = "cnn" needs 8x8 images (64 features); the data set has 30 features
    """
    if kind == "cnn" and features != CNN_SIDE * CNN_SIDE:
        raise ConfigError(
            f'model.kind = "cnn" needs {CNN_SIDE}x{CNN_SIDE} images ({CNN_SIDE**2} features); '
            f"the data set has {features} features"
        )


def init_params(
    kind: str,
    features: int,
    classes: int,
    rng: np.random.Generator,
    *,
    hidden: tuple[int, ...] = (64,),
    activation: str = "relu",
    channels: int = 8,
) -> dict[str, Any]:
    """Initial parameter pytree of a built-in model (see the module docstring).

    >>> p = init_params("mlp", 64, 10, np.random.default_rng(0), hidden=(32,))
    >>> [(k, v.shape) for k, v in sorted(p.items())]
    [('b0', (32,)), ('b1', (10,)), ('w0', (64, 32)), ('w1', (32, 10))]
    """
    check_fits(kind, features)
    gain = 2.0 if activation == "relu" else 1.0

    def dense(fan_in: int, fan_out: int) -> np.ndarray:
        return rng.standard_normal((fan_in, fan_out)) * np.sqrt(gain / fan_in)

    if kind == "softmax":
        return {"w": np.zeros((features, classes)), "b": np.zeros(classes)}
    if kind == "mlp":
        sizes = (features, *hidden, classes)
        out = {}
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            out[f"w{i}"] = dense(a, b)
            out[f"b{i}"] = np.zeros(b)
        return out
    if kind == "cnn":
        pooled = (CNN_SIDE // 2) ** 2 * channels
        return {
            "conv": rng.standard_normal((channels, 1, 3, 3)) * np.sqrt(gain / 9),
            "conv_b": np.zeros(channels),
            "w": dense(pooled, classes),
            "b": np.zeros(classes),
        }
    raise ConfigError(f"model.kind must be one of {', '.join(MODEL_KINDS)}; got {kind!r}")


def model_dim(kind: str, features: int, classes: int, *, hidden=(64,), channels: int = 8) -> int:
    """Number of parameters ``M`` of a built-in model (no JAX needed).

    >>> model_dim("mlp", 64, 10, hidden=(64,)), model_dim("cnn", 64, 10, channels=8)
    (4810, 1370)
    """
    if kind == "softmax":
        return (features + 1) * classes
    if kind == "mlp":
        sizes = (features, *hidden, classes)
        return sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))
    pooled = (CNN_SIDE // 2) ** 2 * channels
    return channels * 10 + (pooled + 1) * classes


def logits_fn(kind: str, *, activation: str = "relu", layers: int = 2):
    """``f(params, x) -> logits [classes]`` of one sample ``x [F]`` (a JAX function)."""
    jax = jax_module()
    act = _activation(activation)

    if kind == "softmax":
        return lambda p, x: x @ p["w"] + p["b"]
    if kind == "mlp":

        def mlp(p, x):
            h = x
            for i in range(layers - 1):
                h = act(h @ p[f"w{i}"] + p[f"b{i}"])
            return h @ p[f"w{layers - 1}"] + p[f"b{layers - 1}"]

        return mlp

    def cnn(p, x):
        img = x.reshape(1, 1, CNN_SIDE, CNN_SIDE)
        h = jax.lax.conv_general_dilated(img, p["conv"], (1, 1), "SAME")[0]  # [ch, 8, 8]
        h = act(h + p["conv_b"][:, None, None])
        ch = h.shape[0]
        h = h.reshape(ch, CNN_SIDE // 2, 2, CNN_SIDE // 2, 2).mean(axis=(2, 4))
        return h.reshape(-1) @ p["w"] + p["b"]

    return cnn


def cross_entropy(logits_of):
    """The per-sample loss ``logsumexp(f(x)) − f(x)_y`` of a logits function."""
    jax = jax_module()
    jnp = jax.numpy

    def loss(p, x, y):
        z = logits_of(p, x)
        return jax.nn.logsumexp(z) - jnp.dot(jax.nn.one_hot(y.astype(jnp.int32), z.shape[-1]), z)

    return loss


def load_custom(
    source: str, features: int, classes: int, rng: np.random.Generator, *, rho: float = 0.0
) -> JaxProblem:
    """The user's model of ``model.source = "FILE.py:FUNCTION"`` as a problem.

    ``FUNCTION(features, classes, rng)`` returns ``(loss, params, predict)`` (``predict``
    may be ``None``) or a :class:`JaxProblem`; ``rng`` is the run's ``model`` stream.
    """
    import importlib.util
    from pathlib import Path

    path, sep, name = source.rpartition(":")
    if not sep or not path.endswith(".py") or not name.isidentifier():
        raise ConfigError(f"model.source must read 'FILE.py:FUNCTION'; got {source!r}")
    if not Path(path).is_file():
        raise ConfigError(f"model.source: file not found: {path}")
    spec = importlib.util.spec_from_file_location(f"pgfl_user_model_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ConfigError(
            f"model.source: {path} fails to import: {type(exc).__name__}: {exc}"
        ) from None
    make = getattr(module, name, None)
    if not callable(make):
        raise ConfigError(f"model.source: {path} has no function {name!r}")
    out = make(features, classes, rng)
    if isinstance(out, JaxProblem):
        return JaxProblem(out.loss, out._params, rho, predict=out.predict, name=out.name)
    if not isinstance(out, tuple) or len(out) != 3:
        raise ConfigError(
            f"model.source: {name}(features, classes, rng) must return (loss, params, predict) "
            f"or a JaxProblem; got {type(out).__name__}"
        )
    loss, params, predict = out
    return JaxProblem(loss, params, rho, predict=predict, name=f"custom:{name}")


def build_model(
    kind: str,
    features: int,
    classes: int,
    rng: np.random.Generator,
    *,
    rho: float = 0.0,
    hidden: tuple[int, ...] = (64,),
    activation: str = "relu",
    channels: int = 8,
) -> JaxProblem:
    """A built-in classifier as a problem (its initial parameters drawn from ``rng``).

    >>> p = build_model("softmax", 4, 3, np.random.default_rng(0))
    >>> p.dim(4), float(p.test_loss(p.initial, np.zeros((2, 4)), np.array([0.0, 2.0])))
    (15, 1.0986122886681098)
    """
    params = init_params(
        kind, features, classes, rng, hidden=hidden, activation=activation, channels=channels
    )
    f = logits_fn(kind, activation=activation, layers=len(hidden) + 1)
    return JaxProblem(cross_entropy(f), params, rho, predict=f, name=kind)
