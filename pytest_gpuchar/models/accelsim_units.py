"""The latency / initiation-interval options of the Accel-Sim fragments, planned so that
gpgpu-sim can run them: every value its parser reads is written (a slot the run did not
measure takes SM90_H100's value and says so), every interval is capped at its latency, and
every instruction class enters its unit's pipeline inside it (accelsim_rules: start stage =
latency - interval in [0, stages - 1]); where a measured pair would fall outside, the interval
is raised to the smallest that fits, and the comment says so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import accelsim_rules as rules

SLOTS = rules.SLOTS


@dataclass(frozen=True)
class Src:
    """A candidate source of a value: a characteristic key and how its value becomes the
    option's: 'as is', 'rate' (an interval from results/clk/SM: schedulers x warp_size / rate)
    or 'mma' (the same for an m x n x k MMA from fma/clk/SM)."""
    key: str
    kind: str = "as is"


def lat(*keys: str) -> tuple[Src, ...]:
    return tuple(Src(k) for k in keys)


def ii(*keys: str) -> tuple[Src, ...]:
    return tuple(Src(k, "rate" if k.startswith("throughput.unit.") else "as is") for k in keys)


_SHFL_LAT = lat("latency.shfl.sync.bfly.b32", "latency.shfl.sync.idx.b32")
_SHFL_II = ii("cpi.shfl.sync.bfly.b32", "cpi.shfl.sync.idx.b32")

# PTX mode: one PTX instruction of the class takes the slot's latency / interval
# (cuda-sim.cc, ptx_instruction::set_opcode_and_latency); candidates in order, per slot
PTX_LATENCY = {
    "int": (lat("latency.add.u32", "latency.add.s32"),
            lat("latency.max.u32", "latency.max.s32", "latency.min.u32", "latency.min.s32"),
            lat("latency.mul.lo.u32", "latency.mul.lo.s32"),
            lat("latency.mad.lo.u32", "latency.mad.lo.s32"),
            lat("latency.div.u32", "latency.div.s32", "latency.rem.u32", "latency.rem.s32",
                "latency.div.u64", "latency.div.s64", "latency.rem.u64"), _SHFL_LAT),
    "fp": (lat("latency.add.f32"), lat("latency.max.f32", "latency.min.f32"),
           lat("latency.mul.rn.f32", "latency.mul.f32"),
           lat("latency.fma.rn.f32", "latency.mad.rn.f32"), lat("latency.div.rn.f32")),
    "dp": (lat("latency.add.f64"), lat("latency.max.f64", "latency.min.f64"),
           lat("latency.mul.rn.f64"), lat("latency.fma.rn.f64", "latency.mad.rn.f64"),
           lat("latency.div.rn.f64")),
    "sfu": (lat("latency.sin.approx.f32", "latency.cos.approx.f32", "latency.ex2.approx.f32",
                "latency.lg2.approx.f32", "latency.rsqrt.approx.f32",
                "latency.rcp.approx.f32", "latency.sqrt.approx.f32"),),
    # PTX mode's tensor op is wmma.mma
    "tensor": (lat("tensor.wmma.f16.f32.m16n16k16.completion_latency",
                   "tensor.wmma.f16.f16.m16n16k16.completion_latency"),),
}
PTX_INITIATION = {
    "int": (ii("throughput.unit.int.add", "cpi.add.u32", "cpi.add.s32"),
            ii("throughput.unit.int.minmax", "cpi.max.u32", "cpi.max.s32", "cpi.min.u32",
               "cpi.min.s32"),
            ii("cpi.mul.lo.u32", "cpi.mul.lo.s32"),
            ii("throughput.unit.int.mad", "cpi.mad.lo.u32", "cpi.mad.lo.s32"),
            ii("cpi.div.u32", "cpi.div.s32", "cpi.rem.u32", "cpi.rem.s32", "cpi.div.u64",
               "cpi.div.s64", "cpi.rem.u64"), _SHFL_II),
    "fp": (ii("throughput.unit.fp32.add", "cpi.add.f32"), ii("cpi.max.f32", "cpi.min.f32"),
           ii("throughput.unit.fp32.mul", "cpi.mul.rn.f32"),
           ii("throughput.unit.fp32.fma", "cpi.fma.rn.f32", "cpi.mad.rn.f32"),
           ii("cpi.div.rn.f32")),
    "dp": (ii("throughput.unit.fp64.add", "cpi.add.f64"), ii("cpi.max.f64", "cpi.min.f64"),
           ii("cpi.mul.rn.f64"), ii("throughput.unit.fp64.fma", "cpi.fma.rn.f64",
                                    "cpi.mad.rn.f64"),
           ii("cpi.div.rn.f64")),
    "sfu": (ii("throughput.unit.sfu.sin", "throughput.unit.sfu.ex2", "throughput.unit.sfu.lg2",
               "throughput.unit.sfu.rsqrt", "throughput.unit.sfu.sqrt", "cpi.sin.approx.f32",
               "cpi.ex2.approx.f32"),),
    # ".cycles": one warp's cycles per wmma of an independent sequence, the unit's interval
    "tensor": (lat("tensor.wmma.f16.f32.m16n16k16.cycles",
                   "tensor.wmma.f16.f16.m16n16k16.cycles"),),
}
#: slots a class option is written without (the value is SM90_H100's, said so)
OPTIONAL = {("int", "SHFL")}

# trace mode, per SASS instruction of the unit (Accel-Sim ISA_Def/hopper_opcode.h: IADD3 and
# IMAD -> INTP_OP, FFMA -> SP_OP, DFMA -> DP_OP, MUFU -> SFU_OP, HMMA -> SPECIALIZED_UNIT_3_OP)
TRACE = {
    "int": (lat("latency.add.u32", "latency.add.s32"),
            ii("throughput.unit.int.add", "cpi.add.u32")),
    "sp": (lat("latency.fma.rn.f32", "latency.add.f32"),
           ii("throughput.unit.fp32.fma", "throughput.unit.fp32.add", "cpi.fma.rn.f32")),
    "dp": (lat("latency.fma.rn.f64", "latency.add.f64"),
           ii("throughput.unit.fp64.fma", "throughput.unit.fp64.add", "cpi.fma.rn.f64")),
    "sfu": ((), ii("throughput.unit.sfu.ex2", "throughput.unit.sfu.sin",
                   "throughput.unit.sfu.lg2", "throughput.unit.sfu.rsqrt",
                   "throughput.unit.sfu.sqrt")),
    "tensor": (lat("tensor.mma.f16.f32.m16n8k16.completion_latency",
                   "tensor.mma.f16.f16.m16n8k16.completion_latency"),
               (Src("tensor.mma.f16.f32.m16n8k16.throughput_peak", "mma"),
                Src("tensor.mma.f16.f16.m16n8k16.throughput_peak", "mma"))),
}


def whole(x: float) -> int:
    """An integer option from a measured value: rounded half up, at least 1."""
    return max(1, math.floor(x + 0.5))


@dataclass
class Slot:
    """One value of an option: the number written and where it came from."""
    value: int
    how: str
    measured: bool = True
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        return self.how + "".join(f" ({n})" for n in self.notes)


def base_slot(option: str, i: int) -> Slot:
    v = rules.read_uints(rules.BASE[option], rules.ARITY[option])[i]
    return Slot(v, f"{rules.BASE_NAME}'s {v}, not measured", measured=False)


@dataclass
class Pair:
    """The latency and interval slots of one class (PTX: int/fp/dp/sfu/tensor; trace: one
    unit) as the fragment writes them; ``measured``: the class's latencies came from the run
    (a class written only to keep a base value inside its pipeline is not)."""
    name: str
    lat: list[Slot]
    ii: list[Slot]
    measured: bool = True

    def cap(self) -> None:
        """An interval above its latency would start before the pipeline: capped."""
        for a, b in zip(self.lat, self.ii):
            if b.value > a.value:
                b.notes.append(f"capped at the latency {a.value}")
                b.value = a.value


def _slot(m, sources: tuple[Src, ...]) -> Slot | None:
    v = m.first(sources)
    return None if v is None else Slot(whole(v.value), v.how)


def ptx_pairs(m) -> tuple[dict[str, Pair], dict[str, str]]:
    """The PTX classes whose latencies the run measured (every slot but OPTIONAL ones), each
    slot measured or the base's; and for the other classes why not."""
    pairs, missing = {}, {}
    for cls, names in SLOTS.items():
        lo, io = rules.latency_option(cls), rules.initiation_option(cls)
        lats = [_slot(m, s) for s in PTX_LATENCY[cls]]
        gone = [f"{n} (looked for {', '.join(s.key for s in src)})"
                for n, src, v in zip(names, PTX_LATENCY[cls], lats)
                if v is None and (cls, n) not in OPTIONAL]
        if gone:
            missing[cls] = "; ".join(gone)
            continue
        lat_slots = [v or base_slot(lo, i) for i, v in enumerate(lats)]
        ii_slots = [_slot(m, s) or base_slot(io, i) for i, s in enumerate(PTX_INITIATION[cls])]
        pairs[cls] = Pair(cls, lat_slots, ii_slots)
    return pairs, missing


def ptx_options(pairs: dict[str, Pair]) -> dict[str, str]:
    out = {}
    for cls, p in pairs.items():
        out[rules.latency_option(cls)] = ",".join(str(s.value) for s in p.lat)
        out[rules.initiation_option(cls)] = ",".join(str(s.value) for s in p.ii)
    return out


def fit_ptx(pairs: dict[str, Pair]) -> dict[str, str]:
    """Cap every interval at its latency, then raise any interval whose start stage falls past
    its unit's pipeline (the stages follow from latencies only, so one pass settles it); a
    class the run did not measure is added, from the base, where the measured ones push one of
    its base values outside. Returns the options in effect after the merge."""
    for p in pairs.values():
        p.cap()
    eff = {**rules.BASE, **ptx_options(pairs)}
    for st in rules.stages(eff):
        if st.inside:
            continue
        cls, _, slot = st.op.partition(" ")
        i = SLOTS[cls].index(slot or SLOTS[cls][0])
        if cls not in pairs:
            lo, io = rules.latency_option(cls), rules.initiation_option(cls)
            pairs[cls] = Pair(cls, [base_slot(lo, k) for k in range(len(SLOTS[cls]))],
                              [base_slot(io, k) for k in range(len(SLOTS[cls]))], False)
            pairs[cls].cap()
        s = pairs[cls].ii[i]
        if st.start is not None and st.stages and st.start >= st.stages:
            new = st.latency - st.stages + 1
            s.notes.append(f"raised from {s.value} to {new}: latency {st.latency} - interval "
                           f"must be below the {st.unit} pipeline's {st.stages} stages")
            s.value = new
    return {**rules.BASE, **ptx_options(pairs)}


def trace_pairs(m, mufu_latency) -> tuple[dict[str, Pair], dict[str, str]]:
    """Trace-mode <latency,interval> per unit from the run (the SFU latency: a PTX op that is
    one MUFU alone), capped; and for the units without a measurement what was looked for."""
    pairs, missing = {}, {}
    for unit, (lat_src, ii_src) in TRACE.items():
        if unit == "sfu":
            v = mufu_latency
            lat_slot = None if v is None else Slot(whole(v.value), v.how)
        else:
            lat_slot = _slot(m, lat_src)
        ii_slot = _slot(m, ii_src)
        if lat_slot is None or ii_slot is None:
            looked = ("a latency whose SASS is one MUFU" if unit == "sfu" and lat_slot is None
                      else ", ".join(s.key for s in (lat_src if lat_slot is None else ii_src)))
            missing[unit] = f"no measurement (looked for {looked})"
            continue
        pairs[unit] = Pair(unit, [lat_slot], [ii_slot])
        pairs[unit].cap()
    return pairs, missing


def fit_trace(pairs: dict[str, Pair], ptx_effective: dict[str, str]) -> None:
    """Raise a trace interval whose start stage falls past the pipeline the PTX options (the
    gpgpusim.config fragment of the same run merged into SM90_H100) give its unit."""
    eff = {**ptx_effective, **{rules.trace_option(u): f"{p.lat[0].value},{p.ii[0].value}"
                               for u, p in pairs.items()}}
    for st in rules.trace_stages(eff):
        unit = st.op.split()[-1]
        if st.inside or unit not in pairs or not st.stages or st.start is None:
            continue
        s, new = pairs[unit].ii[0], st.latency - st.stages + 1
        s.notes.append(f"raised from {s.value} to {new}: latency {st.latency} - interval must "
                       f"be below the {st.unit} pipeline's {st.stages} stages")
        s.value = new


def pipeline_summary(eff: dict[str, str]) -> list[str]:
    """One line per unit: its stages and the start stage of each class it runs."""
    depth = rules.pipelines(eff)
    why = {"INT": "max of int MAX and SHFL", "SP": "fp MAX", "DP": "dp MAX",
           "SFU": "max of dp DIV and sfu", "TENSOR": "the tensor latency"}
    by_unit: dict[str, list[str]] = {}
    for st in rules.stages(eff):
        by_unit.setdefault(st.unit, []).append(f"{st.op} {st.start}")
    return [f"{u} pipeline {depth[u]} stages ({why[u]}); start stages: {', '.join(v)}"
            for u, v in by_unit.items()]
