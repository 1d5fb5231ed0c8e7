"""verify: the timed region holds exactly the intended SASS, or the probe is invalid."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import verify
from pytest_gpuchar.core.sass import parse_instr
from pytest_gpuchar.core.verify import Intent, ProbeInvalid

IADD = "IADD3|IMAD.IADD"


def instrs(*bodies: str):
    return [parse_instr(0x10 * k, b) for k, b in enumerate(bodies)]


def adds(n: int):
    return instrs(*[f"IADD3 R{k + 1}, R{k}, R3, RZ" for k in range(n)])


def test_matches_alternatives_and_globs():
    assert verify.matches("IMAD.IADD", IADD)
    assert verify.matches("IADD3", IADD)
    assert not verify.matches("IADD3.X", IADD)
    assert verify.matches("XMAD.MRG", "IMAD|XMAD*")


def test_check_exact_pass():
    assert verify.check_exact(adds(4), (IADD,), 4) is None


def test_check_exact_mixed_alternatives_pass():
    region = instrs("IADD3 R1, R0, R3, RZ", "IMAD.IADD R2, R1, 0x1, R3")
    assert verify.check_exact(region, (IADD,), 2) is None


def test_check_exact_multi_opcode_unit():
    region = instrs("IADD3 R2, P0, R2, R4, RZ", "IADD3.X R3, R3, R5, RZ, P0, !PT") * 3
    assert verify.check_exact(region, ("IADD3", "IADD3.X"), 3) is None
    assert verify.check_exact(region, ("IADD3", "IADD3.X"), 2) is not None


def test_check_exact_extra_instruction():
    region = adds(4) + instrs("MOV R9, R1")
    why = verify.check_exact(region, (IADD,), 4)
    assert why is not None and "unexpected" in why and "MOV" in why


def test_check_exact_too_few():
    why = verify.check_exact(adds(2), (IADD,), 4)
    assert why is not None and "too few" in why


def test_verify_exact_pass_reports_unit():
    regions = {8: adds(8), 16: adds(16)}
    v = verify.verify("latency/add.u32", regions, lambda n: Intent(n, (IADD,)))
    assert v.ok
    assert v.unit == {"IADD3": 1.0}
    assert v.message == "exact"


def test_verify_extra_instruction_is_probe_invalid_with_listing():
    regions = {8: adds(8) + instrs("FMUL R7, R7, R8"), 16: adds(16)}
    with pytest.raises(ProbeInvalid) as ei:
        verify.verify("latency/add.u32", regions, lambda n: Intent(n, (IADD,)))
    msg = str(ei.value)
    assert "probe invalid" in msg
    assert "latency/add.u32" in msg
    assert "FMUL" in msg
    # the SASS listing of the timed regions is shown
    assert "FMUL R7, R7, R8" in msg
    assert "IADD3 R1, R0, R3, RZ" in msg
    assert "chain length 8" in msg


def test_probe_invalid_is_an_assertion_error():
    assert issubclass(ProbeInvalid, AssertionError)


def test_verify_folded_chain_is_probe_invalid():
    regions = {8: adds(1), 16: adds(1)}    # the compiler folded 8 adds into 1
    with pytest.raises(ProbeInvalid, match="probe invalid.*too few"):
        verify.verify("latency/add.u32", regions, lambda n: Intent(n, (IADD,)))


def test_verify_empty_region_for_empty_intent():
    v = verify.verify("clock/back_to_back", {0: []}, lambda n: Intent(0, ()))
    assert v.ok


# --- sequence intent (unit=None): the unit is derived from the growth -------------------

def seq(n: int, *, setup=("MOV R20, 0x3f800000",), per_op=("MUFU.RCP R4, R2", "FFMA R5, R4, R2, R3")):
    bodies = list(setup)
    for _ in range(n):
        bodies += list(per_op)
    return instrs(*bodies)


def test_sequence_linear_growth_passes():
    regions = {n: seq(n) for n in (2, 4, 8)}
    v = verify.verify("latency/div.rn.f32", regions,
                      lambda n: Intent(n, None, ("MUFU.RCP",)))
    assert v.ok
    assert v.message == "sequence"
    assert v.unit == {"FFMA": 1, "MUFU.RCP": 1}
    assert dict(v.base) == {}    # MOV is a register move: left out of the counts


def test_sequence_hoisted_setup_is_base():
    regions = {n: seq(n, setup=("ULDC.64 UR4, c[0x0][0x118]",)) for n in (2, 4, 8)}
    v = verify.verify("latency/div.rn.f32", regions, lambda n: Intent(n, None, ("MUFU.RCP",)))
    assert dict(v.base) == {"ULDC.64": 1}


def test_sequence_non_linear_growth_fails():
    regions = {2: seq(2), 4: seq(4), 8: seq(7)}
    with pytest.raises(ProbeInvalid, match="probe invalid"):
        verify.verify("latency/div.rn.f32", regions, lambda n: Intent(n, None, ("MUFU.RCP",)))


def test_sequence_changing_per_op_sequence_fails():
    regions = {2: seq(2), 4: seq(4), 8: seq(4) + seq(4, setup=(), per_op=("MUFU.RCP R4, R2",
                                                                         "FFMA R5, R4, R2, R3",
                                                                         "FADD R6, R5, R5"))}
    with pytest.raises(ProbeInvalid, match="changes with chain length|does not grow"):
        verify.verify("latency/div.rn.f32", regions, lambda n: Intent(n, None, ()))


def test_sequence_no_growth_fails():
    regions = {n: seq(1) for n in (2, 4, 8)}
    with pytest.raises(ProbeInvalid, match="does not grow"):
        verify.verify("latency/div.rn.f32", regions, lambda n: Intent(n, None, ()))


def test_sequence_missing_signature_fails():
    regions = {n: seq(n, per_op=("FADD R4, R2, R3",)) for n in (2, 4, 8)}
    with pytest.raises(ProbeInvalid, match="lacks MUFU.RCP"):
        verify.verify("latency/div.rn.f32", regions, lambda n: Intent(n, None, ("MUFU.RCP",)))


def test_sequence_stray_instruction_fails():
    regions = {n: seq(n, setup=("BAR.SYNC 0x0",)) for n in (2, 4, 8)}
    with pytest.raises(ProbeInvalid, match="not part of the repeated sequence"):
        verify.verify("latency/div.rn.f32", regions, lambda n: Intent(n, None, ()))


def test_sequence_needs_two_lengths():
    with pytest.raises(ProbeInvalid, match="at least two chain lengths"):
        verify.verify("latency/div.rn.f32", {2: seq(2)}, lambda n: Intent(n, None, ()))


def test_intent_describe():
    assert Intent(8, (IADD,)).describe() == f"8 x [{IADD}]"
    assert "MUFU.RCP" in Intent(4, None, ("MUFU.RCP",)).describe()


def test_a_shallow_chain_is_invalid_even_when_the_opcodes_match():
    from pytest_gpuchar.core.sass import parse_instr
    tree = [parse_instr(16 * k, t) for k, t in enumerate([
        "LOP3.LUT R6, R4, R10, R11, 0x80, !PT", "LOP3.LUT R7, R4, R10, R12, 0x80, !PT",
        "LOP3.LUT R8, R6, R13, R14, 0x80, !PT", "LOP3.LUT R9, R7, R13, R15, 0x80, !PT"])]
    with pytest.raises(verify.ProbeInvalid, match="dependence depth is 2"):
        verify.verify("latency/and.b32", {4: tree, 8: tree + tree},
                      lambda n: verify.Intent(n, ("LOP3.LUT",), min_depth=n))


BARRIER = ("?MEMBAR.ALL.CTA", "MEMBAR.ALL.GPU", "UCGABAR_ARV")


def barriers(n: int, cta: int) -> list:
    """n release-arrives, the first `cta` of them with the JIT's MEMBAR.ALL.CTA ahead."""
    out = []
    for k in range(n):
        out += (["MEMBAR.ALL.CTA"] if k < cta else []) + ["MEMBAR.ALL.GPU", "UCGABAR_ARV"]
    return instrs(*out)


@pytest.mark.parametrize("cta", [0, 3])
def test_optional_pattern_with_every_op_or_none(cta):
    assert verify.check_exact(barriers(3, cta), BARRIER, 3) is None


def test_optional_pattern_in_some_copies_only_is_invalid():
    why = verify.check_exact(barriers(3, 2), BARRIER, 3)
    assert why is not None and "MEMBAR.ALL.CTA" in why


def test_optional_pattern_never_excuses_a_missing_required_one():
    region = instrs(*["MEMBAR.ALL.CTA", "UCGABAR_ARV"] * 3)
    assert "MEMBAR.ALL.GPU" in verify.check_exact(region, BARRIER, 3)


@pytest.mark.parametrize("text, move", [
    ("HFMA2.MMA R5, -RZ, RZ, 0, 0 ;", True), ("HFMA2 R13, -RZ, RZ, 0, 0 ;", True),
    ("HFMA2 R4, R4, R5, -RZ ;", False), ("HFMA2.MMA R4, R2, R3, R4 ;", False)])
def test_a_constant_made_with_hfma2_is_a_move(text, move):
    """-RZ * RZ + imm: the driver JIT's (sm_90) and ptxas 13.x's (sm_100/sm_120) MOV."""
    from pytest_gpuchar.core.loop import is_const_move
    from pytest_gpuchar.core import sass
    assert is_const_move(sass.parse_instr(0, text)) is move
