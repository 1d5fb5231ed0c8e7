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

from pathlib import Path

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

COMPILER = pytest.StashKey[str]()
SASS_DIR = "__sass__"
UNTAGGED = "no-compiler"


def use_compiler(item: pytest.Item, tag: str) -> None:
    """Record which compiler (and arch) produced the SASS this test snapshots
    ('ptxas-13.5.37/sm_80')."""
    item.stash[COMPILER] = tag


class SASSSnapshotExtension(SingleFileSnapshotExtension):
    file_extension = "sass"
    _write_mode = WriteMode.TEXT

    @classmethod
    def dirname(cls, *, test_location) -> str:
        # a test that was skipped before it named its compiler has no snapshot to look at
        tag = test_location.item.stash.get(COMPILER, UNTAGGED)
        return str(Path(test_location.filepath).parent / SASS_DIR / tag / test_location.basename)

    def serialize(self, data, **kwargs) -> str:
        if not isinstance(data, str):
            raise TypeError(f"SASS snapshots take normalised SASS text, not {type(data).__name__}")
        return data
