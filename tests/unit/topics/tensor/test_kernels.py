"""The tensor probes' PTX on the shared kernel frame (CPU only, no ptxas)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.tensor.mma import kernels, rows
from pytest_gpuchar.topics.tensor.mma.probes import LdmatrixProbe, TensorProbe, WgmmaProbe


def test_sweep_probe_shape():
    p = kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_80", 3)
    assert sorted(p.entries) == [rows.STEPS] and p.ops == {rows.STEPS: 3 * rows.STEPS}
    assert p.intent(rows.STEPS).count == 3 * rows.STEPS and not p.guarded   # 1 HMMA per op
    # A (4) + B (2) shared, one 4-register accumulator per chain
    assert len(p.slots) == 4 + 2 + 3 * 4
    assert p.kernels.count("mma.sync.aligned.m16n8k16") == 3 * rows.STEPS


def test_probe_types_follow_the_row():
    assert type(kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_80", 1)) \
        is TensorProbe
    ldm = kernels.sweep_probe(rows.row("ldmatrix", "x4"), "sm_80", 2)
    assert isinstance(ldm, LdmatrixProbe) and ldm.smem_words == 256 and not ldm.slots
    wg = kernels.wgmma_probe(rows.wgmma_row("f16.f32.m64n128k16.rs"), 2)
    assert isinstance(wg, WgmmaProbe) and wg.arch == "sm_90a" and wg.key == ("wgmma", wg.row.name)
    assert sorted(wg.entries) == [rows.WGMMA_STEPS] and wg.ops == {rows.WGMMA_STEPS: 8}
    one = kernels.wgmma_probe(rows.wgmma_row("f16.f32.m64n128k16.rs"), 1)
    assert one.ops == {kernels.LATENCY: 1, rows.WGMMA_STEPS: rows.WGMMA_STEPS}


def test_timed_kernel_is_a_counted_loop_on_the_shared_frame():
    """The checksum store, membar + bar.sync, the first clock read, the loop (not unrolled,
    counting the trip-count parameter down to zero), the second read, then the stores; no
    guard and no pass loop."""
    text = kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_80", 1).kernels
    k = text.split(".visible .entry")[1]
    order = ["ld.param.u32 %trips, [trips_param];", "st.global.b32 [%scratch], %ck32;",
             "membar.cta;", "bar.sync 0;", "mov.u64 %t0, %clock64;", "mov.u32 %trip, %trips;",
             "$TC_LOOP:", '.pragma "nounroll";', "mma.sync", "sub.u32 %trip, %trip, 1;",
             "setp.ne.u32 %again, %trip, 0;", "@%again bra $TC_LOOP;", "mov.u64 %t1, %clock64;",
             "st.global.b64 [%out], %t0;", "st.global.b64 [%out+8], %t1;"]
    at = [k.index(line) for line in order]
    assert at == sorted(at)
    assert "%never" not in k and "$PASS" not in k and "$BODY_END" not in k
    assert ".param .u32 trips_param" in text


def test_wgmma_loops_fence_commit_and_wait_per_trip():
    """Throughput loop: fence, steps wgmma, commit, wait_group 1 per trip and wait_group 0
    after the loop (before the clock read); latency loop: one wgmma and wait_group 0."""
    p = kernels.wgmma_probe(rows.wgmma_row("f16.f32.m64n128k16.ss"), 1)
    lat, thr = (p.kernels.split(".visible .entry")[1:])
    assert p.entries[kernels.LATENCY] in lat and p.entries[p.steps] in thr
    loop = thr[thr.index("$TC_LOOP:"):thr.index("@%again bra $TC_LOOP;")]
    assert loop.count("wgmma.mma_async") == rows.WGMMA_STEPS
    assert loop.count("wgmma.fence") == 1 and "wgmma.wait_group.sync.aligned 1;" in loop
    tail = thr[thr.index("@%again bra $TC_LOOP;"):]
    assert tail.index("wgmma.wait_group.sync.aligned 0;") < tail.index("mov.u64 %t1, %clock64;")
    loop = lat[lat.index("$TC_LOOP:"):lat.index("@%again bra $TC_LOOP;")]
    assert loop.count("wgmma.mma_async") == 1 and "wgmma.wait_group.sync.aligned 0;" in loop
    assert lat.count("wgmma.wait_group") == 1


def test_sparse_probe_loads_metadata_and_emulated_probe_names():
    p = kernels.sweep_probe(rows.row("mma.sp", "f16.f32.m16n8k32"), "sm_80", 1)
    assert [s.kind for s in p.slots].count("meta.f16") == 1 and ", 0x0;" in p.kernels
    em = dict((p.name, how) for how, p in kernels.emulated_probes("sm_90"))
    assert em == {"emulated/mma/f16.f32.m8n8k4": rows.Emulation.FPU,
                  "emulated/mma/e4m3.f32.m16n8k32": rows.Emulation.FP8_CONVERT,
                  "emulated/wmma/u4.s32.m8n8k32": rows.Emulation.INT4_CALL}


def test_module_text_takes_the_highest_isa_and_the_wgmma_target():
    fp8 = kernels.sweep_probe(rows.row("mma", "e4m3.f32.m16n8k32"), "sm_89", 1)
    mma = kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_89", 1)
    assert kernels.module_text("sm_89", [mma, fp8]).startswith(
        ".version 8.4\n.target sm_89\n.address_size 64\n\n")
    assert kernels.module_text("sm_89", []) == ".version 7.8\n.target sm_89\n.address_size 64\n\n"
    wg = kernels.wgmma_static("sm_90")
    assert kernels.module_text("sm_90", wg).startswith(".version 8.0\n.target sm_90a\n")
    assert kernels.wgmma_static("sm_89") == []
    nv = kernels.sweep_probe(rows.row("mma", "mxf4nvf4.4x.e2m1.m16n8k64"), "sm_120", 1)
    assert nv.arch == "sm_120a"
    assert kernels.module_text("sm_120", [mma_120 := kernels.sweep_probe(
        rows.row("mma", "f16.f32.m16n8k16"), "sm_120", 1), nv]).startswith(
        ".version 8.7\n.target sm_120a\n")
    assert kernels.module_text("sm_120", [mma_120]).startswith(".version 8.7\n.target sm_120\n")


def test_static_probes_skip_with_a_reason():
    ps, skipped = kernels.static_probes("sm_90")
    blackwell = {f"mma/{r.name}": r.supported("sm_90") for r in rows.MMA
                 if r.table == "blackwell"}
    assert len(blackwell) == 4 and all("needs sm_120+" in w for w in blackwell.values())
    assert skipped == {"mma/e4m3.f32.m16n8k32": rows.row("mma", "e4m3.f32.m16n8k32")
                       .supported("sm_90"),
                       "wmma/u4.s32.m8n8k32": rows.row("wmma", "u4.s32.m8n8k32")
                       .supported("sm_90"), **blackwell}
    assert all(p.ilp == 1 for p in ps)
    with pytest.raises(kernels.Unsupported, match="^static: "):
        kernels.static_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_61")
    with pytest.raises(kernels.Unsupported, match="wgmma needs sm_90a"):
        kernels.static_wgmma_probe(rows.WGMMA[0], "sm_80")


def test_movm_kernels_are_untimed():
    text = kernels.movm_module("sm_80")
    assert text.count(".visible .entry movm_") == 8 and "%clock" not in text
    assert "$TC_LOOP" not in text
    assert kernels.movm_entry("col.row", "f32.f32") in text
