"""Compile scheduling: every probe is compiled once per arch and session, in the background,
in the order the tests need it.

A single process, at its first characterisation test (a test with a topic marker and an
arch), starts assembling offline the topics of the selected static tests for every arch of the
run (one ptxas per part, as many at once as there are cores, in the background: a static test
waits only for its own part) and on a GPU starts the driver-JIT links of the topics of the
selected hardware tests in background threads (the registry says which modules each topic
has). A pytest-xdist worker does the same for the arch and kind (static or hardware) of each
test it receives, the first time it receives one. On a GPU of a selected arch (one process),
every hardware test runs before the static checks (each kind in its collected order): the
static checks wait for offline assemblies that then run in the background while the GPU
measures (the opening test once waited for them with the GPU idle: docs/run-time.md).
"""
from __future__ import annotations

from collections import Counter

import pytest

from .core import smclock
from .core.build import Stage
from .topics import registry


def selected(items, marker: str) -> set[str]:
    """The topics of the selected tests carrying `marker` (static, hardware)."""
    return {f.topic for f in map(registry.facts, items) if f.topic and getattr(f, marker)}


def static_counts(items) -> Counter:
    """Selected static tests per (topic, arch)."""
    return Counter((f.topic, f.arch) for item in items for f in [registry.facts(item)]
                   if f.static and hasattr(item, "callspec"))


def worth_batching(group, selected_tests: int) -> bool:
    """A few tests out of a large group (a -k selection) compile their probes alone."""
    return selected_tests * 8 >= len(group.probes)


def start(gpuchar, items, archs: list[str], kinds: tuple[str, ...]) -> None:
    """Queue the driver-JIT links (hardware) and offline assemblies (static) the selected
    tests of these archs and kinds need: first what the run's first hardware test waits for
    (the SM-clock probe, the first topic's modules and its first host job), then the rest.
    The offline assemblies are queued on the builds' queueing thread (`Builds.later`) once
    the test thread first waits long for the GPU (or asks for a listing): building every
    static group's probes and their digests held the test thread about a second before a
    GPU run's first test, and on a thread of its own from the start it held the first
    test's Python as long (the interpreter's lock)."""
    dev = gpuchar.device
    hardware = selected(items, "hardware") if "hardware" in kinds else set()
    if dev and dev.arch in archs and hardware and not gpuchar.not_measuring:
        order = [t for t, _ in registry.run_order(items, [dev.arch], "hardware")]

        def modules(topics: list[str]) -> list:
            return [g for t in topics for g in registry.groups({t}, dev.arch)
                    if g.needed(Stage.HARDWARE)]
        # the SM-clock probe first: the run's first figure asks for the clock (provenance)
        gpuchar.builds.prefetch_modules(dev, [smclock.module(dev.arch)])
        gpuchar.builds.prefetch(dev, modules(order[:1]))
        # the host work of the rows that no measurement decides, in worker processes, in the
        # order the tests run (core/hostpool.py); but the first job, which the run's first
        # test asks for at once: no worker is up yet to make it (starting one takes about a
        # second), so it is made on a host thread, beside the links and the queueing below
        jobs = registry.host_ahead(order, gpuchar, dev.arch)
        if jobs:
            key, fn, args = jobs[0]
            gpuchar.runs.ahead(key, lambda: fn(*args))
        gpuchar.runs.in_processes(jobs[1:])
        gpuchar.builds.prefetch(dev, modules(order[1:]))
        # the offline ptxas of the driver's CUDA version, which the figures compare with the
        # driver's SASS: one module per part, not one ptxas per probe
        compared = {t for t in hardware if registry.topic(t).jit_vs_ptxas}
        gpuchar.builds.later(lambda: _queue_compared(gpuchar.builds, compared, dev))
    if "static" in kinds:
        n = static_counts(items)
        static_order = registry.run_order(items, archs)
        gpuchar.builds.later(lambda: gpuchar.builds.offline_groups(
            [g for t, a in static_order for g in registry.groups({t}, a)
             if g.needed(Stage.STATIC) and worth_batching(g, n[(t, a)])], wait=False))


def _queue_compared(builds, topics: set[str], dev) -> None:
    for relocatable in (True, False):     # ptxas -c (the JIT's mode) and whole-program
        builds.offline_groups(registry.groups(topics, dev.arch), wait=False,
                              version=dev.cuda_driver_api, relocatable=relocatable)


def before_test(gpuchar, item: pytest.Item) -> None:
    """At a characterisation test: start the compiles of the run (once per process; on a
    pytest-xdist worker once per arch and kind it receives)."""
    f = registry.facts(item)
    arch = f.arch
    if arch is None or f.topic is None:
        return
    if gpuchar.is_worker:
        kind = "static" if f.static else "hardware"
        if ("compiled", arch, kind) not in gpuchar.runs:
            gpuchar.runs.once(("compiled", arch, kind), lambda: True)
            start(gpuchar, item.session.items, [arch], (kind,))
        return
    if ("compiled",) not in gpuchar.runs:
        gpuchar.runs.once(("compiled",), lambda: True)
        start(gpuchar, item.session.items, gpuchar.archs(), ("static", "hardware"))


def hardware_first(gpuchar, config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a GPU of a selected arch (one process): every hardware test before the static
    checks, each kind in its collected order."""
    if gpuchar.is_worker or config.getoption("numprocesses", None):
        return
    dev = gpuchar.device
    if not dev or dev.arch not in gpuchar.archs():
        return
    items.sort(key=lambda item: item.get_closest_marker("static") is not None)
