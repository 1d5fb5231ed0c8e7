"""Async copies and barriers (issue 15, item 3): cp.async.ca / .cg round-trip latency (their
throughput is a bandwidth row), mbarrier.arrive issue cost and arrive -> test_wait /
try_wait step latency, fence.proxy.async cost alone and after a shared-memory store."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.movement import chases, rows, run

pytestmark = pytest.mark.topic("movement")
ROWS = [pytest.param(k, id=k.value) for k in rows.ASYNC_ROWS]
HW_ROWS = [pytest.param(k, id=k.value, marks=[pytest.mark.skip(reason=rows.ASYNC_FAULTS[k])]
                        if k in rows.ASYNC_FAULTS else []) for k in rows.ASYNC_ROWS]


@pytest.mark.static
@pytest.mark.parametrize("kind", ROWS)
def test_async_probe_sass(arch, kind, offline_tools, static_check):
    static_check(chases.async_probe(kind, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("kind", HW_ROWS)
def test_async_latency(arch, kind, gpu, gpuchar, hardware_row):
    hardware_row(run.async_row(gpuchar, kind, arch))
