"""The expectation files' YAML nodes built into Python values (results/schema._construct): the
direct build of plain maps, lists, strings and numbers gives what PyYAML's safe constructor
gives, on every committed file and on the YAML forms it hands back to PyYAML."""
from __future__ import annotations

import datetime
from pathlib import Path

import pytest
import yaml

from pytest_gpuchar.results import schema

ROOT = Path(__file__).resolve().parents[3]
FILES = sorted(p.relative_to(ROOT) for p in (ROOT / "expectations").rglob("*.yaml"))


def _pyyaml(node):
    return yaml.constructor.SafeConstructor().construct_object(node, deep=True)


@pytest.mark.parametrize("rel", FILES, ids=str)
def test_committed_file_builds_as_pyyaml_does(rel):
    root = yaml.compose((ROOT / rel).read_text(), Loader=schema.YAML_LOADER)
    assert schema._construct(root) == _pyyaml(root)


@pytest.mark.parametrize("text, value", [
    ("a: &m one\nb: *m\n", {"a": "one", "b": "one"}),                  # alias
    ("base: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n", {"base": {"x": 1}, "c": {"x": 1, "y": 2}}),
    ("d: 2026-12-02\n", {"d": datetime.date(2026, 12, 2)}),            # timestamp
    ("n: ~\nt: true\nf: 1.5e+3\ni: 0x10\ns: '7'\n",
     {"n": None, "t": True, "f": 1500.0, "i": 16, "s": "7"}),
    ("? [1, 2]\n: pair\n", None),                                      # unhashable key
])
def test_yaml_forms(text, value):
    root = yaml.compose(text, Loader=schema.YAML_LOADER)
    if value is None:
        with pytest.raises(yaml.constructor.ConstructorError):
            _pyyaml(root)
        with pytest.raises(yaml.constructor.ConstructorError):
            schema._construct(root)
        return
    assert schema._construct(root) == _pyyaml(root) == value
