"""The kernels on the frame: the report's PTX verbatim between the clock reads (with its three
misprints corrected), the stamps after, and the verification of a whole-kernel region."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.verify import ProbeInvalid
from pytest_gpuchar.topics.bsp import bodies, kernels, ptxparse
from pytest_gpuchar.topics.bsp.rows import App


@pytest.mark.parametrize("app, n, shared", [(App.HOTSPOT, 196, 3072), (App.KNN, 28, 0),
                                            (App.MM, 155, 8192)])
def test_bodies_are_the_reports_listings(app, n, shared):
    body = kernels.parsed(app)
    assert len(body) == n and kernels.shared_bytes(app) == shared
    text = kernels.kernel(app).render()
    t0, t1 = text.index("mov.u64 %t0, %clock64;"), text.index("mov.u64 %t1, %clock64;")
    inner = text[t0:t1]
    assert all(i.text in inner for i in body.instrs)
    assert "st.global.u64" not in inner and text.count("st.global.u64") == kernels.STAMP_STORES
    assert f".param .u64 {kernels.entry_name(app)}_rec" in text


def test_corrections_of_the_listing_are_applied():
    for kernel, row, printed, written, _ in bodies.CORRECTIONS:
        body = kernels.parsed(App(kernel))
        assert body[row].text == written and printed not in {i.text for i in body.instrs}


def test_ptx_parse():
    i = ptxparse.parse_instr(7, "@!%p7 bra BB0_2;")
    assert (i.guard, i.target, i.srcs, i.dests, i.is_branch) == ("%p7", "BB0_2", ("%p7",), (),
                                                                  True)
    st = ptxparse.parse_instr(1, "st.global.f32 [%rd6], %f9;")
    assert (st.space, st.dests, st.srcs, st.address()) == ("global", (), ("%rd6", "%f9"),
                                                           ("%rd6", 0))
    ld = ptxparse.parse_instr(1, "ld.global.f32 %f5, [%rd8+4];")
    assert (ld.dests, ld.srcs, ld.address(), ld.ptype) == (("%f5",), ("%rd8",), ("%rd8", 4),
                                                           "f32")
    assert ptxparse.register_decls(["add.s64 %rd9, %rd1, %rd2;", "setp.eq.s16 %p3, %rs2, 0;"]) \
        == [".reg .pred %p<4>;", ".reg .b64 %rd<10>;", ".reg .b16 %rs<3>;"]


def test_intended_sass_from_the_ptx():
    assert kernels.intended(kernels.parsed(App.MM)) == {
        "LDG*": (8, kernels.Match.BYTES), "STG*": (4, kernels.Match.BYTES),
        "LDS*": (256, kernels.Match.BYTES), "STS*": (8, kernels.Match.BYTES),
        "BAR.SYNC*": (2, kernels.Match.EXACT), "FFMA*": (32, kernels.Match.AT_LEAST)}
    assert [kernels.sass_bytes(op) for op in ("LDS.128", "LDG.E.64", "LDS", "STG.E.U8")] == \
        [16, 8, 4, 1]


def listing(lines: list[str]) -> sass.Function:
    text = "//--------------------- .text.k --------------------------\n" + "\n".join(
        f"        /*{16 * k:04x}*/ {line} ;" for k, line in enumerate(lines))
    return sass.parse(text)["k"]


KNN_BODY = ["LDG.E R7, desc[UR0][R5.64+0x4]", "LDG.E R3, desc[UR0][R5.64]", "FFMA R3, R3, R3, R8",
            "FFMA R3, R3, R3, R8", "FFMA R3, R3, R3, R8", "STG.E desc[UR0][R5.64], R9"]
STAMPS = ["@!P0 STG.E.64 desc[UR0][R7.64], R2"] * 5


def test_verify_kernel_accepts_the_kernel_and_names_what_is_off():
    body = kernels.parsed(App.KNN)
    ok = listing(["CS2R R2, SR_CLOCKLO", *KNN_BODY, "CS2R R6, SR_CLOCKLO", *STAMPS, "EXIT"])
    v = kernels.verify_kernel("bsp/knn", body, ok)
    assert v.counts == {"LDG*": 8, "STG*": 4, "FFMA*": 3} and v.instructions == 6
    hoisted = listing([KNN_BODY[0], "CS2R R2, SR_CLOCKLO", *KNN_BODY[1:], "CS2R R6, SR_CLOCKLO",
                       *STAMPS, "EXIT"])
    with pytest.raises(ProbeInvalid, match="outside the timed region"):
        kernels.verify_kernel("bsp/knn", body, hoisted)
    short = listing(["CS2R R2, SR_CLOCKLO", *KNN_BODY[2:], "CS2R R6, SR_CLOCKLO", *STAMPS])
    with pytest.raises(ProbeInvalid, match="LDG"):
        kernels.verify_kernel("bsp/knn", body, short)
    with pytest.raises(ProbeInvalid, match="two clock reads"):
        kernels.verify_kernel("bsp/knn", body, listing(KNN_BODY))


def test_verify_kernel_counts_loops():
    body = kernels.parsed(App.MM)
    lines = ["CS2R R2, SR_CLOCKLO", "LDG.E R8, desc[UR10][R8.64]", "LDG.E R11, desc[UR10][R10.64]",
             "STS [R5], R8", "STS [R4], R11", "BAR.SYNC.DEFER_BLOCKING 0x0",
             *["LDS.128 R12, [R6]"] * 8, *["LDS R26, [R3]"] * 32, *["FFMA R8, R9, R12, R8"] * 32,
             "BAR.SYNC.DEFER_BLOCKING 0x0", "STG.E desc[UR10][R2.64], R17",
             "CS2R R6, SR_CLOCKLO", *STAMPS]
    with pytest.raises(ProbeInvalid, match="0 loops in the region, the PTX has 1"):
        kernels.verify_kernel("bsp/mm", body, listing(lines))
