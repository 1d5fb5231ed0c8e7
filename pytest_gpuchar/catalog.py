"""The instruction tables of the Ampere paper (seed 003, Tables I, II and V) as probe rows.

Each row names a PTX instruction, its template (register widths and input values), the SASS
one instance must become (the verifier's intent, with the alternatives today's compilers
choose between across sm_50..sm_90), and how a dependent chain of it is built. What the paper
printed (its SASS and cycles on A100) is *not* here: that is the sm_80 expectation file's
record; this module says what a valid probe is.
"""
from __future__ import annotations

import re

from .probes import InstrRow
from .ptx import Operand, Template


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

R = InstrRow

# SASS alternatives shared by many rows.
IADD = "IADD3|IMAD.IADD|VIADD|IADD"
IADDX = "IADD3.X|IMAD.X|IADD.X"
IMUL = "IMAD|XMAD*"
# Logic ops: LOP3.LUT (sm_50+, the only form on sm_70+) or Maxwell/Pascal's two-input LOP
# with the operation named (LOP.PASS_B with an inverted source is not).
AND = "LOP3.LUT|LOP.AND|LOP32I.AND"
OR = "LOP3.LUT|LOP.OR|LOP32I.OR"
XOR = "LOP3.LUT|LOP.XOR|LOP32I.XOR"
NOT = "LOP3.LUT|LOP.PASS_B"

# Notes of rows without a dependent chain.
INVOLUTION = ("an involution: op(op(x)) = x, so a chain of two ops folds to nothing and a "
              "chain of N to at most one op; no single-op dependent chain can exist")
IDEMPOTENT = ("idempotent: op(op(x)) = op(x), the compiler folds a chain to one op; no "
              "single-op dependent chain can exist")
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
    R("add.u32", op("add.u32 {d}, {a}, {b};", 32, 32, 32), (IADD,), dep="fib"),
    R("add.u64", op("add.u64 {d}, {a}, {b};", 64, 64, 64), (IADD, IADDX), dep="keep"),
    R("add.s64", op("add.s64 {d}, {a}, {b};", 64, 64, 64), (IADD, IADDX), dep="keep"),
    R("add.f16", op("add.rn.f16 {d}, {a}, {b};", 16, 16, 16, kind="float"), ("HADD2|HADD2.F32|HADD",), dep="fresh", min_arch=53),
    R("add.f32", op("add.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="float"), ("FADD",), dep="acc"),
    R("add.f64", op("add.rn.f64 {d}, {a}, {b};", 64, 64, 64, kind="float"), ("DADD",), dep="acc"),
    # --- mul
    R("mul.wide.u16", op("mul.wide.u16 {d}, {a}, {b};", 32, 16, 16, glue=LOW16), None, signature=(IMUL,), dep="keep_fresh"),
    R("mul.wide.u32", op("mul.wide.u32 {d}, {a}, {b};", 64, 32, 32, glue=LOW32), None, signature=("IMAD.WIDE.U32|XMAD*",), dep="keep_fresh"),
    R("mul.lo.u16", op("mul.lo.u16 {d}, {a}, {b};", 16, 16, 16), None, signature=(IMUL,), dep="keep"),
    R("mul.lo.u32", op("mul.lo.u32 {d}, {a}, {b};", 32, 32, 32), None, signature=(IMUL,), dep="fib"),
    R("mul.lo.u64", op("mul.lo.u64 {d}, {a}, {b};", 64, 64, 64), None, signature=("IMAD.WIDE.U32|XMAD*",), dep="keep"),
    # mul24/mad24 square one source: with two, the 24-bit extension of a source shared by
    # several ops is computed once (CSE) and the region is no longer N copies of one op.
    R("mul24.lo.u32", op("mul24.lo.u32 {d}, {a}, {a};", 32, 32), None, signature=(IMUL,), dep="acc"),
    R("mul24.hi.u32", op("mul24.hi.u32 {d}, {a}, {a};", 32, 32), None, signature=("IMAD*|XMAD*",), dep="acc"),
    R("mul.rn.f16", op("mul.rn.f16 {d}, {a}, {b};", 16, 16, 16, kind="near1"), ("HMUL2",), dep="fresh", min_arch=53),
    R("mul.rn.f32", op("mul.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="near1"), ("FMUL",), dep="acc"),
    R("mul.rn.f64", op("mul.rn.f64 {d}, {a}, {b};", 64, 64, 64, kind="near1"), ("DMUL",), dep="acc"),
    # --- mad
    R("mad.lo.u16", op("mad.lo.u16 {d}, {a}, {b}, {c};", 16, 16, 16, 16), None, signature=(IMUL,), dep="keep"),
    R("mad.lo.u32", op("mad.lo.u32 {d}, {a}, {b}, {c};", 32, 32, 32, 32), None, signature=(IMUL,), dep="fib"),
    R("mad.lo.u64", op("mad.lo.u64 {d}, {a}, {b}, {c};", 64, 64, 64, 64), None, signature=("IMAD.WIDE.U32|XMAD*",), dep="keep"),
    R("mad24.lo.u32", op("mad24.lo.u32 {d}, {a}, {a}, {a};", 32, 32), None, signature=(IMUL,), dep="acc"),
    R("mad24.hi.u32", op("mad24.hi.u32 {d}, {a}, {a}, {a};", 32, 32), None, signature=("IMAD*|XMAD*",), dep="acc"),
    R("mad.rn.f32", op("mad.rn.f32 {d}, {a}, {b}, {c};", 32, 32, 32, 32, kind="near1"), ("FFMA",), dep="acc"),
    R("mad.rn.f64", op("mad.rn.f64 {d}, {a}, {b}, {c};", 64, 64, 64, 64, kind="near1"), ("DFMA",), dep="acc"),
    # --- sad
    R("sad.u16", op("sad.u16 {d}, {b}, {c}, {a};", 16, 16, 16, 16), None, signature=("VABSDIFF*|IADD*",), dep="keep"),
    R("sad.u32", op("sad.u32 {d}, {a}, {b}, {c};", 32, 32, 32, 32), ("VABSDIFF*",), dep="acc"),
    R("sad.u64", op("sad.u64 {d}, {a}, {b}, {a};", 64, 64, 64), None, signature=("ISETP*",), dep="acc"),
    # --- div / rem (compiler sequences). Dividend chains shrink to 0, so div chains run
    # through the divisor (x = s / x with s > x: never 0); rem chains through the dividend.
    R("div.u16", op("div.u16 {d}, {b}, {a};", 16, 16, 16, kinds={"a": "pos"}), None, signature=("CAL*|MUFU.RCP",), dep="acc"),
    R("rem.u16", op("rem.u16 {d}, {a}, {b};", 16, 16, 16, kinds={"b": "pos"}), None, signature=("CAL*|MUFU.RCP",), dep="acc"),
    R("div.u32", op("div.u32 {d}, {b}, {a};", 32, 32, 32, kinds={"a": "pos"}), None, signature=("MUFU.RCP",), dep="acc"),
    R("rem.u32", op("rem.u32 {d}, {a}, {b};", 32, 32, 32, kinds={"b": "pos"}), None, signature=("MUFU.RCP",), dep="acc"),
    R("div.u64", op("div.u64 {d}, {b}, {a};", 64, 64, 64, kinds={"a": "pos"}), None, signature=("MUFU.RCP64H|CAL*|CALL*",), dep="acc"),
    R("rem.u64", op("rem.u64 {d}, {a}, {b};", 64, 64, 64, kinds={"b": "pos"}), None, signature=("MUFU.RCP64H|CAL*|CALL*",), dep="acc"),
    R("div.rn.f32", op("div.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="near1"), None, signature=("MUFU.RCP",), dep="acc"),
    R("div.rn.f64", op("div.rn.f64 {d}, {a}, {b};", 64, 64, 64, kind="near1"), None, signature=("MUFU.RCP64H",), dep="acc"),
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
    R("min.f16", op("min.f16 {d}, {a}, {b};", 16, 16, 16, kind="float"), ("HMNMX2",), dep="keep", min_arch=80),
    R("min.f32", op("min.f32 {d}, {a}, {b};", 32, 32, 32, kind="float"), ("FMNMX",), dep="keep"),
    R("min.f64", op("min.f64 {d}, {a}, {b};", 64, 64, 64, kind="float"), None, signature=("DSETP*|DMNMX",), dep="keep"),
    R("max.u32", op("max.u32 {d}, {a}, {b};", 32, 32, 32), None, signature=("IMNMX*|VIMNMX*|VMNMX*|ISETP.LT*",), dep="keep"),
    R("max.s32", op("max.s32 {d}, {a}, {b};", 32, 32, 32), None, signature=("IMNMX*|VIMNMX*|VMNMX*|ISETP.LT*",), dep="keep"),
    R("max.f32", op("max.f32 {d}, {a}, {b};", 32, 32, 32, kind="float"), ("FMNMX",), dep="keep"),
    # --- neg
    R("neg.s16", op("neg.s16 {d}, {a};", 16, 16), None, signature=(IADD + "|IMAD.MOV",), dep=None, dep_note=INVOLUTION),
    R("neg.s32", op("neg.s32 {d}, {a};", 32, 32), (IADD + "|IMAD.MOV",), dep=None, dep_note=INVOLUTION),
    R("neg.s64", op("neg.s64 {d}, {a};", 64, 64), (IADD, IADDX), dep=None, dep_note=INVOLUTION),
    R("neg.f32", op("neg.f32 {d}, {a};", 32, 32, kind="float"), ("FADD",), dep=None, dep_note=INVOLUTION),
    R("neg.f64", op("neg.f64 {d}, {a};", 64, 64, kind="float"), ("DADD",), dep=None, dep_note=INVOLUTION),
    # --- fma
    R("fma.rn.f16", op("fma.rn.f16 {d}, {a}, {b}, {c};", 16, 16, 16, 16, kind="near1"), ("HFMA2",), dep="fresh", min_arch=53),
    R("fma.rn.f32", op("fma.rn.f32 {d}, {a}, {b}, {c};", 32, 32, 32, 32, kind="near1"), ("FFMA",), dep="acc"),
    R("fma.rn.f64", op("fma.rn.f64 {d}, {a}, {b}, {c};", 64, 64, 64, 64, kind="near1"), ("DFMA",), dep="acc"),
    # --- sqrt / rsqrt / rcp / ex2 (MUFU, with range fix-ups unless .ftz)
    R("sqrt.rn.f32", op("sqrt.rn.f32 {d}, {a};", 32, 32, kind="float"), None, signature=("MUFU.RSQ",), dep="acc"),
    R("sqrt.approx.f32", op("sqrt.approx.f32 {d}, {a};", 32, 32, kind="float"), None, signature=("MUFU.SQRT|MUFU.RSQ",), dep="acc"),
    R("sqrt.rn.f64", op("sqrt.rn.f64 {d}, {a};", 64, 64, kind="float"), None, signature=("MUFU.RSQ64H",), dep="acc"),
    R("rsqrt.approx.f32", op("rsqrt.approx.f32 {d}, {a};", 32, 32, kind="float"), ("FSETP.GEU.AND", "FMUL", "FMUL", "MUFU.RSQ"), dep="acc"),
    R("rsqrt.approx.f64", op("rsqrt.approx.f64 {d}, {a};", 64, 64, kind="float"), None, signature=("MUFU.RSQ64H",), dep="acc"),
    R("rcp.rn.f32", op("rcp.rn.f32 {d}, {a};", 32, 32, kind="float"), None, signature=("MUFU.RCP",), dep="acc"),
    R("rcp.approx.f32", op("rcp.approx.f32 {d}, {a};", 32, 32, kind="float"), None, signature=("MUFU.RCP",), dep="acc"),
    R("rcp.rn.f64", op("rcp.rn.f64 {d}, {a};", 64, 64, kind="float"), None, signature=("MUFU.RCP64H",), dep="acc"),
    R("ex2.approx.f32", op("ex2.approx.f32 {d}, {a};", 32, 32, kind="unit"), None, signature=("MUFU.EX2",), dep=None, dep_note=EX2),
    # --- popc / clz / bfind (64-bit sources: 32-bit result widened by a loaded high half)
    R("popc.b32", op("popc.b32 {d}, {a};", 32, 32), ("POPC",), dep="acc"),
    R("popc.b64", op("popc.b64 {d}, {a};", 32, 64, glue=WIDEN32, glue_widths=HI32), ("POPC", "POPC", IADD), dep="widen_fresh"),
    R("clz.b32", op("clz.b32 {d}, {a};", 32, 32), ("FLO.U32", IADD + "|IADD32I"), dep="acc"),
    R("clz.b64", op("clz.b64 {d}, {a};", 32, 64, glue=WIDEN32, glue_widths=HI32), None, signature=("FLO.U32",), dep="widen_fresh"),
    R("bfind.u32", op("bfind.u32 {d}, {a};", 32, 32), ("FLO.U32",), dep="acc"),
    R("bfind.u64", op("bfind.u64 {d}, {a};", 32, 64, glue=WIDEN32, glue_widths=HI32), None, signature=("FLO.U32",), dep="widen_fresh"),
    R("bfind.s32", op("bfind.s32 {d}, {a};", 32, 32), ("FLO",), dep="acc"),
    R("bfind.s64", op("bfind.s64 {d}, {a};", 32, 64, glue=WIDEN32, glue_widths=HI32), None, signature=("FLO*",), dep="widen_fresh"),
    # --- testp (predicate result)
    R("testp.normal.f32", op("testp.normal.f32 {d}, {a};", 1, 32, kind="float"), None, signature=("ISETP*",), dep=None, dep_note=PREDICATE,
      indep_lengths=(2, 4, 6)),
    R("testp.subnormal.f32", op("testp.subnormal.f32 {d}, {a};", 1, 32, kind="float"), None, signature=("ISETP*",), dep=None, dep_note=PREDICATE,
      indep_lengths=(2, 4, 6)),
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
    R("bar.warp.sync", op("bar.warp.sync -1; // {d} {a}", 32, 32), ("NOP|WARPSYNC*",), dep=None, dep_note="no result: nothing for a next op to consume", min_arch=70),
    # fns: mask, base and offset are the one source (see bfe.u32: CSE of shared operands)
    R("fns.b32", op("fns.b32 {d}, {a}, {a}, {a};", 32, 32, kind="small"), None, signature=("POPC|FLO*",), dep="acc"),
    R("cvt.rzi.s32.f32", op("cvt.rzi.s32.f32 {d}, {a};", 32, 32, kind="float"), ("F2I.TRUNC.NTZ|F2I.S32.F32.TRUNC",), dep="acc"),
    R("setp.ne.s32", op("setp.ne.and.s32 {d}, {b}, {c}, {a};", 1, 1, 32, 32), ("ISETP.NE.AND",), dep="distinct",
      indep_lengths=(2, 4, 6)),
    # --- bfi (insert a field at a register position and length)
    R("bfi.b32", op("bfi.b32 {d}, {b}, {a}, {a}, {a};", 32, 32, 32, kind="small"), None, signature=("BMSK|SHF*|BFI",), dep="acc"),
    R("bfi.b64", op("bfi.b64 {d}, {b}, {a}, 3, 40;", 64, 64, 64), None, signature=("SHF*|BFI|LOP3*",), dep="distinct"),
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


def suite_probes(arch: str) -> list:
    """Every probe the instruction tables build for `arch` (batched: compiled once)."""
    from . import archs, probes
    n = archs.number(arch)
    out = []
    for r in TABLE_V:
        if n < getattr(r, "min_arch", 0):
            continue
        if r.dep is not None:
            out.append(probes.latency_probe(r, arch))
        if r.indep:
            out.append(probes.cpi_probe(r, arch))
    out.append(probes.cpi_probe(row("add.u32"), arch, lengths=TABLE_I_COUNTS, prefix="table_i",
                             guard=False))
    out += [probes.clock_overhead_probe(arch, clock64=c) for c in (True, False)]
    return out

