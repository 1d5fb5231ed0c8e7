"""The driver calls (core/driver.py) through NVIDIA's bindings: the launch configuration, the
cluster attribute and the tensor-map arguments are built by the real cuda.bindings.driver
(its structs need no driver); only the calls that reach libcuda are answered by a stand-in
(there is no GPU here). Kernel-parameter packing is read back from the memory it points to."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gpuchar.core import bindings
from pytest_gpuchar.core import driver as drv
from pytest_gpuchar.core.gpu import GPUWedged, LaunchRefused
from pytest_gpuchar.core.probe import NotApplicable

cb = pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings (extra test) is needed")
R = cb.CUresult
DESCRIPTIONS = {R.CUDA_ERROR_INVALID_VALUE: b"invalid argument",
                R.CUDA_ERROR_NOT_SUPPORTED: b"operation not supported"}


def read_u32(ptr: int) -> int:
    return int(np.frombuffer(bindings.host_bytes(ptr, 4), "<u4")[0])


def read_u64(ptr: int) -> int:
    return int(np.frombuffer(bindings.host_bytes(ptr, 8), "<u8")[0])


class Api:
    """The real cuda.bindings.driver with the calls that need libcuda answered here: `fail`
    maps a call to the CUresult it returns; every call is recorded with its arguments."""

    def __init__(self, fail=None, clusters=4, misaligned=0) -> None:
        self.fail = fail or {}
        self.clusters = clusters
        self.misaligned = misaligned      # tensor maps refused for their address first
        self.calls = []
        self.params = []                  # the first kernel parameter's u32, read in the call

    def __getattr__(self, name):
        return getattr(cb, name)

    def _result(self, name: str, *args):
        self.calls.append((name, args))
        return self.fail.get(name, R.CUDA_SUCCESS)

    def cuGetErrorString(self, code):
        return (R.CUDA_SUCCESS, DESCRIPTIONS[code]) if code in DESCRIPTIONS else \
            (R.CUDA_ERROR_INVALID_VALUE, None)

    def cuLaunchKernelEx(self, cfg, fn, params, extra):
        self.params.append(read_u32(int(params[0])) if len(params) and params[0] else None)
        return (self._result("cuLaunchKernelEx", cfg, fn, params, extra),)

    def cuFuncSetAttribute(self, fn, attr, value):
        return (self._result("cuFuncSetAttribute", fn, attr, value),)

    def cuOccupancyMaxActiveClusters(self, fn, cfg):
        return self._result("cuOccupancyMaxActiveClusters", fn, cfg), self.clusters

    def cuTensorMapEncodeTiled(self, *args):
        res = self._result("cuTensorMapEncodeTiled", *args)
        tmap = cb.CUtensorMap()
        if self.misaligned and tmap.getPtr() % drv.TENSOR_MAP_ALIGN:
            self.misaligned -= 1
            return R.CUDA_ERROR_INVALID_VALUE, tmap
        if res == R.CUDA_SUCCESS:     # a descriptor the test can recognise: word k = k + rank
            tmap.opaque = [cb.cuuint64_t(k + args[1]) for k in range(16)]
        return res, tmap

    def last(self, name):
        return [a for n, a in self.calls if n == name][-1]

    def attributes(self):
        return [(int(a[1]), a[2]) for n, a in self.calls if n == "cuFuncSetAttribute"]


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
        api = Api(**kw)
        return drv.ClusterLauncher(Gpu(), drv.Driver(api)), api
    return make


def test_pack_gives_each_parameter_its_size():
    tm = drv.TensorMap(None, 0x1000)
    ptrs, keep = drv.pack((Array(0xABC0), np.uint32(7), np.uint64(2**40 + 3), np.int32(-1),
                           np.int64(-2), tm))
    assert ptrs.dtype == np.uint64 and len(ptrs) == 6
    assert read_u64(int(ptrs[0])) == 0xABC0
    assert read_u32(int(ptrs[1])) == 7
    assert read_u64(int(ptrs[2])) == 2**40 + 3
    assert np.frombuffer(bindings.host_bytes(int(ptrs[3]), 4), "<i4")[0] == -1
    assert np.frombuffer(bindings.host_bytes(int(ptrs[4]), 8), "<i8")[0] == -2
    assert int(ptrs[5]) == 0x1000 and any(k is tm for k in keep)
    assert all(int(p) % 8 == 0 for p in ptrs[:5])
    with pytest.raises(TypeError, match="size must be explicit"):
        drv.pack((7,))
    empty, _ = drv.pack(())
    assert len(empty) == 1          # a valid (unused) array for a kernel without parameters


def test_cluster_launch_sets_the_cluster_dimension(launcher):
    lc, api = launcher()
    lc.launch(Fn(), (16,), (128,), (np.uint32(3),), name="probe", cluster=4, shared_mem=1 << 16)
    cfg, fn, params, extra = api.last("cuLaunchKernelEx")
    assert isinstance(cfg, cb.CUlaunchConfig)
    assert (cfg.gridDimX, cfg.gridDimY, cfg.blockDimX, cfg.sharedMemBytes) == (16, 1, 128, 65536)
    assert int(cfg.hStream) == 0x5EED and cfg.numAttrs == 1
    attr = cfg.attrs[0]
    assert attr.id == cb.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    dim = attr.value.clusterDim
    assert (dim.x, dim.y, dim.z) == (4, 1, 1)
    assert int(fn) == Fn.ptr and extra == 0
    assert api.params == [3]
    assert (drv.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1 << 16) in api.attributes()
    assert lc.gpu.alive_checks == ["probe"]


def test_plain_launch_has_no_attribute_and_wide_clusters_are_allowed(launcher):
    lc, api = launcher()
    lc.launch(Fn(), (132,), (32,), (), name="plain")
    assert api.last("cuLaunchKernelEx")[0].numAttrs == 0
    assert not api.attributes()
    lc.launch(Fn(), (16,), (1,), (), name="wide", cluster=16)
    assert (drv.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1) in api.attributes()


def test_a_refused_launch_names_the_typed_cuda_result(launcher):
    lc, _ = launcher(fail={"cuLaunchKernelEx": R.CUDA_ERROR_INVALID_VALUE})
    with pytest.raises(LaunchRefused, match=r"CUDA_ERROR_INVALID_VALUE \(1\): invalid argument"):
        lc.launch(Fn(), (2,), (1,), (), name="p", cluster=2)


def test_without_a_driver_to_describe_it_the_name_stands(monkeypatch):
    """The real bindings without libcuda: cuGetErrorString cannot run, the CUresult name (from
    the binding's enum, no driver needed) is still in the message."""
    d = drv.Driver(cb)
    with pytest.raises(drv.DriverError) as e:
        d.check("cuLaunchKernelEx", R.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    assert e.value.name == "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" and e.value.code == 701
    assert "cuLaunchKernelEx failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701)" in str(e.value)
    with pytest.raises(drv.DriverError, match="CUresult 99999"):
        d.check("x", 99999)


def test_a_wedged_gpu_launches_nothing(launcher):
    lc, api = launcher()
    lc.gpu.wedged = "earlier"
    with pytest.raises(GPUWedged):
        lc.launch(Fn(), (2,), (1,), (), name="p", cluster=2)
    assert not [n for n, _ in api.calls if n == "cuLaunchKernelEx"]


def test_occupancy_answers_become_skip_reasons(launcher):
    lc, api = launcher(clusters=7)
    assert lc.clusters(Fn(), "dsm", 16, (1024,), 120_000) == 7
    fn, cfg = api.last("cuOccupancyMaxActiveClusters")
    assert cfg.attrs[0].value.clusterDim.x == 16 and cfg.blockDimX == 1024
    assert cfg.gridDimX == 16 and cfg.sharedMemBytes == 120_000 and int(fn) == Fn.ptr
    lc, _ = launcher(clusters=0)
    with pytest.raises(NotApplicable, match="reports 0 active clusters"):
        lc.clusters(Fn(), "dsm", 16, (1024,), 0)
    lc, _ = launcher(fail={"cuOccupancyMaxActiveClusters": R.CUDA_ERROR_NOT_SUPPORTED})
    with pytest.raises(NotApplicable, match="clusters of 16 CTAs.*CUDA_ERROR_NOT_SUPPORTED"):
        lc.clusters(Fn(), "dsm", 16, (32,), 0)


def test_shared_memory_the_device_cannot_give_is_a_skip(launcher):
    lc, _ = launcher(fail={"cuFuncSetAttribute": R.CUDA_ERROR_INVALID_VALUE})
    with pytest.raises(NotApplicable, match="dynamic shared memory.*CUDA_ERROR_INVALID_VALUE"):
        lc.launch(Fn(), (1,), (1,), (), name="big", shared_mem=300_000)


def test_tensor_map_arguments_are_the_old_encoding():
    """The arguments the ctypes code passed: dtype UINT32, rank, address, dims, strides (one
    ignored 0 for rank 1), box, element strides 1, and the four modes 0."""
    api = Api()
    tm = drv.Driver(api).encode_tiled(0x7000, (1024, 64), (4096,), (64, 4))
    dtype, rank, ga, dims, strides, box, elem, *modes = api.last("cuTensorMapEncodeTiled")
    assert (dtype, rank, ga) == (cb.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT32, 2,
                                 0x7000)
    assert [int(x) for x in dims] == [1024, 64] and [int(x) for x in strides] == [4096]
    assert [int(x) for x in box] == [64, 4] and [int(x) for x in elem] == [1, 1]
    assert [int(m) for m in modes] == [0, 0, 0, 0]
    assert isinstance(dims[0], cb.cuuint64_t) and isinstance(box[0], cb.cuuint32_t)
    assert tm.address % drv.TENSOR_MAP_ALIGN == 0
    assert tm.bytes() == np.arange(2, 18, dtype="<u8").tobytes()    # the binding's 128 bytes
    assert (tm.shape, tm.box, tm.tries) == ((1024, 64), (64, 4), 1)
    drv.Driver(api).encode_tiled(0x7000, (1 << 20,), (), (256,))
    assert [int(x) for x in api.last("cuTensorMapEncodeTiled")[4]] == [0]


def test_tensor_map_bytes_are_launched_as_the_parameter():
    tm = drv.TensorMap.holding(bytes(range(128)))
    ptrs, _ = drv.pack((tm,))
    assert bindings.host_bytes(int(ptrs[0]), 128) == bytes(range(128)) == tm.bytes()


def test_a_misaligned_binding_descriptor_is_encoded_again():
    api = Api(misaligned=7)
    tm = drv.Driver(api).encode_tiled(0x7000, (1024,), (), (64,))
    assert tm.tries == len([n for n, _ in api.calls if n == "cuTensorMapEncodeTiled"]) <= 8
    assert tm.bytes() == np.arange(1, 17, dtype="<u8").tobytes()


def test_a_rejected_tensor_map_carries_the_driver_error():
    api = Api(fail={"cuTensorMapEncodeTiled": R.CUDA_ERROR_INVALID_VALUE})
    with pytest.raises(drv.TensorMapRejected, match="box \\(300,\\).*CUDA_ERROR_INVALID_VALUE"):
        drv.Driver(api).encode_tiled(0x7000, (1 << 20,), (), (300,))
    # refused at an aligned address: believed at once, never more than ENCODE_TRIES calls
    assert 1 <= len([n for n, _ in api.calls if n == "cuTensorMapEncodeTiled"]) <= \
        drv.ENCODE_TRIES


def test_bindings_of_a_newer_cuda_than_the_driver_are_named():
    from pytest_gpuchar.core import install
    assert install.line("cuda12") in bindings.mismatch("13.5.0", "12.8")
    assert bindings.mismatch("12.9.4", "13.0") == "" == bindings.mismatch("13.0.1", "13.0")
