"""Boundary checks with exact messages: the setting, its allowed range and the value given.

Every public entry point validates its input with these helpers and raises
:class:`ConfigError` (a ``ValueError``). The CLI turns any ``ConfigError`` into one
line on stderr and exit code 2. An exception raised by the user's own code (a
``model.source`` file) becomes a :class:`UserCodeError` naming the file and line.

>>> check_int("L", 120, lo=1, hi=100, hi_name="K")
Traceback (most recent call last):
...
pgfl.validation.ConfigError: L must be an integer in [1, K=100]; got 120
"""

from __future__ import annotations

import difflib
import math
import os
import traceback
from collections.abc import Callable, Iterable
from typing import Any


class ConfigError(ValueError):
    """A setting is missing, of the wrong type or out of its allowed range."""


class UserCodeError(Exception):
    """The user's own code (the file of a setting such as ``model.source``) raised.

    Made by :meth:`raised`: the message is one line, the setting, the file, the exception
    and where in the file it was raised (``location``: the innermost frame of the traceback
    inside the file; for a ``SyntaxError`` the line it points at); ``__cause__`` keeps the
    user's exception and its traceback. The CLI prints the message with exit code 1: it is
    not a bug in pgfl, and it may come in the middle of a run (after files were written),
    so it is not the "bad input, nothing written" of exit code 2.

    >>> def init_params():
    ...     raise ValueError("width must be positive")
    >>> try:
    ...     init_params()
    ... except ValueError as exc:
    ...     err = UserCodeError.raised("model.source", init_params.__code__.co_filename, exc)
    >>> print(err)  # doctest: +ELLIPSIS
    model.source <doctest ...> raised ValueError: width must be positive (<doctest ...>:2 in ...)
    """

    def __init__(self, message: str, location: str | None = None) -> None:
        super().__init__(message)
        self.location = location

    @classmethod
    def raised(
        cls, setting: str, path: str, error: BaseException, what: str | None = None
    ) -> UserCodeError:
        """The error for ``error``, raised by the code of file ``path`` (setting ``setting``).

        ``what`` replaces "raised ``Exception: message``" (e.g. for a call pgfl stopped).
        """
        location = user_location(error, str(path))
        if what is None:
            text = error.msg if isinstance(error, SyntaxError) and error.msg else str(error)
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            what = "raised " + type(error).__name__ + (f": {lines[0]}" if lines else "")
        where = f" ({location})" if location else ""
        return cls(f"{setting} {path} {what}{where}", location)


def user_location(error: BaseException, path: str) -> str | None:
    """``"FILE:LINE in FUNCTION"`` of the innermost frame of ``error`` inside file ``path``."""
    target = os.path.abspath(path)
    name = os.path.basename(path)
    if isinstance(error, SyntaxError) and error.filename and error.lineno:
        if os.path.abspath(error.filename) == target:
            return f"{name}:{error.lineno}"
    inside = [
        f for f in traceback.extract_tb(error.__traceback__)
        if os.path.abspath(f.filename) == target
    ]  # fmt: skip
    if not inside:
        return None
    frame = inside[-1]
    return f"{name}:{frame.lineno} in {frame.name}"


def _bound(value: float | None, name: str | None) -> str:
    if value is None:
        return "inf"
    text = str(value) if isinstance(value, int) else f"{value:g}"
    return f"{name}={text}" if name else text


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
    inf_ok: bool = False,
    also: str = "",
) -> float:
    """Return ``value`` as a finite float inside the interval, or raise :class:`ConfigError`.

    ``inf_ok`` also accepts ``+inf`` when there is no upper bound (the interval is then
    shown closed, ``(0, inf]``): a setting whose infinite value means "no limit".
    ``also`` names other accepted forms in the message (``" or a [low, high] pair"``).

    >>> check_real("training.clip_norm", float("inf"), lo=0, lo_open=True, inf_ok=True)
    inf
    >>> check_real("training.clip_norm", -1, lo=0, lo_open=True, inf_ok=True)
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: training.clip_norm must be a real number in (0, inf]; got -1
    """
    inf_ok = inf_ok and hi is None
    left = "(" if (lo_open or lo is None) else "["
    right = "]" if inf_ok else (")" if (hi_open or hi is None) else "]")
    lo_s = "-inf" if lo is None else _bound(lo, lo_name)
    interval = f"{left}{lo_s}, {_bound(hi, hi_name)}{right}{also}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a real number in {interval}; got {value!r}")
    v = float(value)
    if inf_ok and v == math.inf:
        return v
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
    even: bool = False,
    also: str = "",
) -> int:
    """Return ``value`` as an int inside ``[lo, hi]`` (``even``: and even), or raise.

    ``also`` names other accepted forms in the message, as in :func:`check_real`.

    >>> check_int("k", 5, lo=2, even=True)
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: k must be an even integer in [2, inf]; got 5
    """
    lo_s = "-inf" if lo is None else _bound(lo, lo_name)
    interval = f"[{lo_s}, {_bound(hi, hi_name)}]{also}"
    ok_type = isinstance(value, int) and not isinstance(value, bool)
    if not ok_type and hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0:
        ok_type = value.dtype.kind in "iu"
    bad = not ok_type or (lo is not None and value < lo) or (hi is not None and value > hi)
    if bad or (even and value % 2):
        kind = "an even integer" if even else "an integer"
        raise ConfigError(f"{name} must be {kind} in {interval}; got {value!r}")
    return int(value)


def check_string(name: str, value: Any, *, nonempty: bool = False, forbid: str = "") -> str:
    """Return ``value`` if it is a string (non-empty, without the ``forbid`` characters).

    >>> check_string("name", "runs/x", nonempty=True, forbid="/")
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: name must be a non-empty string without '/'; got 'runs/x'
    """
    bad = not isinstance(value, str) or (nonempty and not value)
    if bad or any(c in value for c in forbid):
        what = "a non-empty string" if nonempty else "a string"
        if forbid:
            what += " without " + ", ".join(map(repr, forbid))
        raise ConfigError(f"{name} must be {what}; got {value!r}")
    return value


def check_each(check: Callable[[Any], Any], values: Any) -> Any:
    """``values`` (an array) once the scalar ``check`` accepted each of its distinct entries.

    ``check`` is the check of one number: a setting's (``PARAMS[name].named(arg).check``)
    or a helper given its range (``partial(check_real, "counts", lo=0, lo_open=True)``),
    so an array argument states its range once and is refused in the same one line as a
    number, naming the first entry (in the array's order) outside the range.

    >>> from functools import partial
    >>> import numpy as np
    >>> check_each(partial(check_real, "rho", lo=0, lo_open=True), np.array([[0.3, 0.0]]))
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: rho must be a real number in (0, inf); got 0.0
    """
    for value in dict.fromkeys(values.ravel().tolist()):
        check(value)
    return values


def check_finite(name: str, array: Any) -> Any:
    """``array`` (a numpy array) if every entry is finite, else one line saying how many are not.

    >>> import numpy as np
    >>> check_finite("zbar", np.array([1.0, np.nan, np.inf]))
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: zbar must contain only finite values; got 2 non-finite entries
    """
    import numpy as np  # lazy: the command line's first checks import this module alone

    bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
    if bad:
        raise ConfigError(f"{name} must contain only finite values; got {bad} non-finite entries")
    return array


def did_you_mean(value: Any, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to a mistyped ``value``, else ``""``.

    The closest by :func:`difflib.get_close_matches` (similarity ≥ 0.6), so a typo finds
    its word and an unrelated value gets no guess.

    >>> did_you_mean("gausian", ["laplace", "gaussian"])
    " (did you mean 'gaussian'?)"
    >>> did_you_mean("audit", ["run", "reproduce", "bench"])
    ''
    """
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, or raise :class:`ConfigError`.

    >>> check_choice("noise", "gausian", ["laplace", "gaussian"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: noise must be one of ...; got 'gausian' (did you mean 'gaussian'?)
    """
    options = list(choices)
    if value not in options:
        raise ConfigError(
            f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}"
            + did_you_mean(value, options)
        )
    return value
