"""Tensor-core sweeps on the GPU: JIT every probe of the arch in one driver link (one more for
the sm_90a wgmma module), verify the driver's SASS of every kernel, launch every (probe, warps)
job in one batch, fit. Run once per session; the tests read their rows from the result."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from . import jit, probes, sass, tensor
from .verify import ProbeInvalid

METHOD = ("one block of {warps} warp(s) on one SM; each warp runs ILP independent accumulator "
          "chains of n dependent {what} (n = {lengths}), unrolled between two %clock64 reads; "
          "latency = slope over n of the mean per-warp cycles (cycles per chain step), "
          "throughput = work / slope over n of (max end - min start over the block's warps); "
          "median of {reps} launches after a warm-up (spreads: interquartile range of the per-launch "
          "slopes); random non-zero inputs; driver-JIT SASS "
          "verified ({sass} x n x ILP in the timed region)")


@dataclass
class Sweep:
    arch: str
    points: dict = field(default_factory=dict)     # (kind, row) -> {(warps, ilp): SweepPoint}
    invalid: dict = field(default_factory=dict)    # probe name -> reason (probe invalid)
    skipped: dict = field(default_factory=dict)    # (probe name, warps) -> reason
    sass: dict = field(default_factory=dict)       # (kind, row) -> normalised SASS (ILP 1)
    jit_log: str = ""
    wgmma_log: str = ""
    wgmma_error: str = ""
    repeats: int = 0

    def to_json(self) -> dict:
        return {"arch": self.arch,
                "points": {f"{k}/{r}": {f"w{w}_ilp{i}": asdict(p) for (w, i), p in pts.items()}
                           for (k, r), pts in self.points.items()},
                "invalid": self.invalid,
                "skipped": {f"{n}@{w}": why for (n, w), why in self.skipped.items()},
                "wgmma_error": self.wgmma_error}


def _key(p: tensor.TensorProbe) -> tuple[str, str]:
    if getattr(p, "wgmma", None) is not None:
        return "wgmma", p.wgmma.name
    return p.row.kind, p.row.name


def _verify_all(ps, functions, out: Sweep) -> list:
    good = []
    for p in ps:
        try:
            tensor.verify_probe(p, functions)
        except (ProbeInvalid, sass.RegionError) as e:
            out.invalid[p.name] = str(e)
            continue
        good.append(p)
        if p.ilp == 1:
            out.sass[_key(p)] = sass.normalise(functions[p.entries[min(p.entries)]])
    return good


def _jobs(ps, compiled, warps_for, out: Sweep) -> list:
    jobs = []
    for p in ps:
        fn = compiled.function(p.entries[max(p.entries)])
        limit = int(getattr(fn, "max_threads_per_block", 1024) or 1024)
        for threads in warps_for(p):
            if threads > limit:
                out.skipped[(p.name, threads // 32)] = (
                    f"{threads} threads exceed the kernel's limit of {limit} (registers)")
                continue
            jobs.append((p, threads))
    return jobs


def module_parts(arch: str) -> list[tuple[list, str, str]]:
    """The sweep's probes in parts (jit.chunks), each as (probes, module text, name): linked
    in parallel threads (on an H100 host the whole module took 12.9 s in one link)."""
    return [(part, tensor.module(arch, part), f"gpuchar_tensor{i}.ptx")
            for i, part in enumerate(jit.chunks(tensor.hardware_probes(arch)))]


def run_sweep(dev, *, repeats: int, watchdog_s: float) -> Sweep:
    arch = dev.arch
    out = Sweep(arch, repeats=repeats)
    parts = module_parts(arch)
    built = jit.compile_all([(t, n) for _, t, n in parts], dev.driver, dev.index)
    jobs = []

    def warps_for(p):
        return [32] if p.row.kind == "wmma" else [32 * w for w in tensor.WARPS]
    for (ps, _, _), compiled in zip(parts, built):
        if isinstance(compiled, Exception):
            raise compiled      # the JIT rejected the tensor module: the tests fail with it
        out.jit_log += compiled.info_log
        good = _verify_all(ps, probes.functions_of(compiled.cubin, arch), out)
        jobs += [(p, t, compiled) for p, t in _jobs(good, compiled, warps_for, out)]

    wg = tensor.wgmma_hardware(arch)
    if wg:
        try:
            wcomp = jit.compile_probe(tensor.module(arch, wg), dev.driver, "gpuchar_wgmma.ptx")
            out.wgmma_log = wcomp.info_log
            tensor.check_wgmma_log("wgmma module (driver JIT)", wcomp.info_log)
            wgood = _verify_all(wg, probes.functions_of(wcomp.cubin, arch), out)

            def groups_for(p):
                if p.wgmma.name in tensor.WGMMA_SWEEP:
                    return [128 * g for g in tensor.WGMMA_GROUPS]
                return [128]
            jobs += [(p, t, wcomp) for p, t in _jobs(wgood, wcomp, groups_for, out)]
        except (jit.JITError, ProbeInvalid) as e:
            out.wgmma_error = str(e)

    raw = {}
    by_module: dict[int, list] = {}
    for p, t, comp in jobs:
        by_module.setdefault(id(comp), [comp, []])[1].append((p, t))
    for comp, js in by_module.values():
        launch_skipped: dict = {}
        raw.update(tensor.launch_all(js, dev, repeats=repeats, watchdog_s=watchdog_s,
                                     compiled=comp, skipped=launch_skipped))
        out.skipped.update({(n, t // 32): why for (n, t), why in launch_skipped.items()})
    for p, t, _ in jobs:
        if (p.name, t) not in raw:
            continue
        warp = 32
        pt = tensor.fit_point(p, t, raw[(p.name, t)], warp_size=warp)
        if getattr(p, "wgmma", None) is not None:
            pt.warps = t // 128      # warpgroups
        out.points.setdefault(_key(p), {})[(pt.warps, p.ilp)] = pt
    return out


SWEEP_MIN_REPEATS = 15   # launches are microseconds; the interquartile ranges need a sample


def sweep(gpuchar, arch: str) -> Sweep:
    """The arch's sweep, measured once per session."""
    key = ("tensor-sweep", arch)
    if key not in gpuchar.runs:
        gpuchar.runs[key] = run_sweep(gpuchar.device,
                                      repeats=max(gpuchar.repeats, SWEEP_MIN_REPEATS),
                                      watchdog_s=gpuchar.watchdog_s)
    return gpuchar.runs[key]


def dump(s: Sweep) -> str:
    return json.dumps(s.to_json(), indent=1, default=str)
