"""Probes: a PTX module with one kernel per chain length, plus what its SASS must be.

A probe is data: its name, the arch, the PTX text, the entry point and input slots of each
chain length, and the Intent per length that the verifier checks the timed region against.
``build_static`` assembles it offline (ptxas, no GPU); the hardware path JITs the same PTX
through the driver (jit.py) and verifies the driver's own cubin.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Callable

from . import ptx, sass, toolchain
from .ptx import Frame, InputSlot, Template
from .verify import Intent, Verdict, verify

DEP_LENGTHS = (16, 32, 64)
SEQ_LENGTHS = (8, 16, 32)
INDEP_LENGTHS = (16, 32, 48)   # 64 independent 64-bit ops spill registers


@dataclass(frozen=True)
class InstrRow:
    """One row of an instruction table: a PTX instruction and how to chain it.

    unit: the SASS one op becomes (opcode patterns, see verify.py); None when the compiler
    emits a multi-instruction sequence or a call (then `signature` names what it must hold).
    dep: chain style for the dependent (latency) probe, or None with `dep_note` saying why no
    single-op dependent chain of this instruction can exist.
    """
    name: str
    template: Template
    unit: tuple[str, ...] | None
    signature: tuple[str, ...] = ()
    dep: str | None = "acc"
    dep_note: str = ""
    indep: bool = True
    indep_note: str = ""
    min_arch: int = 0
    # independent probe: "unique" gives every op its own operands, so nothing (a divisor's
    # reciprocal, an f16 pair to pack, a register-bank pattern that changes with the length)
    # is common to two ops; "product" shares operand registers between ops (fewer registers)
    indep_operands: str = "unique"
    indep_lengths: tuple[int, ...] | None = None   # e.g. predicate results: at most 6 live

    @property
    def lengths(self) -> tuple[int, ...]:
        return DEP_LENGTHS if self.unit is not None else SEQ_LENGTHS

    @property
    def independent_lengths(self) -> tuple[int, ...]:
        """Lengths of the independent probe: as many ops as fit in registers without spills
        (each op has its own operands and result)."""
        if self.indep_lengths:
            return self.indep_lengths
        ops = self.template.operands
        words = sum(max(1, ops[f].width // 32) for f in self.template.sources) + \
            max(1, ops["d"].width // 32)
        longest = (INDEP_LENGTHS if self.unit is not None else SEQ_LENGTHS)[-1]
        while longest * words > 160 and longest > 8:
            longest //= 2
        return (longest // 3, 2 * longest // 3, longest) if longest % 3 == 0 else \
            (longest // 4, longest // 2, longest)


@dataclass
class Probe:
    name: str                    # "latency/add.u32"
    arch: str
    ptx: str
    entries: dict[int, str]      # chain length -> kernel name
    inputs: dict[int, list[InputSlot]]
    intent: Callable[[int], Intent]
    ops: dict[int, int]          # chain length -> number of PTX ops timed
    out_slots: dict[int, int] = field(default_factory=dict)  # 8-byte slots each kernel writes
    guarded: bool = True         # the body sits behind the clock-compare guard (ptx.kernel)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.ptx.encode()).hexdigest()[:16]

    @property
    def kernels(self) -> str:
        """The probe's kernels without the module header (for batching probes in one module)."""
        return self.ptx[len(ptx.header(self.arch)):]


@dataclass
class Static:
    """A probe assembled and checked offline."""
    probe: Probe
    compiler: toolchain.Tool
    functions: dict[str, sass.Function]
    regions: dict[int, list[sass.Instr]]
    verdict: Verdict

    def snapshot_text(self, length: int | None = None) -> str:
        n = length or min(self.probe.entries)
        f = self.functions[self.probe.entries[n]]
        return sass.normalise(f)


def _build(name: str, arch: str, lengths: tuple[int, ...], make_body, intent,
           guard: bool = True) -> Probe:
    kernels, entries, inputs, ops, slots = [], {}, {}, {}, {}
    base = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")
    for n in lengths:
        frame = Frame()
        body = make_body(n, frame)
        entry = f"{base}_n{n}"
        kernels.append(ptx.kernel(entry, frame, body.lines, body.results, guard=guard))
        entries[n], inputs[n], ops[n] = entry, frame.inputs, n
        slots[n] = ptx.out_bytes(len(body.results), len(frame.inputs)) // ptx.SLOT_BYTES
    return Probe(name, arch, ptx.module(arch, kernels), entries, inputs, intent, ops, slots,
                 guarded=guard)


def latency_probe(row: InstrRow, arch: str, lengths: tuple[int, ...] | None = None) -> Probe:
    """Dependent chain of the row's instruction: cycles per op = latency."""
    if row.dep is None:
        raise ValueError(f"{row.name}: no dependent chain ({row.dep_note})")
    return _build(f"latency/{row.name}", arch, lengths or row.lengths,
                  lambda n, fr: ptx.dependent_chain(row.template, n, fr, row.dep),
                  lambda n: Intent(n, row.unit, row.signature, min_depth=n))


def cpi_probe(row: InstrRow, arch: str, lengths: tuple[int, ...] | None = None,
              prefix: str = "cpi", guard: bool = True) -> Probe:
    """Independent ops: cycles per instruction of an independent sequence (Table V).
    A unit's '~' links (between chained ops) do not exist between independent ops."""
    unit = None if row.unit is None else tuple(u for u in row.unit if not u.startswith("~"))
    return _build(f"{prefix}/{row.name}", arch, lengths or row.independent_lengths,
                  lambda n, fr: ptx.independent_ops(row.template, n, fr,
                                                    unique=row.indep_operands == "unique"),
                  lambda n: Intent(n, unit, row.signature), guard=guard)


def clock_overhead_probe(arch: str, *, clock64: bool = True) -> Probe:
    """Two back-to-back clock reads: the timed region must be empty."""
    name = "clock/back_to_back" + ("" if clock64 else "_32bit")
    frame = Frame()
    entry = "clock64_pair" if clock64 else "clock32_pair"
    text = ptx.module(arch, [ptx.kernel(entry, frame, [], [], clock64=clock64, guard=False)])
    return Probe(name, arch, text, {0: entry}, {0: []}, lambda n: Intent(0, ()), {0: 0},
                 {0: ptx.out_bytes(0, 0) // ptx.SLOT_BYTES}, guarded=False)


def regions_of(probe: Probe, functions: dict[str, sass.Function]) -> dict[int, list[sass.Instr]]:
    out = {}
    for n, entry in probe.entries.items():
        if entry not in functions:
            raise sass.RegionError(f"{probe.name}: kernel {entry} missing from the SASS "
                                   f"(have {sorted(functions)})")
        region = sass.timed_region(functions[entry])
        out[n] = strip_guard(probe.name, region) if probe.guarded else region
    return out


def _is_guard_setup(ins: sass.Instr) -> bool:
    """The compare of the clock value with -1: ISETP (Volta+: one or two), or on Maxwell/Pascal
    a carry-setting IADD32I RZ.CC plus ISETP .X; and there the next clock read's retry-counter
    reset (MOV Rn, RZ)."""
    if ins.pred:
        return False
    if ins.opcode.startswith("ISETP"):
        return True
    if ins.opcode == "IADD32I" and ins.operands and ins.operands[0].startswith("RZ.CC"):
        return True
    return ins.opcode == "MOV" and len(ins.operands) == 2 and ins.operands[1] == "RZ"


def strip_guard(name: str, region: list[sass.Instr]) -> list[sass.Instr]:
    """Drop the guard that opens every timed region: the compare of the first clock value
    (one or two ISETP) and the never-taken branch over the body (ptx.kernel). Its cost is
    fixed, so it cancels in the slope. If the compiler if-converted the branch, every body
    instruction must carry the guard's predicate instead."""
    k = 0
    while k < len(region) and k < 4 and _is_guard_setup(region[k]):
        k += 1
    rest = region[k:]
    if not rest:
        return rest   # an empty body: the branch to the next instruction was dropped
    if rest[0].base == "BRA" and rest[0].pred:
        return rest[1:]
    preds = {i.pred for i in rest}
    if len(preds) == 1 and rest[0].pred:
        return rest
    raise sass.RegionError(f"{name}: the timed region does not open with the guard (clock "
                           f"compare + branch); got {rest[0].text}: the compiler restructured "
                           f"the probe\n{sass.format_listing(region)}")


def check(probe: Probe, functions: dict[str, sass.Function]) -> tuple[dict, Verdict]:
    regions = regions_of(probe, functions)
    return regions, verify(probe.name, regions, probe.intent)


def functions_of(cubin: bytes, arch: str) -> dict[str, sass.Function]:
    """The SASS of every kernel in a cubin (nvdisasm for `arch`), by kernel name."""
    return sass.parse(toolchain.disassemble(cubin, arch))


def build_static(probe: Probe) -> Static:
    """Assemble offline with ptxas for the probe's arch, disassemble, verify.

    Uses the arch's batch (one ptxas run for every probe registered with `batch`) when the
    probe is in it, else assembles this probe alone."""
    tool = toolchain.find("ptxas", probe.arch)
    toolchain.find("nvdisasm", probe.arch)
    functions = _BATCH_FUNCS.get((probe.arch, tool.version, probe.digest))
    if functions is None:
        functions = functions_of(toolchain.assemble(probe.ptx, probe.arch), probe.arch)
    regions, verdict = check(probe, functions)
    return Static(probe, tool, functions, regions, verdict)


_BATCH_FUNCS: dict[tuple[str, str, str], dict[str, sass.Function]] = {}


def batch_module(arch: str, batch: list[Probe]) -> str:
    """One PTX module holding every probe's kernels (names are unique per probe and length)."""
    return ptx.header(arch) + "\n".join(p.kernels for p in batch)


def batch(arch: str, batch: list[Probe]) -> None:
    """Assemble many probes of one arch in a single ptxas + nvdisasm run and remember their
    SASS for build_static. If the batch fails to assemble, nothing is remembered and each
    probe is assembled alone later (so one bad probe names itself)."""
    from concurrent.futures import ThreadPoolExecutor
    from . import jit
    tool = toolchain.find("ptxas", arch)
    todo = [p for p in batch if (arch, tool.version, p.digest) not in _BATCH_FUNCS]
    if not todo:
        return
    parts = jit.chunks(todo)

    def build(part):
        try:
            return functions_of(toolchain.assemble(batch_module(arch, part), arch), arch)
        except toolchain.AssemblyError:
            return None     # this part's probes are assembled alone later
    # one ptxas + nvdisasm process per part, in parallel (jit.chunk_count)
    with ThreadPoolExecutor(max_workers=len(parts)) as pool:
        built = list(pool.map(build, parts))
    for part, functions in zip(parts, built):
        if functions is None:
            continue
        for p in part:
            _BATCH_FUNCS[(arch, tool.version, p.digest)] = {
                e: functions[e] for e in p.entries.values() if e in functions}
