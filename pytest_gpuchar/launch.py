"""Launch and synchronisation costs a performance model needs (Many-BSP report, seed 002):
bar.sync overhead for 256 and 1024 threads (Tables 1-5..1-7), warp and block launch overhead
and the issue cycle (Table 1-8), and the export of the measured parameters as a YAML file a
model can read (``gpuchar-model-params``).

Probes (PTX built here and in throughput.py, SASS-verified, measured differentially):

- ``bar.sync`` (nt = 256, 1024): one block of nt threads per SM runs a loop of ``BAR_UNROLL``
  ``bar.sync 0`` per iteration (the loop body verified: exactly that many BAR.SYNC plus loop
  control). Per block, busy cycles = max(end) - min(start) over its warps' %clock64; slope over
  trip counts = cycles per barrier of the whole block.
- warp launch: blocks of W warps (W = 2, 4, 8, 16, 32), one per SM; each warp's first
  instruction after the parameter loads is a %clock64 read (verified: nothing but setup before
  it). Per block: the last warp's start minus the first's; the figure is that skew at W = 32
  divided by 31 (mean cost per additional warp over a full block, as the model uses it); the
  slope over W is reported beside it (not linear on H200).
- block launch: one-warp blocks made exclusive on their SM by their dynamic shared memory
  (more than half the SM's), B = 2, 4, 8 blocks per SM run one after the other; each records
  %clock64 at entry and exit. Per SM, busy span against B: slope = cycles per block; minus the
  block's own body (median exit - entry) = the launch overhead between two blocks, cross-checked
  against the median gap between consecutive blocks of one SM (exit clock to next entry).
- issue cycle: cycles between two warp instructions of one scheduler at the fastest measured
  rate: schedulers per SM x 32 / max results per clock per SM (from the throughput rows);
  Many-BSP's issue_cycle.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import ptx, sass, throughput
from .throughput import Row, TPProbe, _t
from .verify import ProbeInvalid, matches

BAR_UNROLL = 16
BAR_TRIPS = (8, 16, 24)
BAR_THREADS = (256, 1024)
WARPS = (2, 4, 8, 16, 32)
BLOCKS_PER_SM = (2, 4, 8)

BAR_ROW = Row("bar.sync", "bar.sync overhead (whole block)", "MI",
              _t("bar.sync 0;", 32, 32),
              {0: ("BAR.SYNC", "MEMBAR.CTA"), 70: ("BAR.SYNC|BAR.SYNC.DEFER_BLOCKING",)},
              style="bar", note="Maxwell/Pascal (ptxas 12.4): bar.sync is BAR.SYNC + "
                                "MEMBAR.CTA (+ NOP padding)")


def bar_probe(arch: str, threads: int) -> TPProbe:
    """bar.sync loop for blocks of `threads` threads, one block per SM."""
    text, frame, slots = throughput.kernel(BAR_ROW, arch, unroll=BAR_UNROLL, chains=1,
                                           block=threads, blocks_per_sm=1)
    entry = throughput._kernel_name(BAR_ROW)
    text = text.replace(f".entry {entry}(", f".entry {entry}_nt{threads}(")
    return TPProbe(BAR_ROW, arch, text, f"{entry}_nt{threads}", frame, slots, BAR_UNROLL,
                   unroll=BAR_UNROLL, chains=1)


def entry_kernel(name: str, *, exit_stamp: bool) -> str:
    """Each warp's lane 0 stores %clock64 at entry (and at exit), %smid and %ctaid.x.
    rec layout per warp: start, end, smid, ctaid (u64)."""
    end = ["mov.u64 %t1, %clock64;"] if exit_stamp else ["mov.u64 %t1, %t0;"]
    return "\n".join([
        f".visible .entry {name}(.param .u64 rec_param)",
        "{",
        ".reg .b64 %rec, %t0, %t1, %off, %w64;",
        ".reg .b32 %tx, %cta, %nt, %smx, %warp, %lane, %wpb;",
        ".reg .pred %lead;",
        "mov.u64 %t0, %clock64;",
        "ld.param.u64 %rec, [rec_param];",
        "mov.u32 %tx, %tid.x;",
        "mov.u32 %cta, %ctaid.x;",
        "mov.u32 %nt, %ntid.x;",
        "mov.u32 %smx, %smid;",
        "and.b32 %lane, %tx, 31;",
        "shr.u32 %warp, %tx, 5;",
        "shr.u32 %wpb, %nt, 5;",
        "mad.lo.u32 %warp, %cta, %wpb, %warp;",
        "setp.eq.u32 %lead, %lane, 0;",
        *end,
        "mul.wide.u32 %off, %warp, 32;",
        "add.u64 %rec, %rec, %off;",
        "@%lead st.global.u64 [%rec], %t0;",
        "@%lead st.global.u64 [%rec+8], %t1;",
        "cvt.u64.u32 %w64, %smx;",
        "@%lead st.global.u64 [%rec+16], %w64;",
        "cvt.u64.u32 %w64, %cta;",
        "@%lead st.global.u64 [%rec+24], %w64;",
        "ret;",
        "}",
    ]) + "\n"


WARP_ENTRY = "gpuchar_warp_launch"
BLOCK_ENTRY = "gpuchar_block_launch"


def launch_module(arch: str) -> str:
    return ptx.header(arch) + entry_kernel(WARP_ENTRY, exit_stamp=False) + \
        entry_kernel(BLOCK_ENTRY, exit_stamp=True)


def verify_entry_stamp(func: sass.Function, name: str) -> list[str]:
    """The first clock read comes before any memory access or computation: only setup
    (constants, special registers, moves) precedes it. Returns the opcodes before it."""
    groups = sass.clock_groups(func)
    if not groups:
        raise ProbeInvalid(f"probe invalid: {name}: no %clock64 read in the SASS\n"
                           f"{sass.format_listing(func.instrs[:20])}")
    before = func.instrs[:groups[0][0]]
    bad = [i.opcode for i in before if i.pred != "@!PT"
           and not any(matches(i.opcode, c) for c in throughput.SETUP)]
    if bad:
        raise ProbeInvalid(f"probe invalid: {name}: instructions before the entry clock read "
                           f"that are not setup: {bad}\n{sass.format_listing(func.instrs[:20])}")
    return [i.opcode for i in before]


def verify_bar(p: TPProbe, func: sass.Function) -> dict:
    return throughput.verify_loop(p, func)


# --- analysis of the records (pure numpy: unit-tested on CPU) ----------------------------

def block_spans(rec: np.ndarray, warps_per_block: int) -> list[int]:
    """rec (warps, 3+) [start, end, ...] -> busy cycles of each block (max end - min start)."""
    n = rec.shape[0] // warps_per_block
    r = rec[: n * warps_per_block].reshape(n, warps_per_block, rec.shape[1]).astype(np.int64)
    return [int(x) for x in (r[:, :, 1].max(axis=1) - r[:, :, 0].min(axis=1))]


def warp_start_skew(rec: np.ndarray, warps_per_block: int) -> list[int]:
    """Per block: last warp's entry clock minus the first warp's."""
    n = rec.shape[0] // warps_per_block
    r = rec[: n * warps_per_block].reshape(n, warps_per_block, rec.shape[1]).astype(np.int64)
    return [int(x) for x in (r[:, :, 0].max(axis=1) - r[:, :, 0].min(axis=1))]


def _blocks_by_sm(rec: np.ndarray) -> dict[int, list[tuple[int, int]]]:
    """One-warp block records [start, end, smid, cta] -> per SM its (start, end), in order."""
    by_sm: dict[int, list[tuple[int, int]]] = {}
    for start, end, smid, _ in rec.astype(np.int64).tolist():
        by_sm.setdefault(int(smid), []).append((start, end))
    return {sm: sorted(blocks) for sm, blocks in by_sm.items()}


def serial_blocks(rec: np.ndarray) -> tuple[dict[int, int], dict[int, int], list[int], bool]:
    """One-warp blocks: per SM busy span and block count, every block's body (end - start),
    and whether blocks of one SM overlapped in time (then they were not serialised)."""
    span, count, bodies, overlap = {}, {}, [], False
    for sm, blocks in _blocks_by_sm(rec).items():
        span[sm] = blocks[-1][1] - blocks[0][0]
        count[sm] = len(blocks)
        bodies += [e - s for s, e in blocks]
        overlap |= any(b[0] < a[1] for a, b in zip(blocks, blocks[1:]))
    return span, count, bodies, overlap


def block_gaps(rec: np.ndarray) -> list[int]:
    """One-warp blocks serialised on their SM: for each SM, every gap between one block's exit
    clock and the next block's entry clock (same SM, same clock)."""
    return [b[0] - a[1] for blocks in _blocks_by_sm(rec).values()
            for a, b in zip(blocks, blocks[1:])]


def block_fit(per_repeat: list[list[tuple[int, int]]], *, spread_abs: float = 5.0,
              spread_rel: float = 0.05) -> dict:
    """Cycles per serialised block: per repeat, the least-squares slope of every SM's busy span
    against the number of blocks that SM actually ran (the block scheduler hands an SM 2..9 of
    them when each SM's share is 2, 4 or 8, so counts per SM are measured, not assumed); the
    median of the per-repeat slopes, their spread, and the linearity of the median span per
    block count."""
    slopes = []
    for pairs in per_repeat:
        if len({c for c, _ in pairs}) >= 2:
            slopes.append(slope([c for c, _ in pairs], [s for _, s in pairs])[0])
    allp = [p for pairs in per_repeat for p in pairs]
    counts = sorted({c for c, _ in allp})
    medians = {c: float(statistics.median(s for k, s in allp if k == c)) for c in counts}
    if len(counts) < 2 or not slopes:
        return {"value": float("nan"), "spread": 0.0, "slopes": slopes, "medians": medians,
                "unstable": True, "why": "fewer than two distinct block counts per SM"}
    value = float(statistics.median(slopes))
    spread = max(slopes) - min(slopes)
    m, c = slope(counts, [medians[k] for k in counts])
    residual = max(abs(medians[k] - (m * k + c)) for k in counts)
    why = ""
    if spread > max(spread_abs, spread_rel * abs(value)):
        why = f"per-repeat slopes spread {spread:.1f} cycles/block"
    # The median span per block count is not linear on H200 (an SM handed 7 blocks waited
    # for the grid-wide dispatcher longer than one handed 5): reported, and the slope is
    # cross-checked against the directly measured gaps between blocks (run_block_launch)
    # instead of being judged by it.
    return {"value": value, "spread": spread, "slopes": slopes, "medians": medians,
            "residual": residual, "unstable": bool(why), "why": why}


def slope(xs: list[float], ys: list[float]) -> tuple[float, float]:
    from .measure import least_squares
    return least_squares(xs, ys)


def issue_cycle(rates: dict[str, float], schedulers: int = throughput.SCHEDULERS_PER_SM) -> float:
    """Cycles between two warp instructions of one scheduler at the fastest measured rate
    (results/clk/SM of single-result rows)."""
    best = max(rates.values())
    return schedulers * 32 / best


# --- GPU runs -----------------------------------------------------------------------------

@dataclass
class Launched:
    value: float
    spread: float
    unstable: bool
    why: str
    data: dict


def _compile(dev):
    return throughput.jit_sass(dev)


def run_bar(arch: str, threads: int, dev, *, repeats: int = 5, watchdog_s: float = 20.0):
    """Cycles per bar.sync of a block of `threads` threads (slope over trip counts)."""
    import cupy as cp
    from . import measure, values
    p = bar_probe(arch, threads)
    compiled, funcs = _compile(dev)
    verdict = verify_bar(p, funcs[p.entry])
    fn = compiled.function(p.entry)
    blocks = dev.sm_count
    wpb = threads // 32
    d_in = cp.asarray(np.tile(np.frombuffer(values.input_buffer(p.frame.inputs), np.uint8), 32))
    d_res = cp.zeros(blocks * threads * p.result_slots, dtype=np.uint64)
    recs = {t: cp.zeros((repeats + 1, blocks * wpb, throughput.REC_WORDS), np.uint64)
            for t in BAR_TRIPS}
    for r in range(repeats + 1):
        for t in BAR_TRIPS:
            fn((blocks,), (threads,), (recs[t][r], d_res, d_in, np.uint32(t)))
    measure._wait(p.name, watchdog_s)
    cycles = {t: [float(statistics.median(block_spans(recs[t][r].get(), wpb)))
                  for r in range(1, repeats + 1)] for t in BAR_TRIPS}
    ops = {t: t * BAR_UNROLL for t in BAR_TRIPS}
    f = measure.fit(cycles, ops, spread_abs=1.0, spread_rel=0.05)
    return f, verdict, cycles


def run_warp_launch(dev, *, repeats: int = 5, watchdog_s: float = 20.0) -> Launched:
    import cupy as cp
    from . import measure
    compiled, funcs = _compile(dev)
    before = verify_entry_stamp(funcs[WARP_ENTRY], "launch/warp")
    fn = compiled.function(WARP_ENTRY)
    blocks = dev.sm_count
    recs = {w: cp.zeros((repeats + 1, blocks * w, 4), np.uint64) for w in WARPS}
    for r in range(repeats + 1):
        for w in WARPS:
            fn((blocks,), (w * 32,), (recs[w][r],))
    measure._wait("launch/warp", watchdog_s)
    skew = {w: [float(statistics.median(warp_start_skew(recs[w][r].get(), w)))
                for r in range(1, repeats + 1)] for w in WARPS}
    return warp_launch_figure(skew, before)


WARP_SPREAD = (0.5, 0.10)     # cycles, share: per-launch spread above both is unstable


def warp_launch_figure(skew: dict[int, list[float]], setup=()) -> Launched:
    """Many-BSP's warp_lnch_ovh enters its model as w x warp_lnch_ovh: the mean cost per
    additional warp over a full block, i.e. the first-to-last warp entry skew of the largest
    block divided by its warps - 1 (itself a difference of two clock reads of one SM, whose
    fixed costs cancel). The slope over block sizes is reported too: on H200 the skew is not
    linear (2 warps 15 cycles, 4..32 warps 50-64 cycles: warps start in parallel groups, not
    one after another), so the slope is not the figure."""
    from . import measure
    wmax = max(skew)
    per = [s / (wmax - 1) for s in skew[wmax]]
    value = float(statistics.median(per))
    spread = max(per) - min(per)
    why = ""
    if spread > max(WARP_SPREAD[0], WARP_SPREAD[1] * abs(value)):
        why = f"per-launch figures spread {spread:.2f} cycles/warp"
    f = measure.fit(skew, {w: w - 1 for w in skew}, spread_abs=1.0, spread_rel=0.1)
    return Launched(value, spread, bool(why), why,
                    {"skew_cycles": {w: f.medians[w] for w in sorted(skew)},
                     "skew_block_warps": wmax, "slope_cycles_per_warp": round(f.value, 3),
                     "slope_linear": not f.unstable, "slope_note": f.why_unstable,
                     "setup": list(setup)})


def run_block_launch(dev, *, repeats: int = 5, watchdog_s: float = 20.0) -> Launched:
    import cupy as cp
    from cupy.cuda import driver
    from . import measure
    compiled, funcs = _compile(dev)
    before = verify_entry_stamp(funcs[BLOCK_ENTRY], "launch/block")
    fn = compiled.function(BLOCK_ENTRY)
    smem = dev.shared_per_sm // 2 + 1024      # two blocks can never share an SM
    attr = getattr(driver, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8)
    driver.funcSetAttribute(fn.ptr, attr, smem)
    recs = {b: cp.zeros((repeats + 1, dev.sm_count * b, 4), np.uint64) for b in BLOCKS_PER_SM}
    for r in range(repeats + 1):
        for b in BLOCKS_PER_SM:
            fn((dev.sm_count * b,), (32,), (recs[b][r],), shared_mem=smem)
    measure._wait("launch/block", watchdog_s)
    per_repeat: list[list[tuple[int, int]]] = []
    bodies: list[int] = []
    gaps: list[int] = []
    overlapped = False
    per_sm_counts: set[int] = set()
    for r in range(1, repeats + 1):
        pairs = []
        for b in BLOCKS_PER_SM:
            host = recs[b][r].get()
            span, count, body, ov = serial_blocks(host)
            overlapped |= ov
            bodies += body
            gaps += block_gaps(host)
            per_sm_counts |= set(count.values())
            pairs += [(count[s], span[s]) for s in span]
        per_repeat.append(pairs)
    fit = block_fit(per_repeat)
    body = float(statistics.median(bodies))
    value = fit["value"] - body
    verdict = judge_block(value, gaps)
    data = {"cycles_per_block": round(fit["value"], 2), "block_body_cycles": body,
            "median_span_by_blocks": fit["medians"],
            "linear_fit_residual": round(fit.get("residual", 0.0), 1),
            "dynamic_shared_bytes": smem,
            "blocks_per_sm_seen": sorted(per_sm_counts), "setup": before,
            "per_repeat_slopes": [round(x, 2) for x in fit["slopes"]], **verdict["data"]}
    if overlapped:
        return Launched(float("nan"), 0.0, True,
                        "blocks of one SM overlapped in time: not serialised, no figure", data)
    why = "; ".join(w for w in (fit["why"], verdict["why"]) if w)
    return Launched(value, fit["spread"], bool(why), why, data)


GAP_AGREEMENT = 0.15


def judge_block(value: float, gaps: list[int]) -> dict:
    """Cross-check of the block launch overhead (slope per block minus the block's body)
    against the gaps measured directly between consecutive blocks of one SM (exit clock to
    next entry clock): the gaps' median must agree within GAP_AGREEMENT, else the figure is
    unstable with both estimates in the reason."""
    if not gaps:
        return {"why": "no two blocks ran on one SM: no gap to check against",
                "data": {"gap_count": 0}}
    g = np.asarray(gaps, float)
    med = float(np.median(g))
    q1, q3 = (float(x) for x in np.quantile(g, [0.25, 0.75]))
    why = ""
    if abs(med - value) > GAP_AGREEMENT * max(abs(value), 1.0):
        why = (f"slope-minus-body {value:.0f} cycles and the median gap between blocks "
               f"{med:.0f} cycles disagree by more than {GAP_AGREEMENT:.0%}")
    return {"why": why, "data": {"gap_median_cycles": med, "gap_quartiles": [q1, q3],
                                 "gap_count": len(gaps)}}


# --- export of the model parameters ----------------------------------------------------

# Many-BSP Table 1-8 names -> characteristic keys of a gpuchar run (first found wins)
MODEL_KEYS = {
    "warp_lnch_ovh": ["throughput.launch.warp"],
    "block_lnch_ovh": ["throughput.launch.block"],
    "issue_cycle": ["throughput.launch.issue_cycle"],
    "bar_sync_ovh_256": ["throughput.bar_sync.nt256"],
    "bar_sync_ovh_1024": ["throughput.bar_sync.nt1024"],
    # Many-BSP's mem_lat = G2 is the global-memory (DRAM) latency; the memory suite's
    # pointer chase with ld.global.cv (Ampere paper Table IV's "global") first
    "mem_lat": ["memory.latency.dram_cv", "memory.latency.dram_ca", "memory.latency.dram",
                "memory.latency.global"],
    "l2_lat": ["memory.latency.l2_hit", "memory.latency.l2"],
    "l1_lat": ["memory.latency.l1_hit", "memory.latency.l1"],
    "shared_lat": ["memory.latency.shared_load"],
}
FU_PREFIX = "throughput.unit."


def model_parameters(report: dict, arch: str) -> dict:
    """The Many-BSP model's inputs (Table 1-8 names) from a gpuchar JSON report: each with the
    measured value, its unit and the characteristic it came from (null with the reason when
    the run did not measure it), plus n_fu^i: results per clock per SM of each functional-unit
    row. Only results that passed or were measured (not unstable, invalid or failed) count."""
    ok = {r["key"]: r for r in report.get("results", [])
          if r.get("arch") == arch and r.get("value") is not None
          and r.get("status") in ("pass", "measured")}
    meta = report.get("meta", {})
    params: dict = {}
    for name, keys in MODEL_KEYS.items():
        hit = next((k for k in keys if k in ok), None)
        if hit:
            r = ok[hit]
            params[name] = {"value": round(float(r["value"]), 3), "unit": r.get("unit", ""),
                            "from": hit}
        else:
            params[name] = {"value": None, "reason": f"not measured in this run (looked for "
                                                     f"{', '.join(keys)})"}
    fu = {k[len(FU_PREFIX):]: round(float(r["value"]), 2) for k, r in sorted(ok.items())
          if k.startswith(FU_PREFIX)}
    prov = next((r.get("provenance") for r in ok.values() if r.get("provenance")), {}) or {}
    return {
        "schema": 1,
        "model": "Many-BSP (Riahi et al.), Table 1-8 parameters",
        "arch": arch,
        "device": prov.get("device") or meta.get("device"),
        "provenance": {k: prov.get(k, meta.get(k)) for k in
                       ("device", "driver", "cuda_driver_api", "ptxas", "sm_count",
                        "sm_clock_max_mhz", "sm_clock_measured_mhz", "date")},
        "warp_size": 32,
        "n_ws": throughput.SCHEDULERS_PER_SM,
        "n_SM": prov.get("sm_count"),
        "parameters": params,
        "n_fu_results_per_clk_per_sm": fu,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="gpuchar-model-params",
        description="Export the measured performance-model parameters (Many-BSP Table 1-8: "
                    "launch overheads, bar.sync, issue cycle, memory latency, per-unit "
                    "throughput) of one arch from a gpuchar JSON report as YAML.")
    ap.add_argument("--results", required=True, type=Path, help="gpuchar-results.json")
    ap.add_argument("--arch", required=True)
    ap.add_argument("-o", "--output", type=Path, help="YAML file (default: stdout)")
    args = ap.parse_args(argv)
    import yaml
    from . import archs
    from .expectations import atomic_write
    try:
        arch = archs.validate(args.arch)
    except archs.UnknownArch as e:
        print(f"--arch: {e}", file=sys.stderr)
        return 2
    try:
        report = json.loads(args.results.read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"{args.results}: cannot read the report: {e}", file=sys.stderr)
        return 2
    text = yaml.safe_dump(model_parameters(report, arch), sort_keys=False, width=100)
    if args.output:
        atomic_write(args.output, text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
