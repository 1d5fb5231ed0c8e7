"""An expectation's `literature:`: published figures beside a measurement (validated with
file:line:key errors, carried into the result, shown in the report, kept on regeneration)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_gpuchar.results import expectations as E
from pytest_gpuchar.results.expectations import ExpectationError
from pytest_gpuchar.results.judge import Measurement, judge
from pytest_gpuchar.results.report import Recorder, literature_markdown

HEAD = "schema: 2\narch: sm_90\n"
ENTRY = """\
characteristics:
  latency.add.u32:
    value: 4
    unit: cycles/op
    tolerance: {abs: 0.5}
    source: measured 2026-11-23 on NVIDIA H200
    literature:
      - value: 8
        source: luo24 Fig. 6 p. 9
        method: "paper: the function's latency, SASS not shown"
        device: H800
      - range: [6, 7]
        unit: cycles
        source: other paper Table 3
        method: "paper: a dependent chain of the intrinsic"
        note: read off a plot
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "sm_90.yaml"
    p.write_text(text)
    return p


def error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ExpectationError) as ei:
        E.load_file(write(tmp_path, text))
    return str(ei.value)


def test_literature_loads_with_the_entrys_unit_by_default(tmp_path):
    e = E.load_file(write(tmp_path, HEAD + ENTRY)).get("latency.add.u32")
    first, second = e.literature
    assert (first.value, first.unit, first.device) == (8.0, "cycles/op", "H800")
    assert first.describe() == "8 cycles/op (H800)"
    assert second.range == (6.0, 7.0) and second.unit == "cycles"
    assert second.describe() == "6-7 cycles"
    assert second.as_dict()["note"] == "read off a plot"
    assert e.value == 4.0          # the literature is not the expectation


@pytest.mark.parametrize("edit, where, says", [
    (("        method: \"paper: the function's latency, SASS not shown\"\n", ""),
     "latency.add.u32.literature[0]", "missing 'method'"),
    (("      - value: 8\n", "      - value: 8\n        range: [1, 2]\n"),
     "latency.add.u32.literature[0]", "give one of 'value' or 'range'"),
    (("        device: H800\n", "        board: H800\n"),
     "latency.add.u32.literature[0].board", "unknown field"),
    (("        unit: cycles\n", "        unit: cycles per op\n"),
     "latency.add.u32.literature[1].unit", "unknown unit"),
    (("      - range: [6, 7]\n", "      - range: [7, 6]\n"),
     "latency.add.u32.literature[1].range", "low 7 > high 6"),
    (("      - value: 8\n", "      - value: eight\n"),
     "latency.add.u32.literature[0].value", "expected a finite number"),
])
def test_a_bad_item_is_named_with_its_file_line_and_field(tmp_path, edit, where, says):
    text = HEAD + ENTRY.replace(*edit)
    msg = error(tmp_path, text)
    assert f": {where}: " in msg and says in msg
    assert msg.startswith(f"{tmp_path / 'sm_90.yaml'}:")
    line = int(msg.split(":")[1])
    assert 8 <= line <= len(text.splitlines())       # the item's line, not the file's top


def test_literature_must_be_a_non_empty_list(tmp_path):
    msg = error(tmp_path, HEAD + ENTRY.split("    literature:")[0] + "    literature: {}\n")
    assert "latency.add.u32.literature: expected a non-empty list" in msg


def test_the_result_carries_it_and_the_report_shows_it_beside_the_measurement(tmp_path):
    exp = E.load_file(write(tmp_path, HEAD + ENTRY)).get("latency.add.u32")
    r = judge(Measurement("latency.add.u32", 4.0, "cycles/op", 0.0), "sm_90", exp)
    assert r.status == "pass"                              # judged against value: 4 only
    assert [lit["figure"] for lit in r.literature] == ["8 cycles/op (H800)", "6-7 cycles"]
    assert r.as_dict()["literature"][0]["source"] == "luo24 Fig. 6 p. 9"
    rec = Recorder()
    rec.add(r)
    md = rec.markdown()
    assert "## Beside the literature" in md
    row = next(line for line in md.splitlines() if "8 cycles/op (H800)" in line)
    assert "| 4 cycles/op | pass |" in row and "luo24 Fig. 6 p. 9" in row
    assert "SASS not shown" in row
    assert literature_markdown([]) == []


def test_regenerating_the_entry_from_a_run_keeps_its_literature(tmp_path):
    path = write(tmp_path, HEAD + ENTRY)
    E.update_from_results(path, [{
        "key": "latency.add.u32", "arch": "sm_90", "status": "pass", "value": 4.02,
        "unit": "cycles/op", "method": "slope", "provenance": {"date": "2026-12-01",
                                                               "device": "NVIDIA H100"}}])
    e = E.load_file(path).get("latency.add.u32")
    assert e.value == 4.02
    assert [lit.describe() for lit in e.literature] == ["8 cycles/op (H800)", "6-7 cycles"]
    assert yaml.safe_load(path.read_text())["characteristics"]["latency.add.u32"][
        "literature"][0]["source"] == "luo24 Fig. 6 p. 9"


def test_the_dpx_and_wgmma_entries_cite_the_papers_figures():
    """Issue 33 items 3 and 4: Luo et al.'s DPX latencies beside the suite's, and the papers'
    wgmma 'latencies' beside the issue interval (cycles_per_wgmma), not the completion."""
    exp = E.load("sm_90", E.PACKAGE_ROOT)
    lit = {k: [(x.value, x.device) for x in e.literature]
           for k, e in exp.characteristics.items() if e.literature}
    assert lit["dpx.latency.vimax3_s32"] == [(8.0, "H800")]
    assert lit["dpx.latency.viaddmax_s32"] == [(10.0, "H800")]
    assert lit["tensor.wgmma.f16.f32.m64n256k16.ss.cycles_per_wgmma"] == [
        (128.0, "H800"), (128.0, "H200")]
    assert not [k for k in lit if k.endswith("completion_latency")]
