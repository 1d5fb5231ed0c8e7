"""The GPU of a session: ``Gpu`` enqueues one kernel, waits for a stream's work under the
watchdog, and remembers a hang (the GPU is then wedged and every later launch is refused, so
the remaining hardware tests skip instead of hanging too). Measurements launch through the
launch stage (core.runner), which launches through this. CuPy is imported only in the core,
and only when something launches.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
import numpy as np

from . import ptx, timing
from .device import DeviceInfo
from .jit import Compiled, JitCache

DEFAULT_REPEATS = 7
DEFAULT_WATCHDOG_S = 20.0
PASSES = 2   # kernel passes over the timed region; the first warms the instruction cache
# The watchdog's poll: the first sleep short, doubling up to the longest. Most waits are for
# launches of micro- to milliseconds, and a fixed 0.5 ms sleep let each return up to 0.5 ms
# after its kernel ended (a run waits many times, often between dependent launches)
POLL_FIRST_S = 2e-5
POLL_MAX_S = 5e-4


class ProbeHang(RuntimeError):
    """A probe kernel did not finish within the watchdog's limit; the GPU may be wedged."""


class ProbeFault(ProbeHang):
    """A probe kernel stopped the stream with a CUDA error (illegal address, illegal
    instruction, ...): the context is lost, so the GPU is wedged as after a hang."""


NOT_READY = 600   # cudaErrorNotReady: the event's work is still running


def event_status(event) -> int:
    """0 once the event's work is done, NOT_READY while it runs, else the CUDA error the
    stream hit (a fault must not read as 'still running' until the watchdog fires)."""
    ptr = getattr(event, "ptr", None)
    if ptr is None:                       # a stand-in without a CUDA event
        return 0 if event.done else NOT_READY
    import cupy as cp
    try:
        return int(cp.cuda.runtime.eventQuery(ptr))
    except cp.cuda.runtime.CUDARuntimeError as e:
        return int(e.status)


def _error_name(status: int) -> str:
    try:
        import cupy as cp
        return cp.cuda.runtime.getErrorName(status)
    except Exception:    # no CuPy, or a code it does not know
        return "unknown"


class GPUWedged(RuntimeError):
    """An earlier probe hung: nothing more is launched in this session."""


class LaunchRefused(RuntimeError):
    """The driver refused a launch (resources: registers x threads, shared memory)."""


@dataclass
class Gpu:
    dev: DeviceInfo
    jit: JitCache
    watchdog_s: float = DEFAULT_WATCHDOG_S
    wedged: str | None = None        # the probe that hung, if one did

    def ensure_alive(self, name: str) -> None:
        if self.wedged:
            raise GPUWedged(f"GPU wedged by probe {self.wedged}; not launching {name}")

    def compile(self, text: str, name: str) -> Compiled:
        return self.jit.compile(text, self.dev.driver, name)

    def launch(self, fn, grid: tuple, block: tuple, args: tuple, *, name: str,
               shared_mem: int = 0) -> None:
        """Enqueue one launch; a launch the driver refuses raises LaunchRefused."""
        self.ensure_alive(name)
        import cupy as cp
        try:
            fn(grid, block, args, shared_mem=shared_mem)
        except cp.cuda.driver.CUDADriverError as e:
            raise LaunchRefused(f"{name}: launch refused: {e}") from e

    def wait(self, name: str, timeout_s: float | None = None) -> None:
        """Wait for everything launched so far on the current stream, under the watchdog."""
        import cupy as cp
        ev = cp.cuda.Event()
        ev.record()
        self.poll(ev, name, timeout_s)

    def poll(self, event, name: str, timeout_s: float | None = None) -> None:
        with timing.blocked(timing.GPU):
            self._poll(event, name, timeout_s)

    def _poll(self, event, name: str, timeout_s: float | None = None) -> None:
        limit = self.watchdog_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        delay = POLL_FIRST_S
        while (status := event_status(event)) != 0:
            if status != NOT_READY:
                self.wedged = name
                raise ProbeFault(f"probe {name} faulted: CUDA error {status} "
                                 f"({_error_name(status)}); the context is lost, remaining "
                                 f"hardware tests are skipped")
            if time.monotonic() > deadline:
                self.wedged = name
                raise ProbeHang(f"watchdog: probe {name} did not finish within {limit:g} s; the "
                                f"GPU is considered wedged, remaining hardware tests are skipped")
            time.sleep(delay)
            delay = min(2 * delay, POLL_MAX_S)

    # --- clock ----------------------------------------------------------------------------
    def sm_clock_mhz(self, iters: int = 2_000_000) -> float:
        """Effective SM clock during the run: SM cycles (%clock64) over nanoseconds
        (%globaltimer) across a ~1-10 ms busy loop on one SM."""
        import cupy as cp
        fn = self.compile(ptx.header(self.dev.arch) + SM_CLOCK_PTX,
                          "sm_clock.ptx").function("sm_clock")
        out = cp.zeros(3, dtype=np.int64)
        self.launch(fn, (1,), (1,), (out, np.uint32(iters // 10)), name="sm_clock")  # ramp
        self.launch(fn, (1,), (1,), (out, np.uint32(iters)), name="sm_clock")
        self.wait("sm_clock", DEFAULT_WATCHDOG_S)
        c, t, _ = (int(v) for v in out.get())
        return c / t * 1000.0 if t > 0 else float("nan")

    def spin(self, seconds: float, *, timeout_s: float, name: str = "spin") -> None:
        """A kernel that spins for `seconds` (bounded, so it always ends) under the watchdog:
        the watchdog's own self-test on real hardware."""
        fn = self.compile(ptx.header(self.dev.arch) + SPIN_PTX,
                          "gpuchar_spin.ptx").function("gpuchar_spin")
        self.launch(fn, (1,), (1,), (np.uint64(int(seconds * 1e9)),), name=name)
        self.wait(name, timeout_s)


SM_CLOCK_PTX = ptx.Kernel(
    entry="sm_clock", params=[".param .u64 out_param", ".param .u32 iters"], clock=None,
    decls=[".reg .b64 %out, %c0, %c1, %t0, %t1;", ".reg .b32 %n, %i, %x;",
           ".reg .pred %p;"],
    body=["ld.param.u64 %out, [out_param];", "ld.param.u32 %n, [iters];",
          "mov.u32 %x, %n;", "mov.u32 %i, 0;", "mov.u64 %t0, %globaltimer;",
          "mov.u64 %c0, %clock64;", "LOOP:", "mad.lo.u32 %x, %x, 1664525, 1013904223;",
          "add.u32 %i, %i, 1;", "setp.lt.u32 %p, %i, %n;", "@%p bra LOOP;",
          "mov.u64 %c1, %clock64;", "mov.u64 %t1, %globaltimer;",
          "sub.s64 %c1, %c1, %c0;", "sub.s64 %t1, %t1, %t0;",
          "st.global.u64 [%out], %c1;", "st.global.u64 [%out+8], %t1;",
          "st.global.u32 [%out+16], %x;"]).render()

SPIN_PTX = ptx.Kernel(
    entry="gpuchar_spin", params=[".param .u64 ns_param"], clock=None,
    decls=[".reg .b64 %ns, %t0, %t1, %d;", ".reg .pred %p;"],
    body=["ld.param.u64 %ns, [ns_param];", "mov.u64 %t0, %globaltimer;", "SPIN:",
          "mov.u64 %t1, %globaltimer;", "sub.s64 %d, %t1, %t0;",
          "setp.lt.u64 %p, %d, %ns;", "@%p bra SPIN;"]).render()
