"""gpuchar-model-params --format: the Many-BSP YAML (default) and the Accel-Sim fragments
(gpgpusim.config, trace.config) written from a results file, each exactly what the function
behind it (models/accelsim.py) makes of that file."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
import yaml

from pytest_gpuchar.cli import model_params
from pytest_gpuchar.models import accelsim, accelsim_config

H100 = Path(__file__).resolve().parents[3] / "results/sm_90/nvidia-h100-80gb-hbm3"
OPTION = re.compile(r"^(-[\w:]+)\s+(\S+)", re.M)

REPORT = {
    "meta": {"device": "Fake GPU", "arch": "sm_90", "date": "2026-01-02T03:04:05+00:00",
             "sm_count": 8, "driver": "1.0"},
    "results": [
        {"key": k, "arch": "sm_90", "value": v, "unit": u, "status": "pass",
         "provenance": {"device": "Fake GPU", "sm_count": 8}}
        for k, v, u in (("memory.latency.l1_hit", 30.4, "cycles"),
                        ("memory.latency.l2_hit", 250.6, "cycles"),
                        ("memory.latency.dram_cv", 600.0, "cycles"),
                        ("memory.latency.shared_load", 23.0, "cycles"),
                        ("latency.add.u32", 5.0, "cycles/op"),
                        ("latency.add.f32", 4.0, "cycles/op"),
                        ("throughput.unit.fp32.add", 128.0, "ops/clk/SM"),
                        ("throughput.launch.block", 360.0, "cycles"))]}


@pytest.fixture
def results_file(tmp_path):
    path = tmp_path / "gpuchar-results.json"
    path.write_text(json.dumps(REPORT))
    return path


def run(args, tmp_path, name):
    out = tmp_path / name
    assert model_params.main([*args, "-o", str(out)]) == 0
    return out.read_text()


def test_default_format_is_the_many_bsp_yaml(results_file, tmp_path):
    text = run(["--results", str(results_file), "--arch", "sm_90"], tmp_path, "p.yaml")
    assert yaml.safe_load(text) == model_params.model_parameters(REPORT, "sm_90")
    assert text == run(["--results", str(results_file), "--arch", "sm_90", "--format", "yaml"],
                       tmp_path, "q.yaml")


@pytest.mark.parametrize("fmt, make", [("accel-sim", accelsim_config.whole),
                                       ("accel-sim-fragment", accelsim.fragment)])
def test_accel_sim_formats_write_the_config_and_the_fragment(results_file, tmp_path, fmt,
                                                             make):
    text = run(["--results", str(results_file), "--arch", "90", "--format", fmt], tmp_path,
               f"{fmt}.config")
    params = model_params.model_parameters(REPORT, "sm_90")
    assert text == make(params, REPORT["results"], REPORT["meta"])
    names = dict(OPTION.findall(text))
    assert names and all(n.startswith(("-gpgpu_", "-dram_", "-ptx_")) for n in names
                         ) == (fmt == "accel-sim-fragment")


def test_trace_mode_is_not_exported(results_file):
    """Accel-Sim's SASS trace mode is dropped from the export (no Hopper opcode map in the
    Accel-Sim the base belongs to): asking for it is a usage error listing the formats."""
    with pytest.raises(SystemExit) as e:
        model_params.main(["--results", str(results_file), "--arch", "sm_90", "--format",
                           "accel-sim-trace"])
    assert e.value.code == 2 and "accel-sim-trace" not in model_params.FORMATS


def test_accel_sim_fragment_of_the_committed_h100_run(tmp_path):
    """The H100 night committed under results/ (gzip-compressed, as the nightly keeps it):
    the CLI writes the fragment committed beside it."""
    src = H100 / "gpuchar-results.json.gz"
    text = run(["--results", str(src), "--arch", "sm_90", "--format", "accel-sim-fragment"],
               tmp_path, "h100.config")
    got = dict(OPTION.findall(text))
    fig = {r["key"]: r["value"] for r in json.loads(gzip.decompress(src.read_bytes()))["results"]
           if r["arch"] == "sm_90"}
    # the device-memory latency option is the DRAM chase minus the L2 hit, rounded
    dram = round(fig["memory.latency.dram_cv"] - fig["memory.latency.l2_hit"])
    assert got["-gpgpu_n_clusters"] == "132" and got["-dram_latency"] == str(dram)
    assert got["-ptx_opcode_latency_fp"] == "4,4,4,4,57"
    whole = run(["--results", str(src), "--arch", "sm_90", "--format", "accel-sim"], tmp_path,
                "whole.config")
    assert whole == (H100 / "accel-sim.config").read_text()
    assert {k: v for k, v in OPTION.findall(whole) if k in got} == got


def test_stdout_and_bad_format(results_file, capsys):
    assert model_params.main(["--results", str(results_file), "--arch", "sm_90", "--format",
                              "accel-sim"]) == 0
    assert "-gpgpu_l1_latency 30" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        model_params.main(["--results", str(results_file), "--arch", "sm_90", "--format",
                           "gpgpusim"])
    assert e.value.code == 2
    with pytest.raises(ValueError, match="unknown format"):
        model_params.render(REPORT, "sm_90", "xml")


@pytest.mark.parametrize("fmt", model_params.FORMATS)
def test_an_arch_the_report_did_not_measure_is_a_usage_error(results_file, tmp_path, capsys,
                                                             fmt):
    """An H200 report exported as sm_80 was a config headed "NVIDIA H200 (sm_80)" with every
    option "not measured", exit 0: now one line naming the file and the arch it measured."""
    out = tmp_path / "x.config"
    assert model_params.main(["--results", str(results_file), "--arch", "sm_80", "--format",
                              fmt, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpuchar-model-params: {results_file} holds no sm_80 figure "
                          f"(it measured sm_90): export it with --arch sm_90")
    assert not out.exists()


def test_an_offline_report_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "offline.json"
    path.write_text(json.dumps({"meta": {}, "results": [
        {"key": "sass.add.u32", "arch": "sm_80", "value": None, "status": "info"}]}))
    assert model_params.main(["--results", str(path), "--arch", "sm_80"]) == 2
    assert "holds no measured figure at all (a run without a GPU measures nothing)" in \
        capsys.readouterr().err
