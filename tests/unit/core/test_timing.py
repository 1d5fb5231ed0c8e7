"""core.timing: waits charged to the test that waited."""
from __future__ import annotations

import time

from pytest_gpuchar.core import timing


def test_waits_are_charged_per_kind_and_test():
    timing.reset()
    timing.set_test("t::a")
    with timing.blocked(timing.JIT):
        time.sleep(0.02)
    with timing.blocked(timing.GPU):
        pass
    timing.set_test("t::b")
    with timing.blocked(timing.OFFLINE):
        time.sleep(0.01)
    timing.set_test("")
    s = timing.summary()
    assert s["total"]["jit"] >= 0.02 and set(s["total"]) == {"jit", "gpu", "offline"}
    assert [t["test"] for t in s["tests"]] == ["t::a", "t::b"]
    assert set(s["tests"][1]) == {"test", "offline"}
    timing.reset()
    assert timing.summary() == {"total": {}, "tests": []}
