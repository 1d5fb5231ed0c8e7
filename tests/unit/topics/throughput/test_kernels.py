"""throughput: the kernels on the shared frame, the probe builders and the topic's module."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.topics.throughput import kernels, rows, run
from pytest_gpuchar.topics.throughput.kernels import EntryStampProbe, ThroughputProbe
from pytest_gpuchar.topics.throughput.rows import LaunchCost


def test_kernel_ptx_shape():
    p = kernels.probe("dfma", "sm_90")
    assert '.pragma "nounroll";' in p.ptx
    assert p.ptx.count("fma.rn.f64") == kernels.CHAINS * kernels.UNROLL
    assert ".maxntid 256, 1, 1" in p.ptx and f".minnctapersm {kernels.BLOCKS_PER_SM}" in p.ptx
    assert "%smid" in p.ptx and "%clock64" in p.ptx
    # every chain's result is stored after the loop
    assert p.ptx.count("st.global.b64 [%res+") == kernels.CHAINS


def test_the_loop_lies_between_the_clock_reads():
    text = kernels.probe("ffma", "sm_90").kernels
    t0, t1 = text.index("mov.u64 %t0, %clock64;"), text.index("mov.u64 %t1, %clock64;")
    assert t0 < text.index("$TP_LOOP:") < text.index("@%again bra $TP_LOOP;") < t1
    assert "%never" not in text        # no guard: the loop is the whole timed region


def test_probe_fields():
    p = kernels.probe("hfma2", "sm_90")
    assert isinstance(p, ThroughputProbe) and p.name == "throughput/hfma2"
    assert p.entry == "tp_hfma2" and p.ops_per_iter == kernels.CHAINS * kernels.UNROLL
    assert p.results_per_iter() == 2 * p.ops_per_iter
    assert p.unit == ("HFMA2|HFMA2.MMA",) and not p.guarded
    # two source registers per op: the chain values and one shared b
    assert p.result_slots == kernels.CHAINS and len(p.slots) == kernels.CHAINS + 1
    assert "fma.rn.f16x2 %r0, %r0, %r1, %r0;" in p.kernels
    audit = kernels.probe("hfma2.three_registers", "sm_90")
    assert len(audit.slots) == kernels.CHAINS + 2 and audit.entry == "tp_hfma2_three_registers"


def test_lds_row_declares_its_shared_array_before_the_entry():
    text = kernels.probe("ldst.lds", "sm_90").kernels
    assert text.startswith(".shared .align 4 .b32 tp_lds[256];\n.visible .entry tp_ldst_lds(")


def test_row_probe_skips_rows_the_arch_lacks():
    with pytest.raises(NotApplicable, match="static: hfma2 needs sm_53"):
        kernels.row_probe(rows.ROWS["hfma2"], "sm_50")
    with pytest.raises(NotApplicable, match="hardware: "):
        kernels.row_probe(rows.ROWS["hfma2"], "sm_50", "hardware")
    assert kernels.row_probe(rows.ROWS["hfma2"], "sm_53").entry == "tp_hfma2"


def test_bar_probe_has_one_kernel_per_block_size():
    a, b = kernels.bar_probe("sm_90", 256), kernels.bar_probe("sm_90", 1024)
    assert a.entry != b.entry and ".maxntid 1024, 1, 1" in b.ptx
    assert a.ptx.count("bar.sync 0;") == kernels.BAR_UNROLL
    assert a.ops_per_iter == kernels.BAR_UNROLL and a.name == "throughput/bar.sync"


def test_launch_probes():
    warp, block = (kernels.launch_probe(k, "sm_90") for k in (LaunchCost.WARP, LaunchCost.BLOCK))
    assert isinstance(warp, EntryStampProbe) and warp.entries == {0: kernels.WARP_ENTRY}
    assert "mov.u64 %t1, %t0;" in warp.kernels          # entry stamp only
    assert block.kernels.count("%clock64;") == 2          # entry and exit stamps
    assert kernels.launch_probe(LaunchCost.ISSUE_CYCLE, "sm_90").entry == "tp_ffma"
    assert run.launch_snapshot(LaunchCost.ISSUE_CYCLE) is None
    assert run.launch_snapshot(LaunchCost.WARP) is run.snapshot


def test_topic_module_holds_every_kernel():
    (group,) = run.groups("sm_90")
    (part, text, name), = group.parts()
    assert group.name == "throughput" and name == "gpuchar_throughput.ptx"
    for p in kernels.suite_probes("sm_90"):
        assert f".entry {p.entry}(" in text
    assert kernels.WARP_ENTRY in text and kernels.BLOCK_ENTRY in text
    assert text.startswith(".version 8.0\n.target sm_90\n")
    assert len(part) == len(rows.ROWS) + len(rows.BAR_THREADS) + 2


def test_suite_leaves_out_rows_the_arch_lacks():
    names = {p.row.name for p in kernels.suite_probes("sm_50")}
    assert "hfma2" not in names and "hfma2.three_registers" not in names
    assert len(names) == len(rows.ROWS) - 2
