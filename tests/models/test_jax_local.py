"""The fused local phase of JAX models (``JaxProblem.local_models``) and the norms hook.

Every expected value comes from an independent computation: a plain Python loop over
slots, curves and epochs that reads the mini-batches from the keyed draws as the contract
says and clips per-sample gradients formed by ``vmap(grad)`` in numpy
(:func:`_reference_local`), the engine's own numpy local phase
(:func:`pgfl.engine.step.local_models`, one ``gradient`` call per epoch), or the squared
norms of per-sample gradients formed by ``vmap(grad)``.
"""

import functools
import hashlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("jax")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from pgfl.data.federated import FederatedData  # noqa: E402
from pgfl.engine import CurveSettings, Network, simulate  # noqa: E402
from pgfl.engine.compiled import local_phase_kind
from pgfl.engine.settings import CurveBatch  # noqa: E402
from pgfl.engine.step import draw_clients, local_models  # noqa: E402
from pgfl.models.builtin import build_model, sample_norms_fn  # noqa: E402
from pgfl.models.jax_adapter import JaxProblem  # noqa: E402
from pgfl.privacy.mechanisms import GraphHomomorphic, RandomNoise
from pgfl.rng import KeyedDraws  # noqa: E402
from pgfl.validation import ConfigError  # noqa: E402

F, CLASSES = 64, 10  # 8×8 images: every built-in model (the CNN too) reads them


def _data(seed=0, P=3, K=4):
    rng = np.random.default_rng(seed)
    counts = rng.integers(3, 9, (P, K))
    N = int(counts.max())
    X = rng.uniform(0, 1, (P, K, N, F))
    y = rng.integers(0, CLASSES, (P, K, N)).astype(float)
    mask = np.arange(N) < counts[..., None]
    X, y = X * mask[..., None], y * mask  # padding rows are zeros, as the loaders make them
    return FederatedData(X, y, counts, X[0, 0], y[0, 0])


def _huber_net(params, x, y):  # a user's loss with no norms hook: the generic path
    h = jnp.tanh(x @ params["a"] + params["c"])
    r = h @ params["v"] - y / CLASSES
    return jnp.where(jnp.abs(r) < 0.5, r * r, jnp.abs(r) - 0.25)


def _huber_problem(rho):
    rng = np.random.default_rng(3)
    params = {"a": rng.normal(0, 0.2, (F, 6)), "c": np.zeros(6), "v": rng.normal(0, 0.3, 6)}
    return JaxProblem(_huber_net, params, rho, name="huber")


MODELS = {
    "softmax": lambda rho: build_model("softmax", F, CLASSES, np.random.default_rng(1), rho=rho),
    "mlp": lambda rho: build_model(
        "mlp", F, CLASSES, np.random.default_rng(1), rho=rho, hidden=(16, 8), activation="tanh"
    ),
    "cnn": lambda rho: build_model(
        "cnn", F, CLASSES, np.random.default_rng(1), rho=rho, channels=3, activation="elu"
    ),
    "custom": _huber_problem,
}


@functools.cache
def _problem(model, rho):  # shared between tests: compiled once per shape
    return MODELS[model](rho)


CLIPS = {"none": None, "all": 0.5, "mixed": [0.3, np.inf, 2.0]}


def _curves(clip):
    clips = [None] * 3 if clip is None else np.broadcast_to(np.asarray(clip, float), (3,))
    return CurveBatch.of(
        [
            CurveSettings(mu=mu, clip_norm=np.inf if c is None else float(c))
            for mu, c in zip((0.3, 0.5, 0.2), clips, strict=True)
        ]
    )


def _network(problem, full_batch=False, seed=0):
    data = _data(seed)
    P, K = data.counts.shape
    rng = np.random.default_rng(seed + 10)
    epochs = rng.integers(1, 4, (P, K))  # unequal: clients stop at different epochs
    batch = None if full_batch else rng.integers(2, 6, (P, K))
    return Network(data, problem, np.full((P, P), 1 / P), 2, epochs, batch)


def _round(net, curves, R=2, seed=7, iteration=3, start=0, stop=None):
    block = net.block(start, stop)
    draws = KeyedDraws(seed, iteration, np.arange(R), block.units)
    clients = draw_clients(block, draws)
    rng = np.random.default_rng(seed)
    P_b = block.size
    W = net.problem.initial + 0.3 * rng.standard_normal((len(curves), R, P_b, net.dim))
    return W, block, draws, clients


def _reference_local(problem, W, block, curves, draws, clients):
    """The contract of local_models, client by client, curve by curve, epoch by epoch."""
    data = block.data
    C, R, P, M = W.shape
    L = clients.shape[2]
    rho = problem.rho
    if block.batch is not None:
        u = draws.uniform("batches", (L, block.e_max, block.b_max))
    out = np.empty((C, R, P, L, M))
    for r in range(R):
        for p in range(P):
            for slot, k in enumerate(clients[r, p]):
                E, n = int(block.epochs[p, k]), int(data.counts[p, k])
                for c in range(C):
                    w = W[c, r, p].copy()
                    for e in range(E):
                        if block.batch is None:
                            B, rows = n, np.arange(data.X.shape[2])
                        else:
                            B = int(block.batch[p, k])
                            rows = (u[r, p, slot, e] * n).astype(np.int64)
                        # vmap(grad) on a fixed number of rows (one compiled shape), first B kept
                        X, y = data.X[p, k, rows], data.y[p, k, rows]
                        G = problem.sample_gradients(w, X, y)[:B]  # [B, M]
                        if curves.clip is None:
                            g = G.mean(axis=0) + 2 * rho * w
                        else:
                            G = G + 2 * rho * w
                            norm = np.linalg.norm(G, axis=1)
                            scale = np.minimum(1.0, curves.clip[c] / norm)
                            g = (scale[:, None] * G).mean(axis=0)
                        w -= curves.mu[c] / E * g
                    out[c, r, p, slot] = w
    return out


@pytest.mark.parametrize("clip", list(CLIPS))
@pytest.mark.parametrize("model", list(MODELS))
def test_fused_local_phase_equals_a_plain_loop_and_the_engine(model, clip):
    problem = _problem(model, 0.01)
    net = _network(problem)
    curves = _curves(CLIPS[clip])
    W, block, draws, clients = _round(net, curves)
    got = problem.local_models(W, block, curves, draws, clients)
    want = _reference_local(problem, W, block, curves, draws, clients)
    assert got.shape == want.shape == (3, 2, 3, 2, net.dim)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    engine = local_models(W, block, curves, draws, clients)
    np.testing.assert_allclose(got, engine, rtol=0, atol=1e-10)
    # the test can fail: the models moved, and clipping binds where it is asked for
    assert np.abs(got - W[..., None, :]).max() > 1e-3
    if clip != "none":
        unclipped = _reference_local(problem, W, block, _curves(None), draws, clients)
        binds = [c for c in range(3) if np.isfinite(curves.clip[c])]
        assert np.abs(got[binds] - unclipped[binds]).max() > 1e-4


@pytest.mark.parametrize("model", ["mlp", "custom"])
def test_full_batches_and_a_block_that_does_not_start_at_unit_0(model):
    problem = _problem(model, 0.0)
    for full in (True, False):
        net = _network(problem, full_batch=full, seed=1)
        curves = _curves([0.4, 1.0, np.inf])
        W, block, draws, clients = _round(net, curves, R=3, start=1, stop=3)
        got = problem.local_models(W, block, curves, draws, clients)
        want = _reference_local(problem, W, block, curves, draws, clients)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("chunk", [3, 1000])
def test_vmapped_model_chunks_equal_the_loop(chunk):
    """``model_chunk`` > 1 vmaps models (the default off CPU): masks for unequal epochs."""
    base = MODELS["mlp"](0.01)
    problem = JaxProblem(
        base.loss, base._params, 0.01, sample_norms=base.sample_norms, model_chunk=chunk
    )
    net = _network(problem)
    curves = _curves(CLIPS["mixed"])
    W, block, draws, clients = _round(net, curves)
    got = problem.local_models(W, block, curves, draws, clients)
    want = _reference_local(problem, W, block, curves, draws, clients)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    G = problem.gradient(W[:, 0, 0].T[None], block.data.X[0, :1, :4], block.data.y[0, :1, :4],
                         np.full((1, 4), 0.25), curves.clip)  # fmt: skip
    Gref = base.gradient(W[:, 0, 0].T[None], block.data.X[0, :1, :4], block.data.y[0, :1, :4],
                         np.full((1, 4), 0.25), curves.clip)  # fmt: skip
    np.testing.assert_allclose(G, Gref, rtol=0, atol=1e-12)


def test_one_compiled_shape_per_run_and_the_same_bits_every_call():
    problem = MODELS["mlp"](0.01)
    net = _network(problem)
    curves = _curves(0.5)
    first = None
    for it in range(1, 5):  # other clients, other epochs counts, other batches
        W, block, draws, clients = _round(net, curves, iteration=it)
        out = problem.local_models(W, block, curves, draws, clients)
        again = problem.local_models(W, block, curves, draws, clients)
        np.testing.assert_array_equal(out, again)
        first = out if first is None else first
    assert problem._local._cache_size() == 1


def test_same_bits_whatever_the_block_size():
    """As the engine's rounds: a block computes exactly what the whole network does for it."""
    problem = _problem("mlp", 0.01)
    net = _network(problem)
    curves = _curves([0.3, np.inf, 2.0])
    W, whole, draws, clients = _round(net, curves)
    want = problem.local_models(W, whole, curves, draws, clients)
    for start, stop in ((0, 1), (1, 3)):
        block = net.block(start, stop)
        d = KeyedDraws(7, 3, np.arange(2), block.units)
        got = problem.local_models(W[:, :, start:stop], block, curves, d, clients[:, start:stop])
        np.testing.assert_array_equal(got, want[:, :, start:stop])


_BITS_SCRIPT = textwrap.dedent(
    """
    import hashlib, sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    from test_jax_local import MODELS, _curves, _network, _round
    problem = MODELS["mlp"](0.01)
    net = _network(problem)
    curves = _curves([0.3, np.inf, 2.0])
    W, block, draws, clients = _round(net, curves)
    out = problem.local_models(W, block, curves, draws, clients)
    print(hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest())
    """
)


def test_same_bits_in_a_fresh_process():
    from pathlib import Path

    script = _BITS_SCRIPT.format(tests=str(Path(__file__).parent))
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300
    )
    problem = MODELS["mlp"](0.01)
    net = _network(problem)
    curves = _curves([0.3, np.inf, 2.0])
    W, block, draws, clients = _round(net, curves)
    out = problem.local_models(W, block, curves, draws, clients)
    digest = hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()
    assert run.stdout.strip().splitlines()[-1] == digest


def test_engine_runs_the_hook_and_gives_the_numpy_paths_simulation(monkeypatch):
    """The engine's default local phase for a model is its hook: the numpy path's run."""
    problem = MODELS["mlp"](0.001)
    net = _network(problem)
    curves = [
        CurveSettings(mu=0.5, clip_norm=1.0),
        CurveSettings(mu=0.5, clip_norm=1.0, server=GraphHomomorphic(std=0.05)),
        CurveSettings(mu=0.4, server=RandomNoise(std=0.05)),
    ]
    kw = {"iterations": 5, "repetitions": 2, "seed": 4}
    monkeypatch.setenv("PGFL_LOCAL_PHASE", "numpy")
    want = simulate(net, curves, **kw)
    monkeypatch.delenv("PGFL_LOCAL_PHASE")
    assert local_phase_kind(problem) == "fused"
    calls = []
    method = problem.local_models

    def counted(*args):
        calls.append(args[0].shape)
        return method(*args)

    monkeypatch.setattr(problem, "local_models", counted)
    got = simulate(net, curves, **kw)
    assert len(calls) == 5
    np.testing.assert_allclose(got.W, want.W, rtol=0, atol=1e-10)
    np.testing.assert_allclose(got.test_log_loss, want.test_log_loss, rtol=0, atol=1e-10)


# ------------------------------------------------------------------------- norms hook
@pytest.mark.parametrize(
    ("kind", "activation", "hidden"),
    [
        ("softmax", "relu", (64,)),
        ("mlp", "relu", (64,)),
        ("mlp", "tanh", (7, 5)),
        ("mlp", "sigmoid", (6,)),
        ("mlp", "elu", (4, 4, 4)),
        ("cnn", "relu", (64,)),
        ("cnn", "tanh", (64,)),
    ],
)
def test_builtin_ghost_norms_equal_the_norms_of_formed_per_sample_gradients(
    kind, activation, hidden
):
    rng = np.random.default_rng(5)
    p = build_model(kind, F, CLASSES, rng, hidden=hidden, activation=activation, channels=4)
    w = p.initial + 0.2 * rng.standard_normal(p.initial.size)  # softmax starts at 0
    X = rng.uniform(0, 1, (9, F))
    y = rng.integers(0, CLASSES, 9).astype(float)
    G = p.sample_gradients(w, X, y)
    want = np.einsum("bm,bm->b", G, G)
    norms = sample_norms_fn(kind, activation=activation, layers=len(hidden) + 1)
    got = np.asarray(jax.jit(norms)(p.unravel(w), X, y))
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=0)
    assert want.min() > 1e-6  # not all zero


def test_a_wrong_norms_hook_is_a_one_line_error():
    def half(q, X, Y):  # half the true squared norm of the least-squares gradient
        return 2 * (X @ q["w"] - Y) ** 2 * jnp.sum(X * X, axis=1)

    p = JaxProblem(lambda q, x, y: (y - x @ q["w"]) ** 2, {"w": np.ones(3)}, sample_norms=half)
    with pytest.raises(ConfigError, match="must return the squared norms") as info:
        p.dim(3)
    assert "\n" not in str(info.value)
    unchecked = JaxProblem(p.loss, p._params, sample_norms=half, check_norms=False)
    assert unchecked.dim(3) == 3  # the caller vouches for its norms
    with pytest.raises(ConfigError, match="sample_norms.*fails on 5 samples of 4 features"):
        JaxProblem(
            lambda q, x, y: (y - x @ q["w"]) ** 2,
            {"w": np.ones(4)},
            sample_norms=lambda q, X, Y: q["v"],
        ).dim(4)


def test_pickled_problem_keeps_its_hook():
    import pickle

    import cloudpickle  # what Ray uses: the built-in models are closures

    p = MODELS["mlp"](0.01)
    q = pickle.loads(cloudpickle.dumps(p))
    assert q.sample_norms is not None
    net = _network(p)
    curves = _curves(0.5)
    W, block, draws, clients = _round(net, curves)
    np.testing.assert_array_equal(
        q.local_models(W, block, curves, draws, clients),
        p.local_models(W, block, curves, draws, clients),
    )
