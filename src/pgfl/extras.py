"""Optional dependencies: Ray (``pgfl[ray]``), numba (``pgfl[fast]``) and JAX (``pgfl[jax]``).

pgfl runs without any of them. A feature that needs one imports it through :func:`require`,
which turns a missing package into a :class:`MissingExtra` (a :class:`~pgfl.validation.ConfigError`,
so the CLI prints one line and exits 2) that says how to install it.

>>> require("numpy", "dev", "the engine").__name__
'numpy'
>>> try:
...     require("no_such_module_pgfl", "ray", "Ray")
... except MissingExtra as exc:
...     print(exc)
Ray needs the optional package 'no_such_module_pgfl': install it with  pip install 'pgfl[ray]'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from pgfl.validation import ConfigError

__all__ = ["MissingExtra", "available", "require"]


class MissingExtra(ConfigError):
    """A feature was asked for whose optional dependency is not installed."""


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature``, or raise :class:`MissingExtra` naming ``pgfl[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtra(
            f"{feature} needs the optional package {module!r}: install it with "
            f" pip install 'pgfl[{extra}]'"
        ) from None


def available(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it twice)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
