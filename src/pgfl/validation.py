"""Boundary checks with exact messages: the setting, its allowed range and the value given.

Every public entry point validates its input with these helpers and raises
:class:`ConfigError` (a ``ValueError``). The CLI turns any ``ConfigError`` into one
line on stderr and exit code 2.

>>> check_int("L", 120, lo=1, hi=100, hi_name="K")
Traceback (most recent call last):
...
pgfl.validation.ConfigError: L must be an integer in [1, K=100]; got 120
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


class ConfigError(ValueError):
    """A setting is missing, of the wrong type or out of its allowed range."""


def _bound(value: float | None, name: str | None) -> str:
    if value is None:
        return "inf"
    return f"{name}={value:g}" if name else f"{value:g}"


def check_real(
    name: str,
    value: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    lo_name: str | None = None,
    hi_name: str | None = None,
) -> float:
    """Return ``value`` as a finite float inside the interval, or raise :class:`ConfigError`."""
    left = "(" if (lo_open or lo is None) else "["
    right = ")" if (hi_open or hi is None) else "]"
    lo_s = "-inf" if lo is None else _bound(lo, lo_name)
    interval = f"{left}{lo_s}, {_bound(hi, hi_name)}{right}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a real number in {interval}; got {value!r}")
    v = float(value)
    bad = (
        not math.isfinite(v)
        or (lo is not None and (v < lo or (lo_open and v == lo)))
        or (hi is not None and (v > hi or (hi_open and v == hi)))
    )
    if bad:
        raise ConfigError(f"{name} must be a real number in {interval}; got {value!r}")
    return v


def check_int(
    name: str,
    value: Any,
    *,
    lo: int | None = None,
    hi: int | None = None,
    lo_name: str | None = None,
    hi_name: str | None = None,
) -> int:
    """Return ``value`` as an int inside ``[lo, hi]``, or raise :class:`ConfigError`."""
    lo_s = "-inf" if lo is None else _bound(lo, lo_name)
    interval = f"[{lo_s}, {_bound(hi, hi_name)}]"
    ok_type = isinstance(value, int) and not isinstance(value, bool)
    if not ok_type and hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0:
        ok_type = value.dtype.kind in "iu"
    if not ok_type or (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ConfigError(f"{name} must be an integer in {interval}; got {value!r}")
    return int(value)


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, or raise :class:`ConfigError`."""
    options = list(choices)
    if value not in options:
        raise ConfigError(f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}")
    return value
