"""The HTML report (results/html): the page is parsed with an HTML5 parser (html5lib) and its
content checked against the JSON report it was rendered from: every result's key, status and
value; the first screen's counts; what needs attention with its reason; the boards' flags;
the SASS diffs; plots inline; nothing fetched from anywhere. The committed H100 run (about a
thousand results) is rendered too."""
from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from pytest_gpuchar.cli import report as cli
from pytest_gpuchar.results import html
from pytest_gpuchar.results.files import read_report
from pytest_gpuchar.results.judge import Result
from pytest_gpuchar.results.plots import pyplot, save
from pytest_gpuchar.results.report import ARTIFACTS, Recorder

html5lib = pytest.importorskip("html5lib", reason="html5lib (extra test) parses the page")

ROOT = Path(__file__).resolve().parents[3]
H100 = ROOT / "results/sm_90/nvidia-h100-80gb-hbm3/gpuchar-results.json.gz"
SVG = ".//{http://www.w3.org/2000/svg}svg"      # html5lib keeps inline SVG in its namespace
SNAPSHOT_TEXT = ("E       AssertionError: assert [+ received] == [- snapshot]\n"
                 "E         - IADD3 R0, R1, R2\nE         + IMAD.IADD R0, R1, 0x1, R2")


def parse(text: str):
    return html5lib.parse(text, namespaceHTMLElements=False)


def rows_of(tree) -> dict[tuple, dict]:
    """The sections' result rows: (key, arch, board) -> their data attributes and cells."""
    out = {}
    for tr in tree.iter("tr"):
        if tr.get("id", "").startswith("r") and tr.get("data-key") is not None:
            cells = ["".join(td.itertext()).strip() for td in tr.findall("td")]
            out[(tr.get("data-key"), tr.get("data-arch"), tr.get("id"))] = {
                "status": tr.get("data-status"), "value": tr.get("data-value"), "cells": cells}
    return out


def check_against_json(text: str, doc: dict) -> None:
    """Every result of the JSON is a row with its key, status and value; the first screen's
    counts are the JSON's."""
    tree = parse(text)
    rows = rows_of(tree)
    results = doc["results"]
    assert len(rows) == len(results)
    for k, r in enumerate(results):
        got = rows[(r["key"], r["arch"], f"r{k}")]
        assert got["status"] == r["status"]
        v = r.get("value")
        if isinstance(v, (int, float)):
            assert float(got["value"]) == float(v)
        else:
            assert got["value"] == ""
        assert r["key"] in got["cells"][0] and r["status"] in " ".join(got["cells"])
    counts = Counter(r["status"] for r in results)
    for status in ("fail", "error", "unstable", "invalid", "pass", "measured", "info"):
        badge = tree.find(f".//span[@id='count-{status}']")
        assert int(badge.get("data-count")) == counts.get(status, 0), status
    assert int(tree.find(".//span[@id='count-total']").get("data-count")) == len(results)


def self_contained(text: str) -> None:
    """No resource is fetched: no external script, stylesheet, image or frame."""
    tree = parse(text)
    for el in tree.iter():
        if el.tag in ("script", "img", "iframe", "link", "source", "video", "audio"):
            for attr in ("src", "href"):
                v = el.get(attr)
                assert v is None or v.startswith(("data:", "#")), (el.tag, v)
    assert tree.find(".//style") is not None and tree.find(".//script").text.strip()


def _result(key, status, value=None, **kw) -> Result:
    kw.setdefault("unit", "cycles")
    kw.setdefault("test", "tests/characterisation/test_table_ii_dependency.py::test_x[sm_90]")
    return Result(key, kw.pop("arch", "sm_90"), status, value, **kw)


@pytest.fixture
def run(tmp_path) -> tuple[Path, dict]:
    """A run written by the Recorder as the plugin writes it: results of every status, a
    moved figure, a failed snapshot, a failed test without a result, a throttled board, two
    GPUs, a plot with its SVG twin."""
    rec = Recorder()
    prov = [{"device": "NVIDIA H100 80GB HBM3", "device_index": i, "uuid": f"GPU-{i}aaaaaaaa"}
            for i in (0, 1)]
    rec.meta.update({"date": "2026-11-28T00:00:00Z", "archs": ["sm_90"], "wall_s": 12.5,
                     "device": "NVIDIA H100 80GB HBM3", "driver": "580.159.04",
                     "static_checks": {"sm_90": 340}, "skipped": {"hardware: no GPU": 3},
                     "topics": {"tests/characterisation/test_table_ii_dependency.py":
                                "instructions",
                                "tests/characterisation/test_memory_staircase.py": "memory"},
                     "topic_docs": {"instructions": "Tables I, II, V"}})
    for i, p in enumerate(prov):
        rec.add(_result("latency.add.u32", "pass", 4.0 + i, expected="4 cycles (±1)",
                        deviation=float(i), allowance=1.0, provenance=p))
        rec.add(_result("latency.mul.u32", "pass", 4.0 + 6 * i, expected="4 cycles (±1)",
                        deviation=0.0, allowance=1.0, provenance=p))
    rec.add(_result("latency.div.u32", "fail", 300.0, expected="150 cycles (±5%)",
                    deviation=150.0, allowance=7.5, detail="the driver's JIT changed"))
    rec.add(_result("latency.mad.u32", "unstable", 5.5, detail="per-repeat slopes spread 2"))
    rec.add(_result("latency.bfind.u64", "invalid", detail="probe invalid: latency/bfind: "
                    "timed region has BRA: not the intended SASS"))
    rec.add(_result("memory.l1.bytes", "measured", 262144.0, unit="B",
                    test="tests/characterisation/test_memory_staircase.py::test_cache[sm_90]"))
    rec.add(_result("sass.add.u32", "info", expected="IADD3", unit=""))
    rec.add(_result("latency.nan.u32", "error", detail="measured value is nan"))
    rec.meta["failures"] = [
        {"test": "tests/characterisation/test_table_ii_dependency.py::test_snap[sm_90]",
         "when": "call", "message": "AssertionError", "text": SNAPSHOT_TEXT},
        {"test": "tests/characterisation/test_memory_staircase.py::test_crash[sm_90]",
         "when": "call", "message": "RuntimeError: CUDA_ERROR_ILLEGAL_ADDRESS", "text": ""}]
    rec.meta["boards"] = [{"device_index": 0, "uuid": "GPU-0aaaaaaaa", "device": "H100",
                           "start": {"sm_mhz": 1980, "time": "t0"},
                           "end": {"sm_mhz": 1755, "time": "t1"},
                           "flags": ["clocks held at the end: SW thermal slowdown "
                                     "(clock-event reasons 0x20)"]}]
    plt = pyplot()
    fig, ax = plt.subplots()
    ax.plot([1, 2, 4], [30, 200, 600])
    out = tmp_path / "report"
    save(fig, out / ARTIFACTS / "memory-staircase.png")
    rec.add_artifact("memory-staircase.png", "Pointer-chase latency against footprint",
                     "tests/characterisation/test_memory_staircase.py::test_cache[sm_90]")
    paths = rec.write(out)
    return paths[2], json.loads(paths[0].read_text())


def test_the_page_holds_every_result_of_the_json(run):
    page, doc = run
    text = page.read_text(encoding="utf-8")
    check_against_json(text, doc)
    self_contained(text)


def test_the_first_screen_says_what_needs_attention_and_why(run):
    page, _ = run
    tree = parse(page.read_text(encoding="utf-8"))
    header = tree.find(".//header")
    att = {tr.get("data-key"): "".join(tr.itertext()) for tr in header.iter("tr")
           if tr.get("data-key")}
    assert set(att) == {"latency.div.u32", "latency.mad.u32", "latency.nan.u32",
                        "latency.add.u32"}                  # fail, unstable, error, moved
    assert "measured 300 cycles, expected 150 cycles (±5%); the driver's JIT changed" in \
        att["latency.div.u32"]
    assert "per-repeat slopes spread 2" in att["latency.mad.u32"]
    assert "more than half of the tolerance" in att["latency.add.u32"]
    text = "".join(header.itertext())
    assert "SW thermal slowdown" in text and "GPU 0 GPU-0aaaaaaaa" in text
    assert "timed region has BRA" in text                   # invalid, by cause
    assert "test_crash[sm_90]" in text and "CUDA_ERROR_ILLEGAL_ADDRESS" in text
    assert "SASS changed (1 snapshot)" in text
    arch = header.find(".//tr[@data-arch='sm_90']")
    assert "340" in "".join(arch.itertext()) and "measured on 2 GPU(s)" in "".join(
        arch.itertext())


def test_sections_by_topic_with_plots_diffs_and_boards(run):
    page, _ = run
    tree = parse(page.read_text(encoding="utf-8"))
    topics = {s.get("data-topic"): s for s in tree.iter("section") if s.get("data-topic")}
    assert list(topics) == ["instructions", "memory"]
    instr, mem = topics["instructions"], topics["memory"]
    assert "Tables I, II, V" in "".join(instr.itertext())
    diff = instr.find(".//div[@class='sass-diff']")
    assert "+ IMAD.IADD R0, R1, 0x1, R2" in "".join(diff.itertext())
    fig = mem.find(".//figure[@data-artifact='memory-staircase.png']")
    assert fig.find(SVG) is not None                        # the SVG twin, inline
    assert "Pointer-chase latency" in "".join(fig.itertext())
    fleet = tree.find(".//section[@id='board-to-board']")
    assert fleet.find(SVG) is not None
    flagged = [tr for tr in fleet.iter("tr") if tr.get("class") == "st-fail"]
    assert ["latency.mul.u32"] == [tr.findall("td")[1].text for tr in flagged]
    prov = "".join(tree.find(".//section[@id='provenance']").itertext())
    assert "580.159.04" in prov and "1755" in prov          # the board's end state


def test_the_committed_h100_run_renders_in_full(tmp_path, capsys):
    """A real report of about a thousand results: every result on the page, and how long
    the page takes and how big it is."""
    doc = read_report(H100)
    t = time.perf_counter()
    text = html.report_html(doc)
    took = time.perf_counter() - t
    check_against_json(text, doc)
    self_contained(text)
    assert took < 20 and len(text) < 4_000_000
    assert cli.main(["html", str(H100), "-o", str(tmp_path)]) == 0
    assert "1052 results" in capsys.readouterr().out
    assert (tmp_path / "index.html").read_text(encoding="utf-8") == text


def test_a_bad_results_file_is_one_error(tmp_path, capsys):
    bad = tmp_path / "gpuchar-results.json"
    bad.write_text("{\"results\": 3}")
    assert cli.main(["html", str(bad), "-o", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"gpuchar-report: {bad}: not a gpuchar results")
    assert cli.main(["html", str(tmp_path / "none.json"), "-o", str(tmp_path)]) == 2


def test_the_nightly_page_puts_the_changes_on_top(run, tmp_path):
    from pytest_gpuchar.results import changes as ch
    _, report = run
    cur = [dict(r) for r in report["results"]]
    prev = [dict(r, value=(r["value"] or 0) * 1.5) if r["key"] == "latency.add.u32" else r
            for r in cur]
    changes = ch.compare(cur, prev) + [ch.Change("sass", "regression", key="test_snap[sm_90]",
                                                 detail="- IADD3\n+ IMAD.IADD")]
    doc = {"exit": 2, "verdict": "regressions", "date": "2026-11-28", "pytest_exit": 1,
           "pytest_command": ["-m", "pytest"], "wall_s": 90.0, "previous": "prev.json",
           "environment": {"before": {"device": "NVIDIA H100 80GB HBM3", "arch": "sm_90",
                                      "board": {"skipped": "NVML: not here"}},
                           "after": {}, "toolkit": {"ptxas": ["13.5"]},
                           "CUDA_CACHE_DISABLE": "1", "throttling": ["SM clock changed"]},
           "status_counts": {}, "skipped": {}, "changes": [c.__dict__ for c in changes],
           "repeatability": None, "meta": report["meta"], "results": report["results"]}
    page = html.write_nightly(doc, tmp_path, report["artifacts"])
    text = page.read_text(encoding="utf-8")
    self_contained(text)
    tree = parse(text)
    header = tree.find(".//header")
    assert "gpuchar nightly: regressions (exit 2)" in "".join(header.find("h1").itertext())
    regressions = int(header.find(".//span[@id='changes-regression']").get("data-count"))
    assert regressions == sum(c.severity == "regression" for c in changes)
    assert header.find(".//div[@class='sass-diff']") is not None
    assert "SM clock changed" in "".join(header.itertext())
    changed = {tr.get("data-key") for tr in header.iter("tr") if tr.get("data-kind")}
    assert "latency.add.u32" in changed
    check_against_json(text, report)             # the night's run below the changes
    # the same page from the saved nightly.json (its run's artifact list from report/, where
    # the fixture's run wrote its report)
    assert (tmp_path / "report" / "gpuchar-results.json").is_file()
    (tmp_path / "nightly.json").write_text(json.dumps(doc))
    page.unlink()
    assert cli.main(["html", str(tmp_path / "nightly.json"), "-o", str(tmp_path)]) == 0
    assert (tmp_path / "nightly.html").read_text(encoding="utf-8") == text
