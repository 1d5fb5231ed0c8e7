"""core.topic.linked / built: a topic's groups linked once per session, each probe linked and
verified once, an invalid probe raising every time it is asked for."""
from __future__ import annotations

import types

import pytest

from pytest_gpuchar.core import topic
from pytest_gpuchar.core.probe import Probe
from pytest_gpuchar.core.topic import RunCache
from pytest_gpuchar.core.verify import ProbeInvalid


class Builds:
    """The JIT stage's two calls, counted (the driver's JIT itself needs a GPU)."""

    def __init__(self):
        self.groups, self.jits = [], []

    def jit_groups(self, dev, groups):
        self.groups.append(list(groups))
        return {}

    def jit(self, probe, dev):
        self.jits.append(probe.name)
        return types.SimpleNamespace(probe=probe, functions={"f": probe.name})


def _ctx(valid=lambda p: True):
    alive = []
    dev = types.SimpleNamespace(arch="sm_90", driver="580")
    gpu = types.SimpleNamespace(dev=dev, ensure_alive=alive.append)

    def verify(p, functions):
        if not valid(p):
            raise ProbeInvalid(f"probe invalid: {p.name}")
        return ("verdict", functions["f"])
    return types.SimpleNamespace(gpu=gpu, builds=Builds(), runs=RunCache(), verify=verify,
                                 alive=alive)


def _probe(name, text="\n// k"):
    return Probe(name, "sm_90", text, {1: "k"}, {1: 1})


def groups(arch):
    return [f"module of {arch}"]


def test_groups_are_linked_once_and_each_probe_built_once():
    ctx = _ctx()
    a, b = _probe("t/a"), _probe("t/b", "\n// other")
    first = topic.built(ctx, a, groups)
    assert topic.built(ctx, a, groups) is first and first[1] == ("verdict", "t/a")
    topic.built(ctx, b, groups)
    assert ctx.builds.groups == [["module of sm_90"]] and ctx.builds.jits == ["t/a", "t/b"]
    assert ctx.alive.count("t/a") >= 2          # the GPU is checked on every ask


def test_an_invalid_probe_raises_every_time():
    ctx = _ctx(valid=lambda p: False)
    p = _probe("t/bad")
    for _ in range(2):
        with pytest.raises(ProbeInvalid, match="t/bad"):
            topic.built(ctx, p)
    assert ctx.builds.jits == ["t/bad", "t/bad"] and ctx.builds.groups == []


def test_a_value_made_ahead_is_taken_by_once_and_made_once():
    import threading
    runs, made, go = RunCache(), [], threading.Event()

    def make():
        go.wait(5)
        made.append(1)
        return "layout"
    runs.ahead(("k",), make)
    runs.ahead(("k",), make)                     # already started: nothing more
    assert ("k",) in runs
    go.set()
    assert runs.once(("k",), lambda: "not this") == "layout" and made == [1]
    assert runs.once(("k",), lambda: "not this") == "layout"


def test_an_error_made_ahead_is_raised_by_once_then_made_again():
    runs = RunCache()
    runs.ahead(("k",), lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        runs.once(("k",), lambda: "now")
    assert runs.once(("k",), lambda: "now") == "now"


def test_take_hands_a_value_over_once():
    runs = RunCache()
    runs.ahead(("k",), lambda: [1])
    assert runs.take(("k",), lambda: [2]) == [1] and ("k",) not in runs
    assert runs.take(("k",), lambda: [2]) == [2] and ("k",) not in runs
