"""Launching tensor-core loop kernels on the GPU: a ``Job`` is one probe's kernel at one block
size and its trip counts; ``launch_all`` runs every launch of a list of jobs in one batch
(one stream, one wait under the watchdog) and returns each warp's start and end clocks. The
sweeps (run.py) and the FP8 emulation (fp8_emulation_run.py) launch through it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...core.gpu import LaunchRefused
from . import operands
from .probes import WARP, TensorProbe

if TYPE_CHECKING:
    from ...core.gpu import Gpu
    from ...core.jit import Compiled


@dataclass(frozen=True)
class Job:
    """One launch set: a probe's kernel `key` (TensorProbe.entries) with `threads` threads
    per block, at each of its trip counts."""
    probe: TensorProbe
    threads: int
    key: int
    trips: tuple[int, ...]


def launchable(ps: list[TensorProbe], compiled: "Compiled", skipped: dict) -> list[Job]:
    """Every launch set of these probes that the kernel's register use allows; the others go
    to `skipped` by (probe name, warps)."""
    jobs = []
    for p in ps:
        for threads, key in p.launches():
            fn = compiled.function(p.entries[key])
            limit = int(getattr(fn, "max_threads_per_block", 1024) or 1024)
            if threads > limit:
                skipped[(p.name, threads // WARP)] = (
                    f"{threads} threads exceed the kernel's limit of {limit} (registers)")
                continue
            jobs.append(Job(p, threads, key, p.trips(threads, key)))
    return jobs


def launch_all(gpu: "Gpu", jobs: list[Job], compiled: "Compiled", *, repeats: int,
               skipped: dict) -> dict:
    """jobs -> {(probe name, threads, key): {trips: [(t0s, t1s) per repeat]}} (one clock per
    warp). Every launch of every job first (one stream; per trip count 1 + `repeats`
    launches, the warm-up dropped), one wait under the watchdog, then one copy back per
    buffer. A launch the kernel's resources refuse (registers x threads) is reported in
    `skipped` by (probe name, warps)."""
    import cupy as cp
    pending, keep = [], []   # input buffers stay alive until the launches have run
    for job in jobs:
        p = job.probe
        buf, fill = operands.inputs(p, job.threads, key=job.key)
        d_in, d_fill = cp.asarray(buf), cp.asarray(fill)
        keep += [d_in, d_fill]
        fn = compiled.function(p.entries[job.key])
        outs = {}
        try:
            for trips in job.trips:
                if trips < 1:
                    raise ValueError(f"{p.name}: trip count {trips} (the loop runs at least once)")
                out = cp.zeros((repeats + 1, job.threads, p.out_slots[job.key]), dtype=np.int64)
                gpu.repeat(fn, (1,), (job.threads,),
                           lambda r, out=out, t=trips: (out[r], d_in, d_fill, np.uint32(t)),
                           repeats, name=p.name)
                outs[trips] = out
        except LaunchRefused as e:
            skipped[(p.name, job.threads // WARP)] = f"launch refused: {e.__cause__}"
            continue
        pending += [(p.name, job.threads, job.key, t, out) for t, out in outs.items()]
    gpu.wait("tensor sweep")
    res: dict = {}
    for name, threads, key, trips, out in pending:
        host = out.get()[1:]
        res.setdefault((name, threads, key), {})[trips] = [(h[::WARP, 0], h[::WARP, 1])
                                                           for h in host]
    return res
