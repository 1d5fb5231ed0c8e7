"""Probe construction and the guard every timed region opens with (no GPU needed)."""
from __future__ import annotations

import pytest

from pytest_gpuchar import catalog, probes, sass, toolchain


def ins(text: str, off: int = 0) -> sass.Instr:
    return sass.parse_instr(off, text)


BODY = [ins("IADD3 R4, R4, R5, RZ"), ins("IADD3 R4, R4, R5, RZ")]


@pytest.mark.parametrize("guard", [
    [ins("ISETP.EQ.U32.AND P0, PT, R2, -0x1, PT"),
     ins("ISETP.EQ.U32.AND.EX P0, PT, R3, -0x1, PT, P0"), ins("@P0 BRA `(.L_x_1)")],
    [ins("IADD32I RZ.CC, R12, 0x1"), ins("ISETP.NE.U32.X.AND P0, PT, R14, -0x1, PT"),
     ins("@!P0 BRA `(.L_x_1)")],
], ids=["volta+", "maxwell-pascal"])
def test_guard_is_stripped(guard):
    assert probes.strip_guard("p", guard + BODY) == BODY


def test_if_converted_guard_keeps_the_predicated_body():
    body = [ins("@P0 IADD3 R4, R4, R5, RZ"), ins("@P0 IADD3 R4, R4, R5, RZ")]
    region = [ins("ISETP.NE.U32.AND P0, PT, R2, -0x1, PT")] + body
    assert probes.strip_guard("p", region) == body


def test_region_without_the_guard_is_a_restructured_probe():
    with pytest.raises(sass.RegionError, match="restructured"):
        probes.strip_guard("latency/x", BODY)


def test_a_mixed_predicated_body_is_not_an_if_converted_guard():
    region = [ins("@P0 IADD3 R4, R4, R5, RZ"), ins("IADD3 R4, R4, R5, RZ")]
    with pytest.raises(sass.RegionError):
        probes.strip_guard("latency/x", region)


def test_every_probe_of_an_arch_has_unique_kernel_names():
    names = [e for p in catalog.suite_probes("sm_90") for e in p.entries.values()]
    assert len(names) == len(set(names))


def test_batch_gives_the_same_sass_as_assembling_alone():
    try:
        toolchain.find("ptxas", "sm_80")
        toolchain.find("nvdisasm", "sm_80")
    except toolchain.ToolMissing as e:
        pytest.skip(str(e))
    row = catalog.row("add.u32")
    alone = probes.build_static(probes.latency_probe(row, "sm_80"))
    p2 = probes.latency_probe(catalog.row("fma.rn.f32"), "sm_80")
    probes.batch("sm_80", [probes.latency_probe(row, "sm_80"), p2])
    batched = probes.build_static(probes.latency_probe(row, "sm_80"))
    assert batched.snapshot_text() == alone.snapshot_text()
    assert probes.build_static(p2).verdict.ok


def test_batch_in_parallel_parts_gives_the_same_sass(monkeypatch):
    """A batch split into parts (one ptxas + nvdisasm process each, in parallel) remembers
    every probe with the SASS it has when assembled alone."""
    try:
        toolchain.find("ptxas", "sm_86")
        toolchain.find("nvdisasm", "sm_86")
    except toolchain.ToolMissing as e:
        pytest.skip(str(e))
    from pytest_gpuchar import jit
    monkeypatch.setattr(jit, "chunk_count", lambda: 3)
    rows = ["add.u32", "fma.rn.f32", "mul.lo.u32", "add.f32", "mad.lo.u32"]
    ps = [probes.latency_probe(catalog.row(r), "sm_86") for r in rows]
    monkeypatch.setattr(probes, "_BATCH_FUNCS", {})
    probes.batch("sm_86", ps)
    assert len(probes._BATCH_FUNCS) == len(ps)
    alone = {p.name: functions for p in ps
             for functions in [probes.functions_of(toolchain.assemble(p.ptx, "sm_86"), "sm_86")]}
    for p in ps:
        batched = probes.build_static(p)
        assert batched.snapshot_text() == probes.Static(
            p, batched.compiler, alone[p.name], *probes.check(p, alone[p.name])).snapshot_text()


def test_chunks_deal_round_robin_and_never_empty():
    from pytest_gpuchar import jit
    assert jit.chunks(list(range(7)), 3) == [[0, 3, 6], [1, 4], [2, 5]]
    assert jit.chunks([1, 2], 8) == [[1], [2]]
    assert jit.chunks([1, 2, 3], 1) == [[1, 2, 3]]
    assert 1 <= jit.chunk_count() <= 8
