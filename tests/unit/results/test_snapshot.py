"""snapshot: the syrupy extension for SASS text."""
from __future__ import annotations

import pytest

from pytest_gpuchar.results.snapshot import SASSSnapshotExtension


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


def test_each_compiler_has_its_own_snapshot_directory(pytester):
    """--snapshot-update with one compiler must not delete another compiler's snapshots."""
    pytester.makepyfile(test_s="""
        def test_sass(sass_snapshot):
            assert "IADD3 r0, r1, r2, RZ\\n" == sass_snapshot("ptxas-13.5.37")
    """)
    other = pytester.path / "__sass__" / "ptxas-12.4.99" / "any" / "test_s"
    other.mkdir(parents=True)
    (other / "test_sass.sass").write_text("IADD r0, r1, r2\n")
    for args in (["--snapshot-update"], ["--snapshot-update", "test_s.py"]):
        result = pytester.runpytest(*args)
        result.assert_outcomes(passed=1)
    mine = pytester.path / "__sass__" / "ptxas-13.5.37" / "any" / "test_s" / "test_sass.sass"
    assert mine.read_text() == "IADD3 r0, r1, r2, RZ\n"
    assert (other / "test_sass.sass").exists()


def test_a_snapshot_store_is_not_collected(pytester):
    """pytest does not walk a ``__sass__`` store (thousands of files in the checkout's suite):
    a test module inside one is not collected, the module beside it is."""
    pytester.makepyfile(test_s="def test_here():\n    pass\n")
    inside = pytester.path / "__sass__" / "ptxas-13.5.37" / "sm_80" / "test_s"
    inside.mkdir(parents=True)
    (inside / "test_inside.py").write_text("def test_inside():\n    assert False\n")
    result = pytester.runpytest("--co", "-q")
    assert "test_s.py::test_here" in result.stdout.str()
    assert "test_inside" not in result.stdout.str()
    pytester.runpytest("-p", "no:gpuchar", "--co", "-q").stdout.fnmatch_lines(
        ["*test_inside.py::test_inside*"])


def test_the_directory_follows_the_compiler_a_test_names():
    """The snapshot directory is made once per test location and compiler tag: a tag named
    after the first look (a test that names its compiler when it runs) gives the new one."""
    from types import SimpleNamespace
    from pytest_gpuchar.results.snapshot import COMPILER
    loc = SimpleNamespace(item=SimpleNamespace(stash={}), filepath="/x/tests/test_m.py",
                          basename="test_m", snapshot_name="test_a")
    ext = SASSSnapshotExtension
    assert ext.dirname(test_location=loc) == "/x/tests/__sass__/no-compiler/test_m"
    loc.item.stash[COMPILER] = "ptxas-13.5.37/sm_80"
    assert ext.dirname(test_location=loc) == "/x/tests/__sass__/ptxas-13.5.37/sm_80/test_m"
    assert ext.dirname(test_location=loc) == "/x/tests/__sass__/ptxas-13.5.37/sm_80/test_m"


def test_a_failed_write_leaves_the_old_snapshot(tmp_path, monkeypatch):
    """Snapshots are written atomically: out of disk space (or Ctrl-C) mid-write leaves the
    old file whole, and no temporary file behind."""
    import os
    from types import SimpleNamespace
    path = tmp_path / "test_x.sass"
    path.write_text("OLD\n")
    snap = SimpleNamespace(data="NEW\n")

    class Coll:
        location = str(path)

        def __iter__(self):
            return iter([snap])

    def full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        SASSSnapshotExtension.write_snapshot_collection(snapshot_collection=Coll())
    assert path.read_text() == "OLD\n" and [p.name for p in tmp_path.iterdir()] == [path.name]
    monkeypatch.undo()
    SASSSnapshotExtension.write_snapshot_collection(snapshot_collection=Coll())
    assert path.read_text() == "NEW\n"


def test_the_unused_sweep_compares_the_selection_once_and_still_finds_unused(
        pytester, monkeypatch):
    """syrupy's unused-snapshot sweep asked whether every collected test was selected once
    per snapshot file (here 13, about 2,800 in the project's test command); with the plugin
    it asks once per sweep, and still reports an unused snapshot and deletes it on
    --snapshot-update."""
    import functools
    from syrupy.report import SnapshotReport
    from pytest_gpuchar.results.snapshot import sweep_reads_selection_once

    asked = []
    compare = SnapshotReport.__dict__["selected_all_collected_items"].fget
    unused = SnapshotReport.__dict__["unused"].func
    syrupys_sweep = functools.cached_property(getattr(unused, "__wrapped__", unused))
    syrupys_sweep.__set_name__(SnapshotReport, "unused")
    monkeypatch.setattr(SnapshotReport, "unused", syrupys_sweep)
    monkeypatch.setattr(SnapshotReport, "selected_all_collected_items",
                        property(lambda self: asked.append(1) or compare(self)))
    sweep_reads_selection_once()

    pytester.makepyfile(test_s="""
        import pytest

        @pytest.mark.parametrize("i", range(12))
        def test_kept(sass_snapshot, i):
            assert f"IADD3 R{i}\\n" == sass_snapshot("ptxas-13.5.37")

        def test_gone(sass_snapshot):
            assert "EXIT\\n" == sass_snapshot("ptxas-13.5.37")
    """)
    pytester.runpytest("--snapshot-update").assert_outcomes(passed=13)
    pytester.makepyfile(test_s="""
        import pytest

        @pytest.mark.parametrize("i", range(12))
        def test_kept(sass_snapshot, i):
            assert f"IADD3 R{i}\\n" == sass_snapshot("ptxas-13.5.37")
    """)
    asked.clear()
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*12 snapshots passed. 1 snapshot unused.*"])
    assert result.ret == 1 and len(asked) == 1
    pytester.runpytest("--snapshot-update").stdout.fnmatch_lines(
        ["*12 snapshots passed. 1 unused snapshot deleted.*"])
    store = pytester.path / "__sass__" / "ptxas-13.5.37" / "any" / "test_s"
    assert sorted(p.name for p in store.iterdir()) == sorted(
        f"test_kept[{i}].sass" for i in range(12))
