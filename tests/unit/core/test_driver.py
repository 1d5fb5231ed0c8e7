"""The driver bindings (core/driver.py) against a stand-in
libcuda: the C layouts of the launch structures, kernel-parameter packing, cluster launches,
the occupancy query's answers as skip reasons, tensor-map encoding and its rejection."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from pytest_gpuchar.core.gpu import GPUWedged, LaunchRefused
from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.core import driver as drv

NAMES = {1: (b"CUDA_ERROR_INVALID_VALUE", b"invalid argument"),
         801: (b"CUDA_ERROR_NOT_SUPPORTED", b"operation not supported")}


class FakeLib:
    """Records the driver calls; `fail` maps a call name to the CUresult it returns."""

    def __init__(self, fail=None, clusters=4) -> None:
        self.fail = fail or {}
        self.clusters = clusters
        self.calls = []

        def record(name, result=None):
            def call(*args):
                self.calls.append((name, args))
                if result:
                    result(*args)
                return self.fail.get(name, 0)
            return call
        self.params = []            # the first parameter's u32, read during the call
        self.cuLaunchKernelEx = record(
            "cuLaunchKernelEx", lambda cfg, fn, p, extra: self.params.append(
                ctypes.c_uint32.from_address(p[0]).value if p[0] else None))
        self.cuFuncSetAttribute = record("cuFuncSetAttribute")
        self.cuOccupancyMaxActiveClusters = record(
            "cuOccupancyMaxActiveClusters", lambda n, fn, cfg: setattr(n._obj, "value",
                                                                       self.clusters))
        self.cuTensorMapEncodeTiled = record("cuTensorMapEncodeTiled")

    def cuGetErrorName(self, code, out):
        out._obj.value = NAMES.get(code, (b"CUDA_ERROR_UNKNOWN", b""))[0]
        return 0

    def cuGetErrorString(self, code, out):
        out._obj.value = NAMES.get(code, (b"", b"unknown error"))[1]
        return 0

    def last(self, name):
        return [a for n, a in self.calls if n == name][-1]


class Array:
    def __init__(self, ptr: int) -> None:
        self.data = type("Mem", (), {"ptr": ptr})()


class Fn:
    ptr = 0xF00D


class Gpu:
    def __init__(self, wedged=None) -> None:
        self.alive_checks = []
        self.wedged = wedged

    def ensure_alive(self, name):
        self.alive_checks.append(name)
        if self.wedged:
            raise GPUWedged(f"GPU wedged by probe {self.wedged}; not launching {name}")


@pytest.fixture
def launcher(monkeypatch):
    monkeypatch.setattr(drv.ClusterLauncher, "stream", staticmethod(lambda: 0x5EED))

    def make(**kw):
        lib = FakeLib(**kw)
        return drv.ClusterLauncher(Gpu(), drv.Driver(lib)), lib
    return make


def test_launch_structures_have_the_c_layout():
    assert ctypes.sizeof(drv.LaunchAttr) == 72 and drv.LaunchAttr.value.offset == 8
    assert ctypes.sizeof(drv.AttrValue) == 64
    assert ctypes.sizeof(drv.LaunchConfig) == 56
    assert (drv.LaunchConfig.hStream.offset, drv.LaunchConfig.attrs.offset,
            drv.LaunchConfig.numAttrs.offset) == (32, 40, 48)


def test_pack_gives_each_parameter_its_size():
    tm = drv.TensorMap(None, 0x1000)
    ptrs, keep = drv.pack((Array(0xABC0), np.uint32(7), np.uint64(2**40 + 3), np.int32(-1), tm))
    assert ctypes.c_uint64.from_address(ptrs[0]).value == 0xABC0
    assert ctypes.c_uint32.from_address(ptrs[1]).value == 7
    assert ctypes.c_uint64.from_address(ptrs[2]).value == 2**40 + 3
    assert ctypes.c_int32.from_address(ptrs[3]).value == -1
    assert ptrs[4] == 0x1000 and len(keep) == 5
    with pytest.raises(TypeError, match="size must be explicit"):
        drv.pack((7,))


def test_cluster_launch_sets_the_cluster_dimension(launcher):
    lc, lib = launcher()
    lc.launch(Fn(), (16,), (128,), (np.uint32(3),), name="probe", cluster=4, shared_mem=1 << 16)
    cfg_ref, fn, params, extra = lib.last("cuLaunchKernelEx")
    cfg = cfg_ref._obj
    assert (cfg.gridDimX, cfg.gridDimY, cfg.blockDimX, cfg.sharedMemBytes) == (16, 1, 128, 65536)
    assert cfg.hStream == 0x5EED and cfg.numAttrs == 1
    attr = cfg.attrs[0]
    assert attr.id == drv.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert (attr.value.cluster.x, attr.value.cluster.y, attr.value.cluster.z) == (4, 1, 1)
    assert fn.value == Fn.ptr and extra is None
    assert lib.params == [3]
    attrs = [a[1:] for n, a in lib.calls if n == "cuFuncSetAttribute"]
    assert (drv.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1 << 16) in attrs
    assert lc.gpu.alive_checks == ["probe"]


def test_plain_launch_has_no_attribute_and_wide_clusters_are_allowed(launcher):
    lc, lib = launcher()
    lc.launch(Fn(), (132,), (32,), (), name="plain")
    assert lib.last("cuLaunchKernelEx")[0]._obj.numAttrs == 0
    assert not [a for n, a in lib.calls if n == "cuFuncSetAttribute"]
    lc.launch(Fn(), (16,), (1,), (), name="wide", cluster=16)
    assert (drv.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1) in \
        [a[1:] for n, a in lib.calls if n == "cuFuncSetAttribute"]


def test_a_refused_launch_names_the_driver_error(launcher):
    lc, _ = launcher(fail={"cuLaunchKernelEx": 1})
    with pytest.raises(LaunchRefused, match="CUDA_ERROR_INVALID_VALUE.*invalid argument"):
        lc.launch(Fn(), (2,), (1,), (), name="p", cluster=2)


def test_a_wedged_gpu_launches_nothing(launcher, monkeypatch):
    lc, lib = launcher()
    lc.gpu.wedged = "earlier"
    with pytest.raises(GPUWedged):
        lc.launch(Fn(), (2,), (1,), (), name="p", cluster=2)
    assert not [n for n, _ in lib.calls if n == "cuLaunchKernelEx"]


def test_occupancy_answers_become_skip_reasons(launcher):
    lc, lib = launcher(clusters=7)
    assert lc.clusters(Fn(), "dsm", 16, (1024,), 120_000) == 7
    cfg = lib.last("cuOccupancyMaxActiveClusters")[2]._obj
    assert cfg.attrs[0].value.cluster.x == 16 and cfg.blockDimX == 1024
    lc, _ = launcher(clusters=0)
    with pytest.raises(NotApplicable, match="reports 0 active clusters"):
        lc.clusters(Fn(), "dsm", 16, (1024,), 0)
    lc, _ = launcher(fail={"cuOccupancyMaxActiveClusters": 801})
    with pytest.raises(NotApplicable, match="clusters of 16 CTAs.*CUDA_ERROR_NOT_SUPPORTED"):
        lc.clusters(Fn(), "dsm", 16, (32,), 0)


def test_shared_memory_the_device_cannot_give_is_a_skip(launcher):
    lc, _ = launcher(fail={"cuFuncSetAttribute": 1})
    with pytest.raises(NotApplicable, match="dynamic shared memory.*CUDA_ERROR_INVALID_VALUE"):
        lc.launch(Fn(), (1,), (1,), (), name="big", shared_mem=300_000)


def test_tensor_map_is_encoded_at_an_aligned_address():
    lib = FakeLib()
    tm = drv.Driver(lib).encode_tiled(0x7000, (1024, 64), (4096,), (64, 4))
    at, dtype, rank, ga, dims, strides, box, elem, *modes = lib.last("cuTensorMapEncodeTiled")
    assert at.value == tm.address and tm.address % drv.TENSOR_MAP_ALIGN == 0
    assert (dtype, rank, ga.value) == (drv.CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, 0x7000)
    assert list(dims) == [1024, 64] and list(strides) == [4096] and list(box) == [64, 4]
    assert list(elem) == [1, 1] and modes == [0, 0, 0, 0]
    assert len(tm.bytes()) == drv.TENSOR_MAP_BYTES


def test_a_rejected_tensor_map_carries_the_driver_error():
    lib = FakeLib(fail={"cuTensorMapEncodeTiled": 1})
    with pytest.raises(drv.TensorMapRejected, match="box \\(300,\\).*CUDA_ERROR_INVALID_VALUE"):
        drv.Driver(lib).encode_tiled(0x7000, (1 << 20,), (), (300,))
