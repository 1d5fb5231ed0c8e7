"""What CuPy's launch does not offer, through the CUDA driver API by ctypes on libcuda:
thread-block cluster launches (cuLaunchKernelEx with a cluster-dimension attribute), function
attributes, the cluster occupancy query and TMA tensor-map descriptors. ``ClusterLauncher``
launches through the session's ``Gpu``: ensure_alive before every launch, the caller waits
with ``Gpu.wait`` (the watchdog) on the same stream."""
from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass, field

import numpy as np

from .gpu import LaunchRefused
from .probe import NotApplicable

CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
CU_TENSOR_MAP_DATA_TYPE_UINT32 = 2
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 128
PORTABLE = 8          # the largest cluster every sm_90 device must launch


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class AttrValue(ctypes.Union):
    """CUlaunchAttributeValue: 64 bytes, 8-byte aligned (it holds pointers elsewhere)."""
    _fields_ = [("pad", ctypes.c_char * 64), ("cluster", Dim3), ("align", ctypes.c_uint64)]


class LaunchAttr(ctypes.Structure):
    """CUlaunchAttribute: id, 4 bytes of padding, the value."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", AttrValue)]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttr)), ("numAttrs", ctypes.c_uint)]


class DriverError(RuntimeError):
    """A driver call returned an error: the call, the code, the driver's name and text."""

    def __init__(self, call: str, code: int, name: str, text: str) -> None:
        super().__init__(f"{call} failed: {name} ({code}): {text}")
        self.call, self.code, self.name, self.text = call, code, name, text


class TensorMapRejected(DriverError):
    """cuTensorMapEncodeTiled refused the descriptor."""


def load_libcuda():
    return ctypes.CDLL(ctypes.util.find_library("cuda") or "libcuda.so.1")


@dataclass
class TensorMap:
    """A CUtensorMap (128 bytes) at a 128-byte aligned address inside `buffer`."""
    buffer: object
    address: int
    shape: tuple = ()
    box: tuple = ()

    def bytes(self) -> bytes:
        return ctypes.string_at(self.address, TENSOR_MAP_BYTES)


def pack(args) -> tuple[ctypes.Array, list]:
    """kernelParams: one pointer per argument to a C value of the parameter's size. Accepts
    NumPy 32/64-bit integer scalars, device arrays (anything with .data.ptr) and TensorMaps
    (their 128 bytes). Returns (void* array, the objects that must outlive the call)."""
    keep: list = []
    for a in args:
        if isinstance(a, TensorMap):
            keep.append(a)
            continue
        if hasattr(a, "data") and hasattr(a.data, "ptr"):
            keep.append(ctypes.c_uint64(int(a.data.ptr)))
        elif isinstance(a, (np.uint32, np.int32)):
            keep.append((ctypes.c_uint32 if isinstance(a, np.uint32) else ctypes.c_int32)(int(a)))
        elif isinstance(a, (np.uint64, np.int64)):
            keep.append((ctypes.c_uint64 if isinstance(a, np.uint64) else ctypes.c_int64)(int(a)))
        else:
            raise TypeError(f"kernel argument {a!r}: give a NumPy 32/64-bit scalar, a device "
                            f"array or a TensorMap (the parameter's size must be explicit)")
    ptrs = (ctypes.c_void_p * max(1, len(keep)))()
    for k, v in enumerate(keep):
        ptrs[k] = v.address if isinstance(v, TensorMap) else ctypes.addressof(v)
    return ptrs, keep


def launch_config(grid: tuple, block: tuple, shared_mem: int, stream: int,
                  cluster: int | None) -> tuple[LaunchConfig, object]:
    """(config, the attribute array it points to). cluster None: no cluster attribute."""
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    attrs = (LaunchAttr * 1)()
    n = 0
    if cluster is not None:
        attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attrs[0].value.cluster = Dim3(cluster, 1, 1)
        n = 1
    cfg = LaunchConfig(g[0], g[1], g[2], b[0], b[1], b[2], shared_mem, ctypes.c_void_p(stream),
                       ctypes.cast(attrs, ctypes.POINTER(LaunchAttr)), n)
    return cfg, attrs


class Driver:
    """The driver calls the topic needs (`lib`: libcuda, or a stand-in in unit tests)."""

    def __init__(self, lib=None) -> None:
        self.lib = lib if lib is not None else load_libcuda()
        L = self.lib
        L.cuLaunchKernelEx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_void_p]
        L.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        L.cuOccupancyMaxActiveClusters.argtypes = [ctypes.POINTER(ctypes.c_int),
                                                   ctypes.c_void_p, ctypes.c_void_p]
        L.cuTensorMapEncodeTiled.argtypes = [
            ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32), ctypes.c_int,
            ctypes.c_int, ctypes.c_int, ctypes.c_int]

    def check(self, call: str, code: int, cls=DriverError) -> None:
        if code == 0:
            return
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self.lib.cuGetErrorName(code, ctypes.byref(name))
        self.lib.cuGetErrorString(code, ctypes.byref(text))
        raise cls(call, code, (name.value or b"CUDA_ERROR_?").decode(),
                  (text.value or b"no description").decode())

    def set_attribute(self, fn: int, attr: int, value: int) -> None:
        self.check(f"cuFuncSetAttribute({attr}, {value})",
                   self.lib.cuFuncSetAttribute(ctypes.c_void_p(fn), attr, value))

    def max_active_clusters(self, fn: int, cluster: int, block: tuple, shared_mem: int) -> int:
        cfg, _attrs = launch_config((cluster,), block, shared_mem, 0, cluster)
        n = ctypes.c_int(0)
        self.check("cuOccupancyMaxActiveClusters", self.lib.cuOccupancyMaxActiveClusters(
            ctypes.byref(n), ctypes.c_void_p(fn), ctypes.byref(cfg)))
        return int(n.value)

    def launch(self, fn: int, grid: tuple, block: tuple, args, *, cluster: int | None,
               shared_mem: int, stream: int) -> None:
        cfg, _attrs = launch_config(grid, block, shared_mem, stream, cluster)
        params, _keep = pack(args)
        self.check("cuLaunchKernelEx", self.lib.cuLaunchKernelEx(
            ctypes.byref(cfg), ctypes.c_void_p(fn), params, None))

    def encode_tiled(self, address: int, dims: tuple[int, ...], strides: tuple[int, ...],
                     box: tuple[int, ...], dtype: int = CU_TENSOR_MAP_DATA_TYPE_UINT32
                     ) -> TensorMap:
        """A tiled tensor map (no interleave, no swizzle, no L2 promotion, no OOB fill) of
        `dims` elements (innermost first), byte `strides` of the outer dimensions, `box`."""
        rank = len(dims)
        buf = (ctypes.c_uint8 * (TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN))()
        at = (ctypes.addressof(buf) + TENSOR_MAP_ALIGN - 1) // TENSOR_MAP_ALIGN * TENSOR_MAP_ALIGN
        g = (ctypes.c_uint64 * rank)(*dims)
        s = (ctypes.c_uint64 * max(1, rank - 1))(*(strides or (0,)))
        b = (ctypes.c_uint32 * rank)(*box)
        e = (ctypes.c_uint32 * rank)(*([1] * rank))
        self.check(f"cuTensorMapEncodeTiled(rank {rank}, dims {dims}, strides {strides}, "
                   f"box {box})", self.lib.cuTensorMapEncodeTiled(
                       ctypes.c_void_p(at), dtype, rank, ctypes.c_void_p(address), g, s, b, e,
                       0, 0, 0, 0), TensorMapRejected)
        return TensorMap(buf, at, tuple(dims), tuple(box))


@dataclass
class ClusterLauncher:
    """Launches of one session through cuLaunchKernelEx, on CuPy's current stream (so that
    the Gpu's wait covers them); function attributes set once per function."""
    gpu: object                      # core.gpu.Gpu
    driver: Driver = field(default_factory=Driver)
    _prepared: dict = field(default_factory=dict)

    @staticmethod
    def stream() -> int:
        import cupy as cp
        return int(cp.cuda.get_current_stream().ptr)

    def prepare(self, fn, name: str, shared_mem: int = 0, cluster: int | None = None) -> None:
        """Allow `shared_mem` bytes of dynamic shared memory and, for clusters of more than
        PORTABLE CTAs, the non-portable sizes; a setting the device refuses: NotApplicable
        with the driver's reason."""
        wide = bool(cluster and cluster > PORTABLE)
        key = (int(fn.ptr), shared_mem, wide)
        if key in self._prepared:
            return
        try:
            if wide:
                self.driver.set_attribute(
                    int(fn.ptr), CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
            if shared_mem:
                self.driver.set_attribute(
                    int(fn.ptr), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_mem)
        except DriverError as e:
            raise NotApplicable(f"hardware: {name}: {shared_mem} B of dynamic shared memory "
                                f"per CTA{' / clusters of ' + str(cluster) if wide else ''} "
                                f"cannot be set: {e}") from None
        self._prepared[key] = True

    def clusters(self, fn, name: str, cluster: int, block: tuple, shared_mem: int) -> int:
        """How many clusters of `cluster` CTAs can be resident at once (the driver's occupancy
        query); NotApplicable with the driver's answer when none can."""
        self.prepare(fn, name, shared_mem, cluster)
        what = (f"clusters of {cluster} CTAs of {block[0]} threads and {shared_mem} B dynamic "
                f"shared memory")
        try:
            n = self.driver.max_active_clusters(int(fn.ptr), cluster, block, shared_mem)
        except DriverError as e:
            raise NotApplicable(f"hardware: {name}: {what} cannot launch: {e}") from None
        if n < 1:
            raise NotApplicable(f"hardware: {name}: {what} cannot launch: "
                                f"cuOccupancyMaxActiveClusters reports 0 active clusters")
        return n

    def launch(self, fn, grid: tuple, block: tuple, args, *, name: str,
               cluster: int | None = None, shared_mem: int = 0) -> None:
        """Enqueue one launch (cluster None: a plain launch); refused: LaunchRefused."""
        self.gpu.ensure_alive(name)
        self.prepare(fn, name, shared_mem, cluster)
        try:
            self.driver.launch(int(fn.ptr), grid, block, args, cluster=cluster,
                               shared_mem=shared_mem, stream=self.stream())
        except DriverError as e:
            raise LaunchRefused(f"{name}: launch refused (grid {grid}, block {block}, "
                                f"cluster {cluster}, {shared_mem} B shared): {e}") from e
