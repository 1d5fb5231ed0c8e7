"""Tensor-core numerics (seed 004 section 8, Fasi et al. 2021): what one mma.sync computes,
bit for bit, against exact CPU references."""
from __future__ import annotations


def groups(arch: str) -> list:
    """The modules the topic compiles for `arch` (core.topic.Topic): the mma.sync kernels
    and, on sm_90, the FP8 wgmma kernels (sm_90a)."""
    from . import fp8_run, run
    return run.groups(arch) + fp8_run.groups(arch)
