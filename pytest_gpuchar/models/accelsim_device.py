"""The Accel-Sim gpgpusim.config options of the device as a whole that a gpuchar run gives:
the SM and unit counts, the clock domains, and what the cache staircase and the launch
measurements say about options the run cannot write (their comments give the numbers)."""
from __future__ import annotations

import re

from . import accelsim_rules as rules
from .accelsim_units import whole

# per unit option: the unit throughput row that checks it and the PTX class whose interval
# carries the rate: units x warp_size / interval = results per clock per SM
UNIT_OPTIONS = (
    ("-gpgpu_num_sp_units", "throughput.unit.fp32.fma", "fp"),
    ("-gpgpu_num_int_units", "throughput.unit.int.add", "int"),
    ("-gpgpu_num_dp_units", "throughput.unit.fp64.fma", "dp"),
    ("-gpgpu_num_sfu_units", "throughput.unit.sfu.sin", "sfu"),
    ("-gpgpu_num_tensor_core_units", None, "tensor"),
)

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


def cores(w, m, params: dict, meta: dict) -> None:
    """SM count, schedulers per SM and units per SM (one per scheduler, as Accel-Sim's tuner
    writes them: ubench/core/config_*: WARP_SCHEDS_PER_SM), each unit count checked against
    the measured rate it implies with the interval the fragment writes."""
    w.comment("--- SMs, schedulers, units ---")
    n = params.get("n_SM") or meta.get("sm_count")
    if n:
        w.option("-gpgpu_n_clusters", str(int(n)), f"sm_count = {int(n)} (device attribute, "
                 f"one SM per cluster: -gpgpu_n_cores_per_cluster 1 as in the tested config)")
    else:
        w.omit("-gpgpu_n_clusters", "the run records no SM count")
    ws = params.get("n_ws")
    if not ws:
        w.omit("-gpgpu_num_sched_per_core and the unit counts", "no scheduler count")
        return
    w.option("-gpgpu_num_sched_per_core", str(ws), f"{ws} warp schedulers per SM (the suite's "
             f"table for {params.get('arch', '?')}, not a measurement)")
    for name, rate_key, cls in UNIT_OPTIONS:
        note = ("one unit per scheduler (sub-core model), as Accel-Sim's tuner writes it "
                "(ubench/core/config_*)")
        r = m.by_key.get(rate_key) if rate_key else None
        if r:
            rate = float(r["value"])
            note += (f"; check: {rate_key} = {rate:.2f}/clk/SM is {ws} x {m.warp_size} / "
                     f"{ws * m.warp_size / rate:.2f}, the {cls} interval")
        w.option(name, str(ws), note)


def clocks(w, m, meta: dict) -> None:
    """-gpgpu_clock_domains <core>:<interconnect>:<L2>:<DRAM> (MHz): core, interconnect and L2
    at the SM clock the run ran at, as Accel-Sim's tuner writes them (ubench/system/
    system_config); DRAM at the clock that gives the documented DRAM peak with SM90_H100's
    channels (channels x bus width x data/command ratio bytes per DRAM clock)."""
    w.comment("--- clocks (MHz) ---")
    sm = meta.get("sm_clock_measured_mhz") or meta.get("sm_clock_max_mhz")
    if not sm:
        w.omit("-gpgpu_clock_domains", "the run records no SM clock")
        return
    src = ("sm_clock_measured_mhz" if meta.get("sm_clock_measured_mhz")
           else "sm_clock_max_mhz")
    per_clk = rules.dram_bytes_per_clock(rules.BASE)
    peak = m.by_key.get("movement.bandwidth.dram_read.of_peak")
    doc = (peak.get("data") or {}).get("documented_gbps") if peak else None
    if doc:
        dram = float(doc) * 1e3 / per_clk
        got = (peak.get("data") or {}).get("achieved_gbps")
        dram_note = (f"DRAM {dram:.1f} = documented peak {float(doc):g} GB/s "
                     f"({(peak.get('data') or {}).get('source', 'the run')}) / {per_clk:g} B "
                     f"per DRAM clock ({rules.BASE_NAME}'s -gpgpu_n_mem x -gpgpu_n_mem_per_ctrlr "
                     f"x -gpgpu_dram_buswidth x -dram_data_command_freq_ratio)"
                     + (f"; measured read {float(got):g} GB/s = {float(got) / float(doc):.3f} "
                        f"of it" if got else ""))
    else:
        dram = float(rules.read_clock(rules.BASE["-gpgpu_clock_domains"])[3])
        dram_note = (f"DRAM {dram:g}: {rules.BASE_NAME}'s, not measured (no documented peak "
                     f"in movement.bandwidth.dram_read.of_peak)")
    w.option("-gpgpu_clock_domains", f"{float(sm):.1f}:{float(sm):.1f}:{float(sm):.1f}:"
             f"{dram:.1f}", f"core, interconnect, L2 = {src} = {float(sm):g} MHz (the tuner's "
             f"convention: all three at the SM clock); {dram_note}")
    _dram_timing(w, dram)


def _dram_timing(w, dram: float) -> None:
    """The base's DRAM timings were set for its DRAM clock (SM90_H100: 850 MHz, V100's HBM);
    at another clock the same counts are shorter or longer in time. Scale the times with the
    clock so that each keeps its nanoseconds (rules.DRAM_TIMES); the burst spacing is kept, so
    the bandwidth follows the clock as the -gpgpu_clock_domains comment computes it."""
    base_clk = float(rules.read_clock(rules.BASE["-gpgpu_clock_domains"])[3])
    if dram == base_clk:
        return
    factor = dram / base_clk
    text, changed = rules.scaled_dram_timing(rules.BASE["-gpgpu_dram_timing_opt"], factor)
    ns = ", ".join(f"{k} {a}->{b}" for k, (a, b) in changed.items())
    w.option("-gpgpu_dram_timing_opt", text,
             f"{rules.BASE_NAME}'s timings for its {base_clk:g} MHz DRAM clock scaled by "
             f"{dram:.1f} / {base_clk:g} = {factor:.3f}, so each keeps its nanoseconds "
             f"({ns}; e.g. RCD {changed['RCD'][0] / base_clk * 1e3:.1f} ns); nbk, nbkgrp, CCD "
             f"and CCDL kept (counts and burst spacing)")


def _interval(detail: str) -> tuple[float, float] | None:
    """A capacity interval '[a KiB, b KiB)' / '[a MiB, b MiB)' of a staircase detail, bytes."""
    mm = re.search(r"\[([\d.]+) (KiB|MiB), ([\d.]+) (KiB|MiB)\)", detail or "")
    if not mm:
        return None
    scale = {"KiB": 1024.0, "MiB": 1024.0 ** 2}
    return float(mm.group(1)) * scale[mm.group(2)], float(mm.group(3)) * scale[mm.group(4)]


def _geometry(cache: str) -> tuple[int, int, int]:
    """sets, line bytes, ways of a gpgpu-sim cache string."""
    _, sets, line, ways = cache.split(",", 1)[0].split(":")
    return int(sets), int(line), int(ways)


def _l1(w, m) -> None:
    r = m.by_key.get("memory.capacity.l1")
    span = _interval(r.get("detail", "")) if r else None
    if not span:
        return
    sets, line, ways = _geometry(rules.BASE["-gpgpu_cache:dl1"])
    step = sets * line * ways
    unified = int(rules.BASE["-gpgpu_unified_l1d_size"]) * 1024
    fits = [k // 1024 for k in range(step, int(span[1]) + step, step) if span[0] <= k < span[1]]
    w.omit("-gpgpu_unified_l1d_size, -gpgpu_cache:dl1",
           f"with the adaptive carveout a kernel without shared memory sees the whole unified "
           f"size as L1; {rules.BASE_NAME}'s is {unified // 1024} KB, the measured L1 lies in "
           f"[{span[0] / 1024:.1f}, {span[1] / 1024:.1f}) KiB")
    w.comment(f"  unified sizes that are multiples of the dl1 string's {step // 1024} KB "
              f"({sets} sets x {line} B x {ways} ways) inside that interval: "
              f"{', '.join(map(str, fits)) or 'none'} KB; the staircase does not choose")


def _l2(w, m) -> None:
    """-gpgpu_cache:dl2 with the measured L2 capacity: the base's banks (memory sub-partitions),
    sets and line, and the whole number of ways nearest the measured capacity (the staircase
    gives a capacity, not sets and ways: the ways are the one free factor)."""
    r = m.by_key.get("memory.capacity.l2")
    if not r:
        return
    cap = float(r["value"])
    span = _interval(r.get("detail", ""))
    base = rules.BASE["-gpgpu_cache:dl2"]
    sets, line, ways = _geometry(base)
    banks = int(rules.BASE["-gpgpu_n_mem"]) * int(rules.BASE["-gpgpu_n_sub_partition_per_mchannel"])
    per_way = banks * sets * line
    new = max(1, int(cap / per_way + 0.5))
    total = new * per_way
    head, rest = base.split(",", 1)
    kind = head.split(":")[0]
    where = "" if not span else (
        f"; the run's bracket [{span[0] / 2 ** 20:.1f}, {span[1] / 2 ** 20:.1f}) MiB "
        + ("holds it" if span[0] <= total < span[1] else "does not hold it (ways are whole)"))
    src = f", {r['source']}" if r.get("superseded") else ""
    w.option("-gpgpu_cache:dl2", f"{kind}:{sets}:{line}:{new},{rest}",
             f"memory.capacity.l2 = {cap:.0f} B ({cap / 2 ** 20:.2f} MiB{src}): {banks} banks "
             f"x {sets} sets x {line} B x {new} ways = {total} B ({total / 2 ** 20:.2f} MiB), "
             f"the nearest whole number of ways{where}; {rules.BASE_NAME}'s {ways} ways = "
             f"{ways * per_way / 2 ** 20:g} MiB")


def caches(w, m) -> None:
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
    _l1(w, m)
    _l2(w, m)
    w.omit("-gpgpu_kernel_launch_latency", "the run measures no kernel launch latency (Accel-"
           "Sim's tuner takes the intercept of event-timed empty kernels of 1 to 2048 blocks, "
           "ubench/system/kernel_lat); throughput.launch.block is the gap between two blocks "
           "of one SM")


def unmatched(w, m) -> None:
    rows = [(k, why) for k, why in NO_OPTION.items() if k in m.by_key]
    if rows:
        w.comment("--- measured, but no Accel-Sim option takes it ---")
    for key, why in rows:
        r = m.by_key[key]
        w.comment(f"{key} = {float(r['value']):.2f} {r.get('unit', '')}: {why}")


__all__ = ["cores", "clocks", "caches", "unmatched", "whole"]
