"""A pytest-xdist worker ends with its controller.

A worker measures its GPU for as long as its controller hands it tests. Killed with SIGKILL,
the controller can say nothing: its workers, direct children of it, ran their tests on (about
30 s, a GPU's kernels among them), then failed to send their results (OSError: cannot send,
a PluggyTeardownRaisedWarning). The worker watches its parent: once the controller is gone
(the worker has another parent), it ends itself with SIGTERM, at once and quietly.
"""
from __future__ import annotations

import os
import signal
import threading
import time

INTERVAL_S = 0.5


def end_with(parent_pid: int | None, interval: float = INTERVAL_S) -> threading.Thread | None:
    """Watch `parent_pid` (this process's parent when the watch starts) from a daemon thread;
    when this process's parent is another, SIGTERM this process. None: nothing to watch."""
    if not parent_pid:
        return None

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os.kill(os.getpid(), signal.SIGTERM)
    t = threading.Thread(target=watch, name="gpuchar-controller-watch", daemon=True)
    t.start()
    return t
