"""Tensor cores on the GPU: latency and throughput of wmma (003 Table III), mma.sync (004
Tables 3-5, Figs 6-7), mma.sp (Tables 6-7), ldmatrix (Table 9) and Hopper wgmma, swept over
ILP x warps per SM. The whole sweep is JIT-compiled in one driver link (plus one for sm_90a
wgmma), SASS-verified kernel by kernel, launched in one batch and measured once per session
(tensor_run.sweep); each test reads its row and judges it against the arch's expectations.

Per row: completion latency (1 warp, ILP 1), and the two convergence points of 004's tables
(best throughput with 4 warps and with 8 warps: the smallest ILP reaching 95% of the best at
that warp count, with its latency)."""
from __future__ import annotations

import pytest

from pytest_gpuchar import archs, measure, tensor, tensor_run
from pytest_gpuchar.plugin import assert_result

LAT_TOL = {"abs": 1.0, "rel": 0.05}
THR_TOL = {"abs": 1.0, "rel": 0.03}
CONV_LAT_TOL = {"abs": 2.0, "rel": 0.25}   # the convergence ILP may move by one step
# multi-warp block spans: the 4- and 8-warp convergence points differed by up to ~25% between
# two runs on H200 (device run 3 of issue 4) before unstable points were recognised by their
# n-dependent start skew (tensor.fit_point); since then (nightly runs 1 and 2 of 2026-11-23)
# the 4-warp points and the peaks repeated within 4.2%, the 8-warp points (two warps per
# scheduler) within ~25%
MW_TOL = {4: {"abs": 2.0, "rel": 0.08}, 8: {"abs": 2.0, "rel": 0.25}}
PEAK4_TOL = {"abs": 1.0, "rel": 0.08}
PEAK_TOL = {"abs": 1.0, "rel": 0.08}


def WG_TOL(row):
    """wgmma N=256 chains (128 cycles per wgmma) showed ~8% slope spread over 4/8/16."""
    return {"abs": 1.0, "rel": 0.08 if row.n >= 256 else 0.03}


def _fit(value, spread, unstable, why) -> measure.Fit:
    return measure.Fit(value, spread, [], 0.0, 0.0, unstable, why)


def _sweep_or_skip(gpuchar, arch):
    s = tensor_run.sweep(gpuchar, arch)
    return s


def _row_points(s, kind, r):
    name = f"{kind}/{r.name}/ilp1"
    if name in s.invalid:
        pytest.fail(s.invalid[name])
    pts = s.points.get((kind, r.name))
    if not pts:
        bad = [v for k, v in s.invalid.items() if k.startswith(f"{kind}/{r.name}/")]
        pytest.fail(bad[0] if bad else f"{kind} {r.name}: no measurement")
    return pts


def _judge_all(results):
    """Assert every result; unstable ones xfail after the failures are reported."""
    fails = [r for r in results if r.status == "fail"]
    if fails:
        assert_result(fails[0])
    for r in results:
        assert_result(r)


def _plot(gpuchar_artifact, pts, kind, r, arch, unit):
    path = gpuchar_artifact(f"tensor-{kind.replace('.', '_')}-{r.name}-{arch}.png",
                            f"{kind} {r.name} on {arch}: throughput and latency over warps x ILP")
    if path is not None:
        from pytest_gpuchar import plots
        plots.save(tensor.heatmap(pts, f"{kind} {r.name} ({arch})", unit), path)


def _sweep_row(gpuchar, record, sass_snapshot, gpuchar_artifact, arch, kind, r, prefix, unit,
               what):
    s = _sweep_or_skip(gpuchar, arch)
    pts = _row_points(s, kind, r)
    glob, per = r.sass_for(arch)
    method = tensor_run.METHOD.format(warps="W", what=what, lengths=list(tensor.LENGTHS),
                                      reps=s.repeats, sass=f"{per} x {glob}")
    out = []
    first = pts[(1, 1)]
    out.append(record(f"{prefix}.completion_latency", arch, unit="cycles",
                      fit=_fit(first.latency, first.lat_spread, first.unstable, first.why),
                      method=method.replace("W warp(s)", "1 warp") + "; ILP 1",
                      data={"tolerance": LAT_TOL, "cycles": first.cycles}))
    for w in (4, 8):
        c = tensor.convergence(pts, w)
        if c is None:
            continue
        best = max(p.throughput for (ww, _), p in pts.items() if ww == w)
        # the convergence ILP is defined by a 5% threshold: every point that its own launch
        # spread could carry across it is a candidate, and the figures' spreads cover them
        # (H200: ldmatrix x2 at 4 warps converged at ILP 1 in one run, ILP 2 in the next)
        cand = tensor.convergence_candidates(pts, w)
        thr_sp = max(c.thr_spread, max(p.throughput for p in cand) - min(p.throughput
                                                                          for p in cand))
        lat_sp = max(c.lat_spread, max(p.latency for p in cand) - min(p.latency for p in cand))
        out.append(record(f"{prefix}.throughput_w{w}", arch, unit=unit,
                          fit=_fit(c.throughput, thr_sp, c.unstable, c.why),
                          method=method.replace("W warp(s)", f"{w} warps")
                          + f"; convergence point ILP {c.ilp} (smallest ILP within 5% of the "
                          f"best, {best:.1f})",
                          data={"tolerance": MW_TOL[w], "ilp": c.ilp, "best": best,
                                "candidate_ilps": sorted(p.ilp for p in cand)}))
        out.append(record(f"{prefix}.latency_w{w}", arch, unit="cycles",
                          fit=_fit(c.latency, lat_sp, c.unstable, c.why),
                          method=f"latency per chain step at the convergence point ({w} warps, "
                          f"ILP {c.ilp}); " + method,
                          data={"tolerance": CONV_LAT_TOL if w == 4 else MW_TOL[w], "ilp": c.ilp}))
    sweep = {"sweep": {f"w{w}_ilp{i}": round(p.throughput, 2) for (w, i), p in sorted(pts.items())},
             "latency": {f"w{w}_ilp{i}": round(p.latency, 2) for (w, i), p in sorted(pts.items())},
             "spread": {f"w{w}_ilp{i}": round(p.thr_spread, 2) for (w, i), p in sorted(pts.items())}}
    for suffix, max_w, tol in (("throughput_peak_w4", 4, PEAK4_TOL), ("throughput_peak", None,
                                                                     PEAK_TOL)):
        top = tensor.peak(pts, max_warps=max_w)
        if top is None:
            out.append(record(f"{prefix}.{suffix}", arch, unit=unit,
                              fit=_fit(float("nan"), 0.0, True, "no stable sweep point (see "
                                       "the points' reasons in the sweep JSON)"), method=method))
            continue
        over = tensor.higher_unstable(pts, top, max_warps=max_w)
        why = (f"a higher point was unstable: {over.throughput:.1f} at {over.warps} warps, ILP "
               f"{over.ilp} ({over.why})") if over else ""
        out.append(record(
            f"{prefix}.{suffix}", arch, unit=unit, fit=_fit(top.throughput, top.thr_spread,
                                                            bool(over), why),
            method=f"best throughput over the sweep points with {'<= 4' if max_w else 'any'} "
            f"warps that are stable (per-launch IQR within 5%, start skew independent of n) "
            f"({top.warps} warps, ILP "
            f"{top.ilp}; median over launches, its spread recorded); " + method,
            data={"tolerance": tol, "warps": top.warps, "ilp": top.ilp, **sweep}))
    _plot(gpuchar_artifact, pts, kind, r, arch, unit)
    assert s.sass[(kind, r.name)] == sass_snapshot(f"jit-driver-{gpuchar.device.driver}")
    _judge_all(out)


def _supported_or_skip(r, arch):
    why = r.supported(arch)
    if why:
        pytest.skip(f"hardware: {why}")


@pytest.mark.hardware
@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in tensor.MMA])
def test_table_3_mma(arch, row, gpu, gpuchar, record, sass_snapshot, gpuchar_artifact):
    """004 Tables 3-5 / Figs 6-7: mma.sync completion latency and the 4- and 8-warp
    convergence points (FMA/clk/SM)."""
    _supported_or_skip(row, arch)
    _sweep_row(gpuchar, record, sass_snapshot, gpuchar_artifact, arch, "mma", row,
               f"tensor.mma.{row.name}", "fma/clk/SM", f"mma.sync.{row.name}")


@pytest.mark.hardware
@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in tensor.MMA_SP])
def test_table_6_mma_sp(arch, row, gpu, gpuchar, record, sass_snapshot, gpuchar_artifact):
    """004 Tables 6-7: 2:4 sparse mma.sp (dense-equivalent FMA/clk/SM; metadata validated)."""
    _supported_or_skip(row, arch)
    _sweep_row(gpuchar, record, sass_snapshot, gpuchar_artifact, arch, "mma.sp", row,
               f"tensor.mma_sp.{row.name}", "fma/clk/SM", f"mma.sp.{row.name}")


@pytest.mark.hardware
@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in tensor.LDMATRIX])
def test_table_9_ldmatrix(arch, row, gpu, gpuchar, record, sass_snapshot, gpuchar_artifact):
    """004 Table 9: ldmatrix.xN completion latency (pointer chase) and bytes/clk/SM against the
    128 B/clk shared-memory bound."""
    _supported_or_skip(row, arch)
    _sweep_row(gpuchar, record, sass_snapshot, gpuchar_artifact, arch, "ldmatrix", row,
               f"tensor.ldmatrix.{row.name}", "B/clk/SM", f"ldmatrix.{row.name}")


@pytest.mark.hardware
@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in tensor.WMMA])
def test_table_iii_wmma(arch, row, gpu, gpuchar, record, sass_snapshot):
    """003 Table III: wmma completion latency (1 warp, ILP 1) and cycles per wmma of an
    independent sequence (1 warp, ILP 4: what the paper's 'Cycles' column reports)."""
    _supported_or_skip(row, arch)
    s = _sweep_or_skip(gpuchar, arch)
    pts = _row_points(s, "wmma", row)
    glob, per = row.sass_for(arch)
    method = tensor_run.METHOD.format(warps="1", what=f"wmma.{row.name}",
                                      lengths=list(tensor.LENGTHS), reps=s.repeats,
                                      sass=f"{per} x {glob}")
    lat = pts[(1, 1)]
    ilp = max(tensor.WMMA_ILPS)
    ind = pts[(1, ilp)]
    out = [
        record(f"tensor.wmma.{row.name}.completion_latency", arch, unit="cycles",
               fit=_fit(lat.latency, lat.lat_spread, lat.unstable, lat.why),
               method=method + "; ILP 1", data={"tolerance": LAT_TOL}),
        record(f"tensor.wmma.{row.name}.cycles", arch, unit="cycles/op",
               fit=_fit(ind.latency / ilp, ind.lat_spread / ilp, ind.unstable, ind.why),
               method=method + f"; ILP {ilp}: cycles per wmma of an independent sequence",
               data={"tolerance": LAT_TOL, "fma_per_clk_warp": ind.throughput}),
    ]
    assert s.sass[("wmma", row.name)] == sass_snapshot(f"jit-driver-{gpuchar.device.driver}")
    _judge_all(out)


@pytest.mark.hardware
@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in tensor.WGMMA])
def test_hopper_wgmma(arch, row, gpu, gpuchar, record, sass_snapshot, gpuchar_artifact):
    """Hopper wgmma (sm_90a): cycles per wgmma of a dependent accumulator chain, completion
    latency (one wgmma from fence to wait complete, extrapolated from the chain), and
    throughput (FLOP/clk/SM) with achieved/peak against the documented dense peak; for the
    sweep rows over warpgroups per SM x ILP."""
    if archs.number(arch) != 90:
        pytest.skip(f"hardware: wgmma needs sm_90a ({arch} has none)")
    s = _sweep_or_skip(gpuchar, arch)
    if s.wgmma_error:
        pytest.fail(s.wgmma_error)
    kind = "wgmma"
    pts = _row_points(s, kind, row)
    p1 = pts[(1, 1)]
    single = p1.cycles.get("single")
    fit_lengths = [n for n in tensor.WGMMA_LENGTHS if n != tensor.SINGLE]
    method = (f"1 warpgroup, one accumulator chain of n wgmma (n = {fit_lengths}"
              f") between wgmma.fence and commit_group + wait_group 0, all inside the timed "
              f"region; slope over n; A {'from registers' if row.a_regs else 'from shared'}, "
              f"B from shared (no swizzle); random non-zero inputs; SASS verified "
              f"(n x {row.sass}); median of {s.repeats} launches")
    stable = {k: v for k, v in pts.items() if not v.unstable} or pts
    best_key = max(stable, key=lambda k: stable[k].throughput)
    best = stable[best_key]
    out = [
        record(f"tensor.wgmma.{row.name}.cycles_per_wgmma", arch, unit="cycles/op",
               fit=_fit(p1.latency, p1.lat_spread, p1.unstable, p1.why), method=method,
               data={"tolerance": WG_TOL(row), "cycles": p1.cycles}),
        record(f"tensor.wgmma.{row.name}.completion_latency", arch, unit="cycles",
               fit=_fit(single, p1.cycles.get("single_spread", 0.0), False, ""),
               method="a chain of 1, timed directly (median over launches of the "
               "mean over the 4 warps): wgmma.fence + one wgmma + commit_group + wait_group 0, "
               "plus the clock read and the guard (a few cycles); " + method,
               data={"tolerance": {"abs": 4.0, "rel": 0.15}}),
        record(f"tensor.wgmma.{row.name}.throughput", arch, unit="flop/clk/SM",
               fit=_fit(best.throughput, best.thr_spread, best.unstable, best.why),
               method=f"best over warpgroups x ILP measured ({sorted(pts)}): "
               f"{best_key[0]} warpgroup(s), ILP {best_key[1]}; 2*64*N*K per wgmma / slope of "
               f"(max end - min start); " + method,
               data={"tolerance": WG_TOL(row), "warpgroups": best_key[0], "ilp": best_key[1],
                     "sweep": {f"wg{w}_ilp{i}": round(p.throughput, 1)
                               for (w, i), p in sorted(pts.items())},
                     "skipped": {f"{n}@{w}": why for (n, w), why in s.skipped.items()
                                 if n.startswith(f"wgmma/{row.name}/")}}),
        record(f"tensor.wgmma.{row.name}.achieved_peak", arch, unit="ratio",
               fit=_fit(best.throughput / row.peak, best.thr_spread / row.peak, False, ""),
               method=f"throughput / documented dense peak {row.peak} FLOP/clk/SM "
               f"({tensor.HOPPER_PEAK_SOURCE})",
               data={"tolerance": {"abs": 0.08 if row.n >= 256 else 0.03}}),
    ]
    if len(pts) > 1:
        path = gpuchar_artifact(f"tensor-wgmma-{row.name}-{arch}.png",
                                f"wgmma {row.name} on {arch}: FLOP/clk/SM and cycles per "
                                f"chain step over warpgroups x ILP")
        if path is not None:
            from pytest_gpuchar import plots
            fig = tensor.heatmap(pts, f"wgmma {row.name} ({arch}); x axis: warpgroups",
                                 "flop/clk/SM")
            plots.save(fig, path)
    assert s.sass[(kind, row.name)] == sass_snapshot(f"jit-driver-{gpuchar.device.driver}")
    _judge_all(out)


@pytest.mark.hardware
def test_tensor_sweep_data(arch, gpu, gpuchar, gpuchar_artifact):
    """The raw sweep (every point's latency/throughput, invalid probes, skipped launches) as
    one JSON artifact; no probe of the sweep may be invalid."""
    s = _sweep_or_skip(gpuchar, arch)
    path = gpuchar_artifact(f"tensor-sweep-{arch}.json", f"tensor-core sweep on {arch} (raw)")
    if path is not None:
        path.write_text(tensor_run.dump(s))
    assert not s.invalid, "probe invalid:\n" + "\n\n".join(
        v[:2000] for v in list(s.invalid.values())[:3])
