"""What every party of a deployed batch knows (public), and which schemes can be deployed.

A deployment runs one :class:`~pgfl.experiments.plan.Batch` of an experiment (curves
that share their structure) with one process per party: a server per unit, a client per
client, and a trusted party where a scheme has one (:data:`PARTIES`). Every party holds
the same :class:`Job`: the curves' settings, the topology (combination matrix), the
schedule's sizes, the seed (simulation mode) and the deployment's settings — nothing of
any client's data. A client builds or receives only its own data (:class:`Shard`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pgfl.engine import CurveBatch, CurveSettings
from pgfl.engine.network import Links
from pgfl.experiments.config import CurveConfig
from pgfl.folders import digest_of
from pgfl.privacy import mechanisms
from pgfl.validation import ConfigError

__all__ = [
    "PARTIES",
    "Job",
    "Shard",
    "check_deployable",
    "job_from_config",
    "trusted_parties",
]

#: The trusted parties a deployment runs (:mod:`pgfl.deploy.trusted`), in a fixed order: a
#: scheme that names one of them in its ``trusted`` needs that process.
PARTIES = ("aggregator", "dealer")


def check_deployable(settings: tuple[CurveSettings, ...], labels: list[str]) -> None:
    """One line naming a curve whose scheme has no deployed protocol (a ConfigError).

    Each mechanism declares whether :mod:`pgfl.deploy` runs it (``not_deployed``).
    """
    for s, label in zip(settings, labels, strict=True):
        for scheme in (s.client, s.server):
            if scheme.not_deployed is not None:
                table = mechanisms.REGISTRY[scheme.level]
                known = [n for n, cls in table.items() if cls.not_deployed is None]
                raise ConfigError(
                    f"privacy.{scheme.level}_noise = {scheme.name!r} (curve {label!r}) cannot "
                    f"be deployed: {scheme.not_deployed}; deployable: {', '.join(known)}"
                )


def trusted_parties(settings: tuple[CurveSettings, ...]) -> tuple[str, ...]:
    """The trusted parties the curves' schemes need (:data:`PARTIES`), in a fixed order."""
    need = {party for s in settings for m in (s.client, s.server) for party in m.trusted}
    return tuple(n for n in PARTIES if n in need)


@dataclass(frozen=True)
class Shard:
    """One client's own data: its samples (padded to ``N_max``), count and schedule.

    Attributes:
        X: features ``[N_max, F]``; y: targets ``[N_max]``; count: its ``N_pk``.
        epochs: ``E_pk``; batch: ``B_pk`` (``None``: full batches).

    """

    X: np.ndarray
    y: np.ndarray
    count: int
    epochs: int
    batch: int | None


@dataclass(frozen=True)
class Job:
    """The public description of a deployed batch, the same for every party.

    Attributes:
        name: the experiment's name; batch: the batch's position in the plan.
        seed, iterations: the run's; reps: the global repetition ids ``[R]``.
        settings: the batch's curves (checked against the network: ready to run).
        labels: the curves' labels.
        A: the combination matrix the engine combines with ``[P, P]``.
        K, L, M: clients per unit, sampled per round, model dimension.
        e_max, b_max: the network's largest epochs and batch (keys of the mini-batch draws).
        recipe: the curve configuration the data comes from (a client builds its own shard).
        deploy: the ``[deploy]`` settings (mode, timeouts, sizes, record).
        trusted: the trusted parties of the batch (:func:`trusted_parties`).
        problem: the loss (its gradient runs on the clients).
        w0: the initial model ``[M]`` (``None``: zeros).

    """

    name: str
    batch: int
    seed: int
    iterations: int
    reps: np.ndarray
    settings: tuple[CurveSettings, ...]
    labels: tuple[str, ...]
    A: np.ndarray
    K: int
    L: int
    M: int
    e_max: int
    b_max: int
    recipe: CurveConfig
    deploy: Any
    trusted: tuple[str, ...]
    problem: Any
    w0: np.ndarray | None = None
    links: Links = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "links", Links.from_matrix(self.A))

    @property
    def P(self) -> int:
        """The number of units."""
        return int(self.A.shape[0])

    @property
    def C(self) -> int:
        """The number of curves."""
        return len(self.settings)

    @property
    def R(self) -> int:
        """The number of repetitions."""
        return int(self.reps.size)

    @property
    def curves(self) -> CurveBatch:
        """The curves as the engine's :class:`~pgfl.engine.CurveBatch` (already checked)."""
        cached = self.__dict__.get("_curves")
        if cached is None:
            cached = CurveBatch.of(list(self.settings))
            object.__setattr__(self, "_curves", cached)
        return cached

    @property
    def identity(self) -> str:
        """What the batch's parties' checkpoints are stamped with (public fields, digested).

        The same for the coordinator's job and for a job built from the configuration by
        a party on its host (:func:`job_from_config`).
        """
        cached = self.__dict__.get("_identity")
        if cached is None:
            fields = {
                "name": self.name, "batch": self.batch, "seed": self.seed,
                "iterations": self.iterations, "reps": self.reps.tolist(),
                "labels": list(self.labels), "A": np.asarray(self.A).tolist(), "K": self.K,
                "L": self.L, "M": self.M, "mode": getattr(self.deploy, "mode", None),
            }  # fmt: skip
            cached = digest_of(fields)
            object.__setattr__(self, "_identity", cached)
        return cached

    @property
    def central(self) -> bool:
        """The batch's servers combine through the trusted aggregator (central curves)."""
        return "aggregator" in self.trusted

    def in_neighbours(self, p: int) -> list[int]:
        """The servers whose messages unit ``p`` combines (itself included), in order."""
        return sorted(set(self.links.src[self.links.dst == p].tolist()))

    def out_neighbours(self, p: int) -> list[int]:
        """The servers unit ``p`` sends messages to (itself included), in order."""
        return sorted(set(self.links.dst[self.links.src == p].tolist()))

    def edges(self, p: int) -> list[tuple[int, int]]:
        """Server ``p``'s edges ``(lo, hi)`` with another server (pairwise terms)."""
        nb = set(self.in_neighbours(p)) | set(self.out_neighbours(p))
        return [(min(p, q), max(p, q)) for q in sorted(nb - {p})]


def job_from_config(cfg: Any, deploy: Any = None) -> Job:
    """The :class:`Job` of a configuration's one batch, from its outline (no client data).

    What a party started on its own host (``pgfl deploy --party``) builds: the same job as
    the coordinator's (:func:`pgfl.deploy.coordinator.make_job`), since both come from the
    configuration and the seed. A deployment across hosts runs one batch: curves that share
    their structure (topology, data, training but μ, sharing, clipping).
    """
    from pgfl.experiments.build import build_network, curve_settings  # lazy: the data builders

    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(cfg.curves):
        groups.setdefault(c.structure(), []).append(i)
    if len(groups) > 1:
        raise ConfigError(
            "a deployment across hosts runs curves that share one structure (topology, data, "
            f"training but mu/share/clip); this configuration has {len(groups)} groups: split it"
        )
    indices = next(iter(groups.values()))
    recipe = cfg.curves[indices[0]]
    net = build_network(recipe, cfg.seed, outline=True)
    settings = [curve_settings(cfg.curves[i], cfg.iterations, net) for i in indices]
    curves = CurveBatch.of(settings, net)
    labels = [cfg.curves[i].label for i in indices]
    check_deployable(curves.settings, labels)
    return Job(
        name=cfg.name, batch=0, seed=cfg.seed, iterations=cfg.iterations,
        reps=np.arange(cfg.repetitions), settings=curves.settings, labels=tuple(labels),
        A=np.asarray(net.A), K=int(net.data.shape[1]), L=int(net.L), M=int(net.dim),
        e_max=int(net.epochs.max()), b_max=1 if net.batch is None else int(net.batch.max()),
        recipe=recipe, deploy=deploy if deploy is not None else cfg.deploy,
        trusted=trusted_parties(curves.settings), problem=net.problem,
        w0=getattr(net.problem, "initial", None),
    )  # fmt: skip
