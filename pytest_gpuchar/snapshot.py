"""syrupy extension for SASS listings: one readable ``.sass`` text file per snapshot.

Importable with a no-argument constructor (pytest-xdist workers re-create extensions by import
path). Snapshot names carry the compiler (``ptxas-13.5.37`` or ``jit-driver-580.95.05``) so a
compiler or driver change shows up as a diff against that compiler's own record.
"""
from __future__ import annotations

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode


class SASSSnapshotExtension(SingleFileSnapshotExtension):
    file_extension = "sass"
    _write_mode = WriteMode.TEXT

    def serialize(self, data, **kwargs) -> str:
        if not isinstance(data, str):
            raise TypeError(f"SASS snapshots take normalised SASS text, not {type(data).__name__}")
        return data
