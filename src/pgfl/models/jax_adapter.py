"""JAX adapter (extra ``pgfl[jax]``): any differentiable ``loss(params, x, y)`` as a problem.

The user gives a per-sample loss ``ℓ(params; x, y)`` over a parameter pytree and the
initial parameters; pgfl

1. flattens the pytree into one float64 vector ``w`` of size ``M``
   (``jax.flatten_util.ravel_pytree``; float64 via ``jax_enable_x64``);
2. builds the mini-batch gradient of ``Q = ℓ + ρ‖w‖²`` that the local phase needs
   ("Privatized Graph Federated Learning", Rizk, Vlaski & Sayed, arXiv:2203.07105, eq. 3)
   with ``jax.grad`` and ``jax.vmap`` over curves and clients: unclipped, the gradient of
   the weighted batch loss ``Σ_b weight_b ℓ_b`` plus ``2ρw``; clipped, the per-sample
   gradients ``g_b = ∇ℓ_b + 2ρw`` by vmapping ``jax.grad`` over the samples (as DP-SGD
   does, Abadi et al., arXiv:1607.00133, Algorithm 1), each scaled by
   ``min(1, B / ‖g_b‖)``, then summed with the weights — model after model inside one
   compiled ``jax.lax.map`` (on CPU, vmapping per-sample gradients over models with
   their own weights was 5-15x slower than this loop);
3. compiles each with ``jax.jit`` once per shape (the number of clients in a call is
   rounded up to one of 8 sizes per octave, so a run compiles a handful of shapes), on CPU.

Test metrics evaluate ``loss`` (and ``predict``, if given) for many models at once, in
fixed-size chunks of models (one compiled shape).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from pgfl.extras import require
from pgfl.models import check_initial
from pgfl.problems import RHO
from pgfl.validation import ConfigError

__all__ = ["JaxProblem", "jax_module"]

#: Models evaluated together by the test metrics (one compiled shape).
EVAL_CHUNK = 256


def jax_module(feature: str = "a JAX model"):
    """``jax`` with float64 enabled, or :class:`~pgfl.extras.MissingExtra` naming ``pgfl[jax]``."""
    jax = require("jax", "jax", feature)
    jax.config.update("jax_enable_x64", True)
    return jax


def _bucket(n: int) -> int:
    """``n`` rounded up to one of 8 sizes per octave (≤ 12.5% padding, few compiled shapes).

    >>> [_bucket(n) for n in (1, 7, 8, 9, 24, 25, 1000)]
    [1, 7, 8, 9, 24, 26, 1024]
    """
    n = max(1, int(n))
    step = 1 << max(0, n.bit_length() - 4)
    return -(-n // step) * step


class JaxProblem:
    """A per-sample JAX loss over a parameter pytree, as a GFL problem (see :mod:`pgfl.models`).

    Args:
        loss: ``loss(params, x, y) -> scalar``: the loss of one sample ``x [F]`` with
            target ``y`` (a float scalar; class indices arrive as floats), without the
            regularizer.
        params: the initial parameters (any pytree of arrays); every server starts there.
        rho: the regularization ``ρ`` of ``Q = ℓ + ρ‖w‖²``.
        predict: optional ``predict(params, x) -> scores [classes]``; the predicted label
            is the argmax (makes the problem a classifier with a test error).
        name: shown in summaries.

    Least squares in JAX equals the closed-form numpy gradient:

    >>> import jax.numpy as jnp
    >>> from pgfl.problems import LeastSquares
    >>> p = JaxProblem(lambda q, x, y: (y - x @ q["w"]) ** 2, {"w": np.zeros(2)}, rho=0.1)
    >>> r = np.random.default_rng(0); W = r.normal(size=(2, 3)); U = r.normal(size=(5, 2))
    >>> d = r.normal(size=5); wt = np.full(5, 0.2)
    >>> bool(np.allclose(p.gradient(W, U, d, wt), LeastSquares(0.1).gradient(W, U, d, wt)))
    True

    """

    classifier: bool

    def __init__(
        self,
        loss: Callable[..., Any],
        params: Any,
        rho: float = 0.0,
        *,
        predict: Callable[..., Any] | None = None,
        name: str = "jax_model",
    ) -> None:
        jax = jax_module()
        from jax.flatten_util import ravel_pytree

        self.rho = RHO.check(rho)
        self.loss, self.predict, self.name = loss, predict, name
        self.classifier = predict is not None
        leaves = jax.tree_util.tree_map(lambda a: np.asarray(a, dtype=np.float64), params)
        flat, self._unravel = ravel_pytree(leaves)
        self.initial = check_initial(np.asarray(flat))
        self._params = leaves
        self._checked: dict[int, int] = {}
        self._compile(jax)

    # ------------------------------------------------------------------ compiled pieces
    def _compile(self, jax) -> None:
        jnp = jax.numpy
        unravel, loss, rho, predict = self._unravel, self.loss, self.rho, self.predict

        def flat_loss(w, x, y):
            return loss(unravel(w), x, y)

        def batch_grad(w, X, Y, wt):  # gradient of the weighted batch loss, [M]
            return jax.grad(lambda v: jnp.dot(wt, jax.vmap(flat_loss, (None, 0, 0))(v, X, Y)))(w)

        def clipped_grad(w, X, Y, wt, clip):  # Σ_b wt_b clip(∇ℓ_b + 2ρw), [M]
            G = jax.vmap(jax.grad(flat_loss), (None, 0, 0))(w, X, Y) + (2.0 * rho) * w
            norm = jnp.sqrt(jnp.maximum(jnp.sum(G * G, axis=-1), 1e-300))
            return (jnp.minimum(1.0, clip / norm) * wt) @ G

        # W [n, C, M]; data [n, B, ...]. Unclipped: one batched (vmapped) gradient of the
        # weighted batch losses. Clipped: per-sample gradients materialize [B, M] per model;
        # XLA's CPU batched products of per-model weights are slow, so the models (client ×
        # curve) run one after the other inside one compiled loop (lax.map), each with its
        # samples vmapped.
        plain = jax.vmap(jax.vmap(batch_grad, (0, None, None, None)), (0, 0, 0, 0))

        # the engine's layout W [n, M, C] goes in and out; the transposes run inside XLA
        def plain_nmc(W, X, Y, wt):
            Wt = jnp.swapaxes(W, 1, 2)
            return jnp.swapaxes(plain(Wt, X, Y, wt) + (2.0 * rho) * Wt, 1, 2)

        self._plain = jax.jit(plain_nmc)

        def clipped(W, X, Y, wt, clip):  # W [n, M, C], clip [C] -> [n, M, C]
            n, M, C = W.shape
            W = jnp.swapaxes(W, 1, 2)
            rep = lambda a: jnp.repeat(a, C, axis=0)  # noqa: E731  (n·C, ...) model-major
            xs = (W.reshape(n * C, M), rep(X), rep(Y), rep(wt), jnp.tile(clip, n))
            out = jax.lax.map(lambda t: clipped_grad(*t), xs)
            return jnp.swapaxes(out.reshape(n, C, M), 1, 2)

        self._clipped = jax.jit(clipped)
        self._per_sample = jax.jit(jax.vmap(jax.grad(flat_loss), (None, 0, 0)))

        def losses(Wm, X, Y):  # [m, n]
            return jax.vmap(lambda w: jax.vmap(flat_loss, (None, 0, 0))(w, X, Y))(Wm)

        self._losses = jax.jit(losses)
        if predict is not None:

            def wrong(Wm, X, Y):  # [m, n] misclassified
                def one(w):
                    scores = jax.vmap(lambda x: predict(unravel(w), x))(X)
                    return jnp.argmax(scores, axis=-1) != Y.astype(jnp.int64)

                return jax.vmap(one)(Wm)

            self._wrong = jax.jit(wrong)
        self._flat_loss = flat_loss

    def __reduce__(self):
        """Rebuilt (and recompiled) from its arguments when pickled (Ray workers)."""
        rebuild = partial(JaxProblem, predict=self.predict, name=self.name)
        return (rebuild, (self.loss, self._params, self.rho))

    # ---------------------------------------------------------------------- interface
    def dim(self, features: int) -> int:
        """``M``; checks once per ``features`` that the loss of one sample is a scalar."""
        if features not in self._checked:
            jax = jax_module()
            w = jax.ShapeDtypeStruct(self.initial.shape, np.float64)
            x = jax.ShapeDtypeStruct((int(features),), np.float64)
            y = jax.ShapeDtypeStruct((), np.float64)
            try:
                out = jax.eval_shape(self._flat_loss, w, x, y)
            except Exception as exc:  # the user's function fails on this sample shape
                raise ConfigError(
                    f"model loss(params, x, y) fails on a sample of {features} features: "
                    f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                ) from None
            if getattr(out, "shape", None) != ():
                shape = getattr(out, "shape", type(out).__name__)
                raise ConfigError(
                    f"model loss(params, x, y) must return a scalar per sample; got shape {shape}"
                )
            self._checked[features] = self.initial.size
        return self.initial.size

    def unravel(self, w: np.ndarray) -> Any:
        """The parameter pytree of a flat vector ``w [M]``."""
        return self._unravel(np.asarray(w, dtype=np.float64))

    def gradient(self, W, U, d, weight, clip_norm=None) -> np.ndarray:
        """The mini-batch gradient (see :mod:`pgfl.models`): ``W [..., M, C]`` → ``[..., M, C]``."""
        lead = W.shape[:-2]
        M, C = W.shape[-2:]
        B, F = U.shape[-2:]
        n = int(np.prod(lead, dtype=np.int64))
        pad = _bucket(n) - n  # padded clients: zero data, zero weights, results dropped

        def padded(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
            a = np.asarray(a, dtype=np.float64).reshape(n, *shape)
            return a if pad == 0 else np.concatenate([a, np.zeros((pad, *shape))])

        args = (padded(W, (M, C)), padded(U, (B, F)), padded(d, (B,)), padded(weight, (B,)))
        if clip_norm is None:
            G = self._plain(*args)
        else:
            clip = np.broadcast_to(np.asarray(clip_norm, dtype=np.float64), (C,))
            G = self._clipped(*args, clip)
        return np.asarray(G)[:n].reshape(W.shape)

    def sample_gradients(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per-sample loss gradients ``∇ℓ(w; x_b, y_b)`` for one model ``w [M]``: ``[B, M]``."""
        return np.asarray(self._per_sample(np.asarray(w, float), X, y))

    def optimum(self, data) -> None:
        """No closed form for a general model: ``None`` (MSD metrics are not reported)."""
        return None

    def _chunked(self, fn, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        w = np.asarray(w, dtype=np.float64)
        flat = w.reshape(-1, w.shape[-1])
        m = flat.shape[0]
        chunk = EVAL_CHUNK  # one shape: a model's value does not depend on how many share the call
        out = np.empty((m, X.shape[0]))
        for s in range(0, m, chunk):
            part = np.zeros((chunk, flat.shape[1]))
            k = min(chunk, m - s)
            part[:k] = flat[s : s + k]
            part[k:] = self.initial  # finite padding
            out[s : s + k] = np.asarray(fn(part, X, y))[:k]
        return out.reshape(*w.shape[:-1], X.shape[0])

    def test_loss(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Mean per-sample loss (no regularizer) of models ``w [..., M]`` → ``[...]``."""
        return self._chunked(self._losses, w, X, y).mean(axis=-1)

    def test_error(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Fraction of test samples whose argmax score differs from the label ``y``."""
        if self.predict is None:
            raise ConfigError(f"test error needs a predict function; model {self.name} has none")
        return self._chunked(self._wrong, w, X, y).mean(axis=-1)
