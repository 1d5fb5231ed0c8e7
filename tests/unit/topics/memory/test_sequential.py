"""The second L2-capacity method (topics/memory/sequential.py): the sweep's span on the
staircase grid, and the knee read from a forward walk's latencies by the staircase's own rule
(the bisection calls back for more points: here a step function whose knee is known)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.memory import sequential
from pytest_gpuchar.topics.memory.analysis import Geometry
from pytest_gpuchar.topics.memory.capacity import KNEE_RESOLUTION, Bisection
from pytest_gpuchar.topics.memory.chains import sequential_layout
from pytest_gpuchar.topics.memory.rows import LINE

MiB = 2 ** 20
L2 = 60 * MiB            # the H200's driver l2CacheSize


def walk(capacity: int, l2=520.0, dram=610.0):
    """A forward walk's latency: the L2 plateau up to `capacity`, device memory beyond (a
    forward walk's DRAM level is lower than a random chase's: row-buffer hits)."""
    return lambda f: l2 if f <= capacity else dram


def test_the_span_runs_from_past_the_near_partition_to_device_memory():
    grid = Geometry(l1_bytes=256 * 1024, l2_bytes=L2, free_bytes=100 * 2**30).sweep()
    fps = sequential.footprints(grid, L2)
    assert fps and min(fps) >= 0.55 * L2 and max(fps) <= 2.0 * L2
    assert sum(f < 0.9 * L2 for f in fps) >= 4 and sum(f > 1.25 * L2 for f in fps) >= 2
    assert all(f % LINE == 0 for f in fps) and fps == sorted(set(fps))
    beyond = [f for f in fps if f >= 0.9 * L2]
    assert set(beyond) <= set(grid)     # past the L2 level: the staircase's own footprints


def test_one_point_read_low_does_not_set_the_l2_level():
    """A board's walk read one L2-level point 6.6% low: with two points on the level it set
    the limit under the L2's latency and the knee fell to the grid point below the L2 (41.5 MiB
    read on one night of a board that reads 57 MiB): the level is the median of its points."""
    grid = Geometry(l1_bytes=256 * 1024, l2_bytes=L2, free_bytes=100 * 2**30).sweep()
    fps = sequential.footprints(grid, L2)
    measure = walk(57 * MiB, l2=512.0, dram=640.0)
    lat = [measure(f) for f in fps]
    low = next(i for i, f in enumerate(fps) if f > 40 * MiB)
    lat[low] = 478.0
    b = sequential.knee(fps, lat, measure)
    assert isinstance(b, Bisection) and b.lo <= 57 * MiB < b.hi and b.plateau == 512.0
    # the same low point on the grid's two points alone: the level falls to it
    two = [f for f in fps if f in grid]
    old = sequential.knee(two, [478.0 if f == fps[low] else measure(f) for f in two], measure)
    assert isinstance(old, Bisection) and old.hi <= 51 * MiB


@pytest.mark.parametrize("capacity", [57 * MiB, 60 * MiB, int(58.3 * MiB)])
def test_the_knee_is_bisected_to_the_resolution_around_the_capacity(capacity):
    grid = Geometry(l1_bytes=256 * 1024, l2_bytes=L2, free_bytes=100 * 2**30).sweep()
    fps = sequential.footprints(grid, L2)
    measure = walk(capacity)
    calls = []
    b = sequential.knee(fps, [measure(f) for f in fps],
                        lambda f: calls.append(f) or measure(f))
    assert isinstance(b, Bisection)
    assert b.lo <= capacity < b.hi and b.resolution <= KNEE_RESOLUTION
    assert calls and all(f % LINE == 0 for f in calls)
    assert b.plateau == 520.0 and b.above == 610.0


def test_no_knee_when_device_memory_reads_as_the_l2():
    fps = [40 * MiB, 50 * MiB, 64 * MiB, 80 * MiB]
    why = sequential.knee(fps, [520, 521, 530, 531], walk(60 * MiB))
    assert isinstance(why, str) and "sequential sweep shows 1 latency plateau" in why
    why = sequential.knee(fps, [520, 521, 540, 541], walk(60 * MiB), rel=0.05)
    assert isinstance(why, str)


def test_the_walk_is_a_forward_single_cycle_one_pointer_a_line():
    lay = sequential_layout(1000, LINE)
    assert lay.walk(0, 1) == 1 and lay.walk(999, 1) == 0
    assert "not a random chase" in sequential.method()


def test_the_sweep_builds_the_next_walks_while_one_is_measured(monkeypatch):
    """Each walk's chain is built on a host worker ahead of its point (the next
    chase.LAYOUTS_AHEAD), and the point takes it from the run cache, ready to chase."""
    from types import SimpleNamespace

    from pytest_gpuchar.core.topic import RunCache
    from pytest_gpuchar.topics.memory import chase
    dev = SimpleNamespace(l2_bytes=2 * MiB, l1_shared_bytes=256 * 1024,
                          free_memory_bytes=2**30)
    s = SimpleNamespace(runs=RunCache(), gpu=SimpleNamespace(dev=dev))
    geo = chase.geometry_of(s)
    fps = sequential.footprints(geo.sweep(), geo.l2_bytes)
    taken = []

    def point(session, f, launches, deep, layout):
        taken.append((f, layout))
        return chase.StairPoint(f, 500.0, 1.0, [0], "first")
    monkeypatch.setattr(chase, "point", point)

    def measure(f):
        i, ahead = fps.index(f), [g for g in fps if sequential.layout_key(g) in s.runs]
        assert ahead == fps[max(i, 1):i + 1 + chase.LAYOUTS_AHEAD]   # the first made in place
        return sequential.point(s, f)
    curve = sequential.sweep(s, measure)
    assert curve.footprints == fps == [f for f, _ in taken]
    for f, lay in taken:
        assert lay.n == f // LINE and lay._pos is not None
        assert lay._words is not None and lay._bytes is not None
        assert sequential.layout_key(f) not in s.runs       # taken, not kept
