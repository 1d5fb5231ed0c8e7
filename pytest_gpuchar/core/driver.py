"""What CuPy's launch does not offer, through NVIDIA's CUDA Python bindings (cuda-bindings,
``cuda.bindings.driver``): thread-block cluster launches (cuLaunchKernelEx with a
cluster-dimension attribute), function attributes, the cluster occupancy query and TMA
tensor-map descriptors. ``ClusterLauncher`` launches through the session's ``Gpu``:
ensure_alive before every launch, the caller waits with ``Gpu.wait`` (the watchdog) on the
same stream. A call the driver refuses raises DriverError with the binding's CUresult name."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .bindings import address_of, driver_api, failure
from .gpu import LaunchRefused
from .probe import NotApplicable

CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
CU_TENSOR_MAP_DATA_TYPE_UINT32 = 2
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 128
PORTABLE = 8          # the largest cluster every sm_90 device must launch
# cuda-bindings encodes a tensor map into a CUtensorMap object that CPython allocates 16-byte
# aligned (cuda-python PR 1692), while the driver documents 64 (CUDA 12) / 128 (CUDA 13) for
# the descriptor: a refusal counts only for a descriptor at an aligned address, each retry
# in a fresh object (the refused ones kept alive, so that the next lies elsewhere)
ENCODE_TRIES = 16
SLOT = 8              # bytes per scalar kernel parameter slot (4- and 8-byte parameters)


class DriverError(RuntimeError):
    """A driver call returned an error: the call, the code, the binding's CUresult name and
    the driver's text."""

    def __init__(self, call: str, code: int, name: str, text: str) -> None:
        super().__init__(f"{call} failed: {name} ({code}): {text}")
        self.call, self.code, self.name, self.text = call, code, name, text


class TensorMapRejected(DriverError):
    """cuTensorMapEncodeTiled refused the descriptor."""


@dataclass
class TensorMap:
    """A CUtensorMap (128 bytes) at a 128-byte aligned address inside `buffer` (a NumPy byte
    array this object keeps alive)."""
    buffer: object
    address: int
    shape: tuple = ()
    box: tuple = ()
    tries: int = 1          # cuTensorMapEncodeTiled calls it took (see ENCODE_TRIES)

    @classmethod
    def holding(cls, raw: bytes, shape: tuple = (), box: tuple = ()) -> "TensorMap":
        """The descriptor `raw` copied to a 128-byte aligned address of a buffer of its own."""
        buf = np.zeros(TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN, np.uint8)
        base = address_of(buf)
        at = (base + TENSOR_MAP_ALIGN - 1) // TENSOR_MAP_ALIGN * TENSOR_MAP_ALIGN
        buf[at - base:at - base + TENSOR_MAP_BYTES] = np.frombuffer(raw, np.uint8)
        return cls(buf, at, tuple(shape), tuple(box))

    def bytes(self) -> bytes:
        off = self.address - address_of(self.buffer)
        return self.buffer[off:off + TENSOR_MAP_BYTES].tobytes()


def pack(args) -> tuple[np.ndarray, list]:
    """kernelParams: one pointer per argument to a value of the parameter's size. Accepts
    NumPy 32/64-bit integer scalars, device arrays (anything with .data.ptr) and TensorMaps
    (their 128 bytes). Returns (the pointers as a uint64 array, handed to the binding through
    the buffer protocol; the objects that must outlive the call)."""
    n = max(1, len(args))
    slots = np.zeros(n, np.uint64)          # 8 bytes per value, 8-byte aligned
    ptrs = np.zeros(n, np.uint64)
    keep: list = [slots]
    base = address_of(slots)
    for k, a in enumerate(args):
        if isinstance(a, TensorMap):
            keep.append(a)
            ptrs[k] = a.address
            continue
        if hasattr(a, "data") and hasattr(a.data, "ptr"):
            slots[k] = np.uint64(int(a.data.ptr))
        elif isinstance(a, (np.uint32, np.int32, np.uint64, np.int64)):
            # little-endian: a 4-byte value in the low half of its slot, where it points
            slots.view(a.dtype)[k * SLOT // a.dtype.itemsize] = a
        else:
            raise TypeError(f"kernel argument {a!r}: give a NumPy 32/64-bit scalar, a device "
                            f"array or a TensorMap (the parameter's size must be explicit)")
        ptrs[k] = base + k * SLOT
    return ptrs, keep


def launch_config(grid: tuple, block: tuple, shared_mem: int, stream: int,
                  cluster: int | None, api=None) -> tuple[object, list]:
    """(CUlaunchConfig, its attributes). cluster None: no cluster attribute. `api`: the
    driver bindings (default cuda.bindings.driver)."""
    api = api if api is not None else driver_api()
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    cfg = api.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = (int(x) for x in g)
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = (int(x) for x in b)
    cfg.sharedMemBytes = int(shared_mem)
    cfg.hStream = api.CUstream(int(stream))
    attrs = []
    if cluster is not None:
        attr = api.CUlaunchAttribute()
        attr.id = api.CUlaunchAttributeID(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
        dim = attr.value.clusterDim
        dim.x, dim.y, dim.z = int(cluster), 1, 1
        attrs.append(attr)
    cfg.attrs = attrs
    cfg.numAttrs = len(attrs)
    return cfg, attrs


def tensor_map_args(api, address: int, dims: tuple[int, ...], strides: tuple[int, ...],
                    box: tuple[int, ...], dtype: int) -> tuple:
    """cuTensorMapEncodeTiled's arguments: no interleave, no swizzle, no L2 promotion, no OOB
    fill, element strides 1; a rank-1 map still passes one (ignored) global stride."""
    rank = len(dims)
    return (api.CUtensorMapDataType(dtype), rank, int(address),
            [api.cuuint64_t(int(d)) for d in dims],
            [api.cuuint64_t(int(s)) for s in (strides or (0,))],
            [api.cuuint32_t(int(x)) for x in box], [api.cuuint32_t(1)] * rank,
            api.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            api.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
            api.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
            api.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)


def descriptor_bytes(tmap) -> bytes:
    """The 128 bytes of a binding's CUtensorMap (its 16 opaque 64-bit words)."""
    words = np.array([int(w) for w in tmap.opaque], dtype="<u8")
    return words.tobytes()


class Driver:
    """The driver calls the topic needs (`lib`: the driver bindings, cuda.bindings.driver by
    default, or a stand-in with the same calls in unit tests)."""

    def __init__(self, lib=None) -> None:
        self.lib = lib if lib is not None else driver_api()

    def check(self, call: str, code, cls=DriverError) -> None:
        if int(code) == 0:
            return
        num, name, text, _ = failure(self.lib, call, code)
        raise cls(call, num, name, text)

    def set_attribute(self, fn: int, attr: int, value: int) -> None:
        api = self.lib
        err, = api.cuFuncSetAttribute(api.CUfunction(int(fn)), api.CUfunction_attribute(attr),
                                      int(value))
        self.check(f"cuFuncSetAttribute({attr}, {value})", err)

    def max_active_clusters(self, fn: int, cluster: int, block: tuple, shared_mem: int) -> int:
        api = self.lib
        cfg, _attrs = launch_config((cluster,), block, shared_mem, 0, cluster, api)
        err, n = api.cuOccupancyMaxActiveClusters(api.CUfunction(int(fn)), cfg)
        self.check("cuOccupancyMaxActiveClusters", err)
        return int(n)

    def launch(self, fn: int, grid: tuple, block: tuple, args, *, cluster: int | None,
               shared_mem: int, stream: int) -> None:
        api = self.lib
        cfg, _attrs = launch_config(grid, block, shared_mem, stream, cluster, api)
        params, _keep = pack(args)
        err, = api.cuLaunchKernelEx(cfg, api.CUfunction(int(fn)), params, 0)
        self.check("cuLaunchKernelEx", err)

    def encode_tiled(self, address: int, dims: tuple[int, ...], strides: tuple[int, ...],
                     box: tuple[int, ...], dtype: int = CU_TENSOR_MAP_DATA_TYPE_UINT32
                     ) -> TensorMap:
        """A tiled tensor map (no interleave, no swizzle, no L2 promotion, no OOB fill) of
        `dims` elements (innermost first), byte `strides` of the outer dimensions, `box`;
        its 128 bytes copied to an aligned address of the returned TensorMap."""
        api = self.lib
        args = tensor_map_args(api, address, dims, strides, box, dtype)
        refused_here = []            # kept alive: the next try is allocated elsewhere
        for tries in range(1, ENCODE_TRIES + 1):
            err, tmap = api.cuTensorMapEncodeTiled(*args)
            if int(err) == 0 or tmap.getPtr() % TENSOR_MAP_ALIGN == 0:
                break
            refused_here.append(tmap)
        self.check(f"cuTensorMapEncodeTiled(rank {len(dims)}, dims {dims}, strides {strides}, "
                   f"box {box})", err, TensorMapRejected)
        tm = TensorMap.holding(descriptor_bytes(tmap), tuple(dims), tuple(box))
        tm.tries = tries
        return tm


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
