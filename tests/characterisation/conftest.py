"""Characterisation suite: the product. Each module mirrors one table of a seed paper.

Every probe of the instruction tables is compiled once per arch and session: one ptxas run
for the static checks, one driver JIT link for the hardware tests (quality bar: compiled once,
launched in batches)."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from pytest_gpuchar import catalog, measure, probes, toolchain

_BATCHED: set[tuple[str, str]] = set()


def _static_batch(arch: str) -> None:
    try:
        probes.batch(arch, catalog.suite_probes(arch))
    except toolchain.ToolMissing:
        pass   # the static tests skip with the install command


@pytest.fixture(autouse=True)
def _compile_batches(request):
    if "arch" not in request.fixturenames:
        return
    arch = request.getfixturevalue("arch")
    gpuchar = request.getfixturevalue("gpuchar")
    if ("static", arch) not in _BATCHED:
        # first test of the session: assemble every selected arch's batch at once, one ptxas
        # process per core
        todo = [a for a in gpuchar.archs() if ("static", a) not in _BATCHED]
        _BATCHED.update(("static", a) for a in todo)
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            list(pool.map(_static_batch, todo))
    dev = gpuchar.device
    if dev and dev.arch == arch and ("jit", arch) not in _BATCHED and not measure.wedged():
        _BATCHED.add(("jit", arch))
        measure.jit_batch(catalog.suite_probes(arch), dev)
