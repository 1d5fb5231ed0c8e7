"""Tensor-core sweeps on the GPU: JIT every probe of the arch (the sweep module in parts, one
more for the sm_90a wgmma module), verify the driver's SASS of every kernel (one counted loop
each), launch every (probe, block size, kernel) job at its three trip counts in one batch per
module, fit over the trip counts. Made once per session (``sweep``); the figures of each table
row are read from it. Also the modules every tensor test compiles (``groups``) and the static
checks that count SASS of whole modules (MOVM layouts, emulated rows)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ....core import archs, sass
from ....core.build import Group, Stage
from ....core.jit import JITError
from ....core.probe import DeclaredUnmeasurable, Probe
from ....core.runner import Bounds
from ....core.topic import Context
from ....core.verify import ProbeInvalid
from . import analysis, kernels, launch, operands
from ..tcgen05 import kernels as tcgen05
from .launch import launchable
from .probes import TensorProbe, Unsupported, never_executed
from ..wgmma.kernels import check_wgmma_log


SWEEP_LAUNCHES = Bounds(15)   # launches are microseconds; the interquartile ranges need a sample


# --- the modules --------------------------------------------------------------------------------

def _text(arch: str):
    return lambda part: kernels.module_text(arch, part)


def sweep_group(arch: str) -> Group:
    """The hardware sweep's probes, linked in parts in parallel threads (the whole module in
    one link held the run for seconds: docs/run-time.md, lab notes)."""
    return Group("tensor", arch, kernels.hardware_probes(arch), text=_text(arch),
                       split=True, stage=Stage.HARDWARE)


def wgmma_group(arch: str) -> Group:
    return Group("wgmma", "sm_90a", kernels.wgmma_hardware(arch), text=_text(arch),
                       stage=Stage.HARDWARE)


def movm_probes(arch: str) -> list[Probe]:
    """The MOVM layout kernels (untimed) as probes, so that their module is compiled with
    the topic's other modules."""
    return [Probe(f"movm/{lay}/{types}", arch, kernels.movm_kernel(lay, types=types),
                  {0: kernels.movm_entry(lay, types)}, {0: 0})
            for lay, types in kernels.movm_layouts()]


def groups(arch: str) -> list[Group]:
    """The hardware sweep (parts gpuchar_tensor<i>.ptx) and, on sm_90, the wgmma module
    (gpuchar_wgmma.ptx); the static suite's modules: ILP 1 of every row, the wgmma rows,
    the MOVM layouts and the emulated rows."""
    static = kernels.static_probes(arch)[0]
    specific = arch + "a"     # rows of the arch-specific target (sm_120a), their own module
    out = [sweep_group(arch), wgmma_group(arch),
           Group("tensor_static", arch, [p for p in static if p.arch == arch], text=_text(arch),
                 stage=Stage.STATIC),
           Group("tensor_static_a", specific, [p for p in static if p.arch == specific],
                 text=_text(specific), stage=Stage.STATIC),
           Group("wgmma_static", "sm_90a", kernels.wgmma_static(arch), text=_text(arch),
                 stage=Stage.STATIC),
           Group("tcgen05_static", specific, tcgen05.probes(arch), stage=Stage.STATIC)]
    if archs.number(arch) >= 70:
        out += [Group("tensor_movm", arch, movm_probes(arch),
                      text=lambda _: kernels.movm_module(arch), stage=Stage.STATIC),
                Group("tensor_emulated", arch, [p for _, p in kernels.emulated_probes(arch)],
                      text=_text(arch), stage=Stage.STATIC)]
    return [g for g in out if g.probes]


# --- the sweep ----------------------------------------------------------------------------------

@dataclass
class Sweep:
    arch: str
    points: dict = field(default_factory=dict)     # (kind, row) -> {(warps, ilp): SweepPoint}
    latency: dict = field(default_factory=dict)    # (kind, row) -> SweepPoint (wgmma latency loop)
    loops: dict = field(default_factory=dict)      # probe name -> its loops' accounting
    invalid: dict = field(default_factory=dict)    # probe name -> reason (probe invalid)
    unmeasurable: dict = field(default_factory=dict)   # probe name -> the declaration's reason
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
                "latency_loops": {f"{k}/{r}": asdict(p) for (k, r), p in self.latency.items()},
                "loops": self.loops,
                "invalid": self.invalid, "unmeasurable": self.unmeasurable,
                "skipped": {f"{n}@{w}": why for (n, w), why in self.skipped.items()},
                "wgmma_error": self.wgmma_error}

    def dump(self) -> str:
        return json.dumps(self.to_json(), indent=1, default=str)


def _verify_all(session: Context, ps: list[TensorProbe], functions: dict,
                out: Sweep) -> list[TensorProbe]:
    """The probes whose driver SASS passes the verification door (the others: out.invalid,
    or out.unmeasurable where the arch declares them so), with each probe's loop accounting
    (out.loops); the ILP 1 probe's SASS of each row is kept for its snapshot."""
    good = []
    for p in ps:
        try:
            verdict = session.verify(p, functions)
        except DeclaredUnmeasurable as e:
            out.unmeasurable[p.name] = str(e)
            continue
        except (ProbeInvalid, sass.RegionError, AssertionError) as e:   # or a stale declaration
            out.invalid[p.name] = str(e)
            continue
        good.append(p)
        out.loops[p.name] = verdict.accounting()
        if p.ilp == 1:
            out.sass[p.key] = p.snapshot_text(functions)
    return good


def _link_sweep(session: Context, arch: str, out: Sweep) -> list:
    """JIT the sweep's parts (a part the driver rejects fails the sweep), verify: jobs."""
    dev = session.gpu.dev
    g = sweep_group(arch)
    errors = session.builds.jit_groups(dev, [g])
    if errors:
        raise next(iter(errors.values()))   # the JIT rejected the tensor module
    jobs = []
    for part, text, name in g.parts():
        compiled, functions = session.builds.jit_module(dev, text, name)
        out.jit_log += compiled.info_log
        good = _verify_all(session, part, functions, out)
        jobs += [(job, compiled) for job in launchable(good, compiled, out.skipped)]
    return jobs


def _link_wgmma(session: Context, arch: str, out: Sweep) -> list:
    """JIT the wgmma module; a JIT error or serialisation warning is the wgmma rows' failure
    (out.wgmma_error), not the sweep's."""
    g = wgmma_group(arch)
    if not g.probes:
        return []
    dev = session.gpu.dev
    (part, text, name), = g.parts()
    err = session.builds.jit_groups(dev, [g]).get(name)
    if err is not None and not isinstance(err, JITError):
        raise err
    if err is not None:
        out.wgmma_error = str(err)
        return []
    compiled, functions = session.builds.jit_module(dev, text, name)
    out.wgmma_log = compiled.info_log
    try:
        check_wgmma_log("wgmma module (driver JIT)", compiled.info_log)
    except ProbeInvalid as e:
        out.wgmma_error = str(e)
        return []
    good = _verify_all(session, part, functions, out)
    return [(job, compiled) for job in launchable(good, compiled, out.skipped)]


def sweep_inputs(arch: str) -> launch.Made:
    """Every launch set's operands of the arch's sweep (the sweep module's probes and the
    wgmma module's): host work no measurement decides, made ahead in a worker process
    (host_ahead; about 40 MB on sm_90)."""
    return operands.of_probes(kernels.hardware_probes(arch) + kernels.wgmma_hardware(arch))


def _inputs_key(arch: str) -> tuple:
    return ("tensor", "sweep inputs", arch)


def host_ahead(arch: str) -> list[tuple]:
    """The sweep's operands ((key, function, arguments) for the session's worker processes:
    core/hostpool.py)."""
    return [(_inputs_key(arch), sweep_inputs, (arch,))]


def _fit_beside(session: Context, key: tuple, specs: list) -> None:
    """Start fitting a module's launch sets in the session's worker processes, where the
    session has them (a GPU run with host work ahead): the test thread launches the next
    module meanwhile. Without them the fit is made where it is taken (the same values)."""
    if specs and session.runs.has_processes:
        session.runs.in_processes([(key, analysis.fit_points, (specs,))])


def run_sweep(session: Context, arch: str, repeats: int) -> Sweep:
    """Link and verify, then per module: launch every launch set (one batch, one wait) and
    hand its clocks to be fitted beside the next module's launches; then the points."""
    out = Sweep(arch, repeats=repeats)
    jobs = _link_sweep(session, arch, out) + _link_wgmma(session, arch, out)
    made = session.runs.take(_inputs_key(arch), lambda: None)
    by_module: dict[int, list] = {}
    for job, comp in jobs:
        by_module.setdefault(id(comp), [comp, []])[1].append(job)
    fits = []
    for i, (comp, js) in enumerate(by_module.values()):
        raw = launch.launch_all(session.runner, js, comp, repeats=repeats,
                                skipped=out.skipped, made=made)
        got = [(job, raw[k]) for job in js
               if (k := (job.probe.name, job.threads, job.key)) in raw]
        specs = [(job.probe.fit_spec(job.threads, job.key), r) for job, r in got]
        key = ("tensor", "sweep fits", arch, i)
        _fit_beside(session, key, specs)
        fits.append(([job for job, _ in got], key, specs))
    for done, key, specs in fits:
        points = session.runs.take(key, lambda: analysis.fit_points(specs))
        for job, pt in zip(done, points):
            p = job.probe
            if p.is_latency_loop(job.key):
                out.latency[p.key] = pt
            else:
                out.points.setdefault(p.key, {})[(pt.warps, p.ilp)] = pt
    return out


def sweep(session: Context, arch: str) -> Sweep:
    """The arch's sweep, measured once per session."""
    return session.runs.once(("tensor", "sweep", arch), lambda: run_sweep(
        session, arch, SWEEP_LAUNCHES.of(session.repeats)))


# --- static checks of whole modules ----------------------------------------------------------

def _no_tensor_cores(arch: str) -> None:
    if archs.number(arch) < 70:
        raise Unsupported(f"static: {arch} has no tensor cores")


def movm(session: Context, arch: str, layout: str, types: str) -> list[str]:
    """003 section IV-C on `arch`: the MOVM transposes of every layout (offline ptxas, one
    module): what does not hold."""
    _no_tensor_cores(arch)
    _, functions = session.builds.offline_module(arch, kernels.movm_module(arch))
    counts = {f"{lay}/{t}": sum(c for op, c in functions[kernels.movm_entry(lay, t)]
                                .opcodes().items() if op.startswith("MOVM"))
              for lay, t in kernels.movm_layouts()}
    return analysis.movm_problems(counts, archs.number(arch), layout, types)


def emulated(session: Context, arch: str) -> list[str]:
    """The rows that are no tensor-core instruction on `arch` (offline ptxas, one module):
    what they became that they must not."""
    _no_tensor_cores(arch)
    em = kernels.emulated_probes(arch)
    text = kernels.module_text(arch, [p for _, p in em])
    _, functions = session.builds.offline_module(arch, text)
    problems = []
    for how, p in em:
        region = [i for i in sass.timed_region(functions[p.entries[p.steps]])
                  if not never_executed(i)]
        problems += analysis.emulation_problems(how, archs.number(arch), region)
    return problems if em else [f"{arch}: no emulated row checked"]
