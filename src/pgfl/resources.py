"""Will it fit? The memory a run needs, estimated from its sizes before anything is allocated.

A configuration with ``iterations = 1e10`` or ``data.M = 1e6`` would otherwise crash deep
inside numpy ("Unable to allocate 14.6 TiB"). :func:`simulation_memory` adds up the
arrays a batched simulation holds at its peak (named by their shapes, the symbols of
``ARCHITECTURE.md``):

* the data ``Xy[P, K, N, M+1]`` (features and targets side by side, stored once), two
  floats per sample more for regression (masks, the weights of ``w°``) and six for
  classification (Newton's margins, weights and curvature for ``w°``), and the
  generator's chunk of clients (:data:`GENERATOR_CHUNK_BYTES` or 1/128 of the data, at
  least a client; ×6 for its temporaries, and for regression the chunk's covariance
  factors ``[M, M]`` per client, ×8: QR factors, workspace and products); the
  combination matrix ``[P, P]``;
* the per-iteration metrics ``[T, C, R]`` (centroid MSD, individual MSD, disagreement;
  with a test set also test error and log-loss ``[T, C, R]`` and the servers' test errors
  ``[T, C, R, P]``);
* the server models ``W[C, R, P, M]`` and the chunk of kept models ``[64, C, R, P, M]``
  whose metrics are computed together (with their temporaries, ×4);
* a round's working set over the ``n = R·P·L`` sampled clients: mini-batch positions and
  sample indices ``[E, n, B]``, the gathered rows ``[E, n, B, M+1]``, the clients' models
  and gradients ``[n, M, C]``, margins and clipping scales ``[n, B, C]`` (``B = N`` for
  full batches);
  this is the numpy local phase's working set; the compiled local phase
  (:mod:`pgfl.engine.compiled`) reads samples in place and needs less, so the estimate
  bounds both;
* with a test set, the test margins of every kept server model
  ``[64, C, R, P, N_test]``;

:func:`pgfl.experiments.memory.experiment_memory` takes the largest batch of curves of a
configuration and adds what the run keeps for every curve (saved metrics and the rows of
``curves.csv``) and the ε accounting of a privatized curve (:func:`accounting_memory`).
Real data is read, encoded and spread over the clients before the run starts; that peak
(:func:`loading_memory`) can exceed the run's for a wide table, and the larger counts.
:func:`check_fits`
compares an estimate with :func:`available_memory` and raises
:class:`~pgfl.validation.ConfigError` in one line:

``iterations=10000000000 needs about 671 GiB of memory (metrics [T, C, R]); this machine
has 22.8 GiB available``.

The per-row and per-iteration costs of Python objects (``curves.csv`` rows, ε
accountants) were measured on this implementation (``tracemalloc``/peak RSS) and are
rounded up. No time estimate is made: the speed of a round depends on the machine and
on how many clients are still training, so any single rate would mislead.

>>> terms = simulation_memory(P=10, K=100, N=100, M=2, L=11, E=10, B=10, C=3, R=4, T=10**10)
>>> format_bytes(terms["metrics [T, C, R]"])
'2.62 TiB'
>>> try:
...     check_fits("iterations=10000000000", terms, available=2**30)
... except ConfigError as exc:
...     for part in str(exc).split("; "):
...         print(part)
iterations=10000000000 needs about 2.62 TiB of memory (metrics [T, C, R])
this machine has 1 GiB available
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from pgfl.validation import ConfigError

__all__ = [
    "ACCOUNTING_BYTES_PER_ITERATION",
    "CSV_ROW_BYTES",
    "FLOAT",
    "accounting_memory",
    "available_memory",
    "check_fits",
    "format_bytes",
    "loading_memory",
    "simulation_memory",
]

#: Bytes of one float64.
FLOAT = 8
#: Iterations whose models are kept before their metrics are computed together.
KEPT_ITERATIONS = 64
#: The synthetic generators' largest chunk of clients (``pgfl.data.synthetic``).
GENERATOR_CHUNK_BYTES = 16 << 20
#: Bytes per iteration of ε accounting, by accountant (measured peak RSS, rounded up):
#: the privacy-loss distribution and Rényi accountants keep a Python object per release.
ACCOUNTING_BYTES_PER_ITERATION = {"pld": 6144, "rdp": 6144}
#: Bytes per iteration of the other accountants (closed forms over numpy arrays).
ACCOUNTING_BYTES_DEFAULT = 512
#: Bytes per row of ``curves.csv`` (one curve, one iteration) while the runner writes
#: and plots it: Python dicts of floats, twice (measured about 0.9 KiB, rounded up).
CSV_ROW_BYTES = 1536

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_bytes(n: float) -> str:
    """``n`` bytes with a binary unit and three significant digits.

    >>> format_bytes(15 * 2**40 + 2**39), format_bytes(512), format_bytes(1536)
    ('15.5 TiB', '512 B', '1.5 KiB')
    """
    n = float(n)
    unit = 0
    while n >= 1024 and unit < len(_UNITS) - 1:
        n /= 1024
        unit += 1
    return f"{n:.3g} {_UNITS[unit]}"


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().split()[0]
    except (OSError, IndexError):
        return None
    return int(text) if text.isdigit() else None


def available_memory() -> int | None:
    """Bytes this process can still allocate, or ``None`` if the system does not say.

    The smallest of: ``MemAvailable`` in ``/proc/meminfo`` (else free physical pages
    from ``os.sysconf``), the cgroup's memory limit minus its usage (containers), and
    the address-space limit (``ulimit -v``) minus the process's current size.
    """
    limits = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    if not limits:
        try:
            limits.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            pass
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ):
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and usage is not None and limit < 2**60:
            limits.append(max(0, limit - usage))
    try:
        import resource  # lazy: Unix only (an ImportError elsewhere)

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            size = _read_int("/proc/self/statm")
            used = 0 if size is None else size * os.sysconf("SC_PAGE_SIZE")
            limits.append(max(0, soft - used))
    except (ImportError, ValueError, OSError):
        pass
    return min(limits) if limits else None


def check_fits(what: str, nbytes: int | Mapping[str, int], *, available: int | None = None) -> int:
    """Raise :class:`ConfigError` if ``nbytes`` exceed the available memory; return them.

    Args:
        what: the setting(s) responsible, as the message's subject (``"iterations=1e10"``).
        nbytes: a number of bytes, or named terms (``{"metrics [T, C, R]": ...}``) whose
            sum is checked and whose largest is named in the message.
        available: bytes available (default: :func:`available_memory`; if the system does
            not say, nothing is checked).

    """
    terms = dict(nbytes) if isinstance(nbytes, Mapping) else {}
    total = sum(terms.values()) if terms else int(nbytes)  # type: ignore[arg-type]
    if available is None:
        available = available_memory()
    if available is None or total <= available:
        return total
    largest = f" ({max(terms, key=terms.__getitem__)})" if terms else ""
    raise ConfigError(
        f"{what} needs about {format_bytes(total)} of memory{largest}; "
        f"this machine has {format_bytes(available)} available"
    )


def simulation_memory(
    *,
    P: int,
    K: int,
    N: int,
    M: int,
    L: int,
    E: int,
    B: int | None,
    C: int,
    R: int,
    T: int,
    test_size: int | None = 0,
    covariances: bool = True,
) -> dict[str, int]:
    """Peak bytes of one batched simulation, by the arrays it holds (see the module doc).

    >>> t = simulation_memory(P=2, K=3, N=4, M=5, L=1, E=1, B=1, C=1, R=1, T=7)
    >>> t["metrics [T, C, R]"] == 8 * 7 * 3  # three float64 metrics per iteration
    True

    Args:
        P: units.
        K: clients per unit.
        N: largest client data set N_max.
        M: model dimension.
        L: clients sampled per unit and iteration.
        E: largest number of local epochs.
        B: largest mini-batch, ``None`` for full batches (every sample, ``B = N``).
        C: curves batched together.
        R: repetitions.
        T: iterations.
        test_size: held-out samples (adds the test metrics); ``None`` (``data.test_size``
            unset for synthetic data) or 0: none.
        covariances: the data generator draws a covariance factor ``[M, M]`` per client
            (synthetic regression).

    Returns:
        Bytes per named term; their sum is the estimate.

    """
    full = B is None
    test_size = test_size or 0
    b = N if full else B
    n = R * P * L
    metrics = 3 + (2 + P if test_size else 0)
    round_floats = (
        (0 if full else 2 * E * n * b)  # batch positions and sample indices
        + (1 if full else E) * n * b * (M + 1)  # gathered rows
        + 2 * n * b  # sample weights and indices
        + 5 * n * M * C  # start, local and unsorted models, gradients
        + 8 * n * b * C  # margins, residual weights, clipping norms and scales
        + 2 * n * M  # client noise
    )
    kept = min(KEPT_ITERATIONS, T)
    client = FLOAT * N * (M + 1)
    chunk = max(1, min(GENERATOR_CHUNK_BYTES, P * K * client // 128) // client)  # clients
    terms = {
        "data [P, K, N, M+1]": FLOAT
        * (P * K * N * (M + 1 + (2 if covariances else 6)) + 6 * chunk * N * (M + 1)
           + P * K * (M + 2)
           + (8 * chunk * M * M if covariances else 0) + 2 * test_size * (M + 1)),
        "combination matrix [P, P]": FLOAT * 3 * P * P,
        "metrics [T, C, R]": FLOAT * T * C * R * metrics,
        "models [C, R, P, M]": FLOAT * 6 * C * R * P * M,
        f"kept models [{KEPT_ITERATIONS}, C, R, P, M]": FLOAT * 4 * kept * C * R * P * M,
        "round [R, P, L, E, B, M]": FLOAT * round_floats,
    }  # fmt: skip
    if test_size:
        # every kept server model is scored on the test set at once: margins and
        # predictions [64, C, R, P, N_test]
        terms[f"test margins [{KEPT_ITERATIONS}, C, R, P, N_test]"] = (
            FLOAT * 3 * kept * C * R * (P + 1) * test_size
        )
    return terms


#: Bytes of hashing work per categorical cell of the encoded rows: the tokens' codes, the
#: hashed columns and signs ``[n, F]`` and the scatter into dense columns (measured, rounded
#: up).
HASH_CELL_BYTES = 48


def loading_memory(
    *,
    rows: int,
    columns: int,
    text_bytes: int,
    train: int,
    test: int,
    M: int,
    categorical: int,
    P: int,
    K: int,
    N: int,
) -> int:
    """Peak bytes of reading a table, encoding it and spreading it over the clients.

    The table as read is ``T = 8·rows·columns`` bytes plus its distinct strings
    (``text_bytes``), and ``E = 8·(train + test)·M`` the encoded rows (``M`` features with
    the intercept). The peak is the largest of three phases (measured with ``tracemalloc``
    on wide numeric tables, rounded up):

    * reading: pandas builds the columns, then the frame: ``2T``;
    * encoding: the table, the selected rows, their numbers and the standardized
      features, ``T + 3E``, plus :data:`HASH_CELL_BYTES` per categorical cell;
    * spreading (:func:`pgfl.data.partition.partition`): the table, the encoded rows, their
      client order, the feature noise and its terms (``T + 5E``) and the padded
      ``X[P, K, N, M+1]``.

    >>> T, E = 8 * 100 * 11, 8 * 90 * 11
    >>> loading_memory(rows=100, columns=11, text_bytes=0, train=80, test=10, M=11,
    ...                categorical=0, P=2, K=2, N=30) == T + 5 * E + 8 * 2 * 2 * 30 * 12
    True
    """
    table = FLOAT * rows * columns + text_bytes
    encoded = FLOAT * (train + test) * M
    reading = 2 * table
    encoding = table + 3 * encoded + HASH_CELL_BYTES * (train + test) * categorical
    spreading = table + 5 * encoded + FLOAT * P * K * N * (M + 1)
    return max(reading, encoding, spreading)


def accounting_memory(iterations: int, accountants: Iterable[str]) -> int:
    """Peak bytes of ε(i), i = 1..T, by the given accountants (one curve)."""
    per = max(
        (ACCOUNTING_BYTES_PER_ITERATION.get(a, ACCOUNTING_BYTES_DEFAULT) for a in accountants),
        default=0,
    )
    return iterations * per
