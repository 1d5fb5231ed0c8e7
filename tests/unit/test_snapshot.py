"""snapshot: the syrupy extension for SASS text."""
from __future__ import annotations

import pytest

from pytest_gpuchar.snapshot import SASSSnapshotExtension


def test_constructs_without_arguments():
    ext = SASSSnapshotExtension()
    assert ext.file_extension == "sass"


def test_serialize_text():
    text = "IADD3 r0, r1, r2, RZ\nEXIT\n"
    assert SASSSnapshotExtension().serialize(text) == text


@pytest.mark.parametrize("data", [b"IADD3", 42, ["IADD3"]])
def test_serialize_non_text_raises(data):
    with pytest.raises(TypeError, match="SASS snapshots take normalised SASS text"):
        SASSSnapshotExtension().serialize(data)
