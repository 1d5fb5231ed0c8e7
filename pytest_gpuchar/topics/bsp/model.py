"""The model's side of one row (pure, no GPU): the kernel's BLOCK description derived from its
PTX with this device's measured numbers (block.py), its launch, and the Many-BSP prediction;
``data`` is what the report carries of it."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum

from ...models import manybsp as mb
from . import analysis, block, kernels
from .params import Values
from .rows import ACCESS, MU_SOURCE, Size

# Table 1-8 parameters a prediction cannot do without (bar.sync: per block size, analysis)
NEEDED = ("warp_lnch_ovh", "block_lnch_ovh", "issue_cycle", "mem_lat", "l2_lat", "l1_lat")


class MemLevel(str, Enum):
    """Which latency the global accesses' communication takes."""
    DRAM = "dram"    # the report's rule: mem_lat = G_2, the DRAM latency
    L2 = "l2"        # the data resident in L2 (g_2 = 0): what a 50 MB L2 makes of it


@dataclass
class Model:
    size: Size
    device: mb.Device
    derived: block.DerivedBlock
    launch: mb.Launch
    prediction: mb.Prediction
    level: MemLevel

    def data(self, params: dict) -> dict:
        """The prediction's inputs and intermediates for the report."""
        d, dv = self.derived, self.device
        units: dict[str, int] = {}
        latencies = set()
        for src in d.sources.values():
            units[src["unit"]] = units.get(src["unit"], 0) + 1
            if src["latency"]:
                latencies.add(src["latency"])
        return {
            "prediction": analysis.summary(self.prediction),
            "launch": dataclasses.asdict(self.launch),
            "device": {"n_sm": dv.n_sm, "n_ws": dv.n_ws, "g": [round(x, 3) for x in dv.g],
                       "mem_lat": round(dv.mem_lat, 3), "warp_lnch_ovh": dv.warp_lnch_ovh,
                       "block_lnch_ovh": dv.block_lnch_ovh, "issue_cycle": dv.issue_cycle,
                       "mu": dv.mu, "mu_source": MU_SOURCE, "shmem_size": dv.shmem_size,
                       "max_thread_per_sm": dv.max_thread_per_sm, "n_reg": dv.n_reg},
            "parameters": {k: {f: v[f] for f in ("value", "from", "source", "reason") if f in v}
                           for k, v in params["parameters"].items()},
            "level1": [[s.start, s.end, round(s.comp, 2), round(s.comm, 2), round(s.ovh, 2),
                        s.iterations] for s in d.level1],
            "level2_supersteps": len(d.level2),
            "tail_comm": d.block.tail_comm,
            "l1_hits": sorted(d.l1_hits),
            "instructions_per_unit": units,
            "latency_keys": sorted(latencies),
            "mem_level": self.level.value,
        }


def inputs(size: Size, values: Values, params: dict, dev: mb.Device) -> block.Inputs:
    """What the derivation reads for this row: the values, the device's latencies, the
    bar.sync cost of this block size, w (eq. 6), the hand-made access patterns and level-1
    supersteps."""
    return block.Inputs(
        lookup=values, mem_lat=dev.mem_lat, l1_lat=dev.g[0],
        bar_ovh=analysis.bar_overhead(params, size.n_t) if kernels.parsed(size.app).count(
            "bar.sync") else 0.0,
        n_ws=dev.n_ws, w=mb.warps_per_scheduler(size.n_t, dev.warp_size, dev.n_ws),
        access=ACCESS[size.app], level1=size.level1(), issue_cycle=dev.issue_cycle,
        warp_size=dev.warp_size)


def at_level(params: dict, level: MemLevel) -> dict:
    """The parameters with mem_lat taken as the L2 latency (level L2) or as measured."""
    if level is MemLevel.DRAM:
        return params
    p = {**params, "parameters": dict(params["parameters"])}
    p["parameters"]["mem_lat"] = {**params["parameters"]["l2_lat"], "note": "L2-resident"}
    return p


def model(size: Size, values: Values, params: dict, *, shared_per_sm: int, regs: int,
          level: MemLevel = MemLevel.DRAM) -> Model:
    """Derive the kernel's BLOCK description and predict its cycles for this size."""
    p = at_level(params, level)
    dev = analysis.device(p, shared_per_sm)
    derived = block.derive(kernels.parsed(size.app), inputs(size, values, p, dev))
    launch = block.launch(derived, size.n_b, size.n_t, regs, kernels.shared_bytes(size.app))
    return Model(size, dev, derived, launch, mb.predict(dev, launch, derived.block), level)
