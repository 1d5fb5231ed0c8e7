"""Offline SASS listings kept on disk between sessions (pytest's cache directory), so a
repeated static run does not assemble again what it assembled before.

A listing is nvdisasm's text of the cubin ptxas made from one PTX module. It is stored under
a digest of everything that decides it: the arch, the PTX text, and the exact ptxas and
nvdisasm binaries (version, path, size and modification time), so a different compiler, a
reinstalled wheel or a changed probe never reads an old listing. Only successful assemblies
are stored (a ptxas error or warning is raised again on every run). Writes are atomic
(temporary file + rename, safe for xdist workers sharing the directory); an unreadable entry
is dropped and assembled again. ``pytest --cache-clear`` empties it; ``-p no:cacheprovider``
or ``GPUCHAR_LISTING_CACHE=0`` turns it off.

Processes that share the directory (pytest-xdist's workers, which each assemble the archs of
the static checks they receive) assemble a listing once: the first to need it holds a lock
file beside it while it assembles (``<key>.lock``, an flock: released when the process dies),
and another waits for it and reads what it stored.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import threading
import time
from pathlib import Path

try:
    import fcntl
except ImportError:     # (not POSIX: no claims, a listing may be assembled twice)
    fcntl = None

from .atomic import atomic_write
from .toolchain import Tool

FORMAT = "1"                      # bump when the stored form changes
LIMIT_BYTES = 512 * 1024 * 1024   # the oldest entries go past this


def tool_identity(tool: Tool) -> str:
    """What names one exact binary: its version and path, its size and mtime."""
    try:
        st = os.stat(tool.path)
        stamp = f"{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        stamp = "?"
    opts = "".join(f" {o}" for o in tool.options)
    return f"{tool.name} {tool.version} {os.path.realpath(tool.path)} {stamp}{opts}"


class ListingCache:
    """Listings by key in one directory: ``<key[:2]>/<key>.sass.gz``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.hits = 0
        self.stored = 0
        self._lock = threading.Lock()

    @staticmethod
    def key(arch: str, ptx: str, ptxas: Tool, nvdisasm: Tool) -> str:
        h = hashlib.sha256()
        for part in (FORMAT, arch, tool_identity(ptxas), tool_identity(nvdisasm)):
            h.update(part.encode() + b"\0")
        h.update(ptx.encode())
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.sass.gz"

    def get(self, key: str) -> str | None:
        path = self._path(key)
        try:
            text = gzip.decompress(path.read_bytes()).decode()
        except FileNotFoundError:
            return None
        except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile):
            try:
                path.unlink()       # damaged: assembled again and stored anew
            except OSError:
                pass
            return None
        try:
            os.utime(path)          # recently used: the last to go
        except OSError:
            pass
        with self._lock:
            self.hits += 1
        return text

    @contextlib.contextmanager
    def claim(self, key: str):
        """Held while this process assembles `key`'s listing: another process claiming it
        waits until then (and then finds it stored). A directory that cannot hold the lock
        file claims nothing."""
        if fcntl is None:
            yield
            return
        path = self._path(key).with_suffix(".lock")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)        # (closing releases the lock)

    def put(self, key: str, listing: str) -> None:
        """Store a listing; a full disk or a read-only cache costs the next run a compile,
        never this one its result."""
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, gzip.compress(listing.encode(), compresslevel=1, mtime=0),
                         fsync=False)
        except OSError:
            return
        with self._lock:
            self.stored += 1

    def prune(self, limit: int = LIMIT_BYTES) -> int:
        """Delete the least recently used entries until the directory holds at most `limit`
        bytes; returns how many went. Stray temporary files older than an hour go too."""
        entries = []
        now = time.time()
        for p in self.root.glob("*/*"):
            try:
                st = p.stat()
            except OSError:
                continue
            if p.name.startswith(".") or p.suffix == ".lock":   # a write or a claim
                if now - st.st_mtime > 3600:                       # (core/atomic.py)
                    p.unlink(missing_ok=True)
                continue
            entries.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in entries)
        gone = 0
        for _, size, p in sorted(entries):
            if total <= limit:
                break
            try:
                p.unlink()
            except OSError:
                continue
            total -= size
            gone += 1
        return gone


def from_config(config) -> ListingCache | None:
    """The session's cache: GPUCHAR_LISTING_CACHE names a directory (0 or empty: none), else
    pytest's cache directory (none under -p no:cacheprovider)."""
    env = os.environ.get("GPUCHAR_LISTING_CACHE")
    if env is not None:
        return ListingCache(Path(env)) if env.strip() not in ("", "0") else None
    path = cache_dir(config, "gpuchar-sass")
    return ListingCache(path) if path is not None else None


def cache_dir(config, name: str) -> Path | None:
    """The directory `name` in pytest's cache directory (None under -p no:cacheprovider)."""
    cache = getattr(config, "cache", None)
    if cache is None:
        return None
    try:
        return Path(cache.mkdir(name))
    except OSError:
        return None
