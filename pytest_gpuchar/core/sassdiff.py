"""Two SASS listings of one kernel, compared by instruction class: what differs between the
driver's JIT and an offline ptxas, said as "zeroing moves: HFMA2.MMA from one, IMAD.MOV.U32
from the other", not as a diff of 60 renumbered lines.

The listings are snapshot texts (``sass.normalise``: registers and labels renumbered in order
of first appearance, the timed region marked), so one different instruction renumbers every
register after it. The comparison therefore works on instruction forms with the register
numbers masked, and applies the rules below in turn; each rule maps the two spellings of one
thing to one form (or drops what does nothing) and is reported when it makes the two multisets
of forms closer. What no rule explains is "other", with its lines. After the rules, listings
whose forms are the same multiset differ only in order or register allocation.
"""
from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

REGION_START = "// ---- timed region start"
REGION_END = "// ---- timed region end"

_MARK = re.compile(r"\s*// ---- timed region (start|end)$")
_REG = re.compile(r"\b(u?r|u?p)\d+\b")
_LABEL = re.compile(r"\bL\d+\b")
_ZERO = re.compile(r"^(?:HFMA2\.MMA (\S+), -RZ, RZ, 0, 0|IMAD\.MOV\.U32 (\S+), RZ, RZ, RZ"
                   r"|MOV (\S+), RZ)$")
_COPY = re.compile(r"^IMAD\.MOV\.U32 (\S+), RZ, RZ, (\S+)$")
_IADD_FMA = re.compile(r"^IMAD\.IADD (\S+), (\S+), 0x1, (\S+)$")
_IADD_ALU = re.compile(r"^IADD3 (\S+), (\S+), (\S+), RZ$")
_IADDX_FMA = re.compile(r"^IMAD\.X (\S+), (\S+), 0x1, (\S+), (\S+)$")
_IADDX_ALU = re.compile(r"^IADD3\.X (\S+), (\S+), (\S+), RZ, (\S+), !PT$")
_VIADD = re.compile(r"^VIADD (\S+), (\S+), (\S+)$")
_NEG_FMA = re.compile(r"^IMAD\.MOV (\S+), RZ, RZ, (-\S+)$")
_IADDX_RZ = re.compile(r"^IMAD\.X (\S+), (RZ), RZ, (\S+), (\S+)$")
_HALVES = re.compile(r"^HFMA2\.MMA (\S+), -RZ, RZ, (\S+), (\S+)$")
_IMM_MOV = re.compile(r"^(?:IMAD\.MOV\.U32 (\S+), RZ, RZ|MOV (\S+)), (-?0x[0-9a-f]+)$")


def _lines(text: str) -> list[str]:
    return [_MARK.sub("", line).strip() for line in text.splitlines() if line.strip()]


def region(text: str) -> str:
    """The lines between the timed-region marks of a snapshot text ("" when unmarked)."""
    out, inside = [], False
    for line in text.splitlines():
        if line.endswith(REGION_END):
            break
        if inside:
            out.append(line)
        if line.endswith(REGION_START):
            inside = True
    return "\n".join(out)


@functools.lru_cache(maxsize=1 << 16)
def mask(line: str) -> str:
    """A line's form: register and label numbers dropped."""
    return _LABEL.sub("L", _REG.sub(lambda m: m.group(1), line))


# --- the rules: each maps a listing (lines) to its canonical lines -------------------------

def _padding(lines: list[str]) -> list[str]:
    return [x for x in lines if x != "NOP" and not x.startswith("@!PT ")]


_PRED = re.compile(r"^(@!?u?p\w*\s+)")


def _each(pattern_fn: Callable[[str], str | None]) -> Callable[[list[str]], list[str]]:
    """A rule that rewrites lines one by one (a guard predicate kept in front)."""
    def one(x: str) -> str:
        m = _PRED.match(x)
        pred, body = (m.group(1), x[m.end():]) if m else ("", x)
        new = pattern_fn(body)
        return pred + new if new else x

    def rule(lines: list[str]) -> list[str]:
        return [one(x) for x in lines]
    return rule


def _imm(x: str) -> str:
    """A 32-bit immediate in one spelling (-0xd000000 and 0xf3000000 are one value)."""
    m = re.fullmatch(r"(-?)0x([0-9a-f]+)", x)
    if not m:
        return x
    v = int(m.group(2), 16) * (-1 if m.group(1) else 1)
    return hex(v & 0xFFFFFFFF)


def _zero(x: str) -> str | None:
    m = _ZERO.match(x)
    return f"ZERO {next(g for g in m.groups() if g)}" if m else None


def _copy(x: str) -> str | None:
    m = _COPY.match(x)
    return f"MOV {m.group(1)}, {m.group(2)}" if m and m.group(2) != "RZ" else None


def _iadd(x: str) -> str | None:
    """One form for a two-source add or a negation, its sources in a fixed order (an add
    commutes) and an immediate in one spelling."""
    m = _NEG_FMA.match(x)
    if m:
        x = f"IADD3 {m.group(1)}, {m.group(2)}, RZ, RZ"
    for pat, op in ((_IADD_FMA, "IADD"), (_IADD_ALU, "IADD"), (_VIADD, "IADD"),
                    (_IADDX_FMA, "IADD.X"), (_IADDX_RZ, "IADD.X"), (_IADDX_ALU, "IADD.X")):
        m = pat.match(x)
        if m:
            a, b = sorted((_imm(v) for v in m.group(2, 3)), key=lambda v: (mask(v), v))
            carry = f", {m.group(4)}" if op == "IADD.X" else ""
            return f"{op} {m.group(1)}, {a}, {b}{carry}"
    return None


def _const(x: str) -> str | None:
    """A register set to a constant: HFMA2.MMA r, -RZ, RZ, hi, lo (FMA pipe, two f16 halves),
    IMAD.MOV.U32 r, RZ, RZ, imm or MOV r, imm, as MOV r, <32-bit value>."""
    m = _HALVES.match(x)
    if m:
        import numpy as np
        bits = [int(np.array(float(v), dtype=np.float16).view(np.uint16))
                for v in m.group(2, 3)]
        return f"MOV {m.group(1)}, {hex(bits[0] << 16 | bits[1])}"
    m = _IMM_MOV.match(x)
    return f"MOV {m.group(1) or m.group(2)}, {_imm(m.group(3))}" if m else None


_COPY_ANY = re.compile(r"^(?:MOV \S+, [ur]+\d+|IMAD\.MOV\.U32 \S+, RZ, RZ, [ur]+\d+)$")


def _calls(lines: list[str]) -> list[str]:
    """Subroutine linkage dropped, in a listing that calls one: the calls and returns, the
    return-address moves (the JIT's relocated 32@lo/32@hi halves; whole-program ptxas's
    `MOV r, 0x<offset>` a few lines before its CALL.REL), the argument and result copies of the
    calling convention (register to register), and a subroutine body the kernel carries
    after its last EXIT (up to its RET)."""
    if not any(x.startswith("CALL.") for x in lines):
        return lines
    last_exit = max((i for i, x in enumerate(lines) if x == "EXIT"), default=-1)
    last_ret = max((i for i, x in enumerate(lines) if x.startswith("RET.")), default=-1)
    body = range(last_exit + 1, last_ret + 1) if last_ret > last_exit >= 0 else range(0)
    out = []
    for i, x in enumerate(lines):
        before_call = any(y.startswith("CALL.REL") for y in lines[i + 1:i + 9])
        if i in body or x.startswith(("CALL.", "RET.")) or "@srel" in x or \
                re.match(r"^MOV \S+, 32@(lo|hi)\(", x) or _COPY_ANY.match(x) or \
                (before_call and re.match(r"^MOV \S+, 0x[0-9a-f]+$", x)):
            continue
        out.append(x)
    return out


@dataclass(frozen=True)
class Rule:
    name: str
    says: str
    apply: Callable[[list[str]], list[str]]
    show: str = ""          # the lines its example prefers (a regular expression)


RULES = (
    Rule("reuse flags", "operand-reuse cache hints (`.reuse` on a source), set by the "
                        "scheduler", _each(lambda x: x.replace(".reuse", "") if ".reuse" in x
                                           else None)),
    Rule("padding", "instructions that do nothing: NOP, and predicated-off `@!PT` ones (the "
                    "JIT's `@!PT LDS RZ, [RZ]`)", _padding),
    Rule("subroutine call", "a called routine (division sequences): the JIT calls the driver's "
                            "copy (CALL.ABS.NOINC, return address from relocations), "
                            "whole-program ptxas a copy inside the kernel (CALL.REL.NOINC, the "
                            "body after EXIT, RET.REL.NODEC)", _calls, r"^CALL\."),
    Rule("zeroing move", "a register set to zero: HFMA2.MMA r, -RZ, RZ, 0, 0 (FMA pipe), "
                         "IMAD.MOV.U32 r, RZ, RZ, RZ (FMA pipe) or MOV r, RZ (ALU)",
         _each(_zero)),
    Rule("constant move", "a register set to a constant: HFMA2.MMA r, -RZ, RZ, hi, lo (two "
                          "f16 halves, FMA pipe), IMAD.MOV.U32 r, RZ, RZ, imm or MOV r, imm",
         _each(_const)),
    Rule("register copy", "a copy on the FMA pipe (IMAD.MOV.U32 r, RZ, RZ, x) or the ALU "
                          "(MOV r, x)", _each(_copy)),
    Rule("integer add", "an add on the FMA pipe (IMAD.IADD / IMAD.X with 0x1) or the ALU "
                        "(IADD3 / IADD3.X with RZ), or of an immediate (VIADD)", _each(_iadd)),
)
ORDER = "instruction order"
REGISTERS = "register allocation"
OTHER = "other"
NOTES = {ORDER: "the same instructions in another order",
         REGISTERS: "the same instructions, other register numbers",
         OTHER: "not explained by the rules above (the lines are in the example)"}


@dataclass
class Found:
    """One class of difference: how many lines of each listing it covers, a first example
    from each side, whether the timed region shows it."""
    a_lines: int = 0
    b_lines: int = 0
    example: tuple[str, str] = ("", "")
    timed_region: bool = False

    def as_dict(self) -> dict:
        return {"a": self.a_lines, "b": self.b_lines, "example": list(self.example),
                "timed_region": self.timed_region}


@dataclass
class Comparison:
    identical: bool
    classes: dict[str, Found] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"identical": self.identical,
                "classes": {k: v.as_dict() for k, v in self.classes.items()}}


def _gap(a: list[str], b: list[str]) -> tuple[Counter, Counter]:
    ca, cb = Counter(map(mask, a)), Counter(map(mask, b))
    return ca - cb, cb - ca


def _first(lines: list[str], forms: Counter, show: str = "") -> str:
    hits = [x for x in lines if mask(x) in forms]
    return next((x for x in hits if show and re.search(show, x)), hits[0] if hits else "")


def _classify(a: list[str], b: list[str]) -> dict[str, Found]:
    out: dict[str, Found] = {}
    only_a, only_b = _gap(a, b)
    for rule in RULES:
        na, nb = rule.apply(a), rule.apply(b)
        left_a, left_b = _gap(na, nb)
        covered = sum(only_a.values()) + sum(only_b.values()) - \
            sum(left_a.values()) - sum(left_b.values())
        if covered > 0:
            # the forms the rule took out of the gap, and a line of each side showing one
            gone_a, gone_b = only_a - left_a, only_b - left_b
            out[rule.name] = Found(sum(only_a.values()) - sum(left_a.values()),
                                   sum(only_b.values()) - sum(left_b.values()),
                                   (_first(a, gone_a, rule.show), _first(b, gone_b, rule.show)))
        a, b, only_a, only_b = na, nb, left_a, left_b
    if only_a or only_b:
        out[OTHER] = Found(sum(only_a.values()), sum(only_b.values()),
                           (_first(a, only_a), _first(b, only_b)))
    elif [mask(x) for x in a] != [mask(x) for x in b]:
        out[ORDER] = Found(len(a), len(b))
    elif [_LABEL.sub("L", x) for x in a] != [_LABEL.sub("L", x) for x in b]:
        out[REGISTERS] = Found(len(a), len(b))
    return out


def compare(a: str, b: str) -> Comparison:
    """Compare two snapshot texts (a: e.g. the driver JIT's, b: ptxas's)."""
    if a == b:
        return Comparison(True)
    found = _classify(_lines(a), _lines(b))
    for name in _classify(_lines(region(a)), _lines(region(b))):
        if name in found:       # (a region's lines without their context can mislead)
            found[name].timed_region = True
    return Comparison(False, found)


def describe(name: str) -> str:
    """What a class of difference means."""
    rule = next((r for r in RULES if r.name == name), None)
    return rule.says if rule else NOTES.get(name, name)
