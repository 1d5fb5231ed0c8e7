"""Verification of the launch stamps' timed regions (the throughput loops are core.loop's):
only setup (constants, special registers, moves) precedes the entry clock read. Anything
else: ProbeInvalid with the listing, no number.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...core import sass
from ...core.loop import SETUP, LoopVerdict, predicated_off, verify_loop
from ...core.verify import ProbeInvalid, Verdict, matches

__all__ = ["LoopVerdict", "StampVerdict", "entry_prologue", "verify_entry_stamp", "verify_loop"]


@dataclass
class StampVerdict(Verdict):
    setup: list[str] = field(default_factory=list)   # the opcodes before the entry stamp

def entry_prologue(name: str, func: sass.Function) -> list[sass.Instr]:
    """The instructions before the first clock read (ProbeInvalid when there is none)."""
    groups = sass.clock_groups(func)
    if not groups:
        raise ProbeInvalid(f"probe invalid: {name}: no %clock64 read in the SASS\n"
                           f"{sass.format_listing(func.instrs[:20])}")
    return func.instrs[:groups[0][0]]


def verify_entry_stamp(name: str, func: sass.Function,
                       before: list[sass.Instr]) -> StampVerdict:
    """The first clock read comes before any memory access or computation: only setup
    (constants, special registers, moves) precedes it."""
    bad = [i.opcode for i in before if not predicated_off(i)
           and not any(matches(i.opcode, c) for c in SETUP)]
    if bad:
        raise ProbeInvalid(f"probe invalid: {name}: instructions before the entry clock read "
                           f"that are not setup: {bad}\n{sass.format_listing(func.instrs[:20])}")
    return StampVerdict(True, message="entry stamp", setup=[i.opcode for i in before])
