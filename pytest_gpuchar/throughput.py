"""Whole-GPU throughput probes: FMA throughput (Beyond3D note, seed 001) and the per-functional-
unit throughput per SM of the Many-BSP report (seed 002, Tables 1-2..1-4).

A throughput probe is one kernel per row, launched on every SM with enough warps for every
warp scheduler (``BLOCK`` threads x ``BLOCKS_PER_SM`` blocks per SM, register use capped by
``.maxntid``/``.minnctapersm`` so all blocks are resident at once). Each thread runs ``CHAINS``
independent dependent chains of the row's instruction, ``UNROLL`` ops per chain per loop
iteration, in a loop whose trip count is a kernel parameter (``.pragma "nounroll"``: the SASS
of the loop body is what the verifier checks, and the same kernel runs every trip count).
Operands are loaded per lane (not constant-foldable, not uniform); every chain's result is
stored after the loop (nothing is dead).

Timing (clock64 per warp): lane 0 of each warp stores its %clock64 before and after the loop
and its %smid. Per SM the busy span is max(end) - min(start) over its warps. The launch is
repeated for three trip counts; the per-SM cycles are fitted against the per-SM op count
(``measure.fit``), so launch skew, operand loads and the final stores cancel. The slope is
cycles per op per SM; its inverse is ops/clk/SM (clock-invariant: %clock64 counts SM cycles).

Verification (``verify_loop``): between the two clock reads there is one loop (a backward
branch to a label), its body holds exactly ``CHAINS * UNROLL`` copies of the row's SASS unit
(opcode and count) and otherwise only loop control (at most ``MAX_LOOP_CONTROL``
instructions); no unit instruction lies outside the loop. Anything else: ProbeInvalid with the
listing, no number.

Peaks: ``PEAK`` is the CUDA C++ Programming Guide's table "Throughput of Native Arithmetic
Instructions (Number of Results per Clock Cycle per Multiprocessor)" (section Arithmetic
Instructions), per compute capability; ``PEAK_SOURCE`` names it.
"""
from __future__ import annotations

import hashlib
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from . import archs, ptx, sass
from .ptx import Frame, Operand, Template
from .verify import ProbeInvalid, matches

BLOCK = 256
BLOCKS_PER_SM = 4          # 1024 threads = 32 warps = 8 per scheduler on 4-scheduler SMs
CHAINS = 8                 # independent chains per thread
UNROLL = 32                # ops per chain per loop iteration (256 ops per iteration)
TRIPS = (64, 128, 192)     # loop trip counts: the differential measurement
MAX_LOOP_CONTROL = 5       # counter add, compare, branch (+ moves some compilers add)
MAX_SETUP = 8              # instructions between the first clock read and the loop
REC_WORDS = 3              # per warp: start, end, smid (u64 each)
SCHEDULERS_PER_SM = 4      # sm_50 .. sm_90 (Many-BSP Table 1-1: 4 warp schedulers per SM)

LOOP_CONTROL = ("CALL.REL.NOINC", "DEPBAR*", "LDC", "IADD3", "IADD", "IADD32I", "VIADD", "IMAD.IADD", "UIADD3", "ISETP*", "UISETP*",
                "BRA", "MOV", "IMAD.MOV*", "UMOV", "NOP", "PLOP3*")
SETUP = ("MOV", "MOV32I", "IMAD.MOV*", "UMOV", "ULDC*", "LDC*", "S2R", "S2UR", "CS2R", "NOP",
         "IADD3", "VIADD", "IMAD.IADD", "UIADD3")

PEAK_SOURCE = ("NVIDIA CUDA C++ Programming Guide, section 'Arithmetic Instructions', table "
               "'Throughput of Native Arithmetic Instructions (Number of Results per Clock Cycle "
               "per Multiprocessor)'")


@dataclass(frozen=True)
class Row:
    """One throughput row: a PTX op chained in place, the SASS one op becomes, and its
    Many-BSP category (the functional unit that executes it)."""
    name: str                      # "fp32.fma"
    category: str                  # Many-BSP Tables 1-2..1-4 wording
    unit_fu: str                   # SPs, DPU, SFU, LDST (Many-BSP Table 1-1)
    template: Template
    sass: dict[int, tuple[str, ...]]   # lowest arch number -> SASS unit of one op
    style: str = "acc"             # "acc": x = op(x, ...); "fib": x = op(x, y); y = op(y, x)
    results_per_op: int = 1        # fp16x2: 2 results per instruction
    min_arch: int = 0
    note: str = ""
    shared: bool = False           # operands live in shared memory (LDST row)

    def unit(self, arch: str) -> tuple[str, ...] | None:
        n = archs.number(arch)
        best = None
        for lo, u in sorted(self.sass.items()):
            if n >= lo:
                best = u
        return best


def _t(text: str, d: int, *srcs: int, kind: str = "int", kinds: dict | None = None) -> Template:
    names = "abce"
    ops = {"d": Operand(d, (kinds or {}).get("d", kind))}
    for i, w in enumerate(srcs):
        ops[names[i]] = Operand(w, (kinds or {}).get(names[i], kind))
    return Template(text, ops)


IADD = "IADD3|IMAD.IADD|VIADD|IADD"
MUFU_FMUL = "FMUL|FMUL.FTZ|FMUL.RZ|FMUL.FTZ.RZ"

# The Beyond3D FMA rows (seed 001): HFMA2, FFMA, DFMA.
FMA_ROWS = [
    Row("hfma2", "16-bit floating-point fma (half2)", "SPs",
        _t("fma.rn.f16x2 {d}, {a}, {b}, {c};", 32, 32, 32, 32, kind="near1"),
        {53: ("HFMA2|HFMA2.MMA",)}, results_per_op=2, min_arch=53,
        note="sm_80+ ptxas issues part of the HFMA2 as HFMA2.MMA (on the MMA pipe)"),
    Row("ffma", "32-bit floating-point fma", "SPs",
        _t("fma.rn.f32 {d}, {a}, {b}, {c};", 32, 32, 32, 32, kind="near1"), {0: ("FFMA",)}),
    Row("dfma", "64-bit floating-point fma", "DPU",
        _t("fma.rn.f64 {d}, {a}, {b}, {c};", 64, 64, 64, 64, kind="near1"), {0: ("DFMA",)}),
]

# Many-BSP Tables 1-2..1-4 categories, one representative PTX op each (the op in `name`).
UNIT_ROWS = [
    Row("fp32.add", "32-bit floating-point add", "SPs",
        _t("add.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="near1"), {0: ("FADD",)}),
    Row("fp32.mul", "32-bit floating-point multiply", "SPs",
        _t("mul.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="near1"), {0: ("FMUL",)}),
    Row("fp32.fma", "32-bit floating-point multiply-add", "SPs",
        _t("fma.rn.f32 {d}, {a}, {b}, {c};", 32, 32, 32, 32, kind="near1"), {0: ("FFMA",)}),
    Row("int.add", "32-bit integer add", "SPs",
        _t("add.u32 {d}, {a}, {b};", 32, 32, 32), {0: (IADD,)}, style="fib"),
    Row("int.mad", "32-bit integer multiply-add", "SPs",
        _t("mad.lo.u32 {d}, {a}, {b}, {c};", 32, 32, 32, 32),
        {0: ("XMAD", "XMAD.MRG", "XMAD.PSL.CBCC"), 70: ("IMAD",)}, style="fib",
        note="Maxwell/Pascal have no 32-bit IMAD: one mad.lo.u32 is three XMAD"),
    Row("int.shift", "32-bit integer shift", "SPs",
        _t("shl.b32 {d}, {a}, {b};", 32, 32, 32, kinds={"b": "small"}),
        {0: ("SHL",), 70: ("SHF.L.U32",)}),
    Row("int.logic", "32-bit bitwise AND, OR, XOR", "SPs",
        _t("lop3.b32 {d}, {a}, {b}, {c}, 0x96;", 32, 32, 32, 32), {0: ("LOP3.LUT",)},
        style="fib", note="lop3 0x96 (a ^ b ^ c) in a two-register chain: a chain of a "
                          "two-input xor folds (seen: ptxas 13.5 removed 2 of 3 ops)"),
    Row("int.brev", "32-bit integer bit reverse", "SPs",
        _t("brev.b32 {d}, {a};", 32, 32), {0: ("BFE.U32.BREV",), 70: ("BREV",)}),
    Row("int.popc", "population count", "SPs",
        _t("popc.b32 {d}, {a};", 32, 32), {0: ("POPC",)}),
    Row("int.sad", "sum of absolute difference", "SPs",
        _t("sad.u32 {d}, {a}, {b}, {c};", 32, 32, 32, 32), {0: ("VABSDIFF*",)}),
    Row("int.minmax", "compare, minimum, maximum", "SPs",
        _t("max.s32 {d}, {a}, {b};", 32, 32, 32),
        {0: ("IMNMX*|VIMNMX*",), 70: ("ISETP.LT.AND", "SEL"), 75: ("IMNMX*|VIMNMX*",)},
        style="fib", note="sm_70 (ptxas 12.4): max.s32 is ISETP + SEL"),
    Row("cvt.f32_f64", "type conversions from and to 64-bit types", "SPs",
        _t("cvt.rn.f32.f64 {d}, {a};", 32, 64, kind="float"),
        {0: ("F2F.F32.F64", "F2F.F64.F32")}, style="roundtrip_f64", results_per_op=2,
        note="one op = cvt.rn.f32.f64 + cvt.f64.f32 (a chain needs both directions): "
             "two 64-bit conversions per op"),
    Row("fp64.add", "64-bit floating-point add", "DPU",
        _t("add.rn.f64 {d}, {a}, {b};", 64, 64, 64, kind="near1"), {0: ("DADD",)}),
    Row("fp64.fma", "64-bit floating-point multiply-add", "DPU",
        _t("fma.rn.f64 {d}, {a}, {b}, {c};", 64, 64, 64, 64, kind="near1"), {0: ("DFMA",)}),
    Row("sfu.rsqrt", "SFU: reciprocal square root", "SFU",
        _t("rsqrt.approx.ftz.f32 {d}, {a};", 32, 32, kind="float"), {0: ("MUFU.RSQ",)},
        note="rsqrt, not rcp: an even-length rcp.approx chain is the identity and is removed "
             "by ptxas (seen: the whole loop eliminated)"),
    Row("sfu.sqrt", "SFU: square root", "SFU",
        _t("sqrt.approx.ftz.f32 {d}, {a};", 32, 32, kind="float"),
        {0: ("MUFU.RSQ",), 52: ("MUFU.SQRT",)},
        note="sm_50 has no MUFU.SQRT: ptxas computes sqrt(sqrt(x)) as rsqrt(rsqrt(x)), one "
             "MUFU.RSQ per PTX sqrt"),
    Row("sfu.lg2", "SFU: base-2 logarithm", "SFU",
        _t("lg2.approx.ftz.f32 {d}, {a};", 32, 32, kind="float"), {0: ("MUFU.LG2",)}),
    Row("sfu.ex2", "SFU: base-2 exponential", "SFU",
        _t("ex2.approx.ftz.f32 {d}, {a};", 32, 32, kind="unit"),
        {0: ("RRO.EX2", "MUFU.EX2"), 70: ("MUFU.EX2",)},
        note="Maxwell/Pascal: range reduction RRO.EX2 before every MUFU.EX2"),
    Row("sfu.sin", "SFU: sine", "SFU",
        _t("sin.approx.ftz.f32 {d}, {a};", 32, 32, kind="unit"),
        {0: ("RRO.SINCOS", "MUFU.SIN"), 70: (MUFU_FMUL, "MUFU.SIN")},
        note="range reduction (RRO / FMUL.RZ) precedes every MUFU.SIN"),
    Row("ldst.lds", "LDST: load from shared memory", "LDST",
        _t("ld.volatile.shared.u32 {d}, [{a}];", 32, 32), {0: ("LDS*",)}, style="lds",
        note="ld.volatile.shared of a per-lane word (conflict-free): volatile so no load "
             "is merged or hoisted", shared=True),
]

ROWS = {r.name: r for r in FMA_ROWS + UNIT_ROWS}


# --- documented peaks ----------------------------------------------------------------------

# Results per clock per SM, CUDA C++ Programming Guide (see PEAK_SOURCE), by compute
# capability; "multi" where the guide says "multiple instructions".
_GUIDE = {
    # row:          5.0    5.2   5.3   6.0   6.1   6.2   7.0   7.5   8.0   8.6   8.9   9.0
    "hfma2":       (None, None, 256,  128,  2,    256,  256,  256,  256,  256,  128,  256),
    "ffma":        (128,  128,  128,  64,   128,  128,  64,   64,   64,   128,  128,  128),
    "dfma":        (4,    4,    4,    32,   4,    4,    32,   2,    32,   2,    2,    64),
    "fp32.add":    (128,  128,  128,  64,   128,  128,  64,   64,   64,   128,  128,  128),
    "fp32.mul":    (128,  128,  128,  64,   128,  128,  64,   64,   64,   128,  128,  128),
    "fp32.fma":    (128,  128,  128,  64,   128,  128,  64,   64,   64,   128,  128,  128),
    "int.add":     (128,  128,  128,  64,   128,  128,  64,   64,   64,   64,   64,   64),
    "int.mad":     ("multi",) * 6 + (64,   64,   64,   64,   64,   64),
    "int.shift":   (64,   64,   64,   32,   64,   64,   64,   64,   64,   64,   64,   64),
    "int.logic":   (128,  128,  128,  64,   128,  128,  64,   64,   64,   64,   64,   64),
    "int.brev":    (64,   64,   64,   32,   64,   64,   16,   16,   16,   16,   16,   16),
    "int.popc":    (32,   32,   32,   16,   32,   32,   16,   16,   16,   16,   16,   16),
    "int.sad":     (64,   64,   64,   32,   64,   64,   64,   64,   64,   64,   64,   64),
    "int.minmax":  (64,   64,   64,   32,   64,   64,   64,   64,   64,   64,   64,   64),
    "cvt.f32_f64": (4,    4,    4,    16,   4,    4,    16,   2,    16,   2,    2,    16),
    "fp64.add":    (4,    4,    4,    32,   4,    4,    32,   2,    32,   2,    2,    64),
    "fp64.fma":    (4,    4,    4,    32,   4,    4,    32,   2,    32,   2,    2,    64),
    "sfu.rsqrt":   (32,   32,   32,   16,   32,   32,   16,   16,   16,   16,   16,   16),
    "sfu.sqrt":    (32,   32,   32,   16,   32,   32,   16,   16,   16,   16,   16,   16),
    "sfu.lg2":     (32,   32,   32,   16,   32,   32,   16,   16,   16,   16,   16,   16),
    "sfu.ex2":     (32,   32,   32,   16,   32,   32,   16,   16,   16,   16,   16,   16),
    "sfu.sin":     (32,   32,   32,   16,   32,   32,   16,   16,   16,   16,   16,   16),
}
_GUIDE_CC = ("sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_75", "sm_80",
             "sm_86", "sm_89", "sm_90")
# Kepler sm_30 (the guide's CUDA 10 edition, the last to list 3.0): fp32 192, fp64 8
_KEPLER = {"ffma": 192, "dfma": 8, "fp32.add": 192, "fp32.mul": 192, "fp32.fma": 192,
           "fp64.add": 8, "fp64.fma": 8}


def peak(row: str, arch: str) -> float | None:
    """The documented results/clk/SM of a row on an arch (None: not a single native
    instruction there, or not listed)."""
    a = "sm_90" if arch == "sm_90a" else arch
    if a == "sm_30":
        v = _KEPLER.get(row)
        return float(v) if v else None
    if a not in _GUIDE_CC or row not in _GUIDE:
        return None
    v = _GUIDE[row][_GUIDE_CC.index(a)]
    return float(v) if isinstance(v, (int, float)) else None


# --- PTX ---------------------------------------------------------------------------------

def _kernel_name(row: Row) -> str:
    return "tp_" + re.sub(r"[^A-Za-z0-9]+", "_", row.name)


def _body(row: Row, frame: Frame, unroll: int, chains: int) -> tuple[list[str], list[tuple[str, int]]]:
    """Loop-body lines of `chains` chains of `unroll` ops each, interleaved op by op (chain 0
    op 0, chain 1 op 0, ...), every chain updated in place so its value is loop-carried."""
    t = row.template
    src = t.sources
    lines: list[list[str]] = []
    results: list[tuple[str, int]] = []
    shared: dict[str, str] = {}

    def shared_operand(f: str) -> str:
        # one register per source field for all chains: consecutive ops read it in the same
        # operand slot, so the operand reuse cache serves it (with a register per chain, three
        # source registers per FFMA/DFMA/HFMA2 hit register-bank conflicts: seen on H200,
        # 74% of the FFMA peak)
        if f not in shared:
            shared[f] = frame.load(t.operands[f].width, t.operands[f].kind)
        return shared[f]

    for _ in range(chains):
        seq: list[str] = []
        if row.style == "bar":
            # no value: `unroll` barriers of the whole block (Many-BSP Tables 1-5..1-7)
            seq = [t.text] * unroll
            lines.append(seq)
            break
        if row.style == "lds":
            # the address is the chain value itself: a per-lane shared word holding its own
            # address, so x = ld.shared [x] keeps x (and depends on the previous load)
            x = frame.reg(32)
            frame.loads.append(f"mov.u32 {x}, %lds_addr;")
            for _ in range(unroll):
                seq.append(t.render({"d": x, "a": x}))
            results.append((x, 32))
        elif row.style == "roundtrip_f64":
            x = frame.load(64, "float")
            f = frame.reg(32)
            for _ in range(unroll):
                seq.append(f"cvt.rn.f32.f64 {f}, {x};")
                seq.append(f"cvt.f64.f32 {x}, {f};")
            results.append((x, 64))
        elif row.style == "fib":
            x = frame.load(t.operands["a"].width, t.operands["a"].kind)
            y = frame.load(t.operands["a"].width, t.operands["a"].kind)
            fixed = {f: shared_operand(f) for f in src if f not in ("a", "b")}
            cur, other = x, y
            for _ in range(unroll):
                seq.append(t.render({"d": cur, "a": cur, "b": other, **fixed}))
                cur, other = other, cur
            results += [(x, t.operands["a"].width), (y, t.operands["a"].width)]
        else:
            x = frame.load(t.operands["a"].width, t.operands["a"].kind)
            fixed = {f: shared_operand(f) for f in src if f != "a"}
            for _ in range(unroll):
                seq.append(t.render({"d": x, "a": x, **fixed}))
            results.append((x, t.operands["a"].width))
        lines.append(seq)
    inter = [s[k] for k in range(max(len(s) for s in lines)) for s in lines if k < len(s)]
    return inter, results


def kernel(row: Row, arch: str, *, unroll: int = UNROLL, chains: int = CHAINS,
           block: int = BLOCK, blocks_per_sm: int = BLOCKS_PER_SM) -> tuple[str, Frame, int]:
    """PTX of the row's throughput kernel; returns (text, frame, result slots per thread).

    Parameters: rec (per-warp start/end/smid, u64 each), res (per-thread results), in
    (operands, one block of input slots per lane), iters (loop trip count)."""
    frame = Frame()
    body, results = _body(row, frame, unroll, chains)
    name = _kernel_name(row)
    n_in = max(1, len(frame.inputs)) * ptx.SLOT_BYTES
    stores = []
    off = 0
    for reg, width in results:
        stores.append(f"st.global.b{width} [%res+{off}], {reg};")
        off += ptx.SLOT_BYTES
    shared_decl, shared_setup = [], []
    if row.shared:
        shared_decl = [f".shared .align 4 .b32 tp_lds[{block}];"]
        shared_setup = [
            "mov.u32 %lds_addr, tp_lds;",
            "shl.b32 %lds_off, %tidx, 2;",
            "add.u32 %lds_addr, %lds_addr, %lds_off;",
            "st.shared.u32 [%lds_addr], %lds_addr;",
            "bar.sync 0;",
        ]
    text = "\n".join([
        *shared_decl,
        f".visible .entry {name}(.param .u64 rec_param, .param .u64 res_param, "
        f".param .u64 in_param, .param .u32 iters_param)",
        f".maxntid {block}, 1, 1",
        f".minnctapersm {blocks_per_sm}",
        "{",
        ".reg .b64 %rec, %res, %in, %toff, %t0, %t1, %smid64;",
        ".reg .b32 %tidx, %nt, %cta, %gtid, %lane, %warp, %iters, %it, %sm, "
        "%lds_addr, %lds_off;",
        ".reg .pred %again, %lead;",
        *frame.declarations(),
        "ld.param.u64 %rec, [rec_param];",
        "ld.param.u64 %res, [res_param];",
        "ld.param.u64 %in, [in_param];",
        "ld.param.u32 %iters, [iters_param];",
        "mov.u32 %tidx, %tid.x;",
        "mov.u32 %nt, %ntid.x;",
        "mov.u32 %cta, %ctaid.x;",
        "mad.lo.u32 %gtid, %cta, %nt, %tidx;",
        "and.b32 %lane, %tidx, 31;",
        # operands per lane: not uniform, not foldable
        f"mul.wide.u32 %toff, %lane, {n_in};",
        "add.u64 %in, %in, %toff;",
        f"mul.wide.u32 %toff, %gtid, {max(off, ptx.SLOT_BYTES)};",
        "add.u64 %res, %res, %toff;",
        *shared_setup,
        *frame.loads,
        "mov.u64 %t0, %clock64;",
        "mov.u32 %it, 0;",
        "$TP_LOOP:",
        '.pragma "nounroll";',
        *body,
        "add.u32 %it, %it, 1;",
        "setp.lt.u32 %again, %it, %iters;",
        "@%again bra $TP_LOOP;",
        "mov.u64 %t1, %clock64;",
        *stores,
        "setp.eq.u32 %lead, %lane, 0;",
        "shr.u32 %warp, %gtid, 5;",
        f"mul.wide.u32 %toff, %warp, {REC_WORDS * 8};",
        "add.u64 %rec, %rec, %toff;",
        "mov.u32 %sm, %smid;",
        "cvt.u64.u32 %smid64, %sm;",
        "@%lead st.global.u64 [%rec], %t0;",
        "@%lead st.global.u64 [%rec+8], %t1;",
        "@%lead st.global.u64 [%rec+16], %smid64;",
        "ret;",
        "}",
    ]) + "\n"
    return text, frame, max(1, len(results))


@dataclass
class TPProbe:
    """A throughput probe of one row and arch: PTX, kernel name, inputs, ops per thread."""
    row: Row
    arch: str
    ptx: str                      # the kernel alone (no module header)
    entry: str
    frame: Frame
    result_slots: int
    ops_per_iter: int             # PTX ops per thread per loop iteration
    unroll: int = UNROLL
    chains: int = CHAINS

    @property
    def name(self) -> str:
        return f"throughput/{self.row.name}"

    @property
    def module(self) -> str:
        return ptx.header(self.arch) + self.ptx

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.module.encode()).hexdigest()[:16]

    def results_per_iter(self) -> int:
        """Results (scalar operations) per thread per loop iteration."""
        return self.ops_per_iter * self.row.results_per_op


def probe(row: Row | str, arch: str) -> TPProbe:
    row = ROWS[row] if isinstance(row, str) else row
    text, frame, slots = kernel(row, arch)
    return TPProbe(row, arch, text, _kernel_name(row), frame, slots, UNROLL * CHAINS)


def supported(row: Row, arch: str) -> str | None:
    """None if the row can run on `arch`, else the reason it cannot."""
    if archs.number(arch) < row.min_arch:
        return f"{row.name} needs sm_{row.min_arch}+ ({arch} lacks it)"
    return None


def suite_probes(arch: str) -> list[TPProbe]:
    return [probe(r, arch) for r in ROWS.values() if supported(r, arch) is None]


def batch_module(arch: str, probes_: list[TPProbe]) -> str:
    return ptx.header(arch) + "\n".join(p.ptx for p in probes_)


# --- one module per arch: every throughput and launch kernel, compiled once ----------------

_STATIC: dict[tuple[str, str], dict[str, sass.Function]] = {}
_JIT: dict[tuple[str, str], tuple[object, dict[str, sass.Function]]] = {}


def topic_module(arch: str) -> str:
    """Every kernel of the throughput topic for `arch` (throughput rows, bar.sync, launch
    stamps) in one PTX module: one ptxas run offline, one driver JIT link on the GPU."""
    from . import launch
    parts = [p.ptx for p in suite_probes(arch)]
    parts += [launch.bar_probe(arch, n).ptx for n in launch.BAR_THREADS]
    parts += [launch.entry_kernel(launch.WARP_ENTRY, exit_stamp=False),
              launch.entry_kernel(launch.BLOCK_ENTRY, exit_stamp=True)]
    return ptx.header(arch) + "\n".join(parts)


def static_sass(arch: str) -> tuple[object, dict[str, sass.Function]]:
    """(ptxas Tool, SASS of every topic kernel) from one offline ptxas + nvdisasm run."""
    from . import probes as _probes, toolchain
    tool = toolchain.find("ptxas", arch)
    toolchain.find("nvdisasm", arch)
    key = (arch, tool.version)
    if key not in _STATIC:
        _STATIC[key] = _probes.functions_of(toolchain.assemble(topic_module(arch), arch), arch)
    return tool, _STATIC[key]


def jit_sass(dev) -> tuple[object, dict[str, sass.Function]]:
    """(driver-compiled module, its SASS) of every topic kernel: one JIT link per session."""
    from . import jit, probes as _probes
    key = (dev.arch, dev.driver)
    if key not in _JIT:
        compiled = jit.compile_probe(topic_module(dev.arch), dev.driver, "gpuchar_throughput.ptx")
        _JIT[key] = (compiled, _probes.functions_of(compiled.cubin, dev.arch))
    return _JIT[key]


# --- verification ------------------------------------------------------------------------

def _listing(region: list[sass.Instr]) -> str:
    return sass.format_listing(region)


def _is_counter(ins: sass.Instr) -> bool:
    """The loop counter's increment: x = x + 1 (chains never add a literal)."""
    ops = [o.replace(".reuse", "") for o in ins.operands]
    return (ins.base in ("IADD3", "IADD", "IADD32I", "VIADD", "UIADD3") and len(ops) >= 3
            and ops[0] == ops[1] and ops[2] == "0x1")


def _is_const_move(ins: sass.Instr) -> bool:
    """A constant materialised with HFMA2.MMA (-RZ * RZ + imm): a move, not an FMA."""
    return ins.opcode == "HFMA2.MMA" and tuple(ins.operands[1:3]) == ("-RZ", "RZ")


def verify_loop(p: TPProbe, func: sass.Function) -> dict:
    """Check the timed region of a throughput kernel; returns the SASS unit found per op
    ({opcode: count per op}) or raises ProbeInvalid with the listing."""
    unit = p.row.unit(p.arch)
    name = p.name
    groups = sass.clock_groups(func)
    if len(groups) < 2:
        raise ProbeInvalid(f"probe invalid: {name} ({p.arch}): expected two clock reads, "
                           f"found {len(groups)}")
    lo, hi = groups[0][1] + 1, groups[1][0]
    region = sass.timed_region(func)
    count = p.ops_per_iter

    def fail(why: str) -> ProbeInvalid:
        return ProbeInvalid(
            f"probe invalid: {name} ({p.arch}): {why}\nintended: one loop whose body is "
            f"{count} x [{' + '.join(unit or ())}] + loop control\n-- timed region "
            f"({len(region)} instructions):\n{_listing(region)}")

    if unit is None:
        raise fail("no SASS unit known for this arch")
    # the loop: a backward branch inside the region to a label inside the region
    branches = []
    for k in range(lo, hi):
        ins = func.instrs[k]
        if ins.base == "BRA":
            m = re.search(r"\.L_x_\d+", " ".join(ins.operands))
            target = func.labels.get(m.group(0)) if m else None
            if target is not None and lo <= target <= k:
                branches.append((target, k))
    if len(branches) != 1:
        raise fail(f"expected exactly one loop (backward branch) between the clock reads, "
                   f"found {len(branches)}")
    start, end = branches[0]
    body = func.instrs[start:end + 1]
    outside = func.instrs[lo:start] + func.instrs[end + 1:hi]
    pats = list(unit)
    need = Counter()
    extra: list[str] = []
    for ins in body:
        if ins.pred == "@!PT":
            continue                   # never executed (a scheduling placeholder)
        if _is_counter(ins):
            extra.append(ins.opcode)   # the loop counter
            continue
        for k, pat in enumerate(pats):
            if matches(ins.opcode, pat):
                need[k] += 1
                break
        else:
            extra.append(ins.opcode)
    got = [need[k] for k in range(len(pats))]
    if any(g != count for g in got):
        raise fail(f"loop body holds {dict(zip(pats, got))} intended instructions, wanted "
                   f"{count} of each (folded, hoisted, unrolled or eliminated?)")
    bad = [op for op in extra if not any(matches(op, c) for c in LOOP_CONTROL)]
    if bad or len([op for op in extra if not op.startswith(("DEPBAR", "NOP"))]) > MAX_LOOP_CONTROL:
        raise fail(f"loop body holds other instructions than the ops and loop control: "
                   f"{dict(Counter(extra))}")
    outside = [i for i in outside if i.pred != "@!PT" and not _is_const_move(i)]
    stray = [i.opcode for i in outside if any(matches(i.opcode, u) for u in pats)]
    if stray:
        raise fail(f"intended instructions outside the loop: {dict(Counter(stray))}")
    other = [i.opcode for i in outside if not any(matches(i.opcode, c) for c in SETUP)]
    if other or len(outside) > MAX_SETUP:
        raise fail(f"unexpected instructions around the loop: {dict(Counter(i.opcode for i in outside))}")
    seen = Counter(i.opcode for i in body)
    return {"unit": {op: round(c / count, 3) for op, c in sorted(seen.items())
                     if any(matches(op, u) for u in pats)},
            "loop_control": dict(Counter(extra)), "body_instructions": len(body)}


# --- launching and fitting ---------------------------------------------------------------

@dataclass
class Measured:
    """Whole-GPU throughput of one row: per-trip-count per-repeat per-SM busy cycles."""
    probe: TPProbe
    rate: float                       # results per clock per SM (median over repeats)
    spread: float                     # max - min of per-repeat rates
    unstable: bool
    why: str
    cycles: dict[int, list[float]]    # trip count -> per-repeat median (over SMs) busy cycles
    results_per_sm: dict[int, float]  # trip count -> results per SM
    sms: int
    warps_per_sm: list[int]
    verdict: dict
    wall_ms: dict[int, float] = field(default_factory=dict)
    fit_intercept: float = 0.0
    method: str = ""
    rates: list[float] = field(default_factory=list)   # per-repeat rates

    def as_fit(self):
        """A measure.Fit of the rate (for the `record` fixture): value = results/clk/SM."""
        from .measure import Fit
        med = {t: float(statistics.median(v)) for t, v in self.cycles.items()}
        return Fit(self.rate, self.spread, self.rates, self.fit_intercept, 0.0, self.unstable,
                   self.why, med)


def per_sm_spans(rec: np.ndarray) -> dict[int, tuple[int, int]]:
    """rec: (warps, 3) u64 [start, end, smid] -> {smid: (busy cycles, warps)}."""
    out: dict[int, list] = {}
    for start, end, smid in rec.tolist():
        s = out.setdefault(int(smid), [start, end, 0])
        s[0] = min(s[0], start)
        s[1] = max(s[1], end)
        s[2] += 1
    return {k: (int(v[1] - v[0]), v[2]) for k, v in out.items()}


def rate_from_spans(spans: dict[int, dict[int, float]], results_per_sm: dict[int, float],
                    *, spread_rel: float = 0.02):
    """Fit per-SM busy cycles against results per SM over trip counts (measure.fit): slope
    = cycles per result; rate = 1 / slope. `spans`: trip -> per-repeat cycles list."""
    from . import measure
    f = measure.fit(spans, results_per_sm, spread_abs=0.0, spread_rel=spread_rel)
    rates = [1.0 / s for s in f.slopes if s > 0]
    rate = 1.0 / f.value if f.value > 0 else float("nan")
    spread = (max(rates) - min(rates)) if rates else float("nan")
    why = f.why_unstable
    if why and rates:
        why += f" (per-repeat rates {min(rates):.2f}..{max(rates):.2f} results/clk/SM)"
    return rate, spread, f.unstable, why, f.intercept, rates


METHOD = ("whole GPU: {blocks} blocks x {block} threads ({bps} per SM, all resident, held to "
          "{bps} per SM by {smem} B dynamic shared memory), {chains} "
          "independent chains x {unroll} ops per loop iteration per thread; %clock64 per warp, "
          "per-SM busy span (min start .. max end), slope over trip counts {trips} "
          "(median of {reps} launches after a warm-up, median over SMs)")


def run(p: TPProbe, dev, *, repeats: int = 5, watchdog_s: float = 20.0,
        trips: tuple[int, ...] = TRIPS) -> Measured:
    """JIT (driver), verify the driver's SASS, launch on every SM, fit."""
    import cupy as cp
    from . import measure, values
    if measure.wedged():
        raise measure.GPUWedged(f"GPU wedged by probe {measure.wedged()}; not launching {p.name}")
    compiled, funcs = jit_sass(dev)
    verdict = verify_loop(p, funcs[p.entry])
    fn = compiled.function(p.entry)
    blocks = dev.sm_count * BLOCKS_PER_SM
    threads = blocks * BLOCK
    warps = threads // 32
    one = np.frombuffer(values.input_buffer(p.frame.inputs), dtype=np.uint8)
    d_in = cp.asarray(np.tile(one, 32))
    d_res = cp.zeros(threads * p.result_slots, dtype=np.uint64)
    recs = {t: cp.zeros((repeats + 1, warps, REC_WORDS), dtype=np.uint64) for t in trips}
    wall: dict[int, list[float]] = {t: [] for t in trips}
    smem = dynamic_smem(dev.shared_per_sm)
    for r in range(repeats + 1):
        for t in trips:
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            fn((blocks,), (BLOCK,), (recs[t][r], d_res, d_in, np.uint32(t)), shared_mem=smem)
            b.record()
            measure._poll(b, p.name, watchdog_s)
            if r:
                wall[t].append(cp.cuda.get_elapsed_time(a, b))
    measure._wait(p.name, watchdog_s)
    spans: dict[int, list[float]] = {}
    warps_per_sm: list[int] = []
    sms = 0
    for t in trips:
        host = recs[t].get()
        spans[t] = []
        for r in range(1, repeats + 1):
            per = per_sm_spans(host[r])
            sms = len(per)
            warps_per_sm = sorted({w for _, w in per.values()})
            spans[t].append(float(statistics.median(c for c, _ in per.values())))
    wps = warps // max(1, sms)
    results_per_sm = {t: float(wps * 32 * t * p.results_per_iter()) for t in trips}
    rate, spread, unstable, why, icpt, rates = rate_from_spans(spans, results_per_sm)
    if len(warps_per_sm) != 1:
        unstable, why = True, (f"warps per SM differ between SMs ({warps_per_sm}): blocks were "
                               f"not spread evenly; per-SM op counts are not known")
    method = METHOD.format(blocks=blocks, block=BLOCK, bps=BLOCKS_PER_SM, smem=smem, chains=p.chains,
                           unroll=p.unroll, trips=list(trips), reps=repeats)
    return Measured(p, rate, spread, unstable, why, spans, results_per_sm, sms, warps_per_sm,
                    verdict, {t: float(statistics.median(v)) for t, v in wall.items()}, icpt,
                    method, rates)


def dynamic_smem(shared_per_sm: int, blocks_per_sm: int = BLOCKS_PER_SM) -> int:
    """Dynamic shared memory per block that lets `blocks_per_sm` blocks share an SM but not
    one more (1 KiB reserved per block): with grid = SMs x blocks_per_sm every SM then runs
    exactly blocks_per_sm blocks, whatever the registers would allow. 0 when no size under
    the 48 KiB default limit does that (the per-SM warp counts are then checked)."""
    if not shared_per_sm:
        return 0
    x = shared_per_sm // (blocks_per_sm + 1) + 1024
    if x > 48 * 1024 or blocks_per_sm * (x + 1024) > shared_per_sm:
        return 0
    return x


def launcher(p: TPProbe, dev, trips: int = TRIPS[-1]):
    """A callable that launches the row's kernel once on every SM and waits for it (the
    timer pytest-benchmark uses then measures a synchronised launch)."""
    import cupy as cp
    from . import values
    compiled, _ = jit_sass(dev)
    fn = compiled.function(p.entry)
    blocks = dev.sm_count * BLOCKS_PER_SM
    d_in = cp.asarray(np.tile(np.frombuffer(values.input_buffer(p.frame.inputs), np.uint8), 32))
    d_res = cp.zeros(blocks * BLOCK * p.result_slots, dtype=np.uint64)
    rec = cp.zeros((blocks * BLOCK // 32, REC_WORDS), dtype=np.uint64)

    smem = dynamic_smem(dev.shared_per_sm)

    def once():
        fn((blocks,), (BLOCK,), (rec, d_res, d_in, np.uint32(trips)), shared_mem=smem)
        cp.cuda.get_current_stream().synchronize()
    return once
