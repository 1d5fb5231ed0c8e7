"""The topics' launch counts are bounds the core applies to --gpuchar-repeats
(core.runner.Bounds), never a repeats constant or clamp of a topic's own: each gives, for
every number asked, the launches its topic made when it wrote the clamp itself; and the option
reaches the context the topics read it from."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import pytest_gpuchar
from pytest_gpuchar.core.runner import Bounds
from pytest_gpuchar.topics.bsp import run as bsp_run
from pytest_gpuchar.topics.memory import chase as memory_chase
from pytest_gpuchar.topics.memory import rows as memory_rows
from pytest_gpuchar.topics.movement import layouts
from pytest_gpuchar.topics.movement import rows as movement_rows
from pytest_gpuchar.topics.tensor.mma import run as mma_run

# bound -> what the topic's own code gave for `asked` launches before the bounds moved here
AT_LEAST = {
    "movement.TMA_DRAM_LAUNCHES": (movement_rows.TMA_DRAM_LAUNCHES, 60),
    "movement.DRAM_STREAM_LAUNCHES": (movement_rows.DRAM_STREAM_LAUNCHES, 28),
    "movement.LOADED_LAUNCHES": (movement_rows.LOADED_LAUNCHES, 60),
    "movement.CLUSTER_LAUNCHES": (movement_rows.CLUSTER_LAUNCHES, 25),
    "movement.CP_ASYNC_CG_LAUNCHES": (movement_rows.CP_ASYNC_CG_LAUNCHES, 25),
    "memory.DRAM_LAUNCHES": (memory_rows.DRAM_LAUNCHES, 60),
    "bsp.SHORT_LAUNCHES": (bsp_run.SHORT_LAUNCHES, 25),
    "tensor.mma.SWEEP_LAUNCHES": (mma_run.SWEEP_LAUNCHES, 15),
}
FIXED = {           # launch counts the sweeps fix whatever is asked (tens of points each)
    "memory.STAIRCASE_LAUNCHES": (memory_rows.STAIRCASE_LAUNCHES, 25),
    "memory.SWEEP_LAUNCHES": (memory_chase.SWEEP_LAUNCHES, 3),
}
ASKED = [1, 2, 3, 7, 15, 24, 25, 26, 28, 59, 60, 61, 100]


@pytest.mark.parametrize("name", sorted(AT_LEAST))
@pytest.mark.parametrize("asked", ASKED)
def test_a_least_bound_is_max_of_asked_and_its_minimum(name, asked):
    bound, least = AT_LEAST[name]
    assert isinstance(bound, Bounds)
    assert bound.of(asked) == max(asked, least)


@pytest.mark.parametrize("name", sorted(FIXED))
@pytest.mark.parametrize("asked", ASKED)
def test_a_fixed_bound_is_its_count_whatever_is_asked(name, asked):
    bound, n = FIXED[name]
    assert bound.of(asked) == n


@pytest.mark.parametrize("asked", ASKED)
def test_fresh_launches_are_the_bound_within_the_buffer(asked):
    """A fresh-block chain (TMA, the loaded chase) takes its bound's launches where the
    buffer holds them, as its topic's clamp did: max(asked, min(want, what fits))."""
    for capacity in (10_000, 200_000, 10_000_000):
        reps, _ = layouts.fresh_launches(asked, movement_rows.TMA_DRAM_LAUNCHES, capacity, 640)
        fit = (capacity - layouts.FRESH_SPARE) // 640 - 1
        assert reps == max(asked, min(60, fit))


def test_no_topic_writes_a_repeats_constant_or_clamp():
    """issue 43's done-when: the launch policy is the core's."""
    topics = Path(pytest_gpuchar.__file__).parent / "topics"
    bad = []
    for path in sorted(topics.rglob("*.py")):
        for k, line in enumerate(path.read_text().splitlines(), 1):
            clamp = re.search(r"\b(max|min)\([^)]*\b\d+\b", line) and "repeats" in line
            if re.search(r"REPEATS\s*=", line) or clamp:
                bad.append(f"{path.relative_to(topics)}:{k}: {line.strip()}")
    assert bad == []


def test_the_option_reaches_the_context(pytester):
    """--gpuchar-repeats is what a topic's run reads as ctx.repeats (the session)."""
    pytester.makepyfile(test_x="""
        def test_repeats(gpuchar):
            assert gpuchar.repeats == 11
    """)
    pytester.runpytest("--gpuchar-repeats=11", "-p", "no:cacheprovider").assert_outcomes(
        passed=1)
    bad = pytester.runpytest("--gpuchar-repeats=0", "-p", "no:cacheprovider")
    assert bad.ret != 0
    bad.stderr.fnmatch_lines(["*--gpuchar-repeats*1 or more*"])
