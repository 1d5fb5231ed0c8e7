"""What every new process would parse again, kept on disk between processes: the expectation
files (``expectations/``) and the HTML report templates (``templates/``, Jinja's bytecode).

Reading the YAML of every expectation file (1.9 MB, 36 files) costs about half a second in
each new process, and a run with a report reads all of them (the generations table); so do
the fleet and expectation commands, and every pytest or nightly process a test starts. A
parsed file is stored as a pickle under a digest of everything that decides it: the file's
path and text and the source of the code that parses and validates it, so an edited file or
a changed parser never reads an old entry. An unreadable entry is dropped and the file parsed
again; a file with an error is never stored (its error is raised on every load). Compiling the
report's templates is another 0.2 s a process; Jinja keeps their bytecode itself, checked
against each template's source (jinja2.FileSystemBytecodeCache).

Where: $GPUCHAR_PARSED_CACHE names a directory (0 or empty: none), else the directory a pytest
session named (pytest's cache directory, ``.pytest_cache/d/gpuchar-parsed``; none under
-p no:cacheprovider), else none: everything is parsed. The entries are pickles and marshalled
code: a directory someone else can write to must not be named here.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
from pathlib import Path

from ..core.atomic import atomic_write

ENV = "GPUCHAR_PARSED_CACHE"
PYTEST_DIR = "gpuchar-parsed"     # in pytest's cache directory
FORMAT = "1"            # bump when the stored form changes
KEEP = 256              # entries kept when the directory is pruned
PRUNE_AT = 2 * KEEP

# the code that parses and validates a file (results/schema.py and what it calls)
PARSER_SOURCES = ("results/schema.py", "results/literature.py", "core/archs.py",
                  "core/topic.py")
_PACKAGE = Path(__file__).resolve().parent.parent
_session_dir: Path | None = None


def use(directory: str | Path | None) -> Path | None:
    """The directory of this process's pytest session (None: none); returns the previous one,
    for the session to put back at its end."""
    global _session_dir
    previous, _session_dir = _session_dir, (Path(directory) if directory else None)
    return previous


def directory() -> Path | None:
    env = os.environ.get(ENV)
    if env is not None:
        return Path(env) if env.strip() not in ("", "0") else None
    return _session_dir


def subdirectory(name: str) -> Path | None:
    """`name` (expectations, templates) in the directory, made if missing; None if there is
    no directory or it cannot be made."""
    root = directory()
    if root is None:
        return None
    try:
        (root / name).mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return root / name


def template_cache():
    """Jinja's own bytecode cache in the directory (None: none)."""
    import jinja2
    where = subdirectory("templates")
    return jinja2.FileSystemBytecodeCache(str(where)) if where is not None else None


@functools.lru_cache(maxsize=1)
def parser_fingerprint() -> str:
    """The source of the modules whose code decides a parsed file."""
    h = hashlib.sha256(f"{FORMAT} {sys.version_info[:2]}".encode())
    for source in PARSER_SOURCES:
        h.update((_PACKAGE / source).read_bytes())
    return h.hexdigest()


def key(path: Path, text: str) -> str:
    h = hashlib.sha256(parser_fingerprint().encode() + b"\0" + str(path).encode() + b"\0")
    h.update(text.encode())
    return h.hexdigest()


def get(digest: str):
    root = directory()
    if root is None:
        return None
    entry = root / "expectations" / f"{digest}.pickle"
    try:
        parsed = pickle.loads(entry.read_bytes())
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - a damaged or foreign entry: parsed again, stored anew
        entry.unlink(missing_ok=True)
        return None
    try:
        os.utime(entry)         # recently used: the last to go
    except OSError:
        pass
    return parsed


def put(digest: str, parsed) -> None:
    """Store a parsed file; a full disk or a read-only directory costs the next process a
    parse, never this one its result."""
    root = subdirectory("expectations")
    if root is None:
        return
    try:
        atomic_write(root / f"{digest}.pickle",
                     pickle.dumps(parsed, protocol=pickle.HIGHEST_PROTOCOL), fsync=False)
        entries = list(root.glob("*.pickle"))
        if len(entries) > PRUNE_AT:
            entries.sort(key=lambda p: p.stat().st_mtime)
            for old in entries[:-KEEP]:
                old.unlink(missing_ok=True)
    except OSError:
        return
