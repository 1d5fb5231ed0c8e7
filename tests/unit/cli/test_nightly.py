"""gpuchar-nightly: classification of changes against the previous run, expectations and
snapshots, the exit codes, the Markdown report, throttling flags; end to end on CPU with a
synthetic suite (pytest in a subprocess, as the nightly runs it)."""
from __future__ import annotations

import json
import textwrap

import pytest

from pytest_gpuchar.cli import nightly as n
from pytest_gpuchar.results.files import read_report
from pytest_gpuchar.results import changes as ch


def R(key, value, status="pass", unit="cycles", spread=0.0, arch="sm_90", **kw):
    return {"key": key, "arch": arch, "value": value, "status": status, "unit": unit,
            "spread": spread, "expected": kw.pop("expected", "4 cycles (±1)"),
            "source": kw.pop("source", "paper"), **kw}


PREV = [R("latency.add", 4.0), R("cpi.mul", 2.0), R("throughput.fma.ffma", 127.0,
                                                    unit="fma/clk/SM", spread=0.3),
        R("latency.gone", 10.0), R("latency.flaky", 7.0, status="unstable")]


def test_identical_runs_report_no_change():
    assert ch.compare(PREV, PREV) == []
    assert ch.verdict([], 0, True) == ch.EXIT_NO_CHANGE


def test_noise_is_not_a_change():
    cur = [dict(r) for r in PREV]
    cur[0]["value"] = 4.3                 # < 0.5 cycles
    cur[2]["value"] = 127.2               # < 1% and < spread
    assert ch.compare(cur, PREV) == []


def test_classification():
    cur = [R("latency.add", 6.0, status="fail", detail="measured 6"),     # out of tolerance
           R("cpi.mul", 3.0),                                          # moved, still passes
           R("throughput.fma.ffma", 120.0, unit="fma/clk/SM"),         # moved (> 1%)
           R("latency.flaky", 9.0),                                    # was unstable
           R("latency.new", 5.0),                                      # appeared
           R("sass.add", None, status="invalid", detail="probe invalid")]  # no prev: ignored
    got = {c.key: c for c in ch.compare(cur, PREV)}
    assert got["latency.add"].severity == "regression" and got["latency.add"].kind == "expectation"
    assert got["latency.add"].old == 4.0 and got["latency.add"].new == 6.0
    assert "±1" in got["latency.add"].tolerance
    assert got["cpi.mul"].severity == "change" and got["cpi.mul"].kind == "value"
    assert got["throughput.fma.ffma"].severity == "change"
    assert got["latency.flaky"].severity == "note"
    # a figure new to the suite is a note, never a change (issue 29)
    assert got["latency.new"].kind == "new" and got["latency.new"].severity == "note"
    assert "new to the suite" in got["latency.new"].detail
    assert got["latency.gone"].kind == "missing" and got["latency.gone"].severity == "regression"
    assert "sass.add" not in got
    assert ch.verdict(list(got.values()), 1, True) == ch.EXIT_REGRESSION


def test_another_boards_values_within_their_expectation_are_notes():
    """A fresh machine against the committed baseline of its model: every difference from
    the other board (a value, a figure without expectation, a status) is a note; only the
    figure out of tolerance (conformance) is a regression. On the same board, or with one
    board unnamed, a move is a change."""
    def on(uuid, *a, **kw):
        return R(*a, provenance={"uuid": uuid}, **kw)
    prev = [on("GPU-aaaa", "latency.l2", 270.0), on("GPU-aaaa", "dsm.c2", 181.0),
            on("GPU-aaaa", "fp8.throughput", 263.0, status="measured"),
            on("GPU-aaaa", "latency.add", 4.0)]
    cur = [on("GPU-bbbb", "latency.l2", 276.0), on("GPU-bbbb", "dsm.c2", 191.0),
           on("GPU-bbbb", "fp8.throughput", 1024.0, status="measured"),
           on("GPU-bbbb", "latency.add", 9.0, status="fail")]
    got = {c.key: c for c in ch.compare(cur, prev)}
    assert got["latency.l2"].severity == got["dsm.c2"].severity == "note"
    assert got["dsm.c2"].kind == "board"
    assert got["dsm.c2"].detail.startswith("another board (GPU-aaaa -> GPU-bbbb)")
    assert got["fp8.throughput"].severity == "note"
    assert got["latency.add"].severity == "regression"
    assert ch.verdict([got["latency.l2"], got["dsm.c2"], got["fp8.throughput"]], 0, True) \
        == ch.EXIT_NO_CHANGE
    same = [on("GPU-aaaa", "latency.l2", 276.0)]
    assert [c.severity for c in ch.compare(same, prev[:1])] == ["change"]
    unnamed = [R("latency.l2", 276.0)]
    assert [c.severity for c in ch.compare(unnamed, prev[:1])] == ["change"]


def test_a_board_to_board_difference_is_a_note_even_without_uuids_in_results():
    """The nightly knows the previous run is another board's (by the runs' UUIDs) and says
    so: every difference is a note, what is missing too; conformance still decides."""
    prev = [R("l2.gpu", 4060.0, unit="B/clk"), R("gone", 3.0)]
    cur = [R("l2.gpu", 3940.0, unit="B/clk"), R("new.one", 1.0)]
    got = {c.key: c for c in ch.compare(cur, prev, other_board_run="GPU-6e184aae")}
    assert {k: (c.kind, c.severity) for k, c in got.items()} == {
        "l2.gpu": ("board", "note"), "new.one": ("new", "note"), "gone": ("missing", "note")}
    assert ch.verdict(list(got.values()), 0, True) == ch.EXIT_NO_CHANGE
    bad = ch.compare([R("l2.gpu", 3000.0, unit="B/clk", status="fail")], prev,
                     other_board_run="GPU-6e184aae")
    assert [(c.kind, c.severity) for c in bad if c.key == "l2.gpu"] == [
        ("expectation", "regression")]


def _noise(run, exact=False, grid=False):
    return {"run": run, "board": 0.0, "exact": exact, "grid": grid}


def test_a_move_is_judged_by_the_figures_noise_model():
    """The TMA L2 stream with a within-board sigma of 0.1 B/clk/SM: 0.5 from last night is
    within 5.06 x 0.1 x sqrt 2 = 0.72 (no change); 1.0 is beyond it (a change naming the
    limit); a figure without a noise model keeps the fallback rule (1%)."""
    noisy = dict(unit="B/clk/SM", noise=_noise(0.1))
    prev = [R("tma.l2.s2048", 21.57, **noisy), R("tma.l2.s4096", 21.6, **noisy),
            R("l2.per_sm", 30.0, unit="B/clk/SM")]
    cur = [R("tma.l2.s2048", 22.07, **noisy), R("tma.l2.s4096", 22.6, **noisy),
           R("l2.per_sm", 30.6, unit="B/clk/SM")]
    got = {c.key: c for c in ch.compare(cur, prev)}
    assert "tma.l2.s2048" not in got
    assert (got["tma.l2.s4096"].kind, got["tma.l2.s4096"].severity) == ("value", "change")
    assert "beyond 0.716: 5.06 x sigma_run 0.1 x sqrt(1 + 1/1)" in got["tma.l2.s4096"].detail
    assert got["l2.per_sm"].severity == "change" and "no noise model" in got["l2.per_sm"].detail
    assert ch.verdict([], 0, True) == ch.EXIT_NO_CHANGE


def test_a_one_cycle_move_of_an_exact_latency_is_a_change():
    """An integer latency every run of every sampled board read (noise run 0): 300 -> 301
    cycles is a change, though 1% would let it move by 3 cycles unseen."""
    prev = [R("memory.latency.l2_hit", 300.0, noise=_noise(0.0, exact=True))]
    cur = [R("memory.latency.l2_hit", 301.0, noise=_noise(0.0, exact=True))]
    [c] = ch.compare(cur, prev)
    assert (c.kind, c.severity) == ("value", "change") and "exact figure" in c.detail
    assert ch.compare(prev, prev) == []


def test_change_is_against_the_boards_recent_history_not_one_night():
    """Five nights of one board: tonight against their median, with the sqrt(1 + 1/k)
    limit; one odd night in the history does not make tonight a change."""
    n = _noise(0.1)
    history = [[R("x", v, unit="B/clk/SM", noise=n)] for v in (20.0, 20.1, 25.0, 19.9, 20.0)]
    tonight = [R("x", 20.2, unit="B/clk/SM", noise=n)]
    assert ch.compare(tonight, history[-1], history=history) == []
    [c] = ch.compare([R("x", 21.0, unit="B/clk/SM", noise=n)], history[-1], history=history)
    assert c.severity == "change" and c.detail.startswith("20 -> 21")


def test_an_info_record_is_compared_by_its_values_not_its_prose():
    """memory.capacity.l2_driver: the driver's 60 MiB, its detail quoting the L2 a chase kept
    (57.0 then 55.4 MiB): no change. Its value, or a mapping's SASS, moving: a change."""
    def l2(detail, value=62914560.0):
        return R("memory.capacity.l2_driver", value, status="info", unit="bytes",
                 expected="", detail=detail, data={"driver_l2_bytes": 62914560,
                                                   "chase_l2_bytes": 59787264})
    a = l2("driver l2CacheSize 60 MiB; one SM's chase keeps 57 MiB in the L2 (0.950 x)")
    b = l2("driver l2CacheSize 60 MiB; one SM's chase keeps 55.4 MiB in the L2 (0.923 x)")
    assert ch.compare([b], [a]) == []
    [c] = ch.compare([l2("driver l2CacheSize 50 MiB", 52428800.0)], [a])
    assert (c.kind, c.severity) == ("mapping", "change")

    def dpx(unit):
        return R("sass.dpx.vimax3_s32", None, status="info", unit="", expected="",
                 detail=f"__vimax3_s32 (hardware DPX), ptxas 12.8.93: {unit}",
                 data={"unit": unit, "kind": "hardware DPX", "ptxas": "12.8.93"})
    assert ch.compare([dpx({"VIMNMX3": 1.0})], [dpx({"VIMNMX3": 1.0})]) == []

    def knn(err):        # a model's miss, an expected failure recorded as info (issue 42)
        return R("bsp.knn.42764.error", err, status="info", unit="ratio", expected="",
                 detail=f"model miss: error {err:.1%} > 2 x the seed's 8.79% for knn")
    assert ch.compare([knn(0.6836)], [knn(0.6887)]) == []    # GPU-301ffa02's two nights
    assert [c.kind for c in ch.compare([dpx({"VIMNMX": 2.0})], [dpx({"VIMNMX3": 1.0})])] == \
        ["mapping"]


def test_an_unstable_figure_is_still_judged_with_its_spread():
    """DRAM read bandwidth, per-launch spread over its stability limit: judged all the same,
    its spread added to the limit (no longer a skipped question)."""
    n = _noise(0.05)
    prev = [R("dram.read", 17.0, unit="B/clk/SM", noise=n)]
    assert ch.compare([R("dram.read", 17.3, "unstable", "B/clk/SM", spread=0.5, noise=n)],
                      prev) == []
    [c] = ch.compare([R("dram.read", 19.0, "unstable", "B/clk/SM", spread=0.5, noise=n)], prev)
    assert c.severity == "change" and "unstable tonight: judged with its spread" in c.detail


def test_a_figure_the_previous_runs_measurement_skipped_is_a_note():
    """The far L2 level: one night every SM saw one level (its test skipped for that), the
    next night some SMs saw two. Measured tonight, skipped by the previous run's own
    measurement: a note; skipped there because the machine had no GPU: a change."""
    test = "tests/characterisation/test_movement_l2.py::test_l2_far[sm_90]"
    cur = [R("movement.l2.latency.far", 299.7, test=test)]
    why = "hardware: load steps see one latency level from every SM (279 cycles)"
    (c,) = ch.compare(cur, [], previous_skipped={test: why})
    assert (c.kind, c.severity) == ("new", "note") and why in c.detail
    (c,) = ch.compare(cur, [], previous_skipped={test: "hardware: no GPU: CuPy missing"})
    assert (c.kind, c.severity) == ("new", "note") and "new to the suite" in c.detail
    (c,) = ch.compare(cur, [])
    assert c.severity == "note"


def test_probe_becoming_invalid_is_a_regression():
    prev = [R("cpi.x", 2.0)]
    cur = [R("cpi.x", None, status="invalid", detail="probe invalid: folded")]
    (c,) = ch.compare(cur, prev)
    assert c.kind == "invalid" and c.severity == "regression"


def test_without_previous_only_failures_count():
    cur = [R("a", 1.0), R("b", 2.0, status="fail")]
    changes = ch.compare(cur, None)
    assert [c.key for c in changes] == ["b"]


def test_within_tolerance_exit_code():
    cur = [dict(r) for r in PREV]
    cur[1]["value"] = 3.0
    assert ch.verdict(ch.compare(cur, PREV), 0, True) == ch.EXIT_WITHIN_TOLERANCE


@pytest.mark.parametrize("pytest_exit, have, code", [
    (0, True, 0), (1, True, 0), (2, True, 3), (4, True, 3), (5, True, 3), (0, False, 3)])
def test_broken_runs(pytest_exit, have, code):
    assert ch.verdict([], pytest_exit, have) == code


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.characterisation.test_x" name="test_cycles[sm_90-add.u32]">
<failure message="AssertionError: assert [+ received] == [- snapshot]">E       AssertionError: assert [+ received] == [- snapshot]
E         - IADD3 r0, r1, r2, RZ
E         + IMAD.IADD r0, r1, 0x1, r2
</failure></testcase>
<testcase classname="tests.characterisation.test_x" name="test_boom[sm_90]">
<error message="RuntimeError: boom">RuntimeError: boom</error></testcase>
<testcase classname="tests.characterisation.test_x" name="test_slow[sm_90]">
<failure message="AssertionError: throughput.fma.ffma on sm_90: measured 94.5">    assert snapshot_text(func) == sass_snapshot(tag)
    assert_result(r)
E   AssertionError: throughput.fma.ffma on sm_90: measured 94.5</failure></testcase>
<testcase classname="tests.characterisation.test_x" name="test_ok[sm_90]"/>
</testsuite></testsuites>"""


def test_junit_snapshot_and_other_failures(tmp_path):
    p = tmp_path / "junit.xml"
    p.write_text(JUNIT)
    fails = ch.junit_failures(p)
    assert len(fails) == 3
    # the third failed on its expectation, recorded as a failing result: not a SASS change
    changes = ch.failure_changes(fails, [{"test": "tests/characterisation/test_x.py::test_slow[sm_90]",
                                         "status": "fail"}])
    sass = [c for c in changes if c.kind == "sass"]
    assert len(sass) == 1 and "+ IMAD.IADD" in sass[0].detail and "- IADD3" in sass[0].detail
    assert [c.kind for c in changes if c.kind == "test"] == ["test"]
    assert ch.verdict(changes, 1, True) == ch.EXIT_REGRESSION
    assert ch.junit_failures(tmp_path / "missing.xml") == []


def test_throttling_flags():
    idle = {"clock_event_mask": 1, "clock_event_reasons": ["GPU idle"],
            "ecc_volatile_uncorrected": 0, "ecc_volatile_corrected": 0}
    ok = {"sm_clock_measured_mhz": 1980.0, "sm_clock_max_mhz": 1980.0, "board": idle}
    assert n.throttling(ok, ok) == []
    slow = dict(ok, sm_clock_measured_mhz=1500.0)
    flags = n.throttling(ok, slow)
    assert any("< 90%" in f for f in flags) and any("changed during the run" in f for f in flags)
    hot = dict(ok, board=dict(idle, clock_event_mask=0x20,
                              clock_event_reasons=["SW thermal slowdown"]))
    assert n.throttling(ok, hot) == [
        "clocks held at the end: SW thermal slowdown (clock-event reasons 0x20)"]
    ecc = dict(ok, board=dict(idle, ecc_volatile_uncorrected=2))
    assert any(f.startswith("ECC: 2 uncorrected") for f in n.throttling(ok, ecc))
    # no NVML on the night's host: its reason is in the board, no flag is invented
    none = dict(ok, board={"skipped": "NVML: NVML Shared Library Not Found"})
    assert n.throttling(none, none) == []


def test_an_invalid_clock_probe_reads_invalid_never_a_number():
    bad = {"sm_clock_measured_mhz": None, "sm_clock_max_mhz": 1980.0,
           "sm_clock_error": "ProbeInvalid: probe invalid: clock/sm_clock (sm_90): ...\nSASS"}
    assert ch.measured_clock(bad) == "invalid (ProbeInvalid: probe invalid: clock/sm_clock " \
                                     "(sm_90): ...)"
    assert ch.measured_clock({"sm_clock_measured_mhz": 1980.0}) == "1980.0 MHz"
    assert n.throttling(bad, bad) == []       # no made-up clock to flag



def test_a_night_told_of_no_gpu_says_what_the_fresh_clock_process_would():
    """GPUCHAR_NO_GPU in the night's environment: the clock snapshot is the one a fresh
    process running the clock probe gives (its device detection stops before CUDA), without
    starting that process."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "GPUCHAR_NO_GPU": "1"}
    fresh = subprocess.run([sys.executable, "-c", n.CLOCK_PROBE], capture_output=True,
                           text=True, env=env, timeout=120)
    said = n.clock_snapshot(env)
    assert said.pop("time")
    assert said == json.loads(fresh.stdout.strip().splitlines()[-1]) == {
        "no_gpu": "GPUCHAR_NO_GPU is set"}

def test_markdown_lists_old_new_tolerance_and_sass_diff():
    changes = ch.compare([R("latency.add", 6.0, status="fail")], [R("latency.add", 4.0)])
    changes.append(ch.Change("sass", "regression", key="test_x[sm_90]", detail="- A\n+ B"))
    doc = {"exit": 2, "date": "2026-11-22", "pytest_exit": 1, "pytest_command": ["pytest"],
           "wall_s": 1.0, "previous": "prev.json", "status_counts": {"fail": 1},
           "skipped": {"hardware: no GPU": 3}, "changes": [c.__dict__ for c in changes],
           "environment": {"before": {"device": "NVIDIA H200", "sm_clock_measured_mhz": 1980},
                           "after": {}, "toolkit": {"ptxas": ["13.5"]},
                           "CUDA_CACHE_DISABLE": "1", "throttling": ["SM clock changed"]}}
    md = n.markdown(doc)
    assert "regressions (exit 2)" in md
    assert "| sm_90 | latency.add | expectation | 4 | 6 |" in md
    assert "```diff\n- A\n+ B\n```" in md
    assert "Throttling flagged" in md and "no GPU" in md


SUITE = """
import pytest
from pytest_gpuchar.results.judge import Measurement

pytestmark = pytest.mark.static     # a static night (--static-only): exits by these tests

def test_value(record, arch):
    record(Measurement("demo.value", {value}, "cycles"), "sm_80")

def test_other():
    assert {ok}
"""


def _suite(write, tmp_path, value, ok=True):
    write(tmp_path / "test_demo.py", textwrap.dedent(SUITE.format(value=value, ok=ok)))


def test_end_to_end_exit_codes(tmp_path, monkeypatch, capsys, write_module):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    _suite(write_module, tmp_path, 10.0)
    args = ["test_demo.py", "--static-only", "--", "--gpu-arch=sm_80"]
    assert n.main(["--out", "n1", *args]) == ch.EXIT_NO_CHANGE
    doc = json.loads((tmp_path / "n1" / "nightly.json").read_text())
    assert doc["environment"]["CUDA_CACHE_DISABLE"] == "1"
    assert doc["results"][0]["key"] == "demo.value"
    assert (tmp_path / "n1" / "nightly.md").read_text().startswith("# gpuchar nightly: no change")
    # the same again, compared with the first: no change
    assert n.main(["--out", "n2", "--previous", "n1/nightly.json", *args]) == ch.EXIT_NO_CHANGE
    # a value moved (no expectation: still passes) -> changes within tolerance
    _suite(write_module, tmp_path, 12.0)
    assert n.main(["--out", "n3", "--previous", "n1/nightly.json", *args]) == \
        ch.EXIT_WITHIN_TOLERANCE
    md = (tmp_path / "n3" / "nightly.md").read_text()
    assert "| sm_80 | demo.value | value | 10 | 12 | cycles |" in md
    page = (tmp_path / "n3" / "nightly.html").read_text(encoding="utf-8")   # the same doc
    assert 'data-key="demo.value" data-kind="value"' in page and "(exit 1)" in page
    assert (tmp_path / "n3" / "report" / "index.html").is_file()            # the run's page
    # the run's report reads the shipped files (no project files here): their generations
    summary = (tmp_path / "n3" / "report" / "gpuchar-summary.md").read_text()
    assert "## Generations" in summary and "| sm_80 (" in summary
    # a failing test -> regression
    _suite(write_module, tmp_path, 10.0, ok=False)
    assert n.main(["--out", "n4", "--previous", "n1/nightly.json", *args]) == ch.EXIT_REGRESSION
    # a missing previous file is a usage error named before the night runs, not a silent
    # first run
    assert n.main(["--out", "n5", "--previous", "nope.json", *args]) == ch.EXIT_BROKEN
    out = capsys.readouterr()
    assert "regressions" in out.out and "nope.json: cannot read" in out.err
    assert not (tmp_path / "n5").exists()


def test_a_known_failure_still_fails_conformance():
    """A figure out of tolerance on two nights with the same value has not moved (no change),
    but the board is still outside its model's range: the nightly is not green (a hold-out
    board, GPU-ce787e6e, exited 0 on its second night with three figures out of range)."""
    prev = [R("latency.add", 6.0, status="fail")]
    same = ch.compare([R("latency.add", 6.1, status="fail")], prev)
    assert [c.severity for c in same] == ["regression"]
    assert "still out of tolerance" in same[0].detail and "has not moved" in same[0].detail
    worse = ch.compare([R("latency.add", 9.0, status="fail")], prev)
    assert [c.severity for c in worse] == ["regression"]
    assert ch.verdict(same, 1, True) == ch.EXIT_REGRESSION


def test_known_snapshot_failure_is_a_note(tmp_path):
    p = tmp_path / "junit.xml"
    p.write_text(JUNIT)
    first = ch.failure_changes(ch.junit_failures(p), [])
    again = ch.failure_changes(ch.junit_failures(p), [], [c.__dict__ for c in first])
    assert {c.severity for c in again} == {"note"}


def test_repeatability_per_topic_against_specs_bar():
    a = [R("latency.add", 4.2), R("latency.mul", 5.4), R("throughput.ffma", 127.0,
                                                          unit="fma/clk/SM"),
         R("tensor.x", 10.0, status="unstable"), R("latency.ld", 700.0)]
    b = [R("latency.add", 4.4), R("latency.mul", 5.6), R("throughput.ffma", 129.0,
                                                          unit="fma/clk/SM"),
         R("tensor.x", 10.0), R("latency.ld", 706.0)]
    rep = ch.repeatability(a, b)
    lat, thr = rep["topics"]["latency"], rep["topics"]["throughput"]
    assert (lat["cycles"], lat["cycles_same"]) == (2, 1)        # 4.2/4.4 same, 5.4/5.6 not
    assert (lat["other"], lat["other_1pc"]) == (1, 1)            # 700/706: 100+ cycles, 0.85%
    assert (thr["other"], thr["other_1pc"]) == (1, 0)            # 1.6% apart
    assert rep["topics"]["tensor"]["unstable"] == 1
    text = "\n".join(ch.repeatability_lines(rep))
    assert "latency: identical integer cycles 1/2 (50.0%)" in text
    assert "differs: latency.mul: 5.40 vs 5.60 cycles" in text
    assert "status changes between runs: 1" in text


def test_a_figure_its_own_measurement_skipped_tonight_is_a_note(tmp_path):
    """The L2 map's far level: measured last night, tonight every SM saw one level (the test
    skipped with that reason): a note. A skip for the machine (no GPU) stays a regression."""
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite><testcase classname="tests.characterisation.test_movement_l2" '
        'name="test_l2_by_sm[sm_90-far]"><skipped message="hardware: load steps see one '
        'latency level from every SM (279 cycles): no far level to report"/></testcase>'
        '<testcase classname="tests.characterisation.test_x" name="test_y[sm_90]"><skipped '
        'message="hardware: no GPU: CuPy is not importable"/></testcase>'
        '</testsuite></testsuites>')
    skipped = ch.junit_skips(junit)
    assert set(skipped) == {"tests/characterisation/test_movement_l2.py::test_l2_by_sm[sm_90-far]",
                            "tests/characterisation/test_x.py::test_y[sm_90]"}
    prev = [dict(R("movement.l2.latency.far", 290.7),
                 test="tests/characterisation/test_movement_l2.py::test_l2_by_sm[sm_90-far]"),
            dict(R("latency.y", 4.0), test="tests/characterisation/test_x.py::test_y[sm_90]")]
    got = {c.key: c for c in ch.compare([], prev, skipped=skipped) if c.kind == "missing"}
    assert got["movement.l2.latency.far"].severity == "note"
    assert "one latency level" in got["movement.l2.latency.far"].detail
    assert got["latency.y"].severity == "regression"


def test_a_models_error_repeats_within_one_point():
    """Errors are shares of the measured cycles: 0.0023 -> 0.0058 moved 0.35 points (the
    cycles 0.35%), 0.641 -> 0.654 moved 1.3."""
    a = [R("bsp.mm.big.error", 0.0023, unit="ratio"), R("bsp.knn.small.error", 0.641,
                                                        unit="ratio")]
    b = [R("bsp.mm.big.error", 0.0058, unit="ratio"), R("bsp.knn.small.error", 0.654,
                                                        unit="ratio")]
    bsp = ch.repeatability(a, b)["topics"]["bsp"]
    assert (bsp["other"], bsp["other_1pc"]) == (2, 1)
    assert bsp["differs"][0][1] == "bsp.knn.small.error: 0.641 vs 0.654 (moved 1.3 points)"


def test_repeatability_command(tmp_path, capsys):
    import json
    for name, v in (("a.json", 4.0), ("b.json", 4.1)):
        (tmp_path / name).write_text(json.dumps({"results": [R("latency.add", v)]}))
    assert n.main(["--repeatability", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    assert "identical integer cycles 1/1" in capsys.readouterr().out


def test_a_failure_known_from_a_results_json_is_a_note():
    """--previous may be a plain gpuchar-results.json: its meta.failures make tonight's
    identical failure known; a different diff is a regression."""
    diff = "E   [- snapshot]\nE   - FADD\nE   + FMUL"
    tonight = [{"test": "tests.characterisation.test_t::test_x[sm_90-a]", "kind": "failure",
                "message": "AssertionError: assert [+ received] == [- snapshot]",
                "text": diff}]
    prev = [{"test": "tests/characterisation/test_t.py::test_x[sm_90-a]", "when": "call",
             "message": "AssertionError: assert [+ received] == [- snapshot]", "text": diff}]
    [c] = ch.failure_changes(tonight, [], previous_failures=prev)
    assert (c.kind, c.severity) == ("sass", "note")
    other = [dict(prev[0], text="E   [- snapshot]\nE   - FADD\nE   + DADD")]
    [c] = ch.failure_changes(tonight, [], previous_failures=other)
    assert c.severity == "regression"


def test_a_row_declared_unmeasurable_tonight_is_not_a_missing_regression():
    prev = [R("cpi.setp.ne.s32", 2.0, test="t.py::test_table_v_cycles[sm_90-setp.ne.s32]"),
            R("cpi.gone", 3.0, test="t.py::test_table_v_cycles[sm_90-gone]")]
    cur = [R("unmeasurable.test_table_v_cycles[sm_90-setp.ne.s32]", None, status="info",
             test="t.py::test_table_v_cycles[sm_90-setp.ne.s32]")]
    got = {c.key: c for c in ch.compare(cur, prev)}
    assert got["cpi.setp.ne.s32"].severity == "note"
    assert got["cpi.gone"].severity == "regression"


def test_the_committed_baseline_of_the_device_is_found(tmp_path):
    import gzip
    d = tmp_path / "sm_90" / "nvidia-h100-80gb-hbm3"
    d.mkdir(parents=True)
    (d / "gpuchar-results.json.gz").write_bytes(gzip.compress(b'{"results": []}'))
    dev = {"device": "NVIDIA H100 80GB HBM3", "arch": "sm_90"}
    path = n.baseline_for(dev, tmp_path)
    assert path == d / "gpuchar-results.json.gz" and read_report(path) == {"results": []}
    assert n.baseline_for({"device": "NVIDIA H200", "arch": "sm_90"}, tmp_path) is None
    assert n.baseline_for({"no_gpu": "x"}, tmp_path) is None


@pytest.mark.parametrize("content", [b"", b"{not json", b"\x1f\x8b\x08truncated", b"[1, 2]"])
def test_a_bad_previous_is_one_clear_error_before_the_night_runs(tmp_path, capsys, content):
    bad = tmp_path / "prev.json"
    bad.write_bytes(content)
    assert n.main(["--previous", str(bad), "--out", str(tmp_path / "out")]) == ch.EXIT_BROKEN
    err = capsys.readouterr().err
    assert str(bad) in err and not (tmp_path / "out").exists()


def test_a_split_runs_junit_names_lose_their_xdist_group():
    """Under -n (loadgroup) pytest-xdist suffixes each test name with its group; the nightly
    matches skips and failures to results by the id a serial run has."""
    assert ch._pytest_nodeid("tests.characterisation.test_x", "test_a[sm_90-b]@sm_90-memory") \
        == "tests/characterisation/test_x.py::test_a[sm_90-b]"
    assert ch._pytest_nodeid("tests.characterisation.test_x", "test_a[sm_90-x@y]") \
        == "tests/characterisation/test_x.py::test_a[sm_90-x@y]"


def test_an_exact_figures_spread_is_its_resolution():
    """memory.capacity.l2 is a bisection's lower edge, its spread the bracket (2.9%): the
    sampled boards never left their bracket (exact), a fresh H200 read the next one on its
    second night. One bracket is the reading's resolution; two are a change."""
    n = _noise(0.0, exact=True)
    prev = [R("memory.capacity.l2", 59787264.0, unit="bytes", spread=1751808.0, noise=n)]
    assert ch.compare([R("memory.capacity.l2", 61539072.0, unit="bytes", spread=1802240.0,
                         noise=n)], prev) == []
    [c] = ch.compare([R("memory.capacity.l2", 63400000.0, unit="bytes", spread=1802240.0,
                        noise=n)], prev)
    assert c.severity == "change"
