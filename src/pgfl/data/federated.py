"""The federated dataset container: padded per-client arrays plus true counts.

A federated dataset over ``P`` units of ``K`` clients each is stored padded (see
ARCHITECTURE.md): client ``(p, k)`` owns rows ``X[p, k, :counts[p, k]]``;
rows past its count are zero padding and never read by the engine. Features and targets
are one array ``Xy[P, K, N_max, M + 1]`` (the layout the compiled local phase reads, a
sample's features and target side by side); ``X`` and ``y`` are views of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pgfl.validation import ConfigError


@dataclass(frozen=True)
class FederatedData:
    """Per-client samples of a federated learning problem, padded to a common length.

    Attributes:
        X: features, shape ``[P, K, N_max, M]``, float64 (a view of :attr:`Xy`).
        y: targets, shape ``[P, K, N_max]``: the output ``d`` for regression, labels in
            ``{-1, +1}`` for classification (a view of :attr:`Xy`).
        counts: samples per client ``N_{p,k}``, shape ``[P, K]``, int64, each in ``[1, N_max]``.
        X_test, y_test: optional clean held-out set, shapes ``[N_test, M]`` and ``[N_test]``.
        w_star: optional generating model ``w*`` (synthetic data), shape ``[M]``.

    The data are stored once, as :attr:`Xy`: ``X`` and ``y`` given as the views
    ``Xy[..., :M]`` and ``Xy[..., M]`` of one C-contiguous float64 array are kept as they
    are; otherwise they are copied into a new one (the caller may then drop its own).

    >>> d = FederatedData(np.zeros((2, 3, 4, 5)), np.zeros((2, 3, 4)), np.full((2, 3), 4))
    >>> d.shape, d.Xy.shape, bool(np.shares_memory(d.X, d.Xy))
    ((2, 3, 4, 5), (2, 3, 4, 6), True)
    >>> Xy = np.zeros((2, 3, 4, 6))
    >>> FederatedData(Xy[..., :5], Xy[..., 5], np.full((2, 3), 4)).Xy is Xy
    True

    """

    X: np.ndarray
    y: np.ndarray
    counts: np.ndarray
    X_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    w_star: np.ndarray | None = None

    def __post_init__(self) -> None:
        X, y, n = self.X, self.y, self.counts
        if X.ndim != 4:
            raise ConfigError(f"X must have shape [P, K, N_max, M]; got shape {X.shape}")
        P, K, N, _ = X.shape
        if y.shape != (P, K, N):
            raise ConfigError(f"y must have shape [P, K, N_max]={(P, K, N)}; got {y.shape}")
        if n.shape != (P, K):
            raise ConfigError(f"counts must have shape [P, K]={(P, K)}; got {n.shape}")
        if n.size and (n.min() < 1 or n.max() > N):
            bad = np.argwhere((n < 1) | (n > N))[0]
            raise ConfigError(
                f"counts must be in [1, N_max={N}] for every client; "
                f"got {int(n[tuple(bad)])} at client (p={bad[0]}, k={bad[1]})"
            )
        if not all(np.isfinite(a.max()) and np.isfinite(a.min()) for a in (X, y) if a.size):
            raise ConfigError("X and y must be finite (no NaN or inf)")  # NaN and ±inf propagate
        self._keep(_joined(X, y))

    def _keep(self, Xy: np.ndarray) -> None:
        """Store ``Xy``, with ``X`` and ``y`` its views."""
        M = Xy.shape[-1] - 1
        object.__setattr__(self, "_Xy", Xy)
        object.__setattr__(self, "X", Xy[..., :M])
        object.__setattr__(self, "y", Xy[..., M])

    def __getstate__(self) -> dict:
        """Pickled without the views ``X`` and ``y`` (one copy of the samples)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("X", "y")}

    def __setstate__(self, state: dict) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        self._keep(self._Xy)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(P, K, N_max, M)``."""
        return tuple(int(s) for s in self.X.shape)  # type: ignore[return-value]

    @property
    def Xy(self) -> np.ndarray:
        """Features and target side by side, ``[P, K, N_max, M + 1]``: the data themselves."""
        return self._Xy

    def units(self, start: int, stop: int) -> FederatedData:
        """The units ``start..stop-1`` as a data set of views (test set and ``w*`` kept).

        >>> d = FederatedData(np.zeros((3, 2, 4, 5)), np.zeros((3, 2, 4)), np.full((3, 2), 4))
        >>> d.units(1, 3).shape
        (2, 2, 4, 5)
        """
        if (start, stop) == (0, self.X.shape[0]):
            return self
        sub = object.__new__(FederatedData)  # views of validated arrays: no re-validation
        for f in ("X", "y", "counts"):
            object.__setattr__(sub, f, getattr(self, f)[start:stop])
        for f in ("X_test", "y_test", "w_star"):
            object.__setattr__(sub, f, getattr(self, f))
        object.__setattr__(sub, "_Xy", self.Xy[start:stop])
        return sub

    @property
    def mask(self) -> np.ndarray:
        """Boolean ``[P, K, N_max]``: True where a row is a real sample."""
        return np.arange(self.X.shape[2]) < self.counts[..., None]

    def copy_units(self, start: int, stop: int) -> FederatedData:
        """The units ``start..stop-1`` as a data set of their own (copies: the rest can go)."""
        sub = self.units(start, stop)
        Xy = sub.Xy.copy()
        M = Xy.shape[-1] - 1
        return FederatedData(
            Xy[..., :M], Xy[..., M], sub.counts.copy(), self.X_test, self.y_test, self.w_star
        )

    @classmethod
    def from_client_lists(
        cls,
        Xs: list[list[np.ndarray]],
        ys: list[list[np.ndarray]],
        **extra: np.ndarray | None,
    ) -> FederatedData:
        """Pad nested lists ``Xs[p][k]`` (``[N_pk, M]``) and ``ys[p][k]`` (``[N_pk]``)."""
        P, K = len(Xs), len(Xs[0])
        M = Xs[0][0].shape[1]
        counts = np.array([[len(ys[p][k]) for k in range(K)] for p in range(P)], dtype=np.int64)
        N = int(counts.max())
        Xy = np.zeros((P, K, N, M + 1))
        for p in range(P):
            for k in range(K):
                Xy[p, k, : counts[p, k], :M] = Xs[p][k]
                Xy[p, k, : counts[p, k], M] = ys[p][k]
        return cls(Xy[..., :M], Xy[..., M], counts, **extra)


def _joined(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``Xy`` with ``X = Xy[..., :M]`` and ``y = Xy[..., M]``: theirs if they are such views."""
    P, K, N, M = X.shape
    base = X.base
    if (
        isinstance(base, np.ndarray)
        and y.base is base
        and base.dtype == np.float64
        and base.flags.c_contiguous
        and base.shape == (P, K, N, M + 1)
        and X.__array_interface__["data"][0] == base.__array_interface__["data"][0]
        and y.__array_interface__["data"][0] == base.__array_interface__["data"][0] + 8 * M
        and X.strides == base.strides
        and y.strides == base.strides[:3]
    ):
        return base
    Xy = np.empty((P, K, N, M + 1))
    Xy[..., :M] = X
    Xy[..., M] = y
    return Xy


@dataclass(frozen=True)
class DataOutline:
    """The sizes of a federated data set without its samples: what a driver may hold.

    A :class:`~pgfl.engine.Network` built on an outline can be validated and planned
    (topology, schedule, privacy accounting) but not simulated; the processes that hold
    blocks of units build their own clients' data (:mod:`pgfl.backends.ray_actors`).

    ``counts`` are the clients' sample counts ``[P, K]`` where known (the accounting of
    record-level neighbours needs the fewest), else ``None``.

    >>> DataOutline((4, 3, 10, 2)).shape
    (4, 3, 10, 2)
    """

    shape: tuple[int, int, int, int]
    X_test: None = None
    y_test: None = None
    counts: np.ndarray | None = field(default=None, compare=False, repr=False)
