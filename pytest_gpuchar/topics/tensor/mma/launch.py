"""Tensor-core loop kernels as launch plans: a ``Job`` is one probe's kernel at one block size
and its trip counts; ``launch_all`` runs every job's plan in one batch of the launch stage
(one wait under the watchdog) and returns each warp's start and end clocks. The sweeps
(run.py) and the FP8 emulation (fp8_emulation_run.py) launch through it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....core.jit import Compiled
from ....core.runner import Launch, Plan, Refused, Runner
from . import operands
from .probes import WARP, TensorProbe


Made = dict     # (probe name, threads, kernel key) -> (`in` buffer, `fill` buffer)


@dataclass(frozen=True)
class Job:
    """One launch set: a probe's kernel `key` (TensorProbe.entries) with `threads` threads
    per block, at each of its trip counts."""
    probe: TensorProbe
    threads: int
    key: int
    trips: tuple[int, ...]


def launchable(ps: list[TensorProbe], compiled: Compiled, skipped: dict) -> list[Job]:
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


def job_plan(job: Job, compiled: Compiled, repeats: int, made: Made | None = None) -> Plan:
    """One job's launches: per trip count 1 + `repeats` launches of one block (the warm-up
    dropped), the job's operands (from `made` where it has them, else drawn now: the same
    values) uploaded before its first records are allocated."""
    p = job.probe
    for trips in job.trips:
        if trips < 1:
            raise ValueError(f"{p.name}: trip count {trips} (the loop runs at least once)")
    fn = compiled.function(p.entries[job.key])
    loaded: list = []

    def args(trips):
        if not loaded:
            buf, fill = (made or {}).get((p.name, job.threads, job.key)) or operands.inputs(
                p, job.threads, key=job.key)
            loaded.extend([Runner.to_device(buf), Runner.to_device(fill)])
        d_in, d_fill = loaded
        return lambda r, rec: (rec, d_in, d_fill, np.uint32(trips))
    return Plan(p.name, {t: fn for t in job.trips}, Launch((1,), (job.threads,)), args, repeats,
                record=(job.threads, p.out_slots[job.key]), dtype=np.int64, keep=warp_clocks)


def warp_clocks(records):
    """What the sweep reads of a launch's records: lane 0's start and end clocks of each warp
    (every thread writes its own record; the rest is never copied back: docs/run-time.md)."""
    return records[:, ::WARP, :2]


def launch_all(runner: Runner, jobs: list[Job], compiled: Compiled, *, repeats: int,
               skipped: dict, made: Made | None = None) -> dict:
    """jobs -> {(probe name, threads, key): {trips: clocks (repeats, warps, 2) [start, end]}}
    (one clock per warp; analysis.Raw). Every launch of every job in one batch (per trip
    count 1 + `repeats` launches, the warm-up dropped), one wait under the watchdog; the
    operands from `made` where it has them (operands.of_probes). A launch the kernel's resources
    refuse (registers x threads) is reported in `skipped` by (probe name, warps)."""
    res: dict = {}
    done = runner.run([job_plan(job, compiled, repeats, made) for job in jobs],
                      name="tensor sweep", skip_refused=True)
    for job, out in zip(jobs, done):
        if isinstance(out, Refused):
            skipped[(job.probe.name, job.threads // WARP)] = f"launch refused: {out.why}"
            continue
        res[(job.probe.name, job.threads, job.key)] = {t: out.timed(t) for t in job.trips}
    return res
