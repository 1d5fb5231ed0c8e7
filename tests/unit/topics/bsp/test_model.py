"""The prediction of a row with fixed parameters (no GPU): where its numbers come from (this
session's results before the expectation files, a device's section before the arch's), the
Table 1-8 export behind gpuchar-model-params, and the model's intermediates."""
from __future__ import annotations

import pytest

from pytest_gpuchar.models import manybsp as mb
from pytest_gpuchar.results.expectations import parse
from pytest_gpuchar.topics.bsp import model, params
from pytest_gpuchar.topics.bsp.rows import MU, SIZES

H200 = "NVIDIA H200"
FIXED = {   # an H200-like run's characteristics
    "throughput.launch.warp": 2.0, "throughput.launch.block": 362.5,
    "throughput.launch.issue_cycle": 1.01, "throughput.bar_sync.nt256": 28.6,
    "throughput.bar_sync.nt1024": 76.6, "memory.latency.dram_cv": 660.0,
    "memory.latency.l2_hit": 280.0, "memory.latency.l1_hit": 32.0,
    "memory.latency.shared_load": 23.0, "memory.latency.shared_store": 5.0,
    "latency.add.u32": 5.0, "latency.add.s64": 4.0, "latency.add.f32": 4.0,
    "latency.mul.rn.f32": 4.0, "latency.fma.rn.f32": 4.0, "latency.add.f64": 8.0,
    "latency.fma.rn.f64": 8.0, "latency.div.rn.f32": 57.0, "latency.rcp.rn.f32": 77.0,
    "latency.sqrt.rn.f32": 55.5, "latency.cvt.rzi.s32.f32": 17.0,
    "latency.mul.wide.u32": 7.0, "latency.mul.lo.u32": 4.0, "latency.mad.lo.u32": 4.0,
    "latency.lop3.b32": 4.0, "latency.setp.ne.s32": 4.0,
    "throughput.unit.fp32.add": 126.6, "throughput.unit.fp32.mul": 126.6,
    "throughput.unit.fp32.fma": 126.6, "throughput.unit.int.add": 125.9,
    "throughput.unit.int.mad": 64.0, "throughput.unit.int.shift": 63.7,
    "throughput.unit.int.logic": 63.5, "throughput.unit.int.minmax": 63.8,
    "throughput.unit.cvt.f32_f64": 15.1, "throughput.unit.fp64.add": 64.0,
    "throughput.unit.fp64.fma": 59.0, "throughput.unit.sfu.rsqrt": 16.0,
    "throughput.unit.sfu.sqrt": 16.0, "throughput.unit.ldst.lds": 32.0,
}


def fixed_values() -> params.Values:
    results = [{"key": k, "arch": "sm_90", "value": v, "unit": "cycles", "status": "pass"}
               for k, v in FIXED.items()]
    return params.Values("sm_90", results)


def fixed_model(size_id: str, regs: int = 32, **kw) -> tuple[model.Model, dict]:
    v = fixed_values()
    p = params.parameters(v, 132, {"device": H200, "sm_count": 132})
    size = next(s for s in SIZES if s.id == size_id)
    return model.model(size, v, p, shared_per_sm=228 * 1024, regs=regs, **kw), p


def test_values_session_first_then_device_then_arch():
    exp = parse("schema: 2\narch: sm_90\ncharacteristics:\n"
                "  latency.add.u32: {value: 4, unit: cycles, tolerance: {abs: 1}, source: x}\n"
                "  latency.add.f32: {range: [3, 5], unit: cycles, source: x}\n"
                "devices:\n  NVIDIA H200:\n    characteristics:\n"
                "      latency.add.u32: {value: 6, unit: cycles, tolerance: {abs: 1}, "
                "source: y}\n", __import__("pathlib").Path("sm_90.yaml"))
    v = params.Values("sm_90", [], exp, H200)
    assert v("latency.add.u32") == 6 and params.short_source(v.get("latency.add.u32").source) == "sm_90.yaml:9"
    assert params.Values("sm_90", [], exp, "NVIDIA H100 80GB HBM3")("latency.add.u32") == 4
    # a range (a model's boards, --fleet) gives its midpoint, saying so
    assert v("latency.add.f32") == 4 and "midpoint" in v.get("latency.add.f32").source
    mine = [{"key": "latency.add.u32", "arch": "sm_90", "value": 5.0, "status": "measured"},
            {"key": "latency.add.f32", "arch": "sm_90", "value": 9.0, "status": "unstable"}]
    v = params.Values("sm_90", mine, exp, H200)
    assert v.get("latency.add.u32") == params.ParamValue("latency.add.u32", 5.0, "", "this session")
    assert v("latency.add.f32") == 4      # this session's unstable figure is not used


def test_parameters_are_the_export_of_these_values():
    v = fixed_values()
    p = params.parameters(v, 132, {"device": H200, "sm_count": 999})
    assert p["n_SM"] == 132 and p["n_ws"] == 4
    assert p["parameters"]["mem_lat"] == {"value": 660.0, "unit": "cycles",
                                          "from": "memory.latency.dram_cv",
                                          "source": "this session"}
    assert p == {**params.model_parameters(v.report({"device": H200, "sm_count": 999}),
                                           "sm_90"), "n_SM": 132, "parameters": p["parameters"]}
    assert params.missing(p, model.NEEDED) == []
    gone = params.Values("sm_90", [r for r in v.report()["results"]
                                   if r["key"] != "throughput.launch.block"])
    lacking = params.missing(params.parameters(gone, 132), model.NEEDED)
    assert len(lacking) == 1 and lacking[0].startswith("block_lnch_ovh (not measured")


def test_knn_prediction_with_fixed_parameters():
    """KNN at the report's size on an H200-like device: w = 2 (eq. 6), rho = 8 (the thread
    limit), the launch counts as the report's, and the cycles eq. (24) gives on our BLOCK."""
    m, _ = fixed_model("knn-42764")
    p = m.prediction
    assert (p.w, p.rho, m.launch.n_b, m.launch.l_m, m.launch.l_c) == (2, 8, 168, 2, 26)
    assert m.device.mem_lat == 660.0 and m.device.mu == MU
    assert p.block_comm == 2 * 2 * 660.0 + 2 * 1 * 660.0        # two-segment load, one store
    assert p.block_comm_delta == 2 * 2 * 660.0
    again = (362.5 + 168 / 132 * p.comp / min(MU, 4.5) + p.novlp / 2)
    assert p.branch == "24" and p.cycles == pytest.approx(again)
    assert round(p.cycles) == 1445


def test_mm_and_hotspot_predictions_with_fixed_parameters():
    mm, _ = fixed_model("mm-320x320x640")
    assert (mm.prediction.w, mm.prediction.rho, mm.launch.l_b) == (8, 2, 20)
    assert mm.derived.level1[1].ovh == 2 * 76.6 and mm.derived.level1[1].iterations == 10
    assert mm_rho_by_registers() == {32: 2, 33: 1, 64: 1}
    hs, _ = fixed_model("hotspot-512x512", regs=40)
    assert (hs.prediction.w, hs.prediction.rho, hs.launch.shmem_per_block) == (2, 6, 3072)
    assert [s.iterations for s in hs.derived.level1] == [1, 2, 1, 1]
    assert round(hs.prediction.cycles) == 13250 and round(mm.prediction.cycles) == 43295


def mm_rho_by_registers() -> dict[int, int]:
    return {r: fixed_model("mm-320x320x640", regs=r)[0].prediction.rho for r in (32, 33, 64)}


def test_l2_resident_variant_takes_the_l2_latency():
    d, _ = fixed_model("knn-1048576")
    l2, _ = fixed_model("knn-1048576", level=model.MemLevel.L2)
    assert l2.device.mem_lat == 280.0 and l2.device.g[2] == 0.0
    assert l2.prediction.block_comm == d.prediction.block_comm * 280.0 / 660.0
    assert l2.prediction.cycles < d.prediction.cycles


def test_model_data_for_the_report():
    m, p = fixed_model("hotspot-1024x1024", regs=40)
    data = m.data(p)
    assert data["prediction"]["cycles"] == round(m.prediction.cycles, 3)
    assert data["launch"]["n_b"] == 7396 and data["device"]["mu"] == MU
    assert data["level1"][1][5] == 2 and data["mem_level"] == "dram"
    assert data["parameters"]["mem_lat"]["from"] == "memory.latency.dram_cv"
    assert {"latency.fma.rn.f64", "memory.latency.shared_load"} <= set(data["latency_keys"])
    assert data["instructions_per_unit"]["DPU"] == 7 and data["instructions_per_unit"]["MI"] == 3
    assert isinstance(m.prediction, mb.Prediction)
