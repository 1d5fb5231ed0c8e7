"""The DPX probes' PTX: the chain layout the CPU reference replays, what is stored, the loop
kernel, the probe sets per arch (no compiler run)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.core.verify import ProbeInvalid
from pytest_gpuchar.topics.dpx import kernels, rows, run


def test_chain_layout_gives_every_op_its_own_sources():
    layout = kernels.chain_layout(rows.row("vimax3_s32"), 4)
    assert layout[0] == {"a": 0, "b": 1, "c": 2}
    assert layout[3] == {"a": -1, "b": 7, "c": 8}
    slots = [s for op in layout for f, s in op.items() if f != "a"]
    assert len(slots) == len(set(slots)) == 8


def test_what_a_chain_stores():
    r = rows.row("vibmax_s16x2")
    assert kernels.stored(r, "sm_90", 2) == [(0, "e"), (0, "f"), (1, "d"), (1, "e"), (1, "f")]
    assert kernels.stored(r, "sm_80", 2)[:3] == [(0, "d"), (0, "e"), (0, "f")]
    relu = rows.row("vimax_s32_relu")
    assert kernels.stored(relu, "sm_90", 3) == [(0, "d"), (1, "d"), (2, "d")]
    assert kernels.stored(rows.row("vimax3_s32"), "sm_90", 3) == [(2, "d")]


def test_latency_probe_per_arch():
    r = rows.row("viaddmax_s32")
    p90 = kernels.latency_probe(r, "sm_90")
    assert p90.unit == ("VIADDMNMX",) and sorted(p90.entries) == list(kernels.LENGTHS)
    assert "add.s32 t1" in p90.kernels and p90.chained and p90.row is r
    p80 = kernels.latency_probe(r, "sm_80")
    assert p80.unit is None and "add.s32 t0" in p80.kernels
    n = max(p80.entries)
    assert len(p80.inputs[n]) == 1 + 2 * n
    assert p80.out_slots[n] == 1 + n + len(p80.inputs[n])
    sel = kernels.latency_probe(rows.row("vibmin_u32"), "sm_90")
    assert sel.unit is None and sel.signature == ("SEL",)
    with pytest.raises(NotApplicable):
        kernels.latency_probe(r, "sm_70")


def test_loop_probe():
    r = rows.row("vimax3_u16x2")
    p = kernels.loop_probe(r, "sm_90")
    n = kernels.CHAINS * kernels.UNROLL
    assert p.ops == {n: n} and p.unit == ("VIMNMX3.U16x2",) and not p.guarded
    assert p.kernels.count("max.u16x2 t1") == n and '.pragma "nounroll";' in p.kernels
    assert ".minnctapersm 4" in p.kernels and p.out_slots[n] == kernels.CHAINS
    assert len(p.inputs[n]) == kernels.CHAINS + 2
    with pytest.raises(NotApplicable, match="sm_90"):
        kernels.loop_probe(r, "sm_89")
    with pytest.raises(NotApplicable, match="predicate"):
        kernels.loop_probe(rows.row("vibmax_u32"), "sm_90")


def test_mapping_probes_and_groups():
    r = rows.row("viaddmin_u16x2")
    assert [p.name for p in kernels.mapping_probes(r, "sm_90")] == \
        ["dpx/latency/viaddmin_u16x2", "dpx/throughput/viaddmin_u16x2"]
    assert [p.name for p in kernels.mapping_probes(r, "sm_86")] == ["dpx/latency/viaddmin_u16x2"]
    assert run.groups("sm_75") == []
    (g,), = [run.groups("sm_90")]
    assert g.name == "dpx" and g.split and len(g.probes) == 36 + sum(r.loop for r in rows.ROWS)
    assert all(text.startswith(".version 8.0\n.target sm_90") for _, text, _ in g.parts())


def _instr(op, *ops):
    return sass.Instr(0, "", op, ops, f"{op} {', '.join(ops)}")


def test_fixed_moves_are_allowed_growing_moves_are_not():
    p = kernels.latency_probe(rows.row("vimax3_s16x2"), "sm_90")
    unit = "VIMNMX3.S16x2"
    mv = _instr("IMAD.MOV.U32", "R1", "RZ", "RZ", "R2")

    def chain(n):   # each op reads the previous result
        return [_instr(unit, f"R{k + 10}", f"R{k + 9}", "R3", "R4") for k in range(n)]
    fixed = {n: chain(n) + [mv] for n in p.entries}
    v = p.verify_regions(fixed, {})
    assert v.ok and "fixed register moves" in v.message and v.base == {"IMAD.MOV.U32": 1}
    growing = {n: chain(n) + [mv] * (n // 8) for n in p.entries}
    with pytest.raises(ProbeInvalid, match="unexpected instructions"):
        p.verify_regions(growing, {})


def test_check_mapping():
    r = rows.row("vimax3_s32")
    from pytest_gpuchar.core.verify import Verdict
    exact = Verdict(True, {"VIMNMX3": 1.0}, message="exact")
    assert kernels.check_mapping(r, "sm_90", [exact]) == []
    assert kernels.check_mapping(r, "sm_80", [Verdict(True, {"IMNMX": 2.0})]) == []
    bad = kernels.check_mapping(r, "sm_80", [Verdict(True, {"VIMNMX3": 1.0})])
    assert bad and "emulated" in bad[0]
    assert kernels.check_mapping(r, "sm_90", [Verdict(True, {"IMNMX": 2.0}, message="sequence")])
