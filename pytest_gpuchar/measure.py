"""Launch verified probes and turn cycle counts into characteristics.

Pipeline for one probe on the GPU: JIT through the driver (jit.py) -> disassemble the driver's
cubin -> verify the timed regions (verify.py; "probe invalid" raises, no number) -> launch
every chain length once to warm up and `repeats` times to measure, all in one batch on one
stream, under a watchdog -> fit cycles against chain length (the slope is the per-op cost;
fixed costs cancel) -> median, spread, and "unstable" when the spread is too wide.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from . import jit, probes, sass, toolchain, values
from .device import DeviceInfo

DEFAULT_REPEATS = 7
DEFAULT_WATCHDOG_S = 20.0
PASSES = 2   # kernel passes over the timed region; the first warms the instruction cache


class ProbeHang(RuntimeError):
    """A probe kernel did not finish within the watchdog's limit; the GPU may be wedged."""


class GPUWedged(RuntimeError):
    pass


_WEDGED: list[str] = []


def wedged() -> str | None:
    return _WEDGED[0] if _WEDGED else None


@dataclass
class Run:
    """Raw cycles of one probe: chain length -> one sample per repeat (warm-up dropped)."""
    probe: probes.Probe
    cycles: dict[int, list[int]]
    functions: dict[str, sass.Function]
    verdict: object
    jit_log: str = ""


@dataclass
class Fit:
    value: float                 # median per-op cycles (slope)
    spread: float                # max - min of the per-repeat slopes
    slopes: list[float]
    intercept: float             # fixed cost (clock reads, fill, pending loads)
    residual: float              # largest deviation of the length medians from the line
    unstable: bool
    why_unstable: str = ""
    medians: dict[int, float] = field(default_factory=dict)


def least_squares(xs: list[float], ys: list[float]) -> tuple[float, float]:
    x = np.asarray(xs, float)
    y = np.asarray(ys, float)
    a = np.vstack([x, np.ones_like(x)]).T
    (m, c), *_ = np.linalg.lstsq(a, y, rcond=None)
    return float(m), float(c)


def fit(cycles: dict[int, list[int]], ops: dict[int, int], *, spread_abs: float = 0.5,
        spread_rel: float = 0.05) -> Fit:
    """Slope of cycles against op count. Needs two or more chain lengths."""
    lengths = sorted(cycles)
    if len(lengths) < 2:
        raise ValueError("differential measurement needs at least two chain lengths")
    xs = [ops[n] for n in lengths]
    medians = {n: float(statistics.median(cycles[n])) for n in lengths}
    value, intercept = least_squares(xs, [medians[n] for n in lengths])
    reps = min(len(cycles[n]) for n in lengths)
    slopes = [least_squares(xs, [cycles[n][r] for n in lengths])[0] for r in range(reps)]
    spread = max(slopes) - min(slopes) if slopes else 0.0
    residual = max(abs(medians[n] - (value * ops[n] + intercept)) for n in lengths)
    limit = max(spread_abs, spread_rel * abs(value))
    why = ""
    if spread > limit:
        why = f"per-repeat slopes spread {spread:.2f} cycles/op > {limit:.2f}"
    elif residual > max(2.0, 0.02 * max(medians.values())):
        why = f"cycles not linear in chain length (residual {residual:.1f} cycles)"
    return Fit(value, spread, slopes, intercept, residual, bool(why), why, medians)


def _wait(probe_name: str, timeout_s: float) -> None:
    """Wait for everything launched so far on the current stream, under the watchdog."""
    import cupy as cp
    ev = cp.cuda.Event()
    ev.record()
    _poll(ev, probe_name, timeout_s)


def _poll(event, probe_name: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not event.done:
        if time.monotonic() > deadline:
            _WEDGED.append(probe_name)
            raise ProbeHang(f"watchdog: probe {probe_name} did not finish within {timeout_s:g} s;"
                            f" the GPU is considered wedged, remaining hardware tests are skipped")
        time.sleep(0.0005)


_JIT_BATCH: dict[tuple[str, str], tuple[jit.Compiled, dict[str, sass.Function]]] = {}


def jit_batch(batch: list[probes.Probe], dev: DeviceInfo) -> None:
    """JIT many probes in one driver link (compiled once per session and driver) and keep the
    module and its SASS for verify_jit. A batch the JIT rejects is dropped: each probe is then
    JIT-compiled alone, so the failing one names itself with its JIT log."""
    todo = [p for p in batch if (p.digest, dev.driver) not in _JIT_BATCH]
    if not todo:
        return
    for part, compiled in zip(*batch_modules(dev, todo)):
        if isinstance(compiled, Exception):
            continue        # JIT rejected this part: its probes are compiled alone later
        try:
            functions = probes.functions_of(compiled.cubin, dev.arch)
        except toolchain.AssemblyError:
            continue
        for p in part:
            _JIT_BATCH[(p.digest, dev.driver)] = (compiled, functions)


def batch_parts(arch: str, todo: list[probes.Probe]) -> list[tuple[list[probes.Probe], str, str]]:
    """The batch in parts (jit.chunks), each as (probes, module text, name): the same texts
    wherever the batch is prefetched or linked, so a prefetched link is found again."""
    return [(part, probes.batch_module(arch, part), f"gpuchar_batch{i}.ptx")
            for i, part in enumerate(jit.chunks(todo))]


def batch_modules(dev: DeviceInfo, todo: list[probes.Probe]):
    """(parts, Compiled-or-exception per part), the parts linked in parallel threads."""
    parts = batch_parts(dev.arch, todo)
    compiled = jit.compile_all([(t, n) for _, t, n in parts], dev.driver, dev.index)
    return [p for p, _, _ in parts], compiled


def verify_jit(probe: probes.Probe, dev: DeviceInfo):
    """JIT the probe through the driver and verify the SASS the driver produced."""
    hit = _JIT_BATCH.get((probe.digest, dev.driver))
    if hit is None:
        compiled = jit.compile_probe(probe.ptx, dev.driver,
                                     probe.name.replace("/", "_") + ".ptx")
        functions = probes.functions_of(compiled.cubin, dev.arch)
    else:
        compiled, functions = hit
    regions, verdict = probes.check(probe, functions)
    return compiled, functions, verdict


def run(probe: probes.Probe, dev: DeviceInfo, *, repeats: int = DEFAULT_REPEATS,
        watchdog_s: float = DEFAULT_WATCHDOG_S, threads: int = 1) -> Run:
    """Verify, then launch each chain length 1 + `repeats` times (first is the warm-up)."""
    if wedged():
        raise GPUWedged(f"GPU wedged by probe {wedged()}; not launching {probe.name}")
    import cupy as cp
    compiled, functions, verdict = verify_jit(probe, dev)
    outs = {}
    keep = []   # input buffers stay alive until the launches have run
    for n, entry in probe.entries.items():
        fn = compiled.function(entry)
        buf = values.input_buffer(probe.inputs[n])
        d_in = cp.asarray(np.frombuffer(buf, dtype=np.uint8))
        slots = probe.out_slots.get(n, 1)
        out = cp.zeros((repeats + 1, slots * threads), dtype=np.int64)
        keep.append(d_in)
        for r in range(repeats + 1):
            fn((1,), (threads,), (out[r], d_in, np.uint32(PASSES)))
        outs[n] = out
    _wait(probe.name, watchdog_s)
    cycles = {n: [int(v) for v in out[1:, 0].get()] for n, out in outs.items()}
    return Run(probe, cycles, functions, verdict, compiled.info_log)


SM_CLOCK_PTX = """
.visible .entry sm_clock(.param .u64 out_param, .param .u32 iters)
{
  .reg .b64 %out, %c0, %c1, %t0, %t1;
  .reg .b32 %n, %i, %x;
  .reg .pred %p;
  ld.param.u64 %out, [out_param];
  ld.param.u32 %n, [iters];
  mov.u32 %x, %n;
  mov.u32 %i, 0;
  mov.u64 %t0, %globaltimer;
  mov.u64 %c0, %clock64;
LOOP:
  mad.lo.u32 %x, %x, 1664525, 1013904223;
  add.u32 %i, %i, 1;
  setp.lt.u32 %p, %i, %n;
  @%p bra LOOP;
  mov.u64 %c1, %clock64;
  mov.u64 %t1, %globaltimer;
  sub.s64 %c1, %c1, %c0;
  sub.s64 %t1, %t1, %t0;
  st.global.u64 [%out], %c1;
  st.global.u64 [%out+8], %t1;
  st.global.u32 [%out+16], %x;
  ret;
}
"""


def sm_clock_mhz(dev: DeviceInfo, iters: int = 2_000_000) -> float:
    """Effective SM clock during the run: SM cycles (%clock64) over nanoseconds
    (%globaltimer) across a ~1-10 ms busy loop on one SM."""
    import cupy as cp
    from . import ptx as _ptx
    text = _ptx.header(dev.arch) + SM_CLOCK_PTX
    fn = jit.compile_probe(text, dev.driver, "sm_clock.ptx").function("sm_clock")
    out = cp.zeros(3, dtype=np.int64)
    fn((1,), (1,), (out, np.uint32(iters // 10)))   # warm-up, lets clocks ramp
    fn((1,), (1,), (out, np.uint32(iters)))
    _wait("sm_clock", DEFAULT_WATCHDOG_S)
    c, t, _ = (int(v) for v in out.get())
    return c / t * 1000.0 if t > 0 else float("nan")


SPIN_PTX = """
.visible .entry gpuchar_spin(.param .u64 ns_param)
{
  .reg .b64 %ns, %t0, %t1, %d;
  .reg .pred %p;
  ld.param.u64 %ns, [ns_param];
  mov.u64 %t0, %globaltimer;
SPIN:
  mov.u64 %t1, %globaltimer;
  sub.s64 %d, %t1, %t0;
  setp.lt.u64 %p, %d, %ns;
  @%p bra SPIN;
  ret;
}
"""


def spin(dev: DeviceInfo, seconds: float, *, watchdog_s: float, name: str = "spin") -> None:
    """Launch a kernel that spins for `seconds` (bounded, so it always ends) under the
    watchdog: the watchdog's own self-test on real hardware."""
    from . import ptx as _ptx
    fn = jit.compile_probe(_ptx.header(dev.arch) + SPIN_PTX, dev.driver,
                           "gpuchar_spin.ptx").function("gpuchar_spin")
    fn((1,), (1,), (np.uint64(int(seconds * 1e9)),))
    _wait(name, watchdog_s)
