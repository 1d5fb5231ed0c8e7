"""results.judge and results.report: judging a measurement against its expectation; JSON and
Markdown reports."""
from __future__ import annotations

import json
import math

import pytest

from pytest_gpuchar.core.fit import fit
from pytest_gpuchar.results.expectations import Expected
from pytest_gpuchar.results.judge import Measurement, Result, Status, judge
from pytest_gpuchar.results.report import Recorder

EXP = Expected("latency.add.u32", "cycles/op", value=4.0, abs_tol=1.0, source="ampere22 Table II")


def _judge(value, *, unstable=False, why="", exp=EXP):
    m = Measurement("latency.add.u32", value, "cycles/op", 0.1, why if unstable else "")
    return judge(m, "sm_80", exp)


def test_pass():
    r = _judge(4.4)
    assert r.status == "pass"
    assert r.deviation == pytest.approx(0.4)
    assert r.expected == EXP.describe()
    assert r.source == "ampere22 Table II"


def test_fail():
    r = _judge(6.0)
    assert r.status == "fail"
    assert r.deviation == pytest.approx(2.0)


def test_unstable_wins_over_pass_and_fail():
    for v in (4.0, 5.05):        # within the tolerance, or within it and its spread (0.1)
        r = _judge(v, unstable=True, why="per-repeat slopes spread 3.00")
        assert r.status == "unstable"
        assert "spread" in r.detail


def test_an_unstable_figure_outside_even_with_its_spread_fails():
    """Too noisy for its stability limit is still judged: its median against its tolerance
    widened by its own spread (0.1 here)."""
    r = _judge(9.0, unstable=True, why="per-repeat slopes spread 3.00")
    assert r.status == "fail"
    assert "unstable (per-repeat slopes spread 3.00), and outside its expectation even with " \
           "its spread 0.1 added" == r.detail


def test_measured_without_expectation():
    r = _judge(4.0, exp=None)
    assert r.status == "measured"
    assert r.expected == "" and r.deviation is None


def test_measured_with_non_numeric_expectation():
    exp = Expected("latency.x", "cycles", note="not printed")
    r = _judge(12.0, exp=exp)
    assert r.status == "measured"
    assert "not printed" in r.expected


@pytest.mark.parametrize("bad", [math.nan, math.inf, None])
@pytest.mark.parametrize("exp", [EXP, None])
def test_non_finite_fails(bad, exp):
    r = _judge(bad, exp=exp)
    assert r.status == "fail"
    assert "finite" in r.detail
    assert r.deviation is None


def test_nan_fails_even_when_unstable():
    assert _judge(math.nan, unstable=True, why="wide").status == "fail"


def test_extra_fields_pass_through():
    r = judge(Measurement("k", 1.0, "cycles", method="m", data={"a": 1}), "sm_80", None,
              test="t::id", provenance={"device": "X"})
    assert (r.method, r.test, r.data, r.provenance) == ("m", "t::id", {"a": 1}, {"device": "X"})


def test_result_line():
    line = _judge(4.4).line()
    assert "latency.add.u32" in line and "4.40" in line and "+0.40" in line
    assert line.endswith("pass")


def test_recorder_write(tmp_path):
    rec = Recorder()
    rec.meta.update({"date": "2025-01-01T00:00:00Z", "archs": ["sm_80"], "device": "A100"})
    rec.add(_judge(4.4))
    rec.add(_judge(9.0))
    rec.add(_judge(4.0, unstable=True, why="spread | wide\nsecond line"))
    rec.add(Result("sass.add.u32", "sm_80", "info", expected="IADD3", detail="ptxas 13.5"))
    assert [r.status for r in rec.by_status(Status.FAIL, Status.UNSTABLE)] == ["fail",
                                                                            "unstable"]
    jpath, mpath, hpath = rec.write(tmp_path / "out")
    assert hpath.name == "index.html" and hpath.parent == jpath.parent
    assert jpath.name == "gpuchar-results.json" and mpath.name == "gpuchar-summary.md"
    data = json.loads(jpath.read_text())
    assert data["meta"]["device"] == "A100"
    assert [r["status"] for r in data["results"]] == ["pass", "fail", "unstable", "info"]
    assert data["results"][0]["key"] == "latency.add.u32"
    assert data["results"][0]["value"] == 4.4
    assert set(data["results"][0]) >= {"key", "arch", "status", "value", "unit", "spread",
                                       "expected", "deviation", "source", "provenance"}
    md = mpath.read_text()
    assert md.startswith("# pytest-gpuchar run")
    assert "**device**: A100" in md
    assert "Status counts: fail 1, info 1, pass 1, unstable 1" in md
    assert "## Failed or unstable" in md and "## Measured" in md
    assert "| sm_80 | latency.add.u32 | 4.40 |" in md
    # table cells never break the Markdown table
    row = next(ln for ln in md.splitlines() if "unstable |" in ln)
    assert row.count("|") == 10


def test_the_results_json_has_a_result_a_line_and_reads_back_whole(tmp_path):
    rec = Recorder()
    rec.meta.update({"device": "A100", "archs": ["sm_80"]})
    for v in (4.4, 9.0, float("nan")):
        rec.add(_judge(v))
    rec.add_artifact("a.png", "a curve", "test_a")
    jpath, _, _ = rec.write(tmp_path / "out")
    text = jpath.read_text()
    assert json.dumps(json.loads(text)) == json.dumps(rec.to_json(), default=str)
    lines = text.splitlines()
    start = lines.index('"results": [')
    assert [json.loads(ln.rstrip(","))["value"] for ln in lines[start + 1:start + 3]] == \
        [4.4, 9.0]
    assert lines[start + 3].startswith('{"key": ') and lines[start + 4] == "],"


def test_a_report_write_that_fails_leaves_the_previous_report(tmp_path, monkeypatch):
    """A run killed while writing its report leaves the previous night's files whole (the
    next nightly reads them as its previous run), and no half-written file."""
    rec = Recorder()
    rec.add(_judge(4.4))
    jpath, mpath, _ = rec.write(tmp_path)
    before = {p.name: p.read_bytes() for p in (jpath, mpath)}
    rec.add(_judge(9.0))

    def dies():
        raise KeyboardInterrupt
    monkeypatch.setattr(rec, "markdown", dies)
    with pytest.raises(KeyboardInterrupt):
        rec.write(tmp_path)
    assert mpath.read_bytes() == before[mpath.name]                 # untouched
    assert len(json.loads(jpath.read_text())["results"]) == 2      # whole, the new one
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [jpath.name, mpath.name, "index.html"])


def test_every_status_is_known():
    assert {"pass", "fail", "unstable", "measured", "invalid"} <= {s.value for s in Status}
    assert Result("k", "sm_80", "pass").status is Status.PASS
    assert Result("k", "sm_80", Status.FAIL).as_dict()["status"] == "fail"
    with pytest.raises(ValueError):
        Result("k", "sm_80", "passed")


def test_measurement_of_a_fit_carries_its_spread_stability_and_data():
    f = fit({8: [40, 40, 40], 16: [80, 80, 80], 32: [160, 160, 161]}, {8: 8, 16: 16, 32: 32})
    m = Measurement.of_fit("latency.x", f, data={"sass_unit": {"FADD": 1.0}})
    assert m.value == pytest.approx(5.0, abs=0.05) and not m.unstable
    assert list(m.data) == ["sass_unit", "slopes", "medians", "intercept"]
    wide = fit({8: [40, 10, 90], 16: [80, 200, 20]}, {8: 8, 16: 16})
    assert Measurement.of_fit("k", wide).unstable.startswith("per-repeat slopes spread")


def test_figures_that_are_not_slopes_have_constructors_of_their_own():
    """A rate (the inverse of a slope) carries its per-repeat rates; a value read otherwise
    (a sweep point, a knee, a ratio) carries the spread it was given and why it is unstable,
    and no made-up fit data."""
    from pytest_gpuchar.core.fit import Median, Rate
    r = Measurement.of_rate("bw", Rate(64.0, 1.5, [63.0, 64.5], 12.0, 0.0, True, "wide",
                                       {64: 2.0}), "B/clk/SM", data={"sms": 4})
    assert (r.value, r.spread, r.unstable, r.unit) == (64.0, 1.5, "wide", "B/clk/SM")
    assert r.data == {"sms": 4, "rates": [63.0, 64.5], "medians": {64: 2.0}, "intercept": 12.0}
    assert Measurement.of_rate("bw", Rate(1.0, 0.0, [], 0.0, 0.0, False, "stale"),
                               "x").unstable == ""
    v = Measurement.of_value("knee", 2048.0, "bytes", spread=0.0, data={"rates": [1.0]})
    assert (v.value, v.spread, v.unstable, v.data) == (2048.0, 0.0, "", {"rates": [1.0]})
    u = Measurement.of_value("p", 3.0, "ratio", spread=0.2, unstable="skewed")
    assert u.unstable == "skewed" and u.data == {} and u.checks == []
    m = Median(30.0, 2.0, [29.0, 31.0], "spread")
    assert m.unstable and not Median(30.0, 0.0, [30.0]).unstable


def test_a_multi_gpu_report_names_every_gpu(tmp_path):
    """Under pytest-xdist, one worker per GPU: the header and meta.gpus list each GPU's index,
    UUID and how many results it gave; a single GPU's report keeps its plain header."""
    rec = Recorder()
    rec.meta.update({"device": "NVIDIA H200"})
    for gpu, uuid in ((0, "GPU-63494f74"), (1, "GPU-b4dfdc17")):
        for v in (4.0, 5.0):
            rec.add(Result("latency.add.u32", "sm_90", "pass", v, "cycles", provenance={
                "device": "NVIDIA H200", "device_index": gpu, "uuid": uuid}))
    rec.add(Result("sass.add.u32", "sm_90", "info"))           # static: no GPU
    jpath, mpath, _ = rec.write(tmp_path)
    gpus = json.loads(jpath.read_text())["meta"]["gpus"]
    assert [(g["device_index"], g["uuid"], g["results"]) for g in gpus] == [
        (0, "GPU-63494f74", 2), (1, "GPU-b4dfdc17", 2)]
    assert ("- **GPUs**: 0 GPU-63494f74 (NVIDIA H200, 2 results); 1 GPU-b4dfdc17 "
            "(NVIDIA H200, 2 results)") in mpath.read_text()
    one = Recorder()
    one.add(Result("latency.add.u32", "sm_90", "pass", 4.0, "cycles",
                   provenance={"device": "NVIDIA H200", "device_index": 0, "uuid": "GPU-1"}))
    assert "**GPUs**" not in one.markdown()


def test_a_figure_two_tests_report_is_kept_once():
    """Table II and Table V judge the same cached chains: the report keeps the figure once
    and names the second test in its data; a different value or another GPU is kept apart."""
    rec = Recorder()
    prov = {"device": "NVIDIA H200", "device_index": 0, "uuid": "GPU-0"}
    a = rec.add(Result("latency.add.f16", "sm_90", "pass", 4.0, "cycles", test="t_v",
                       provenance=prov))
    b = rec.add(Result("latency.add.f16", "sm_90", "pass", 4.0, "cycles", test="t_ii",
                       provenance=prov))
    assert b is a and len(rec.results) == 1 and a.data["also_in"] == ["t_ii"]
    rec.add(Result("latency.add.f16", "sm_90", "pass", 4.0, "cycles", test="t_v",
                   provenance={**prov, "device_index": 1, "uuid": "GPU-1"}))
    rec.add(Result("latency.add.f16", "sm_90", "pass", 4.5, "cycles", test="t_ii",
                   provenance=prov))
    assert len(rec.results) == 3


def test_a_board_dependent_figure_is_judged_against_its_fleet_range_and_says_so(tmp_path):
    exp = Expected("l2.gpu", "B/clk", range=(3950.0, 4073.0), rel_tol=0.02, source="fleet",
                   boards=10, sigma_run=4.0, sigma_board=30.0)
    prov = {"uuid": "GPU-6e184aae-0000", "device": "NVIDIA H100 80GB HBM3"}
    inside = judge(Measurement("l2.gpu", 3940.7, "B/clk"), "sm_90", exp, provenance=prov)
    outside = judge(Measurement("l2.gpu", 3700.0, "B/clk"), "sm_90", exp, provenance=prov)
    assert inside.status == Status.PASS and outside.status == Status.FAIL
    assert inside.boards == 10 and inside.expected == "3950-4073 B/clk (±2%) over 10 boards"
    assert inside.noise == {"run": 4.0, "board": 30.0, "exact": False, "grid": False}
    rec = Recorder()
    rec.add(inside)
    rec.add(Result("latency.add", "sm_90", Status.PASS, 4.0, "cycles"))
    md = rec.markdown()
    assert "## Board-dependent figures" in md and "1 figures vary from board to board" in md
    assert "| sm_90 | l2.gpu | GPU-6e184aae | 3941 | B/clk | 3950-4073 B/clk (±2%) over 10 " \
           "boards | 10 | pass |" in md
    assert json.loads(json.dumps(rec.to_json()))["results"][0]["boards"] == 10
