"""Issue 33 item 9: a night on sm_90 has no invalid row by design. Every row the committed
sm_90 runs report invalid is declared unmeasurable in the expectation files with the SASS fact
its verdict shows (FP8 mma.sync's accumulation, which the driver puts on the FPU)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pytest_gpuchar.results import expectations as E

RUNS = sorted((Path(__file__).resolve().parents[3] / "results" / "sm_90").glob(
    "*/gpuchar-results.json.gz"))


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.parent.name)
def test_every_invalid_row_of_a_committed_run_is_declared(run):
    exp = E.load("sm_90", E.PACKAGE_ROOT)
    report = json.loads(gzip.decompress(run.read_bytes()))
    driver = report["results"][0]["provenance"].get("driver", "")
    invalid = [r for r in report["results"] if r["status"] == "invalid"]
    # a run made with the declarations has no invalid row but their notes: keyed by the
    # test (unmeasurable.<test id>) or, in runs before the one topic contract, by the figure
    assert invalid or any(r["key"].startswith("unmeasurable.") and
                          "numerics." in (r["key"] + (r.get("detail") or ""))
                          for r in report["results"])
    for r in invalid:
        decl = exp.unmeasurable.get(r["key"])
        assert decl is not None, f"{r['key']} is invalid in {run} and not declared"
        assert decl.applies(f"jit-driver-{driver}") and decl.explains(r["detail"]), r["key"]
        assert "tensor.fp8_emulated" in decl.reason     # the report says where the figures are


def test_the_declared_fp8_keys_are_the_eight_accumulation_figures():
    exp = E.load("sm_90", E.PACKAGE_ROOT)
    keys = sorted(k for k in exp.unmeasurable if k.startswith("numerics."))
    assert keys == sorted(
        [f"numerics.elementwise.{t}_f32.{i}.acc" for t in ("e4m3", "e5m2")
         for i in (f"init_{t}", "init_fp32")] +
        [f"numerics.fasi.{t}_f32.rounding_c_{m}" for t in ("e4m3", "e5m2") for m in ("rn", "rz")])
