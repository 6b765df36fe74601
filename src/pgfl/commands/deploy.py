"""``pgfl deploy``: run a configuration with every server and client its own process.

``pgfl deploy CONFIG --local --out DIR`` starts every party on this machine and writes
what ``pgfl run`` writes; without ``--local`` the coordinator joins parties started on
their hosts with ``pgfl deploy CONFIG --party NAME``; ``--make-certs DIR`` writes a CA and
a certificate per party. See docs/deploy.md.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from pgfl.commands.common import (
    ForceOpt,
    JsonOpt,
    KeepPartialOpt,
    OutOpt,
    ResumeOpt,
    execute,
    plain,
    report,
    with_run_options,
)
from pgfl.files import read_toml, reading
from pgfl.validation import ConfigError

__all__ = ["deploy"]


def _config(config: Path, quick: bool, seed: int | None, mode: str | None, record: bool) -> Any:
    """The configuration with the command's options (each checked as its setting)."""
    from pgfl.experiments.loader import parse_config  # lazy: the experiments' modules
    from pgfl.extras import require
    from pgfl.params import PARAMS

    require("grpc", "deploy", "pgfl deploy")
    require("flwr", "deploy", "pgfl deploy")
    with reading(config, what="config file"):
        raw = read_toml(config)
    if seed is not None:
        raw["seed"] = PARAMS["seed"].named("--seed").check(seed)
    cfg = parse_config(raw, quick=quick, base=config.parent)
    given = {}
    if mode is not None:
        given["mode"] = PARAMS["deploy.mode"].named("--mode").check(mode)
    if record:
        given["record"] = True
    return replace(cfg, deploy=replace(cfg.deploy, **given)) if given else cfg


def deploy(
    config: Annotated[Path, typer.Argument(help="Experiment TOML file (with a [deploy] table).")],
    out_dir: OutOpt = None,
    local: Annotated[
        bool, typer.Option("--local", help="Start every party on this machine (127.0.0.1).")
    ] = False,
    party: Annotated[
        str | None,
        typer.Option(
            "--party",
            help="Run one party (server-P, client-P-K, aggregator, dealer) "
            "on this host until the coordinator stops it.",
        ),  # fmt: skip
    ] = None,
    state_dir: Annotated[
        Path | None, typer.Option("--state", help="--party: its folder (default: parties/NAME).")
    ] = None,
    make_certs: Annotated[
        Path | None,
        typer.Option(
            "--make-certs",
            help="Write a CA and a certificate per party into DIR, "
            "naming the hosts of deploy.servers etc., and exit.",
        ),  # fmt: skip
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="deploy.mode: simulation (reproduces pgfl run) or deployment (secure generators).",
        ),  # fmt: skip
    ] = None,
    record: Annotated[
        bool, typer.Option("--record", help="deploy.record: each party records its messages.")
    ] = False,
    quick: Annotated[
        bool, typer.Option("--quick", help="Apply the file's \\[quick] table.")
    ] = False,
    seed: Annotated[int | None, typer.Option("--seed", help="Root seed >= 0.")] = None,
    resume: ResumeOpt = False,
    as_json: JsonOpt = False,
    keep_partial: KeepPartialOpt = False,
    force: ForceOpt = False,
) -> None:
    """Run CONFIG with every unit server, client and trusted party its own process."""
    if sum(x is not None and x is not False for x in (party, make_certs, local or None)) > 1:
        raise ConfigError("give one of --local, --party NAME, --make-certs DIR")
    cfg = _config(config, quick, seed, mode, record)
    if make_certs is not None:
        return _make_certs(cfg, make_certs)
    if party is not None:
        return _party(cfg, party, state_dir)
    from pgfl.deploy.coordinator import DeployBackend  # lazy: grpc, Flower
    from pgfl.experiments.plan import prepare_experiment

    cfg = with_run_options(cfg, keep_partial=keep_partial or None)
    folder = out_dir or Path("runs") / cfg.name
    backend = DeployBackend(cfg.deploy, local=local)
    backend.start()  # addresses and certificates checked before anything is written
    plan = prepare_experiment(cfg, folder, resume=resume, force=force)  # writes nothing
    backend.check(plan)
    report(execute(plan, as_json, backend=backend), folder, as_json)
    return None


def _make_certs(cfg: Any, folder: Path) -> None:
    """Certificates for every party of ``cfg``'s deployment, naming their hosts."""
    from pgfl.deploy.certs import make_certificates, party_names  # lazy: cryptography
    from pgfl.deploy.job import job_from_config

    job = job_from_config(cfg)
    names = party_names(job.P, job.K, job.trusted)
    hosts: dict[str, list[str]] = {}
    d = cfg.deploy
    for p, address in enumerate(d.servers or ()):
        hosts[f"server-{p}"] = [address.rpartition(":")[0]]
    for name in job.trusted:
        address = getattr(d, name)
        if address is not None:
            hosts[name] = [address.rpartition(":")[0]]
    make_certificates(names, folder, hosts=hosts, keep_ca_key=True)
    plain(f"wrote ca.pem and {len(names)} certificates and keys into {folder}")


def _party(cfg: Any, name: str, state: Path | None) -> None:
    """Run one party of ``cfg``'s deployment on this host (addresses from ``[deploy]``)."""
    from pgfl.deploy.job import job_from_config  # lazy: grpc, Flower
    from pgfl.deploy.party import PartySpec, run_party

    job = job_from_config(cfg)
    d = cfg.deploy
    if d.servers is None or d.certs is None:
        raise ConfigError("pgfl deploy --party needs deploy.servers and deploy.certs")
    valid = {f"server-{p}" for p in range(job.P)} | set(job.trusted)
    valid |= {f"client-{p}-{k}" for p in range(job.P) for k in range(job.K)}
    if name not in valid:
        raise ConfigError(f"--party must name a party of this deployment; got {name!r}")
    state = state or Path("parties") / name
    transcript = state / "transcript.pgflwire" if d.record else None
    kind = name.split("-")[0]
    if kind == "client":
        server = d.servers[int(name.split("-")[1])]
        spec = PartySpec(name, job, state, Path(d.certs), server=server, transcript=transcript)
    else:
        address = d.servers[int(name.split("-")[1])] if kind == "server" else getattr(d, name)
        if address is None:
            raise ConfigError(f"--party {name} needs deploy.{name} (its address host:port)")
        listen = f"0.0.0.0:{address.rpartition(':')[2]}"
        spec = PartySpec(name, job, state, Path(d.certs), listen=listen, transcript=transcript)
    run_party(spec)
