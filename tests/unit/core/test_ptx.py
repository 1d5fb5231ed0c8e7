"""core.ptx: the kernel frame and the bodies built from templates: clock reads, inputs,
every result stored."""
from __future__ import annotations

import re

import pytest

from pytest_gpuchar.core import ptx
from pytest_gpuchar.topics.instructions import rows as catalog

ADD = catalog.op("add.u32 {d}, {a}, {b};", 32, 32, 32)
MAD = catalog.op("mad.lo.u32 {d}, {a}, {b}, {c};", 32, 32, 32, 32)
WIDE = catalog.op("mul.wide.u32 {d}, {a}, {b};", 64, 32, 32, glue=catalog.LOW32)


def _stored_registers(text: str) -> set[str]:
    return set(re.findall(r"st\.global\.b\d+ \[%out\+\d+\], (%\w+);", text))


def _build(body_fn, t, n, **kw):
    frame = ptx.Registers()
    body = body_fn(t, n, frame, **kw)
    text = ptx.operand_kernel("probe_k", frame, body.lines, body.results)
    return frame, body, text


def test_op_template_fields():
    assert ADD.sources == ["a", "b"]
    assert MAD.sources == ["a", "b", "c"]
    assert ADD.operands["d"].width == 32
    assert ADD.render({"d": "%r9", "a": "%r1", "b": "%r2"}) == "add.u32 %r9, %r1, %r2;"
    assert set(WIDE.operands) == {"d", "a", "b", "hi"}


def test_frame_registers_and_loads():
    f = ptx.Registers()
    assert f.reg(32) == "%r0"
    assert f.reg(32) == "%r1"
    assert f.reg(64) == "%x0"
    r = f.load(32, "int")
    assert r == "%r2"
    p = f.load(1, "bool")
    assert p.startswith("%p")
    assert [s.slot for s in f.inputs] == [0, 1]
    assert f.loads[0] == "ld.global.b32 %r2, [%in+0];"
    assert f.loads[1].startswith("ld.global.b32 %r3, [%in+8]")
    assert any(d == ".reg .b32 %r<4>;" for d in f.declarations())
    assert ".reg .pred %p<1>;" in f.declarations()


@pytest.mark.parametrize("style", ["acc", "fib", "distinct", "keep"])
def test_dependent_chain_kernel(style):
    frame, body, text = _build(ptx.dependent_chain, ADD, 8, style=style)
    assert len(body.lines) == 8
    assert text.count("%clock64") == 2
    assert ".visible .entry probe_k(" in text
    stored = _stored_registers(text)
    for reg, width in body.results:
        assert reg in stored, f"result {reg} is never stored: it could be eliminated"
    # the cycle count is stored first
    assert "st.global.b64 [%out], " in text
    # every input is loaded from `in`
    assert text.count("ld.global") == len(frame.inputs)


def test_dependent_chain_is_dependent():
    _, body, _ = _build(ptx.dependent_chain, ADD, 6, style="acc")
    dests = [re.match(r"add\.u32 (%\w+), (%\w+),", ln).groups() for ln in body.lines]
    for (d_prev, _), (_, a_next) in zip(dests, dests[1:]):
        assert a_next == d_prev


def test_dependent_chain_keep_stores_every_intermediate():
    _, body, text = _build(ptx.dependent_chain, ADD, 5, style="keep")
    dests = [ln.split()[1].rstrip(",") for ln in body.lines]
    assert len(set(dests)) == 5
    assert set(dests) <= _stored_registers(text)


def test_dependent_chain_with_glue():
    _, body, text = _build(ptx.dependent_chain, WIDE, 4, style="fib")
    assert sum(ln.startswith("mul.wide.u32") for ln in body.lines) == 4
    assert sum(ln.startswith("mov.b64 {") for ln in body.lines) == 4
    assert text.count("%clock64") == 2


def test_unknown_chain_style_raises():
    with pytest.raises(ValueError, match="unknown chain style 'zigzag'"):
        ptx.dependent_chain(ADD, 4, ptx.Registers(), "zigzag")


@pytest.mark.parametrize("t, n", [(ADD, 8), (ADD, 32), (MAD, 16), (MAD, 27)])
def test_independent_ops_distinct_operands(t, n):
    frame, body, text = _build(ptx.independent_ops, t, n)
    assert len(body.lines) == n
    tuples = [tuple(ln.rstrip(";").split(", ")[1:]) for ln in body.lines]
    assert len(set(tuples)) == n, "two ops share an operand tuple: they could be merged"
    dests = [ln.split()[1].rstrip(",") for ln in body.lines]
    assert len(set(dests)) == n
    assert len(body.results) == n
    assert {r for r, _ in body.results} <= _stored_registers(text)
    assert text.count("%clock64") == 2
    # sources are loaded values, never results of another op of the region
    loaded = set(frame.loaded)
    for tup in tuples:
        assert set(tup) <= loaded


def test_kernel_32bit_clock():
    frame = ptx.Registers()
    text = ptx.operand_kernel("k32", frame, [], [], clock64=False)
    assert text.count("%clock64") == 0
    assert len(re.findall(r"%clock\b", text)) == 2
    assert "st.global.b32 [%out]" in text


def test_kernel_stores_predicate_results_through_selp():
    frame = ptx.Registers()
    p = frame.load(1, "bool")
    text = ptx.operand_kernel("kp", frame, [], [(p, 1)])
    assert "selp.b32" in text and p in text


def test_module_header():
    text = ptx.module("sm_80", [ptx.operand_kernel("k", ptx.Registers(), [], [])])
    assert text.startswith(".version 7.1\n.target sm_80\n.address_size 64\n")
    assert ptx.module("sm_90", [], version="8.3").startswith(".version 8.3\n")


def test_out_bytes():
    assert ptx.out_bytes(0, 0) == 16
    assert ptx.out_bytes(3, 2) == 8 * 4 + 16


def test_kernel_frame_layout():
    """The one frame: guard and label around the body, the pass loop's tail after `after`."""
    k = ptx.Kernel("k", [".param .u64 a"], decls=[".reg .b64 %t0, %t1, %dt;"],
                   setup=["S;"], operands=["O;"], sync=["membar.cta;"], body=["B;"],
                   after=["A;"], passes=True)
    lines = k.render().splitlines()
    assert lines[:4] == [".visible .entry k(.param .u64 a)", "{", ".reg .b64 %t0, %t1, %dt;",
                         "S;"]
    i = lines.index("$PASS:")
    assert lines[i:i + 6] == ["$PASS:", "O;", "membar.cta;", "mov.u64 %t0, %clock64;",
                              "setp.eq.u64 %never, %t0, -1;", "@%never bra $BODY_END;"]
    j = lines.index("B;")
    assert lines[j:j + 4] == ["B;", "$BODY_END:", "mov.u64 %t1, %clock64;", "A;"]
    assert lines[-7:] == ["min.u64 %dt, %dt, 1;", "cvt.u32.u64 %step, %dt;",
                          "add.u32 %it, %it, %step;", "setp.lt.u32 %again, %it, %iters;",
                          "@%again bra $PASS;", "ret;", "}"]


def test_kernel_frame_without_guard_passes_or_clock():
    k = ptx.Kernel("k", [], body=["B;"], guard=False, directives=[".maxntid 256, 1, 1"],
                   preamble=[".shared .b32 s[4];"])
    text = k.render()
    assert "$BODY_END" not in text and "$PASS" not in text and "%never" not in text
    assert text.splitlines()[:3] == [".shared .b32 s[4];", ".visible .entry k()",
                                     ".maxntid 256, 1, 1"]
    stamp = ptx.Kernel("k", [], body=["B;"], guard=False, exit_read=False).render()
    assert "mov.u64 %t1, %t0;" in stamp and stamp.count("%clock64") == 1
    untimed = ptx.Kernel("k", [], body=["B;"], clock=None).render()
    assert "%clock" not in untimed and untimed.splitlines()[2:] == ["B;", "ret;", "}"]
