"""Parsed files on disk (results/parsed_cache.py): a new process reads the expectation files an
earlier one parsed; an edited file, a damaged entry or a file with an error is parsed again;
nothing is kept where no directory is named; a pytest session keeps them in pytest's cache;
the report templates' bytecode is Jinja's own cache in the same directory."""
from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys

import pytest

from pytest_gpuchar.results import expectations as E
from pytest_gpuchar.results import parsed_cache, schema

from .test_expectations import GOOD, write

LOAD = r"""
import json, sys
from pytest_gpuchar.results import expectations as E
a = E.load_file(sys.argv[1])
print(json.dumps(sorted(a.characteristics)))
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache directory for this test and a process that has parsed nothing."""
    d = tmp_path / "parsed"
    monkeypatch.setenv(parsed_cache.ENV, str(d))
    monkeypatch.setattr(schema, "_PARSED", {})
    return d


def _load_in_a_new_process(path) -> list[str]:
    p = subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True,
                       text=True, timeout=120, check=True)
    return json.loads(p.stdout)


def test_a_new_process_reads_what_an_earlier_one_parsed(tmp_path, cache):
    path = write(tmp_path, GOOD)
    keys = _load_in_a_new_process(path)
    [entry] = cache.glob("expectations/*.pickle")
    # what is on disk is what the next process gets: a changed entry is read as it is
    stored = pickle.loads(entry.read_bytes())
    assert sorted(stored.characteristics) == keys
    stored.characteristics.pop("cache.l2")
    entry.write_bytes(pickle.dumps(stored))
    assert "cache.l2" not in E.load_file(path).characteristics


def test_an_edited_file_is_parsed_again(tmp_path, cache):
    path = write(tmp_path, GOOD)
    assert "cache.l2" in E.load_file(path).characteristics
    path.write_text(GOOD.replace("cache.l2:", "cache.l2x:"))
    schema._PARSED.clear()
    a = E.load_file(path)
    assert "cache.l2x" in a.characteristics and "cache.l2" not in a.characteristics
    assert len(list(cache.glob("expectations/*.pickle"))) == 2


@pytest.mark.parametrize("damage", [b"", b"not a pickle", pickle.dumps({"a": 1})])
def test_a_damaged_entry_is_parsed_again_and_stored_anew(tmp_path, cache, damage):
    path = write(tmp_path, GOOD)
    first = E.load_file(path)
    [entry] = cache.glob("expectations/*.pickle")
    entry.write_bytes(damage)
    schema._PARSED.clear()
    assert E.load_file(path) == first
    assert pickle.loads(entry.read_bytes()) == first


def test_a_file_with_an_error_is_never_stored(tmp_path, cache):
    path = write(tmp_path, GOOD.replace("unit: cycles/op", "unit: parsecs", 1))
    for _ in range(2):
        with pytest.raises(E.ExpectationError, match="unit"):
            E.load_file(path)
    assert not cache.exists() or not list(cache.glob("expectations/*.pickle"))


def test_a_changed_parser_does_not_read_old_entries(tmp_path, cache, monkeypatch):
    path = write(tmp_path, GOOD)
    E.load_file(path)
    schema._PARSED.clear()
    monkeypatch.setattr(parsed_cache, "parser_fingerprint", lambda: "another parser")
    E.load_file(path)
    assert len(list(cache.glob("expectations/*.pickle"))) == 2


@pytest.mark.parametrize("value", ["0", ""])
def test_nothing_is_kept_when_turned_off(tmp_path, monkeypatch, value):
    monkeypatch.setenv(parsed_cache.ENV, value)
    monkeypatch.setattr(schema, "_PARSED", {})
    previous = parsed_cache.use(tmp_path / "session")
    try:
        E.load_file(write(tmp_path, GOOD))
    finally:
        parsed_cache.use(previous)
    assert not (tmp_path / "session").exists()


def test_the_oldest_entries_go_past_the_limit(tmp_path, cache, monkeypatch):
    monkeypatch.setattr(parsed_cache, "KEEP", 2)
    monkeypatch.setattr(parsed_cache, "PRUNE_AT", 3)
    for i in range(4):
        E.load_file(write(tmp_path, GOOD.replace("Ampere paper", f"Ampere paper {i}")))
    assert len(list(cache.glob("expectations/*.pickle"))) == 2


def test_a_pytest_session_keeps_them_in_pytests_cache(pytester, monkeypatch):
    monkeypatch.delenv(parsed_cache.ENV)
    monkeypatch.setattr(schema, "_PARSED", {})
    outer = parsed_cache.directory()                # this session's own
    pytester.makepyfile("def test_nothing():\n    pass\n")
    assert pytester.runpytest_inprocess("--gpu-arch=sm_80").ret == 0
    kept = list((pytester.path / ".pytest_cache" / "d" / "gpuchar-parsed").glob("*/*"))
    assert kept and {p.suffix for p in kept} == {".pickle"}
    assert parsed_cache.directory() == outer        # the inner session gave it back
    schema._PARSED.clear()
    assert pytester.runpytest_inprocess("--gpu-arch=sm_80", "-p", "no:cacheprovider").ret == 0
    assert parsed_cache.directory() == outer
    assert pytester.runpytest_inprocess("--markers").ret == 0     # configured, no session
    assert parsed_cache.directory() == outer


def test_entries_are_whole_expectations():
    """What is pickled is what a parse gives: the dataclasses of the real files round-trip."""
    for f in E.Store().files()[:5]:
        a = schema.parse(f.read_text(), f)
        b = pickle.loads(pickle.dumps(a))
        assert b == a and dataclasses.asdict(b) == dataclasses.asdict(a)


def test_the_fingerprint_covers_the_parsers_own_imports():
    """Every module of the package that schema.py or literature.py imports is part of the
    parser's fingerprint (a change in it makes every stored entry old)."""
    import ast
    root = parsed_cache._PACKAGE
    needed = set()
    for source in ("results/schema.py", "results/literature.py"):
        for node in ast.walk(ast.parse((root / source).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = (root / source).parent
                for _ in range(node.level - 1):
                    base = base.parent
                parts = node.module.split(".") if node.module else []
                for target in [base.joinpath(*parts, a.name) for a in node.names] + \
                        ([base.joinpath(*parts)] if parts else []):
                    if target.with_suffix(".py").is_file():
                        needed.add(str(target.with_suffix(".py").relative_to(root)))
    needed.discard("results/parsed_cache.py")       # the store itself
    assert {"core/archs.py", "core/topic.py", "results/literature.py"} <= needed
    assert needed <= set(parsed_cache.PARSER_SOURCES), needed


def test_report_templates_render_the_same_from_jinjas_bytecode(cache):
    """The report page of a committed run, with the templates compiled and with them read
    back from the bytecode a first process stored: the same page."""
    from pytest_gpuchar.results import html
    from pytest_gpuchar.results.files import read_report
    from pytest_gpuchar.results.html import env

    from .test_html import H100
    doc = read_report(H100)
    pages = []
    for _ in range(2):
        env.environment.cache_clear()           # a new process's environment
        pages.append(html.report_html(doc))
        assert env.environment().bytecode_cache is not None
    env.environment.cache_clear()
    assert pages[0] == pages[1]
    assert {p.suffix for p in (cache / "templates").iterdir()} == {".cache"}
