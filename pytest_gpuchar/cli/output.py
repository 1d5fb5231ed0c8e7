"""A command's output file (-o, --csv, ...): written atomically (core/atomic.py), its folder
made when missing; a path that cannot be written is one line naming the option, the path and
what to do (never a traceback naming the hidden temporary file beside it)."""
from __future__ import annotations

import os
from pathlib import Path

from ..core.atomic import atomic_write


class OutputError(Exception):
    """The output could not be written; str() is the one line to print."""


def unwritable(option: str, path: Path, err: OSError) -> OutputError:
    """The error of an output path `err` refused, naming `option` and `path`, not a temporary
    file's name."""
    where = path if path.is_dir() else path.parent
    why = err.strerror or type(err).__name__
    return OutputError(f"{option} {path}: cannot write: {why}: make {where or '.'} writable "
                       f"or give another {option}")


def check_dir(option: str, path: Path) -> None:
    """`path` can be an output directory (it is one, or can be made): else OutputError."""
    if path.exists() and not path.is_dir():
        raise OutputError(f"{option} {path}: not a directory: give a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise unwritable(option, path, e) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {path}: cannot write: Permission denied: make {path} "
                          f"writable or give another {option}")


def write(option: str, path: Path, data: str | bytes) -> None:
    """`data` into the file `path` (named by `option` in an error), atomically."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{option} {path}: is a directory: give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)
    except OSError as e:
        raise unwritable(option, path, e) from None


def emit(prog: str, option: str, path: Path | None, text: str) -> bool:
    """A command's text output: into the file `path` (`write`: atomically) or, with no path,
    onto stdout. An unwritable path is one line on stderr, `prog` first: False."""
    import sys
    if not path:
        sys.stdout.write(text)
        return True
    try:
        write(option, path, text)
    except OutputError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return False
    return True


INTERRUPTED = 130       # 128 + SIGINT, as a shell reports a command ended by Ctrl-C


def interruptible(prog: str, code: int = INTERRUPTED, what: str = "every file it writes is "
                  "replaced whole: each is as it was or complete"):
    """A command's main() that ends on Ctrl-C with one line and exit `code`, not a
    KeyboardInterrupt traceback."""
    import functools
    import sys

    def wrap(main):
        @functools.wraps(main)
        def run(*args, **kwargs):
            try:
                return main(*args, **kwargs)
            except KeyboardInterrupt:
                print(f"\n{prog}: interrupted (exit {code}): {what}", file=sys.stderr)
                return code
        return run
    return wrap
