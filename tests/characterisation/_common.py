"""Shared steps of the instruction tables: build/verify offline, measure on the GPU."""
from __future__ import annotations

from pytest_gpuchar import measure, probes, sass, toolchain
from pytest_gpuchar.plugin import assert_result
from pytest_gpuchar.verify import ProbeInvalid

METHOD_LATENCY = ("slope of %clock64 cycles over dependent chains of {lengths} ops, "
                  "1 thread, median of {reps} launches after a warm-up")
METHOD_CPI = ("slope of %clock64 cycles over {lengths} independent ops (distinct operands), "
              "1 thread, median of {reps} launches after a warm-up")


def measured_run(gpuchar, probe: probes.Probe) -> measure.Run:
    """Run a probe once per session (Table II reuses Table V's measurements)."""
    key = (probe.name, probe.arch, probe.digest)
    if key not in gpuchar.runs:
        gpuchar.runs[key] = measure.run(probe, gpuchar.device, repeats=gpuchar.repeats,
                                        watchdog_s=gpuchar.watchdog_s)
    return gpuchar.runs[key]


def fitted(gpuchar, probe: probes.Probe) -> tuple[measure.Run, measure.Fit]:
    """The probe's run (measured once per session) and its slope fit."""
    run = measured_run(gpuchar, probe)
    return run, measure.fit(run.cycles, run.probe.ops)


def method_text(method: str, probe: probes.Probe, reps: int) -> str:
    """METHOD_* filled with the probe's own chain lengths."""
    return method.format(lengths=sorted(probe.ops.values()), reps=reps)


def jit_snapshot_text(run: measure.Run) -> str:
    n = min(run.probe.entries)
    return sass.normalise(run.functions[run.probe.entries[n]])


def measure_row(gpuchar, record, sass_snapshot, probe: probes.Probe, key: str, method: str):
    """Verify (driver JIT SASS), measure, snapshot the JIT SASS, compare with expectations."""
    dev = gpuchar.device
    run, fit = fitted(gpuchar, probe)
    r = record(key, probe.arch, fit=fit, method=method_text(method, probe, gpuchar.repeats),
               data={"sass_unit": dict(run.verdict.unit), "cycles": run.cycles})
    jit_text = jit_snapshot_text(run)
    # driver JIT vs offline ptxas: the driver's compiler is part of the driver
    try:
        offline = probes.build_static(probe)
        r.data["jit_equals_ptxas"] = offline.snapshot_text() == jit_text
        r.data["ptxas"] = offline.compiler.version
    except (toolchain.ToolMissing, ProbeInvalid, toolchain.AssemblyError) as e:
        r.data["jit_equals_ptxas"] = None
        r.data["ptxas_error"] = str(e).splitlines()[0]
    assert jit_text == sass_snapshot(f"jit-driver-{dev.driver}")
    assert_result(r)
    return r
