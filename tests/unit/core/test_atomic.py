"""core/atomic: the one atomic write. A replaced file keeps its mode, a new file gets the
umask's; a failed write leaves the old file whole and no temporary file behind. Checked
through every writer that records something: expectation updates (the CLI), SASS snapshots,
the nightly's files, plots, the listing cache."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_gpuchar.core.atomic import atomic_write, replacing, replacing_dir


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask():
    """umask(m): set the process's umask for the test (restored after it)."""
    old = os.umask(0o022)
    os.umask(old)
    yield lambda m: os.umask(m)
    os.umask(old)


@pytest.mark.parametrize("before", [0o644, 0o640, 0o664, 0o600, 0o755])
def test_a_replaced_file_keeps_its_mode(tmp_path, umask, before):
    umask(0o077)                 # the umask must not matter for a file that exists
    p = tmp_path / "sm_80.yaml"
    p.write_text("old\n")
    p.chmod(before)
    atomic_write(p, "new\n")
    assert p.read_text() == "new\n" and mode(p) == before
    assert [q.name for q in tmp_path.iterdir()] == ["sm_80.yaml"]


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_a_new_file_gets_the_umasks_mode(tmp_path, umask, mask, expected):
    umask(mask)
    p = tmp_path / "new.sass"
    atomic_write(p, b"bytes\n")
    assert p.read_bytes() == b"bytes\n" and mode(p) == expected
    q = tmp_path / "plain.txt"           # what open() gives: the same
    with open(q, "w"):
        pass
    assert mode(q) == expected


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    p = tmp_path / "plot.png"
    p.write_bytes(b"OLD")
    p.chmod(0o644)
    with pytest.raises(RuntimeError, match="savefig failed"):
        with replacing(p, suffix=".png") as tmp:
            assert tmp.suffix == ".png" and tmp.parent == tmp_path
            tmp.write_bytes(b"HALF")
            raise RuntimeError("savefig failed")
    assert p.read_bytes() == b"OLD" and mode(p) == 0o644
    assert [q.name for q in tmp_path.iterdir()] == ["plot.png"]


def test_expectation_update_keeps_the_files_mode(tmp_path, umask, capsys):
    """The issue's case: `gpuchar-expectations update` turned 0644 files into 0600."""
    from pytest_gpuchar.cli import expectations as cli
    import json
    umask(0o022)
    f = tmp_path / "exp" / "sm_80.yaml"
    f.parent.mkdir()
    f.write_text("schema: 2\narch: sm_80\ncharacteristics:\n  latency.add.u32:\n"
                 "    value: 4\n    unit: cycles\n    tolerance: {abs: 1}\n    source: paper\n")
    f.chmod(0o644)
    res = tmp_path / "run.json"
    res.write_text(json.dumps({"results": [{
        "key": "latency.add.u32", "arch": "sm_80", "value": 5.0, "unit": "cycles",
        "status": "fail", "provenance": {"device": "NVIDIA A100", "date": "2026-11-28"}}]}))
    assert cli.main(["update", "--root", str(tmp_path / "exp"), "--results", str(res),
                     "--arch", "sm_80"]) == 0
    assert "value: 5" in f.read_text() and mode(f) == 0o644
    assert "wrote 1 values" in capsys.readouterr().out


def test_a_rewritten_snapshot_keeps_its_mode_and_a_new_one_gets_the_umasks(tmp_path, umask):
    from pytest_gpuchar.results.snapshot import SASSSnapshotExtension

    def write(path, data):
        coll = type("Coll", (), {"location": str(path),
                                 "__iter__": lambda self: iter([SimpleNamespace(data=data)])})()
        SASSSnapshotExtension.write_snapshot_collection(snapshot_collection=coll)

    umask(0o022)
    old = tmp_path / "test_a.sass"
    old.write_text("A\n")
    old.chmod(0o664)
    write(old, "B\n")
    assert old.read_text() == "B\n" and mode(old) == 0o664
    new = tmp_path / "sub" / "test_b.sass"
    write(new, "C\n")
    assert mode(new) == 0o644


def test_the_nightly_files_and_a_plot_get_the_umasks_mode(tmp_path, umask):
    from pytest_gpuchar.cli import nightly
    from pytest_gpuchar.results import plots
    umask(0o022)
    nightly._write(tmp_path / "n" / "nightly.md", "# night\n")
    assert mode(tmp_path / "n" / "nightly.md") == 0o644
    fig = plots.pyplot().figure()
    plots.save(fig, tmp_path / "p" / "curve.png")
    assert mode(tmp_path / "p" / "curve.png") == 0o644
    assert mode(tmp_path / "p" / "curve.svg") == 0o644     # its SVG twin for the HTML page
    assert sorted(q.name for q in (tmp_path / "p").iterdir()) == ["curve.png", "curve.svg"]


def test_no_writer_has_its_own_temporary_file():
    """One atomic write: no other module of the package makes its own temporary file to
    rename over a record (its mode would be mkstemp's 0600)."""
    import pytest_gpuchar
    pkg = Path(pytest_gpuchar.__file__).parent
    own = [str(p.relative_to(pkg)) for p in pkg.rglob("*.py")
           if p.name != "atomic.py" and ("mkstemp" in p.read_text() or
                                         "os.replace(" in p.read_text())]
    assert own == []


def test_a_directory_is_replaced_whole_or_not_at_all(tmp_path, umask):
    """replacing_dir: a new directory appears whole; a replaced one keeps its mode and loses
    what the new one does not hold; an error half-way leaves the old one as it was and no
    temporary directory behind."""
    umask(0o022)
    site = tmp_path / "site"
    with replacing_dir(site) as tmp:
        assert not site.exists() and tmp.parent == tmp_path
        (tmp / "keys").mkdir()
        (tmp / "index.html").write_text("one")
        (tmp / "keys" / "a.html").write_text("a")
    assert (site / "index.html").read_text() == "one" and mode(site) == 0o755
    site.chmod(0o750)
    with replacing_dir(site) as tmp:
        (tmp / "index.html").write_text("two")
        assert (site / "keys" / "a.html").exists()          # the old one until the swap
    assert sorted(p.name for p in site.iterdir()) == ["index.html"]
    assert (site / "index.html").read_text() == "two" and mode(site) == 0o750
    with pytest.raises(RuntimeError):
        with replacing_dir(site) as tmp:
            (tmp / "index.html").write_text("half")
            raise RuntimeError("killed half-way")
    assert (site / "index.html").read_text() == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
