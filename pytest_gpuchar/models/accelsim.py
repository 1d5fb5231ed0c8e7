"""The part of an Accel-Sim / GPGPU-Sim configuration that a gpuchar run determines:
instruction latency and initiation interval per op class, L1 / shared / L2 / DRAM latencies and
the SM count, under the option names of Accel-Sim's tested configurations (``fragment``: the
gpgpusim.config part, ``trace_fragment``: the trace.config part of its SASS trace-driven mode).
Every value line carries a comment naming the characteristic(s) and the run it came from; what
the run did not measure is left out, with a comment saying so, never filled in. The memory
latencies follow the conventions of Accel-Sim's own tuner (util/tuner/GPU_Microbenchmark):
L2 "ROP" latency = L2 hit - L1 hit, DRAM latency = DRAM - L2 hit, all in SM cycles.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

USABLE = ("pass", "measured")        # result statuses that give a number (as launch.py's export)
SLOTS = ("ADD", "MAX", "MUL", "MAD", "DIV")   # gpgpu-sim's order in -ptx_opcode_*_{int,fp,dp}


@dataclass(frozen=True)
class Src:
    """A candidate source of an option value: a characteristic key and how its value becomes
    the option's: 'as is', 'rate' (an initiation interval from results/clk/SM: schedulers x
    warp_size / rate) or 'mma' (the same for an m x n x k MMA from fma/clk/SM)."""
    key: str
    kind: str = "as is"


@dataclass(frozen=True)
class Value:
    """An option value, the characteristic it came from and how (for the comment)."""
    value: float
    key: str
    how: str


def _lat(*keys: str) -> tuple[Src, ...]:
    return tuple(Src(k) for k in keys)


def _ii(*keys: str) -> tuple[Src, ...]:
    return tuple(Src(k, "rate" if k.startswith("throughput.unit.") else "as is") for k in keys)


# PTX mode: one PTX instruction of the class takes the slot's latency / initiation interval
# (gpgpu-sim cuda-sim.cc, ptx_instruction::set_opcode_and_latency); candidates in order
PTX_LATENCY = {
    "int": (_lat("latency.add.u32", "latency.add.s32"),
            _lat("latency.max.u32", "latency.max.s32", "latency.min.u32", "latency.min.s32"),
            _lat("latency.mul.lo.u32", "latency.mul.lo.s32"),
            _lat("latency.mad.lo.u32", "latency.mad.lo.s32"),
            _lat("latency.div.u32", "latency.div.s32", "latency.rem.u32", "latency.rem.s32",
                 "latency.div.u64", "latency.div.s64", "latency.rem.u64")),
    "fp": (_lat("latency.add.f32"), _lat("latency.max.f32", "latency.min.f32"),
           _lat("latency.mul.rn.f32", "latency.mul.f32"),
           _lat("latency.fma.rn.f32", "latency.mad.rn.f32"), _lat("latency.div.rn.f32")),
    "dp": (_lat("latency.add.f64"), _lat("latency.max.f64", "latency.min.f64"),
           _lat("latency.mul.rn.f64"), _lat("latency.fma.rn.f64", "latency.mad.rn.f64"),
           _lat("latency.div.rn.f64")),
}
PTX_INITIATION = {
    "int": (_ii("throughput.unit.int.add", "cpi.add.u32", "cpi.add.s32"),
            _ii("throughput.unit.int.minmax", "cpi.max.u32", "cpi.max.s32", "cpi.min.u32",
                "cpi.min.s32"),
            _ii("cpi.mul.lo.u32", "cpi.mul.lo.s32"),
            _ii("throughput.unit.int.mad", "cpi.mad.lo.u32", "cpi.mad.lo.s32"),
            _ii("cpi.div.u32", "cpi.div.s32", "cpi.rem.u32", "cpi.rem.s32", "cpi.div.u64",
                "cpi.div.s64", "cpi.rem.u64")),
    "fp": (_ii("throughput.unit.fp32.add", "cpi.add.f32"), _ii("cpi.max.f32", "cpi.min.f32"),
           _ii("throughput.unit.fp32.mul", "cpi.mul.rn.f32"),
           _ii("throughput.unit.fp32.fma", "cpi.fma.rn.f32", "cpi.mad.rn.f32"),
           _ii("cpi.div.rn.f32")),
    "dp": (_ii("throughput.unit.fp64.add", "cpi.add.f64"), _ii("cpi.max.f64", "cpi.min.f64"),
           _ii("cpi.mul.rn.f64"), _ii("throughput.unit.fp64.fma", "cpi.fma.rn.f64",
                                      "cpi.mad.rn.f64"),
           _ii("cpi.div.rn.f64")),
}
SFU_LATENCY = _lat("latency.sin.approx.f32", "latency.cos.approx.f32", "latency.ex2.approx.f32",
                   "latency.lg2.approx.f32", "latency.rsqrt.approx.f32",
                   "latency.rcp.approx.f32", "latency.sqrt.approx.f32")
SFU_INITIATION = _ii("throughput.unit.sfu.sin", "throughput.unit.sfu.ex2",
                     "throughput.unit.sfu.lg2", "throughput.unit.sfu.rsqrt",
                     "throughput.unit.sfu.sqrt", "cpi.sin.approx.f32", "cpi.ex2.approx.f32")
# PTX mode's tensor op is wmma.mma; ".cycles" is one warp's cycles per wmma of an independent
# sequence, the unit's initiation interval
TENSOR_LATENCY = _lat("tensor.wmma.f16.f32.m16n16k16.completion_latency",
                      "tensor.wmma.f16.f16.m16n16k16.completion_latency")
TENSOR_INITIATION = _lat("tensor.wmma.f16.f32.m16n16k16.cycles",
                         "tensor.wmma.f16.f16.m16n16k16.cycles")

# trace mode: per SASS instruction of the unit (Accel-Sim ISA_Def/hopper_opcode.h: IADD3 and
# IMAD -> INTP_OP, FFMA -> SP_OP, DFMA -> DP_OP, MUFU -> SFU_OP, HMMA -> SPECIALIZED_UNIT_3_OP)
TRACE = {
    "int": (_lat("latency.add.u32", "latency.add.s32"),
            _ii("throughput.unit.int.add", "cpi.add.u32")),
    "sp": (_lat("latency.fma.rn.f32", "latency.add.f32"),
           _ii("throughput.unit.fp32.fma", "throughput.unit.fp32.add", "cpi.fma.rn.f32")),
    "dp": (_lat("latency.fma.rn.f64", "latency.add.f64"),
           _ii("throughput.unit.fp64.fma", "throughput.unit.fp64.add", "cpi.fma.rn.f64")),
    "sfu": ((), _ii("throughput.unit.sfu.ex2", "throughput.unit.sfu.sin",
                    "throughput.unit.sfu.lg2", "throughput.unit.sfu.rsqrt",
                    "throughput.unit.sfu.sqrt")),
    "tensor": (_lat("tensor.mma.f16.f32.m16n8k16.completion_latency",
                    "tensor.mma.f16.f16.m16n8k16.completion_latency"),
               (Src("tensor.mma.f16.f32.m16n8k16.throughput_peak", "mma"),
                Src("tensor.mma.f16.f16.m16n8k16.throughput_peak", "mma"))),
}

UPSTREAM_GPGPUSIM = ("accel-sim/gpgpu-sim_distribution "
                     "configs/tested-cfgs/SM90_H100/gpgpusim.config")
UPSTREAM_TRACE = ("accel-sim/accel-sim-framework "
                  "gpu-simulator/configs/tested-cfgs/SM90_H100/trace.config")


def whole(x: float) -> int:
    """An integer option from a measured value: rounded half up, at least 1."""
    return max(1, math.floor(x + 0.5))


class Measurements:
    """The usable results of one arch as launch.model_parameters reads a report (status pass
    or measured, a value; the last of a repeated key), and the unit counts rates convert with."""

    def __init__(self, results: list[dict], arch: str | None, n_ws: int | None,
                 warp_size: int = 32):
        self.by_key: dict[str, dict] = {
            r["key"]: r for r in results
            if (arch is None or r.get("arch") == arch) and r.get("status") in USABLE
            and r.get("value") is not None}
        self.n_ws, self.warp_size = n_ws, warp_size

    def value(self, src: Src) -> Value | None:
        r = self.by_key.get(src.key)
        if r is None:
            return None
        v, unit = float(r["value"]), r.get("unit", "")
        if src.kind == "as is":
            return Value(v, src.key, f"{src.key} = {v:.2f} {unit}".rstrip())
        if not self.n_ws or v <= 0:
            return None
        work = self.warp_size
        if src.kind == "mma":
            m, n, k = map(int, re.search(r"m(\d+)n(\d+)k(\d+)", src.key).groups())
            work = m * n * k
        return Value(self.n_ws * work / v, src.key,
                     f"{self.n_ws} x {work} / {src.key} {v:.2f} {unit}".rstrip())

    def first(self, sources: tuple[Src, ...]) -> Value | None:
        return next((v for v in map(self.value, sources) if v is not None), None)

    def single_mufu_latency(self) -> Value | None:
        """The latency of a PTX op the suite verified to compile to one MUFU instruction and
        nothing else (its data.sass_unit), f32 first: the SASS-level SFU latency."""
        hits = []
        for key, r in self.by_key.items():
            sass = (r.get("data") or {}).get("sass_unit") if isinstance(r.get("data"), dict) \
                else None
            if key.startswith("latency.") and sass and len(sass) == 1:
                (op, count), = sass.items()
                if op.startswith("MUFU") and float(count) == 1.0:
                    hits.append((not key.endswith("f32"), key))
        if not hits:
            return None
        key = min(hits)[1]
        v = float(self.by_key[key]["value"])
        op = next(iter(self.by_key[key]["data"]["sass_unit"]))
        return Value(v, key, f"{key} = {v:.2f} cycles ({op} alone)")


class Writer:
    """Lines of a config fragment: options with their comment, and comments."""

    def __init__(self, run: str):
        self.run, self.lines = run, []

    def comment(self, text: str) -> None:
        self.lines.append(f"# {text}")

    def option(self, name: str, value: str, note: str) -> None:
        self.lines.append(f"{name} {value}  # {note}; {self.run}")

    def omit(self, name: str, why: str) -> None:
        self.lines.append(f"# {name} not written: {why}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _run_tag(meta: dict) -> str:
    return (f"run {meta.get('date') or 'of unrecorded date'} "
            f"on {meta.get('device') or 'an unrecorded device'}")


def _header(w: Writer, meta: dict, params: dict, what: str, upstream: str) -> None:
    arch = params.get("arch") or meta.get("arch") or "?"
    w.comment(f"Accel-Sim {what} fragment written by pytest-gpuchar from a measured run:")
    w.comment(f"{meta.get('device', '?')} ({arch}), {meta.get('sm_count', '?')} SMs, "
              f"{meta.get('date', '?')}, driver {meta.get('driver', '?')}, "
              f"ptxas {meta.get('ptxas', '?')}")
    w.comment("option names as in Accel-Sim's tested config")
    w.comment(f"  {upstream}")
    w.comment("merge into such a config. Integer options are the measured values rounded; what")
    w.comment("the run did not measure is left out (a comment says so), never filled in.")


def _slot_values(m: Measurements, slots: tuple[tuple[Src, ...], ...]) -> list[Value | None]:
    return [m.first(cands) for cands in slots]


def _missing(slots: tuple[tuple[Src, ...], ...], got: list[Value | None]) -> str:
    return "; ".join(f"{name} (looked for {', '.join(s.key for s in cands)})"
                     for name, cands, v in zip(SLOTS, slots, got) if v is None)


def _ptx_class(w: Writer, m: Measurements, cls: str) -> None:
    """-ptx_opcode_latency_<cls> and -ptx_opcode_initiation_<cls>: five slots each, written
    only when all five are measured; an interval is capped at its latency (gpgpu-sim starts
    an op at pipeline stage latency - interval, shader.cc pipelined_simd_unit::cycle)."""
    lat_slots, ii_slots = PTX_LATENCY[cls], PTX_INITIATION[cls]
    lat, ii = _slot_values(m, lat_slots), _slot_values(m, ii_slots)
    if all(lat):
        ints = [whole(v.value) for v in lat]
        w.option(f"-ptx_opcode_latency_{cls}", ",".join(map(str, ints)),
                 "<ADD,MAX,MUL,MAD,DIV> " + ", ".join(v.how for v in lat))
        longer = [f"{s} {x}" for s, x in zip(SLOTS[:4], ints[:4]) if x > ints[1]]
        if longer:
            w.comment(f"caution: gpgpu-sim sizes the {cls} pipeline by the MAX latency "
                      f"({ints[1]}; shader.cc max_*_latency) and assumes it the longest; "
                      f"measured longer: {', '.join(longer)}")
    else:
        w.omit(f"-ptx_opcode_latency_{cls}", "no measurement for " + _missing(lat_slots, lat))
    if all(ii):
        vals = [whole(v.value) for v in ii]
        if all(lat):
            vals = [min(x, whole(l.value)) for x, l in zip(vals, lat)]
        capped = [s for s, x, v in zip(SLOTS, vals, ii) if x < whole(v.value)]
        note = ", ".join(v.how for v in ii)
        if capped:
            note += f" (capped at the latency: {', '.join(capped)})"
        if not all(lat):
            note += " (no latency option written: keep each interval within the base config's)"
        w.option(f"-ptx_opcode_initiation_{cls}", ",".join(map(str, vals)),
                 "<ADD,MAX,MUL,MAD,DIV> " + note)
    else:
        w.omit(f"-ptx_opcode_initiation_{cls}", "no measurement for " + _missing(ii_slots, ii))


def _single(w: Writer, name: str, v: Value | None, looked: tuple[Src, ...],
            cap: Value | None = None) -> None:
    if v is None:
        w.omit(name, "no measurement (looked for " + ", ".join(s.key for s in looked) + ")")
        return
    x = whole(v.value)
    note = v.how
    if cap is not None and x > whole(cap.value):
        x, note = whole(cap.value), note + " (capped at the latency)"
    w.option(name, str(x), note)


def _units(w: Writer, m: Measurements) -> None:
    w.comment("--- instruction latency and initiation interval per op class (PTX mode) ---")
    w.comment("int/fp/dp: five slots <ADD,MAX,MUL,MAD,DIV>; the int option's sixth slot "
              "(SHFL) is not measured, so five values, as the tested config gives")
    for cls in ("int", "fp", "dp"):
        _ptx_class(w, m, cls)
    sfu = m.first(SFU_LATENCY)
    _single(w, "-ptx_opcode_latency_sfu", sfu, SFU_LATENCY)
    if sfu is not None:
        others = [f"{s.key.split('.', 1)[1]} {m.value(s).value:.0f}" for s in SFU_LATENCY
                  if s.key != sfu.key and m.value(s) is not None]
        if others:
            w.comment("other PTX ops of gpgpu-sim's SFU class measured: " + ", ".join(others))
    _single(w, "-ptx_opcode_initiation_sfu", m.first(SFU_INITIATION), SFU_INITIATION, cap=sfu)
    tensor = m.first(TENSOR_LATENCY)
    _single(w, "-ptx_opcode_latency_tesnor", tensor, TENSOR_LATENCY)
    w.comment("(sic: gpgpu-sim registers the tensor latency option as -ptx_opcode_latency_tesnor)")
    _single(w, "-ptx_opcode_initiation_tensor", m.first(TENSOR_INITIATION), TENSOR_INITIATION,
            cap=tensor)


def _param(params: dict, name: str) -> Value | None:
    p = (params.get("parameters") or {}).get(name) or {}
    if p.get("value") is None:
        return None
    v = float(p["value"])
    return Value(v, p.get("from", name), f"{p.get('from', name)} = {v:.2f} cycles")


def _memory(w: Writer, params: dict) -> None:
    """L1 / shared / L2 / DRAM latencies from the model parameters (launch.py's export, which
    chose the characteristic); L2 and DRAM as differences, as Accel-Sim's tuner writes them
    (ubench/l2_cache/l2_lat: L2 - L1; ubench/mem/mem_lat: DRAM - L2 hit)."""
    w.comment("--- memory latencies (SM cycles) ---")
    names = ("l1_lat", "shared_lat", "l2_lat", "mem_lat")
    l1, smem, l2, dram = (_param(params, k) for k in names)

    def gone(*keys: str) -> str:
        """Why the parameters `keys` gave no value (the export's reason, e.g. unstable)."""
        ps = params.get("parameters") or {}
        why = [f"{k}: {ps.get(k, {}).get('reason', 'not measured in this run')}" for k in keys
               if _param(params, k) is None]
        return "; ".join(why)

    for name, v, key in (("-gpgpu_l1_latency", l1, "l1_lat"),
                         ("-gpgpu_smem_latency", smem, "shared_lat")):
        if v is None:
            w.omit(name, gone(key))
        else:
            w.option(name, str(whole(v.value)), v.how)
    for name, hi, lo, what, keys in (
            ("-gpgpu_l2_rop_latency", l2, l1, "L2 hit - L1 hit", ("l2_lat", "l1_lat")),
            ("-dram_latency", dram, l2, "DRAM - L2 hit", ("mem_lat", "l2_lat"))):
        if hi is None or lo is None:
            w.omit(name, f"needs {what}; {gone(*keys)}")
        elif hi.value <= lo.value:
            w.omit(name, f"{what} is not positive ({hi.how}, {lo.how})")
        else:
            w.option(name, str(whole(hi.value - lo.value)), f"{what}: {hi.how} - {lo.how}")


def _device(w: Writer, params: dict, meta: dict) -> None:
    w.comment("--- SMs and clocks ---")
    n = params.get("n_SM") or meta.get("sm_count")
    if n:
        w.option("-gpgpu_n_clusters", str(int(n)), f"sm_count = {int(n)} (device attribute, "
                 f"one SM per cluster: -gpgpu_n_cores_per_cluster 1 as in the tested config)")
    else:
        w.omit("-gpgpu_n_clusters", "the run records no SM count")
    clocks = [f"{k} = {meta[k]} MHz" for k in ("sm_clock_max_mhz", "sm_clock_measured_mhz",
                                                "mem_clock_mhz") if meta.get(k)]
    w.omit("-gpgpu_clock_domains", "it takes <core>:<interconnect>:<L2>:<DRAM> clocks and the "
           "run records no interconnect or L2 clock; recorded: " + (", ".join(clocks) or "none"))


CACHE_FACTS = ("memory.capacity.l1", "memory.geometry.l1_fill_bytes", "memory.capacity.l2",
               "memory.capacity.l2_near", "memory.latency.l2_far")

# measured characteristics no Accel-Sim option takes, and why
NO_OPTION = {
    "throughput.launch.block": "-gpgpu_TB_launch_latency is charged once per kernel, times the "
                               "number of blocks (abstract_hardware_model.cc), not between two "
                               "blocks of one SM",
    "throughput.launch.warp": "no option for the cost of launching one more warp",
    "throughput.bar_sync.nt256": "no option for the cost of a bar.sync",
    "throughput.bar_sync.nt1024": "no option for the cost of a bar.sync",
    "throughput.launch.issue_cycle": "the simulator issues at most one instruction per "
                                     "scheduler and cycle; no option takes this cycle count",
}


def _caches(w: Writer, m: Measurements) -> None:
    w.comment("--- caches: what the staircase found ---")
    for key in CACHE_FACTS:
        r = m.by_key.get(key)
        if r:
            detail = f" ({r['detail']})" if r.get("detail") else ""
            w.comment(f"measured {key} = {float(r['value']):g} {r.get('unit', '')}{detail}")
    fill = m.by_key.get("memory.geometry.l1_fill_bytes")
    if fill and float(fill["value"]) == 32:
        w.comment("a 32 B L1 fill is the sector of the tested config's sectored ('S:') caches "
                  "(gpgpu-sim SECTOR_SIZE 32)")
    w.omit("-gpgpu_cache:dl1, -gpgpu_cache:dl2", "each is a whole geometry string (sets, line, "
           "associativity, policies, MSHRs, and for the L2 the partition count); the run "
           "measures capacities and the fill size only")
    w.omit("-gpgpu_unified_l1d_size", "it is the unified L1 + shared memory; the staircase "
           "measures the L1 capacity left at the default carveout")


def _unmatched(w: Writer, m: Measurements) -> None:
    rows = [(k, why) for k, why in NO_OPTION.items() if k in m.by_key]
    if rows:
        w.comment("--- measured, but no Accel-Sim option takes it ---")
    for key, why in rows:
        r = m.by_key[key]
        w.comment(f"{key} = {float(r['value']):.2f} {r.get('unit', '')}: {why}")


def _measurements(params: dict, results: list[dict], meta: dict) -> Measurements:
    arch = params.get("arch") or meta.get("arch")
    return Measurements(results, arch, params.get("n_ws"), int(params.get("warp_size") or 32))


def fragment(params: dict, results: list[dict], meta: dict) -> str:
    """The gpgpusim.config options a gpuchar run determines. ``params``: the Many-BSP
    parameter dict of launch.model_parameters (latencies, SM and scheduler counts, arch);
    ``results`` and ``meta``: the ``results`` list and ``meta`` dict of gpuchar-results.json."""
    m = _measurements(params, results, meta)
    w = Writer(_run_tag(meta))
    _header(w, meta, params, "gpgpusim.config", UPSTREAM_GPGPUSIM)
    _device(w, params, meta)
    _memory(w, params)
    _units(w, m)
    _caches(w, m)
    _unmatched(w, m)
    return w.text()


def trace_fragment(params: dict, results: list[dict], meta: dict) -> str:
    """The trace.config options (Accel-Sim's SASS trace-driven mode) a gpuchar run determines:
    <latency>,<initiation interval> per execution unit, per SASS instruction."""
    m = _measurements(params, results, meta)
    w = Writer(_run_tag(meta))
    _header(w, meta, params, "trace.config", UPSTREAM_TRACE)
    for unit, (lat_src, ii_src) in TRACE.items():
        name = f"-trace_opcode_latency_initiation_{unit}"
        lat = m.single_mufu_latency() if unit == "sfu" else m.first(lat_src)
        ii = m.first(ii_src)
        if lat is None or ii is None:
            looked = ("a latency whose SASS is one MUFU" if unit == "sfu" and lat is None
                      else ", ".join(s.key for s in (lat_src if lat is None else ii_src)))
            w.omit(name, f"no measurement (looked for {looked})")
            continue
        x, y = whole(lat.value), whole(ii.value)
        note = f"{lat.how}, {ii.how}" + (" (interval capped at the latency)" if y > x else "")
        w.option(name, f"{x},{min(x, y)}", note)
    w.comment("Accel-Sim's SASS tables send HMMA to specialized unit 3 (ISA_Def/hopper_opcode.h: "
              "HMMA -> SPECIALIZED_UNIT_3_OP): to use the tensor pair there, set "
              "-trace_opcode_latency_initiation_spec_op_3 to it and raise the max-latency "
              "field of -specialized_unit_3 to at least the latency (its other fields are not "
              "measured, so neither is written here)")
    return w.text()
