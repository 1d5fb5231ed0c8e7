"""Host work that depends only on the rows, made ahead in worker processes.

A hardware run's exact references, CPU models and kernel inputs depend on nothing the GPU
measures: a topic names them (``host_ahead(session, arch)``: key, a module-level function,
its arguments) and, on a GPU, the session hands them to a pool of spawned processes at its
first characterisation test, in the order the tests run. The test thread takes each by its
key (``RunCache.once``), waiting only for what is not made yet; a job no worker has picked
up is made in place. The value is the function's own, pickled back: the same bits as made
in place. Its arrays travel beside the pickle, in one file of a session directory in shared
memory (/dev/shm where there is one): a pipe's copies of the largest (a 16 M-record KNN
input and reference, 192 MB) held the session's process longer than making them in place.

Spawned, never forked (the test process holds a CUDA context); a worker refuses to import
CuPy (its work is numpy alone) and ends itself once the session's process is gone
(core/orphan.py); the session shuts the pool down at its end (a job still running is
stopped), and a session killed before its end leaves its directory to the next session's
pool, which removes it.
"""
from __future__ import annotations

import itertools
import os
import pickle
import shutil
import sys
import tempfile
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Callable


class HostWorkFailed(RuntimeError):
    """A job made ahead in a worker process raised (or its worker was lost)."""


def workers() -> int:
    """Worker processes for a host: a quarter of its cores, 1 to 4 (the renderer's pool, the
    JIT threads and the offline compiles share the rest)."""
    return max(1, min(4, (os.cpu_count() or 1) // 4))


def _init(parent: int) -> None:
    """In each worker: no CuPy (a CUDA context in a host worker would be a second one on the
    measured GPU), and an end with the session's process."""
    sys.modules["cupy"] = None          # import cupy raises ImportError here
    from . import orphan
    orphan.end_with(parent)


_jobs = itertools.count()      # a worker's jobs, for their files' names


def _call(spill: str, fn: Callable[..., Any], args: tuple) -> tuple:
    """In a worker: fn(*args) as (its pickle, the file of its arrays' bytes or None, each
    array's byte count); where the file cannot be written (a full /dev/shm: a container's
    is 64 MB by default), the arrays travel in the pickle."""
    value = fn(*args)
    buffers: list = []
    data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    if not buffers:
        return data, None, []
    path, sizes = os.path.join(spill, f"job-{os.getpid()}-{next(_jobs)}"), []
    try:
        with open(path, "xb") as f:       # the session's own directory (mkdtemp: 0700)
            for b in buffers:
                raw = b.raw()
                f.write(raw)
                sizes.append(raw.nbytes)
    except OSError:
        if os.path.exists(path):
            os.unlink(path)
        return pickle.dumps(value, protocol=5), None, []
    return data, path, sizes


def load(made: tuple) -> Any:
    """The value `_call` sent: its arrays read back (writable, the worker's bits) and the
    file removed."""
    data, path, sizes = made
    if path is None:
        return pickle.loads(data)
    try:
        raw = bytearray(os.path.getsize(path))
        with open(path, "rb") as f:
            f.readinto(raw)
    finally:
        os.unlink(path)
    view, buffers, at = memoryview(raw), [], 0
    for n in sizes:
        buffers.append(view[at:at + n])
        at += n
    return pickle.loads(data, buffers=buffers)


def _spill_root() -> str:
    """Where the session directories go: shared memory where there is some, else the
    temporary directory."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir()


PREFIX = "gpuchar-host-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:             # another user's process: alive
        return True
    return True


def remove_stale(root: str) -> list[str]:
    """Remove the session directories under `root` whose session's process is gone (a
    session killed before its end leaves its directory, with what was made and not taken);
    the directories removed."""
    gone = []
    try:
        names = os.listdir(root)
    except OSError:
        return gone
    for name in names:
        pid = name[len(PREFIX):].split("-", 1)[0]
        if name.startswith(PREFIX) and pid.isdigit() and not _alive(int(pid)):
            path = os.path.join(root, name)
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.exists(path):
                gone.append(path)
    return gone


class HostPool:
    """The pool of worker processes; `submit` starts a job, its Future (of what `load`
    reads back) is what ``RunCache`` keeps under the job's key."""

    def __init__(self, n: int | None = None) -> None:
        import multiprocessing
        root = _spill_root()
        remove_stale(root)
        self.spill = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=root)
        self.pool = ProcessPoolExecutor(max_workers=n or workers(),
                                        mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_init, initargs=(os.getpid(),))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        return self.pool.submit(_call, self.spill, fn, args)

    def close(self) -> None:
        """Drop the jobs not started, stop the running ones and the workers, remove what was
        made and not taken. The session has ended: nothing will take what is still being
        made (work ahead for tests a run of a few tests, `-k`, never reaches)."""
        stop = getattr(self.pool, "terminate_workers", None)       # Python 3.14
        if stop is not None:
            stop()
        else:
            for proc in list((self.pool._processes or {}).values()):
                proc.terminate()
        self.pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.spill, ignore_errors=True)
