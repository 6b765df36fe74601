"""Worker processes that end with the process that started them.

A pool's workers wait on pipes that they themselves hold open (a ``ProcessPoolExecutor``
passes both ends of its queues to every worker), so a driver killed by ``SIGKILL`` never
gives them an end-of-file: its forkserver, its workers and the resource tracker that
counts them stayed alive after the driver was gone. :func:`exit_with`, a pool's
``initializer``, starts a thread in each worker that ends the worker soon after the
driver is gone, and with the workers the forkserver and the resource tracker end too
(their pipes close). Used by the secure-aggregation pool
(:mod:`pgfl.privacy.secagg.pool`) and by ``pgfl reproduce --jobs``.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["alive", "exit_with"]

#: Seconds between two looks at the driver.
INTERVAL = 0.5


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, killed but not yet reaped, does not).

    >>> alive(os.getpid())
    True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's process of that number
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):  # no /proc (not Linux): kill's answer stands
        return True


def exit_with(driver: int) -> None:
    """In a worker: end this process (``os._exit``) soon after process ``driver`` is gone.

    Also when the worker's parent changes (the forkserver it was forked from ended). A
    pool's ``initializer=exit_with, initargs=(os.getpid(),)``.
    """
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(INTERVAL)
            if os.getppid() != parent or not alive(driver):
                os._exit(1)

    threading.Thread(target=watch, name="pgfl-exit-with-driver", daemon=True).start()
