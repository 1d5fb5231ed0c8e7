"""Characterisation suite: the product. Each module mirrors one table of a seed paper.

Every probe of the instruction tables is compiled once per arch and session: one ptxas run
for the static checks, one driver JIT link for the hardware tests (quality bar: compiled once,
launched in batches)."""
from __future__ import annotations

import pytest

from pytest_gpuchar import catalog, measure, probes, toolchain

_BATCHED: set[tuple[str, str]] = set()


@pytest.fixture(autouse=True)
def _compile_batches(request):
    if "arch" not in request.fixturenames:
        return
    arch = request.getfixturevalue("arch")
    gpuchar = request.getfixturevalue("gpuchar")
    if ("static", arch) not in _BATCHED:
        _BATCHED.add(("static", arch))
        try:
            probes.batch(arch, catalog.suite_probes(arch))
        except toolchain.ToolMissing:
            pass   # the static tests skip with the install command
    dev = gpuchar.device
    if dev and dev.arch == arch and ("jit", arch) not in _BATCHED and not measure.wedged():
        _BATCHED.add(("jit", arch))
        measure.jit_batch(catalog.suite_probes(arch), dev)
