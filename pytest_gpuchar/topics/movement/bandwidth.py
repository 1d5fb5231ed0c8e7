"""Bandwidths on the GPU: every stream kernel launched with one 1024-thread CTA per SM, 1 +
repeats times per trip count (device-memory rows with the L2 evicted before every launch),
per SM the slope of the busy span over the bytes moved, the whole GPU from %globaltimer;
against the documented peaks. The TMA bulk-copy pipeline against the transfer size, and the
bandwidth staircase drawn beside the memory topic's latency staircase."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...core.probe import NotApplicable, Probe
from ...core.runner import Bounds, Order, Plan
from ...core.topic import Context
from ...results.judge import Measured, Measurement
from . import analysis, plots, streams
from .rows import (BLOCK, DRAM_STREAM_LAUNCHES, RATE_SPREAD_REL, SHARED_PEAK,
                   SHARED_PEAK_SOURCE, STREAMS, TMA_KNEE_SHARE, TMA_SIZES, TMA_STAGE, TMA_TRIPS,
                   Level, Region, Stream, StreamRow, TmaBwRow, hbm_peak)
from . import state as st
from .state import GROW, round_up


METHOD_STREAM = ("{threads} threads x 1 CTA per SM ({ctas} CTAs), each thread {unroll} x "
                 "{op} per iteration of a nounroll loop (verified); per SM: 1 / slope of the "
                 "CTA's busy span (%clock64, first warp's start to last warp's end) over the "
                 "bytes it moved at {trips} iterations, median CTA, median of {reps} launches "
                 "after a warm-up{extra}")
OPS = {Stream.SHARED_U32: "ld.shared.u32", Stream.SHARED_U64: "ld.shared.v2.u32",
       Stream.SHARED_U128: "ld.shared.v4.u32", Stream.L1: "ld.global.v4.u32 (32 KiB per CTA)",
       Stream.L2: "ld.global.cg.v4.u32 (64 KiB per CTA)",
       Stream.DRAM_READ: "ld.global.cg.v4.u32 (a slice of a buffer >= 4 x L2)",
       Stream.DRAM_WRITE: "st.global.v4.u32", Stream.DRAM_COPY: "ld.global.cg.v4 + st.global.v4",
       Stream.CP_ASYNC: "cp.async.cg 16 B (64 KiB per CTA, one group in flight)",
       Stream.DSM: "ld.shared::cluster.v4.u32"}


def stream_windows(session: Context, probe: Probe, *, name: str, grid: int, smem: int,
                   trips: tuple[int, ...], args: Callable, source, block: int = BLOCK,
                   cluster: int | None = None, flush: bool = False, offsets: tuple = (0,),
                   repeats: int | None = None) -> dict[int, list[list[analysis.Window]]]:
    """Launch the stream kernel 1 + `repeats` (default the session's) times per trip count
    (trip counts interleaved, the L2 evicted before each launch when `flush`), one batch;
    trip -> per repeat (warm-up dropped) the CTAs' windows. `args(out, trips, src)`: the
    kernel's arguments, `src` the `source` buffer shifted by `offsets[r mod len(offsets)]`
    bytes in repeat r. With several offsets (`placements`) each repeat reads its data from
    another place of the buffer, first brought into the L2 by a launch of its own."""
    fn = st.function(session, probe, trips[0])
    reps = repeats or session.repeats
    geometry = st.geometry((grid,), (block,), smem=smem, cluster=cluster)
    scratch: list = []

    def before(t, r):
        """Repeat r: its place read once by an untimed launch (several places), then the
        L2 evicted before each timed launch (`flush`)."""
        src = shifted(source, offsets[r % len(offsets)])
        if len(offsets) > 1 and t == trips[0]:
            if not scratch:
                scratch.append(session.runner.zeros((grid * 32 * 6,)))
            session.runner.enqueue(fn, geometry, args(scratch[0], trips[-1], src), name=name)
        if flush:
            st.flush_l2(session)
    out = session.runner.measure(Plan(
        name, {t: fn for t in trips}, geometry,
        lambda t: (lambda r, rec: args(rec, t, shifted(source, offsets[r % len(offsets)]))),
        reps, record=(grid * 32 * 6,), order=Order.REPEAT, split=True, before=before))
    return {t: [analysis.windows(o, grid) for o in out.timed(t)] for t in trips}


def repeats_for(session: Context, level: Level) -> int:
    """Launches per trip count of a stream: device memory DRAM_STREAM_LAUNCHES (its launches
    scatter 2-6%, a median of 7 moved up to 1.6% night to night), the others the session's."""
    return DRAM_STREAM_LAUNCHES.of(session.repeats) if level is Level.DRAM \
        else session.repeats


def shifted(buf, offset: int):
    """The buffer from byte `offset` on (a view: the kernel gets its address + offset)."""
    return buf[offset // 8:] if offset else buf


PLACES = ("the launches of repeat r read from place r mod {n} of the buffer (each place past "
          "the last one's bytes, on a 2 MiB boundary; read once untimed first)")
TMA_L2_BYTES = 2 * 2 * TMA_STAGE      # each CTA's L2-resident source of the TMA rows


def placements(session: Context, level: Level, per_cta: int) -> tuple[int, ...]:
    """Byte offsets into the big buffer for the repeats of a stream whose CTAs each read
    `per_cta` bytes from it. L2-resident: one place per repeat (as many as fit), 2 MiB-aligned
    past each other. Where the data lies decides which L2 slices serve it: in one process the
    TMA L2 plateau read further apart between places of one buffer than one place repeated
    (docs/movement.md, lab notes), so one place's figure is not the board's. The median over
    places is the figure and their spread its spread. Other levels: one place (0)."""
    if level is not Level.L2:
        return (0,)
    stride = round_up(st.sms(session) * per_cta, GROW)
    count = Bounds(1, most=st.big_bytes(session) // stride).of(session.repeats)
    return tuple(k * stride for k in range(count))


def stream_measurement(session: Context, probe: Probe, key: str,
                       figs: analysis.StreamFigures, row: StreamRow, *, extra: str = "",
                       trips=None) -> Measured:
    """The per-SM figure (B/clk/SM) with the whole-GPU figures in its data."""
    method = METHOD_STREAM.format(threads=BLOCK, ctas=len(figs.sms), unroll=row.unroll,
                                  op=OPS[row.kind], trips=list(trips or row.trips),
                                  reps=repeats_for(session, row.level), extra=extra)
    data = {"gpu_bytes_per_clk": round(figs.gpu_bytes_per_clk, 2),
            "gpu_gbps": round(figs.gbps.value, 1), "gpu_gbps_spread": round(figs.gbps.spread, 1),
            "sms": len(figs.sms), "sass_unit": st.unit(session, probe),
            "tolerance": rate_tol(row)}
    return Measured(Measurement.of_rate(key, figs.per_sm, "B/clk/SM", method=method, data=data),
                    sass=st.sass(session, probe), checks=figs.checks)


# --- the bandwidth rows --------------------------------------------------------------------------

def _layout(session: Context, row: StreamRow) -> tuple[int, int]:
    """(slice bytes per CTA, offset mask) of a row."""
    if row.region is Region.SLICE:
        slice_ = st.slice_bytes(session)
        if row.trips[-1] * row.advance > slice_:
            raise NotApplicable(f"hardware: {row.id}: {row.trips[-1]} iterations of "
                                f"{row.advance} B exceed a CTA's {slice_} B slice")
        return slice_, 0xFFFFFFFF
    return (0 if row.region is Region.SHARED else row.region_bytes), row.region_bytes - 1


def _smem(session: Context, row: StreamRow) -> int:
    if row.region is Region.SHARED:
        return st.smem_for(session, row.region_bytes + row.advance)
    if row.kind is Stream.CP_ASYNC:
        return st.smem_for(session, row.advance)
    return st.lone_smem(session)


def measure_stream(session: Context, row: StreamRow,
                   arch: str) -> analysis.StreamFigures:
    probe = streams.stream_probe(row, arch)
    st.built(session, probe)
    slice_, mask = _layout(session, row)
    big, dst = st.big(session), st.dst(session)
    runs = stream_windows(session, probe, name=probe.name, grid=st.sms(session),
                          smem=_smem(session, row), trips=row.trips,
                          flush=row.level is Level.DRAM, source=big,
                          offsets=placements(session, row.level, row.region_bytes),
                          repeats=repeats_for(session, row.level),
                          args=lambda out, t, src: (out, src, dst, np.uint64(slice_),
                                                    np.uint32(t), np.uint32(mask)))
    moved = 2 if row.kind is Stream.DRAM_COPY else 1
    return analysis.stream_figures(runs, {t: moved * t * row.unroll * row.width * BLOCK
                                          for t in row.trips},
                                   spread_rel=RATE_SPREAD_REL[row.level])


def rate_tol(row, whole_gpu: bool = False) -> dict:
    """The tolerance of a rate from the row's level (a StreamRow or a TMA row); a whole-GPU
    rate's own (expectations/tolerances.yaml)."""
    return st.tol(f"{'gpu_' if whole_gpu else ''}rate_{row.level.value}")


def _peaks(session: Context, row: StreamRow,
           figs: analysis.StreamFigures) -> list[Measurement]:
    """Achieved / documented: shared memory per SM per clock, device memory whole-GPU GB/s."""
    if row.peak == "shared":
        v = figs.per_sm.value / SHARED_PEAK
        return [Measurement.of_value(f"movement.bandwidth.{row.id}.of_peak", v, "ratio",
                                     spread=figs.per_sm.spread / SHARED_PEAK,
                                     unstable=figs.per_sm.why_unstable,
                                     method=f"per-SM figure / {SHARED_PEAK:g} B/clk/SM",
                                     data={"documented": SHARED_PEAK, "source": SHARED_PEAK_SOURCE,
                                           "tolerance": st.tol("of_peak_shared")})]
    peak = hbm_peak(session.gpu.dev.name) if row.peak == "hbm" else None
    if peak is None:
        return []
    gbps, source = peak
    return [Measurement.of_value(
        f"movement.bandwidth.{row.id}.of_peak", figs.gbps.value / gbps, "ratio",
        spread=figs.gbps.spread / gbps, unstable=figs.gbps.why_unstable,
        method=f"whole-GPU GB/s (bytes of all CTAs over the launch's "
               f"%globaltimer window, slope over trip counts) / {gbps:g} GB/s",
        data={"achieved_gbps": round(figs.gbps.value, 1), "documented_gbps": gbps,
              "source": source,
              "tolerance": rate_tol(row, True)})]


def stream_figures(session: Context, row: StreamRow, arch: str):
    return st.once(session, ("stream", row.id), lambda: measure_stream(session, row, arch))


def bandwidth(session: Context, row: StreamRow, arch: str, artifact) -> Measured:
    """A bandwidth row: B/clk per SM, the whole GPU's B/clk and GB/s, achieved / documented.
    The staircase row (device-memory read) also draws the staircase into the report."""
    probe = streams.stream_probe(row, arch)
    figs = stream_figures(session, row, arch)
    extra = ""
    if row.level is Level.DRAM:
        extra = f"; {figs.gbps.value:.0f} GB/s whole GPU (%globaltimer)"
    elif row.level is Level.L2:
        extra = "; " + PLACES.format(n=len(placements(session, row.level, row.region_bytes)))
    measured = stream_measurement(session, probe, f"movement.bandwidth.{row.id}.per_sm", figs,
                                  row, extra=extra)
    # the sum carries the per-SM rate's relative scatter over the launches (a nightly's noise,
    # docs/movement.md, lab notes)
    share = figs.per_sm.spread / figs.per_sm.value if figs.per_sm.value else 0.0
    measured.figures += [_whole_gpu(row, figs, share)] + _peaks(session, row, figs)
    if row.kind is Stream.DRAM_READ:
        st.once(session, ("staircase_plot",), lambda: _staircase(session, arch, artifact))
    return measured


def _whole_gpu(row: StreamRow, figs: analysis.StreamFigures, share: float) -> Measurement:
    """The whole GPU's rate. On-chip rows: the sum over the CTAs (one per SM) of each one's
    own rate, B/clk. Device memory: GB/s over the launch's %globaltimer window. Device memory
    runs on its own clock: the same board's GB/s repeated closer night to night than that sum
    per SM clock (docs/movement.md, lab notes; the sum also counts a CTA that ran alone at
    the start or end of a launch at the rate it had alone)."""
    tol = rate_tol(row, True)
    key = f"movement.bandwidth.{row.id}.gpu"
    if row.level is Level.DRAM:
        return Measurement.of_value(
            key, figs.gbps.value, "GB/s", spread=figs.gbps.spread,
            unstable=figs.gbps.why_unstable,
            method="bytes of all CTAs over the launch's %globaltimer window "
                   "(first CTA's start to last CTA's end), slope over the trip "
                   "counts, median of the launches",
            data={"cta_rates_sum_b_per_clk": round(figs.gpu_bytes_per_clk, 2),
                  "tolerance": tol})
    return Measurement.of_value(key, figs.gpu_bytes_per_clk, "B/clk",
                                spread=figs.gpu_bytes_per_clk * share,
                                method="sum over the CTAs (one per SM) of each one's own rate",
                                data={"tolerance": tol})


def _staircase(session: Context, arch: str, artifact) -> bool:
    stages = [r for r in STREAMS.values() if r.stage]
    points = [(r.stage, stream_figures(session, r, arch).per_sm.value) for r in stages]
    plots.save_staircase(artifact, points, session.gpu.dev)
    return True


# --- TMA bulk copies against the transfer size ---------------------------------------------------

def measure_tma_bw(session: Context, row: TmaBwRow,
                   arch: str) -> analysis.StreamFigures:
    probe = streams.tma_stream_probe(row.size, arch)
    st.built(session, probe)
    dram = row.level is Level.DRAM
    slice_, mask = (st.slice_bytes(session), 0xFFFFFFFF) if dram else \
        (TMA_L2_BYTES, TMA_L2_BYTES - 1)
    big = st.big(session)
    runs = stream_windows(session, probe, name=f"{probe.name}/{row.level.value}",
                          grid=st.sms(session), block=1,
                          smem=st.smem_for(session, 2 * TMA_STAGE), trips=TMA_TRIPS,
                          flush=dram, source=big,
                          offsets=placements(session, row.level, TMA_L2_BYTES),
                          repeats=repeats_for(session, row.level),
                          args=lambda out, t, src: (out, src, src, np.uint64(slice_),
                                                    np.uint32(t), np.uint32(mask)))
    return analysis.stream_figures(runs, {t: (2 + 2 * t) * TMA_STAGE for t in TMA_TRIPS},
                                   spread_rel=RATE_SPREAD_REL[row.level])


def tma_bw_figures(session: Context, row: TmaBwRow, arch: str):
    return st.once(session, ("tma_bw", row.id), lambda: measure_tma_bw(session, row, arch))


METHOD_TMA_BW = ("one thread per CTA, one CTA per SM, two stages of {stage} B in flight, each "
                 "stage {per} cp.async.bulk of {size} B completing on its mbarrier (verified); "
                 "source {where}; per SM: 1 / slope of the busy span over the bytes at {trips} "
                 "iterations, median CTA, median of {reps} launches after a warm-up")


def tma_bandwidth(session: Context, row: TmaBwRow, arch: str) -> Measured:
    figs = tma_bw_figures(session, row, arch)
    probe = streams.tma_stream_probe(row.size, arch)
    where = ("each CTA's slice of a buffer >= 4 x L2, L2 evicted before each launch"
             if row.level is Level.DRAM else "128 KiB per CTA (L2-resident); " + PLACES.format(
                 n=len(placements(session, row.level, TMA_L2_BYTES))))
    return Measured(Measurement.of_rate(
        f"movement.tma.bandwidth.{row.level.value}.s{row.size}", figs.per_sm, "B/clk/SM",
        method=METHOD_TMA_BW.format(stage=TMA_STAGE, per=TMA_STAGE // row.size, size=row.size,
                                    where=where, trips=list(TMA_TRIPS),
                                    reps=repeats_for(session, row.level)),
        data={"gpu_gbps": round(figs.gbps.value, 1), "sass_unit": st.unit(session, probe),
              "tolerance": rate_tol(row)}),
        sass=st.sass(session, probe),
        checks=figs.checks)


def tma_knee(session: Context, level: Level, arch: str, artifact) -> Measured:
    """The smallest transfer size reaching TMA_KNEE_SHARE of the best per-SM rate."""
    rates = [tma_bw_figures(session, TmaBwRow(level, z), arch).per_sm.value for z in TMA_SIZES]
    size = analysis.knee(list(TMA_SIZES), rates)
    st.once(session, ("tma_plot", level.value),
            lambda: plots.save_tma_sizes(artifact, level.value, list(TMA_SIZES), rates,
                                         session.gpu.dev))
    if size is None:
        return Measured(checks=[f"no TMA size sweep rate is finite: {rates}"])
    return Measured(Measurement.of_value(
        f"movement.tma.bandwidth.{level.value}.knee_bytes", float(size), "bytes", spread=None,
        method=f"smallest cp.async.bulk size of {list(TMA_SIZES)} whose per-SM rate reaches "
               f"{TMA_KNEE_SHARE:.0%} of the best size's",
        data={"rates_bytes_per_clk": dict(zip(TMA_SIZES, [round(r, 2) for r in rates])),
              "tolerance": st.tol("count")}))
