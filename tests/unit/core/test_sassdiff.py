"""core.sassdiff and results.jitdiff: the driver's JIT against ptxas, class by class. The rules
on small listings, then the committed JIT snapshots of the sm_90 instruction tables (driver
580.159.04) against the offline ptxas: identical with `ptxas -c`, explained class by class with
the default whole-program ptxas."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuchar.core import sass, sassdiff, toolchain
from pytest_gpuchar.core.build import default_text
from pytest_gpuchar.results import jitdiff
from pytest_gpuchar.topics.instructions import kernels, rows

ROOT = Path(__file__).resolve().parents[3]
JIT = ROOT / "tests/characterisation/__sass__/jit-driver-580.159.04/sm_90/test_table_v_instructions"
START, END = sassdiff.REGION_START, sassdiff.REGION_END


def listing(*body: str, region: tuple[str, ...] = ()) -> str:
    lines = list(body[:1]) + [f"CS2R r9, SR_CLOCKLO    {START}", *region,
                              f"CS2R r10, SR_CLOCKLO    {END}"] + list(body[1:])
    return "\n".join(lines) + "\n"


def test_identical_listings_say_so():
    a = listing("LDC r0, c[0x0][0x28]", "EXIT", region=("IADD3 r1, r2, r3, RZ",))
    c = sassdiff.compare(a, a)
    assert c.identical and c.classes == {} and c.as_dict() == {"identical": True, "classes": {}}


@pytest.mark.parametrize("jit, ptxas, name", [
    ("HFMA2.MMA r3, -RZ, RZ, 0, 0", "IMAD.MOV.U32 r3, RZ, RZ, RZ", "zeroing move"),
    ("HFMA2.MMA r5, -RZ, RZ, 0, 5.9604644775390625e-08", "MOV r5, 0x1", "constant move"),
    ("MOV r5, r1", "IMAD.MOV.U32 r5, RZ, RZ, r1", "register copy"),
    ("IMAD.X r25, r26, 0x1, r22, p1", "IADD3.X r25, r22, r26, RZ, p1, !PT", "integer add"),
    ("IADD3 r8, -r16, RZ, RZ", "IMAD.MOV r8, RZ, RZ, -r16", "integer add"),
    ("@p0 IADD3 r8, r8, 0x20, RZ", "@p0 VIADD r8, r8, 0x20", "integer add"),
    ("IADD3 r8, r5, -0xd000000, RZ", "VIADD r8, r5, 0xf3000000", "integer add"),
    ("ISETP.LT.U32.AND p0, PT, r7.reuse, 0x1, PT", "ISETP.LT.U32.AND p0, PT, r7, 0x1, PT",
     "reuse flags"),
    ("FADD r4, r5, r6", "FMUL r4, r5, r6", "other"),
])
def test_one_rule_explains_one_spelling_each(jit, ptxas, name):
    a = listing("LDC r0, c[0x0][0x28]", "EXIT", region=(jit,))
    b = listing("LDC r0, c[0x0][0x28]", "EXIT", region=(ptxas,))
    c = sassdiff.compare(a, b)
    assert not c.identical and list(c.classes) == [name]
    found = c.classes[name]
    assert found.timed_region and (found.a_lines, found.b_lines) == (1, 1)
    assert found.example == (jit, ptxas)
    assert sassdiff.describe(name)


def test_padding_and_subroutine_linkage_outside_the_region():
    a = listing("LDC r0, c[0x0][0x28]", "@!PT LDS RZ, [RZ]", "EXIT", "BRA `(L1)",
                region=("MOV r23, 32@lo((k + L5@srel))", "MOV r24, 32@hi((k + L5@srel))",
                        "CALL.ABS.NOINC `(__cuda_sm20_div_u16)", "MOV r1, r5"))
    b = listing("LDC r0, c[0x0][0x28]", "EXIT", "I2F.U16 r24, r6", "MUFU.RCP r32, r32",
                "RET.REL.NODEC r22 `(k)", "BRA `(L2)", "NOP",
                region=("MOV r22, 0x3f0", "CALL.REL.NOINC `($__internal_$__cuda_sm20_div_u16)",
                        "IMAD.MOV.U32 r1, RZ, RZ, r24"))
    c = sassdiff.compare(a, b)
    assert set(c.classes) == {"padding", "subroutine call"}
    assert not c.classes["padding"].timed_region and c.classes["subroutine call"].timed_region
    assert c.classes["subroutine call"].example == (
        "CALL.ABS.NOINC `(__cuda_sm20_div_u16)",
        "CALL.REL.NOINC `($__internal_$__cuda_sm20_div_u16)")


def test_order_and_register_allocation_after_the_rules():
    a = listing("LDC r0, c[0x0][0x28]", "EXIT", region=("IADD3 r1, r2, r3, RZ", "FADD r4, r5, r6"))
    order = listing("LDC r0, c[0x0][0x28]", "EXIT",
                    region=("FADD r4, r5, r6", "IADD3 r1, r2, r3, RZ"))
    regs = listing("LDC r0, c[0x0][0x28]", "EXIT",
                   region=("IADD3 r1, r3, r2, RZ", "FADD r4, r6, r5"))
    assert list(sassdiff.compare(a, order).classes) == ["instruction order"]
    assert list(sassdiff.compare(a, regs).classes) == ["register allocation"]


# --- the committed JIT snapshots against the offline ptxas ---------------------------------

PROBES = [("cpi", "add.u16"), ("latency", "add.u16"), ("latency", "add.u64"),
          ("latency", "div.u16")]


@pytest.fixture(scope="module")
def compiled():
    """The probes assembled by the preferred ptxas for sm_90 with -c and without (one module
    each): ptxas 13.0.88 (the driver's CUDA) and 13.5.37 (the static extra) give the JIT's SASS
    of all 197 snapshotted probes with -c, docs/throughput.md."""
    try:
        tool = toolchain.find("ptxas", "sm_90")
        toolchain.find("nvdisasm", "sm_90")
    except toolchain.ToolMissing as e:
        pytest.skip(f"static: {e}")
    probes = [(kernels.cpi_probe if kind == "cpi" else kernels.latency_probe)(
        rows.row(name), "sm_90") for kind, name in PROBES]
    text = default_text("sm_90", probes)
    out = {}
    for mode, t in (("ptxas -c", toolchain.relocatable(tool)), ("ptxas", tool)):
        funcs = sass.parse(toolchain.disassemble(toolchain.assemble(text, "sm_90", tool=t),
                                                 "sm_90"))
        out[mode] = [p.snapshot_text(funcs) for p in probes]
    return tool, out


def jit_snapshot(kind: str, name: str) -> str:
    test = "test_table_v_cycles" if kind == "cpi" else "test_table_v_latency"
    return (JIT / f"{test}[sm_90-{name}].sass").read_text()


def test_the_driver_jit_is_ptxas_dash_c(compiled):
    tool, out = compiled
    for (kind, name), relocatable, whole in zip(PROBES, out["ptxas -c"], out["ptxas"]):
        jit = jit_snapshot(kind, name)
        assert sassdiff.compare(jit, relocatable).identical, (kind, name, tool.version)
        c = sassdiff.compare(jit, whole)
        assert not c.identical and "other" not in c.classes, (kind, name, c.as_dict())
        assert "padding" in c.classes           # @!PT LDS RZ, [RZ] / NOP at the end


def test_the_run_summary_says_what_differs(compiled):
    _, out = compiled
    results = []
    for (kind, name), relocatable, whole in zip(PROBES, out["ptxas -c"], out["ptxas"]):
        jit = jit_snapshot(kind, name)
        results.append({"arch": "sm_90", "key": f"{kind}.{name}", "data": {
            "ptxas": "13.x", "jit_equals_ptxas": jit == relocatable,
            "jit_vs_ptxas": {"ptxas -c": sassdiff.compare(jit, relocatable).as_dict(),
                             "ptxas": sassdiff.compare(jit, whole).as_dict()}}})
    s = jitdiff.summary(results + results[:1])      # a key reported twice counts once
    assert s.compared == 4 and s.identical == {"ptxas": 0, "ptxas -c": 4}
    rows = {row.name: row for row in s.classes["ptxas"]}
    assert rows["zeroing move"].example == ("HFMA2.MMA r3, -RZ, RZ, 0, 0",
                                            "IMAD.MOV.U32 r3, RZ, RZ, RZ")
    assert rows["subroutine call"].probes == 1 and rows["subroutine call"].timed_region == 1
    assert rows["padding"].probes == 4
    assert "4 of 4 identical to ptxas -c" in jitdiff.line(s)
    md = "\n".join(jitdiff.markdown(s))
    assert "## Driver JIT against ptxas" in md and "4 identical to `ptxas -c`" in md
    assert "| zeroing move |" in md and "`HFMA2.MMA r3, -RZ, RZ, 0, 0`" in md
    assert jitdiff.summary([{"arch": "sm_90", "key": "k", "data": {}}]) is None
