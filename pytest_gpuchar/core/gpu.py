"""The GPU of a session: ``Gpu`` enqueues one kernel, waits for a stream's work under the
watchdog, and remembers a hang (the GPU is then wedged and every later launch is refused, so
the remaining hardware tests skip instead of hanging too). Measurements launch through the
launch stage (core.runner), which launches through this. CuPy is imported only in the core,
and only when something launches.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import ptx, smclock, timing
from .build import functions_of
from .device import DeviceInfo
from .jit import Compiled, JitCache
from .probe import Probe
from .verify import Verdict

DEFAULT_REPEATS = 7
DEFAULT_WATCHDOG_S = 20.0
PASSES = 2   # kernel passes over the timed region; the first warms the instruction cache
# The watchdog's poll: the first sleep short, doubling up to the longest. Most waits are for
# launches of micro- to milliseconds, and a fixed 0.5 ms sleep let each return up to 0.5 ms
# after its kernel ended (a run waits many times, often between dependent launches)
POLL_FIRST_S = 2e-5
POLL_MAX_S = 5e-4
# A wait this long is the GPU's, not a launch's: `Gpu.on_long_wait` is called (once)
LONG_WAIT_S = 0.05


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
    # called once, at the first wait that lasts LONG_WAIT_S: host work that would hold up
    # the test thread if started before (the session's offline queueing, Builds.go)
    on_long_wait: Callable[[], None] | None = None

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
        start = time.monotonic()
        deadline = start + limit
        delay = POLL_FIRST_S
        while (status := event_status(event)) != 0:
            if self.on_long_wait is not None and time.monotonic() - start >= LONG_WAIT_S:
                go, self.on_long_wait = self.on_long_wait, None
                go()
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
    def sm_clock_mhz(self, iters: int = 2_000_000,
                     verify: Callable[[Probe, dict], Verdict] | None = None,
                     module: Callable[[str, str], tuple] | None = None) -> float:
        """Effective SM clock during the run: SM cycles (%clock64) over nanoseconds
        (%globaltimer) across a ~1-10 ms busy loop on one SM (core.smclock). The driver's
        SASS of the kernel is verified first, through `verify(probe, functions)` (a
        session's door; default the probe's own check), and the loop's result checked
        after: an invalid probe raises ProbeInvalid, never a number. `module(text, name)`:
        (Compiled, kernel name -> SASS) of the probe's module as the driver linked it (a
        session's, which may have linked and disassembled it ahead); default linked and
        disassembled here."""
        import cupy as cp
        probe = smclock.probe(self.dev.arch)
        text, name = probe.ptx, smclock.MODULE        # (smclock.module: what a session links)
        if module is not None:
            compiled, functions = module(text, name)
        else:
            compiled = self.compile(text, name)
            functions = functions_of(compiled.cubin, self.dev.arch)
        if verify is None:
            probe.check(functions)
        else:
            verify(probe, functions)
        fn = compiled.function(probe.entry)
        out = cp.zeros(3, dtype=np.int64)
        self.launch(fn, (1,), (1,), (out, np.uint32(iters // 10)), name=probe.name)  # ramp
        self.launch(fn, (1,), (1,), (out, np.uint32(iters)), name=probe.name)
        self.wait(probe.name, DEFAULT_WATCHDOG_S)
        c, t, x = (int(v) for v in out.get())
        return smclock.mhz(c, t, x, iters)

    def spin(self, seconds: float, *, timeout_s: float, name: str = "spin") -> None:
        """A kernel that spins for `seconds` (bounded, so it always ends) under the watchdog:
        the watchdog's own self-test on real hardware."""
        fn = self.compile(ptx.header(self.dev.arch) + SPIN_PTX,
                          "gpuchar_spin.ptx").function("gpuchar_spin")
        self.launch(fn, (1,), (1,), (np.uint64(int(seconds * 1e9)),), name=name)
        self.wait(name, timeout_s)


SPIN_PTX = ptx.Kernel(
    entry="gpuchar_spin", params=[".param .u64 ns_param"], clock=None,
    decls=[".reg .b64 %ns, %t0, %t1, %d;", ".reg .pred %p;"],
    body=["ld.param.u64 %ns, [ns_param];", "mov.u64 %t0, %globaltimer;", "SPIN:",
          "mov.u64 %t1, %globaltimer;", "sub.s64 %d, %t1, %t0;",
          "setp.lt.u64 %p, %d, %ns;", "@%p bra SPIN;"]).render()
