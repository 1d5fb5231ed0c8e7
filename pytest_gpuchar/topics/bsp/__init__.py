"""Many-BSP predictions (seed 002): the report's Hotspot, KNN and MM kernels in PTX, their
BLOCK description derived from that PTX and the suite's own measurements, predicted against
the whole-kernel cycles measured on the GPU."""
from __future__ import annotations


def groups(arch: str) -> list:
    """The modules the topic compiles for `arch` (core.topic.Topic)."""
    from . import run
    return run.groups(arch)


def host_ahead(session, arch: str) -> list:
    """The host work of the topic's hardware rows that no measurement decides
    (core.topic.Topic): every size's inputs and CPU reference."""
    from . import run
    return run.host_ahead(arch)
