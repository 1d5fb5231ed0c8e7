"""The hardware path without a GPU: run.measure and run.prediction against a stand-in for
CuPy and the session's Gpu that "runs" each kernel by its CPU reference and writes stamp
records. Checks what a first GPU run must not find wrong: the arguments match the kernels'
PTX parameters, the buffers and records are laid out as the kernels write them, a wrong
output is caught, and the row's three figures carry their data."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from pytest_gpuchar.core.build import Builds, Built
from pytest_gpuchar.core.runner import Runner
from pytest_gpuchar.results.expectations import Store
from pytest_gpuchar.results.report import Recorder
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.topics.bsp import analysis, bodies, kernels, rows, run
from pytest_gpuchar.topics.bsp.rows import BY_ID, PYRAMID, App

SMS = 132


class DevArray(np.ndarray):
    def get(self):
        return np.array(self)


def fake_cupy() -> types.ModuleType:
    cp = types.ModuleType("cupy")
    cp.asarray = lambda a: np.array(a).view(DevArray)
    cp.full = lambda shape, v, dtype: np.full(shape, v, dtype).view(DevArray)
    cp.zeros = lambda shape, dtype: np.zeros(shape, dtype).view(DevArray)

    class Event:
        done = True

        def record(self):
            pass
    cp.cuda = types.SimpleNamespace(Event=Event, get_elapsed_time=lambda a, b: 0.25)
    return cp


PTX_TYPES = {"u64": DevArray, "u32": (np.int32, np.uint32), "f32": np.float32}


class FakeGpu:
    """Checks each launch's arguments against the kernel's PTX parameters, computes the
    output with the CPU reference (or garbage) and writes a stamp record per warp: block b
    on SM b % SMS, the k-th block of an SM from 5000 k cycles, 4000 cycles long."""

    def __init__(self, dev, wrong=False):
        self.dev, self.wrong, self.launches = dev, wrong, 0

    def ensure_alive(self, name):
        pass

    def launch(self, fn, grid, block, args, *, name, shared_mem=0):
        types_ = bodies.PARAMS[fn.app.value]
        assert len(args) == len(types_) + 1
        for a, t in zip(args, types_):
            assert isinstance(a, PTX_TYPES[t]), (fn.app, t, type(a))
        assert isinstance(args[-1], DevArray) and args[-1].dtype == np.uint64
        self.compute(fn.app, args)
        rec, nt = args[-1], block[0] * block[1]
        wpb = -(-nt // 32)
        blocks = np.arange(grid[0] * grid[1])
        for w in range(wpb):
            idx = blocks * wpb + w
            t0 = 100 + (blocks // SMS) * 5000 + w
            rec[idx] = np.stack([t0, t0 + 4000, blocks % SMS, 10 * t0, 10 * t0 + 2020], 1)
        self.launches += 1

    def compute(self, app, args):
        if app is App.KNN:
            out = analysis.knn_reference(np.asarray(args[0]), args[3], args[4])
            args[1][:] = out + (1.0 if self.wrong else 0.0)
        elif app is App.MM:
            args[0][:] = (np.asarray(args[1], np.float64) @ np.asarray(args[2])).astype(
                np.float32)
        else:
            c = analysis.HotspotCoeffs(*args[8:13])
            assert args[0] == PYRAMID and args[6] == args[7] == PYRAMID
            assert (args[5], args[4]) == np.asarray(args[2]).shape     # rows, cols
            args[3][:] = analysis.hotspot_reference(np.asarray(args[2]), np.asarray(args[1]),
                                                    c)

    def poll(self, event, name, timeout_s=None):
        pass

    def wait(self, name, timeout_s=None):
        pass


class FakeFunction:
    def __init__(self, app):
        self.app, self.num_regs = app, 32
        self.shared_size_bytes = kernels.shared_bytes(app)


STORE = Store()         # the expectation files, loaded once


class FakeBuilds:
    def __init__(self, offline: Builds | None):
        self.offline = offline or Builds()
        self.linked = []

    def jit_groups(self, dev, groups):
        self.linked += [p.name for g in groups for p in g.probes]
        return {}

    def jit(self, probe, dev):
        funcs = self.offline.offline(probe).functions
        compiled = types.SimpleNamespace(function=lambda entry: FakeFunction(probe.app))
        return Built(probe, funcs, compiled=compiled)


class FakeSession:
    def __init__(self, offline: Builds | None = None, wrong=False):
        dev = types.SimpleNamespace(name="NVIDIA H200", arch="sm_90", sm_count=SMS,
                                    shared_per_sm=228 * 1024, l2_bytes=50 * 2 ** 20,
                                    driver="580.0", sm_clock_max_mhz=1980.0)
        self.gpu, self.builds, self.runs = FakeGpu(dev, wrong), FakeBuilds(offline), RunCache()
        self.runner = Runner(self.gpu)
        self.repeats, self.recorder, self.expectations = 7, Recorder(), STORE

    def verify(self, probe, functions):
        return probe.check(functions)

    def provenance(self):
        return {"device": "NVIDIA H200", "sm_count": SMS, "sm_clock_measured_mhz": 1980.0}


@pytest.fixture
def cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())


@pytest.fixture
def sm_90_tools(need_offline_tools, offline_builds):
    """These tests read the kernels' real SASS (ptxas + nvdisasm for sm_90): without the
    `static` extra they skip with its install line. The session's Builds (its listings
    kept)."""
    need_offline_tools("sm_90")
    return offline_builds


@pytest.mark.parametrize("size_id", ["knn-42764", "mm-320x320x640", "hotspot-512x512"])
def test_prediction_row(cupy, sm_90_tools, size_id):
    session = FakeSession(sm_90_tools)
    size = BY_ID[size_id]
    row = run.prediction(session, size, "sm_90")
    assert session.gpu.launches == run.repeats(session) + 1 == 6     # 250 us a launch
    assert session.builds.linked == ["bsp/hotspot", "bsp/knn", "bsp/mm"]
    key = f"bsp.{size.app.value}.{size.name}"
    miss = run.expected_failure(row)
    # the error is a figure, or (beyond twice the seed's error for the kernel) a note with the
    # model's miss and the test an expected failure
    measured, predicted, error = row.figures if not miss else (*row.figures, row.notes[0])
    assert [f.key for f in (measured, predicted, error)] == [
        f"{key}.measured_cycles", f"{key}.predicted_cycles", f"{key}.error"]
    assert bool(miss) == (error.value > 2 * analysis.seed_error(size.app.value)[0])
    assert len(row.figures) == (2 if miss else 3) and len(row.notes) == bool(miss)
    if miss:
        assert error.status == "info" and error.detail == miss == error.data["model_miss"]
    assert row.checks == [] and measured.unstable == ""
    blocks_per_sm, warps = -(-size.n_b // SMS), size.n_t // 32
    assert measured.value == 5000 * (blocks_per_sm - 1) + 4000 + warps - 1
    assert measured.data["sms"] == min(SMS, size.n_b)
    assert measured.data["globaltimer_cycles"] == round(
        measured.data["globaltimer_ns"] * 1.98)
    assert predicted.value == pytest.approx(predicted.data["prediction"]["cycles"], abs=1e-3)
    assert error.value == pytest.approx(abs(measured.value - predicted.value) / measured.value)
    assert error.spread == pytest.approx(
        predicted.value / measured.value * measured.spread / measured.value)
    h200 = STORE.load("sm_90").get("throughput.launch.block", "NVIDIA H200")
    lo, hi = h200.range or (h200.value, h200.value)     # the H200 boards' entry
    assert predicted.data["parameters"]["block_lnch_ovh"]["value"] == round((lo + hi) / 2, 3)
    assert predicted.data["parameters"]["block_lnch_ovh"]["source"].startswith(
        "throughput/sm_90.yaml:")
    assert "(memory/sm_90.yaml; throughput/sm_90.yaml)" in predicted.method
    assert predicted.data["launch"]["reg_per_thread"] == 32
    assert "timed region start" in row.sass and "SR_GLOBALTIMERLO" in row.sass
    assert predicted.data["predicted_cycles_l2_resident"] < predicted.value
    assert measured.data["sm_clock_source"].startswith("measured")


def test_without_a_measured_clock_the_max_clock_is_named(cupy, sm_90_tools):
    """The clock probe found invalid (no number): the globaltimer cycles use the board's max
    clock, and the data says so."""
    session = FakeSession(sm_90_tools)
    session.provenance = lambda: {"device": "NVIDIA H200", "sm_count": SMS,
                                  "sm_clock_measured_mhz": None}
    measured = run.prediction(session, BY_ID["knn-42764"], "sm_90").figures[0]
    assert measured.data["sm_clock_mhz"] == 1980.0
    assert measured.data["sm_clock_source"].startswith("the board's max clock")


def test_a_short_kernel_is_launched_more_often(cupy, sm_90_tools):
    """A kernel whose first timed launch ran under SHORT_US gets SHORT_LAUNCHES timed launches
    (its launches scatter a few percent: the median of 5 moved 1-2.7% night to night); the
    warm-up's time, which includes loading the module, does not decide it."""
    times = iter([0.3] + [0.004] * 40)          # ms: the warm-up 300 us, then 4 us
    sys.modules["cupy"].cuda.get_elapsed_time = lambda a, b: next(times)
    session = FakeSession(sm_90_tools)
    kernel = run.measure(session, BY_ID["knn-42764"], "sm_90")
    short = run.SHORT_LAUNCHES.least
    assert session.gpu.launches == short + 1 and kernel.reps == short
    assert len(kernel.spans) == run.SHORT_LAUNCHES.least


def test_whole_kernel_cycles_from_the_stamps(cupy, sm_90_tools):
    """KNN at 168 blocks on 132 SMs: SMs 0-35 run two blocks (5000 apart, 4000 + 7 warps
    long), the last one finishing at 5000 + 4007 - 100 after its first entry."""
    session = FakeSession(sm_90_tools)
    m = run.measured(session, BY_ID["knn-42764"], "sm_90")
    assert m.cycles.value == 5000 + 4000 + 7 and m.cycles.spread == 0
    assert m.spans[0].warps == (8, 16) and m.regs == 32 and m.shared == 0


def test_a_wrong_output_is_caught(cupy, sm_90_tools):
    session = FakeSession(sm_90_tools, wrong=True)
    row = run.prediction(session, BY_ID["knn-42764"], "sm_90")
    assert len(row.checks) == 1 and "differ from the CPU reference" in row.checks[0]
    assert row.figures[0].unstable == row.checks[0]


def test_missing_parameters_are_not_applicable(cupy, tmp_path):
    from pytest_gpuchar.core.probe import NotApplicable
    session = FakeSession()
    session.expectations = Store(tmp_path)
    with pytest.raises(NotApplicable, match="block_lnch_ovh"):
        run.prediction(session, BY_ID["knn-42764"], "sm_90")
    assert session.gpu.launches == 0


def test_host_work_takes_the_job_made_ahead_or_makes_it_now(monkeypatch):
    """A size's job queued ahead (as schedule.start queues every size) is taken from there,
    one not queued is made when asked; neither is kept, and no other size's is started."""
    made = []

    def job(size):
        made.append(size.id)
        return run.HostJob({"size": size.id}, None)
    monkeypatch.setattr(run, "host_job", job)
    session = types.SimpleNamespace(runs=RunCache())
    first, second, *_ = rows.SIZES
    try:
        session.runs.ahead(run._host_key(first), lambda: run.HostJob({"ahead": first.id}, None))
        assert run.host_work(session, first).inputs == {"ahead": first.id}
        assert run.host_work(session, second).inputs == {"size": second.id}
        assert made == [second.id]
        assert run._host_key(first) not in session.runs
        assert run._host_key(second) not in session.runs
    finally:
        session.runs.close()


def test_host_job_keeps_the_inputs_and_checks_of_the_rows():
    mm = next(s for s in rows.SIZES if s.app is rows.App.MM)
    job = run.host_job(mm)
    gen = analysis.rng(mm)
    inp = analysis.mm_inputs(*mm.dims, gen)
    assert np.array_equal(job.inputs["A"], inp["A"]) and np.array_equal(job.inputs["B"], inp["B"])
    assert 0 in job.inputs["rows"] and mm.dims[0] - 1 in job.inputs["rows"]
    c = (inp["A"].astype(np.float64) @ inp["B"]).astype(np.float32)
    assert analysis.mm_outside(c, job.inputs["rows"], *job.reference) == 0
    assert analysis.mm_mismatch(inp["A"], inp["B"], c, job.inputs["rows"]) == 0
    c[job.inputs["rows"][0], 0] += 1.0
    assert analysis.mm_outside(c, job.inputs["rows"], *job.reference) == 1
