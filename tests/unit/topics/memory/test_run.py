"""The memory rows as the hardware step reads them (topics/memory/run.py), from synthetic
chase runs placed in the session's run cache: figures, keys, units, data and the rows'
invariants, no GPU."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.results.judge import Measured
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.topics.memory import analysis, kernels, rows, run
from pytest_gpuchar.core.runner import ChainError
from pytest_gpuchar.topics.memory.chase import ChaseRun, Curve, staircase_places

ARCH = "sm_90"
FPS = [int(round(4096 * 2 ** (i / 3))) for i in range(49)]
# L1 to 192 KiB, near L2 to 20 MiB, far L2 to 40 MiB, then device memory
STEPS = [30.0 if f <= 192 * 1024 else 200.0 if f <= 20 * 2**20 else 300.0 if f <= 40 * 2**20
         else 600.0 for f in FPS]


DEV = SimpleNamespace(name="fake H100", arch=ARCH, l2_bytes=50 * 2**20,
                      l1_shared_bytes=256 * 1024, free_memory_bytes=80 * 2**30)
FUNCTIONS = {e: sass.Function(e, []) for p in kernels.suite_probes(ARCH)
             for e in p.entries.values()}


def _session(repeats: int = 7):
    """A session whose memory module is linked (empty SASS), every probe verifying to one
    LDX per op; no launches (the runs are placed in its run cache)."""
    s = SimpleNamespace(runs=RunCache(), repeats=repeats, gpu=SimpleNamespace(dev=DEV),
                        verify=lambda probe, functions: SimpleNamespace(unit={"LDX": 1.0}))
    s.runs.once(("memory", "module"), lambda: (None, FUNCTIONS))
    return s


def _run(probe, per_op: float, ops=None, reps: int = 7) -> ChaseRun:
    ops = ops or dict(probe.ops)
    cycles = {n: [int(100 + per_op * ops[n]) + (r % 2) for r in range(reps)] for n in ops}
    return ChaseRun(probe, cycles, ops, 4096, 32, sum(ops.values()) * (reps + 1), [3])


def _chase(s, level: rows.LevelRow, chain: float, loop: float) -> None:
    c = kernels.chase_probe(level.flavour, ARCH, "chain")
    lp = kernels.chase_probe(level.flavour, ARCH, "loop")
    s.runs.once(("memory", "chain", level.key), lambda: _run(c, chain))
    s.runs.once(("memory", "loop", level.key), lambda: _run(lp, loop))


def test_latency_row_gives_latency_and_loop_figures():
    s = _session()
    lv = rows.level("l1_hit")
    _chase(s, lv, 33.0, 36.0)
    m = run.latency(s, lv, ARCH)
    assert isinstance(m, Measured) and m.checks == []
    lat, loop = m.figures
    assert (lat.key, lat.unit, round(lat.value, 1)) == ("memory.latency.l1_hit", "cycles", 33.0)
    assert loop.key == "memory.loop.l1_hit" and loop.data["loop_cost_per_step"] == 3.0
    assert lat.data["footprint_bytes"] == 16 * 1024 and lat.data["distinct_lines"] == 128
    assert lat.data["tolerance"] == {"abs": 1.0, "rel": 0.05} and "slopes" in lat.data
    assert "the whole cycle walked once before the clock in every launch" in lat.method
    assert "ld.global.ca.u64 p, [p];" in lat.method and "[32, 64, 128]" in lat.method
    assert m.sass == kernels.chase_probe("ca", ARCH).snapshot_text(FUNCTIONS)


def test_latency_row_checks_the_loop_is_serialised():
    s = _session()
    lv = rows.level("l2_hit")
    _chase(s, lv, 200.0, 150.0)
    m = run.latency(s, lv, ARCH)
    assert any("not serialised" in c for c in m.checks)
    assert "first launch (the L2 keeps it)" in m.figures[0].method


def test_shared_store_is_derived_from_the_shared_load_chase():
    s = _session()
    _chase(s, rows.level("shared_load"), 23.0, 25.0)
    _chase(s, rows.level("shared_store_load"), 42.0, 44.0)
    m = run.latency(s, rows.level("shared_store_load"), ARCH)
    st = m.figures[2]
    assert (st.key, st.detail, round(st.value, 1)) == ("memory.latency.shared_store",
                                                       "derived", 19.0)
    assert st.spread is not None and st.unstable == ""


def test_device_memory_row_checks_no_line_is_revisited():
    s = _session()
    lv = rows.level("dram_cv")
    c = kernels.chase_probe("cv", ARCH, "chain")
    big = _run(c, 600.0)
    big.timed_steps = 10**9
    s.runs.once(("memory", "chain", lv.key), lambda: big)
    s.runs.once(("memory", "loop", lv.key),
                lambda: _run(kernels.chase_probe("cv", ARCH, "loop"), 610.0))
    m = run.latency(s, lv, ARCH)
    assert any("revisited" in c for c in m.checks)
    assert m.figures[0].data["tolerance"]["rel"] == 0.1


@pytest.mark.parametrize("key, reps", [("dram_cv", rows.DRAM_LAUNCHES.least),
                                       ("dram_ca", rows.DRAM_LAUNCHES.least), ("l2_hit", 7)])
def test_device_memory_rows_take_their_median_over_more_launches(key, reps, monkeypatch):
    from pytest_gpuchar.topics.memory import chase as chase_mod
    s = _session()
    asked = []

    def chase(session, probe, lay, *, repeats, warm):
        asked.append(repeats)
        return _run(probe, 600.0, reps=repeats)

    monkeypatch.setattr(chase_mod, "chase", chase)
    s.runs.once(("memory", "layout", rows.level(key).footprint.value),
                lambda: analysis.random_layout(4096, 128, 1))
    m = run.latency(s, rows.level(key), ARCH)
    assert asked == [reps, reps] and f"median of {reps} launches" in m.figures[0].method


def test_staircase_points_past_the_l1_take_more_launches(monkeypatch):
    from pytest_gpuchar.topics.memory import chase as chase_mod
    st = _session()
    geo = chase_mod.geometry_of(st)
    asked = {}

    def fake_chase(session, probe, lay, *, repeats, warm, offset=0):
        asked.setdefault(lay, []).append((repeats, warm, offset))
        return _run(probe, 100.0, reps=repeats)

    monkeypatch.setattr(chase_mod, "chase", fake_chase)
    buf = SimpleNamespace(nbytes=geo.dram_footprint()[0])
    monkeypatch.setattr(chase_mod, "buffer", lambda session: buf)
    monkeypatch.setattr(chase_mod, "stair_layout", lambda f: f)
    curve = chase_mod.staircase(st)
    assert curve.footprints == geo.sweep() == sorted(asked)
    for f, runs in asked.items():
        walked = runs[0][1] == rows.Warm.EVERY
        assert walked == (f <= 2**20)
        mixed = runs[0][1] == rows.Warm.FIRST and DEV.l2_bytes // 4 < f <= DEV.l2_bytes
        assert len(runs) == (rows.STAIRCASE_PLACES if mixed else 1)
        launches = sum(r for r, _, _ in runs)
        assert launches == chase_mod.SWEEP_LAUNCHES.least if walked else \
            launches >= rows.STAIRCASE_LAUNCHES.least
        offsets = [o for _, _, o in runs]
        assert offsets[0] == 0 and len(set(offsets)) == len(offsets)
        assert all(o % (2 << 20) == 0 and o + f <= buf.nbytes for o in offsets)


def test_staircase_places_spread_over_the_buffer():
    l2, buf = 50 * 2**20, 256 * 2**20
    assert staircase_places(8 * 2**20, l2, buf) == [0]
    assert staircase_places(l2 + 2**20, l2, buf) == [0]         # past the L2: misses
    got = staircase_places(40 * 2**20, l2, buf)
    assert got == [0, 54 << 20, 108 << 20, 162 << 20, 216 << 20]
    assert staircase_places(buf - 2**20, l2, buf) == [0]       # no room for a second place


def test_bank_row_and_its_half():
    s = _session()
    r4, r2 = rows.BankRow(32, 4), rows.BankRow(32, 2)
    p = kernels.bank_probe(r4, ARCH)
    s.runs.once(("memory", "bank", r4.name), lambda: _run(p, 8.0))
    s.runs.once(("memory", "bank", r2.name), lambda: _run(p, 6.0))
    m = run.bank_conflicts(s, r4, ARCH)
    assert m.checks == [] and m.figures[0].key == "memory.bank.u32.4way"
    assert "t*16" in m.figures[0].method and m.sass is None
    s2 = _session()
    s2.runs.once(("memory", "bank", r4.name), lambda: _run(p, 5.0))
    s2.runs.once(("memory", "bank", r2.name), lambda: _run(p, 6.5))
    assert any("cheaper than u32.2way" in c for c in run.bank_conflicts(s2, r4, ARCH).checks)


def _model(f: int) -> float:
    """The synthetic staircase's latency at any footprint (STEPS at the sweep's points)."""
    return 30.0 if f <= 192 * 1024 else 200.0 if f <= 20 * 2**20 else 300.0 \
        if f <= 40 * 2**20 else 600.0


def _staircase(s, latency, monkeypatch, model=_model):
    """The staircase in the session's run cache; a bisection point (chase.point) reads
    `model` and is logged in s.points."""
    from pytest_gpuchar.topics.memory import chase as chase_mod
    fp = FPS[:len(latency)]
    s.runs.once(("memory", "staircase"), lambda: Curve(fp, latency, [1.0] * len(fp), [0],
                                                       ["every"] * len(fp)))
    s.points = []

    def point(session, f):
        s.points.append(f)
        return chase_mod.StairPoint(f, model(f), 2.0, [0], "first")
    monkeypatch.setattr(chase_mod, "point", point)
    return fp


def test_capacities_from_the_staircase_by_bisection(monkeypatch):
    """Each knee bisected between two sweep points to 3% of the footprint, three steps each,
    every point measured once; the capacity is the largest footprint on the level."""
    s = _session()
    fp = _staircase(s, STEPS, monkeypatch)
    drawn = []
    art = lambda name, caption: drawn.append(name)       # noqa: E731 - no report directory
    l2 = run.capacity(s, rows.Capacity.L2, ARCH, art)
    assert l2.checks == [] and l2.figures[0].unit == "bytes"
    assert len(s.points) == 9 and len(set(s.points)) == 9        # 3 knees x 3 steps, once
    b = l2.figures[0].data["bisection"]
    assert b["lo"] <= 40 * 2**20 < b["hi"] and b["resolution"] <= 0.03
    assert l2.figures[0].value == b["lo"] and len(b["steps"]) == 3
    assert b["steps"][0]["spread_cycles"] == 2.0 and b["plateau_cycles"] == 300.0
    assert "at most 5% above the lower level's plateau" in l2.figures[0].method
    assert "within 3% of the footprint" in l2.figures[0].method
    assert l2.figures[0].data["tolerance"] == {"rel": 0.05}
    l1 = run.capacity(s, rows.Capacity.L1, ARCH, art)
    assert l1.checks == [] and l1.figures[0].key == "memory.capacity.l1"
    assert l1.figures[0].value <= 192 * 1024 < l1.figures[0].data["bisection"]["hi"]
    assert drawn == ["memory-staircase.png"]       # the plot is made once per session
    near_far = run.capacity(s, rows.Capacity.L2_NEAR_FAR, ARCH, art)
    far, near = near_far.figures
    assert (far.key, far.value, near.key) == ("memory.latency.l2_far", 300.0,
                                              "memory.capacity.l2_near")
    assert near.value <= 20 * 2**20 < near.data["bisection"]["hi"] and near_far.checks == []
    assert near.data["tolerance"] == {"rel": 0.05} and far.data["tolerance"]["rel"] == 0.1
    assert len(s.points) == 9 and fp == FPS


def test_the_l2_row_notes_the_drivers_l2_size(monkeypatch):
    """The driver's l2CacheSize beside the chase's figures: an info note with the ratios (the
    whole L2; the near partition against half of it)."""
    s = _session()
    _staircase(s, STEPS, monkeypatch)
    m = run.capacity(s, rows.Capacity.L2, ARCH, lambda *a: None)
    note, = m.notes
    assert (note.key, note.status.value, note.value) == ("memory.capacity.l2_driver", "info",
                                                         50.0 * 2**20)
    lo = m.figures[0].value
    assert note.data["ratio"] == round(lo / (50 * 2**20), 4) == m.figures[0].data[
        "ratio_to_driver"]
    assert 0.78 < note.data["ratio"] <= 0.8 and 0.78 < note.data["near_ratio_to_half"] <= 0.8
    assert "driver l2CacheSize 50 MiB" in note.detail and "x half of it" in note.detail
    assert "driver l2CacheSize 50 MiB: 0.7" in m.figures[0].detail


def test_an_l2_knee_past_the_drivers_size_fails_its_check(monkeypatch):
    s = _session()
    lat = [30.0 if f <= 192 * 1024 else 200.0 if f <= 20 * 2**20 else 300.0
           if f <= 60 * 2**20 else 600.0 for f in FPS]
    _staircase(s, lat, monkeypatch, lambda f: 300.0 if f <= 60 * 2**20 else 600.0)
    m = run.capacity(s, rows.Capacity.L2, ARCH, lambda *a: None)
    assert any("exceeds the driver's l2CacheSize" in c for c in m.checks)


def test_near_capacity_ends_before_a_partial_miss_point(monkeypatch):
    """A point 6% above the near-L2 level (inside plateaus()' 8% band) is off the level
    (more than 5% above it): the bisection runs below it."""
    s = _session()
    lat = [200.0 * 1.06 if 20 * 2**20 < f <= 21 * 2**20 else v for f, v in zip(FPS, STEPS)]
    fp = _staircase(s, lat, monkeypatch)
    near = run.capacity(s, rows.Capacity.L2_NEAR_FAR, ARCH, lambda *a: None).figures[1]
    below = max(f for f in fp if f <= 20 * 2**20)
    b = near.data["bisection"]
    assert below <= b["lo"] < b["hi"] <= fp[fp.index(below) + 1]
    assert f"capacity in [{analysis.human_bytes(b['lo'])}, " in near.detail


def test_near_far_not_separated_is_not_applicable(monkeypatch):
    s = _session()
    _staircase(s, [32.0] * 18 + [600.0] * 10, monkeypatch)
    with pytest.raises(NotApplicable, match="near/far L2 not separated"):
        run.capacity(s, rows.Capacity.L2_NEAR_FAR, ARCH, lambda *a: None)


def test_flat_staircase_is_a_failed_check(monkeypatch):
    s = _session()
    _staircase(s, [100.0] * 10, monkeypatch)
    m = run.capacity(s, rows.Capacity.L1, ARCH, lambda *a: None)
    assert m.figures == [] and "1 latency plateau" in m.checks[0]


def test_fill_row():
    strides = list(rows.STRIDES)
    lat = [30.0 + min(1.0, st / 32) * 220.0 for st in strides]
    s = _session()
    s.runs.once(("memory", "fill", "l1"), lambda: Curve(strides, lat, [0.0] * 6, [0],
                                                       ["l2-resident"] * 6))
    (f,) = run.fill(s, "l1", ARCH).figures
    assert (f.key, f.value, f.unit, f.unstable) == ("memory.geometry.l1_fill_bytes", 32.0,
                                                    "bytes", "")
    bad = [30.0, 250.0, 40.0, 250.0, 60.0, 250.0]
    s = _session()
    s.runs.once(("memory", "fill", "l1"), lambda: Curve(strides, bad, [0.0] * 6, [0], []))
    assert "fill model" in run.fill(s, "l1", ARCH).figures[0].unstable


def _walk_from(buf, base: int, n: int) -> tuple[int, set]:
    """Follow n pointers through the buffer from `base`: (the address reached, those seen)."""
    ptr, seen, addr = buf.data.ptr, set(), base
    for _ in range(n):
        seen.add(addr)
        addr = int(buf[(addr - ptr) // 8])
    return addr, seen


def test_a_chain_placed_at_an_offset_is_walkable_where_it_lies(fake_cupy):
    """The words a chain is uploaded to lie at its offset and point within it: walking from
    its base through the buffer visits every pointer once and comes back (the staircase's
    places; a chain written at the buffer's start but based at the offset sent the chase
    to zeroed words, an illegal address on the GPU). A chain placed again after another one
    is written from its own offsets, not the other's."""
    s, chase_mod = _chase_session(fake_cupy)
    lay = analysis.random_layout(64 * 1024, rows.LINE, 7)
    other = analysis.random_layout(32 * 1024, rows.LINE, 8)
    buf = chase_mod.buffer(s)
    for chain, offset in [(lay, 0), (lay, 2 << 20), (other, 1 << 20), (lay, 3 << 20)]:
        base = chase_mod._upload(s, chain, offset)
        assert base == buf.data.ptr + offset
        end, seen = _walk_from(buf, base, chain.n)
        assert end == base and len(seen) == chain.n
        assert all(base <= a < base + chain.footprint for a in seen)
    with pytest.raises(ChainError, match="multiple of 8"):
        chase_mod._upload(s, lay, 4)
    with pytest.raises(ChainError, match="exceeds the buffer"):
        chase_mod._upload(s, lay, buf.nbytes - lay.footprint + 8)


# --- the chases on a fake GPU (the real launch stage and Gpu, NumPy in place of CuPy) ---------

class ChaseKernel:
    """The chase kernel's model: from the pointer in `state` walk w steps untimed and n
    timed through the buffer's words, record (cycles, end pointer, SM) and leave the end in
    `state`; `mem` is the global buffer (pointers are its host addresses)."""

    def __init__(self, n, mem, log, broken=False):
        self.n, self.mem, self.log, self.broken = n, mem, log, broken

    def __call__(self, grid, block, args, shared_mem=0):
        rec, state, w, n, _init, _words = args
        assert grid == (1,) and block == (1,) and int(n) == self.n
        base = self.mem().data.ptr
        p = int(state[0])
        for _ in range(int(w) + self.n):
            p = int(self.mem()[(p - base) // 8])
        rec[:] = (40 + 30 * self.n, p + (8 if self.broken else 0), 5)
        state[0] = p
        self.log.append((self.n, int(w)))


def _chase_session(fake_cupy, broken=False):
    class Host(np.ndarray):
        def get(self):
            return np.array(self)

        @property
        def data(self):
            return SimpleNamespace(ptr=self.__array_interface__["data"][0])
    fake_cupy.Array = Host
    fake_cupy.empty = lambda shape, dtype: np.empty(shape, dtype).view(Host)
    from pytest_gpuchar.core.gpu import Gpu
    from pytest_gpuchar.core.runner import Runner
    from pytest_gpuchar.topics.memory import chase as chase_mod
    dev = SimpleNamespace(name="fake", arch=ARCH, l2_bytes=2**20, l1_shared_bytes=256 * 1024,
                          free_memory_bytes=2**30)
    gpu = Gpu(dev, None, 5.0)
    s = SimpleNamespace(runs=RunCache(), repeats=3, gpu=gpu, runner=Runner(gpu), log=[],
                        verify=lambda probe, functions: SimpleNamespace(unit={"LDG": 1.0}))
    mem = lambda: chase_mod.buffer(s)       # noqa: E731 - the buffer the chases share
    compiled = SimpleNamespace(function=lambda e: ChaseKernel(
        int(e.rsplit("_", 1)[1].lstrip("n")), mem, s.log, broken))
    s.runs.once(("memory", "module"), lambda: (compiled, FUNCTIONS))
    return s, chase_mod


def test_a_chase_continues_its_chain_launch_after_launch(fake_cupy):
    s, chase_mod = _chase_session(fake_cupy)
    probe = kernels.chase_probe("ca", ARCH, "chain")
    lay = analysis.random_layout(64 * 1024, rows.LINE, 3)
    run_ = chase_mod.chase(s, probe, lay, repeats=3, warm=rows.Warm.FIRST)
    lengths = sorted(probe.ops)
    assert [n for n, _ in s.log] == [n for n in lengths for _ in range(4)]
    assert [w for _, w in s.log] == [lay.n] + [0] * (4 * len(lengths) - 1)   # first launch
    assert run_.cycles == {n: [40 + 30 * n] * 3 for n in lengths} and run_.smids == [5]
    start = analysis.random_layout(64 * 1024, rows.LINE, 3)
    assert lay.cursor == start.walk(0, lay.n + sum(4 * probe.ops[n] for n in lengths))
    assert s.runner.launch_count == 4 * len(lengths)


def test_a_chase_that_ends_off_its_chain_gives_no_number(fake_cupy):
    s, chase_mod = _chase_session(fake_cupy, broken=True)
    probe = kernels.chase_probe("ca", ARCH, "chain")
    with pytest.raises(ChainError, match="did not visit the intended lines"):
        chase_mod.chase(s, probe, analysis.random_layout(16 * 1024, rows.LINE, 3),
                        repeats=2, warm=rows.Warm.EVERY)
