"""Per-curve settings, and the curves of one batched simulation as arrays and scheme groups."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from pgfl.engine.schemes import (
    SERVER_SCHEMES,
    ClientAggregation,
    ClientNoise,
    Mean,
    NoServerNoise,
    ServerNoise,
)
from pgfl.params import check
from pgfl.validation import ConfigError, check_real


@dataclass(frozen=True)
class CurveSettings:
    """Settings that may differ between the curves of one batched simulation.

    The privacy schemes are given by name with their noise level (the built-in schemes), or
    as scheme objects (:class:`~pgfl.engine.schemes.ClientAggregation`,
    :class:`~pgfl.engine.schemes.ServerNoise`), e.g. secure aggregation
    (:class:`pgfl.privacy.schemes.SecureAggregationScheme`) or a scheme of your own.

    Attributes:
        mu: step size ``μ`` (> 0); a client's SGD step is ``μ / E_pk``.
        share: ``"models"`` or ``"updates"`` (journal §3.4).
        client_noise: ``"none"``, ``"laplace"`` or ``"gaussian"`` noise on what a client
            shares, or a :class:`~pgfl.engine.schemes.ClientAggregation`.
        client_std: the client noise's standard deviation per coordinate.
        server_noise: ``"none"``, ``"random"``, ``"graph_homomorphic"``, ``"random_per_link"``,
            or a :class:`~pgfl.engine.schemes.ServerNoise`.
        server_std: ``σ_g``, std per coordinate of the server-level noise.
        server_distribution: ``"laplace"`` (the papers) or ``"gaussian"``.
        clip_norm: per-sample gradient clipping norm (``inf``: no clipping).
        client: the resolved client aggregation scheme (derived).
        server: the resolved server noise scheme (derived).

    >>> CurveSettings(mu=0.7, server_noise="graph_homomorphic", server_std=0.3).server
    GraphHomomorphic(std=0.3, distribution='laplace')

    """

    mu: float
    share: str = "models"
    client_noise: str | ClientAggregation = "none"
    client_std: float = 0.0
    server_noise: str | ServerNoise = "none"
    server_std: float = 0.0
    server_distribution: str = "laplace"
    clip_norm: float = float("inf")
    client: ClientAggregation = field(init=False, repr=False)
    server: ServerNoise = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check("training.mu", self.mu)
        check("training.share", self.share)
        check_real("privacy.client_std", self.client_std, lo=0)
        check_real("privacy.server_std", self.server_std, lo=0)
        check("privacy.server_distribution", self.server_distribution)
        check("training.clip_norm", self.clip_norm)
        object.__setattr__(self, "client", self._client_scheme())
        object.__setattr__(self, "server", self._server_scheme())

    def _client_scheme(self) -> ClientAggregation:
        if isinstance(self.client_noise, ClientAggregation):
            return self.client_noise
        if self.client_noise == "secure_aggregation":
            raise ConfigError(
                "privacy.client_noise = 'secure_aggregation' needs its protocol settings: pass "
                "client_noise=pgfl.privacy.schemes.SecureAggregationScheme(...)"
            )
        check("privacy.client_noise", self.client_noise)
        if self.client_noise == "none" or self.client_std == 0:
            return Mean()
        return ClientNoise(self.client_noise, self.client_std)

    def _server_scheme(self) -> ServerNoise:
        if isinstance(self.server_noise, ServerNoise):
            return self.server_noise
        check("privacy.server_noise", self.server_noise)
        if self.server_noise == "none" or self.server_std == 0:
            return NoServerNoise()
        return SERVER_SCHEMES[self.server_noise](self.server_std, self.server_distribution)


class SchemeGroup(NamedTuple):
    """Curves whose scheme has the same class: ``cls.method(schemes, ...)`` runs them at once."""

    cls: type
    index: np.ndarray  # curve indices [C']
    schemes: tuple


@dataclass(frozen=True)
class CurveBatch:
    """The curves of one batched simulation: per-curve arrays and scheme groups.

    Attributes:
        settings: the curves.
        mu: ``[C]`` step sizes.
        updates: ``[C]`` whether the curve shares updates.
        clip: ``[C]`` clipping norms, or ``None`` if no curve clips.
        client_groups: the curves grouped by client-aggregation class.
        server_groups: the curves grouped by server-noise class (silent schemes left out).

    """

    settings: tuple[CurveSettings, ...]
    mu: np.ndarray
    updates: np.ndarray
    clip: np.ndarray | None
    client_groups: tuple[SchemeGroup, ...]
    server_groups: tuple[SchemeGroup, ...]

    @classmethod
    def of(cls, curves: Sequence[CurveSettings]) -> CurveBatch:
        """Arrays and groups of ``curves`` (at least one)."""
        if not curves:
            raise ConfigError("curves must list at least one curve; got none")
        clips = np.array([c.clip_norm for c in curves])
        return cls(
            settings=tuple(curves),
            mu=np.array([c.mu for c in curves]),
            updates=np.array([c.share == "updates" for c in curves]),
            clip=clips if np.isfinite(clips).any() else None,
            client_groups=_groups([c.client for c in curves]),
            server_groups=_groups([c.server for c in curves], skip_silent=True),
        )

    def __len__(self) -> int:
        return len(self.settings)


def _groups(schemes: list, *, skip_silent: bool = False) -> tuple[SchemeGroup, ...]:
    classes: dict[type, list[int]] = {}
    for i, s in enumerate(schemes):
        if not (skip_silent and getattr(s, "silent", False)):
            classes.setdefault(type(s), []).append(i)
    return tuple(
        SchemeGroup(k, np.array(idx), tuple(schemes[i] for i in idx)) for k, idx in classes.items()
    )
