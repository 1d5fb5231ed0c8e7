"""Instruction tables (seed 003 Tables I, II, V): PTX instructions, the SASS they become, their
latency and cycles per instruction."""
from __future__ import annotations


def groups(arch: str) -> list:
    """The modules the topic compiles for `arch` (core.topic.Topic)."""
    from . import run
    return run.groups(arch)
