"""gpuchar-history's default database: $GPUCHAR_HISTORY, else gpuchar-history.sqlite in a
checkout or a directory that has one, else in the user's own directory (installed)."""
from __future__ import annotations

from pytest_gpuchar.cli import history as cli
from pytest_gpuchar.core import locations


def test_the_default_history_follows_where_the_package_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUCHAR_HISTORY", raising=False)
    monkeypatch.setenv("GPUCHAR_HOME", str(tmp_path / "home"))
    assert cli.default_db() == cli.DEFAULT_DB                 # this checkout: here
    monkeypatch.setattr(locations, "is_checkout", lambda root=None: False)
    assert cli.default_db() == str(tmp_path / "home" / cli.DEFAULT_DB)
    assert (tmp_path / "home").is_dir()                        # SQLite can create the file
    (tmp_path / cli.DEFAULT_DB).write_bytes(b"")
    assert cli.default_db() == cli.DEFAULT_DB                  # a directory that has one
    monkeypatch.setenv("GPUCHAR_HISTORY", "postgresql://db/x")
    assert cli.default_db() == "postgresql://db/x"
