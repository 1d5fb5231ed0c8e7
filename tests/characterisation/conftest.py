"""Characterisation suite: the product. Each module mirrors one table of a seed paper.

Every probe is compiled once per arch and session. A single process, at its first test,
starts assembling offline the topics of the selected static tests for every arch of the run
(one ptxas per part, as many at once as there are cores, in the background: a static test
waits only for its own part) and on a GPU starts the driver-JIT links of the topics of the
selected hardware tests in background threads (topics/registry.py says which modules each
topic has). A pytest-xdist worker does the same for the arch and kind (static or hardware) of
each test it receives, the first time it receives one."""
from __future__ import annotations

from collections import Counter

import pytest

from pytest_gpuchar.core.build import Stage
from pytest_gpuchar.topics import registry


def _selected(items, marker: str) -> set[str]:
    return {t for item in items if item.get_closest_marker(marker) is not None
            for t in [registry.topic_of(item)] if t}


def _static_counts(items) -> Counter:
    """Selected static tests per (topic, arch)."""
    return Counter((registry.topic_of(item), item.callspec.params.get("arch"))
                   for item in items if item.get_closest_marker("static") is not None
                   and hasattr(item, "callspec"))


def _worth_batching(group, selected: int) -> bool:
    """A few tests out of a large group (a -k selection) compile their probes alone."""
    return selected * 8 >= len(group.probes)


def _compile(gpuchar, items, archs: list[str], kinds: tuple[str, ...]) -> None:
    if "static" in kinds:
        n = _static_counts(items)
        gpuchar.builds.offline_groups([g for t, a in registry.static_order(items, archs)
                                       for g in registry.groups({t}, a)
                                       if g.needed(Stage.STATIC)
                                       and _worth_batching(g, n[(t, a)])], wait=False)
    dev = gpuchar.device
    hardware = _selected(items, "hardware") if "hardware" in kinds else set()
    if dev and dev.arch in archs and hardware:
        gpuchar.builds.prefetch(dev, [g for g in registry.groups(hardware, dev.arch)
                                      if g.needed(Stage.HARDWARE)])
        # the offline ptxas of the driver's CUDA version, which the figures compare with the
        # driver's SASS: one module per part, not one ptxas per probe (H100: 134 s of a night)
        compared = {t for t in hardware if registry.topic(t).jit_vs_ptxas}
        for relocatable in (True, False):     # ptxas -c (the JIT's mode) and whole-program
            gpuchar.builds.offline_groups(registry.groups(compared, dev.arch), wait=False,
                                          version=dev.cuda_driver_api, relocatable=relocatable)


@pytest.fixture(autouse=True)
def _compile_batches(request, gpuchar):
    spec = getattr(request.node, "callspec", None)
    arch = spec.params.get("arch") if spec else None
    if arch is None:
        return
    if gpuchar.is_worker:
        kind = "static" if request.node.get_closest_marker("static") else "hardware"
        if ("compiled", arch, kind) not in gpuchar.runs:
            gpuchar.runs.once(("compiled", arch, kind), lambda: True)
            _compile(gpuchar, request.session.items, [arch], (kind,))
        return
    if ("compiled",) not in gpuchar.runs:
        gpuchar.runs.once(("compiled",), lambda: True)
        _compile(gpuchar, request.session.items, gpuchar.archs(), ("static", "hardware"))


def pytest_collection_modifyitems(config, items):
    """On a GPU of a selected arch (one process): every hardware test before the static checks
    (each kind in its collected order). The static checks wait for offline assemblies that
    then run in the background while the GPU measures; first, the run's opening test waited
    for them with the GPU idle (H200: 14.8 s at test_bsp_kernel_sass)."""
    from pytest_gpuchar.fixtures import state
    s = state(config)
    if s.is_worker or config.getoption("numprocesses", None):
        return
    dev = s.device
    if not dev or dev.arch not in s.archs():
        return
    items.sort(key=lambda item: item.get_closest_marker("static") is not None)
