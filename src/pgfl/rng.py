"""Named random streams from one root seed.

Every random draw in pgfl comes from an explicit :class:`numpy.random.Generator`.
A run has one root seed; each purpose (data, client sampling, mini-batches, noise, ...)
gets its own stream, derived from the root seed and the purpose's *name* (and optional
integer keys), so adding a new stream never shifts the bits of an existing one.

Secrets never come from here: secure aggregation draws its keys from the operating
system through the ``cryptography`` package.

>>> a = stream(7, "noise").standard_normal(3)
>>> b = stream(7, "noise").standard_normal(3)
>>> bool((a == b).all()), bool((a != stream(8, "noise").standard_normal(3)).all())
(True, True)
"""

from __future__ import annotations

import zlib

import numpy as np


def stream(seed: int, name: str, *keys: int) -> np.random.Generator:
    """Generator for stream ``name`` (and integer sub-``keys``) under root ``seed``.

    The stream is ``PCG64(SeedSequence(seed, spawn_key=(crc32(name), *keys)))``:
    independent of every other name and key, stable across runs and machines.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    key = (zlib.crc32(name.encode("utf-8")), *(int(k) for k in keys))
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed), spawn_key=key)))
