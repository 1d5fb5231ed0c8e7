"""The topic registry: which topic a test belongs to, and the order static compiles are queued."""
from __future__ import annotations

from types import SimpleNamespace

from pytest_gpuchar.topics import registry


class Item(SimpleNamespace):
    def get_closest_marker(self, name):
        return self.marks.get(name)


def item(topic: str, arch: str | None, static: bool = True) -> Item:
    marks = {"topic": SimpleNamespace(args=(topic,)),
             "static" if static else "hardware": SimpleNamespace(args=())}
    spec = SimpleNamespace(params={"arch": arch}) if arch else None
    return Item(marks=marks, callspec=spec)


def test_static_compiles_are_queued_in_the_order_the_tests_need_them():
    """Tests run module by module, each over every arch: the first module's archs come first,
    not every topic of the first arch."""
    items = [item("bsp", "sm_50"), item("bsp", "sm_121"), item("dpx", "sm_50"),
             item("bsp", "sm_50"), item("dpx", "sm_121"), item("tensor", "sm_90", static=False),
             item("memory", None), item("memory", "sm_61")]
    assert registry.run_order(items, ["sm_50", "sm_121"]) == [
        ("bsp", "sm_50"), ("bsp", "sm_121"), ("dpx", "sm_50"), ("dpx", "sm_121")]


def test_driver_jit_links_are_queued_in_the_order_the_hardware_tests_run():
    """The hardware tests' topics in the order they come (bsp first, as collected), not in
    registry order (which has bsp last: its first test waited for every other link)."""
    items = [item("bsp", "sm_90", static=False), item("dpx", "sm_90", static=False),
             item("bsp", "sm_90", static=False), item("instructions", "sm_90", static=False),
             item("memory", "sm_90"), item("tensor", "sm_80", static=False)]
    assert registry.run_order(items, ["sm_90"], "hardware") == [
        ("bsp", "sm_90"), ("dpx", "sm_90"), ("instructions", "sm_90")]
