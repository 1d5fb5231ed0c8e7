"""tools/gpu-host/compare_figures.py (the old-against-new comparison of one board's figures):
the verdict of each figure, the per-topic times from JUnit XML, the report it writes."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[3] / "tools" / "gpu-host" / "compare_figures.py"
spec = importlib.util.spec_from_file_location("compare_figures", TOOL)
cf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cf)


def r(key, value, spread=0.0, status="pass", arch="sm_90"):
    return {"key": key, "arch": arch, "value": value, "spread": spread, "status": status,
            "unit": "cycles"}


@pytest.mark.parametrize("old, new, verdict", [
    (r("k", 100.0, 2.0), r("k", 103.0, 1.0), "within"),        # 3 <= 2 + 1
    (r("k", 100.0, 0.5), r("k", 102.0, 0.5), "OUTSIDE"),       # 2 > 0.5 + 1
    (r("k", 4.0), r("k", 4.0), "same"),
    (r("k", None, status="invalid"), r("k", None, status="invalid"), "same"),
    (r("k", 4.0), r("k", None, status="error"), "no-value"),
    (None, r("k", 4.0), "only-new"),
    (r("k", 4.0), None, "only-old"),
])
def test_verdicts(old, new, verdict):
    assert cf.compare_one(old, new)["verdict"] == verdict


def test_a_comparison_is_written(tmp_path):
    old = {"meta": {"wall_s": 90.0, "device": "H100"}, "results": [
        r("memory.latency.l1", 33.0, 0.2), r("sass.x", None, status="info")]}
    new = {"meta": {"wall_s": 48.0, "device": "H100", "time_by_topic": {
        "memory": {"tests": 2, "static_s": 0.0, "hardware_s": 5.0, "gpu_busy_s": 1.2}}},
        "results": [r("memory.latency.l1", 33.1, 0.2)]}
    for name, rep in (("old", old), ("new", new)):
        (tmp_path / f"{name}.json").write_text(json.dumps(rep))
    tree = tmp_path / "tree" / "tests" / "characterisation"
    tree.mkdir(parents=True)
    (tree / "test_memory_table_iv.py").write_text('pytestmark = pytest.mark.topic("memory")\n')
    junit = tmp_path / "j.xml"
    junit.write_text('<testsuites><testsuite><testcase classname="tests.characterisation.'
                     'test_memory_table_iv" name="a" time="1.5"/><testcase classname="tests.'
                     'characterisation.test_memory_table_iv" name="b" time="2.0"/>'
                     '</testsuite></testsuites>')
    rc = cf.main([str(tmp_path / "old.json"), str(tmp_path / "new.json"),
                  "--old-junit", str(junit), "--old-tree", str(tmp_path / "tree"),
                  "--out", str(tmp_path / "cmp")])
    md = (tmp_path / "cmp.md").read_text()
    assert rc == 0 and "| memory | 3.5 |  | 5.0 | 1.20 |" in md
    assert "| sm_90 | memory.latency.l1 | 33 | 33.1 |" in md and "within" in md
    assert json.loads((tmp_path / "cmp.json").read_text())["figures"][
        "sm_90 memory.latency.l1"]["verdict"] == "within"
