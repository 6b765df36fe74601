"""What the curves of a simulation share: data, loss, graph, schedule — and blocks of units.

A :class:`Network` is the whole system (``P`` units). A :class:`UnitBlock` is what the
local phase of a contiguous block of units needs (its clients' data and schedule, and its
global unit ids, which key its random draws), and :class:`Links` the directed links
``m → p`` of the combination matrix over which servers send their messages (eq. 8 of
"Privatized Graph Federated Learning", Rizk, Vlaski & Sayed, arXiv:2203.07105).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pgfl.data.federated import FederatedData
from pgfl.general import PARAMS as GENERAL
from pgfl.topology import check_combination_matrix
from pgfl.validation import ConfigError, check_int

#: Keyed mini-batch draws address epoch ``e`` and batch slot ``b`` of a client with
#: counters below these bounds (see :func:`pgfl.engine.step.local_models`).
MAX_EPOCHS = 1 << 16
MAX_BATCH = 1 << 20
#: Units of at most this many clients sample their ``L`` clients as the ``L`` smallest of
#: ``K`` keyed uniforms (one per client: every client is looked at, ≈ 2–5 ns each); units
#: of more sample them by Floyd's algorithm from ``L`` keyed uniforms (the other clients
#: are never looked at). Both give uniformly random subsets; the threshold is part of the
#: sampling rule (:func:`pgfl.engine.step.draw_clients`), so changing it changes results.
SCAN_CLIENTS = 1024


def scans_clients(K: int, L: int) -> bool:
    """Whether a unit of ``K`` clients samples ``L`` of them by scanning all ``K`` (else Floyd).

    >>> scans_clients(100, 11), scans_clients(10_000, 11), scans_clients(10_000, 10_000)
    (True, False, True)
    """
    return K <= SCAN_CLIENTS or L == K


@dataclass(frozen=True)
class Links:
    """The links ``m → p`` with ``a_pm > 0`` (self-links included), sorted by receiver, then sender.

    Attributes:
        src: sender ``m`` of each link, ``[n]``.
        dst: receiver ``p`` of each link, ``[n]`` (non-decreasing).
        weight: ``a_pm``, ``[n]``.
        self_weight: ``a_mm`` of the sender, ``[n]`` (graph-homomorphic noise needs it).

    >>> links = Links.from_matrix(np.array([[0.5, 0.5], [0.5, 0.5]]))
    >>> links.src.tolist(), links.dst.tolist()
    ([0, 1, 0, 1], [0, 0, 1, 1])

    """

    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    self_weight: np.ndarray

    @classmethod
    def from_matrix(cls, A: np.ndarray) -> Links:
        """The links of combination matrix ``A`` (row-major non-zeros: receiver-major)."""
        dst, src = np.nonzero(A)
        return cls(src, dst, A[dst, src], np.diagonal(A)[src])

    def subset(self, index: np.ndarray | slice) -> Links:
        """The links at ``index``, in their order."""
        return Links(self.src[index], self.dst[index], self.weight[index], self.self_weight[index])

    def into(self, start: int, stop: int) -> slice:
        """The (contiguous) range of links received by units ``start..stop-1``."""
        lo, hi = np.searchsorted(self.dst, [start, stop])
        return slice(int(lo), int(hi))

    def out_of(self, start: int, stop: int) -> np.ndarray:
        """Indices of the links sent by units ``start..stop-1``, in link order."""
        return np.flatnonzero((self.src >= start) & (self.src < stop))


@dataclass(frozen=True)
class UnitBlock:
    """What the local phase of a contiguous block of units needs, and nothing else.

    Attributes:
        start: global id of the block's first unit; its units are ``start..start+P_b-1``.
        data: the block's clients' data only (``P_b`` units).
        problem: the loss.
        L: clients sampled per unit and iteration.
        epochs: ``E_pk`` of the block's clients, ``[P_b, K]``.
        batch: ``B_pk``, ``[P_b, K]``, or ``None`` for full batches.
        e_max: the network-wide largest ``E_pk`` (part of the key of mini-batch draws).
        b_max: the network-wide largest ``B_pk`` (same; 1 for full batches).
        size, stop, units: ``P_b``, ``start + P_b`` and the global unit ids (derived).

    """

    start: int
    data: FederatedData
    problem: Any
    L: int
    epochs: np.ndarray
    batch: np.ndarray | None
    e_max: int
    b_max: int
    size: int = field(init=False)
    stop: int = field(init=False)
    units: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", int(self.data.X.shape[0]))
        object.__setattr__(self, "stop", self.start + self.size)
        object.__setattr__(self, "units", np.arange(self.start, self.stop))


@dataclass(frozen=True)
class Network:
    """What the curves of one batched simulation share: data, loss, graph and schedule.

    Attributes:
        data: the federated data set (``P`` units of ``K`` clients).
        problem: the loss (e.g. :class:`pgfl.problems.LeastSquares`).
        A: combination matrix ``[P, P]`` (checked against Assumption 1).
        L: clients sampled per unit and iteration, in ``[1, K]``.
        epochs: local epochs ``E_pk``, int ``[P, K]``.
        batch: mini-batch sizes ``B_pk``, int ``[P, K]``; ``None`` means full batch
            (every sample of the client in every epoch).
        mixing: the topology's combination matrix when the server scheme combines with
            something else (``A`` = its :meth:`~pgfl.privacy.mechanisms.Mechanism.combination`:
            the average for a trusted aggregator, the gossip polynomial ``P_K(mixing)``,
            whose Chebyshev form may have negative entries); ``None``: ``A`` itself. The
            accountant reads the servers' graph from it.
        iota2: ``ι₂ = ρ(A − 11ᵀ/P)`` (derived).
        links: the links of ``A`` (derived).

    """

    data: FederatedData
    problem: Any
    A: np.ndarray
    L: int
    epochs: np.ndarray
    batch: np.ndarray | None
    mixing: np.ndarray | None = field(default=None, repr=False)
    iota2: float = field(init=False)
    links: Links = field(init=False, repr=False)

    def __post_init__(self) -> None:
        P, K, _, _ = self.data.shape
        if self.A.shape != (P, P):
            raise ConfigError(f"combination matrix must be P x P with P={P}; got {self.A.shape}")
        if self.mixing is None:
            object.__setattr__(self, "mixing", self.A)
            object.__setattr__(self, "iota2", check_combination_matrix(self.A))
        else:
            if self.mixing.shape != (P, P):
                raise ConfigError(
                    f"topology matrix must be P x P with P={P}; got {self.mixing.shape}"
                )
            check_combination_matrix(self.mixing)
            object.__setattr__(self, "iota2", check_combination_matrix(self.A, signed=True))
        object.__setattr__(self, "links", Links.from_matrix(self.A))
        GENERAL["training.L"].check(self.L, {"data.K": K})
        for name, arr, hi in (
            ("epochs", self.epochs, MAX_EPOCHS),
            ("batch", self.batch, MAX_BATCH),
        ):
            if arr is None:
                continue
            if arr.shape != (P, K) or arr.min() < 1 or arr.max() > hi:
                raise ConfigError(
                    f"training.{name} must be integers in [1, {hi}] of shape {(P, K)}; "
                    f"got shape {arr.shape}, range [{arr.min()}, {arr.max()}]"
                )

    @property
    def dim(self) -> int:
        """``M``, the number of model parameters."""
        return int(self.problem.dim(self.data.shape[-1]))

    def block(self, start: int = 0, stop: int | None = None) -> UnitBlock:
        """The :class:`UnitBlock` of units ``start..stop-1`` (views of this network's arrays)."""
        P = self.data.shape[0]
        stop = P if stop is None else stop
        if not 0 <= start < stop <= P:
            raise ConfigError(f"a block of units must satisfy 0 <= start < stop <= P={P}")
        batch = None if self.batch is None else self.batch[start:stop]
        return UnitBlock(
            start=start,
            data=self.data.units(start, stop),
            problem=self.problem,
            L=self.L,
            epochs=self.epochs[start:stop],
            batch=batch,
            e_max=int(self.epochs.max()),
            b_max=1 if self.batch is None else int(self.batch.max()),
        )

    def blocks(self, block_size: int | None = None) -> list[UnitBlock]:
        """Contiguous blocks of at most ``block_size`` units covering the network."""
        P = self.data.shape[0]
        size = P if block_size is None else check_int("block_size", block_size, lo=1)
        return [self.block(s, min(s + size, P)) for s in range(0, P, size)]
