"""The instruction tables' probes: a row's dependent chain (latency), its independent
sequence (cycles per instruction), Table I's short unguarded regions and the clock-read pair,
all on the shared operand frame (core.ptx.operand_kernel)."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ...core import archs, ptx
from ...core.probe import NotApplicable, Probe
from ...core.ptx import Registers, Template
from ...core.ptx.chains import independent_pairs
from ...core.verify import Intent

DEP_LENGTHS = (16, 32, 64)
SEQ_LENGTHS = (8, 16, 32)
INDEP_LENGTHS = (16, 32, 48)   # 64 independent 64-bit ops spill registers


@dataclass(frozen=True)
class InstrRow:
    """One row of an instruction table: a PTX instruction and how to chain it.

    unit: the SASS one op becomes (opcode patterns, see core/verify.py); None when the compiler
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
    # independent probe: fields every op reads from one loaded register (unique operands
    # otherwise), e.g. setp's predicate input, so fewer predicates are live than P0..P6 hold
    indep_shared: tuple[str, ...] = ()
    # independent probe of 16-bit ops the compiler packs in pairs (f16 -> HADD2, HMUL2, ...):
    # 2 gives the ops their operands paired in 32-bit words of value kind `indep_kind`, the
    # region is then ops/2 packed instructions of the unit; the figure stays per PTX op
    indep_pack: int = 1
    indep_kind: str = ""
    # the independent probe's unit where it differs from the row's (packed pairs: the
    # f16x2 instruction, which ptxas issues as HFMA2.MMA for every second pair on sm_80/90)
    indep_unit: tuple[str, ...] | None = None
    # (arch number, unit): from that arch on one op is exactly this SASS (the row's `unit`
    # and `signature` before it), e.g. the 16-bit ops whose chained result is zero-extended
    # (a '~' link) only where IMAD replaced XMAD
    arch_units: tuple[tuple[int, tuple[str, ...]], ...] = ()
    # dependent chain whose compiler sequence repeats every `dep_pack` ops (see PackedProbe)
    dep_pack: int = 1
    # what the latency / cpi figure measures where the name does not say it (recorded in the
    # figure's method)
    latency_note: str = ""
    cpi_note: str = ""

    def unit_at(self, arch: str) -> tuple[str, ...] | None:
        """The SASS one op becomes on `arch` (None: a compiler sequence, see `signature`)."""
        unit = self.unit
        for n, u in self.arch_units:
            if archs.number(arch) >= n:
                unit = u
        return unit

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

    def supported(self, arch: str) -> str | None:
        if archs.number(arch) < self.min_arch:
            return f"{self.name} needs sm_{self.min_arch}+ ({arch} lacks it)"
        return None


@dataclass
class PackedProbe(Probe):
    """A probe whose verified unit is `pack` PTX ops: independent 16-bit ops the compiler packs
    two to one SASS instruction (two f16 ops into one HADD2: `unit` is that instruction), or a
    compiler sequence that repeats every `pack` ops (a JIT that alternates two register
    assignments between consecutive ops: `unit` None, the sequence of `pack` ops derived as
    for any sequence). The region must hold ops/pack copies of the unit and nothing else; a
    chain must still be `ops` deep; the figure stays per PTX op (`ops`). Lengths are
    multiples of `pack`."""
    pack: int = 2

    def intent(self, n: int) -> Intent:
        if self.ops[n] % self.pack:
            raise ValueError(f"{self.name}: {self.ops[n]} ops do not pack {self.pack} to one")
        return Intent(self.ops[n] // self.pack, self.unit, self.signature,
                      min_depth=self.ops[n] if self.chained else 0)


def _build(name: str, arch: str, lengths: tuple[int, ...], make_body, *, guard: bool = True,
           cls: type[Probe] = Probe, **intent) -> Probe:
    kernels, entries, inputs, ops, slots = [], {}, {}, {}, {}
    base = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")
    for n in lengths:
        regs = Registers()
        body = make_body(n, regs)
        entry = f"{base}_n{n}"
        kernels.append(ptx.operand_kernel(entry, regs, body.lines, body.results, guard=guard))
        entries[n], inputs[n], ops[n] = entry, regs.inputs, n
        slots[n] = ptx.out_bytes(len(body.results), len(regs.inputs)) // ptx.SLOT_BYTES
    return cls(name, arch, "\n" + "\n".join(kernels), entries, ops, inputs=inputs,
               out_slots=slots, guarded=guard, **intent)


_MADE: dict[tuple, tuple[InstrRow, Probe]] = {}


def _once(make):
    """A probe builder whose probes are made once per (row, arch, arguments): the compile
    scheduling builds every probe of an arch for its modules and each test builds its own
    again (a probe is data: the same text, the same digest)."""
    @functools.wraps(make)
    def once(row: InstrRow, arch: str, *args, **kw) -> Probe:
        key = (make.__name__, id(row), arch, args, tuple(sorted(kw.items())))
        hit = _MADE.get(key)
        if hit is None or hit[0] is not row:
            hit = _MADE[key] = (row, make(row, arch, *args, **kw))
        return hit[1]
    return once


@_once
def latency_probe(row: InstrRow, arch: str, lengths: tuple[int, ...] | None = None) -> Probe:
    """Dependent chain of the row's instruction: cycles per op = latency."""
    if row.dep is None:
        raise NotApplicable(f"no dependent chain: {row.dep_note}")
    packed = {"cls": PackedProbe, "pack": row.dep_pack} if row.dep_pack > 1 else {}
    return _build(f"latency/{row.name}", arch, lengths or row.lengths,
                  lambda n, regs: ptx.dependent_chain(row.template, n, regs, row.dep),
                  unit=row.unit_at(arch), signature=row.signature, chained=True, **packed)


@_once
def cpi_probe(row: InstrRow, arch: str, lengths: tuple[int, ...] | None = None,
              prefix: str = "cpi", guard: bool = True) -> Probe:
    """Independent ops: cycles per instruction of an independent sequence (Table V).
    A unit's '~' links (between chained ops) do not exist between independent ops."""
    if not row.indep:
        raise NotApplicable(f"no independent probe: {row.indep_note}")
    unit = row.indep_unit or row.unit_at(arch)
    unit = None if unit is None else tuple(u for u in unit if not u.startswith("~"))
    if row.indep_pack > 1:
        if row.indep_pack != 2:
            raise ValueError(f"{row.name}: independent ops pack in pairs (indep_pack=2) only")
        return _build(f"{prefix}/{row.name}", arch, lengths or row.independent_lengths,
                      lambda n, regs: independent_pairs(row.template, n, regs,
                                                        row.indep_kind),
                      guard=guard, cls=PackedProbe, pack=row.indep_pack, unit=unit,
                      signature=row.signature)
    return _build(f"{prefix}/{row.name}", arch, lengths or row.independent_lengths,
                  lambda n, regs: ptx.independent_ops(row.template, n, regs,
                                                      unique=row.indep_operands == "unique",
                                                      **({"shared": row.indep_shared}
                                                         if row.indep_shared else {})),
                  guard=guard, unit=unit, signature=row.signature)


def table_i_probe(row: InstrRow, arch: str, counts: tuple[int, ...]) -> Probe:
    """Table I: n independent ops in one unguarded region, as the paper timed them."""
    return cpi_probe(row, arch, lengths=counts, prefix="table_i", guard=False)


def clock_overhead_probe(arch: str, *, clock64: bool = True) -> Probe:
    """Two back-to-back clock reads: the timed region must be empty."""
    name = "clock/back_to_back" + ("" if clock64 else "_32bit")
    entry = "clock64_pair" if clock64 else "clock32_pair"
    text = ptx.operand_kernel(entry, Registers(), [], [], clock64=clock64, guard=False)
    return Probe(name, arch, "\n" + text, {0: entry}, {0: 0}, unit=(), inputs={0: []},
                 out_slots={0: ptx.out_bytes(0, 0) // ptx.SLOT_BYTES}, guarded=False)


def mapping_probes(row: InstrRow, arch: str) -> list[Probe]:
    """The probes whose SASS is the row's PTX->SASS mapping: dependent chain (if any), then
    independent sequence (if any)."""
    why = row.supported(arch)
    if why:
        raise NotApplicable(f"static: {why}")
    out = []
    if row.dep is not None:
        out.append(latency_probe(row, arch))
    if row.indep:
        out.append(cpi_probe(row, arch))
    if not out:
        raise NotApplicable(f"{row.name}: neither a dependent nor an independent probe exists")
    return out
