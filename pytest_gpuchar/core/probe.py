"""The probe: PTX kernels at several chain lengths, and what their timed regions must hold.

A probe is data: its name, arch, kernel text, the entry point and operand slots of each chain
length, how many PTX ops each length times and the SASS unit one op must become. ``check``
is the one verification entry point of every probe: it finds the timed regions in a
compiler's SASS (offline ptxas or the driver's JIT) and verifies them, raising
``ProbeInvalid`` (no number is ever reported for an invalid probe). Topics subclass Probe
where their regions or checks differ (a loop inside the region, the wgmma guard, ...).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from . import ptx, sass
from .ptx import InputSlot
from .verify import Intent, ProbeInvalid, Verdict, verify


class NotApplicable(Exception):
    """The probe or row cannot exist here (an instruction the arch lacks, a row with no
    dependent chain): the test is skipped with this reason."""


class DeclaredUnmeasurable(NotApplicable):
    """The probe is declared unmeasurable on this arch (expectation file) and its SASS shows
    the declared fact: skipped with the reason, recorded as a note (never a regression)."""


@dataclass
class Probe:
    name: str                        # "latency/add.u32"
    arch: str
    kernels: str                     # the kernels (and module-level arrays), no header
    entries: dict[int, str]          # chain length -> kernel entry
    ops: dict[int, int]              # chain length -> PTX ops timed
    unit: tuple[str, ...] | None = None   # SASS of one op (None: a compiler sequence)
    signature: tuple[str, ...] = ()       # what a compiler sequence must contain
    per_op: int = 1                  # SASS units per PTX op
    chained: bool = False            # dependent chain: the region's depth reaches the length
    inputs: dict[int, list[InputSlot]] = field(default_factory=dict)
    out_slots: dict[int, int] = field(default_factory=dict)  # 8-byte slots per thread
    guarded: bool = True             # the body sits behind the clock-compare guard
    target: str | None = None        # .target when not the arch itself (sm_90a)
    isa: str | None = None           # .version when not the arch's default

    @property
    def header(self) -> str:
        return ptx.header(self.arch, self.isa, self.target)

    @property
    def ptx(self) -> str:
        """The probe as a module of its own."""
        return self.header + self.kernels

    @property
    def digest(self) -> str:
        """A short hash of the probe's module, the key of its compiled SASS. Kept with the
        kernel text it was computed from (a probe's text is large and the session looks the
        digest up several times per test); another text gets a new digest."""
        header = self.header
        memo = self.__dict__.get("_digest")
        if memo is None or memo[0] is not self.kernels or memo[1] != header:
            memo = (self.kernels, header,
                    hashlib.sha256((header + self.kernels).encode()).hexdigest()[:16])
            self.__dict__["_digest"] = memo
        return memo[2]

    def intent(self, n: int) -> Intent:
        return Intent(self.ops[n] * self.per_op, self.unit, self.signature,
                      min_depth=n if self.chained else 0)

    # --- verification -----------------------------------------------------------------------
    def sass_of(self, functions: dict[str, sass.Function], n=None) -> sass.Function:
        """The SASS of length n's kernel (default: the snapshot length's); a kernel the
        module lacks raises sass.RegionError naming the ones it has."""
        entry = self.entries[self.snapshot_length() if n is None else n]
        if entry not in functions:
            raise sass.RegionError(f"{self.name}: kernel {entry} missing from the SASS "
                                   f"(have {sorted(functions)})")
        return functions[entry]

    def regions(self, functions: dict[str, sass.Function]) -> dict[int, list[sass.Instr]]:
        """The timed region of each length's kernel, the guard stripped."""
        out = {}
        for n in self.entries:
            region = sass.timed_region(self.sass_of(functions, n))
            out[n] = self.strip_guard(region) if self.guarded else region
        return out

    def strip_guard(self, region: list[sass.Instr]) -> list[sass.Instr]:
        return strip_guard(self.name, region)

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> Verdict:
        return verify(self.name, regions, self.intent)

    def check(self, functions: dict[str, sass.Function]) -> Verdict:
        """Verify the probe's timed regions in `functions`; raises ProbeInvalid or
        sass.RegionError. The one verification entry point of every probe."""
        regions = self.regions(functions)
        if self.guarded and len(self.entries) > 1:
            same_guard(self.name, {n: sass.timed_region(functions[e])
                                   for n, e in self.entries.items()})
        verdict = self.verify_regions(regions, functions)
        verdict.regions = regions
        return verdict

    # --- snapshots ------------------------------------------------------------------------
    def snapshot_length(self) -> int:
        return min(self.entries)

    def snapshot_text(self, functions: dict[str, sass.Function]) -> str:
        """Normalised SASS of the shortest length's kernel (what is snapshotted)."""
        return sass.normalise(functions[self.entries[self.snapshot_length()]])


@dataclass(kw_only=True)
class OneKernelProbe(Probe):
    """A probe of one kernel timed whole or by a loop inside it (a Many-BSP kernel, a
    whole-GPU throughput loop): its one length is the snapshot length, its region the
    kernel's timed region (empty where the kernel lacks the two clock reads: the subclass's
    verify_regions names the missing read)."""

    @property
    def length(self) -> int:
        return self.snapshot_length()

    @property
    def entry(self) -> str:
        return self.entries[self.length]

    def regions(self, functions: dict[str, sass.Function]) -> dict[int, list[sass.Instr]]:
        func = self.sass_of(functions)
        if len(sass.clock_groups(func)) < 2:
            return {self.length: []}
        return {self.length: sass.timed_region(func)}


def _is_guard_setup(ins: sass.Instr) -> bool:
    """The compare of the clock value with -1: ISETP (Volta+: one or two; UISETP when the clock
    was read to a uniform register), or on Maxwell/Pascal
    a carry-setting IADD32I RZ.CC plus ISETP .X; and there the next clock read's retry-counter
    reset (MOV Rn, RZ)."""
    if ins.pred:
        return False
    if ins.opcode.startswith(("ISETP", "UISETP")):   # UISETP: sm_120 reads the clock to a UR
        return True
    if ins.opcode == "IADD32I" and ins.operands and ins.operands[0].startswith("RZ.CC"):
        return True
    return ins.opcode == "MOV" and len(ins.operands) == 2 and ins.operands[1] == "RZ"


def guard_form(region: list[sass.Instr]) -> str:
    """How the compiler kept the guard of a timed region: "branch" (a conditional branch
    over the body), "predicated" (if-converted: the body carries the guard's predicate) or
    "empty" (no body)."""
    k = 0
    while k < len(region) and k < 4 and _is_guard_setup(region[k]):
        k += 1
    rest = region[k:]
    if not rest:
        return "empty"
    return "branch" if rest[0].is_conditional_branch else "predicated"


def same_guard(name: str, regions: dict[int, list[sass.Instr]]) -> None:
    """The guard's cost cancels in the slope only if it is the same at every length: ptxas
    if-converts the branch over a short body and keeps it over a long one, and a probe whose
    shortest kernel is predicated while the longer ones branch carries the difference in its
    slope (a cpi probe of 4, 8 and 12 DFMA read 32, 60 and 72 cycles). Raises ProbeInvalid
    naming the lengths of each form."""
    forms: dict[str, list[int]] = {}
    for n in sorted(regions):
        forms.setdefault(guard_form(regions[n]), []).append(n)
    forms.pop("empty", None)
    if len(forms) > 1:
        how = "; ".join(f"{form} at {lengths}" for form, lengths in forms.items())
        raise ProbeInvalid(f"{name}: the guard over the timed body is not the same at every "
                           f"length ({how}): its fixed cost would not cancel in the slope; "
                           f"time lengths the compiler treats alike")


def strip_guard(name: str, region: list[sass.Instr]) -> list[sass.Instr]:
    """Drop the guard that opens every timed region: the compare of the first clock value
    (one or two ISETP) and the never-taken branch over the body (core.ptx.Kernel). Its cost
    is fixed, so it cancels in the slope. If the compiler if-converted the branch, every body
    instruction must carry the guard's predicate instead."""
    k = 0
    while k < len(region) and k < 4 and _is_guard_setup(region[k]):
        k += 1
    rest = region[k:]
    if not rest:
        return rest   # an empty body: the branch to the next instruction was dropped
    if rest[0].is_conditional_branch:
        return rest[1:]
    preds = {i.pred for i in rest}
    if len(preds) == 1 and rest[0].pred:
        return rest
    raise sass.RegionError(f"{name}: the timed region does not open with the guard (clock "
                           f"compare + branch); got {rest[0].text}: the compiler restructured "
                           f"the probe\n{sass.format_listing(region)}")
