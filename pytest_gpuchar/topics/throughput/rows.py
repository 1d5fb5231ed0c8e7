"""The throughput and launch tables as data: the Beyond3D FMA rows (seed 001), the Many-BSP
functional-unit categories (seed 002, Tables 1-2..1-4), the bar.sync row (Tables 1-5..1-7), the
launch parameters (Table 1-8) and the documented peaks they are compared with.

Peaks: ``peak`` is the CUDA C++ Programming Guide's table "Throughput of Native Arithmetic
Instructions (Number of Results per Clock Cycle per Multiprocessor)" (section Arithmetic
Instructions), per compute capability; ``PEAK_SOURCE`` names it.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ...core import archs
from ...core.ptx import Operand, Template

SCHEDULERS_PER_SM = archs.SCHEDULERS_PER_SM
BAR_THREADS = (256, 1024)  # bar.sync rows: threads per block


class Style(str, Enum):
    """How one chain of a row's op is built in the loop body."""
    ACC = "acc"                        # x = op(x, ...), the other sources shared by all chains
    FIB = "fib"                        # x = op(x, y); y = op(y, x)
    ROUNDTRIP_F64 = "roundtrip_f64"    # f = cvt.f32(x); x = cvt.f64(f)
    LDS = "lds"                        # x = ld.shared [x]: a word holding its own address
    BAR = "bar"                        # no value: barriers of the whole block, one "chain"


@dataclass(frozen=True)
class ThroughputRow:
    """One throughput row: a PTX op chained in place, the SASS one op becomes, and its
    Many-BSP category (the functional unit that executes it)."""
    name: str                      # "fp32.fma"
    category: str                  # Many-BSP Tables 1-2..1-4 wording
    unit_fu: str                   # SPs, DPU, SFU, LDST (Many-BSP Table 1-1)
    template: Template
    sass: dict[int, tuple[str, ...]]   # lowest arch number -> SASS unit of one op
    style: Style = Style.ACC
    results_per_op: int = 1        # fp16x2: 2 results per instruction
    min_arch: int = 0
    note: str = ""
    shared: bool = False           # operands live in shared memory (LDST row)
    lacking: tuple = ()            # ((first arch number, last, why), ...): no such unit there

    def unit(self, arch: str) -> tuple[str, ...] | None:
        n = archs.number(arch)
        best = None
        for lo, u in sorted(self.sass.items()):
            if n >= lo:
                best = u
        return best

    def supported(self, arch: str) -> str | None:
        """None if the row can run on `arch`, else the reason it cannot."""
        n = archs.number(arch)
        if n < self.min_arch:
            return f"{self.name} needs sm_{self.min_arch}+ ({arch} lacks it)"
        for lo, hi, why in self.lacking:
            if lo <= n <= hi:
                return f"{self.name}: {why}"
        return None


def op(text: str, d: int, *srcs: int, kind: str = "int", kinds: dict | None = None) -> Template:
    """Template shorthand: widths of d and of the sources a, b, c, e in order."""
    names = "abce"
    ops = {"d": Operand(d, (kinds or {}).get("d", kind))}
    for i, w in enumerate(srcs):
        ops[names[i]] = Operand(w, (kinds or {}).get(names[i], kind))
    return Template(text, ops)


IADD = "IADD3|IMAD.IADD|VIADD|IADD"
MUFU_FMUL = "FMUL|FMUL.FTZ|FMUL.RZ|FMUL.FTZ.RZ"

# The FMA rows read two registers: x = x*b + x, the chain value as multiplicand and addend,
# b = -2 (loaded: unknown to the compiler) so x = -x exactly, never 0, inf or subnormal.
# Three distinct source registers per op (x*b + c) cost the DPU its peak, on one SM and on all
# alike (docs/throughput.md); the three-register form is kept as an audit row
# (OPERAND_AUDIT_ROWS).
TWO_REGISTERS = ("two source registers per op: x = x*b + x (the chain value as multiplicand "
                 "and addend, b = -2 loaded)")


def fma_op(ptx_type: str, width: int, b_kind: str) -> Template:
    return op(f"fma.rn.{ptx_type} {{d}}, {{a}}, {{b}}, {{a}};", width, width, width,
              kind="near1", kinds={"b": b_kind})


# The Beyond3D FMA rows (seed 001): HFMA2, FFMA, DFMA.
FMA_ROWS = [
    ThroughputRow("hfma2", "16-bit floating-point fma (half2)", "SPs", fma_op("f16x2", 32, "neg2.f16x2"),
        {53: ("HFMA2|HFMA2.MMA",)}, results_per_op=2, min_arch=53,
        note="sm_80+ ptxas issues part of the HFMA2 as HFMA2.MMA (on the MMA pipe); "
             + TWO_REGISTERS),
    ThroughputRow("ffma", "32-bit floating-point fma", "SPs", fma_op("f32", 32, "neg2"), {0: ("FFMA",)},
        note=TWO_REGISTERS),
    ThroughputRow("dfma", "64-bit floating-point fma", "DPU", fma_op("f64", 64, "neg2"), {0: ("DFMA",)},
        note=TWO_REGISTERS),
]

# The operand-pattern audit: the same FMAs with three distinct source registers per op
# (x = x*b + c, b and c shared by the chains), the suite's pattern before; measured beside
# the rows above so the effect of the operand pattern on each unit is recorded every run.
THREE_REGISTERS = "three source registers per op: x = x*b + c (b, c loaded, shared by chains)"
OPERAND_AUDIT_ROWS = [
    ThroughputRow("hfma2.three_registers", "16-bit floating-point fma (half2)", "SPs",
        op("fma.rn.f16x2 {d}, {a}, {b}, {c};", 32, 32, 32, 32, kind="near1"),
        {53: ("HFMA2|HFMA2.MMA",)}, results_per_op=2, min_arch=53, note=THREE_REGISTERS),
    ThroughputRow("ffma.three_registers", "32-bit floating-point fma", "SPs",
        op("fma.rn.f32 {d}, {a}, {b}, {c};", 32, 32, 32, 32, kind="near1"), {0: ("FFMA",)},
        note=THREE_REGISTERS),
    ThroughputRow("dfma.three_registers", "64-bit floating-point fma", "DPU",
        op("fma.rn.f64 {d}, {a}, {b}, {c};", 64, 64, 64, 64, kind="near1"), {0: ("DFMA",)},
        note=THREE_REGISTERS),
]

# Many-BSP Tables 1-2..1-4 categories, one representative PTX op each (the op in `name`).
UNIT_ROWS = [
    ThroughputRow("fp32.add", "32-bit floating-point add", "SPs",
        op("add.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="near1"), {0: ("FADD",)}),
    ThroughputRow("fp32.mul", "32-bit floating-point multiply", "SPs",
        op("mul.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="near1"), {0: ("FMUL",)}),
    ThroughputRow("fp32.fma", "32-bit floating-point multiply-add", "SPs", fma_op("f32", 32, "neg2"),
        {0: ("FFMA",)}, note=TWO_REGISTERS),
    ThroughputRow("int.add", "32-bit integer add", "SPs",
        op("add.u32 {d}, {a}, {b};", 32, 32, 32), {0: (IADD,)}, style=Style.FIB),
    ThroughputRow("int.mad", "32-bit integer multiply-add", "SPs",
        op("mad.lo.u32 {d}, {a}, {b}, {c};", 32, 32, 32, 32),
        {0: ("XMAD", "XMAD.MRG", "XMAD.PSL.CBCC"), 70: ("IMAD",)}, style=Style.FIB,
        note="Maxwell/Pascal have no 32-bit IMAD: one mad.lo.u32 is three XMAD"),
    ThroughputRow("int.shift", "32-bit integer shift", "SPs",
        op("shl.b32 {d}, {a}, {b};", 32, 32, 32, kinds={"b": "small"}),
        {0: ("SHL",), 70: ("SHF.L.U32",)}),
    ThroughputRow("int.logic", "32-bit bitwise AND, OR, XOR", "SPs",
        op("lop3.b32 {d}, {a}, {b}, {c}, 0x96;", 32, 32, 32, 32), {0: ("LOP3.LUT",)},
        style=Style.FIB, note="lop3 0x96 (a ^ b ^ c) in a two-register chain: a chain of a "
                              "two-input xor folds (seen: ptxas 13.5 removed 2 of 3 ops)"),
    ThroughputRow("int.brev", "32-bit integer bit reverse", "SPs",
        op("brev.b32 {d}, {a};", 32, 32), {0: ("BFE.U32.BREV",), 70: ("BREV",)}),
    ThroughputRow("int.popc", "population count", "SPs",
        op("popc.b32 {d}, {a};", 32, 32), {0: ("POPC",)}),
    ThroughputRow("int.sad", "sum of absolute difference", "SPs",
        op("sad.u32 {d}, {a}, {b}, {c};", 32, 32, 32, 32), {0: ("VABSDIFF*",)},
        lacking=((120, 121, "sm_120/sm_121 have no VABSDIFF: ptxas 13.x makes sad.u32 two "
                  "VIMNMX.U32 (max, min) and an IADD3, no unit of its own to time"),)),
    ThroughputRow("int.minmax", "compare, minimum, maximum", "SPs",
        op("max.s32 {d}, {a}, {b};", 32, 32, 32),
        {0: ("IMNMX*|VIMNMX*",), 70: ("ISETP.LT.AND", "SEL"), 75: ("IMNMX*|VIMNMX*",)},
        style=Style.FIB, note="sm_70 (ptxas 12.4): max.s32 is ISETP + SEL"),
    ThroughputRow("cvt.f32_f64", "type conversions from and to 64-bit types", "SPs",
        op("cvt.rn.f32.f64 {d}, {a};", 32, 64, kind="float"),
        {0: ("F2F.F32.F64", "F2F.F64.F32")}, style=Style.ROUNDTRIP_F64, results_per_op=2,
        note="one op = cvt.rn.f32.f64 + cvt.f64.f32 (a chain needs both directions): "
             "two 64-bit conversions per op"),
    ThroughputRow("fp64.add", "64-bit floating-point add", "DPU",
        op("add.rn.f64 {d}, {a}, {b};", 64, 64, 64, kind="near1"), {0: ("DADD",)}),
    ThroughputRow("fp64.fma", "64-bit floating-point multiply-add", "DPU", fma_op("f64", 64, "neg2"),
        {0: ("DFMA",)}, note=TWO_REGISTERS),
    ThroughputRow("sfu.rsqrt", "SFU: reciprocal square root", "SFU",
        op("rsqrt.approx.ftz.f32 {d}, {a};", 32, 32, kind="float"), {0: ("MUFU.RSQ",)},
        note="rsqrt, not rcp: an even-length rcp.approx chain is the identity and is removed "
             "by ptxas (seen: the whole loop eliminated)"),
    ThroughputRow("sfu.sqrt", "SFU: square root", "SFU",
        op("sqrt.approx.ftz.f32 {d}, {a};", 32, 32, kind="float"),
        {0: ("MUFU.RSQ",), 52: ("MUFU.SQRT",)},
        note="sm_50 has no MUFU.SQRT: ptxas computes sqrt(sqrt(x)) as rsqrt(rsqrt(x)), one "
             "MUFU.RSQ per PTX sqrt"),
    ThroughputRow("sfu.lg2", "SFU: base-2 logarithm", "SFU",
        op("lg2.approx.ftz.f32 {d}, {a};", 32, 32, kind="float"), {0: ("MUFU.LG2",)}),
    ThroughputRow("sfu.ex2", "SFU: base-2 exponential", "SFU",
        op("ex2.approx.ftz.f32 {d}, {a};", 32, 32, kind="unit"),
        {0: ("RRO.EX2", "MUFU.EX2"), 70: ("MUFU.EX2",)},
        note="Maxwell/Pascal: range reduction RRO.EX2 before every MUFU.EX2"),
    ThroughputRow("sfu.sin", "SFU: sine", "SFU",
        op("sin.approx.ftz.f32 {d}, {a};", 32, 32, kind="unit"),
        {0: ("RRO.SINCOS", "MUFU.SIN"), 70: (MUFU_FMUL, "MUFU.SIN")},
        note="range reduction (RRO / FMUL.RZ) precedes every MUFU.SIN"),
    ThroughputRow("ldst.lds", "LDST: load from shared memory", "LDST",
        op("ld.volatile.shared.u32 {d}, [{a}];", 32, 32), {0: ("LDS*",)}, style=Style.LDS,
        note="ld.volatile.shared of a per-lane word (conflict-free): volatile so no load "
             "is merged or hoisted", shared=True),
]

ROWS = {r.name: r for r in FMA_ROWS + OPERAND_AUDIT_ROWS + UNIT_ROWS}

# Many-BSP Tables 1-5..1-7: bar.sync overhead of a whole block.
BAR_ROW = ThroughputRow("bar.sync", "bar.sync overhead (whole block)", "MI",
              op("bar.sync 0;", 32, 32),
              {0: ("BAR.SYNC", "MEMBAR.CTA"), 70: ("BAR.SYNC|BAR.SYNC.DEFER_BLOCKING",)},
              style=Style.BAR, note="Maxwell/Pascal (ptxas 12.4): bar.sync is BAR.SYNC + "
                                    "MEMBAR.CTA (+ NOP padding)")


class LaunchCost(str, Enum):
    """Many-BSP Table 1-8's launch parameters."""
    WARP = "warp"                  # warp_lnch_ovh
    BLOCK = "block"                # block_lnch_ovh
    ISSUE_CYCLE = "issue_cycle"    # issue_cycle (from the throughput rows)


LAUNCH_ROWS = tuple(LaunchCost)


# --- documented peaks ----------------------------------------------------------------------

PEAK_SOURCE = ("NVIDIA CUDA C++ Programming Guide, section 'Arithmetic Instructions', table "
               "'Throughput of Native Arithmetic Instructions (Number of Results per Clock Cycle "
               "per Multiprocessor)'")

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
    instruction there, or not listed). An audit row has the peak of its unit's row."""
    row = row.split(".three_registers")[0]
    a = "sm_90" if arch == "sm_90a" else arch
    if a == "sm_30":
        v = _KEPLER.get(row)
        return float(v) if v else None
    if a not in _GUIDE_CC or row not in _GUIDE:
        return None
    v = _GUIDE[row][_GUIDE_CC.index(a)]
    return float(v) if isinstance(v, (int, float)) else None
