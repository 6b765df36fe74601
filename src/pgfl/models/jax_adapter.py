"""JAX adapter (extra ``pgfl[jax]``): any differentiable ``loss(params, x, y)`` as a problem.

The user gives a per-sample loss ``ℓ(θ; x, y)`` over a parameter pytree and the initial
parameters; pgfl flattens the pytree into one float64 vector ``w`` of size ``M``
(``jax.flatten_util.ravel_pytree``; float64 via ``jax_enable_x64``) and builds what the
clients' local phase needs ("Privatized Graph Federated Learning", Rizk, Vlaski & Sayed,
arXiv:2203.07105, eq. 3): for ``Q = ℓ + ρ‖w‖²`` and a mini-batch ``(x_b, y_b)`` with weights
``ω_b`` (``1/B`` for real samples, 0 for padding),

* unclipped: ``g = ∇_w Σ_b ω_b ℓ(w; x_b, y_b) + 2ρw``;
* clipped at ``B_c`` (DP-SGD, Abadi et al., arXiv:1607.00133, Algorithm 1; the gradient bound
  of the privacy analysis): ``g = Σ_b ω_b · clip(g_b)`` with ``g_b = ∇ℓ_b + 2ρw`` and
  ``clip(v) = v · min(1, B_c / ‖v‖)`` — the mean over the real samples of the clipped
  per-sample gradients;

and a client's local SGD runs ``E`` steps ``w ← w − (μ/E)·g`` on its mini-batches.

Two ways to compute the clipped ``g`` of one model:

* *generic*: the per-sample gradients ``G [B, M]`` by ``jax.vmap(jax.grad(ℓ))``, their norms,
  then ``(ω·s) @ G``;
* *norms hook* (``sample_norms``, e.g. ghost norms of dense layers: Goodfellow,
  arXiv:1510.01799; Li et al., arXiv:2110.05679): the model gives ``n_b = ‖∇ℓ_b‖²`` without
  forming ``G``; with ``c_b = ⟨∇ℓ_b, w⟩`` (one ``jax.jvp`` along ``w``, only if ``ρ > 0``),
  ``‖g_b‖² = n_b + 4ρ c_b + 4ρ²‖w‖²``, the scales ``s_b = ω_b min(1, B_c/‖g_b‖)`` and
  ``g = ∇_w Σ_b s_b ℓ_b + 2ρ (Σ_b s_b) w`` (one ``jax.vjp``: a batch gradient's cost).

Both give the same ``g`` up to rounding (≈ 1e-16 relative). The built-in models
(:mod:`pgfl.models.builtin`) come with a norms hook.

Two ways to run them:

* :meth:`JaxProblem.gradient` — the interface of :mod:`pgfl.models`, called by the engine's
  numpy local phase once per epoch (``W [n, M, C]``: the active clients × the curves); the
  ``n·C`` models run one after the other in one compiled ``jax.lax.map`` (on CPU, XLA's
  batched products of per-model weights were 4-15x slower than this loop), each shape
  compiled once (``n`` rounded up to one of 8 sizes per octave);
* :meth:`JaxProblem.local_models` — the whole local phase of a round in **one** compiled
  call: every sampled client × repetition × curve, all epochs (a ``jax.lax.fori_loop`` of
  ``E_pk`` steps per model, so a client with fewer epochs stops early), the mini-batches
  gathered on the host from the engine's keyed draws. Same arguments and result as
  :func:`pgfl.engine.step.local_models`; the contract is in its docstring.

Test metrics evaluate ``loss`` (and ``predict``, if given) for many models at once, in
fixed-size chunks of ``EVAL_CHUNK`` models (one compiled shape; on CPU a loop over groups of
``EVAL_GROUP``).

Devices: the compiled functions contain no host callbacks; inside a call everything stays
on the device. By default (``model_chunk=None``) the models run one after the other on CPU
and all vmapped together on other backends (one batched step per epoch; the ``fori_loop``
then runs to the largest ``E_pk`` of the batch, the finished models held by a mask). Results
on a GPU equal the CPU's to floating-point tolerance (different kernels, different
summation orders), not bit for bit; on CPU they are the same bits on every run and
whatever the block size. No buffer is donated: every input arrives from numpy each round
and none has the output's shape (a device-resident engine keeping ``W`` on the device
between rounds could donate it).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from pgfl.extras import require
from pgfl.models import check_initial
from pgfl.problems import RHO
from pgfl.validation import ConfigError, UserCodeError

__all__ = ["JaxProblem", "jax_module"]

#: Models evaluated together by the test metrics (one compiled shape).
EVAL_CHUNK = 256
#: On CPU, models vmapped together inside the test metrics' loop over models.
EVAL_GROUP = 8
#: Samples of the one-off check of a ``sample_norms`` hook against ``vmap(grad)``.
NORMS_CHECK_SAMPLES = 5


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
        sample_norms: optional ``sample_norms(params, X [B, F], Y [B]) -> [B]``, the squared
            norms ``‖∇_θ ℓ(θ; x_b, y_b)‖²`` of the per-sample loss gradients (no
            regularizer), computed without forming them (e.g. ghost norms: for a dense layer
            ``z = aW + b`` the sample's share is ``(‖a‖² + 1)·‖∂ℓ/∂z‖²``). With it, clipping
            costs about one batch gradient instead of ``B`` per-sample gradients. It is
            checked once against ``vmap(grad)`` (:meth:`dim`): clipping with wrong norms
            would break the privacy accounting's gradient bound.
        check_norms: ``False`` skips that check (about a second of compilation; the
            built-in models' norms are checked by the test suite instead).
        model_chunk: models (clients × curves) vmapped together per step of the compiled
            loop over models; ``None``: 1 on CPU (fastest there), all of them elsewhere.

    Least squares in JAX equals the closed-form numpy gradient:

    >>> import jax.numpy as jnp
    >>> from pgfl.problems import LeastSquares
    >>> p = JaxProblem(lambda q, x, y: (y - x @ q["w"]) ** 2, {"w": np.zeros(2)}, rho=0.1)
    >>> r = np.random.default_rng(0); W = r.normal(size=(2, 3)); U = r.normal(size=(5, 2))
    >>> d = r.normal(size=5); wt = np.full(5, 0.2)
    >>> bool(np.allclose(p.gradient(W, U, d, wt), LeastSquares(0.1).gradient(W, U, d, wt)))
    True

    With the norms of its per-sample gradients (``‖2(xᵀw − y)x‖²``), clipping agrees too:

    >>> norms = lambda q, X, Y: (2 * (X @ q["w"] - Y)) ** 2 * jnp.sum(X * X, axis=1)
    >>> g = JaxProblem(lambda q, x, y: (y - x @ q["w"]) ** 2, {"w": np.zeros(2)}, rho=0.1,
    ...                sample_norms=norms)
    >>> clip = np.array([0.5, 1.0, 2.0])
    >>> bool(np.allclose(g.gradient(W, U, d, wt, clip),
    ...                  LeastSquares(0.1).gradient(W, U, d, wt, clip), rtol=0, atol=1e-12))
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
        sample_norms: Callable[..., Any] | None = None,
        check_norms: bool = True,
        model_chunk: int | None = None,
    ) -> None:
        jax = jax_module()
        from jax.flatten_util import ravel_pytree  # lazy: jax is optional (extra "jax")

        self.rho = RHO.check(rho)
        self.loss, self.predict, self.name = loss, predict, name
        self.sample_norms, self.check_norms = sample_norms, bool(check_norms)
        if model_chunk is not None and (int(model_chunk) != model_chunk or model_chunk < 1):
            raise ConfigError(
                f"model_chunk must be a positive integer or None; got {model_chunk!r}"
            )
        self.model_chunk = model_chunk
        self.classifier = predict is not None
        leaves = jax.tree_util.tree_map(lambda a: np.asarray(a, dtype=np.float64), params)
        flat, self._unravel = ravel_pytree(leaves)
        self.initial = check_initial(np.asarray(flat))
        self._params = leaves
        self._checked: dict[int, int] = {}
        self._compile(jax)

    # ------------------------------------------------------------------ compiled pieces
    def _chunk(self, jax) -> int:
        """Models per vmapped step of the loop over models: 1 on CPU, 0 (all) elsewhere."""
        if self.model_chunk is not None:
            return int(self.model_chunk)
        return 1 if jax.default_backend() == "cpu" else 0

    def _compile(self, jax) -> None:
        unravel, loss, sample_norms = self._unravel, self.loss, self.sample_norms
        chunk = self._chunk(jax)
        over_models = _model_loop(jax, chunk)

        def flat_loss(w, x, y):
            return loss(unravel(w), x, y)

        plain_grad, clipped_grad = _gradients(jax, flat_loss, unravel, self.rho, sample_norms)
        self._clipped_one = clipped_grad  # one model (tests, benchmarks)
        self._plain, self._clipped = _engine_gradients(jax, plain_grad, clipped_grad, over_models)
        self._local = _local_phase(jax, plain_grad, clipped_grad, over_models)
        self._per_sample = jax.jit(jax.vmap(jax.grad(flat_loss), (None, 0, 0)))
        group = EVAL_GROUP if chunk else 0
        self._losses, wrong = _test_metrics(jax, flat_loss, unravel, self.predict, group)
        if wrong is not None:
            self._wrong = wrong
        self._flat_loss = flat_loss
        if sample_norms is not None:
            self._hook_norms = jax.jit(lambda w, X, Y: sample_norms(unravel(w), X, Y))

    def __reduce__(self):
        """Rebuilt (and recompiled) from its arguments when pickled (Ray workers)."""
        rebuild = partial(
            JaxProblem,
            predict=self.predict,
            name=self.name,
            sample_norms=self.sample_norms,
            check_norms=self.check_norms,
            model_chunk=self.model_chunk,
        )
        return (rebuild, (self.loss, self._params, self.rho))

    # ---------------------------------------------------------------------- interface
    def dim(self, features: int) -> int:
        """``M``; checks once per ``features`` that the loss of one sample is a scalar.

        With a ``sample_norms`` hook (unless ``check_norms=False``), also that its norms
        equal those of ``vmap(grad)`` on a few random samples (``y = 0``) at a perturbed
        initial point.
        """
        if features not in self._checked:
            jax = jax_module()
            w = jax.ShapeDtypeStruct(self.initial.shape, np.float64)
            x = jax.ShapeDtypeStruct((int(features),), np.float64)
            y = jax.ShapeDtypeStruct((), np.float64)
            try:
                out = jax.eval_shape(self._flat_loss, w, x, y)
            except UserCodeError:  # a model.source file's loss: its own file and line
                raise
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
            if self.sample_norms is not None and self.check_norms:
                self._check_norms(int(features))
            self._checked[features] = self.initial.size
        return self.initial.size

    def _check_norms(self, features: int) -> None:
        """One-line :class:`ConfigError` if the hook's norms differ from ``vmap(grad)``'s."""
        rng = np.random.default_rng(0)
        w = self.initial + 0.1 * rng.standard_normal(self.initial.size)
        X = rng.standard_normal((NORMS_CHECK_SAMPLES, features))
        Y = np.zeros(NORMS_CHECK_SAMPLES)
        try:
            got = np.asarray(self._hook_norms(w, X, Y), dtype=np.float64)
        except UserCodeError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"model sample_norms(params, X, Y) fails on {NORMS_CHECK_SAMPLES} samples of "
                f"{features} features: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}"
            ) from None
        G = self.sample_gradients(w, X, Y)
        want = np.einsum("bm,bm->b", G, G)
        if got.shape != want.shape:
            raise ConfigError(
                f"model sample_norms(params, X, Y) must return one squared norm per sample, "
                f"shape ({NORMS_CHECK_SAMPLES},); got shape {got.shape}"
            )
        bad = np.flatnonzero(~np.isclose(got, want, rtol=1e-8, atol=1e-12))
        if bad.size:
            i = bad[0]
            raise ConfigError(
                f"model sample_norms(params, X, Y) must return the squared norms of the "
                f"per-sample loss gradients; got {got[i]:.6g} for sample {i} where "
                f"vmap(grad) gives {want[i]:.6g}"
            )

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

    def local_models(self, W, block, curves, draws, clients) -> np.ndarray:
        """The clients' local SGD of a round (eq. 3) in one compiled call.

        A drop-in for :func:`pgfl.engine.step.local_models` (same arguments, same result up
        to rounding, ≈ 1e-16 relative per step): ``W [C, R, P_b, M]`` (the servers' models
        ``w_{p,i−1}`` per curve and repetition), ``block`` a
        :class:`~pgfl.engine.network.UnitBlock`, ``curves`` a
        :class:`~pgfl.engine.settings.CurveBatch` (``mu [C]``, ``clip [C]`` or ``None``),
        ``draws`` the round's :class:`~pgfl.rng.KeyedDraws`, ``clients [R, P_b, L]`` the
        sampled clients → the local models ``[C, R, P_b, L, M]``.

        Sampled client ``(p, k)`` starts from ``w_{p,i−1}`` and runs ``E_pk`` steps
        ``w ← w − (μ_c/E_pk)·g(w; batch)`` (``g`` of the module docstring, clipped at
        ``clip[c]`` when ``curves.clip`` is given, else unclipped). Epoch ``e``'s mini-batch
        is the ``B_pk`` samples ``⌊u·N_pk⌋``, ``u`` entry ``(l, e, b)`` of
        ``draws.uniform("batches", (L, e_max, b_max))`` for slot ``l`` — the engine's draws,
        so both paths see the same samples; with full batches (``block.batch is None``)
        every epoch uses all ``N_pk`` samples. It reads ``block.data`` (``Xy``, ``counts``),
        ``block.epochs``, ``block.batch``, ``block.e_max``, ``block.b_max``; it draws
        nothing else and changes none of its arguments (a per-block constant is cached
        in ``block.__dict__``).

        One call per round: the ``n = R·P_b·L`` slots (rounded up to one of 8 sizes per
        octave; padded slots run no step) × ``C`` curves, all epochs, so a run compiles
        once per block size.

        Least squares on two units of three clients, two curves (one clipped), against the
        engine's numpy local phase:

        >>> from pgfl.data.federated import FederatedData
        >>> from pgfl.engine import CurveSettings, Network
        >>> from pgfl.engine.settings import CurveBatch
        >>> from pgfl.engine.step import draw_clients, local_models
        >>> from pgfl.rng import KeyedDraws
        >>> r = np.random.default_rng(1)
        >>> data = FederatedData(r.normal(size=(2, 3, 5, 2)), r.normal(size=(2, 3, 5)),
        ...                      np.full((2, 3), 5))
        >>> p = JaxProblem(lambda q, x, y: (y - x @ q["w"]) ** 2, {"w": np.zeros(2)}, 0.1)
        >>> net = Network(data, p, np.full((2, 2), 0.5), 2, np.array([[1, 2, 3]] * 2),
        ...               np.full((2, 3), 4))
        >>> block = net.block()
        >>> draws = KeyedDraws(0, 1, np.arange(1), block.units)
        >>> clients = draw_clients(block, draws)
        >>> curves = CurveBatch.of([CurveSettings(mu=0.2), CurveSettings(mu=0.2, clip_norm=0.5)])
        >>> W = r.normal(size=(2, 1, 2, 2))  # [C, R, P, M]
        >>> got = p.local_models(W, block, curves, draws, clients)
        >>> got.shape, bool(np.allclose(got, local_models(W, block, curves, draws, clients),
        ...                             rtol=0, atol=1e-12))
        ((2, 1, 2, 2, 2), True)
        """
        data = block.data
        P, K, N, F = data.X.shape
        R, _, L = clients.shape
        C, M = W.shape[0], W.shape[-1]
        unit = np.arange(P)[None, :, None]
        E = block.epochs[unit, clients].reshape(-1)  # slots in (r, p, l) order
        n = E.size
        order = np.argsort(-E, kind="stable")  # most epochs first: vmapped chunks finish together
        n_pad = _bucket(n)
        counts = data.counts[unit, clients].reshape(-1)[order]
        base = ((unit * K + clients) * N).reshape(-1)[order]  # a client's first sample
        Z = _flat_samples(block)  # [P·K·N, F + 1]: features and target side by side
        sizes = np.ones(n_pad, dtype=np.int64)
        if block.batch is None:
            rows = (base[:, None] + np.arange(N))[:, None, :]  # [n, 1, N]: every epoch
            sizes[:n] = counts
        else:
            sizes[:n] = block.batch[unit, clients].reshape(-1)[order]
            width = int(block.b_max)
            u = draws.uniform("batches", (L, block.e_max, width)).reshape(n, block.e_max, width)
            rows = base[:, None, None] + (u[order] * counts[:, None, None]).astype(np.int64)
        batch = np.zeros((n_pad, *rows.shape[1:], F + 1))
        np.take(Z, rows, axis=0, out=batch[:n])
        epochs = np.zeros(n_pad, dtype=np.int64)
        epochs[:n] = E[order]
        cell = np.zeros(n_pad, dtype=np.int64)
        cell[:n] = order // L  # slot (r, p, l) starts at the model of unit cell (r, p)
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.arange(n)
        mu = np.asarray(curves.mu, dtype=np.float64)
        clip = None if curves.clip is None else np.asarray(curves.clip, dtype=np.float64)
        start = np.asarray(W, dtype=np.float64).reshape(C, R * P, M)
        out = self._local(start, cell, batch, sizes, epochs, mu, clip, inverse)
        return np.asarray(out).reshape(C, R, P, L, M)

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


def _flat_samples(block) -> np.ndarray:
    """A block's samples ``[P·K·N, F + 1]`` (features, target), cached on the block."""
    cached = block.__dict__.get("_jax_flat_samples")
    if cached is None:
        data = block.data
        cached = np.ascontiguousarray(data.Xy.reshape(-1, data.X.shape[-1] + 1))
        object.__setattr__(block, "_jax_flat_samples", cached)
    return cached


# ------------------------------------------------------------------ compiled functions
def _model_loop(jax, chunk: int):
    """``over_models(one, count)``: ``one(i)`` for i < count, stacked (a loop, chunks or vmap)."""
    jnp, lax = jax.numpy, jax.lax

    def over_models(one, count):
        index = jnp.arange(count)
        if chunk == 0 or chunk >= count:
            return jax.vmap(one)(index)
        return lax.map(one, index, batch_size=None if chunk == 1 else chunk)

    return over_models


def _gradients(jax, flat_loss, unravel, rho, sample_norms):
    """One model's jitted gradients: plain ``∇ Σ_b ω_b ℓ_b + 2ρw`` and per-sample clipped.

    Clipped: ``Σ_b ω_b clip(∇ℓ_b + 2ρw)``, with the per-sample gradients formed, or from a
    ``sample_norms`` hook's ‖∇ℓ_b‖² and one VJP (ghost norms).
    """
    jnp = jax.numpy

    def losses_at(X, Y):  # w -> per-sample losses [B]
        return lambda v: jax.vmap(flat_loss, (None, 0, 0))(v, X, Y)

    def plain_grad(w, X, Y, wt):  # ∇ Σ_b ω_b ℓ_b + 2ρw, [M]
        return jax.vjp(losses_at(X, Y), w)[1](wt)[0] + (2.0 * rho) * w

    def clipped_generic(w, X, Y, wt, clip):  # Σ_b ω_b clip(∇ℓ_b + 2ρw): G [B, M] formed
        G = jax.vmap(jax.grad(flat_loss), (None, 0, 0))(w, X, Y) + (2.0 * rho) * w
        norm = jnp.sqrt(jnp.maximum(jnp.sum(G * G, axis=-1), 1e-300))
        return (jnp.minimum(1.0, clip / norm) * wt) @ G

    def clipped_norms(w, X, Y, wt, clip):  # the same from the hook's ‖∇ℓ_b‖², one VJP
        f = losses_at(X, Y)
        sq = sample_norms(unravel(w), X, Y)
        if rho:  # ‖∇ℓ_b + 2ρw‖² = ‖∇ℓ_b‖² + 4ρ⟨∇ℓ_b, w⟩ + 4ρ²‖w‖²
            cross = jax.jvp(f, (w,), (w,))[1]
            sq = sq + (4.0 * rho) * cross + (4.0 * rho * rho) * jnp.dot(w, w)
        s = jnp.minimum(1.0, clip / jnp.sqrt(jnp.maximum(sq, 1e-300))) * wt
        return jax.vjp(f, w)[1](s)[0] + (2.0 * rho) * jnp.sum(s) * w

    # one model's gradient as its own jitted function, called (inlined) by the loops: XLA
    # then fused the CNN's step 1.5x faster than the same code traced inline
    clipped = jax.jit(clipped_generic if sample_norms is None else clipped_norms)
    return jax.jit(plain_grad), clipped


def _engine_gradients(jax, plain_grad, clipped_grad, over_models):
    """``gradient()``'s compiled calls, the engine's per-epoch layout ``W [n, M, C]``.

    Unclipped: one batched (vmapped) gradient of the weighted batch losses. Clipped: the
    n·C models (client × curve) one after the other in one compiled loop (``chunk``
    models vmapped per step), each model's samples vmapped.
    """
    jnp = jax.numpy
    plain = jax.vmap(jax.vmap(plain_grad, (0, None, None, None)), (0, 0, 0, 0))

    def plain_nmc(W, X, Y, wt):  # the engine's layout in and out; transposes in XLA
        return jnp.swapaxes(plain(jnp.swapaxes(W, 1, 2), X, Y, wt), 1, 2)

    def clipped(W, X, Y, wt, clip):  # W [n, M, C], clip [C] -> [n, M, C]
        n, M, C = W.shape
        Wt = jnp.swapaxes(W, 1, 2)

        def one(i):
            s, c = i // C, i % C
            return clipped_grad(Wt[s, c], X[s], Y[s], wt[s], clip[c])

        out = over_models(one, n * C)
        return jnp.swapaxes(out.reshape(n, C, M), 1, 2)

    return jax.jit(plain_nmc), jax.jit(clipped)


def _local_phase(jax, plain_grad, clipped_grad, over_models):
    """``local_models()``'s compiled call: the whole local phase of a round (module doc)."""
    jnp, lax = jax.numpy, jax.lax

    def local(W, cell, batch, sizes, E, mu, clip, inverse):
        # W [C, U, M] the units' models; slot s starts at W[c, cell[s]] and runs E[s]
        # steps w ← w − (μ_c/E[s])·g on its batch of epoch e, batch[s, e] ([n, E_b, B,
        # F + 1]: features and target; E_b = 1: the same batch every epoch), the first
        # sizes[s] samples weighted 1/sizes[s]. Returns [C, n', M] in the slot order
        # `inverse` ([n'] slots, the padding dropped).
        C, M = W.shape[0], W.shape[2]
        n, B, F = batch.shape[0], batch.shape[2], batch.shape[3] - 1
        per_epoch = batch.shape[1] > 1

        def one(i):
            s, c = i // C, i % C
            wt = (jnp.arange(B) < sizes[s]) / sizes[s]
            step = mu[c] / jnp.maximum(E[s], 1)

            def epoch(e, w):
                Z = batch[s, e if per_epoch else 0]
                X, Y = Z[:, :F], Z[:, F]
                if clip is None:
                    return w - step * plain_grad(w, X, Y, wt)
                return w - step * clipped_grad(w, X, Y, wt, clip[c])

            return lax.fori_loop(0, E[s], epoch, W[c, cell[s]])

        out = over_models(one, n * C).reshape(n, C, M)
        return jnp.swapaxes(out[inverse], 0, 1)

    return jax.jit(local)


def _test_metrics(jax, flat_loss, unravel, predict, group: int):
    """Compiled test losses ``[m, n]`` and misclassifications (``None`` without ``predict``).

    On CPU a loop over groups of ``group`` models (vmapped inside a group) keeps the
    activations in cache: 3-6x faster than vmapping all of them (the CNN's [256 models,
    297, 64, 8] activations are 300 MB); ``group = 0``: all vmapped.
    """
    jnp, lax = jax.numpy, jax.lax

    def over_test_models(one, Wm):
        if group == 0 or group >= Wm.shape[0]:
            return jax.vmap(one)(Wm)
        return lax.map(one, Wm, batch_size=group)

    def losses(Wm, X, Y):  # [m, n]
        return over_test_models(lambda w: jax.vmap(flat_loss, (None, 0, 0))(w, X, Y), Wm)

    if predict is None:
        return jax.jit(losses), None

    def wrong(Wm, X, Y):  # [m, n] misclassified
        def one(w):
            scores = jax.vmap(lambda x: predict(unravel(w), x))(X)
            return jnp.argmax(scores, axis=-1) != Y.astype(jnp.int64)

        return over_test_models(one, Wm)

    return jax.jit(losses), jax.jit(wrong)
