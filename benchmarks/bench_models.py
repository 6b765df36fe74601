"""Client updates per second of the MLP on digits: pgfl's batched engine vs a per-client loop.

Usage: ``python benchmarks/bench_models.py [--rounds 20] [--model mlp|softmax] [--no-clip]``

Work: the ``digits-mlp`` preset's network (P = 6 units, L = 4 sampled clients, 2 local
epochs of 16 samples, per-sample clipping, MLP with M = 4,810 parameters). A *client
update* is one sampled client's local SGD (all its epochs) for one curve and repetition.

* ``engine, 1 curve``: :func:`pgfl.engine.gfl_round` with one curve, one repetition;
* ``engine, preset batch``: the preset's seven curves (equal variance and equal ε, secure
  aggregation included) as the runner batches them;
* ``per-client loop``: the same clients, epochs and mini-batches (the engine's keyed
  draws), one jitted JAX per-sample-clipped gradient call per client and epoch, a Python
  loop over units and clients (what a straightforward JAX implementation does).

Compile time (the first round / call) is reported separately and excluded from the rates.
``--model softmax`` swaps the MLP for multinomial logistic regression (M = 650) and
``--no-clip`` drops the per-sample clipping (every curve and the loop), to show where
batching pays: dispatch-bound small models, not compute-bound per-sample gradients.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import tomllib

import numpy as np

from pgfl.engine import CurveSettings, gfl_round
from pgfl.engine.step import draw_clients
from pgfl.experiments.loader import parse_config
from pgfl.experiments.plan import prepare_experiment
from pgfl.experiments.presets import preset_text
from pgfl.rng import KeyedDraws


def _timed_rounds(net, curves, rounds: int) -> tuple[float, float]:
    """(first-round seconds, steady seconds per round) of ``gfl_round``."""
    C = len(curves)
    W = np.broadcast_to(net.problem.initial, (C, 1, net.data.shape[0], net.dim)).copy()
    t = time.perf_counter()
    W = gfl_round(W, net, curves, seed=0, iteration=1, keep_local=False).W
    first = time.perf_counter() - t
    t = time.perf_counter()
    for i in range(rounds):
        W = gfl_round(W, net, curves, seed=0, iteration=i + 2, keep_local=False).W
    return first, (time.perf_counter() - t) / rounds


def _loop_rounds(net, mu: float, clip: float, rounds: int) -> tuple[float, float]:
    """The per-client loop: (compile seconds, steady seconds per round)."""
    import jax

    from pgfl.models.jax_adapter import jax_module

    jax_module()
    problem = net.problem
    flat_loss = problem._flat_loss
    rho = problem.rho

    @jax.jit
    def clipped(w, X, Y, wt):
        if clip is None:  # gradient of the weighted batch loss
            return jax.grad(
                lambda v: wt @ jax.vmap(flat_loss, (None, 0, 0))(v, X, Y) + rho * v @ v
            )(w)
        G = jax.vmap(jax.grad(flat_loss), (None, 0, 0))(w, X, Y) + 2 * rho * w
        norm = jax.numpy.sqrt(jax.numpy.sum(G * G, axis=-1))
        return (jax.numpy.minimum(1.0, clip / norm) * wt) @ G

    block = net.block()
    data = block.data
    P, K, N, F = data.X.shape
    w_server = np.broadcast_to(problem.initial, (P, net.dim)).copy()
    B = int(block.batch.max())
    t = time.perf_counter()
    np.asarray(clipped(w_server[0], data.X[0, 0, :B], data.y[0, 0, :B], np.full(B, 1 / B)))
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    for i in range(rounds):
        draws = KeyedDraws(0, i + 1, np.arange(1), block.units)
        clients = draw_clients(block, draws)[0]  # [P, L]
        u = draws.uniform("batches", (block.L, block.e_max, block.b_max))[0]
        new = np.empty_like(w_server)
        for p in range(P):
            psi = np.zeros(net.dim)
            for slot, k in enumerate(clients[p]):
                w = w_server[p].copy()
                E, Bk, n = block.epochs[p, k], block.batch[p, k], data.counts[p, k]
                for e in range(E):
                    rows = (u[p, slot, e, :Bk] * n).astype(np.int64)
                    wt = np.full(Bk, 1.0 / Bk)
                    g = clipped(w, data.X[p, k, rows], data.y[p, k, rows], wt)
                    w = w - (mu / E) * np.asarray(g)
                psi += w / len(clients[p])
            new[p] = psi
        w_server = net.A @ new
    return compile_s, (time.perf_counter() - t) / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--model", choices=("mlp", "softmax"), default="mlp")
    parser.add_argument("--no-clip", action="store_true")
    args = parser.parse_args()
    raw = tomllib.loads(preset_text("digits-mlp"))
    raw["model"] = {"kind": args.model} if args.model != "mlp" else raw["model"]
    if args.no_clip:  # equal-ε curves need a clip norm: keep the equal-variance ones
        raw["training"].pop("clip_norm")
        raw["curves"] = [c for c in raw["curves"] if "target_epsilon" not in c.get("privacy", {})]
    cfg = parse_config(raw, quick=True)
    with tempfile.TemporaryDirectory() as tmp:
        plan = prepare_experiment(cfg, os.path.join(tmp, "out"))
    (batch,) = plan.batches
    net = batch.net
    P, L = net.data.shape[0], net.L
    c0 = cfg.curves[0]
    clip = None if args.no_clip else c0.training.clip_norm
    one = [CurveSettings(mu=c0.training.mu, clip_norm=c0.training.clip_norm)]
    results = {
        "model": args.model,
        "M": net.dim,
        "clip": clip,
        "load_before": os.getloadavg()[0],
    }
    first, per = _timed_rounds(net, one, args.rounds)
    results["engine_1_curve"] = {"compile_s": first, "updates_per_s": P * L / per}
    first, per = _timed_rounds(net, list(batch.settings), args.rounds)
    C = len(batch.settings)
    results["engine_preset_batch"] = {
        "curves": C,
        "compile_s": first,
        "updates_per_s": C * P * L / per,
    }
    compile_s, per = _loop_rounds(net, c0.training.mu, clip, args.rounds)
    results["per_client_loop"] = {"compile_s": compile_s, "updates_per_s": P * L / per}
    loop = results["per_client_loop"]["updates_per_s"]
    for key in ("engine_1_curve", "engine_preset_batch"):
        results[key]["speedup_vs_loop"] = results[key]["updates_per_s"] / loop
    results["load_after"] = os.getloadavg()[0]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
