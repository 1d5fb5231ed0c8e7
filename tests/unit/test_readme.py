"""The README is true: its first commands run as it says (the install line's extras exist and
are CI's, the main job collects the characterisation suite only, the test command is CI's),
its options table is `pytest --help`'s, its markers, fixtures, environment variables, tox
envs, archs and layout are the code's, and the exit codes it and docs/nightly.md give are the
commands' constants."""
from __future__ import annotations

import configparser
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:        # Python 3.10
    tomllib = pytest.importorskip("tomli", reason="Python 3.10 reads pyproject with tomli")

import pytest_gpuchar
from pytest_gpuchar import fixtures, plugin
from pytest_gpuchar.core import archs
from pytest_gpuchar.results import changes

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
NIGHTLY_DOC = (REPO / "docs" / "nightly.md").read_text()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]


def first_block() -> list[tuple[str, str]]:
    """(command, comment) of each line of the README's first code block."""
    block = README.split("```", 2)[1]
    out = []
    for line in block.strip().splitlines():
        cmd, _, comment = line.partition("#")
        out.append((cmd.strip(), comment.strip()))
    return out


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def pytest_out(*args: str, timeout: float = 300) -> str:
    proc = subprocess.run([sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider"],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


# --- the first lines: install, main job, tests -------------------------------------------

def test_the_first_lines_are_install_main_job_and_tests():
    (install, c1), (main, c2), (tests, c3) = first_block()
    assert c1.startswith("set-up") and c2.startswith("main job") and c3.startswith("tests")
    assert shlex.split(install)[:3] == ["pip", "install", "-e"]
    assert shlex.split(main)[0] == "pytest" and shlex.split(tests) == ["pytest", "-n", "auto"]


def test_the_install_line_is_cis_and_its_extras_exist():
    install = first_block()[0][0]
    extras = re.search(r'\.\[([\w,]+)\]', install).group(1).split(",")
    assert set(extras) <= set(EXTRAS)
    ci = (REPO / ".ci" / "run").read_text()
    assert f'pip install -e ".[{",".join(extras)}]"' in ci, "CI installs what the README says"
    assert "test" in extras        # pytest-xdist: without it the xdist tests skip


def test_every_extra_the_docs_name_exists():
    text = README + NIGHTLY_DOC + (REPO / "tox.ini").read_text()
    named = set()
    for group in re.findall(r'(?:\.|pytest-gpuchar)\[([\w,]+)\]', text):
        named |= set(group.split(","))
    assert named and named <= set(EXTRAS), named - set(EXTRAS)
    assert re.search(r"extras = static,legacy\b", (REPO / "tox.ini").read_text())


def test_the_main_job_collects_the_characterisation_suite_only():
    """`pytest tests/characterisation --gpu-arch=sm_80`, as the README writes it, collects
    the suite of sm_80 and none of the project's own unit tests (those are the test
    command's: `pytest -n auto`, over pyproject's testpaths, as CI runs it)."""
    args = shlex.split(first_block()[1][0])[1:]
    ids = [ln for ln in pytest_out(*args, "--collect-only", "-q").splitlines()
           if "::" in ln]
    assert ids and all(i.startswith("tests/characterisation/") for i in ids)
    assert any("[sm_80" in i for i in ids)
    assert PYPROJECT["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(rf"^{re.escape(first_block()[2][0])} \|\| rc=\$\?$", ci, re.M)


def test_python_version():
    assert "Python 3.10 or newer" in README
    assert PYPROJECT["project"]["requires-python"] == ">=3.10"


# --- options, markers, fixtures, environment ----------------------------------------------

def readme_options() -> dict[str, str]:
    """option -> its table row, from the README's options table."""
    rows = [ln for ln in section("Options, markers, environment").splitlines()
            if ln.startswith("| `--")]
    return {re.match(r"\| `(--[\w-]+)", r).group(1): r for r in rows}


def test_the_options_table_is_pytest_help():
    """Every gpuchar option of `pytest --help` is in the table and every row is an option;
    the defaults and ini keys it states are the plugin's."""
    helptext = pytest_out("--help")
    group = helptext.split("GPU instruction-level characterisation:", 1)[1].split("\n\n", 1)[0]
    options = set(re.findall(r"^  (--[\w-]+)", group, re.M))
    table = readme_options()
    assert set(table) == options
    for opt, row in table.items():
        for default in re.findall(r"\(default (\d+)\)", row):
            text = " ".join(helptext.split(opt, 1)[1].split("--", 1)[0].split())
            assert f"(default {default})" in text, (opt, default)
        for ini in re.findall(r"\(`(\w+)`\)", row):
            assert re.search(rf"^  {ini} \(", helptext, re.M), ini
    for opt in ("--gpuchar-distribute", "--gpuchar-accept-level"):
        choices = re.search(rf"{opt}=\{{([\w,]+)\}}", helptext).group(1).split(",")
        assert set(re.search(r"`[^`]*=([\w\\|]+)`", table[opt]).group(1).replace(
            "\\", "").split("|")) == set(choices)


def test_markers_are_the_plugins():
    text = section("Options, markers, environment")
    para = text[text.index("Markers (`pytest --markers`)"):].split("\n\n", 1)[0]
    named = set(re.findall(r"`(\w+(?:\(name\))?)`\s+\(", para)) | set(
        re.findall(r"`(\w+)`,", para))
    assert named == set(plugin.MARKERS), named ^ set(plugin.MARKERS)


def test_the_fixtures_named_exist():
    text = section("Options, markers, environment")
    para = text[text.index("Fixtures for test modules"):]
    named = set(re.findall(r"`(\w+)(?:\([^`]*\))?`", para))
    for name in ("arch", "gpuchar", "gpu", "offline_tools", "expected", "static_check",
                 "hardware_row", "record", "sass_snapshot", "gpuchar_artifact"):
        assert name in named, name
        if name != "arch":        # arch: parametrised by the plugin (pytest_generate_tests)
            obj = getattr(fixtures, name)
            assert type(obj).__name__ == "FixtureFunctionDefinition" or hasattr(
                obj, "_pytestfixturefunction"), name


def test_the_environment_variables_named_are_read():
    source = "\n".join(p.read_text() for p in Path(pytest_gpuchar.__file__).parent.rglob("*.py"))
    for var in set(re.findall(r"\b(GPUCHAR_[A-Z_]+)\b", README)):
        assert f'"{var}"' in source, var


def test_the_expectations_cli_default_is_as_written(tmp_path, monkeypatch):
    """--root, else $GPUCHAR_EXPECTATIONS, else ./expectations, else the package's own."""
    from pytest_gpuchar.results.expectations import PACKAGE_ROOT, default_root
    assert "`$GPUCHAR_EXPECTATIONS`, else `./expectations` when the" in README
    assert "beside the package source" in README
    monkeypatch.delenv("GPUCHAR_EXPECTATIONS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_root() == PACKAGE_ROOT
    (tmp_path / "expectations").mkdir()
    assert default_root() == tmp_path / "expectations"
    monkeypatch.setenv("GPUCHAR_EXPECTATIONS", str(tmp_path / "elsewhere"))
    assert default_root() == tmp_path / "elsewhere"


def test_the_static_archs_are_the_expectation_files():
    para = section("What the main job does")
    listed = re.search(r"\(`expectations/sm_\*\.yaml`\): (.*?) \(wgmma", para, re.S).group(1)
    numbers = re.findall(r"(?:sm_)?(\d+)", listed)
    have = {p.stem for p in (REPO / "expectations").glob("sm_*.yaml")}
    assert [f"sm_{n}" for n in numbers] == [a for a in archs.STATIC_ARCHS if a in have]


def test_tox_lines_are_tox_ini():
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(REPO / "tox.ini")
    block = section("tox").split("```")[1]
    for line in block.strip().splitlines():
        env, _, comment = line.partition("#")
        name = env.split()[-1]
        commands = ini[f"testenv:{name}"]["commands"]
        for marks in re.findall(r'-m ("[^"]+"|\w+)', comment):
            assert f"-m {marks}" in commands, (name, marks)
        for tool in ("gpuchar-nightly",):
            assert (tool in comment) == (tool in commands), name


def test_the_layout_names_existing_modules():
    block = section("Layout").split("```")[1]
    package = "\n".join(line for line in block.splitlines() if not line.startswith("tools/"))
    names = set(re.findall(r"\b(\w+\.py)\b", package))
    have = {p.name for p in Path(pytest_gpuchar.__file__).parent.rglob("*.py")}
    assert names and names <= have, names - have
    tools = re.findall(r"^(tools/\S+)", block, re.M)
    assert tools and all((REPO / t).exists() for t in tools), tools
    topics = {p.name for p in (Path(pytest_gpuchar.__file__).parent / "topics").iterdir()
              if p.is_dir() and not p.name.startswith("_")}
    assert set(re.findall(r"(\w+)/", block.split("topics/", 1)[1].split("\n", 2)[1])) == topics


# --- exit codes ---------------------------------------------------------------------------

def test_the_nightly_exit_codes_are_the_commands():
    rows = re.findall(r"^\| (\d) \| \*\*([^*]+)\*\*", NIGHTLY_DOC, re.M)
    assert {int(c): t for c, t in rows} == changes.EXIT_TEXT
    assert changes.EXIT_MEASURED_NOTHING == 4 and changes.EXIT_TEXT[4] == "measured nothing"
    assert "3 broken, 4 measured nothing" in (REPO / "tox.ini").read_text()
    from pytest_gpuchar.cli import nightly
    for code, text in changes.EXIT_TEXT.items():
        assert re.search(rf"^  {code}  {text.split()[0]}", nightly.__doc__, re.M), code


def test_the_usage_error_exit_code_is_pytests():
    assert "usage error (exit code 4)" in README
    assert int(pytest.ExitCode.USAGE_ERROR) == 4


def test_the_fault_table_gives_the_commands_exit_codes():
    table = section("When a check cannot run")
    assert f"nightly {changes.EXIT_MEASURED_NOTHING} |" in table
    assert f"nightly {changes.EXIT_BROKEN} |" in table
    assert "gpuchar-nightly --static-only" in table
