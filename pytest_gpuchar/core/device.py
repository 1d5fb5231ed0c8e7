"""The GPU present, detected lazily (CuPy is imported only when something asks), once.

``detect()`` returns a DeviceInfo or a Absent carrying the reason (CuPy or NVIDIA's CUDA
bindings not installed, no driver, no device), so hardware tests skip with that reason in the
summary. The board's state (clocks, throttle reasons, power, ECC, PCIe, MIG) is read through
NVML when the device is detected (``DeviceInfo.board``, see nvml.py).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import bindings, install, nvml


@dataclass
class Absent:
    reason: str

    def __bool__(self) -> bool:
        return False


@dataclass
class DeviceInfo:
    index: int
    name: str
    arch: str
    sm_count: int
    l2_bytes: int
    shared_per_sm: int
    memory_bytes: int
    sm_clock_max_mhz: float | None
    sm_clock_now_mhz: float | None
    mem_clock_mhz: float | None
    driver: str            # e.g. "580.95.05" (NVML) or "13.0" (CUDA driver API)
    cuda_driver_api: str   # "13.0"
    cuda_runtime: str
    extra: dict = field(default_factory=dict)
    # memory suite (issue 3): unified L1/shared bytes per SM (L1_SHARED_BYTES, by arch; 0 when
    # unknown), the largest shared memory one block may opt in to, free device memory when
    # detected (cudaMemGetInfo); all optional, the memory suite falls back when they are 0/None
    l1_shared_bytes: int = 0
    max_shared_per_block_optin: int = 0
    free_memory_bytes: int | None = None
    uuid: str = ""         # GPU-xxxxxxxx-...: tells boards of one model apart in a fleet
    pci_bus_id: str = ""   # 0000:1B:00.0: how NVML finds the board when the UUID does not
    board: dict = field(default_factory=dict)   # nvml.read() when the device was detected

    def __bool__(self) -> bool:
        return True

    def header_lines(self) -> list[str]:
        now = "?" if self.sm_clock_now_mhz is None else f"{self.sm_clock_now_mhz:.0f}"
        clk = (f"SM clock {now} MHz now / {self.sm_clock_max_mhz:.0f} max"
               if self.sm_clock_max_mhz else "SM clock unknown")
        return [f"GPU {self.index}{f' {self.uuid}' if self.uuid else ''}: {self.name} "
                f"({self.arch}), {self.sm_count} SMs, {clk}, "
                f"L2 {self.l2_bytes / 2**20:.0f} MiB, smem/SM {self.shared_per_sm // 1024} KiB",
                f"driver {self.driver} (CUDA driver API {self.cuda_driver_api}), "
                f"CUDA runtime {self.cuda_runtime}"] + (
                    [f"board (NVML): {nvml.summary(self.board)}"] if self.board else [])

    def provenance(self, **extra) -> dict:
        from . import toolchain
        try:
            ptxas = toolchain.find("ptxas", self.arch).version
        except Exception:  # noqa: BLE001 - provenance must never fail a run
            ptxas = "none"
        p = {"device": self.name, "device_index": self.index, "uuid": self.uuid,
             "arch": self.arch, "sm_count": self.sm_count,
             "driver": self.driver, "cuda_driver_api": self.cuda_driver_api,
             "cuda_runtime": self.cuda_runtime, "ptxas": ptxas,
             "sm_clock_max_mhz": self.sm_clock_max_mhz,
             "date": nvml.now()}
        p.update(extra)
        return p


# Unified L1 data cache + shared memory per SM, by compute capability (CUDA C++ Programming
# Guide, "Compute Capabilities" tables and the per-architecture tuning guides). No device
# attribute reports it; cudaDevAttrMaxSharedMemoryPerMultiprocessor is only the shared part.
L1_SHARED_BYTES = {"sm_50": 24 * 1024, "sm_52": 48 * 1024, "sm_61": 48 * 1024,
                   "sm_70": 128 * 1024, "sm_75": 96 * 1024, "sm_80": 192 * 1024,
                   "sm_86": 128 * 1024, "sm_87": 192 * 1024, "sm_89": 128 * 1024,
                   "sm_90": 256 * 1024}


def free_memory(index: int | None = None) -> int | None:
    """Free device memory now (bytes), or None if it cannot be read."""
    try:
        from cupy.cuda import runtime
        if index is not None:
            runtime.setDevice(index)
        return int(runtime.memGetInfo()[0])
    except Exception:  # noqa: BLE001 - optional
        return None


def _version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _pci_bus_id(index: int) -> str:
    try:
        from cupy.cuda import runtime
        return str(runtime.deviceGetPCIBusId(index))
    except Exception:  # noqa: BLE001 - optional: NVML then matches by UUID alone
        return ""


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) else None


def disabled(env: Mapping[str, str] | None = None) -> str | None:
    """Why `detect` finds no GPU in an environment (`env`, default this process's) before
    it touches CUDA: GPUCHAR_NO_GPU set. None: detect would look."""
    return "GPUCHAR_NO_GPU is set" if (os.environ if env is None else env).get(
        "GPUCHAR_NO_GPU") else None


def detect(index: int | None = None) -> DeviceInfo | Absent:
    if why := disabled():
        return Absent(why)
    if index is None:
        index = int(os.environ.get("GPUCHAR_DEVICE", "0"))
    try:
        import cupy  # noqa: F401
        from cupy.cuda import runtime
    except Exception as e:  # noqa: BLE001 - any import failure means "no usable GPU"
        return Absent(f"no GPU: CuPy is not importable ({type(e).__name__}: {e}); "
                      f"{install.line('cuda13')} on a machine with an NVIDIA GPU")
    try:
        n = runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        return Absent(f"no GPU: the CUDA driver reports none ({e})")
    if n == 0:
        return Absent("no GPU: the CUDA driver reports 0 devices")
    if index >= n:
        return Absent(f"no GPU {index}: only {n} device(s)")
    try:
        bindings.driver_api()
    except bindings.BindingsMissing as e:
        return Absent(f"no GPU driver bindings: {e}")
    why = bindings.mismatch(bindings.version(), _version(runtime.driverGetVersion()))
    if why:
        return Absent(f"no usable GPU driver bindings: {why}")
    runtime.setDevice(index)
    props = runtime.getDeviceProperties(index)

    def attr(name: str, default=None):
        try:
            return runtime.deviceGetAttribute(getattr(runtime, name), index)
        except Exception:  # noqa: BLE001
            return default

    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    arch = f"sm_{props['major']}{props['minor']}"
    uuid, pci = _uuid(props) or _driver_uuid(index), _pci_bus_id(index)
    board = nvml.read(uuid=uuid, pci_bus_id=pci)
    clock_khz = attr("cudaDevAttrClockRate")
    smax = _number(board.get("sm_max_mhz")) or (clock_khz / 1000 if clock_khz else None)
    return DeviceInfo(
        index=index, name=name, arch=arch, sm_count=int(props["multiProcessorCount"]),
        l2_bytes=int(props["l2CacheSize"]),
        shared_per_sm=int(props.get("sharedMemPerMultiprocessor", 0)),
        memory_bytes=int(props["totalGlobalMem"]),
        sm_clock_max_mhz=smax, sm_clock_now_mhz=_number(board.get("sm_mhz")),
        mem_clock_mhz=_number(board.get("mem_mhz")),
        driver=board.get("driver") or _version(runtime.driverGetVersion()),
        cuda_driver_api=_version(runtime.driverGetVersion()),
        cuda_runtime=_version(runtime.runtimeGetVersion()),
        l1_shared_bytes=L1_SHARED_BYTES.get(arch, 0),
        max_shared_per_block_optin=int(attr("cudaDevAttrMaxSharedMemoryPerBlockOptin", 0) or 0),
        free_memory_bytes=free_memory(index),
        uuid=uuid or str(board.get("uuid") or ""), pci_bus_id=pci, board=board,
    )


def _uuid(props: dict) -> str:
    """The device's UUID as NVML and the driver tools print it (GPU-8-4-4-4-12 hex), or ""."""
    raw = props.get("uuid")
    if not isinstance(raw, (bytes, bytearray)) or len(raw) != 16:
        return ""
    h = bytes(raw).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _driver_uuid(index: int, api=None) -> str:
    """The UUID from the driver API (cuDeviceGetUuid through cuda-bindings), for when CuPy's
    properties lack it: CuPy reads the 16-byte uuid field as a C string, cut at its first zero
    byte (a UUID with a zero byte early came back short: docs/run-time.md, lab notes)."""
    try:
        api = api if api is not None else bindings.driver_api()
        err, = api.cuInit(0)
        if int(err):
            return ""
        err, dev = api.cuDeviceGet(index)
        if int(err):
            return ""
        err, raw = api.cuDeviceGetUuid(dev)
        return "" if int(err) else _uuid({"uuid": bytes(raw.bytes)})
    except Exception:  # noqa: BLE001 - no bindings or no driver: the UUID stays unknown
        return ""


def device_count() -> int:
    """GPUs the CUDA driver shows this process (CUDA_VISIBLE_DEVICES applies), 0 if none."""
    try:
        from cupy.cuda import runtime
        return int(runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device
        return 0


def worker_device(worker: int, count: int | None = None) -> int | None:
    """GPU index for pytest-xdist worker N: GPU N of those visible (indices are those of
    CUDA_VISIBLE_DEVICES's list); None when N is not below their number: that worker has no
    GPU of its own (two workers on one GPU would time each other's kernels)."""
    n = device_count() if count is None else count
    return worker if worker < n else None
