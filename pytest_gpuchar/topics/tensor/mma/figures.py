"""The figures of each tensor table row, read from the session's sweep (run.sweep): completion
latency, 004's convergence points at 4 and 8 warps, the peaks (and achieved/peak where a peak
is documented), the wmma issue rate, the wgmma figures; the sweep's invariant (throughput does
not fall as warps grow) as the row's check; the method texts and recorded tolerances.
"""
from __future__ import annotations

import math

from ....core.probe import DeclaredUnmeasurable
from ....core.topic import Context
from ....core.verify import ProbeInvalid
from ....results.judge import Measured, Measurement
from ....results.plots import draw
from . import analysis, plots
from .probes import Unsupported
from .rows import (HOPPER_PEAK_SOURCE, SCHEDULERS, SKEW_SHARE_MAX, SPAN_PER_WARP, STEPS,
                   WGMMA_LAT_TRIPS, WGMMA_STEPS, Kind, TensorRow, WgmmaRow, has_wgmma)
from .run import Sweep, sweep
from ..tolerance import tol


METHOD = ("one block of {warps} warp(s) on one SM; each warp runs ILP independent accumulator "
          "chains of dependent {what}, {steps} steps of every chain per trip of a counted loop "
          "(trip count a kernel parameter, not unrolled) between two %clock64 reads, timed at "
          "three trip counts per point (1:2:3, sized so the longest per-SM span is at least "
          "{span} cycles x warps; trips in the data); latency = slope over the chain steps "
          "(trips x {steps}) of the mean per-warp cycles (cycles per chain step), throughput = "
          "work / slope of the per-SM span (max end - min start over the block's warps); the "
          "loop control runs in every trip and is in the slope (data: loop); a point whose "
          "warps' start skew is {skew:.0%} or more of its longest per-SM span is unstable; "
          "median of {reps} launches per trip count after a warm-up (spreads: interquartile "
          "range of the per-launch slopes); random non-zero inputs; driver-JIT SASS verified "
          "(one loop: {sass} x {steps} x ILP per trip, chains {steps} deep, loop control only "
          "besides). The loop control and back edge cost once per trip and are not subtracted: "
          "they bias throughput low by their share of a trip (about 20 cycles against "
          "{steps} steps, data: loop)")

# Tolerances recorded with each figure (data["tolerance"]), by kind: expectations/
# tolerances.yaml (the multi-warp points' reason: docs/tensor.md, lab notes).


def wgmma_tol(row: WgmmaRow, kind: str = "wgmma") -> dict:
    """wgmma N=256 chains (128 cycles per wgmma) have their own tolerances."""
    return tol(kind.replace("wgmma", "wgmma_n256", 1) if row.n >= 256 else kind)


def _figure(key: str, value, spread: float | None, unstable: bool, why: str, *, unit: str,
            method: str, data: dict | None = None) -> Measurement:
    """A sweep figure (a point's value, not a slope fit of its own)."""
    return Measurement.of_value(key, value, unit, spread=spread,
                                unstable=why if unstable else "", method=method,
                                data=data or {})


def _points(s: Sweep, kind, name: str) -> dict:
    """The row's sweep points; a row whose ILP 1 probe is invalid, or that has no point,
    fails with the reason."""
    probe = f"{kind}/{name}/ilp1"
    if probe in s.unmeasurable:
        raise DeclaredUnmeasurable(s.unmeasurable[probe])
    if probe in s.invalid:
        raise ProbeInvalid(s.invalid[probe])
    pts = s.points.get((kind, name))
    if not pts:
        bad = [v for k, v in s.invalid.items() if k.startswith(f"{kind}/{name}/")]
        raise ProbeInvalid(bad[0] if bad else f"{kind} {name}: no measurement")
    return pts


def _require(row: TensorRow, arch: str) -> None:
    why = row.supported(arch)
    if why:
        raise Unsupported(f"hardware: {why}")


def _plot(artifact, pts: dict, name: str, caption: str, title: str, unit: str) -> None:
    path = artifact(name, caption) if artifact else None
    if path is not None:
        draw(plots.heatmap, path, pts, title, unit)


def _point_data(s: Sweep, kind, name: str, pt) -> dict:
    """What every point figure carries: its trip counts, its start skew's share of the span
    and the loop accounting of its probe (the loop control in every trip)."""
    return {"trips": list(pt.trips), "skew_share": round(pt.skew_share, 5),
            "loop": s.loops.get(f"{kind}/{name}/ilp{pt.ilp}", {})}


def _method(row: TensorRow, arch: str, s: Sweep, warps: str) -> str:
    glob, per = row.sass_for(arch)
    return METHOD.format(warps=warps, what=row.what, steps=STEPS, span=SPAN_PER_WARP,
                         skew=SKEW_SHARE_MAX, reps=s.repeats, sass=f"{per} x {glob}")


def _convergence(s: Sweep, row: TensorRow, pts: dict, w: int, method: str) -> list:
    """004's convergence point at `w` warps: its throughput and its latency."""
    c = analysis.convergence(pts, w)
    if c is None:
        return []
    best = max(p.throughput for (ww, _), p in pts.items() if ww == w)
    # the convergence ILP is defined by a 5% threshold: every point that its own launch
    # spread could carry across it is a candidate, and the figures' spreads cover them (the
    # convergence ILP was seen to move by one between runs: docs/tensor.md, lab notes)
    cand = analysis.convergence_candidates(pts, w)
    thr_sp = max(c.thr_spread, max(p.throughput for p in cand) - min(p.throughput for p in cand))
    lat_sp = max(c.lat_spread, max(p.latency for p in cand) - min(p.latency for p in cand))
    data = _point_data(s, row.kind, row.name, c)
    return [
        _figure(f"{row.key}.throughput_w{w}", c.throughput, thr_sp, c.unstable, c.why,
                unit=row.unit, method=method.replace("W warp(s)", f"{w} warps")
                + f"; convergence point ILP {c.ilp} (smallest ILP within 5% of the best, "
                f"{best:.1f})",
                data={"tolerance": tol("multi_warp"), "ilp": c.ilp, "best": best,
                      "candidate_ilps": sorted(p.ilp for p in cand), **data}),
        _figure(f"{row.key}.latency_w{w}", c.latency, lat_sp, c.unstable, c.why,
                unit="cycles", method=f"latency per chain step at the convergence point "
                f"({w} warps, ILP {c.ilp}); " + method,
                data={"tolerance": tol("convergence_latency" if w == 4 else "multi_warp"),
                      "ilp": c.ilp, **data}),
    ]


def _grid(pts: dict) -> dict:
    """Every point of the sweep by "w<warps>_ilp<ilp>": throughput, latency, spread, start
    skew at the longest trip count and its share of the longest per-SM span, trip counts."""
    grid = sorted(pts.items())

    def each(f):
        return {f"w{w}_ilp{i}": f(p) for (w, i), p in grid}
    return {"sweep": each(lambda p: round(p.throughput, 2)),
            "latency": each(lambda p: round(p.latency, 2)),
            "spread": each(lambda p: round(p.thr_spread, 2)),
            "start_skew": each(lambda p: p.cycles.get("start_skew", {}).get(max(p.trips))
                               if p.trips else None),
            "skew_share": each(lambda p: round(p.skew_share, 5)),
            "trips": each(lambda p: list(p.trips))}


def _peaks(s: Sweep, row: TensorRow, pts: dict, method: str) -> list:
    """The best stable point with <= 4 warps and with any: a higher unstable point makes
    the peak unstable rather than low."""
    grid = _grid(pts)
    out = []
    for suffix, max_w in (("throughput_peak_w4", 4), ("throughput_peak", None)):
        top = analysis.peak(pts, max_warps=max_w)
        if top is None:
            out.append(_figure(f"{row.key}.{suffix}", float("nan"), None, True,
                               "no stable sweep point (see the points' reasons in the sweep "
                               "JSON)", unit=row.unit, method=method))
            continue
        over = analysis.higher_unstable(pts, top, max_warps=max_w)
        why = (f"a higher point was unstable: {over.throughput:.1f} at {over.warps} warps, ILP "
               f"{over.ilp} ({over.why})") if over else ""
        out.append(_figure(
            f"{row.key}.{suffix}", top.throughput, top.thr_spread, bool(over), why,
            unit=row.unit,
            method=f"best throughput over the sweep points with {'<= 4' if max_w else 'any'} "
            f"warps that are stable (per-launch IQR within 5%, start skew under "
            f"{SKEW_SHARE_MAX:.0%} of the span and independent of the trip count) "
            f"({top.warps} warps, ILP {top.ilp}; median over launches, its spread recorded); "
            + method,
            data={"tolerance": tol("peak"), "warps": top.warps, "ilp": top.ilp,
                  **_point_data(s, row.kind, row.name, top), **grid}))
    return out


def _achieved_peak(row: TensorRow, arch: str, peak_figure: Measurement) -> list:
    """throughput_peak over the documented peak where one applies on the arch (Hopper's FP64
    tensor cores: 128 FMA/clk/SM)."""
    doc = row.documented_peak
    if doc is None or arch != "sm_90" or not math.isfinite(peak_figure.value or math.nan):
        return []
    peak, source = doc
    return [Measurement.of_value(f"{row.key}.achieved_peak", peak_figure.value / peak, "ratio",
                                 spread=(peak_figure.spread or 0.0) / peak,
                                 unstable=peak_figure.unstable,
                                 method=f"throughput_peak / documented peak {peak:g} {row.unit} "
                                 f"({source})",
                                 data={"peak": peak, "tolerance": tol("achieved_peak")})]


def _falls(row: TensorRow, pts: dict) -> tuple[list[str], int]:
    """The sweep's invariant on this row: at warp counts that are multiples of the
    schedulers per SM, throughput at a fixed ILP does not fall as warps grow (within the
    points' launch spreads): the failed checks and the number of pairs compared."""
    falls, compared = analysis.throughput_falls(pts, schedulers=SCHEDULERS)
    return [f"{row.key}: {f} (the sweep's invariant: with the warps a multiple of the "
            f"{SCHEDULERS} schedulers, more warps never lower the throughput at a fixed ILP)"
            for f in falls], compared


def sweep_row(session: Context, row: TensorRow, arch: str, artifact=None) -> Measured:
    """004 Tables 3-9 (mma.sync, mma.sp, ldmatrix): completion latency (1 warp, ILP 1), the
    convergence points with 4 and 8 warps, the peaks (achieved/peak where documented); the
    invariant that throughput does not fall with warps as the row's check; the heatmap of the
    sweep as an artifact."""
    _require(row, arch)
    s = sweep(session, arch)
    pts = _points(s, row.kind, row.name)
    method = _method(row, arch, s, "W")
    first = pts[(1, 1)]
    figures = [_figure(f"{row.key}.completion_latency", first.latency, first.lat_spread,
                       first.unstable, first.why, unit="cycles",
                       method=method.replace("W warp(s)", "1 warp") + "; ILP 1",
                       data={"tolerance": tol("latency"), "cycles": first.cycles,
                             **_point_data(s, row.kind, row.name, first)})]
    for w in (4, 8):
        figures += _convergence(s, row, pts, w, method)
    peaks = _peaks(s, row, pts, method)
    checks, compared = _falls(row, pts)
    peaks[-1].data["monotonic_pairs_compared"] = compared
    if row.kind is Kind.LDMATRIX and checks:
        # ldmatrix is the shared-memory (MIO) pipe, not a tensor core: more warps in flight
        # can cost it throughput (docs/tensor.md, lab notes); the fall is recorded with the
        # peak, not failed
        peaks[-1].data["falls_with_warps"], checks = checks, []
    figures += peaks + _achieved_peak(row, arch, peaks[-1])
    kind = str(row.kind)
    _plot(artifact, pts, f"tensor-{kind.replace('.', '_')}-{row.name}-{arch}.png",
          f"{kind} {row.name} on {arch}: throughput and latency over warps x ILP",
          f"{kind} {row.name} ({arch})", row.unit)
    return Measured(*figures, sass=s.sass[row.kind, row.name], checks=checks)


def wmma_row(session: Context, row: TensorRow, arch: str) -> Measured:
    """003 Table III: wmma completion latency (1 warp, ILP 1) and cycles per wmma of an
    independent sequence (1 warp, the highest ILP: what the paper's 'Cycles' column
    reports)."""
    _require(row, arch)
    s = sweep(session, arch)
    pts = _points(s, row.kind, row.name)
    method = _method(row, arch, s, "1")
    lat = pts[(1, 1)]
    ilp = max(row.ilps)
    ind = pts[(1, ilp)]
    return Measured(
        _figure(f"{row.key}.completion_latency", lat.latency, lat.lat_spread, lat.unstable,
                lat.why, unit="cycles", method=method + "; ILP 1",
                data={"tolerance": tol("latency"), **_point_data(s, row.kind, row.name, lat)}),
        _figure(f"{row.key}.cycles", ind.latency / ilp, ind.lat_spread / ilp, ind.unstable,
                ind.why, unit="cycles/op",
                method=method + f"; ILP {ilp}: cycles per wmma of an independent sequence",
                data={"tolerance": tol("latency"), "fma_per_clk_warp": ind.throughput,
                      **_point_data(s, row.kind, row.name, ind)}),
        sass=s.sass[row.kind, row.name])


WGMMA_METHOD = (
    "1 warpgroup; a counted loop (trip count a kernel parameter, not unrolled) between two "
    "%clock64 reads, per trip wgmma.fence, {steps} wgmma on one accumulator, commit_group, "
    "wait_group 1 (the previous trip's group completes while this one runs, as in a GEMM "
    "main loop; wait_group 0 after the loop); cycles per wgmma = slope of the mean per-warp "
    "cycles over trips x {steps}: the same figure as the slope over n of fence + n wgmma + "
    "commit + wait before issue 13, in a steady state that never drains; A {a}, B from "
    "shared (no swizzle); random non-zero inputs; SASS verified (one loop: {steps} x {sass}, "
    "one WARPGROUP.ARRIVE and one WARPGROUP.DEPBAR per trip, loop control only besides); "
    "median of {reps} launches per trip count. This issue interval of accumulator-chained "
    "wgmma is the figure the papers print as wgmma latency (Luo et al. 2024 Table VIII: 128 "
    "cycles at m64n256k16; arXiv 2512.02189 Table V: 32 / 64 / 128 at N = 64 / 128 / 256), "
    "not the completion latency")
WGMMA_LAT_METHOD = (
    "a counted loop of one warpgroup, per trip wgmma.fence + one wgmma + commit_group + "
    "wait_group 0, timed at {trips} trips; slope of the mean per-warp cycles over trips "
    "(median over launches): one wgmma's completion from fence to wait, plus the trip's loop "
    "control (data: loop; counter, compare, branch and any descriptor moves the compiler "
    "repeats per trip). Before issue 13 a chain of one was timed directly, with the clock "
    "read and the guard; the slope drops those fixed costs. The papers' wgmma "
    "latencies (Luo et al. 2024 Table VIII, arXiv 2512.02189 Table V) are the issue interval "
    "(cycles_per_wgmma), not this figure")


def _wgmma_latency(s: Sweep, row: WgmmaRow) -> Measurement:
    """The completion latency from the latency loop (unstable when it was not measured)."""
    lat = s.latency.get((row.kind, row.name))
    method = WGMMA_LAT_METHOD.format(trips=list(WGMMA_LAT_TRIPS))
    key = f"tensor.wgmma.{row.name}.completion_latency"
    if lat is None:
        return _figure(key, float("nan"), None, True, "the latency loop was not measured "
                       "(see the sweep JSON: skipped / invalid)", unit="cycles", method=method)
    # one wgmma per trip: the figure is each warp's own cycles, judged by their stability
    # (the block span's throughput of this loop is not reported; its launches scattered
    # while the warps' slopes did not: docs/tensor.md, lab notes)
    return _figure(key, lat.latency, lat.lat_spread, bool(lat.lat_why), lat.lat_why,
                   unit="cycles",
                   method=method, data={"tolerance": tol("wgmma_latency"), "cycles": lat.cycles,
                                        "trips": list(lat.trips),
                                        "loop": s.loops.get(f"wgmma/{row.name}/ilp1", {})})


def wgmma_row(session: Context, row: WgmmaRow, arch: str, artifact=None) -> Measured:
    """Hopper wgmma (sm_90a): cycles per wgmma of a dependent accumulator chain, completion
    latency (the latency loop), throughput (FLOP/clk/SM) and achieved/peak against the
    documented dense peak; the sweep rows over warpgroups x ILP."""
    if not has_wgmma(arch):
        raise Unsupported(f"hardware: wgmma needs sm_90a ({arch} has none)")
    s = sweep(session, arch)
    if s.wgmma_error:
        raise ProbeInvalid(s.wgmma_error)
    pts = _points(s, row.kind, row.name)
    p1 = pts[(1, 1)]
    method = WGMMA_METHOD.format(steps=WGMMA_STEPS, a="from registers" if row.a_regs else
                                 "from shared", sass=row.sass, reps=s.repeats)
    stable = {k: v for k, v in pts.items() if not v.unstable} or pts
    best_key = max(stable, key=lambda k: stable[k].throughput)
    best = stable[best_key]
    # every warpgroup count is a multiple of the schedulers: recorded, not a check (several
    # warpgroups on one no-swizzle operand layout are known to run below one; docs/tensor.md)
    falls, compared = analysis.throughput_falls(pts, schedulers=1)
    figures = [
        _figure(f"tensor.wgmma.{row.name}.cycles_per_wgmma", p1.latency, p1.lat_spread,
                p1.unstable, p1.why, unit="cycles/op", method=method,
                data={"tolerance": wgmma_tol(row), "cycles": p1.cycles,
                      **_point_data(s, row.kind, row.name, p1)}),
        _wgmma_latency(s, row),
        _figure(f"tensor.wgmma.{row.name}.throughput", best.throughput, best.thr_spread,
                best.unstable, best.why, unit="flop/clk/SM",
                method=f"best over warpgroups x ILP measured ({sorted(pts)}): "
                f"{best_key[0]} warpgroup(s), ILP {best_key[1]}; 2*64*N*K per wgmma / slope of "
                f"the per-SM span (max end - min start) over the steps; " + method,
                data={"tolerance": wgmma_tol(row), "warpgroups": best_key[0],
                      "ilp": best_key[1], **_point_data(s, row.kind, row.name, best),
                      "sweep": {f"wg{w}_ilp{i}": round(p.throughput, 1)
                                for (w, i), p in sorted(pts.items())},
                      "skew_share": {f"wg{w}_ilp{i}": round(p.skew_share, 5)
                                     for (w, i), p in sorted(pts.items())},
                      "falls_with_warpgroups": [str(f) for f in falls],
                      "monotonic_pairs_compared": compared,
                      "skipped": {f"{n}@{w}": why for (n, w), why in s.skipped.items()
                                  if n.startswith(f"wgmma/{row.name}/")}}),
        _figure(f"tensor.wgmma.{row.name}.achieved_peak", best.throughput / row.peak,
                best.thr_spread / row.peak, False, "", unit="ratio",
                method=f"throughput / documented dense peak {row.peak} FLOP/clk/SM "
                f"({HOPPER_PEAK_SOURCE})",
                data={"tolerance": wgmma_tol(row, "wgmma_achieved_peak")}),
    ]
    if len(pts) > 1:
        _plot(artifact, pts, f"tensor-wgmma-{row.name}-{arch}.png",
              f"wgmma {row.name} on {arch}: FLOP/clk/SM and cycles per chain step over "
              f"warpgroups x ILP", f"wgmma {row.name} ({arch}); x axis: warpgroups",
              "flop/clk/SM")
    return Measured(*figures, sass=s.sass[row.kind, row.name])


def sweep_data(session: Context, arch: str, artifact=None) -> Measured:
    """The raw sweep (every point, invalid probes, skipped launches) as one JSON artifact;
    no probe of the sweep may be invalid."""
    s = sweep(session, arch)
    path = artifact(f"tensor-sweep-{arch}.json", f"tensor-core sweep on {arch} (raw)") \
        if artifact else None
    if path is not None:
        path.write_text(s.dump())
    checks = ["probe invalid:\n" + "\n\n".join(v[:2000] for v in list(s.invalid.values())[:3])
              ] if s.invalid else []
    return Measured(checks=checks)
