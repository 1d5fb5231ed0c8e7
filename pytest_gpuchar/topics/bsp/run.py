"""The Many-BSP predictions on the GPU: each kernel JIT-linked by the driver (the topic's one
module), its SASS verified (session.verify), launched through session.runner on deterministic
inputs, its output checked against a CPU reference, its whole-kernel cycles read from the
stamps; the prediction made from the kernel's PTX and this device's Table 1-8 parameters
(this session's results, else the expectation files'); the three figures as a Measured row.
"""
from __future__ import annotations

import math

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ...core.build import Group
from ...core.probe import NotApplicable
from ...core.runner import WHOLE_GPU, Bounds, Launch, Plan, Runner
from ...core import topic
from ...core.topic import Checked, Context
from ...results import tolerances
from ...models.manybsp import terms as mb_terms
from ...results.judge import Measured, Measurement, Result, Status
from . import analysis, kernels, model, params
from .kernels import REC_WORDS, KernelProbe
from .rows import MU, MU_SOURCE, PYRAMID, SIZES, App, Size


# a kernel whose first timed launch took under SHORT_US between its events (the kernel and the
# host's launch call; the warm-up's time also holds the module's loading) is launched
# SHORT_LAUNCHES times: the small KNN sizes (a few us of kernel) scatter several % between
# launches, and a median of 5 moved as much night to night (docs/models.md, lab notes); 25
# launches cost them about a millisecond
SHORT_US = 200.0
SHORT_LAUNCHES = Bounds(25)
SAMPLE_ROWS = 64              # MM: rows of C checked against the float64 product
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_NUM_REGS = 4

METHOD = ("whole kernel on the SMs: lane 0 of every warp stamps %clock64 at the kernel's entry "
          "and after its last instruction (warp reconverged); per SM the last exit minus the "
          "first entry, the largest over SMs (the SM that finished last); median of {reps} "
          "launches after a warm-up; grid {grid} x block {block}; inputs L2-warm (previous "
          "launch); output checked against a CPU reference")
METHOD_PREDICTION = ("Many-BSP (seed 002) eqs. (4)-(25) on the BLOCK description derived from "
                     "the kernel's PTX (topics/bsp/block.py) and the Table 1-8 parameters of "
                     "this device ({source}); mu = {mu} ({mu_source}); registers per thread "
                     "from the driver's JIT")
METHOD_ERROR = "eq. (27) as a ratio: |measured - predicted| / measured (the report: 3.4-12.3%)"
# No expectation judges these figures; should a --snapshot-update run accept them (accept.py
# takes every measured figure), the entries get the tolerances of expectations/tolerances.yaml
# (section bsp): the run-to-run spread of a whole kernel, a prediction that moves only when
# its inputs move, and the error's own


def tol(kind: str) -> dict:
    return tolerances.of("bsp", kind)


def groups(arch: str) -> list[Group]:
    """The topic's one module: the three kernels."""
    return [Group("bsp", arch, kernels.topic_probes(arch))]


def static_probe(app: App, arch: str) -> KernelProbe:
    return kernels.probe(app, arch)


def snapshot(checked: Checked) -> str:
    """What static_check snapshots: each kernel's normalised SASS under a one-line title."""
    tool = checked.tool
    return "".join(f"// {b.probe.name} ({b.probe.arch}, {tool.name} {tool.version}): "
                   f"{v.instructions} instructions between the clock reads\n"
                   f"{b.probe.snapshot_text(b.functions)}" for b, v in checked)


def repeats(session: Context) -> int:
    return WHOLE_GPU.of(session.repeats)


# --- per kernel: host inputs and reference (made ahead), buffers, arguments, output check --

@dataclass
class HostJob:
    """A size's inputs (the same numbers every run: analysis.rng) and the CPU reference its
    output is checked against: pure host work, made before (or beside) its launches."""
    inputs: dict
    reference: Any


def host_job(size: Size) -> HostJob:
    gen = analysis.rng(size)
    if size.app is App.KNN:
        inp = analysis.knn_inputs(size.dims[0], gen)
        return HostJob(inp, analysis.knn_reference(inp["locations"], inp["lat"], inp["lng"]))
    if size.app is App.MM:
        h_a, w_a, w_b = size.dims
        inp = analysis.mm_inputs(h_a, w_a, w_b, gen)
        inp["rows"] = np.unique(np.concatenate([[0, h_a - 1], gen.choice(
            h_a, min(SAMPLE_ROWS, h_a), replace=False)]))
        return HostJob(inp, analysis.mm_reference(inp["A"], inp["B"], inp["rows"]))
    inp = analysis.hotspot_inputs(*size.dims, gen)
    return HostJob(inp, analysis.hotspot_reference(inp["temp"], inp["power"], inp["coeffs"]))


def _host_key(size: Size) -> tuple:
    return ("bsp", "host", size.id)


def host_ahead(arch: str) -> list[tuple]:
    """Every size's HostJob, in the order the tests run ((key, function, arguments) for the
    session's worker processes: core/hostpool.py)."""
    return [(_host_key(size), host_job, (size,)) for size in SIZES]


def host_work(session: Context, size: Size) -> HostJob:
    """The size's HostJob: made ahead (every size is queued at the run's first test,
    host_ahead), or now; handed over, not kept."""
    return session.runs.take(_host_key(size), lambda: host_job(size))


@dataclass
class Launchable:
    """A kernel's device buffers and arguments (the stamp records appended per launch), and
    the check of its output (failures as messages)."""
    args: tuple
    check: Callable[[], list[str]]
    keep: list = field(default_factory=list)


def _knn(size: Size, job: HostJob) -> Launchable:
    n = size.dims[0]
    inp, ref = job.inputs, job.reference
    d_loc, d_out = Runner.to_device(inp["locations"]), Runner.full(n, np.nan, np.float32)

    def check() -> list[str]:
        got = d_out.get()
        bad = int(np.count_nonzero(~(np.abs(got - ref) <= 2 * np.spacing(ref))))
        return [f"knn {size.name}: {bad} of {n} distances differ from the CPU reference by more "
                f"than 2 ulp (first: {got[:3].tolist()} vs {ref[:3].tolist()})"] if bad else []
    return Launchable((d_loc, d_out, np.int32(n), inp["lat"], inp["lng"]), check, [d_loc])


def _mm(size: Size, job: HostJob) -> Launchable:
    h_a, w_a, w_b = size.dims
    inp, (ref, bound) = job.inputs, job.reference
    d_a, d_b = Runner.to_device(inp["A"]), Runner.to_device(inp["B"])
    d_c = Runner.full((h_a, w_b), np.nan, np.float32)
    rows = inp["rows"]

    def check() -> list[str]:
        c = d_c.get()
        bad, unwritten = analysis.mm_outside(c, rows, ref, bound), np.isnan(c).sum()
        return [f"mm {size.name}: {bad} elements of {len(rows)} sampled rows of C outside the "
                f"float32 error bound of the float64 product, {unwritten} of C's elements "
                f"not written"] if bad or unwritten else []
    return Launchable((d_c, d_a, d_b, np.int32(w_a), np.int32(w_b)), check, [d_a, d_b])


def _hotspot(size: Size, job: HostJob) -> Launchable:
    rows, cols = size.dims
    inp, ref = job.inputs, job.reference
    c = inp["coeffs"]
    d_power, d_src = Runner.to_device(inp["power"]), Runner.to_device(inp["temp"])
    d_dst = Runner.full((rows, cols), np.nan, np.float32)

    def check() -> list[str]:
        got = d_dst.get()
        bad = int(np.count_nonzero(~(np.abs(got - ref) <= 1e-3 + 1e-6 * np.abs(ref))))
        return [f"hotspot {size.name}: {bad} of {rows * cols} temperatures differ from the CPU "
                f"reference ({PYRAMID} steps) by more than 1e-3 K"] if bad else []
    border = np.int32(PYRAMID)      # Rodinia: border = pyramid height x EXPAND_RATE / 2
    return Launchable((np.int32(PYRAMID), d_power, d_src, d_dst, np.int32(cols),
                       np.int32(rows), border, border, c.cap, c.rx, c.ry, c.rz, c.step),
                      check, [d_power, d_src])


BUFFERS = {App.KNN: _knn, App.MM: _mm, App.HOTSPOT: _hotspot}


# --- measurement ---------------------------------------------------------------------------

@dataclass
class KernelRun:
    """One row measured: whole-kernel cycles per launch, the launches' spans, the kernel's
    registers and shared memory as linked, its SASS, and the output check's failures."""
    size: Size
    cycles: analysis.Cycles
    spans: list[analysis.Span]
    regs: int
    shared: int
    sass: str
    checks: list[str]
    wall_us: float
    reps: int


def short_kernel(r: int, ms: float, reps: int) -> int:
    """After launch r (0: the warm-up) of `ms`: a kernel whose first timed launch took under
    SHORT_US is launched SHORT_LAUNCHES times."""
    return SHORT_LAUNCHES.of(reps) if r == 1 and ms * 1000.0 < SHORT_US else reps


def measure(session: Context, size: Size, arch: str) -> KernelRun:
    """JIT (the topic's module), verify the driver's SASS, launch 1 + repeats times (each
    waited for under the watchdog and timed by its events), check the output, read the
    stamps."""
    probe = kernels.probe(size.app, arch)
    built, _ = topic.built(session, probe, groups)
    fn = built.compiled.function(probe.entry)
    job = BUFFERS[size.app](size, host_work(session, size))
    warps = size.n_b * -(-size.n_t // 32)
    out = session.runner.measure(Plan(
        probe.name, {size.id: fn}, Launch(size.grid, size.block),
        lambda _: (lambda r, rec: (*job.args, rec)), repeats(session),
        record=(warps, REC_WORDS), capacity=SHORT_LAUNCHES.least, sync_each=True,
        more=short_kernel))
    host = out.timed(size.id)           # the stamps of the timed launches that ran
    spans = [analysis.launch_span(h) for h in host]
    checks = job.check()
    if any(s.unwritten for s in spans):
        checks.append(f"{size.id}: {max(s.unwritten for s in spans)} of {warps} warps wrote "
                      f"no stamp record")
    attribute = Runner.function_attribute
    return KernelRun(size, analysis.kernel_cycles(spans), spans,
                     attribute(fn, "num_regs", CU_FUNC_ATTRIBUTE_NUM_REGS),
                     attribute(fn, "shared_size_bytes", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
                     probe.snapshot_text(built.functions), checks,
                     float(statistics.median(ms * 1000.0 for ms in out.timed_ms(size.id))),
                     len(host))


def measured(session: Context, size: Size, arch: str) -> KernelRun:
    return session.runs.once(("bsp", size.id, arch), lambda: measure(session, size, arch))


# --- the row --------------------------------------------------------------------------------

def parameters(session: Context, arch: str) -> tuple[params.Values, dict]:
    """This device's values (this session's results, else the expectation files') and the
    Table 1-8 parameters from them; NotApplicable when the arch lacks what a prediction
    needs."""
    dev = session.gpu.dev
    # what Values reads of each result (as_dict would deep-copy every result's data: a
    # hardware run holds about 1500 results, some with large sweeps, per prediction)
    values = params.Values(arch, [{"key": r.key, "arch": r.arch, "value": r.value,
                                   "unit": r.unit, "status": str(r.status)}
                                  for r in session.recorder.results],
                           session.expectations.load(arch), dev.name)
    p = params.parameters(values, dev.sm_count, session.provenance())
    lacking = params.missing(p, model.NEEDED)
    if lacking:
        raise NotApplicable(f"hardware: the Many-BSP parameters of {arch} on {dev.name} are "
                            f"not measured: {'; '.join(lacking)}")
    return values, p


def _measured_data(run: KernelRun, session: Context) -> dict:
    dev = session.gpu.dev
    mhz = session.provenance().get("sm_clock_measured_mhz")   # None: the clock probe invalid
    source = "measured (core.smclock, verified)" if mhz else "the board's max clock (no " \
        "measured clock: see the run's sm_clock_error)"
    mhz = mhz or dev.sm_clock_max_mhz
    gt = statistics.median(s.globaltimer_ns for s in run.spans)
    return {"per_launch": [round(c) for c in run.cycles.per_launch],
            "median_sm_cycles": round(statistics.median(s.median for s in run.spans)),
            "sms": run.spans[-1].sms, "warps_per_sm": list(run.spans[-1].warps),
            "globaltimer_ns": round(gt), "globaltimer_cycles": round(gt * mhz / 1000.0)
            if mhz else None, "sm_clock_mhz": mhz, "sm_clock_source": source,
            "event_us": round(run.wall_us, 2),
            "grid": list(run.size.grid), "block": list(run.size.block),
            "n_b": run.size.n_b, "registers": run.regs, "shared_bytes": run.shared,
            "footprint_bytes": run.size.footprint(), "l2_bytes": dev.l2_bytes,
            "seed_size": run.size.seed, "tolerance": tol("measured_cycles")}


def error_tolerance(pred: float, got: float) -> dict:
    """The error |pred - got| / got moves by pred/got times the measured cycles' relative
    change: their tolerance carried through, at least the tolerance of kind "error"
    (docs/models.md, lab notes: a few % of measured cycles moved a KNN size's error by a
    tenth)."""
    least = tol("error")
    if not got or not math.isfinite(pred / got):
        return least
    return {"abs": round(max(least["abs"], abs(pred / got) * tol("measured_cycles")["rel"]), 3)}


def _where(source: str) -> str:
    """A parameter's source without its line: "this session" or "<topic>/<arch>.yaml"."""
    return source.rsplit(":", 1)[0]


def _finite(x: float, digits: int = 3) -> float | None:
    return round(x, digits) if np.isfinite(x) else None


def prediction(session: Context, size: Size, arch: str) -> Measured:
    """Measured and predicted whole-kernel cycles of one kernel and size, and the error."""
    values, p = parameters(session, arch)
    run = measured(session, size, arch)
    dev = session.gpu.dev
    m = model.model(size, values, p, shared_per_sm=dev.shared_per_sm, regs=run.regs)
    l2 = model.model(size, values, p, shared_per_sm=dev.shared_per_sm, regs=run.regs,
                     level=model.MemLevel.L2)
    pred, got = m.prediction.cycles, run.cycles.value
    unstable = run.cycles.unstable or ("; ".join(run.checks) if run.checks else "")
    key = f"bsp.{size.app.value}.{size.name}"
    sources = sorted({_where(v["source"]) for v in p["parameters"].values() if v.get("source")})
    data = {**m.data(p), "predicted_cycles_l2_resident": round(l2.prediction.cycles, 1),
            "divisor_used": min(m.device.mu, (1 + m.prediction.rho) / 2),
            "divisor_needed": _finite(analysis.divisor(m.prediction, m.device, m.launch, got)),
            "tolerance": tol("predicted_cycles")}
    # the error carries the measured cycles' scatter over the launches: d|p - m| / m =
    # (p / m) dm / m (KNN 42764: 39 of 870 cycles moves the error by 0.076)
    error = Measurement.of_value(
        f"{key}.error", analysis.error_ratio(got, pred), "ratio",
        spread=pred / got * (run.cycles.spread or 0.0) / got if got else None,
        unstable=unstable, method=METHOD_ERROR,
        data={"error_percent": round(100 * analysis.error_ratio(got, pred), 2),
              "signed": round((pred - got) / got, 4) if got else None,
              "error_l2_resident": round(analysis.error_ratio(got, l2.prediction.cycles), 4),
              "tolerance": error_tolerance(pred, got)})
    # the model judged as a model: an error far beyond the seed's for the kernel is recorded
    # (status info, with the reason) and the test is an expected failure, never a pass
    why = "" if unstable else analysis.model_miss(
        size.app.value, error.value, mb_terms(m.device, m.launch, m.prediction), pred, got)
    notes = []
    if why:
        error.data["model_miss"] = why
        notes.append(Result(error.key, arch, Status.INFO, error.value, "ratio", error.spread,
                            method=error.method, detail=why, data=error.data))
    return Measured(
        Measurement.of_value(f"{key}.measured_cycles", got, "cycles", spread=run.cycles.spread,
                             unstable=unstable,
                             method=METHOD.format(reps=run.reps, grid=list(size.grid),
                                                  block=list(size.block)),
                             data=_measured_data(run, session)),
        Measurement.of_value(f"{key}.predicted_cycles", pred, "cycles", spread=None,
                             method=METHOD_PREDICTION.format(source="; ".join(sources), mu=MU,
                                                             mu_source=MU_SOURCE), data=data),
        *([] if why else [error]), sass=run.sass, checks=run.checks, notes=notes)


def expected_failure(measured: Measured) -> str:
    """Why a prediction row is an expected failure ("" when it is not): the model's miss,
    recorded among its notes."""
    return next((n.detail for n in measured.notes if n.data.get("model_miss")), "")
