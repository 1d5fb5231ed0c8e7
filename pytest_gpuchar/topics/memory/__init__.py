"""The memory hierarchy (seed 003 Table IV, seed 004 Table 10, the cache staircase): pointer
chases through each level, shared-memory bank conflicts, cache capacities and fill size."""
from __future__ import annotations


def groups(arch: str) -> list:
    """The modules the topic compiles for `arch` (core.topic.Topic)."""
    from . import run
    return run.groups(arch)
