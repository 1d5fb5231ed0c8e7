"""Accel-Sim fragment: only option names gpgpu-sim registers, every value annotated with its
characteristic and run, every option written with every value gpgpu-sim's parser reads from it
(a value the run did not measure being SM90_H100's, said so), every latency / interval pair
inside its pipeline, unmeasured options left out (not invented), right numbers."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpuchar.models import accelsim, accelsim_config
from pytest_gpuchar.models import accelsim_rules as rules

# The gpgpusim.config options: every option the shipped base (Accel-Sim's SM90_H100 at
# fa235ebc, models/configs/) sets; a fragment writes only those, so the whole config
# substitutes each where it stands. The trace.config names, written out by hand from
# accel-sim/accel-sim-framework (gpu-simulator/trace-driven/trace_driven.cc). Values per
# option: rules.ARITY (what sscanf reads), one for the others. tools/accel-sim/check_config.py
# checks the same against the compiled parser.
SM90_H100_GPGPUSIM = set(rules.options(accelsim_config.base_text()))
SM90_H100_TRACE = {
    "-trace_opcode_latency_initiation_int", "-trace_opcode_latency_initiation_sp",
    "-trace_opcode_latency_initiation_dp", "-trace_opcode_latency_initiation_sfu",
    "-trace_opcode_latency_initiation_tensor", "-trace_opcode_latency_initiation_spec_op_3",
    "-specialized_unit_3",
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


def complete_and_inside(*texts: str) -> None:
    """The rules the fragments must keep, merged after SM90_H100: every option they write has
    every value gpgpu-sim reads from it, and every PTX class and trace unit enters its
    pipeline at a stage inside it."""
    for text in texts:
        for name, value in options(text).items():
            if name in rules.STRINGS:
                assert value == " ".join(value.split()) and value.count(":") > 2, name
                continue
            n = len(rules.read_values(name, value))
            assert n == rules.ARITY.get(name, 1), (name, value)
    eff = rules.merged(*texts)
    for stage in rules.stages(eff) + rules.trace_stages(eff):
        assert stage.inside, stage


@pytest.fixture(scope="module")
def frags():
    return (accelsim.fragment(PARAMS, RESULTS, META),
            accelsim.trace_fragment(PARAMS, RESULTS, META))


def test_only_option_names_gpgpusim_registers(frags):
    for text, known in zip(frags, (SM90_H100_GPGPUSIM, SM90_H100_TRACE)):
        mentioned = set(OPTION.findall(text))
        assert mentioned and mentioned <= known, mentioned - known
    complete_and_inside(*frags)


def test_every_value_names_its_characteristic_and_run(frags):
    keys = {r["key"] for r in RESULTS} | {p["from"] for p in PARAMS["parameters"].values()
                                          if p.get("from")}
    for text in frags:
        lines = [x for x in text.splitlines() if x and not x.startswith("#")]
        assert lines
        for line in lines:
            option, note = line.split("#", 1)
            assert note.rstrip().endswith(RUN), line
            assert (any(k in note for k in keys) or "sm_count = 8" in note
                    or "warp schedulers per SM" in note or "one unit per scheduler" in note
                    or "sm_clock_max_mhz = 1500" in note), line


def test_values(frags):
    gpgpusim, trace = (options(t) for t in frags)
    assert gpgpusim == {
        "-gpgpu_n_clusters": "8", "-gpgpu_num_sched_per_core": "4",
        "-gpgpu_num_sp_units": "4", "-gpgpu_num_int_units": "4", "-gpgpu_num_dp_units": "4",
        "-gpgpu_num_sfu_units": "4", "-gpgpu_num_tensor_core_units": "4",
        # core, interconnect, L2 at the SM clock; DRAM SM90_H100's (no documented peak)
        "-gpgpu_clock_domains": "1500.0:1500.0:1500.0:850.0",
        "-gpgpu_l1_latency": "30", "-gpgpu_smem_latency": "23",
        "-gpgpu_l2_rop_latency": "220",                       # 250.6 - 30.4
        "-ptx_opcode_latency_int": "5,4,4,4,60,21",           # SHFL: SM90_H100's 21
        "-ptx_opcode_initiation_int": "2,2,2,4,60,4",         # 128/64, 128/64, 2, 128/32,
        "-ptx_opcode_latency_sfu": "23",                      # capped DIV, SM90_H100's 4
        "-ptx_opcode_initiation_sfu": "8",
    }
    assert trace == {
        "-trace_opcode_latency_initiation_int": "5,2",
        "-trace_opcode_latency_initiation_sp": "4,1",
        "-trace_opcode_latency_initiation_sfu": "17,8",       # the MUFU-only latency
    }


def test_unmeasured_values_say_so(frags):
    gpgpusim = frags[0]
    line = next(x for x in gpgpusim.splitlines() if x.startswith("-ptx_opcode_latency_int"))
    assert "SM90_H100's 21, not measured" in line
    line = next(x for x in gpgpusim.splitlines() if x.startswith("-ptx_opcode_initiation_int"))
    assert "cpi.div.u32 = 70.00 cycles/op (capped at the latency 60)" in line
    line = next(x for x in gpgpusim.splitlines() if x.startswith("-gpgpu_clock_domains"))
    assert "DRAM 850: SM90_H100's, not measured" in line
    assert "merge after SM90_H100 (accel-sim/gpgpu-sim_distribution" in gpgpusim


def test_unmeasured_options_are_left_out_not_invented(frags):
    gpgpusim, trace = frags
    for name, why in (("-dram_latency", "needs DRAM - L2 hit"),
                      ("-ptx_opcode_latency_fp", "DIV (looked for latency.div.rn.f32)"),
                      ("-ptx_opcode_latency_dp", "ADD (looked for latency.add.f64)"),
                      ("-ptx_opcode_latency_tesnor", "no measurement for MMA"),
                      ("-gpgpu_kernel_launch_latency", "measures no kernel launch latency")):
        line = next(x for x in gpgpusim.splitlines() if x.startswith(f"# {name}"))
        assert "not written" in line and why in line, line
    assert "-trace_opcode_latency_initiation_dp not written" in trace
    assert "-trace_opcode_latency_initiation_tensor not written" in trace
    assert "INT pipeline 21 stages (max of int MAX and SHFL); start stages: int ADD 3" in gpgpusim


def test_memory_latency_order_is_checked():
    params = json.loads(json.dumps(PARAMS))
    params["parameters"]["l2_lat"]["value"] = 20.0
    text = accelsim.fragment(params, [], META)
    assert "-gpgpu_l2_rop_latency not written: L2 hit - L1 hit is not positive" in text
    assert "-ptx_opcode_latency_int, -ptx_opcode_initiation_int not written: no measurement " \
        "for ADD" in text


def test_a_start_stage_past_its_pipeline_raises_the_interval():
    """An int ADD latency of 30 with an interval of 1 would enter the 21-stage INT pipeline
    (max of MAX 4 and SHFL 21) at stage 29: the interval is raised to 10 and the comment says
    why; a dp DIV latency of 100 shrinks the SFU pipeline below SM90_H100's int DIV (145 - 8 =
    137): the int pair is written from SM90_H100 with that interval raised, said so."""
    results = [r for r in RESULTS if r["key"] not in ("latency.add.u32",)] + [
        res("latency.add.u32", 30.0),
        res("latency.add.f64", 8.0), res("latency.max.f64", 9.0), res("latency.mul.rn.f64", 8.0),
        res("latency.fma.rn.f64", 8.0), res("latency.div.rn.f64", 100.0)]
    text = accelsim.fragment(PARAMS, results, META)
    got = options(text)
    assert got["-ptx_opcode_latency_int"] == "30,4,4,4,60,21"
    assert got["-ptx_opcode_initiation_int"].startswith("10,")
    assert "raised from 2 to 10: latency 30 - interval must be below the INT pipeline's 21 " \
        "stages" in text
    assert got["-ptx_opcode_latency_dp"] == "8,9,8,8,100"
    assert got["-ptx_opcode_initiation_dp"] == "4,4,4,4,100"     # SM90_H100's, DIV capped
    complete_and_inside(text)
    nodp = [r for r in results if r["key"] != "latency.add.u32"]
    text = accelsim.fragment(PARAMS, [r for r in nodp if not r["key"].startswith(
        ("latency.add.u32", "latency.max.u32", "latency.mul.lo", "latency.mad.lo",
         "latency.div.u32"))], META)
    assert "not measured: written only to keep SM90_H100's values inside their pipeline" in text
    assert options(text)["-ptx_opcode_initiation_int"] == "2,2,2,2,46,4"   # 145 - 100 + 1
    complete_and_inside(text)


LAT = st.floats(min_value=1.0, max_value=400.0)
RATE = st.floats(min_value=0.25, max_value=256.0)


@settings(max_examples=60, deadline=None)
@given(lats=st.lists(LAT, min_size=18, max_size=18), rates=st.lists(RATE, min_size=6,
                                                                     max_size=6),
       cpis=st.lists(LAT, min_size=8, max_size=8))
def test_any_measurements_give_a_runnable_fragment(lats, rates, cpis):
    """Whatever a run measures, the fragments merged after SM90_H100 leave no value unread and
    no class outside its pipeline."""
    keys = ("latency.add.u32", "latency.max.u32", "latency.mul.lo.u32", "latency.mad.lo.u32",
            "latency.div.u64", "latency.add.f32", "latency.max.f32", "latency.mul.rn.f32",
            "latency.fma.rn.f32", "latency.div.rn.f32", "latency.add.f64", "latency.min.f64",
            "latency.mul.rn.f64", "latency.fma.rn.f64", "latency.div.rn.f64",
            "latency.sin.approx.f32", "tensor.wmma.f16.f32.m16n16k16.completion_latency",
            "tensor.mma.f16.f32.m16n8k16.completion_latency")
    rate_keys = ("throughput.unit.int.add", "throughput.unit.fp32.fma",
                 "throughput.unit.fp64.fma", "throughput.unit.sfu.sin",
                 "throughput.unit.int.minmax", "throughput.unit.fp32.add")
    cpi_keys = ("cpi.mul.lo.u32", "cpi.div.u64", "cpi.max.f32", "cpi.div.rn.f32",
                "cpi.min.f64", "cpi.mul.rn.f64", "cpi.div.rn.f64",
                "tensor.wmma.f16.f32.m16n16k16.cycles")
    results = ([res(k, v) for k, v in zip(keys, lats)] + [rate(k, v) for k, v in
                                                           zip(rate_keys, rates)]
               + [res(k, v) for k, v in zip(cpi_keys, cpis)]
               + [res("tensor.mma.f16.f32.m16n8k16.throughput_peak", 1024.0, unit="fma/clk/SM"),
                  res("latency.tanh.approx.f32", lats[15] * 0.7,
                      data={"sass_unit": {"MUFU.TANH": 1.0}})])
    complete_and_inside(accelsim.fragment(PARAMS, results, META),
                        accelsim.trace_fragment(PARAMS, results, META))


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
    assert set(got) <= SM90_H100_GPGPUSIM
    # the two faults of the fragment before: five int values (SHFL unread), dp latency
    # without its intervals (SM90_H100's DIV interval 130 over the latency 124)
    assert got["-ptx_opcode_latency_int"] == "5,4,4,4,300,21"
    assert got["-ptx_opcode_initiation_dp"] == "2,6,2,2,124"
    assert got["-gpgpu_clock_domains"] == "1995.0:1995.0:1995.0:2617.2"
    tr = accelsim.trace_fragment(params, report["results"], report["meta"])
    assert options(tr)["-trace_opcode_latency_initiation_tensor"] == "24,6"
    complete_and_inside(text, tr)
    # the whole config committed beside the run (gpuchar-model-params --format accel-sim)
    # holds each of these options as the fragment writes it
    committed = rules.options((RUN_DIR / "accel-sim.config").read_text())
    assert {k: committed[k] for k in got} == got


def test_docs_example_is_the_committed_run():
    """docs/models.md's fragment example is the committed H100 run's, option for option."""
    from pytest_gpuchar.cli.model_params import model_parameters
    from pytest_gpuchar.results.files import read_report
    report = read_report(RUN_DIR / "gpuchar-results.json.gz")
    params = model_parameters(report, "sm_90")
    want = [f"{k} {v}" for k, v in
            options(accelsim.fragment(params, report["results"], report["meta"])).items()]
    doc = (RUN_DIR.parents[2] / "docs/models.md").read_text()
    block = doc.split("## Accel-Sim configuration", 1)[1].split("```\n", 2)[1]
    assert [x for x in block.splitlines() if x.startswith("-")] == want
