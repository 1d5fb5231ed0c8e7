"""The Probe type: the guard every timed region opens with, intents (no GPU needed)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import probe as probes
from pytest_gpuchar.core import sass
from pytest_gpuchar.core.probe import Probe


def ins(text: str, off: int = 0) -> sass.Instr:
    return sass.parse_instr(off, text)


BODY = [ins("IADD3 R4, R4, R5, RZ"), ins("IADD3 R4, R4, R5, RZ")]


@pytest.mark.parametrize("guard", [
    [ins("ISETP.EQ.U32.AND P0, PT, R2, -0x1, PT"),
     ins("ISETP.EQ.U32.AND.EX P0, PT, R3, -0x1, PT, P0"), ins("@P0 BRA `(.L_x_1)")],
    [ins("IADD32I RZ.CC, R12, 0x1"), ins("ISETP.NE.U32.X.AND P0, PT, R14, -0x1, PT"),
     ins("@!P0 BRA `(.L_x_1)")],
    # sm_120 (ptxas 13.x): the clock read to a uniform register, a uniform compare and branch
    [ins("UISETP.NE.U64.AND UP0, UPT, UR4, -0x1, UPT"), ins("BRA.U !UP0, `(.L_x_257)")],
], ids=["volta+", "maxwell-pascal", "sm_120-uniform"])
def test_guard_is_stripped(guard):
    assert probes.strip_guard("p", guard + BODY) == BODY


def test_if_converted_guard_keeps_the_predicated_body():
    body = [ins("@P0 IADD3 R4, R4, R5, RZ"), ins("@P0 IADD3 R4, R4, R5, RZ")]
    region = [ins("ISETP.NE.U32.AND P0, PT, R2, -0x1, PT")] + body
    assert probes.strip_guard("p", region) == body


def test_an_unconditional_branch_is_no_guard():
    region = [ins("UISETP.NE.U64.AND UP0, UPT, UR4, -0x1, UPT"), ins("BRA `(.L_x_3)")] + BODY
    with pytest.raises(sass.RegionError, match="restructured"):
        probes.strip_guard("latency/x", region)


def test_region_without_the_guard_is_a_restructured_probe():
    with pytest.raises(sass.RegionError, match="restructured"):
        probes.strip_guard("latency/x", BODY)


def test_a_mixed_predicated_body_is_not_an_if_converted_guard():
    region = [ins("@P0 IADD3 R4, R4, R5, RZ"), ins("IADD3 R4, R4, R5, RZ")]
    with pytest.raises(sass.RegionError):
        probes.strip_guard("latency/x", region)


def test_intent_counts_ops_per_op_and_depth():
    p = Probe("x/y", "sm_90", "", {8: "k8", 16: "k16"}, {8: 24, 16: 48}, unit=("HMMA",),
              per_op=2, chained=True)
    i = p.intent(16)
    assert (i.count, i.unit, i.min_depth) == (96, ("HMMA",), 16)
    assert Probe("x", "sm_90", "", {4: "k"}, {4: 4}, unit=("FADD",)).intent(4).min_depth == 0


def test_probe_module_is_header_and_kernels_and_digest_follows_it():
    p = Probe("x", "sm_90", "\n.visible .entry k()\n{\nret;\n}\n", {1: "k"}, {1: 1})
    assert p.ptx.startswith(".version 8.0\n.target sm_90\n.address_size 64\n")
    assert p.ptx.endswith(p.kernels)
    q = Probe("x", "sm_90", p.kernels, {1: "k"}, {1: 1}, target="sm_90a")
    assert ".target sm_90a" in q.ptx and q.digest != p.digest


def test_missing_kernel_is_a_region_error():
    p = Probe("x", "sm_90", "", {1: "k"}, {1: 1})
    with pytest.raises(sass.RegionError, match="missing"):
        p.regions({})


def test_a_guard_kept_differently_across_lengths_makes_the_probe_invalid():
    """ptxas if-converts the guard over 4 independent DFMA and branches over 8 and 12: the
    guard's cost then differs between lengths and lands in the slope."""
    from pytest_gpuchar.core.verify import ProbeInvalid
    setup = [ins("ISETP.NE.U32.AND P0, PT, R2, -0x1, PT")]
    dfma = "DFMA R8, R14, R16, R18"
    branch = {n: setup + [ins("@!P0 BRA `(.L_x_1)")] + [ins(dfma)] * n for n in (8, 12)}
    regions = {4: setup + [ins("@P0 " + dfma)] * 4, **branch}
    assert probes.guard_form(regions[4]) == "predicated"
    assert probes.guard_form(regions[8]) == "branch"
    with pytest.raises(ProbeInvalid, match=r"predicated at \[4\]; branch at \[8, 12\]"):
        probes.same_guard("cpi/fma.rn.f64", regions)
    probes.same_guard("cpi/fma.rn.f64", branch)      # one form: nothing to say
