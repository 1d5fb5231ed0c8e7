"""FP8 wgmma numerics through the core: the kernels (Group "numerics_fp8", sm_90a) linked by
the driver once, verified (a QGMMA, no FPU arithmetic), the fragment layouts checked against
A@B+C, then the questions of fp8_questions as Measured rows, the bit-exact snapshot text and
the error growth with K (plotted against CPU models of the accumulator)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np

from ...core.build import Group
from ...core.probe import NotApplicable
from ...core.runner import Launch, Runner
from ...core.topic import Context, Notes
from ...results import tolerances
from ...results.judge import Measured, Measurement, Result, Status
from ...results.plots import draw, plain_log_ticks, pyplot
from . import analysis, reference
from . import fasi as fq
from . import fp8_questions as q
from . import fp8_wgmma as fw


LAYOUT_TOL = 2.0 ** -6                   # relative to |A||B| + |C|: a 14-bit accumulator's
                                         # truncation stays far below, a wrong layout not
METHOD = "Fasi et al. 2021 style probe on {instr} ({sass}), one 64x8 tile per case: {detail}"


def groups(arch: str) -> list[Group]:
    ps = fw.probes(arch)
    return [Group("numerics_fp8", fw.TARGET, ps, text=fw.module_text)] if ps else []


def static_probe(in_type: str, steps: int, arch: str):
    fw.require(arch, "static: ")
    return fw.probe(fw.wgmma_row(in_type, steps), arch)


def static_snapshot(checked) -> str:
    built, verdict = checked[0]
    p, tool = built.probe, checked.tool
    return (f"// {p.mma.instruction} x {p.mma.steps} ({p.arch}, {tool.name} {tool.version}): "
            f"{verdict.path.describe()}\n" + p.snapshot_text(built.functions))


# --- the tensor core ----------------------------------------------------------------------

def layout_check(tc, s) -> None:
    """Random tiles against the float64 reference: a wrong fragment or shared-memory layout
    gives O(1) errors. Raises AssertionError naming the first bad elements."""
    rng = np.random.default_rng(9)
    A = reference.to_type(rng.standard_normal((32, 64, s.k)).astype(np.float32), s.in_type)
    B = reference.to_type(rng.standard_normal((32, s.k, 8)).astype(np.float32), s.in_type)
    C = rng.standard_normal((32, 64, 8)).astype(np.float32)
    A, B, C = (x.astype(np.float64) for x in (A, B, C))
    D = tc.run(s, A, B, C)
    tol = LAYOUT_TOL * (np.abs(A) @ np.abs(B) + np.abs(C))
    bad = np.argwhere(~(np.abs(D - (A @ B + C)) <= tol))
    if bad.size:
        raise AssertionError(f"{s.name}: D differs from A@B+C beyond rounding at {len(bad)} of "
                             f"{D.size} elements (first {bad[:4].tolist()}): the shared-memory "
                             f"or accumulator fragment layout is not the PTX ISA's")


def _probe(session: Context, s: fw.Fp8WgmmaRow):
    arch = session.gpu.dev.arch
    probes = {p.mma.name: p for p in fw.probes(arch)}
    if s.name not in probes:
        raise NotApplicable(s.unsupported(arch) or s.name)
    return probes[s.name]


def _built(session: Context, s: fw.Fp8WgmmaRow):
    dev = session.gpu.dev
    probe = _probe(session, s)
    return session.runs.once(("numerics", "fp8_wgmma", "built", dev.driver, s.name),
                             lambda: session.builds.jit(probe, dev))


def verify(session: Context, s: fw.Fp8WgmmaRow):
    """The kernel's driver SASS through the verification door, once: a QGMMA path."""
    dev = session.gpu.dev
    return session.runs.once(
        ("numerics", "fp8_wgmma", "path", dev.driver, s.name),
        lambda: session.verify(_probe(session, s), _built(session, s).functions).path)


def run_bits(session: Context, s: fw.Fp8WgmmaRow, a_bits, b_bits, c_bits) -> np.ndarray:
    """D = A*B + C for T 64x8 tiles given as bit patterns, one launch (a warpgroup a tile)."""
    verify(session, s)
    name = f"numerics/{s.name}"
    session.gpu.ensure_alive(name)
    T = a_bits.shape[0]
    gab = Runner.to_device(fw.pack_ab(s, a_bits, b_bits))
    gc = Runner.to_device(fw.pack_c(c_bits))
    gd = Runner.zeros((T, fw.THREADS, s.n // 2), dtype=np.uint32)
    fn = _built(session, s).compiled.function(s.entry)
    session.runner.once(name, fn, Launch((T,), (fw.THREADS,)), (gab, gc, gd, np.uint32(T)))
    return fw.unpack_d(gd.get(), s.n)


def run_tiles(session: Context, s: fw.Fp8WgmmaRow, A, B, C=None) -> np.ndarray:
    A = np.asarray(A)
    if C is None:
        C = np.zeros((A.shape[0], s.m, s.n))
    d = run_bits(session, s, reference.encode(reference.to_type(A, s.in_type), s.in_type),
                 reference.encode(reference.to_type(B, s.in_type), s.in_type),
                 reference.encode(reference.to_type(C, "f32"), "f32"))
    return reference.decode(d, "f32")


def runner(session: Context) -> analysis.Operations:
    """The GPU's FP8 wgmma tensor core (an analysis.TensorCore of this session's
    functions), once per session; its layouts checked once per kernel before any figure."""
    dev = session.gpu.dev

    def make() -> analysis.Operations:
        fw.require(dev.arch, "hardware: ")
        session.builds.jit_groups(dev, groups(dev.arch))
        tc = analysis.Operations(
            run=lambda s, A, B, C=None: run_tiles(session, s, A, B, C),
            verify=lambda s: verify(session, s),
            sass_text=lambda s: _probe(session, s).snapshot_text(_built(session, s).functions))
        for t in fw.TYPES:
            layout_check(tc, fw.wgmma_row(t))
        return tc
    return session.runs.once(("numerics", "fp8_wgmma", dev.arch, dev.driver), make)


# --- the questions --------------------------------------------------------------------------

def answers(session: Context, in_type: str) -> dict:
    """Every answer for one input type, once per session."""
    def make() -> dict:
        tc, s = runner(session), fw.wgmma_row(in_type)
        res = {"products_exact": fq.ask_products_exact(tc, s),
               "subnormal_inputs": fq.ask_subnormal_inputs(tc, s),
               "accumulator_bits": q.ask_accumulator_bits(tc, s),
               "product_sum_bits": q.ask_product_sum_bits(tc, s)}
        bits = res["accumulator_bits"].value
        start_models(session, in_type, bits)      # host work beside the questions' launches
        res["extra_bits"] = q.extra_bits(res["accumulator_bits"])
        for via in ("c", "products"):
            res[f"rounding_{via}"] = q.ask_rounding(tc, s, via, bits)
        res["block_size"] = q.ask_block_size(tc, s, bits)
        res["order_invariant"] = fq.ask_order(tc, s, None)
        res.update({a.question: a for a in fq.ask_specials(tc, s)})
        return res
    return session.runs.once(("numerics", "fp8_wgmma", "answers", in_type), make)


def question(session: Context, record: Notes, row: q.Fp8Row, arch: str) -> Measured:
    """One answer as a characteristic (1/0, bits or a count); an undetermined one is noted
    and skipped, one that does not apply to the type (no Inf in e4m3) skipped."""
    fw.require(arch, "hardware: ")
    tc, s = runner(session), fw.wgmma_row(row.in_type)
    path = tc.verify(s)
    base, mode = row.asked
    got = answers(session, row.in_type).get(base)
    if got is None:
        raise NotApplicable(f"{row.question} does not apply to {row.in_type} (no such case: "
                            f"{'no infinity in e4m3' if 'inf' in row.question else 'see fasi'})")
    if mode:
        undetermined = got.detail.startswith("undetermined")
        value, unit = (None if undetermined else float(mode in got.modes)), "bool"
    else:
        value, unit = got.value, got.unit
    method = METHOD.format(instr=s.instruction, sass=path.describe(), detail=got.detail[:400])
    if value is None:
        record.note(Result(row.key, arch, Status.INFO, method=method, detail=got.detail[:300]))
        raise NotApplicable(f"{row.key}: {got.detail[:200]}")
    return Measured(Measurement.of_value(row.key, value, unit, spread=None, method=method,
                                         detail=f"consistent modes: {got.modes}" if mode else "",
                                         data={"tolerance": tolerances.of("numerics", unit),
                                               "modes": got.modes,
                                               "cases": [str(c) for c in got.cases[:40]]}))


# --- bit-exact snapshot -------------------------------------------------------------------

def bits_text(session: Context, in_type: str, arch: str) -> str:
    """D's bits for the fixed tiles (seeded normal tiles, edge tiles) and for the
    accumulator-bits cases (C = +-2^e plus a product of 1, e = 1..30)."""
    fw.require(arch, "hardware: ")
    tc, s = runner(session), fw.wgmma_row(in_type)
    path = tc.verify(s)
    A, B, C = analysis.fixed_tiles(s)
    with np.errstate(all="ignore"):
        D = tc.run(s, A, B, C)
    acc = answers(session, in_type)["accumulator_bits"]
    lines = ["// accumulator cases: e, bits of D for C = 2^e + 1x1, for C = -2^e + 1x1"]
    lines += [f"{e:2d} {_hex(p)} {_hex(n)}" for e, p, n in acc.cases]
    return analysis.bits_text(s, arch, path, D) + "\n".join(lines) + "\n"


def _hex(x: float) -> str:
    return f"{int(np.float32(x).view(np.uint32)):08x}"


# --- error growth with K ----------------------------------------------------------------

def k_growth(session: Context, in_type: str, arch: str,
             artifact: Callable[[str, str], Path | None] | None = None,
             scratch: Path | None = None) -> Measured:
    """Mean l2 relative error of A @ B over K (chained wgmma, f32 C) against the exact
    product, beside CPU models: the wgmma with the measured kept bits, and an exact f32
    accumulation; K = 256 also as one wgmma group of 8 (must equal the chained result bit for
    bit, else the register accumulator keeps more than its f32 value)."""
    fw.require(arch, "hardware: ")
    tc, s = runner(session), fw.wgmma_row(in_type)
    bits = answers(session, in_type)["accumulator_bits"].value

    def case(t: str, k: int, tiles: int) -> tuple:
        made = session.runs.take(_case_key(t, k, tiles), lambda: q.k_case(t, k, tiles))
        for x in made:                 # shared read-only, as k_case's own
            x.flags.writeable = False
        return made

    def make() -> dict:
        out = q.k_errors({"measured": tc}, s, cases=case)
        # the models were started when answers() measured the bits (or made ahead)
        out.update(session.runs.take(_models_key(in_type, bits),
                                     lambda: model_errors(in_type, bits)))
        return out
    curves = session.runs.once(("numerics", "fp8_k", in_type), make)
    measured = curves["measured"]
    models = {name: v for name, v in curves.items() if name != "measured"}
    checks = _group_check(tc, in_type)
    method = (f"A (64 x K) @ B (K x 8), normal(0,1) draws rounded to {in_type} (RNE), 8 tiles, "
              f"chained {s.instruction} over K/32 steps (C = previous D, f32), mean l2 "
              f"relative error against the exact product (math.fsum of the exact products)")
    figures = [Measurement.of_value(f"numerics.fp8_wgmma.{in_type}.k_error.k{k}", measured[k],
                                    "error", spread=None, method=method,
                                    data={"tolerance": tolerances.of("numerics", "k_errors"),
                                          "models": {m: v[k] for m, v in models.items()}})
               for k in q.K_REPORTED]
    _plot(artifact, scratch, in_type, arch, measured, models)
    return Measured(*figures, checks=checks)


def cpu_models(bits: float | None) -> dict:
    """The CPU models the measured error over K is drawn beside: an exact f32 accumulation
    and, with the measured kept bits, a truncated one."""
    out = {"f32 accumulation": _Model(40, "rn")}
    if bits:
        out[f"{int(bits)}-bit truncated accumulation"] = _Model(int(bits) - 24, "rz")
    return out


def _models_key(in_type: str, bits: float | None) -> tuple:
    return ("numerics", "fp8_k_models", in_type, bits)


def _case_key(in_type: str, k: int, tiles: int) -> tuple:
    return ("numerics", "fp8_k_case", in_type, k, tiles)


def model_errors(in_type: str, bits: float | None) -> dict:
    """The CPU models' errors over K for kept `bits` (pure host work, about a second a
    type)."""
    return q.k_errors(cpu_models(bits), fw.wgmma_row(in_type))


def start_models(session: Context, in_type: str, bits: float | None) -> None:
    """The CPU models' errors over K started on the session's host workers as soon as the
    kept bits are measured (unless made ahead for the bits the arch's expectations name,
    host_ahead): the GPU meanwhile answers the other questions and measures the chained
    wgmma."""
    session.runs.ahead(_models_key(in_type, bits), lambda: model_errors(in_type, bits))


def expected_bits(session: Context, arch: str, in_type: str) -> list[float]:
    """The kept bits the expectation files give this device (its value, else every whole
    number of the range): the CPU models worth making before the bits are measured."""
    key = f"numerics.fp8_wgmma.{in_type}.accumulator_bits"
    try:
        e = session.expectations.load(arch).get(key, session.device.name)
    except Exception:       # noqa: BLE001 - no entry, no guess: made once measured
        return []
    if e is None:
        return []
    if e.value is not None:
        return [float(e.value)]
    if e.range:
        return [float(b) for b in range(int(e.range[0]), int(e.range[1]) + 1)]
    return []


def host_ahead(session: Context, arch: str) -> list[tuple]:
    """The FP8 K growth's host work that no measurement decides: per type the inputs and
    exact products of every K, and the CPU models for the expected kept bits ((key,
    function, arguments) for the worker processes: core/hostpool.py)."""
    if not fw.probes(arch):
        return []
    jobs = [(_case_key(t, k, 8), q.k_case, (t, k, 8)) for t in fw.TYPES for k in q.K_GROWTH]
    return jobs + [(_models_key(t, b), model_errors, (t, b)) for t in fw.TYPES
                   for b in expected_bits(session, arch, t)]


class _Model:
    """A CPU model of the wgmma: per k block of 32, the products and C aligned to the largest
    exponent and truncated to 24 + extra bits, summed, rounded to f32 (reference.model_mma)."""

    def __init__(self, extra: int, rounding: str) -> None:
        self.extra, self.rounding = extra, rounding

    def run(self, s, A, B, C=None):
        C = np.zeros((A.shape[0], 64, 8)) if C is None else C
        return reference.model_mma(A, B, C, "f32", extra_bits=self.extra, block=32,
                                   rounding=self.rounding)


def _group_check(tc, in_type: str) -> list[str]:
    one, group = fw.wgmma_row(in_type, 1), fw.wgmma_row(in_type, max(fw.STEPS))
    A, B = q.k_inputs(in_type, group.k, 4, seed=77)
    C = np.random.default_rng(78).standard_normal((4, 64, 8)).astype(np.float32)
    chained = C.astype(np.float64)
    for k0 in range(0, group.k, one.k):
        chained = tc.run(one, A[:, :, k0:k0 + one.k], B[:, k0:k0 + one.k, :], chained)
    inside = tc.run(group, A, B, C.astype(np.float64))
    differ = int(np.count_nonzero(inside.astype(np.float32).view(np.uint32) !=
                                  chained.astype(np.float32).view(np.uint32)))
    if differ:
        return [f"{in_type}: {differ} of {inside.size} results of {max(fw.STEPS)} wgmma in one "
                f"group differ from the same wgmma chained through f32 C in memory: the "
                f"accumulator inside a group keeps more than its f32 register value"]
    return []


def _plot(artifact, scratch, in_type: str, arch: str, measured: dict, models: dict) -> None:
    png = artifact(f"numerics-fp8-k-error-{in_type}-{arch}.png",
                   f"FP8 wgmma ({in_type}) error against K") if artifact else None
    js = artifact(f"numerics-fp8-k-error-{in_type}-{arch}.json",
                  f"FP8 wgmma ({in_type}) error against K (data)") if artifact else None
    png = png or (scratch / f"k-error-{in_type}.png" if scratch else None)
    if js is not None:
        js.write_text(json.dumps({"measured": measured, "models": models}, indent=1))
    if png is not None:
        draw(k_error_figure, png, in_type, arch, measured, models)


def k_error_figure(in_type: str, arch: str, measured: dict, models: dict):
    """The measured error over K beside the CPU models' (log-log)."""
    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    ks = sorted(measured)
    ax.loglog(ks, [measured[k] for k in ks], "o-", label=f"wgmma {in_type} (measured)")
    for name, v in models.items():
        ax.loglog(ks, [v[k] for k in ks], "--", label=f"model: {name}")
    plain_log_ticks(ax)
    ax.set_xlabel("K (inner dimension)")
    ax.set_ylabel("mean l2 relative error vs exact")
    ax.set_title(f"FP8 wgmma accumulation error against K ({arch})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig
