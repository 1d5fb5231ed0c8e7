"""The method text has one source, the code: a result carries the method of the code that
measured it, never its expectation's (which keeps the method its value was measured with, as
provenance, and is written from the result when a run is accepted)."""
from __future__ import annotations

from pytest_gpuchar.results.expectations import Expected, measured_entry
from pytest_gpuchar.results.judge import Measurement, judge


def test_a_result_shows_the_codes_method_not_the_expectations():
    exp = Expected("tensor.mma.x.latency", "cycles", value=10.0, abs_tol=1.0,
                   source="measured", method="unrolled, n = [8, 16, 32]")
    m = Measurement("tensor.mma.x.latency", 10.2, "cycles", 0.1,
                    method="counted loop, not unrolled")
    r = judge(m, "sm_90", exp)
    assert r.status.value == "pass" and r.method == "counted loop, not unrolled"
    assert "unrolled, n" not in str(r.as_dict())


def test_an_accepted_entry_records_the_method_it_was_measured_with():
    result = {"key": "k", "value": 10.2, "unit": "cycles", "method": "counted loop",
              "provenance": {"date": "2026-01-02T00:00:00", "device": "D"}}
    entry = measured_entry(result, {"tolerance": {"abs": 1.0}, "value": 10.0})
    assert entry["method"] == "counted loop" and entry["tolerance"] == {"abs": 1.0}
