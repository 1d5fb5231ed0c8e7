"""The DPX rows: the PTX per arch (CUDA's header on sm_90, nvcc's emulation before), the SASS
unit claimed on sm_90, which rows have a throughput loop."""
from __future__ import annotations

import re

import pytest

from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.topics.dpx import rows
from pytest_gpuchar.topics.dpx.emulation import EMULATED

FIELDS = re.compile(r"\{(\w+)\}")


def test_the_issue_families_are_rows():
    names = {r.name for r in rows.ROWS}
    for need in ("vimax3_s32", "vimin3_u16x2", "viaddmax_s16x2", "vibmax_s32", "vibmax_u16x2",
                 "vimax3_s16x2_relu", "viaddmin_s32_relu"):
        assert need in names
    assert len(names) == len(rows.ROWS) == len(EMULATED) == 36


@pytest.mark.parametrize("row", rows.ROWS, ids=lambda r: r.name)
def test_templates_use_the_rows_fields(row):
    want = set(row.sources) | set(row.outputs)
    assert set(FIELDS.findall(row.hardware)) == want
    assert set(FIELDS.findall(row.emulated)) == want


def test_hardware_ptx_is_the_headers():
    assert rows.row("vimax3_s32").hardware == \
        "{ .reg .s32 t1; max.s32 t1, {a}, {b}; max.s32 {d}, t1, {c}; }"
    assert rows.row("viaddmin_s16x2_relu").hardware == \
        "{ .reg .b32 t1; add.s16x2 t1, {a}, {b}; min.s16x2.relu {d}, t1, {c}; }"
    assert "setp.ge.s32 __$temp1" in rows.row("vibmax_s32").hardware


def test_ptx_per_arch():
    r = rows.row("vimax3_s16x2")
    assert r.ptx_at("sm_90") == r.hardware and "max.s16x2" in r.hardware
    assert r.ptx_at("sm_86") == r.emulated and "s16x2" not in r.emulated
    with pytest.raises(NotApplicable, match="from sm_80"):
        r.ptx_at("sm_75")
    assert r.unit_at("sm_90") == ("VIMNMX3.S16x2",) and r.unit_at("sm_89") is None


def test_units_and_loops():
    assert rows.row("viaddmax_u32").unit == ("VIADDMNMX.U32",)
    assert rows.row("vimin3_s32_relu").unit == ("VIMNMX3.RELU",)
    assert rows.row("vibmax_s32").unit is None and not rows.row("vibmax_s32").loop
    assert rows.row("vimax_s32_relu").unit == ("VIMNMX.RELU",)
    assert not rows.row("vimax_s32_relu").loop and "folds" in rows.row("vimax_s32_relu").why_no_loop
    assert rows.row("vimax3_u16x2").loop
    assert rows.row("vibmax_s16x2").outputs == ("d", "e", "f")
    assert rows.row("vimax_s16x2_relu").sources == ("a", "b")
    assert rows.row("vibmax_s32").is_hardware("sm_90") is False
    assert rows.row("vimax3_s32").is_hardware("sm_90")
