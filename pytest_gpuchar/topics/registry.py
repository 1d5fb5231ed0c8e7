"""Which topics exist, and the modules each compiles for an arch: the one place the suite
maps a topic name to its code (as pytest-xdist maps a --dist name to its scheduler).

A characterisation test module names its topic with ``pytestmark = pytest.mark.topic(name)``;
the characterisation conftest asks this registry for the groups of the topics the selected
tests need (offline ptxas batches for static tests, driver-JIT prefetch for hardware tests).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..core.build import Group


@dataclass(frozen=True)
class Topic:
    name: str
    package: str          # the topic's package under pytest_gpuchar.topics
    doc: str
    # its hardware figures compare the driver's SASS with the offline ptxas of the driver's
    # CUDA version: a hardware run assembles its modules with that ptxas too
    jit_vs_ptxas: bool = False

    def groups(self, arch: str) -> list[Group]:
        """The modules this topic compiles for `arch` (its run module's `groups(arch)`)."""
        run = importlib.import_module(f"pytest_gpuchar.topics.{self.package}.run")
        return run.groups(arch)


TOPICS = {t.name: t for t in (
    Topic("instructions", "instructions", "Tables I, II, V: latency and CPI per PTX instruction",
          jit_vs_ptxas=True),
    Topic("memory", "memory", "Table IV, Table 10, cache staircase: the memory hierarchy"),
    Topic("tensor", "tensor.mma", "Table III, 004 Tables 3-9, wgmma: tensor-core speed"),
    Topic("numerics", "numerics", "004 Tables 12-15, Fasi: tensor-core numerics"),
    Topic("throughput", "throughput", "seeds 001/002: FMA and unit throughput, launch costs"),
    Topic("movement", "movement", "Hopper data movement: clusters/DSM, TMA, async copies, "
                                  "barriers, bandwidths, L2 by SM, loaded latency"),
    Topic("dpx", "dpx", "Hopper DPX intrinsics: SASS per arch, latency and throughput on sm_90"),
    Topic("bsp", "bsp", "Many-BSP predictions (seed 002) of Hotspot, KNN, MM against measured "
                        "cycles"),
)}


class UnknownTopic(KeyError):
    pass


def topic(name: str) -> Topic:
    try:
        return TOPICS[name]
    except KeyError:
        raise UnknownTopic(f"unknown topic {name!r}; known: {', '.join(TOPICS)}") from None


def topic_of(item) -> str | None:
    """The topic a collected test belongs to (its module's topic marker), or None."""
    m = item.get_closest_marker("topic")
    return m.args[0] if m and m.args else None


def static_order(items, archs: list[str]) -> list[tuple[str, str]]:
    """(topic, arch) of the static tests among `items` in the order the run reaches them, so
    background compiles can be queued in that order: a module's tests run arch after arch, and
    queued arch by arch the first module's last arch was compiled last (its tests waited for
    every other part)."""
    order: dict[tuple[str, str], None] = {}
    for item in items:
        spec = getattr(item, "callspec", None)
        arch = spec.params.get("arch") if spec else None
        topic = topic_of(item) if arch in archs and item.get_closest_marker("static") else None
        if topic:
            order.setdefault((topic, arch), None)
    return list(order)


def groups(names: set[str], arch: str) -> list[Group]:
    """Every group of these topics for `arch` (in registry order)."""
    return [g for t in TOPICS.values() if t.name in names for g in t.groups(arch)]
