"""The SM clock under sustained load: the loads' kernels (idle, FFMA, wgmma, HBM streaming),
their probe types and verification, and the pure maths of a load's windows.

Every kernel is a counted loop between two %clock64 reads with %globaltimer read just outside
them; lane 0 of every warp stores (clock before, clock after, globaltimer before, after,
%smid). A load is WINDOWS launches back to back, each about WINDOW_S long (its trip count
calibrated by a short launch first): per window, the SM clock is clock cycles over
globaltimer nanoseconds (median over warps), the work per SM over the SM's busy cycles is the
per-clock rate, the work over the window's wall time the achieved rate.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from enum import Enum

import numpy as np

from ....core import loop, ptx, sass
from ....core.fit import per_sm_spans
from ....core.loop import LOOP_CONTROL, LoopVerdict, verify_loop
from ....core.probe import Probe
from ....core.ptx import Clock, Kernel, Registers
from ....core.verify import ProbeInvalid, Verdict, matches
from ..wgmma import kernels as wd
from ..mma.rows import HOPPER_PEAK_FLOP, HOPPER_PEAK_SOURCE
from ..wgmma.rows import Config, DepthRow

REC_WORDS = 5                 # clock before, after, globaltimer before, after, smid
BLOCK = 256
BLOCKS_PER_SM = 4             # FFMA and streaming: 32 warps per SM
FFMA_CHAINS, FFMA_UNROLL = 8, 32
STREAM_UNROLL = 4             # 16-byte loads per thread per trip
NANOSLEEP_NS = 1000
FFMA_PEAK = 256               # FLOP per clock per SM (128 FP32 FMA)
FFMA_PEAK_SOURCE = ("CUDA C++ Programming Guide, Arithmetic Instructions throughput table: "
                    "128 32-bit floating-point multiply-add results per clock per SM for "
                    "compute capability 9.0 (256 FLOP)")
WGMMA_ROW = DepthRow("f16.f32.m64n256k16", "f16", "f32", 256, (Config(1, 1),),
                     warpgroups=(2,), group="clock_load")
WGMMA_CONFIG = Config(1, 1)


class Load(str, Enum):
    IDLE = "idle"
    FFMA = "ffma"
    WGMMA = "wgmma"
    HBM = "hbm"

    def __str__(self) -> str:
        return self.value


# --- kernels ----------------------------------------------------------------------------

PARAMS = [".param .u64 rec_param", ".param .u64 res_param", ".param .u64 in_param",
          ".param .u32 iters_param"]


def _frame(entry: str, regs: Registers, body: list[str], results: list[str], *,
           setup: tuple[str, ...] = (), decls: tuple[str, ...] = ()) -> str:
    """A counted loop of `body` per trip (trip count a parameter, not unrolled) between the
    clock reads, globaltimer just outside; lane 0 of each warp stores its record, every
    thread XORs its results into one stored word."""
    fold = [f"xor.b32 %ck, %ck, {r};" for r in results]
    return Kernel(
        entry=entry, params=PARAMS,
        directives=[f".maxntid {BLOCK}, 1, 1"],
        decls=[".reg .b64 %rec, %res, %in, %toff, %t0, %t1, %g0, %g1, %smid64;",
               ".reg .b32 %tidx, %nt, %cta, %gtid, %lane, %warp, %iters, %it, %sm, %ck;",
               ".reg .pred %again, %lead;", *regs.declarations(), *decls],
        setup=["ld.param.u64 %rec, [rec_param];", "ld.param.u64 %res, [res_param];",
               "ld.param.u64 %in, [in_param];", "ld.param.u32 %iters, [iters_param];",
               "mov.u32 %tidx, %tid.x;", "mov.u32 %nt, %ntid.x;", "mov.u32 %cta, %ctaid.x;",
               "mad.lo.u32 %gtid, %cta, %nt, %tidx;", "and.b32 %lane, %tidx, 31;", *setup],
        operands=regs.loads, sync=["mov.u64 %g0, %globaltimer;"],
        body=["mov.u32 %it, 0;", "$LOAD:", '.pragma "nounroll";', *body,
              "add.u32 %it, %it, 1;", "setp.lt.u32 %again, %it, %iters;", "@%again bra $LOAD;"],
        after=["mov.u64 %g1, %globaltimer;", "mov.u32 %ck, 0;", *fold,
               "mul.wide.u32 %toff, %gtid, 4;", "add.u64 %res, %res, %toff;",
               "st.global.b32 [%res], %ck;", "setp.eq.u32 %lead, %lane, 0;",
               "shr.u32 %warp, %gtid, 5;", f"mul.wide.u32 %toff, %warp, {REC_WORDS * 8};",
               "add.u64 %rec, %rec, %toff;", "mov.u32 %sm, %smid;", "cvt.u64.u32 %smid64, %sm;",
               "@%lead st.global.u64 [%rec], %t0;", "@%lead st.global.u64 [%rec+8], %t1;",
               "@%lead st.global.u64 [%rec+16], %g0;", "@%lead st.global.u64 [%rec+24], %g1;",
               "@%lead st.global.u64 [%rec+32], %smid64;"],
        clock=Clock(), guard=False).render()


def ffma_kernel() -> str:
    """FFMA_CHAINS chains x = x*b + x per thread (b = -2 loaded: x -> -x, exact, never 0,
    inf or subnormal), FFMA_UNROLL per chain per trip, interleaved."""
    regs = Registers()
    xs = [regs.load(32, "float") for _ in range(FFMA_CHAINS)]
    b = regs.load(32, "neg2")
    body = [f"fma.rn.f32 {x}, {x}, {b}, {x};" for _ in range(FFMA_UNROLL) for x in xs]
    return _frame("clk_ffma", regs, body, xs,
                  setup=(f"mul.wide.u32 %toff, %lane, {len(regs.inputs) * 8};",
                         "add.u64 %in, %in, %toff;"))


def idle_kernel() -> str:
    """One warp sleeping in a counted loop: the SM clock while the GPU is (nearly) idle."""
    regs = Registers()
    return _frame("clk_idle", regs, [f"nanosleep.u32 {NANOSLEEP_NS};"], [])


def stream_kernel(buffer_words16: int) -> str:
    """STREAM_UNROLL 16-byte loads per thread per trip, grid-strided over a buffer of
    `buffer_words16` 16-byte words (a power of two, several times L2), every word XORed."""
    if buffer_words16 & (buffer_words16 - 1):
        raise ValueError(f"stream buffer of {buffer_words16} 16-byte words: not a power of two")
    regs = Registers()
    body = []
    for k in range(STREAM_UNROLL):
        body += [f"mad.lo.u32 %idx, %it, {STREAM_UNROLL}, {k};",
                 "mad.lo.u32 %idx, %idx, %tot, %gtid;",
                 f"and.b32 %idx, %idx, {buffer_words16 - 1};", "mul.wide.u32 %off, %idx, 16;",
                 "add.u64 %addr, %in, %off;",
                 "ld.global.v4.u32 {%v0, %v1, %v2, %v3}, [%addr];",
                 "xor.b32 %acc, %acc, %v0;", "xor.b32 %acc, %acc, %v1;",
                 "xor.b32 %acc, %acc, %v2;", "xor.b32 %acc, %acc, %v3;"]
    return _frame("clk_hbm", regs, body, ["%acc"],
                  setup=("mov.u32 %acc, 0;", "mov.u32 %tot, %nctaid.x;",
                         "mul.lo.u32 %tot, %tot, %nt;"),
                  decls=(".reg .b32 %idx, %tot, %acc, %v<4>;", ".reg .b64 %off, %addr;"))


def wgmma_kernel() -> str:
    """Two warpgroups per SM, each: per trip fence, one m64n256k16 f16 wgmma, commit,
    wait_group 1 (wgmma_depth's loop kernel, with globaltimer stamps)."""
    return wd.kernel(WGMMA_ROW, WGMMA_CONFIG, entry="clk_wgmma", timer=True)


# --- probes -----------------------------------------------------------------------------

@dataclass(kw_only=True)
class LoadProbe(Probe):
    """A load's kernel: one counted loop of `ops[count]` x `unit` per trip (core.loop)."""
    load: Load

    @property
    def count(self) -> int:
        return next(iter(self.ops.values()))

    @property
    def entry(self) -> str:
        return next(iter(self.entries.values()))

    def function(self, functions: dict[str, sass.Function]) -> sass.Function:
        return self.sass_of(functions, next(iter(self.entries)))

    def regions(self, functions: dict[str, sass.Function]) -> dict[int, list[sass.Instr]]:
        return {self.count: sass.timed_region(self.function(functions))}

    def verify_regions(self, regions, functions) -> Verdict:
        return verify_loop(self.name, self.arch, self.unit, self.count, self.function(functions))

    def snapshot_text(self, functions: dict[str, sass.Function]) -> str:
        return sass.normalise(self.function(functions))


STREAM_ARITH = ("IMAD*", "IADD3*", "LOP3*", "SHF*", "LEA*", "IMAD.WIDE*", "VIADD", "MOV",
                "IADD3.X", "LEA.HI*", "ISETP*", "UIADD3*", "UMOV", "ULDC*", "LDCU*", "S2R", "SEL", "LDC*")


class StreamLoadProbe(LoadProbe):
    """The streaming loop: exactly STREAM_UNROLL 16-byte loads per trip, the rest address
    arithmetic, the XORs and loop control (no other memory access)."""

    def verify_regions(self, regions, functions) -> Verdict:
        func = self.function(functions)
        region = sass.timed_region(func)
        loads = [i for i in region if i.base == "LDG"]
        mem = [i.opcode for i in region if i.base in ("LDG", "STG", "LDS", "STS", "LD", "ST")
               and not matches(i.opcode, self.unit[0])]
        bad = sorted({i.opcode for i in region if i.base != "LDG" and not any(
            matches(i.opcode, p) for p in (*STREAM_ARITH, *LOOP_CONTROL))})
        branches = [i for i in region if i.base == "BRA"]
        loops = loop.backward_branches(func, region)
        if len(loads) != self.count or mem or bad or len(branches) != 1 or len(loops) != 1:
            raise ProbeInvalid(f"probe invalid: {self.name}: wanted one loop of {self.count} x "
                               f"{self.unit[0]} + address arithmetic; got {len(loads)} loads, "
                               f"other memory {mem}, other instructions {bad}, "
                               f"{len(branches)} branches of which {len(loops)} backward\n"
                               f"{sass.format_listing(region)}")
        return LoopVerdict(True, {self.unit[0]: 1.0}, message="stream loop",
                           body_instructions=len(region))


class WgmmaLoadProbe(LoadProbe):
    def verify_regions(self, regions, functions) -> Verdict:
        trips = wd.verify_trips(self.name, WGMMA_ROW.sass, WGMMA_CONFIG, self.function(functions))
        return LoopVerdict(True, {WGMMA_ROW.sass: 1.0}, message="wgmma loop",
                           loop_control=trips["loop_control"],
                           body_instructions=trips["body_instructions"])


STREAM_WORDS16 = 1 << 24      # 256 MiB streamed: 5x the 50 MiB L2 of sm_90


def probes(arch: str) -> dict[Load, LoadProbe]:
    """The four loads' probes (sm_90: the wgmma kernel is sm_90a, so all are)."""
    wd.require_wgmma(arch)
    t = wd.TARGET
    return {
        Load.IDLE: LoadProbe("clock_load/idle", t, "\n" + idle_kernel(), {1: "clk_idle"},
                             {1: 1}, unit=("NANOSLEEP",), guarded=False, load=Load.IDLE),
        Load.FFMA: LoadProbe("clock_load/ffma", t, "\n" + ffma_kernel(), {256: "clk_ffma"},
                             {256: FFMA_CHAINS * FFMA_UNROLL}, unit=("FFMA",), guarded=False,
                             load=Load.FFMA),
        Load.WGMMA: WgmmaLoadProbe("clock_load/wgmma", t, "\n" + wgmma_kernel(),
                                   {1: "clk_wgmma"}, {1: 1}, unit=(WGMMA_ROW.sass,),
                                   guarded=False, load=Load.WGMMA),
        Load.HBM: StreamLoadProbe("clock_load/hbm", t, "\n" + stream_kernel(STREAM_WORDS16),
                              {STREAM_UNROLL: "clk_hbm"}, {STREAM_UNROLL: STREAM_UNROLL},
                              unit=("LDG.E.128",), guarded=False, load=Load.HBM),
    }


def module_text(part: list[Probe]) -> str:
    return ptx.header(wd.TARGET, "8.0") + "\n".join(p.kernels for p in part)


# --- the windows --------------------------------------------------------------------------

@dataclass
class ClockWindow:
    """One launch of a load."""
    mhz: float                  # clock64 cycles over globaltimer ns (median over warps)
    wall_ns: float              # max globaltimer after - min before over all warps
    sm_cycles: float            # per SM max clock after - min before (median over SMs)
    sms: int
    warps_per_sm: list


def window(rec: np.ndarray) -> ClockWindow:
    """rec: (warps, REC_WORDS) [clock before, after, globaltimer before, after, smid]; the
    per-SM spans as every timed probe's (core.fit.per_sm_spans)."""
    r = rec.astype(np.int64)
    dc, dg = r[:, 1] - r[:, 0], r[:, 3] - r[:, 2]
    mhz = float(np.median(dc[dg > 0] / dg[dg > 0] * 1000.0)) if (dg > 0).any() else float("nan")
    spans = per_sm_spans(r[:, [0, 1, 4]])
    return ClockWindow(mhz, float(r[:, 3].max() - r[:, 2].min()),
                       float(statistics.median(b for b, _ in spans.values())), len(spans),
                       sorted({w for _, w in spans.values()}))


@dataclass
class LoadSummary:
    load: Load
    windows: list[ClockWindow]
    work_per_sm: float          # per window (FLOP or bytes)
    work_total: float           # per window, whole GPU

    def sustained(self) -> list[ClockWindow]:
        """The second half of the windows (the clock after the load has settled)."""
        return self.windows[len(self.windows) // 2:]

    def mhz(self) -> tuple[float, float]:
        """(median sustained SM clock, its spread over the sustained windows)."""
        v = [w.mhz for w in self.sustained()]
        return float(statistics.median(v)), float(max(v) - min(v))

    def per_clock(self) -> tuple[float, float]:
        """(work per clock per SM, spread) over the sustained windows."""
        v = [self.work_per_sm / w.sm_cycles for w in self.sustained()]
        return float(statistics.median(v)), float(max(v) - min(v))

    def per_second(self) -> tuple[float, float]:
        """(work per wall second, whole GPU; spread) over the sustained windows."""
        v = [self.work_total / (w.wall_ns * 1e-9) for w in self.sustained()]
        return float(statistics.median(v)), float(max(v) - min(v))


def peak_per_clock(load: Load) -> tuple[float, str]:
    if load is Load.FFMA:
        return float(FFMA_PEAK), FFMA_PEAK_SOURCE
    if load is Load.WGMMA:
        return float(HOPPER_PEAK_FLOP["f16"]), HOPPER_PEAK_SOURCE
    raise ValueError(f"{load}: no per-clock peak")
