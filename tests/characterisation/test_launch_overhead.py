"""Launch parameters of the Many-BSP model (seed 002, Table 1-8): warp launch overhead, block
launch overhead, issue cycle. Static: the launch kernels read %clock64 before anything but
setup (verified) and match the compiler's snapshot; the issue cycle is derived from the FFMA
throughput probe (verified in test_throughput_fma)."""
from __future__ import annotations

import pytest

from pytest_gpuchar import launch, throughput, toolchain
from pytest_gpuchar.plugin import assert_result

from _throughput import measured, snapshot_text, static_function

ROWS = ["warp", "block", "issue_cycle"]
# H200, nightly runs of 2026-11-23: warp 2.03 / 2.03 cycles per warp, block 366 / 364 cycles
LAUNCH_TOL = {"warp": {"abs": 0.25, "rel": 0.1}, "block": {"abs": 5, "rel": 0.1}}
ENTRY = {"warp": launch.WARP_ENTRY, "block": launch.BLOCK_ENTRY}
METHOD = {
    "warp": "blocks of {w} warps, one per SM, %clock64 at each warp's entry; per block the last "
            "warp's entry minus the first's (median over blocks); the figure is that skew for "
            "the largest block divided by its warps - 1 (median of {reps} launches); the slope "
            "over block sizes is in the data",
    "block": "one-warp blocks made exclusive on their SM by dynamic shared memory (> half the "
             "SM's), grids of {b} x SMs blocks run in turn; every SM's busy span against the "
             "number of blocks it actually ran, least-squares slope per launch set, median of "
             "{reps}, minus the block's own entry-to-exit cycles; cross-checked against the "
             "median gap between consecutive blocks of one SM (exit to next entry, within 15%)",
    "issue_cycle": "cycles between two warp instructions of one scheduler at the fastest "
                   "measured rate: 4 schedulers x 32 lanes / max results/clk/SM of the "
                   "single-result throughput rows measured in this session (FFMA at least)",
}


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS)
def test_launch_sass(arch, row, offline_tools, sass_snapshot):
    if row == "issue_cycle":
        p = throughput.probe("ffma", arch)
        tool, func = static_function(arch, p.entry)
        throughput.verify_loop(p, func)
        return   # its SASS snapshot is test_throughput_fma's
    tool, func = static_function(arch, ENTRY[row])
    launch.verify_entry_stamp(func, f"launch/{row}")
    assert snapshot_text(func) == sass_snapshot(toolchain.compiler_tag(tool))


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_launch_overhead(arch, row, gpu, gpuchar, record, sass_snapshot):
    reps = max(3, min(gpuchar.repeats, 5))
    if row == "issue_cycle":
        single = [r for r in throughput.UNIT_ROWS + throughput.FMA_ROWS
                  if r.results_per_op == 1 and throughput.supported(r, arch) is None]
        rates = {r.name: gpuchar.runs[("throughput", r.name, arch)].rate for r in single
                 if ("throughput", r.name, arch) in gpuchar.runs
                 and not gpuchar.runs[("throughput", r.name, arch)].unstable}
        if "ffma" not in rates:
            rates["ffma"] = measured(gpuchar, throughput.ROWS["ffma"], arch).rate
        best = max(rates, key=rates.get)
        r = record("throughput.launch.issue_cycle", arch, value=launch.issue_cycle(rates),
                   unit="cycles", method=METHOD[row],
                   data={"fastest_row": best, "rate": rates[best], "rows_seen": len(rates),
                         "tolerance": {"abs": 0.05}})
        assert_result(r)
        return
    if row == "warp":
        res = launch.run_warp_launch(gpu, repeats=reps, watchdog_s=gpuchar.watchdog_s)
        method = METHOD[row].format(w=list(launch.WARPS), reps=reps)
    else:
        res = launch.run_block_launch(gpu, repeats=reps, watchdog_s=gpuchar.watchdog_s)
        method = METHOD[row].format(b=list(launch.BLOCKS_PER_SM), reps=reps)
    import math
    if not math.isfinite(res.value):
        from pytest_gpuchar.report import Result
        gpuchar.recorder.add(Result(f"throughput.launch.{row}", arch, "invalid", test=row,
                                    detail=res.why, data={k: str(v) for k, v in res.data.items()}))
        pytest.xfail(f"probe invalid: launch/{row}: {res.why}")
    from pytest_gpuchar.measure import Fit
    fit = Fit(res.value, res.spread, [], 0.0, 0.0, res.unstable, res.why, {})
    r = record(f"throughput.launch.{row}", arch, fit=fit, unit="cycles", method=method,
               data={**{k: (str(v) if isinstance(v, dict) else v) for k, v in res.data.items()},
                     "tolerance": LAUNCH_TOL[row]})
    assert snapshot_text(throughput.jit_sass(gpu)[1][ENTRY[row]]) == \
        sass_snapshot(f"jit-driver-{gpu.driver}")
    assert_result(r)
