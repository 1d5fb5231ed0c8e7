"""Verification: the timed region holds exactly the instructions the probe intends.

A probe states its intent as a *unit* (the SASS one PTX op becomes: a tuple of opcode
patterns, each a ``|``-separated list of fnmatch globs such as ``"IADD3|IMAD.IADD"``) and a
count. A region passes when it is exactly ``count`` copies of the unit and nothing else.

For PTX that becomes a compiler-chosen sequence or a subroutine call (div, sqrt.rn, ...),
the intent is ``unit=None`` plus optional *signature* patterns: the unit is then derived
from two or more chain lengths (the region must grow by the same multiset of opcodes per
op, that multiset must contain the signature), and anything not repeated per op may only be
constant materialisation hoisted out of the copies (listed in SETUP_OPCODES).
"""
from __future__ import annotations

import fnmatch
import functools
from collections import Counter
from dataclasses import dataclass, field

from .sass import Instr, dependence_depth, format_listing

# Opcodes the compiler picks between freely for the same operation (e.g. sm_90 uses VIADD in
# some copies of a sequence and IADD3 in others); sequences are compared modulo these.
CANONICAL = {"VIADD": "IADD3", "IMAD.IADD": "IADD3", "IADD": "IADD3", "VIMNMX": "IMNMX",
             "VIMNMX.U32": "IMNMX.U32", "IMAD.SHL.U32": "SHF.L.U32", "IMAD.SHL": "SHF.L.U32"}
MOVE_OPCODES = ("MOV", "IMAD.MOV", "IMAD.MOV.U32", "UMOV")
# Opcodes a compiler may hoist out of N copies of a sequence (constants, register moves).
SETUP_OPCODES = ("MOV", "MOV32I", "IMAD.MOV", "IMAD.MOV.U32", "UMOV", "ULDC", "ULDC.64",
                 "LDCU", "LDCU.64", "HFMA2.MMA", "CS2R")   # LDCU: sm_100+'s ULDC


class ProbeInvalid(AssertionError):
    """The SASS between the clock reads is not what the probe intends: no number is reported."""


@dataclass(frozen=True)
class Intent:
    count: int
    unit: tuple[str, ...] | None = None
    signature: tuple[str, ...] = ()
    min_depth: int = 0    # dependent chains: the region's dependence depth must reach this

    def describe(self) -> str:
        if self.unit is None:
            sig = f" including {', '.join(self.signature)}" if self.signature else ""
            return f"{self.count} x (one compiler sequence{sig})"
        text = f"{self.count} x [{' + '.join(self.unit)}]"
        if any(u.startswith("~") for u in self.unit):
            text += " (~: link, absent after the last op)"
        if any(u.startswith("?") for u in self.unit):
            text += " (?: with every op or with none, as the compiler chooses)"
        return text


@functools.lru_cache(maxsize=1 << 14)
def matches(opcode: str, pattern: str) -> bool:
    """Does the opcode match the pattern (fnmatch, alternatives separated by |)? Cached: the
    verifier asks the same few pairs for every instruction of every region."""
    return any(fnmatch.fnmatchcase(opcode, alt.strip()) for alt in pattern.split("|"))


@dataclass
class Verdict:
    ok: bool
    unit: dict = field(default_factory=dict)   # opcode -> instructions per PTX op
    base: Counter = field(default_factory=Counter)   # hoisted setup, not per op
    message: str = ""
    regions: dict = field(default_factory=dict)  # chain length -> the verified region


def _fail(probe: str, why: str, regions: dict[int, list[Instr]], intent: Intent) -> ProbeInvalid:
    listing = "\n".join(f"-- timed region, chain length {n} ({len(r)} instructions):\n"
                        f"{format_listing(r)}" for n, r in sorted(regions.items()))
    return ProbeInvalid(f"probe invalid: {probe}: {why}\n"
                        f"intended: {intent.describe()} per timed region\n{listing}")


def check_exact(region: list[Instr], unit: tuple[str, ...], count: int) -> str | None:
    """None if `region` is exactly `count` copies of `unit`, else the reason.

    A unit pattern written ``~PAT`` is the link between one op and the next (e.g. the
    zero-extension a 16-bit result needs before it feeds the next op): it must appear
    `count` or `count - 1` times, since the last op's result needs no link inside the region.
    A pattern written ``?PAT`` is an instruction one compiler emits with every op and another
    never (e.g. the driver JIT's MEMBAR.ALL.CTA ahead of a release's MEMBAR.ALL.GPU): it must
    appear `count` times or not at all, never in some copies only.
    """
    pats = [p.lstrip("~?") for p in unit]
    need = [count] * len(unit)
    extra = []
    for ins in region:
        for k, pat in enumerate(pats):
            if need[k] > 0 and matches(ins.opcode, pat):
                need[k] -= 1
                break
        else:
            extra.append(ins.opcode)
    if extra:
        return (f"unexpected instructions in the timed region: "
                f"{dict(Counter(extra))}")
    need = [0 if (unit[k].startswith("~") and need[k] <= 1)
            or (unit[k].startswith("?") and need[k] == count) else need[k]
            for k in range(len(unit))]
    if any(need):
        short = {pats[k]: count - need[k] for k in range(len(unit)) if need[k]}
        return (f"too few intended instructions (folded, hoisted or eliminated?): "
                f"found {short}, wanted {count} of each")
    return None


def verify(probe: str, regions: dict[int, list[Instr]], intent_for) -> Verdict:
    """Check the regions of one probe at several chain lengths.

    `intent_for(n)` gives the Intent for chain length n. Raises ProbeInvalid on mismatch.
    """
    lengths = sorted(regions)
    intents = {n: intent_for(n) for n in lengths}
    first = intents[lengths[0]]
    for n in lengths:
        need = intents[n].min_depth
        if need:
            depth = dependence_depth(regions[n])
            if depth < need:
                raise _fail(probe, f"chain length {n}: the timed region's dependence depth is "
                            f"{depth} instructions, less than the {need} chained ops (the "
                            f"compiler shortened the chain, e.g. by re-association)", regions,
                            intents[n])
    if first.unit is not None:
        for n in lengths:
            why = check_exact(regions[n], intents[n].unit, intents[n].count)
            if why:
                raise _fail(probe, f"chain length {n}: {why}", regions, intents[n])
        # what the compiler actually chose, per op (alternatives may mix: 0.5 IADD3 + 0.5 IMAD.IADD)
        n0 = lengths[0]
        seen = Counter(i.opcode for i in regions[n0])
        unit = {op: round(c / intents[n0].count, 3) for op, c in sorted(seen.items())}
        return Verdict(True, unit, Counter(), "exact")
    return _verify_sequence(probe, regions, intents)


def _verify_sequence(probe: str, regions: dict[int, list[Instr]],
                     intents: dict[int, Intent]) -> Verdict:
    lengths = sorted(regions)
    if len(lengths) < 2:
        raise _fail(probe, "a sequence probe needs at least two chain lengths", regions,
                    intents[lengths[0]])
    # Register moves are the register allocator's, not the probed operation's: their number
    # may differ between copies of a sequence, so they are left out of the linearity check.
    counts = {n: Counter(CANONICAL.get(i.opcode, i.opcode) for i in regions[n]
                         if i.opcode not in MOVE_OPCODES) for n in lengths}
    counts_n = {n: intents[n].count for n in lengths}
    unit: Counter | None = None
    for a, b in zip(lengths, lengths[1:]):
        dn = counts_n[b] - counts_n[a]
        diff = counts[b].copy()
        diff.subtract(counts[a])
        if any(v < 0 or v % dn for v in diff.values()):
            raise _fail(probe, f"the region does not grow by whole copies of one sequence "
                        f"between lengths {counts_n[a]} and {counts_n[b]}: {dict(+diff)}",
                        regions, intents[b])
        step = Counter({k: v // dn for k, v in diff.items() if v})
        if unit is None:
            unit = step
        elif step != unit:
            raise _fail(probe, f"the per-op sequence changes with chain length: "
                        f"{dict(unit)} vs {dict(step)}", regions, intents[b])
    assert unit is not None
    if not unit:
        raise _fail(probe, "the timed region does not grow with the chain length "
                    "(chain folded or eliminated)", regions, intents[lengths[-1]])
    n0 = lengths[0]
    base = counts[n0].copy()
    for k, v in unit.items():
        base[k] -= v * counts_n[n0]
    if any(v < 0 for v in base.values()):
        raise _fail(probe, "inconsistent region sizes", regions, intents[n0])
    base = +base
    stray = {k: v for k, v in base.items() if k not in SETUP_OPCODES}
    if stray:
        raise _fail(probe, f"instructions in the timed region that are not part of the "
                    f"repeated sequence: {stray}", regions, intents[n0])
    for pat in intents[n0].signature:
        if not any(matches(op, pat) for op in unit):
            raise _fail(probe, f"the per-op sequence {dict(unit)} lacks {pat}", regions,
                        intents[n0])
    return Verdict(True, dict(sorted(unit.items())), base, "sequence")
