"""wgmma in depth: rows, shared-memory layouts and descriptors, the loop kernels' PTX, the
loop verification on synthetic SASS, the point fits, and the figures on a fake GPU."""
from __future__ import annotations

import types

import numpy as np
import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.build import Built
from pytest_gpuchar.core.gpu import Gpu
from pytest_gpuchar.core.runner import Runner
from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.core.verify import ProbeInvalid
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.topics.tensor.mma import operands
from pytest_gpuchar.topics.tensor.wgmma import analysis as wa
from pytest_gpuchar.topics.tensor.wgmma import kernels as wd
from pytest_gpuchar.topics.tensor.wgmma import rows
from pytest_gpuchar.topics.tensor.wgmma import run


def test_rows_cover_the_issue():
    groups = {r.group for r in rows.ROWS}
    assert groups == {"sparse", "operand_source", "small_n", "f16_acc", "fp8_native", "swizzle"}
    assert {r.atype for r in rows.SPARSE} == {"f16", "bf16", "e4m3", "s8"}
    assert [r.n for r in rows.SMALL_N] == [8, 16, 32, 64]
    assert {r.swizzle for r in rows.SWIZZLE} == {"none", "32B", "64B", "128B"}
    assert all(r.fits(c) for r in rows.ROWS for c in r.configs)
    assert all(rows.LATENCY in r.configs for r in rows.ROWS)


def test_sparse_row_shape_and_peak():
    r = rows.row("sp.e4m3.f32.m64n256k64.ss")
    assert (r.k, r.a_k_bytes, r.b_k_bytes, r.isa) == (64, 32, 64, "8.2")
    assert r.peak == 2 * 8192 and r.flop == 2 * 64 * 256 * 64
    assert r.sass == "QGMMA.SP.64x256x64*" and r.meta == "s8"
    assert r.instruction() == "wgmma.mma_async.sp.sync.aligned.m64n256k64.f32.e4m3.e4m3"
    assert r.operands_after_b() == "%meta, 0, %scd, 1, 1"
    s8 = rows.row("sp.s8.s32.m64n256k64.ss")
    assert s8.operands_after_b() == "%meta, 0, %scd" and s8.sass.startswith("IGMMA.SP.")
    f16 = rows.row("f16.f16.m64n256k16")
    assert f16.acc_regs == 64 and f16.operands_after_b() == "%scd, 1, 1, 0, 0"


def test_operand_source_rows():
    """Sparse and dense f16 over N, A from shared memory (ss) or registers (rs), none/128B
    swizzle: every sparse row has the dense row of its N, source and swizzle."""
    src = [r for r in rows.ROWS if r.group == "operand_source" or
           (r.group == "sparse" and r.atype == "f16")]
    assert all(r.name.split(".")[-1 if r.swizzle == "none" else -2] == r.source for r in src)
    assert {(r.n, r.source, r.swizzle) for r in src if r.sparse} == \
        {(r.n, r.source, r.swizzle) for r in src if not r.sparse}
    assert {r.n for r in src} == set(rows.SOURCE_N)
    assert all(rows.CHAIN in r.configs and rows.LATENCY in r.configs for r in src)
    for r in src:
        if r.sparse:
            d = rows.counterpart(r, sparse=False)
            assert (d.n, d.a_regs, d.swizzle, d.k, r.k) == (r.n, r.a_regs, r.swizzle, 16, 32)
    assert rows.counterpart(rows.row("sp.bf16.f32.m64n256k32.ss"), sparse=False) is None
    # the existing swizzle rows still find their own group's no-swizzle row first
    assert rows.counterpart(rows.row("f16.f32.m64n128k16.swizzle_32B"), swizzle="none").name \
        == "f16.f32.m64n128k16.swizzle_none"
    ss, rs = rows.row("sp.f16.f32.m64n256k32.ss"), rows.row("sp.f16.f32.m64n256k32.rs")
    assert (ss.smem_operand_bytes, rs.smem_operand_bytes) == (2048 + 16384, 16384)
    assert rows.row("f16.f32.m64n256k16.ss").smem_operand_bytes == 2048 + 8192
    assert rs.a_frag_regs == 4 and rs.a_operand() == "{%ra0, %ra1, %ra2, %ra3}"
    assert rs.operands_after_b() == "%meta, 0, %scd, 1, 1, 0"       # no imm-trans-a
    assert ss.operands_after_b() == "%meta, 0, %scd, 1, 1, 0, 0" and ss.a_operand() == "%descA"
    assert rows.row("f16.f32.m64n64k16.rs").operands_after_b() == "%scd, 1, 1, 0"
    assert rows.CHAIN.tag == "c1w1s4" and rows.CHAIN.per_trip == 4


def test_rs_kernel_loads_a_before_the_clock():
    r = rows.row("sp.f16.f32.m64n256k32.rs.swizzle_128B")
    text = wd.kernel(r, rows.CHAIN)
    body = text[text.index("$WGD_LOOP:"):]
    assert body.count("{%ra0, %ra1, %ra2, %ra3}, %descB, %meta, 0, %scd, 1, 1, 0;") == 4
    assert ".reg .b32 %aoff, %ra<4>;" in text
    setup = text[:text.index("$WGD_LOOP:")]
    assert [f"ld.shared.b32 %ra{i}, [%aoff+{4 * i}];" in setup for i in range(4)] == [True] * 4
    assert "and.b32 %aoff, %tidx, 127;" in setup and "mul.lo.u32 %aoff, %aoff, 16;" in setup
    assert setup.index("bar.sync 0;") < setup.index("ld.shared.b32 %ra0")    # after the fill
    assert "ld.shared" not in body
    assert wd.layout(r).mode == 1 and wd.layout(r).a_bytes >= 128 * 16


def test_small_n_configs():
    n8, n64 = rows.row("f16.f32.m64n8k16"), rows.row("f16.f32.m64n64k16")
    assert {c.tag for c in n8.configs} == {f"c{c}w{w}" for c in (1, 2, 4, 8) for w in (0, 1)}
    assert max(c.chains for c in n64.configs) == 4
    assert wa.in_flight(wa.Point(rows.Config(4, 1), 3, 0, 0, 0, 0, False)) == 24


def test_layouts_and_descriptors():
    none = wd.layout(rows.row("f16.f32.m64n128k16.swizzle_none"))
    assert (none.a_sbo, none.b_sbo, none.lbo, none.mode) == (256, 256, 8, 0)
    assert none.a_bytes == 64 * 32 and none.b_offset == 2048
    sw = wd.layout(rows.row("f16.f32.m64n128k16.swizzle_128B"))
    assert (sw.a_sbo, sw.lbo, sw.mode, sw.b_offset) == (1024, 1, 1, 8192)
    assert sw.total >= sw.b_offset + 128 * 128 and sw.total % 1024 == 0
    assert sw.descriptor_const(1024) == (1 << 62) | (64 << 32) | (1 << 16)
    s32 = wd.layout(rows.row("f16.f32.m64n128k16.swizzle_32B"))
    assert (s32.a_sbo, s32.mode) == (256, 3)
    sp = wd.layout(rows.row("sp.f16.f32.m64n256k32.ss"))
    assert (sp.a_sbo, sp.b_sbo) == (256, 512)        # A packed M x K/2: 32 B rows


def test_kernel_text():
    r = rows.row("sp.f16.f32.m64n128k32.ss")
    p = wd.probe(r)
    assert p.arch == "sm_90a" and p.isa == "8.2" and sorted(p.entries) == [0, 1, 2, 3]
    assert [c.tag for c in r.configs] == ["c1w0", "c1w1", "c1w1s4", "c2w1"]
    assert p.ops == {0: 1, 1: 1, 2: 4, 3: 2}
    text = p.kernels
    assert text.count("wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.f16.f16") == 1 + 1 + 4 + 2
    assert "%descA, %descB, %meta, 0, %scd, 1, 1, 0, 0;" in text and ".maxntid 384, 1, 1" in text
    assert "%ra0" not in text
    assert text.count("wgmma.wait_group.sync.aligned 0;") == 1 + 3 * 1    # c1w0 + drains
    assert ".shared .align 1024 .b8 wgd_smem[" in text and '.pragma "nounroll";' in text
    assert wd.module_text([p]).startswith(".version 8.2\n.target sm_90a")
    with pytest.raises(NotApplicable, match="static: wgmma needs sm_90a"):
        run.static_probe(r, "sm_89")


def _fn(lines: list[str], labels: dict[str, int]) -> sass.Function:
    instrs = [sass.parse_instr(16 * k, line) for k, line in enumerate(lines)]
    return sass.Function("f", instrs, labels)


def _trip_listing(n_mma: int, wait: int, extra: tuple[str, ...] = ()) -> sass.Function:
    lines = ["BAR.SYNC.DEFER_BLOCKING 0x0", "CS2R R2, SR_CLOCKLO", "UMOV UR4, URZ",
             "WARPGROUP.ARRIVE", "LDC R4, c[0x0][0x230]", "UIADD3 UR4, UR4, 0x1, URZ",
             *[f"HGMMA.64x8x16.F32 R{24 + 4 * k}, gdesc[UR8], R{24 + 4 * k}"
               for k in range(n_mma)], *extra, "ISETP.LE.U32.AND P0, PT, R4, UR4, PT",
             f"WARPGROUP.DEPBAR.LE gsb0, 0x{wait}", "@!P0 BRA `(.L_x_3)",
             *(["WARPGROUP.DEPBAR.LE gsb0, 0x0"] if wait else []), "CS2R R4, SR_CLOCKLO"]
    return _fn(lines, {".L_x_3": 3})


def test_verify_trips():
    glob = "HGMMA.64x8x16*"
    got = wd.verify_trips("p", glob, rows.Config(4, 1), _trip_listing(4, 1))
    assert got["wgmma_per_trip"] == 4 and got["loop_control"]["UIADD3"] == 1
    wd.verify_trips("p", glob, rows.Config(1, 0), _trip_listing(1, 0))
    with pytest.raises(ProbeInvalid, match="3 HGMMA.64x8x16\\* per trip, wanted 4"):
        wd.verify_trips("p", glob, rows.Config(4, 1), _trip_listing(3, 1))
    with pytest.raises(ProbeInvalid, match="serialised"):
        wd.verify_trips("p", glob, rows.Config(2, 1),
                        _trip_listing(2, 1, ("WARPGROUP.DEPBAR.LE gsb0, 0x0",)))
    with pytest.raises(ProbeInvalid, match="waits around the loop"):
        wd.verify_trips("p", glob, rows.Config(1, 0), _trip_listing(1, 1))
    with pytest.raises(ProbeInvalid, match="other instructions"):
        wd.verify_trips("p", glob, rows.Config(1, 0), _trip_listing(1, 0, ("FFMA R1, R2, R3, R4",)))
    # the chain loop: 4 wgmma per trip on one accumulator, one fence and one wait
    assert wd.verify_trips("p", glob, rows.CHAIN, _trip_listing(4, 1))["wgmma_per_trip"] == 4
    with pytest.raises(ProbeInvalid, match="1 HGMMA.64x8x16\\* per trip, wanted 4"):
        wd.verify_trips("p", glob, rows.CHAIN, _trip_listing(1, 1))


def _records(per_trip: float, warps: int, skew: float = 37.0, reps: int = 5):
    return {t: [(np.arange(warps) * skew / warps + 100.0,
                 np.full(warps, 100.0 + skew + 250 + t * per_trip + (r % 2) * 0.2))
                for r in range(reps)] for t in run.TRIPS}


def test_point_fits_the_sm_span_and_cancels_the_skew():
    r = rows.row("f16.f32.m64n8k16")
    pt = wa.point(r, rows.Config(2, 1), 3, _records(40.0, 12))
    assert pt.trip_cycles == pytest.approx(40.0, abs=0.01) and not pt.unstable
    assert pt.throughput == pytest.approx(r.flop * 2 * 3 / 40.0, rel=1e-4)
    noisy = _records(40.0, 12)
    noisy[run.TRIPS[-1]][0] = (noisy[run.TRIPS[-1]][0][0], noisy[run.TRIPS[-1]][0][1] + 900)
    assert wa.point(r, rows.Config(2, 1), 3, noisy).unstable
    pts = [wa.point(r, rows.Config(c, 0), 1, _records(100.0 / c, 4)) for c in (1, 2, 4)]
    assert wa.best(pts).config.chains == 4
    assert wa.concurrency_to(pts, 0.95, pts[-1].throughput).config.chains == 4
    assert wa.concurrency_to(pts, 0.95, 10 * pts[-1].throughput) is None


# --- the figures on a fake GPU --------------------------------------------------------------

class _Loop:
    """A loop kernel: a trip of C wgmma costs max(latency, C x W x issue) cycles on the SM."""
    max_threads_per_block = 384

    def __init__(self, config, latency=120.0, issue=4.0):
        self.c, self.lat, self.issue = config, latency, issue

    def __call__(self, grid, block, args, shared_mem=0):
        out, res, fill, meta, iters = args
        wg = block[0] // 128
        per_trip = max(self.lat / (1 + self.c.wait), self.c.per_trip * wg * self.issue)
        for w in range(out.shape[0]):
            out[w] = (1000 + 3 * w, 1500 + int(iters) * per_trip, 0)


def _session(monkeypatch, verdict_trips):
    monkeypatch.setattr(wd.DepthProbe, "snapshot_text", lambda self, f: f"sass {self.name}")

    class Builds:
        def jit_groups(self, dev, groups):
            assert [g.name for g in groups] == ["wgmma_depth"]
            return {}

        def jit(self, p, dev):
            compiled = types.SimpleNamespace(
                info_log="", function=lambda e: _Loop(p.config(
                    next(k for k, v in p.entries.items() if v == e))))
            return Built(p, {}, compiled=compiled)
    dev = types.SimpleNamespace(arch="sm_90", driver="580", index=0)
    verdict = types.SimpleNamespace(trips=verdict_trips)
    gpu = Gpu(dev, None, 5.0)
    return types.SimpleNamespace(builds=Builds(), gpu=gpu, runner=Runner(gpu), runs=RunCache(),
                                 repeats=3, verify=lambda p, f: verdict)


def test_row_figures_on_a_fake_gpu(fake_cupy, monkeypatch):
    r = rows.row("f16.f32.m64n8k16")
    s = _session(monkeypatch, {c.tag: {"loop_control": {"BRA": 1}} for c in r.configs})
    m = run.row_figures(s, r, "sm_90")
    keys = [f.key.removeprefix(r.key + ".") for f in m.figures]
    assert keys == ["completion_latency", "throughput", "achieved_peak",
                    "latency_bound_peak_fraction", "in_flight_for_95pct"]
    lat, thr, frac, base, conc = m.figures
    assert lat.value == pytest.approx(120.0) and lat.unit == "cycles"
    assert thr.value == pytest.approx(r.flop / 4.0, rel=1e-3)         # issue-bound: the peak
    assert frac.value == pytest.approx(1.0, rel=1e-3)
    assert conc.value == 32 and conc.data["point"] == "wg2_c8w1"      # 2 wg x 8 x 2 groups
    assert base.value == pytest.approx(r.flop / 120.0 / r.peak, rel=1e-3)
    assert m.sass == "sass wgmma_depth/f16.f32.m64n8k16"
    assert run.row_figures(s, r, "sm_90") is not m          # figures re-read, run made once
    with pytest.raises(NotApplicable):
        run.row_figures(s, r, "sm_80")


def test_swizzle_rows_compare_with_no_swizzle(fake_cupy, monkeypatch):
    r = rows.row("f16.f32.m64n128k16.swizzle_64B")
    s = _session(monkeypatch, {c.tag: {"loop_control": {}} for c in r.configs})
    m = run.row_figures(s, r, "sm_90")
    ratio = m.figures[-1]
    assert ratio.key.endswith("throughput_vs_none") and ratio.value == pytest.approx(1.0)


def test_sparse_rows_against_dense_on_a_fake_gpu(fake_cupy, monkeypatch):
    """A sparse rs row: its chain interval, the shared-memory operand rate of its best point
    and its speed-up over the dense rs row (the fake issues both at the same interval, so the
    sparse row's doubled work per wgmma gives 2)."""
    r = rows.row("sp.f16.f32.m64n128k32.rs")
    s = _session(monkeypatch, {c.tag: {"loop_control": {"BRA": 1}} for c in r.configs})
    m = run.row_figures(s, r, "sm_90")
    got = {f.key.removeprefix(r.key + "."): f for f in m.figures}
    assert list(got) == ["completion_latency", "cycles_per_wgmma", "smem_operand_rate",
                         "throughput", "achieved_peak", "speedup_vs_dense"]
    # fake: a trip costs max(120 / 2, 4 wgmma x 4) = 60 cycles on one warpgroup
    assert got["cycles_per_wgmma"].value == pytest.approx(15.0, rel=1e-3)
    assert got["cycles_per_wgmma"].unit == "cycles/op"
    assert "Tables VIII-IX" in got["cycles_per_wgmma"].method
    best = r.flop / got["throughput"].value
    assert got["smem_operand_rate"].value == pytest.approx(8192 / best, rel=1e-3)
    assert got["speedup_vs_dense"].value == pytest.approx(2.0, rel=1e-3)
    assert "f16.f32.m64n128k16.rs" in got["speedup_vs_dense"].method
    assert "A from registers" in got["throughput"].method
    assert " x C x S " in got["throughput"].method
    # the older rows keep their method text (no S) and figure set
    old = rows.row("sp.bf16.f32.m64n256k32.ss")
    s2 = _session(monkeypatch, {c.tag: {"loop_control": {}} for c in old.configs})
    keys = [f.key.removeprefix(old.key + ".") for f in run.row_figures(s2, old, "sm_90").figures]
    assert keys == ["completion_latency", "throughput", "achieved_peak"]
    assert " x S" not in run._method(old, 7)


def test_sparse_metadata_is_validated_before_launch(monkeypatch):
    r = rows.row("sp.bf16.f32.m64n256k32.ss")
    fill, meta = run.inputs(r, "p")
    operands.validate_sparse_metadata(meta, "f16", "p")
    assert fill.dtype == np.uint32 and np.all(fill != 0) and len(meta) == wd.THREADS_MAX

    def bad(kind, n, rng):
        return np.full(n, 0x11111111 if kind.startswith("meta") else 1, np.uint64)
    monkeypatch.setattr(operands, "draw_regs", bad)
    with pytest.raises(operands.SparseMetadataError, match="not a valid 2:4 pattern"):
        run.inputs(r, "p")




def test_the_in_flight_spread_is_how_far_the_scatter_moves_the_95pct_point():
    c = rows.Config(1, 1)

    def pt(wg, thr, spread):
        return wa.Point(c, wg, 0, 0, thr, spread, False)
    # in flight 2 per warpgroup (one chain, two groups): 2, 4, 6
    clear = [pt(1, 80.0, 1.0), pt(2, 97.0, 1.0), pt(3, 99.0, 1.0)]
    assert wa.concurrency_spread(clear, 0.95, 100.0) == 0.0
    close = [pt(1, 94.0, 2.0), pt(2, 96.0, 2.0), pt(3, 99.0, 1.0)]
    assert wa.concurrency_spread(close, 0.95, 100.0) == 6 - 2
