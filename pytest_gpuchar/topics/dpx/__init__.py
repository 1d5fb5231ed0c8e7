"""DPX (Hopper's dynamic-programming instructions): the CUDA intrinsics' PTX and SASS per arch,
their latency and throughput on sm_90."""
from __future__ import annotations


def groups(arch: str) -> list:
    """The modules the topic compiles for `arch` (core.topic.Topic)."""
    from . import run
    return run.groups(arch)
