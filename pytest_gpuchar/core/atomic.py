"""Replacing a file atomically: the one way this package writes a record (expectation files,
SASS snapshots, the nightly's files, plots, exports, cached listings).

The new content goes into a temporary file beside the target, which then replaces it by
``os.replace``: a run interrupted or out of disk space mid-write leaves the old file or the new
one, never half of one. The replaced file keeps its permission bits; a new file gets those the
umask gives (0644 under the usual umask 022), as ``open()`` would give it. (``mkstemp``
creates its file 0600, and a plain rename would carry that mode over the replaced file.)

A directory of files written together (the pages of a history) is replaced the same way:
``replacing_dir`` fills a new directory beside the target, then swaps it in; a reader sees
the old set or the new one, never a mix.
"""
from __future__ import annotations

import os
import secrets
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

NEW_FILE_MODE = 0o666       # before the umask, as open(path, "w") creates a file
NEW_DIR_MODE = 0o777        # before the umask, as mkdir creates a directory


def _existing_mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def _create_temp(path: Path, suffix: str) -> tuple[int, Path]:
    """A new, empty file beside `path` (its mode NEW_FILE_MODE less the umask: the kernel
    applies the umask at creation, so nothing here reads or changes the process's umask)."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}{suffix}"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, NEW_FILE_MODE), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: no free temporary name for {path.name}")


@contextmanager
def replacing(path: str | Path, *, suffix: str = ".tmp") -> Iterator[Path]:
    """``with replacing(path) as tmp:`` write the new content to `tmp` (by its name: a writer
    that takes a file name, such as matplotlib's savefig; give the `suffix` it reads the format
    from); when the block ends without an error, `tmp` replaces `path` with the mode `path`
    had (a new file: the umask's). On any error `tmp` is removed and `path` is untouched."""
    path = Path(path)
    mode = _existing_mode(path)
    fd, tmp = _create_temp(path, suffix)
    os.close(fd)
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write(path: str | Path, data: str | bytes, *, fsync: bool = True) -> None:
    """Replace `path` with `data` (text is written as UTF-8) atomically, keeping the replaced
    file's mode (see the module's note). `fsync`: on disk before the rename (records); a cache
    may pass False."""
    path = Path(path)
    with replacing(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())


def _create_temp_dir(path: Path) -> Path:
    """A new, empty directory beside `path` (NEW_DIR_MODE less the umask)."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            os.mkdir(tmp, NEW_DIR_MODE)
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: no free temporary name for {path.name}")


@contextmanager
def replacing_dir(path: str | Path) -> Iterator[Path]:
    """``with replacing_dir(path) as tmp:`` fill the new directory `tmp` (beside `path`); when
    the block ends without an error, `tmp` takes the place of `path` (the old directory moved
    aside, the new one renamed in, the old one removed; it keeps the old one's mode). On any
    error `tmp` is removed and `path` is untouched. The caller decides whether `path` may be
    replaced: whatever it holds is gone after the swap."""
    path = Path(path)
    mode = _existing_mode(path)
    tmp = _create_temp_dir(path)
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
            old = tmp.with_name(tmp.name[:-len(".tmp")] + ".old")
            os.rename(path, old)
            try:
                os.rename(tmp, path)
            except BaseException:
                os.rename(old, path)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
