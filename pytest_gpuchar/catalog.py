"""The instruction tables of the Ampere paper (seed 003, Tables I, II and V) as probe rows.

Each row names a PTX instruction, its template (register widths and input values), the SASS
one instance must become (the verifier's intent, with the alternatives today's compilers
choose between across sm_50..sm_90), and how a dependent chain of it is built. What the paper
printed (its SASS and cycles on A100) is *not* here: that is the sm_80 expectation file's
record; this module says what a valid probe is.
"""
from __future__ import annotations

from .probes import InstrRow
from .ptx import Operand, Template


def op(text: str, d: int, *srcs: int, kind: str = "int", kinds: dict | None = None,
       glue: str = "") -> Template:
    """Template shorthand: widths of d and of the sources a, b, c in order."""
    names = "abc"
    operands = {"d": Operand(d, kind)}
    for i, w in enumerate(srcs):
        f = names[i]
        operands[f] = Operand(w, (kinds or {}).get(f, kind))
    if glue:
        import re
        for f in set(re.findall(r"\{(\w+)\}", glue)) - set(operands):
            operands[f] = Operand(d if f != "lo" else srcs[0], kind)
    return Template(text, operands, glue)


# Reinterpret a 64-bit result as the next 32-bit source (no SASS: register halves).
LOW32 = "mov.b64 {{{a}, {hi}}}, {d};"
# ... a 32-bit result as the next 16-bit source.
LOW16 = "mov.b32 {{{a}, {hi}}}, {d};"

R = InstrRow

# Table V of the Ampere paper, in its order. Rows are added by family below.
TABLE_V: list[InstrRow] = [
    # --- add / sub
    R("add.u16", op("add.u16 {d}, {a}, {b};", 16, 16, 16), ("IADD3|VIADD|IADD|UIADD3|IMAD.IADD",), dep="fib"),
    R("addc.u32", op("addc.u32 {d}, {a}, {b};", 32, 32, 32), ("IADD3.X|IADD.X|IMAD.X",), dep="fib"),
    R("add.u32", op("add.u32 {d}, {a}, {b};", 32, 32, 32), ("IADD3|IMAD.IADD|VIADD|IADD",), dep="fib"),
    R("add.u64", op("add.u64 {d}, {a}, {b};", 64, 64, 64), ("IADD3|IMAD.IADD|IADD", "IADD3.X|IMAD.X|IADD.X"), dep="fib"),
    R("add.s64", op("add.s64 {d}, {a}, {b};", 64, 64, 64), ("IADD3|IMAD.IADD|IADD", "IADD3.X|IMAD.X|IADD.X"), dep="fib"),
    R("add.f16", op("add.rn.f16 {d}, {a}, {b};", 16, 16, 16, kind="float"), ("HADD2|HADD2.F32|HADD",), dep="acc"),
    R("add.f32", op("add.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="float"), ("FADD",), dep="acc"),
    R("add.f64", op("add.rn.f64 {d}, {a}, {b};", 64, 64, 64, kind="float"), ("DADD",), dep="acc"),
    # --- mul
    R("mul.lo.u32", op("mul.lo.u32 {d}, {a}, {b};", 32, 32, 32), ("IMAD|XMAD*",), dep="acc"),
    R("mul.rn.f32", op("mul.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="near1"), ("FMUL",), dep="acc"),
    R("mul.rn.f64", op("mul.rn.f64 {d}, {a}, {b};", 64, 64, 64, kind="near1"), ("DMUL",), dep="acc"),
    # --- mad / fma
    R("mad.rn.f32", op("mad.rn.f32 {d}, {a}, {b}, {c};", 32, 32, 32, 32, kind="near1"), ("FFMA",), dep="acc"),
    R("fma.rn.f32", op("fma.rn.f32 {d}, {a}, {b}, {c};", 32, 32, 32, 32, kind="near1"), ("FFMA",), dep="acc"),
    R("fma.rn.f64", op("fma.rn.f64 {d}, {a}, {b}, {c};", 64, 64, 64, 64, kind="near1"), ("DFMA",), dep="acc"),
    # --- div / sqrt (compiler sequences)
    R("div.rn.f32", op("div.rn.f32 {d}, {a}, {b};", 32, 32, 32, kind="near1"), None, signature=("MUFU.RCP",), dep="acc"),
    R("sqrt.rn.f32", op("sqrt.rn.f32 {d}, {a};", 32, 32, kind="float"), None, signature=("MUFU.RSQ",), dep="acc"),
    R("sqrt.approx.f32", op("sqrt.approx.f32 {d}, {a};", 32, 32, kind="float"), ("MUFU.SQRT",), dep="acc"),
    # --- bit ops
    R("popc.b32", op("popc.b32 {d}, {a};", 32, 32), ("POPC",), dep="acc"),
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
