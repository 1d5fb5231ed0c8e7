"""throughput: the loop verification of a throughput probe and the entry-stamp check of the
launch kernels, on synthetic SASS (the offline ptxas checks run in the static suite)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import loop, sass
from pytest_gpuchar.core.verify import ProbeInvalid
from pytest_gpuchar.topics.throughput import kernels
from pytest_gpuchar.topics.throughput.rows import LaunchCost

LOOP = """
//--------------------- .text.tp_ffma --------------------------
tp_ffma:
        /*0000*/                   CS2R R4, SR_CLOCKLO ;
        /*0010*/                   UMOV UR4, URZ ;
.L_x_0:
{body}
        /*0f00*/                   UIADD3 UR4, UR4, 0x1, URZ ;
        /*0f10*/                   ISETP.LE.U32.AND P0, PT, R6, UR4, PT ;
        /*0f20*/              @!P0 BRA `(.L_x_0) ;
        /*0f30*/                   CS2R R6, SR_CLOCKLO ;
        /*0f40*/                   EXIT ;
"""


def _func(n_ffma: int, extra: str = "", hoisted: int = 0):
    body = "\n".join(f"        /*{0x20 + 16 * k:04x}*/                   FFMA R{8 + k % 8}, "
                     f"R{8 + k % 8}, R2, R3 ;" for k in range(n_ffma))
    text = LOOP.format(body=body + extra)
    if hoisted:
        text = text.replace("UMOV UR4, URZ ;", "UMOV UR4, URZ ;\n" + "\n".join(
            "        /*0018*/                   FFMA R30, R30, R2, R3 ;" for _ in range(hoisted)))
    return sass.parse(text)["tp_ffma"]


def test_parse_records_labels():
    f = _func(4)
    assert f.labels[".L_x_0"] == 2
    assert f.instrs[f.labels[".L_x_0"]].opcode == "FFMA"


def test_verify_loop_accepts_exact_body():
    p = kernels.probe("ffma", "sm_90")
    v = p.check({p.entry: _func(p.ops_per_iter)})
    assert v.unit == {"FFMA": 1.0}
    assert v.loop_control == {"UIADD3": 1, "ISETP.LE.U32.AND": 1, "BRA": 1}
    assert v.ok and v.body_instructions == p.ops_per_iter + 3


@pytest.mark.parametrize("n, extra, hoisted, why", [
    (255, "", 0, "wanted 256"),
    (512, "", 0, "wanted 256"),                      # unrolled twice
    (256, "\n        /*0e00*/ STG.E [R2.64], R8 ;", 0, "other instructions"),
    (256, "", 1, "outside the loop"),
])
def test_verify_loop_rejects(n, extra, hoisted, why):
    p = kernels.probe("ffma", "sm_90")
    with pytest.raises(ProbeInvalid, match=why) as e:
        p.check({p.entry: _func(n, extra, hoisted)})
    assert "timed region" in str(e.value)   # the listing is shown


def test_verify_loop_needs_a_loop():
    p = kernels.probe("ffma", "sm_90")
    f = _func(256)
    f.labels.clear()
    with pytest.raises(ProbeInvalid, match="exactly one loop"):
        p.check({p.entry: f})


def test_verify_loop_needs_two_clock_reads():
    p = kernels.probe("ffma", "sm_90")
    f = sass.parse(LOOP.format(body="").replace("CS2R R6, SR_CLOCKLO", "NOP"))["tp_ffma"]
    with pytest.raises(ProbeInvalid, match="expected two clock reads, found 1"):
        p.check({p.entry: f})


def test_missing_kernel_is_a_region_error():
    p = kernels.probe("ffma", "sm_90")
    with pytest.raises(sass.RegionError, match="missing"):
        p.check({})


def test_counter_increment_is_not_an_op():
    ins = sass.parse_instr(0, "IADD3 R9, R9, 0x1, RZ")
    assert loop.is_counter(ins)
    assert not loop.is_counter(sass.parse_instr(0, "IADD3 R9, R9, R2, RZ"))


STAMP = """
//--------------------- .text.gpuchar_warp_launch --------------------------
gpuchar_warp_launch:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   {first}
        /*0020*/                   CS2R R2, SR_CLOCKLO ;
        /*0030*/                   S2R R4, SR_TID.X ;
        /*0040*/                   EXIT ;
"""


def _stamp(first: str):
    return sass.parse(STAMP.format(first=first))["gpuchar_warp_launch"]


def test_entry_stamp_accepts_setup_before_the_clock():
    p = kernels.stamp_probe(LaunchCost.WARP, "sm_90")
    v = p.check({kernels.WARP_ENTRY: _stamp("ULDC.64 UR4, c[0x0][0x208] ;")})
    assert v.setup == ["LDC", "ULDC.64"]


def test_entry_stamp_rejects_work_before_the_clock():
    p = kernels.stamp_probe(LaunchCost.WARP, "sm_90")
    with pytest.raises(ProbeInvalid, match=r"launch/warp: instructions before the entry clock "
                                           r"read that are not setup: \['LDG.E'\]"):
        p.check({kernels.WARP_ENTRY: _stamp("LDG.E R6, desc[UR4][R2.64] ;")})


def test_entry_stamp_needs_a_clock_read():
    p = kernels.stamp_probe(LaunchCost.BLOCK, "sm_90")
    f = sass.parse(STAMP.format(first="NOP ;").replace("CS2R R2, SR_CLOCKLO", "NOP")
                   .replace("gpuchar_warp_launch", kernels.BLOCK_ENTRY))[kernels.BLOCK_ENTRY]
    with pytest.raises(ProbeInvalid, match="launch/block: no %clock64 read"):
        p.check({kernels.BLOCK_ENTRY: f})
