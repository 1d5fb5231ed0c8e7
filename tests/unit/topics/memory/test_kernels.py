"""The memory probes (topics/memory/kernels.py): names, units, the module, the loop and 64-bit
bank probes' own verification (synthetic SASS), and every probe assembled and verified offline
when ptxas is present."""
from __future__ import annotations

import dataclasses

import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.verify import ProbeInvalid
from pytest_gpuchar.topics.memory import kernels, rows, run


def test_probe_names_and_units():
    p = kernels.chase_probe("cv", "sm_90", "chain")
    assert p.intent(32).unit == ("LDG.E.64.STRONG.SYS",) and p.intent(32).min_depth == 32
    assert rows.sass_unit("ca", "sm_80") == ("LDG.E.64.STRONG.SM",)
    assert rows.sass_unit("ca", "sm_61") == ("LDG.E.64",)
    loop = kernels.chase_probe("shared_ld", "sm_90", "loop")
    assert set(loop.entries.values()) == {loop.entries[32]} and loop.ops[128] == 128
    assert isinstance(loop, kernels.ChaseLoopProbe) and loop.intent(32).count == 1
    assert loop.unit == rows.sass_unit("shared_ld", "sm_90") + kernels.LOOP_UNIT
    with pytest.raises(ValueError, match="chain or loop"):
        kernels.chase_probe("ca", "sm_90", "tree")
    with pytest.raises(KeyError, match="flavour"):
        rows.sass_unit("nope", "sm_90")


def test_bank_probe_is_one_per_width():
    a = kernels.bank_probe(rows.BankRow(32, 1), "sm_90")
    b = kernels.bank_probe(rows.BankRow(32, 16), "sm_90")
    assert a.ptx == b.ptx and type(a) is kernels.BankProbe
    assert type(kernels.bank_probe(rows.BankRow(64, 2), "sm_90")) is kernels.Bank64Probe


def test_module_declares_the_const_chain_once():
    text = kernels.module_text("sm_90")
    assert text.count(".const ") == 1 and text.count("gpuchar_cchain[") == 1
    assert all(e in text for p in kernels.suite_probes("sm_90") for e in p.entries.values())
    (group,) = run.groups("sm_90")
    assert group.name == "memory" and group.parts()[0][1:] == (text, "gpuchar_memory.ptx")


def test_chase_kernel_is_the_shared_frame():
    """Setup (warm-up walk) before the first clock read, the guard, the body, the second
    read; no pass loop."""
    text = kernels.chase_probe("ca", "sm_90", "chain").kernels
    k32 = text.split(".visible .entry")[1]
    marks = ("$WARMED:", "mov.u64 %t0, %clock64;", "@%never bra $BODY_END;",
             "ld.global.ca.u64 %p64, [%p64];", "$BODY_END:", "mov.u64 %t1, %clock64;")
    at = [k32.index(marks[0])]
    for m in marks[1:]:
        at.append(k32.index(m, at[-1]))     # each after the one before
    assert "$PASS" not in text
    assert k32.count("ld.global.ca.u64 %p64, [%p64];") == 32 + 1    # + the warm-up step


def ins(text: str, off: int) -> sass.Instr:
    return sass.parse_instr(off, text)


def _loop(body_extra=(), setup=("LDC R4, c[0x0][0x21c]",)):
    pre = [ins(t, 16 * k) for k, t in enumerate(setup)]
    at = 16 * len(pre)
    loop = [ins("LDG.E.64.STRONG.SM R2, desc[UR4][R2.64]", at),
            *[ins(t, at + 16 * (k + 1)) for k, t in enumerate(body_extra)]]
    n = at + 16 * len(loop)
    loop += [ins("IADD3 R0, R0, 0x1, RZ", n), ins("ISETP.GE.U32.AND P0, PT, R0, R4, PT", n + 16),
             ins("@!P0 BRA `(.L_x_1)", n + 32)]
    region = pre + loop
    func = sass.Function("f", region, {".L_x_1": len(pre)})
    return region, func


def test_loop_probe_verifies_setup_then_one_iteration():
    p = kernels.chase_probe("ca", "sm_90", "loop")
    region, func = _loop()
    e = p.entries[32]
    v = p.verify_regions({n: region for n in p.entries}, {e: func})
    assert v.unit == {"LDG.E.64.STRONG.SM": 1, "IADD3": 1, "ISETP.GE.U32.AND": 1, "BRA": 1}
    region, func = _loop(body_extra=("IADD3 R5, R5, 0x1, RZ",))
    with pytest.raises(ProbeInvalid, match="loop body"):
        p.verify_regions({32: region}, {e: func})
    region, func = _loop(setup=("FADD R1, R1, R1",))
    with pytest.raises(ProbeInvalid, match="not setup"):
        p.verify_regions({32: region}, {e: func})
    with pytest.raises(ProbeInvalid, match="backward branch"):
        p.verify_regions({32: region[:-1]}, {e: func})


def test_bank64_probe_allows_few_side_instructions():
    p = kernels.bank_probe(rows.BankRow(64, 2), "sm_90")
    n = 32
    loads = [ins("LDS.64 R2, [R2]", 32 * k) for k in range(n)]
    side = [ins("IMNMX.U32 R5, R5, R3, PT", 32 * k + 16) for k in range(n)]
    region = [x for pair in zip(loads, side) for x in pair]
    v = p.verify_regions({n: region}, {})
    assert v.unit == {"LDS.64": 1.0, "IMNMX.U32": 1.0}
    too_many = region + [ins("SEL R6, R6, R5, P0", 1000 + 16 * k) for k in range(2 * n)]
    with pytest.raises(ProbeInvalid, match="side instructions"):
        p.verify_regions({n: too_many}, {})


@pytest.mark.parametrize("arch", ["sm_90", "sm_80", "sm_61"])
def test_ptx_builders_assemble_and_verify_offline(arch, need_offline_tools, offline_builds):
    need_offline_tools(arch)
    _, functions = offline_builds.offline_module(arch, kernels.module_text(arch))
    for p in kernels.suite_probes(arch):
        assert p.check(functions).unit
    # a tampered unit is refused: the same region does not hold a .cg load
    bad = dataclasses.replace(kernels.chase_probe("ca", arch, "chain"),
                              unit=("LDG.E.64.STRONG.GPU",))
    with pytest.raises(ProbeInvalid):
        bad.check(functions)
