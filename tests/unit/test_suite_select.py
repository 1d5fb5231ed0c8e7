"""Which tests a run collects (suite_select.py): the user's own by pytest's conventions, the
suite that comes with the package when asked for (--gpuchar-suite) or when the directory has
no test of its own (pytester, the suite replaced by a one-test stand-in)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import locations


@pytest.fixture
def suite(tmp_path_factory, monkeypatch):
    d = tmp_path_factory.mktemp("installed") / "suite"
    d.mkdir()
    (d / "test_shipped.py").write_text("def test_from_the_suite(): pass\n")
    monkeypatch.setattr(locations, "suite_dir", lambda: d)
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    return d


def test_an_empty_directory_runs_the_suite_and_says_so(pytester, suite):
    (pytester.path / "notes.txt").write_text("not a test")
    result = pytester.runpytest("-v", "-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"gpuchar: suite {suite} (no test path given and no test "
                                 f"file in {pytester.path}; *", "*test_from_the_suite PASSED*"])


def test_a_directory_with_its_own_tests_runs_them(pytester, suite):
    sub = pytester.mkdir("tests")
    (sub / "test_mine.py").write_text("def test_mine(): pass\n")
    result = pytester.runpytest("-v", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*test_mine PASSED*"])
    result.stdout.no_fnmatch_line("*test_from_the_suite*")
    result.stdout.no_fnmatch_line("gpuchar: suite *")


def test_a_test_file_in_a_virtual_environment_is_not_the_directorys(pytester, suite):
    venv = pytester.mkdir("venv")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "test_theirs.py").write_text("def test_theirs(): pass\n")
    result = pytester.runpytest("-v", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*test_from_the_suite PASSED*"])


def test_gpuchar_suite_runs_the_suite_beside_the_paths_given(pytester, suite):
    pytester.makepyfile(test_mine="def test_mine(): pass\n")
    result = pytester.runpytest("-v", "-p", "no:cacheprovider", "--gpuchar-suite")
    result.stdout.fnmatch_lines(["gpuchar: suite * (--gpuchar-suite)",
                                 "*test_from_the_suite PASSED*"])
    result.stdout.no_fnmatch_line("*test_mine*")
    both = pytester.runpytest("-v", "-p", "no:cacheprovider", "--gpuchar-suite", "test_mine.py")
    both.assert_outcomes(passed=2, warnings=None)   # (an assert-rewrite warning: test order)


def test_a_missing_suite_is_a_usage_error_saying_what_to_do(pytester, monkeypatch):
    monkeypatch.setattr(locations, "suite_dir", lambda: pytester.path / "no-suite")
    result = pytester.runpytest("--gpuchar-suite", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuchar-suite: the suite is not installed (*no-suite does "
                                 "not exist): reinstall pytest-gpuchar from its wheel"])
