"""The plugin under bad input and pytest-xdist, as a user meets it (pytester): nothing lost,
one clear error, parallel runs whole."""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SNAP_TEST = """
import pytest

@pytest.mark.parametrize("case", ["a", "b"])
def test_snap(case, snapshot):
    if case == "b":
        raise RuntimeError("broke before its snapshot assertion")
    assert "text" == snapshot
"""


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")


def test_a_broken_run_deletes_no_snapshot(pytester, no_gpu):
    pytester.makepyfile(test_s=SNAP_TEST.replace('raise RuntimeError', 'pass  #'))
    assert pytester.runpytest("--snapshot-update", "-p", "no:cacheprovider").ret == 0
    snaps = sorted(p.name for p in pytester.path.rglob("*.ambr"))
    assert snaps, "the first run records the snapshots"
    before = {p: p.read_text() for p in pytester.path.rglob("*.ambr")}
    pytester.makepyfile(test_s=SNAP_TEST)       # case b now fails before asserting
    result = pytester.runpytest("--snapshot-update", "-p", "no:cacheprovider")
    assert result.ret == 1
    assert {p: p.read_text() for p in pytester.path.rglob("*.ambr")} == before
    out = result.stdout.str()
    assert "snapshot deleted" not in out and "snapshots deleted" not in out
    result.stdout.fnmatch_lines(["*snapshots: no unused snapshot reported or deleted: 1 test*"])


def test_a_broken_run_names_no_option_the_user_did_not_give(pytester, no_gpu):
    """syrupy's "Unused snapshot detection is disabled (--snapshot-disable-unused)" is shown
    only to the user who gave that option; a failed test's run says why in the gpuchar
    summary instead (issue 44 row 10)."""
    pytester.makepyfile(test_s=SNAP_TEST.replace('raise RuntimeError', 'pass  #'))
    assert pytester.runpytest("--snapshot-update", "-p", "no:cacheprovider").ret == 0
    pytester.makepyfile(test_s=SNAP_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == 1
    out = result.stdout.str()
    assert "snapshot-disable-unused" not in out and "detection is disabled" not in out
    result.stdout.fnmatch_lines(["*snapshot report summary*", "1 snapshot passed.",
                                 "*snapshots: no unused snapshot reported or deleted: 1 test*"])
    given = pytester.runpytest("-p", "no:cacheprovider", "--snapshot-disable-unused")
    given.stdout.fnmatch_lines(["*Unused snapshot detection is disabled*"])


def test_a_bad_expectation_file_is_one_usage_error_before_any_test(pytester, no_gpu):
    root = pytester.path / "expectations"
    root.mkdir()
    (root / "sm_80.yaml").write_text("schema: 2\narch: sm_80\ncharacteristics:\n"
                                     "  latency.x:\n\tvalue: 4\n")
    pytester.makepyfile("def test_a(arch): pass\ndef test_b(arch): pass\n")
    result = pytester.runpytest("--gpu-arch=sm_80")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "bad expectation file:" in err and "sm_80.yaml:5:" in err
    assert err.count("sm_80.yaml") == 1 and "Traceback" not in err
    assert "passed" not in result.stdout.str()


def test_without_gpu_arch_the_collected_archs_files_are_validated_before_any_test(
        pytester, no_gpu):
    """No GPU and no --gpu-arch: the run covers every arch with a file, and validates the
    files of the archs its tests are parametrised with, after the collection; a run whose
    tests take no arch reads none (session.validate_expectations)."""
    root = pytester.path / "expectations"
    root.mkdir()
    (root / "sm_80.yaml").write_text("schema: 2\narch: sm_80\ncharacteristics:\n"
                                     "  latency.x:\n\tvalue: 4\n")
    pytester.makepyfile(test_arch="def test_a(arch): pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "bad expectation file:" in err and "sm_80.yaml:5:" in err
    assert "passed" not in result.stdout.str()
    (pytester.path / "test_arch.py").unlink()
    pytester.makepyfile(test_other="def test_b(): pass\n")
    assert pytester.runpytest("-p", "no:cacheprovider").ret == 0


def test_an_empty_gpu_arch_is_a_usage_error(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--gpu-arch=")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gpu-arch: empty value; valid values: " in result.stderr.str()


def test_the_repository_tests_need_the_plugin(pytester):
    shutil.copy(REPO / "conftest.py", pytester.path / "conftest.py")
    pytester.makepyfile("def test_x(arch): pass")
    result = pytester.runpytest("-p", "no:gpuchar")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "need the gpuchar plugin" in err and "fixture 'arch' not found" not in err


def test_the_repository_tests_keep_their_bytecode_in_pytests_cache(pytester, monkeypatch):
    """Where Python is told not to write bytecode, the repository's runs keep it in pytest's
    cache directory, for the run and the processes it starts (the root conftest); the
    interpreter's setting is back after the run."""
    shutil.copy(REPO / "conftest.py", pytester.path / "conftest.py")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    prefix_before = sys.pycache_prefix
    pytester.makepyfile("""
import os, sys

def test_kept():
    assert not sys.dont_write_bytecode and "PYTHONDONTWRITEBYTECODE" not in os.environ
    assert sys.pycache_prefix == os.environ["PYTHONPYCACHEPREFIX"]
    assert sys.pycache_prefix.endswith(os.path.join(".pytest_cache", "d", "pycache"))
""")
    result = pytester.runpytest_inprocess()
    assert result.ret == 0, result.stdout.str()
    assert (pytester.path / ".pytest_cache" / "d" / "pycache").is_dir()
    assert sys.dont_write_bytecode is True and sys.pycache_prefix == prefix_before
    assert os.environ["PYTHONDONTWRITEBYTECODE"] == "1"


MODULES = ("test_memory_table_iv", "test_table_v_instructions")


def _static_suite(pytester, *args: str) -> dict:
    """Tables IV and V's static checks for sm_80, of Table V the add.u32 and mul.lo.u32 rows
    (a copy of the real modules and their snapshots), in a fresh interpreter as a user's
    command runs: an in-process run after earlier ones can see pytest's "already imported"
    assertion-rewrite warning, which no user's run shows."""
    src = REPO / "tests" / "characterisation"
    dst = pytester.path / "tests" / "characterisation"
    dst.mkdir(parents=True, exist_ok=True)
    for f in (m + ".py" for m in MODULES):
        shutil.copy(src / f, dst / f)
    for sub in (src / "__sass__").glob("ptxas-*/sm_80/test_*"):
        if sub.name not in MODULES:
            continue
        shutil.copytree(sub, dst / sub.relative_to(src), dirs_exist_ok=True)
    shutil.copytree(REPO / "expectations", pytester.path / "expectations", dirs_exist_ok=True)
    out = pytester.path / f"out{len(args)}"
    result = pytester.runpytest_subprocess("tests/characterisation", "--gpu-arch=sm_80", "-m",
                                           "static", "-k", "memory or add.u32 or mul.lo.u32",
                                           "-p", "no:cacheprovider",
                                           "--gpuchar-report", str(out), *args)
    assert result.ret == 0, result.stdout.str()[-3000:]
    doc = json.loads((out / "gpuchar-results.json").read_text())
    doc["summary"] = _gpuchar_section(result.stdout.str())
    doc["warnings"] = [ln for ln in result.stdout.lines if "Warning" in ln]
    return doc


def _gpuchar_section(out: str) -> list[str]:
    """The lines of the terminal's gpuchar section up to the reports line (its paths differ
    between runs); the offline compile line without its counts (a second run reads from the
    listing cache what the first assembled, and pytest-xdist's load distribution may
    assemble a module on both workers); the time lines without their seconds."""
    lines = out.split("= gpuchar =", 1)[-1].split("\n")[1:]
    end = next((i for i, ln in enumerate(lines)
                if ln.startswith(("=", "reports:", "reports in "))), len(lines))
    return [re.sub(r"\d+\.\d+ s", "T s", ln) if ln.lstrip().startswith("time") else
            re.sub(r"^offline SASS modules: .*", "offline SASS modules: N", ln)
            for ln in lines[:end]]


def test_xdist_gives_the_same_report_as_a_serial_run(pytester, no_gpu, monkeypatch):
    pytest.importorskip("xdist", reason="pytest-xdist not installed (extra: test)")
    from pytest_gpuchar.core import toolchain
    try:
        toolchain.find("ptxas", "sm_80")
    except toolchain.ToolMissing as e:
        pytest.skip(str(e))
    monkeypatch.setenv("COLUMNS", "400")      # summary lines unwrapped, compared one by one
    serial = _static_suite(pytester)
    parallel = _static_suite(pytester, "-n", "2")

    def key(doc):
        return sorted((r["key"], r["arch"], r["status"], r["detail"]) for r in doc["results"])
    assert serial["results"] and key(parallel) == key(serial)
    assert parallel["meta"]["skipped"] == serial["meta"]["skipped"]
    assert parallel["meta"]["static_checks"] == serial["meta"]["static_checks"] != {}
    # the same summary (the workers' offline compiles counted too), no warning a correct
    # run cannot avoid
    assert "offline SASS modules: N" in serial["summary"]
    # under pytest 9.2 with pytest-xdist 3.8 a split run also says that it could not group
    # the tests (pytest-xdist#1386; test_split_keeps_each_group_on_one_worker)
    summary = [ln for ln in parallel["summary"] if not ln.startswith("split: pytest-xdist")]
    assert summary == serial["summary"]
    assert parallel["warnings"] == serial["warnings"] == []


SYRUPY_STATIC = """
import pytest


@pytest.mark.static
@pytest.mark.parametrize("n", range(3))
def test_static(n, snapshot, arch):
    assert f"row {n}" == snapshot


def test_any(arch):
    pass
"""


GROUPED = """
import pytest
from pytest_gpuchar.results.judge import Result, Status


@pytest.mark.static
@pytest.mark.parametrize("n", range(6))
def test_static(n, arch, record):
    record.note(Result(f"demo.row{n}", arch, Status.INFO, detail="kept"))
"""


def test_split_keeps_each_group_on_one_worker(pytester, no_gpu):
    """-n 2 (split): the controller hands out whole groups (an arch's static checks), so a
    worker compiles only its archs' modules. A worker's options come from the command line,
    so the plugin passes loadgroup on (without it every test was its own group); the
    recorded test ids carry no @group suffix."""
    pytest.importorskip("xdist", reason="pytest-xdist not installed (extra: test)")
    pytester.makepyfile(test_grp=GROUPED)
    result = pytester.runpytest("-n", "2", "-v", "-p", "no:cacheprovider",
                                "--gpuchar-report", "out")   # every arch, no GPU
    assert result.ret == 0, result.stdout.str()[-3000:]
    doc = json.loads((pytester.path / "out" / "gpuchar-results.json").read_text())
    text = result.stdout.str()
    if "could not group the tests" in text:
        # pytest 9.2 with pytest-xdist <= 3.8 (pytest-xdist#1386): no group can be formed;
        # the run says so, in the terminal and the report, instead of passing for grouped
        assert "pytest-xdist#1386" in doc["meta"]["xdist_grouping"]
        tests = {r["test"] for r in doc["results"] if r["key"].startswith("demo.")}
        assert tests and not any("@" in t for t in tests)
        return
    ran = re.findall(r"\[(gw\d)\].*PASSED test_grp\.py::test_static\[(sm_\d+)-\d\]@(sm_\d+)",
                     text)
    archs = {a for _, a, _ in ran}
    assert len(archs) >= 2 and len(ran) == 6 * len(archs)
    assert all(arch == group for _, arch, group in ran)
    workers = {arch: {gw for gw, a, _ in ran if a == arch} for arch in archs}
    assert all(len(w) == 1 for w in workers.values()), workers
    assert len({gw for gw, _, _ in ran}) == 2            # both workers had groups
    assert "xdist_grouping" not in doc["meta"]
    tests = {r["test"] for r in doc["results"] if r["key"].startswith("demo.")}
    assert len(tests) == len(ran) and not any("@" in t for t in tests)


def test_replicate_gives_no_snapshot_warning(pytester, no_gpu):
    """--gpuchar-distribute=replicate runs the static checks on gw0 only: the other workers
    deselect them after syrupy listed the collected tests, so its controller does not warn
    that "selected test(s) [are] missing from collected items"."""
    pytest.importorskip("xdist", reason="pytest-xdist not installed (extra: test)")
    pytester.makepyfile(test_rep=SYRUPY_STATIC)
    assert pytester.runpytest("--gpu-arch=sm_80", "--snapshot-update").ret == 0
    result = pytester.runpytest_subprocess("-n", "2", "--gpuchar-distribute=replicate",
                                           "--gpu-arch=sm_80", "-p", "no:cacheprovider")
    text = result.stdout.str()
    assert result.ret == 0, text[-3000:]
    result.assert_outcomes(passed=5)      # 3 static checks once, test_any on both GPUs
    assert "missing from collected items" not in text and "Warning" not in text
    assert "3 snapshots passed" in text


CRASH_TEST = """
import os
import pytest
from pytest_gpuchar.results.judge import Result, Status


@pytest.mark.parametrize("n", range(6))
def test_row(n, record):
    record.note(Result(f"demo.row{n}", "sm_80", Status.INFO, detail="kept"))
    if n == 3:
        os._exit(1)      # the worker dies (a GPU fault, kill -9)
"""


def test_a_dead_worker_ends_the_run_with_what_it_had(pytester, no_gpu):
    """Under -n the plugin distributes by group and does not replace a dead worker (a
    replaced one makes pytest-xdist 3.x wait forever at the end, its issue #1378): the run
    ends, the test that killed its worker fails with its name, and the report holds what the
    tests before it recorded."""
    pytest.importorskip("xdist", reason="pytest-xdist not installed (extra: test)")
    pytester.makepyfile(test_crash=CRASH_TEST)
    out = pytester.path / "report"
    result = pytester.runpytest_subprocess("-n", "2",
                                           "--gpu-arch=sm_80", "--gpuchar-report", str(out),
                                           timeout=120)
    text = result.stdout.str()
    assert result.ret == 1, text[-3000:]
    assert "crashed while running 'test_crash.py::test_row[3]'" in text
    keys = {r["key"] for r in json.loads((out / "gpuchar-results.json").read_text())["results"]}
    assert {"demo.row0", "demo.row1", "demo.row2"} <= keys


REPLICATE_TEST = """
import os
import pytest
from pytest_gpuchar.results.judge import Result, Status


@pytest.mark.parametrize("n", range(6))
def test_row(n, record, request):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    record.note(Result(f"demo.row{n}.{worker}", "sm_80", Status.INFO, detail="kept"))
    if n == 3 and worker == "gw1":
        os._exit(1)      # one GPU's worker dies


@pytest.mark.static
def test_static(record):
    record.note(Result("demo.static", "sm_80", Status.INFO, detail="once"))
"""


def test_replicate_keeps_the_other_gpus_run_whole_when_one_worker_dies(pytester, no_gpu):
    """--gpuchar-distribute=replicate (every test on every GPU's worker): a dead worker is
    not replaced (the replacement, a new worker id, ran the whole suite again on GPU 0 beside
    gw0 on a 2 x H200 host); the other worker finishes its run; static checks run on gw0
    only, so each is reported once."""
    pytest.importorskip("xdist", reason="pytest-xdist not installed (extra: test)")
    pytester.makepyfile(test_fleet=REPLICATE_TEST)
    out = pytester.path / "report"
    result = pytester.runpytest_subprocess("-n", "2", "--gpuchar-distribute=replicate",
                                           "--gpu-arch=sm_80", "--gpuchar-report", str(out),
                                           timeout=120)
    text = result.stdout.str()
    assert result.ret == 1, text[-3000:]
    assert "crashed while running 'test_fleet.py::test_row[3]'" in text
    keys = [r["key"] for r in json.loads((out / "gpuchar-results.json").read_text())["results"]]
    assert sorted(k for k in keys if k.endswith("gw0")) == [f"demo.row{n}.gw0" for n in range(6)]
    assert sorted(k for k in keys if k.endswith("gw1")) == [f"demo.row{n}.gw1" for n in range(3)]
    assert keys.count("demo.static") == 1 and not any(k.endswith("gw2") for k in keys)


# --- issue 30: a check that could not run says what to do ----------------------------------

SASS_TEST = """
import pytest

@pytest.mark.static
@pytest.mark.parametrize("row", ["add", "mul"])
def test_map(row, arch, sass_snapshot, record):
    from pytest_gpuchar.fixtures import match_snapshot
    match_snapshot(f"IADD3 {row}\\n", sass_snapshot("ptxas-13.5.37"), record.node)
"""


def _recorded(pytester) -> Path:
    pytester.makepyfile(test_map=SASS_TEST)
    assert pytester.runpytest("--gpu-arch=sm_80", "--snapshot-update").ret == 0
    d = pytester.path / "__sass__" / "ptxas-13.5.37" / "sm_80" / "test_map"
    assert sorted(p.name for p in d.iterdir()) == ["test_map[sm_80-add].sass",
                                                   "test_map[sm_80-mul].sass"]
    return d


def test_a_missing_snapshot_names_the_command_that_records_it(pytester, no_gpu, monkeypatch):
    """One .sass deleted: not a bare AssertionError but the test, the directory and the
    command; that command records it, and the next run passes."""
    monkeypatch.setenv("COLUMNS", "400")
    d = _recorded(pytester)
    (d / "test_map[sm_80-add].sass").unlink()
    result = pytester.runpytest("--gpu-arch=sm_80")
    assert result.ret == 1
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert ("no SASS snapshot recorded for test_map[sm_80-add]: the snapshot "
            "test_map[sm_80-add].sass does not exist in __sass__/ptxas-13.5.37/sm_80/test_map; "
            "review the SASS below and record it with") in out
    cmd = "pytest 'test_map.py::test_map[sm_80-add]' --gpu-arch=sm_80 --snapshot-update"
    assert cmd in out and "AssertionError" not in out
    import shlex
    assert pytester.runpytest(*shlex.split(cmd)[1:]).ret == 0
    assert (d / "test_map[sm_80-add].sass").read_text() == "IADD3 add\n"
    assert pytester.runpytest("--gpu-arch=sm_80").ret == 0


def test_a_snapshot_that_cannot_be_written_names_the_file_and_the_error(pytester, no_gpu,
                                                                         monkeypatch):
    """--snapshot-update into a directory that refuses the write (an immutable file): the
    file and the OS error, the old snapshot whole, no temporary file left."""
    import errno
    import os
    monkeypatch.setenv("COLUMNS", "400")
    d = _recorded(pytester)
    pytester.makepyfile(test_map=SASS_TEST.replace("IADD3", "IADD3.X"))
    real = os.replace

    def refuse(src, dst, *a, **k):     # what EPERM from an immutable (chattr +i) file does
        if str(dst).endswith(".sass"):
            raise PermissionError(errno.EPERM, "Operation not permitted", str(dst))
        return real(src, dst, *a, **k)
    monkeypatch.setattr(os, "replace", refuse)
    result = pytester.runpytest("--gpu-arch=sm_80", "--snapshot-update")
    monkeypatch.undo()
    assert result.ret == 1
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert ("cannot write the SASS snapshot __sass__/ptxas-13.5.37/sm_80/test_map/"
            "test_map[sm_80-add].sass: Operation not permitted (EPERM); the file is as it was "
            "(nothing was half-written): make __sass__/ptxas-13.5.37/sm_80/test_map writable "
            "and run --snapshot-update again") in out
    assert "AssertionError" not in out
    assert sorted(p.name for p in d.iterdir()) == ["test_map[sm_80-add].sass",
                                                   "test_map[sm_80-mul].sass"]
    assert (d / "test_map[sm_80-add].sass").read_text() == "IADD3 add\n"


LONG_SKIP = ("static: no SASS snapshots recorded for ptxas-13.5.37/sm_90a: review the SASS and "
             "record them with pytest --snapshot-update --gpu-arch=sm_90a")


def test_the_summary_wraps_and_never_cuts(pytester, no_gpu, monkeypatch):
    """The command to record snapshots was cut at "pytest --snapshot-upda" (a skip reason
    kept to 120 characters, a line to 150): now every line fits the terminal and, joined,
    says everything."""
    from pytest_gpuchar.results.terminal import wrap
    monkeypatch.setenv("COLUMNS", "80")
    pytester.makepyfile(test_long=f"""
import pytest

@pytest.mark.parametrize("n", range(3))
def test_row(n, arch):
    pytest.skip({LONG_SKIP!r})
""")
    result = pytester.runpytest("--gpu-arch=sm_90a")
    lines = result.stdout.str().split("= gpuchar =", 1)[1].splitlines()[1:]
    lines = [ln for ln in lines[:next(i for i, ln in enumerate(lines) if ln.startswith("="))]
             if ln]
    assert lines and all(len(ln) < 80 for ln in lines)
    assert " ".join(ln.strip() for ln in lines) == f"skipped 3: {LONG_SKIP}"
    assert "--snapshot-update" in lines[-1] or "--snapshot-update" in lines[-2]
    assert wrap("x " * 10 + "--a-very-long-option=" + "v" * 80, 30)[-1].strip().startswith(
        "--a-very-long-option=")      # a word longer than the line stays whole


SLEEPERS = """
import os, time
import pytest

@pytest.mark.parametrize("n", range(4))
def test_sleep(n):
    with open(os.path.join(os.environ["PIDS"], f"pid-{os.getpid()}"), "w"):
        pass
    end = time.time() + 60
    while time.time() < end:      # a test in a long call that KeyboardInterrupt does not stop
        try:                      # (a GPU wait, a ptxas run)
            time.sleep(1)
        except KeyboardInterrupt:
            pass
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_workers_end_with_their_controller(pytester, no_gpu):
    """A SIGKILLed `pytest -n 2` controller left both workers running their tests for
    about 30 s more (issue 44 row 9): they end within seconds of it now (execnet's
    KeyboardInterrupt on losing the controller does not stop a test in a long call)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    pytester.makepyfile(test_sleepers=SLEEPERS)
    base = pytester.path / "pids"
    base.mkdir()
    ctl = subprocess.Popen([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider",
                            "-p", "no:hypothesispytest", "test_sleepers.py"],
                           cwd=pytester.path, env={**os.environ, "PIDS": str(base)},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while len(list(base.glob("pid-*"))) < 2 and time.time() < deadline:
            time.sleep(0.2)
        workers = [int(p.name[4:]) for p in base.glob("pid-*")]
        assert len(workers) == 2 and ctl.pid not in workers
    finally:
        ctl.send_signal(signal.SIGKILL)
        ctl.wait(timeout=60)
    deadline = time.time() + 5     # execnet's own: 5 s, then interrupt, then 10 s, os._exit
    while any(map(_alive, workers)) and time.time() < deadline:
        time.sleep(0.2)
    left = [w for w in workers if _alive(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, "workers outlived their controller"


SLOW_PAIR = """
import pathlib
import time

def test_a():
    pathlib.Path(__file__).with_name("started-a").touch()
    time.sleep(60)

def test_b():
    pathlib.Path(__file__).with_name("started-b").touch()
    time.sleep(60)
"""


def test_an_interrupted_parallel_run_gives_no_snapshot_warning(pytester, no_gpu):
    """Ctrl-C of `pytest -n 2`: syrupy warned that a worker's snapshot report was missing;
    the run keeps every snapshot and says why, once."""
    import os
    import signal
    import subprocess
    import sys
    import time
    pytester.makepyfile(test_slow=SLOW_PAIR)
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider",
                          "-p", "no:hypothesispytest", "test_slow.py"], cwd=pytester.path,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True,
                         # SIGINT at its default, not ignored as a background shell job
                         # hands it down (tests/unit/cli/test_cli_inputs._default_sigint)
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120      # both workers in their test, then Ctrl-C
    while (len(list(pytester.path.glob("started-*"))) < 2 and time.time() < deadline
           and p.poll() is None):
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 2, out
    assert "UserWarning" not in out and "worker snapshot report" not in out, out
    assert "snapshot report summary" not in out, out      # a heading over nothing
    assert "snapshots: no unused snapshot reported or deleted: the run was interrupted" in out
