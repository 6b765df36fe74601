"""Deployed runs: P = 3 unit servers with K = 4 clients each (and trusted parties), every one
its own process on 127.0.0.1, against the single-process engine (tests/deploy/*.toml).

Each test starts one or two deployments of 15-17 processes forked from one process that
imported pgfl once; a deployment of a few rounds takes 5-15 s on two idle cores.
"""

import csv
import json
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest
from scipy import stats

from pgfl.apps.runner import run_experiment, run_plan
from pgfl.backends import RunStopped
from pgfl.deploy import wire
from pgfl.deploy.certs import Identity
from pgfl.deploy.coordinator import DeployBackend
from pgfl.deploy.draws import SECRETS_ENV
from pgfl.engine import simulate
from pgfl.experiments.loader import parse_config
from pgfl.experiments.plan import prepare_experiment
from pgfl.files import read_toml
from pgfl.folders import MARKER, STAGE

# one pytest worker for every deployment (--dist loadgroup): two deployments of 15
# processes at once on 2 cores would only slow each other towards their round timeouts;
# every port is the system's choice (port 0), so none is shared between workers; a hung
# deployment fails in 15 minutes with its stack printed, and the suite goes on
pytestmark = [pytest.mark.deploy, pytest.mark.xdist_group("deploy"), pytest.mark.timeout(900)]
HERE = Path(__file__).parent
SMALL = HERE / "small.toml"


def curves(folder: Path) -> dict[tuple[str, int], dict[str, float]]:
    rows = csv.DictReader(open(folder / "curves.csv"))
    return {(r["label"], int(r["iteration"])): {k: float(v) if v else np.nan
            for k, v in r.items() if k not in ("label", "iteration")} for r in rows}  # fmt: skip


def assert_same_curves(a: Path, b: Path, *, rounds=None, rtol=1e-9) -> None:
    """Centroid and individual MSD (dB) of every curve and iteration equal to ``rtol``."""
    ca, cb = curves(a), curves(b)
    keys = [k for k in ca if rounds is None or k[1] in rounds]
    assert keys and set(keys) <= set(cb)
    for key in keys:
        for metric in ("centroid_msd_db", "individual_msd_db"):
            x, y = ca[key][metric], cb[key][metric]
            assert abs(x - y) <= rtol * abs(x), (key, metric, x, y)


def config(path: Path, **deploy) -> object:
    raw = read_toml(path)
    raw.setdefault("deploy", {}).update(deploy)
    return parse_config(raw, base=path.parent)


def deploy(cfg, out: Path, *, resume=False, **kw) -> tuple[dict, DeployBackend]:
    backend = DeployBackend(cfg.deploy, local=True, **kw)
    plan = prepare_experiment(cfg, out, resume=resume)
    return run_plan(plan, backend=backend), backend


def pgfl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pgfl.cli", *args], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


# --------------------------------------------------------------------------- the numbers
def test_pgfl_deploy_local_equals_pgfl_run(tmp_path):
    # the criterion: no noise, random, graph-homomorphic, pairwise-cancelling and
    # secure aggregation with dropout, in one deployment (one batch of five curves)
    run = pgfl("run", str(SMALL), "--out", str(tmp_path / "run"), "--json")
    (tmp_path / "dep").mkdir()
    (tmp_path / "dep" / "notes.txt").write_text("mine")  # --force: written there, kept
    dep = pgfl("deploy", str(SMALL), "--local", "--out", str(tmp_path / "dep"), "--json",
               "--force")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert dep.returncode == 0, dep.stderr
    assert_same_curves(tmp_path / "run", tmp_path / "dep")
    a, b = json.loads(run.stdout), json.loads(dep.stdout)
    assert b["engine"]["backend"] == "deploy (local, 15 processes, simulation mode)"
    for ca, cb in zip(a["curves"], b["curves"], strict=True):
        assert ca["label"] == cb["label"] and ca.get("epsilon") == cb.get("epsilon")
    sa, sb = a["curves"][4]["secure_aggregation"], b["curves"][4]["secure_aggregation"]
    assert sb["protocol"] == "cryptographic" and sb["aborted_unit_rounds"] > 0  # dropouts
    assert sa["aborted_unit_rounds"] == sb["aborted_unit_rounds"]
    assert {p.name for p in (tmp_path / "dep").iterdir()} >= {"summary.json", "curves.csv",
                                                              "figure.png", "logs"}  # fmt: skip
    assert not (tmp_path / "dep" / "partial").exists()  # keys and checkpoints removed
    assert not (tmp_path / "dep" / STAGE).exists()  # committed: nothing left staged
    assert (tmp_path / "dep" / "notes.txt").read_text() == "mine"


def test_trusted_aggregator_and_dealer_give_the_engines_numbers(tmp_path):
    # central DP (an aggregator process) and topology-optimized noise (a dealer process):
    # two batches, two deployments of 16 processes each
    cfg = config(HERE / "trusted.toml")
    run_experiment(cfg, tmp_path / "run")
    summary, backend = deploy(cfg, tmp_path / "dep")
    assert_same_curves(tmp_path / "run", tmp_path / "dep")
    assert "16 processes" in summary["engine"]["backend"]


# ------------------------------------------------------------------------------- faults
def _rogue(backend: DeployBackend, folder: Path) -> dict[str, grpc.StatusCode]:
    """Malformed, oversized and unauthenticated calls on server 1 during the run."""
    state = folder / STAGE / "partial" / "deploy" / "batch-000"  # the staging folder
    certs, ready = state / "certs", state / "server-1" / "ready"
    address = f"127.0.0.1:{int(ready.read_text())}"
    calls = {
        "garbage": ("server-0", "/pgfl.Peer/Deliver", b"\x0a\xff\x00junk"),
        "wrong shape": ("server-0", "/pgfl.Peer/Deliver",
                        wire.encode({"m": np.zeros((1, 1, 1, 1))}, {"round": 2})),
        "stale round": ("server-0", "/pgfl.Peer/Deliver",
                        wire.encode({"m": np.zeros((2, 2, 1, 2))}, {"round": 1})),
        "client as peer": ("client-0-0", "/pgfl.Peer/Deliver", wire.encode({})),
        "client as coordinator": ("client-1-0", "/pgfl.Control/Round", wire.encode({})),
        "oversized": ("server-2", "/pgfl.Peer/Deliver", wire.encode({"m": np.zeros(1 << 17)})),
    }  # fmt: skip
    codes = {}
    for what, (name, method, payload) in calls.items():
        ch = wire.channel(Identity.load(certs, name), address, "server-1", max_bytes=1 << 22)
        try:
            ch.unary_unary(method)(payload, timeout=20)
            codes[what] = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            codes[what] = exc.code()
        ch.close()
    return codes


def test_a_killed_client_takes_the_dropout_path_and_rogue_calls_change_nothing(tmp_path):
    cfg = config(HERE / "faults.toml", max_message_bytes=1 << 20)
    run_experiment(cfg, tmp_path / "run")
    seen = {}

    def on_round(i, backend):
        if i == 1:
            seen.update(_rogue(backend, tmp_path / "dep"))
        if i == 2:
            backend.processes["client-1-2"].kill()

    summary, _ = deploy(cfg, tmp_path / "dep", on_round=on_round)
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    assert seen == {"garbage": invalid, "wrong shape": invalid, "stale round": invalid,
                    "client as peer": grpc.StatusCode.PERMISSION_DENIED,
                    "client as coordinator": grpc.StatusCode.PERMISSION_DENIED,
                    "oversized": grpc.StatusCode.RESOURCE_EXHAUSTED}  # fmt: skip
    assert_same_curves(tmp_path / "run", tmp_path / "dep", rounds={1, 2})  # before the kill
    after = curves(tmp_path / "dep")
    last = max(k[1] for k in after)
    assert all(np.isfinite(v["centroid_msd_db"]) for v in after.values())
    before = curves(tmp_path / "run")
    assert any(after[k]["centroid_msd_db"] != before[k]["centroid_msd_db"]
               for k in after if k[1] == last)  # fmt: skip
    simulated = json.loads((tmp_path / "run" / "summary.json").read_text())
    for cs, cd in zip(simulated["curves"], summary["curves"], strict=True):
        assert cd["epsilon"] == cs["epsilon"]  # the ε charged for t survivors, as simulated
    log = (tmp_path / "dep" / "logs" / "batch-000" / "server-1.log").read_text()
    assert "client-1-2 disconnected" in log
    assert "INVALID_ARGUMENT to server-0: not a Flower RecordDict" in log  # one line each
    assert "PERMISSION_DENIED to client-0-0" in log


def test_a_killed_server_stops_the_run_in_one_line_and_it_resumes(tmp_path):
    cfg = config(HERE / "faults.toml", round_timeout=60)
    run_experiment(cfg, tmp_path / "run")

    def kill(i, backend):
        if i == 2:
            backend.processes["server-1"].kill()

    with pytest.raises(RunStopped) as stopped:
        deploy(cfg, tmp_path / "dep", on_round=kill)
    line = str(stopped.value)
    assert "\n" not in line and line.startswith("server-1 at 127.0.0.1:")
    assert "round 3 of 5" in line and "rerun with --resume" in line
    # nothing committed: the folder holds its marker and the staging folder only, whose
    # deployment state keeps the parties' logs and checkpoints for --resume
    assert {p.name for p in (tmp_path / "dep").iterdir()} == {MARKER, STAGE}
    state = tmp_path / "dep" / STAGE / "partial" / "deploy" / "batch-000"
    assert "round 2" in (state / "coordinator.log").read_text()
    assert (state / "server-0" / "checkpoint.npz").is_file()
    deploy(cfg, tmp_path / "dep", resume=True)
    assert_same_curves(tmp_path / "run", tmp_path / "dep")
    assert (tmp_path / "dep" / "logs" / "batch-000" / "coordinator.log").is_file()
    assert not (tmp_path / "dep" / STAGE).exists()


# ---------------------------------------------------------------- deployment mode, secrets
def _secrets(folder: Path) -> dict[str, set[bytes]]:
    out: dict[str, set[bytes]] = {}
    for f in folder.glob("*.secrets"):
        out[f.stem] = {bytes.fromhex(line.split()[1]) for line in f.read_text().splitlines()}
    return out


def test_deployment_mode_draws_the_same_laws_and_no_secret_leaves_its_party(tmp_path, monkeypatch):
    cfg = config(HERE / "secure.toml", mode="deployment", record=True)
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    monkeypatch.setenv(SECRETS_ENV, str(secrets))
    backend = DeployBackend(cfg.deploy, local=True)
    plan = prepare_experiment(cfg, tmp_path / "dep")
    ((batch, deployed),) = list(backend.trajectories(plan))
    monkeypatch.delenv(SECRETS_ENV)
    engine = simulate(batch.net, batch.curves, iterations=cfg.iterations,
                      repetitions=cfg.repetitions, seed=cfg.seed)  # fmt: skip
    for c, label in enumerate(c.label for c in cfg.curves):
        x, y = deployed.W[c, :, 0, 0], engine.W[c, :, 0, 0]
        assert not np.array_equal(x, y), label  # not the seed's draws
        assert stats.ks_2samp(x, y).pvalue > 1e-3, label
    found = _secrets(secrets)
    # the backend alone (no commit): the transcripts are in the run's staging folder
    parties = {p.stem for p in (plan.work / "transcripts" / "batch-000").glob("*.pgflwire")}
    assert len(parties) == 15 and set(found) == parties
    kinds = {
        line.split()[0] for f in secrets.glob("*.secrets") for line in f.read_text().splitlines()
    }
    assert kinds >= {"generator-key", "edge-secret", "x25519-channel", "x25519-mask",
                     "self-mask-seed", "server-noise", "client-noise"}  # fmt: skip
    files = [f for f in (tmp_path / "dep").rglob("*") if f.is_file()]
    assert any(f.suffix == ".pgflwire" for f in files) and any(f.suffix == ".log" for f in files)
    for f in files:
        data = f.read_bytes()
        owner = f.stem if f.suffix in (".pgflwire", ".log") else None
        for party, mine in found.items():
            if party != owner:
                leaked = [s for s in mine if s in data]
                assert not leaked, f"{f.name} holds a secret of {party}"


# --------------------------------------------------------------------------- the audit
def test_the_audit_of_a_recorded_transcript_agrees_with_the_simulators(tmp_path):
    # the two canary worlds on deployed parties that record what crossed the wire; the
    # audit of server 1's received messages gives the verdict of the engine's messages
    audit_cli = ["privacy", "audit", str(HERE / "audit.toml"), "--curve", "random",
                 "--trials", "200", "--json"]  # fmt: skip
    engine = pgfl(*audit_cli)
    recorded = pgfl(*audit_cli, "--deploy", "--transcript", str(tmp_path / "wire"))
    assert engine.returncode == 0, engine.stderr
    assert recorded.returncode == 0, recorded.stderr
    a, b = json.loads(engine.stdout), json.loads(recorded.stdout)
    assert a["epsilon_lower"] > 0  # the attack learns something: the comparison is not vacuous
    assert {k: b[k] for k in a} == a  # the same verdict, bound and rates
    transcripts = list((tmp_path / "wire").rglob("*.pgflwire"))
    assert len(transcripts) == 2 * 15
    again = pgfl(*audit_cli, "--transcript", str(tmp_path / "wire"))  # re-read, no run
    assert json.loads(again.stdout) == b


# ----------------------------------------------------------------------- separate hosts
def _free_ports(n: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_parties_started_on_their_own_join_the_coordinator(tmp_path):
    # what docs/deploy.md's hosts do, on one machine: --make-certs, each party started by
    # `pgfl deploy --party NAME`, the coordinator joining the addresses of [deploy]
    ports = _free_ports(2)
    text = (HERE / "hosts.toml").read_text().replace("PORT0", str(ports[0]))
    (tmp_path / "hosts.toml").write_text(text.replace("PORT1", str(ports[1])))
    cfg = str(tmp_path / "hosts.toml")
    made = pgfl("deploy", cfg, "--make-certs", str(tmp_path / "certs"))
    assert made.returncode == 0, made.stderr
    names = ["server-0", "server-1", "client-0-0", "client-0-1", "client-1-0", "client-1-1"]
    procs = [subprocess.Popen([sys.executable, "-m", "pgfl.cli", "deploy", cfg, "--party", n,
                               "--state", str(tmp_path / "parties" / n)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for n in names]  # fmt: skip
    try:
        dep = pgfl("deploy", cfg, "--out", str(tmp_path / "dep"))
        run = pgfl("run", cfg, "--out", str(tmp_path / "run"))
        assert dep.returncode == 0, dep.stderr
        assert run.returncode == 0, run.stderr
        assert_same_curves(tmp_path / "run", tmp_path / "dep")
        for p in procs:  # the coordinator's Stop ends every party
            assert p.wait(timeout=60) == 0, p.stderr.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_bad_deployments_stop_in_one_line_before_anything_runs(tmp_path):
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    gossip = tmp_path / "gossip.toml"
    gossip.write_text(
        SMALL.read_text().replace('"pairwise_cancelling", pairwise_ratio = 1.5', '"gossip"')
    )
    skellam = tmp_path / "skellam.toml"  # distributed DP: refused, not run without its noise
    skellam.write_text(
        SMALL.read_text().replace(
            'client_noise = "secure_aggregation"', 'client_noise = "skellam", ddp_variance = 1.0'
        )
    )
    cases = [
        (["deploy", str(SMALL), "--out", str(tmp_path / "a")], "needs deploy.servers"),
        (["deploy", str(gossip), "--local", "--out", str(tmp_path / "b")], "cannot be deployed"),
        (
            ["deploy", str(skellam), "--local", "--out", str(tmp_path / "b")],
            "privacy.client_noise = 'skellam' (curve 'secure_aggregation') cannot be deployed",
        ),
        (["deploy", str(SMALL), "--local", "--mode", "secret"], "--mode must be one of"),
        (["deploy", str(SMALL), "--party", "server-9"], "deploy.servers"),
        (["deploy", str(SMALL), "--local", "--party", "server-0"], "give one of"),
        (["deploy", str(SMALL), "--local", "--out", str(foreign)], "give --force"),
    ]
    for args, message in cases:
        proc = pgfl(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]  # a foreign folder untouched
