"""One Ray session per process: a local Ray started, or a running cluster joined.

Ray itself retries an unreachable head for minutes; an address is first checked with a
TCP connection, so a bad one stops in seconds with one line naming ``run.address``.
"""

from __future__ import annotations

import logging
import os
import socket
from types import ModuleType

from pgfl.extras import require
from pgfl.validation import ConfigError

__all__ = ["ray_session"]


def ray_session(address: str | None = None, workers: int | None = None) -> ModuleType:
    """The ``ray`` module with a session open in this process; started or joined once.

    Without ``address``: a new local Ray of this process, sized to ``workers`` CPUs
    (default: every CPU of the machine), its workers at the driver's priority (Ray's
    default niceness 15 lets any CPU-bound process starve them), without dashboard or
    worker log forwarding; a
    cluster already running on the machine and ``RAY_ADDRESS`` are left alone (Ray's
    ``address="local"``). With one (``"auto"``: the cluster running on this machine or
    ``RAY_ADDRESS``; ``"HOST:6379"`` or ``"ray://HOST:10001"``): join that cluster. A
    session already open in the process is kept and reused, so many runs share one
    cluster start-up.
    Raises :class:`~pgfl.extras.MissingExtra` without ``pgfl[ray]``, and
    :class:`~pgfl.validation.ConfigError` naming ``run.address`` if it cannot be joined.
    """
    ray = require("ray", "ray", "--backend ray")
    if ray.is_initialized():
        return ray
    quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    if address is None:
        # workers at the driver's priority: Ray's default (niceness 15) starves the
        # simulation itself beside any CPU-bound process (tasks got ~2% of a core)
        ray.init(address="local", num_cpus=workers or os.cpu_count(),
                 _system_config={"worker_niceness": 0}, **quiet)  # fmt: skip
        return ray
    try:
        _reachable(address)
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError, ValueError, OSError) as exc:
        reason = " ".join(str(exc).split())[:200]
        raise ConfigError(
            f"run.address: cannot join the Ray cluster at {address!r} ({reason}); start one "
            "with 'ray start --head' and pass the address it prints"
        ) from None
    return ray


def _reachable(address: str, timeout: float = 5.0) -> None:
    """Raise :class:`OSError` if ``HOST:PORT`` (or ``ray://HOST:PORT``) accepts no TCP connection.

    Ray itself retries an unreachable head for minutes; a connection attempt fails in
    ``timeout`` seconds. ``"auto"`` (a cluster on this machine, found by Ray) is left to Ray.
    """
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        if address == "auto":
            return
        raise ValueError("expected 'auto', 'HOST:PORT' or 'ray://HOST:PORT'")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
        pass
