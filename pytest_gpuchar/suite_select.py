"""Which tests a run collects: the user's own, or the characterisation suite that comes with
the package (core/locations.py finds it: a checkout's tests/characterisation, else the
installed pytest_gpuchar/suite).

pytest's conventions stand: paths on the command line, or an ini file's `testpaths`, are
collected as pytest collects them. The suite is chosen

- with ``--gpuchar-suite`` (its directory is collected, beside any path given), or
  ``pytest --pyargs pytest_gpuchar.suite`` (pytest's own way to name an installed package);
- by default, when pytest was given no path and no `testpaths` and the current directory
  holds no test file of its own (pytest's `python_files` patterns, outside `norecursedirs`):
  an empty directory runs the suite, a project with tests runs its tests.
"""
from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest

from .core import locations

WALK_LIMIT = 20000      # directory entries looked at before a directory counts as a project
CHOSEN = pytest.StashKey[str]()


def has_own_tests(top: Path, config: pytest.Config) -> bool:
    """Does `top` hold a test file pytest would collect (python_files, outside norecursedirs
    and hidden directories)? A tree too large to look through counts as one that does."""
    patterns = config.getini("python_files")
    skip = config.getini("norecursedirs")
    seen = 0
    for here, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not d.startswith(".")
                   and not any(fnmatch.fnmatch(d, p) for p in skip)
                   and not (Path(here, d) / "pyvenv.cfg").exists()]
        seen += len(dirs) + len(files)
        if any(fnmatch.fnmatch(f, p) for f in files for p in patterns if f.endswith(".py")):
            return True
        if seen > WALK_LIMIT:
            return True
    return False


def choose(config: pytest.Config) -> None:
    """Point the run at the suite where the user asked for it or pytest would find nothing;
    record the choice (CHOSEN) for the report header."""
    suite = locations.suite_dir()
    explicit = config.getoption("gpuchar_suite", False)
    named = config.option.pyargs and any(
        a == locations.SUITE_PACKAGE or a.startswith(locations.SUITE_PACKAGE + ".")
        for a in config.args)
    source = config.args_source
    why = ""
    if explicit:
        given = [] if source != pytest.Config.ArgsSource.ARGS else list(config.args)
        if not any(_same(a, suite) for a in given):
            given.append(str(suite))
        config.args[:] = given
        why = "--gpuchar-suite"
    elif named:
        why = "--pyargs"
    elif source == pytest.Config.ArgsSource.INVOCATION_DIR and not has_own_tests(
            config.invocation_params.dir, config):
        config.args[:] = [str(suite)]
        why = (f"no test path given and no test file in {config.invocation_params.dir}; "
               f"name your own tests, or have some here, to run them instead")
    if why:
        config.stash[CHOSEN] = f"suite {suite} ({why})"
        if not suite.is_dir():
            raise pytest.UsageError(f"--gpuchar-suite: the suite is not installed ({suite} "
                                    f"does not exist): reinstall pytest-gpuchar from its wheel")
    if why or any(_same(a, suite) for a in config.args):
        # as the repository's own runs (pyproject.toml's addopts): the snapshots of the
        # archs and compilers a run did not select are not its to judge
        config.option.warn_unused_snapshots = True


def _same(arg: str, path: Path) -> bool:
    try:
        return Path(arg.split("::")[0]).resolve() == path.resolve()
    except OSError:
        return False
