"""Shared steps of the throughput and launch tables: offline SASS of the topic's kernels
(one ptxas run per arch), whole-GPU measurements cached per session."""
from __future__ import annotations

import pytest

from pytest_gpuchar import sass, throughput, toolchain


def static_function(arch: str, entry: str):
    """(ptxas tool, SASS function) of one topic kernel, or skip with the install command."""
    try:
        tool, funcs = throughput.static_sass(arch)
    except toolchain.ToolMissing as e:
        pytest.skip(f"static: {e}")
    return tool, funcs[entry]


def snapshot_text(func) -> str:
    return sass.normalise(func)


def check_static(arch: str, row, sass_snapshot) -> None:
    """A throughput row's offline check: supported on `arch` (else skip with the reason), its
    loop verified in ptxas's SASS, and the SASS equal to this compiler's snapshot."""
    why = throughput.supported(row, arch)
    if why:
        pytest.skip(f"static: {why}")
    p = throughput.probe(row, arch)
    tool, func = static_function(arch, p.entry)
    throughput.verify_loop(p, func)
    assert snapshot_text(func) == sass_snapshot(toolchain.compiler_tag(tool))


def measured(gpuchar, row, arch: str) -> throughput.Measured:
    """The row's whole-GPU throughput, measured once per session (ratios reuse it)."""
    key = ("throughput", row.name, arch)
    if key not in gpuchar.runs:
        gpuchar.runs[key] = throughput.run(throughput.probe(row, arch), gpuchar.device,
                                           repeats=max(3, min(gpuchar.repeats, 5)),
                                           watchdog_s=gpuchar.watchdog_s)
    return gpuchar.runs[key]
