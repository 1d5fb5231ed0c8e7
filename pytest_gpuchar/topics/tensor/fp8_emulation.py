"""The FP8 mma.sync on sm_90, timed as what it is: ptxas has no FP8 mma.sync tensor
instruction there, it unpacks A and B to f16 (F2FP.F16.E4M3.UNPACK_B), runs two
HMMA.16816.F32 with a zero accumulator and adds C with four FADD. Kernel, probe (the
repeated compiler sequence, verified per op) and the pure maths of its points.

Probe: W warps on one SM after a bar.sync, each running ILP independent accumulator chains of
n mma.sync (D = A*B + D), unrolled between two %clock64 reads; every op reads its own A and B
fragments (loaded per lane: the conversions belong to each op, as in a GEMM's inner loop, and
none can be shared between ops). Each thread stores its start and end clock. Since C enters
only the FADDs, the chain's cycles per op are the sequence's cost in a C-dependent chain (its
HMMAs do not wait for the previous op).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...core import ptx, sass
from ...core.fit import fit
from ...core.probe import NotApplicable, Probe
from ...core.ptx import Clock, Kernel, Registers
from ...core.verify import Verdict, verify
from .rows import HOPPER_PEAK_FLOP, HOPPER_PEAK_SOURCE

ARCH = "sm_90"
ISA = "8.4"
LENGTHS = (4, 8, 12)
ILPS = (1, 2)
WARPS = (1, 4, 8)
SIGNATURE = ("HMMA.16816.F32*", "F2FP*")
FLOP = 2 * 16 * 8 * 32            # one m16n8k32
SPREAD_REL, SPREAD_ABS = 0.01, 0.5


@dataclass(frozen=True)
class EmulatedRow:
    in_type: str = "e4m3"

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


ROWS = [EmulatedRow("e4m3"), EmulatedRow("e5m2")]


def require(arch: str, prefix: str = "") -> None:
    if arch != ARCH:
        raise NotApplicable(f"{prefix}the FP8 mma.sync emulation is timed on sm_90 ({arch}: "
                            f"native FP8 mma.sync on sm_89 is the tensor tables' row)")


def _reglist(regs: list[str]) -> str:
    return "{" + ", ".join(regs) + "}"


def kernel(r: EmulatedRow, ilp: int, n: int) -> tuple[str, Registers, int]:
    """(PTX, registers and input slots, result words) of one chain length."""
    regs = Registers()
    kind = f"{r.in_type}x4"
    accs = [[regs.load(32, "f32") for _ in range(4)] for _ in range(ilp)]
    body = []
    for _ in range(n):
        for acc in accs:
            a = [regs.load(32, kind) for _ in range(4)]
            b = [regs.load(32, kind) for _ in range(2)]
            body.append(f"{r.instruction} {_reglist(acc)}, {_reglist(a)}, {_reglist(b)}, "
                        f"{_reglist(acc)};")
    results = [x for acc in accs for x in acc]
    n_in = len(regs.inputs) * ptx.SLOT_BYTES
    fold = [f"xor.b32 %ck, %ck, {x};" for x in results]
    entry = f"fp8emu_{r.in_type}_ilp{ilp}_n{n}"
    text = Kernel(
        entry=entry, params=[".param .u64 out_param", ".param .u64 in_param"],
        directives=[".maxntid 256, 1, 1"],
        decls=[".reg .b64 %out, %in, %toff, %t0, %t1;", ".reg .b32 %tidx, %ck;",
               ".reg .pred %never;", *regs.declarations()],
        setup=["ld.param.u64 %out, [out_param];", "ld.param.u64 %in, [in_param];",
               "mov.u32 %tidx, %tid.x;", f"mul.wide.u32 %toff, %tidx, {n_in};",
               "add.u64 %in, %in, %toff;", "mul.wide.u32 %toff, %tidx, 24;",
               "add.u64 %out, %out, %toff;"],
        operands=regs.loads, sync=["bar.sync 0;"], body=body,
        after=["mov.u32 %ck, 0;", *fold, "st.global.u64 [%out], %t0;",
               "st.global.u64 [%out+8], %t1;", "st.global.b32 [%out+16], %ck;"],
        clock=Clock(), guard=True, end_label=True).render()
    return text, regs, len(results)


def _filler(ins: sass.Instr) -> bool:
    return ins.pred in ("@!PT", "@!UPT") or ins.opcode == "NOP"


@dataclass(kw_only=True)
class EmulationProbe(Probe):
    """ILP chains of one row at every length; the region, never-executed filler left out,
    must grow by identical copies of one sequence holding HMMA and F2FP (core.verify)."""
    row: EmulatedRow
    ilp: int

    def regions(self, functions: dict[str, sass.Function]) -> dict[int, list[sass.Instr]]:
        out = {}
        for n, entry in self.entries.items():
            if entry not in functions:
                raise sass.RegionError(f"{self.name}: kernel {entry} missing from the SASS")
            region = [i for i in sass.timed_region(functions[entry]) if not _filler(i)]
            out[n] = self.strip_guard(region)
        return out

    def verify_regions(self, regions, functions) -> Verdict:
        return verify(self.name, regions, self.intent)


def probe(r: EmulatedRow, ilp: int, arch: str = ARCH) -> EmulationProbe:
    require(arch)
    texts, entries, inputs, slots = [], {}, {}, {}
    for n in LENGTHS:
        text, regs, n_res = kernel(r, ilp, n)
        texts.append(text)
        entries[n] = re.search(r"\.entry (\w+)", text).group(1)
        inputs[n], slots[n] = regs.inputs, 3
    return EmulationProbe(f"fp8_emulated/{r.name}/ilp{ilp}", ARCH, "\n" + "\n".join(texts),
                          entries, {n: n * ilp for n in LENGTHS}, unit=None,
                          signature=SIGNATURE, inputs=inputs, out_slots=slots, isa=ISA,
                          row=r, ilp=ilp)


def probes(arch: str) -> list[EmulationProbe]:
    return [probe(r, k, arch) for r in ROWS for k in ILPS] if arch == ARCH else []


def module_text(part: list[Probe]) -> str:
    return ptx.header(ARCH, ISA) + "\n".join(p.kernels for p in part)


# --- points ----------------------------------------------------------------------------

@dataclass
class Point:
    warps: int
    ilp: int
    chain_cycles: float       # a warp's cycles per chain step (ILP ops), mean over warps
    throughput: float         # FLOP per clock per SM
    spread: float
    unstable: bool
    why: str = ""
    chain_why: str = ""       # why the per-warp chain cycles alone are unstable


def point(records: dict, warps: int, ilp: int) -> Point:
    """records: n -> [(starts, ends) per repeat], one clock per thread (lane 0 of each warp
    is taken). The sweeps' fit (analysis.fit_point): the mean warp span and the block span
    (max end - min start) fitted over n, stable when the per-launch slopes' interquartile
    ranges are within 5% and, with several warps, the warps' start skew is under 1% of the
    longest span. `why` of the chain cycles: the per-warp latency's own reasons only."""
    from .analysis import fit_point
    raw = {n: [(np.asarray(t0, np.int64), np.asarray(t1, np.int64)) for t0, t1 in reps]
           for n, reps in records.items()}
    sp = fit_point(raw, warps=warps, ilp=ilp, work=FLOP * ilp * warps, steps=1)
    return Point(warps, ilp, sp.latency, sp.throughput, sp.thr_spread, sp.unstable, sp.why,
                 sp.lat_why)
