"""tcgen05 (sm_100a / sm_103a) static rows: targets, skips and the region check (CPU only)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.core.sass import parse_instr
from pytest_gpuchar.core.verify import ProbeInvalid
from pytest_gpuchar.topics.tensor.tcgen05 import kernels as tcgen05

ROW = {r.name: r for r in tcgen05.ROWS}


def test_targets_and_skips():
    assert tcgen05.probe(ROW["f16"], "sm_100").arch == "sm_100a"
    assert tcgen05.probe(ROW["f16"], "sm_103").arch == "sm_103a"
    for arch in ("sm_90", "sm_120", "sm_121"):
        with pytest.raises(NotApplicable, match="sm_100a/sm_103a only"):
            tcgen05.probe(ROW["f16"], arch)
    with pytest.raises(NotApplicable, match="kind::i8"):
        tcgen05.probe(ROW["i8"], "sm_103")
    assert [p.row.name for p in tcgen05.probes("sm_103")] == [
        "f16", "tf32", "f8f6f4", "mxf8f6f4", "mxf4nvf4.4x"]
    assert ROW["mxf4nvf4.4x"].sass_at("sm_103a") == "UTCOMMA.BLOCK16"


def test_kernel_text_holds_the_mma_and_its_commit():
    text = tcgen05.kernel(ROW["mxf8f6f4"])
    assert "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale [%tm], %adesc, %bdesc, " \
           "%idesc, [%ts_a], [%ts_b], %acc;" in text
    assert "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64" in text
    assert "[%ts_a]" not in tcgen05.kernel(ROW["f16"])


def _region(*lines):
    return [parse_instr(16 * k, t) for k, t in enumerate(lines)]


def test_region_check_wants_exactly_the_mma_and_one_commit():
    p = tcgen05.probe(ROW["f8f6f4"], "sm_100")
    ok = _region("@P0 ELECT P1, URZ, PT ;",
                 "UTCQMMA gdesc[UR8], gdesc[UR10], tmem[UR6], tmem[UR4], idesc[UR5], UP0 ;",
                 "UTCBAR [UR4], URZ ;")
    assert p.verify_regions({1: ok}, {}).unit == {"UTCQMMA": 1, "UTCBAR": 1}
    wrong = _region("UTCHMMA gdesc[UR8], gdesc[UR10], tmem[UR6], tmem[UR4], idesc[UR5], UP0 ;",
                    "UTCBAR [UR4], URZ ;")
    with pytest.raises(ProbeInvalid, match="wanted"):
        p.verify_regions({1: wrong}, {})
    alloc_inside = ok + _region("UTCATOMSWS.AND URZ, UR4 ;")
    with pytest.raises(ProbeInvalid):
        p.verify_regions({1: alloc_inside}, {})
