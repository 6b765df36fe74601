"""RayActors: a network's units held by Ray actors give the single-process engine's results."""

import numpy as np
import pytest

from pgfl.backends.ray_actors import BlockActor, RayActors, plan_blocks
from pgfl.data import synthetic
from pgfl.engine import Trajectory, simulate
from pgfl.engine.network import Links
from pgfl.experiments.build import build_block, build_network, curve_settings
from pgfl.experiments.loader import parse_config

BASE = {
    "name": "actors",
    "iterations": 12,
    "repetitions": 2,
    "seed": 3,
    "topology": {"kind": "ring", "P": 5},
    "data": {"K": 5, "N": [4, 9]},
    "training": {"L": 4, "mu": 0.4},
}
NOISY = {"server_variance": 0.05, "client_variance": 0.01}


def _config(curves, **overrides):
    return parse_config({**BASE, **overrides, "curves": curves})


def _reference(cfg):
    """The single-process engine on the whole network, and the batch's settings."""
    curve = cfg.curves[0]
    net = build_network(curve, cfg.seed)
    settings = [curve_settings(c, cfg.iterations, net) for c in cfg.curves]
    traj = simulate(net, settings, iterations=cfg.iterations, repetitions=cfg.repetitions,
                    seed=cfg.seed)  # fmt: skip
    return traj, settings


def _on_actors(cfg, settings, backend):
    return backend.simulate(cfg.curves[0], settings, iterations=cfg.iterations,
                            repetitions=cfg.repetitions, seed=cfg.seed)  # fmt: skip


def assert_equal_runs(actors: Trajectory, local: Trajectory) -> None:
    """Models bit for bit; metrics to 1e-12 (sums over units in another order)."""
    assert np.array_equal(actors.W, local.W, equal_nan=True)
    for f in ("centroid_msd", "individual_msd", "disagreement", "test_error", "test_log_loss",
              "server_test_error", "server_test_loss"):  # fmt: skip
        a, b = getattr(actors, f), getattr(local, f)
        if b is None:
            assert a is None, f
            continue
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300, equal_nan=True, err_msg=f)
    for f in ("diverged_at", "aborted", "clipped", "reps"):
        assert np.array_equal(getattr(actors, f), getattr(local, f)), f
    assert actors.abort_log == local.abort_log


# ------------------------------------------------------------------ without Ray
@pytest.mark.parametrize("units", [(0, 7), (2, 5), (6, 7)])
@pytest.mark.parametrize("generator", ["regression", "logistic"])
def test_a_block_of_synthetic_data_is_the_rows_of_the_whole(monkeypatch, generator, units):
    monkeypatch.setattr(synthetic, "DRAW_CHUNK_BYTES", 200)  # many chunks per draw
    make = getattr(synthetic, f"{generator}_data")
    kw = {"P": 7, "K": 3, "N": (2, 9), "M": 3}
    if generator == "logistic":
        kw["test_size"] = 4
    whole = make(np.random.default_rng(4), **kw)
    part = make(np.random.default_rng(4), units=units, **kw)
    a, b = units
    for f in ("X", "y", "counts"):
        assert np.array_equal(getattr(part, f), getattr(whole, f)[a:b]), f
    if generator == "logistic":  # the test set comes after every unit's draws
        assert np.array_equal(part.X_test, whole.X_test)


@pytest.mark.parametrize(
    "data",
    [
        {"K": 5, "N": [4, 9]},
        {"kind": "logistic", "K": 4, "N": [3, 7], "test_size": 6},
        {"kind": "classification", "source": "fair", "K": 3, "rows": 300, "test_size": 20},
    ],
    ids=["regression", "logistic", "data file"],
)
def test_build_block_is_the_block_of_the_whole_network(data):
    cfg = _config([{"label": "a"}], data=data, training={"L": 3, "mu": 0.4, "batch": [2, 4]})
    net = build_network(cfg.curves[0], cfg.seed)
    block, whole = build_block(cfg.curves[0], cfg.seed, 1, 4), net.block(1, 4)
    for f in ("start", "L", "e_max", "b_max", "size"):
        assert getattr(block, f) == getattr(whole, f), f
    for f in ("epochs", "batch"):
        assert np.array_equal(getattr(block, f), getattr(whole, f)), f
    assert np.array_equal(block.data.Xy, whole.data.Xy)
    for f in ("X_test", "y_test"):
        assert np.array_equal(getattr(block.data, f), getattr(whole.data, f)), f
    outline = build_network(cfg.curves[0], cfg.seed, outline=True)
    assert outline.data.shape == net.data.shape
    if data.get("kind") != "classification":  # synthetic: sizes only, no samples
        assert not hasattr(outline.data, "X")


def test_the_driver_plans_an_actors_run_without_client_data(tmp_path):
    from pgfl.data.federated import DataOutline
    from pgfl.experiments.plan import prepare_experiment

    cfg = _config([{"label": "a"}], run={"backend": "ray", "mode": "actors", "actors": 2})
    (batch,) = prepare_experiment(cfg, tmp_path / "out").batches
    assert isinstance(batch.net.data, DataOutline)
    local = prepare_experiment(_config([{"label": "a"}]), tmp_path / "out")
    assert batch.net.data.shape == local.batches[0].net.data.shape


def test_block_routes_carry_every_link_once_in_order():
    A = np.array([[0.5, 0.5, 0, 0], [0.25, 0.25, 0.25, 0.25], [0, 0.5, 0.5, 0], [0, 0.5, 0, 0.5]])
    links = Links.from_matrix(A)
    plans = plan_blocks(links, 3)
    assert [(p.start, p.stop) for p in plans] == [(0, 1), (1, 2), (2, 4)]
    sent = {(p.index, r): p.out_links.src[pos].tolist() for p in plans for r, pos in p.sends}
    got = {(q, p.index): p.in_links.src[pos].tolist() for p in plans for q, pos in p.receives}
    assert sent == got  # what q sends to b is what b expects from q, link by link
    assert sum(len(v) for v in sent.values()) == len(links.src)
    # block 1 (unit 1) sends to every block; block 0 receives from blocks 0 and 1 only
    assert plans[1].remote_sends == [0, 2] and plans[0].remote_receives == [1]


def test_block_actors_in_one_process_give_the_engine_bits():
    """The actor class without Ray: the driver's exchange done by hand, 3 blocks."""
    cfg = _config([{"label": "per_link", "privacy": {"server_noise": "random_per_link"}}],
                  privacy={"server_variance": 0.05})  # fmt: skip
    local, settings = _reference(cfg)
    net = build_network(cfg.curves[0], cfg.seed)
    plans = plan_blocks(net.links, 3)
    actors = [BlockActor(cfg.curves[0], cfg.seed, p, settings, cfg.repetitions) for p in plans]
    for i in range(1, cfg.iterations + 1):
        sent = [a.send(i) for a in actors]
        sent = [s if p.remote_sends else (s,) for s, p in zip(sent, plans, strict=True)]
        for a, p in zip(actors, plans, strict=True):
            a.receive(i, *[sent[q][1 + plans[q].remote_sends.index(p.index)]
                           for q in p.remote_receives])  # fmt: skip
    W = np.concatenate([a.final() for a in actors], axis=2)
    assert np.array_equal(W, local.W)


def test_a_repetition_that_diverged_in_any_block_is_frozen_in_every_block():
    """The engine freezes a diverged repetition at NaN in every unit (simulate): an actor
    applies the other blocks' flags before its next local phase."""
    cfg = _config([{"label": "a"}, {"label": "b", "training": {"mu": 0.2}}])
    net = build_network(cfg.curves[0], cfg.seed)
    settings = [curve_settings(c, cfg.iterations, net) for c in cfg.curves]
    plan = plan_blocks(net.links, 2)[1]
    actor = BlockActor(cfg.curves[0], cfg.seed, plan, settings, cfg.repetitions)
    other, mine = np.zeros((2, 2), bool), np.zeros((2, 2), bool)
    other[1, 0] = True  # curve 1, repetition 0 diverged in the other block
    actor.send(1, other, mine)
    assert (
        np.isnan(actor.W[1, 0]).all() and np.isfinite(np.delete(actor.W.reshape(4, -1), 2, 0)).all()
    )


# ------------------------------------------------------------------ on Ray
@pytest.mark.ray
def test_plain_scheme_on_actors_equals_the_engine(ray_local):
    cfg = _config([{"label": "plain"}, {"label": "diverges", "training": {"mu": 200.0}}])
    local, settings = _reference(cfg)
    assert (local.diverged_at[1] > 0).all() and (local.diverged_at[0] < 0).all()
    backend = RayActors(actors=3, checkpoint_every=5, record=True)
    assert_equal_runs(_on_actors(cfg, settings, backend), local)
    # the diverged repetitions (round 1) reach every local phase after it as flags,
    # across checkpoints too (rounds 6 and 11 start a new chunk)
    for log in backend.received:
        sends = [k for k, (method, kind, _) in enumerate(log) if (method, kind) == ("send", "int")]
        flags = [sum(1 for e in log[a + 1 : b] if e[:2] == ("send", "array"))
                 for a, b in zip(sends, [*sends[1:], len(log)], strict=True)]  # fmt: skip
        assert flags[0] == 0 and all(f >= 1 for f in flags[1:]), flags
    # a ring of 5 units in blocks (0)(1 2)(3 4): links 0↔1, 2↔3, 4↔0 cross, each [C, R, M]
    assert backend.message_bytes == 6 * 2 * 2 * 2 * 8


@pytest.mark.ray
def test_noise_schemes_on_actors_equal_the_engine(ray_local):
    """Client noise on models and updates, every server scheme: one batch, 3 actors."""
    cfg = _config(
        [
            {"label": "laplace_models", "privacy": {"client_noise": "laplace"}},
            {"label": "gauss_updates", "privacy": {"client_noise": "gaussian"},
             "training": {"share": "updates"}},
            {"label": "random", "privacy": {"server_noise": "random"}},
            {"label": "gh", "privacy": {"server_noise": "graph_homomorphic",
                                        "server_distribution": "gaussian"}},
            {"label": "per_link", "privacy": {"server_noise": "random_per_link"}},
        ],
        privacy=NOISY,
    )  # fmt: skip
    local, settings = _reference(cfg)
    assert_equal_runs(_on_actors(cfg, settings, RayActors(actors=3, checkpoint_every=5)), local)


@pytest.mark.ray
def test_secure_aggregation_with_dropout_on_actors_equals_the_engine(ray_local):
    """Simulated and cryptographic protocols, dropout that aborts some unit-rounds."""
    secagg = {"client_noise": "secure_aggregation", "dropout": 0.45, "secagg_threshold": 3}
    cfg = _config(
        [
            {"label": "simulated", "privacy": secagg},
            {"label": "crypto", "privacy": {**secagg, "secagg_protocol": "cryptographic"},
             "training": {"share": "updates"}},
            {"label": "diverges", "privacy": secagg, "training": {"mu": 30.0}},
        ],
        iterations=6,
        privacy={"secagg_clip": 64.0},
    )  # fmt: skip
    local, settings = _reference(cfg)
    assert local.aborted.sum() > 0  # the test covers aborts
    # and repetitions that diverge when their models leave the protocol's range
    assert (local.diverged_at[2] > 0).any() and local.clipped[2].sum() > 0
    assert_equal_runs(_on_actors(cfg, settings, RayActors(actors=2, checkpoint_every=4)), local)


@pytest.mark.ray
def test_logistic_test_errors_on_actors_equal_the_engine(ray_local):
    """Logistic data with a test set: w° by Newton's method over the blocks' terms."""
    cfg = _config(
        [{"label": "slow"}, {"label": "fast", "training": {"mu": 2.0}}],
        data={"kind": "logistic", "K": 4, "N": [4, 9], "test_size": 20},
        training={"L": 3, "mu": 0.4, "rho": 0.01},
        iterations=9,
    )
    local, settings = _reference(cfg)
    assert local.test_error is not None
    assert_equal_runs(_on_actors(cfg, settings, RayActors(actors=3, checkpoint_every=4)), local)


@pytest.mark.ray
@pytest.mark.slow
def test_a_model_on_actors_equals_the_engine(ray_local):
    """A [model] (MLP, random initial parameters, no closed-form optimum: MSDs are NaN)."""
    cfg = _config(
        [{"label": "mlp"}],
        data={"kind": "logistic", "K": 4, "N": [4, 9], "M": 3, "test_size": 10},
        model={"kind": "mlp", "hidden": [4]},
        training={"L": 3, "mu": 0.4, "rho": 0.01},
        iterations=5,
    )
    local, settings = _reference(cfg)
    assert np.isnan(local.centroid_msd).all() and local.server_test_loss is not None
    assert_equal_runs(_on_actors(cfg, settings, RayActors(actors=2, checkpoint_every=3)), local)


@pytest.mark.ray
def test_no_actor_receives_client_data_or_raw_noise(ray_local):
    """Everything that reaches an actor, by kind and shape: the recipe, its routes, the
    round number, divergence flags, and per sending block one array of messages ψ + g."""
    cfg = _config(
        [{"label": "both", "privacy": {"client_noise": "laplace", "server_noise": "random"}}],
        privacy=NOISY, iterations=6,
    )  # fmt: skip
    local, settings = _reference(cfg)
    backend = RayActors(actors=3, checkpoint_every=4, record=True)
    assert_equal_runs(_on_actors(cfg, settings, backend), local)
    C, R, M = 1, cfg.repetitions, 2
    plans = plan_blocks(build_network(cfg.curves[0], cfg.seed, outline=True).links, 3)
    for plan, log in zip(plans, backend.received, strict=True):
        kinds = {(method, kind) for method, kind, _ in log}
        assert kinds <= {
            ("init", "CurveConfig"), ("init", "int"), ("init", "BlockPlan"), ("init", "tuple"),
            ("optimum_terms", "NoneType"), ("optimum_terms", "int"), ("send", "int"),
            ("send", "array"),
            ("receive", "int"), ("receive", "array"), ("metrics", "int"), ("metrics", "array"),
            ("metrics", "NoneType"),  # no test set here (with one: the clean test set)
        }  # fmt: skip
        sends = [shape for method, kind, shape in log if method == "send" and kind == "array"]
        assert set(sends) == {(C, R)}  # only the other blocks' divergence flags
        # per round, one message array from each sending block: its links into this block
        expected = [(C, R, pos.size, M) for q, pos in plan.receives if q != plan.index]
        got = [shape for method, kind, shape in log if method == "receive" and kind == "array"]
        assert got == expected * cfg.iterations
        metrics = {shape for method, kind, shape in log if method == "metrics" and kind == "array"}
        assert metrics <= {(4, C, R, M), (2, C, R, M), (M,), (C, R)}  # centroids, w°, flags


def _two_batches():
    """Two networks (two batches): a ring and a full graph."""
    return _config(
        [{"label": "ring"}, {"label": "full", "topology": {"kind": "complete", "P": 4}}],
        iterations=10,
    )


@pytest.mark.ray
def test_a_killed_actor_restarts_from_its_checkpoint_with_the_same_numbers(ray_local):
    cfg = _config([{"label": "noisy", "privacy": {"server_noise": "graph_homomorphic"}}],
                  privacy={"server_variance": 0.05}, iterations=14)  # fmt: skip
    local, settings = _reference(cfg)
    killed = []

    def kill(i, actors):
        if i == 9 and not killed:  # mid-run, after the checkpoint of round 5
            killed.append(ray_local.get(actors[1].pid.remote()))
            ray_local.kill(actors[1])

    backend = RayActors(actors=3, checkpoint_every=5, on_round=kill)
    assert_equal_runs(_on_actors(cfg, settings, backend), local)
    assert killed and backend.restarts == 1


@pytest.mark.ray
@pytest.mark.slow
def test_a_run_whose_actors_keep_dying_stops_in_one_line_and_resumes(ray_local, tmp_path):
    from pgfl.apps.runner import run_plan
    from pgfl.backends import LocalBackend, RunStopped
    from pgfl.experiments.plan import prepare_experiment
    from pgfl.files import read_json

    cfg = _two_batches()

    first = []

    def kill(i, actors):  # the second batch's actor 0 dies at round 7, again after its restart
        first.append(first[0] if first else id(actors))
        if i == 7 and id(actors) != first[0]:
            ray_local.kill(actors[0])

    out = tmp_path / "actors"
    backend = RayActors(actors=2, checkpoint_every=4, on_round=kill, max_restarts=1)
    with pytest.raises(RunStopped, match=r"^a Ray actor .* --resume to continue$"):
        run_plan(prepare_experiment(cfg, out), backend=backend)
    kept = out / ".pgfl-run" / "partial"  # the interrupted run's staging folder
    assert sorted(p.name for p in kept.glob("curve-*")) == ["curve-000.npz"]
    resumed = run_plan(prepare_experiment(cfg, out, resume=True),
                       backend=RayActors(actors=2, checkpoint_every=4))  # fmt: skip
    local = run_plan(prepare_experiment(cfg, tmp_path / "local"), backend=LocalBackend())
    for a, b in zip(resumed["curves"], local["curves"], strict=True):
        for key in ("centroid_msd_db", "individual_msd_db", "disagreement_db"):
            assert a[key] == pytest.approx(b[key], rel=1e-12, abs=1e-12), key
    assert read_json(out / "summary.json")["curves"][0]["label"] == "ring"
    assert resumed["engine"]["backend"] == "ray (actors, 2 actors)"  # both runs' curves
    assert local["engine"]["backend"] == "local"


@pytest.mark.ray
def test_cli_runs_with_actors_and_matches_local(ray_local, tmp_path, capsys):
    from pgfl.cli import main
    from pgfl.files import read_csv

    config = tmp_path / "tiny.toml"
    config.write_text(
        'name = "tiny"\niterations = 8\nrepetitions = 2\n[topology]\nkind = "ring"\nP = 4\n'
        "[data]\nK = 5\nN = 8\n[training]\nL = 2\n"
    )
    main(["run", str(config), "--out", str(tmp_path / "actors"), "--json", "--backend", "ray",
          "--mode", "actors", "--actors", "2"])  # fmt: skip
    main(["run", str(config), "--out", str(tmp_path / "local"), "--json"])
    capsys.readouterr()
    a, b = read_csv(tmp_path / "actors" / "curves.csv"), read_csv(tmp_path / "local" / "curves.csv")
    assert len(a) == len(b) == 8
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for k in x:
            try:
                assert float(x[k]) == pytest.approx(float(y[k]), rel=1e-12), k
            except ValueError:
                assert x[k] == y[k], k


@pytest.mark.ray
@pytest.mark.slow
def test_a_network_larger_than_an_actors_memory_runs_on_actors(ray_local):
    """76 MiB of client data; each actor may allocate at most 70 MiB (tracemalloc-traced
    numpy and Python allocations): one actor cannot hold the network, four can, and give
    the single-process engine's results."""
    from pgfl.backends import RunStopped

    cfg = _config([{"label": "big"}], data={"K": 25, "N": 1000, "M": 49},
                  topology={"kind": "ring", "P": 8}, training={"L": 2, "mu": 0.3, "epochs": 1},
                  iterations=3, repetitions=1)  # fmt: skip
    limit = 70 << 20
    local, settings = _reference(cfg)
    data = build_network(cfg.curves[0], cfg.seed).data
    assert data.X.nbytes + data.y.nbytes > limit
    backend = RayActors(actors=4, checkpoint_every=2, memory_limit=limit)
    assert_equal_runs(_on_actors(cfg, settings, backend), local)
    assert len(backend.peak_memory) == 4 and max(backend.peak_memory) <= limit
    with pytest.raises(RunStopped, match="MemoryError: the actor's allocations reached"):
        _on_actors(cfg, settings, RayActors(actors=1, memory_limit=limit))
