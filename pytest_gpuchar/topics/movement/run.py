"""The movement tables on the GPU and offline: the modules the registry compiles (``groups``),
each static row's probe, and each hardware row as a Measured (clusters and DSM, TMA, async
copies and barriers, bandwidths, the L2 by SM, loaded latency) for the hardware_row step.
The measurements themselves are in cluster.py, transfer.py, bandwidth.py and l2.py."""
from __future__ import annotations

from ...core.build import Group
from ...core.probe import NotApplicable, Probe
from . import chases, kernels, streams
from .bandwidth import bandwidth, tma_bandwidth, tma_knee
from .cluster import dsm_bandwidth, dsm_latency, launch, sync
from .l2 import l2_by_sm, loaded
from .rows import (STREAM_ROWS, TMA_SIZES, Async, DsmFlavour, Mechanism, Sync)
from .transfer import async_row, multicast, tma_latency

CLUSTER_PROBES = ("dsm.u32", "dsm.generic", "mapa", "barrier", "barrier_relaxed", "launch",
                  "dsm_bandwidth")
TMA_PROBES = tuple(m.value for m in Mechanism) + ("multicast", "separate") + \
    tuple(f"bandwidth.s{s}" for s in TMA_SIZES)


def cluster_probe(name: str, arch: str) -> Probe:
    """The probe of a static cluster row."""
    if name.startswith("dsm."):
        return kernels.dsm_probe(DsmFlavour(name.split(".")[1]), arch)
    if name == "launch":
        return kernels.launch_probe(arch)
    if name == "dsm_bandwidth":
        return streams.dsm_stream_probe(arch)
    return kernels.sync_probe(Sync(name), arch)


def tma_probe(name: str, arch: str) -> Probe:
    """The probe of a static TMA row: a latency chain, a multicast round, a size's pipeline."""
    if name in ("multicast", "separate"):
        return kernels.multicast_probe(name == "multicast", arch)
    if name.startswith("bandwidth.s"):
        return streams.tma_stream_probe(int(name.removeprefix("bandwidth.s")), arch)
    return kernels.tma_probe(Mechanism(name), arch)


def suite_probes(arch: str) -> list[Probe]:
    """Every movement probe that can exist for `arch` (sm_90a ones included)."""
    makers = [*(lambda n=n: cluster_probe(n, arch) for n in CLUSTER_PROBES),
              *(lambda n=n: tma_probe(n, arch) for n in TMA_PROBES),
              *(lambda k=k: chases.async_probe(k, arch) for k in Async),
              *(lambda r=r: streams.stream_probe(r, arch) for r in STREAM_ROWS),
              lambda: chases.l2_probe(arch), lambda: chases.l2_probe(arch, "atomic"),
              lambda: chases.loaded_probe(arch)]
    out = []
    for make in makers:
        try:
            out.append(make())
        except NotApplicable:
            continue
    return out


def groups(arch: str) -> list[Group]:
    """The topic's modules for `arch`: its own target (in parts that compile in parallel) and
    the sm_90a module of the multicast rounds."""
    ps = suite_probes(arch)
    main = [p for p in ps if p.arch == arch and p.target is None]
    extra = [p for p in ps if p.arch == "sm_90a" and p not in main]
    out = [Group("movement", arch, main, split=True),
           Group("movement_sm90a", "sm_90a", extra)]
    return [g for g in out if g.probes]


__all__ = ["CLUSTER_PROBES", "TMA_PROBES", "async_row", "bandwidth", "cluster_probe",
           "dsm_bandwidth", "dsm_latency", "groups", "l2_by_sm", "launch", "loaded",
           "multicast", "suite_probes", "sync", "tma_bandwidth", "tma_knee", "tma_latency",
           "tma_probe"]
