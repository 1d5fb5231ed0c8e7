"""The part of an Accel-Sim / GPGPU-Sim configuration that a gpuchar run determines:
instruction latency and initiation interval per op class, L1 / shared / L2 / DRAM latencies,
the SM count, clocks and unit counts, under the option names of Accel-Sim's tested
configurations (``fragment``: the gpgpusim.config part, ``trace_fragment``: the trace.config
part of its SASS trace-driven mode). Every value line carries a comment naming the
characteristic(s) and the run it came from. An option the run determines none of is left out,
with a comment saying so; an option it writes carries every value gpgpu-sim's parser reads
(accelsim_rules), a value the run did not measure being SM90_H100's, said so in the comment,
and every latency / interval pair enters its pipeline inside it (accelsim_units). The memory
latencies follow the conventions of Accel-Sim's own tuner (util/tuner/GPU_Microbenchmark):
L2 "ROP" latency = L2 hit - L1 hit, DRAM latency = DRAM - L2 hit, all in SM cycles.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from . import accelsim_device as device
from . import accelsim_rules as rules
from . import accelsim_units as units
from .accelsim_units import Src, whole

USABLE = ("pass", "measured")        # result statuses that give a number (as launch.py's export)


@dataclass(frozen=True)
class Value:
    """An option value, the characteristic it came from and how (for the comment)."""
    value: float
    key: str
    how: str


UPSTREAM_GPGPUSIM = ("accel-sim/gpgpu-sim_distribution "
                     "configs/tested-cfgs/SM90_H100/gpgpusim.config")
UPSTREAM_TRACE = ("accel-sim/accel-sim-framework "
                  "gpu-simulator/configs/tested-cfgs/SM90_H100/trace.config")


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
    w.comment(f"merge after {rules.BASE_NAME} ({rules.BASE_SOURCE}).")
    w.comment("Integer options are the measured values rounded. An option is written with every")
    w.comment("value gpgpu-sim reads from it; a value the run did not measure is the base's, and")
    w.comment("its comment says so. What the run determines nothing of is left out.")


def _pair_lines(w: Writer, p: units.Pair, cls: str) -> None:
    names = units.SLOTS[cls]
    label = f"<{','.join(names)}> " if len(names) > 1 else ""
    lead = "" if p.measured else (f"not measured: written only to keep {rules.BASE_NAME}'s "
                                  f"values inside their pipeline; ")
    w.option(rules.latency_option(cls), ",".join(str(s.value) for s in p.lat),
             lead + label + "; ".join(s.text() for s in p.lat))
    w.option(rules.initiation_option(cls), ",".join(str(s.value) for s in p.ii),
             lead + label + "; ".join(s.text() for s in p.ii))


def _units(w: Writer, m: Measurements) -> dict[str, str]:
    """The PTX latency / interval options; returns the options in effect after the merge."""
    w.comment("--- instruction latency and initiation interval per op class (PTX mode) ---")
    w.comment("gpgpu-sim reads six values <ADD,MAX,MUL,MAD,DIV,SHFL> for int, five for fp and "
              "dp, one for sfu and tensor; an instruction enters its unit at stage latency - "
              "interval, which must lie inside the unit's pipeline")
    pairs, missing = units.ptx_pairs(m)
    eff = units.fit_ptx(pairs)
    for cls in units.SLOTS:
        if cls in pairs:
            _pair_lines(w, pairs[cls], cls)
        else:
            w.omit(f"{rules.latency_option(cls)}, {rules.initiation_option(cls)}",
                   f"no measurement for {missing[cls]}")
    if "sfu" in pairs:
        others = [f"{s.key.split('.', 1)[1]} {m.value(s).value:.0f}"
                  for s in units.PTX_LATENCY["sfu"][0] if m.value(s) is not None]
        if len(others) > 1:
            w.comment("PTX ops of gpgpu-sim's SFU class measured: " + ", ".join(others))
    w.comment("(sic: gpgpu-sim registers the tensor latency option as -ptx_opcode_latency_tesnor)")
    w.comment("pipelines after the merge (shader.cc set_pipeline_latency):")
    for line in units.pipeline_summary(eff):
        w.comment(f"  {line}")
    return eff


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
    device.cores(w, m, params, meta)
    device.clocks(w, m, meta)
    _memory(w, params)
    _units(w, m)
    device.caches(w, m)
    device.unmatched(w, m)
    return w.text()


def trace_fragment(params: dict, results: list[dict], meta: dict) -> str:
    """The trace.config options (Accel-Sim's SASS trace-driven mode) a gpuchar run determines:
    <latency>,<initiation interval> per execution unit, per SASS instruction; each interval
    capped at its latency and kept inside the pipeline the PTX options of the same run (its
    gpgpusim.config fragment merged into SM90_H100) give its unit."""
    m = _measurements(params, results, meta)
    w = Writer(_run_tag(meta))
    _header(w, meta, params, "trace.config", UPSTREAM_TRACE)
    ptx, _ = units.ptx_pairs(m)
    eff = units.fit_ptx(ptx)
    pairs, missing = units.trace_pairs(m, m.single_mufu_latency())
    units.fit_trace(pairs, eff)
    depth = rules.pipelines(eff)
    for unit in units.TRACE:
        name = rules.trace_option(unit)
        if unit not in pairs:
            w.omit(name, missing[unit])
            continue
        p = pairs[unit]
        stage = rules.TRACE_UNIT_OF[unit]
        w.option(name, f"{p.lat[0].value},{p.ii[0].value}",
                 f"{p.lat[0].text()}, {p.ii[0].text()}; enters the {stage} pipeline "
                 f"({depth[stage]} stages) at {p.lat[0].value - p.ii[0].value}")
    w.comment("Accel-Sim's SASS tables send HMMA to specialized unit 3 (ISA_Def/hopper_opcode.h: "
              "HMMA -> SPECIALIZED_UNIT_3_OP): to use the tensor pair there, set "
              "-trace_opcode_latency_initiation_spec_op_3 to it and raise the max-latency "
              "field of -specialized_unit_3 to at least the latency (its other fields are not "
              "measured, so neither is written here)")
    return w.text()
