"""The numerics through the core: the module of every mma kernel (Group "numerics") assembled
offline or JIT-linked by the driver once per session, each kernel verified (MmaProbe.check:
tensor-core SASS or no number), tiles packed into fragments and launched through
session.runner; the rows of Tables 12-15, Fig 20, Fasi's questions and the bit snapshots as
Measured rows (or snapshot texts) for the test steps."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable

import numpy as np

from ...core import archs, topic
from ...core.build import Built, Group
from ...core.probe import NotApplicable
from ...core.runner import Launch, Runner
from ...core.topic import Checked, Context, Notes
from ...results import tolerances
from ...results.judge import Measured, Measurement, NoFigure, Result, Status
from . import analysis, kernels, reference, rows
from . import fasi as questions
from .kernels import MmaProbe, TensorPath
from .plots import plot_chain
from .rows import MmaRow


THREADS = 128   # 4 warps (tiles) per block
BITS_TAG = "tensor-core-bits"     # the snapshot directory of the bit snapshots
METHOD_FASI = "Fasi et al. 2021 style probe on {instr} ({sass}): {detail}"
METHOD_CHAIN = (f"seed 004 Figs 19-20: {rows.CHAIN_TRIALS} chains of 16x8 by 8x8 products on "
                f"{{instr}} (k beyond 8 zero), D converted to the input type for the next link "
                f"(RNE; tf32 cvt.rna), B normal(0,1) seed {rows.CHAIN_SEED}; mean l2 relative "
                f"error vs float64 CPU chain over the chains still finite")


def groups(arch: str) -> list[Group]:
    """The numerics module: every kernel `arch` supports, one ptxas / driver-JIT run."""
    return [Group("numerics", arch, kernels.probes(arch),
                  text=lambda part: kernels.module_text(arch, part))]


# --- the tensor core on the GPU -------------------------------------------------------------

def _probe(session: Context, s: MmaRow) -> MmaProbe:
    arch = session.gpu.dev.arch
    probes = {p.mma.name: p for p in kernels.probes(arch)}
    if s.name not in probes:
        raise ValueError(f"{s.name} is not supported on {arch}: {s.unsupported(arch)}")
    return probes[s.name]


def _built(session: Context, s: MmaRow) -> Built:
    """The row's kernel as the driver linked it (the numerics module, linked once)."""
    dev = session.gpu.dev
    return session.runs.once(("numerics", "built", dev.arch, dev.driver, s.name),
                             lambda: topic.linked(session, _probe(session, s), groups))


def verify(session: Context, s: MmaRow) -> TensorPath:
    """The driver's SASS of the row's kernel through the verification door, once:
    NotTensorCore if it holds no tensor-core instruction."""
    dev = session.gpu.dev
    return session.runs.once(
        ("numerics", "path", dev.arch, dev.driver, s.name),
        lambda: session.verify(_probe(session, s), _built(session, s).functions).path)


def sass_text(session: Context, s: MmaRow) -> str:
    """Normalised driver-JIT SASS of the row's kernel (invalid-probe messages)."""
    return _probe(session, s).snapshot_text(_built(session, s).functions)


def run_bits(session: Context, s: MmaRow, a_bits, b_bits, c_bits) -> np.ndarray:
    """D = A*B + C for T tiles given as bit patterns, one launch (THREADS per block)."""
    verify(session, s)
    name = f"numerics/{s.name}"
    session.gpu.ensure_alive(name)
    T = a_bits.shape[0]
    ga = Runner.to_device(kernels.pack(s, "a", a_bits))
    gb = Runner.to_device(kernels.pack(s, "b", b_bits))
    gc = Runner.to_device(kernels.pack(s, "c", c_bits))
    gd = Runner.zeros((T, 32, kernels.n_regs(s, "c")), dtype=np.uint32)
    fn = _built(session, s).compiled.function(s.entry)
    blocks = (T * 32 + THREADS - 1) // THREADS
    session.runner.once(name, fn, Launch((blocks,), (THREADS,)),
                        (ga, gb, gc, gd, np.uint32(T)))
    return kernels.unpack(s, "c", gd.get())


def run_tiles(session: Context, s: MmaRow, A, B, C=None) -> np.ndarray:
    """D = A*B + C for float tiles of the row's types (decoded to float64)."""
    A = np.asarray(A)
    if C is None:
        C = np.zeros((A.shape[0], s.m, s.n))
    d = run_bits(session, s, reference.encode(reference.to_type(A, s.in_type), s.in_type),
                 reference.encode(reference.to_type(B, s.in_type), s.in_type),
                 reference.encode(reference.to_type(C, s.c_type), s.c_type))
    return reference.decode(d, s.c_type)


def runner(session: Context) -> analysis.TensorCore:
    """The GPU's tensor core (an analysis.TensorCore of this session's functions), made once
    per session and device."""
    dev = session.gpu.dev
    return session.runs.once(("numerics", "runner", dev.arch, dev.driver),
                             lambda: analysis.Operations(
                                 run=lambda s, A, B, C=None: run_tiles(session, s, A, B, C),
                                 verify=lambda s: verify(session, s),
                                 sass_text=lambda s: sass_text(session, s)))


def _supported(s: MmaRow, arch: str) -> MmaRow:
    why = s.unsupported(arch)
    if why:
        raise NotApplicable(why)
    return s


def _verified(session: Context, record: Notes, s: MmaRow, key: str,
              arch: str) -> TensorPath:
    """The kernel's tensor-core path; a kernel with none is recorded invalid and fails. A key
    declared unmeasurable (its accumulation on the FPU) whose path is the tensor core's now
    fails as a stale declaration."""
    try:
        path = runner(session).verify(s)
    except kernels.NotTensorCore as e:
        record.note(Result(key, arch, Status.INVALID, detail=str(e).splitlines()[0]))
        raise
    if not path.accumulation_on_fpu:
        session.not_declared(arch, key, f"jit-driver-{session.gpu.dev.driver}")
    return path


def _known_invalid(session: Context, s: MmaRow, key: str, arch: str,
                   msg: str) -> None:
    """A characteristic that the compiler's implementation makes no tensor-core measurement
    (C added on the FPU): recorded invalid, an expected failure with the SASS; skipped with
    the reason when the arch declares it unmeasurable (expectation files, `unmeasurable:`
    by the key) and the message and SASS show the declared fact."""
    text = msg + "\n" + runner(session).sass_text(s)
    session.unmeasurable(arch, key, text, f"jit-driver-{session.gpu.dev.driver}")
    raise NoFigure(text, Result(key, arch, Status.INVALID, detail=msg))


# --- static: the offline SASS ----------------------------------------------------------------

def static_probe(name: str, arch: str) -> MmaProbe:
    return kernels.probe(rows.mma(name), arch, why_prefix="static: ")


def static_snapshot(checked: Checked) -> str:
    """The snapshot: the mma, the compiler and the path it took, then the kernel's SASS."""
    built, verdict = checked[0]
    p, tool = built.probe, checked.tool
    return (f"// {p.mma.instruction} ({p.arch}, {tool.name} {tool.version}): "
            f"{verdict.path.describe()}\n" + p.snapshot_text(built.functions))


def static_path(checked: Checked, arch: str) -> tuple[list[str], list[Result]]:
    """(failed expectations, notes) on the path the offline compiler took: one HMMA for
    16/32-bit inputs; FP8 one QMMA on sm_89; on Hopper the FP8 mma.sync is converted to f16
    (F2FP) and run as HMMA, C added by FADD on the FPU (a note: the accumulation
    characteristics are then "invalid" on hardware)."""
    built, verdict = checked[0]
    s, path = built.probe.mma, verdict.path
    if s.in_type in ("e4m3", "e5m2"):
        if archs.number(arch) == 89:
            ok = path.native and "QMMA" in " ".join(path.tensor)
            return ([] if ok else [path.describe()]), []
        return [], [Result(f"numerics.sass.{s.name}", arch, Status.INFO,
                           detail=f"{s.instruction}: {path.describe()}",
                           data={"native": path.native})]
    if not path.native:
        return [f"{s.name} on {arch}: not a single tensor-core op: {path.describe()}"], []
    if not any(op.startswith("HMMA") for op in path.tensor):
        return [path.describe()], []
    return [], []


# --- seed 004 Tables 12-15: element-wise profiling -----------------------------------------

def profile(session: Context, s: MmaRow, op: str, init: str) -> analysis.Elementwise:
    arch = session.gpu.dev.arch
    return session.runs.once(
        ("numerics", "elementwise", arch, s.name, op, init),
        lambda: analysis.elementwise(runner(session), s, op, init, rows.ELEMENT_SAMPLES,
                                     rows.ELEMENT_SEED))


def _element_method(row: rows.ElementRow, res: analysis.Elementwise, path: TensorPath) -> str:
    s = row.mma
    init = f"in {s.in_type}" if row.init == "low" else "FP32 then converted (RNE; tf32 cvt.rna)"
    ref = "CPU FP32 computation" if row.col == "vs_fp32" else "fp16(CPU FP32 computation)"
    return (f"seed 004 section 8.1 Fig {row.fig}: {res.n} samples (one output element each, "
            f"diagonal placement), normal(0,1) FP32 draws seed {rows.ELEMENT_SEED}, init "
            f"{init}; mean |D_TC - D_ref|, D_ref = {ref}; {s.instruction}, SASS "
            f"{path.describe()}")


def elementwise(session: Context, record: Notes, row: rows.ElementRow,
                arch: str) -> Measured:
    """One cell of Tables 12-15: the mean absolute error of one operation of D = A*B + C
    against the paper's reference, with the paper's conclusions as invariants. A NaN/Inf
    where the reference is finite fails as such, never as "within tolerance"."""
    s, key = _supported(row.mma, arch), row.key
    path = _verified(session, record, s, key, arch)
    if row.op == "acc" and path.accumulation_on_fpu:
        _known_invalid(session, s, key, arch,
                       f"probe invalid: {key}: the driver adds C with {path.fpu} on the FPU "
                       f"after {path.tensor} ({s.instruction} on {arch}): not a tensor-core "
                       f"accumulation")
    res = profile(session, s, row.op, row.init)
    stat = res.stat(row.col)
    method = _element_method(row, res, path)
    data = {"tolerance": tolerances.of("numerics", "element"), "max_abs": stat.max_abs,
            "exact_fraction": stat.exact_fraction, "n": stat.n,
            "vs_exact_rounded_once": dataclasses.asdict(res.vs_exact), "sass": path.describe()}
    if not stat.finite:
        return Measured(Measurement.of_value(
            key, float("nan"), "error", spread=None, method=method, data=data,
            detail=f"{stat.nonfinite} of {stat.n} results are NaN/Inf where the reference "
                   f"is finite"))
    low = profile(session, s, row.op, "low") if analysis.needs_low(row) else None
    return Measured(Measurement.of_value(key, stat.mean_abs, "error", spread=None, method=method,
                                         data=data),
                    checks=analysis.element_conclusions(row, res, low))


# --- Fasi et al.'s questions ----------------------------------------------------------------

def answers(session: Context, s: MmaRow) -> dict:
    arch = session.gpu.dev.arch
    return session.runs.once(("numerics", "fasi", arch, s.name),
                             lambda: questions.fasi(runner(session), s))


def fasi(session: Context, record: Notes, row: rows.FasiRow,
         arch: str) -> Measured:
    """One answer as a characteristic (1/0, bits or a count). An answer that depends on an
    operation the compiler put on the FPU is recorded invalid (an expected failure with the
    SASS); one the hardware left undetermined is noted and skipped."""
    s, key = _supported(row.mma, arch), row.key
    path = _verified(session, record, s, key, arch)
    if row.question == "native_tensor_core":
        return Measured(Measurement.of_value(
            key, float(path.native), "bool", spread=None,
            method=f"driver JIT SASS of {s.instruction}: {path.describe()}",
            data={"tolerance": tolerances.of("numerics", "bool"), "sass": path.describe()}))
    base, mode = row.asked
    got = answers(session, s).get(base)
    if got is None:
        raise NotApplicable(f"{row.question} does not apply to {s.in_type} -> {s.c_type}")
    if isinstance(got, str):
        if got.startswith("invalid"):
            _known_invalid(session, s, key, arch, f"probe invalid: {key}: {got}")
        raise NotApplicable(f"{row.question}: {got}")
    if mode:
        value, unit = float(mode in got.modes), "bool"
        detail = f"consistent rounding modes: {got.modes or 'none of rn/rz/rd/ru'}"
    else:
        value, unit, detail = got.value, got.unit, ""
    method = METHOD_FASI.format(instr=s.instruction, sass=path.describe(),
                                detail=got.detail[:400])
    if value is None:
        record.note(Result(key, arch, Status.INFO, method=method, detail=got.detail[:300]))
        raise NotApplicable(f"{key}: {got.detail[:200]}")
    return Measured(Measurement.of_value(key, value, unit, spread=None, method=method,
                                         detail=detail,
                                         data={"tolerance": tolerances.of("numerics", unit),
                                               "cases": [str(c) for c in got.cases[:40]],
                                               "modes": got.modes}))


# --- seed 004 Figs 19-20: chain matrix multiplication ---------------------------------------

def curves(session: Context, arch: str) -> dict:
    """(type, init) -> ChainCurve of every chain kernel the arch runs, once per session."""
    def make() -> dict:
        tc = runner(session)
        out = {}
        for t in rows.CHAIN_TYPES:
            s = rows.mma(rows.CHAIN[t])
            if s.unsupported(arch):
                continue
            tc.verify(s)
            for init in rows.INITS:
                key, fn, args = _chain_job(s, init)
                out[(t, init)] = analysis.chain(tc, *args,
                                                inputs=session.runs.take(key, lambda: fn(*args)))
        return out
    return session.runs.once(("numerics", "chain", arch), make)


def _chain_job(s: MmaRow, init: str) -> tuple:
    """(key, function, arguments) of a chain's inputs and CPU chain (host_ahead)."""
    args = (s, init, rows.CHAIN_LINKS, rows.CHAIN_TRIALS, rows.CHAIN_SEED)
    return ("numerics", "chain_inputs", *args), analysis.chain_inputs, args


def host_ahead(arch: str) -> list[tuple]:
    """The host work of the arch's rows that no measurement decides: Fig 20's chains'
    inputs and CPU chains ((key, function, arguments) for the session's worker processes:
    core/hostpool.py), in the order the tests need them. (Tables 12-15's cells are made in
    place: bringing their tiles back cost as much as making them.)"""
    return [_chain_job(s, init) for t in rows.CHAIN_TYPES
            for s in [rows.mma(rows.CHAIN[t])] if not s.unsupported(arch)
            for init in rows.INITS]


def chain(session: Context, row: rows.ChainRow, arch: str) -> Measured:
    """Fig 20's curve of one type and initialisation: the mean l2 relative error at the
    reported chain lengths (and for FP16 the link where the chains overflow), with the
    paper's observations as invariants."""
    s = _supported(row.mma, arch)
    path = runner(session).verify(s)
    cs = curves(session, arch)
    c = cs[(row.in_type, row.init)]
    method = METHOD_CHAIN.format(instr=s.instruction) + f"; SASS {path.describe()}"
    figures = []
    for n in rows.CHAIN_REPORTED:
        key = f"{row.label}.l2err_n{n}"
        if c.overflowed[n - 1] > 0:
            figures.append(Measurement.of_value(key, float("inf"), "error", spread=None,
                                                method=method,
                                                detail=f"{c.overflowed[n - 1]:.1%} of chains "
                                                       f"overflowed (inf/nan) by link {n}"))
        else:
            figures.append(Measurement.of_value(
                key, c.mean_err[n - 1], "error", spread=None, method=method,
                data={"tolerance": tolerances.of("numerics", "chain")}))
    if row.in_type == "f16":
        ov = c.overflow_link()
        figures.append(Measurement.of_value(
            f"{row.label}.overflow_link", float(ov) if ov else float("nan"), "count", spread=None,
            method=method + "; first link after which >= 50% of chains hold inf/nan",
            data={"tolerance": tolerances.of("numerics", "overflows"), "overflowed": c.overflowed}))
    return Measured(*figures,
                    checks=analysis.chain_observations(row, cs, rows.CHAIN_LINKS))


def chain_figure(session: Context, arch: str,
                 artifact: Callable[[str, str], Path | None], scratch: Path) -> Path:
    """Fig 20 as a plot and a JSON curve in the run's report (or in `scratch` without one);
    returns the plot's path."""
    cs = curves(session, arch)
    if not cs:
        raise NotApplicable(f"{arch}: no chain kernel supported")
    dev = session.device
    png = artifact(f"numerics-chain-{arch}.png",
                   f"Chain matmul l2 relative error vs length ({dev.name}, {arch})") \
        or scratch / "chain.png"
    js = artifact(f"numerics-chain-{arch}.json", f"Chain matmul curves ({arch})") \
        or scratch / "chain.json"
    plot_chain(list(cs.values()), png,
               f"Chain matmul on {dev.name} ({arch}), {rows.CHAIN_TRIALS} chains")
    js.write_text(json.dumps(analysis.chain_json(cs), indent=1))
    return png


# --- bit-exact snapshots ------------------------------------------------------------------

def _known_layout_anomaly(session: Context, s: MmaRow, arch: str,
                          known: str) -> None:
    """A known layout anomaly must keep reproducing: an expected failure while it does, a
    failure (remove the entry, accept the snapshot) once it stops."""
    driver = session.device.driver
    try:
        analysis.layout_check(runner(session), s)
    except AssertionError as e:
        raise NoFigure(f"known anomaly on {arch} (driver {driver}): {known}: {str(e)[:600]}",
                       Result(f"numerics.layout.{s.name}", arch, Status.INFO,
                              detail=f"known anomaly (driver {driver}): {known}",
                              data={"probe": str(e)[:2000]})) from None
    raise AssertionError(f"{s.name} on {arch}: the known layout anomaly ({known}) no longer "
                         f"reproduces with driver {driver}: remove it from "
                         f"KNOWN_LAYOUT_ANOMALIES and accept the snapshot")


def tensor_core_bits(session: Context, record: Notes, name: str, arch: str) -> str:
    """The bits of D for fixed inputs (seeded normal tiles and edge tiles), after checking
    general random tiles against the float64 reference (the fragment layouts are right)."""
    s = _supported(rows.mma(name), arch)
    tc = runner(session)
    path = tc.verify(s)            # NotTensorCore fails with the SASS
    known = rows.KNOWN_LAYOUT_ANOMALIES.get((arch, name))
    if known:
        _known_layout_anomaly(session, s, arch, known)
    analysis.layout_check(tc, s)
    A, B, C = analysis.fixed_tiles(s)
    with np.errstate(all="ignore"):
        D = tc.run(s, A, B, C)
    return analysis.bits_text(s, arch, path, D)
