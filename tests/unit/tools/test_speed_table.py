"""tools/gpu-host/speed_table.py (issue 41's table of the README command's runs): the tests a
summary line counts, whatever their outcome."""
from __future__ import annotations

import importlib.util
from pathlib import Path

TOOL = Path(__file__).resolve().parents[3] / "tools" / "gpu-host" / "speed_table.py"
spec = importlib.util.spec_from_file_location("speed_table", TOOL)
st = importlib.util.module_from_spec(spec)
spec.loader.exec_module(st)


def test_a_test_counts_whatever_its_outcome_and_deselected_do_not():
    """Two runs of one H200 board: 1041 passed / 6 xfailed and 1040 passed / 7 xfailed are
    the same 1145 tests; deselected tests are not run."""
    assert st.tests_run("1041 passed, 98 skipped, 6 xfailed") == 1145
    assert st.tests_run("1040 passed, 98 skipped, 7 xfailed") == 1145
    assert st.tests_run("679 passed, 83 skipped, 377 deselected, 6 xfailed") == 768
    assert st.tests_run("1 failed, 2 errors, 3 xpassed, 4 warnings") == 6


def test_the_slowest_tests_carry_the_gpu_busy_the_plugin_recorded(pytester):
    """slowest_tests.py reads pytest's own JUnit XML: a test's `gpuchar_busy_s` property
    (the plugin records it at teardown) is its busy column, and a test without one shows
    "-"; speed_table.py prints the same table for the best run."""
    pytester.makepyfile(test_two="""
        import time
        def test_slow(record_property):
            time.sleep(0.2)
            record_property("gpuchar_busy_s", 0.125)
        def test_fast():
            pass
    """)
    xml = pytester.path / "run.xml"
    pytester.runpytest_inprocess("-p", "no:gpuchar", f"--junitxml={xml}").assert_outcomes(
        passed=2)
    rows = st.slowest_tests.rows(xml)
    assert [(r[1], r[3]) for r in rows] == [(0.125, "test_slow"), (None, "test_fast")]
    text = st.slowest_tests.report(xml, 5, "tests, run 1")
    assert "GPU busy 0.1 s, 2 tests" in text
    assert text.splitlines()[-1].split()[1] == "-"
    assert text.splitlines()[-2].split()[:2][1] == "0.12"
