"""The history store (results/history.py) on SQLite and on a real PostgreSQL server (started
by the pg_server fixture from the pgserver wheel; skipped with the reason where none starts):
the committed runs, one run per board, previous(), idempotent and atomic writes, concurrent
writers in several processes, the fleet and series queries, bad targets."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import sqlalchemy as sa

from pytest_gpuchar.results.files import read_report
from pytest_gpuchar.results.history import (SCHEMA_VERSION, HistoryError, open_history,
                                            results_t, runs_t, schema_t)

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS)
def target(request, tmp_path) -> str:
    """A fresh history database: a SQLite file, or a database on the session's PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "deep" / "dir" / "history.sqlite")    # parents are created
    return request.getfixturevalue("pg_url")


@pytest.fixture
def store(target):
    with open_history(target) as h:
        yield h


def counts(h) -> tuple[int, int]:
    with h.engine.connect() as conn:
        return (conn.execute(sa.select(sa.func.count()).select_from(runs_t)).scalar(),
                conn.execute(sa.select(sa.func.count()).select_from(results_t)).scalar())


def test_a_committed_run_is_recorded_once_and_read_back_whole(store, hdocs):
    doc = read_report(hdocs.H100)
    ids = store.record(doc, source="import", path=str(hdocs.H100))
    assert len(ids) == 1 and ids.existing == []
    [run] = store.runs()
    uuid = doc["meta"]["uuid"]
    assert (run["board"], run["device"], run["arch"], run["driver"], run["sm_count"]) == \
        (uuid, hdocs.MODEL, "sm_90", doc["meta"]["driver"], 132)
    assert run["date"] == doc["meta"]["date"] and run["pytest_exit"] == 0
    assert run["n_results"] == len(doc["results"]) and run["source"] == "import"
    prev = store.previous(uuid)
    assert prev["results"] == doc["results"]              # every field, in the report's order
    assert prev["meta"]["measured_skips"] == doc["meta"]["measured_skips"]
    assert prev["changes"] == [] and prev["run"]["id"] == ids[0] and "exit" not in prev
    # recording it again adds nothing and says which run it is
    again = store.record(doc, source="import", path="elsewhere.json.gz")
    assert list(again) == list(ids) and again.existing == list(ids) and again.new == []
    assert counts(store) == (1, len(doc["results"]))


def test_a_replicate_report_is_one_run_per_board(store, hdocs):
    doc = read_report(hdocs.H200_X2)
    ids = store.record(doc, source="import")
    assert len(ids) == 2
    boards = {g["uuid"]: g for g in doc["meta"]["gpus"]} if doc["meta"].get("gpus") else {}
    uuids = sorted({r["provenance"]["uuid"] for r in doc["results"] if r["provenance"]})
    assert [b["board"] for b in store.boards()] == uuids and len(uuids) == 2
    static = [r for r in doc["results"] if not r["provenance"]]
    assert static, "the committed 2 x H200 run has offline checks without a board"
    for index, uuid in enumerate(uuids):
        prev = store.previous(uuid[:12])                   # a prefix names the board
        own = [r for r in doc["results"] if r["provenance"].get("uuid") in (uuid, None)]
        assert prev["results"] == own                      # its own figures + the offline ones
        assert prev["meta"]["uuid"] == uuid == prev["run"]["board"]
        dev_index = next(r["provenance"]["device_index"] for r in own if r["provenance"])
        assert prev["run"]["device_index"] == prev["meta"]["device_index"] == dev_index
        assert boards.get(uuid, {}).get("uuid", uuid) == uuid
    rows = store.series("movement.bandwidth.l2.gpu")
    want = {r["provenance"]["uuid"]: r["value"] for r in doc["results"]
            if r["key"] == "movement.bandwidth.l2.gpu"}
    assert {r["board"]: r["value"] for r in rows} == want and len(rows) == 2
    assert store.record(doc, source="import").existing == list(ids)


def test_previous_is_the_boards_latest_run_before_a_run(store, hdocs):
    a, b = "GPU-aaaa1111-0000", "GPU-bbbb2222-0000"
    r = hdocs.result
    d1 = hdocs.report("2026-11-20T10:00:00+00:00", [r("x.v", 1.0, a)])
    d2 = hdocs.report("2026-11-21T10:00:00+00:00", [r("x.v", 5.0, b)])
    d3 = hdocs.nightly(hdocs.report("2026-11-22T10:00:00+00:00", [r("x.v", 2.0, a)],
                                    failures=[{"test": "t", "text": "boom"}]),
                       "2026-11-22T10:05:00+00:00", 1,
                       changes=[{"kind": "value", "key": "x.v", "arch": "sm_90"}])
    d0 = hdocs.report("2026-11-19T10:00:00+00:00", [r("x.v", 0.5, a)])   # imported late
    i1, i2, i3, i0 = (store.record(d, source="import")[0] for d in (d1, d2, d3, d0))
    prev = store.previous(a)
    assert prev["run"]["id"] == i3 and prev["exit"] == 1 and prev["results"][0]["value"] == 2.0
    assert prev["changes"] == d3["changes"] and prev["meta"]["failures"][0]["text"] == "boom"
    assert prev["run"]["nightly_exit"] == 1 and prev["run"]["sm_clock_end_mhz"] == 1975.0
    assert prev["run"]["nvdisasm"] == "12.4.99 (triton)"
    assert store.previous(a, before_run=i3)["run"]["id"] == i1       # by date, not by id
    assert store.previous(a, before_run=i1)["run"]["id"] == i0
    assert store.previous(a, before_run=i0) is None
    assert store.previous(b)["results"][0]["value"] == 5.0
    assert store.previous(a, arch="sm_80") is None
    assert store.previous("GPU-cccc") is None                         # a board's first night
    assert [x["id"] for x in store.runs(board="GPU-aaaa")] == [i0, i1, i3]
    assert [x["id"] for x in store.runs(since="2026-11-21")] == [i2, i3]


def test_a_write_that_fails_half_way_leaves_nothing(store, hdocs):
    r = hdocs.result
    doc = hdocs.report("2026-11-20T10:00:00+00:00",
                       [r(f"x.v{i}", float(i), b, index=k)
                        for k, b in enumerate(("GPU-aaaa", "GPU-bbbb")) for i in range(3)])
    seen = []

    def fail_on_the_second_boards_results(conn, cursor, statement, *args):
        if statement.lstrip().upper().startswith("INSERT INTO GPUCHAR_RESULTS"):
            seen.append(statement)
            if len(seen) == 2:
                raise RuntimeError("the writer dies here")

    sa.event.listen(store.engine, "before_cursor_execute", fail_on_the_second_boards_results)
    with pytest.raises(RuntimeError, match="dies here"):
        store.record(doc, source="import")
    sa.event.remove(store.engine, "before_cursor_execute", fail_on_the_second_boards_results)
    assert len(seen) == 2                  # the first board's run and results were written...
    assert counts(store) == (0, 0)         # ...and rolled back with the rest
    assert len(store.record(doc, source="import").new) == 2
    assert counts(store) == (2, 6)


KILLED_WRITER = r"""
import json, os, signal, sys
import sqlalchemy as sa
from pytest_gpuchar.results.history import open_history
h = open_history(sys.argv[1])
n = []
def kill(conn, cursor, statement, *args):
    if statement.lstrip().upper().startswith("INSERT INTO GPUCHAR_RESULTS"):
        n.append(1)
        if len(n) == 2:                     # the first board's rows are written, not committed
            os.kill(os.getpid(), signal.SIGKILL)
sa.event.listen(h.engine, "before_cursor_execute", kill)
h.record(json.load(open(sys.argv[2])), source="import")
print("not killed")
"""


def test_a_writer_killed_mid_write_leaves_nothing(target, hdocs, tmp_path):
    r = hdocs.result
    doc = hdocs.report("2026-11-20T10:00:00+00:00",
                       [r(f"x.v{i}", float(i), b, index=k)
                        for k, b in enumerate(("GPU-aaaa", "GPU-bbbb")) for i in range(50)])
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    open_history(target).close()           # the schema exists before the writer starts
    p = subprocess.run([sys.executable, "-c", KILLED_WRITER, target, str(path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -9, p.stdout + p.stderr
    with open_history(target) as h:
        assert counts(h) == (0, 0) and h.runs() == []
        assert len(h.record(doc, source="import").new) == 2      # and the store still works
        assert counts(h) == (2, 100)


WRITER = r"""
import json, sys
from pytest_gpuchar.results.history import open_history
target, files = sys.argv[1], sys.argv[2:]
docs = [json.load(open(f)) for f in files]
print("ready", flush=True)
sys.stdin.readline()                # every writer opens and writes at once, on the go
with open_history(target) as h:
    for f, d in zip(files, docs):
        h.record(d, source="import", path=f)
print("ok")
"""


def test_concurrent_writers_in_several_processes(target, hdocs, tmp_path):
    """Four processes open one fresh store at the same moment (the schema is created once)
    and record three reports each plus one report all four record: 13 runs, whole."""
    r = hdocs.result

    def write(name, board, n=400):
        doc = hdocs.report(f"2026-11-2{len(name) % 7}T10:00:00+00:00",
                           [r(f"x.v{i}", float(i), board) for i in range(n)])
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(doc))
        return str(p)

    shared = write("shared", "GPU-5aed")
    files = [[write(f"w{w}d{d}", f"GPU-{w}{d}00") for d in range(3)] + [shared]
             for w in range(4)]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, target, *f], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for f in files]
    for p in procs:                 # all four imported and read their reports
        assert p.stdout.readline().strip() == "ready", p.communicate(timeout=240)[1][-2000:]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.strip() == "ok", err[-2000:]
    with open_history(target) as h:
        runs = h.runs()
        assert len(runs) == 13 and len({x["board"] for x in runs}) == 13
        assert counts(h) == (13, 13 * 400)
        with h.engine.connect() as conn:
            per_run = dict(conn.execute(sa.select(results_t.c.run_id, sa.func.count())
                                        .group_by(results_t.c.run_id)).all())
            assert conn.execute(sa.select(sa.func.count()).select_from(schema_t)).scalar() == 1
        assert all(per_run[x["id"]] == x["n_results"] == 400 for x in runs)


def test_odd_values_and_fields_come_back_as_recorded(store, hdocs):
    r = hdocs.result
    nan = r("x.nan", float("nan"), "GPU-aaaa", status="fail")
    inf = r("x.inf", float("inf"), "GPU-aaaa", status="fail", data={"curve": [1.0, float("nan")]})
    old = {"key": "x.old", "arch": "sm_90", "status": "pass", "value": 3, "unit": "cycles",
           "provenance": {"uuid": "GPU-aaaa", "device": "X"}, "future_field": {"a": [1, 2]}}
    odd = r("x.odd", 2.5, "GPU-aaaa", spread="wide", expected=4.0)
    doc = hdocs.report("2026-11-20T10:00:00+00:00", [nan, inf, old, odd])
    store.record(doc, source="import")
    got = {x["key"]: x for x in store.previous("GPU-aaaa")["results"]}
    assert math.isnan(got["x.nan"]["value"]) and got["x.inf"]["value"] == float("inf")
    assert got["x.inf"]["data"] == {"curve": [1.0, "nan"]}    # strict JSON inside data
    assert got["x.old"] == old                                 # no field added or lost
    assert got["x.odd"]["spread"] == "wide" and got["x.odd"]["expected"] == 4.0


def test_a_run_without_a_board_uuid_is_an_unknown_board(store, hdocs):
    """The early committed runs carry no GPU UUID: one run of an unknown board, never an
    invented one."""
    r = hdocs.result
    doc = hdocs.report("2026-11-22T01:24:13+00:00", [r("x.v", 1.0), r("x.w", 2.0)],
                       device="NVIDIA H200", uuid=None)
    [rid] = store.record(doc, source="import")
    [b] = store.boards()
    assert b["board"] is None and b["device"] == "NVIDIA H200"
    assert store.previous("unknown")["run"]["id"] == rid
    assert [x["id"] for x in store.runs(board="unknown board")] == [rid]
    assert store.runs(board="unknown")[0]["device"] == "NVIDIA H200"


def test_a_nightly_and_its_report_are_one_run(store, hdocs):
    r = hdocs.result
    doc = hdocs.report("2026-11-20T10:00:00+00:00", [r("x.v", 1.0, "GPU-aaaa")])
    night = hdocs.nightly(doc, "2026-11-20T10:01:00+00:00", 0)
    [rid] = store.record(night, source="nightly", path="n/nightly.json", nightly_exit=0)
    again = store.record(doc, source="import", path="n/report/gpuchar-results.json")
    assert again.existing == [rid]
    [run] = store.runs()
    assert (run["source"], run["doc_kind"], run["nightly_exit"]) == ("nightly", "nightly", 0)


def test_fleet_series_and_boards(store, hdocs):
    r = hdocs.result
    docs = []
    for day, (va, vb, vc) in enumerate([(100.0, 104.0, 98.0), (101.0, 103.0, 99.0),
                                        (102.0, 105.0, float("nan"))]):
        drv = "580.1" if day < 2 else "590.2"
        docs.append(hdocs.report(f"2026-11-2{day}T10:00:00+00:00", [
            r("bw.l2", va, "GPU-aaaa", unit="B/clk", driver=drv),
            r("bw.l2", vb, "GPU-bbbb", unit="B/clk", driver=drv, index=1),
            r("bw.l2", vc, "GPU-cccc", unit="B/clk", driver=drv, index=2,
              status="pass" if day < 2 else "fail"),
            r("bw.l2", 50.0, "GPU-dddd", unit="B/clk", device="NVIDIA H200", index=3),
            r("bw.l1", 7.0, "GPU-aaaa", status="unstable")]))
    docs.append(hdocs.report("2026-11-25T10:00:00+00:00",
                             [r("bw.l2", 1e9, "GPU-aaaa", status="unstable", unit="B/clk")]))
    for d in docs:
        store.record(d, source="import")
    f = store.fleet("bw.l2", "h100")
    assert f["model"] == hdocs.MODEL and f["n_boards"] == 3 and f["unit"] == "B/clk"
    per = {b["board"]: b for b in f["boards"]}
    assert per["GPU-aaaa"]["latest"] == 102.0 and per["GPU-aaaa"]["runs"] == 3
    assert (per["GPU-aaaa"]["min"], per["GPU-aaaa"]["max"], per["GPU-aaaa"]["median"]) == \
        (100.0, 102.0, 101.0)
    assert per["GPU-cccc"]["latest"] == 99.0 and per["GPU-cccc"]["runs"] == 2   # NaN left out
    assert (f["min"], f["max"], f["median"], f["spread"]) == (99.0, 105.0, 102.0, 6.0)
    assert f["spread_rel"] == pytest.approx(6.0 / 102.0)
    assert f["left_out"] == 2             # the NaN and the unstable 1e9
    rows = store.series("bw.l2", board="GPU-aaaa")
    assert [x["value"] for x in rows] == [100.0, 101.0, 102.0, 1e9]
    assert [x["driver"] for x in rows][:3] == ["580.1", "580.1", "590.2"]
    assert {x["board"] for x in store.series("bw.l2", model="H200")} == {"GPU-dddd"}
    boards = {b["board"]: b for b in store.boards()}
    assert boards["GPU-aaaa"]["drivers"] == ["580.1", "590.2", "580.159.04"]
    assert boards["GPU-aaaa"]["runs"] == 4
    assert [b["board"] for b in store.boards(model="nvidia-h200")] == ["GPU-dddd"]
    with pytest.raises(HistoryError, match="ambiguous.*NVIDIA H100 80GB HBM3.*NVIDIA H200"):
        store.fleet("bw.l2", "nvidia")
    with pytest.raises(HistoryError, match="--board GPU-: ambiguous"):
        store.runs(board="GPU-")
    with pytest.raises(HistoryError, match="no such board.*GPU-aaaa"):
        store.runs(board="GPU-ffff")
    with pytest.raises(HistoryError, match=r"bw\.l3: no such result key.*closest: bw\.l2"):
        store.check_key("bw.l3")


def test_the_schema_is_versioned(store):
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(schema_t.c.version)).scalars().all() == [SCHEMA_VERSION]


def test_bad_targets_are_one_clear_error(tmp_path):
    with pytest.raises(HistoryError, match="is a directory"):
        open_history(tmp_path)
    with pytest.raises(HistoryError, match="no such history database"):
        open_history(tmp_path / "missing.sqlite", create=False)
    assert not (tmp_path / "missing.sqlite").exists()
    with pytest.raises(HistoryError, match="unsupported database 'mysql'"):
        open_history("mysql://u@h/db")
    with pytest.raises(HistoryError, match="not a database URL"):
        open_history("postgresql://[::1/x")
    with pytest.raises(HistoryError, match="no history database given"):
        open_history("")
    junk = tmp_path / "junk.sqlite"
    junk.write_text("this is a JSON file, not a database\n" * 100)
    with pytest.raises(HistoryError, match=f"{junk}: cannot open the history database"):
        open_history(junk)
    newer = tmp_path / "newer.sqlite"
    with open_history(newer) as h, h.engine.begin() as conn:
        conn.execute(schema_t.insert().values(version=SCHEMA_VERSION + 1,
                                              applied=sa.func.current_timestamp()))
    with pytest.raises(HistoryError, match="newer pytest-gpuchar"):
        open_history(newer)
    with open_history(tmp_path / "ok.sqlite") as h:
        with pytest.raises(HistoryError, match=r"bad\.json: results\[0\] is not a result"):
            h.record({"results": [{"key": "x"}]}, source="import", path="bad.json")
        with pytest.raises(HistoryError, match="bad.json: not a gpuchar results report"):
            h.record({"rows": []}, source="import", path="bad.json")
        with pytest.raises(HistoryError, match="source 'manual'"):
            h.record({"results": []}, source="manual")


def test_an_unreachable_server_is_one_clear_error(tmp_path):
    url = f"postgresql://nobody@/nodb?host={tmp_path}"          # no server on that socket
    with pytest.raises(HistoryError, match="nobody@/nodb.*cannot open the history database"):
        open_history(url)
