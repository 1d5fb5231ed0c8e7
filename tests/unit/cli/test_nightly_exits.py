"""gpuchar-nightly's exit codes end to end, as the fault table in docs/nightly.md lists them:
no GPU, a CuPy that cannot load (a driver upgrade that broke it), a hidden GPU, a broken run,
no change, changes within tolerance, regressions, and a night that measured nothing. Each
runs the real command on a small suite; no GPU is needed. The suite's pytest runs in a
subprocess where the process itself is the case (a CuPy that cannot load, a hidden GPU), in
this process otherwise (conftest.py's inprocess_nights)."""
from __future__ import annotations

import json
import os
import textwrap

import pytest

from pytest_gpuchar.cli import nightly as n
from pytest_gpuchar.results import changes as ch

SUITE = """
import pytest
from pytest_gpuchar.results.judge import Measurement


@pytest.mark.static
def test_value(record, arch):
    record(Measurement("demo.value", {value}, "cycles"), arch)


@pytest.mark.static
def test_other():
    assert {ok}


@pytest.mark.hardware
def test_on_the_gpu(gpu, record, arch):
    record(Measurement("demo.hw", 1.0, "cycles"), arch)
"""

ARGS = ["test_demo.py", "--", "--gpu-arch=sm_80"]
INPROCESS = pytest.mark.usefixtures("inprocess_nights")


@pytest.fixture
def night(demo_project, tmp_path, monkeypatch, capsys, write_module):
    """night(*args, value=10.0, ok=True) -> (exit code, the lines it printed): the nightly
    on the demo suite, in tmp_path."""
    monkeypatch.delenv("GPUCHAR_NO_GPU", raising=False)

    def _night(*args, value=10.0, ok=True):
        write_module(tmp_path / "test_demo.py",
                     textwrap.dedent(SUITE.format(value=value, ok=ok)))
        code = n.main(list(args))
        out = capsys.readouterr()
        return code, (out.out + out.err).strip().splitlines()
    return _night


@pytest.fixture
def broken_cupy(tmp_path, monkeypatch):
    """A CuPy that cannot load, as after a driver upgrade: `import cupy` raises."""
    site = tmp_path / "site"
    (site / "cupy").mkdir(parents=True)
    (site / "cupy" / "__init__.py").write_text(
        "raise ImportError('libcuda.so.1: version `R580` not found (the driver was upgraded)')\n")
    # (before the package's own path: a checkout run with PYTHONPATH keeps its code)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p))


def _doc(tmp_path, out):
    return json.loads((tmp_path / out / "nightly.json").read_text())


@INPROCESS
def test_no_gpu_measured_nothing_exit_4_with_the_reason_last(night, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    code, lines = night("--out", "n1", *ARGS)
    assert code == ch.EXIT_MEASURED_NOTHING == 4
    assert lines[0].startswith("gpuchar-nightly: measured nothing (exit 4): ")
    assert lines[-1] == ('gpuchar-nightly: measured nothing (exit 4): no hardware test ran: 1 '
                         'skipped with "hardware: GPUCHAR_NO_GPU is set"; a deliberately '
                         'static night: gpuchar-nightly --static-only')
    doc = _doc(tmp_path, "n1")
    assert doc["exit"] == 4 and doc["measured_nothing"].startswith("no hardware test ran")
    # no GPU at the start: the end's clock is not probed again, the start's reason is kept
    before, after = doc["environment"]["before"], doc["environment"]["after"]
    assert after["no_gpu"] == before["no_gpu"] == "GPUCHAR_NO_GPU is set"
    assert after["probed"] == "at the start only (no GPU)" and after["time"]
    md = (tmp_path / "n1" / "nightly.md").read_text()
    assert md.startswith("# gpuchar nightly: measured nothing (exit 4)\n\n**Measured nothing**")
    assert "Nothing changed" not in md


def test_a_cupy_that_cannot_load_is_not_a_pass(night, broken_cupy):
    """The issue's case: CuPy broken by a driver upgrade was "no change (exit 0)"."""
    code, lines = night("--out", "n1", *ARGS)
    assert code == 4
    assert "no hardware test ran: 1 skipped with \"hardware: no GPU: CuPy is not importable " \
           "(ImportError: libcuda.so.1: version `R580` not found" in lines[-1]


def test_a_hidden_gpu_measured_nothing(night, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code, lines = night("--out", "n1", *ARGS)
    assert code == 4 and 'skipped with "hardware: no GPU' in lines[-1]


@INPROCESS
def test_a_previous_nights_figures_do_not_turn_a_gpu_less_night_into_regressions(
        night, tmp_path, monkeypatch):
    """Measured nothing wins over the "missing" regressions every hardware figure of the
    previous night would be: the cause is named, not 500 symptoms."""
    prev = tmp_path / "prev.json"
    prev.write_text(json.dumps({"results": [
        {"key": "demo.hw", "arch": "sm_80", "value": 1.0, "unit": "cycles", "status": "pass",
         "test": "test_demo.py::test_on_the_gpu[sm_80]"}]}))
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    code, lines = night("--out", "n1", "--previous", str(prev), *ARGS)
    assert code == 4 and "no hardware test ran" in lines[-1]
    # the same night as a deliberate static night compares the static checks only
    code, lines = night("--out", "n2", "--previous", str(prev), "--static-only", *ARGS)
    assert code == ch.EXIT_NO_CHANGE      # demo.value is new to the suite: a note
    kinds = {(c["kind"], c["severity"], c["key"]) for c in _doc(tmp_path, "n2")["changes"]}
    assert kinds == {("new", "note", "demo.value")}


@INPROCESS
def test_only_static_tests_selected_is_measured_nothing_unless_static_only(night):
    code, lines = night("--out", "n1", "test_demo.py", "--", "--gpu-arch=sm_80", "-m",
                        "static")
    assert code == 4 and "none was selected" in lines[-1] and "--static-only" in lines[-1]


@INPROCESS
def test_a_static_night_exits_by_the_static_checks(night, tmp_path, monkeypatch):
    """--static-only: the hardware test is deselected (not skipped), the exit is that of the
    static checks (0 here; 1 and 2 against a previous night: test_nightly.py's end-to-end
    test runs its nights this way)."""
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    code, lines = night("--out", "n1", "--static-only", *ARGS)
    assert code == ch.EXIT_NO_CHANGE and lines[-1].startswith("gpuchar-nightly: no change (exit 0)")
    doc = _doc(tmp_path, "n1")
    assert doc["static_only"] is True and " -m static " in " ".join(doc["pytest_command"])
    assert doc["meta"]["hardware_ran"] == 0 and doc["skipped"] == {}
    assert doc["measured_nothing"] is None
    md = (tmp_path / "n1" / "nightly.md").read_text()
    assert "**Static checks only** (--static-only)" in md


@INPROCESS
def test_a_broken_run_is_exit_3_before_anything_else(night):
    code, lines = night("--out", "n1", "test_demo.py", "--", "--gpu-arch=sm_1")
    assert code == ch.EXIT_BROKEN and "the run broke (exit 3)" in lines[0]
    assert "measured nothing" not in "\n".join(lines)


def test_a_hardware_test_that_ran_counts(pytester, monkeypatch):
    """meta.hardware_ran counts the hardware tests that reached their call (here one that
    needs no GPU fixture); a skipped one does not."""
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    pytester.makepyfile(test_hw="""
import pytest

@pytest.mark.hardware
def test_ran():
    pass

@pytest.mark.hardware
def test_skipped(gpu, arch):
    pass
""")
    out = pytester.path / "r"
    assert pytester.runpytest("--gpu-arch=sm_80", f"--gpuchar-report={out}").ret == 0
    meta = json.loads((out / "gpuchar-results.json").read_text())["meta"]
    assert meta["hardware_ran"] == 1
    assert n.measured_nothing(meta) == ""
    assert n.measured_nothing(dict(meta, hardware_ran=0)).startswith(
        'no hardware test ran: 1 skipped with "hardware: GPUCHAR_NO_GPU is set"')


def test_a_gpu_of_another_arch_names_it():
    meta = {"hardware_ran": 0, "skipped": {
        "hardware: GPU is sm_90 (NVIDIA H200) but sm_80 was asked": 700,
        "static: tcgen05 is sm_100a/sm_103a only": 6,
        "hardware: GPU wedged by probe x earlier in this run": 3}}
    assert n.measured_nothing(meta).startswith(
        'no hardware test ran: 700 (+3) skipped with "hardware: GPU is sm_90 (NVIDIA H200) '
        'but sm_80 was asked"')


def test_a_command_line_mistake_is_exit_3_not_2(capsys):
    """argparse's usage error is 2, which is the nightly's "regressions": it is 3."""
    with pytest.raises(SystemExit) as e:
        n.main(["--no-such-option"])
    assert e.value.code == ch.EXIT_BROKEN
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err


@INPROCESS
def test_test_paths_after_the_double_dash_are_the_night_s_tests(night, tmp_path):
    """`gpuchar-nightly -- FILE` ran the whole suite and FILE (399 s for a 4 s file; issue 44
    row 4): a test path after `--` replaces the default as TESTS before it do."""
    code, lines = night("--static-only", "--", "test_demo.py::test_value", "--gpu-arch=sm_80")
    doc = json.loads((tmp_path / "gpuchar-nightly" / "nightly.json").read_text())
    assert doc["pytest_command"].count("test_demo.py::test_value") == 1
    assert "tests/characterisation" not in doc["pytest_command"]
    assert code == 0, lines
    assert doc["pytest_exit"] == 0, lines


def test_which_arguments_after_the_double_dash_are_test_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text("")
    (tmp_path / "d").mkdir()
    assert n.test_paths(["t.py::test_x[a]", "-k", "t.py", "d", "--ignore", "d", "-x",
                         "missing.py", "--gpu-arch=sm_80"]) == ["t.py::test_x[a]", "d"]
    assert n.test_paths(["-k", "foo", "--gpu-arch", "sm_80"]) == []
