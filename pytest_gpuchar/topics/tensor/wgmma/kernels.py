"""wgmma in depth: the loop kernels of wgmma_depth_rows on the shared frame, their probe type
and its verification (sm_90a).

Kernel (one per row and Config): A and B in shared memory (K-major, the row's swizzle mode,
filled from a buffer of random non-zero values of the type, 1024-byte aligned so the
descriptors' base offset is 0; an rs row's A fragment loaded from there into registers once,
before the clock), the 2:4 metadata a per-thread register (validated before launch), every
warpgroup of the block running the same counted loop after a bar.sync: per trip wgmma.fence,
`steps` x one wgmma on each of `chains` accumulators, commit_group, wait_group `wait`;
wait_group 0 after the loop, still timed. Lane 0 of every warp stores its clocks and
%smid; every thread folds its accumulators into one stored word. The slope of the block's span
(max end - min start) over trip counts is the SM's time per trip: the warpgroups' start skew
and the drain are fixed costs and cancel.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ....core import loop, ptx, sass
from ....core.probe import NotApplicable, Probe
from ....core.ptx import Clock, Kernel
from ....core.verify import ProbeInvalid, Verdict, matches
from .rows import (SWIZZLE_BYTES, SWIZZLES, Config, DepthRow)

TARGET = "sm_90a"
THREADS_MAX = 384                # 3 warpgroups: ptxas keeps registers under 65536 / 384
REC_WORDS = 3                    # per warp: start clock, end clock, smid
GROUP_CONTROL = ("WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR.LE")   # once per trip: fence, wait
# uniform-register setup of the descriptors a compiler may repeat per trip or keep around the
# loop (a fixed cost per trip, reported with the loop control)
WGMMA_SETUP = ("WARPSYNC*", "R2UR*", "UMOV*", "BAR.SYNC.DEFER_BLOCKING", "UIADD3*", "ULOP*",
               "USHF*", "IMAD.U32", "ULDC*", "LDCU*", "MOV", "IMAD.MOV*")
MAX_TRIP_CONTROL = 12


class NoWgmma(NotApplicable):
    pass


def require_wgmma(arch: str) -> None:
    if arch not in ("sm_90", "sm_90a"):
        raise NoWgmma(f"wgmma needs sm_90a ({arch} has none)")


# --- shared memory and descriptors ----------------------------------------------------------

@dataclass(frozen=True)
class SmemLayout:
    """Where A and B lie in the shared buffer and what their descriptors encode."""
    a_bytes: int
    b_offset: int
    total: int
    a_sbo: int
    b_sbo: int
    lbo: int                     # encoded (>> 4)
    mode: int                    # descriptor bits 62-63

    def descriptor_const(self, sbo: int) -> int:
        return (self.mode << 62) | ((sbo >> 4) << 32) | (self.lbo << 16)


def layout(r: DepthRow) -> SmemLayout:
    """K-major A (64 rows) and B (N rows). No swizzle: 8x16-byte core matrices stored whole,
    the next one along K at LBO = 128 B, the next 8 rows at SBO. Swizzled (W = 32/64/128 B):
    rows W bytes apart, 8-row atoms at SBO = 8 W, LBO unused (encoded 1: "assumed 1", PTX ISA
    "Leading Dimension Byte Offset"); a row's K bytes must fit in W."""
    w = SWIZZLE_BYTES[r.swizzle]
    if w:
        if max(r.a_k_bytes, r.b_k_bytes) > w:
            raise ValueError(f"{r.name}: {r.b_k_bytes} B of K per row exceed the {w} B swizzle")
        a_sbo = b_sbo = 8 * w
        a_bytes, b_bytes, lbo = 64 * w, r.n * w, 1
    else:
        a_sbo, b_sbo = (r.a_k_bytes // 16) * 128, (r.b_k_bytes // 16) * 128
        a_bytes, b_bytes, lbo = 64 * r.a_k_bytes, r.n * r.b_k_bytes, 128 >> 4
    b_offset = -(-a_bytes // 1024) * 1024
    return SmemLayout(a_bytes, b_offset, -(-(b_offset + b_bytes) // 1024) * 1024 + 1024,
                  a_sbo, b_sbo, lbo, SWIZZLES[r.swizzle])


def _descriptor(reg: str, offset: int, const: int) -> list[str]:
    return [f"add.u32 %daddr, %sbase, {offset};", f"cvt.u64.u32 {reg}, %daddr;",
            f"shr.u64 {reg}, {reg}, 4;", f"and.b64 {reg}, {reg}, 16383;",
            f"or.b64 {reg}, {reg}, {const};"]


def _fill(words: int) -> list[str]:
    """Every thread copies words of `fill` into the shared buffer, then the async-proxy
    fence (wgmma reads shared memory through it) and a barrier."""
    return ["mov.u32 %fi, %tidx;", "$WGD_FILL:", f"setp.ge.u32 %fdone, %fi, {words};",
            "@%fdone bra $WGD_FILLED;", "mul.wide.u32 %foff, %fi, 4;",
            "add.u64 %faddr, %fill, %foff;", "ld.global.b32 %fval, [%faddr];",
            "shl.b32 %fsh, %fi, 2;", "add.u32 %fsh, %fsh, %sbase;",
            "st.shared.b32 [%fsh], %fval;", "add.u32 %fi, %fi, %nthr;", "bra.uni $WGD_FILL;",
            "$WGD_FILLED:", "fence.proxy.async.shared::cta;", "bar.sync 0;"]


# --- the kernel ---------------------------------------------------------------------------

def entry_name(r: DepthRow, c: Config) -> str:
    return "wgd_" + re.sub(r"[^A-Za-z0-9]+", "_", r.name).strip("_") + f"_{c.tag}"


def _trip(r: DepthRow, c: Config) -> list[str]:
    """fence, `steps` rounds of one wgmma per accumulator (a chain's wgmma ordered through
    its accumulator: PTX ISA, wgmma.fence), commit, wait."""
    accs = [[f"%acc{j * r.acc_regs + i}" for i in range(r.acc_regs)] for j in range(c.chains)]
    mma = [f"{r.instruction()} {{{', '.join(acc)}}}, {r.a_operand()}, %descB, "
           f"{r.operands_after_b()};" for _ in range(c.steps) for acc in accs]
    return ["wgmma.fence.sync.aligned;", *mma, "wgmma.commit_group.sync.aligned;",
            f"wgmma.wait_group.sync.aligned {c.wait};"]


def _a_fragment(r: DepthRow) -> list[str]:
    """A in registers (rs): each thread loads its fragment words from A's tile in shared
    memory (thread t of its warpgroup: bytes 16 (t % 128) on, random non-zero values of the
    type; 128 threads x 16 B = A's 64 rows of a_k_bytes)."""
    if not r.a_regs:
        return []
    return ["and.b32 %aoff, %tidx, 127;", f"mul.lo.u32 %aoff, %aoff, {4 * r.a_frag_regs};",
            "add.u32 %aoff, %aoff, %sbase;",
            *[f"ld.shared.b32 %ra{i}, [%aoff+{4 * i}];" for i in range(r.a_frag_regs)]]


def kernel(r: DepthRow, c: Config, *, entry: str | None = None, timer: bool = False) -> str:
    """The loop kernel of one row and config (parameters: out, res, fill, in, iters). Lane 0
    of each warp stores its clock before and after the loop and %smid; with `timer` also
    %globaltimer before and after (record: clocks, stamps, %smid: the clock-under-load
    runs)."""
    if not r.fits(c):
        raise ValueError(f"{r.name}: {c.chains} x {r.acc_regs} accumulator registers do not fit")
    lay = layout(r)
    n_acc = c.chains * r.acc_regs
    fold = [f"xor.b32 %ck, %ck, %acc{i};" for i in range(n_acc)]
    rec = REC_WORDS + (2 if timer else 0)
    # with the timer: clocks, globaltimer stamps, then %smid (clock_load's record layout)
    stamps = ["@%lead st.global.u64 [%out+16], %g0;", "@%lead st.global.u64 [%out+24], %g1;",
              "@%lead st.global.u64 [%out+32], %smid64;"] if timer else \
        ["@%lead st.global.u64 [%out+16], %smid64;"]
    return Kernel(
        entry=entry or entry_name(r, c),
        params=[".param .u64 out_param", ".param .u64 res_param", ".param .u64 fill_param",
                ".param .u64 in_param", ".param .u32 iters_param"],
        directives=[f".maxntid {THREADS_MAX}, 1, 1"],
        decls=[".reg .b64 %out, %res, %fill, %in, %toff, %t0, %t1, %foff, %faddr, %descA, "
               "%descB, %smid64, %g0, %g1;",
               ".reg .b32 %tidx, %nthr, %lane, %warp, %iters, %it, %sbase, %daddr, %fi, %fval, "
               "%fsh, %meta, %ck, %sm, %cta, %gtid;",
               ".reg .pred %fdone, %again, %lead, %scd;", f".reg .b32 %acc<{n_acc}>;",
               *([f".reg .b32 %aoff, %ra<{r.a_frag_regs}>;"] if r.a_regs else []),
               f".shared .align 1024 .b8 wgd_smem[{lay.total}];"],
        setup=["ld.param.u64 %out, [out_param];", "ld.param.u64 %res, [res_param];",
               "ld.param.u64 %fill, [fill_param];", "ld.param.u64 %in, [in_param];",
               "ld.param.u32 %iters, [iters_param];", "mov.u32 %tidx, %tid.x;",
               "mov.u32 %nthr, %ntid.x;", "and.b32 %lane, %tidx, 31;",
               "mov.u32 %cta, %ctaid.x;", "mad.lo.u32 %gtid, %cta, %nthr, %tidx;",
               "shr.u32 %warp, %gtid, 5;", "mov.u32 %sbase, wgd_smem;",
               *_fill(lay.total // 4),
               *_descriptor("%descA", 0, lay.descriptor_const(lay.a_sbo)),
               *_descriptor("%descB", lay.b_offset, lay.descriptor_const(lay.b_sbo)),
               "mul.wide.u32 %toff, %tidx, 4;", "add.u64 %in, %in, %toff;",
               "ld.global.b32 %meta, [%in];", *_a_fragment(r), "setp.eq.u32 %scd, 1, 1;",
               *[f"mov.b32 %acc{i}, 0;" for i in range(n_acc)]],
        sync=["bar.sync 0;", *(["mov.u64 %g0, %globaltimer;"] if timer else [])],
        body=["mov.u32 %it, 0;", "$WGD_LOOP:", '.pragma "nounroll";', *_trip(r, c),
              "add.u32 %it, %it, 1;", "setp.lt.u32 %again, %it, %iters;",
              "@%again bra $WGD_LOOP;",
              *(["wgmma.wait_group.sync.aligned 0;"] if c.wait else [])],
        after=[*(["mov.u64 %g1, %globaltimer;"] if timer else []), "mov.u32 %ck, %meta;",
               *fold, "mul.wide.u32 %toff, %gtid, 4;", "add.u64 %res, %res, %toff;",
               "st.global.b32 [%res], %ck;", "setp.eq.u32 %lead, %lane, 0;",
               f"mul.wide.u32 %toff, %warp, {rec * 8};", "add.u64 %out, %out, %toff;",
               "mov.u32 %sm, %smid;", "cvt.u64.u32 %smid64, %sm;",
               "@%lead st.global.u64 [%out], %t0;", "@%lead st.global.u64 [%out+8], %t1;",
               *stamps],
        clock=Clock(), guard=False).render()


# --- verification -------------------------------------------------------------------------

SERIALISED = re.compile(r"C75(10|19)|wgmma[^\n]*serializ|fence[^\n]*insert", re.I)
def check_wgmma_log(name: str, log: str) -> None:
    """ptxas / driver JIT warnings that wgmma was serialised or had fences inserted (C7510,
    C7519) fail the probe."""
    m = SERIALISED.search(log or "")
    if m:
        line = next((ln for ln in log.splitlines() if m.group(0) in ln), m.group(0))
        raise ProbeInvalid(f"probe invalid: {name}: the compiler serialised wgmma or inserted "
                           f"fences: {line.strip()}")


def verify_wgmma_trips(name: str, glob: str, count: int, func: sass.Function, *,
                       drain_after: bool) -> dict:
    """A wgmma loop: one loop between the clock reads; per trip exactly `count` wgmma
    (`glob`), one WARPGROUP.ARRIVE (the fence) and one WARPGROUP.DEPBAR (the wait), the rest
    loop control or descriptor setup; around the loop only setup, no wgmma, and after it one
    more wait where the loop left a group in flight (`drain_after`). More fences or waits
    would mean the compiler serialised the wgmma. Returns the trip's accounting; raises
    ProbeInvalid with the listing."""
    lo, hi = loop.timed_bounds(func, name)

    def fail(why: str) -> ProbeInvalid:
        return ProbeInvalid(f"probe invalid: {name}: {why}\nintended: one loop, per trip "
                            f"{count} x {glob} + {' + '.join(GROUP_CONTROL)} + loop "
                            f"control\n-- timed region:\n"
                            f"{sass.format_listing(func.instrs[lo:hi])}")
    loops = loop.backward_branches(func, func.instrs[lo:hi])
    if len(loops) != 1:
        raise fail(f"{len(loops)} backward branches in the timed region, wanted one loop")
    start, end = lo + loops[0][0], lo + loops[0][1]
    body = [i for i in func.instrs[start:end + 1] if not loop.never_executed(i)]
    outside = [i for i in func.instrs[lo:start] + func.instrs[end + 1:hi]
               if not loop.never_executed(i)]
    tc = sum(1 for i in body if matches(i.opcode, glob))
    rest = Counter(i.opcode for i in body if not matches(i.opcode, glob))
    if tc != count:
        raise fail(f"{tc} {glob} per trip, wanted {count}")
    group = {g: rest.pop(g, 0) for g in GROUP_CONTROL}
    if any(v != 1 for v in group.values()):
        raise fail(f"per trip {group}, wanted one of each (serialised wgmma?)")
    bad = {k: v for k, v in rest.items()
           if not any(matches(k, p) for p in (*loop.LOOP_CONTROL, *WGMMA_SETUP))}
    if bad or sum(rest.values()) > MAX_TRIP_CONTROL:
        raise fail(f"the loop body holds other instructions: {dict(rest)}")
    around = Counter(i.opcode for i in outside)
    waits = around.pop("WARPGROUP.DEPBAR.LE", 0)
    if waits != int(drain_after):
        raise fail(f"{waits} waits around the loop, wanted {int(drain_after)}")
    if any(matches(k, glob) for k in around):
        raise fail(f"wgmma outside the loop: {dict(around)}")
    stray = {k: v for k, v in around.items()
             if not any(matches(k, p) for p in (*loop.SETUP, *WGMMA_SETUP))}
    if stray:
        raise fail(f"unexpected instructions around the loop: {dict(around)}")
    return {"per_trip": count, "group_control": group, "loop_control": dict(rest),
            "body_instructions": len(body)}


def verify_trips(name: str, glob: str, c: Config, func: sass.Function) -> dict:
    """A config's loop (verify_wgmma_trips: `c.per_trip` wgmma per trip, a wait after the loop
    when the loop leaves a group in flight); its accounting."""
    acc = verify_wgmma_trips(name, glob, c.per_trip, func, drain_after=c.wait > 0)
    return {"wgmma_per_trip": acc["per_trip"], "loop_control": acc["loop_control"],
            "body_instructions": acc["body_instructions"]}


@dataclass
class DepthVerdict(Verdict):
    trips: dict | None = None      # config tag -> verify_trips' accounting


@dataclass(kw_only=True)
class DepthProbe(Probe):
    """One row's loop kernels, one per config (entries and ops keyed by the config's index
    in row.configs; ops: wgmma per trip and warpgroup)."""
    row: DepthRow

    def config(self, key: int) -> Config:
        return self.row.configs[key]

    def regions(self, functions: dict[str, sass.Function]) -> dict[int, list[sass.Instr]]:
        return {key: sass.timed_region(self.sass_of(functions, key)) for key in self.entries}

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> DepthVerdict:
        trips = {self.config(k).tag: verify_trips(self.name, self.row.sass, self.config(k),
                                                  functions[e])
                 for k, e in sorted(self.entries.items())}
        first = next(iter(trips.values()))
        return DepthVerdict(True, {self.row.sass: 1.0, **dict.fromkeys(GROUP_CONTROL, 1.0)},
                            message="wgmma loop", trips=trips,
                            base=Counter(first["loop_control"]))

    def snapshot_text(self, functions: dict[str, sass.Function]) -> str:
        """Every config's kernel (a change in any of them is a change of the row)."""
        return "".join(f"// {self.config(k).tag}\n{sass.normalise(functions[e])}"
                       for k, e in sorted(self.entries.items()))


def probe(r: DepthRow) -> DepthProbe:
    configs = [c for c in r.configs if r.fits(c)]
    if len(configs) != len(r.configs):
        raise ValueError(f"{r.name}: configs whose accumulators do not fit")
    text = "\n".join(kernel(r, c) for c in r.configs)
    entries = {k: entry_name(r, c) for k, c in enumerate(r.configs)}
    return DepthProbe(f"wgmma_depth/{r.name}", TARGET, "\n" + text, entries,
                      {k: c.per_trip for k, c in enumerate(r.configs)}, unit=(r.sass,),
                      guarded=False, isa=r.isa, row=r)


def module_text(probes: list[Probe]) -> str:
    """One sm_90a module of these probes at the highest PTX ISA version any needs."""
    isa = max((p.isa for p in probes), key=lambda v: tuple(int(x) for x in v.split(".")))
    return ptx.header(TARGET, isa) + "\n".join(p.kernels for p in probes)
