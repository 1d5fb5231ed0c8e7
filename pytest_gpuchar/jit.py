"""JIT through the CUDA driver: cuLinkCreate / cuLinkAddData / cuLinkComplete return the cubin
the driver's own compiler produced (the code that actually runs), with the JIT's info and
error logs. Compiled probes are cached by (PTX hash, driver version).

The link calls go through ctypes on libcuda so the JIT logs can be captured; CuPy (which shares
the primary context) loads and launches the cubin.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
from dataclasses import dataclass

CU_JIT_INFO_LOG_BUFFER = 3
CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
CU_JIT_LOG_VERBOSE = 12
CU_JIT_INPUT_PTX = 1
LOG_BYTES = 1 << 16


class JITError(RuntimeError):
    """The driver's JIT rejected a probe; the message holds the JIT log."""


@dataclass
class Compiled:
    cubin: bytes
    info_log: str
    module: object      # cupy.cuda.function.Module
    driver: str

    def function(self, name: str):
        return self.module.get_function(name)


_lib = None


def _libcuda():
    global _lib
    if _lib is None:
        name = ctypes.util.find_library("cuda") or "libcuda.so.1"
        _lib = ctypes.CDLL(name)
    return _lib


def _check(lib, res: int, what: str, log: str = "") -> None:
    if res != 0:
        s = ctypes.c_char_p()
        lib.cuGetErrorString(res, ctypes.byref(s))
        msg = s.value.decode() if s.value else f"CUresult {res}"
        raise JITError(f"{what} failed: {msg}" + (f"\nJIT log:\n{log}" if log else ""))


def link(ptx: str, name: str = "probe.ptx") -> tuple[bytes, str]:
    """JIT `ptx` for the current context's device; returns (cubin, info log)."""
    from cupy.cuda import runtime
    runtime.getDevice()
    # make the device's primary context current in this thread without allocating: a
    # 1-byte cudaMalloc here (from the background JIT threads too) shifted where the memory
    # suite's buffers landed (H100: the L1 fill sweep's region moved to the far L2 partition)
    runtime.free(0)
    lib = _libcuda()
    info = ctypes.create_string_buffer(LOG_BYTES)
    err = ctypes.create_string_buffer(LOG_BYTES)
    opts = (ctypes.c_int * 5)(CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                              CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                              CU_JIT_LOG_VERBOSE)
    vals = (ctypes.c_void_p * 5)(ctypes.cast(info, ctypes.c_void_p).value, LOG_BYTES,
                                 ctypes.cast(err, ctypes.c_void_p).value, LOG_BYTES, 1)
    state = ctypes.c_void_p()
    create = getattr(lib, "cuLinkCreate_v2", None) or lib.cuLinkCreate
    _check(lib, create(5, opts, vals, ctypes.byref(state)), "cuLinkCreate")
    try:
        data = ptx.encode() + b"\0"
        add = getattr(lib, "cuLinkAddData_v2", None) or lib.cuLinkAddData
        add.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                        ctypes.c_char_p, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
        res = add(state, CU_JIT_INPUT_PTX, data, len(data), name.encode(), 0, None, None)
        _check(lib, res, f"cuLinkAddData({name})", err.value.decode(errors="replace"))
        cubin_ptr = ctypes.c_void_p()
        size = ctypes.c_size_t()
        res = lib.cuLinkComplete(state, ctypes.byref(cubin_ptr), ctypes.byref(size))
        _check(lib, res, f"cuLinkComplete({name})", err.value.decode(errors="replace"))
        cubin = ctypes.string_at(cubin_ptr, size.value)
    finally:
        lib.cuLinkDestroy(state)
    return cubin, info.value.decode(errors="replace")


_CACHE: dict[tuple[str, str], Compiled] = {}
_PENDING: dict[tuple[str, str], object] = {}     # key -> Future of link(), see prefetch
_POOL = None
POOL_THREADS = 16      # driver JIT links run in parallel (H100 host: 6 links 34 s in turn, 13 s)


def _key(ptx: str, driver: str) -> tuple[str, str]:
    return hashlib.sha256(ptx.encode()).hexdigest(), driver


def prefetch(modules: list[tuple[str, str]], driver: str, device_index: int) -> None:
    """Start the driver JIT of these (PTX, name) modules in background threads, so that the
    links of the topics' modules (seconds each, CPU-bound in the driver, the GIL released)
    overlap each other and the tests that run meanwhile. compile_probe takes the cubin from
    here when it is asked for that module; a link that failed in the background is simply
    linked again in the caller's thread, which then reports the error itself."""
    global _POOL
    from concurrent.futures import ThreadPoolExecutor
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix="gpuchar-jit")

    def work(ptx: str, name: str):
        from cupy.cuda import runtime
        runtime.setDevice(device_index)     # this thread's current context: the device's
        return link(ptx, name)

    for ptx, name in modules:
        key = _key(ptx, driver)
        if key not in _CACHE and key not in _PENDING:
            _PENDING[key] = _POOL.submit(work, ptx, name)


def chunk_count() -> int:
    """How many parts a large batch of kernels is split into, so that the parts compile in
    parallel (ptxas processes offline, driver JIT links in threads: on an H100 host the
    instruction tables linked in 12.4 s whole and 2.0 s as 8 parts in threads, ptxas +
    nvdisasm took 15.2 s whole and 3.9 s as 8 parallel parts). One per two cores, at most 8:
    CI's 2 cores keep one part (each arch's batch already runs in parallel there)."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


def chunks(items: list, n: int | None = None) -> list[list]:
    """`items` dealt round-robin into n non-empty parts (deterministic for a given n)."""
    n = max(1, min(n or chunk_count(), len(items)))
    return [items[i::n] for i in range(n)]


def compile_all(modules: list[tuple[str, str]], driver: str, device_index: int) -> list:
    """compile_probe for every (PTX, name), the links run in parallel threads; returns, in
    order, a Compiled or the exception that module's link raised (in this thread)."""
    prefetch(modules, driver, device_index)
    out = []
    for ptx, name in modules:
        try:
            out.append(compile_probe(ptx, driver, name))
        except Exception as e:      # noqa: BLE001 - returned: the caller decides
            out.append(e)
    return out


def compile_probe(ptx: str, driver: str, name: str = "probe.ptx") -> Compiled:
    """JIT + load, cached by (PTX hash, driver version)."""
    key = _key(ptx, driver)
    if key in _CACHE:
        return _CACHE[key]
    from cupy.cuda import function
    pending = _PENDING.pop(key, None)
    try:
        cubin, info = pending.result() if pending is not None else link(ptx, name)
    except Exception:               # noqa: BLE001 - relinked here: the error names itself
        if pending is None:
            raise
        cubin, info = link(ptx, name)
    mod = function.Module()
    mod.load(cubin)
    out = Compiled(cubin, info, mod, driver)
    _CACHE[key] = out
    return out
