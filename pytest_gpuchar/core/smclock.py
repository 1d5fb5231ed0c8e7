"""The SM-clock probe: the effective SM clock of a run as SM cycles (%clock64) over nanoseconds
(%globaltimer) across a ~1-10 ms busy loop on one SM, verified like any probe before its
figure is used (SPEC rule 1).

The kernel reads %globaltimer, then %clock64, runs a counted loop of one LCG step
(``mad.lo.u32``) per iteration (``.pragma "nounroll"``: ptxas unrolls it fourfold otherwise),
reads %clock64 and %globaltimer again, and stores both differences and the LCG's last value.
``SmClockProbe.check`` verifies its SASS: between the two clock reads one loop whose body is
one LCG step (the arch's SASS unit of mad.lo.u32) plus loop control and nothing else around it
(core.loop.verify_loop), and one %globaltimer read outside each clock read with no loop and no
LCG step between them, so both clocks time the same loop. ``mhz`` then turns a launch's
record into the figure, after checking the stored LCG value against the CPU model: the loop
ran exactly the iterations asked for. Anything else raises ProbeInvalid: no number.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import archs, loop, ptx, sass
from .loop import LoopVerdict, verify_loop
from .probe import OneKernelProbe
from .verify import ProbeInvalid, matches

ENTRY = "sm_clock"
NAME = "clock/sm_clock"
MODULE = "sm_clock.ptx"     # the file name the probe's module is linked under
LCG_A, LCG_C = 1664525, 1013904223      # Numerical Recipes' 32-bit LCG
MASK = (1 << 32) - 1
# the SASS of one mad.lo.u32 (core's arch table, as the throughput rows' FIB chain):
# Maxwell/Pascal split a 32-bit multiply into three XMAD, Volta and later issue one IMAD
XMAD_UNIT = ("XMAD", "XMAD.MRG", "XMAD.PSL.CBCC")
IMAD_UNIT = ("IMAD",)
MAX_BRACKET = 8     # instructions between a %globaltimer read and its clock read (setup)


def unit(arch: str) -> tuple[str, ...]:
    """The SASS of one LCG step on `arch`."""
    return IMAD_UNIT if archs.number(arch) >= 70 else XMAD_UNIT


def kernel(entry: str = ENTRY) -> str:
    """The kernel's PTX (no header): out[0] = cycles, out[1] = ns, out[2] = the LCG's value
    after `iters` steps from x0 = iters."""
    return ptx.Kernel(
        entry=entry, params=[".param .u64 out_param", ".param .u32 iters"], clock=None,
        decls=[".reg .b64 %out, %c0, %c1, %t0, %t1;", ".reg .b32 %n, %i, %x;",
               ".reg .pred %p;"],
        body=["ld.param.u64 %out, [out_param];", "ld.param.u32 %n, [iters];",
              "mov.u32 %x, %n;", "mov.u32 %i, 0;", "mov.u64 %t0, %globaltimer;",
              "mov.u64 %c0, %clock64;", "LOOP:", '.pragma "nounroll";',
              f"mad.lo.u32 %x, %x, {LCG_A}, {LCG_C};", "add.u32 %i, %i, 1;",
              "setp.lt.u32 %p, %i, %n;", "@%p bra LOOP;",
              "mov.u64 %c1, %clock64;", "mov.u64 %t1, %globaltimer;",
              "sub.s64 %c1, %c1, %c0;", "sub.s64 %t1, %t1, %t0;",
              "st.global.u64 [%out], %c1;", "st.global.u64 [%out+8], %t1;",
              "st.global.u32 [%out+16], %x;"]).render()


def _is_timer_read(ins: sass.Instr) -> bool:
    return ins.opcode.startswith(sass.CLOCK_READ_OPCODES) and any(
        o.startswith("SR_GLOBALTIMER") for o in ins.operands)


def timer_reads(func: sass.Function) -> list[tuple[int, int]]:
    """(first, last) index of each %globaltimer read: a run of reads of SR_GLOBALTIMER*
    (sm_50..sm_62 read hi, lo, hi), the instructions between its reads included, and on
    sm_60..sm_62 its retry loop (as a 64-bit clock read's, core.sass.clock_groups)."""
    ins = func.instrs
    at = [k for k, i in enumerate(ins) if _is_timer_read(i)]
    groups: list[list[int]] = []
    for k in at:
        if groups and k - groups[-1][-1] <= 2:
            groups[-1].append(k)
        else:
            groups.append([k])
    out = []
    for g in groups:
        end = g[-1]
        tail = [i.opcode for i in ins[end + 1:end + 1 + len(sass.RETRY_TAIL)]]
        if len(g) == 3 and tail == list(sass.RETRY_TAIL):
            end += len(sass.RETRY_TAIL)
        out.append((g[0], end))
    return out


@dataclass(kw_only=True)
class SmClockProbe(OneKernelProbe):
    """The SM-clock kernel: one LCG loop between the clock reads (core.loop.verify_loop, one
    step per iteration) and the %globaltimer reads around the clock reads."""

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> LoopVerdict:
        func = self.sass_of(functions)
        verdict = verify_loop(self.name, self.arch, self.unit, (1,) * len(self.unit or ()),
                              func, ops=1)
        self.check_bracket(func)
        return verdict

    def check_bracket(self, func: sass.Function) -> None:
        """One %globaltimer read before the first clock read and one after the second, and
        between each and its clock read at most setup: no branch, no LCG step."""
        clocks, timers = sass.clock_groups(func), timer_reads(func)

        def fail(why: str) -> ProbeInvalid:
            return ProbeInvalid(f"probe invalid: {self.name} ({self.arch}): {why}\nintended: "
                                f"globaltimer read, clock read, the loop, clock read, "
                                f"globaltimer read\n{sass.format_listing(func.instrs)}")
        if len(timers) != 2:
            raise fail(f"{len(timers)} %globaltimer reads, wanted two")
        (t0, t0_end), (t1, t1_end) = timers
        (c0, _), (c1, c1_end) = clocks[0], clocks[1]
        if not (t0_end < c0 and c1_end < t1):
            raise fail("the %globaltimer reads do not enclose the clock reads: the two clocks "
                       "would not time the same loop")
        pats = self.unit or ()
        for lo, hi in ((t0_end + 1, c0), (c1_end + 1, t1)):
            between = [i for i in func.instrs[lo:hi] if not loop.never_executed(i)]
            stray = [i.opcode for i in between
                     if i.base == "BRA" or any(matches(i.opcode, u) for u in pats)]
            if stray or len(between) > MAX_BRACKET:
                raise fail(f"between a %globaltimer read and its clock read: "
                           f"{[i.opcode for i in between]} (wanted at most {MAX_BRACKET} "
                           f"setup instructions, no branch, no LCG step)")


def probe(arch: str) -> SmClockProbe:
    """The SM-clock probe for `arch` (the length is the LCG steps per iteration: one)."""
    return SmClockProbe(NAME, arch, "\n" + kernel(), {1: ENTRY}, {1: 1}, unit=unit(arch),
                        guarded=False)


def module(arch: str) -> tuple[str, str]:
    """(module text, file name) of the probe for `arch`, as Gpu.sm_clock_mhz links it: what
    a session links ahead (schedule.start)."""
    return probe(arch).ptx, MODULE


def lcg(x0: int, n: int) -> int:
    """The kernel's LCG value after n steps from x0 (mod 2**32; one step when n is 0, as the
    kernel's do-while loop), by squaring the affine map: O(log n)."""
    a, c = 1, 0                    # the identity map x -> a x + c
    pa, pc = LCG_A, LCG_C          # the map of 2**k steps
    k = max(n, 1)
    while k:
        if k & 1:
            a, c = (a * pa) & MASK, (c * pa + pc) & MASK
        pa, pc = (pa * pa) & MASK, (pc * pa + pc) & MASK
        k >>= 1
    return (a * x0 + c) & MASK


def mhz(cycles: int, ns: int, x: int, iters: int) -> float:
    """The SM clock of one launch's record; ProbeInvalid when the loop did not run `iters`
    LCG steps (the stored value is not the CPU model's) or no time passed."""
    want = lcg(iters & MASK, iters)
    if (x & MASK) != want:
        raise ProbeInvalid(f"probe invalid: {NAME}: the loop's LCG value is {x & MASK:#x}, "
                           f"not {want:#x} after {iters} steps: the loop did not run as "
                           f"compiled")
    if cycles <= 0 or ns <= 0:
        raise ProbeInvalid(f"probe invalid: {NAME}: {cycles} cycles in {ns} ns")
    return cycles / ns * 1000.0
