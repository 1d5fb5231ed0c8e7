"""The generations table: one characteristic across archs and boards."""
from __future__ import annotations

from pytest_gpuchar.results import generations
from pytest_gpuchar.results.expectations import Store
from pytest_gpuchar.results.judge import Result


def entry(value, source):
    return f"    value: {value}\n    unit: cycles\n    tolerance: {{abs: 1}}\n    source: {source}\n"


def test_columns_per_arch_and_board_and_the_run(tmp_path):
    (tmp_path / "sm_80.yaml").write_text(
        "schema: 2\narch: sm_80\ncharacteristics:\n  latency.a:\n" + entry(4, "ampere22 T2")
        + "  latency.only_here:\n" + entry(9, "ampere22 T2"))
    (tmp_path / "sm_90.yaml").write_text(
        "schema: 2\narch: sm_90\ncharacteristics: {}\ndevices:\n  NVIDIA H200:\n"
        "    characteristics:\n      latency.a:\n"
        + entry(5, "measured 2026-11-23 on NVIDIA H200").replace("\n    ", "\n        ")
        .replace("    value", "        value", 1))
    run = [Result("latency.a", "sm_90", "pass", 5.1, "cycles",
                  provenance={"device": "NVIDIA H100 80GB HBM3"})]
    t = generations.table(Store(tmp_path), results=run)
    assert list(t.rows) == ["latency.a"]           # only_here has one column: left out
    assert t.rows["latency.a"] == {"sm_80 (ampere22)": "4", "sm_90 NVIDIA H200": "5",
                                   "sm_90 NVIDIA H100 80GB HBM3 (this run)": "5.1"}
    md = "\n".join(generations.markdown(t))
    assert "| latency.a | cycles | 4 | 5 | 5.1 |" in md
    assert generations.table(Store(tmp_path), prefixes=("memory.",)).rows == {}
