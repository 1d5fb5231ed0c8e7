"""core.loop: the one backward-branch finder (on a function's ranges and on timed regions with
instructions left out), the timed region's bounds and its one loop."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import loop, sass
from pytest_gpuchar.core.verify import ProbeInvalid

LISTING = """\
//--------------------- .text.k --------------------------
        .section        .text.k,"ax",@progbits
k:
.text.k:
        /*0000*/                   S2R R9, SR_TID.X ;
        /*0010*/                   CS2R R4, SR_CLOCKLO ;
        /*0020*/                   MOV R10, RZ ;
.L_x_0:
        /*0030*/                   HMMA.16816.F32 R12, R16, R18, R12 ;
        /*0040*/              @!PT UIADD3 URZ, URZ, URZ, URZ ;
        /*0050*/                   IADD3 R10, R10, 0x1, RZ ;
        /*0060*/                   ISETP.NE.U32.AND P0, PT, R10, R11, PT ;
        /*0070*/               @P0 BRA `(.L_x_0) ;
        /*0080*/                   NOP ;
        /*0090*/                   CS2R R6, SR_CLOCKLO ;
        /*00a0*/                   BRA `(.L_x_1) ;
.L_x_1:
        /*00b0*/                   EXIT ;
.L_x_2:
"""


@pytest.fixture
def func() -> sass.Function:
    return sass.parse(LISTING)["k"]


def test_branch_targets(func):
    assert loop.branch_target(func, func.instrs[7]) == 3          # @P0 BRA .L_x_0
    assert loop.branch_target(func, func.instrs[10]) == 11        # forward, to EXIT
    assert loop.branch_target(func, func.instrs[3]) is None       # not a branch
    past = sass.Function("k", func.instrs, {**func.labels, ".L_x_0": len(func.instrs)})
    assert loop.branch_target(past, func.instrs[7]) is None       # a label past the end


def test_backward_branches_in_a_range_and_in_a_region(func):
    assert loop.backward_branches(func, func.instrs) == [(3, 7)]
    lo, hi = loop.timed_bounds(func, "p")
    assert (lo, hi) == (2, 9)
    assert loop.backward_branches(func, func.instrs[lo:hi]) == [(1, 5)]
    # a region with instructions left out (the filler): positions are the region's own
    region = [i for i in func.instrs[lo:hi] if not loop.never_executed(i)]
    assert [i.opcode for i in region] == ["MOV", "HMMA.16816.F32", "IADD3",
                                          "ISETP.NE.U32.AND", "BRA"]
    assert loop.backward_branches(func, region) == [(1, 4)]
    # the loop's label outside the stretch: no loop in it
    assert loop.backward_branches(func, func.instrs[4:9]) == []


def test_one_loop_and_its_failures(func):
    assert loop.one_loop(func, "p") == (2, 9, 3, 7)
    straight = sass.Function("k", func.instrs[:3] + func.instrs[8:], {})
    with pytest.raises(ProbeInvalid, match="p: 0 backward branches"):
        loop.one_loop(straight, "p")
    with pytest.raises(ProbeInvalid, match="p: expected two clock reads, found 1"):
        loop.timed_bounds(sass.Function("k", func.instrs[:3], {}), "p")


def test_never_executed():
    assert loop.never_executed(sass.parse_instr(0, "@!UPT UIADD3 URZ, URZ, URZ, URZ"))
    assert loop.never_executed(sass.parse_instr(0, "NOP"))
    assert not loop.never_executed(sass.parse_instr(0, "@P0 BRA `(.L_x_0)"))
