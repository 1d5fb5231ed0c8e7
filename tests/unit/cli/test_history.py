"""gpuchar-history: every command on the committed runs and small synthetic ones (SQLite, and
import + show on a real PostgreSQL server), the CSV round trip, the plot, and bad input as
one line on stderr with exit 2."""
from __future__ import annotations

import csv
import gzip
import io
import json
import re
import subprocess
import sys

import pytest

from pytest_gpuchar.cli import history as cli
from pytest_gpuchar.results.files import read_report
from pytest_gpuchar.results.history import open_history


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def fleet_db(tmp_path, hdocs, capsys):
    """Three H100 boards over three nights (a driver change on the third), an H200 board,
    a run without a board UUID."""
    r = hdocs.result
    files = []
    for day, drv in enumerate(("580.1", "580.1", "590.2")):
        doc = hdocs.report(f"2026-11-2{day}T10:00:00+00:00", [
            r("bw.l2", 100.0 + day, "GPU-aaaa1111", unit="B/clk", spread=1.5, driver=drv),
            r("bw.l2", 104.0 - day, "GPU-bbbb2222", unit="B/clk", driver=drv, index=1),
            r("bw.l2", 98.0, "GPU-cccc3333", unit="B/clk", driver=drv, index=2),
            r("lat.add", 4.0, "GPU-aaaa1111")])
        files.append(tmp_path / f"night{day}.json")
        files[-1].write_text(json.dumps(doc))
    h200 = hdocs.report("2026-11-21T12:00:00+00:00",
                        [r("bw.l2", 150.0, "GPU-dddd4444", unit="B/clk", device="NVIDIA H200")])
    early = hdocs.report("2026-11-19T12:00:00+00:00", [r("bw.l2", 99.0, unit="B/clk")],
                         device=hdocs.MODEL, uuid=None)
    for name, doc in (("h200.json.gz", h200), ("early.json", early)):
        p = tmp_path / name
        raw = json.dumps(doc).encode()
        p.write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
        files.append(p)
    db = tmp_path / "fleet.sqlite"
    code, out, err = run(capsys, "import", *files, "--db", db)
    assert code == 0, err
    assert "11 run(s) recorded, 0 already there, 0 file(s) refused" in out
    return db


def test_import_then_show_one_row_per_board_of_the_committed_runs(tmp_path, hdocs, capsys):
    """The issue's check: the committed results/sm_90/*/gpuchar-results.json.gz imported,
    movement.bandwidth.l2.gpu shows one row per board, by UUID."""
    db = tmp_path / "X.sqlite"
    files = [hdocs.H100, hdocs.H200]
    code, out, err = run(capsys, "import", *files, "--db", db)
    assert code == 0, err
    uuids = [read_report(f)["meta"]["uuid"] for f in files]
    assert f"{files[0]}: recorded run 1 ({uuids[0]}, NVIDIA H100 80GB HBM3" in out
    code, out, err = run(capsys, "show", "movement.bandwidth.l2.gpu", "--db", db)
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("GPU-")]
    assert sorted(line.split()[0] for line in rows) == sorted(uuids)
    assert "movement.bandwidth.l2.gpu [B/clk]: 2 result(s) of 2 board(s)" in out
    # importing again is a no-op that says so
    code, out, _ = run(capsys, "--db", db, "import", *files)
    assert code == 0 and out.count("already recorded (run ") == 2
    assert "0 run(s) recorded, 2 already there" in out


def test_the_command_is_installed(tmp_path, hdocs):
    p = subprocess.run([sys.executable, "-m", "pytest_gpuchar.cli.history", "--db",
                        str(tmp_path / "h.sqlite"), "import", str(hdocs.H200)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "recorded run 1" in p.stdout, p.stderr


def test_runs_and_boards(fleet_db, capsys):
    code, out, _ = run(capsys, "runs", "--db", fleet_db)
    assert code == 0 and out.strip().endswith("11 run(s)")
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["run", "date", "board"]
    assert "unknown board" in lines[1] and "2026-11-19" in lines[1]     # oldest first
    code, out, _ = run(capsys, "runs", "--board", "GPU-aaaa", "--db", fleet_db)
    assert out.strip().endswith("3 run(s)") and out.count("GPU-aaaa1111-") == 0
    assert out.count("GPU-aaaa1111 ") == 3
    code, out, _ = run(capsys, "runs", "--since", "2026-11-21", "--model", "h100",
                       "--db", fleet_db)
    assert out.strip().endswith("6 run(s)") and "H200" not in out
    code, out, _ = run(capsys, "runs", "--board", "unknown", "--db", fleet_db)
    assert out.strip().endswith("1 run(s)")
    code, out, _ = run(capsys, "boards", "--db", fleet_db)
    assert code == 0 and out.strip().endswith("4 board(s)")
    assert re.search(r"GPU-aaaa1111 +NVIDIA H100 80GB HBM3 +sm_90 +3 .* 580\.1, 590\.2", out)
    code, out, _ = run(capsys, "boards", "--model", "NVIDIA H200", "--db", fleet_db)
    assert out.strip().endswith("1 board(s)") and "GPU-dddd4444" in out


def test_show_a_board_a_model_and_the_plot(fleet_db, tmp_path, capsys):
    code, out, _ = run(capsys, "show", "bw.l2", "--board", "bbbb", "--db", fleet_db)
    assert code == 0
    assert [line.split(" sm_90 ")[1].split()[0] for line in out.splitlines()
            if line.startswith("GPU-")] == ["104", "103", "102"]
    assert "driver change: GPU-bbbb2222 580.1 -> 590.2 at 2026-11-22T10:00:00+00:00" in out
    png, svg = tmp_path / "plots" / "bw.png", tmp_path / "bw.svg"
    code, out, _ = run(capsys, "show", "bw.l2", "--model", "H100", "--plot", png,
                       "--db", fleet_db)
    assert code == 0 and f"plot: {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    grouped = [line.split()[0] for line in out.splitlines()
               if line.startswith(("GPU-", "unknown"))]
    assert grouped == sorted(grouped[:-1]) + ["unknown"]     # per board, the unknown last
    assert len(grouped) == 10 and "150" not in out           # no H200 row
    assert run(capsys, "show", "bw.l2", "--plot", svg, "--db", fleet_db)[0] == 0
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()
    rows = open_history(fleet_db).series("bw.l2", model="H100")
    assert [(b, old, new) for b, _d, old, new in cli.driver_changes(rows)] == \
        [(b, "580.1", "590.2") for b in ("GPU-aaaa1111", "GPU-bbbb2222", "GPU-cccc3333")]


def test_fleet(fleet_db, capsys):
    code, out, _ = run(capsys, "fleet", "bw.l2", "--model", "h100", "--db", fleet_db)
    assert code == 0
    assert "bw.l2 [B/clk] on NVIDIA H100 80GB HBM3: 3 board(s)" in out
    assert re.search(r"GPU-aaaa1111 +102 +2026-11-22T10:00:00\+00:00 +590\.2 +3 +100 +102 +101\n",
                     out)
    assert ("across boards (latest values): min 98, max 102, median 102, spread 4 B/clk "
            "(3.92%)") in out
    assert "runs of an unknown board are listed, not counted across boards" in out


def test_export_csv_round_trip(fleet_db, tmp_path, capsys):
    out_csv = tmp_path / "out" / "all.csv"
    code, _, err = run(capsys, "export", "--csv", out_csv, "--db", fleet_db)
    assert code == 0 and "written to" in err
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 3 * 4 + 1 + 1
    h = open_history(fleet_db)
    series = h.series("bw.l2")
    exported = [r for r in rows if r["key"] == "bw.l2"]
    assert sorted((r["board"], r["run_date"], float(r["value"]), r["unit"])
                  for r in exported) == \
        sorted((s["board"] or "", s["date"], s["value"], s["unit"]) for s in series)
    code, out, _ = run(capsys, "export", "--csv", "-", "--key", "lat.add", "--db", fleet_db)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [float(r["value"]) for r in rows] == [4.0, 4.0, 4.0]
    assert {r["board"] for r in rows} == {"GPU-aaaa1111"}


def test_the_database_comes_from_the_environment(tmp_path, hdocs, capsys, monkeypatch):
    monkeypatch.setenv("GPUCHAR_HISTORY", str(tmp_path / "env.sqlite"))
    assert run(capsys, "import", hdocs.H200)[0] == 0
    assert (tmp_path / "env.sqlite").exists()
    monkeypatch.delenv("GPUCHAR_HISTORY")
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "import", hdocs.H200)[0] == 0
    assert (tmp_path / cli.DEFAULT_DB).exists()


def test_bad_input_is_one_line_and_exit_2(fleet_db, tmp_path, capsys):
    empty, listed = tmp_path / "empty.json", tmp_path / "list.json"
    empty.write_text("")
    listed.write_text("[1, 2]")
    cases = [
        (["import", tmp_path / "nope.json"], "nope.json: cannot read"),
        (["import", empty], "empty.json: empty file"),
        (["import", listed], "list.json: not a gpuchar results report"),
        (["show", "bw.l3"], "bw.l3: no such result key"),
        (["show", "bw.l2", "--board", "GPU-"], "--board GPU-: ambiguous"),
        (["show", "bw.l2", "--board", "GPU-eeee"], "--board GPU-eeee: no such board"),
        (["show", "bw.l2", "--board", "aaaa", "--model", "H100"], "not both"),
        (["show", "bw.l2", "--plot", tmp_path / "p.txt"], "--plot"),
        (["show", "lat.add", "--model", "H200"], "lat.add: no result of the board/model"),
        (["runs", "--since", "last week"], "--since: 'last week' is not an ISO date"),
        (["runs", "--model", "A100"], "--model A100: no such model"),
        (["fleet", "bw.l2", "--model", "NVIDIA"], "--model NVIDIA: ambiguous"),
        (["export", "--csv", tmp_path], "is a directory"),
    ]
    for argv, message in cases:
        code, out, err = run(capsys, *argv, "--db", fleet_db)
        assert code == 2, (argv, out, err)
        assert err.count("\n") == 1 and message in err and "Traceback" not in err, (argv, err)
    assert run(capsys, "runs", "--db", tmp_path)[2].count("is a directory") == 1
    code, _, err = run(capsys, "runs", "--db", tmp_path / "missing.sqlite")
    assert code == 2 and "no such history database" in err
    assert not (tmp_path / "missing.sqlite").exists()
    # a file that could not be read is refused, the others are imported
    code, out, err = run(capsys, "import", empty, fleet_db.parent / "night0.json", "--db",
                         tmp_path / "new.sqlite")
    assert code == 2 and "3 run(s) recorded" in out and "1 file(s) refused" in out
    with pytest.raises(SystemExit) as e:                       # argparse: usage, exit 2
        cli.main(["fleet", "bw.l2", "--db", str(fleet_db)])
    assert e.value.code == 2 and "--model" in capsys.readouterr().err


def test_postgresql(pg_url, hdocs, capsys):
    """import and show on a real PostgreSQL server, the URL given as --db."""
    code, out, err = run(capsys, "import", hdocs.H100, hdocs.H200_X2, "--db", pg_url)
    assert code == 0 and "3 run(s) recorded" in out, err
    code, out, err = run(capsys, "show", "movement.bandwidth.l2.gpu", "--db", pg_url)
    assert code == 0, err
    assert len([line for line in out.splitlines() if line.startswith("GPU-")]) == 3
    code, out, _ = run(capsys, "fleet", "movement.bandwidth.l2.gpu", "--model", "H200",
                       "--db", pg_url)
    assert code == 0 and "2 board(s)" in out
