"""Hopper data movement (issue 15): clusters and distributed shared memory, TMA, async copies
and barriers, bandwidths, the L2 seen from every SM, latency under load."""
from __future__ import annotations


def groups(arch: str) -> list:
    """The modules the topic compiles for `arch` (core.topic.Topic)."""
    from . import run
    return run.groups(arch)
