"""Client updates per second of a model on digits: pgfl's batched paths vs a per-client loop.

Usage: ``python benchmarks/bench_models.py [--rounds 10] [--repeats 3] [--model mlp|softmax|cnn]
[--no-clip] [--profile]``

Work: the ``digits-mlp`` preset's network (P = 6 units, L = 4 sampled clients, 2 local
epochs of 16 samples, per-sample clipping at 2, MLP with M = 4,810 parameters). A *client
update* is one sampled client's local SGD (all its epochs) for one curve and repetition.
Every variant runs whole rounds (:func:`pgfl.engine.gfl_round`: local phase, secure
aggregation, server noise, combination) except the loops, which run the local phase and
the plain combination ``A·ψ``.

* ``engine``: the engine as it is (its numpy local phase: one
  :meth:`~pgfl.models.jax_adapter.JaxProblem.gradient` call per epoch);
* ``fused``: the engine with its local phase replaced by the fused hook
  :meth:`~pgfl.models.jax_adapter.JaxProblem.local_models` (one compiled call per round),
  as the engine calls it (its default local phase for a model; ``PGFL_LOCAL_PHASE=numpy``
  gives the per-epoch path);
* ``fused, generic``: the same without the model's ``sample_norms`` (per-sample gradients
  formed by ``vmap(grad)``): what a user's model without a norms hook gets;
* ``per-client loop``: the same clients, epochs and mini-batches (the engine's keyed draws),
  one jitted JAX per-sample-clipped gradient (``vmap(grad)``, the straightforward
  implementation) per client and epoch, a Python loop over units and clients;
* ``per-client loop, ghost``: the same loop calling the model's ghost-norm gradient (the
  arithmetic of ``fused``, without the batching).

Each variant is timed ``--repeats`` times, interleaved (variant after variant, then again),
after a first untimed round (compilation, reported separately); every ratio is against the
per-client loop of the same run: median wall-clock rates (``vs_loop``), best against best
(``best_vs_best_loop``), and rates per second of this process's CPU time
(``cpu_vs_loop``: the steadiest on a machine shared with other jobs). For the fused
variants, ``local_phase_*`` counts only the time spent in the hook (the loop's rounds are
almost all local phase: its combination is one ``A @ ψ``). ``1 curve``
runs one curve and one repetition; ``preset batch`` the preset's seven curves (four with
``--no-clip``: the equal-ε curves need clipping) as the runner batches them.
``--profile`` splits a fused round into the host side of the hook (keyed draws, gather),
the compiled call and the rest of the round.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import statistics
import tempfile
import time
import tomllib

import numpy as np

from pgfl.engine import CurveSettings, gfl_round
from pgfl.engine.step import draw_clients
from pgfl.experiments.loader import parse_config
from pgfl.experiments.plan import prepare_experiment
from pgfl.experiments.presets import preset_text
from pgfl.models.jax_adapter import JaxProblem
from pgfl.rng import KeyedDraws


@contextlib.contextmanager
def fused_local_phase(problems, spent: list[float] | None = None):
    """The engine's default local phase for a model (its fused hook), timed into ``spent``.

    ``spent`` (a one-element list) accumulates the seconds spent in the hooks of
    ``problems`` (their ``local_models`` wrapped on the instances).
    """
    originals = [p.local_models for p in problems]

    def timed(original):
        def hook(W, block, curves, draws, clients):
            t = time.perf_counter()
            out = original(W, block, curves, draws, clients)
            if spent is not None:
                spent[0] += time.perf_counter() - t
            return out

        return hook

    for p, original in zip(problems, originals, strict=True):
        p.local_models = timed(original)
    try:
        yield
    finally:
        for p in problems:
            del p.local_models  # back to the class's method


@contextlib.contextmanager
def per_epoch_local_phase():
    """The engine's numpy local phase (one ``gradient`` call per epoch) instead of the hook."""
    before = os.environ.get("PGFL_LOCAL_PHASE")
    os.environ["PGFL_LOCAL_PHASE"] = "numpy"
    try:
        yield
    finally:
        if before is None:
            del os.environ["PGFL_LOCAL_PHASE"]
        else:
            os.environ["PGFL_LOCAL_PHASE"] = before


def _engine(net, curves):
    """(first-round seconds, run(rounds) -> (wall, CPU) seconds per round) of ``gfl_round``."""
    C = len(curves)
    state = {"W": np.broadcast_to(net.problem.initial, (C, 1, net.data.shape[0], net.dim)).copy()}
    state["i"] = 1

    def run(rounds: int) -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        for _ in range(rounds):
            out = gfl_round(state["W"], net, curves, seed=0, iteration=state["i"], keep_local=False)
            state["W"], state["i"] = out.W, state["i"] + 1
        return (time.perf_counter() - t) / rounds, (time.process_time() - c) / rounds

    t = time.perf_counter()
    run(1)
    return time.perf_counter() - t, run


def _loop(net, mu: float, clip: float | None, ghost: bool):
    """The per-client loop: (compile seconds, run(rounds) -> (wall, CPU) seconds per round)."""
    import jax

    problem = net.problem
    flat_loss = problem._flat_loss
    rho = problem.rho

    @jax.jit
    def straightforward(w, X, Y, wt):
        if clip is None:  # gradient of the weighted batch loss
            return jax.grad(
                lambda v: wt @ jax.vmap(flat_loss, (None, 0, 0))(v, X, Y) + rho * v @ v
            )(w)
        G = jax.vmap(jax.grad(flat_loss), (None, 0, 0))(w, X, Y) + 2 * rho * w
        norm = jax.numpy.sqrt(jax.numpy.sum(G * G, axis=-1))
        return (jax.numpy.minimum(1.0, clip / norm) * wt) @ G

    if ghost and clip is not None:
        grad = lambda w, X, Y, wt: problem._clipped_one(w, X, Y, wt, clip)  # noqa: E731
    else:
        grad = straightforward
    block = net.block()
    data = block.data
    P, K, N, F = data.X.shape
    state = {"w": np.broadcast_to(problem.initial, (P, net.dim)).copy(), "i": 1}
    B = int(block.batch.max())
    t = time.perf_counter()
    np.asarray(grad(state["w"][0], data.X[0, 0, :B], data.y[0, 0, :B], np.full(B, 1 / B)))
    compile_s = time.perf_counter() - t

    def run(rounds: int) -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        for _ in range(rounds):
            draws = KeyedDraws(0, state["i"], np.arange(1), block.units)
            clients = draw_clients(block, draws)[0]  # [P, L]
            u = draws.uniform("batches", (block.L, block.e_max, block.b_max))[0]
            new = np.empty_like(state["w"])
            for p in range(P):
                psi = np.zeros(net.dim)
                for slot, k in enumerate(clients[p]):
                    w = state["w"][p].copy()
                    E, Bk, n = block.epochs[p, k], block.batch[p, k], data.counts[p, k]
                    for e in range(E):
                        rows = (u[p, slot, e, :Bk] * n).astype(np.int64)
                        wt = np.full(Bk, 1.0 / Bk)
                        g = grad(w, data.X[p, k, rows], data.y[p, k, rows], wt)
                        w = w - (mu / E) * np.asarray(g)
                    psi += w / len(clients[p])
                new[p] = psi
            state["w"], state["i"] = net.A @ new, state["i"] + 1
        return (time.perf_counter() - t) / rounds, (time.process_time() - c) / rounds

    return compile_s, run


def _profile(net, curves, rounds: int) -> dict:
    """ms per round of a fused round: hook host side, compiled call, rest of the round."""
    problem = net.problem
    spent = {"compiled": 0.0, "hook": 0.0}
    compiled = problem._local

    def timed_compiled(*args):
        t = time.perf_counter()
        out = compiled(*args)
        out.block_until_ready()
        spent["compiled"] += time.perf_counter() - t
        return out

    method = problem.local_models

    def hook(W, block, cb, draws, clients):
        t = time.perf_counter()
        out = method(W, block, cb, draws, clients)
        spent["hook"] += time.perf_counter() - t
        return out

    problem._local = timed_compiled
    problem.local_models = hook
    try:
        _, run = _engine(net, curves)
        spent.update(compiled=0.0, hook=0.0)
        per_round = run(rounds)[0]
    finally:
        problem._local = compiled
        del problem.local_models
    steps = len(curves) * net.data.shape[0] * net.L * int(net.epochs.max())
    return {
        "round_ms": 1e3 * per_round,
        "hook_host_ms": 1e3 * (spent["hook"] - spent["compiled"]) / rounds,
        "compiled_call_ms": 1e3 * spent["compiled"] / rounds,
        "rest_of_round_ms": 1e3 * (per_round - spent["hook"] / rounds),
        "compiled_us_per_model_step": 1e6 * spent["compiled"] / rounds / steps,
    }


def _machine() -> dict:
    info = {"nproc": os.cpu_count(), "date_utc": datetime.datetime.now(datetime.UTC).isoformat()}
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", choices=("mlp", "softmax", "cnn"), default="mlp")
    parser.add_argument("--no-clip", action="store_true")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    raw = tomllib.loads(preset_text("digits-mlp"))
    if args.model != "mlp":
        raw["model"] = {"kind": args.model}
    if args.no_clip:  # equal-ε curves need a clip norm: keep the equal-variance ones
        raw["training"].pop("clip_norm")
        raw["curves"] = [c for c in raw["curves"] if "target_epsilon" not in c.get("privacy", {})]
    cfg = parse_config(raw, quick=True)
    with tempfile.TemporaryDirectory() as tmp:
        plan = prepare_experiment(cfg, os.path.join(tmp, "out"))
    (batch,) = plan.batches
    net = batch.net
    problem = net.problem
    generic = JaxProblem(problem.loss, problem._params, problem.rho, predict=problem.predict)
    net_generic = type(net)(net.data, generic, net.A, net.L, net.epochs, net.batch)
    P, L = net.data.shape[0], net.L
    c0 = cfg.curves[0]
    clip = None if args.no_clip else c0.training.clip_norm
    one = [CurveSettings(mu=c0.training.mu, clip_norm=c0.training.clip_norm)]
    preset = list(batch.settings)
    results = {"model": args.model, "M": net.dim, "clip": clip, **_machine()}
    results["load_before"] = os.getloadavg()

    variants = {}  # name -> (updates per round, compile s, run)
    for label, curves in (("1 curve", one), ("preset batch", preset)):
        C = len(curves)
        with per_epoch_local_phase():
            variants[f"engine, {label}"] = (C * P * L, *_engine(net, curves))
        variants[f"fused, {label}"] = (C * P * L, *_engine(net, curves))
        variants[f"fused generic, {label}"] = (C * P * L, *_engine(net_generic, curves))
    variants["per-client loop"] = (P * L, *_loop(net, c0.training.mu, clip, ghost=False))
    if clip is not None and problem.sample_norms is not None:
        variants["per-client loop, ghost"] = (P * L, *_loop(net, c0.training.mu, clip, True))

    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    local: dict[str, list[float]] = {name: [] for name in variants if name.startswith("fused")}
    for _ in range(args.repeats):  # interleaved: every variant once, then again
        for name, (updates, _, run) in variants.items():
            if name.startswith("fused"):
                spent = [0.0]
                with fused_local_phase([problem, generic], spent):
                    per, per_cpu = run(args.rounds)
                local[name].append(updates * args.rounds / spent[0])
            elif name.startswith("engine"):
                with per_epoch_local_phase():
                    per, per_cpu = run(args.rounds)
            else:
                per, per_cpu = run(args.rounds)
            wall[name].append(updates / per)
            cpu[name].append(updates / per_cpu)
    loop = statistics.median(wall["per-client loop"])
    loop_best = max(wall["per-client loop"])
    loop_cpu = statistics.median(cpu["per-client loop"])
    for name, (_, compile_s, _) in variants.items():
        med, best, med_cpu = (
            statistics.median(wall[name]),
            max(wall[name]),
            statistics.median(cpu[name]),
        )
        results[name] = {
            "updates_per_s": round(med),
            "range": [round(min(wall[name])), round(best)],
            "vs_loop": round(med / loop, 2),
            "best_vs_best_loop": round(best / loop_best, 2),
            "updates_per_cpu_s": round(med_cpu),
            "cpu_vs_loop": round(med_cpu / loop_cpu, 2),
            "first_round_s": round(compile_s, 2),
        }
        if name in local:  # the local phase alone (the hook), against the whole loop
            results[name]["local_phase_updates_per_s"] = round(statistics.median(local[name]))
            results[name]["local_phase_vs_loop"] = round(statistics.median(local[name]) / loop, 2)
    if args.profile:
        results["profile_fused_1_curve"] = _profile(net, one, args.rounds)
        results["profile_fused_preset"] = _profile(net, preset, args.rounds)
    results["load_after"] = os.getloadavg()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
