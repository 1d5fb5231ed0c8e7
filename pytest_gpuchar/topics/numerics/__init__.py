"""Tensor-core numerics (seed 004 section 8, Fasi et al. 2021): what one mma.sync computes,
bit for bit, against exact CPU references."""
from __future__ import annotations


def groups(arch: str) -> list:
    """The modules the topic compiles for `arch` (core.topic.Topic): the mma.sync kernels
    and, on sm_90, the FP8 wgmma kernels (sm_90a)."""
    from . import fp8_run, run
    return run.groups(arch) + fp8_run.groups(arch)


def host_ahead(session, arch: str) -> list:
    """The host work of the topic's hardware rows that no measurement decides
    (core.topic.Topic), in the order the tests run: Fig 20's chains, then the FP8 K
    growth's cases and CPU models."""
    from . import fp8_run, run
    return run.host_ahead(arch) + fp8_run.host_ahead(session, arch)
