"""The instruction tables' JIT-against-ptxas data (run.figure), without a GPU: the driver's
JIT is stood in for by `ptxas -c` (its SASS on sm_90, docs/jit-vs-ptxas.md), the launch by
fixed cycles."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_gpuchar.core import toolchain
from pytest_gpuchar.core.build import Builds
from pytest_gpuchar.core.verify import Verdict
from pytest_gpuchar.topics.instructions import kernels, rows, run


def test_a_figure_records_both_comparisons(monkeypatch):
    try:
        tool = toolchain.find("ptxas", "sm_90")
        toolchain.find("nvdisasm", "sm_90")
    except toolchain.ToolMissing as e:
        pytest.skip(f"static: {e}")
    builds = Builds()
    probe = kernels.cpi_probe(rows.row("add.u16"), "sm_90")
    jit = builds.offline(probe, toolchain.relocatable(tool))      # what the driver made
    cycles = {n: [10 + 2 * n] * 3 for n in probe.ops.values()}
    monkeypatch.setattr(run, "measured", lambda session, p: run.Run(jit, Verdict(True), cycles))
    session = SimpleNamespace(builds=builds, repeats=3,
                              device=SimpleNamespace(cuda_driver_api=tool.version))
    m = run.figure(session, probe, "cpi.add.u16", run.METHOD_CPI).figures[0]
    assert m.value == pytest.approx(2.0)
    assert m.data["jit_equals_ptxas"] is True and m.data["ptxas"] == tool.version
    cmp = m.data["jit_vs_ptxas"]
    assert cmp["ptxas -c"] == {"identical": True, "classes": {}}
    whole = cmp["ptxas"]
    assert whole["identical"] is False and "other" not in whole["classes"]
    assert whole["classes"]["zeroing move"]["example"] == [
        "HFMA2.MMA r3, -RZ, RZ, 0, 0", "IMAD.MOV.U32 r3, RZ, RZ, RZ"]
