"""Which of the arguments a command passes on to pytest are test paths."""
from __future__ import annotations

from pathlib import Path

# pytest options whose value is the next argument (so that value is not read as a test path)
VALUE_OPTIONS = frozenset((
    "-k", "-m", "-p", "-c", "-o", "-W", "-r", "-n", "--ignore", "--ignore-glob", "--deselect",
    "--rootdir", "--confcutdir", "--basetemp", "--junitxml", "--junit-xml", "--log-file",
    "--override-ini", "--maxfail", "--tb", "--durations", "--import-mode", "--dist",
    "--gpu-arch", "--gpuchar-report", "--gpuchar-history", "--gpuchar-device",
    "--gpuchar-repeats", "--gpuchar-watchdog", "--gpuchar-distribute",
    "--gpuchar-accept-level", "--gpuchar-accept-fleet", "--max-worker-restart"))


def test_paths(pytest_args: list[str]) -> list[str]:
    """The test paths (files, directories, node ids of an existing file) among the pytest
    arguments given after `--`: with any, they are the night's tests, as TESTS before `--`
    are (tests/characterisation was run in addition to them)."""
    out = []
    for prev, arg in zip([""] + pytest_args, pytest_args):
        if arg.startswith("-") or prev in VALUE_OPTIONS:
            continue
        if Path(arg.split("::", 1)[0]).exists():
            out.append(arg)
    return out
