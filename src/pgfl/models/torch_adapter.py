"""PyTorch adapter (extra ``pgfl[torch]``): an ``nn.Module`` and a loss as a GFL problem.

The same contract as the JAX adapter (:mod:`pgfl.models.jax_adapter`, docs/models.md),
through ``torch.func`` (``functional_call``, ``vmap``, ``grad``) as in Opacus' and
PyTorch's per-sample-gradient recipes: the module's parameters (``named_parameters()``,
in registration order, each flattened row-major) are one float64 vector ``w`` of size
``M``; its buffers are constants (as in DP-SGD, a BatchNorm's running statistics would
mix samples: use GroupNorm or LayerNorm). For a sample ``(x, y)`` the per-sample loss is
``ℓ(w; x, y) = loss(model_w(x[None]), y[None])`` ("Privatized Graph Federated
Learning", Rizk, Vlaski & Sayed, arXiv:2203.07105, eq. 3, with ``Q = ℓ + ρ‖w‖²``); for a
mini-batch with weights ``ω_b`` (``1/B`` for real samples, 0 for padding):

* unclipped: ``g = ∇_w Σ_b ω_b ℓ(w; x_b, y_b) + 2ρw`` (one ``grad`` of the weighted sum);
* clipped at ``B_c`` (DP-SGD, Abadi et al., arXiv:1607.00133, Algorithm 1):
  ``g = Σ_b ω_b · clip(∇ℓ_b + 2ρw)``, ``clip(v) = v · min(1, B_c/‖v‖)``, the per-sample
  gradients ``[B, M]`` from ``vmap(grad(ℓ))``.

Batching: the engine's numpy local phase calls :meth:`TorchProblem.gradient` once per
epoch with every active client × curve (``W [n, M, C]``); those ``n·C`` models are
vmapped together (``model_chunk`` at a time), each model's samples vmapped inside, so a
round costs a few vectorized calls whatever the number of clients. The test metrics
evaluate many models at once the same way. Results are the same bits on every run (CPU,
float64); against the JAX adapter on the same model, data and draws they agree to
floating-point tolerance (different kernels, different summation orders):
``tests/models/test_torch_adapter.py`` and ``benchmarks/bench_torch_jax.py`` measure how
far, on the digits MLP.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from pgfl.extras import require
from pgfl.models import check_initial
from pgfl.problems import RHO
from pgfl.validation import ConfigError, UserCodeError

__all__ = ["TorchProblem", "torch_module"]

#: Models evaluated together by the test metrics.
EVAL_CHUNK = 64


def torch_module(feature: str = "a PyTorch model"):
    """``torch``, or :class:`~pgfl.extras.MissingExtra` naming ``pgfl[torch]``."""
    return require("torch", "torch", feature)


class TorchProblem:
    """A PyTorch model and loss as a GFL problem (see :mod:`pgfl.models`).

    Args:
        model: an ``nn.Module`` (copied, in float64); its parameters are what GFL learns
            and every server starts from their current values.
        loss: ``loss(outputs, targets) -> scalar``, called on a batch of one sample:
            ``outputs = model(x[None])``, ``targets`` a float tensor of shape ``[1]``
            (class indices arrive as floats: ``F.cross_entropy(out, y.long())``); the
            loss without the regularizer.
        rho: the regularization ``ρ`` of ``Q = ℓ + ρ‖w‖²``.
        classifier: the model's outputs are class scores: the predicted label is their
            argmax, and the problem has a test error.
        name: shown in summaries.
        model_chunk: models (clients × curves) vmapped together per call; ``None``: all
            of them (a bound on memory: ``n·C·B·M`` per-sample gradients when clipping).

    Least squares in PyTorch equals the closed-form numpy gradient, clipped or not:

    >>> import torch
    >>> from pgfl.problems import LeastSquares
    >>> lin = torch.nn.Linear(2, 1, bias=False)
    >>> p = TorchProblem(lin, lambda out, y: ((y - out[:, 0]) ** 2).sum(), rho=0.1,
    ...                  classifier=False)
    >>> r = np.random.default_rng(0); W = r.normal(size=(2, 3)); U = r.normal(size=(5, 2))
    >>> d = r.normal(size=5); wt = np.full(5, 0.2); clip = np.array([0.5, 1.0, 2.0])
    >>> bool(np.allclose(p.gradient(W, U, d, wt), LeastSquares(0.1).gradient(W, U, d, wt)))
    True
    >>> bool(np.allclose(p.gradient(W, U, d, wt, clip),
    ...                  LeastSquares(0.1).gradient(W, U, d, wt, clip), rtol=0, atol=1e-12))
    True

    """

    def __init__(
        self,
        model: Any,
        loss: Callable[..., Any],
        rho: float = 0.0,
        *,
        classifier: bool = True,
        name: str = "torch_model",
        model_chunk: int | None = None,
    ) -> None:
        torch = torch_module()
        if not isinstance(model, torch.nn.Module):
            raise ConfigError(f"TorchProblem needs a torch.nn.Module; got {type(model).__name__}")
        if model_chunk is not None and (int(model_chunk) != model_chunk or model_chunk < 1):
            raise ConfigError(
                f"model_chunk must be a positive integer or None; got {model_chunk!r}"
            )
        self.rho = RHO.check(rho)
        self.loss, self.classifier, self.name = loss, bool(classifier), name
        self.model_chunk = model_chunk
        self.model = copy.deepcopy(model).to(torch.float64)
        named = list(self.model.named_parameters())
        if not named:
            raise ConfigError("TorchProblem: the model has no parameters to learn")
        self._names = [n for n, _ in named]
        self._shapes = [tuple(p.shape) for _, p in named]
        self._sizes = [int(p.numel()) for _, p in named]
        self._buffers = {n: b.detach() for n, b in self.model.named_buffers()}
        flat = torch.cat([p.detach().reshape(-1) for _, p in named])
        self.initial = check_initial(flat.numpy())
        self._checked: dict[int, int] = {}
        self._compile(torch)

    def __reduce__(self):
        """Rebuilt from its arguments when pickled (Ray workers)."""
        rebuild = partial(
            TorchProblem, classifier=self.classifier, name=self.name, model_chunk=self.model_chunk
        )
        return (rebuild, (self.model, self.loss, self.rho))

    def rebuilt(self, rho: float, wrap: Callable[[Any], Any]) -> TorchProblem:
        """The same model with the run's ``rho`` and its loss wrapped (``model.source``)."""
        return TorchProblem(
            self.model, wrap(self.loss), rho, classifier=self.classifier, name=self.name,
            model_chunk=self.model_chunk,
        )  # fmt: skip

    # ------------------------------------------------------------------ torch.func pieces
    def _compile(self, torch) -> None:
        from torch.func import functional_call, grad, vmap  # lazy: inside torch

        model, loss, buffers, rho = self.model, self.loss, self._buffers, self.rho
        names, shapes, sizes = self._names, self._shapes, self._sizes

        def unflat(w):
            parts = torch.split(w, sizes)
            return {n: p.reshape(s) for n, p, s in zip(names, parts, shapes, strict=True)}

        def outputs(w, x):  # the model's outputs for one sample, [1, ...]
            return functional_call(model, (unflat(w), buffers), (x.unsqueeze(0),))

        def sample_loss(w, x, y):
            return loss(outputs(w, x), y.unsqueeze(0)).reshape(())

        batch_losses = vmap(sample_loss, in_dims=(None, 0, 0))
        per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))

        def plain(w, X, Y, wt):  # ∇ Σ_b ω_b ℓ_b + 2ρw
            return grad(lambda v: (batch_losses(v, X, Y) * wt).sum())(w) + (2.0 * rho) * w

        def clipped(w, X, Y, wt, clip):  # Σ_b ω_b clip(∇ℓ_b + 2ρw), ∇ℓ_b + 2ρw not formed
            G = per_sample(w, X, Y)  # [B, M]: the one large array
            sq = torch.linalg.vector_norm(G, dim=-1) ** 2
            if rho:  # ‖∇ℓ_b + 2ρw‖² = ‖∇ℓ_b‖² + 4ρ⟨∇ℓ_b, w⟩ + 4ρ²‖w‖²
                sq = sq + (4.0 * rho) * (G @ w) + (4.0 * rho * rho) * (w @ w)
            s = torch.clamp(clip / torch.sqrt(torch.clamp(sq, min=1e-300)), max=1.0) * wt
            return s @ G + (2.0 * rho) * s.sum() * w

        # models (clients × curves) vmapped: one model's W, the client's batch, its clip
        self._plain = vmap(plain, in_dims=(0, 0, 0, 0))
        self._clipped = vmap(clipped, in_dims=(0, 0, 0, 0, 0))
        self._per_sample = per_sample
        self._sample_loss = sample_loss
        self._test_losses = vmap(batch_losses, in_dims=(0, None, None))
        scores = vmap(vmap(lambda w, x: outputs(w, x)[0], in_dims=(None, 0)), in_dims=(0, None))
        self._scores = scores
        self._torch = torch

    def _tensor(self, a: Any) -> Any:
        return self._torch.as_tensor(np.ascontiguousarray(a, dtype=np.float64))

    def _calling(self, what: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` under no autograd tape; an error of the user's code passes as it is."""
        with self._torch.no_grad():
            try:
                return fn()
            except (UserCodeError, ConfigError):
                raise
            except RuntimeError as exc:
                first = str(exc).splitlines()[0] if str(exc) else ""
                raise ConfigError(f"PyTorch model {self.name}: {what} failed: {first}") from exc

    # ---------------------------------------------------------------------- interface
    def dim(self, features: int) -> int:
        """``M``; checks once per ``features`` that the loss of one sample is a scalar."""
        if features not in self._checked:
            x = self._torch.zeros(int(features), dtype=self._torch.float64)
            y = self._torch.zeros((), dtype=self._torch.float64)
            w = self._tensor(self.initial)
            try:
                with self._torch.no_grad():
                    loss = self.loss(self._outputs_one(w, x), y.unsqueeze(0))
            except UserCodeError:
                raise
            except Exception as exc:
                raise ConfigError(
                    f"model loss(outputs, targets) fails on a sample of {features} features: "
                    f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                ) from None
            if getattr(loss, "numel", lambda: 0)() != 1:
                shape = tuple(getattr(loss, "shape", ())) or type(loss).__name__
                raise ConfigError(
                    f"model loss(outputs, targets) must return a scalar per sample; got {shape}"
                )
            self._checked[features] = self.initial.size
        return self.initial.size

    def _outputs_one(self, w: Any, x: Any) -> Any:
        from torch.func import functional_call  # lazy: inside torch

        params = dict(zip(self._names, self._torch.split(w, self._sizes), strict=True))
        params = {n: p.reshape(s) for (n, p), s in zip(params.items(), self._shapes, strict=True)}
        return functional_call(self.model, (params, self._buffers), (x.unsqueeze(0),))

    def gradient(self, W, U, d, weight, clip_norm=None) -> np.ndarray:
        """The mini-batch gradient (see :mod:`pgfl.models`): ``W [..., M, C]`` → ``[..., M, C]``."""
        lead = W.shape[:-2]
        M, C = W.shape[-2:]
        B, F = U.shape[-2:]
        n = int(np.prod(lead, dtype=np.int64))
        Wt = np.swapaxes(np.asarray(W, dtype=np.float64).reshape(n, M, C), 1, 2).reshape(n * C, M)
        rep = lambda a, shape: np.repeat(np.asarray(a, float).reshape(n, *shape), C, axis=0)  # noqa: E731
        X, Y, wt = rep(U, (B, F)), rep(d, (B,)), rep(weight, (B,))
        clip = None
        if clip_norm is not None:
            clip = np.tile(np.broadcast_to(np.asarray(clip_norm, dtype=np.float64), (C,)), n)
        out = np.empty((n * C, M))
        step = self.model_chunk or n * C
        for s in range(0, n * C, step):
            part = slice(s, min(s + step, n * C))
            args = [self._tensor(a[part]) for a in (Wt, X, Y, wt)]
            if clip is None:
                G = self._calling("the gradient", lambda a=args: self._plain(*a))
            else:
                c = self._tensor(clip[part])
                G = self._calling("the clipped gradient", lambda a=args, c=c: self._clipped(*a, c))
            out[part] = G.numpy()
        return np.swapaxes(out.reshape(n, C, M), 1, 2).reshape(W.shape)

    def sample_gradients(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per-sample loss gradients ``∇ℓ(w; x_b, y_b)`` for one model ``w [M]``: ``[B, M]``."""
        args = (self._tensor(w), self._tensor(X), self._tensor(y))
        return self._calling("per-sample gradients", lambda: self._per_sample(*args)).numpy()

    def optimum(self, data) -> None:
        """No closed form for a general model: ``None`` (MSD metrics are not reported)."""
        return None

    def _chunked(self, fn: Callable[..., Any], w: np.ndarray, X, y) -> np.ndarray:
        """``fn(models [m, M], X, y) → [m, n]`` for models ``w [..., M]``, in chunks."""
        w = np.asarray(w, dtype=np.float64)
        flat = w.reshape(-1, w.shape[-1])
        Xt, yt = self._tensor(X), self._tensor(y)
        out = np.empty((flat.shape[0], X.shape[0]))
        for s in range(0, flat.shape[0], EVAL_CHUNK):
            part = self._tensor(flat[s : s + EVAL_CHUNK])
            metric = lambda p=part: fn(p, Xt, yt)  # noqa: E731
            out[s : s + EVAL_CHUNK] = self._calling("the test metrics", metric)
        return out.reshape(*w.shape[:-1], X.shape[0])

    def test_loss(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Mean per-sample loss (no regularizer) of models ``w [..., M]`` → ``[...]``."""
        return self._chunked(lambda p, X, y: self._test_losses(p, X, y).numpy(), w, X, y).mean(-1)

    def test_error(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Fraction of test samples whose argmax score differs from the label ``y``."""
        if not self.classifier:
            raise ConfigError(f"test error needs a classifier; model {self.name} is not one")

        def wrong(p, X, y):
            predicted = self._scores(p, X).argmax(dim=-1)
            return (predicted != y.long()).to(self._torch.float64).numpy()

        return self._chunked(wrong, w, X, y).mean(axis=-1)
