"""The FP8 mma.sync emulation on sm_90 on the GPU: the probes JIT-linked once (Group
"fp8_emulated"), every kernel's driver SASS verified as a counted loop of the F2FP + HMMA +
FADD sequence per op, launched with 1 to 32 warps on one SM at three trip counts (the
tensor sweeps' launcher), fitted once per session; its cost per op in a C-dependent chain,
its throughput against the FP8 peak and against the native FP8 wgmma measured in the same
session (wgmma_depth row e4m3.f32.m64n256k32)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ....core.build import Group
from ....core.runner import Runner
from ....core import topic
from ....core.topic import Context
from ....results.judge import Measured, Measurement
from . import kernels as fe
from ..mma.launch import launch_all, launchable
from ..wgmma import analysis as wa
from ..wgmma import run as wgmma_depth_run
from ..mma.probes import WARP
from ..wgmma.rows import row as depth_row
from ..tolerance import tol


NATIVE = "e4m3.f32.m64n256k32"
METHOD = ("{instr} on sm_90 (no FP8 mma.sync tensor instruction: per op {sass}); W warps on "
          "one SM after a bar.sync, each ILP independent accumulator chains in a counted loop "
          "of {steps} ops per chain per trip between two %clock64 reads, every op loading its "
          "own A and B fragments from shared memory (volatile: no conversion shared or "
          "hoisted); cycles per chain step = slope over the trip counts of the mean warp "
          "span, throughput = FLOP / slope of the block span (max end - min start); median of "
          "{reps} launches per trip count after a warm-up, stable when the launches' slopes "
          "agree within 5% (interquartile range) and the warps' start skew is under 1% of "
          "the block span; driver-JIT SASS verified (the loop's trip holds that sequence per "
          "op and the loop control, nothing else)")


def groups(arch: str) -> list[Group]:
    ps = fe.probes(arch)
    return [Group("fp8_emulated", fe.ARCH, ps, text=fe.module_text)] if ps else []


def static_probe(r: fe.EmulationRow, arch: str) -> fe.EmulationProbe:
    fe.require(arch, "static: ")
    return fe.probe(r, 1, arch)


def launch(runner: Runner, p: fe.EmulationProbe, compiled, reps: int,
           skipped: dict) -> dict:
    """{warps: {trips: clocks (repeats, warps, 2) [start, end]}} for every warp count the
    kernel's registers allow (the others: `skipped`, warps -> why)."""
    refused: dict = {}
    res = launch_all(runner, launchable([p], compiled, refused), compiled, repeats=reps,
                     skipped=refused)
    skipped.update({warps: why for (_, warps), why in refused.items()})
    return {threads // WARP: raw for (_, threads, _), raw in res.items()}


@dataclass
class EmulationRun:
    points: list = field(default_factory=list)
    sass: str = ""
    unit: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)
    repeats: int = 0                 # timed launches per trip count


def run_row(session: Context, r: fe.EmulationRow, arch: str) -> EmulationRun:
    fe.require(arch, "hardware: ")

    def make() -> EmulationRun:
        out = EmulationRun(repeats=session.repeats)
        for ilp in fe.ILPS:
            p = fe.probe(r, ilp, arch)
            built, verdict = topic.built(session, p, groups)
            if ilp == 1:
                out.sass, out.unit = p.snapshot_text(built.functions), dict(verdict.unit)
            skipped: dict = {}
            for w, recs in launch(session.runner, p, built.compiled, out.repeats, skipped).items():
                out.points.append(fe.point(recs, w, ilp))
            out.skipped.update({f"ilp{ilp}@w{w}": why for w, why in skipped.items()})
        return out
    return session.runs.once(("tensor", "fp8_emulated", r.name, arch), make)


def _figure(key, value, spread, why, unit, method, data) -> Measurement:
    return Measurement.of_value(key, value, unit, spread=spread, unstable=why, method=method,
                                data=data)


def figures(session: Context, r: fe.EmulationRow, arch: str) -> Measured:
    run = run_row(session, r, arch)
    sass = " + ".join(f"{v:g} x {k}" for k, v in run.unit.items())
    method = METHOD.format(instr=r.instruction, sass=sass, steps=fe.STEPS, reps=run.repeats)
    base = next(p for p in run.points if p.warps == 1 and p.ilp == 1)
    stable = [p for p in run.points if not p.unstable]
    top = max(stable, key=lambda p: p.throughput) if stable else None
    out = [_figure(f"{r.key}.accumulate_chain_cycles", base.latency, base.lat_spread,
                   base.lat_why, "cycles/op", "1 warp, one chain: cycles per op of a C-dependent "
                   "chain (C enters only the 4 FADD; the HMMAs of consecutive ops are "
                   "independent); " + method,
                   {"tolerance": tol("emulated"), "sass_unit": run.unit})]
    grid = {f"w{p.warps}_ilp{p.ilp}": round(p.throughput, 1) for p in run.points}
    if top is None:   # reported, flagged: the best point, with why none could be trusted
        best = max(run.points, key=lambda p: p.throughput)
        why = "; ".join(sorted({p.why for p in run.points if p.why})) or "no stable point"
        out.append(_figure(f"{r.key}.throughput", best.throughput, best.thr_spread,
                           f"no stable point ({why})", "flop/clk/SM",
                           f"best point: {best.warps} warps, ILP {best.ilp}; " + method,
                           {"grid": grid, "skipped": run.skipped}))
        return Measured(*out, sass=run.sass)
    where = f"best stable point: {top.warps} warps, ILP {top.ilp}"
    out += [_figure(f"{r.key}.throughput", top.throughput, top.thr_spread, "", "flop/clk/SM",
                    f"{where}; " + method, {"tolerance": tol("emulated_throughput"), "grid": grid,
                                            "skipped": run.skipped}),
            _figure(f"{r.key}.vs_native_peak", top.throughput / r.native_peak,
                    top.thr_spread / r.native_peak, "", "ratio",
                    f"emulated throughput over the native FP8 dense peak {r.native_peak} "
                    f"FLOP/clk/SM ({r.peak_source})", {"tolerance": tol("emulated_fraction")})]
    native = wa.best(wgmma_depth_run.row_run(session, depth_row(NATIVE), arch).points)
    if native is not None:
        out.append(_figure(f"{r.key}.vs_native_wgmma", top.throughput / native.throughput,
                           0.0, "", "ratio",
                           f"emulated throughput over the native wgmma {NATIVE} measured in this "
                           f"session ({native.throughput:.0f} FLOP/clk/SM at {native.label})",
                           {"tolerance": tol("emulated_fraction")}))
    return Measured(*out, sass=run.sass)
