"""DPX on the GPU: the topic's module JIT-linked by the driver once (Group "dpx"), each probe's
driver SASS verified, launched through session.runner and fitted once per session; the latency
of a dependent chain (its stored results checked against the CPU reference) and the calls
per clock per SM of the whole-GPU loop, as Measured rows for the hardware_row step."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...core import archs
from ...core.build import Built, Group
from ...core.fit import Fit, Rate, fit
from ...core.gpu import PASSES
from ...core.runner import WHOLE_GPU, Launch, Plan, Runner
from ...core import topic
from ...core.topic import Checked, Context
from ...results import tolerances
from ...results.judge import Measured, Measurement, Result, Status
from . import analysis, kernels, rows
from .kernels import BLOCK, BLOCKS_PER_SM, REC_WORDS, DpxProbe, LoopProbe
from .rows import DpxRow


TRIPS = (64, 128, 192)        # loop trip counts of the throughput measurement
METHOD_LATENCY = ("slope of %clock64 cycles over dependent chains of {lengths} calls of "
                  "{intrinsic} ({ptx}), 1 thread, each call's other sources loaded for it "
                  "alone, median of {reps} launches after a warm-up; driver-JIT SASS verified "
                  "({sass} per call); stored results checked against the CPU reference")
METHOD_RATE = ("whole GPU: {blocks} blocks x {block} threads ({bps} per SM, held by {smem} B "
               "of dynamic shared memory), {chains} independent chains x {unroll} calls of "
               "{intrinsic} per loop iteration per thread; %clock64 per warp, per-SM busy span "
               "(min start .. max end), slope over trip counts {trips} (median over SMs; "
               "median of {reps} launches after a warm-up); driver-JIT SASS verified "
               "({sass} x {per_iter} per iteration + loop control)")


def probes(arch: str) -> list:
    """Every probe of the topic on `arch` (none before sm_80)."""
    return [p for r in rows.ROWS if not r.supported(arch) for p in kernels.mapping_probes(r, arch)]


def groups(arch: str) -> list[Group]:
    ps = probes(arch)
    return [Group("dpx", arch, ps, split=True)] if ps else []


# --- static ---------------------------------------------------------------------------------

def mapping_note(row: DpxRow, arch: str, checked: Checked) -> Result:
    """The call's SASS on this arch (an info note for the reports)."""
    verdict = checked[0][1]
    kind = "hardware DPX" if row.is_hardware(arch) else \
        ("select sequence" if archs.number(arch) >= rows.HARDWARE_ARCH else "emulated")
    return Result(f"sass.dpx.{row.name}", arch, Status.INFO, source="ptxas",
                  detail=f"{row.intrinsic} ({kind}), ptxas {checked.tool.version}: "
                         f"{dict(verdict.unit)}",
                  data={"unit": dict(verdict.unit), "kind": kind, "ptxas": checked.tool.version})


# --- latency --------------------------------------------------------------------------------

@dataclass
class ChainRun:
    probe: DpxProbe
    built: Built
    cycles: dict[int, list[int]]        # chain length -> cycles per repeat
    outputs: dict[int, np.ndarray]      # chain length -> the last launch's out slots
    words: dict[int, np.ndarray]        # chain length -> the input words
    unit: dict = field(default_factory=dict)

    def fit(self) -> Fit:
        return fit(self.cycles, self.probe.ops, spread_abs=0.5, spread_rel=0.01)


def chain_plan(probe: DpxProbe, compiled, repeats: int, words: dict) -> Plan:
    """1 + `repeats` one-thread launches per chain length (one batch, one wait); each
    length's input words (drawn into `words`) uploaded before its records are allocated."""

    def args(n):
        words[n] = analysis.input_words(len(probe.inputs[n]))
        d_in = Runner.to_device(words[n])
        return lambda r, rec: (rec, d_in, np.uint32(PASSES))
    return Plan(probe.name, {n: compiled.function(e) for n, e in probe.entries.items()},
                Launch((1,), (1,)), args, repeats, record=lambda n: (probe.out_slots[n],),
                dtype=np.int64)


def launch_chain(runner: Runner, probe: DpxProbe, compiled,
                 repeats: int) -> tuple[dict, dict, dict]:
    """(cycles per repeat, the last launch's out slots, the input words) per length."""
    words: dict = {}
    host = runner.measure(chain_plan(probe, compiled, repeats, words)).raw
    return ({n: [int(v) for v in h[1:, 0]] for n, h in host.items()},
            {n: h[-1] for n, h in host.items()}, words)


def chain_run(session: Context, row: DpxRow, arch: str) -> ChainRun:
    """JIT (the topic's module), verify the driver's SASS, launch: once per session."""
    probe = kernels.latency_probe(row, arch)

    def make() -> ChainRun:
        built, verdict = topic.built(session, probe)
        cycles, outputs, words = launch_chain(session.runner, probe, built.compiled,
                                              session.repeats)
        return ChainRun(probe, built, cycles, outputs, words, dict(verdict.unit))
    return session.runs.once(("dpx", "latency", row.name, arch, probe.digest), make)


def result_checks(row: DpxRow, arch: str, run: ChainRun) -> list[str]:
    """Every stored result of every chain length against the CPU reference."""
    out = []
    for n, slots in run.outputs.items():
        expected = analysis.replay(row, kernels.chain_layout(row, n), run.words[n])
        stored = kernels.stored(row, arch, n)
        out += analysis.mismatches(row, expected, stored, slots[1:1 + len(stored)])
    return out


def latency(session: Context, row: DpxRow, arch: str) -> Measured:
    """Cycles per call of a dependent chain (the result of each call is the next one's a)."""
    run = chain_run(session, row, arch)
    p = run.probe
    sass = " + ".join(f"{v:g} x {k}" for k, v in run.unit.items())
    method = METHOD_LATENCY.format(lengths=sorted(p.ops), intrinsic=row.intrinsic,
                                   ptx="sm_90 inline PTX" if archs.number(arch) >= 90 else
                                   "the emulation nvcc emits", reps=session.repeats, sass=sass)
    m = Measurement.of_fit(f"dpx.latency.{row.name}", run.fit(), "cycles/op", method=method,
                           data={"sass_unit": run.unit, "cycles": run.cycles,
                                 "tolerance": tolerances.of("dpx", "latency")})
    return Measured(m, sass=p.snapshot_text(run.built.functions),
                    checks=result_checks(row, arch, run))


# --- throughput -----------------------------------------------------------------------------

@dataclass
class LoopRun:
    probe: LoopProbe
    built: Built
    rate: analysis.CallRate
    unit: dict
    loop_control: dict
    smem: int
    wall_ms: dict = field(default_factory=dict)


def launch_loop(runner: Runner, probe: LoopProbe, compiled, repeats: int,
                trips: tuple[int, ...] = TRIPS) -> tuple[dict, int]:
    """1 + `repeats` whole-GPU launches per trip count (the first a warm-up), every trip
    count's records allocated first, one wait: (trip -> (repeats, warps, 3) records, dynamic
    shared memory per block)."""
    dev = runner.gpu.dev
    blocks = dev.sm_count * BLOCKS_PER_SM
    threads = blocks * BLOCK
    smem = analysis.dynamic_smem(dev.shared_per_sm, BLOCKS_PER_SM)
    words = analysis.input_words(32 * max(1, len(probe.inputs[probe.length])))
    d_in = Runner.to_device(words)
    d_res = Runner.zeros(threads * probe.out_slots[probe.length], dtype=np.uint64)
    fn = compiled.function(probe.entry)
    out = runner.measure(Plan(
        probe.name, {t: fn for t in trips}, Launch((blocks,), (BLOCK,), smem=smem),
        lambda t: (lambda r, rec: (rec, d_res, d_in, np.uint32(t))), repeats,
        record=(threads // 32, REC_WORDS), upfront=True))
    return {t: out.timed(t) for t in trips}, smem


def loop_run(session: Context, row: DpxRow, arch: str) -> LoopRun:
    probe = kernels.loop_probe(row, arch)

    def make() -> LoopRun:
        built, verdict = topic.built(session, probe)
        reps = WHOLE_GPU.of(session.repeats)
        records, smem = launch_loop(session.runner, probe, built.compiled, reps)
        warps_per_sm = BLOCKS_PER_SM * BLOCK // 32
        calls = {t: float(warps_per_sm * 32 * t * probe.ops[probe.length]) for t in records}
        return LoopRun(probe, built, analysis.rate(records, calls), dict(verdict.unit),
                       dict(verdict.loop_control), smem)
    return session.runs.once(("dpx", "throughput", row.name, arch, probe.digest), make)


def throughput(session: Context, row: DpxRow, arch: str) -> Measured:
    """Calls per clock per SM of the whole-GPU loop (clock-invariant: %clock64 counts SM
    cycles); a 16x2 call does two lanes."""
    run = loop_run(session, row, arch)
    r, dev = run.rate, session.gpu.dev
    method = METHOD_RATE.format(blocks=dev.sm_count * BLOCKS_PER_SM, block=BLOCK,
                                bps=BLOCKS_PER_SM, smem=run.smem, chains=kernels.CHAINS,
                                unroll=kernels.UNROLL, intrinsic=row.intrinsic,
                                trips=list(TRIPS), reps=len(r.rates), sass=row.unit[0],
                                per_iter=run.probe.ops[run.probe.length])
    rate = Rate(r.rate, r.spread, r.rates, r.intercept, r.residual, r.unstable, r.why,
                {t: float(np.median(v)) for t, v in r.spans.items()})
    m = Measurement.of_rate(f"dpx.throughput.{row.name}", rate, "ops/clk/SM", method=method,
                           data={"sass_unit": run.unit, "loop_control": run.loop_control,
                                 "lanes_per_call": len(analysis.LANES[row.lanes]),
                                 "warps_per_sm": r.warps_per_sm,
                                 "tolerance": tolerances.of("dpx", "rate")})
    return Measured(m, sass=run.probe.snapshot_text(run.built.functions))
