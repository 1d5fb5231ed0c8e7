"""The session object without a GPU: which GPU a pytest-xdist worker is pinned to, and how
declared-unmeasurable probes are verified."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_gpuchar.core import device
from pytest_gpuchar.core.probe import DeclaredUnmeasurable, Probe
from pytest_gpuchar.core.verify import ProbeInvalid
from pytest_gpuchar.results.expectations import Store
from pytest_gpuchar.session import GpuCharSession, StaleDeclaration


def session(tmp_path, *, worker: str | None = None, index: int | None = None):
    config = SimpleNamespace(workerinput={"workerid": worker}) if worker else SimpleNamespace()
    return GpuCharSession(config, None, 7, 20.0, None, index, Store(tmp_path))


@pytest.fixture
def detected(monkeypatch):
    calls = []
    monkeypatch.setattr(device, "detect", lambda index=None: calls.append(index) or
                        device.Absent("faked"))
    monkeypatch.delenv("GPUCHAR_DEVICE", raising=False)
    return calls


@pytest.mark.parametrize("worker, gpus, want", [("gw0", 4, 0), ("gw3", 4, 3), ("gw2", 0, None)])
def test_worker_n_is_pinned_to_gpu_n(tmp_path, monkeypatch, detected, worker, gpus, want):
    """Indices count the GPUs CUDA_VISIBLE_DEVICES leaves visible (the driver's numbering);
    without any GPU, detection gives its own reason."""
    monkeypatch.setattr(device, "device_count", lambda: gpus)
    session(tmp_path, worker=worker).device
    assert detected == [want]


@pytest.mark.parametrize("worker, gpus", [("gw5", 4), ("gw1", 1)])
def test_a_worker_beyond_the_gpus_measures_nothing(tmp_path, monkeypatch, detected, worker,
                                                   gpus):
    """-n 2 on a one-GPU host: the second worker does not share the first one's GPU (two
    workers on one GPU time each other's kernels, docs/run-time.md); its hardware tests skip,
    saying why and what to run."""
    monkeypatch.setattr(device, "device_count", lambda: gpus)
    monkeypatch.setattr(device, "detect", lambda index=None: detected.append(index) or
                        SimpleNamespace(arch="sm_90", name="a GPU"))
    s = session(tmp_path, worker=worker)
    # the host's GPU is detected (its arch decides what the worker collects, as its peers'
    # does: xdist needs every worker to collect the same tests), never measured
    assert s.device.arch == "sm_90" and detected == [int(worker[2:]) % gpus]
    assert s.hardware_skip("sm_90") == (
        f"hardware: pytest-xdist worker {worker} has no GPU of its own ({gpus} visible, "
        f"measured by gw0..gw{gpus - 1}; two workers on one GPU would time each other's "
        f"kernels): run with -n {gpus} or -n auto")


def test_an_explicit_device_wins_over_the_worker_mapping(tmp_path, monkeypatch, detected):
    monkeypatch.setattr(device, "device_count", lambda: 4)
    session(tmp_path, worker="gw3", index=0).device           # --gpuchar-device=0
    monkeypatch.setenv("GPUCHAR_DEVICE", "2")
    session(tmp_path, worker="gw3").device                    # GPUCHAR_DEVICE: detect reads it
    assert detected == [0, None]


def test_a_single_process_uses_the_default_device(tmp_path, detected):
    s = session(tmp_path)
    assert not s.device and s.device.reason == "faked"
    assert detected == [None]          # detected once, then kept


def test_worker_device_without_cupy_is_none():
    assert device.worker_device(3, count=0) is None
    assert device.worker_device(3, count=2) is None and device.worker_device(1, count=2) == 1


class _Invalid(Probe):
    def check(self, functions):
        raise ProbeInvalid("probe invalid: cpi/setp.ne.s32: unexpected instructions: "
                           "{'P2R': 1}")


class _Valid(Probe):
    def check(self, functions):
        return "ok"


DECLARED = """schema: 2
arch: sm_90
unmeasurable:
  cpi/setp.ne.s32:
    reason: predicates spilled through P2R
    sass: "P2R"
"""


def test_a_declared_probe_is_skipped_while_its_fact_holds(tmp_path):
    (tmp_path / "sm_90.yaml").write_text(DECLARED)
    s = session(tmp_path)
    p = _Invalid("cpi/setp.ne.s32", "sm_90", "", {1: "k"}, {1: 1})
    with pytest.raises(DeclaredUnmeasurable, match="predicates spilled through P2R"):
        s.verify(p, {})
    (tmp_path / "sm_90.yaml").write_text(DECLARED.replace('"P2R"', '"R2UR"'))
    with pytest.raises(ProbeInvalid):                 # invalid for another reason: fails
        session(tmp_path).verify(p, {})


def test_a_declared_probe_that_is_valid_now_fails(tmp_path):
    (tmp_path / "sm_90.yaml").write_text(DECLARED)
    p = _Valid("cpi/setp.ne.s32", "sm_90", "", {1: "k"}, {1: 1})
    with pytest.raises(StaleDeclaration, match="remove the declaration"):
        session(tmp_path).verify(p, {})
    assert session(tmp_path).verify(_Valid("cpi/x", "sm_90", "", {1: "k"}, {1: 1}), {}) == "ok"


def test_a_declaration_for_one_compiler_leaves_the_others_alone(tmp_path):
    """cpi/div.rn.f64 is invalid only in the driver's JIT: declared for jit-driver-* it is
    skipped there, and offline ptxas (valid) is not reported stale."""
    (tmp_path / "sm_90.yaml").write_text(DECLARED.replace('    sass: "P2R"\n',
                                                          '    sass: "P2R"\n'
                                                          '    compiler: "^jit-driver-"\n'))
    s = session(tmp_path)
    bad = _Invalid("cpi/setp.ne.s32", "sm_90", "", {1: "k"}, {1: 1})
    good = _Valid("cpi/setp.ne.s32", "sm_90", "", {1: "k"}, {1: 1})
    with pytest.raises(DeclaredUnmeasurable):
        s.verify(bad, {}, "jit-driver-580.159.04")
    assert s.verify(good, {}, "ptxas-13.5.37") == "ok"
    with pytest.raises(ProbeInvalid):
        s.verify(bad, {}, "ptxas-13.5.37")


FIGURE = """schema: 2
arch: sm_90
unmeasurable:
  numerics.fasi.e4m3_f32.rounding_c_rn:
    reason: the driver adds C with FADD
    sass: "\\\\{'FADD': 4\\\\} on the FPU,? after \\\\{'HMMA\\\\.16816\\\\.F32': 2\\\\}"
    compiler: "^jit-driver-"
"""


def test_a_figure_declared_by_its_key_is_skipped_or_stale(tmp_path):
    """A figure no valid probe gives (FP8 mma.sync's accumulation on sm_90) is declared by its
    characteristic key: skipped while the invalid verdict shows the declared SASS, reported
    invalid otherwise, a stale declaration when it becomes measurable."""
    (tmp_path / "numerics").mkdir()
    (tmp_path / "numerics" / "sm_90.yaml").write_text(FIGURE)
    s, key = session(tmp_path), "numerics.fasi.e4m3_f32.rounding_c_rn"
    verdict = "invalid: C is added by {'FADD': 4} on the FPU, after {'HMMA.16816.F32': 2}"
    with pytest.raises(DeclaredUnmeasurable, match="the driver adds C with FADD"):
        s.unmeasurable("sm_90", key, verdict, "jit-driver-580.159.04")
    assert s.unmeasurable("sm_90", key, verdict.replace("4", "2"), "jit-driver-1") is None
    assert s.unmeasurable("sm_90", key, verdict, "ptxas-13.5.37") is None
    assert s.unmeasurable("sm_90", "numerics.other", verdict, "jit-driver-1") is None
    with pytest.raises(StaleDeclaration, match=key):
        s.not_declared("sm_90", key, "jit-driver-580.159.04")
    assert s.not_declared("sm_90", "numerics.other", "jit-driver-1") is None


def test_the_door_speaks_of_the_drivers_jit_by_default(tmp_path):
    """A hardware path that names no compiler is verifying the driver's JIT of the session's
    GPU: a jit-driver declaration applies to it (to every topic's figures alike)."""
    from types import SimpleNamespace
    (tmp_path / "sm_90.yaml").write_text(DECLARED.replace('    sass: "P2R"\n',
                                                          '    sass: "P2R"\n'
                                                          '    compiler: "^jit-driver-"\n'))
    s = session(tmp_path)
    bad = _Invalid("cpi/setp.ne.s32", "sm_90", "", {1: "k"}, {1: 1})
    s._device = SimpleNamespace(driver="580.159.04")
    with pytest.raises(DeclaredUnmeasurable):
        s.verify(bad, {})
