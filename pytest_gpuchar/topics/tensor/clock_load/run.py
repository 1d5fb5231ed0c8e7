"""The SM clock under sustained load on the GPU: the four loads (idle, FFMA, wgmma, HBM
streaming) JIT-linked once (Group "clock_load", sm_90a), each kernel's loop verified, then run
in that order once per session: a short calibration launch, then WINDOWS launches of about
WINDOW_S each, back to back; per load the sustained SM clock, the work per clock per SM and
per wall second, against the per-clock peak at the device's maximum clock (and why they
differ: the clock and the per-clock rate), as Measured rows."""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field

import numpy as np

from ....core import values
from ....core.build import Built, Group
from ....core.runner import Launch, Plan, Runner, dynamic_smem
from ....core import topic
from ....core.topic import Context
from ....results.judge import Measured, Measurement
from ....results.plots import draw, pyplot
from . import kernels as cl
from ..wgmma import kernels as wd
from .kernels import Load, LoadSummary
from ..tolerance import tol
from ..wgmma.run import inputs as wgmma_inputs


WINDOW_S = 0.25
# Windows per load: the sustained figures are the median over windows[n // 2:], the last 3 of
# 5 (from 0.5 s into the load on): the clock has settled within the first two windows under
# every load (docs/hopper.md, lab notes); a sixth window only moved the sustained span later
WINDOWS = {Load.IDLE: 2, Load.FFMA: 5, Load.WGMMA: 5, Load.HBM: 5}
CAL_ITERS = {Load.IDLE: 2000, Load.FFMA: 20000, Load.WGMMA: 20000, Load.HBM: 2000}
ORDER = (Load.IDLE, Load.FFMA, Load.WGMMA, Load.HBM)
# Clocks are the board's (power limit, cooling, the clock the last load left): boards of one
# kind read the sustained clock under wgmma a few % apart, and the first window's clock under
# the HBM stream (the boost's ramp, not a steady state) further apart (docs/hopper.md, lab
# notes). The clock figures take the tolerance "clock", the first window's "first_clock", the
# per-clock figures "clock_load" (expectations/tolerances.yaml).
CLOCK_FIGURES = ("sm_clock_mhz", "sm_clock_vs_idle", "wall_vs_peak_at_max_clock")
MAX_ITERS = 2 ** 31 - 1


def groups(arch: str) -> list[Group]:
    if arch != "sm_90":
        return []
    return [Group("clock_load", wd.TARGET, list(cl.probes(arch).values()), text=cl.module_text)]


def static_probe(load: Load, arch: str) -> cl.LoadProbe:
    try:
        return cl.probes(arch)[load]
    except wd.NoWgmma as e:
        raise wd.NoWgmma(f"static: {e}") from None


# --- geometry and buffers ---------------------------------------------------------------

def geometry(load: Load, sm_count: int) -> tuple[int, int]:
    """(blocks, threads per block): one warp for idle, 4 x 256 threads per SM for FFMA and
    streaming (32 warps), one block of two warpgroups per SM for wgmma."""
    return {Load.IDLE: (1, 32), Load.FFMA: (sm_count * cl.BLOCKS_PER_SM, cl.BLOCK),
            Load.WGMMA: (sm_count, 2 * 128),
            Load.HBM: (sm_count * cl.BLOCKS_PER_SM, cl.BLOCK)}[load]


def work(load: Load, iters: int, warps_per_sm: int, blocks: int, threads: int
         ) -> tuple[float, float]:
    """(work per SM, work of the whole GPU) of one window: FLOP, or bytes for streaming."""
    if load is Load.FFMA:
        per_thread = iters * cl.FFMA_CHAINS * cl.FFMA_UNROLL * 2.0
        return warps_per_sm * 32 * per_thread, blocks * threads * per_thread
    if load is Load.WGMMA:
        per_group = iters * float(cl.WGMMA_ROW.flop)
        return 2 * per_group, blocks * 2 * per_group
    if load is Load.HBM:
        total = blocks * threads * iters * cl.STREAM_UNROLL * 16.0
        return total / max(1, blocks // cl.BLOCKS_PER_SM), total
    return 0.0, 0.0


@dataclass
class Buffers:
    """What every launch of a load reads: kernel arguments but the record buffer and trips."""
    make: object                     # (rec, iters) -> kernel argument tuple
    keep: list = field(default_factory=list)


def buffers(load: Load, probe: cl.LoadProbe, blocks: int, threads: int) -> Buffers:
    res = Runner.zeros(blocks * threads, dtype=np.uint32)
    if load is Load.WGMMA:
        fill, meta = wgmma_inputs(cl.WGMMA_ROW, probe.name)
        f, m = Runner.to_device(fill), Runner.to_device(meta)
        return Buffers(lambda rec, it: (rec, res, f, m, np.uint32(it)), [res, f, m])
    if load is Load.HBM:
        data = Runner.to_device(np.arange(cl.STREAM_WORDS16 * 4, dtype=np.uint32))
        return Buffers(lambda rec, it: (rec, res, data, np.uint32(it)), [res, data])
    slots = next(iter(probe.inputs.values())) if probe.inputs else []
    words = np.frombuffer(values.input_buffer(slots), np.uint8)
    d_in = Runner.to_device(np.tile(words, 32))
    return Buffers(lambda rec, it: (rec, res, d_in, np.uint32(it)), [res, d_in])


# --- the campaign -------------------------------------------------------------------------

@dataclass
class Campaign:
    summaries: dict = field(default_factory=dict)    # Load -> LoadSummary
    iters: dict = field(default_factory=dict)        # Load -> trips per window
    built: dict = field(default_factory=dict)        # Load -> Built
    checks: list = field(default_factory=list)


def run_load(runner: Runner, load: Load, probe: cl.LoadProbe, built: Built
             ) -> tuple[int, list]:
    """Calibrate (one short launch), then WINDOWS launches of about WINDOW_S: (trips per
    window, the windows' records)."""
    dev = runner.gpu.dev
    blocks, threads = geometry(load, dev.sm_count)
    smem = dynamic_smem(dev.shared_per_sm, cl.BLOCKS_PER_SM) \
        if load in (Load.FFMA, Load.HBM) else 0
    buf = buffers(load, probe, blocks, threads)
    fn = built.compiled.function(probe.entry)
    warps = blocks * threads // 32

    def launch(iters: int, n: int, timeout: float) -> list:
        """n back-to-back launches (no warm-up), one record buffer each."""
        return runner.measure(Plan(
            probe.name, {iters: fn}, Launch((blocks,), (threads,), smem=smem),
            lambda it: (lambda r, rec: buf.make(rec, it)), n, record=(warps, cl.REC_WORDS),
            warmup=False, split=True, timeout_s=timeout)).raw[iters]
    cal = cl.window(launch(CAL_ITERS[load], 1, 10.0)[0])
    iters = int(min(MAX_ITERS, max(1, CAL_ITERS[load] * WINDOW_S * 1e9 / max(cal.wall_ns, 1.0))))
    n = WINDOWS[load]
    return iters, launch(iters, n, 10.0 + 4 * n * WINDOW_S)


def campaign(session: Context, arch: str) -> Campaign:
    """Every load in ORDER (idle first, the GPU cool), once per session."""
    def make() -> Campaign:
        gpu = session.gpu
        probes = cl.probes(arch)
        out = Campaign()
        for load in ORDER:
            p = probes[load]
            built, _ = topic.built(session, p, groups)
            iters, recs = run_load(session.runner, load, p, built)
            windows = [cl.window(r) for r in recs]
            blocks, threads = geometry(load, gpu.dev.sm_count)
            wps = windows[-1].warps_per_sm
            per_sm, total = work(load, iters, wps[0], blocks, threads)
            out.summaries[load] = LoadSummary(load, windows, per_sm, total)
            out.iters[load], out.built[load] = iters, built
            if len(wps) != 1:
                out.checks.append(f"{load}: warps per SM differ ({wps}): per-SM work unknown")
        return out
    return session.runs.once(("tensor", "clock_load", arch), make)


# --- the figures ----------------------------------------------------------------------------

def _figure(key: str, value: float, spread: float, unit: str, method: str, data: dict,
            detail: str = "", kind: str | None = None, why: str | None = None) -> Measurement:
    """A figure of the campaign; unstable (unless `why` says otherwise) when its spread over
    the sustained windows exceeds 1% of its value."""
    if kind is None:
        kind = "clock" if key.endswith(CLOCK_FIGURES) else "clock_load"
    if why is None:
        why = (f"spread over the sustained windows {spread:.3g} > 1% of {value:.4g}"
               if spread > 0.01 * abs(value) else "")
    m = Measurement.of_value(key, value, unit, spread=spread, unstable=why, method=method,
                             data={"tolerance": tol(kind), **data})
    m.detail = detail
    return m


def _method(load: Load, c: Campaign) -> str:
    return (f"{load}: {WINDOWS[load]} launches of {c.iters[load]} trips (about {WINDOW_S} s "
            f"each, trips calibrated by a short launch), back to back after the loads before "
            f"it ({', '.join(map(str, ORDER))}); SM clock = %clock64 cycles / %globaltimer ns "
            f"per warp (median), sustained = median over the second half of the windows")


def first_window_spread(windows_mhz: list[float], sustained_mhz: float) -> float:
    """The noise of the first window's clock: its distance from the sustained clock (where on
    the ramp it fell), and no less than the range all the load's windows span."""
    return max(abs(windows_mhz[0] - sustained_mhz), max(windows_mhz) - min(windows_mhz))


def load_figures(session: Context, load: Load, arch: str) -> Measured:
    wd.require_wgmma(arch)
    c = campaign(session, arch)
    s: LoadSummary = c.summaries[load]
    dev = session.gpu.dev
    key = f"tensor.clock_load.{load}"
    mhz, mhz_sp = s.mhz()
    method = _method(load, c)
    data = {"windows_mhz": [round(w.mhz, 1) for w in s.windows],
            "sm_clock_max_mhz": dev.sm_clock_max_mhz}
    figs = [_figure(f"{key}.sm_clock_mhz", mhz, mhz_sp, "MHz", method, data)]
    if load is not Load.IDLE:
        idle = c.summaries[Load.IDLE].mhz()[0]
        # one sample of the ramp from the boost clock down to the sustained clock: where on it
        # the first window falls moves from night to night, so its spread, the nightly's noise,
        # is the ramp's height, and no less than the range this load's windows span: one
        # window is one draw of a clock that the same run saw anywhere in it (docs/hopper.md,
        # lab notes); that spread is the figure's scatter, not a sign it is unstable
        first = _figure(f"{key}.sm_clock_first_mhz", s.windows[0].mhz,
                        first_window_spread([w.mhz for w in s.windows], mhz), "MHz", method,
                        {"window_s": WINDOW_S}, kind="first_clock", why="")
        figs += [first,
                 _figure(f"{key}.sm_clock_vs_idle", mhz / idle, mhz_sp / idle, "ratio",
                         f"sustained SM clock under {load} over the idle clock ({idle:.0f} MHz)",
                         {})]
    if load in (Load.FFMA, Load.WGMMA):
        figs += _compute(load, s, dev, mhz, method)
    if load is Load.HBM:
        bw, sp = s.per_second()
        figs[0].data.update({"gbytes_per_s": round(bw / 1e9, 1),
                             "gbytes_per_s_spread": round(sp / 1e9, 1),
                             "buffer_bytes": cl.STREAM_WORDS16 * 16, "l2_bytes": dev.l2_bytes})
        figs[0].detail = (f"while streaming {bw / 1e9:.0f} GB/s (bytes read / wall time) from "
                          f"a {cl.STREAM_WORDS16 * 16 >> 20} MiB buffer")
    return Measured(*figs, sass=c.built[load].probe.snapshot_text(c.built[load].functions),
                    checks=c.checks)


def _compute(load: Load, s: LoadSummary, dev, mhz: float, method: str) -> list[Measurement]:
    """Per clock against the per-clock peak, per wall second against the peak at the
    device's maximum clock, and the decomposition of the gap."""
    key = f"tensor.clock_load.{load}"
    peak, source = cl.peak_per_clock(load)
    per_clk, pc_sp = s.per_clock()
    wall, w_sp = s.per_second()
    max_mhz = dev.sm_clock_max_mhz or float("nan")
    datasheet = peak * dev.sm_count * max_mhz * 1e6
    busy = statistics.median(w.sm_cycles / (w.mhz * 1e-3) / w.wall_ns for w in s.sustained())
    detail = (f"wall {wall / 1e12:.1f} TFLOP/s = per-clock fraction {per_clk / peak:.3f} x "
              f"clock ratio {mhz / max_mhz:.3f} ({mhz:.0f}/{max_mhz:.0f} MHz) x busy share of "
              f"the window {busy:.3f} x peak at the max clock {datasheet / 1e12:.1f} TFLOP/s")
    return [
        _figure(f"{key}.flop_per_clk_sm", per_clk, pc_sp, "flop/clk/SM",
                method + "; FLOP per SM / the SM's busy cycles (median SM)", {"peak": peak}),
        _figure(f"{key}.peak_fraction_per_clock", per_clk / peak, pc_sp / peak, "ratio",
                f"flop/clk/SM over the per-clock peak {peak:g} ({source})", {}),
        _figure(f"{key}.wall_vs_peak_at_max_clock", wall / datasheet, w_sp / datasheet,
                "ratio", f"achieved TFLOP/s (FLOP of the whole GPU / globaltimer wall time) "
                f"over the per-clock peak x {dev.sm_count} SMs x the maximum SM clock "
                f"{max_mhz:.0f} MHz; " + method,
                {"tflops_wall": round(wall / 1e12, 2), "tflops_spread": round(w_sp / 1e12, 2),
                 "tflops_peak_at_max_clock": round(datasheet / 1e12, 2),
                 "tflops_peak_at_measured_clock": round(peak * dev.sm_count * mhz / 1e6, 2),
                 "busy_share": round(busy, 4)}, detail)]


def trace(session: Context, arch: str, artifact=None) -> Measured:
    """Every load's windows (SM clock over time) as a plot and JSON in the run's report;
    checks: every load ran with the same warps on every SM."""
    wd.require_wgmma(arch)
    c = campaign(session, arch)
    series = {str(load): [w.mhz for w in s.windows] for load, s in c.summaries.items()}
    js = artifact(f"clock-under-load-{arch}.json", "SM clock per window under each load") \
        if artifact else None
    if js is not None:
        js.write_text(json.dumps({"window_s": WINDOW_S, "mhz": series, "iters": {
            str(k): v for k, v in c.iters.items()}}, indent=1))
    png = artifact(f"clock-under-load-{arch}.png", "SM clock under sustained load") \
        if artifact else None
    if png is not None:
        draw(trace_figure, png, [(str(load), series[str(load)]) for load in ORDER], WINDOW_S)
    return Measured(checks=c.checks)


def trace_figure(series: list[tuple[str, list[float]]], window_s: float):
    """The SM clock per window, the loads back to back."""
    fig, ax = pyplot().subplots(figsize=(7, 4))
    t0 = 0.0
    for load, v in series:
        ax.plot([t0 + window_s * (i + 0.5) for i in range(len(v))], v, "o-", label=load)
        t0 += window_s * len(v)
    ax.set_xlabel("time (s, loads back to back)")
    ax.set_ylabel("SM clock (MHz)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig
