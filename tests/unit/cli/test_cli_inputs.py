"""The commands under a user's mistakes (issue 44): every --help renders, an output path that
cannot be written and an expectations directory that is not there are one line naming the
option and the path, with exit 2; nothing is half-written and no traceback is shown."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_gpuchar.cli import expectations, history, model_params, nightly, report

REPO = Path(__file__).resolve().parents[3]
H100 = REPO / "results/sm_90/nvidia-h100-80gb-hbm3/gpuchar-results.json.gz"

def _commands():
    out = [(expectations.main, [c]) for c in
           ("check", "update", "fleet", "crossval", "show", "generations")]
    out += [(history.main, [c]) for c in history.COMMANDS]
    out += [(report.main, ["html"]), (expectations.main, []), (history.main, []),
            (report.main, []), (nightly.main, []), (model_params.main, [])]
    return out


@pytest.mark.parametrize("main, args", _commands(), ids=[
    f"{m.__module__.rsplit('.', 1)[-1]} {' '.join(a)}".strip() for m, a in _commands()])
def test_every_help_renders(main, args, capsys):
    with pytest.raises(SystemExit) as ei:
        main([*args, "--help"])
    assert ei.value.code == 0
    assert "usage:" in capsys.readouterr().out


@pytest.fixture
def results_file(tmp_path):
    from tests.unit.cli.test_model_params import REPORT
    path = tmp_path / "gpuchar-results.json"
    path.write_text(json.dumps(REPORT))
    return path


@pytest.fixture
def unwritable(tmp_path):
    """A directory this user cannot create files in: a read-only one, or for root (who
    ignores the mode) /sys."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    yield ro if not os.access(ro, os.W_OK) else Path("/sys")
    ro.chmod(0o755)


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.rstrip("\n")


def test_model_params_output_in_a_missing_folder_is_made(results_file, tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "bsp.yaml"
    assert model_params.main(["--results", str(results_file), "--arch", "sm_90",
                              "-o", str(out)]) == 0
    assert out.read_text().startswith("# ") or out.stat().st_size > 0


def test_model_params_output_that_is_a_directory(results_file, tmp_path, capsys):
    assert model_params.main(["--results", str(results_file), "--arch", "sm_90",
                              "-o", str(tmp_path)]) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"gpuchar-model-params: -o {tmp_path}: is a directory: give a file name")


def test_model_params_output_in_a_read_only_folder(results_file, unwritable, capsys):
    before = sorted(unwritable.iterdir())
    assert model_params.main(["--results", str(results_file), "--arch", "sm_90",
                              "-o", str(unwritable / "x.yaml")]) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"gpuchar-model-params: -o {unwritable / 'x.yaml'}: cannot write: Permission denied: "
        f"make {unwritable} writable or give another -o")
    assert sorted(unwritable.iterdir()) == before     # no temporary file left behind


@pytest.mark.parametrize("sub", [["generations"], ["check"]])
def test_an_expectations_root_that_is_not_there(sub, tmp_path, capsys):
    missing = tmp_path / "missing"
    assert expectations.main(["--root", str(missing), *sub]) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"gpuchar-expectations: --root {missing}: no such directory: give the directory of "
        f"the expectation files (sm_XX.yaml), e.g. the repository's expectations/")


def test_gpuchar_expectations_that_is_not_there(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GPUCHAR_EXPECTATIONS", str(tmp_path / "nope"))
    assert expectations.main(["generations"]) == 2
    assert _one_line(capsys.readouterr().err).startswith(
        f"gpuchar-expectations: $GPUCHAR_EXPECTATIONS={tmp_path / 'nope'}: no such directory")


def test_generations_output_that_is_a_directory(tmp_path, capsys):
    assert expectations.main(["--root", str(REPO / "expectations"), "generations",
                              "-o", str(tmp_path)]) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"gpuchar-expectations: -o {tmp_path}: is a directory: give a file name")


def test_report_html_needs_its_output_directory(tmp_path, capsys):
    """Without -o the page went beside RESULTS: into the repository's committed results/."""
    before = sorted(p.name for p in H100.parent.iterdir())
    with pytest.raises(SystemExit) as ei:
        report.main(["html", str(H100)])
    assert ei.value.code == 2
    assert "the following arguments are required: -o/--out" in capsys.readouterr().err
    assert sorted(p.name for p in H100.parent.iterdir()) == before


def test_report_html_into_a_file_or_a_read_only_folder(tmp_path, unwritable, capsys):
    f = tmp_path / "f"
    f.write_text("")
    assert report.main(["html", str(H100), "-o", str(f)]) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"gpuchar-report: -o {f}: not a directory: give a directory")
    assert report.main(["html", str(H100), "-o", str(unwritable)]) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"gpuchar-report: -o {unwritable}: cannot write: Permission denied: make {unwritable} "
        f"writable or give another -o")


@pytest.fixture
def read_only(tmp_path):
    """read_only(folder): make `folder` one whose files can be read but that nothing can be
    written into: mode 555, or for root (who ignores the mode) a read-only bind mount."""
    import subprocess
    mounts, modes = [], []

    def lock(d: Path) -> Path:
        d.chmod(0o555)
        modes.append(d)
        if os.access(d, os.W_OK):
            if subprocess.run(["mount", "--bind", "-o", "ro", str(d), str(d)],
                              capture_output=True).returncode != 0:
                pytest.skip("root, and no read-only bind mount here")
            mounts.append(d)
        return d
    yield lock
    for d in mounts:
        subprocess.run(["umount", str(d)], check=True)
    for d in modes:
        d.chmod(0o755)


def test_history_in_a_read_only_folder_says_why_it_cannot_be_read(tmp_path, read_only, capsys):
    """issue 44 row 5: "unable to open database file" for a database that is there."""
    db = tmp_path / "ro" / "h.sqlite"
    assert history.main(["import", str(H100), "--db", str(db)]) == 0
    (tmp_path / "ro" / "h.sqlite-wal").unlink(missing_ok=True)
    (tmp_path / "ro" / "h.sqlite-shm").unlink(missing_ok=True)
    read_only(db.parent)
    capsys.readouterr()
    assert history.main(["runs", "--db", str(db)]) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"gpuchar-history: --db {db}: cannot open it: its folder {db.parent} is "
        f"read-only, and SQLite writes h.sqlite-wal and h.sqlite-shm beside the database even "
        f"to read it (WAL mode): copy it into a writable folder and give the copy to --db")


SLOW = """
import pathlib
import time
def test_slow():
    pathlib.Path(__file__).with_name("started").touch()
    time.sleep(60)
"""


def _default_sigint() -> None:
    """In the child before exec: SIGINT back to its default. A test run started in the
    background of a non-interactive shell (`nohup pytest ... &`) hands its children SIGINT
    ignored, Python keeps an ignored SIGINT ignored, and the Ctrl-C never reached the run
    under test (it ran its 60 s to the end and exited 0)."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupted(cmd: list[str], cwd: Path, ready) -> tuple[int, str]:
    """Start `cmd` in its own process group, Ctrl-C it (SIGINT to the group, as a terminal
    does) once ready() holds, and return its exit code and output."""
    import signal
    import subprocess
    import sys
    import time
    p = subprocess.Popen([sys.executable, *cmd], cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True,
                         env={**os.environ, "GPUCHAR_NO_GPU": "1"},
                         preexec_fn=_default_sigint)
    deadline = time.time() + 120
    while not ready() and time.time() < deadline and p.poll() is None:
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    return p.returncode, out


def test_an_interrupted_nightly_is_one_line_exit_3(tmp_path):
    (tmp_path / "test_slow.py").write_text(SLOW)
    code, out = _interrupted(["-m", "pytest_gpuchar.cli.nightly", "--out", "n", "test_slow.py"],
                             tmp_path, (tmp_path / "started").exists)     # in the night's test
    assert code == 3 and "Traceback" not in out, out
    assert out.strip().splitlines()[-1] == (
        "gpuchar-nightly: interrupted (exit 3): the night was not compared, written or "
        "recorded; what ran is in n/pytest.log")
    assert not (tmp_path / "n" / "nightly.json").exists()
