"""gpuchar-model-params: the Many-BSP Table 1-8 export of a gpuchar JSON report."""
from __future__ import annotations

import json

import yaml

from pytest_gpuchar.cli import model_params

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
    m = model_params.model_parameters(REPORT, "sm_90")
    p = m["parameters"]
    assert p["warp_lnch_ovh"]["value"] == 1.5 and p["warp_lnch_ovh"]["from"] == "throughput.launch.warp"
    assert p["bar_sync_ovh_256"]["value"] is None          # unstable results are not exported
    assert p["bar_sync_ovh_256"]["reason"] == \
        "no usable measurement in this run: throughput.bar_sync.nt256 unstable"
    assert p["l1_lat"]["reason"].startswith("not measured in this run (looked for ")
    assert p["mem_lat"]["value"] == 480.0
    assert m["n_fu_results_per_clk_per_sm"] == {"fp32.fma": 127.5}
    assert m["n_SM"] == 132 and m["arch"] == "sm_90"


def test_model_params_cli(tmp_path, capsys):
    src = tmp_path / "r.json"
    src.write_text(json.dumps(REPORT))
    out = tmp_path / "model.yaml"
    assert model_params.main(["--results", str(src), "--arch", "90", "-o", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["parameters"]["warp_lnch_ovh"]["value"] == 1.5
    assert model_params.main(["--results", str(tmp_path / "nope.json"), "--arch", "sm_90"]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert model_params.main(["--results", str(src), "--arch", "sm_99"]) == 2


