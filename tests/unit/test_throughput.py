"""throughput / launch: PTX builders, loop verification, per-SM analysis, documented peaks,
model-parameter export (CPU only; the offline ptxas checks run in the static suite)."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from pytest_gpuchar import launch, sass, throughput as tp
from pytest_gpuchar.verify import ProbeInvalid

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
    p = tp.probe("ffma", "sm_90")
    v = tp.verify_loop(p, _func(p.ops_per_iter))
    assert v["unit"] == {"FFMA": 1.0}
    assert v["loop_control"] == {"UIADD3": 1, "ISETP.LE.U32.AND": 1, "BRA": 1}


@pytest.mark.parametrize("n, extra, hoisted, why", [
    (255, "", 0, "wanted 256"),
    (512, "", 0, "wanted 256"),                      # unrolled twice
    (256, "\n        /*0e00*/ STG.E [R2.64], R8 ;", 0, "other instructions"),
    (256, "", 1, "outside the loop"),
])
def test_verify_loop_rejects(n, extra, hoisted, why):
    p = tp.probe("ffma", "sm_90")
    with pytest.raises(ProbeInvalid, match=why) as e:
        tp.verify_loop(p, _func(n, extra, hoisted))
    assert "timed region" in str(e.value)   # the listing is shown


def test_verify_loop_needs_a_loop():
    p = tp.probe("ffma", "sm_90")
    f = _func(256)
    f.labels.clear()
    with pytest.raises(ProbeInvalid, match="exactly one loop"):
        tp.verify_loop(p, f)


def test_kernel_ptx_shape():
    p = tp.probe("dfma", "sm_90")
    assert '.pragma "nounroll";' in p.ptx
    assert p.ptx.count("fma.rn.f64") == tp.CHAINS * tp.UNROLL
    assert ".maxntid 256, 1, 1" in p.ptx and f".minnctapersm {tp.BLOCKS_PER_SM}" in p.ptx
    assert "%smid" in p.ptx and "%clock64" in p.ptx
    # every chain's result is stored after the loop
    assert p.ptx.count("st.global.b64 [%res+") == tp.CHAINS


def test_counter_increment_is_not_an_op():
    ins = sass.parse_instr(0, "IADD3 R9, R9, 0x1, RZ")
    assert tp._is_counter(ins)
    assert not tp._is_counter(sass.parse_instr(0, "IADD3 R9, R9, R2, RZ"))


def test_peaks_from_the_guide():
    assert tp.peak("ffma", "sm_90") == 128
    assert tp.peak("dfma", "sm_90") == 64
    assert tp.peak("hfma2", "sm_90") == 256
    assert tp.peak("ffma", "sm_80") == 64
    assert tp.peak("dfma", "sm_61") == 4
    assert tp.peak("ffma", "sm_30") == 192
    assert tp.peak("int.mad", "sm_61") is None          # "multiple instructions"
    assert tp.peak("ldst.lds", "sm_90") is None


def test_per_sm_spans_and_rate():
    rec = np.array([[100, 1100, 0], [110, 1090, 0], [50, 2050, 1], [60, 2000, 1]], np.uint64)
    assert tp.per_sm_spans(rec) == {0: (1000, 2), 1: (2000, 2)}
    # 128 results per clock: cycles = results / 128 + 300 fixed
    res = {16: 16 * 8192.0, 32: 32 * 8192.0, 48: 48 * 8192.0}
    spans = {t: [r / 128 + 300 + d for d in (0, 1, -1)] for t, r in res.items()}
    rate, spread, unstable, why, icpt, rates = tp.rate_from_spans(spans, res)
    assert rate == pytest.approx(128, rel=1e-3)
    assert not unstable and icpt == pytest.approx(300, abs=2)


def test_rate_unstable_when_repeats_disagree():
    res = {16: 16 * 8192.0, 32: 32 * 8192.0, 48: 48 * 8192.0}
    spans = {t: [r / 128, r / 100, r / 128] for t, r in res.items()}
    *_, unstable, why, _, _ = tp.rate_from_spans(spans, res)
    assert unstable and "per-repeat rates" in why


def test_block_and_warp_analysis():
    # 2 blocks of 2 warps: [start, end, smid, cta]
    rec = np.array([[0, 100, 0, 0], [10, 120, 0, 0], [5, 50, 1, 1], [25, 60, 1, 1]], np.uint64)
    assert launch.block_spans(rec, 2) == [120, 55]
    assert launch.warp_start_skew(rec, 2) == [10, 20]
    serial = np.array([[0, 10, 0, 0], [30, 40, 0, 1], [0, 10, 1, 2], [5, 15, 1, 3]], np.uint64)
    span, count, bodies, overlap = launch.serial_blocks(serial)
    assert span == {0: 40, 1: 15} and count == {0: 2, 1: 2} and overlap
    assert launch.issue_cycle({"ffma": 128.0, "dfma": 64.0}) == 1.0


def test_bar_probe_has_one_kernel_per_block_size():
    a, b = launch.bar_probe("sm_90", 256), launch.bar_probe("sm_90", 1024)
    assert a.entry != b.entry and ".maxntid 1024, 1, 1" in b.ptx
    assert a.ptx.count("bar.sync 0;") == launch.BAR_UNROLL


def test_topic_module_holds_every_kernel():
    text = tp.topic_module("sm_90")
    for p in tp.suite_probes("sm_90"):
        assert f".entry {p.entry}(" in text
    assert launch.WARP_ENTRY in text and launch.BLOCK_ENTRY in text


REPORT = {"meta": {"device": "NVIDIA H200"}, "results": [
    {"key": "throughput.launch.warp", "arch": "sm_90", "value": 1.5, "unit": "cycles",
     "status": "pass", "provenance": {"device": "NVIDIA H200", "sm_count": 132}},
    {"key": "throughput.bar_sync.nt256", "arch": "sm_90", "value": 30.0, "unit": "cycles",
     "status": "unstable"},
    {"key": "throughput.unit.fp32.fma", "arch": "sm_90", "value": 127.5, "unit": "ops/clk/SM",
     "status": "measured"},
    {"key": "memory.latency.dram_cv", "arch": "sm_90", "value": 480.0, "unit": "cycles",
     "status": "pass"},
    {"key": "throughput.launch.warp", "arch": "sm_80", "value": 9.0, "unit": "cycles",
     "status": "pass"},
]}


def test_model_parameters():
    m = launch.model_parameters(REPORT, "sm_90")
    p = m["parameters"]
    assert p["warp_lnch_ovh"]["value"] == 1.5 and p["warp_lnch_ovh"]["from"] == "throughput.launch.warp"
    assert p["bar_sync_ovh_256"]["value"] is None          # unstable results are not exported
    assert "not measured" in p["bar_sync_ovh_256"]["reason"]
    assert p["mem_lat"]["value"] == 480.0
    assert m["n_fu_results_per_clk_per_sm"] == {"fp32.fma": 127.5}
    assert m["n_SM"] == 132 and m["arch"] == "sm_90"


def test_model_params_cli(tmp_path, capsys):
    import json
    src = tmp_path / "r.json"
    src.write_text(json.dumps(REPORT))
    out = tmp_path / "model.yaml"
    assert launch.main(["--results", str(src), "--arch", "90", "-o", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["parameters"]["warp_lnch_ovh"]["value"] == 1.5
    assert launch.main(["--results", str(tmp_path / "nope.json"), "--arch", "sm_90"]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert launch.main(["--results", str(src), "--arch", "sm_99"]) == 2


def test_dynamic_smem_holds_blocks_per_sm():
    for per_sm in (233472, 167936, 102400, 65536):
        x = tp.dynamic_smem(per_sm, 4)
        if x:
            assert 4 * (x + 1024) <= per_sm < 5 * (x + 1024)
    assert tp.dynamic_smem(233472, 4) > 0
    assert tp.dynamic_smem(0) == 0


def test_block_fit_pools_the_blocks_each_sm_ran():
    import random
    rnd = random.Random(1)
    # 430 cycles per block, 40 fixed; SMs ran 2..9 blocks
    reps = [[(c, 430 * c + 40 + rnd.randint(-3, 3)) for c in (2, 3, 4, 5, 7, 8, 9) * 5]
            for _ in range(5)]
    f = launch.block_fit(reps)
    assert f["value"] == pytest.approx(430, abs=2) and not f["unstable"]
    assert launch.block_fit([[(4, 100), (4, 120)]])["unstable"]        # one block count only
    # not linear in blocks per SM (an SM handed 7+ waited for the dispatcher): reported with
    # its residual, judged by the gap cross-check instead
    bent = [[(c, 430 * c + (1500 if c > 6 else 0)) for c in (2, 3, 4, 5, 7, 8, 9)]] * 3
    f = launch.block_fit(bent)
    assert not f["unstable"] and f["residual"] > 300


def test_block_gaps_and_the_cross_check():
    # SM 0 ran blocks [0,50], [420,470], [840,890]; SM 1 [10,60], [400,450]
    rec = np.array([[0, 50, 0, 0], [420, 470, 0, 1], [840, 890, 0, 2], [10, 60, 1, 3],
                    [400, 450, 1, 4]], np.uint64)
    assert sorted(launch.block_gaps(rec)) == [340, 370, 370]
    ok = launch.judge_block(364.0, [340, 370, 370])
    assert ok["why"] == "" and ok["data"]["gap_median_cycles"] == 370
    bad = launch.judge_block(364.0, [900, 950, 1000])
    assert "disagree" in bad["why"] and "950" in bad["why"]
    assert "no two blocks" in launch.judge_block(364.0, [])["why"]


def test_warp_launch_figure_is_the_full_block_skew_per_warp():
    # H200-like: warps start in parallel groups (not linear in W)
    skew = {2: [15.0] * 5, 4: [59.5] * 5, 8: [50.0] * 5, 16: [56.0] * 5,
            32: [63.0, 62.0, 64.0, 63.5, 63.0]}
    r = launch.warp_launch_figure(skew, ["LDC"])
    assert r.value == pytest.approx(63.0 / 31) and not r.unstable
    assert r.data["slope_linear"] is False and r.data["skew_block_warps"] == 32
    noisy = {**skew, 32: [30.0, 60.0, 90.0, 60.0, 60.0]}
    assert launch.warp_launch_figure(noisy).unstable
