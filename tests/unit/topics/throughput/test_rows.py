"""throughput: the rows' SASS units per arch and the documented peaks."""
from __future__ import annotations

from pytest_gpuchar.topics.throughput import rows


def test_peaks_from_the_guide():
    assert rows.peak("ffma", "sm_90") == 128
    assert rows.peak("dfma", "sm_90") == 64
    assert rows.peak("hfma2", "sm_90") == 256
    assert rows.peak("ffma", "sm_80") == 64
    assert rows.peak("dfma", "sm_61") == 4
    assert rows.peak("ffma", "sm_30") == 192
    assert rows.peak("int.mad", "sm_61") is None          # "multiple instructions"
    assert rows.peak("ldst.lds", "sm_90") is None
    assert rows.peak("dfma", "sm_90a") == 64


def test_unit_is_the_newest_entry_at_or_below_the_arch():
    mad = rows.ROWS["int.mad"]
    assert mad.unit("sm_61") == ("XMAD", "XMAD.MRG", "XMAD.PSL.CBCC")
    assert mad.unit("sm_90") == ("IMAD",)
    assert rows.ROWS["hfma2"].unit("sm_50") is None
    assert rows.ROWS["int.minmax"].unit("sm_70") == ("ISETP.LT.AND", "SEL")


def test_supported():
    assert rows.ROWS["hfma2"].supported("sm_50") == "hfma2 needs sm_53+ (sm_50 lacks it)"
    assert rows.ROWS["hfma2"].supported("sm_53") is None


def test_launch_rows_are_the_table_1_8_parameters():
    assert [k.value for k in rows.LAUNCH_ROWS] == ["warp", "block", "issue_cycle"]
