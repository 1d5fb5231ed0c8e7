"""One measuring process per GPU.

Two processes timing kernels on one GPU time each other's, and most figures still pass their
tolerances (docs/run-time.md): the figures alone do not say that it happened. The process
that measures a GPU holds a claim on it for the rest of its life: an flock on
``gpuchar-gpu-<UUID>.lock`` in the system's temporary directory (the kernel releases it when
the process ends, however it ends), with who holds it written inside. A second process finds
the claim held and is told by whom.

Without fcntl (not POSIX) or a directory that cannot hold the file, nothing is claimed.
"""
from __future__ import annotations

import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

try:
    import fcntl
except ImportError:
    fcntl = None

_held: dict[str, int] = {}        # uuid -> the open descriptor holding its claim
_lock = threading.Lock()


def path(uuid: str) -> Path:
    """The claim's file ($TMPDIR or the system's temporary directory)."""
    return Path(tempfile.gettempdir()) / f"gpuchar-gpu-{uuid}.lock"


def claim(uuid: str) -> str:
    """Claim `uuid` for this process (again: already ours). Returns "" when this process
    holds it (or nothing can be claimed here), else who holds it."""
    if fcntl is None or not uuid:
        return ""
    with _lock:
        if uuid in _held:
            return ""
        p = path(uuid)
        try:
            fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:         # another user's file: claimable, not writable
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError:
                return ""
        except OSError:
            return ""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read(fd)
            os.close(fd)
            return holder or "another process (it did not say which)"
        _held[uuid] = fd
        _write(fd)
        return ""


def release(uuid: str) -> None:
    """Give the claim back before the process ends (closing the descriptor releases it)."""
    with _lock:
        fd = _held.pop(uuid, None)
    if fd is not None:
        os.close(fd)


def _write(fd: int) -> None:
    me = (f"pid {os.getpid()} on {socket.gethostname()}, since "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(sys.argv)[:300]}")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, me.encode(), 0)
    except OSError:
        pass


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 1000, 0).decode(errors="replace").strip()
    except OSError:
        return ""
