"""core/locations.py: a checkout or an installed package, the user's directory, and the
installed suite's snapshot store seeded from the shipped archive."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path

from pytest_gpuchar.core import locations


def test_this_checkout_is_one_and_reads_its_own_files():
    assert locations.is_checkout()
    assert locations.shipped_expectations() == locations.CHECKOUT / "expectations"
    assert locations.suite_dir() == locations.CHECKOUT / "tests" / "characterisation"
    assert locations.installed_suite() is None


def test_a_directory_without_the_suite_is_no_checkout(tmp_path):
    (tmp_path / "expectations").mkdir()
    assert not locations.is_checkout(tmp_path)


def test_the_user_directory_is_gpuchar_home_else_the_platforms(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUCHAR_HOME", str(tmp_path / "mine"))
    assert locations.user_dir() == tmp_path / "mine"
    assert locations.user_expectations() == tmp_path / "mine" / "expectations"
    monkeypatch.delenv("GPUCHAR_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert locations.user_dir() == tmp_path / "xdg" / "pytest-gpuchar"


def test_a_modules_snapshots_lie_beside_it_outside_the_installed_suite(tmp_path):
    module = tmp_path / "test_mine.py"
    assert locations.sass_root(module) == tmp_path / "__sass__"
    assert locations.sass_dir(module, "ptxas-13.5.37/sm_90") == \
        tmp_path / "__sass__" / "ptxas-13.5.37" / "sm_90"
    assert not (tmp_path / "__sass__").exists()


def _archive(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:xz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_seeding_copies_one_compiler_and_arch_and_never_replaces_a_users_file(tmp_path):
    archive = _archive(tmp_path / "sass.tar.xz", {
        "__sass__/ptxas-13.5.37/sm_80/test_a/x.sass": "shipped x\n",
        "__sass__/ptxas-13.5.37/sm_80/test_a/y.sass": "shipped y\n",
        "__sass__/ptxas-13.5.37/sm_90/test_a/x.sass": "other arch\n",
        "__sass__/ptxas-13.5.37/sm_80/../../evil.sass": "outside\n"})
    store = tmp_path / "store"
    mine = store / "ptxas-13.5.37" / "sm_80" / "test_a" / "x.sass"
    mine.parent.mkdir(parents=True)
    mine.write_text("accepted by the user\n")
    assert locations.seed(store, "ptxas-13.5.37/sm_80", archive) == 1
    assert mine.read_text() == "accepted by the user\n"
    assert (mine.parent / "y.sass").read_text() == "shipped y\n"
    assert not (store / "ptxas-13.5.37" / "sm_90").exists()
    assert not (store / "evil.sass").exists() and not (tmp_path / "evil.sass").exists()
    (mine.parent / "y.sass").unlink()          # (syrupy deleted an unused one)
    assert locations.seed(store, "ptxas-13.5.37/sm_80", archive) == 0   # once per version
    assert not (mine.parent / "y.sass").exists()


def test_a_compiler_the_archive_lacks_seeds_nothing(tmp_path):
    archive = _archive(tmp_path / "sass.tar.xz", {"__sass__/ptxas-1/sm_80/t/x.sass": "x"})
    assert locations.seed(tmp_path / "store", "ptxas-2/sm_80", archive) == 0
    assert not (tmp_path / "store").exists()
