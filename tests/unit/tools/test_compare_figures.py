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


def test_a_relative_error_is_allowed_1_percent_of_its_measurement():
    """bsp.mm.2048x2048x2048.error on one H200: 0.0017 -> 0.0070 while the measured
    cycles it is relative to moved within their own spread + 1%: the 1% of a relative error
    is 1% of that measurement (0.01 x p/m), not 1% of a number near zero."""
    def err(value, spread):
        return {**r("bsp.mm.2048x2048x2048.error", value, spread), "unit": "ratio"}
    got = cf.compare_one(err(0.001697, 0.003944), err(0.006968, 0.002232))
    assert got["verdict"] == "within" and got["allowance"] == pytest.approx(
        0.003944 + 0.01 * 1.001697)
    assert cf.compare_one(err(0.0017, 0.0039), err(0.02, 0.0022))["verdict"] == "OUTSIDE"
    # any other figure near zero keeps 1% of its value (a numerics error, in its own unit)
    tiny = {**r("numerics.chain.f16.init_f16.error", 0.0005), "unit": "error"}
    assert cf.compare_one(tiny, {**tiny, "value": 0.0006})["verdict"] == "OUTSIDE"


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


def noisy(key, value, spread, run, exact=False, unit="cycles"):
    return {**r(key, value, spread), "unit": unit,
            "noise": {"run": run, "board": 190.0, "exact": exact, "grid": False}}


def test_the_gate_judges_a_move_by_the_figures_run_noise():
    """A cluster barrier c2 on one H200: 338.0 -> 328.4 cycles, outside its spreads + 1%
    (6.1) and no change for the nightly gate (its run noise 4.9 cycles: 5.06 x 4.9 x sqrt 2);
    an exact cycle count that moves one cycle is a change for the gate and within for the
    spreads + 1% once 1% of it passes a cycle."""
    got = cf.compare_one(noisy("movement.cluster.barrier.c2", 338.0, 2.741, 4.9),
                         noisy("movement.cluster.barrier.c2", 328.4, 2.759, 4.9))
    assert (got["verdict"], got["gate"]) == ("OUTSIDE", "no change")
    assert got["gate_limit"] == pytest.approx(5.06 * 4.9 * 2 ** 0.5, rel=0.01)
    exact = cf.compare_one(noisy("tensor.wgmma.x", 128.0, 0.0, 0.0, exact=True),
                           noisy("tensor.wgmma.x", 129.0, 0.0, 0.0, exact=True))
    assert (exact["verdict"], exact["gate"]) == ("within", "change")
    # a model's relative error is not asked (its cycles are); no noise model: the fallback 1%
    err = {**r("bsp.mm.x.error", 0.01, 0.001), "unit": "ratio"}
    assert cf.compare_one(err, {**err, "value": 0.02})["gate"] == "-"
    assert cf.compare_one(r("k", 100.0), r("k", 101.5))["gate"] == "change"
