"""gpuchar-nightly per board, end to end (the suite's pytest run in this process:
conftest.py's inprocess_nights): a board is compared with its own previous run only. Its
first night judges conformance alone and exits 0 when the board conforms; a figure new to
the suite and a difference from another board are notes; a real move of one board is a
change."""
from __future__ import annotations

import gzip
import json
import textwrap

import pytest

from pytest_gpuchar.cli import nightly as n
from pytest_gpuchar.results import boards as B
from pytest_gpuchar.results import changes as ch

pytestmark = pytest.mark.usefixtures("inprocess_nights")

H100 = "NVIDIA H100 80GB HBM3"
BOARD_A = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
BOARD_B = "GPU-bbbbbbbb-1111-2222-3333-444444444444"

SUITE = """
import pytest
from pytest_gpuchar.results.judge import Result, Status

FIGURES = {figures!r}

@pytest.mark.hardware       # a hardware test that needs no GPU fixture: it runs, and counts
def test_figures(gpuchar):
    for key, value, status in FIGURES:
        gpuchar.recorder.add(Result(key, "sm_90", Status(status), value, "B/clk",
                                    expected="4000-4100 B/clk (±2%)",
                                    provenance={{"uuid": {board!r}, "device": {device!r},
                                                "arch": "sm_90"}}))
"""


@pytest.fixture
def suite(tmp_path, write_module):
    """suite(board, *figures): the demo suite recording these figures of `board`."""
    def _suite(board, *figures):
        write_module(tmp_path / "test_demo.py", textwrap.dedent(SUITE.format(
            figures=list(figures), board=board, device=H100)))
    return _suite


def _run_doc(board, *figures):
    return {"meta": {"uuid": board, "device": H100},
            "results": [{"key": k, "arch": "sm_90", "value": v, "status": s, "unit": "B/clk",
                         "spread": 0.0, "provenance": {"uuid": board, "device": H100}}
                        for k, v, s in figures]}


@pytest.fixture
def night(demo_project, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")

    def _night(out, *extra):
        code = n.main(["--out", out, "--baseline-root", str(tmp_path / "none"),
                       "test_demo.py", *extra])
        return code, json.loads((tmp_path / out / "nightly.json").read_text())
    return _night


def test_first_night_of_a_board_judges_conformance_only(tmp_path, night, suite):
    suite(BOARD_A, ("l2.gpu", 4060.0, "pass"))
    code, doc = night("n1")
    assert code == ch.EXIT_NO_CHANGE and doc["first_night"]
    assert doc["boards"] == [{"board": BOARD_A, "reference": None, "same_board": False,
                              "first_night": True, "other_board": None}]
    md = (tmp_path / "n1" / "nightly.md").read_text()
    assert "first night of this board: conformance only" in md
    assert "## Conformance" in md and "0 out of tolerance or in error of 1 results" in md
    assert f"## Change\n\nFirst night of {BOARD_A[:12]}: nothing of its own" in md
    # a board that does not conform on its first night is a regression all the same
    suite(BOARD_A, ("l2.gpu", 3000.0, "fail"))
    code, doc = night("n2")
    assert code == ch.EXIT_REGRESSION
    assert [c["kind"] for c in doc["changes"] if c["severity"] == "regression"] == [
        "expectation"]


def test_first_night_against_the_models_committed_baseline_is_notes_only(tmp_path, night, suite):
    """The fresh machine of issue 29: the committed baseline of its model is another board's
    run; 3% apart (beyond 1% and the spreads) and a figure that board never measured are
    notes, the exit is 0."""
    base = tmp_path / "results" / "sm_90" / "nvidia-h100-80gb-hbm3"
    base.mkdir(parents=True)
    (base / "gpuchar-results.json.gz").write_bytes(gzip.compress(json.dumps(_run_doc(
        BOARD_B, ("l2.gpu", 4060.0, "pass"), ("gone", 1.0, "pass"))).encode()))
    suite(BOARD_A, ("l2.gpu", 3940.0, "pass"), ("fp8.new", 5.0, "pass"))
    code = n.main(["--out", "n1", "--baseline-root", str(tmp_path / "results"),
                   "test_demo.py"])
    doc = json.loads((tmp_path / "n1" / "nightly.json").read_text())
    assert code == ch.EXIT_NO_CHANGE and doc["first_night"]
    got = {c["key"]: (c["kind"], c["severity"]) for c in doc["changes"]}
    assert got == {"l2.gpu": ("board", "note"), "fp8.new": ("new", "note"),
                   "gone": ("missing", "note")}
    assert doc["boards"][0]["other_board"] == BOARD_B[:12]
    md = (tmp_path / "n1" / "nightly.md").read_text()
    assert f"differences from another board's run ({BOARD_B[:12]}" in md


def test_a_figure_new_to_the_suite_is_a_note(tmp_path, night, suite):
    prev = tmp_path / "prev.json"
    prev.write_text(json.dumps(_run_doc(BOARD_A, ("l2.gpu", 4060.0, "pass"))))
    suite(BOARD_A, ("l2.gpu", 4060.0, "pass"), ("tensor.fp8_emulated.x", 2.0, "pass"))
    code, doc = night("n1", "--previous", str(prev))
    assert code == ch.EXIT_NO_CHANGE and not doc["first_night"]
    (c,) = doc["changes"]
    assert (c["key"], c["kind"], c["severity"]) == ("tensor.fp8_emulated.x", "new", "note")


def test_a_real_move_of_one_board_is_a_change(tmp_path, night, suite):
    prev = tmp_path / "prev.json"
    prev.write_text(json.dumps(_run_doc(BOARD_A, ("l2.gpu", 4060.0, "pass"))))
    suite(BOARD_A, ("l2.gpu", 3940.0, "pass"))
    code, doc = night("n1", "--previous", str(prev))
    assert code == ch.EXIT_WITHIN_TOLERANCE
    (c,) = doc["changes"]
    assert (c["kind"], c["severity"], c["old"], c["new"]) == ("value", "change", 4060.0, 3940.0)
    assert doc["repeatability"]["common"] == 1


def test_another_boards_run_given_as_previous_is_notes_only(tmp_path, night, suite):
    prev = tmp_path / "prev.json"
    prev.write_text(json.dumps(_run_doc(BOARD_B, ("l2.gpu", 4060.0, "pass"))))
    suite(BOARD_A, ("l2.gpu", 3940.0, "pass"))
    code, doc = night("n1", "--previous", str(prev))
    assert code == ch.EXIT_NO_CHANGE and doc["first_night"]
    assert [(c["kind"], c["severity"]) for c in doc["changes"]] == [("board", "note")]
    assert doc["repeatability"] is None     # never a repeatability across boards


def test_each_board_of_a_replicate_run_is_compared_with_its_own_previous_run():
    """Two GPUs of one host in one run: a move of board A against A's previous run is a
    change; board B, which the previous run did not measure, is on its first night."""
    prev = _run_doc(BOARD_A, ("l2.gpu", 4060.0, "pass"))
    cur = (_run_doc(BOARD_A, ("l2.gpu", 3940.0, "pass"))["results"]
           + _run_doc(BOARD_B, ("l2.gpu", 4010.0, "pass"))["results"])
    refs = [B.reference(b, "prev.json", prev) for b in B.doc_boards({"results": cur})]
    assert [(r.board, r.same_board) for r in refs] == [(BOARD_A, True), (BOARD_B, False)]
    got = B.compare_boards(cur, refs, noise_rel=ch.NOISE_REL, skipped={})
    assert [(c.kind, c.severity, c.new) for c in got.changes] == [
        ("value", "change", 3940.0), ("board", "note", 4010.0)]
