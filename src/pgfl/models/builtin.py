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

Every built-in model gives the adapter the squared norms of its per-sample gradients
without forming them (:func:`sample_norms_fn`, "ghost norms": Goodfellow, arXiv:1510.01799;
Li et al., arXiv:2110.05679), so per-sample clipping costs about one batch gradient. For a
dense layer ``z = aW + b`` of a sample, ``∂ℓ/∂W = a ⊗ δ`` and ``∂ℓ/∂b = δ`` with
``δ = ∂ℓ/∂z``, so its share of ``‖∇ℓ‖²`` is ``(‖a‖² + 1)·‖δ‖²``; the ``δ`` of every layer
come from one backward pass through zero "taps" added to the layers' outputs. The CNN's
convolution has 9 weights per filter: its per-sample gradient ``Σ_t patch_t ⊗ δ_t`` (64
positions) is formed, the dense layer's is not.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from pgfl.general import ACTIVATIONS, PARAMS
from pgfl.models.jax_adapter import JaxProblem, jax_module
from pgfl.validation import ConfigError, UserCodeError

__all__ = [
    "ACTIVATIONS",
    "MODEL_KINDS",
    "UserFunction",
    "build_model",
    "init_params",
    "load_custom",
    "logits_fn",
    "model_dim",
    "sample_norms_fn",
]

#: The values of ``model.kind`` this module builds (``model.activation``'s values, ACTIVATIONS,
#: are the table's: :mod:`pgfl.general`).
MODEL_KINDS = ("softmax", "mlp", "cnn")
#: The setting ``model.kind`` narrowed to them: what the builders below accept.
_BUILT_IN = replace(PARAMS["model.kind"], choices=MODEL_KINDS)
#: The image side the CNN expects (scikit-learn's digits: 8×8).
CNN_SIDE = 8


def _activation(name: str):
    PARAMS["model.activation"].check(name)
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
    _BUILT_IN.check(kind)
    check_fits(kind, features)
    hidden = PARAMS["model.hidden"].check(hidden)
    PARAMS["model.activation"].check(activation)
    PARAMS["model.channels"].check(channels)
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
    pooled = (CNN_SIDE // 2) ** 2 * channels
    return {
        "conv": rng.standard_normal((channels, 1, 3, 3)) * np.sqrt(gain / 9),
        "conv_b": np.zeros(channels),
        "w": dense(pooled, classes),
        "b": np.zeros(classes),
    }


def model_dim(kind: str, features: int, classes: int, *, hidden=(64,), channels: int = 8) -> int:
    """Number of parameters ``M`` of a built-in model (no JAX needed).

    >>> model_dim("mlp", 64, 10, hidden=(64,)), model_dim("cnn", 64, 10, channels=8)
    (4810, 1370)
    """
    _BUILT_IN.check(kind)
    if kind == "softmax":
        return (features + 1) * classes
    if kind == "mlp":
        sizes = (features, *hidden, classes)
        return sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))
    pooled = (CNN_SIDE // 2) ** 2 * channels
    return channels * 10 + (pooled + 1) * classes


def logits_fn(kind: str, *, activation: str = "relu", layers: int = 2):
    """``f(params, x) -> logits [classes]`` of one sample ``x [F]`` (a JAX function)."""
    _BUILT_IN.check(kind)
    jax_module()  # float64 on
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
        return _cnn_head(p, act(_cnn_conv(p, _patches(x))))[0]

    return cnn


def _patch_index(side: int) -> np.ndarray:
    """``[side², 9]`` indices into an image with one zero appended (index ``side²``).

    >>> _patch_index(8)[9].tolist()  # pixel (1, 1): rows 0-2, columns 0-2
    [0, 1, 2, 8, 9, 10, 16, 17, 18]
    >>> _patch_index(8)[0].tolist()  # pixel (0, 0): the zero padding above and left
    [64, 64, 64, 64, 0, 1, 64, 8, 9]
    """
    i, j = np.divmod(np.arange(side * side), side)
    a, b = np.divmod(np.arange(9), 3)
    r, c = i[:, None] + a - 1, j[:, None] + b - 1
    inside = (r >= 0) & (r < side) & (c >= 0) & (c < side)
    return np.where(inside, r * side + c, side * side)


_PATCHES = _patch_index(CNN_SIDE)


def _patches(x):
    """``[64, 9]``: the 3×3 neighbourhood (zero padding) of every pixel of an 8×8 image ``x``.

    Entry ``(8i + j, 3a + b)`` is pixel ``(i + a − 1, j + b − 1)``, so the "same" 3×3
    convolution (cross-correlation) with filters ``k [ch, 1, 3, 3]`` is
    ``patches @ k.reshape(ch, 9).T`` — one gather and one matrix product (XLA's CPU
    convolutions of such tiny images were 5-8x slower inside the compiled local phase).
    """
    jnp = jax_module().numpy
    return jnp.concatenate([x, jnp.zeros(1, x.dtype)])[_PATCHES]


def _cnn_conv(p, patches):
    """The convolution's pre-activation ``[64 positions, ch]``."""
    ch = p["conv_b"].shape[0]
    return patches @ p["conv"].reshape(ch, 9).T + p["conv_b"]


def _cnn_head(p, h):
    """2×2 average pooling of ``h [64, ch]``, then the dense layer: (logits, pooled ``[16·ch]``).

    The pooled features are flattened channel-major (``[ch, 4, 4]``), the layout of ``w``.
    """
    jnp = jax_module().numpy
    half, ch = CNN_SIDE // 2, h.shape[-1]
    pooled = h.reshape(half, 2, half, 2, ch).mean(axis=(1, 3))  # [4, 4, ch]
    pooled = jnp.moveaxis(pooled, -1, 0).reshape(-1)
    return pooled @ p["w"] + p["b"], pooled


def _xent(z, y):
    """``logsumexp(z) − z_y`` for logits ``z [classes]`` and a float class index ``y``."""
    jax = jax_module()
    jnp = jax.numpy
    return jax.nn.logsumexp(z) - jnp.dot(jax.nn.one_hot(y.astype(jnp.int32), z.shape[-1]), z)


def cross_entropy(logits_of):
    """The per-sample loss ``logsumexp(f(x)) − f(x)_y`` of a logits function."""

    def loss(p, x, y):
        return _xent(logits_of(p, x), y)

    return loss


def sample_norms_fn(kind: str, *, activation: str = "relu", layers: int = 2):
    """``norms(params, X [B, F], Y [B]) -> [B]``: ``‖∇_θ ℓ(θ; x_b, y_b)‖²`` of a built-in model.

    The cross-entropy's per-sample gradient norms, without the per-sample gradients (see the
    module docstring): one forward pass keeps each dense layer's input ``a_l``, one backward
    pass through zero taps on the layers' outputs gives ``δ_l``, and
    ``‖∇ℓ‖² = Σ_l (‖a_l‖² + 1)·‖δ_l‖²`` (the CNN adds its convolution's formed gradient).

    Softmax regression at ``W = 0``: ``δ = 1/C − e_y``, so ``‖∇ℓ‖² = (‖x‖² + 1)(1 − 1/C)``:

    >>> p = {"w": np.zeros((2, 4)), "b": np.zeros(4)}
    >>> sample_norms_fn("softmax")(p, np.array([[1.0, 2.0]]), np.array([3.0])).tolist()
    [4.5]
    """
    _BUILT_IN.check(kind)
    jax = jax_module()
    jnp = jax.numpy
    act = _activation(activation)

    def dense_chain(p, names, h, taps):  # dense layers with taps; [a_l], logits
        inputs = []
        for i, (w, b) in enumerate(names):
            inputs.append(h)
            z = h @ p[w] + p[b] + taps[i]
            h = act(z) if i < len(names) - 1 else z
        return inputs, h

    if kind in ("softmax", "mlp"):
        names = [("w", "b")] if kind == "softmax" else [(f"w{i}", f"b{i}") for i in range(layers)]

        def one(p, x, y):
            def tapped(taps):
                inputs, z = dense_chain(p, names, x, taps)
                return _xent(z, y), inputs

            taps = [jnp.zeros_like(p[b]) for _, b in names]
            deltas, inputs = jax.grad(tapped, has_aux=True)(taps)
            return sum((a @ a + 1.0) * (d @ d) for a, d in zip(inputs, deltas, strict=True))

    else:  # cnn

        def one(p, x, y):
            patches = _patches(x)

            def tapped(taps):
                conv_tap, out_tap = taps
                logits, pooled = _cnn_head(p, act(_cnn_conv(p, patches) + conv_tap))
                return _xent(logits + out_tap, y), pooled

            taps = (jnp.zeros((CNN_SIDE * CNN_SIDE, p["conv_b"].shape[0])), jnp.zeros_like(p["b"]))
            (d_conv, d_out), pooled = jax.grad(tapped, has_aux=True)(taps)
            kernel = patches.T @ d_conv  # the per-sample filter gradient [9, ch]
            bias = jnp.sum(d_conv, axis=0)
            return (
                jnp.sum(kernel * kernel) + bias @ bias + (pooled @ pooled + 1.0) * (d_out @ d_out)
            )

    return jax.vmap(one, (None, 0, 0))


class UserCodeTimeout(BaseException):
    """Raised inside the user's code when its first call outlasts ``model.timeout``."""


class UserFunction:
    """A function of the user's ``model.source`` file, as pgfl calls it.

    The one place where pgfl calls into a user's model code (the file's import, the
    ``FUNCTION`` that builds the model, then ``loss``, ``predict`` and ``sample_norms`` while
    they are traced): what it raises becomes a :class:`~pgfl.validation.UserCodeError`
    naming the file and the line inside it — an exception, ``SystemExit`` (``sys.exit``)
    and a ``KeyboardInterrupt`` the code raises itself (one that Ctrl-C raised is an
    interrupt, as anywhere). The first call may run ``timeout`` seconds: then it is
    stopped where it runs (a ``SIGALRM`` timer, in the main thread; elsewhere there is no
    timer) and reported the same way. A :class:`ConfigError` raised inside (e.g. by a
    :class:`JaxProblem` the function builds) is pgfl's own judgement and passes unchanged.
    """

    def __init__(self, function: Any, path: str, timeout: float | None = None) -> None:
        self.function, self.path, self.timeout = function, path, timeout
        self.__name__ = getattr(function, "__name__", "function")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the user's function; what it raises, as a :class:`UserCodeError`."""
        with _CtrlC() as ctrl_c, _Alarm(self.timeout, self.path) as timed:
            try:
                out = self.function(*args, **kwargs)
            except (ConfigError, UserCodeError):
                raise
            except UserCodeTimeout as exc:
                if not timed():
                    raise  # an outer call's timer
                raise UserCodeError.raised(
                    "model.source", self.path, exc, what=f"did not return within "
                    f"model.timeout = {self.timeout:g} s (stopped)",
                ) from None  # fmt: skip
            except KeyboardInterrupt as exc:
                if ctrl_c():
                    raise  # the user pressed Ctrl-C: an interrupt like any other
                raise UserCodeError.raised("model.source", self.path, exc) from exc
            except (Exception, SystemExit) as exc:
                raise UserCodeError.raised("model.source", self.path, exc) from exc
        self.timeout = None  # only the first call is timed
        return out


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class _CtrlC:
    """Within the block, remember whether SIGINT (Ctrl-C) arrived; ``()`` says so.

    Main thread only (elsewhere SIGINT never raises); the handler that was installed
    runs as before (Python's raises ``KeyboardInterrupt``).
    """

    def __enter__(self) -> Any:
        self.seen, self.previous = False, None
        if _main_thread():
            previous = signal.getsignal(signal.SIGINT)

            def handler(signum: int, frame: Any) -> None:
                self.seen = True
                if callable(previous):
                    previous(signum, frame)
                elif previous == signal.SIG_DFL:
                    signal.default_int_handler(signum, frame)

            self.previous = previous
            signal.signal(signal.SIGINT, handler)
        return lambda: self.seen

    def __exit__(self, *exc: Any) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


class _Alarm:
    """Raise :class:`UserCodeTimeout` in the block after ``seconds`` (main thread).

    ``()`` says whether this timer fired. Once due, the timer ticks every
    :data:`TICK` seconds and raises at the first tick that finds the user's own code
    running (not, say, a garbage-collector callback, where the exception would be lost),
    or after :data:`TICKS` ticks wherever the code is; then again at every tick that finds
    the user's code running (code that swallows the exception does not outlast it).
    Nothing when ``seconds`` is None, off the main thread, or while another timer (an
    outer call's, the caller's) is set.
    """

    def __init__(self, seconds: float | None, path: str) -> None:
        self.seconds, self.path = seconds, os.path.abspath(path)
        self.fired, self.armed, self.ticks = False, False, 0

    def __enter__(self) -> Any:
        free = signal.getitimer(signal.ITIMER_REAL)[0] == 0
        if self.seconds is not None and _main_thread() and free:
            self.previous = signal.signal(signal.SIGALRM, self._tick)
            signal.setitimer(signal.ITIMER_REAL, self.seconds, TICK)
            self.armed = True
        return lambda: self.fired

    def _tick(self, signum: int, frame: Any) -> None:
        self.ticks += 1
        mine = frame is not None and os.path.abspath(frame.f_code.co_filename) == self.path
        if mine or (not self.fired and self.ticks > TICKS):
            self.fired = True
            raise UserCodeTimeout

    def __exit__(self, *exc: Any) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)


#: Seconds between the ticks of a due :class:`_Alarm`, and the ticks before it raises anywhere.
TICK, TICKS = 0.05, 40


def _user_module(path: str, timeout: float | None = None) -> Any:
    """Import the user's file ``path`` (not registered in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(f"pgfl_user_model_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    UserFunction(spec.loader.exec_module, path, timeout)(module)
    return module


def load_custom(
    source: str,
    features: int,
    classes: int,
    rng: np.random.Generator,
    *,
    rho: float = 0.0,
    timeout: float | None = None,
) -> JaxProblem:
    """The user's model of ``model.source = "FILE.py:FUNCTION"`` as a problem.

    ``FUNCTION(features, classes, rng)`` returns ``(loss, params, predict)`` (``predict``
    may be ``None``), a :class:`JaxProblem` or a PyTorch model as a
    :class:`~pgfl.models.torch_adapter.TorchProblem`; ``rng`` is the run's ``model`` stream (the
    contract: docs/models.md, "A model in a configuration"). Every call into the file goes
    through :class:`UserFunction`: an exception raised by the user's code is a
    :class:`~pgfl.validation.UserCodeError` naming the file and line, and each one's first
    call may run ``timeout`` seconds (``model.timeout``).
    """
    path, sep, name = source.rpartition(":")
    if not sep or not path.endswith(".py") or not name.isidentifier():
        raise ConfigError(f"model.source must read 'FILE.py:FUNCTION'; got {source!r}")
    if not Path(path).is_file():
        raise ConfigError(f"model.source: file not found: {path}")
    make = getattr(_user_module(path, timeout), name, None)
    if not callable(make):
        raise ConfigError(f"model.source: {path} has no function {name!r}")
    out = UserFunction(make, path, timeout)(features, classes, rng)
    user = lambda f: None if f is None else UserFunction(f, path, timeout)  # noqa: E731
    if callable(getattr(out, "rebuilt", None)):  # a TorchProblem (pgfl[torch]): the run's rho
        return out.rebuilt(rho, user)
    if isinstance(out, JaxProblem):
        return JaxProblem(
            user(out.loss),
            out._params,
            rho,
            predict=user(out.predict),
            name=out.name,
            sample_norms=user(out.sample_norms),
            check_norms=out.check_norms,
            model_chunk=out.model_chunk,
        )
    if not isinstance(out, tuple) or len(out) != 3:
        raise ConfigError(
            f"model.source: {name}(features, classes, rng) must return (loss, params, predict), "
            f"a JaxProblem or a TorchProblem; got {type(out).__name__}"
        )
    loss, params, predict = out
    return JaxProblem(user(loss), params, rho, predict=user(predict), name=f"custom:{name}")


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
    layers = len(hidden) + 1
    f = logits_fn(kind, activation=activation, layers=layers)
    norms = sample_norms_fn(kind, activation=activation, layers=layers)
    return JaxProblem(
        cross_entropy(f),
        params,
        rho,
        predict=f,
        name=kind,
        sample_norms=norms,
        check_norms=False,  # tests/models/test_jax_local.py checks them against vmap(grad)
    )
