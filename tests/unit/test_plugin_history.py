"""--gpuchar-history: the plugin records the run's report into the history store at the end
of the session (the controller only under pytest-xdist, one run per GPU), and a store that
cannot be written warns without failing the run or touching its report."""
from __future__ import annotations

import json
import textwrap

import pytest

from pytest_gpuchar.results.history import open_history


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")

BOARDS_TEST = textwrap.dedent("""
    import os
    from pytest_gpuchar.results.judge import Result, Status

    def test_rows(record):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
        index = int(worker[2:])
        prov = {"device": "Fake GPU", "device_index": index, "uuid": f"GPU-fake{index}",
                "arch": "sm_80", "driver": "1.0"}
        for n in range(3):
            record.note(Result(f"demo.row{n}", "sm_80", Status.MEASURED, 10.0 * n + index,
                               "cycles", provenance=prov))
""")


def test_a_run_is_recorded_once_and_its_report_is_the_same_run(pytester, no_gpu):
    pytester.makepyfile(test_boards=BOARDS_TEST)
    db, out = pytester.path / "h" / "history.sqlite", pytester.path / "report"
    result = pytester.runpytest("--gpu-arch=sm_80", f"--gpuchar-history={db}",
                                f"--gpuchar-report={out}")
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"history: {db}: recorded run(s) 1"])
    with open_history(db) as h:
        [run] = h.runs()
        assert (run["board"], run["source"], run["n_results"]) == ("GPU-fake0", "pytest", 3)
        assert run["path"] == str(out / "gpuchar-results.json")
        assert run["suite_version"].startswith("0.") and run["host"]
        doc = json.loads((out / "gpuchar-results.json").read_text())
        assert h.previous("GPU-fake0")["results"] == doc["results"]
        # importing the written report afterwards adds nothing
        assert h.record(doc, source="import").existing == [run["id"]]


def test_two_sessions_of_the_same_figures_in_one_second_are_two_runs(pytester, no_gpu,
                                                                     monkeypatch):
    """Each session's report carries its own session_id: the store's run identity (the board, the
    meta, the results) tells apart two runs whose figures, date and wall time agree (two
    nights back to back in one test were once recorded as one, "already there")."""
    import time
    monkeypatch.setattr(time, "strftime", lambda fmt, t=None: "2026-12-02T09:00:00Z")
    pytester.makepyfile(test_boards=BOARDS_TEST)
    db = pytester.path / "history.sqlite"
    ids = []
    for _ in range(2):
        out = pytester.path / f"report{len(ids)}"
        assert pytester.runpytest("--gpu-arch=sm_80", f"--gpuchar-history={db}",
                                  f"--gpuchar-report={out}").ret == 0
        ids.append(json.loads((out / "gpuchar-results.json").read_text())["meta"]["session_id"])
    assert ids[0] != ids[1] and all(len(i) == 32 for i in ids)
    with open_history(db) as h:
        assert [r["n_results"] for r in h.runs()] == [3, 3]


def test_replicate_under_xdist_is_one_run_per_gpu_recorded_by_the_controller(pytester,
                                                                             no_gpu):
    pytest.importorskip("xdist", reason="pytest-xdist not installed (extra: test)")
    pytester.makepyfile(test_boards=BOARDS_TEST)
    db = pytester.path / "history.sqlite"
    result = pytester.runpytest("-n", "2", "--gpuchar-distribute=replicate",
                                "--gpu-arch=sm_80", "-o", f"gpuchar_history={db}")
    assert result.ret == 0, result.stdout.str()[-2000:]
    with open_history(db) as h:
        runs = h.runs()
        assert sorted(r["board"] for r in runs) == ["GPU-fake0", "GPU-fake1"]
        assert [r["n_results"] for r in runs] == [3, 3]
        assert [x["value"] for x in h.series("demo.row2", board="GPU-fake1")] == [21.0]


def test_a_failing_history_write_warns_and_keeps_the_run(pytester, no_gpu):
    pytester.makepyfile(test_boards=BOARDS_TEST)
    out = pytester.path / "report"
    (pytester.path / "adir").mkdir()
    result = pytester.runpytest("--gpu-arch=sm_80", "--gpuchar-history=adir",
                                f"--gpuchar-report={out}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*history: NOT recorded into adir: HistoryError: adir: is a "
                                 "directory*"])
    assert len(json.loads((out / "gpuchar-results.json").read_text())["results"]) == 3


def test_a_run_without_results_records_nothing(pytester, no_gpu):
    pytester.makepyfile("def test_x(): pass")
    db = pytester.path / "history.sqlite"
    result = pytester.runpytest("--gpu-arch=sm_80", f"--gpuchar-history={db}")
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"history: no result in this run: nothing recorded ({db})"])
    assert not db.exists()


def test_an_interrupted_run_records_nothing(pytester, no_gpu):
    pytester.makepyfile(test_boards=BOARDS_TEST + "\n\ndef test_stop():\n"
                        "    raise KeyboardInterrupt\n")
    db = pytester.path / "history.sqlite"
    result = pytester.runpytest_subprocess("--gpu-arch=sm_80", f"--gpuchar-history={db}",
                                           timeout=120)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"history: the run was interrupted (exit 2): nothing recorded "
                                 f"({db})"])
    assert not db.exists()
