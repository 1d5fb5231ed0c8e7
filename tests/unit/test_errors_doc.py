"""docs/errors.md: what each mistaken input gives (exit code, first line), as a user meets it.
Every row of its table is run here, in a folder holding the files its commands name, and must
give the exit code and begin with the first line the table shows (a line ending in "..." is
shown cut)."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pytest_gpuchar.cli import expectations, history, model_params, nightly, report
# imported before pytester's sys.modules snapshot: SQLAlchemy's compiled modules cannot be
# imported a second time in one process (pytester drops what a test imported)
from pytest_gpuchar.results import generations, history as _store  # noqa: F401
from pytest_gpuchar.results.html import history as _pages  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "errors.md"
RESULTS = REPO / "results/sm_90/nvidia-h100-80gb-hbm3/gpuchar-results.json.gz"
COMMANDS = {"gpuchar-expectations": expectations.main, "gpuchar-history": history.main,
            "gpuchar-model-params": model_params.main, "gpuchar-nightly": nightly.main,
            "gpuchar-report": report.main}
ROW = re.compile(r"^\| `(?P<cmd>[^`]+)` \| (?P<exit>\d+) \| `(?P<first>.*)` \|$")


def rows() -> list[tuple[str, int, str]]:
    """(command, exit code, first line) of every row of the doc's table."""
    out = []
    for line in DOC.read_text().splitlines():
        m = ROW.match(line)
        if m:
            out.append((m["cmd"], int(m["exit"]), m["first"].replace("\\|", "|")))
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A history holding RESULTS (made once: recording it takes a second)."""
    db = tmp_path_factory.mktemp("store") / "n.sqlite"
    assert history.main(["import", str(RESULTS), "--db", str(db)]) == 0
    return db


@pytest.fixture
def folder(request, pytester, monkeypatch, store):
    """The folder the commands run in: the files the table's commands name (the history, a
    2.4 MB copy, only for the rows that name it; the expectations, for every command that
    reads them)."""
    import shutil
    d = pytester.path
    cmd = request.node.callspec.params["cmd"]
    if "n.sqlite" in cmd:
        shutil.copy(store, d / "n.sqlite")
    (d / "empty.json").write_text("")
    (d / "afile").write_text("x")
    (d / "adir").mkdir()
    (d / "bad.yaml").write_text("a: [1,\n")
    (d / "test_t.py").write_text("def test_x(arch):\n    pass\n")
    # the default expectations root is ./expectations: a copy, so that a row that writes
    # (an update whose check a change let through) can never write the repository's files
    # (the history's commands read no expectation file)
    if not cmd.startswith("gpuchar-history"):
        shutil.copytree(REPO / "expectations", d / "expectations")
    monkeypatch.chdir(d)
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    for var in ("GPUCHAR_DEVICE", "GPUCHAR_EXPECTATIONS", "GPUCHAR_LISTING_CACHE",
                "GPUCHAR_HISTORY"):
        monkeypatch.delenv(var, raising=False)
    return d


def _first(lines: list[str]) -> str:
    """The line that names the problem: argparse's usage lines above it are left out."""
    for ln in lines:
        if ln.strip() and not ln.startswith(("usage:", "ERROR: usage:", " ")):
            return ln
    return ""


def run(line: str, pytester, monkeypatch, capsys) -> tuple[int, str]:
    """The exit code and first line of the table's command `line`: a gpuchar command's first
    line on stderr (else stdout); pytest's usage error, else its last line."""
    words = shlex.split(line.replace("RESULTS", str(RESULTS)))
    while re.match(r"^[A-Z_]+=", words[0]):
        name, value = words.pop(0).split("=", 1)
        monkeypatch.setenv(name, value)
    prog, args = words[0], words[1:]
    capsys.readouterr()
    if prog == "pytest":
        result = pytester.runpytest("-p", "no:cacheprovider", *args)
        first = _first(result.errlines) or [ln for ln in result.outlines if ln.strip()][-1]
        first = re.sub(r" in [\d.]+s$", "", first.strip("= ")).replace("pytest.main()",
                                                                          "pytest")
        # pytest counts its own warnings on that line too: an in-process run in a worker
        # that imported the package before may add PytestAssertRewriteWarning (test order)
        first = re.sub(r", \d+ warnings?$", "", first)
        return int(result.ret), first
    try:
        code = COMMANDS[prog](args)
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    first = _first(out.err.splitlines()) or _first(out.out.splitlines())
    return int(code), first.replace(str(RESULTS), "RESULTS")


def test_the_table_has_the_rows_it_promises():
    assert len(rows()) >= 40
    assert len({cmd for cmd, _, _ in rows()}) == len(rows())


@pytest.mark.parametrize("cmd, code, first", rows(), ids=[r[0] for r in rows()])
def test_each_input_gives_what_the_table_says(cmd, code, first, folder, pytester, monkeypatch,
                                              capsys):
    got_code, got_first = run(cmd, pytester, monkeypatch, capsys)
    assert "Traceback" not in got_first and "INTERNALERROR" not in got_first
    if first.endswith("..."):
        assert got_first.startswith(first[:-3]), got_first
    else:
        assert got_first == first
    assert got_code == code, got_first
