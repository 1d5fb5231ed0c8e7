"""Where the suite, its expectation files and its SASS snapshots are, and where a user's own
state goes: the one place that knows a repository checkout from an installed package.

- **Checkout** (a clone, or an editable install of one): the package's parent directory holds
  ``expectations/`` and ``tests/characterisation/`` (with its ``__sass__/`` snapshots), read
  and written in place, as the repository's history keeps them.
- **Installed** (a wheel in site-packages): the build copied them into the package
  (setup.py): the test modules into ``pytest_gpuchar/suite/`` (a package, so ``pytest --pyargs
  pytest_gpuchar.suite`` names it), the expectation files into
  ``pytest_gpuchar/data/expectations/`` and the snapshots, compressed, into
  ``pytest_gpuchar/data/sass.tar.xz``. None of these is ever written.

A user's own state (accepted expectations, new or changed snapshots) lives in a directory the
user owns, layered over the shipped files: ``$GPUCHAR_HOME``, else the platform's user data
directory (platformdirs: ``~/.local/share/pytest-gpuchar`` on Linux). Its ``expectations/``
entries win over the shipped ones; its ``__sass__/`` is the installed suite's snapshot store,
seeded from the shipped archive per compiler and arch (a file the user has is never replaced).
"""
from __future__ import annotations

import functools
import os
import tarfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent
CHECKOUT = PACKAGE.parent
SUITE_PACKAGE = "pytest_gpuchar.suite"
SASS_DIR = "__sass__"
SASS_ARCHIVE = "sass.tar.xz"
HOME_ENV = "GPUCHAR_HOME"


def is_checkout(root: Path = CHECKOUT) -> bool:
    """Is the package running from a repository checkout (its suite and expectation files
    beside the package source)?"""
    return (root / "expectations").is_dir() and (root / "tests" / "characterisation").is_dir()


def shipped_expectations() -> Path:
    """The expectation files that come with the code: the checkout's, else the package's."""
    return CHECKOUT / "expectations" if is_checkout() else PACKAGE / "data" / "expectations"


def suite_dir() -> Path:
    """The characterisation suite's test modules: the checkout's, else the package's."""
    return CHECKOUT / "tests" / "characterisation" if is_checkout() else PACKAGE / "suite"


def installed_suite() -> Path | None:
    """The suite shipped inside the package (None in a checkout, or a build without it)."""
    d = PACKAGE / "suite"
    return d if (d / "__init__.py").is_file() else None


def user_dir() -> Path:
    """The directory the user owns for gpuchar's writable state: $GPUCHAR_HOME, else the
    platform's user data directory."""
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs
    return Path(platformdirs.user_data_dir("pytest-gpuchar", appauthor=False))


def user_expectations() -> Path:
    """The user's layer of expectation files (entries here win over the shipped ones)."""
    return user_dir() / "expectations"


def sass_archive() -> Path:
    return PACKAGE / "data" / SASS_ARCHIVE


@functools.lru_cache(maxsize=1024)
def in_installed_suite(module: Path) -> bool:
    """Is `module` (a test file) one of the installed package's suite modules?"""
    suite = installed_suite()
    return suite is not None and Path(module).resolve().parent == suite.resolve()


def sass_root(module: Path) -> Path:
    """The ``__sass__`` directory of a test module's snapshots: beside the module (a checkout,
    a user's own tests), or the user's store for the installed suite (never site-packages)."""
    if in_installed_suite(module):
        return user_dir() / SASS_DIR
    return Path(module).parent / SASS_DIR


def sass_dir(module: Path, tag: str) -> Path:
    """``<sass_root>/<compiler>/<arch>`` of a test module ('ptxas-13.5.37/sm_80'); for the
    installed suite, first seeded from the shipped snapshots of that compiler and arch."""
    root = sass_root(module)
    if in_installed_suite(module):
        seed(root, tag)
    return root / tag


@functools.lru_cache(maxsize=1)
def _version() -> str:
    from importlib import metadata
    try:
        return metadata.version("pytest-gpuchar")
    except metadata.PackageNotFoundError:
        return "unknown"


def seed(root: Path, tag: str, archive: Path | None = None) -> int:
    """Copy the shipped snapshots of compiler/arch `tag` into the user's store `root`, those
    it does not have yet, once per package version (a marker file records it). A file the
    user has, accepted or changed, is never replaced. Returns how many files were written."""
    from .atomic import atomic_write
    archive = archive or sass_archive()
    target = root / tag
    marker = target / f".shipped-{_version()}"
    if not archive.is_file():
        return 0
    if marker.exists():
        return 0
    prefix = f"{SASS_DIR}/{tag}/"
    written = 0
    with tarfile.open(archive, "r:xz") as tar:
        for member in tar:
            if not member.isfile() or not member.name.startswith(prefix):
                continue
            rel = Path(member.name[len(prefix):])
            if rel.is_absolute() or ".." in rel.parts:
                continue
            dest = target / rel
            if dest.exists():
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            data = tar.extractfile(member)
            if data is None:
                continue
            atomic_write(dest, data.read(), fsync=False)
            written += 1
    if target.is_dir():
        atomic_write(marker, f"{written} shipped snapshot files of {tag} seeded\n", fsync=False)
    return written
