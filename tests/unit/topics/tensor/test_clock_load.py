"""The clock-under-load loads: kernels, windows maths, the work accounting and the figures on
a fake GPU (no CUDA)."""
from __future__ import annotations

import types

import numpy as np
import pytest

from pytest_gpuchar.core.build import Built
from pytest_gpuchar.core.gpu import Gpu
from pytest_gpuchar.core.runner import Runner
from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.topics.tensor.clock_load import kernels as cl
from pytest_gpuchar.topics.tensor.clock_load import run
from pytest_gpuchar.topics.tensor.clock_load.kernels import Load


def test_kernels():
    ps = cl.probes("sm_90")
    assert set(ps) == set(Load) and all(p.arch == "sm_90a" for p in ps.values())
    ffma = ps[Load.FFMA]
    assert ffma.count == cl.FFMA_CHAINS * cl.FFMA_UNROLL and ffma.unit == ("FFMA",)
    assert ffma.kernels.count("fma.rn.f32") == 256 and "mov.u64 %g0, %globaltimer;" in ffma.kernels
    assert ps[Load.HBM].kernels.count("ld.global.v4.u32") == cl.STREAM_UNROLL
    assert f"and.b32 %idx, %idx, {cl.STREAM_WORDS16 - 1};" in ps[Load.HBM].kernels
    assert "nanosleep.u32 1000;" in ps[Load.IDLE].kernels
    w = ps[Load.WGMMA].kernels
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in w
    assert "st.global.u64 [%out+24], %g1;" in w and ".entry clk_wgmma(" in w
    assert "st.global.u64 [%out+32], %smid64;" in w
    with pytest.raises(ValueError, match="power of two"):
        cl.stream_kernel(3 << 20)
    with pytest.raises(NotApplicable, match="^static: wgmma needs sm_90a"):
        run.static_probe(Load.FFMA, "sm_80")
    assert run.groups("sm_80") == [] and run.groups("sm_90")[0].name == "clock_load"


def _rec(warps_per_sm, sms, cycles, ns, skew=0):
    rows = []
    for sm in range(sms):
        for w in range(warps_per_sm):
            c0, g0 = 1000 + w * skew, 5000 + w * skew
            rows.append((c0, c0 + cycles, g0, g0 + ns, sm))
    return np.array(rows, dtype=np.uint64)


def test_window_and_summary():
    w = cl.window(_rec(32, 4, 1_800_000, 1_000_000))
    assert w.mhz == pytest.approx(1800.0) and w.sms == 4 and w.warps_per_sm == [32]
    assert w.sm_cycles == 1_800_000 and w.wall_ns == 1_000_000
    wins = [cl.window(_rec(32, 4, c, 1_000_000)) for c in (1_980_000, 1_900_000, 1_850_000,
                                                          1_850_000)]
    s = cl.LoadSummary(Load.FFMA, wins, work_per_sm=1.85e6 * 200, work_total=4 * 1.85e6 * 200)
    assert [x.mhz for x in s.sustained()] == [1850.0, 1850.0]
    assert s.mhz() == (1850.0, 0.0)
    assert s.per_clock()[0] == pytest.approx(200.0)
    assert s.per_second()[0] == pytest.approx(4 * 1.85e6 * 200 / 1e-3)


@pytest.mark.parametrize("seed", range(5))
def test_window_spans_per_sm_as_a_loop_over_the_warps_reads_them(seed):
    """The per-SM span (last clock after - first clock before), the SM count and the warps
    per SM, taken over whole arrays by SM id: the same numbers as a loop over the warps, on
    SM ids with gaps, warps in any order and SMs with different warp counts."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 3000))
    sm = rng.choice(rng.choice(132, size=int(rng.integers(1, 132)), replace=False), size=n)
    c0 = rng.integers(10**12, 10**12 + 10**9, size=n)
    g0 = rng.integers(10**15, 10**15 + 10**9, size=n)
    rec = np.stack([c0, c0 + rng.integers(0, 10**9, size=n), g0,
                    g0 + rng.integers(1, 10**9, size=n), sm], axis=1).astype(np.uint64)
    spans, warps = {}, {}
    for a, b, _, _, m in rec.astype(np.int64).tolist():
        lo, hi = spans.get(m, (a, b))
        spans[m] = (min(lo, a), max(hi, b))
        warps[m] = warps.get(m, 0) + 1
    w = cl.window(rec)
    assert w.sm_cycles == float(np.median([b - a for a, b in spans.values()]))
    assert w.sms == len(spans) and w.warps_per_sm == sorted(set(warps.values()))


def test_work_accounting():
    per_sm, total = run.work(Load.FFMA, 10, 32, 8, 256)
    assert per_sm == 32 * 32 * 10 * 256 * 2 and total == 8 * 256 * 10 * 512
    per_sm, total = run.work(Load.WGMMA, 10, 8, 132, 256)
    assert per_sm == 2 * 10 * 2 * 64 * 256 * 16 and total == 132 * per_sm
    _, total = run.work(Load.HBM, 3, 32, 8, 256)
    assert total == 8 * 256 * 3 * 4 * 16
    assert run.work(Load.IDLE, 3, 1, 1, 32) == (0.0, 0.0)
    assert run.geometry(Load.WGMMA, 132) == (132, 256) and run.geometry(Load.IDLE, 132) == (1, 32)


MHZ = {Load.IDLE: 1980.0, Load.FFMA: 1755.0, Load.WGMMA: 1620.0, Load.HBM: 1980.0}
PER_CLK = {Load.FFMA: 250.0, Load.WGMMA: 4000.0, Load.IDLE: 1.0, Load.HBM: 100.0}


class _LoadKernel:
    """Each warp runs `iters` trips at the load's per-clock rate and clock."""

    def __init__(self, load, sms):
        self.load, self.sms = load, sms

    def __call__(self, grid, block, args, shared_mem=0):
        rec, iters = args[0], int(args[-1])
        blocks, threads = grid[0], block[0]
        per_sm, _ = run.work(self.load, iters, blocks * threads // 32 // self.sms, blocks,
                             threads)
        cycles = per_sm / PER_CLK[self.load] if per_sm else iters * 2000
        ns = cycles / MHZ[self.load] * 1000
        for w in range(rec.shape[0]):
            rec[w] = (100, 100 + cycles, 7000, 7000 + ns, w * self.sms // rec.shape[0])


def test_campaign_on_a_fake_gpu(fake_cupy, monkeypatch):
    # the HBM load's streamed buffer is never read here: a stub in place of its arange
    fake_cupy.arange = lambda n, dtype: np.zeros(4, dtype).view(fake_cupy.Array)
    monkeypatch.setattr(cl.LoadProbe, "snapshot_text", lambda self, f: f"sass {self.name}")
    dev = types.SimpleNamespace(arch="sm_90", driver="580", index=0, sm_count=4,
                                shared_per_sm=228 * 1024, sm_clock_max_mhz=1980.0,
                                l2_bytes=50 << 20)

    class Builds:
        def jit_groups(self, dev, groups):
            return {}

        def jit(self, p, dev):
            return Built(p, {}, compiled=types.SimpleNamespace(
                function=lambda e: _LoadKernel(p.load, dev.sm_count)))
    gpu = Gpu(dev, None, 30.0)
    s = types.SimpleNamespace(builds=Builds(), gpu=gpu, runner=Runner(gpu), runs=RunCache(),
                              verify=lambda p, f: None)
    m = run.load_figures(s, Load.WGMMA, "sm_90")
    got = {f.key.rsplit(".", 1)[1]: f.value for f in m.figures}
    assert got["sm_clock_mhz"] == pytest.approx(1620.0)
    assert got["sm_clock_vs_idle"] == pytest.approx(1620.0 / 1980.0)
    assert got["flop_per_clk_sm"] == pytest.approx(4000.0)
    assert got["peak_fraction_per_clock"] == pytest.approx(4000.0 / 4096)
    assert got["wall_vs_peak_at_max_clock"] == pytest.approx(4000 / 4096 * 1620 / 1980, rel=1e-3)
    wall = next(f for f in m.figures if f.key.endswith("wall_vs_peak_at_max_clock"))
    assert "clock ratio 0.818" in wall.detail and wall.data["busy_share"] == pytest.approx(1.0)
    assert m.sass == "sass clock_load/wgmma" and not m.checks
    hbm = run.load_figures(s, Load.HBM, "sm_90")
    assert [f.key.rsplit(".", 1)[1] for f in hbm.figures] == [
        "sm_clock_mhz", "sm_clock_first_mhz", "sm_clock_vs_idle"]
    first = hbm.figures[1]      # one sample of the ramp: its noise is the ramp's height,
    assert not first.unstable   # at least the range the load's windows span
    windows = hbm.figures[0].data["windows_mhz"]
    assert first.spread == pytest.approx(max(abs(first.value - hbm.figures[0].value),
                                             max(windows) - min(windows)), abs=0.2)
    assert first.spread >= max(windows) - min(windows) - 0.2
    assert hbm.figures[0].data["gbytes_per_s"] > 0 and "GB/s" in hbm.figures[0].detail
    idle = run.load_figures(s, Load.IDLE, "sm_90")
    assert [f.key for f in idle.figures] == ["tensor.clock_load.idle.sm_clock_mhz"]
    assert run.trace(s, "sm_90", None).checks == []
    c = run.campaign(s, "sm_90")
    assert list(c.summaries) == list(run.ORDER)
    assert len(c.summaries[Load.FFMA].windows) == run.WINDOWS[Load.FFMA]


def test_first_window_noise_is_the_ramp_or_the_windows_range():
    # H100 GPU-a43b3a55 under hbm on two nights (2026-11-27): the first windows read 2006.2
    # and 1947.2 MHz; each night's windows span covers the other night's first window
    n0 = [2006.2, 1979.9, 1965.0, 1979.8, 1979.3, 1979.4]
    n2 = [1947.2, 2005.4, 1983.6, 1965.0, 1971.6, 2009.9]
    assert run.first_window_spread(n0, 1979.5) == pytest.approx(41.2)
    assert run.first_window_spread(n2, 1971.6) == pytest.approx(62.7)
    assert abs(n0[0] - n2[0]) < run.first_window_spread(n2, 1971.6)
    # windows alike: the ramp's height (first minus sustained) is the noise
    assert run.first_window_spread([1990.0, 1980.0, 1980.0], 1980.0) == pytest.approx(10.0)
