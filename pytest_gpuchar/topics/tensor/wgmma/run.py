"""wgmma in depth on the GPU: each row's loop kernels JIT-linked by the driver (Group
"wgmma_depth", sm_90a), verified (serialisation warnings in the JIT log and every kernel's
loop), launched on one SM with every number of warpgroups over three trip counts, fitted
once per session; the row's figures (completion latency, best throughput, achieved/peak, the
concurrency that reaches the peak, swizzle against no swizzle) as Measured rows."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ....core.build import Built, Group
from ....core.runner import Launch, Plan, Refused, Runner
from ....core import topic
from ....core.topic import Context
from ....results.judge import Measured, Measurement
from ....results.plots import draw, pyplot
from ..mma import operands
from ..tolerance import tol
from . import kernels as wd
from . import analysis as wa
from .rows import CHAIN, LATENCY, ROWS, DepthRow, counterpart


TRIPS = (128, 256, 384)
WARPGROUP = 128
METHOD = ("one block on one SM, W warpgroups, each running a counted loop: per trip "
          "wgmma.fence, C wgmma ({instr}, {operands}, K-major, swizzle "
          "{swizzle}) on C independent accumulators{rounds}, commit_group, wait_group w (0: the "
          "trip's "
          "own group; 1: the previous trip's, two groups in flight), wait_group 0 after the "
          "loop; SM cycles per trip = slope over trips {trips} of the block's span (max end - "
          "min start of the warps' %clock64: start skew and drain cancel), median of {reps} "
          "launches after a warm-up; driver-JIT SASS verified ({sass} x C{xs} + WARPGROUP.ARRIVE + "
          "WARPGROUP.DEPBAR per trip + named loop control)")


def groups(arch: str) -> list[Group]:
    if arch != "sm_90":
        return []
    return [Group("wgmma_depth", wd.TARGET, [wd.probe(r) for r in ROWS],
                  text=wd.module_text, split=True)]


def static_probe(r: DepthRow, arch: str) -> wd.DepthProbe:
    """The row's probe for the static check (sm_90: assembled for sm_90a); a skip elsewhere."""
    try:
        wd.require_wgmma(arch)
    except wd.NoWgmma as e:
        raise wd.NoWgmma(f"static: {e}") from None
    return wd.probe(r)


def snapshot(checked) -> str:
    """The static snapshot: the compiler, then every config's kernel."""
    built, _ = checked[0]
    tool = checked.tool
    return (f"// {built.probe.name} ({built.probe.arch}, {tool.name} {tool.version}): "
            f"{len(built.probe.entries)} loop kernels\n"
            + built.probe.snapshot_text(built.functions))


# --- the launches -------------------------------------------------------------------------

def inputs(r: DepthRow, name: str, seed: int = 0x3D9) -> tuple[np.ndarray, np.ndarray]:
    """(shared-memory words: random non-zero values of the type, per-thread metadata: valid
    2:4 groups for a sparse row, validated before any launch; zeros otherwise)."""
    rng = np.random.default_rng(seed)
    fill = operands.draw_regs(r.reg_kind, wd.layout(r).total // 4, rng).astype(np.uint32)
    meta = np.zeros(wd.THREADS_MAX, np.uint32)
    if r.sparse:
        meta = operands.draw_regs(f"meta.{r.meta}", wd.THREADS_MAX, rng).astype(np.uint32)
        operands.validate_sparse_metadata(meta, r.meta, name)
    return fill, meta


def launch(runner: Runner, p: wd.DepthProbe, compiled, reps: int,
           skipped: dict) -> dict[tuple[int, int], dict]:
    """Every (config, warpgroups) x trip count, 1 + reps launches each (one batch, one wait):
    {(config key, warpgroups): {trip: [(starts, ends) per repeat]}}. A block size the
    kernel's registers or the driver refuse goes to `skipped`."""
    fill, meta = inputs(p.row, p.name)
    d_fill, d_in = Runner.to_device(fill), Runner.to_device(meta)
    d_res = Runner.zeros(wd.THREADS_MAX, dtype=np.uint32)
    plans, labels = [], []
    for key, entry in sorted(p.entries.items()):
        fn = compiled.function(entry)
        limit = int(getattr(fn, "max_threads_per_block", wd.THREADS_MAX) or wd.THREADS_MAX)
        for wg in p.row.warpgroups:
            label = f"{p.config(key).tag}@wg{wg}"
            if wg * WARPGROUP > limit:
                skipped[label] = f"{wg * WARPGROUP} threads exceed the kernel's limit {limit}"
                continue
            plans.append(Plan(p.name, {t: fn for t in TRIPS}, Launch((1,), (wg * WARPGROUP,)),
                              lambda t: (lambda r, rec: (rec, d_res, d_fill, d_in,
                                                         np.uint32(t))),
                              reps, record=(wg * 4, wd.REC_WORDS)))
            labels.append((key, wg, label))
    res: dict = {}
    for (key, wg, label), out in zip(labels, runner.run(plans, name=p.name,
                                                        skip_refused=True)):
        if isinstance(out, Refused):
            skipped[label] = f"launch refused: {out.why}"
            continue
        res[(key, wg)] = {t: [(h[:, 0], h[:, 1]) for h in out.timed(t).astype(np.int64)]
                          for t in TRIPS}
    return res


@dataclass
class RowRun:
    probe: wd.DepthProbe
    built: Built
    points: list
    trips: dict                      # config tag -> the verified loop's accounting
    skipped: dict = field(default_factory=dict)
    repeats: int = 0                 # timed launches per trip count

    def point(self, config, warpgroups: int) -> wa.Point | None:
        return next((p for p in self.points if p.config == config
                     and p.warpgroups == warpgroups), None)


def row_run(session: Context, r: DepthRow, arch: str) -> RowRun:
    wd.require_wgmma(arch)
    p = wd.probe(r)

    def make() -> RowRun:
        built = topic.linked(session, p, groups)
        wd.check_wgmma_log(p.name, built.compiled.info_log)
        verdict = session.verify(p, built.functions)
        skipped: dict = {}
        raw = launch(session.runner, p, built.compiled, session.repeats, skipped)
        points = [wa.point(r, p.config(k), wg, recs) for (k, wg), recs in sorted(raw.items())]
        return RowRun(p, built, points, verdict.trips, skipped, session.repeats)
    return session.runs.once(("tensor", "wgmma_depth", r.name, arch, p.digest), make)


# --- the figures --------------------------------------------------------------------------

def _figure(key: str, value, spread: float | None, why: str, unit: str, method: str,
            data: dict) -> Measurement:
    return Measurement.of_value(key, value, unit, spread=spread, unstable=why, method=method,
                                data=data)


def _method(r: DepthRow, reps: int) -> str:
    operands = ("A from registers (loaded once before the clock), B from shared memory"
                if r.a_regs else "A and B from shared memory")
    rounds = " (S rounds of them: S = 1, or sS at the end of the config tag)" if _xs(r) else ""
    return METHOD.format(instr=r.instruction(), operands=operands, swizzle=r.swizzle,
                         trips=list(TRIPS), reps=reps, sass=r.sass, xs=_xs(r), rounds=rounds)


def _xs(r: DepthRow) -> str:
    """" x S" in the methods of rows with a config of S > 1 rounds per trip."""
    return " x S" if any(c.steps > 1 for c in r.configs) else ""


def _latency(r: DepthRow, run: RowRun, method: str) -> list[Measurement]:
    pt = run.point(LATENCY, 1)
    if pt is None:
        return []
    return [_figure(f"{r.key}.completion_latency", pt.warp_trip_cycles, pt.warp_spread, pt.why,
                    "cycles",
                    "cycles per trip of the loop whose trip is one wgmma from fence to "
                    "wait_group 0 complete (1 warpgroup, one accumulator; the trip's loop "
                    f"control {run.trips[LATENCY.tag]['loop_control']} included; the "
                    "completion latency, not the issue interval the papers print as wgmma "
                    "latency); " + method,
                    {"tolerance": tol("depth_latency"), "spans": pt.spans})]


def _peak(r: DepthRow, run: RowRun, method: str) -> list[Measurement]:
    top = wa.best(run.points)
    data = {"grid": wa.grid(run.points), "skipped": run.skipped, "peak": r.peak,
            "peak_source": r.peak_source}
    if top is None:
        return [_figure(f"{r.key}.throughput", float("nan"), None, "no stable point",
                        "flop/clk/SM", method, data)]
    over = wa.higher_unstable(run.points, top)
    why = (f"a higher point was unstable: {over.throughput:.0f} at {over.label} ({over.why})"
           if over else "")
    where = f"best stable point {top.label} ({wa.in_flight(top)} wgmma in flight per SM)"
    out = [_figure(f"{r.key}.throughput", top.throughput, top.spread, why, "flop/clk/SM",
                   f"{where}: 2*64*N*K per wgmma x C{_xs(r)} x W / SM cycles per trip; " + method,
                   {**data, "tolerance": tol("depth_rate"), "best": top.label}),
           _figure(f"{r.key}.achieved_peak", top.throughput / r.peak, top.spread / r.peak, why,
                   "ratio", f"throughput / documented peak {r.peak} FLOP/clk/SM "
                   f"({r.peak_source}); {where}", {"tolerance": tol("depth_fraction")})]
    if r.group == "small_n":
        out += _concurrency(r, run.points)
    return out


def _concurrency(r: DepthRow, points: list) -> list[Measurement]:
    """The small-N rows: one chain on one warpgroup (today's figure) and the fewest wgmma in
    flight per SM that reach 95% of the peak (absent when no configuration reaches it)."""
    out = []
    base = next((p for p in points if p.config == LATENCY and p.warpgroups == 1), None)
    if base is not None:
        out.append(_figure(f"{r.key}.latency_bound_peak_fraction", base.throughput / r.peak,
                           base.spread / r.peak, base.why, "ratio",
                           "1 warpgroup, one wgmma per trip waited for (c1w0): throughput / "
                           "documented peak", {"tolerance": tol("depth_fraction")}))
    hit = wa.concurrency_to(points, 0.95, r.peak)
    if hit is not None:
        out.append(_figure(f"{r.key}.in_flight_for_95pct", float(wa.in_flight(hit)),
                           wa.concurrency_spread(points, 0.95, r.peak), "",
                           "count", f"fewest wgmma in flight per SM (warpgroups x chains x "
                           f"groups in flight) whose stable throughput reaches 95% of the peak: "
                           f"{hit.label}", {"tolerance": tol("depth_point"), "point": hit.label}))
    return out


def _ratio(key: str, top: wa.Point, ref: wa.Point, what: str) -> Measurement:
    """A best stable throughput over another row's, with the spread of both carried."""
    value = top.throughput / ref.throughput
    spread = value * (top.spread / top.throughput + ref.spread / ref.throughput)
    return _figure(key, value, spread, "", "ratio", f"{what} ({top.throughput:.0f} at "
                   f"{top.label} / {ref.throughput:.0f} at {ref.label})",
                   {"tolerance": tol("depth_fraction")})


def _over(session: Context, arch: str, run: RowRun, other: DepthRow, key: str,
          what: str) -> list:
    """This row's best stable throughput over `other`'s (measured this session), or nothing
    when either has no stable point."""
    top, ref = wa.best(run.points), wa.best(row_run(session, other, arch).points)
    if top is None or ref is None:
        return []
    return [_ratio(key, top, ref, what)]


def _swizzle(session: Context, r: DepthRow, arch: str, run: RowRun) -> list:
    base = counterpart(r, swizzle="none") if r.swizzle != "none" else None
    if base is None:
        return []
    return _over(session, arch, run, base, f"{r.key}.throughput_vs_none", f"best stable "
                 f"throughput with {r.swizzle} swizzle over the same wgmma without swizzle "
                 f"({base.name})")


def _vs_dense(session: Context, r: DepthRow, arch: str, run: RowRun) -> list:
    """A sparse row of the operand-source rows over the dense row of its N, operand source
    and swizzle: the speed-up 2:4 sparsity gives (2 at the documented peaks)."""
    dense = counterpart(r, sparse=False) if r.sparse and CHAIN in r.configs else None
    if dense is None:
        return []
    return _over(session, arch, run, dense, f"{r.key}.speedup_vs_dense", f"best stable "
                 f"throughput (dense-equivalent FLOP) of the sparse wgmma over the dense "
                 f"{dense.name}, same N, operand source ({r.source}) and swizzle, both this "
                 f"session")


def _interval(r: DepthRow, run: RowRun) -> list[Measurement]:
    """The rows with the chain loop: the issue interval of one warpgroup's accumulator chain
    (the papers' wgmma "latency") and the shared-memory operand bytes per clock the best
    point implies."""
    if CHAIN not in r.configs:
        return []
    out = []
    pt = run.point(CHAIN, 1)
    if pt is not None and pt.trip_cycles > 0:
        per = pt.trip_cycles / CHAIN.steps
        out.append(_figure(
            f"{r.key}.cycles_per_wgmma", per, per * pt.spread / pt.throughput, pt.why,
            "cycles/op", f"issue interval: SM cycles per trip / {CHAIN.steps} of the loop whose "
            f"trip is wgmma.fence, {CHAIN.steps} wgmma chained through one accumulator, "
            f"commit_group, wait_group 1 (1 warpgroup; loop control "
            f"{run.trips[CHAIN.tag]['loop_control']} included): what Luo et al. 2024 Tables "
            f"VIII-IX and arXiv:2512.02189 Table V print as wgmma latency, as the "
            f"tensor.wgmma.*.cycles_per_wgmma loop; not the completion latency; " + _method(r, run.repeats),
            {"tolerance": tol("depth_latency"), "trip_cycles": round(pt.trip_cycles, 2)}))
    top = wa.best(run.points)
    if top is not None:
        per = r.flop / top.throughput            # SM cycles per wgmma at the best point
        rate = r.smem_operand_bytes / per
        over = wa.higher_unstable(run.points, top)
        why = f"a higher point was unstable: {over.label} ({over.why})" if over else ""
        out.append(_figure(
            f"{r.key}.smem_operand_rate", rate, rate * top.spread / top.throughput, why,
            "B/clk/SM", f"bytes of the operands the wgmma names in shared memory "
            f"({r.smem_operand_bytes} B: {'B' if r.a_regs else 'A and B'}; the metadata is a "
            f"register) per SM cycle per wgmma at the best stable point {top.label} "
            f"({per:.1f} cycles per wgmma): what shared memory delivers if each wgmma reads "
            f"its operands once (an inference from the operand sizes, not a count of shared-"
            f"memory traffic; shared memory delivers at most 128 B/clk/SM: 32 banks x 4 B)",
            {"tolerance": tol("depth_rate"), "cycles_per_wgmma_at_best": round(per, 2),
             "smem_operand_bytes": r.smem_operand_bytes, "best": top.label}))
    return out


def row_figures(session: Context, r: DepthRow, arch: str, artifact=None) -> Measured:
    run = row_run(session, r, arch)
    method = _method(r, run.repeats)
    figures = (_latency(r, run, method) + _interval(r, run) + _peak(r, run, method)
               + _swizzle(session, r, arch, run) + _vs_dense(session, r, arch, run))
    if r.group == "small_n":
        _plot(artifact, r, run, arch)
    return Measured(*figures, sass=run.probe.snapshot_text(run.built.functions))


def _plot(artifact, r: DepthRow, run: RowRun, arch: str) -> None:
    path = artifact(f"tensor-wgmma-depth-{r.name}-{arch}.png",
                    f"wgmma {r.name} on {arch}: achieved/peak over warpgroups per config") \
        if artifact else None
    if path is None:
        return
    lines = []
    for c in r.configs:
        pts = sorted((p for p in run.points if p.config == c), key=lambda p: p.warpgroups)
        if pts:
            lines.append(([p.warpgroups for p in pts], [p.throughput / r.peak for p in pts],
                          any(p.unstable for p in pts),
                          f"{c.chains} in flight, wait_group {c.wait}"))
    draw(depth_figure, path, r.name, arch, lines)


def depth_figure(name: str, arch: str, lines: list[tuple[list, list, bool, str]]):
    """Achieved/peak over warpgroups, a line per (chains in flight, wait_group) config
    (crosses where a point was unstable)."""
    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    for x, y, unstable, label in lines:
        ax.plot(x, y, marker="x" if unstable else "o", label=label)
    ax.set_xlabel("warpgroups per SM")
    ax.set_ylabel("achieved / peak")
    ax.set_ylim(0, 1.1)
    ax.set_title(f"wgmma {name} ({arch})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return fig
