"""The instruction tables on the GPU: each probe JIT-linked by the driver (in the tables'
batch), its SASS verified, launched, fitted once per session; the figures of Tables I, II and
V as Measured rows for the hardware_row step."""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from ...core import sass, sassdiff, toolchain, topic
from ...core.build import Built, Group
from ...core.fit import Fit, fit
from ...core.probe import Probe
from ...core.runner import frame_plan, thread0_cycles
from ...core.topic import Context
from ...core.verify import ProbeInvalid, Verdict
from ...results.judge import Measured, Measurement, Result, Status
from . import kernels, rows


METHOD_LATENCY = ("slope of %clock64 cycles over dependent chains of {lengths} ops, "
                  "1 thread, median of {reps} launches after a warm-up")
METHOD_CPI = ("slope of %clock64 cycles over {lengths} independent ops (distinct operands), "
              "1 thread, median of {reps} launches after a warm-up")


def suite_probes(arch: str) -> list[Probe]:
    """Every probe the instruction tables build for `arch` (batched: compiled once)."""
    out = []
    for r in rows.TABLE_V:
        if r.supported(arch):
            continue
        if r.dep is not None:
            out.append(kernels.latency_probe(r, arch))
        if r.indep:
            out.append(kernels.cpi_probe(r, arch))
    out.append(kernels.table_i_probe(rows.row("add.u32"), arch, rows.TABLE_I_COUNTS))
    out += [kernels.clock_overhead_probe(arch, clock64=c) for c in (True, False)]
    return out


def groups(arch: str) -> list[Group]:
    return [Group("batch", arch, suite_probes(arch), split=True)]


@dataclass
class Run:
    """Raw cycles of one probe: chain length -> one sample per repeat (warm-up dropped)."""
    built: Built
    verdict: Verdict
    cycles: dict[int, list[int]]

    @property
    def probe(self) -> Probe:
        return self.built.probe

    def sass(self) -> str:
        return self.probe.snapshot_text(self.built.functions)

    def fit(self) -> Fit:
        return fit(self.cycles, self.probe.ops)


def measured(session: Context, probe: Probe) -> Run:
    """JIT (the tables' batch), verify the driver's SASS, launch: once per session."""
    def make() -> Run:
        built, verdict = topic.built(session, probe)
        records = session.runner.measure(frame_plan(probe, built.compiled, session.repeats))
        return Run(built, verdict, thread0_cycles(records))
    return session.runs.once(("instructions", probe.name, probe.arch, probe.digest), make)


def _method(text: str, probe: Probe, reps: int, note: str = "") -> str:
    """The method text; a row's note (what the figure measures) after it."""
    return text.format(lengths=sorted(probe.ops.values()), reps=reps) + \
        (f"; {note}" if note else "")


def figure(session: Context, probe: Probe, key: str, method: str,
           note: str = "") -> Measured:
    """A probe's slope as a characteristic, with the driver's SASS (snapshot) and whether it
    equals the offline ptxas's (the driver's JIT compiler is part of the driver)."""
    run = measured(session, probe)
    m = Measurement.of_fit(key, run.fit(), method=_method(method, probe, session.repeats, note),
                           data={"sass_unit": dict(run.verdict.unit), "cycles": run.cycles})
    jit_text = run.sass()
    try:
        # the ptxas of the driver's own CUDA version: the JIT is that compiler, compiling PTX
        # for a link (ptxas -c); the default whole-program mode's differences by class
        tool = toolchain.find("ptxas", probe.arch, session.device.cuda_driver_api)
        texts = {name: probe.snapshot_text(session.builds.offline(probe, t).functions)
                 for name, t in (("ptxas -c", toolchain.relocatable(tool)), ("ptxas", tool))}
        m.data["jit_equals_ptxas"] = texts["ptxas -c"] == jit_text
        m.data["ptxas"] = tool.version
        m.data["jit_vs_ptxas"] = {name: sassdiff.compare(jit_text, t).as_dict()
                                  for name, t in texts.items()}
    except (toolchain.ToolMissing, ProbeInvalid, toolchain.AssemblyError) as e:
        m.data["jit_equals_ptxas"] = None
        m.data["ptxas_error"] = str(e).splitlines()[0]
    return Measured(m, sass=jit_text)


def latency(session: Context, row: kernels.InstrRow, arch: str) -> Measured:
    """Latency: cycles per op of a dependent chain (Table V)."""
    return figure(session, kernels.latency_probe(row, arch), f"latency.{row.name}",
                  METHOD_LATENCY, row.latency_note)


def cpi(session: Context, row: kernels.InstrRow, arch: str) -> Measured:
    """Cycles per instruction of an independent sequence (Table V's figure)."""
    return figure(session, kernels.cpi_probe(row, arch), f"cpi.{row.name}", METHOD_CPI,
                  row.cpi_note)


def dependency(session: Context, row: kernels.InstrRow, arch: str) -> Measured:
    """Table II: a dependent chain costs at least as much per instruction as an independent
    sequence of the same instruction (pipeline latency against issue cost)."""
    dep_p, ind_p = kernels.latency_probe(row, arch), kernels.cpi_probe(row, arch)
    dep, ind = measured(session, dep_p).fit(), measured(session, ind_p).fit()
    checks = []
    if dep.value < ind.value - 0.25:
        checks.append(f"{row.name}: dependent chain {dep.value:.2f} cycles/op is cheaper than "
                      f"independent {ind.value:.2f}: the dependency is not being honoured")
    return Measured(
        Measurement.of_fit(f"latency.{row.name}", dep,
                           method=_method(METHOD_LATENCY, dep_p, session.repeats,
                                          row.latency_note)),
        Measurement.of_fit(f"cpi.{row.name}", ind,
                           method=_method(METHOD_CPI, ind_p, session.repeats, row.cpi_note)),
        checks=checks)


def clock_overhead(session: Context, arch: str, clock64: bool) -> Measured:
    """The reading of an empty region between two back-to-back clock reads (single readings
    by design: this is the fixed cost the differential method cancels). Table V's
    "mov.u32 clock" row is the 32-bit pair's reading."""
    run = measured(session, kernels.clock_overhead_probe(arch, clock64=clock64))
    samples = run.cycles[0]
    value = float(statistics.median(samples))
    keys = ["overhead.clock_read"] if clock64 else ["overhead.clock_read_32bit",
                                                    "cpi.mov.u32.clock"]
    reads = [i.text for r in sass.clock_reads(run.built.functions[run.probe.entries[0]])
             for i in r]
    return Measured(*[Measurement.of_value(
        key, value, "cycles" if key.startswith("overhead") else "cycles/op",
        spread=float(max(samples) - min(samples)),
        method="median cycles between two back-to-back clock reads (empty region)",
        data={"samples": samples, "sass": reads}) for key in keys])


def table_i(session: Context, arch: str, n: int) -> Measured:
    """CPI of n independent add.u32 = cycles(region) / n, as the paper measured it."""
    probe = kernels.table_i_probe(rows.row("add.u32"), arch, rows.TABLE_I_COUNTS)
    samples = measured(session, probe).cycles[n]
    return Measured(Measurement.of_value(
        f"table_i.cpi.n{n}", statistics.median(samples) / n, "cycles/op",
        spread=(max(samples) - min(samples)) / n,
        method="paper's method: cycles of one timed region of n independent add.u32 / n",
        data={"samples": samples}))


def paper_mapping(row: kernels.InstrRow, arch: str, unit: dict, tool: toolchain.Tool,
                  expected) -> Result | None:
    """The row's PTX->SASS mapping against what the paper printed (an info note)."""
    paper = expected.mappings.get(row.name, {}).get("paper") if expected else None
    if paper is None:
        return None
    return Result(f"sass.{row.name}", arch, Status.INFO, expected=str(paper), source="paper",
                  detail=f"ptxas {tool.version}: {unit}", test=row.name,
                  data={"paper": paper, "ptxas": tool.version, "unit": unit,
                        "differs": paper_agrees(paper, unit) is False})


def paper_agrees(paper: str, unit: dict) -> bool | None:
    """Do the opcodes we see match the paper's printed mapping? None when the paper printed no
    opcodes ("multiple instructions"). Counts are not compared (the paper's 'N*' notation)."""
    printed = {t.strip().lstrip("0123456789*").strip("()[] ").split(" ")[0].upper()
               for t in re.split(r"\+|\bor\b", paper) if t.strip()}
    printed = {p for p in printed if p and p not in ("MULTIPLE", "[MULTIPLE")}
    if not printed:
        return None
    return printed == set(unit)


