"""The tensor-core probe types: ``TensorProbe`` (a row at one ILP: a counted loop of STEPS
dependent steps per trip), ``LdmatrixProbe`` (its shared buffer is the pointer-chase layout)
and ``WgmmaProbe`` (issued per warpgroup: a throughput loop and, at ILP 1, a completion-latency
loop), how their timed regions are verified in SASS, and how many trips each launch runs.

Only this topic knows the tensor instructions' operand shapes. Every timed region must be one
counted loop (core.loop.verify_loop: exactly STEPS*ILP*(SASS per op) tensor instructions per
trip, named loop control, only setup around it) whose body is STEPS deep (the chains are
dependent); a wgmma loop body holds its fixed fence (WARPGROUP.ARRIVE) and wait
(WARPGROUP.DEPBAR) once per trip. The loop control is part of every trip's cost: it is
reported with the figures (``LoopVerdict.loop_control``).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ....core import loop, sass, toolchain
from ....core.loop import LoopVerdict, verify_loop
from ....core.probe import NotApplicable, Probe
from ....core.ptx import InputSlot
from ....core.verify import ProbeInvalid
from . import operands
from ..wgmma.kernels import verify_wgmma_trips
from .analysis import FitSpec, plan_trips
from .rows import (STEPS, WGMMA_GROUPS, WGMMA_LAT_TRIPS, WGMMA_SPAN_PER_WARP, WGMMA_STEPS,
                   WGMMA_SWEEP, Kind, TensorRow, WgmmaRow)

WARP = 32
WARPGROUP = 128


class Unsupported(NotApplicable):
    """The arch lacks this shape/type: the reason, given before any ptxas run (a skip)."""


# Scheduling filler between dependent tensor instructions is left out of the verified region
# (core.loop.never_executed): NOP (the driver JIT of 580.x pads HMMA chains with them) and the
# never-executed '@!UPT UIADD3 URZ, URZ, URZ, URZ' of ptxas 13.x.
never_executed = loop.never_executed


def without_filler(func: sass.Function) -> sass.Function:
    """The function without never-executed filler (labels re-indexed): what verify_loop
    checks. ptxas 13.x puts an '@!UPT UIADD3 URZ, URZ, URZ, URZ' after every HMMA pair of a
    loop body; counted as loop control they would exceed its limit, though they never run."""
    keep = [not never_executed(i) for i in func.instrs]
    index = [0, *itertools.accumulate(keep)]      # kept instructions before each index
    return sass.Function(func.name, [i for i, k in zip(func.instrs, keep) if k],
                         {name: index[at] for name, at in func.labels.items()})


def loop_body(func: sass.Function) -> list[sass.Instr]:
    """The timed loop's body (label to backward branch), never-executed filler left out;
    ProbeInvalid when the timed region has not exactly one loop (core.loop.one_loop)."""
    _, _, start, end = loop.one_loop(func, func.name)
    return [i for i in func.instrs[start:end + 1] if not never_executed(i)]


@dataclass
class TensorVerdict(LoopVerdict):
    """A verified probe: per kernel (key: ops per trip, as ``Probe.entries``) what one loop
    trip holds besides the tensor instructions (the loop control, wgmma's fence and wait)."""
    loops: dict = field(default_factory=dict)

    def accounting(self) -> dict:
        """The loops' accounting for a figure's data: per kernel the tensor instructions per
        trip, the other instructions of the trip (its loop control) and the body's size."""
        return {str(k): v for k, v in self.loops.items()}


@dataclass
class TensorProbe(Probe):
    """One row at one ILP: a counted loop whose trip is `steps` dependent steps of ILP
    chains (``ops`` counts the PTX tensor ops per warp per trip: steps * ILP)."""
    row: TensorRow | None = None
    ilp: int = 1
    smem_words: int = 0               # 32-bit words of the shared buffer filled from `fill`
    steps: int = STEPS                # dependent steps of every chain per loop trip

    @property
    def slots(self) -> list[InputSlot]:
        return self.inputs[self.steps]

    @property
    def key(self) -> tuple[Kind, str]:
        """The sweep's key of this probe's row."""
        return self.row.kind, self.row.name

    # --- measurement ------------------------------------------------------------------------
    def sweep_threads(self) -> list[int]:
        """The block sizes the hardware sweep launches this probe with."""
        return [WARP * w for w in self.row.sweep_warps]

    def launches(self) -> list[tuple[int, int]]:
        """(block size, kernel key) of every launch set of the sweep."""
        return [(t, self.steps) for t in self.sweep_threads()]

    def is_latency_loop(self, key: int) -> bool:
        return False

    def trips(self, threads: int, key: int) -> tuple[int, ...]:
        """The trip counts of a launch set: sized so that even at the row's rate bound the
        longest per-SM span is at least SPAN_PER_WARP x warps (analysis.plan_trips)."""
        warps = threads // WARP
        return plan_trips(warps=warps, work_per_step=self.row.work * self.ilp * warps,
                          rate_bound=self.row.rate_bound, steps=self.steps)

    def fill(self, rng: np.random.Generator) -> np.ndarray:
        """The shared buffer's words (uint32): random, never zero."""
        return operands.draw_regs("nonzero", max(1, self.smem_words), rng).astype(np.uint32)

    def fit_spec(self, threads: int, key: int) -> FitSpec:
        """How the launch set of kernel `key` at `threads` threads is fitted: every warp
        issues the row's work, ILP chains per step."""
        warps = threads // WARP
        return FitSpec(warps, self.ilp, self.row.work * self.ilp * warps, self.steps)

    # --- verification -----------------------------------------------------------------------
    def regions(self, functions: dict[str, sass.Function]) -> dict[int, list[sass.Instr]]:
        """Each kernel's whole timed region (the loop and what surrounds it)."""
        out = {}
        for key in self.entries:
            func = self.sass_of(functions, key)
            out[key] = sass.timed_region(func) if len(sass.clock_groups(func)) >= 2 else []
        return out

    def loop_unit(self, key: int) -> tuple[tuple[str, ...] | None, int | tuple[int, ...]]:
        """(SASS patterns, instructions of each per trip) the loop of kernel `key` must hold:
        the row's tensor instruction, per_op per PTX op."""
        return self.unit, self.ops[key] * self.per_op

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> TensorVerdict:
        """One counted loop per kernel (core.loop.verify_loop: exactly steps*ILP*per_op
        tensor instructions per trip, loop control named, setup only around it) whose body
        is at least `steps` dependent instructions deep."""
        (key, entry), = self.entries.items()
        func = self.sass_of(functions, key)
        unit, count = self.loop_unit(key)
        func = without_filler(func)
        v = verify_loop(self.name, self.arch, unit, count, func, ops=self.ops[key] * self.per_op)
        body = loop_body(func)
        depth = sass.dependence_depth(body)
        if depth < self.steps:
            raise ProbeInvalid(
                f"probe invalid: {self.name}: the loop body's dependence depth is {depth} "
                f"instructions, less than the {self.steps} chained steps per trip (the "
                f"compiler shortened the chains)\n{sass.format_listing(body)}")
        loops = {key: {"tensor_per_trip": count, "loop_control": v.loop_control,
                       "body_instructions": v.body_instructions}}
        return TensorVerdict(True, v.unit, message="loop", loop_control=v.loop_control,
                             body_instructions=v.body_instructions, loops=loops)

    # --- snapshots ------------------------------------------------------------------------
    def snapshot_header(self, tool: toolchain.Tool) -> str:
        return (f"// {self.name} ({self.arch}, {tool.name} {tool.version}): {self.per_op} x "
                f"{self.unit[0]} per op, loop of {self.steps} steps x ILP {self.ilp}\n")

    def snapshot(self, tool: toolchain.Tool, functions: dict[str, sass.Function]) -> str:
        return self.snapshot_header(tool) + self.snapshot_text(functions)


class LdmatrixProbe(TensorProbe):
    """ldmatrix pointer chases: the shared buffer holds the chase's layout."""

    def fill(self, rng: np.random.Generator) -> np.ndarray:
        return operands.ldmatrix_fill(self.ilp)


# --- wgmma ----------------------------------------------------------------------------------

@dataclass
class WgmmaProbe(TensorProbe):
    """wgmma loops (sm_90a), issued by each warpgroup of the block: the throughput loop
    (key `steps`: fence, steps x ILP wgmma, commit, wait_group 1 per trip) and, at ILP 1, the
    completion-latency loop (key LATENCY = 1: fence, one wgmma, commit, wait_group 0)."""
    row: WgmmaRow | None = None
    steps: int = WGMMA_STEPS

    def sweep_threads(self) -> list[int]:
        """One warpgroup; the sweep rows over warpgroups per SM."""
        if self.row.name in WGMMA_SWEEP:
            return [WARPGROUP * g for g in WGMMA_GROUPS]
        return [WARPGROUP]

    def launches(self) -> list[tuple[int, int]]:
        """The throughput loop at every block size, the latency loop with one warpgroup."""
        out = [(WARPGROUP, k) for k in self.entries if self.is_latency_loop(k)]
        return out + [(t, self.steps) for t in self.sweep_threads()]

    def is_latency_loop(self, key: int) -> bool:
        return key != self.steps

    def trips(self, threads: int, key: int) -> tuple[int, ...]:
        if self.is_latency_loop(key):
            return WGMMA_LAT_TRIPS
        groups = threads // WARPGROUP
        return plan_trips(warps=threads // WARP, work_per_step=self.row.work * self.ilp * groups,
                          rate_bound=self.row.peak, steps=self.steps,
                          span_per_warp=WGMMA_SPAN_PER_WARP)

    def fill(self, rng: np.random.Generator) -> np.ndarray:
        # drawn and dropped as for every probe (the same random stream as ever)
        operands.draw_regs("nonzero", max(1, self.smem_words), rng)
        return operands.draw_regs(self.row.reg_kind, self.smem_words, rng).astype(np.uint32)

    def fit_spec(self, threads: int, key: int) -> FitSpec:
        """The throughput loop at `threads` threads: the work is issued per warpgroup, and
        the point's `warps` counts warpgroups (its skew is the warps'). The completion-latency
        loop (one warpgroup): cycles per trip, i.e. per wgmma from fence to wait complete,
        with the trip's loop control; its figure is the per-warp span (the warpgroup's wgmma
        synchronise its 4 warps), so their start skew is recorded but not judged: fitted as
        one warp."""
        if self.is_latency_loop(key):
            return FitSpec(1, 1, self.row.work, 1)
        groups = threads // WARPGROUP
        return FitSpec(threads // WARP, self.ilp, self.row.work * self.ilp * groups, self.steps,
                       reported_warps=groups)

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> TensorVerdict:
        """Each kernel one wgmma loop (wgmma_depth.verify_wgmma_trips); the throughput loop
        leaves one group in flight, drained after the loop."""
        loops = {}
        for key in sorted(self.entries):
            acc = verify_wgmma_trips(self.name, self.unit[0], self.ops[key],
                                     self.sass_of(functions, key),
                                     drain_after=not self.is_latency_loop(key))
            loops[key] = {"tensor_per_trip": acc["per_trip"], **{
                k: acc[k] for k in ("group_control", "loop_control", "body_instructions")}}
        main = loops[self.steps]
        return TensorVerdict(True, {self.unit[0]: 1.0, **main["group_control"]},
                             message="wgmma loop", loop_control=main["loop_control"],
                             body_instructions=main["body_instructions"], loops=loops)

    def snapshot_text(self, functions: dict[str, sass.Function]) -> str:
        """Every kernel of the probe (the latency loop first), normalised."""
        return "".join(sass.normalise(self.sass_of(functions, k)) for k in sorted(self.entries))

    def snapshot_header(self, tool: toolchain.Tool) -> str:
        return f"// {self.name} ({self.arch}, {tool.name} {tool.version})\n"


def snapshot(checked) -> str:
    """The static snapshot of checked tensor probes (fixtures.static_check's `snapshot`):
    per probe a header naming the compiler and the SASS per op, then its shortest kernel."""
    return "".join(b.probe.snapshot(checked.tool, b.functions) for b, _ in checked)
