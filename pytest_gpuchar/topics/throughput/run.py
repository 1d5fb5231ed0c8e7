"""The throughput and launch tables on the GPU: the topic's module JIT-linked by the driver
once, each kernel's SASS verified (session.verify), launched through session.runner, fitted once per
session; the figures as Measured rows for the hardware_row step.

Throughput (clock64 per warp): per SM the busy span is max(end) - min(start) over its warps;
the launch is repeated for three trip counts and the per-SM cycles fitted against the per-SM
op count, so launch skew, operand loads and the final stores cancel. The slope is cycles per
op per SM; its inverse is ops/clk/SM (clock-invariant: %clock64 counts SM cycles).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ...core import values
from ...core.build import Built, Group
from ...core.fit import Fit, Rate, fit, residual
from ...core.runner import Launch as Geometry
from ...core.runner import WHOLE_GPU, Order, Plan, Runner
from ...core import topic
from ...core.topic import Checked, Context
from ...results import tolerances
from ...results.judge import Measured, Measurement, NoFigure, Result, Status
from . import analysis, kernels, rows
from .kernels import BAR_UNROLL, BLOCK, BLOCKS_PER_SM, REC_WORDS, STAMP_WORDS, ThroughputProbe
from .rows import LaunchCost, ThroughputRow
from .verify import LoopVerdict


TRIPS = (64, 128, 192)        # loop trip counts: the differential measurement
BAR_TRIPS = (8, 16, 24)
WARPS = (2, 4, 8, 16, 32)     # warp launch: warps per block
SERIAL_BLOCKS = (2, 4, 8)     # block launch: blocks per SM, run one after the other

METHOD = ("whole GPU: {blocks} blocks x {block} threads ({bps} per SM, all resident, held to "
          "{bps} per SM by {smem} B dynamic shared memory), {chains} "
          "independent chains x {unroll} ops per loop iteration per thread; %clock64 per warp, "
          "per-SM busy span (min start .. max end), slope over trip counts {trips} "
          "(median of {reps} launches after a warm-up, median over SMs)")
METHOD_BAR = ("one block of {nt} threads per SM, loop of {u} bar.sync 0 per iteration; per "
              "block max(end) - min(start) of its warps' %clock64; slope over trip counts "
              "{trips} (median over blocks, median of {reps} launches after a warm-up)")
METHOD_LAUNCH = {
    LaunchCost.WARP: "blocks of {w} warps, one per SM, %clock64 at each warp's entry; per block the "
                 "last warp's entry minus the first's (median over blocks); the figure is that "
                 "skew for the largest block divided by its warps - 1 (median of {reps} "
                 "launches); the slope over block sizes is in the data",
    LaunchCost.BLOCK: "one-warp blocks made exclusive on their SM by dynamic shared memory (> half "
                  "the SM's), grids of {b} x SMs blocks run in turn; every SM's busy span "
                  "against the number of blocks it actually ran, least-squares slope per launch "
                  "set, median of {reps}, minus the block's own entry-to-exit cycles; "
                  "cross-checked against the median gap between consecutive blocks of one SM "
                  "(exit to next entry, within 15%)",
    LaunchCost.ISSUE_CYCLE: "cycles between two warp instructions of one scheduler at the fastest "
                        "measured rate: 4 schedulers x 32 lanes / max results/clk/SM of the "
                        "single-result throughput rows measured in this session (FFMA at least)",
}
# the kind of tolerance (expectations/tolerances.yaml) each launch figure proposes
TOL_LAUNCH = {LaunchCost.WARP: "warp_launch", LaunchCost.BLOCK: "block_launch",
              LaunchCost.ISSUE_CYCLE: "issue_cycle"}


def tol(kind: str) -> dict:
    """The tolerance of `kind` a figure records for a new expectation entry."""
    return tolerances.of("throughput", kind)


def groups(arch: str) -> list[Group]:
    """The topic's one module: every throughput row, bar.sync and the launch stamps."""
    probes = kernels.topic_probes(arch)
    return [Group("throughput", arch, probes,
                  text=lambda _part: kernels.module_text(arch, probes))]


def snapshot(checked: Checked) -> str:
    """What static_check snapshots: the kernel's normalised SASS, nothing else."""
    return "".join(b.probe.snapshot_text(b.functions) for b, _ in checked)


def launch_snapshot(kind: LaunchCost) -> Callable[[Checked], str] | None:
    """The launch rows' snapshot: the stamp kernel's SASS; none for the issue cycle (its
    kernel is the FFMA row's, snapshotted by the FMA table)."""
    return None if kind is LaunchCost.ISSUE_CYCLE else snapshot


def repeats(session: Context) -> int:
    return WHOLE_GPU.of(session.repeats)


def _input(probe: ThroughputProbe):
    """The `in` buffer: one block of input slots per lane of a warp."""
    return Runner.to_device(np.tile(np.frombuffer(values.input_buffer(probe.slots), np.uint8), 32))


def _by_trip(d: dict) -> dict[str, object]:
    return {str(t): v for t, v in d.items()}


# --- whole-GPU throughput ------------------------------------------------------------------

@dataclass
class ThroughputRun:
    """Whole-GPU throughput of one row: per-trip-count per-repeat per-SM busy cycles."""
    probe: ThroughputProbe
    built: Built
    rate: float                       # results per clock per SM (median over repeats)
    spread: float                     # max - min of per-repeat rates
    unstable: bool
    why: str
    cycles: dict[int, list[float]]    # trip count -> per-repeat median (over SMs) busy cycles
    results_per_sm: dict[int, float]  # trip count -> results per SM
    sms: int
    warps_per_sm: list[int]
    verdict: LoopVerdict
    wall_ms: dict[int, float] = field(default_factory=dict)
    fit_intercept: float = 0.0
    method: str = ""
    rates: list[float] = field(default_factory=list)   # per-repeat rates

    def as_rate(self) -> Rate:
        """The rate (results/clk/SM, the inverse of the fitted slope) for
        Measurement.of_rate."""
        med = {t: float(statistics.median(v)) for t, v in self.cycles.items()}
        off = residual(med, self.results_per_sm, 1.0 / self.rate, self.fit_intercept) \
            if self.rate > 0 else float("nan")
        return Rate(self.rate, self.spread, self.rates, self.fit_intercept, off,
                    self.unstable, self.why, med)

    def sass(self) -> str:
        return self.probe.snapshot_text(self.built.functions)


def _launch_rows(session: Context, p: ThroughputProbe, fn, reps: int,
                 trips: tuple[int, ...]) -> tuple[dict, dict, int]:
    """1 + `reps` launches per trip count on every SM (the first a warm-up; trip counts
    interleaved repeat by repeat), each timed by its events and waited for under the
    watchdog: (records per trip, wall ms per trip, warps)."""
    dev = session.gpu.dev
    blocks = dev.sm_count * BLOCKS_PER_SM
    threads = blocks * BLOCK
    warps = threads // 32
    d_in = _input(p)
    d_res = Runner.zeros(threads * p.result_slots, dtype=np.uint64)
    out = session.runner.measure(Plan(
        p.name, {t: fn for t in trips},
        Geometry((blocks,), (BLOCK,), smem=analysis.dynamic_smem(dev.shared_per_sm)),
        lambda t: (lambda r, rec: (rec, d_res, d_in, np.uint32(t))), reps,
        record=(warps, REC_WORDS), order=Order.REPEAT, sync_each=True))
    return ({t: out.raw[t] for t in trips}, {t: out.timed_ms(t) for t in trips}, warps)


def measure_throughput(session: Context, p: ThroughputProbe, *, reps: int,
                       trips: tuple[int, ...] = TRIPS) -> ThroughputRun:
    """JIT (driver), verify the driver's SASS, launch on every SM, fit."""
    built, verdict = topic.built(session, p, groups)
    host, wall, warps = _launch_rows(session, p, built.compiled.function(p.entry), reps, trips)
    spans, sms, warps_per_sm = analysis.trip_spans(host, reps)
    wps = warps // max(1, sms)
    results_per_sm = {t: float(wps * 32 * t * p.results_per_iter()) for t in trips}
    rate = analysis.rate_from_spans(spans, results_per_sm)
    unstable, why = rate.unstable, rate.why
    if len(warps_per_sm) != 1:
        unstable, why = True, (f"warps per SM differ between SMs ({warps_per_sm}): blocks were "
                               f"not spread evenly; per-SM op counts are not known")
    dev = session.gpu.dev
    method = METHOD.format(blocks=dev.sm_count * BLOCKS_PER_SM, block=BLOCK, bps=BLOCKS_PER_SM,
                           smem=analysis.dynamic_smem(dev.shared_per_sm), chains=p.chains,
                           unroll=p.unroll, trips=list(trips), reps=reps)
    return ThroughputRun(p, built, rate.rate, rate.spread, unstable, why, spans, results_per_sm,
                         sms, warps_per_sm, verdict,
                         {t: float(statistics.median(v)) for t, v in wall.items()},
                         rate.intercept, method, rate.rates)


def _key(row: ThroughputRow, arch: str) -> tuple:
    return ("throughput", row.name, arch)


def measured(session: Context, row: ThroughputRow, arch: str) -> ThroughputRun:
    """The row's whole-GPU throughput, measured once per session (ratios reuse it)."""
    return session.runs.once(_key(row, arch), lambda: measure_throughput(
        session, kernels.row_probe(row, arch, "hardware"), reps=repeats(session)))


def fma(session: Context, row: ThroughputRow, arch: str) -> Measured:
    """Seed 001: FMA results per clock per SM, as achieved/peak, and per FFMA's."""
    m = measured(session, row, arch)
    unit = " + ".join(m.verdict.unit)
    peak = rows.peak(row.name, arch)
    data = {"sass_unit": m.verdict.unit, "loop_control": m.verdict.loop_control,
            "cycles_per_sm": _by_trip(m.cycles), "results_per_sm": _by_trip(m.results_per_sm),
            "sms": m.sms, "warps_per_sm": m.warps_per_sm, "wall_ms": m.wall_ms,
            "peak": peak, "peak_source": rows.PEAK_SOURCE, "tolerance": tol("fma")}
    figures = [Measurement.of_rate(f"throughput.fma.{row.name}", m.as_rate(), "fma/clk/SM",
                                  method=m.method, data=data)]
    if peak:
        frac = m.rate / peak
        figures.append(Measurement.of_value(
            f"throughput.peak_fraction.{row.name}", frac, "ratio", spread=None,
            method=f"measured fma/clk/SM over the documented peak {peak:g} ({rows.PEAK_SOURCE})",
            detail=(f"{unit} ({row.unit_fu}) reached {frac:.1%} of its documented peak "
                    f"{peak:g} fma/clk/SM ({m.rate:.1f} measured)"),
            data={"peak": peak, "tolerance": tol("peak_fraction")}))
    if row.name != "ffma":
        base = measured(session, rows.ROWS["ffma"], arch)
        figures.append(Measurement.of_value(
            f"throughput.ratio.{row.name}_per_ffma", m.rate / base.rate, "ratio", spread=None,
            method="measured fma/clk/SM of this row over FFMA's (same method)",
            data={"ffma": base.rate, "tolerance": tol("fma")}))
    return Measured(*figures, sass=m.sass())


def operand_audit(session: Context, row: ThroughputRow, arch: str) -> Measured:
    """The operand-pattern audit: an FMA with three distinct source registers per op, beside
    the same unit's two-register row (the suite's figure): the share of the unit's rate the
    third register costs is recorded every run, as evidence for the figure the row reports."""
    m = measured(session, row, arch)
    base = measured(session, rows.ROWS[row.name.split(".")[0]], arch)
    peak = rows.peak(row.name, arch)
    return Measured(Measurement.of_rate(
        f"throughput.fma.{row.name}", m.as_rate(), "fma/clk/SM",
        method=m.method + f"; {row.note}",
        detail=(f"{' + '.join(m.verdict.unit)}: {m.rate:.1f} fma/clk/SM with three source "
                f"registers, {base.rate:.1f} with two ({m.rate / base.rate:.1%})"),
        data={"sass_unit": m.verdict.unit, "two_registers": base.rate,
              "share_of_two_registers": round(m.rate / base.rate, 4), "peak": peak,
              "cycles_per_sm": _by_trip(m.cycles), "tolerance": tol("fma")}),
        sass=m.sass())


def units(session: Context, row: ThroughputRow, arch: str) -> Measured:
    """Seed 002 Tables 1-2..1-4: results per clock per SM of one functional-unit row."""
    m = measured(session, row, arch)
    peak = rows.peak(row.name, arch)
    return Measured(Measurement.of_rate(
        f"throughput.unit.{row.name}", m.as_rate(), "ops/clk/SM",
        method=m.method + (f"; {row.note}" if row.note else ""),
        detail=f"{row.category} ({row.unit_fu}): SASS {m.verdict.unit}",
        data={"sass_unit": m.verdict.unit, "category": row.category,
              "functional_unit": row.unit_fu, "peak": peak,
              "peak_fraction": None if not peak else round(m.rate / peak, 4),
              "cycles_per_sm": _by_trip(m.cycles), "sms": m.sms,
              "warps_per_sm": m.warps_per_sm, "tolerance": tol("unit")}), sass=m.sass())


def benchmark(bench, session: Context, row: ThroughputRow, arch: str) -> None:
    """pytest-benchmark: one synchronised launch of the row's kernel on every SM, timed;
    the measured rate and cycles in its extra_info (the nightly history)."""
    m = measured(session, row, arch)
    bench.extra_info.update({"arch": arch, "row": row.name, "fma_per_clk_per_sm": m.rate,
                             "cycles_per_sm": _by_trip(m.cycles),
                             "peak": rows.peak(row.name, arch)})
    bench.pedantic(launcher(session, m), rounds=3, iterations=1)


def launcher(session: Context, m: ThroughputRun, trips: int = TRIPS[-1]):
    """A callable that launches the row's kernel once on every SM and waits for it (the
    timer pytest-benchmark uses then measures a synchronised launch)."""
    dev, p = session.gpu.dev, m.probe
    fn = m.built.compiled.function(p.entry)
    blocks = dev.sm_count * BLOCKS_PER_SM
    d_in = _input(p)
    d_res = Runner.zeros(blocks * BLOCK * p.result_slots, dtype=np.uint64)
    rec = Runner.zeros((blocks * BLOCK // 32, REC_WORDS), dtype=np.uint64)
    geometry = Geometry((blocks,), (BLOCK,), smem=analysis.dynamic_smem(dev.shared_per_sm))

    def once():
        session.runner.once(p.name, fn, geometry, (rec, d_res, d_in, np.uint32(trips)))
    return once


# --- bar.sync ------------------------------------------------------------------------------

@dataclass
class BarRun:
    fit: Fit
    verdict: LoopVerdict
    cycles: dict[int, list[float]]    # trip count -> per-repeat median block span
    sass: str


def measure_bar(session: Context, arch: str, threads: int, reps: int) -> BarRun:
    """Cycles per bar.sync of a block of `threads` threads (slope over trip counts)."""
    p = kernels.bar_probe(arch, threads)
    built, verdict = topic.built(session, p, groups)
    fn = built.compiled.function(p.entry)
    blocks = session.gpu.dev.sm_count
    wpb = threads // 32
    d_in = _input(p)
    d_res = Runner.zeros(blocks * threads * p.result_slots, dtype=np.uint64)
    out = session.runner.measure(Plan(
        p.name, {t: fn for t in BAR_TRIPS}, Geometry((blocks,), (threads,)),
        lambda t: (lambda r, rec: (rec, d_res, d_in, np.uint32(t))), reps,
        record=(blocks * wpb, REC_WORDS), order=Order.REPEAT))
    cycles = {t: [float(statistics.median(analysis.block_spans(h, wpb)))
                  for h in out.timed(t)] for t in BAR_TRIPS}
    f = fit(cycles, {t: t * BAR_UNROLL for t in BAR_TRIPS}, spread_abs=1.0, spread_rel=0.05)
    return BarRun(f, verdict, cycles, p.snapshot_text(built.functions))


def bar_sync(session: Context, threads: int, arch: str) -> Measured:
    """Seed 002 Tables 1-5..1-7: cycles per bar.sync of a whole block of `threads`."""
    reps = repeats(session)
    b = session.runs.once(("throughput", "bar.sync", threads, arch),
                          lambda: measure_bar(session, arch, threads, reps))
    return Measured(Measurement.of_fit(
        f"throughput.bar_sync.nt{threads}", b.fit, "cycles",
        method=METHOD_BAR.format(nt=threads, u=BAR_UNROLL, trips=list(BAR_TRIPS), reps=reps),
        data={"sass_unit": b.verdict.unit, "loop_control": b.verdict.loop_control,
              "block_cycles": _by_trip(b.cycles), "tolerance": tol("bar_sync")}), sass=b.sass)


# --- launch overheads ----------------------------------------------------------------------

def _stamps(session: Context, kind: LaunchCost, arch: str):
    """(probe, driver SASS, verdict, launchable function) of a launch-stamp kernel."""
    p = kernels.stamp_probe(kind, arch)
    built, verdict = topic.built(session, p, groups)
    return p, p.snapshot_text(built.functions), verdict, built.compiled.function(p.entries[0])


def measure_warp_launch(session: Context, arch: str,
                        reps: int) -> tuple[analysis.Launched, str]:
    p, text, verdict, fn = _stamps(session, LaunchCost.WARP, arch)
    blocks = session.gpu.dev.sm_count
    out = session.runner.measure(Plan(
        p.name, {w: fn for w in WARPS}, lambda w: Geometry((blocks,), (w * 32,)),
        lambda w: (lambda r, rec: (rec,)), reps, record=lambda w: (blocks * w, STAMP_WORDS),
        order=Order.REPEAT))
    skew = {w: [float(statistics.median(analysis.warp_start_skew(h, w)))
                for h in out.timed(w)] for w in WARPS}
    return analysis.warp_launch_figure(skew, verdict.setup), text


def measure_block_launch(session: Context, arch: str,
                         reps: int) -> tuple[analysis.Launched, str]:
    p, text, verdict, fn = _stamps(session, LaunchCost.BLOCK, arch)
    sms = session.gpu.dev.sm_count
    smem = session.gpu.dev.shared_per_sm // 2 + 1024      # two blocks can never share an SM
    out = session.runner.measure(Plan(
        p.name, {b: fn for b in SERIAL_BLOCKS},
        lambda b: Geometry((sms * b,), (32,), smem=smem, driver=True),
        lambda b: (lambda r, rec: (rec,)), reps, record=lambda b: (sms * b, STAMP_WORDS),
        order=Order.REPEAT))
    seen = analysis.serial_records([[out.raw[b][r] for b in SERIAL_BLOCKS]
                                    for r in range(1, reps + 1)])
    data = {"dynamic_shared_bytes": smem, "blocks_per_sm_seen": sorted(seen.counts),
            "setup": verdict.setup}
    return analysis.block_launch_figure(seen.per_repeat, seen.bodies, seen.gaps,
                                        seen.overlapped, data), text


MEASURE_LAUNCH = {LaunchCost.WARP: measure_warp_launch, LaunchCost.BLOCK: measure_block_launch}


def launch(session: Context, kind: LaunchCost, arch: str) -> Measured:
    """Seed 002 Table 1-8: warp launch overhead, block launch overhead, issue cycle. Raises
    NoFigure when the records give none."""
    if kind is LaunchCost.ISSUE_CYCLE:
        return issue_cycle(session, arch)
    reps = repeats(session)
    res, text = session.runs.once(("throughput", "launch", kind.value, arch),
                                  lambda: MEASURE_LAUNCH[kind](session, arch, reps))
    key = f"throughput.launch.{kind.value}"
    if not math.isfinite(res.value):
        raise NoFigure(f"probe invalid: launch/{kind.value}: {res.why}",
                       Result(key, arch, Status.INVALID, detail=res.why,
                              data={k: str(v) for k, v in res.data.items()}))
    data = {k: (str(v) if isinstance(v, dict) else v) for k, v in res.data.items()}
    return Measured(Measurement.of_value(
        key, res.value, "cycles", spread=res.spread, unstable=res.why if res.unstable else "",
        method=METHOD_LAUNCH[kind].format(
            w=list(WARPS), b=list(SERIAL_BLOCKS), reps=reps),
        data={**data, "tolerance": tol(TOL_LAUNCH[kind])}), sass=text)


def issue_cycle(session: Context, arch: str) -> Measured:
    """Many-BSP's issue_cycle from the fastest single-result row measured in this session
    (FFMA measured if it was not)."""
    rates = {}
    for r in rows.UNIT_ROWS + rows.FMA_ROWS:
        if r.results_per_op == 1 and r.supported(arch) is None and _key(r, arch) in session.runs:
            m = measured(session, r, arch)
            if not m.unstable:
                rates[r.name] = m.rate
    if "ffma" not in rates:
        rates["ffma"] = measured(session, rows.ROWS["ffma"], arch).rate
    best = max(rates, key=rates.get)
    return Measured(Measurement.of_value(
        "throughput.launch.issue_cycle", analysis.issue_cycle(rates), "cycles", spread=None,
        method=METHOD_LAUNCH[LaunchCost.ISSUE_CYCLE],
        data={"fastest_row": best, "rate": rates[best], "rows_seen": len(rates),
              "tolerance": tol(TOL_LAUNCH[LaunchCost.ISSUE_CYCLE])}))
