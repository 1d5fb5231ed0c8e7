"""The numerics kernels (topics/numerics/kernels.py): fragment layouts, the PTX on the shared
frame, the module's .version, SASS classification and the probe's own verification
(synthetic SASS), and every kernel assembled and verified offline when ptxas is present."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.core.verify import ProbeInvalid
from pytest_gpuchar.topics.numerics import kernels, reference, rows, run

SPECS = [pytest.param(s, id=s.name) for s in rows.MMA.values()]


@pytest.mark.parametrize("s", SPECS)
class TestLayouts:
    def test_every_element_held_once(self, s):
        for which, (nrow, ncol) in (("a", (s.m, s.k)), ("b", (s.k, s.n)), ("c", (s.m, s.n))):
            xy = kernels.coords(s, which).reshape(-1, 2)
            assert len({tuple(p) for p in xy}) == nrow * ncol == len(xy)
            assert xy[:, 0].max() == nrow - 1 and xy[:, 1].max() == ncol - 1

    def test_pack_unpack_round_trip(self, s):
        rng = np.random.default_rng(0)
        for which, shape in (("a", (3, s.m, s.k)), ("b", (3, s.k, s.n)), ("c", (3, s.m, s.n))):
            t = reference.numtype(s.c_type if which == "c" else s.in_type)
            bits = rng.integers(0, 2 ** t.bits, shape).astype(t.uint)
            regs = kernels.pack(s, which, bits)
            assert regs.shape == (3, 32, kernels.n_regs(s, which)) and regs.dtype == np.uint32
            assert np.array_equal(kernels.unpack(s, which, regs), bits)

    def test_registers_are_c_ordered_on_both_paths(self, s, monkeypatch):
        """A kernel reads its fragment buffer as C-ordered memory: an F-ordered array (the old
        packer's (T, 32, 1) B of m16n8k8 f16/bf16) reached the GPU F-ordered and scrambled."""
        rng = np.random.default_rng(2)
        for fast in (True, False):
            with monkeypatch.context() as m:
                if not fast:
                    m.setattr(kernels, "_whole_words", lambda w: False)
                for which, shape in (("a", (5, s.m, s.k)), ("b", (5, s.k, s.n)),
                                     ("c", (5, s.m, s.n))):
                    t = reference.numtype(s.c_type if which == "c" else s.in_type)
                    bits = rng.integers(0, 2 ** t.bits, shape).astype(t.uint)
                    assert kernels.pack(s, which, bits).flags.c_contiguous, (which, fast)

    def test_whole_word_registers_are_the_shifted_sums(self, s, monkeypatch):
        rng = np.random.default_rng(1)
        for which, shape in (("a", (3, s.m, s.k)), ("b", (3, s.k, s.n)), ("c", (3, s.m, s.n))):
            t = reference.numtype(s.c_type if which == "c" else s.in_type)
            bits = rng.integers(0, 2 ** t.bits, shape).astype(t.uint)
            fast = kernels.pack(s, which, bits)
            back = kernels.unpack(s, which, fast)
            with monkeypatch.context() as m:
                m.setattr(kernels, "_whole_words", lambda w: False)
                assert np.array_equal(kernels.pack(s, which, bits), fast)
                slow = kernels.unpack(s, which, fast)
            assert np.array_equal(back, slow) and back.dtype == slow.dtype

    def test_ptx_has_one_mma(self, s):
        text = kernels.kernel_ptx(s)
        assert text.count("mma.sync") == 1 and s.instruction in text
        assert f".entry {s.entry}(" in text


def test_documented_layout_points():
    """Spot checks against the PTX ISA's fragment figures."""
    k16 = rows.mma("f16.m16n8k16.f32")
    assert kernels.coord(k16, "a", 5, 0) == (1, 2)      # lane 5: group 1, thread 1
    assert kernels.coord(k16, "a", 5, 3) == (9, 3)
    assert kernels.coord(k16, "a", 5, 6) == (9, 10)
    assert kernels.coord(k16, "b", 5, 2) == (10, 1)
    assert kernels.coord(k16, "c", 5, 2) == (9, 2)
    tf = rows.mma("tf32.m16n8k8.f32")
    assert kernels.coord(tf, "a", 5, 1) == (9, 1) and kernels.coord(tf, "a", 5, 2) == (1, 5)
    assert kernels.coord(tf, "b", 5, 1) == (5, 1)
    f8 = rows.mma("e4m3.m16n8k32.f32")
    assert kernels.coord(f8, "a", 5, 4) == (9, 4) and kernels.coord(f8, "a", 5, 9) == (1, 21)
    assert kernels.coord(f8, "b", 5, 6) == (22, 1)


def test_unsupported_reasons():
    assert rows.mma("bf16.m16n8k16.f32").unsupported("sm_61") == "sm_61 has no tensor cores"
    assert "needs sm_89+" in rows.mma("e4m3.m16n8k32.f32").unsupported("sm_80")
    assert "m8n8k4" in rows.mma("f16.m16n8k8.f32").unsupported("sm_70")
    assert rows.mma("f16.m16n8k8.f32").unsupported("sm_75") is None
    with pytest.raises(ValueError, match="unknown tensor-core kernel"):
        rows.mma("f64.m8n8k4.f64")
    with pytest.raises(NotApplicable, match="static: sm_61 has no tensor cores"):
        run.static_probe("f16.m16n8k16.f32", "sm_61")


def test_module_isa_version():
    text, specs = kernels.module_ptx("sm_90")
    assert text.startswith(".version 8.4") and len(specs) == len(rows.MMA)
    text, specs = kernels.module_ptx("sm_80")
    assert text.startswith(".version 7.1") and all(s.min_arch <= 80 for s in specs)
    assert kernels.module_ptx("sm_61")[1] == []


def test_group_is_the_module():
    """groups(arch): one Group "numerics" whose one part is module_ptx's text, in the file
    the driver JIT names; each probe carries its kernel and the .version it needs."""
    (g,) = run.groups("sm_90")
    assert g.name == "numerics" and [p.mma for p in g.probes] == list(rows.MMA.values())
    ((part, text, name),) = g.parts()
    assert text == kernels.module_ptx("sm_90")[0] and name == "gpuchar_numerics.ptx"
    assert text.count(".version") == 1
    p = g.probes[0]
    assert p.name == "numerics/f16.m16n8k16.f32" and p.entries == {1: p.mma.entry}
    assert p.ptx.startswith(".version 8.0") and kernels.kernel_ptx(p.mma) in p.ptx
    assert run.groups("sm_61")[0].parts() == []
    assert kernels.module_text("sm_75", kernels.probes("sm_75")).startswith(".version 7.0")


def _func(lines, name="k"):
    return sass.Function(name, [sass.parse_instr(i * 16, l) for i, l in enumerate(lines)])


def test_tensor_path_classification():
    s = rows.mma("e4m3.m16n8k32.f32")
    p = kernels.tensor_path(s, _func(["F2FP.F16.E4M3.UNPACK_B R14, R12 ;",
                                      "HMMA.16816.F32 R16, R16, R14, RZ ;",
                                      "FADD R4, R4, R8 ;"]))
    assert not p.native and p.accumulation_on_fpu and "HMMA" in p.describe()
    with pytest.raises(kernels.NotTensorCore, match="no tensor-core instruction"):
        kernels.tensor_path(s, _func(["FFMA R1, R2, R3, R4 ;"]))
    q = kernels.tensor_path(s, _func(["QMMA.16832.F32.E4M3.E4M3 R12, R4.ROW, R8.COL, R12 ;"]))
    assert q.native and not q.accumulation_on_fpu


def test_probe_check_is_the_tensor_path():
    """MmaProbe.check: the whole kernel is classified; no tensor-core op is ProbeInvalid (the
    static step's invalid probe); a missing kernel is a RegionError."""
    s = rows.mma("bf16.m16n8k16.f32")
    p = kernels.probe(s, "sm_90")
    good = {s.entry: _func(["S2R R1, SR_TID.X ;", "HMMA.16816.F32.BF16 R4, R8, R12, R4 ;",
                            "EXIT ;"], s.entry)}
    v = p.check(good)
    assert v.ok and v.path.native and v.unit == {"HMMA.16816.F32.BF16": 1}
    assert len(v.regions[1]) == 3
    with pytest.raises(ProbeInvalid, match="no tensor-core instruction"):
        p.check({s.entry: _func(["FFMA R1, R2, R3, R4 ;"], s.entry)})
    with pytest.raises(sass.RegionError, match="missing"):
        p.check({"other": good[s.entry]})


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles_offline_with_hmma(arch, need_offline_tools, offline_builds):
    need_offline_tools(arch)
    builds = offline_builds
    builds.offline_groups(run.groups(arch))
    for p in kernels.probes(arch):
        path = p.check(builds.offline(p).functions).path
        assert any(op.startswith("HMMA") or op.startswith("QMMA") for op in path.tensor)
