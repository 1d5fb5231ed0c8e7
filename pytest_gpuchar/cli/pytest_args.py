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


def default_tests() -> list[str]:
    """The suite a nightly runs without test paths: the project's tests/characterisation
    (a checkout), else the one installed with the package (pytest --gpuchar-suite)."""
    return ["tests/characterisation"] if Path("tests/characterisation").is_dir() \
        else ["--gpuchar-suite"]


def selected_tonight(previous: list[dict] | None, junit: Path,
                     static_only: bool) -> list[dict] | None:
    """On a --static-only night, the previous run's results of the tests tonight's run
    selected (the previous night's hardware figures are not "missing"); else `previous`."""
    if not static_only or previous is None:
        return previous
    import xml.etree.ElementTree as ET
    try:
        cases = {(tc.get("classname", ""), tc.get("name", ""))
                 for tc in ET.parse(junit).getroot().iter("testcase")}
    except (OSError, ET.ParseError):
        return []

    def case(nodeid: str) -> tuple[str, str]:
        path, _, rest = nodeid.partition("::")
        parts = rest.split("::")
        return ".".join([path.removesuffix(".py").replace("/", "."), *parts[:-1]]), parts[-1]
    return [r for r in previous if case(str(r.get("test", ""))) in cases]
