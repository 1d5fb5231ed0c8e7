"""syrupy extension for SASS listings: one readable ``.sass`` text file per snapshot.

Importable with a no-argument constructor (pytest-xdist workers re-create extensions by import
path). Each compiler and arch keeps its own directory, ``__sass__/<compiler>/<arch>/<test
module>/`` beside the test module (``__sass__/ptxas-13.5.37/sm_80/...``,
``__sass__/jit-driver-580.159.04/sm_90/...``): a compiler or driver change shows up as a diff
against that compiler's own record, ``diff -r`` between two directories shows what a compiler
upgrade changed, and ``--snapshot-update`` never deletes the record of another compiler or of an
arch that was not run (syrupy only looks into the directories in use; ``__snapshots__``, which
syrupy's default extension sweeps for unknown files, is not used).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from ..core import locations
from ..core.atomic import atomic_write

COMPILER = pytest.StashKey[str]()
SASS_DIR = locations.SASS_DIR
UNTAGGED = "no-compiler"


def use_compiler(item: pytest.Item, tag: str) -> None:
    """Record which compiler (and arch) produced the SASS this test snapshots
    ('ptxas-13.5.37/sm_80')."""
    item.stash[COMPILER] = tag


@functools.lru_cache(maxsize=None)
def _file_name(cls, snapshot_name: str) -> str:
    """The file a test's snapshot is written to (syrupy's sanitised, length-limited name)."""
    clean = cls._sanitize_filename(snapshot_name)[: cls._max_stem_length()]
    return f"{clean}.{cls.file_extension}"


_NAMES = "_gpuchar_names"
_DIRNAME = "_gpuchar_dirname"


def _location_names(cls, test_location) -> tuple[str, str]:
    """(module directory name, snapshot file name) of a test location, computed once per
    location: syrupy's `basename` and `snapshot_name` parse the node's path on every access,
    and the unused-snapshot sweep asks for them once per snapshot file and test (1.2 million
    times, 29 s of a 128 s static run with the Blackwell archs)."""
    names = test_location.__dict__.get(_NAMES)
    if names is None:
        names = (test_location.basename, _file_name(cls, test_location.snapshot_name))
        test_location.__dict__[_NAMES] = names
    return names


@functools.lru_cache(maxsize=65536)
def _snapshot_names(snapshot_location: str) -> tuple[str, str]:
    """(directory name, file name) of a snapshot file, split once per file: the sweep asks
    for every file once per test of its module (3.2 million times on the static suite)."""
    head, name = os.path.split(snapshot_location)
    return os.path.basename(head), name


class SASSSnapshotExtension(SingleFileSnapshotExtension):
    file_extension = "sass"
    _write_mode = WriteMode.TEXT

    @classmethod
    def dirname(cls, *, test_location) -> str:
        """``<sass_root>/<compiler>/<arch>/<test module>``, made once per test location and
        compiler tag: syrupy asks again for each snapshot it reads, writes or sweeps at the
        end of the run (3,395 times in the README's hardware run)."""
        # a test that was skipped before it named its compiler has no snapshot to look at
        tag = test_location.item.stash.get(COMPILER, UNTAGGED)
        made = test_location.__dict__.get(_DIRNAME)
        if made is None or made[0] != tag:
            made = (tag, str(locations.sass_root(Path(test_location.filepath)) / tag
                             / _location_names(cls, test_location)[0]))
            test_location.__dict__[_DIRNAME] = made
        return made[1]

    @classmethod
    def matches_test_location(cls, *, test_location, snapshot_location: str) -> bool:
        """Does this snapshot file belong to this test? One file per test, named after it, in
        the directory of its module: an exact comparison of names. (syrupy's general check,
        with its path parsing and Unicode sanitising, is made for every snapshot against every
        test of the same module when it looks for unused snapshots: on this suite, thousands
        of files times thousands of tests, minutes at the end of a run.)"""
        return _snapshot_names(snapshot_location) == _location_names(cls, test_location)

    def serialize(self, data, **kwargs) -> str:
        if not isinstance(data, str):
            raise TypeError(f"SASS snapshots take normalised SASS text, not {type(data).__name__}")
        return data

    @classmethod
    def write_snapshot_collection(cls, *, snapshot_collection, name_order=None) -> None:
        """Atomically (core/atomic.py: temp file + rename, the replaced file's mode kept): a run
        interrupted or out of disk space mid-write leaves the old snapshot or the new one,
        never half of one (syrupy truncates the file and writes into it)."""
        path = Path(snapshot_collection.location)
        data = next(iter(snapshot_collection)).data
        if not isinstance(data, str):
            raise TypeError(f"SASS snapshots take text, not {type(data).__name__}")
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, fsync=False)


_SELECTED_ALL = "_gpuchar_selected_all"


def sweep_reads_selection_once() -> None:
    """Make syrupy's unused-snapshot sweep decide once, not once per snapshot file, whether
    every collected test was selected.

    ``SnapshotReport.selected_all_collected_items`` compares the collected and the selected
    node ids (two sets of about 15,700 ids in the project's test command) each time it is
    read, and ``SnapshotReport.unused`` reads it for every snapshot file it looks at (about
    2,800 here): 3 to 13 s on the pytest-xdist controller after every worker has finished.
    While ``unused`` runs, neither set changes, so the answer is computed on entering it and
    read from there; outside it the property is syrupy's own. A syrupy without these two
    members is left as it is (this changes only how long the sweep takes)."""
    from syrupy.report import SnapshotReport

    selected = SnapshotReport.__dict__.get("selected_all_collected_items")
    unused = SnapshotReport.__dict__.get("unused")
    if not isinstance(selected, property) or not isinstance(unused, functools.cached_property) \
            or getattr(unused.func, _SELECTED_ALL, False):
        return
    compare, sweep = selected.fget, unused.func

    def selected_all_collected_items(self) -> bool:
        known = self.__dict__.get(_SELECTED_ALL)
        return compare(self) if known is None else known

    @functools.wraps(sweep)
    def unused_sweep(self):
        self.__dict__[_SELECTED_ALL] = compare(self)
        try:
            return sweep(self)
        finally:
            del self.__dict__[_SELECTED_ALL]

    setattr(unused_sweep, _SELECTED_ALL, True)
    once = functools.cached_property(unused_sweep)
    once.__set_name__(SnapshotReport, "unused")
    SnapshotReport.selected_all_collected_items = property(selected_all_collected_items,
                                                           doc=selected.__doc__)
    SnapshotReport.unused = once
