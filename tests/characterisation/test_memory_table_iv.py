"""Table IV and section IV-B of the Ampere paper: memory latency by pointer chasing.

Rows (memory.LEVELS): L1 hit (ld.global.ca, and plain ld.global), the read-only path
(ld.global.nc), L2 hit (ld.global.cg), device memory (ld.global.cv, and ld.global.ca over the
same footprint of >= 4x the L2), shared-memory load and store, the constant cache. Each row
records two figures: the load-to-use latency (slope over unrolled dependent loads) and the chase
loop's cycles per step (slope over iterations of a nounroll loop holding one load), so the cost
the loop itself adds is visible beside the latency. The static test checks every memory probe's
SASS offline (exact opcode with its cache operator, count, dependence depth) and snapshots it.
"""
from __future__ import annotations

import pytest

from pytest_gpuchar import measure, memory, sass, toolchain
from pytest_gpuchar.plugin import assert_result
from pytest_gpuchar.verify import ProbeInvalid

PROBES = [pytest.param(f, k, id=f"{k}.{f}") for f in memory.FLAVOURS for k in ("chain", "loop")] + \
    [pytest.param("bank", w, id=f"bank.u{w}") for w in (32, 64)]
LEVELS = [pytest.param(lv, id=lv.key) for lv in memory.LEVELS]


def _probe(name: str, kind, arch: str):
    if name == "bank":
        return memory.bank_probe(memory.BankRow(kind, 1 if kind == 32 else 2), arch)
    return memory.chase_probe(name, arch, kind)


@pytest.mark.static
@pytest.mark.parametrize("name, kind", PROBES)
def test_memory_probe_sass(arch, name, kind, offline_tools, sass_snapshot):
    """The probe assembles for `arch` (all memory probes in one ptxas run), its timed region
    holds exactly the intended SASS, and the SASS matches this compiler's snapshot."""
    probe = _probe(name, kind, arch)
    tool, functions = memory.static_functions(arch)
    try:
        unit = memory.verify(probe, functions)
    except (ProbeInvalid, sass.RegionError) as e:
        pytest.fail(str(e))
    assert unit, f"{probe.name}: empty verdict"
    n = min(probe.entries)
    text = f"// {probe.name} ({arch}, {tool.name} {tool.version}), length {n}\n" + \
        sass.normalise(functions[probe.entries[n]])
    assert text == sass_snapshot(toolchain.compiler_tag(tool))


def _fit_limits(level: memory.Level) -> dict:
    # device memory: every timed load goes to a different random line (DRAM page, bank and
    # TLB state differ), so per-launch slopes scatter more than for a cache hit
    return {"spread_abs": 1.0, "spread_rel": 0.25 if level.footprint == "dram" else 0.05}


@pytest.mark.hardware
@pytest.mark.parametrize("level", LEVELS)
def test_table_iv_latency(arch, level, gpu, gpuchar, record, sass_snapshot):
    s = memory.session_for(gpuchar)
    g = s.geo
    lay = memory.measured(gpuchar, ("layout", level.footprint),
                          lambda: memory.level_layout(level, g))
    chain = memory.chase_probe(level.flavour, arch, "chain")
    loop = memory.chase_probe(level.flavour, arch, "loop")
    reps = max(gpuchar.repeats, 15) if level.footprint == "dram" else gpuchar.repeats
    warm = "none" if not level.warm else ("first" if level.footprint == "l2" else "every")
    unit = s.verified(chain)
    loop_unit = s.verified(loop)
    run = memory.measured(gpuchar, ("chain", level.key),
                          lambda: s.chase(chain, lay, repeats=reps, warm=warm))
    lrun = memory.measured(gpuchar, ("loop", level.key),
                           lambda: s.chase(loop, lay, repeats=reps, warm=warm))
    fit = measure.fit(run.cycles, run.ops, **_fit_limits(level))
    lfit = measure.fit(lrun.cycles, lrun.ops, **_fit_limits(level))
    op = memory.FLAVOURS[level.flavour].ptx_op.replace("{p}", "p").replace("\n", " ")
    warm_text = {"every": "; the whole cycle walked once before the clock in every launch",
                 "first": "; the whole cycle walked once in the first launch (the L2 keeps it)",
                 "none": "; no warm-up, each launch continues the cycle (no line reused)"}[warm]
    fp = memory.human_bytes(lay.footprint)
    method = memory.METHOD_CHAIN.format(lengths=sorted(run.ops.values()), op=op, reps=reps,
                                        fp=fp, lines=lay.n, stride=lay.stride, warm=warm_text)
    data = {"sass_unit": unit, "cycles": run.cycles, "footprint_bytes": lay.footprint,
            "distinct_lines": lay.n, "timed_loads": run.timed_steps, "smids": run.smids,
            "paper_row": level.paper, "geometry_notes": g.notes,
            # proposed for a new (measured) entry: device memory scatters more
            "tolerance": {"abs": 1.0, "rel": 0.1 if level.footprint == "dram" else 0.05}}
    r = record(f"memory.latency.{level.key}", arch, fit=fit, unit="cycles", method=method,
               data=data)
    lr = record(f"memory.loop.{level.key}", arch, fit=lfit, unit="cycles",
                method=memory.METHOD_LOOP.format(op=op, lengths=sorted(lrun.ops.values()),
                                                 reps=reps),
                data={"sass_unit": loop_unit, "cycles": lrun.cycles,
                      "loop_cost_per_step": round(lfit.value - fit.value, 2),
                      "tolerance": data["tolerance"]})
    results = [r, lr]
    if level.key == "shared_store_load":
        base = memory.measured(gpuchar, ("chain", "shared_load"), lambda: s.chase(
            memory.chase_probe("shared_ld", arch, "chain"), lay, repeats=reps, warm=warm))
        bfit = measure.fit(base.cycles, base.ops)
        st = fit.value - bfit.value
        sr = record("memory.latency.shared_store", arch, st, "cycles",
                    method="(st.shared + dependent ld.shared of the same word) per step minus "
                           "the ld.shared chase latency: the time a store's data takes to "
                           "become visible to a following load", detail="derived",
                    data={"tolerance": {"abs": 2.0, "rel": 0.1}})
        sr.spread = fit.spread + bfit.spread
        results.append(sr)
    if level.footprint == "dram":
        # the cycle must be far larger than the L2 and no timed load may revisit a line
        assert lay.footprint >= 2 * g.l2_bytes or g.notes, g.notes
        assert run.timed_steps <= lay.n, (run.timed_steps, lay.n)
    jit_text = sass.normalise(s.functions[chain.entries[min(chain.entries)]])
    assert jit_text == sass_snapshot(f"jit-driver-{gpu.driver}")
    for x in results:
        assert_result(x)
    assert lfit.value >= fit.value - max(2.0, 0.05 * fit.value), (
        f"the chase loop ({lfit.value:.1f} cycles/step) is cheaper than the unrolled chain "
        f"({fit.value:.1f}): the loop is not serialised on the loads")
