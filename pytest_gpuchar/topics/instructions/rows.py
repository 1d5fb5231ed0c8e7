"""The instruction tables of the Ampere paper (seed 003, Tables I, II and V) as probe rows.

Each row names a PTX instruction, its template (register widths and input values), the SASS
one instance must become (the verifier's intent, with the alternatives today's compilers
choose between across sm_50..sm_90), and how a dependent chain of it is built. What the paper
printed (its SASS and cycles on A100) is *not* here: that is the sm_80 expectation file's
record; this module says what a valid probe is.
"""
from __future__ import annotations

import re

from ...core.ptx import Operand, Template
from .kernels import InstrRow


def op(text: str, d: int, *srcs: int, kind: str = "int", kinds: dict | None = None,
       glue: str = "", glue_widths: dict | None = None) -> Template:
    """Template shorthand: widths of d and of the sources a, b, c, e in order.

    `kinds` overrides the value kind per field; a glue's extra fields take the width of
    the source {a} unless `glue_widths` says otherwise."""
    names = "abce"
    operands = {"d": Operand(d, (kinds or {}).get("d", kind))}
    for i, w in enumerate(srcs):
        f = names[i]
        operands[f] = Operand(w, (kinds or {}).get(f, kind))
    if glue:
        for f in set(re.findall(r"\{(\w+)\}", glue)) - set(operands):
            operands[f] = Operand((glue_widths or {}).get(f, srcs[0]),
                                  (kinds or {}).get(f, kind))
    return Template(text, operands, glue)


# (Fields are substituted by a regex, not str.format: "{{a}, {hi}}" renders "{%r1, %r2}".)
# Reinterpret a 64-bit result as the next 32-bit source (no SASS: register halves).
LOW32 = "mov.b64 {{a}, {hi}}, {d};"
# ... a 32-bit result as the next 16-bit source.
LOW16 = "mov.b32 {{a}, {hi}}, {d};"
# Widen a 32-bit result to the next 64-bit source, its high half a loaded value (chain
# style "widen"; no SASS: register pairing).
WIDEN32 = "mov.b64 {a}, {{d}, {hi}};"
HI32 = {"hi": 32}
# ... the result as the HIGH word of the next 64-bit source, its low word loaded (chain style
# "widen_fresh"): the high word decides clz.b64, so the chained value is on the path the
# hardware executes (with a nonzero loaded high word, a result in the low word is never read).
WIDEN32_HIGH = "mov.b64 {a}, {{hi}, {d}};"
# ... the result as both words of the next 64-bit source (chain style "fresh"): bfind.s64
# tests the high word and reads the low word only where the high word is all sign bits; with
# the result in both words the executed path (high word) and the low-word path the listing
# ends with are both chained, and ptxas still makes the full branching sequence.
WIDEN32_BOTH = "mov.b64 {a}, {{d}, {d}};"

R = InstrRow

# SASS alternatives shared by many rows.
IADD = "IADD3|IMAD.IADD|VIADD|IADD"
IADDX = "IADD3.X|IMAD.X|IADD.X"
# sm_120 (ptxas 13.x) adds 64-bit integers with one IADD.64
IADD64 = ((120, ("IADD.64",)),)
IMUL = "IMAD|XMAD*"
# Logic ops: LOP3.LUT (sm_50+, the only form on sm_70+) or Maxwell/Pascal's two-input LOP
# with the operation named (LOP.PASS_B with an inverted source is not).
AND = "LOP3.LUT|LOP.AND|LOP32I.AND"
OR = "LOP3.LUT|LOP.OR|LOP32I.OR"
XOR = "LOP3.LUT|LOP.XOR|LOP32I.XOR"
NOT = "LOP3.LUT|LOP.PASS_B"
# From sm_70 on (IMAD for XMAD) a 16-bit result is zero-extended (LOP3.LUT ..., 0xffff) before
# it feeds the next op: the '~' link of a chained 16-bit op's unit.
ZEXT16 = "~LOP3.LUT"

# Notes recorded with the figures (what they measure where the name does not say it).
F16X2_NOTE = ("cpi per PTX {op}: the independent ops come in pairs whose operands are the "
              "halves of one 32-bit register, and ptxas issues each pair as one f16x2 "
              "instruction ({sass}), two PTX ops per SASS instruction; the figure is cycles "
              "per PTX op (half the cost of one f16x2 instruction)")
ZEXT16_NOTE = ("latency per op of {sass} plus, from sm_70, the LOP3.LUT that zero-extends the "
               "16-bit result before the next op (a '~' link: one per chained op)")

# Notes of rows without a dependent chain.
INVOLUTION = ("an involution: op(op(x)) = x, so a chain of two ops folds to nothing and a "
              "chain of N to at most one op; no single-op dependent chain can exist")
IDEMPOTENT = ("idempotent: op(op(x)) = op(x), the compiler folds a chain to one op; no "
              "single-op dependent chain can exist")
# Lengths of an independent probe must all keep the guard the same way (core.probe.same_guard):
# ptxas if-converts the branch over 4 independent DFMA (or 2 testp, 4 bar.warp.sync) and keeps
# it over 8 (3, 8), so those rows start where every length branches.
INDEP_F64_FMA = (8, 12, 16)       # 16 ops x 8 registers: no spill
PREDICATE = ("the result is a predicate and the source a register value: feeding the result "
             "back needs a selp (SEL), which is not this instruction")

REASSOC = ("ptxas reassociates a chain of two-input logic ops with loaded operands into "
           "3-input LOP3s that compute every second result straight from the one two ops "
           "back (d[k+1] = LOP3(d[k-1], s[k], s[k+1])): the region holds N ops but its "
           "dependence depth is N/2, so it would time half the latency; an idempotent "
           "(and/or) or self-cancelling (xor) op has no other single-op chain")
CNOT = ("cnot(cnot(x)) = (x != 0) and cnot(cnot(cnot(x))) = cnot(x): the compiler folds "
        "a chain to at most two ops; no single-op dependent chain can exist")
EX2 = ("the compiler knows ex2's result is positive, so in a chain only the first op keeps "
       "the range fix-up (FSETP/FMUL) and the others are a bare MUFU.EX2: a chain would time "
       "another sequence than the one op of this row")

# Table V of the Ampere paper, in its order. Rows are added by family below.
TABLE_V: list[InstrRow] = [
    # --- add / sub
    R("add.u16", op("add.u16 {d}, {a}, {b};", 16, 16, 16), (IADD,), dep="keep"),
    R("addc.u32", op("addc.u32 {d}, {a}, {b};", 32, 32, 32), (IADDX,), dep="fib"),
    R("add.u32", op("add.u32 {d}, {a}, {b};", 32, 32, 32), (IADD,), dep="fib",
      latency_note="the chain's adds are a mix of IADD3 (integer ALU pipe) and IMAD.IADD (FMA "
                   "pipe) that ptxas picks between (sm_90: 3 IADD3 to 5 IMAD.IADD): the figure "
                   "is the mean latency per add over that mix, not either instruction's alone"),
    R("add.u64", op("add.u64 {d}, {a}, {b};", 64, 64, 64), (IADD, IADDX), dep="keep",
      arch_units=IADD64),
    R("add.s64", op("add.s64 {d}, {a}, {b};", 64, 64, 64), (IADD, IADDX), dep="keep",
      arch_units=IADD64),
    R("add.f16", op("add.rn.f16 {d}, {a}, {b};", 16, 16, 16, kind="float"), ("HADD2|HADD2.F32|HADD",), dep="fresh", min_arch=53,
      indep_pack=2, indep_kind="neg2.f16x2", indep_unit=("HADD2|HFMA2.MMA|HFMA2",),
      cpi_note=F16X2_NOTE.format(op="add.rn.f16", sass="HADD2; on sm_80 and sm_90 every second pair "
                             "is HFMA2.MMA a*1+b, issued to another pipe than HADD2 (ptxas 13.x for "
                             "sm_100/sm_120: HFMA2)")),
    R("add.f32", op("add.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="float"), ("FADD",), dep="acc"),
    R("add.f64", op("add.rn.f64 {d}, {a}, {b};", 64, 64, 64, kind="float"), ("DADD",), dep="acc"),
    # --- mul
    R("mul.wide.u16", op("mul.wide.u16 {d}, {a}, {b};", 32, 16, 16, glue=LOW16), None, signature=(IMUL,), dep="keep_fresh",
      arch_units=((70, ("IMAD", ZEXT16)),), latency_note=ZEXT16_NOTE.format(sass="XMAD (sm_50/61) or IMAD")),
    R("mul.wide.u32", op("mul.wide.u32 {d}, {a}, {b};", 64, 32, 32, glue=LOW32), None, signature=("IMAD.WIDE.U32|XMAD*",), dep="keep_fresh"),
    R("mul.lo.u16", op("mul.lo.u16 {d}, {a}, {b};", 16, 16, 16), None, signature=(IMUL,), dep="keep",
      arch_units=((70, ("IMAD", ZEXT16)),), latency_note=ZEXT16_NOTE.format(sass="XMAD (sm_50/61) or IMAD")),
    R("mul.lo.u32", op("mul.lo.u32 {d}, {a}, {b};", 32, 32, 32), None, signature=(IMUL,), dep="fib"),
    R("mul.lo.u64", op("mul.lo.u64 {d}, {a}, {b};", 64, 64, 64), None, signature=("IMAD.WIDE.U32|XMAD*",), dep="keep"),
    # mul24/mad24 square one source: with two, the 24-bit extension of a source shared by
    # several ops is computed once (CSE) and the region is no longer N copies of one op.
    R("mul24.lo.u32", op("mul24.lo.u32 {d}, {a}, {a};", 32, 32), None, signature=(IMUL,), dep="acc"),
    R("mul24.hi.u32", op("mul24.hi.u32 {d}, {a}, {a};", 32, 32), None, signature=("IMAD*|XMAD*",), dep="acc"),
    R("mul.rn.f16", op("mul.rn.f16 {d}, {a}, {b};", 16, 16, 16, kind="near1"), ("HMUL2",), dep="fresh", min_arch=53,
      indep_pack=2, indep_kind="neg2.f16x2", indep_unit=("HMUL2|HFMA2.MMA|HFMA2",),
      cpi_note=F16X2_NOTE.format(op="mul.rn.f16", sass="HMUL2; on sm_80 and sm_90 every second pair "
                             "is HFMA2.MMA a*b-0, issued to another pipe than HMUL2 (ptxas 13.x for "
                             "sm_100/sm_120: HFMA2)")),
    R("mul.rn.f32", op("mul.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="near1"), ("FMUL",), dep="acc"),
    R("mul.rn.f64", op("mul.rn.f64 {d}, {a}, {b};", 64, 64, 64, kind="near1"), ("DMUL",), dep="acc"),
    # --- mad
    R("mad.lo.u16", op("mad.lo.u16 {d}, {a}, {b}, {c};", 16, 16, 16, 16), None, signature=(IMUL,), dep="keep",
      arch_units=((70, ("IMAD", ZEXT16)),), latency_note=ZEXT16_NOTE.format(sass="XMAD (sm_50/61) or IMAD")),
    R("mad.lo.u32", op("mad.lo.u32 {d}, {a}, {b}, {c};", 32, 32, 32, 32), None, signature=(IMUL,), dep="fib"),
    R("mad.lo.u64", op("mad.lo.u64 {d}, {a}, {b}, {c};", 64, 64, 64, 64), None, signature=("IMAD.WIDE.U32|XMAD*",), dep="keep",
      latency_note="latency chained through a MULTIPLICAND (x = x*b + c): the whole 64-bit multiply "
           "(IMAD.WIDE.U32, two IMAD for the cross products, IADD3) is on the chain; see "
           "mad.lo.u64.addend for the chain through the addend that published figures use",
      cpi_note="cpi of independent mad.lo.u64: each op is four SASS instructions "
               "(IMAD.WIDE.U32, two IMAD for the cross products, IADD3 or IMAD.IADD), three or "
               "four of them on the FMA pipe's IMAD: the issue cost of that sequence, not of "
               "one IMAD.WIDE.U32"),
    # The same instruction chained through the ADDEND (x = b*c + x), as published Hopper
    # latencies chain it: every op its own multiplicands, so each op's cross products are
    # off the chain and only IMAD.WIDE.U32 (addend = x) and the high-word IADD3 are on it.
    # No independent probe: independent ops have no chain to run through (mad.lo.u64's).
    # sm_70+: with XMAD (sm_50/61) there is no multiply-add with a 64-bit addend, ptxas makes
    # the products apart and the chain is one of 64-bit adds (IADD.CC / IADD.X).
    R("mad.lo.u64.addend", op("mad.lo.u64 {d}, {b}, {c}, {a};", 64, 64, 64, 64), None, signature=("IMAD.WIDE.U32",), dep="each",
      min_arch=70, indep=False, indep_note="independent mad.lo.u64 ops are the mad.lo.u64 row's cpi probe",
      latency_note="latency chained through the ADDEND (x = b*c + x, every op its own b and c): the "
           "cross-product IMADs are off the chain, IMAD.WIDE.U32 with the 64-bit addend and "
           "the high-word IADD3 are on it"),
    R("mad24.lo.u32", op("mad24.lo.u32 {d}, {a}, {a}, {a};", 32, 32), None, signature=(IMUL,), dep="acc"),
    R("mad24.hi.u32", op("mad24.hi.u32 {d}, {a}, {a}, {a};", 32, 32), None, signature=("IMAD*|XMAD*",), dep="acc"),
    R("mad.rn.f32", op("mad.rn.f32 {d}, {a}, {b}, {c};", 32, 32, 32, 32, kind="near1"), ("FFMA",), dep="acc"),
    R("mad.rn.f64", op("mad.rn.f64 {d}, {a}, {b}, {c};", 64, 64, 64, 64, kind="near1"), ("DFMA",), dep="acc",
      indep_lengths=INDEP_F64_FMA),
    # --- sad
    # (Maxwell/Pascal zero-extend the chained 16-bit result too, with LOP32I.AND)
    R("sad.u16", op("sad.u16 {d}, {b}, {c}, {a};", 16, 16, 16, 16), None, signature=("VABSDIFF*|IADD*",), dep="keep",
      arch_units=((50, ("VABSDIFF*", "~LOP3.LUT|LOP32I.AND")),),
      latency_note="latency per op of VABSDIFF plus the LOP3.LUT (LOP32I.AND on sm_50/61) that "
           "zero-extends the 16-bit result before the next op (a '~' link)"),
    R("sad.u32", op("sad.u32 {d}, {a}, {b}, {c};", 32, 32, 32, 32), ("VABSDIFF*",), dep="acc"),
    R("sad.u64", op("sad.u64 {d}, {a}, {b}, {a};", 64, 64, 64), None, signature=("ISETP*",), dep="acc"),
    # --- div / rem (compiler sequences). Dividend chains shrink to 0, so div chains run
    # through the divisor (x = s / x with s > x: never 0); rem chains through the dividend.
    # div/rem.u16: the chain starts from the low half of a loaded word, so the first source is
    # zero-extended like every later one and the last result needs no copy (PRMT) into a
    # loaded register (the 580 driver's JIT makes that copy for div.u16 too)
    R("div.u16", op("div.u16 {d}, {b}, {a};", 16, 16, 16, kinds={"a": "pos"}), None, signature=("CAL*|MUFU.RCP",), dep="fresh_seed",
      latency_note="latency per op of the div_u16 subroutine call (chained through the divisor) "
                   "plus the zero-extension of its 16-bit argument"),
    R("rem.u16", op("rem.u16 {d}, {a}, {b};", 16, 16, 16, kinds={"b": "pos"}), None, signature=("CAL*|MUFU.RCP",), dep="fresh_seed",
      latency_note="latency per op of the rem_u16 subroutine call plus the zero-extension of its "
           "16-bit argument"),
    R("div.u32", op("div.u32 {d}, {b}, {a};", 32, 32, 32, kinds={"a": "pos"}), None, signature=("MUFU.RCP",), dep="acc"),
    R("rem.u32", op("rem.u32 {d}, {a}, {b};", 32, 32, 32, kinds={"b": "pos"}), None, signature=("MUFU.RCP",), dep="acc"),
    R("div.u64", op("div.u64 {d}, {b}, {a};", 64, 64, 64, kinds={"a": "pos"}), None, signature=("MUFU.RCP64H|CAL*|CALL*",), dep="acc"),
    R("rem.u64", op("rem.u64 {d}, {a}, {b};", 64, 64, 64, kinds={"b": "pos"}), None, signature=("MUFU.RCP64H|CAL*|CALL*",), dep="acc"),
    R("div.rn.f32", op("div.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="near1"), None, signature=("MUFU.RCP",), dep="acc"),
    # div.rn.f64: the 580 driver's JIT gives consecutive divisions of the chain two register
    # assignments in turn, and with them two ways to make the constant 1 of the reciprocal's
    # low word (MOV, HFMA2.MMA): the verified unit is two divisions, the figure per division
    R("div.rn.f64", op("div.rn.f64 {d}, {a}, {b};", 64, 64, 64, kind="near1"), None, signature=("MUFU.RCP64H",), dep="acc",
      dep_pack=2,
      latency_note="chained through the dividend; the region is verified as copies of two "
                   "divisions (the driver's JIT alternates two register assignments and makes "
                   "the constant 1 with MOV in one, HFMA2.MMA in the other); cycles per "
                   "division"),
    # --- abs
    R("abs.s16", op("abs.s16 {d}, {a};", 16, 16), ("PRMT", "IABS", "PRMT"), dep=None, dep_note=IDEMPOTENT),
    R("abs.s32", op("abs.s32 {d}, {a};", 32, 32), ("IABS|I2I.S32.S32",), dep=None, dep_note=IDEMPOTENT),
    R("abs.s64", op("abs.s64 {d}, {a};", 64, 64), None, signature=("ISETP*|CSETP*",), dep=None, dep_note=IDEMPOTENT),
    R("abs.f16", op("abs.f16 {d}, {a};", 16, 16, kind="float"), ("HADD2", "PRMT"), dep=None, dep_note=IDEMPOTENT, min_arch=53),
    R("abs.ftz.f32", op("abs.ftz.f32 {d}, {a};", 32, 32, kind="float"), ("FADD.FTZ",), dep=None, dep_note=IDEMPOTENT),
    R("abs.f64", op("abs.f64 {d}, {a};", 64, 64, kind="float"), ("DADD",), dep=None, dep_note=IDEMPOTENT),
    # --- brev
    R("brev.b32", op("brev.b32 {d}, {a};", 32, 32), ("BREV|BFE.U32.BREV",), dep=None, dep_note=INVOLUTION),
    R("brev.b64", op("brev.b64 {d}, {a};", 64, 64), ("BREV|BFE.U32.BREV", "BREV|BFE.U32.BREV"), dep=None, dep_note=INVOLUTION),
    # --- copysign
    R("copysign.f32", op("copysign.f32 {d}, {b}, {a};", 32, 32, 32, kinds={"b": "unit"}), ("LOP3.LUT",), dep="keep"),
    R("copysign.f64", op("copysign.f64 {d}, {b}, {a};", 64, 64, 64, kinds={"b": "unit"}), None, signature=("LOP3.LUT",), dep="keep"),
    # --- and / or / xor
    R("and.b16", op("and.b16 {d}, {a}, {b};", 16, 16, 16), (AND,), dep=None, dep_note=REASSOC),
    R("and.b32", op("and.b32 {d}, {a}, {b};", 32, 32, 32), (AND,), dep=None, dep_note=REASSOC),
    R("and.b64", op("and.b64 {d}, {a}, {b};", 64, 64, 64), (AND, AND), dep=None, dep_note=REASSOC),
    R("or.b32", op("or.b32 {d}, {a}, {b};", 32, 32, 32), (OR,), dep=None, dep_note=REASSOC),
    R("xor.b32", op("xor.b32 {d}, {a}, {b};", 32, 32, 32), (XOR,), dep=None, dep_note=REASSOC),
    # --- not
    R("not.b16", op("not.b16 {d}, {a};", 16, 16), (NOT,), dep=None, dep_note=INVOLUTION),
    R("not.b32", op("not.b32 {d}, {a};", 32, 32), (NOT,), dep=None, dep_note=INVOLUTION),
    R("not.b64", op("not.b64 {d}, {a};", 64, 64), (NOT, NOT), dep=None, dep_note=INVOLUTION),
    # --- lop3 (the LUT is an immediate by definition; 0xE8 = majority: not associative)
    R("lop3.b32", op("lop3.b32 {d}, {a}, {b}, {c}, 0xE8;", 32, 32, 32, 32), ("LOP3.LUT",), dep="distinct", min_arch=70),
    # --- cnot
    R("cnot.b16", op("cnot.b16 {d}, {a};", 16, 16), None, signature=("ISETP.EQ.U32.AND|ISETP.NE.U32.AND|ISET.EQ.U32.AND",), dep=None, dep_note=CNOT),
    R("cnot.b32", op("cnot.b32 {d}, {a};", 32, 32), None, signature=("ISETP.EQ.U32.AND|ISETP.NE.U32.AND|ISET.EQ.U32.AND",), dep=None, dep_note=CNOT),
    R("cnot.b64", op("cnot.b64 {d}, {a};", 64, 64), None, signature=("ISETP*|ISET*",), dep=None, dep_note=CNOT),
    # --- bfe (position and length are registers: small values)
    # bfe.u32: position and length are the source itself (a per-thread register, as the
    # paper's SASS has them); separate registers would be unpacked once per distinct value
    # and shared between ops (CSE), so the region would not be N copies of one op. The
    # 64-bit forms take immediate positions for the same reason (their mask set-up is shared).
    R("bfe.u32", op("bfe.u32 {d}, {a}, {a}, {a};", 32, 32, kind="small"), None, signature=("SHF*|BFE*",), dep="acc"),
    R("bfe.u64", op("bfe.u64 {d}, {a}, 3, 40;", 64, 64), None, signature=("SHF*|BFE*",), dep="acc"),
    R("bfe.s64", op("bfe.s64 {d}, {a}, 3, 40;", 64, 64), None, signature=("SHF*|BFE*",), dep="acc"),
    # --- min / max
    R("min.u16", op("min.u16 {d}, {a}, {b};", 16, 16, 16), None, signature=("IMNMX*|VIMNMX*|VMNMX*|ISETP.LT*",), dep="keep"),
    R("min.u32", op("min.u32 {d}, {a}, {b};", 32, 32, 32), None, signature=("IMNMX*|VIMNMX*|VMNMX*|ISETP.LT*",), dep="keep"),
    R("min.u64", op("min.u64 {d}, {a}, {b};", 64, 64, 64), None, signature=("ISETP.LT.U32.AND.EX|IMNMX.U32.XHI",), dep="keep"),
    R("min.s16", op("min.s16 {d}, {a}, {b};", 16, 16, 16), None, signature=("IMNMX*|VIMNMX*|VMNMX*|ISETP.LT*",), dep="keep"),
    R("min.s32", op("min.s32 {d}, {a}, {b};", 32, 32, 32), None, signature=("IMNMX*|VIMNMX*|VMNMX*|ISETP.LT*",), dep="keep"),
    R("min.s64", op("min.s64 {d}, {a}, {b};", 64, 64, 64), None, signature=("ISETP.LT.AND.EX|IMNMX.XHI",), dep="keep"),
    R("min.f16", op("min.f16 {d}, {a}, {b};", 16, 16, 16, kind="float"), ("HMNMX2",), dep="keep", min_arch=80,
      indep_pack=2, indep_kind="neg2.f16x2", cpi_note=F16X2_NOTE.format(op="min.f16", sass="HMNMX2")),
    R("min.f32", op("min.f32 {d}, {a}, {b};", 32, 32, 32, kind="float"), ("FMNMX",), dep="keep"),
    # min.f64: a region of 4 independent ops is if-converted (every op predicated on the guard)
    # and selects the NaN result with SEL instead of a predicated LOP3: 8+ ops per region
    R("min.f64", op("min.f64 {d}, {a}, {b};", 64, 64, 64, kind="float"), None, signature=("DSETP*|DMNMX",), dep="keep",
      indep_lengths=(8, 16, 24)),
    R("max.u32", op("max.u32 {d}, {a}, {b};", 32, 32, 32), None, signature=("IMNMX*|VIMNMX*|VMNMX*|ISETP.LT*",), dep="keep"),
    R("max.s32", op("max.s32 {d}, {a}, {b};", 32, 32, 32), None, signature=("IMNMX*|VIMNMX*|VMNMX*|ISETP.LT*",), dep="keep"),
    R("max.f32", op("max.f32 {d}, {a}, {b};", 32, 32, 32, kind="float"), ("FMNMX",), dep="keep"),
    # --- neg
    # neg.s16 from sm_70: the negation (IMAD.MOV or IADD3 from RZ) and the PRMT 0x7710 that
    # zero-extends the 16-bit result, one of each per op
    R("neg.s16", op("neg.s16 {d}, {a};", 16, 16), None, signature=(IADD + "|IMAD.MOV",), dep=None, dep_note=INVOLUTION,
      arch_units=((70, (IADD + "|IMAD.MOV", "PRMT")),),
      cpi_note="cpi per op of the negation (IMAD.MOV or IADD3) plus the PRMT that zero-extends "
           "the 16-bit result (from sm_70)"),
    R("neg.s32", op("neg.s32 {d}, {a};", 32, 32), (IADD + "|IMAD.MOV",), dep=None, dep_note=INVOLUTION),
    R("neg.s64", op("neg.s64 {d}, {a};", 64, 64), (IADD, IADDX), dep=None, dep_note=INVOLUTION,
      arch_units=IADD64),
    R("neg.f32", op("neg.f32 {d}, {a};", 32, 32, kind="float"), ("FADD",), dep=None, dep_note=INVOLUTION),
    R("neg.f64", op("neg.f64 {d}, {a};", 64, 64, kind="float"), ("DADD",), dep=None, dep_note=INVOLUTION),
    # --- fma
    R("fma.rn.f16", op("fma.rn.f16 {d}, {a}, {b}, {c};", 16, 16, 16, 16, kind="near1"), ("HFMA2",), dep="fresh", min_arch=53,
      indep_pack=2, indep_kind="neg2.f16x2", indep_unit=("HFMA2|HFMA2.MMA",),
      cpi_note=F16X2_NOTE.format(op="fma.rn.f16", sass="HFMA2; on sm_80 and sm_90 every second pair "
                             "is HFMA2.MMA, issued to another pipe than HFMA2")),
    R("fma.rn.f32", op("fma.rn.f32 {d}, {a}, {b}, {c};", 32, 32, 32, 32, kind="near1"), ("FFMA",), dep="acc"),
    R("fma.rn.f64", op("fma.rn.f64 {d}, {a}, {b}, {c};", 64, 64, 64, 64, kind="near1"), ("DFMA",), dep="acc",
      indep_lengths=INDEP_F64_FMA),
    # --- sqrt / rsqrt / rcp / ex2 (MUFU, with range fix-ups unless .ftz)
    R("sqrt.rn.f32", op("sqrt.rn.f32 {d}, {a};", 32, 32, kind="float"), None, signature=("MUFU.RSQ",), dep="acc"),
    R("sqrt.approx.f32", op("sqrt.approx.f32 {d}, {a};", 32, 32, kind="float"), None, signature=("MUFU.SQRT|MUFU.RSQ",), dep="acc"),
    R("sqrt.rn.f64", op("sqrt.rn.f64 {d}, {a};", 64, 64, kind="float"), None, signature=("MUFU.RSQ64H",), dep="acc"),
    R("rsqrt.approx.f32", op("rsqrt.approx.f32 {d}, {a};", 32, 32, kind="float"), ("FSETP.GEU.AND", "FMUL", "FMUL", "MUFU.RSQ"), dep="acc"),
    # rsqrt.approx.f64 (sm_90: a fast path and a slow-path call): a chain rewriting one register
    # gets a constant re-made with HFMA2.MMA in some copies and MOV in others; with a fresh
    # register per op every copy is the same; independent regions of 9 or more ops get it too
    # (sm_86/89/90: a constant from HFMA2.MMA or ULDC.64 in some lengths only): 2..8 ops
    R("rsqrt.approx.f64", op("rsqrt.approx.f64 {d}, {a};", 64, 64, kind="float"), None, signature=("MUFU.RSQ64H",), dep="fresh",
      indep_lengths=(2, 4, 8)),
    R("rcp.rn.f32", op("rcp.rn.f32 {d}, {a};", 32, 32, kind="float"), None, signature=("MUFU.RCP",), dep="acc"),
    R("rcp.approx.f32", op("rcp.approx.f32 {d}, {a};", 32, 32, kind="float"), None, signature=("MUFU.RCP",), dep="acc"),
    R("rcp.rn.f64", op("rcp.rn.f64 {d}, {a};", 64, 64, kind="float"), None, signature=("MUFU.RCP64H",), dep="acc"),
    R("ex2.approx.f32", op("ex2.approx.f32 {d}, {a};", 32, 32, kind="unit"), None, signature=("MUFU.EX2",), dep=None, dep_note=EX2),
    # --- popc / clz / bfind (64-bit sources: 32-bit result widened by a loaded high half)
    R("popc.b32", op("popc.b32 {d}, {a};", 32, 32), ("POPC",), dep="acc"),
    R("popc.b64", op("popc.b64 {d}, {a};", 32, 64, glue=WIDEN32, glue_widths=HI32), ("POPC", "POPC", IADD), dep="widen_fresh"),
    R("clz.b32", op("clz.b32 {d}, {a};", 32, 32), ("FLO.U32", IADD + "|IADD32I"), dep="acc"),
    R("clz.b64", op("clz.b64 {d}, {a};", 32, 64, glue=WIDEN32_HIGH, glue_widths=HI32), None, signature=("FLO.U32",), dep="widen_fresh",
      latency_note="latency chained through the high word (the low word loaded): the compare of the "
           "high word with 0, the select, FLO.U32 and the conversion are on the chain"),
    R("bfind.u32", op("bfind.u32 {d}, {a};", 32, 32), ("FLO.U32",), dep="acc"),
    # bfind.u64: ptxas branches over the low word's FLO.U32 when the high word has a bit set.
    # Chained through the low word (high word loaded) the copies differ (every high-word FLO
    # and compare is hoisted above the chain, their predicates spilled with P2R) and at run
    # time the branch skips the chained FLO; through the high word the listing's dependence
    # runs through the low-word FLO, written last; through both, ptxas folds the two FLO.U32
    # into one (another sequence). The latency is declared unmeasurable (expectations). The
    # independent probe: at most 6 ops, more spill their predicates (P2R).
    R("bfind.u64", op("bfind.u64 {d}, {a};", 32, 64, glue=WIDEN32, glue_widths=HI32), None, signature=("FLO.U32",), dep="widen_fresh",
      indep_lengths=(2, 4, 6),
      cpi_note="cpi of ops whose high word is nonzero: FLO.U32 of the high word, the compare and "
           "the branch over the low word's FLO.U32"),
    R("bfind.s32", op("bfind.s32 {d}, {a};", 32, 32), ("FLO",), dep="acc"),
    R("bfind.s64", op("bfind.s64 {d}, {a};", 32, 64, glue=WIDEN32_BOTH), None, signature=("FLO*",), dep="fresh",
      latency_note="latency chained through both words (x = bfind.s64({r, r})): the high word's FLO, "
           "its compare and the branch are on the chain"),
    # --- testp (predicate result)
    R("testp.normal.f32", op("testp.normal.f32 {d}, {a};", 1, 32, kind="float"), None, signature=("ISETP*",), dep=None, dep_note=PREDICATE,
      indep_lengths=(2, 4, 6)),
    R("testp.subnormal.f32", op("testp.subnormal.f32 {d}, {a};", 1, 32, kind="float"), None, signature=("ISETP*",), dep=None, dep_note=PREDICATE,
      indep_lengths=(3, 4, 6)),
    R("testp.normal.f64", op("testp.normal.f64 {d}, {a};", 1, 64, kind="float"), None, signature=("ISETP*",), dep=None, dep_note=PREDICATE,
      indep_lengths=(2, 4, 6)),
    R("testp.subnormal.f64", op("testp.subnormal.f64 {d}, {a};", 1, 64, kind="float"), None, signature=("ISETP*",), dep=None, dep_note=PREDICATE,
      indep_lengths=(2, 4, 6)),
    # --- transcendental approximations
    R("sin.approx.f32", op("sin.approx.f32 {d}, {a};", 32, 32, kind="unit"), ("FMUL.RZ|RRO.SINCOS", "MUFU.SIN"), dep="acc"),
    R("cos.approx.f32", op("cos.approx.f32 {d}, {a};", 32, 32, kind="unit"), ("FMUL.RZ|RRO.SINCOS", "MUFU.COS"), dep="acc"),
    R("lg2.approx.f32", op("lg2.approx.f32 {d}, {a};", 32, 32, kind="float"), ("FSETP.GEU.AND", "FMUL", "MUFU.LG2", "FADD"), dep="acc"),
    R("ex2.approx.f16", op("ex2.approx.f16 {d}, {a};", 16, 16, kind="unit"), ("MUFU.EX2.F16",), dep="fresh", min_arch=75),
    R("tanh.approx.f32", op("tanh.approx.f32 {d}, {a};", 32, 32, kind="unit"), ("MUFU.TANH",), dep="acc", min_arch=75),
    R("tanh.approx.f16", op("tanh.approx.f16 {d}, {a};", 16, 16, kind="unit"), ("MUFU.TANH.F16",), dep="fresh", min_arch=75),
    # --- other
    # bar.warp.sync with the full-warp mask (a register mask makes ptxas emit a convergence
    # loop instead); the loaded {a} and the result {d} are named in a comment only, so the
    # probe has an operand to vary and a (meaningless) register to store.
    # With more than 16 of them in the region (ptxas 13.0 and 13.5) the guard's clock compare
    # moves to the uniform datapath (R2UR, UISETP, PLOP3) in the timed region: regions of 4..12.
    R("bar.warp.sync", op("bar.warp.sync -1; // {d} {a}", 32, 32), ("NOP|WARPSYNC*",), dep=None, dep_note="no result: nothing for a next op to consume", min_arch=70,
      indep_lengths=(8, 12, 16)),
    # fns: mask, base and offset are the one source (see bfe.u32: CSE of shared operands)
    R("fns.b32", op("fns.b32 {d}, {a}, {a}, {a};", 32, 32, kind="small"), None, signature=("POPC|FLO*",), dep="acc"),
    R("cvt.rzi.s32.f32", op("cvt.rzi.s32.f32 {d}, {a};", 32, 32, kind="float"), ("F2I.TRUNC.NTZ|F2I.S32.F32.TRUNC",), dep="acc"),
    # setp's independent ops read one predicate input between them (each its own two
    # registers): with one input predicate per op, 4 or more ops (inputs + results + the
    # guard) outgrow P0..P6 and ptxas spills them through P2R around the guard
    R("setp.ne.s32", op("setp.ne.and.s32 {d}, {b}, {c}, {a};", 1, 1, 32, 32), ("ISETP.NE.AND",), dep="distinct",
      indep_lengths=(2, 3, 4), indep_shared=("a",)),
    # --- bfi (insert a field at a register position and length)
    R("bfi.b32", op("bfi.b32 {d}, {b}, {a}, {a}, {a};", 32, 32, 32, kind="small"), None, signature=("BMSK|SHF*|BFI",), dep="acc"),
    # bfi.b64 chains through the inserted FIELD ({a}, shifted into place), every op its own
    # base: chained through the base, each insert overwrites the same field of the one before
    # and ptxas merges the masks across ops (the copies are no longer one op each)
    R("bfi.b64", op("bfi.b64 {d}, {a}, {b}, 3, 40;", 64, 64, 64), None, signature=("SHF*|BFI|LOP3*",), dep="each",
      latency_note="latency chained through the inserted field (shifted by the position and merged "
           "into a per-op base)"),
    # --- dot products (sm_61+)
    R("dp4a.u32.u32", op("dp4a.u32.u32 {d}, {a}, {b}, {c};", 32, 32, 32, 32), ("IDP.4A.U8.U8|IDP4A.U8.U8",), dep="acc", min_arch=61),
    R("dp2a.lo.u32.u32", op("dp2a.lo.u32.u32 {d}, {a}, {b}, {c};", 32, 32, 32, 32), ("IDP.2A.LO.U16.U8|IDP2A.LO.U16.U8",), dep="acc", min_arch=61),
]

# Table II: dependent vs independent chains.
TABLE_II = ["add.f16", "add.u32", "add.f64", "mul.lo.u32", "mad.rn.f32"]

# Table I: CPI against the number of independent add.u32 in the timed region.
TABLE_I_COUNTS = (1, 2, 3, 4)


def row(name: str) -> InstrRow:
    for r in TABLE_V:
        if r.name == name:
            return r
    raise KeyError(f"no Table V row named {name!r}")
