"""Which topic's code a name means: the topics are core.topic.TOPICS (the one list, which the
expectation files are laid out by too, and core.topic.register adds to); each is the package
pytest_gpuchar.topics.<name> (or the package it was registered with), whose
``groups(arch)`` gives the modules it compiles (core.topic.Topic), as pytest-xdist maps a
--dist name to its scheduler.

A characterisation test module names its topic with ``pytestmark = pytest.mark.topic(name)``;
the compile scheduling (pytest_gpuchar/schedule.py) asks this registry for the groups of the
topics the selected tests need (offline ptxas batches for static tests, driver-JIT prefetch for
hardware tests).
"""
from __future__ import annotations

import importlib
from typing import NamedTuple

import pytest

from ..core.build import Group
from ..core.topic import TOPICS, Topic, TopicInfo


class UnknownTopic(KeyError):
    pass


def topic(name: str) -> TopicInfo:
    try:
        return TOPICS[name]
    except KeyError:
        raise UnknownTopic(f"unknown topic {name!r}; known: {', '.join(TOPICS)}") from None


def code(name: str) -> Topic:
    """The topic's package (its groups)."""
    return importlib.import_module(topic(name).module)


def topic_of(item) -> str | None:
    """The topic a collected test belongs to (its module's topic marker), or None."""
    m = item.get_closest_marker("topic")
    return m.args[0] if m and m.args else None


class Facts(NamedTuple):
    """What the compile scheduling reads of a collected test."""
    topic: str | None
    arch: str | None
    static: bool
    hardware: bool


FACTS = pytest.StashKey[Facts]()


def facts(item) -> Facts:
    """A collected test's topic, arch parameter and kind (static, hardware markers), read once
    per test: the compile scheduling asks them of every collected test once per arch and kind
    a pytest-xdist worker receives (about 15,000 tests, a few hundred thousand marker
    lookups a worker in this repository's own test run)."""
    stash = getattr(item, "stash", None)
    if stash is not None and FACTS in stash:
        return stash[FACTS]
    spec = getattr(item, "callspec", None)
    f = Facts(topic_of(item), spec.params.get("arch") if spec else None,
              item.get_closest_marker("static") is not None,
              item.get_closest_marker("hardware") is not None)
    if stash is not None:
        stash[FACTS] = f
    return f


def run_order(items, archs: list[str], marker: str = "static") -> list[tuple[str, str]]:
    """(topic, arch) of the tests carrying `marker` (static, hardware) among `items` in the
    order the run reaches them, so background compiles can be queued in that order: a
    module's tests run arch after arch, and queued arch by arch the first module's last arch
    was compiled last (its tests waited for every other part); the hardware tests' driver-JIT
    links queued in registry order put the first test's topic (bsp) last (it waited for
    every other module's link)."""
    order: dict[tuple[str, str], None] = {}
    for item in items:
        f = facts(item)
        if f.topic and f.arch in archs and getattr(f, marker):
            order.setdefault((f.topic, f.arch), None)
    return list(order)


def groups(names: set[str], arch: str) -> list[Group]:
    """Every group of these topics for `arch` (in registry order)."""
    return [g for t in TOPICS.values() if t.name in names for g in code(t.name).groups(arch)]


def host_ahead(order: list[str], session, arch: str) -> list[tuple]:
    """The host work made ahead (core.topic.Topic.host_ahead) of these topics, in this
    order."""
    return [job for name in order
            for ahead in [getattr(code(name), "host_ahead", None)] if ahead
            for job in ahead(session, arch)]
