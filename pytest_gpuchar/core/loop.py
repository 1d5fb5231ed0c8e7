"""Loops in SASS: the one backward-branch finder every probe kind uses (``branch_target``,
``backward_branches``, ``one_loop``), and the verification of a counted loop inside the timed
region: between the two clock reads there is one loop (a backward branch to a label), its body
holds exactly ``count`` copies of the SASS unit (opcode and count) and otherwise only loop
control (at most ``MAX_LOOP_CONTROL`` instructions); no unit instruction lies outside the loop,
and around it only setup. The slope over trip counts is then the cost of one iteration as
compiled (loop control included and named). Anything else: ProbeInvalid with the listing, no
number.
"""
from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass, field

from . import sass
from .verify import ProbeInvalid, Verdict, matches

MAX_LOOP_CONTROL = 5       # counter add, compare, branch (+ moves some compilers add)
MAX_SETUP = 8              # instructions between the first clock read and the loop

LOOP_CONTROL = ("CALL.REL.NOINC", "DEPBAR*", "LDC", "ULDC*", "LDCU*", "IADD3", "IADD", "IADD32I",
                "VIADD", "IMAD.IADD", "UIADD3", "ISETP*", "UISETP*", "BRA", "BRA.U", "MOV",
                "IMAD.MOV*", "UMOV", "NOP", "PLOP3*")
NEVER = ("@!PT", "@!UPT")   # predicates of never-executed instructions (scheduling filler)
SETUP = ("MOV", "MOV32I", "IMAD.MOV*", "UMOV", "ULDC*", "LDC*", "S2R", "S2UR", "CS2R", "NOP",
         "IADD3", "VIADD", "IMAD.IADD", "UIADD3")


LABEL = re.compile(r"\.L_x_\d+")


def predicated_off(ins: sass.Instr) -> bool:
    """The one never-executed rule: an instruction predicated on !PT / !UPT never runs
    (a scheduling or convergence placeholder: sm_70's '@!PT LDS RZ, [RZ]', ptxas 13.x's
    '@!UPT UIADD3 URZ, URZ, URZ, URZ'); a verifier leaves it out of what it counts."""
    return ins.pred in NEVER


def never_executed(ins: sass.Instr) -> bool:
    """Scheduling filler, not part of any probe: NOP padding and the instructions that never
    execute (predicated_off)."""
    return predicated_off(ins) or ins.opcode == "NOP"


def branch_target(func: sass.Function, ins: sass.Instr) -> int | None:
    """The index in func.instrs of the instruction a BRA jumps to (its label's); None for an
    instruction that is no branch to a label, or a label past the last instruction."""
    if ins.base != "BRA":
        return None
    m = LABEL.search(" ".join(ins.operands))
    at = func.labels.get(m.group(0)) if m else None
    return at if at is not None and at < len(func.instrs) else None


def backward_branches(func: sass.Function, instrs: list[sass.Instr]) -> list[tuple[int, int]]:
    """(label, branch) positions in `instrs` (instructions of `func` in their order: a range
    of it, a timed region) of every branch whose target lies among them, at or before it:
    the loops of that stretch of code."""
    out, offsets = [], None
    for k, ins in enumerate(instrs):
        at = branch_target(func, ins)
        if at is None:
            continue
        start = func.instrs[at].offset
        if instrs[0].offset <= start <= ins.offset:
            if offsets is None:
                offsets = [i.offset for i in instrs]
            out.append((bisect.bisect_left(offsets, start), k))
    return out


def timed_bounds(func: sass.Function, name: str) -> tuple[int, int]:
    """(first, end) instruction index of the timed region (between the two clock reads);
    ProbeInvalid without two clock reads."""
    groups = sass.clock_groups(func)
    if len(groups) < 2:
        raise ProbeInvalid(f"probe invalid: {name}: expected two clock reads, found "
                           f"{len(groups)}")
    return groups[0][1] + 1, groups[1][0]


def one_loop(func: sass.Function, name: str) -> tuple[int, int, int, int]:
    """(first, end) of the timed region and (label, branch) index of its one loop; ProbeInvalid
    with the listing when the region has not exactly one."""
    lo, hi = timed_bounds(func, name)
    loops = backward_branches(func, func.instrs[lo:hi])
    if len(loops) != 1:
        raise ProbeInvalid(f"probe invalid: {name}: {len(loops)} backward branches in the "
                           f"timed region, wanted one loop\n"
                           f"{sass.format_listing(func.instrs[lo:hi])}")
    return lo, hi, lo + loops[0][0], lo + loops[0][1]


@dataclass
class LoopVerdict(Verdict):
    """A verified counted loop: the SASS unit per op, the loop control, the body size."""
    loop_control: dict = field(default_factory=dict)
    body_instructions: int = 0


def is_counter(ins: sass.Instr) -> bool:
    """The loop counter's increment: x = x + 1 (chains never add a literal)."""
    ops = [o.replace(".reuse", "") for o in ins.operands]
    return (ins.base in ("IADD3", "IADD", "IADD32I", "VIADD", "UIADD3") and len(ops) >= 3
            and ops[0] == ops[1] and ops[2] == "0x1")


def is_const_move(ins: sass.Instr) -> bool:
    """A constant materialised with HFMA2.MMA, or on sm_120 HFMA2 (-RZ * RZ + imm): a move,
    not an FMA."""
    return ins.opcode in ("HFMA2.MMA", "HFMA2") and tuple(ins.operands[1:3]) == ("-RZ", "RZ")


def _split_body(body: list[sass.Instr], pats: list[str]) -> tuple[Counter, list[str]]:
    """Count the unit's instructions per pattern; the rest (counter included) is `extra`."""
    need: Counter = Counter()
    extra: list[str] = []
    for ins in body:
        if predicated_off(ins):
            continue                   # never executed (a scheduling placeholder)
        if is_counter(ins):
            extra.append(ins.opcode)   # the loop counter
            continue
        for k, pat in enumerate(pats):
            if matches(ins.opcode, pat):
                need[k] += 1
                break
        else:
            extra.append(ins.opcode)
    return need, extra


def verify_loop(name: str, arch: str, unit: tuple[str, ...] | None,
                count: int | tuple[int, ...], func: sass.Function, *,
                ops: int | None = None) -> LoopVerdict:
    """Check the timed region of `func`: one loop holding `count` copies of `unit` per
    iteration (a tuple: that many instructions of each of unit's patterns, for a unit of
    several opcodes in fixed proportions). Returns the SASS unit found per op ({opcode:
    count per op}; `ops` PTX ops per iteration, default `count`) or raises ProbeInvalid with
    the listing."""
    counts = tuple(count) if isinstance(count, tuple) else (count,) * len(unit or ())
    lo, hi = timed_bounds(func, f"{name} ({arch})")
    region = sass.timed_region(func)

    def fail(why: str) -> ProbeInvalid:
        return ProbeInvalid(
            f"probe invalid: {name} ({arch}): {why}\nintended: one loop whose body is "
            f"{want} + loop control\n-- timed region "
            f"({len(region)} instructions):\n{sass.format_listing(region)}")

    several = isinstance(count, tuple)
    want = (" + ".join(f"{c} x {u}" for c, u in zip(counts, unit or ())) if several else
            f"{count} x [{' + '.join(unit or ())}]")
    if unit is None:
        raise fail("no SASS unit known for this arch")
    branches = backward_branches(func, func.instrs[lo:hi])
    if len(branches) != 1:
        raise fail(f"expected exactly one loop (backward branch) between the clock reads, "
                   f"found {len(branches)}")
    start, end = lo + branches[0][0], lo + branches[0][1]
    body = func.instrs[start:end + 1]
    outside = func.instrs[lo:start] + func.instrs[end + 1:hi]
    pats = list(unit)
    need, extra = _split_body(body, pats)
    got = [need[k] for k in range(len(pats))]
    if tuple(got) != counts:
        wanted = str(dict(zip(pats, counts))) if several else f"{count} of each"
        raise fail(f"loop body holds {dict(zip(pats, got))} intended instructions, wanted "
                   f"{wanted} (folded, hoisted, unrolled or eliminated?)")
    bad = [op for op in extra if not any(matches(op, c) for c in LOOP_CONTROL)]
    if bad or len([op for op in extra if not op.startswith(("DEPBAR", "NOP"))]) > MAX_LOOP_CONTROL:
        raise fail(f"loop body holds other instructions than the ops and loop control: "
                   f"{dict(Counter(extra))}")
    outside = [i for i in outside if not predicated_off(i) and not is_const_move(i)]
    stray = [i.opcode for i in outside if any(matches(i.opcode, u) for u in pats)]
    if stray:
        raise fail(f"intended instructions outside the loop: {dict(Counter(stray))}")
    other = [i.opcode for i in outside if not any(matches(i.opcode, c) for c in SETUP)]
    if other or len(outside) > MAX_SETUP:
        raise fail(f"unexpected instructions around the loop: "
                   f"{dict(Counter(i.opcode for i in outside))}")
    seen = Counter(i.opcode for i in body)
    per = ops or counts[0]
    return LoopVerdict(True, {op: round(c / per, 3) for op, c in sorted(seen.items())
                              if any(matches(op, u) for u in pats)}, message="loop",
                       loop_control=dict(Counter(extra)), body_instructions=len(body))
