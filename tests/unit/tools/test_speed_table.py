"""tools/gpu-host/speed_table.py (issue 41's table of the README command's runs): the tests a
summary line counts, whatever their outcome; phases.py, the stages of each run."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[3] / "tools" / "gpu-host" / "speed_table.py"
spec = importlib.util.spec_from_file_location("speed_table", TOOL)
st = importlib.util.module_from_spec(spec)
spec.loader.exec_module(st)
spec = importlib.util.spec_from_file_location("phases", TOOL.parent / "phases.py")
phases = importlib.util.module_from_spec(spec)
spec.loader.exec_module(phases)


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


def test_the_phases_plugin_times_each_stage_of_a_run(pytester, monkeypatch):
    """tools/gpu-host/phases.py as `-p phases`: one JSON line per run, each stage at or after
    the one before (seconds after GPUCHAR_T0), the tests' sleep between the first test's start
    and the last's end; main prints each run's stages and the gaps between them."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(TOOL.parent), *filter(None, [os.environ.get("PYTHONPATH")])]))
    out = pytester.path / "phases.jsonl"
    monkeypatch.setenv("GPUCHAR_PHASES", str(out))
    monkeypatch.setenv("GPUCHAR_T0", repr(time.time()))
    pytester.makepyfile(test_two="""
        import time
        def test_slow():
            time.sleep(0.3)
        def test_fast():
            pass
    """)
    pytester.runpytest_subprocess("-p", "phases", "-p", "no:gpuchar").assert_outcomes(
        passed=2)
    (run,) = [json.loads(line) for line in out.read_text().splitlines()]
    stages = [s for s in phases.STAGES if s != "exit"]
    assert list(run) == stages
    assert all(run[a] <= run[b] for a, b in zip(stages, stages[1:]))
    assert run["last_test"] - run["first_test"] >= 0.3
    ends = pytester.path / "ends.txt"
    ends.write_text(f"{run['unconfigured'] + 0.5:.3f}\n")
    text = subprocess.run([sys.executable, str(TOOL.parent / "phases.py"), str(out), str(ends)],
                          capture_output=True, text=True, check=True).stdout
    head, row, gap = text.strip().splitlines()[-3:]
    assert head.split()[1:] == list(phases.STAGES)
    assert float(row.split()[-1]) == pytest.approx(run["unconfigured"] + 0.5, abs=0.006)
    assert float(gap.split()[-1]) == pytest.approx(0.5, abs=0.011)    # (printed to 0.01 s)
