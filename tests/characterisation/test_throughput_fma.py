"""FMA throughput across the whole GPU (Beyond3D CUDA throughput note, seed 001): HFMA2
(fp16x2), FFMA (fp32) and DFMA (fp64) with long independent chains on every SM, per SM per
clock and as achieved/peak against the CUDA C++ Programming Guide's arithmetic-instruction
throughput table; the ratios between them per arch.

Static (any machine): the kernel of each row assembles for the arch, its timed loop holds
exactly the intended SASS, and the SASS matches this compiler's snapshot. Hardware: the same
check on the driver's JIT SASS, then the measurement (pytest-benchmark times one synchronised
launch; the cycle counts are in its extra_info).
"""
from __future__ import annotations

import pytest

from pytest_gpuchar import throughput
from pytest_gpuchar.plugin import assert_result

from _throughput import check_static, measured, snapshot_text

ROWS = [pytest.param(r, id=r.name) for r in throughput.FMA_ROWS]
FFMA = throughput.ROWS["ffma"]


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS)
def test_fma_throughput_sass(arch, row, offline_tools, sass_snapshot):
    check_static(arch, row, sass_snapshot)


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_fma_throughput(arch, row, gpu, gpuchar, record, sass_snapshot, benchmark):
    why = throughput.supported(row, arch)
    if why:
        pytest.skip(f"hardware: {why}")
    m = measured(gpuchar, row, arch)
    unit = " + ".join(m.verdict["unit"])
    peak = throughput.peak(row.name, arch)
    data = {"sass_unit": m.verdict["unit"], "loop_control": m.verdict["loop_control"],
            "cycles_per_sm": {str(t): v for t, v in m.cycles.items()},
            "results_per_sm": {str(t): v for t, v in m.results_per_sm.items()},
            "sms": m.sms, "warps_per_sm": m.warps_per_sm, "wall_ms": m.wall_ms,
            "peak": peak, "peak_source": throughput.PEAK_SOURCE,
            "tolerance": {"rel": 0.02}}   # for a measured (per-device) entry
    r = record(f"throughput.fma.{row.name}", arch, fit=m.as_fit(), unit="fma/clk/SM",
               method=m.method, data=data)
    results = [r]
    if peak:
        frac = m.rate / peak
        results.append(record(
            f"throughput.peak_fraction.{row.name}", arch, value=frac, unit="ratio",
            method=f"measured fma/clk/SM over the documented peak {peak:g} ({throughput.PEAK_SOURCE})",
            detail=(f"{unit} ({row.unit_fu}) reached {frac:.1%} of its documented peak "
                    f"{peak:g} fma/clk/SM ({m.rate:.1f} measured)"),
            data={"peak": peak, "tolerance": {"abs": 0.02}}))
    if row.name != "ffma":
        base = measured(gpuchar, FFMA, arch)
        results.append(record(
            f"throughput.ratio.{row.name}_per_ffma", arch, value=m.rate / base.rate,
            unit="ratio", method="measured fma/clk/SM of this row over FFMA's (same method)",
            data={"ffma": base.rate, "tolerance": {"rel": 0.02}}))
    assert snapshot_text(throughput.jit_sass(gpu)[1][m.probe.entry]) == \
        sass_snapshot(f"jit-driver-{gpu.driver}")
    benchmark.extra_info.update({"arch": arch, "row": row.name, "fma_per_clk_per_sm": m.rate,
                                 "cycles_per_sm": data["cycles_per_sm"], "peak": peak})
    benchmark.pedantic(throughput.launcher(m.probe, gpu), rounds=3, iterations=1)
    for res in results:
        assert_result(res)
