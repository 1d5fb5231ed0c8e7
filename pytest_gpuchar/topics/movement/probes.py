"""The movement topic's probe types (core.probe.Probe subclasses).

``MovementProbe``: a timed region verified like any probe, with never-executed placeholders
(core.loop.predicated_off) left out, and the code the compiler moved behind the kernel's EXIT
(the retry of a wait loop) checked to hold nothing but ``tail`` opcodes. ``CountProbe``: a
chain whose step is a compiler sequence (uniform-datapath address moves, elect loops): each
length's region holds exactly n x `counts` of the instructions that do the work, anything else
only `side` opcodes (address arithmetic, moves, branches). ``StreamProbe``: a bandwidth loop
whose trip count is a parameter (every length is one kernel): the loop body must hold exactly
the intended memory instructions, and nothing in the region may touch memory otherwise.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ...core import loop, sass
from ...core.loop import is_const_move
from ...core.probe import Probe
from ...core.verify import ProbeInvalid, Verdict, matches

ADDRESS_REG = re.compile(r"\[(R\d+)(?:\.64)?(?:\+[^\]]*)?\]")   # [R16.64], [R4+0x8]
# what a compiler may put in a stream kernel's timed region besides its memory instructions:
# address and loop arithmetic, the accumulators, moves, compares, branches, constant loads
STREAM_SIDE = ("IADD3*", "IADD*", "VIADD*", "UIADD3*", "IMAD*", "UIMAD*", "LEA*", "ULEA*",
               "SHF*", "USHF*", "LOP3*", "ULOP3*", "LOP*", "MOV*", "UMOV*", "ISETP*",
               "UISETP*", "BRA*", "S2R", "S2UR", "CS2R", "LDC*", "ULDC*", "SEL", "USEL",
               "PLOP3*", "UPLOP3*", "NOP", "PRMT", "UPRMT", "R2UR", "ELECT", "VOTEU*", "IABS",
               "IMNMX*", "VIMNMX*", "SHL", "SHR", "WARPSYNC*", "BSSY", "BSYNC")


def executed(region: list[sass.Instr]) -> list[sass.Instr]:
    """The region without never-executed placeholders (core.loop.predicated_off)."""
    return [i for i in region if not loop.predicated_off(i)]


def after_exit(func: sass.Function) -> list[sass.Instr]:
    """The instructions placed after the function's last EXIT (out-of-line blocks)."""
    last = max((k for k, i in enumerate(func.instrs) if i.base == "EXIT"), default=None)
    return [] if last is None else func.instrs[last + 1:]


@dataclass
class MovementProbe(Probe):
    """A probe whose timed region is verified without never-executed placeholders; `tail`
    lists the opcode patterns allowed in out-of-line code behind EXIT (besides BRA and NOP)."""
    tail: tuple[str, ...] = ()

    def regions(self, functions: dict[str, sass.Function]) -> dict[int, list[sass.Instr]]:
        return {n: executed(r) for n, r in super().regions(functions).items()}

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> Verdict:
        self.check_tail(functions)
        return super().verify_regions(regions, functions)

    def check_tail(self, functions: dict[str, sass.Function]) -> None:
        """Out-of-line code behind EXIT may hold only `tail` opcodes (and BRA, NOP)."""
        for entry in sorted(set(self.entries.values())):
            extra = [i.text for i in after_exit(functions[entry])
                     if i.base not in ("BRA", "NOP", "EXIT") and not loop.predicated_off(i) and
                     not any(matches(i.opcode, p) for p in self.tail)]
            if extra:
                raise ProbeInvalid(f"probe invalid: {self.name}: out-of-line code behind EXIT "
                                   f"of {entry} holds {extra} (allowed: {self.tail})")


def stray(region: list[sass.Instr], allowed: tuple[str, ...]) -> dict[str, int]:
    """Opcodes of the region matching none of the allowed patterns, counted. A constant the
    compiler materialises with HFMA2.MMA (-RZ * RZ + imm, the driver JIT's form of MOV) is a
    move like the MOV* the side patterns allow (core.loop.is_const_move)."""
    return dict(Counter(i.opcode for i in region if not is_const_move(i)
                        and not any(matches(i.opcode, p) for p in allowed)))


@dataclass
class CountProbe(MovementProbe):
    """Each step of the chain holds exactly `counts` (opcode pattern -> instructions per
    step) and otherwise only `side` opcodes (default: STREAM_SIDE)."""
    counts: dict[str, int] = field(default_factory=dict)
    side: tuple[str, ...] = STREAM_SIDE

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> Verdict:
        self.check_tail(functions)
        for n, region in sorted(regions.items()):
            listing = sass.format_listing(region)
            want = {p: c * self.ops[n] for p, c in self.counts.items()}
            got = {p: sum(matches(i.opcode, p) for i in region) for p in want}
            if got != want:
                raise ProbeInvalid(f"probe invalid: {self.name}: length {n}: instructions "
                                   f"{got}, intended {want} ({self.counts} per step)\n{listing}")
            bad = stray(region, (*self.counts, *self.side))
            if bad:
                raise ProbeInvalid(f"probe invalid: {self.name}: length {n}: unexpected "
                                   f"instructions in the timed region: {bad}\n{listing}")
        n0 = min(regions)
        unit = {op: round(c / self.ops[n0], 3)
                for op, c in sorted(Counter(i.opcode for i in regions[n0]).items())}
        return Verdict(True, unit, Counter(), "counted")


@dataclass
class AtomicChainProbe(MovementProbe):
    """A chain of returning atomics (ATOMG PT, Rd, [Ra], ...): the core's dependence depth
    takes the predicate PT for the destination, so the chain is checked here: every atomic's
    address register is the one the atomic before it returned."""

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> Verdict:
        verdict = super().verify_regions(regions, functions)
        for n, region in regions.items():
            for a, b in zip(region, region[1:]):
                dest = a.operands[1].strip() if len(a.operands) > 2 else None
                if dest is None or dest not in ADDRESS_REG.findall(b.text):
                    raise ProbeInvalid(f"probe invalid: {self.name}: length {n}: {b.text} does "
                                       f"not use the result of {a.text} (chain broken)\n"
                                       f"{sass.format_listing(region)}")
        return verdict


@dataclass
class StreamProbe(MovementProbe):
    """A bandwidth loop (nounroll; the trip count is a parameter, so every length is the same
    kernel). `loop` maps each memory opcode pattern to its count in the loop body, `total`
    to its count in the whole region (prologue and drain included; default: `loop`); `side`
    adds opcode patterns allowed besides STREAM_SIDE. The verdict's unit counts the loop."""
    loop: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    side: tuple[str, ...] = ()

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> Verdict:
        n0 = min(regions)
        func = functions[self.entries[n0]]
        region = regions[n0]
        listing = sass.format_listing(region)
        body = self.loop_body(region, func, listing)
        want_total = self.total or self.loop
        for where, instrs, want in (("loop body", body, self.loop),
                                    ("timed region", region, want_total)):
            got = {p: sum(matches(i.opcode, p) for i in instrs) for p in want}
            if got != want:
                raise ProbeInvalid(f"probe invalid: {self.name}: {where}: memory instructions "
                                   f"{got}, intended {want}\n{listing}")
        bad = stray(region, (*self.loop, *want_total, *STREAM_SIDE, *self.side))
        if bad:
            raise ProbeInvalid(f"probe invalid: {self.name}: unexpected instructions in the "
                               f"timed region: {bad}\n{listing}")
        self.check_tail(functions)
        return Verdict(True, dict(Counter(i.opcode for i in body)), Counter(), "stream")

    def loop_body(self, region: list[sass.Instr], func: sass.Function,
                  listing: str) -> list[sass.Instr]:
        """The instructions from the target of the region's last conditional backward branch
        to it (core.loop.backward_branches)."""
        loops = [(a, b) for a, b in loop.backward_branches(func, region)
                 if region[b].is_conditional_branch]
        if loops:
            start, end = loops[-1]
            return region[start:end + 1]
        raise ProbeInvalid(f"probe invalid: {self.name}: no loop (backward branch inside the "
                           f"timed region) found\n{listing}")
