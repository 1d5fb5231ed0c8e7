"""The launch stage: every launch of a hardware measurement goes through one ``Runner``.

A measurement is a ``Plan``: a probe's kernels at its lengths (chain lengths, trip counts,
block counts: whatever the probe varies), the launch geometry of each (``Launch``: grid,
block, cluster, dynamic shared memory), an argument factory, and how many launches: 1 +
repeats per length, the first a warm-up. The runner allocates the record buffer each launch
writes, enqueues every launch (length after length, or repeat after repeat interleaving the
lengths), waits for them under the watchdog, copies the records back and returns them as
``Records``, per length and per launch. Several plans can share one batch (one wait).

Every launch is bracketed by two CUDA events; after the wait their elapsed times give each
launch's GPU time (``Records.launch_ms``) and, summed, the GPU-busy time of the run
(charged to the current test in core.timing). A plan may wait for each launch before the
next (``sync_each``: event-timed launches, or a number of repeats decided by the first
launch's time).

Allocation order is part of a measurement (where the driver places the large buffers that
are allocated later decides which L2 partition serves them), so the runner allocates in a
fixed, documented order: a length's argument factory is called first (it may allocate the
length's inputs), then its records are allocated, then its launches enqueued; in repeat
order (or with ``upfront``) every factory is called and every length's records allocated
before the first launch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Hashable, Mapping

import numpy as np

from . import timing, values
from .driver import TensorMapRejected  # noqa: F401 - what a topic catches from tensor_map
from .gpu import PASSES, Gpu, LaunchRefused
from .probe import Probe

Args = Callable[[int, Any], tuple]          # (repeat, record) -> the kernel's arguments


class ChainError(AssertionError):
    """What a launch wrote disagrees with the host's model of what it was to do (a chain
    ended somewhere the host's walk of the same chain does not, lines visited twice): the
    probe did not do what it was meant to, so no figure."""


@dataclass(frozen=True)
class Launch:
    """The geometry of a launch. `cluster`: CTAs per thread-block cluster (a cluster launch
    through cuLaunchKernelEx); `driver`: launch through cuLaunchKernelEx without a cluster
    (the dynamic shared memory allowed by the function's attribute first: over 48 KiB);
    otherwise CuPy's launch."""
    grid: tuple[int, ...] = (1,)
    block: tuple[int, ...] = (1,)
    cluster: int | None = None
    smem: int = 0
    driver: bool = False

    @property
    def through_driver(self) -> bool:
        return self.driver or self.cluster is not None


class Order(str, Enum):
    LENGTH = "length"      # every launch of a length, then the next length
    REPEAT = "repeat"      # launch r of every length, then launch r + 1


@dataclass(frozen=True)
class Bounds:
    """The one repeats policy: how many timed launches (a Plan's `repeats`) a probe makes of
    the session's --gpuchar-repeats. `most` caps the asked number (long launches, launches
    that must each find fresh data in a buffer); `least` raises it (a sample the figure's
    spread needs, a level whose launches scatter), but no further than `room` (as many
    launches as a buffer's fresh blocks hold) and never below what was asked."""
    least: int = 1
    most: int | None = None
    room: int | None = None

    def of(self, asked: int) -> int:
        n = asked if self.most is None else min(asked, self.most)
        least = self.least if self.room is None else min(self.least, self.room)
        return max(n, least)


# whole-GPU launches (a loop or a kernel on every SM, milliseconds each): 3 to 5 timed
# launches a length
WHOLE_GPU = Bounds(3, 5)


@dataclass
class Plan:
    """One probe's launches (see the module docstring).

    functions: length -> the kernel to launch (the lengths in this order);
    launch: the geometry, or length -> geometry;
    args: length -> (repeat, record) -> arguments (called once per length, in allocation
      order: it may allocate the length's inputs);
    repeats: timed launches per length, the session's repeats within the probe's Bounds;
    record: the shape of one launch's record, or length -> shape (None: the kernel writes
      no record of the runner's); dtype its type; split: one buffer per launch (else one array per length,
      launch r writing row r);
    capacity: launches to allocate records for when `more` may ask for more than repeats;
    before(length, repeat): called before each launch (an L2 eviction, an extra launch);
    sync_each: wait for each launch before the next; more(repeat, ms, repeats) -> repeats:
      after each launch (sync_each), how many timed launches to make;
    keep: what of a length's device records is copied back, a view of them (launches first;
      one buffer's with `split`), e.g. one lane per warp: the rest is never copied."""
    name: str
    functions: Mapping[Hashable, Any]
    launch: Launch | Callable[[Hashable], Launch]
    args: Callable[[Hashable], Args]
    repeats: int
    record: tuple | Callable[[Hashable], tuple] | None = None
    dtype: Any = np.uint64
    order: Order = Order.LENGTH
    warmup: bool = True
    upfront: bool = False
    split: bool = False
    capacity: int | None = None
    before: Callable[[Hashable, int], None] | None = None
    sync_each: bool = False
    more: Callable[[int, float, int], int] | None = None
    timeout_s: float | None = None
    keep: Callable[[Any], Any] | None = None

    @property
    def lengths(self) -> list:
        return list(self.functions)

    def geometry(self, length) -> Launch:
        return self.launch(length) if callable(self.launch) else self.launch

    def launches(self, repeats: int | None = None) -> int:
        """Launches per length (the warm-up included)."""
        return (self.repeats if repeats is None else repeats) + (1 if self.warmup else 0)

    def allocated(self) -> int:
        """Launches per length that records are allocated for."""
        return self.launches(max(self.repeats, self.capacity or 0))

    def schedule(self) -> list[tuple[Hashable, int]]:
        """(length, launch index) in launch order (for `repeats` launches, before `more`)."""
        n = self.launches()
        if self.order is Order.REPEAT:
            return [(k, r) for r in range(n) for k in self.lengths]
        return [(k, r) for k in self.lengths for r in range(n)]


@dataclass
class Records:
    """What one plan's launches wrote: length -> the host copy of every launch's record
    (the warm-up first; an array with one row per launch, or a list with `split`), each
    launch's GPU time in ms, and their sum."""
    name: str
    raw: dict = field(default_factory=dict)
    launch_ms: dict = field(default_factory=dict)
    warmup: bool = True

    @property
    def first(self) -> int:
        return 1 if self.warmup else 0

    def timed(self, length):
        """The records of the timed launches of `length` (the warm-up dropped)."""
        return self.raw[length][self.first:]

    def timed_ms(self, length) -> list[float]:
        return self.launch_ms[length][self.first:]

    @property
    def busy_ms(self) -> float:
        return float(sum(sum(v) for v in self.launch_ms.values()))

    @property
    def launches(self) -> int:
        return sum(len(v) for v in self.launch_ms.values())


@dataclass
class Refused:
    """A plan whose launch the driver refused (resources): `why` is the driver's reason."""
    name: str
    why: str


class _Events:
    """CUDA events, reused once their times are read."""

    def __init__(self) -> None:
        self._free: list = []

    def take(self):
        if self._free:
            return self._free.pop()
        import cupy as cp
        return cp.cuda.Event()

    def give(self, events) -> None:
        self._free.extend(events)


@dataclass
class _Enqueued:
    plan: Plan
    buffers: dict                      # length -> device array, or list of arrays (split)
    events: dict                       # length -> [(start, end, ms or None) per launch]
    launched: dict                     # length -> launches made
    factories: dict = field(default_factory=dict)   # length -> args factory (kept alive:
    #                                     its inputs are in use until the batch is waited for)
    repeats: int = 0                   # timed launches wanted now (`more` may raise it)


def elapsed_ms(start, end) -> float:
    import cupy as cp
    return float(cp.cuda.get_elapsed_time(start, end))


class Runner:
    """The session's launch stage over its Gpu (ensure_alive, the watchdog): plain launches
    through CuPy, cluster and attribute launches through the driver (core.driver)."""

    def __init__(self, gpu: Gpu, launcher=None) -> None:
        self.gpu = gpu
        self._launcher = launcher
        self._events = _Events()
        self._buffers: dict[str, Any] = {}
        self.busy_ms = 0.0              # GPU time of every launch of the session
        self.launch_count = 0

    # --- single launches ---------------------------------------------------------------------
    @property
    def launcher(self):
        """The cluster launcher (cuLaunchKernelEx), made on first use."""
        if self._launcher is None:
            from .driver import ClusterLauncher
            self._launcher = ClusterLauncher(self.gpu)
        return self._launcher

    def tensor_map(self, address: int, dims: tuple[int, ...], strides: tuple[int, ...],
                   box: tuple[int, ...]):
        """A tiled tensor map of u32 elements over device memory at `address`
        (core.driver: cuTensorMapEncodeTiled); a refusal raises TensorMapRejected."""
        return self.launcher.driver.encode_tiled(address, dims, strides, box)

    def enqueue(self, fn, launch: Launch, args: tuple, *, name: str) -> None:
        """Enqueue one launch, untimed (a warm-up walk, an extra launch of a plan's
        `before`); a launch the driver refuses raises LaunchRefused."""
        if launch.through_driver:
            self.launcher.launch(fn, tuple(launch.grid), tuple(launch.block), args, name=name,
                                 cluster=launch.cluster, shared_mem=launch.smem)
        else:
            self.gpu.launch(fn, tuple(launch.grid), tuple(launch.block), args, name=name,
                            shared_mem=launch.smem)

    def _timed(self, fn, launch: Launch, args: tuple, name: str) -> tuple:
        start, end = self._events.take(), self._events.take()
        start.record()
        try:
            self.enqueue(fn, launch, args, name=name)
        except BaseException:
            self._events.give([start, end])
            raise
        end.record()
        return start, end

    def once(self, name: str, fn, launch: Launch, args: tuple,
             timeout_s: float | None = None) -> float:
        """One launch, waited for under the watchdog: its GPU time in ms."""
        self.gpu.ensure_alive(name)
        start, end = self._timed(fn, launch, args, name)
        self.gpu.poll(end, name, timeout_s)
        return self._charge([(start, end, None)])[0]

    def wait(self, name: str, timeout_s: float | None = None) -> None:
        """Wait for everything enqueued so far, under the watchdog."""
        self.gpu.wait(name, timeout_s)

    # --- plans -------------------------------------------------------------------------------
    def measure(self, plan: Plan) -> Records:
        """One plan, one batch, one wait."""
        out = self.run([plan])[0]
        assert isinstance(out, Records)
        return out

    def run(self, plans: list[Plan], *, name: str | None = None,
            skip_refused: bool = False) -> list[Records | Refused]:
        """Every launch of every plan in one batch, one wait under the watchdog (the longest
        plan timeout), then the records copied back in plan order. skip_refused: a plan
        whose launch the driver refuses is answered by Refused (its launches so far still
        run) and the next plan goes on; otherwise LaunchRefused is raised."""
        queued: list[_Enqueued | Refused] = []
        for plan in plans:
            self.gpu.ensure_alive(plan.name)
            try:
                queued.append(self._enqueue(plan))
            except LaunchRefused as e:
                if not skip_refused:
                    raise
                queued.append(Refused(plan.name, str(e.__cause__ or e)))
        live = [q for q in queued if isinstance(q, _Enqueued)]
        timeouts = [q.plan.timeout_s for q in live if q.plan.timeout_s is not None]
        last = name or (plans[-1].name if plans else "batch")
        self.wait(last, max(timeouts) if timeouts else None)
        return [q if isinstance(q, Refused) else self._collect(q) for q in queued]

    def _allocate(self, plan: Plan, length):
        import cupy as cp
        rows = plan.allocated()
        shape = plan.record(length) if callable(plan.record) else plan.record
        if shape is None:
            return None
        if plan.split:
            return [cp.zeros(shape, dtype=plan.dtype) for _ in range(rows)]
        return cp.zeros((rows, *shape), dtype=plan.dtype)

    def _enqueue(self, plan: Plan) -> _Enqueued:
        q = _Enqueued(plan, {}, {k: [] for k in plan.lengths}, {k: 0 for k in plan.lengths})
        factories = q.factories
        if plan.order is Order.REPEAT or plan.upfront:
            for k in plan.lengths:
                factories[k] = plan.args(k)
            for k in plan.lengths:
                q.buffers[k] = self._allocate(plan, k)
        if plan.order is Order.REPEAT:
            q.repeats = plan.repeats
            r = 0
            while r < plan.launches(q.repeats):
                for k in plan.lengths:
                    self._one(q, factories[k], k, r)
                r += 1
            return q
        for k in plan.lengths:
            if k not in factories:
                factories[k] = plan.args(k)
                q.buffers[k] = self._allocate(plan, k)
            q.repeats = plan.repeats
            r = 0
            while r < plan.launches(q.repeats):
                self._one(q, factories[k], k, r)
                r += 1
        return q

    def _one(self, q: _Enqueued, factory: Args, k, r: int) -> None:
        """Launch r of length k (timed by its events); with sync_each, waited for."""
        plan = q.plan
        if plan.before is not None:
            plan.before(k, r)
        buf = q.buffers.get(k)
        rec = None if buf is None else buf[r]
        start, end = self._timed(plan.functions[k], plan.geometry(k), factory(r, rec),
                                 plan.name)
        q.launched[k] += 1
        if not plan.sync_each:
            q.events[k].append((start, end, None))
            return
        self.gpu.poll(end, plan.name, plan.timeout_s)
        ms = elapsed_ms(start, end)
        q.events[k].append((start, end, ms))
        if plan.more is not None:
            want = plan.more(r, ms, q.repeats)
            q.repeats = min(want, max(plan.repeats, plan.capacity or 0))

    def _collect(self, q: _Enqueued) -> Records:
        plan = q.plan
        out = Records(plan.name, warmup=plan.warmup)
        for k in plan.lengths:
            out.launch_ms[k] = self._charge(q.events[k])
            buf = q.buffers.get(k)
            if buf is None:
                continue
            made = q.launched[k]
            keep = plan.keep or (lambda b: b)
            out.raw[k] = [keep(b).get() for b in buf[:made]] if plan.split else \
                keep(buf if made == len(buf) else buf[:made]).get()
        q.buffers.clear()
        q.factories.clear()
        return out

    def _charge(self, events: list[tuple]) -> list[float]:
        """Each launch's GPU time (ms) from its events (then reused), charged as busy time."""
        ms = [elapsed_ms(a, b) if t is None else t for a, b, t in events]
        for a, b, _ in events:
            self._events.give([a, b])
        total = float(sum(ms))
        self.busy_ms += total
        self.launch_count += len(ms)
        timing.charge_busy(total / 1000.0)
        return ms

    # --- device memory -----------------------------------------------------------------------
    @staticmethod
    def zeros(shape, dtype=np.uint64):
        import cupy as cp
        return cp.zeros(shape, dtype=dtype)

    @staticmethod
    def to_device(values: np.ndarray):
        """The values in device memory in C order, which is how every kernel reads a buffer:
        CuPy keeps a Fortran-ordered host array's order on the device, and a kernel reading
        it as C-ordered gets its elements in other places (an F-ordered (T, 32, 1) fragment
        array scrambled the m16n8k8 f16/bf16 B operands: docs/numerics.md)."""
        import cupy as cp
        return cp.asarray(np.ascontiguousarray(values))

    @staticmethod
    def full(shape, value, dtype):
        """A device array of `shape` filled with `value` (NaN: an output never written)."""
        import cupy as cp
        return cp.full(shape, value, dtype)

    @staticmethod
    def scatter(buf, idx: np.ndarray, values: np.ndarray) -> None:
        """buf[idx] = values on the device (both uploaded first, the values before the
        indices)."""
        import cupy as cp
        buf[cp.asarray(idx)] = cp.asarray(values)

    @staticmethod
    def function_attribute(fn, name: str, code: int) -> int:
        """A kernel's attribute (registers, static shared bytes): CuPy's `name` where it has
        it, else cuFuncGetAttribute(`code`)."""
        v = getattr(fn, name, None)
        if v is None:
            from cupy.cuda import driver
            v = driver.funcGetAttribute(code, fn.ptr)
        return int(v)

    def buffer(self, name: str, nbytes: int):
        """A zeroed device buffer of u64 words, made once per name for the session (made
        again, larger, when more is asked)."""
        buf = self._buffers.get(name)
        if buf is None or buf.nbytes < nbytes:
            buf = self.zeros(-(-nbytes // 8), np.uint64)
            self._buffers[name] = buf
        return buf

    def evict_l2_by_reading(self, l2_bytes: int, name: str = "l2_scratch") -> None:
        """Evict the L2 by reading a clean buffer of twice its size (a read leaves no dirty
        line to be written back during the next measurement)."""
        self.buffer(name, 2 * l2_bytes).sum()

    @staticmethod
    def evict_l2_by_writing(l2_bytes: int) -> None:
        """Evict the L2 by writing a fresh scratch buffer of twice its size."""
        import cupy as cp
        scratch = cp.empty(2 * l2_bytes // 8, dtype=np.uint64)
        scratch.fill(1)
        del scratch


def dynamic_smem(shared_per_sm: int, blocks_per_sm: int) -> int:
    """Dynamic shared memory per block that lets `blocks_per_sm` blocks share an SM but not
    one more (1 KiB reserved per block): with grid = SMs x blocks_per_sm every SM then runs
    exactly blocks_per_sm blocks, whatever the registers would allow. 0 when no size under
    the 48 KiB default limit does that (the per-SM warp counts are then checked)."""
    if not shared_per_sm:
        return 0
    x = shared_per_sm // (blocks_per_sm + 1) + 1024
    if x > 48 * 1024 or blocks_per_sm * (x + 1024) > shared_per_sm:
        return 0
    return x


def frame_plan(probe: Probe, compiled, repeats: int, threads: int = 1) -> Plan:
    """The launches of an operand-frame probe (core.ptx.Kernel): one block of `threads` per
    chain length, 1 + `repeats` launches each, arguments (record, operand slots, passes);
    each length's operands uploaded before its record is allocated."""
    import cupy as cp

    def args(n):
        d_in = cp.asarray(np.frombuffer(values.input_buffer(probe.inputs[n]), np.uint8))
        return lambda r, rec: (rec, d_in, np.uint32(PASSES))
    return Plan(probe.name, {n: compiled.function(e) for n, e in probe.entries.items()},
                Launch((1,), (threads,)), args, repeats,
                record=lambda n: (probe.out_slots.get(n, 1) * threads,), dtype=np.int64)


def thread0_cycles(records: Records) -> dict:
    """Chain length -> thread 0's cycles (record word 0) per timed launch."""
    return {n: [int(v) for v in records.timed(n)[:, 0]] for n in records.raw}
