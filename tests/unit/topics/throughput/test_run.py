"""throughput: how run.py turns measured runs into judged figures (keys, units, data fields,
methods), on runs placed in the session's run cache (no GPU)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.build import Built
from pytest_gpuchar.results.judge import NoFigure, Status
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.topics.throughput import analysis, kernels, rows, run
from pytest_gpuchar.topics.throughput.rows import LaunchCost
from pytest_gpuchar.topics.throughput.verify import LoopVerdict

SASS = """
//--------------------- .text.{entry} --------------------------
{entry}:
        /*0000*/                   CS2R R4, SR_CLOCKLO ;
        /*0010*/                   CS2R R6, SR_CLOCKLO ;
        /*0020*/                   EXIT ;
"""


def _session():
    return SimpleNamespace(repeats=7, runs=RunCache())


def _placed(session, row, arch: str, rate: float, *, unstable: bool = False):
    p = kernels.probe(row, arch)
    funcs = sass.parse(SASS.format(entry=p.entry))
    m = run.ThroughputRun(p, Built(p, funcs), rate, 0.5, unstable, "", {64: [1.0, 2.0],
                          128: [3.0, 4.0]}, {64: 10.0, 128: 20.0}, 132, [32],
                          LoopVerdict(True, {p.unit[0].split("|")[0]: 1.0}, loop_control={"BRA": 1}),
                          {64: 0.1, 128: 0.2}, 7.0, "the method", [rate - 0.2, rate + 0.3])
    session.runs.once(("throughput", row.name, arch), lambda: m)
    return m


def test_fma_row_figures():
    s = _session()
    _placed(s, rows.ROWS["ffma"], "sm_90", 126.0)
    _placed(s, rows.ROWS["dfma"], "sm_90", 63.0)
    m = run.fma(s, rows.ROWS["dfma"], "sm_90")
    fma, frac, ratio = m.figures
    assert (fma.key, fma.unit, fma.value, fma.method) == ("throughput.fma.dfma", "fma/clk/SM",
                                                          63.0, "the method")
    assert list(fma.data) == ["sass_unit", "loop_control", "cycles_per_sm", "results_per_sm",
                              "sms", "warps_per_sm", "wall_ms", "peak", "peak_source",
                              "tolerance", "rates", "medians", "intercept"]
    assert fma.data["cycles_per_sm"] == {"64": [1.0, 2.0], "128": [3.0, 4.0]}
    assert fma.data["medians"] == {64: 1.5, 128: 3.5} and fma.data["intercept"] == 7.0
    assert (frac.key, frac.unit, frac.value) == ("throughput.peak_fraction.dfma", "ratio",
                                                 63.0 / 64)
    assert "DFMA (DPU) reached 98.4% of its documented peak 64" in frac.detail
    assert (ratio.key, ratio.value) == ("throughput.ratio.dfma_per_ffma", 0.5)
    assert m.sass.startswith("CS2R r0, SR_CLOCKLO")
    assert [f.key for f in run.fma(s, rows.ROWS["ffma"], "sm_90").figures] == \
        ["throughput.fma.ffma", "throughput.peak_fraction.ffma"]


def test_unit_row_figure():
    s = _session()
    _placed(s, rows.ROWS["sfu.sqrt"], "sm_90", 15.9, unstable=True)
    (f,) = run.units(s, rows.ROWS["sfu.sqrt"], "sm_90").figures
    assert (f.key, f.unit) == ("throughput.unit.sfu.sqrt", "ops/clk/SM")
    assert f.method == "the method; " + rows.ROWS["sfu.sqrt"].note
    assert f.detail == "SFU: square root (SFU): SASS {'MUFU.SQRT': 1.0}"
    assert f.data["peak_fraction"] == round(15.9 / 16, 4) and f.data["tolerance"] == {"rel": 0.03}


def test_issue_cycle_takes_the_fastest_stable_single_result_row():
    s = _session()
    _placed(s, rows.ROWS["ffma"], "sm_90", 126.0)
    _placed(s, rows.ROWS["int.add"], "sm_90", 127.0, unstable=True)   # not counted
    _placed(s, rows.ROWS["fp32.add"], "sm_90", 128.0)
    _placed(s, rows.ROWS["hfma2"], "sm_90", 250.0)                     # 2 results per op
    (f,) = run.launch(s, LaunchCost.ISSUE_CYCLE, "sm_90").figures
    assert f.value == 1.0 and f.key == "throughput.launch.issue_cycle"
    assert f.data == {"fastest_row": "fp32.add", "rate": 128.0, "rows_seen": 2,
                      "tolerance": {"abs": 0.05}}


def test_launch_figure_and_no_figure():
    s = _session()
    key = ("throughput", "launch", "warp", "sm_90")
    s.runs.once(key, lambda: (analysis.Launched(2.0, 0.1, False, "", {
        "skew_cycles": {2: 15.0}, "setup": ["LDC"]}), "sass text"))
    m = run.launch(s, LaunchCost.WARP, "sm_90")
    (f,) = m.figures
    assert (f.key, f.value, f.unit, m.sass) == ("throughput.launch.warp", 2.0, "cycles",
                                                "sass text")
    assert f.data == {"skew_cycles": "{2: 15.0}", "setup": ["LDC"],
                      "tolerance": {"abs": 0.25, "rel": 0.1}}
    assert f.method.startswith("blocks of [2, 4, 8, 16, 32] warps") and "median of 5" in f.method
    s.runs.once(("throughput", "launch", "block", "sm_90"), lambda: (analysis.Launched(
        math.nan, 0.0, True, "blocks of one SM overlapped", {"gap_count": 3}), "sass"))
    with pytest.raises(NoFigure, match="probe invalid: launch/block: blocks of one SM") as e:
        run.launch(s, LaunchCost.BLOCK, "sm_90")
    [r] = e.value.notes
    assert r.status == Status.INVALID and r.key == "throughput.launch.block"
    assert r.data == {"gap_count": "3"}
