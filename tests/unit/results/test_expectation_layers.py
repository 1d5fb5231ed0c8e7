"""The expectation files in layers: a user's directory over the files an installed package
ships; the user's entries win, the shipped files are never written, each entry's layer is
shown (gpuchar-expectations check / show)."""
from __future__ import annotations

from pathlib import Path

from pytest_gpuchar.cli import expectations as cli
from pytest_gpuchar.results import expectations as E

SHIPPED = """schema: 2
arch: sm_80
characteristics:
  latency.add.u32:
    value: 4
    unit: cycles/op
    tolerance: {abs: 1}
    source: paper
  latency.mul.lo.u32:
    value: 4
    unit: cycles/op
    tolerance: {abs: 1}
    source: paper
mappings:
  add.u32: {paper: IADD, source: paper}
"""
USER = """schema: 2
arch: sm_80
characteristics:
  latency.add.u32:
    value: 5
    unit: cycles/op
    tolerance: {abs: 0.5}
    source: measured on my board
devices:
  "My GPU":
    characteristics:
      latency.mul.lo.u32:
        value: 6
        unit: cycles/op
        tolerance: {abs: 1}
        source: measured on my board
"""


def _layers(tmp_path: Path) -> list[Path]:
    shipped, user = tmp_path / "shipped", tmp_path / "user"
    shipped.mkdir()
    (shipped / "sm_80.yaml").write_text(SHIPPED)
    (shipped / "sm_90.yaml").write_text(SHIPPED.replace("sm_80", "sm_90"))
    user.mkdir()
    (user / "sm_80.yaml").write_text(USER)
    return [shipped, user]


def test_the_users_entries_win_and_the_shipped_ones_fill_in(tmp_path):
    store = E.Store(layers=_layers(tmp_path))
    exp = store.load("sm_80")
    assert exp.get("latency.add.u32").value == 5
    assert exp.get("latency.mul.lo.u32").value == 4
    assert exp.get("latency.mul.lo.u32", "My GPU").value == 6
    assert exp.mappings["add.u32"]["paper"] == "IADD"
    assert store.layer_of(exp.get("latency.add.u32").origin) == "user"
    assert store.layer_of(exp.get("latency.mul.lo.u32").origin) == "shipped"
    assert set(store.available()) == {"sm_80", "sm_90"}
    assert store.root == tmp_path / "user"


def test_writes_go_to_the_user_layer_only(tmp_path):
    layers = _layers(tmp_path)
    before = (layers[0] / "sm_90.yaml").read_text()
    store = E.Store(layers=layers)
    path = E.file_for("latency.add.u32", "sm_90", store.root)
    E.write_entries(path, {"latency.add.u32": {"value": 7.0, "unit": "cycles/op",
                                               "tolerance": {"abs": 1.0}, "source": "mine"}})
    assert path == tmp_path / "user" / "sm_90.yaml"
    assert (layers[0] / "sm_90.yaml").read_text() == before
    assert store.load("sm_90").get("latency.add.u32").value == 7.0
    assert store.load("sm_90").get("latency.mul.lo.u32").value == 4


def test_one_directory_is_one_layer(tmp_path):
    store = E.Store(tmp_path)
    assert store.layers == [tmp_path] and store.root == tmp_path
    assert store.layer_of(tmp_path / "sm_80.yaml") == "project"


def test_an_installed_packages_files_get_the_users_directory_over_them(monkeypatch, tmp_path):
    monkeypatch.delenv("GPUCHAR_EXPECTATIONS", raising=False)
    monkeypatch.setenv("GPUCHAR_HOME", str(tmp_path / "home"))
    assert E.default_layers(tmp_path) == [E.PACKAGE_ROOT]     # a checkout: its own files
    monkeypatch.setattr(E.locations, "is_checkout", lambda root=None: False)
    assert E.default_layers(tmp_path) == [E.PACKAGE_ROOT, tmp_path / "home" / "expectations"]
    (tmp_path / "expectations").mkdir()                     # a project's own files
    assert E.default_layers(tmp_path) == [tmp_path / "expectations"]


def test_check_and_show_name_each_files_and_entrys_layer(tmp_path, monkeypatch, capsys):
    layers = _layers(tmp_path)
    monkeypatch.setattr(cli, "Store", lambda root=None: E.Store(layers=layers))
    assert cli.main(["check"]) == 0
    out = capsys.readouterr().out
    assert f"ok  [shipped] {layers[0] / 'sm_80.yaml'}" in out
    assert f"ok  [user] {layers[1] / 'sm_80.yaml'}" in out
    assert cli.main(["show", "--arch", "sm_80"]) == 0
    out = capsys.readouterr().out
    assert f"latency.add.u32  5.0 cycles/op  [user] {layers[1] / 'sm_80.yaml'}:" in out
    assert f"latency.mul.lo.u32  4.0 cycles/op  [shipped] {layers[0] / 'sm_80.yaml'}:" in out
    assert cli.main(["show", "--arch", "sm_80", "--device", "My GPU", "--key",
                     "latency.mul"]) == 0
    assert "latency.mul.lo.u32  6.0 cycles/op  [user]" in capsys.readouterr().out
    assert cli.main(["show", "--arch", "sm_75"]) == 1
