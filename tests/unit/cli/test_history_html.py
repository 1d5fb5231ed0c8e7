"""gpuchar-history html: the pages are parsed with an HTML5 parser (html5lib) and checked
against the store they were rendered from: the board table of each model, one plotted line
per board with its driver change marked, the values of the table equal the store's; the
committed runs render (issue 32's check); bad input is one line and exit 2 with nothing
half-written."""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from pytest_gpuchar.cli import history as cli
from pytest_gpuchar.results.files import read_report
from pytest_gpuchar.results.history import open_history
from pytest_gpuchar.results.html import history as pages
from pytest_gpuchar.results.html import svg
from pytest_gpuchar.results.html.env import num

html5lib = pytest.importorskip("html5lib", reason="html5lib (extra test) parses the pages")

NS = "{http://www.w3.org/2000/svg}"
A, B, C, D = (f"GPU-{c * 4}{k}{k}{k}{k}-0000-0000-0000-00000000000{k}"
              for k, c in enumerate("abcd", 1))
ODD_KEY = "tensor.mma[m16n8k16]/f16 x"          # not a file name as it is
NIGHTS = 5
B_UPGRADE = 3                                     # board B runs driver 590.2 from night 3


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def parse(path: Path):
    return html5lib.parse(path.read_text(encoding="utf-8"), namespaceHTMLElements=False)


def text(el) -> str:
    return "".join(el.itertext()).strip()


@pytest.fixture
def store(tmp_path, hdocs) -> Path:
    """Three H100 boards over five nights, board B's driver upgraded on the fourth; an H200
    board on two nights; an unstable value, a result without a value, a key that is not a
    file name. Recorded through History.record, one report a night."""
    r = hdocs.result
    db = tmp_path / "h.sqlite"
    with open_history(db) as h:
        for n in range(NIGHTS):
            date = f"2026-11-{20 + n}T23:00:00+00:00"
            drv = (lambda board: "590.2" if board == B and n >= B_UPGRADE else "580.1")
            res = []
            for i, board in enumerate((A, B, C)):
                unstable = board == C and n == 2
                res += [r("bw.l2", 9000.0 if unstable else 4000.0 + 10 * i + n, board,
                          status="unstable" if unstable else "pass", unit="B/clk",
                          spread=2.5, driver=drv(board), index=i,
                          expected="3990-4110 B/clk (±2%)"),
                        r("lat.add", 4.0 + (board == B and n >= B_UPGRADE), board,
                          driver=drv(board), index=i),
                        r(ODD_KEY, 0.5, board, unit="ops/clk", driver=drv(board), index=i)]
            res.append(r("sass.add.u32", None, status="info", unit=""))
            h.record(hdocs.report(date, res, exitstatus=int(n == 4)), source="import")
        for n in (1, 3):
            h.record(hdocs.report(f"2026-11-{20 + n}T12:00:00+00:00",
                                  [r("bw.l2", 4800.0 + n, D, unit="B/clk", device="NVIDIA H200")]),
                     source="import")
    return db


@pytest.fixture
def site(store, tmp_path, capsys) -> Path:
    out = tmp_path / "site"
    code, stdout, err = run(capsys, "html", "--db", store, "-o", out)
    assert code == 0, err
    assert f"{out / 'index.html'}: 4 characteristic page(s) of 2 model(s)" in stdout
    return out


def key_page(site: Path, key: str) -> Path:
    index = parse(site / "index.html")
    href = next(a.get("href") for a in index.iter("a") if text(a) == key)
    return site / href.split("#")[0]


def test_the_index_has_a_board_table_per_model(site, store):
    tree = parse(site / "index.html")
    sections = {s.get("data-model"): s for s in tree.iter("section")}
    assert list(sections) == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    h = open_history(store)
    for model, section in sections.items():
        rows = {tr.get("data-board"): [text(td) for td in tr.findall("td")]
                for tr in section.find(".//table[@class='sortable boards']").iter("tr")
                if tr.get("data-board")}
        want = h.boards(model=model)
        assert list(rows) == [b["board"] for b in want]
        for b in want:
            assert rows[b["board"]] == [b["board"], str(b["runs"]), b["first"], b["last"],
                                        ", ".join(b["drivers"]), str(b["pytest_exit"]), "-"]
    h100 = sections["NVIDIA H100 80GB HBM3"]
    assert [text(td) for td in h100.find(".//tr[@data-board='%s']" % B).findall("td")][4] == \
        "580.1, 590.2"
    assert "st-fail" in h100.find(".//tr[@data-board='%s']" % A).get("class")  # exit 1 last
    keys = {tr.get("data-key"): [text(td) for td in tr.findall("td")]
            for tr in h100.find(".//table[@class='sortable characteristics']").iter("tr")
            if tr.get("data-key")}
    assert sorted(keys) == sorted(["bw.l2", "lat.add", ODD_KEY, "sass.add.u32"])
    # bw.l2: 3 boards, 15 results, the unstable one not judged, B's upgrade: 1 change
    assert keys["bw.l2"][1:4] == ["B/clk", "3", "15"] and keys["bw.l2"][6:] == ["1", "1"]
    assert keys["bw.l2"][4] == "4014"                    # median of the latest: 4004/4014/4024
    assert [text(s) for s in tree.find(".//nav").iter("a")] == list(sections)


def test_every_link_is_a_page_of_the_site(site):
    """Self-contained: links go to pages of the site (or within a page); nothing is fetched."""
    files = sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file())
    assert files == sorted(["index.html"] + [f"keys/{n}" for n in pages.page_names(
        ["bw.l2", "lat.add", ODD_KEY, "sass.add.u32"]).values()])
    for f in files:
        tree = parse(site / f)
        for el in tree.iter():
            assert el.get("src") is None, (f, el.tag)
            href = el.get("href")
            if href and not href.startswith("#"):
                assert (site / f).parent.joinpath(href.split("#")[0]).resolve().is_file(), href
        assert tree.find(".//style") is not None and tree.find(".//script") is not None
    assert not re.search(r"[^A-Za-z0-9._-]", pages.page_names([ODD_KEY])[ODD_KEY])


def test_a_key_page_has_a_line_per_board_and_the_driver_change(site, store):
    page = key_page(site, "bw.l2")
    assert page.name == "bw.l2.html"
    tree = parse(page)
    h100 = tree.find(".//section[@data-model='NVIDIA H100 80GB HBM3']")
    assert h100.get("data-unit") == "B/clk"
    plot = h100.find(f".//{NS}svg")
    lines = {g.get("data-board"): g for g in plot.iter(f"{NS}g") if g.get("class") == "board"}
    assert list(lines) == [A, B, C]
    for board, g in lines.items():
        assert len(g.findall(f"{NS}path")) == 1
        assert len(g.findall(f"{NS}circle")) == NIGHTS
        assert len(g.findall(f"{NS}line")) == NIGHTS                # the spread's error bars
    hollow = [c for g in lines.values() for c in g.iter(f"{NS}circle") if c.get("fill") == "#fff"]
    assert len(hollow) == 1 and "9000 B/clk (unstable" in text(hollow[0])
    assert hollow[0].get("cy") == plot.find(f"{NS}rect").get("y")      # on the edge: above
    assert text(h100.find(".//span[@class='muted clipped']")).startswith("1 value(s) not ")
    assert all(4000 <= float(t.text) <= 4100 for t in plot.iter(f"{NS}text")
               if t.get("class") == "tick" and "-" not in t.text)   # the outlier left out
    marks = [g for g in plot.iter(f"{NS}g") if g.get("class") == "driver-change"]
    assert [m.get("data-board") for m in marks] == [B]
    assert "580.1 -> 590.2 at 2026-11-23T23:00:00+00:00" in text(marks[0])
    upgraded = lines[B].findall(f"{NS}circle")[B_UPGRADE]
    assert marks[0].find(f"{NS}line").get("x1") == upgraded.get("cx")
    assert marks[0].find(f"{NS}line").get("stroke") == lines[B].get("stroke")
    legend = h100.find(".//ul[@class='legend']").findall("li")
    assert [(li.get("data-board"), text(li.find("code"))) for li in legend] == \
        [(b, b[:12]) for b in (A, B, C)]
    changes = h100.find(".//ul[@class='driver-changes']")
    assert text(changes) == \
        "driver change: GPU-bbbb2222 580.1 → 590.2 at 2026-11-23T23:00:00+00:00"
    h200 = tree.find(".//section[@data-model='NVIDIA H200']")
    assert [g.get("data-board") for g in h200.iter(f"{NS}g")] == [D]


def test_the_table_holds_the_store_values(site, store):
    h = open_history(store)
    for key in ("bw.l2", "lat.add", ODD_KEY, "sass.add.u32"):
        tree = parse(key_page(site, key))
        for section in tree.iter("section"):
            want = h.series(key, model=section.get("data-model"))
            got = []
            for tr in section.find(".//table[@class='sortable values']").iter("tr"):
                if tr.get("data-board") is None:
                    continue
                cells = [text(td) for td in tr.findall("td")]
                got.append((tr.get("data-board"), cells[1], int(tr.get("data-run")), cells[3],
                            float(tr.get("data-value")) if tr.get("data-value") else None,
                            cells[6], cells[7], cells[8]))
            assert got == [(r["board"], r["date"], r["run"], r["driver"] or "-", r["value"],
                            num(r["spread"]), r["status"], r["expected"] or "")
                           for r in want], key
    tree = parse(key_page(site, "sass.add.u32"))
    assert tree.find(f".//{NS}svg") is None and "No value to plot" in text(tree.find(".//main"))


def test_filters_and_a_render_again_replaces_the_site(site, store, capsys):
    (site / "keys" / "stale.html").write_text("from an older render")
    code, out, err = run(capsys, "html", "--db", store, "-o", site, "--model", "H100",
                         "--key", "bw.l2", "lat.add", "--arch", "sm_90")
    assert code == 0, err
    assert "2 characteristic page(s) of 1 model(s) (NVIDIA H100 80GB HBM3)" in out
    assert sorted(p.name for p in (site / "keys").iterdir()) == ["bw.l2.html", "lat.add.html"]
    tree = parse(site / "index.html")
    assert [s.get("data-model") for s in tree.iter("section")] == ["NVIDIA H100 80GB HBM3"]
    assert "model NVIDIA H100 80GB HBM3" in text(tree.find(".//header"))


def test_bad_input_is_one_line_exit_2_and_nothing_written(store, tmp_path, capsys):
    afile = tmp_path / "afile.html"
    afile.write_text("x")
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    out = tmp_path / "out"
    cases = [
        (["--db", tmp_path / "missing.sqlite", "-o", out], "missing.sqlite: no such history "
                                                          "database"),
        (["--db", store, "-o", out, "--model", "A100"], "--model A100: no such model"),
        (["--db", store, "-o", out, "--key", "bw.l3"], "bw.l3: no such result key"),
        (["--db", store, "-o", out, "--arch", "sm_80"], "no result of arch sm_80 to show"),
        (["--db", store, "-o", afile], f"-o {afile}: is a file, not a directory"),
        (["--db", store, "-o", foreign], f"-o {foreign}: holds files gpuchar-history html "
                                         f"did not write (notes.txt)"),
    ]
    for argv, message in cases:
        code, stdout, err = run(capsys, "html", *argv)
        assert code == 2, (argv, stdout, err)
        assert err.count("\n") == 1 and message in err and "Traceback" not in err, (argv, err)
    assert not out.exists() and not (tmp_path / "missing.sqlite").exists()
    assert afile.read_text() == "x" and [p.name for p in foreign.iterdir()] == ["notes.txt"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []

def test_a_render_that_fails_half_way_leaves_the_old_site(site, store, monkeypatch, capsys):
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    calls = []

    def fail_on_the_third_page(*args, **kw):
        calls.append(args)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(*args, **kw)
    real = pages.render
    monkeypatch.setattr(pages, "render", fail_on_the_third_page)
    code, _, err = run(capsys, "html", "--db", store, "-o", site)
    assert code == 2 and f"-o {site}: cannot write: No space left on device" in err
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in site.parent.iterdir() if p.name.startswith(".")) == []


def test_the_timeline_geometry():
    """Points inside the box, in date order left to right; ticks inside the range; a single
    value and a single date still draw."""
    t0 = dt.datetime(2026, 11, 20, 23)
    pts = [svg.Point(t0 + dt.timedelta(days=k), 100.0 + k, 0.5) for k in range(4)]
    g = svg.timeline({"a": (0, pts), "b": (21, pts[:1])}, [("a", pts[2].x, "driver 2", "")])
    a, b = g["lines"]
    xs = [p["cx"] for p in a["points"]]
    assert xs == sorted(xs) and all(g["x0"] <= x <= g["x1"] for x in xs)
    ys = [p["cy"] for p in a["points"]]
    assert ys == sorted(ys, reverse=True) and all(g["y0"] <= y <= g["y1"] for y in ys)
    assert a["d"].startswith(f"M{xs[0]},{ys[0]} L") and a["d"].count("L") == 3
    assert (b["colour"], b["dash"]) == (svg.PALETTE[1], "6 3")     # the 22nd line: dashed
    assert g["marks"][0]["x"] == xs[2] and g["marks"][0]["colour"] == a["colour"]
    assert [text for _y, text in g["yticks"]] == ["100", "101", "102", "103"]
    assert [text for _x, text in g["xticks"]] == [f"2026-11-2{d}" for d in range(1, 5)]
    one = svg.timeline({"a": (0, [svg.Point(t0, 0.0)])})
    assert one["lines"][0]["d"] == f"M{one['lines'][0]['points'][0]['cx']}," \
                                   f"{one['lines'][0]['points'][0]['cy']}"
    assert one["yticks"] and one["xticks"]


def test_the_committed_runs_render(tmp_path, hdocs, capsys):
    """Issue 32's check: results/sm_90/*/gpuchar-results.json.gz imported into a new store
    renders; every key has its page, each model its section, the values are the reports'."""
    files = sorted(Path(hdocs.ROOT).glob("results/sm_90/*/gpuchar-results.json.gz"))
    assert len(files) >= 2
    db, out = tmp_path / "c.sqlite", tmp_path / "site"
    assert run(capsys, "import", *files, "--db", db)[0] == 0
    code, stdout, err = run(capsys, "html", "--db", db, "-o", out)
    assert code == 0, err
    docs = [read_report(f) for f in files]
    keys = sorted({r["key"] for d in docs for r in d["results"]})
    assert len(list((out / "keys").iterdir())) == len(keys) > 1000
    assert f"{len(keys)} characteristic page(s) of 2 model(s)" in stdout
    tree = parse(out / "index.html")
    assert [s.get("data-model") for s in tree.iter("section")] == \
        sorted(d["meta"]["device"] for d in docs)
    page = parse(key_page(out, "movement.bandwidth.l2.gpu"))
    for d in docs:
        want = [r["value"] for r in d["results"] if r["key"] == "movement.bandwidth.l2.gpu"]
        section = page.find(f".//section[@data-model='{d['meta']['device']}']")
        got = [float(tr.get("data-value")) for tr in section.iter("tr")
               if tr.get("data-value")]
        assert got == want and section.find(f".//{NS}path") is not None


def test_postgresql(pg_url, hdocs, tmp_path, capsys):
    """The same pages from a PostgreSQL store."""
    assert run(capsys, "import", hdocs.H100, hdocs.H200_X2, "--db", pg_url)[0] == 0
    out = tmp_path / "pg"
    code, stdout, err = run(capsys, "html", "--db", pg_url, "-o", out, "--key",
                            "movement.bandwidth.l2.gpu")
    assert code == 0, err
    tree = parse(out / "keys" / "movement.bandwidth.l2.gpu.html")
    boards = [g.get("data-board") for g in tree.iter(f"{NS}g") if g.get("class") == "board"]
    assert len(boards) == 3 and len(set(boards)) == 3
