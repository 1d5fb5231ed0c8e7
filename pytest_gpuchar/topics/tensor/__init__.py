"""Tensor cores (seed 003 Table III, seed 004 Tables 3-9 and Figs 6-7, Hopper wgmma): the SASS
each wmma / mma.sync / mma.sp / ldmatrix / wgmma becomes, and its latency and throughput over
ILP x warps per SM. Sub-packages: mma (the sweeps), wgmma (wgmma in depth), clock_load,
fp8_emulation, tcgen05."""
from __future__ import annotations


def groups(arch: str) -> list:
    """The modules the topic compiles for `arch` (core.topic.Topic): the clock under load
    (sm_90 only), the sweeps' and the static checks' (mma), then wgmma in depth and the FP8
    emulation (sm_90 only).

    The clock under load comes first: its test is the topic's first hardware test in a run
    (the test modules take turns, and test_clock_under_load.py sorts before test_tensor_*),
    and a run's driver links and their disassemblies are started in this order. Behind the
    sweeps' and wgmma's modules, whose links take longest, its disassembly waited for a
    free thread and held that test for over a second (docs/run-time.md)."""
    from .clock_load import run as clock_load
    from .fp8_emulation import run as fp8_emulation
    from .mma import run as mma
    from .wgmma import run as wgmma
    out = [*clock_load.groups(arch), *mma.groups(arch), *wgmma.groups(arch),
           *fp8_emulation.groups(arch)]
    return [g for g in out if g.probes]


def host_ahead(session, arch: str) -> list:
    """The host work of the topic's hardware rows that no measurement decides
    (core.topic.Topic): the operands of every launch set of the sweeps."""
    from .mma import run as mma
    return mma.host_ahead(arch)
