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
        from pytest_gpuchar import jit
        tables = catalog.suite_probes(arch)
        # the tables' parts first in the JIT pool, then the topics' modules behind them
        jit.prefetch([(t, n) for _, t, n in measure.batch_parts(arch, tables)],
                     dev.driver, dev.index)
        _prefetch_topics(request.session, dev)
        measure.jit_batch(tables, dev)


def _prefetch_topics(session, dev) -> None:
    """Start the driver JIT of the topic modules the selected hardware tests will need, in
    background threads, while the instruction tables' batch links (in parts, in threads too).
    On an H100 host the tables, tensor and wgmma modules took 12.4, 12.9 and 8.0 s one after
    the other, 13.4 s all at once, the tables 2.0 s as 8 parts."""
    from pytest_gpuchar import jit, memory, numerics, tensor, tensor_run, throughput
    files = {item.path.name for item in session.items
             if item.get_closest_marker("hardware") is not None}
    arch = dev.arch
    builders = []          # (module name, PTX builder) of each topic the selection needs
    if "test_tensor_hw.py" in files:
        builders += [(n, lambda t=t: t) for _, t, n in tensor_run.module_parts(arch)]
        if tensor.wgmma_hardware(arch):
            builders.append(("gpuchar_wgmma.ptx",
                             lambda: tensor.module(arch, tensor.wgmma_hardware(arch))))
    if files & {"test_throughput_fma.py", "test_throughput_units.py",
                "test_launch_barrier.py", "test_launch_overhead.py"}:
        builders.append(("gpuchar_throughput.ptx", lambda: throughput.topic_module(arch)))
    if any(f.startswith("test_memory_") for f in files):
        builders.append(("gpuchar_memory.ptx", lambda: memory.module_text(arch)))
    if any(f.startswith("test_numerics_") for f in files):
        builders.append(("gpuchar_numerics.ptx", lambda: numerics.module_ptx(arch)[0]))
    mods = []
    for name, build in builders:
        try:
            mods.append((build(), name))
        except Exception:       # noqa: BLE001 - the topic's own tests build it and report
            continue
    if mods:
        jit.prefetch(mods, dev.driver, dev.index)
