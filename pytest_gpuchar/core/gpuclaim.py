"""One measuring process per GPU.

Two processes timing kernels on one GPU time each other's, and most figures still pass their
tolerances (docs/run-time.md): the figures alone do not say that it happened. The process
that measures a GPU holds a claim on it for the rest of its life: an flock on
``gpuchar-gpu-<UUID>.lock`` in the system's temporary directory (the kernel releases it when
the process ends, however it ends), with who holds it written inside. A second process finds
the claim held and is told by whom. The file is removed when its holder gives the claim back
or exits; only a killed holder leaves it (its GPU's next claim reuses it).

Without fcntl (not POSIX) or a directory that cannot hold the file, nothing is claimed.
"""
from __future__ import annotations

import atexit
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
        for _ in range(100):
            answer = _try(uuid)
            if answer is not None:
                return answer
        return ""


def _try(uuid: str) -> str | None:
    """One attempt: "" claimed (or unclaimable here), who holds it, or None when the file was
    removed by its holder between our open and our lock (try again: the claim is on the file
    now at that path)."""
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
    if not _same_file(fd, p):
        os.close(fd)
        return None
    _held[uuid] = fd
    _write(fd)
    if len(_held) == 1:
        atexit.register(release_all)
    return ""


def _same_file(fd: int, p: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(p)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def release(uuid: str) -> None:
    """Give the claim back: its file is removed while still locked (a process that opened it
    meanwhile finds it gone and claims the new file: claim), then the lock is released. A
    process that ends without releasing (killed) leaves the file; the next claim of that GPU
    takes it over."""
    with _lock:
        fd = _held.pop(uuid, None)
        if fd is None:
            return
        p = path(uuid)
        if _same_file(fd, p):
            try:
                os.unlink(p)
            except OSError:
                pass
        os.close(fd)


def release_all() -> None:
    """Every claim of this process given back (at its exit)."""
    for uuid in list(_held):
        release(uuid)


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
