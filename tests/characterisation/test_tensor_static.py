"""Tensor cores, static (offline ptxas, every arch, no GPU): the SASS each wmma / mma.sync /
mma.sp / ldmatrix / wgmma probe becomes, verified and snapshotted; the MOVM transposes that
row/col layouts add (003 section IV-C); the instructions that are no tensor-core instruction on
an arch (mma.m8n8k4 f16 on Ampere and later, 004; FP8 mma.sync and u4 wmma on Hopper).

All of an arch's tensor probes are assembled in one ptxas run (one more for sm_90a), cached
for the session; each test only verifies and snapshots."""
from __future__ import annotations

import pytest

from pytest_gpuchar import archs, sass, tensor, toolchain
from pytest_gpuchar.verify import ProbeInvalid

_CACHE: dict = {}


def _compiled(arch: str, key: str, text_fn):
    """{kernel: Function} of one module, assembled once per session."""
    k = (arch, key)
    if k not in _CACHE:
        text, target = text_fn()
        try:
            _CACHE[k] = sass.parse(toolchain.disassemble(toolchain.assemble(text, target),
                                                         target))
        except toolchain.AssemblyError as e:
            _CACHE[k] = e
    got = _CACHE[k]
    if isinstance(got, Exception):
        raise got
    return got


def _probes(arch: str):
    return tensor.static_probes(arch)[0]


def _functions(arch: str):
    return _compiled(arch, "probes", lambda: (tensor.module(arch, _probes(arch)), arch))


def _check_row(arch, kind, r, sass_snapshot):
    why = r.supported(arch)
    if why:
        pytest.skip(f"static: {why}")
    p = tensor.sweep_probe(r, arch, 1)
    try:
        regions, verdict = tensor.verify_probe(p, _functions(arch))
    except (ProbeInvalid, sass.RegionError) as e:
        pytest.fail(str(e))
    glob, per = r.sass_for(arch)
    tc = tensor.tensor_opcodes(regions[min(regions)])
    tool = toolchain.find("ptxas", arch)
    text = (f"// {p.name} ({arch}, {tool.name} {tool.version}): {per} x {glob} per op\n"
            + sass.normalise(_functions(arch)[p.entries[min(p.entries)]]))
    assert text == sass_snapshot(toolchain.compiler_tag(tool))
    return tc, per, glob


ROWS_WMMA = [pytest.param(r, id=r.name) for r in tensor.WMMA]
ROWS_MMA = [pytest.param(r, id=r.name) for r in tensor.MMA]
ROWS_SP = [pytest.param(r, id=r.name) for r in tensor.MMA_SP]
ROWS_LDM = [pytest.param(r, id=r.name) for r in tensor.LDMATRIX]

# 003 Table III as printed (A100, sm_80): SASS per wmma of each type
PAPER_TABLE_III = {"f16.f16": (2, "HMMA.16816.F16"), "f16.f32": (2, "HMMA.16816.F32"),
                   "bf16.f32": (2, "HMMA.16816.F32.BF16"), "tf32.f32": (4, "HMMA.1684.F32.TF32"),
                   "f64.f64": (1, "DMMA.884"), "u8.s32": (2, "IMMA.16816.U8.U8"),
                   "u4.s32": (1, "IMMA.8832.U4.U4")}


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS_WMMA)
def test_table_iii_wmma_sass(arch, row, offline_tools, sass_snapshot):
    """003 Table III: each wmma type/shape becomes N x its SASS (on sm_80: the paper's)."""
    tc, per, glob = _check_row(arch, "wmma", row, sass_snapshot)
    if arch == "sm_80":
        types = ".".join(row.name.split(".")[:2])
        assert (per, glob) == PAPER_TABLE_III[types], \
            f"catalogue differs from 003 Table III for {row.name}"
        assert sum(tc.values()) == min(tensor.LENGTHS) * per and set(tc) == {glob}


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS_MMA)
def test_table_3_mma_sass(arch, row, offline_tools, sass_snapshot):
    """004 Tables 3-5: each mma.sync shape/type is one tensor-core instruction."""
    tc, per, glob = _check_row(arch, "mma", row, sass_snapshot)
    assert sum(tc.values()) == min(tensor.LENGTHS) * per


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS_SP)
def test_table_6_mma_sp_sass(arch, row, offline_tools, sass_snapshot):
    """004 Tables 6-7: 2:4 sparse mma.sp becomes one .SP tensor-core instruction."""
    tc, per, glob = _check_row(arch, "mma.sp", row, sass_snapshot)
    assert all(".SP." in op for op in tc)


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS_LDM)
def test_table_9_ldmatrix_sass(arch, row, offline_tools, sass_snapshot):
    """004 Table 9: ldmatrix.xN becomes one LDSM.16.M88[.N] (pointer chase: depth n)."""
    _check_row(arch, "ldmatrix", row, sass_snapshot)


ROWS_WG = [pytest.param(r, id=r.name) for r in tensor.WGMMA]


def _wg_functions(arch):
    return _compiled(arch, "wgmma", lambda: (tensor.module(arch, tensor.wgmma_static(arch)),
                                             "sm_90a"))


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS_WG)
def test_hopper_wgmma_sass(arch, row, offline_tools, sass_snapshot):
    """wgmma (sm_90a): n x HGMMA/QGMMA/IGMMA between one WARPGROUP.ARRIVE and the wait,
    assembled without serialisation warnings (C7510/C7519 fail in toolchain.assemble)."""
    if archs.number(arch) != 90:
        pytest.skip(f"static: wgmma needs sm_90a ({arch} has none)")
    p = tensor.wgmma_probe(row, 1)
    try:
        regions, verdict = tensor.verify_probe(p, _wg_functions(arch))
    except (ProbeInvalid, sass.RegionError) as e:
        pytest.fail(str(e))
    assert verdict.unit.get("WARPGROUP.ARRIVE") == 1
    tool = toolchain.find("ptxas", arch)
    text = (f"// {p.name} (sm_90a, {tool.name} {tool.version})\n"
            + sass.normalise(_wg_functions(arch)[p.entries[min(p.entries)]]))
    assert text == sass_snapshot(toolchain.compiler_tag(tool))


LAYOUTS = [pytest.param(lay, t, id=f"{lay}-{t}") for t in ("f16.f16", "f32.f32")
           for lay in tensor.WMMA_LAYOUTS]


@pytest.mark.static
@pytest.mark.parametrize("layout,types", LAYOUTS)
def test_table_iii_movm_layouts(arch, layout, types, offline_tools):
    """003 section IV-C: MOVM.16.MT88 transposes appear or vanish with the layouts: none for
    row.col, some for row.row (B), more for col.col (A and C, with f16 C), most for col.row."""
    n = archs.number(arch)
    if n < 70:
        pytest.skip(f"static: {arch} has no tensor cores")
    text, names = tensor.movm_module(arch)
    fns = _compiled(arch, "movm", lambda: (text, arch))
    counts = {k: sum(c for op, c in fns[e].opcodes().items() if op.startswith("MOVM"))
              for k, e in names.items()}
    here = counts[f"{layout}/{types}"]
    if n < 75:
        # Volta's HMMA.884 takes either layout: no MOVM at all
        assert here == 0, f"{arch}: {here} MOVM for {layout}"
        return
    assert counts[f"row.col/{types}"] == 0
    if layout != "row.col":
        assert here > 0, f"{arch} {layout} {types}: no MOVM transpose"
    assert counts[f"col.row/{types}"] >= counts[f"col.col/{types}"] >= counts[f"row.row/{types}"]
    if types == "f16.f16":
        assert counts["col.col/f16.f16"] > counts["row.row/f16.f16"], \
            "col.col should transpose A and the f16 C (003), more than row.row's B"


@pytest.mark.static
def test_not_tensor_core_instructions(arch, offline_tools):
    """PTX that is valid on the arch but no tensor-core instruction there: mma.m8n8k4 f16
    becomes FPU code (a subroutine call, no HMMA) on sm_80+ (004); on sm_70/sm_75 it is
    HMMA.884. On sm_90 FP8 mma.sync becomes F2FP conversions + f16 HMMA (no FP8 tensor op)
    and u4 wmma a subroutine (no INT4 tensor cores)."""
    n = archs.number(arch)
    if n < 70:
        pytest.skip(f"static: {arch} has no tensor cores")
    em = tensor.emulated_probes(arch)
    text = tensor.module(arch, [p for _, p in em])
    fns = _compiled(arch, "emulated", lambda: (text, arch))
    seen = {}
    for r, p in em:
        region = [i for i in sass.timed_region(fns[p.entries[4]])
                  if not tensor.never_executed(i)]
        tc = tensor.tensor_opcodes(region)
        seen[p.name] = dict(tc)
        if r is tensor.MMA_M8N8K4_F16:
            if n >= 80:
                assert not tc, f"{arch}: mma.m8n8k4 f16 became tensor-core code {dict(tc)}"
                assert any(i.base == "CALL" or i.base.startswith(("HFMA", "FFMA"))
                           for i in region), "expected FPU code or a call"
            else:
                assert tc and all(op.startswith("HMMA.884") for op in tc), dict(tc)
        elif r.name.startswith("e4m3"):
            assert not any(op.startswith("QMMA") for op in tc), dict(tc)
            assert any(i.opcode.startswith("F2FP") for i in region), "no FP8->F16 conversion"
        elif r.name.startswith("u4"):
            assert not tc and any(i.base == "CALL" for i in region), dict(tc)
    assert seen
