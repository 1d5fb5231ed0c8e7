"""results.durations: each topic's static and hardware wall time and GPU-busy time from its
tests' reports, and how the reports and the summary show them."""
from __future__ import annotations

import pytest

from pytest_gpuchar.results import durations
from pytest_gpuchar.results.durations import Durations


def test_phases_add_up_per_test_and_topic():
    d = Durations()
    for phase, s in (("setup", 0.5), ("call", 2.0), ("teardown", 0.1)):
        d.add("t::mem_hw", "memory", "hardware", s, 0.75 if phase == "teardown" else None)
    d.add("t::mem_static", "memory", "static", 0.2)
    d.add("t::dpx_hw", "dpx", "hardware", 1.0, 0.25)
    d.add("t::unit", None, "static", 9.0)            # no topic: not a topic's time
    table = d.by_topic()
    assert table == {"dpx": {"tests": 1, "static_s": 0.0, "hardware_s": 1.0, "gpu_busy_s": 0.25},
                     "memory": {"tests": 2, "static_s": 0.2, "hardware_s": 2.6,
                                "gpu_busy_s": 0.75}}
    assert durations.totals(table) == {"tests": 3, "static_s": 0.2, "hardware_s": 3.6,
                                       "gpu_busy_s": 1.0}


def test_report_and_terminal_lines():
    d = Durations()
    d.add("a", "memory", "hardware", 3.0, 1.5)
    d.add("b", "tensor", "static", 2.0)
    md = durations.markdown(d.by_topic())
    assert md[0] == "## Time by topic" and "| memory | 1 | 0.0 | 3.0 | 1.50 |" in md
    assert "| all | 2 | 2.0 | 3.0 | 1.50 |" in md
    lines = durations.lines(d.by_topic())
    assert lines[0].endswith("all 3.0 s / 1.5 s; 2.0 s") and "  memory: 3.0 s / 1.50 s; 0.0 s" \
        in lines
    static_only = Durations()
    static_only.add("b", "tensor", "static", 2.0)
    assert durations.lines(static_only.by_topic()) == ["time (static) by topic: tensor 2.0 s"]
    assert durations.markdown({}) == [] and durations.lines({}) == []


def test_a_test_skipped_at_setup_is_no_topics_time():
    d = Durations()
    d.add("t::ran", "memory", "hardware", 2.0, 0.5)
    d.skipped_at_setup("t::no_gpu")
    d.add("t::no_gpu", "memory", "hardware", 0.01)       # its teardown
    d.add("t::skipped_in_call", "memory", "hardware", 1.0, 0.25)   # it ran, then skipped
    assert d.by_topic()["memory"] == {"tests": 2, "static_s": 0.0, "hardware_s": 3.0,
                                      "gpu_busy_s": 0.75}
    none = Durations()
    none.skipped_at_setup("x")
    none.add("x", "dpx", "hardware", 0.01)
    assert none.by_topic() == {} and durations.lines(none.by_topic()) == []


@pytest.mark.parametrize("n", [1, 3])
def test_the_busy_time_is_the_last_one_reported(n):
    d = Durations()
    for k in range(n):
        d.add("x", "bsp", "hardware", 1.0, 0.1 * (k + 1))
    assert d.by_topic()["bsp"]["gpu_busy_s"] == pytest.approx(0.1 * n)


FAKE_GPU = """
from pytest_gpuchar.core import device

FAKE = device.DeviceInfo(0, "FAKE H200", "sm_90", 132, 60 * 2**20, 228 * 1024, 141 * 2**30,
                         1980.0, 1980.0, 2619.0, "580.159.04", "13.0", "13.0")


_REAL = device.detect


def pytest_configure(config):
    device.detect = lambda index=None: FAKE


def pytest_unconfigure(config):
    device.detect = _REAL          # the run is in-process: the next one sees no fake GPU
"""

TESTS = """
import pytest
from pytest_gpuchar.core import timing
from pytest_gpuchar.results.judge import Measurement

pytestmark = pytest.mark.topic("memory")

@pytest.mark.hardware
def test_a_row(arch, gpu, hardware_row):
    timing.charge_busy(0.25)          # what the launch stage charges for its kernels
    hardware_row(Measurement("memory.latency.x", 4.0, "cycles"))

@pytest.mark.static
def test_a_check(arch):
    pass
"""


def test_a_run_reports_each_topics_time(pytester):
    import json
    pytester.makeconftest(FAKE_GPU)
    pytester.makepyfile(test_rows=TESTS)
    (pytester.path / "expectations").mkdir()
    result = pytester.runpytest("--gpuchar-report", "out", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*time by topic (wall of hardware tests / GPU busy; static "
                                 "wall): all * s / 0.2 s; * s", "  memory: * s / 0.25 s; * s"])
    meta = json.loads((pytester.path / "out" / "gpuchar-results.json").read_text())["meta"]
    row = meta["time_by_topic"]["memory"]
    assert row["tests"] == 2 and row["gpu_busy_s"] == 0.25 and row["hardware_s"] > 0
    assert "## Time by topic" in (pytester.path / "out" / "gpuchar-summary.md").read_text()
