"""Accel-Sim fragment: only option names of a tested Accel-Sim config, every value annotated
with its characteristic and run, unmeasured options left out (not invented), right numbers."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_gpuchar.models import accelsim

# Option names of Accel-Sim's tested Hopper configuration, written out by hand (names only) from
#   accel-sim/gpgpu-sim_distribution  configs/tested-cfgs/SM90_H100/gpgpusim.config
#     (commit 01f6fc4da2a2; Accel-Sim builds this repository as gpu-simulator/gpgpu-sim), and
#   accel-sim/accel-sim-framework  gpu-simulator/configs/tested-cfgs/SM90_H100/trace.config
#     (commit 46b467f30aad).
# Arity: values per option in that file (comma-separated); "-ptx_opcode_latency_tesnor" is
# spelt so in the config and in gpgpu-sim's option registration (src/cuda-sim/cuda-sim.cc).
SM90_H100_GPGPUSIM = {
    "-gpgpu_n_clusters": 1, "-gpgpu_n_cores_per_cluster": 1, "-gpgpu_clock_domains": 1,
    "-gpgpu_l1_latency": 1, "-gpgpu_smem_latency": 1, "-gpgpu_l2_rop_latency": 1,
    "-dram_latency": 1, "-gpgpu_TB_launch_latency": 1, "-gpgpu_unified_l1d_size": 1,
    "-gpgpu_cache:dl1": 4, "-gpgpu_cache:dl2": 4,
    "-ptx_opcode_latency_int": 5, "-ptx_opcode_initiation_int": 5,
    "-ptx_opcode_latency_fp": 5, "-ptx_opcode_initiation_fp": 5,
    "-ptx_opcode_latency_dp": 5, "-ptx_opcode_initiation_dp": 5,
    "-ptx_opcode_latency_sfu": 1, "-ptx_opcode_initiation_sfu": 1,
    "-ptx_opcode_latency_tesnor": 1, "-ptx_opcode_initiation_tensor": 1,
}
SM90_H100_TRACE = {
    "-trace_opcode_latency_initiation_int": 2, "-trace_opcode_latency_initiation_sp": 2,
    "-trace_opcode_latency_initiation_dp": 2, "-trace_opcode_latency_initiation_sfu": 2,
    "-trace_opcode_latency_initiation_tensor": 2, "-trace_opcode_latency_initiation_spec_op_3": 2,
    "-specialized_unit_3": 6,
}
OPTION = re.compile(r"(?<![\w-])-(?:gpgpu|ptx|dram|trace|specialized)[\w:]*")

META = {"device": "Fake GPU", "arch": "sm_90", "date": "2026-01-02T03:04:05+00:00",
        "sm_count": 8, "sm_clock_max_mhz": 1500.0, "driver": "1.0", "ptxas": "12.8"}
RUN = "run 2026-01-02T03:04:05+00:00 on Fake GPU"


def res(key, value, unit="cycles/op", status="pass", arch="sm_90", data=None):
    return {"key": key, "arch": arch, "status": status, "value": value, "unit": unit,
            "spread": 0.0, "data": data or {}}


def rate(key, value):
    return res(key, value, unit="ops/clk/SM")


RESULTS = [
    res("latency.add.u32", 5.0), res("latency.max.u32", 4.0), res("latency.mul.lo.u32", 4.0),
    res("latency.mad.lo.u32", 4.4), res("latency.div.u32", 60.4),
    rate("throughput.unit.int.add", 64.0), rate("throughput.unit.int.minmax", 64.0),
    res("cpi.mul.lo.u32", 2.0), rate("throughput.unit.int.mad", 32.0), res("cpi.div.u32", 70.0),
    res("latency.add.f32", 4.0), res("latency.max.f32", 4.0), res("latency.mul.rn.f32", 4.0),
    res("latency.fma.rn.f32", 4.0), rate("throughput.unit.fp32.fma", 128.0),
    res("latency.div.rn.f32", 40.0, arch="sm_80"),           # another arch: not this run's
    res("latency.add.f64", 8.0, status="unstable"),          # no number to use
    res("latency.sin.approx.f32", 23.0), rate("throughput.unit.sfu.sin", 16.0),
    rate("throughput.unit.sfu.ex2", 16.0),
    res("latency.tanh.approx.f32", 17.2, data={"sass_unit": {"MUFU.TANH": 1.0}}),
    res("latency.rsqrt.approx.f32", 39.0, data={"sass_unit": {"MUFU.RSQ": 1, "FMUL": 2}}),
]
PARAMS = {"arch": "sm_90", "n_ws": 4, "warp_size": 32, "n_SM": 8, "parameters": {
    "l1_lat": {"value": 30.4, "unit": "cycles", "from": "memory.latency.l1_hit"},
    "l2_lat": {"value": 250.6, "unit": "cycles", "from": "memory.latency.l2_hit"},
    "shared_lat": {"value": 23.0, "unit": "cycles", "from": "memory.latency.shared_load"},
    "mem_lat": {"value": None, "reason": "not measured in this run"}}}


def options(text: str) -> dict[str, str]:
    """Option lines of a fragment: name -> value."""
    out = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, value = line.split("#", 1)[0].split()
            out[name] = value
    return out


@pytest.fixture(scope="module")
def frags():
    return (accelsim.fragment(PARAMS, RESULTS, META),
            accelsim.trace_fragment(PARAMS, RESULTS, META))


def test_only_option_names_of_the_tested_config(frags):
    for text, known in zip(frags, (SM90_H100_GPGPUSIM, SM90_H100_TRACE)):
        mentioned = set(OPTION.findall(text))
        assert mentioned and mentioned <= set(known), mentioned - set(known)
        for name, value in options(text).items():
            assert len(value.split(",")) == known[name], (name, value)


def test_every_value_names_its_characteristic_and_run(frags):
    keys = {r["key"] for r in RESULTS} | {p["from"] for p in PARAMS["parameters"].values()
                                          if p.get("from")}
    for text in frags:
        lines = [x for x in text.splitlines() if x and not x.startswith("#")]
        assert lines
        for line in lines:
            option, note = line.split("#", 1)
            assert note.rstrip().endswith(RUN), line
            assert any(k in note for k in keys) or "sm_count = 8" in note, line


def test_values(frags):
    gpgpusim, trace = (options(t) for t in frags)
    assert gpgpusim == {
        "-gpgpu_n_clusters": "8",
        "-gpgpu_l1_latency": "30", "-gpgpu_smem_latency": "23",
        "-gpgpu_l2_rop_latency": "220",                       # 250.6 - 30.4
        "-ptx_opcode_latency_int": "5,4,4,4,60",
        "-ptx_opcode_initiation_int": "2,2,2,4,60",           # 128/64, 128/64, 2, 128/32, capped
        "-ptx_opcode_latency_sfu": "23", "-ptx_opcode_initiation_sfu": "8",
    }
    assert trace == {
        "-trace_opcode_latency_initiation_int": "5,2",
        "-trace_opcode_latency_initiation_sp": "4,1",
        "-trace_opcode_latency_initiation_sfu": "17,8",       # the MUFU-only latency
    }


def test_unmeasured_options_are_left_out_not_invented(frags):
    gpgpusim, trace = frags
    for name, why in (("-dram_latency", "needs DRAM - L2 hit"),
                      ("-ptx_opcode_latency_fp", "DIV (looked for latency.div.rn.f32)"),
                      ("-ptx_opcode_latency_dp", "ADD (looked for latency.add.f64)"),
                      ("-ptx_opcode_latency_tesnor", "no measurement"),
                      ("-ptx_opcode_initiation_tensor", "no measurement"),
                      ("-gpgpu_clock_domains", "sm_clock_max_mhz = 1500.0 MHz"),
                      ("-gpgpu_cache:dl1", "geometry string")):
        line = next(x for x in gpgpusim.splitlines() if x.startswith(f"# {name}"))
        assert "not written" in line and why in line, line
    assert "-trace_opcode_latency_initiation_dp not written" in trace
    assert "-trace_opcode_latency_initiation_tensor not written" in trace
    assert "caution: gpgpu-sim sizes the int pipeline by the MAX latency (4" in gpgpusim
    assert "ADD 5, MAD 4" not in gpgpusim and "measured longer: ADD 5" in gpgpusim
    assert "(capped at the latency: DIV)" in gpgpusim


def test_memory_latency_order_is_checked():
    params = json.loads(json.dumps(PARAMS))
    params["parameters"]["l2_lat"]["value"] = 20.0
    text = accelsim.fragment(params, [], META)
    assert "-gpgpu_l2_rop_latency not written: L2 hit - L1 hit is not positive" in text
    assert "-ptx_opcode_latency_int not written: no measurement for ADD" in text


RUN_DIR = Path(__file__).resolve().parents[3] / "results/sm_90/nvidia-h100-80gb-hbm3"


def test_committed_h100_run():
    """The H100 night committed under results/: the options its figures determine; the L1
    hit latency, made unstable in a copy of the report, refused with its status, not
    exported."""
    from pytest_gpuchar.cli.model_params import model_parameters
    from pytest_gpuchar.results.files import read_report
    report = read_report(RUN_DIR / "gpuchar-results.json.gz")
    params = model_parameters(report, "sm_90")
    text = accelsim.fragment(params, report["results"], report["meta"])
    got = options(text)
    fig = {r["key"]: r["value"] for r in report["results"] if r["arch"] == "sm_90"}
    dram = round(fig["memory.latency.dram_cv"] - fig["memory.latency.l2_hit"])  # DRAM - L2 hit
    assert {k: got.get(k) for k in ("-gpgpu_n_clusters", "-gpgpu_l1_latency",
                                    "-gpgpu_smem_latency", "-dram_latency",
                                    "-ptx_opcode_latency_tesnor", "-ptx_opcode_initiation_sfu")} == {
        "-gpgpu_n_clusters": "132", "-gpgpu_l1_latency": "32", "-gpgpu_smem_latency": "23",
        "-dram_latency": str(dram), "-ptx_opcode_latency_tesnor": "24",
        "-ptx_opcode_initiation_sfu": "8"}
    shaky = [dict(r, status="unstable") if r["key"] == "memory.latency.l1_hit" else r
             for r in report["results"]]
    text2 = accelsim.fragment(model_parameters({**report, "results": shaky}, "sm_90"), shaky,
                              report["meta"])
    assert options(text2).get("-gpgpu_l1_latency") is None
    assert "-gpgpu_l1_latency not written: l1_lat: no usable measurement in this run: " \
        "memory.latency.l1_hit unstable" in text2
    assert set(got) <= set(SM90_H100_GPGPUSIM)
    trace = options(accelsim.trace_fragment(params, report["results"], report["meta"]))
    assert trace["-trace_opcode_latency_initiation_tensor"] == "24,6"
