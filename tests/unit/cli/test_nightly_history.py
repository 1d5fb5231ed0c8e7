"""gpuchar-nightly --history TARGET: each night is recorded into the history store with its
exit code, the board's latest recorded run is the previous run, and a --history the store
cannot use (the old history directory, a bad URL) is one error before the night runs. The
nights' suites run in this process (conftest.py's inprocess_nights)."""
from __future__ import annotations

import json
import textwrap

import pytest

from pytest_gpuchar.cli import nightly as n
from pytest_gpuchar.results import changes as ch
from pytest_gpuchar.results.history import open_history

pytestmark = pytest.mark.usefixtures("inprocess_nights")

SUITE = """
import pytest
from pytest_gpuchar.results.judge import Result, Status

@pytest.mark.hardware       # needs no GPU fixture: it runs, so the night measured something
def test_value(record):
    record.note(Result("demo.value", "sm_80", Status.MEASURED, {value}, "cycles",
                       provenance={{"uuid": "GPU-night0", "device": "Fake GPU",
                                   "device_index": 0, "arch": "sm_80"}}))
"""


def _suite(write, tmp_path, value):
    write(tmp_path / "test_demo.py", textwrap.dedent(SUITE.format(value=value)))


def test_nights_are_recorded_and_compared_with_the_boards_last_run(demo_project, tmp_path,
                                                                   monkeypatch, capsys,
                                                                   write_module):
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    db = tmp_path / "hist" / "gpuchar-history.sqlite"
    args = ["--history", str(db), "test_demo.py", "--", "--gpu-arch=sm_80"]
    _suite(write_module, tmp_path, 10.0)
    assert n.main(["--out", "n1", *args]) == ch.EXIT_NO_CHANGE
    assert f"recorded in {db}: run(s) 1" in capsys.readouterr().out
    assert json.loads((tmp_path / "n1" / "nightly.json").read_text())["previous"] is None
    assert n.main(["--out", "n2", *args]) == ch.EXIT_NO_CHANGE
    doc = json.loads((tmp_path / "n2" / "nightly.json").read_text())
    assert doc["previous"].startswith("run 1 (") and doc["previous"].endswith(f"of {db}")
    assert "-o" in doc["pytest_command"] and "gpuchar_history=" in doc["pytest_command"]
    _suite(write_module, tmp_path, 12.0)
    assert n.main(["--out", "n3", *args]) == ch.EXIT_WITHIN_TOLERANCE
    doc = json.loads((tmp_path / "n3" / "nightly.json").read_text())
    assert doc["previous"].startswith("run 2 (")
    assert [(c["key"], c["old"], c["new"]) for c in doc["changes"]] == [("demo.value", 10.0, 12.0)]
    with open_history(db) as h:
        runs = h.runs()
        assert [(r["board"], r["source"], r["nightly_exit"]) for r in runs] == \
            [("GPU-night0", "nightly", 0)] * 2 + [("GPU-night0", "nightly", 1)]
        last = h.previous("GPU-night0")
        assert last["exit"] == 1 and last["changes"][0]["key"] == "demo.value"
        assert last["results"][0]["value"] == 12.0
        # the night's own report imported afterwards is the same run
        report = json.loads((tmp_path / "n3" / "report" / "gpuchar-results.json").read_text())
        assert h.record(report, source="import").existing == [runs[-1]["id"]]


def test_the_old_history_directory_is_refused_before_the_night_runs(tmp_path, capsys):
    old = tmp_path / "nightly-history"
    old.mkdir()
    (old / "latest.json").write_text("{}")
    code = n.main(["--out", str(tmp_path / "out"), "--history", str(old)])
    err = capsys.readouterr().err
    assert code == ch.EXIT_BROKEN and not (tmp_path / "out").exists()
    assert err.count("\n") == 1 and "is a directory. --history now takes" in err
    assert f"gpuchar-history import {old}/nightly-*.json" in err


def test_a_history_that_cannot_be_opened_is_one_error_before_the_night_runs(tmp_path, capsys):
    code = n.main(["--out", str(tmp_path / "out"), "--history", "mysql://u@h/db"])
    err = capsys.readouterr().err
    assert code == ch.EXIT_BROKEN and not (tmp_path / "out").exists()
    assert "gpuchar-nightly: --history mysql://u@h/db: unsupported database" in err
