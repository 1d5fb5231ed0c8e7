"""JIT through the CUDA driver: cuLinkCreate / cuLinkAddData / cuLinkComplete return the cubin
the driver's own compiler produced (the code that actually runs), with the JIT's info and
error logs. Compiled probes are cached by (PTX hash, driver version).

The link calls go through NVIDIA's CUDA Python bindings (cuda.bindings.driver), which capture
the JIT logs in buffers of ours and release the GIL while the driver compiles; CuPy (which
shares the primary context) loads and launches the cubin.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from . import timing
from .bindings import driver_api, failure, host_bytes

# the JIT options, in the order and with the values every probe has been linked with
# (CUjit_option numbers): info log, its size, error log, its size, verbose log
CU_JIT_INFO_LOG_BUFFER = 3
CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
CU_JIT_LOG_VERBOSE = 12
CU_JIT_OPTIMIZATION_LEVEL = 7
CU_JIT_INPUT_PTX = 1
LOG_BYTES = 1 << 16
# the driver JIT's optimisation level (0-4; the driver's default, 4, when unset): a stand-in
# for a compiler change in the nightly's fault test (results/sm_90/gate.md)
OPT_LEVEL_ENV = "GPUCHAR_JIT_OPT_LEVEL"


def opt_level() -> int | None:
    """$GPUCHAR_JIT_OPT_LEVEL as an int 0..4, None when unset; JITError naming it otherwise."""
    raw = os.environ.get(OPT_LEVEL_ENV, "").strip()
    if not raw:
        return None
    if raw not in ("0", "1", "2", "3", "4"):
        raise JITError(f"{OPT_LEVEL_ENV}={raw!r}: the driver JIT's optimisation level is 0, 1, "
                       f"2, 3 or 4 (unset: the driver's default)")
    return int(raw)


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


def _check(api, res, what: str, log: str = "") -> None:
    if int(res) != 0:
        msg = failure(api, what, res)[3]
        raise JITError(msg + (f"\nJIT log:\n{log}" if log else ""))


def log_text(buf: bytearray) -> str:
    """A JIT log buffer's text (up to its first NUL)."""
    return bytes(buf).split(b"\0", 1)[0].decode(errors="replace")


def jit_options(api, info: bytearray, err: bytearray) -> tuple[list, list]:
    """(options, values) of cuLinkCreate: the logs written into `info` and `err`."""
    opt = api.CUjit_option
    opts = [opt(CU_JIT_INFO_LOG_BUFFER), opt(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES),
            opt(CU_JIT_ERROR_LOG_BUFFER), opt(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES),
            opt(CU_JIT_LOG_VERBOSE)]
    vals = [info, LOG_BYTES, err, LOG_BYTES, 1]
    level = opt_level()
    if level is not None:
        opts.append(opt(CU_JIT_OPTIMIZATION_LEVEL))
        vals.append(level)
    return opts, vals


def link(ptx: str, name: str = "probe.ptx") -> tuple[bytes, str]:
    """JIT `ptx` for the current context's device; returns (cubin, info log)."""
    from cupy.cuda import runtime
    runtime.getDevice()
    # make the device's primary context current in this thread without allocating: a
    # 1-byte cudaMalloc here (from the background JIT threads too) shifted where the memory
    # suite's buffers landed, and with them its figures (docs/run-time.md, lab notes)
    runtime.free(0)
    return link_with(driver_api(), ptx, name)


def link_with(api, ptx: str, name: str = "probe.ptx") -> tuple[bytes, str]:
    """cuLinkCreate / cuLinkAddData / cuLinkComplete through the bindings `api` in the current
    context; the cubin copied out of the link state before it is destroyed."""
    info, err = bytearray(LOG_BYTES), bytearray(LOG_BYTES)   # alive until cuLinkDestroy
    opts, vals = jit_options(api, info, err)
    res, state = api.cuLinkCreate(len(opts), opts, vals)
    _check(api, res, "cuLinkCreate")
    try:
        data = ptx.encode() + b"\0"
        res, = api.cuLinkAddData(state, api.CUjitInputType(CU_JIT_INPUT_PTX), data, len(data),
                                 name.encode(), 0, None, None)
        _check(api, res, f"cuLinkAddData({name})", log_text(err))
        res, cubin_ptr, size = api.cuLinkComplete(state)
        _check(api, res, f"cuLinkComplete({name})", log_text(err))
        cubin = host_bytes(int(cubin_ptr), int(size))
    finally:
        api.cuLinkDestroy(state)
    return cubin, log_text(info)


POOL_THREADS = 16      # driver JIT links run in parallel (docs/run-time.md, lab notes)


def module_key(ptx: str, driver: str) -> tuple[str, str]:
    level = opt_level()
    return hashlib.sha256(ptx.encode()).hexdigest(), \
        driver if level is None else f"{driver} -O{level}"


def chunk_count() -> int:
    """How many parts a large batch of kernels is split into, so that the parts compile in
    parallel (ptxas processes offline, driver JIT links in threads: 8 parts took a fraction
    of one whole batch's time, docs/run-time.md, lab notes). One per two cores, at most 8:
    CI's 2 cores keep one part (each arch's batch already runs in parallel there)."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


def chunks(items: list, n: int | None = None) -> list[list]:
    """`items` dealt round-robin into n non-empty parts (deterministic for a given n)."""
    n = max(1, min(n or chunk_count(), len(items)))
    return [items[i::n] for i in range(n)]


class JitCache:
    """Driver-JIT modules of one session, cached by (PTX hash, driver version); links can be
    started in background threads (prefetch) so that the topics' links (seconds each,
    CPU-bound in the driver, the GIL released) overlap each other and the tests that run
    meanwhile."""

    def __init__(self, device_index: int = 0) -> None:
        self.device_index = device_index
        self._done: dict[tuple[str, str], Compiled] = {}
        self._pending: dict[tuple[str, str], object] = {}   # key -> Future of link()
        self._links: dict[tuple[str, str], object] = {}     # every prefetched link's Future
        self._pool = None

    def prefetch(self, modules: list[tuple[str, str]], driver: str) -> None:
        """Start linking these (PTX, name) modules in background threads. `compile` takes
        the cubin from here; a link that failed in the background is linked again in the
        caller's thread, which then reports the error itself."""
        from concurrent.futures import ThreadPoolExecutor
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=POOL_THREADS,
                                            thread_name_prefix="gpuchar-jit")
        index = self.device_index

        def work(ptx: str, name: str):
            from cupy.cuda import runtime
            runtime.setDevice(index)     # this thread's current context: the device's
            return link(ptx, name)

        for ptx, name in modules:
            key = module_key(ptx, driver)
            if key not in self._done and key not in self._pending:
                self._pending[key] = self._links[key] = self._pool.submit(work, ptx, name)

    def linked_cubin(self, ptx: str, driver: str) -> bytes | None:
        """The cubin of a module once linked (waits for a prefetched link; None when it was
        neither linked nor prefetched, or its background link failed)."""
        key = module_key(ptx, driver)
        done = self._done.get(key)
        if done is not None:
            return done.cubin
        pending = self._links.get(key)
        if pending is None:
            return None
        try:
            return pending.result()[0]
        except Exception:               # noqa: BLE001 - compile() relinks and reports it
            return None

    def compile_all(self, modules: list[tuple[str, str]], driver: str) -> list:
        """`compile` for every (PTX, name), the links run in parallel threads; returns, in
        order, a Compiled or the exception that module's link raised (in this thread)."""
        self.prefetch(modules, driver)
        out = []
        for ptx, name in modules:
            try:
                out.append(self.compile(ptx, driver, name))
            except Exception as e:      # noqa: BLE001 - returned: the caller decides
                out.append(e)
        return out

    def compile(self, ptx: str, driver: str, name: str = "probe.ptx") -> Compiled:
        """JIT + load, cached by (PTX hash, driver version)."""
        key = module_key(ptx, driver)
        if key in self._done:
            return self._done[key]
        from cupy.cuda import function
        pending = self._pending.pop(key, None)
        with timing.blocked(timing.JIT):
            try:
                cubin, info = pending.result() if pending is not None else link(ptx, name)
            except Exception:           # noqa: BLE001 - relinked here: the error names itself
                if pending is None:
                    raise
                cubin, info = link(ptx, name)
        mod = function.Module()
        mod.load(cubin)
        out = Compiled(cubin, info, mod, driver)
        self._done[key] = out
        return out
