"""Throughput and launch costs (seeds 001 and 002): FMA and functional-unit throughput per SM
on the whole GPU, bar.sync overhead, warp and block launch overhead and the issue cycle."""
from __future__ import annotations


def groups(arch: str) -> list:
    """The modules the topic compiles for `arch` (core.topic.Topic)."""
    from . import run
    return run.groups(arch)
