"""The Many-BSP kernels on the shared frame (core.ptx.Kernel) and their probe type.

Each kernel is the report's PTX (bodies.py) between two %clock64 reads: the first at entry,
before any of its instructions, the second after its last (its exits branch to
``$BODY_END``, where the warp reconverges). Lane 0 of every warp then stores a stamp record
(``REC_WORDS`` u64: clock at entry and exit, %smid, %globaltimer at entry and exit), so the
run can take per-SM spans of whole blocks: the whole-kernel cycles the model predicts.

``KernelProbe.check`` verifies the timed region against the kernel's own PTX: LDG, STG, LDS
and STS move as many bytes per thread as its ld/st.global and ld/st.shared (ptxas may merge
neighbouring loads: MM's 32 ld.shared of an As row become 8 LDS.128), one BAR.SYNC per
bar.sync, at least one FFMA/DFMA per fma.rn.f32/f64, one loop per PTX loop; and nothing of
the kernel outside the region (only the stamp stores follow it).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import Enum

from ...core import loop, sass
from ...core.probe import OneKernelProbe
from ...core.ptx import Clock, Kernel
from ...core.verify import ProbeInvalid, Verdict, matches
from . import bodies, ptxparse
from .rows import App

REC_WORDS = 5            # per warp: t0, t1, smid, globaltimer at entry, at exit (u64 each)
STAMP_STORES = REC_WORDS



class Match(str, Enum):
    """How the region's SASS must match a PTX opcode's count."""
    BYTES = "bytes"        # the same bytes per thread (loads and stores: ptxas may merge)
    EXACT = "exact"        # one SASS instruction per PTX instruction
    AT_LEAST = "at least"  # at least one per PTX instruction (ptxas may fuse more FMAs)


# PTX opcode prefix -> (SASS pattern, how the counts must match)
SASS_OF = {
    "ld.global": ("LDG*", Match.BYTES), "st.global": ("STG*", Match.BYTES),
    "ld.shared": ("LDS*", Match.BYTES), "st.shared": ("STS*", Match.BYTES),
    "bar.sync": ("BAR.SYNC*", Match.EXACT),
    "fma.rn.f32": ("FFMA*", Match.AT_LEAST), "fma.rn.f64": ("DFMA*", Match.AT_LEAST),
}
KERNEL_OPS = ("LDG*", "STG*", "LDS*", "STS*", "BAR.SYNC*")   # none of these outside
PTX_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8}


def entry_name(app: App) -> str:
    return f"bsp_{app.value}"


def body(app: App) -> list[str]:
    """The report's PTX of the kernel (instructions and labels), with this suite's names."""
    return bodies.BODIES[app.value](entry_name(app))


def parsed(app: App) -> ptxparse.PtxBody:
    return ptxparse.parse(body(app))


def shared_bytes(app: App) -> int:
    """Static shared memory of one block (the kernel's .shared arrays)."""
    return sum(n for _, n in bodies.SHARED[app.value])


STAMP_DECLS = [".reg .b64 %t0, %t1, %bsp_g0, %bsp_g1, %bsp_rec, %bsp_off, %bsp_sm64;",
               ".reg .b32 %bsp_tx, %bsp_ty, %bsp_nx, %bsp_ny, %bsp_lin, %bsp_lane, %bsp_w, "
               "%bsp_wpb, %bsp_bx, %bsp_by, %bsp_gx, %bsp_blk, %bsp_sm;",
               ".reg .pred %bsp_lead;"]


def stamps(rec_param: str) -> list[str]:
    """After the exit clock read: lane 0 of each warp stores its record at
    rec + REC_WORDS * 8 * (global warp index), the warp index counted over the whole grid
    (block y * grid x + block x) * warps per block + warp in block."""
    return [
        "mov.u64 %bsp_g1, %globaltimer;",
        "mov.u32 %bsp_tx, %tid.x;", "mov.u32 %bsp_ty, %tid.y;", "mov.u32 %bsp_nx, %ntid.x;",
        "mov.u32 %bsp_ny, %ntid.y;", "mad.lo.u32 %bsp_lin, %bsp_ty, %bsp_nx, %bsp_tx;",
        "and.b32 %bsp_lane, %bsp_lin, 31;", "setp.eq.u32 %bsp_lead, %bsp_lane, 0;",
        "shr.u32 %bsp_w, %bsp_lin, 5;", "mul.lo.u32 %bsp_wpb, %bsp_nx, %bsp_ny;",
        "add.u32 %bsp_wpb, %bsp_wpb, 31;", "shr.u32 %bsp_wpb, %bsp_wpb, 5;",
        "mov.u32 %bsp_bx, %ctaid.x;", "mov.u32 %bsp_by, %ctaid.y;", "mov.u32 %bsp_gx, %nctaid.x;",
        "mad.lo.u32 %bsp_blk, %bsp_by, %bsp_gx, %bsp_bx;",
        "mad.lo.u32 %bsp_w, %bsp_blk, %bsp_wpb, %bsp_w;",
        f"mul.wide.u32 %bsp_off, %bsp_w, {REC_WORDS * 8};",
        f"ld.param.u64 %bsp_rec, [{rec_param}];", "cvta.to.global.u64 %bsp_rec, %bsp_rec;",
        "add.u64 %bsp_rec, %bsp_rec, %bsp_off;", "mov.u32 %bsp_sm, %smid;",
        "cvt.u64.u32 %bsp_sm64, %bsp_sm;",
        "@%bsp_lead st.global.u64 [%bsp_rec], %t0;", "@%bsp_lead st.global.u64 [%bsp_rec+8], %t1;",
        "@%bsp_lead st.global.u64 [%bsp_rec+16], %bsp_sm64;",
        "@%bsp_lead st.global.u64 [%bsp_rec+24], %bsp_g0;",
        "@%bsp_lead st.global.u64 [%bsp_rec+32], %bsp_g1;",
    ]


def kernel(app: App) -> Kernel:
    """The kernel on the frame: parameters of the report's kernel plus the stamp records;
    its body between the clock reads, the warp reconverged before the exit read."""
    entry = entry_name(app)
    lines = body(app)
    params = [f".param .{t} {entry}_param_{k}" for k, t in enumerate(bodies.PARAMS[app.value])]
    rec = f"{entry}_rec"
    return Kernel(
        entry=entry, params=[*params, f".param .u64 {rec}"],
        preamble=[f".shared .align 4 .b8 {entry}_{name}[{n}];"
                  for name, n in bodies.SHARED[app.value]],
        decls=[*STAMP_DECLS, *ptxparse.register_decls(lines)],
        sync=["mov.u64 %bsp_g0, %globaltimer;"],
        body=[*lines, "$BODY_END:", "bar.warp.sync -1;"], after=stamps(rec),
        clock=Clock(), guard=False, end_label=False)


# --- the probe ------------------------------------------------------------------------------

@dataclass
class KernelVerdict(Verdict):
    """A verified whole-kernel region: SASS counts of the kernel's memory operations,
    barriers and FMAs, and the region's size."""
    counts: dict | None = None
    instructions: int = 0


def ptx_bytes(ins: ptxparse.PtxInstr) -> int:
    """Bytes one thread moves with a PTX ld/st (its type's width)."""
    return PTX_BYTES.get(ins.ptype[1:], 4) * (4 if ".v4" in ins.opcode else
                                               2 if ".v2" in ins.opcode else 1)


def sass_bytes(opcode: str) -> int:
    """Bytes one thread moves with a SASS load/store (LDS.128: 16, LDG.E.64: 8, ...)."""
    mods = opcode.split(".")[1:]
    for width, n in (("128", 16), ("64", 8), ("U16", 2), ("S16", 2), ("U8", 1), ("S8", 1)):
        if width in mods:
            return n
    return 4


def intended(b: ptxparse.PtxBody) -> dict[str, tuple[int, Match]]:
    """SASS pattern -> (instructions or bytes, how it must match), from the PTX body."""
    out: dict[str, tuple[int, Match]] = {}
    for prefix, (pat, how) in SASS_OF.items():
        hits = [i for i in b.instrs if i.opcode.startswith(prefix)]
        if hits:
            out[pat] = (sum(map(ptx_bytes, hits)) if how is Match.BYTES else len(hits), how)
    return out


def _count(region: list[sass.Instr], pat: str, how: Match = Match.EXACT) -> int:
    hits = [i for i in region if not loop.predicated_off(i) and matches(i.opcode, pat)]
    return sum(sass_bytes(i.opcode) for i in hits) if how is Match.BYTES else len(hits)


def verify_kernel(name: str, b: ptxparse.PtxBody, func: sass.Function) -> KernelVerdict:
    """The timed region holds the kernel as its PTX says (see the module docstring)."""
    lo, hi = loop.timed_bounds(func, name)
    groups = sass.clock_groups(func)
    region = func.instrs[lo:hi]
    outside = func.instrs[:groups[0][0]] + func.instrs[groups[1][1] + 1:]
    why, counts = [], {}
    for pat, (n, how) in intended(b).items():
        got = counts[pat] = _count(region, pat, how)
        if got < n or (how is not Match.AT_LEAST and got != n):
            what = "bytes per thread" if how is Match.BYTES else "instructions"
            why.append(f"{pat}: {got} {what} in the region, the PTX's {n} ({how.value})")
    loops = len(loop.backward_branches(func, region))
    if loops != len(b.loops()):
        why.append(f"{loops} loops in the region, the PTX has {len(b.loops())} (unrolled?)")
    stray = {p: _count(outside, p) for p in KERNEL_OPS}
    stray["STG*"] -= STAMP_STORES
    stray = {p: n for p, n in stray.items() if n}
    if stray:
        why.append(f"kernel instructions outside the timed region (hoisted?): {stray}")
    if why:
        raise ProbeInvalid(f"probe invalid: {name}: " + "; ".join(why)
                           + f"\n-- timed region ({len(region)} instructions):\n"
                           + sass.format_listing(region))
    unit = dict(sorted(Counter(i.opcode for i in region).items()))
    return KernelVerdict(True, unit, message="kernel", counts=counts,
                         instructions=len(region))


@dataclass(kw_only=True)
class KernelProbe(OneKernelProbe):
    """A whole kernel of the report between two clock reads (entries {0: entry})."""
    app: App

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> KernelVerdict:
        return verify_kernel(self.name, parsed(self.app), self.sass_of(functions))


def probe(app: App, arch: str) -> KernelProbe:
    k = kernel(app)
    n = len(parsed(app))
    return KernelProbe(f"bsp/{app.value}", arch, "\n" + k.render(), {0: k.entry}, {0: n},
                       unit=None, guarded=False, app=app)


def topic_probes(arch: str) -> list[KernelProbe]:
    return [probe(app, arch) for app in App]
