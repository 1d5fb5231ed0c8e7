"""bar.sync overhead for blocks of 256 and 1024 threads (Many-BSP report, seed 002, Tables
1-5..1-7, rows "bar.sync (for nt=...)"): cycles per barrier of the whole block, one block per
SM, back-to-back barriers in a loop (SASS-verified), slope over loop trip counts."""
from __future__ import annotations

import pytest

from pytest_gpuchar import launch, toolchain
from pytest_gpuchar.plugin import assert_result

from _throughput import snapshot_text, static_function

ROWS = [pytest.param(n, id=f"nt{n}") for n in launch.BAR_THREADS]
METHOD = ("one block of {nt} threads per SM, loop of {u} bar.sync 0 per iteration; per block "
          "max(end) - min(start) of its warps' %clock64; slope over trip counts {trips} "
          "(median over blocks, median of {reps} launches after a warm-up)")


@pytest.mark.static
@pytest.mark.parametrize("threads", ROWS)
def test_bar_sync_sass(arch, threads, offline_tools, sass_snapshot):
    p = launch.bar_probe(arch, threads)
    tool, func = static_function(arch, p.entry)
    launch.verify_bar(p, func)
    assert snapshot_text(func) == sass_snapshot(toolchain.compiler_tag(tool))


@pytest.mark.hardware
@pytest.mark.parametrize("threads", ROWS)
def test_bar_sync_overhead(arch, threads, gpu, gpuchar, record, sass_snapshot):
    reps = max(3, min(gpuchar.repeats, 5))
    fit, verdict, cycles = launch.run_bar(arch, threads, gpu, repeats=reps,
                                          watchdog_s=gpuchar.watchdog_s)
    r = record(f"throughput.bar_sync.nt{threads}", arch, fit=fit, unit="cycles",
               method=METHOD.format(nt=threads, u=launch.BAR_UNROLL,
                                    trips=list(launch.BAR_TRIPS), reps=reps),
               data={"sass_unit": verdict["unit"], "loop_control": verdict["loop_control"],
                     "block_cycles": {str(t): v for t, v in cycles.items()},
                     "tolerance": {"abs": 2, "rel": 0.1}})
    p = launch.bar_probe(arch, threads)
    from pytest_gpuchar import throughput
    assert snapshot_text(throughput.jit_sass(gpu)[1][p.entry]) == \
        sass_snapshot(f"jit-driver-{gpu.driver}")
    assert_result(r)
