"""The memory tables on the GPU: chases (chase.py) launched and fitted once per session, and each table row as a Measured (figures, the driver's SASS, the
row's invariants) for the hardware_row step; the static test's snapshot text; the module
the registry compiles (``groups``)."""
from __future__ import annotations

from dataclasses import asdict
from typing import Callable

from ...core.build import Group
from ...core.fit import Fit, fit
from ...core.probe import NotApplicable
from ...core.topic import Checked, Context
from ...results import tolerances
from ...results.judge import Measured, Measurement, Result, Status
from . import chase, kernels, plots, sequential
from .analysis import (Plateau, bank_banks, fill_ambiguity, fill_granularity, fill_model_error,
                       fill_spread,
                       human_bytes, knees, level_layout, plateaus, without_rising_edge)
from .capacity import (KNEE_REL, KNEE_RESOLUTION, Bisection, CacheKnee, find,
                       first_midpoint, levels)
from .chase import Curve
from .rows import (CHAIN_LENGTHS, DRAM_LAUNCHES, FILL_MODEL_LIMIT, FLAVOURS, LEVELS,
                   STAIRCASE_LAUNCHES, STAIRCASE_PLACES, STRIDES, BankRow, Capacity, ChaseKind,
                   LevelRow, Warm)


METHOD_CHAIN = ("pointer chase, 1 thread: slope of %clock64 cycles over {lengths} dependent "
                "{op} unrolled between two clock reads (clock amortised over the chain, never "
                "read per access), median of {reps} launches after a warm-up launch; footprint "
                "{fp}, {lines} pointers one per {stride} B in a random single cycle{warm}")
METHOD_LOOP = ("pointer chase as a nounroll loop (one {op} + counter add + compare + branch "
               "per iteration, verified), 1 thread: slope of %clock64 cycles over {lengths} "
               "iterations, median of {reps} launches; same footprint as the latency row")
METHOD_STORE = ("(st.shared + dependent ld.shared of the same word) per step minus the "
                "ld.shared chase latency: the time a store's data takes to become visible to "
                "a following load")
LENGTHS = "/".join(map(str, CHAIN_LENGTHS))
METHOD_KNEE = ("knee of the ld.global.ca pointer-chase staircase (random single cycle per "
               f"footprint, 3 points per doubling, slope over {LENGTHS} loads, median of "
               f"{STAIRCASE_LAUNCHES.least} launches past 1 MiB, split over "
               f"{STAIRCASE_PLACES} places of the buffer from a quarter of the L2 to the L2), "
               "bisected between two staircase points (geometric mid-points, the same "
               f"chase) to within {KNEE_RESOLUTION:.0%} of the footprint: the largest "
               "footprint whose "
               f"latency is at most {KNEE_REL:.0%} above the lower level's plateau "
               "(the median of its staircase points)")
METHOD_DRIVER = ("the driver's cudaDeviceProp.l2CacheSize beside the L2 capacity one SM's "
                 "ld.global.ca chase sees (memory.capacity.l2) and its near-partition "
                 "capacity (memory.capacity.l2_near)")
METHOD_FAR = ("median latency of the staircase's second L2 plateau (between the near-L2 knee "
              "and the device-memory knee), 1 thread on one SM")
WARM_TEXT = {Warm.EVERY: "; the whole cycle walked once before the clock in every launch",
             Warm.FIRST: "; the whole cycle walked once in the first launch (the L2 keeps it)",
             Warm.NONE: "; no warm-up, each launch continues the cycle (no line reused)"}
FILL_WHAT = "L1 fills from the L2 (ld.global.ca over an L2-resident region)"


def groups(arch: str) -> list[Group]:
    return [kernels.group(arch)]


def snapshot(checked: Checked) -> str:
    """The static test's snapshot: the probe's shortest-length kernel, as the compiler named
    in the first line emitted it."""
    (built, _), = checked
    p, tool = built.probe, built.tool
    return (f"// {p.name} ({p.arch}, {tool.name} {tool.version}), length "
            f"{p.snapshot_length()}\n" + p.snapshot_text(built.functions))


def _once(session: Context, key: tuple, make: Callable):
    """A measurement several tests share, made once per session."""
    return session.runs.once(("memory", *key), make)


# --- Table IV -----------------------------------------------------------------------------------

def fit_limits(level: LevelRow) -> dict:
    # device memory: every timed load goes to a different random line (DRAM page, bank and
    # TLB state differ), so per-launch slopes scatter more than for a cache hit
    return {"spread_abs": 1.0, "spread_rel": 0.25 if level.is_dram else 0.05}


def latency(session: Context, level: LevelRow, arch: str) -> Measured:
    """A Table IV row: the load-to-use latency (slope over unrolled dependent loads) and the
    chase loop's cycles per step, both on the row's chain; the shared store row also gives
    the store's own cost (derived)."""
    g = chase.geometry_of(session)
    # the next row's chain (of another footprint) built on the host while the GPU chases
    later = LEVELS[LEVELS.index(level) + 1:] if level in LEVELS else ()
    nxt = next((lv for lv in later if lv.footprint != level.footprint), None)
    if nxt is not None:
        session.runs.ahead(("memory", "layout", nxt.footprint.value),
                           lambda: level_layout(nxt, g))
    lay = _once(session, ("layout", level.footprint.value), lambda: level_layout(level, g))
    chain = kernels.chase_probe(level.flavour, arch, ChaseKind.CHAIN)
    loop = kernels.chase_probe(level.flavour, arch, ChaseKind.LOOP)
    reps = DRAM_LAUNCHES.of(session.repeats) if level.is_dram else session.repeats
    warm = level.policy
    unit, loop_unit = chase.verified(session, chain), chase.verified(session, loop)
    run = _once(session, ("chain", level.key),
                lambda: chase.chase(session, chain, lay, repeats=reps, warm=warm))
    lrun = _once(session, ("loop", level.key),
                 lambda: chase.chase(session, loop, lay, repeats=reps, warm=warm))
    f = fit(run.cycles, run.ops, **fit_limits(level))
    lf = fit(lrun.cycles, lrun.ops, **fit_limits(level))
    op = FLAVOURS[level.flavour].op_text
    # proposed for a new (measured) entry: device memory scatters more
    tolerance = tolerances.of("memory", "latency_dram" if level.is_dram else "latency")
    figures = [
        Measurement.of_fit(
            f"memory.latency.{level.key}", f, "cycles",
            method=METHOD_CHAIN.format(lengths=sorted(run.ops.values()), op=op, reps=reps,
                                       fp=human_bytes(lay.footprint), lines=lay.n,
                                       stride=lay.stride, warm=WARM_TEXT[warm]),
            data={"sass_unit": unit, "cycles": run.cycles, "footprint_bytes": lay.footprint,
                  "distinct_lines": lay.n, "timed_loads": run.timed_steps, "smids": run.smids,
                  "paper_row": level.paper, "geometry_notes": g.notes,
                  "tolerance": tolerance}),
        Measurement.of_fit(
            f"memory.loop.{level.key}", lf, "cycles",
            method=METHOD_LOOP.format(op=op, lengths=sorted(lrun.ops.values()), reps=reps),
            data={"sass_unit": loop_unit, "cycles": lrun.cycles,
                  "loop_cost_per_step": round(lf.value - f.value, 2), "tolerance": tolerance})]
    if level.key == "shared_store_load":
        figures.append(_shared_store(session, f, lay, reps, warm, arch))
    return Measured(*figures, sass=chain.snapshot_text(chase.module(session)[1]),
                    checks=_latency_checks(level, g, lay, run, f, lf))


def _shared_store(session, f: Fit, lay, reps: int, warm: Warm, arch: str) -> Measurement:
    """The store's cost: the store+load chase minus the load chase (same chain)."""
    probe = kernels.chase_probe("shared_ld", arch, ChaseKind.CHAIN)
    base = _once(session, ("chain", "shared_load"),
                 lambda: chase.chase(session, probe, lay, repeats=reps, warm=warm))
    bf = fit(base.cycles, base.ops)
    return Measurement.of_value("memory.latency.shared_store", f.value - bf.value, "cycles",
                                spread=f.spread + bf.spread, method=METHOD_STORE, detail="derived",
                                data={"tolerance": tolerances.of("memory", "shared_store")})


def _latency_checks(level: LevelRow, g, lay, run, f: Fit, lf: Fit) -> list[str]:
    checks = []
    if level.is_dram:
        # the cycle must be far larger than the L2 and no timed load may revisit a line
        if not (lay.footprint >= 2 * g.l2_bytes or g.notes):
            checks.append(f"device-memory chain of {lay.footprint} B is not 2x the L2 "
                          f"({g.l2_bytes} B): {g.notes}")
        if run.timed_steps > lay.n:
            checks.append(f"{run.timed_steps} timed loads over {lay.n} lines: a line was "
                          f"revisited ({(run.timed_steps, lay.n)})")
    if lf.value < f.value - max(2.0, 0.05 * f.value):
        checks.append(f"the chase loop ({lf.value:.1f} cycles/step) is cheaper than the "
                      f"unrolled chain ({f.value:.1f}): the loop is not serialised on the loads")
    return checks


# --- Table 10 -----------------------------------------------------------------------------------

def _bank_run(session: Context, row: BankRow):
    return _once(session, ("bank", row.name),
                 lambda: chase.bank(session, row, repeats=session.repeats))


def bank_conflicts(session: Context, row: BankRow, arch: str) -> Measured:
    """A Table 10 row: thread 0's slope over dependent conflicted loads; never cheaper than
    the row with half the ways."""
    run = _bank_run(session, row)
    f = fit(run.cycles, run.ops)
    checks = []
    if bank_banks(row) != max(1, row.ways):
        checks.append(f"{row}: the layout's conflict degree is {bank_banks(row)}, "
                      f"{max(1, row.ways)} intended")
    m = Measurement.of_fit(
        row.key, f, "cycles",
        method=f"one warp, thread t at byte m*B + t*{4 * row.ways} (k-way conflict by "
               f"construction), 1 x ld.shared.u{row.width} per step chasing a 4-position "
               f"cycle; slope of thread 0's %clock64 cycles over {LENGTHS} dependent loads, "
               f"median of {session.repeats} launches",
        data={"cycles": run.cycles, "sass_unit": chase.verified(session, run.probe)})
    half = row.half
    if half is not None:
        prev = _bank_run(session, half)
        pf = fit(prev.cycles, prev.ops)
        if f.value < pf.value - 1.0:
            checks.append(f"{row.name} ({f.value:.1f} cycles) is cheaper than {half.name} "
                          f"({pf.value:.1f}): the conflict degree is not what the layout "
                          f"intends")
    return Measured(m, checks=checks)


# --- the staircase ------------------------------------------------------------------------------

def staircase_knees(session: Context, artifact) -> tuple[Curve, dict]:
    """The staircase (measured once) and each knee bisected on it (once): CacheKnee ->
    Bisection, or why there is none; the curve and the bisection points drawn once into the report
    through `artifact` (the gpuchar_artifact fixture)."""
    sw: Curve = _once(session, ("staircase",), lambda: chase.staircase(session))

    def prepare(fs: list) -> None:     # bisection points' chains built while the GPU chases
        chase.chains_ahead(session, [f for f in fs if f and ("memory", "point", f)
                                     not in session.runs],
                           chase.layout_key, chase.stair_layout)

    def make() -> dict:
        lv = levels(sw.footprints, sw.latency)
        prepare([first_midpoint(k, sw.footprints, sw.latency, lv) for k in CacheKnee])
        return {k: find(k, sw.footprints, sw.latency, lv,
                        lambda f: _point(session, f).latency, prepare=prepare)
                for k in CacheKnee}
    found = _once(session, ("knees",), make)
    g = chase.geometry_of(session)
    _once(session, ("staircase_plot",), lambda: plots.save_staircase(
        artifact, sw, knees(sw.footprints, sw.latency), g, session.gpu.dev,
        [b for b in found.values() if isinstance(b, Bisection)]))
    return sw, found


def _point(session: Context, f: int) -> chase.StairPoint:
    return _once(session, ("point", f), lambda: chase.point(session, f))


def capacity(session: Context, row: Capacity, arch: str, artifact) -> Measured:
    """A cache capacity: the knee of the staircase bisected to KNEE_RESOLUTION by the rule
    of topics/memory/capacity.py (the rule, x and the plateau)."""
    g = chase.geometry_of(session)
    sw, found = staircase_knees(session, artifact)
    ps = plateaus(sw.footprints, sw.latency)
    data = {**sw.as_data(), "knees": [asdict(k) for k in knees(sw.footprints, sw.latency)],
            "plateaus": [asdict(p) for p in ps], "device_l2_bytes": g.l2_bytes,
            "device_l1_shared_bytes": g.l1_bytes, "notes": g.notes,
            "tolerance": tolerances.of("memory", "capacity")}
    if len(ps) < 2:
        return Measured(checks=[f"the staircase shows {len(ps)} latency plateau(s): {data}"])
    if row == Capacity.L1:
        return _l1(session, found[CacheKnee.L1], g, data)
    if row == Capacity.L2:
        return _l2(session, found, g, data, arch)
    if row == Capacity.L2_SEQUENTIAL:
        return _l2_sequential(session, found.get(CacheKnee.L2))
    return _near_far(session, sw, ps, found[CacheKnee.L2_NEAR], g, data)


def _bracket(b: Bisection) -> str:
    """Where a bisected capacity lies, and how well it is known."""
    return (f"capacity in [{human_bytes(b.lo)}, {human_bytes(b.hi)}) ({b.resolution:.1%} "
            f"wide, {len(b.steps)} bisection steps)")


def _of_driver(b: Bisection, driver: int) -> str:
    return f"; driver l2CacheSize {human_bytes(driver)}: {b.lo / driver:.3f} x"


def _past_driver(name: str, b: Bisection, driver: int) -> list[str]:
    """A chase cannot keep more lines than the L2 holds: a knee past the driver's size by
    more than the rule's margin is a wrong rule or a wrong attribute."""
    if driver and b.lo > driver * (1 + KNEE_REL):
        return [f"{name} knee at {b.lo} B exceeds the driver's l2CacheSize {driver} B by "
                f"more than {KNEE_REL:.0%}"]
    return []


def _figure(session: Context, key: str, b: Bisection, data: dict,
            extra: str = "") -> Measurement:
    steps = []
    for s in b.as_data()["steps"]:
        p = _point(session, s["footprint_bytes"])
        steps.append({**s, "spread_cycles": round(p.spread, 2), "warm": p.warm})
    detail = (f"{_bracket(b)}; plateau {b.plateau:.0f} cycles, on the level <= "
              f"{b.limit:.0f}, next level {b.above:.0f}" + extra)
    # the spread is the bracket the knee lies in: the bisection's resolution (a board reads
    # one bracket or the next from run to run: the nightly's change question allows it)
    return Measurement.of_value(key, float(b.lo), "bytes", spread=float(b.hi - b.lo),
                                method=METHOD_KNEE,
                                detail=detail,
                                data={**data, "bisection": {**b.as_data(), "steps": steps}})


def _l1(session: Context, b, g, data: dict) -> Measured:
    if isinstance(b, str):
        return Measured(checks=[f"the L1 knee: {b}: {data}"])
    checks = []
    if b.lo > g.l1_bytes:
        checks.append(f"L1 knee at {b.lo} B exceeds the unified L1/shared size {g.l1_bytes} B")
    if b.hi <= g.l1_bytes // 8:
        checks.append(f"L1 knee below {b.hi} B: far less than the {g.l1_bytes} B L1/shared")
    return Measured(_figure(session, "memory.capacity.l1", b, data), checks=checks)


def _l2(session: Context, found: dict, g, data: dict, arch: str) -> Measured:
    b = found[CacheKnee.L2]
    if isinstance(b, str):
        return Measured(checks=[f"the L2 knee: {b}: {data}"])
    driver = int(session.gpu.dev.l2_bytes or 0)
    checks = _past_driver("L2", b, driver)
    # a partitioned L2 (sm_80, sm_90) may show one SM only its near partition
    if b.hi <= g.l2_bytes // 4:
        checks.append(f"L2 knee below {b.hi} B: far less than the device's L2 "
                      f"({g.l2_bytes} B), even one partition of it")
    extra = _of_driver(b, driver) if driver else "; driver l2CacheSize unreadable"
    fig = _figure(session, "memory.capacity.l2", b, data, extra)
    fig.data["driver_l2_bytes"] = driver
    fig.data["ratio_to_driver"] = round(b.lo / driver, 4) if driver else None
    return Measured(fig, checks=checks, notes=[_driver_note(found, driver, arch)])


def _l2_sequential(session: Context, chased: Bisection | str | None) -> Measured:
    """The L2 capacity by a forward walk (sequential.py), beside the random chase's."""
    def measure(f: int) -> chase.StairPoint:
        return _once(session, ("sequential", f), lambda: sequential.point(session, f))
    sw = _once(session, ("sequential_sweep",), lambda: sequential.sweep(session, measure))

    def prepare(fs: list) -> None:  # the bisection's next walks built while the GPU chases
        chase.chains_ahead(session, [f for f in fs if f and ("memory", "sequential", f)
                                     not in session.runs],
                           sequential.layout_key, sequential.walk_layout)
    b = _once(session, ("sequential_knee",), lambda: sequential.knee(
        sw.footprints, sw.latency, lambda f: measure(f).latency, prepare=prepare))
    if isinstance(b, str):
        return Measured(checks=[f"the sequential L2 knee: {b}: {sw.as_data()}"])
    driver = int(session.gpu.dev.l2_bytes or 0)
    beside = (f"; the random chase's [{human_bytes(chased.lo)}, {human_bytes(chased.hi)})"
              if isinstance(chased, Bisection) else "; no random-chase figure this run")
    detail = (f"{_bracket(b)}; L2 plateau {b.plateau:.0f} cycles, on the level <= "
              f"{b.limit:.0f}, device memory {b.above:.0f}" + beside
              + (_of_driver(b, driver) if driver else ""))
    data = {"sweep": sw.as_data(), "bisection": b.as_data(), "driver_l2_bytes": driver,
            "random_chase": ({"lo": chased.lo, "hi": chased.hi}
                             if isinstance(chased, Bisection) else None),
            "tolerance": tolerances.of("memory", "capacity")}
    checks = _past_driver("sequential L2", b, driver)
    return Measured(Measurement.of_value(
        "memory.capacity.l2_sequential", float(b.lo), "bytes", spread=float(b.hi - b.lo),
        method=sequential.method(), detail=detail, data=data), checks=checks)


def _driver_note(found: dict, driver: int, arch: str) -> Result:
    """The driver's l2CacheSize beside what one SM's chase sees: the whole L2 and (with a
    near/far split) the near partition against half of it."""
    l2, near = found[CacheKnee.L2], found.get(CacheKnee.L2_NEAR)
    parts = [f"driver l2CacheSize {human_bytes(driver)}" if driver else
             "driver l2CacheSize unreadable (0)"]
    data: dict = {"driver_l2_bytes": driver, "chase_l2_bytes": l2.lo}
    if driver:
        data["ratio"] = round(l2.lo / driver, 4)
        parts.append(f"one SM's chase keeps {human_bytes(l2.lo)} in the L2 "
                     f"({data['ratio']:.3f} x)")
    if isinstance(near, Bisection):
        data["chase_l2_near_bytes"] = near.lo
        if driver:
            data["near_ratio_to_half"] = round(near.lo / (driver / 2), 4)
            parts.append(f"{human_bytes(near.lo)} at near-partition latency "
                         f"({data['near_ratio_to_half']:.3f} x half of it)")
    return Result("memory.capacity.l2_driver", arch, Status.INFO,
                  float(driver) if driver else None, "bytes", method=METHOD_DRIVER,
                  detail="; ".join(parts), data=data)


def _near_far(session: Context, sw: Curve, ps: list[Plateau], b, g, data: dict) -> Measured:
    """Near and far L2: two plateaus between the L1 and device memory; the near capacity is
    the near plateau's knee, bisected."""
    if len(ps) < 4 or isinstance(b, str):
        why = b if isinstance(b, str) else f"{len(ps)} plateaus"
        raise NotApplicable(f"near/far L2 not separated: {why}, no distinct far-L2 level "
                            f"({[round(p.latency) for p in ps]} cycles); not reported "
                            f"rather than guessed")
    near, far = without_rising_edge(ps[1], sw.footprints, sw.latency), ps[2]
    detail = (f"near L2 {near.latency:.0f} cycles up to {human_bytes(b.lo)}, far "
              f"{far.latency:.0f} up to {human_bytes(far.hi_bytes)} (SMs {sw.smids}); the far "
              f"plateau may mix far and near hits")
    # its noise: the plateau's range or its points' own per-repeat spreads, the larger (both
    # seen to dominate: docs/memory.md, lab notes)
    plateau = sw.latency[far.first:far.last + 1]
    noise = max(max(plateau) - min(plateau), *sw.spread[far.first:far.last + 1])
    checks = []
    if b.lo > g.l2_bytes // 2 * 1.3:
        checks.append(f"near L2 capacity {b.lo} B above 1.3 x half the L2 "
                      f"({(b.lo, g.l2_bytes)})")
    return Measured(
        Measurement.of_value("memory.latency.l2_far", far.latency, "cycles",
                             spread=float(noise), method=METHOD_FAR, detail=detail,
                             data={**data, "tolerance": tolerances.of("memory", "l2_far")}),
        _figure(session, "memory.capacity.l2_near", b, data, "; " + detail),
        checks=checks)


def fill(session: Context, row: str, arch: str) -> Measured:
    """The line/sector size: the smallest stride of a forward walk whose latency reaches 90%
    of the all-miss level; no figure unless the curve follows the fill model."""
    sw: Curve = _once(session, ("fill", row), lambda: chase.fill_sweep(session))
    size = fill_granularity(sw.footprints, sw.latency)
    if size is None:
        return Measured(checks=[f"no misses seen in the stride sweep ({FILL_WHAT}): "
                                f"{sw.as_data()}"])
    err = fill_model_error(sw.footprints, sw.latency, size)
    # the curve must follow the fill model (hit + stride/fill x (miss - hit)); a region that
    # sat partly in the far L2 partition deviated several times more than usual and read a
    # wrong size: not a fill size, so no number (docs/memory.md, lab notes)
    why = (f"the stride sweep does not follow the fill model: deviation {err:.0%} of "
           f"(miss - hit) > {FILL_MODEL_LIMIT:.0%}") if err > FILL_MODEL_LIMIT else \
        fill_ambiguity(sw.footprints, sw.latency, sw.spread, size)
    return Measured(Measurement.of_value(
        f"memory.geometry.{row}_fill_bytes", float(size), "bytes",
        spread=fill_spread(sw.footprints, sw.latency, sw.spread, size), unstable=why,
        method=f"stride sweep {list(STRIDES)} B, forward walk, slope over {LENGTHS} dependent "
               f"loads; {FILL_WHAT}; smallest stride reaching 90% of the all-miss latency",
        detail=f"curve vs fill model: max deviation {err:.0%} of (miss - hit)",
        data={**sw.as_data(), "model_error": round(err, 3),
              "tolerance": tolerances.of("memory", "fill_bytes")}))
