"""Table II of the Ampere paper: CPI of dependent against independent sequences.

The paper's observation, asserted on every arch measured: a dependent chain costs at least as
much per instruction as an independent sequence of the same instruction (the dependent figure is
the pipeline latency, the independent one the issue cost).
"""
from __future__ import annotations

import pytest

from pytest_gpuchar import catalog, probes
from pytest_gpuchar.plugin import assert_result

from _common import METHOD_CPI, METHOD_LATENCY, fitted, method_text

ROWS = [pytest.param(catalog.row(name), id=name) for name in catalog.TABLE_II]


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_table_ii_dependent_vs_independent(arch, row, gpu, gpuchar, record):
    dep_probe, ind_probe = probes.latency_probe(row, arch), probes.cpi_probe(row, arch)
    _, dep = fitted(gpuchar, dep_probe)
    _, ind = fitted(gpuchar, ind_probe)
    reps = gpuchar.repeats
    r_dep = record(f"latency.{row.name}", arch, fit=dep,
                   method=method_text(METHOD_LATENCY, dep_probe, reps))
    r_ind = record(f"cpi.{row.name}", arch, fit=ind,
                   method=method_text(METHOD_CPI, ind_probe, reps))
    for r in (r_dep, r_ind):
        assert_result(r)
    assert dep.value >= ind.value - 0.25, (
        f"{row.name}: dependent chain {dep.value:.2f} cycles/op is cheaper than independent "
        f"{ind.value:.2f}: the dependency is not being honoured")
