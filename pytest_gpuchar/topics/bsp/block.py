"""A kernel's Many-BSP description derived from its PTX (the report's steps 2-4): the PTX
analysis (Table 1-9: unit, n_fu^i, T_i, latencies, n_ma^i per instruction), the BLOCK rows
(Table 1-10), the level-2 supersteps (eq. 9) and the level-1 sums, and the launch counts
(h, l, l_c, l_m, l_b). Pure: the numbers come in through ``lookup`` (characteristic key ->
value), so the same code derives a kernel on Hopper from the suite's measurements and the
report's KNN from its own Table 3-1.

What is automatic and what is by hand (docs/models.md, "Predictions on Hopper"):

- automatic: each instruction's unit and the characteristic that gives its rate and latency
  (``classify``, from the opcode and type); which global loads hit in L1 (a load from lines an
  earlier load of the same level-1 superstep brought in: the same base register); where
  level-2 supersteps begin (an instruction that reads a register written in the current one,
  or the first after a branch or a barrier); the one FU entry per superstep that carries a
  latency ("latency + k": the producer the next superstep waits for, or the closing branch);
  the issue, occupancy, communication and barrier entries; eq. (9); the level-1 sums; the
  launch counts.
- by hand (rows.py): the level-1 cuts and iteration counts; each global access's warp
  pattern (n_ma); the factor mu. And two rules of ours: T_i is the measured rate over the
  schedulers rounded to a power of two, n_fu^i = T_i (the suite measures no issue width).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable

from ...models import manybsp as mb
from .ptxparse import PtxBody, PtxInstr
from .rows import Access


class Unit(str, Enum):
    SP = "SPs"
    DPU = "DPU"
    SFU = "SFU"
    LDST = "LDST"
    MI = "MI"        # bar.sync: multiple instructions, an overhead, no FU entry


@dataclass(frozen=True)
class OpClass:
    """What runs a PTX instruction: its unit, the throughput row giving its rate
    (``throughput.unit.<rate>``, results/clk/SM) and the characteristics giving its latency
    (first measured wins)."""
    unit: Unit
    rate: str
    latency: tuple[str, ...]


DEFAULT_RATE = "fp32.add"                 # the SPs' full width: the report's 32 per scheduler
DEFAULT_LATENCY = ("latency.add.u32",)   # the report gives every simple SP op one latency


def _op(unit: Unit, rate: str = DEFAULT_RATE, *latency: str) -> OpClass:
    return OpClass(unit, rate, latency + DEFAULT_LATENCY)


# (opcode prefix, type or "" for any) -> class; first match wins (more specific first)
CLASSES: tuple[tuple[str, str, OpClass], ...] = (
    ("bar.sync", "", OpClass(Unit.MI, DEFAULT_RATE, ())),
    ("ld.global", "", _op(Unit.LDST, "ldst.lds", "memory.latency.l1_hit")),
    ("st.global", "", _op(Unit.LDST, "ldst.lds")),
    ("ld.shared", "", _op(Unit.LDST, "ldst.lds", "memory.latency.shared_load")),
    ("st.shared", "", _op(Unit.LDST, "ldst.lds", "memory.latency.shared_store")),
    ("div", "f32", _op(Unit.SFU, "sfu.rsqrt", "latency.div.rn.f32")),
    ("rcp", "f32", _op(Unit.SFU, "sfu.rsqrt", "latency.rcp.rn.f32")),
    ("sqrt", "f32", _op(Unit.SFU, "sfu.sqrt", "latency.sqrt.rn.f32")),
    ("fma", "f64", _op(Unit.DPU, "fp64.fma", "latency.fma.rn.f64")),
    ("mul", "f64", _op(Unit.DPU, "fp64.fma", "latency.mul.rn.f64")),
    ("add", "f64", _op(Unit.DPU, "fp64.add", "latency.add.f64")),
    ("sub", "f64", _op(Unit.DPU, "fp64.add", "latency.add.f64")),
    # F2F between f32 and f64: no conversion of this kind is timed by the instruction
    # tables; the one conversion they time (F2I) stands in for its latency
    ("cvt.f64.f32", "", _op(Unit.SP, "cvt.f32_f64", "latency.cvt.f64.f32",
                            "latency.cvt.rzi.s32.f32")),
    ("cvt.rn.f32.f64", "", _op(Unit.SP, "cvt.f32_f64", "latency.cvt.rn.f32.f64",
                               "latency.cvt.rzi.s32.f32")),
    ("fma", "f32", _op(Unit.SP, "fp32.fma", "latency.fma.rn.f32")),
    ("mul", "f32", _op(Unit.SP, "fp32.mul", "latency.mul.rn.f32")),
    ("add", "f32", _op(Unit.SP, "fp32.add", "latency.add.f32")),
    ("sub", "f32", _op(Unit.SP, "fp32.add", "latency.add.f32")),
    ("mul.wide", "", _op(Unit.SP, "int.mad", "latency.mul.wide.u32")),
    ("mul.lo", "", _op(Unit.SP, "int.mad", "latency.mul.lo.u32")),
    ("mad.lo", "", _op(Unit.SP, "int.mad", "latency.mad.lo.u32")),
    ("add", "s64", _op(Unit.SP, "int.add", "latency.add.s64")),
    ("add", "", _op(Unit.SP, "int.add", "latency.add.u32")),
    ("sub", "", _op(Unit.SP, "int.add", "latency.add.u32")),
    ("neg", "", _op(Unit.SP, "int.add")),
    ("shl", "", _op(Unit.SP, "int.shift")),
    ("shr", "", _op(Unit.SP, "int.shift")),
    ("and", "pred", _op(Unit.SP, "int.logic")),
    ("or", "pred", _op(Unit.SP, "int.logic")),
    ("and", "", _op(Unit.SP, "int.logic", "latency.lop3.b32")),
    ("or", "", _op(Unit.SP, "int.logic", "latency.lop3.b32")),
    ("setp", "", _op(Unit.SP, "int.minmax", "latency.setp.ne.s32")),
    ("selp", "", _op(Unit.SP, "int.minmax")),
)
DEFAULT_CLASS = _op(Unit.SP)    # mov, cvta, ld.param, bra, ...


def classify(ins: PtxInstr) -> OpClass:
    for prefix, ptype, cls in CLASSES:
        if (ins.opcode == prefix or ins.opcode.startswith(prefix + ".")) and \
                (not ptype or ins.ptype == ptype):
            return cls
    return DEFAULT_CLASS


def lanes(rate: float, n_ws: int) -> int:
    """T_i from a measured rate: results/clk/SM over the schedulers, rounded to the nearest
    power of two (a unit's lane count; measured rates sit a few percent under it)."""
    per = max(rate / n_ws, 1e-9)
    return max(1, min(32, 2 ** round(math.log2(per))))


@dataclass(frozen=True)
class Inputs:
    """What the derivation reads besides the PTX: characteristic values (``lookup`` -> value or
    None), the DRAM latency for communication, the L1 hit latency, the bar.sync overhead for
    this block size, schedulers per SM and warps per scheduler (eq. 6), the access patterns
    (report row -> Access) and the level-1 supersteps (first, last, iterations)."""
    lookup: Callable[[str], float | None]
    mem_lat: float
    l1_lat: float
    bar_ovh: float
    n_ws: int
    w: int
    access: dict
    level1: list
    issue_cycle: float = 1.0
    warp_size: int = 32


@dataclass
class DerivedBlock:
    """The kernel's BLOCK description and where each number came from."""
    table: dict[int, mb.Instruction]            # Table 1-9
    rows: dict[int, mb.BlockRow]                # Table 1-10
    level2: list[mb.Superstep]
    level1: tuple[mb.Superstep, ...]
    waits: dict[int, int]                       # superstep start -> row carrying its latency
    l1_hits: set[int]
    counts: dict[str, int]                      # h, l, l_c, l_m, l_b
    sources: dict[int, dict] = field(default_factory=dict)   # row -> {rate, latency keys}

    @property
    def block(self) -> mb.Block:
        return mb.Block(self.level1, tail_comm=self.level2[-1].comm, level2=tuple(self.level2))


def first_users(body: PtxBody) -> dict[int, int]:
    """Row -> the first later row that reads a register it writes (the report's u; 0: none)."""
    out = {}
    for ins in body.instrs:
        regs = set(ins.dests)
        out[ins.index] = next((j.index for j in body.instrs[ins.index:]
                               if regs & set(j.srcs)), 0) if regs else 0
    return out


def l1_hits(body: PtxBody, level1: list) -> set[int]:
    """Global loads that read lines an earlier load of the same level-1 superstep brought into
    L1: the same base register, not written in between (KNN's second field of a record)."""
    hits = set()
    for start, end, _ in level1:
        seen: dict[str, int] = {}
        for k in range(start, end + 1):
            ins = body[k]
            for r in ins.dests:
                seen.pop(r, None)
            if ins.opcode.startswith("ld.global"):
                base = ins.address()[0]
                if base in seen:
                    hits.add(k)
                seen[base] = k
    return hits


def _value(inp: Inputs, keys: tuple[str, ...]) -> tuple[float, str]:
    for k in keys:
        v = inp.lookup(k)
        if v is not None:
            return float(v), k
    raise ValueError(f"none of {', '.join(keys)} measured: cannot derive the instruction")


def analyse(body: PtxBody, inp: Inputs) -> tuple[dict[int, mb.Instruction], set[int], dict]:
    """Table 1-9: per instruction its unit, n_fu^i = T_i, latencies and n_ma^i."""
    users, hits = first_users(body), l1_hits(body, inp.level1)
    table, sources = {}, {}
    for ins in body.instrs:
        cls = classify(ins)
        rate = inp.lookup(f"throughput.unit.{cls.rate}")
        t = lanes(rate, inp.n_ws) if rate else inp.warp_size
        glob = ins.space == "global"
        n_ma = inp.access[ins.index].n_ma() if glob else (1 if cls.unit is Unit.LDST else 0)
        comp, comp_key = (0.0, "") if cls.unit is Unit.MI else _value(inp, cls.latency)
        if glob and ins.index in hits:
            comp, comp_key = inp.l1_lat, "l1_lat"
        comm = inp.mem_lat if glob and ins.index not in hits else 0.0
        unit = Unit.SP.value if cls.unit is Unit.MI else cls.unit.value
        table[ins.index] = mb.Instruction(ins.index, ins.text, unit, t, t, lat_comp=comp,
                                          lat_comm=comm, n_ma=n_ma, u=users[ins.index])
        sources[ins.index] = {"unit": cls.unit.value, "rate": f"throughput.unit.{cls.rate}"
                              if rate else f"default {inp.warp_size}", "latency": comp_key}
    return table, hits, sources


def cut_level2(body: PtxBody, level1: list, table: dict[int, mb.Instruction],
               issue: dict[int, float]) -> list[tuple[int, int, int | None]]:
    """Level-2 supersteps (first, last, the row whose result ends it or None): a superstep
    ends before an instruction that reads a register written in it (it waits for the one of
    those producers whose result comes last: issued at the superstep's summed issue cycles,
    ready its latency later), and after a branch or a barrier; a level-1 boundary ends one."""
    out = []
    for start, end, _ in level1:
        first, written, clock, ready = start, {}, 0.0, {}
        for k in range(start, end + 1):
            ins = body[k]
            waits = {written[r] for r in ins.srcs if r in written}
            if k > first and waits:
                out.append((first, k - 1, max(waits, key=lambda p: (ready[p], p))))
                first, written, clock = k, {}, 0.0
            clock += issue[k]
            ready[k] = clock + max(table[k].lat_comp, table[k].lat_comm)
            for r in ins.dests:
                written[r] = k
            if (ins.is_branch or ins.is_barrier) and k < end:
                out.append((first, k, k if ins.is_branch else None))
                first, written, clock = k + 1, {}, 0.0
        out.append((first, end, end if body[end].is_branch else None))
    return out


def block_rows(body: PtxBody, table: dict[int, mb.Instruction], waited: set[int], hits: set[int],
               inp: Inputs) -> dict[int, mb.BlockRow]:
    """Table 1-10: issue; occupancy on the unit's FU column, or latency + k where the row is
    the one its superstep waits for; communication of the DRAM accesses; barrier overhead."""
    rows = {}
    for ins in body.instrs:
        i = table[ins.index]
        cls = classify(ins)
        fu = [0.0] * len(mb.FU_UNITS)
        comm = ovh = 0.0
        issue = mb.issue_cost(i, inp.w, inp.issue_cycle, inp.warp_size)
        dram = ins.space == "global" and ins.index not in hits
        if cls.unit is Unit.MI:
            ovh = inp.bar_ovh
        elif dram:
            comm = mb.comm_cost(i, inp.w)
        else:
            col = mb.FU_UNITS.index(i.unit)
            fu[col] = (mb.dependent_fu_cost(i, inp.w, inp.warp_size) if ins.index in waited
                       else inp.w * max(1, i.n_ma) * inp.warp_size / i.t)
        rows[ins.index] = mb.BlockRow(ins.index, ins.opcode, issue, tuple(fu),
                                      per_warp=inp.warp_size / i.t, comm=comm, ovh=ovh)
    return rows


def counts(body: PtxBody, level1: list, hits: set[int]) -> dict[str, int]:
    """h, l (instructions on the path, loops by their iterations), l_m (DRAM accesses), l_b
    (barriers), l_c = l - l_m - l_b."""
    c = {"h": len(body), "l": 0, "l_m": 0, "l_b": 0}
    for start, end, t in level1:
        for k in range(start, end + 1):
            ins = body[k]
            c["l"] += t
            c["l_m"] += t if ins.space == "global" and k not in hits else 0
            c["l_b"] += t if ins.is_barrier else 0
    c["l_c"] = c["l"] - c["l_m"] - c["l_b"]
    return c


def derive_from_table(body: PtxBody, table: dict[int, mb.Instruction], hits: set[int],
                      inp: Inputs, sources: dict | None = None) -> DerivedBlock:
    """Steps 3 and 4 from a Table 1-9 (ours, or the report's own)."""
    issue = {k: mb.issue_cost(i, inp.w, inp.issue_cycle, inp.warp_size) for k, i in table.items()}
    cuts = cut_level2(body, inp.level1, table, issue)
    waits = {a: k for a, _, k in cuts if k is not None}
    waited = {k for k in waits.values()}
    rows = block_rows(body, table, waited, hits, inp)
    level2 = [mb.level2_superstep(rows, a, b) for a, b, _ in cuts]
    level1 = mb.level1_from_level2(inp.level1, level2)
    return DerivedBlock(table, rows, level2, level1, waits, hits, counts(body, inp.level1, hits),
                   sources or {})


def derive(body: PtxBody, inp: Inputs) -> DerivedBlock:
    """The whole derivation: Table 1-9 from the lookup, then steps 3 and 4."""
    table, hits, sources = analyse(body, inp)
    return derive_from_table(body, table, hits, inp, sources)


def launch(d: DerivedBlock, n_b: int, n_t: int, regs: int, shmem: int) -> mb.Launch:
    c = d.counts
    return mb.Launch(n_b=n_b, n_t=n_t, l_c=c["l_c"], l_m=c["l_m"], reg_per_thread=regs,
                     shmem_per_block=shmem, h=c["h"], l=c["l"], l_b=c["l_b"])


def access_table(access: dict[int, Access]) -> dict[int, int]:
    """Report row -> n_ma of each annotated global access."""
    return {k: a.n_ma() for k, a in access.items()}
