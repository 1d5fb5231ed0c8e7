"""The FP8 mma.sync on sm_90, timed as what it is: ptxas has no FP8 mma.sync tensor
instruction there, it unpacks A and B to f16 (F2FP.F16.E4M3.UNPACK_B), runs two
HMMA.16816.F32 with a zero accumulator and adds C with four FADD. Kernel, probe (a counted
loop whose body is that sequence per op, verified per trip) and the pure maths of its points.

Probe (the tensor sweeps' frame, kernels.timed_kernel): W warps on one SM after a bar.sync,
each running ILP independent accumulator chains (D = A*B + D) inside a counted loop of STEPS
ops per chain per trip, between two %clock64 reads; the trip count is a kernel parameter.
Every op loads its own A and B fragments from shared memory with volatile loads (LDS.128 +
LDS.64, as a GEMM's inner loop does with fresh fragments every k-step): the compiler can
neither share one op's conversions with another nor hoist them out of the loop, and the
loads issue on the memory pipe, not on the pipes the emulation uses. Since C enters only the
FADDs, the chain's cycles per op are the sequence's cost in a C-dependent chain (its HMMAs
do not wait for the previous op). Slopes over three trip counts cancel the warps' start
skew (analysis.fit_point), as in the sweeps.

(An unrolled chain of 4-12 ops per length, the earlier form, was not linear in the length on
sm_90, residuals of 90-155 cycles, and its throughput moved 2-4% night to night.)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....core import ptx, toolchain
from ....core.probe import NotApplicable, Probe
from ....core.ptx import Registers
from ..mma import operands
from ..mma.analysis import SweepPoint, fit_point
from ..mma.kernels import timed_kernel
from ..mma.probes import TensorProbe
from ..mma.rows import HOPPER_PEAK_FLOP, HOPPER_PEAK_SOURCE

ARCH = "sm_90"
ISA = "8.4"
STEPS = 8                 # ops of every chain per loop trip
ILPS = (1, 2)
# up to the block's limit: the throughput still grew from 4 to 8 warps, and the 8-warp points
# alone moved night to night (docs/hopper.md, lab notes)
WARPS = (1, 4, 8, 16, 32)
FLOP = 2 * 16 * 8 * 32            # one m16n8k32
# trip planning only (analysis.plan_trips): no emulated op runs faster than the f16 mma.sync
# peak allows its two HMMA.16816 (4096 FLOP/clk/SM); a quarter of that keeps spans realistic
RATE_BOUND = 1024
A_BYTES, B_BYTES = 16, 8          # one thread's A (4 x b32) and B (2 x b32) fragment
MAX_THREADS = 32 * max(WARPS)
B_BASE = A_BYTES * MAX_THREADS    # the B fragments follow every thread's A fragment
SMEM_WORDS = (A_BYTES + B_BYTES) * MAX_THREADS // 4


def sass_per_op(in_type: str) -> tuple[tuple[str, int], ...]:
    """What ptxas 13.x and the 580 driver emit per FP8 m16n8k32 mma.sync on sm_90, fragments
    loaded from shared memory: (opcode, count). A compiler that emits anything else makes
    the probe invalid (the listing says what came instead)."""
    return (("HMMA.16816.F32", 2), (f"F2FP.F16.{in_type.upper()}.UNPACK_B", 12),
            ("FADD", 4), ("LDS.128", 1), ("LDS.64", 1))


@dataclass(frozen=True)
class EmulationRow:
    in_type: str = "e4m3"
    sweep_warps = WARPS
    work = FLOP                   # FLOP of one op (the throughput figure's unit)
    rate_bound = RATE_BOUND

    @property
    def name(self) -> str:
        return f"{self.in_type}.f32.m16n8k32"

    @property
    def instruction(self) -> str:
        t = self.in_type
        return f"mma.sync.aligned.m16n8k32.row.col.f32.{t}.{t}.f32"

    @property
    def native_peak(self) -> int:
        return HOPPER_PEAK_FLOP[self.in_type]

    peak_source = HOPPER_PEAK_SOURCE

    @property
    def key(self) -> str:
        return f"tensor.fp8_emulated.{self.name}"


ROWS = [EmulationRow("e4m3"), EmulationRow("e5m2")]


def require(arch: str, prefix: str = "") -> None:
    if arch != ARCH:
        raise NotApplicable(f"{prefix}the FP8 mma.sync emulation is timed on sm_90 ({arch}: "
                            f"native FP8 mma.sync on sm_89 is the tensor tables' row)")


def _reglist(regs: list[str]) -> str:
    return "{" + ", ".join(regs) + "}"


def kernel(r: EmulationRow, ilp: int) -> tuple[str, str, Registers, int]:
    """(PTX, entry, registers and input slots, result words) of the probe at one ILP."""
    regs = Registers()
    accs = [[regs.load(32, "f32") for _ in range(4)] for _ in range(ilp)]
    body = []
    for _ in range(STEPS):
        for acc in accs:
            a = [regs.reg(32) for _ in range(4)]
            b = [regs.reg(32) for _ in range(2)]
            body += [f"ld.volatile.shared.v4.b32 {_reglist(a)}, [%fa];",
                     f"ld.volatile.shared.v2.b32 {_reglist(b)}, [%fb];",
                     f"{r.instruction} {_reglist(acc)}, {_reglist(a)}, {_reglist(b)}, "
                     f"{_reglist(acc)};"]
    results = [x for acc in accs for x in acc]
    entry = f"fp8emu_{r.in_type}_ilp{ilp}_s{STEPS}"
    text = timed_kernel(entry, regs, body, results, smem_words=SMEM_WORDS,
                        extra_decls=(".reg .b32 %fa, %fb;",),
                        prologue=(f"mul.lo.u32 %fa, %tidx, {A_BYTES};",
                                  "add.u32 %fa, %fa, %sbase;",
                                  f"mul.lo.u32 %fb, %tidx, {B_BYTES};",
                                  "add.u32 %fb, %fb, %sbase;",
                                  f"add.u32 %fb, %fb, {B_BASE};"))
    return text, entry, regs, len(results)


class EmulationProbe(TensorProbe):
    """ILP chains of one row in a counted loop; each trip must hold STEPS x ILP copies of the
    emulation sequence (sass_per_op) and the loop control, nothing else."""

    def fill(self, rng: np.random.Generator) -> np.ndarray:
        """The shared fragments: random FP8 words of the row's type (never NaN)."""
        kind = f"{self.row.in_type}x4"
        return operands.draw_regs(kind, self.smem_words, rng).astype(np.uint32)

    def loop_unit(self, key: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """Each opcode of the emulation sequence, its count per op x the ops per trip."""
        per_op = sass_per_op(self.row.in_type)
        return tuple(op for op, _ in per_op), tuple(c * self.ops[key] for _, c in per_op)

    def snapshot_header(self, tool: toolchain.Tool) -> str:
        seq = " + ".join(f"{c} x {op}" for op, c in sass_per_op(self.row.in_type))
        return (f"// {self.name} ({self.arch}, {tool.name} {tool.version}): per op {seq}; "
                f"loop of {self.steps} ops x ILP {self.ilp}\n")


def probe(r: EmulationRow, ilp: int, arch: str = ARCH) -> EmulationProbe:
    require(arch)
    text, entry, regs, n_res = kernel(r, ilp)
    per_op = sass_per_op(r.in_type)
    return EmulationProbe(f"fp8_emulated/{r.name}/ilp{ilp}", ARCH, text, {STEPS: entry},
                          {STEPS: STEPS * ilp}, unit=tuple(op for op, _ in per_op),
                          per_op=1, chained=True, inputs={STEPS: regs.inputs},
                          out_slots={STEPS: 2 + n_res + max(1, len(regs.inputs))}, isa=ISA,
                          guarded=False, row=r, ilp=ilp, smem_words=SMEM_WORDS, steps=STEPS)


def probes(arch: str) -> list[EmulationProbe]:
    return [probe(r, k, arch) for r in ROWS for k in ILPS] if arch == ARCH else []


def module_text(part: list[Probe]) -> str:
    return ptx.header(ARCH, ISA) + "\n".join(p.kernels for p in part)


# --- points ----------------------------------------------------------------------------

def point(raw: dict, warps: int, ilp: int) -> SweepPoint:
    """raw: trips -> the clocks, one per warp (analysis.Raw: an array (repeats, warps, 2) or
    [(starts, ends) per repeat]). The sweeps' fit
    (analysis.fit_point): `latency` = a warp's cycles per chain step (ILP ops), `throughput`
    = FLOP per clock per SM from the block span; `lat_why`: the per-warp latency's own
    reasons only (the start skew does not bias a warp's own cycles)."""
    return fit_point(raw, warps=warps, ilp=ilp, work=FLOP * ilp * warps, steps=STEPS)
