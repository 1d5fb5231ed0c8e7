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
