"""The movement topic's hardware paths (cluster.py, transfer.py, bandwidth.py, l2.py) end to
end on a simulated GPU: every launch is answered by a model of its kernel that writes the
records the real kernel writes (walking the same chains in the same buffers), so the launch
batches, record layouts, end-state checks, fits, keys and skips are exercised without a GPU.
The driver calls go through the real bindings, the calls that need libcuda answered by a
stand-in."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_gpuchar.core.build import Built
from pytest_gpuchar.core.gpu import Gpu
from pytest_gpuchar.core.runner import Bounds, Runner
from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.core.verify import Verdict
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.core import driver as drv
from pytest_gpuchar.topics.movement import bandwidth, rows, run, transfer
from pytest_gpuchar.topics.movement.layouts import TENSOR2D_WIDTH
from pytest_gpuchar.topics.movement.rows import DSM_STREAM, STREAMS, TMA_STAGE, Level, Mechanism
from pytest_gpuchar.topics.movement import state as st
from pytest_gpuchar.core.runner import ChainError
from pytest_gpuchar.topics.movement.state import passes

ARCH = "sm_90"
SMS = 8
TMA_LAT = {Mechanism.PLAIN: 600, Mechanism.BULK: 700, Mechanism.TENSOR1D: 720,
           Mechanism.TENSOR2D: 740}
RATE = {"shared_u32": 120.0, "shared_u64": 124.0, "shared_u128": 126.0, "l1": 100.0,
        "l2": 60.0, "dram_read": 12.0, "dram_write": 11.0, "dram_copy": 10.0,
        "cp_async_cg": 50.0, "dsm": 30.0}


class DevArray(np.ndarray):
    """A NumPy stand-in for a CuPy array (get() copies to the host; its device address is
    its host address)."""

    def get(self):
        return np.array(self)

    @property
    def data(self):
        return SimpleNamespace(ptr=self.__array_interface__["data"][0])


def dev_array(values) -> DevArray:
    return np.asarray(values).view(DevArray)


class OccupancyLib:
    """The driver bindings (cuda.bindings.driver, whose structs need no driver) with the calls
    that need libcuda answered here: up to 8 CTAs per cluster, SMS // size clusters at once."""

    def __init__(self) -> None:
        self.api = pytest.importorskip("cuda.bindings.driver")
        ok = self.api.CUresult.CUDA_SUCCESS
        self.cuLaunchKernelEx = self.cuFuncSetAttribute = lambda *a: (ok,)
        self.cuTensorMapEncodeTiled = lambda *a: (ok, self.api.CUtensorMap())

    def __getattr__(self, name):
        return getattr(self.api, name)

    def cuOccupancyMaxActiveClusters(self, fn, cfg):
        size = cfg.attrs[0].value.clusterDim.x
        return self.api.CUresult.CUDA_SUCCESS, 0 if size > 8 else SMS // size


class Sim(drv.ClusterLauncher):
    """The cluster launcher of a simulated GPU: the real attribute and occupancy calls on a
    stand-in libcuda, and each launch answered by a model of its kernel on NumPy buffers."""

    def __init__(self, gpu, runner_of) -> None:
        super().__init__(gpu, drv.Driver(OccupancyLib()))
        self.runner_of = runner_of
        self.launches = 0

    def launch(self, fn, grid, block, args, *, name, cluster=None, shared_mem=0):
        self.gpu.ensure_alive(name)
        self.prepare(fn, name, shared_mem, cluster)
        self.launches += 1
        kind = fn.probe.name.split("/")[1]
        MODELS[kind](self, fn, grid[0], block[0], args)

    def owner(self, addr: int):
        for buf in self.runner_of()._buffers.values():
            base = buf.data.ptr
            if base <= addr < base + buf.nbytes:
                return buf, base
        raise AssertionError(f"address {addr:#x} is in no buffer")

    def sm(self, cta: int) -> int:
        return (cta * 3 + self.launches) % SMS


class Compiled:
    """A probe's module: each kernel a handle naming the probe and its length."""

    def __init__(self, probe) -> None:
        self.probe = probe
        self.length = {e: n for n, e in probe.entries.items()}

    def function(self, entry):
        return SimpleNamespace(probe=self.probe, n=self.length[entry],
                               ptr=hash((self.probe.name, entry)) & 0xFFFFFFFF)


class Builds:
    def jit(self, probe, dev):
        return Built(probe, {}, compiled=Compiled(probe))


# --- kernel models -------------------------------------------------------------------------------

def _walk_words(words, start: int, steps: int) -> int:
    p = int(start)
    for _ in range(steps):
        p = int(words[p // 4])
    return p


def model_dsm(s: Sim, fn, c, block, args):
    out, nxt, passes = args
    rec = out.reshape(c, int(passes), 4)
    n = fn.n
    for cta in range(c):
        for p in range(int(passes)):
            off = p % c
            q = 0
            for _ in range(n):
                q = int(nxt[q])
            rec[cta, p] = (400 + n * (30 if off == 0 else 190 + 5 * off),
                           q * 128 | ((cta + p) % c) << 32, s.sm(cta) | cta << 32, 0)


def model_cluster(s: Sim, fn, c, block, args):
    name = fn.probe.name
    if name.endswith("launch"):
        return model_launch(s, fn, c, block, args)
    out, iters = args[0], (args[2] if name.endswith("mapa") else args[1])
    rec = out.reshape(c * int(iters), 2)
    rec[:, 0] = (100 + 4 * fn.n) if name.endswith("mapa") else (300 + 40 * fn.n)


def model_launch(s: Sim, fn, grid, block, args):
    rec = args[0].reshape(grid, 4)
    t = np.zeros(SMS, np.int64)
    for b in range(grid):
        sm = b % SMS
        rec[b] = (t[sm], t[sm] + 300, sm, 0)
        t[sm] += 300 + 900
    return None


def _stream_bytes(name: str, trips: int) -> tuple[float, int]:
    kind = name.split("/")[-1]
    if name.startswith("movement/tma_bw/"):
        size = int(kind[1:])
        return 40.0 * min(1.0, size / 2048), (2 + 2 * trips) * TMA_STAGE
    row = DSM_STREAM if kind == "dsm" else STREAMS[rows.Stream(kind)]
    moved = 2 if kind == "dram_copy" else 1
    return RATE[kind], moved * trips * row.unroll * row.width * 1024


def model_stream(s: Sim, fn, grid, block, args):
    out, trips = args[0], int(args[4])
    rate, moved = _stream_bytes(fn.probe.name, trips)
    rec = out.reshape(grid, 32, 6)
    warps = max(1, block // 32)
    for cta in range(grid):
        for w in range(warps):
            rec[cta, w] = (100 + w, 1100 + int(moved / rate), 0, int(500 + moved * grid / 3000),
                           s.sm(cta) << 32, 0)


def _tma_read(mech: Mechanism, words, pos: int) -> int:
    if mech in (Mechanism.PLAIN, Mechanism.BULK):
        return int(words[pos // 4]) + int(words[pos // 4 + 4])
    if mech is Mechanism.TENSOR1D:
        return int(words[pos])
    first = (pos >> 32) * TENSOR2D_WIDTH + (pos & 0xFFFFFFFF)
    return int(words[first]) | int(words[first + 1]) << 32


def model_tma(s: Sim, fn, grid, block, args):
    name = fn.probe.name.split("/")[-1]
    if name in ("multicast", "separate"):
        return model_multicast(s, fn, grid, block, args)
    mech = Mechanism(name)
    out, big, start, iters = args[:4]
    words = big.view(np.uint32)
    pos = int(start)
    for _ in range(int(iters) * fn.n):
        pos = _tma_read(mech, words, pos)
    out[:3] = (500 + fn.n * TMA_LAT[mech], pos, 0)


def model_multicast(s: Sim, fn, c, block, args):
    out, big, start, iters = args
    rec = out.reshape(c, int(iters), 4)
    words = big.view(np.uint32)
    for cta in range(c):
        pos = int(start)
        for p in range(int(iters)):
            for _ in range(fn.n):
                pos = _tma_read(Mechanism.BULK, words, pos)
            rec[cta, p] = (600 + fn.n * (900 if "multicast" in fn.probe.name else 1200), pos,
                           s.sm(cta), 0)


def model_async(s: Sim, fn, grid, block, args):
    name = fn.probe.name
    out = args[0]
    if "cp_async" in name:
        _, buf, start, iters = args      # every pass walks the same n nodes from start
        out[:3] = (200 + fn.n * 40, _walk_words(buf.view(np.uint32), int(start), fn.n), 0)
        return
    out[0] = 50 + fn.n * (12 if "fence" in name else 30)
    out[2] = 0


def model_l2(s: Sim, fn, grid, block, args):
    """Atomics see the home partition (two levels); repeated loads are served near."""
    out, table, nlines, iters = args
    atomic = fn.probe.name.endswith("atomic")
    rec = out.reshape(grid, int(iters), 3)
    for cta in range(grid):
        sm = s.sm(cta)
        for it in range(int(iters)):
            k = (cta + it) % int(nlines)
            near = (k % 2 == 0) == (sm < SMS // 2) or not atomic
            lat = (280 if near else 440) if atomic else 260
            rec[cta, it] = (100 + fn.n * lat, table[k], sm | k << 32)


def model_loaded(s: Sim, fn, grid, block, args):
    out, start, counter, stream, slice_, trips, k, wait, iters = args
    rec = out.reshape(grid, 6)
    buf, base = s.owner(int(start))
    mem = buf.view(np.uint64)
    p = int(start)
    for _ in range(int(iters) * fn.n):
        p = int(mem[(p - base) // 8])
    rec[0] = (900 + fn.n * (600 + 3 * int(k)), p, 2000, 3000, int(k), 0)
    for c in range(1, grid):
        rec[c] = (0, 0, 1000, 10_000_000, 0, s.sm(c))


MODELS = {"dsm": model_dsm, "cluster": model_cluster, "bandwidth": model_stream,
          "tma_bw": model_stream, "tma": model_tma, "async": model_async, "l2": model_l2,
          "loaded": model_loaded}


@pytest.fixture
def gpu(fake_cupy, monkeypatch):
    """A session on the simulated GPU: the real launch stage and Gpu over NumPy arrays."""
    fake_cupy.Array = DevArray
    monkeypatch.setattr(st, "sass", lambda session, probe: None)
    dev = SimpleNamespace(name="NVIDIA H100 80GB HBM3", arch=ARCH, sm_count=SMS,
                          l2_bytes=1 << 22, shared_per_sm=233472)
    g = Gpu(dev, None, 5.0)
    session = SimpleNamespace(runs=RunCache(), repeats=3, gpu=g, builds=Builds(),
                              verify=lambda probe, functions: Verdict(True, {"SIM": 1.0}))
    session.runner = Runner(g, Sim(g, lambda: session.runner))
    return session


@pytest.fixture
def artifact(tmp_path):
    return lambda name, caption: tmp_path / name


def _one(m, key):
    got = [f for f in m.figures if f.key == key]
    assert got, f"{key} not in {[f.key for f in m.figures]}"
    return got[0]


def test_dsm_rows(gpu):
    m = run.dsm_latency(gpu, rows.DsmRow(4, rows.DsmFlavour.GENERIC), ARCH)
    local = _one(m, "movement.dsm.latency.generic.c4.local")
    remote = _one(m, "movement.dsm.latency.generic.c4.remote")
    assert local.value == pytest.approx(30.0) and remote.value == pytest.approx(200.0)
    assert local.data["by_rank_offset"] == {0: 30.0, 1: 195.0, 2: 200.0, 3: 205.0}
    assert not m.checks and not local.unstable
    with pytest.raises(NotApplicable, match="reports 0 active clusters"):
        run.dsm_latency(gpu, rows.DsmRow(16, rows.DsmFlavour.U32), ARCH)
    bw = run.dsm_bandwidth(gpu, 4, ARCH)
    assert bw.figures[0].value == pytest.approx(RATE["dsm"], rel=1e-3) and not bw.checks


def test_cluster_sync_and_launch_rows(gpu):
    assert run.sync(gpu, rows.SyncRow(rows.Sync.MAPA), ARCH).figures[0].value == \
        pytest.approx(4.0)
    b = run.sync(gpu, rows.SyncRow(rows.Sync.BARRIER, 8), ARCH).figures[0]
    assert b.key == "movement.cluster.barrier.c8" and b.value == pytest.approx(40.0)
    plain = run.launch(gpu, 1, ARCH).figures[0]
    assert plain.key == "movement.cluster.launch.plain" and plain.value == pytest.approx(1200.0)
    c2 = run.launch(gpu, 2, ARCH).figures[0]
    assert c2.data["ratio_to_plain"] == pytest.approx(1.0)


def test_tma_latency_rows_walk_their_chains(gpu):
    for row in rows.TMA_ROWS:
        m = run.tma_latency(gpu, row, ARCH)
        f = _one(m, f"movement.tma.latency.{row.id}")
        assert f.value == pytest.approx(TMA_LAT[row.mechanism]) and not m.checks


def test_tma_device_memory_chains_take_a_block_per_transfer(gpu, monkeypatch):
    """A device-memory TMA row runs TMA_DRAM_LAUNCHES launches (their slopes scatter 11-18%:
    the median of 15 moved up to 2% night to night) over a chain with a block for every
    transfer of every launch; where the buffer is too small, as many launches as fit."""
    per_launch = int(passes()) * sum(rows.TMA_LENGTHS)
    for mech in Mechanism:
        row = rows.TmaRow(mech, Level.DRAM)
        reps, blocks = transfer.tma_repeats(gpu, row)
        assert reps == rows.TMA_DRAM_LAUNCHES.least and blocks >= (reps + 1) * per_launch
        f = _one(run.tma_latency(gpu, row, ARCH), f"movement.tma.latency.{row.id}")
        assert f"median of {reps} launches" in f.method and len(f.data["cycles"][16]) == reps
    assert transfer.tma_repeats(gpu, rows.TmaRow(Mechanism.BULK, Level.L2)) == (
        gpu.repeats, rows.TMA_L2_BLOCKS)
    monkeypatch.setattr(st, "big_bytes", lambda session: 4 << 20)   # 4096 blocks of 1 KiB
    reps, blocks = transfer.tma_repeats(gpu, rows.TmaRow(Mechanism.PLAIN, Level.DRAM))
    assert gpu.repeats <= reps < rows.TMA_DRAM_LAUNCHES.least and blocks <= (4 << 20) // 1024


def test_a_broken_chain_gives_no_number(gpu, monkeypatch):
    monkeypatch.setitem(MODELS, "tma", lambda s, fn, g, b, args: args[0].__setitem__(1, 7))
    with pytest.raises(ChainError, match="did not follow the chain"):
        run.tma_latency(gpu, rows.TmaRow(Mechanism.BULK, Level.DRAM), ARCH)


def test_a_rejected_tensor_map_is_reported(gpu):
    lib = gpu.runner.launcher.driver.lib
    lib.cuTensorMapEncodeTiled = lambda *a: (lib.CUresult.CUDA_ERROR_INVALID_VALUE,
                                             lib.CUtensorMap())
    m = run.tma_latency(gpu, rows.TmaRow(Mechanism.TENSOR2D, Level.L2), ARCH)
    assert not m.figures and "TMA descriptor rejected by the driver" in m.checks[0]


def test_tma_sizes_knee_and_multicast(gpu, artifact, tmp_path):
    for row in rows.TMA_BW_ROWS:
        assert run.tma_bandwidth(gpu, row, ARCH).figures[0].value == pytest.approx(
            40.0 * min(1.0, row.size / 2048), rel=1e-3)
    k = run.tma_knee(gpu, Level.DRAM, ARCH, artifact).figures[0]
    assert k.key == "movement.tma.bandwidth.dram.knee_bytes" and k.value == 2048
    assert (tmp_path / "movement-tma-sizes-dram.png").exists()
    mc = run.multicast(gpu, rows.MulticastRow(2, True), ARCH).figures[0]
    sep = run.multicast(gpu, rows.MulticastRow(2, False), ARCH).figures[0]
    assert (mc.value, sep.value) == (pytest.approx(900.0), pytest.approx(1200.0))


def _source_launches(gpu, measure) -> list[tuple[int, int]]:
    """(trip count, source offset in bytes from the big buffer) of every launch `measure`
    makes."""
    sim = gpu.runner.launcher
    base = st.big(gpu).data.ptr
    seen, launch = [], sim.launch

    def spy(fn, grid, block, args, **kw):
        seen.append((int(args[4]), args[1].data.ptr - base))
        return launch(fn, grid, block, args, **kw)
    sim.launch = spy
    measure()
    sim.launch = launch
    return seen


@pytest.mark.parametrize("which", ["tma_l2", "l2", "cp_async_cg", "tma_dram", "dram_read"])
def test_l2_streams_take_each_repeat_from_another_place(gpu, which):
    """An L2-resident stream's repeats read from as many places of the big buffer as there
    are repeats, each place first read by a launch of its own (its lines in the L2 before a
    timed launch); device-memory streams keep their slices."""
    if which.startswith("tma"):
        row = rows.TmaBwRow(Level.L2 if which == "tma_l2" else Level.DRAM, 4096)
        trips, span = rows.TMA_TRIPS, SMS * 4 * TMA_STAGE
        seen = _source_launches(gpu, lambda: bandwidth.measure_tma_bw(gpu, row, ARCH))
    else:
        row = STREAMS[rows.Stream(which)]
        trips, span = row.trips, SMS * row.region_bytes
        seen = _source_launches(gpu, lambda: bandwidth.measure_stream(gpu, row, ARCH))
    if which in ("tma_dram", "dram_read"):
        reps = bandwidth.repeats_for(gpu, Level.DRAM)
        assert {off for _, off in seen} == {0} and len(seen) == (reps + 1) * len(trips)
        assert reps == rows.DRAM_STREAM_LAUNCHES.least
        return
    per_repeat = len(trips) + 1
    assert len(seen) == (gpu.repeats + 1) * per_repeat
    places = []
    for r in range(gpu.repeats + 1):
        launches = seen[r * per_repeat:(r + 1) * per_repeat]
        assert [t for t, _ in launches] == [trips[-1], *trips]     # the warm-up, then timed
        assert len({off for _, off in launches}) == 1
        places.append(launches[0][1])
    assert len(set(places[1:])) == gpu.repeats        # every timed repeat at its own place
    assert all(off % (2 << 20) == 0 for off in places)
    assert max(places) + span <= st.big_bytes(gpu)


def test_async_rows(gpu):
    for kind in rows.ASYNC_ROWS:
        f = run.async_row(gpu, kind, ARCH).figures[0]
        want = 40 if "cp_async" in kind.value else 12 if "fence" in kind.value else 30
        assert f.key == f"movement.async.{kind.value}" and f.value == pytest.approx(want)


def test_cp_async_cg_walks_lines_spread_over_many_pages(gpu):
    """.cg: CP_ASYNC_CG_NODES lines at random over CP_ASYNC_CG_REGION, each timed launch
    starting where the last ended (the model walks the real chain, so every end offset is
    checked), CP_ASYNC_CG_LAUNCHES launches; .ca keeps its 32 nodes in one 4 KiB block."""
    sim = gpu.runner.launcher
    starts = []
    launch = sim.launch

    def spy(fn, grid, block, args, **kw):
        if fn.probe.name.endswith("cp_async.cg"):
            starts.append(int(args[2]))
        return launch(fn, grid, block, args, **kw)
    sim.launch = spy
    cg = run.async_row(gpu, rows.Async.CP_ASYNC_CG, ARCH).figures[0]
    reps = max(gpu.repeats, rows.CP_ASYNC_CG_LAUNCHES.least)
    assert f"median of {reps} launches" in cg.method and len(cg.data["cycles"][8]) == reps
    timed = starts[1:]
    assert len(timed) == (reps + 1) * len(rows.ASYNC_LENGTHS)
    assert len(set(timed)) == len(timed)                  # no launch repeats another's start
    assert len({o // (2 << 20) for o in timed}) == rows.CP_ASYNC_CG_REGION // (2 << 20)
    assert all(o % rows.LINE == 0 and o < rows.CP_ASYNC_CG_REGION for o in timed)
    assert tuple(transfer.cp_async_layout(rows.Async.CP_ASYNC_CA)) == (32, 32, False, Bounds(),
                                                                       0.05)
    assert transfer.cp_async_layout(rows.Async.CP_ASYNC_CG).spread_rel == \
        rows.CP_ASYNC_CG_SPREAD_REL and not cg.unstable
    ca = run.async_row(gpu, rows.Async.CP_ASYNC_CA, ARCH).figures[0]
    assert f"median of {gpu.repeats} launches" in ca.method


def test_cluster_launches_take_their_median_over_more_launches(gpu):
    f = run.launch(gpu, 4, ARCH).figures[0]
    assert f"median over {max(gpu.repeats, rows.CLUSTER_LAUNCHES.least)} launches" in f.method


def test_bandwidth_rows_and_staircase(gpu, artifact, tmp_path):
    for row in rows.STREAM_ROWS:
        m = run.bandwidth(gpu, row, ARCH, artifact)
        per_sm = _one(m, f"movement.bandwidth.{row.id}.per_sm")
        assert per_sm.value == pytest.approx(RATE[row.id], rel=1e-3) and not m.checks
        gpu_fig = _one(m, f"movement.bandwidth.{row.id}.gpu")
        if row.level is Level.DRAM:   # device memory's own rate: GB/s over the window
            assert gpu_fig.unit == "GB/s" and gpu_fig.value == pytest.approx(3000, rel=1e-2)
            assert gpu_fig.data["cta_rates_sum_b_per_clk"] == pytest.approx(
                SMS * RATE[row.id], rel=1e-3)
        else:
            assert gpu_fig.unit == "B/clk"
            assert gpu_fig.value == pytest.approx(SMS * RATE[row.id], rel=1e-3)
            assert gpu_fig.spread == pytest.approx(gpu_fig.value * per_sm.spread / per_sm.value)
        if row.peak == "shared":
            assert _one(m, f"movement.bandwidth.{row.id}.of_peak").value == pytest.approx(
                RATE[row.id] / 128, rel=1e-3)
        if row.peak == "hbm":
            assert _one(m, f"movement.bandwidth.{row.id}.of_peak").value == pytest.approx(
                3000 / 3350, rel=1e-2)
    assert (tmp_path / "movement-bandwidth-staircase.png").exists()


def test_l2_heatmap_rows(gpu, artifact, tmp_path):
    def value(row):
        return run.l2_by_sm(gpu, row, ARCH, artifact).figures[0]
    assert value(rows.L2Figure.NEAR).value == pytest.approx(260.0)
    with pytest.raises(NotApplicable, match="one latency level from every SM"):
        value(rows.L2Figure.FAR)
    near, far = value(rows.L2Figure.ATOMIC_NEAR), value(rows.L2Figure.ATOMIC_FAR)
    assert (near.key, near.value, far.value) == ("movement.l2.atomic.near", pytest.approx(280.0),
                                                 pytest.approx(440.0))
    parts = value(rows.L2Figure.PARTITIONS)
    assert parts.value == 2.0 and not near.unstable
    assert sorted(map(sorted, parts.data["partition_sms"])) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert (tmp_path / "movement-l2-heatmap-atomic.png").exists()
    assert (tmp_path / "movement-l2-heatmap-load.png").exists()


def test_a_far_level_some_launches_missed_is_unstable(gpu, artifact, monkeypatch):
    """H100: the far level showed on a few SMs in the median over launches, and in no SM of
    some launches: the figure's spread over launches is unknown, so it is unstable, not a
    value a nightly would compare."""
    from pytest_gpuchar.topics.movement import analysis, l2
    real = l2.l2_map

    def missing(*a, **kw):
        m, lat, sms, probe = real(*a, **kw)
        m = analysis.L2Map(m.near, 302.6, m.groups, m.per_sm, {"near": 0.5, "far": math.nan},
                           m.one_level[1:], 3)
        return m, lat, sms, probe
    monkeypatch.setattr(l2, "l2_map", missing)
    far = run.l2_by_sm(gpu, rows.L2Figure.FAR, ARCH, artifact).figures[0]
    assert far.value == 302.6
    assert far.unstable == f"a far level in 3 of {gpu.repeats} launches: its spread over " \
                           f"them is unknown"


def test_loaded_latency_curve(gpu, artifact, tmp_path):
    for share in rows.LOADED_SHARES:
        f = run.loaded(gpu, share, ARCH, artifact).figures[0]
        k = round(share / 100 * (SMS - 1))
        assert f.key == f"movement.loaded.latency.s{share}"
        assert f.value == pytest.approx(600 + 3 * k) and f.data["streamers"] == k
        assert f.data["covered"] and (k == 0 or f.data["achieved_gbps"] > 0)
    assert (tmp_path / "movement-loaded-latency.png").exists()
    assert not math.isnan(f.value)
