"""sass: parsing nvdisasm text, finding the timed region, normalising for snapshots."""
from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpuchar.core import sass

SAMPLE = """\
//--------------------- .text.k --------------------------
        .section        .text.k,"ax",@progbits
k:
.text.k:
        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;
        /*0010*/                   S2R R9, SR_TID.X ;
        /*0020*/                   ULDC.64 UR4, c[0x0][0x118] ;
        /*0030*/                   IMAD.WIDE.U32 R2, R9, 0x18, c[0x0][0x168] ;
.L_x_0:
        /*0040*/                   CS2R R4, SR_CLOCKLO ;
        /*0050*/                   ISETP.NE.U32.AND P0, PT, RZ, c[0x0][0x170], PT ;
        /*0060*/              @!P0 BRA `(.L_x_1) ;
        /*0070*/                   IADD3 R11, R11, R10, RZ ;
        /*0080*/                   IMAD.IADD R10, R10, 0x1, R11 ;
        /*0090*/                   IADD3 R11, R11, R10, RZ ;
.L_x_1:
        /*00a0*/                   CS2R R6, SR_CLOCKLO ;
        /*00b0*/                   IADD3 R4, P0, -R4, R6, RZ ;
        /*00c0*/                   STG.E.64 [R2.64], R4 ;
        /*00d0*/              @!P0 BRA `(.L_x_0) ;
        /*00e0*/                   EXIT ;
"""

# The same code with every register renamed consistently (a register allocator's choice).
RENAMES = {"R1": "R20", "R9": "R13", "R2": "R30", "R4": "R8", "R11": "R17", "R10": "R12",
           "R6": "R40", "P0": "P3", "UR4": "UR6"}


def _rename(text: str, mapping: dict[str, str]) -> str:
    pat = re.compile(r"(?<![A-Z_])(" + "|".join(sorted(mapping, key=len, reverse=True))
                     + r")\b")
    return pat.sub(lambda m: mapping[m.group(1)], text)


@pytest.fixture
def func() -> sass.Function:
    funcs = sass.parse(SAMPLE)
    assert list(funcs) == ["k"]
    return funcs["k"]


def test_parse_function_and_instructions(func):
    assert func.name == "k"
    assert len(func.instrs) == 15
    assert [i.offset for i in func.instrs] == list(range(0, 0xF0, 0x10))
    first = func.instrs[0]
    assert first.opcode == "IMAD.MOV.U32"
    assert first.base == "IMAD"
    assert first.operands == ("R1", "RZ", "RZ", "c[0x0][0x28]")
    assert first.pred == ""
    assert func.opcodes()["IADD3"] == 3


def test_parse_predicated_branch(func):
    bra = func.instrs[6]
    assert bra.pred == "@!P0"
    assert bra.opcode == "BRA"
    assert bra.base == "BRA"
    assert bra.operands == ("`(.L_x_1)",)
    assert bra.text == "@!P0 BRA `(.L_x_1)"


def test_parse_operands_with_brackets():
    ins = sass.parse_instr(0x40, "IMAD.WIDE.U32 R2, R9, 0x18, c[0x0][0x168] ;")
    assert ins.operands == ("R2", "R9", "0x18", "c[0x0][0x168]")
    assert ins.offset == 0x40


def test_parse_ignores_lines_outside_functions():
    assert sass.parse("        /*0000*/   EXIT ;\n") == {}


def test_parse_several_functions():
    text = SAMPLE + SAMPLE.replace(".text.k", ".text.other").replace("k:", "other:")
    funcs = sass.parse(text)
    assert list(funcs) == ["k", "other"]
    assert len(funcs["other"].instrs) == 15


def test_clock_reads_and_timed_region(func):
    reads = sass.clock_reads(func)
    assert [[i.offset for i in r] for r in reads] == [[0x40], [0xA0]]
    assert all(i.is_clock_read for r in reads for i in r)
    region = sass.timed_region(func)
    assert [i.opcode for i in region] == ["ISETP.NE.U32.AND", "BRA", "IADD3", "IMAD.IADD",
                                          "IADD3"]
    assert not any(i.is_clock_read for i in region)


def test_s2ur_clock_read_counts():
    assert sass.parse_instr(0, "S2UR UR4, SR_CLOCKLO ;").is_clock_read
    assert sass.parse_instr(0, "CS2UR UR4, SR_CLOCKLO ;").is_clock_read     # sm_120
    assert not sass.parse_instr(0, "S2R R0, SR_TID.X ;").is_clock_read


def test_timed_region_needs_two_clock_reads():
    text = "\n".join(line for line in SAMPLE.splitlines() if "/*00a0*/" not in line)
    with pytest.raises(sass.RegionError, match="two clock reads"):
        sass.timed_region(sass.parse(text)["k"])


def test_format_listing(func):
    listing = sass.format_listing(sass.timed_region(func))
    assert "/*0070*/ IADD3 R11, R11, R10, RZ" in listing
    assert len(listing.splitlines()) == 5


def test_normalise_drops_offsets_and_marks_region(func):
    text = sass.normalise(func)
    assert "/*" not in text
    assert text.endswith("\n")
    lines = text.splitlines()
    assert len(lines) == len(func.instrs)
    assert lines[4].endswith("// ---- timed region start")
    assert lines[10].endswith("// ---- timed region end")
    # registers and labels renumbered in order of first appearance
    assert lines[0].startswith("IMAD.MOV.U32 r0, RZ, RZ,")
    assert "SR_CLOCKLO" in lines[4]
    assert "@!p0 BRA `(L0)" == lines[6]


def test_normalise_invariant_under_register_renumbering(func):
    renamed = _rename(SAMPLE, RENAMES)
    assert renamed != SAMPLE
    other = sass.parse(renamed)["k"]
    assert [i.text for i in other.instrs] != [i.text for i in func.instrs]
    assert sass.normalise(other) == sass.normalise(func)


def test_normalise_invariant_under_label_renumbering(func):
    relabelled = SAMPLE.replace(".L_x_1", ".L_x_7").replace(".L_x_0", ".L_x_5")
    assert sass.normalise(sass.parse(relabelled)["k"]) == sass.normalise(func)


def test_normalise_changes_when_an_opcode_changes(func):
    changed = SAMPLE.replace("IMAD.IADD R10, R10, 0x1, R11", "IMAD R10, R10, 0x1, R11")
    assert sass.normalise(sass.parse(changed)["k"]) != sass.normalise(func)


def test_normalise_changes_when_dataflow_changes(func):
    # same opcodes, but the second add now reads a different register: a real code change
    changed = SAMPLE.replace("/*0090*/                   IADD3 R11, R11, R10, RZ",
                             "/*0090*/                   IADD3 R11, R10, R10, RZ")
    assert sass.normalise(sass.parse(changed)["k"]) != sass.normalise(func)


LEGACY = """
//--------------------- .text.k --------------------------
        /*0130*/                   CS2R R7, SR_CLOCKHI ;
        /*0138*/                   CS2R R12, SR_CLOCKLO ;
        /*0148*/                   CS2R R14, SR_CLOCKHI ;
        /*0150*/                   ISETP.NE.U32.AND P1, PT, R7, R14, PT ;
        /*0158*/               @!P1 BRA `(.L_x_6) ;
        /*0168*/                   IADD32I R8, R8, 0x1 ;
        /*0170*/                   ISETP.GE.U32.AND P1, PT, R8, c[0x0][0x10c], PT ;
        /*0178*/               @!P1 BRA `(.L_x_7) ;
        /*0188*/                   { IADD R10, R6.reuse, R9 ;
        /*0190*/                   MOV R9, RZ }
        /*0198*/                   IADD R13, R6, R11 ;
        /*01a8*/                   CS2R R6, SR_CLOCKHI ;
        /*01b0*/                   CS2R R7, SR_CLOCKLO ;
        /*01b8*/                   CS2R R8, SR_CLOCKHI ;
        /*01c8*/                   ISETP.NE.U32.AND P1, PT, R6, R8, PT ;
        /*01d0*/               @!P1 BRA `(.L_x_8) ;
        /*01d8*/                   IADD32I R9, R9, 0x1 ;
        /*01e8*/                   ISETP.GE.U32.AND P1, PT, R9, c[0x0][0x10c], PT ;
        /*01f0*/               @!P1 BRA `(.L_x_9) ;
        /*01f8*/                   EXIT ;
"""


def test_maxwell_pascal_clock64_retry_loops_are_one_read_each():
    """sm_50..sm_62 read %clock64 as hi/lo/hi with a retry loop; the region lies between the
    loops, the dual-issue braces are dropped and the retry counter's reset is not counted."""
    f = sass.parse(LEGACY)["k"]
    assert [len(r) for r in sass.clock_reads(f)] == [8, 8]
    assert [i.text for i in sass.timed_region(f)] == ["IADD R10, R6.reuse, R9",
                                                      "IADD R13, R6, R11"]


def _region(*texts):
    return [sass.parse_instr(16 * k, t) for k, t in enumerate(texts)]


def test_dependence_depth_of_a_chain_and_of_independent_ops():
    chain = _region("IADD3 R4, R4, R5, RZ", "IMAD.IADD R4, R4, 0x1, R5", "IADD3 R4, R4, R5, RZ")
    assert sass.dependence_depth(chain) == 3
    indep = _region("IADD3 R6, R2, R3, RZ", "IADD3 R7, R2, R4, RZ", "IADD3 R8, R3, R4, RZ")
    assert sass.dependence_depth(indep) == 1


def test_dependence_depth_sees_reassociation():
    """Four LOP3s where each result is computed from the one two back: depth 2, not 4."""
    tree = _region("LOP3.LUT R6, R4, R10, R11, 0x80, !PT", "LOP3.LUT R7, R4, R10, R12, 0x80, !PT",
                   "LOP3.LUT R8, R6, R13, R14, 0x80, !PT", "LOP3.LUT R9, R7, R13, R15, 0x80, !PT")
    assert sass.dependence_depth(tree) == 2


def test_dependence_depth_follows_predicates_and_carries():
    r = _region("IADD3 R4, P0, R2, R3, RZ", "IADD3.X R5, R6, R7, RZ, P0, !PT",
                "ISETP.NE.AND P1, PT, R5, RZ, PT", "@P1 IADD3 R8, R9, R9, RZ")
    assert sass.dependence_depth(r) == 4


def test_dependence_depth_through_subroutine_calls():
    calls = _region("MOV R13, R11", "CALL.REL.NOINC `($__internal_0_$__cuda_sm20_div_u64)",
                    "MOV R13, R10", "CALL.REL.NOINC `($__internal_0_$__cuda_sm20_div_u64)",
                    "MOV R11, R10")
    assert sass.dependence_depth(calls) == 5


@pytest.mark.parametrize("text, conditional", [
    ("@P0 BRA `(.L_x_1) ;", True), ("@!P2 BRA `(.L_x_1) ;", True),
    ("BRA.U !UP0, `(.L_x_243) ;", True), ("BRA.U UP1, `(.L_x_16) ;", True),
    ("BRA `(.L_x_3) ;", False), ("BRA.U `(.L_x_3) ;", False), ("BRA.U !UPT, `(.L_x_3) ;", False),
    ("ISETP.NE.AND P0, PT, R1, RZ, PT ;", False)])
def test_conditional_branch_forms(text, conditional):
    """sm_100+ uniform branches take their predicate as an operand (BRA.U !UP0, target)."""
    assert sass.parse_instr(0, text).is_conditional_branch is conditional


def _split_by_characters(ops: str) -> list[str]:
    """The operand split as a character loop (the definition _split_operands must match)."""
    out, depth, cur = [], 0, []
    for ch in ops:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


@pytest.mark.parametrize("ops", [
    "", "R2", "R2, R3", "R2, R3,", "R2,, R3", ",", "R2, c[0x0][0x160]",
    "desc[UR4][R2.64+0x10], R5", "[R1+c[0x0][0x4], R2], R3", "R0, (R1, R2), R3",
    "R0], R1, R2", "R0, [R1, R2", "`(.L_x_0)", "SR_CLOCKLO, R2, ((R3, R4)), R5,"])
def test_operands_split_at_commas_outside_brackets(ops):
    assert sass._split_operands(ops) == _split_by_characters(ops)


@given(st.text(alphabet="R01,[]() .x", max_size=40))
def test_operands_split_matches_the_character_loop(ops):
    assert sass._split_operands(ops) == _split_by_characters(ops)


def _parse_by_lines(text: str) -> dict:
    """The listing read line by line, each line tried against the three line forms: what the
    one-pattern parse must give."""
    funcs, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^\s*/\*([0-9a-f]{4,})\*/\s(.*)$", line)
        if m:
            body = re.sub(r"/\*.*?\*/", "", m.group(2)).strip()
            body = body[:-1].strip() if body.endswith(";") else body
            if current is not None and body:
                current[0].append(tuple(sass.parse_instr(int(m.group(1), 16), body)))
            continue
        m = re.match(r"^//-+\s+\.text\.(\S+)\s+-+", line)
        if m:
            current = funcs[m.group(1)] = ([], {})
            continue
        m = re.match(r"^(\.L_x_\d+|[A-Za-z_$][\w$.]*):\s*$", line.strip())
        if m and current is not None:
            current[1][m.group(1)] = len(current[0])
    return funcs


def _as_lines(funcs: dict) -> dict:
    return {n: ([tuple(i) for i in f.instrs], f.labels) for n, f in funcs.items()}


LINE_FORMS = [
    "//--------------------- .text.k --------------------------",
    "//--------------------- .text.other ----------------------",
    "        .section        .text.k,\"ax\",@progbits",
    "k:", ".L_x_0:", ".L_x_1:   ", "  .L_x_2:",
    "        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;",
    "        /*0010*/                   FFMA R1, R1, R2, R3 ;",
    "        /*0020*/              @!P0 BRA `(.L_x_1) ;",
    "        /*0030*/                   { IADD R0, R0, 0x1 ;  /* 0x4c10000000170000 */",
    "        /*0040*/                   LDG.E R35, [R4.64+0x80] ;        /* 0x000080... */",
    "        /*0050*/ ;", "        /*0060*/", "/*0070*/\tEXIT ;", "        /* 0x000fc40000000f00 */",
    "", "   ", "\t.headerflags @\"EF_CUDA_SM90\"",
]


@given(st.lists(st.sampled_from(LINE_FORMS), max_size=40),
       st.sampled_from(["\n", "\r\n", "\r"]))
def test_one_pattern_parse_reads_what_a_line_by_line_reading_does(lines, newline):
    text = newline.join(lines) + newline
    assert _as_lines(sass.parse(text)) == _parse_by_lines(text)


def test_repeated_instructions_are_separate_at_their_offsets():
    text = "//----- .text.k -----\n" + "".join(
        f"        /*{16 * i:04x}*/   FFMA R1, R1, R2, R3 ;\n" for i in range(3))
    instrs = sass.parse(text)["k"].instrs
    assert [i.offset for i in instrs] == [0, 16, 32]
    assert len(set(instrs)) == 3 and {i.operands for i in instrs} == {("R1", "R1", "R2", "R3")}


@pytest.mark.parametrize("enabled", [True, False])
def test_the_garbage_collector_is_left_as_it_was(enabled):
    import gc
    import threading
    seen = []

    def parse_and_look():
        with sass._collector_paused():
            seen.append(gc.isenabled())
            sass.parse(SAMPLE)
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        threads = [threading.Thread(target=parse_and_look) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen == [False] * 4
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_a_parsed_listing_is_left_out_of_the_collectors_later_passes():
    """What a parse made is frozen (never scanned again by the cyclic collector), and the
    collector is back on after it."""
    import gc
    was = gc.isenabled()
    gc.enable()
    try:
        before = gc.get_freeze_count()
        funcs = sass.parse(SAMPLE)
        assert gc.get_freeze_count() > before
        assert gc.isenabled()
        assert all(gc.is_tracked(f.instrs) for f in funcs.values())
        young = {id(o) for o in gc.get_objects(generation=0)}
        assert not any(id(f.instrs) in young for f in funcs.values())
    finally:
        (gc.enable if was else gc.disable)()
