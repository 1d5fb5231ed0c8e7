"""The tensor probe types: the counted-loop verification on synthetic SASS (the offline ptxas
checks run in the static suite), its loop accounting, the trip counts and the per-type
measurement parameters (CPU only)."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.sass import parse_instr
from pytest_gpuchar.core.verify import ProbeInvalid
from pytest_gpuchar.topics.tensor.mma import kernels, probes, rows
from pytest_gpuchar.topics.tensor.wgmma import kernels as wgmma_depth

TRIPS = (10, 20, 30)


def _raw(per_step, warps, trips=TRIPS, steps=rows.STEPS, reps=5, skew=3):
    rng = np.random.default_rng(0)
    return {t: [(t0 := rng.integers(0, skew, warps).astype(float),
                 t0 + 50 + t * steps * per_step) for _ in range(reps)] for t in trips}


def _function(name: str, body: list[str], *, before: list[str] = (), after: list[str] = (),
              control: list[str] | None = None) -> sass.Function:
    """nvdisasm-like text of a timed loop: clock read, `before`, the loop label, `body`, the
    loop control (counter down, compare, branch back), `after`, clock read."""
    control = ["UIADD3 UR8, UR8, -0x1, URZ", "ISETP.NE.U32.AND P0, PT, RZ, UR8, PT",
               "@P0 BRA `(.L_x_0)"] if control is None else control
    lines = ["CS2R R40, SR_CLOCKLO", "ULDC UR8, c[0x0][0x228]", *before]
    lines += [".L_x_0:", *body, *control, *after, "CS2R R42, SR_CLOCKLO", "EXIT"]
    text = "\n".join(ln if ln.endswith(":") else f"        /*{16 * k:04x}*/ {ln} ;"
                     for k, ln in enumerate(lines))
    return sass.parse(f"//--------------------- .text.{name} ---------\n{name}:\n{text}")[name]


def _hmma_loop(p, chains: int, depth_ok: bool = True, filler: bool = True) -> list[str]:
    """p.steps steps of `chains` HMMA chains (one accumulator each), a never-executed filler
    after each step. Not depth_ok: every HMMA adds to a register the loop never writes (the
    chains cut into single steps, depth 1 whatever p.steps is)."""
    body = []
    for _ in range(p.steps):
        for c in range(chains):
            acc = 100 + 4 * c
            src = acc if depth_ok else 28 + 4 * c
            body.append(f"HMMA.16816.F32 R{acc}, R20, R24, R{src}")
        if filler:
            body.append("@!UPT UIADD3 URZ, URZ, URZ, URZ")
    return body


def test_loop_verification_accounts_the_loop_control():
    """One loop of exactly steps x ILP HMMA per trip, the never-executed filler dropped, the
    loop control named (it runs in every trip: its cost is in the slope)."""
    p = kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_90", 2)
    v = p.check({p.entries[p.steps]: _function("k", _hmma_loop(p, 2))})
    assert v.unit == {"HMMA.16816.F32": 1.0}
    per_trip = 2 * p.steps                  # steps x ILP 2, one HMMA per mma.sync
    assert v.loops == {p.steps: {"tensor_per_trip": per_trip, "loop_control": {
        "UIADD3": 1, "ISETP.NE.U32.AND": 1, "BRA": 1}, "body_instructions": per_trip + 3}}
    assert v.accounting() == {str(p.steps): v.loops[p.steps]}


# `why` is a function of the probe: the counts follow its steps (rows.STEPS); the depth of 3
# is the loop control's own chain (UIADD3 -> ISETP -> BRA)
@pytest.mark.parametrize("body, before, why", [
    pytest.param(lambda p: _hmma_loop(p, 2)[:-2], [], lambda p: f"wanted {2 * p.steps} of each",
                 id="one-short"),
    pytest.param(lambda p: _hmma_loop(p, 2) + ["STG.E [R2.64], R4"], [],
                 lambda p: "other instructions", id="other-instruction"),
    pytest.param(lambda p: _hmma_loop(p, 2)[1:], ["HMMA.16816.F32 R4, R20, R24, R4"],
                 lambda p: f"wanted {2 * p.steps}", id="one-hoisted"),
    pytest.param(lambda p: _hmma_loop(p, 2, depth_ok=False), [],
                 lambda p: f"depth is 3 instructions, less than the {p.steps} chained steps",
                 id="chains-shortened"),
])
def test_loop_verification_rejects(body, before, why):
    p = kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_90", 2)
    assert p.steps == rows.STEPS
    with pytest.raises(ProbeInvalid, match=why(p)):
        p.check({p.entries[p.steps]: _function("k", body(p), before=before)})


def test_a_region_without_a_loop_is_not_measured():
    p = kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_90", 1)
    unrolled = _function("k", _hmma_loop(p, 1), control=[])
    with pytest.raises((ProbeInvalid, sass.RegionError), match="loop"):
        p.check({p.entries[p.steps]: unrolled})


def test_filler_is_dropped_with_the_labels_reindexed():
    f = _function("k", ["NOP", "HMMA.16816.F32 R4, R20, R24, R4",
                        "@!UPT UIADD3 URZ, URZ, URZ, URZ"])
    g = probes.without_filler(f)
    assert [i.opcode for i in g.instrs].count("NOP") == 0
    assert g.instrs[g.labels[".L_x_0"]].opcode == "HMMA.16816.F32"
    assert [i.opcode for i in probes.loop_body(f)] == [
        "HMMA.16816.F32", "UIADD3", "ISETP.NE.U32.AND", "BRA"]


def _wgmma(n: int, wait: int, extra: tuple = ()) -> list[str]:
    return ["WARPGROUP.ARRIVE", *extra,
            *["HGMMA.64x128x16.F32 R24, gdesc[UR4], R24"] * (n - 1),
            "HGMMA.64x128x16.F32 R24, gdesc[UR4], R24, gsb0",
            f"WARPGROUP.DEPBAR.LE gsb0, {hex(wait)}"]


def _wgmma_functions(p, lat_body=None, stream_body=None, drain=True):
    out = {p.entries[p.steps]: _function(
        "s", stream_body or _wgmma(p.steps * p.ilp, 1),
        after=["WARPGROUP.DEPBAR.LE gsb0, 0x0"] if drain else [])}
    if kernels.LATENCY in p.entries:
        out[p.entries[kernels.LATENCY]] = _function(
            "l", lat_body or _wgmma(1, 0, ("UMOV UR5, 0x10", "UMOV UR7, 0x10")))
    return out


def test_wgmma_loops_are_verified_and_accounted():
    """The throughput loop (steps wgmma, wait_group 1, one drain after the loop) and the
    latency loop (one wgmma, wait_group 0), each with one fence and one wait per trip; the
    latency loop's repeated descriptor moves are loop control, reported."""
    p = kernels.wgmma_probe(rows.wgmma_row("f16.f32.m64n128k16.ss"), 1)
    v = p.check(_wgmma_functions(p))
    assert v.unit["WARPGROUP.ARRIVE"] == 1 and v.loops[p.steps]["tensor_per_trip"] == 4
    assert v.loops[kernels.LATENCY]["loop_control"] == {
        "UMOV": 2, "UIADD3": 1, "ISETP.NE.U32.AND": 1, "BRA": 1}
    two = kernels.wgmma_probe(rows.wgmma_row("f16.f32.m64n128k16.ss"), 2)
    assert two.check(_wgmma_functions(two)).loops[two.steps]["tensor_per_trip"] == 8


@pytest.mark.parametrize("kw, why", [
    ({"stream_body": _wgmma(4, 1, ("WARPGROUP.ARRIVE",))}, "serialised"),
    ({"stream_body": _wgmma(3, 1)}, "3 HGMMA"),
    ({"drain": False}, "0 waits around the loop, wanted 1"),
    ({"lat_body": _wgmma(1, 0, ("STS [R2], R4",))}, "other instructions"),
])
def test_wgmma_loops_rejected(kw, why):
    p = kernels.wgmma_probe(rows.wgmma_row("f16.f32.m64n128k16.ss"), 1)
    with pytest.raises(ProbeInvalid, match=why):
        p.check(_wgmma_functions(p, **kw))


@pytest.mark.parametrize("log", ["ptxas warning : (C7510) Potential Performance Loss: "
                                 "wgmma.mma_async instructions are serialized",
                                 "warning C7519: fences inserted"])
def test_wgmma_serialisation_warning_fails(log):
    with pytest.raises(ProbeInvalid, match="serialised"):
        wgmma_depth.check_wgmma_log("wgmma/x", "info: 40 registers\n" + log)
    wgmma_depth.check_wgmma_log("wgmma/x", "ptxas info: Used 90 registers")


def test_trip_counts_per_launch():
    """Sized from the row's rate bound and the warps (analysis.plan_trips); the wgmma latency
    loop at its fixed trip counts, with one warpgroup."""
    p = kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_90", 6)
    trips = p.trips(16 * 32, p.steps)
    assert trips[-1] * p.steps * 16 * 6 * 2048 / 2048 >= rows.SPAN_PER_WARP * 16
    assert p.launches() == [(32 * w, p.steps) for w in rows.WARPS]
    sp = kernels.sweep_probe(rows.row("mma.sp", "f16.f32.m16n8k32"), "sm_90", 1)
    assert sp.row.rate_bound == 4096
    wg = kernels.wgmma_probe(rows.wgmma_row("f16.f32.m64n128k16.ss"), 1)
    assert wg.launches()[0] == (128, kernels.LATENCY)
    assert wg.trips(128, kernels.LATENCY) == rows.WGMMA_LAT_TRIPS
    assert wg.is_latency_loop(kernels.LATENCY) and not wg.is_latency_loop(wg.steps)
    assert [t for t, k in wg.launches() if k == wg.steps] == [128 * g for g in rows.WGMMA_GROUPS]


def test_wgmma_work_counts_warpgroups():
    r = rows.wgmma_row("f16.f32.m64n128k16.ss")
    p = kernels.wgmma_probe(r, 1)
    pt = p.fit_spec(256, p.steps).point(_raw(64.0, 8, steps=p.steps))
    assert pt.throughput == pytest.approx(2 * r.flop / 64.0, rel=0.01)
    assert pt.warps == 2 and pt.steps == rows.WGMMA_STEPS          # warpgroups
    lat = p.fit_spec(128, kernels.LATENCY).point(
        _raw(240.0, 4, trips=rows.WGMMA_LAT_TRIPS, steps=1))
    assert lat.latency == pytest.approx(240.0, abs=0.1) and not lat.unstable


def test_never_executed_filler():
    assert probes.never_executed(parse_instr(0, "@!UPT UIADD3 URZ, URZ, URZ, URZ"))
    assert probes.never_executed(parse_instr(0, "NOP"))
    assert not probes.never_executed(parse_instr(0, "HMMA.16816.F32 R4, R8, R12, R4"))


def test_ldmatrix_work_is_bytes():
    p = kernels.sweep_probe(rows.row("ldmatrix", "x2"), "sm_80", 2)
    raw = {t: [(np.zeros(4), np.full(4, 100.0 + 10 * t * p.steps))] * 3 for t in TRIPS}
    assert p.fit_spec(128, p.steps).point(raw).throughput == pytest.approx(256 * 2 * 4 / 10)
