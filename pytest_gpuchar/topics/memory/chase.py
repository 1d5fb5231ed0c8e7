"""The memory suite on the GPU: the memory module JIT-linked once by the driver, each probe's
SASS verified in it (the verification door), one device buffer sized for the device-memory
footprint and reused by every global chase (all made once per session through session.runs).
Every chase launches through the session's launch stage; every launch's end pointer is
checked against the host's walk of the same chain."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...core.fit import fit
from ...core.probe import Probe
from ...core.runner import Bounds, ChainError, Launch, Plan, Runner
from ...core.topic import Context
from . import kernels
from .analysis import BANK_POSITIONS, Geometry, bank_block, bank_end, bank_layout, geometry
from .chains import Layout, random_layout, sequential_layout
from .rows import (CHAIN_LENGTHS, FILL_REGION, LINE, SMEM_BYTES, STAIRCASE_PLACES,
                   STAIRCASE_LAUNCHES, STRIDES, BankRow, ChaseKind, Space, Warm)


# an L1 staircase point, a fill stride: 3 launches, whatever --gpuchar-repeats asks
SWEEP_LAUNCHES = Bounds(3, 3)
PLACE_ALIGN = 2 * 2**20
# staircase points whose chains are built ahead on the session's host workers while the GPU
# chases the current one (a device-memory point's chain: 2 M pointers, a few tenths of a
# second of host work)
LAYOUTS_AHEAD = 2


@dataclass
class ChaseRun:
    """Raw cycles of one chase measurement: length -> samples (warm-up launch dropped), plus
    what the launches visited."""
    probe: Probe
    cycles: dict[int, list[int]]
    ops: dict[int, int]
    footprint: int
    lines: int                  # distinct lines (pointers) of the chain
    timed_steps: int            # dependent loads timed over all launches
    smids: list[int]
    notes: list[str] = field(default_factory=list)


@dataclass
class Placed:
    """Where a chase starts: the chain's base address (global) or offset base (shared,
    const), the shared-memory image to copy in (init, words) and the buffer holding it."""
    base: int = 0
    init: int = 0
    words: int = 0
    keep: object = None


def geometry_of(session: Context) -> Geometry:
    """The device's memory geometry (sizes of the levels, the sweep's footprints)."""
    return session.runs.once(("memory", "geometry"), lambda: geometry(session.gpu.dev))


def module(session: Context) -> tuple:
    """(Compiled, kernel name -> SASS) of the memory module as the driver linked it (once)."""
    def make():
        dev = session.gpu.dev
        (_, text, name), = kernels.group(dev.arch).parts()
        return session.builds.jit_module(dev, text, name)
    return session.runs.once(("memory", "module"), make)


def verified(session: Context, probe: Probe) -> dict:
    """The probe's timed regions verified in the driver's own SASS (the verification door,
    once): its unit."""
    return session.runs.once(("memory", "verified", probe.name), lambda: dict(
        session.verify(probe, module(session)[1]).unit))


def buffer(session: Context):
    """The device buffer every global chase shares, sized for the device-memory footprint."""
    return session.runner.buffer("memory.chase", geometry_of(session).dram_footprint()[0])


def flush_l2(session: Context) -> None:
    """Evict the L2 by writing a scratch buffer of twice its size."""
    session.runner.evict_l2_by_writing(geometry_of(session).l2_bytes)


def _upload(session: Context, lay: Layout, offset: int = 0) -> int:
    """Write `lay`'s pointers into the shared buffer `offset` bytes in (pointer i at byte
    offset + i x stride, holding the address of pointer nxt[i]): its base address. The word
    indices and the addresses come from the chain's own (made once per chain, ahead:
    Layout.ready), moved to the offset."""
    buf = buffer(session)
    if offset % 8:
        raise ChainError(f"a chain's offset must be a multiple of 8 bytes, not {offset}")
    if offset + lay.footprint > buf.nbytes:
        raise ChainError(f"chain of {lay.footprint} B at offset {offset} exceeds the "
                         f"buffer ({buf.nbytes} B)")
    base = int(buf.data.ptr) + offset
    Runner.scatter(buf, lay.word_index() + offset // 8, lay.byte_offsets() + np.uint64(base))
    return base


def _place(session: Context, probe: kernels.ChaseProbe, lay: Layout, flush: bool,
           offset: int = 0) -> Placed:
    """Global chains are uploaded to the buffer at `offset` (then the L2 flushed if asked:
    the upload itself left the last-written lines in it); shared chains are copied into
    shared memory by the kernel; the const chain is in the PTX."""
    if probe.space == Space.GLOBAL:
        base = _upload(session, lay, offset)
        if flush:
            flush_l2(session)
        return Placed(base)
    if probe.space == Space.SHARED:
        if lay.footprint > SMEM_BYTES:
            raise ChainError(f"shared chain of {lay.footprint} B > {SMEM_BYTES} B")
        words = np.zeros(SMEM_BYTES // 4, dtype=np.uint32)
        words[(lay.word_index() * 2)] = (lay.nxt * lay.stride).astype(np.uint32)
        keep = Runner.to_device(words)
        return Placed(0, int(keep.data.ptr), int(lay.footprint // 4), keep)
    return Placed()


def chase(session: Context, probe: kernels.ChaseProbe, lay: Layout, *, repeats: int,
          warm: Warm = Warm.EVERY, lengths: dict[int, int] | None = None,
          flush: bool | None = None, offset: int = 0) -> ChaseRun:
    """Launch the probe's kernels on `lay`, 1 + `repeats` times per length, each launch
    continuing the chain where the last one stopped (``lay.cursor``). warm: EVERY (walk the
    whole cycle before every timed chain), FIRST (only before the first launch: levels that
    persist across launches, the L2), NONE. `flush` (default: when warm is NONE) evicts the
    L2 after the upload. `lengths`: steps timed per length (default the probe's ops).
    `offset`: where in the buffer a global chain lies."""
    session.gpu.ensure_alive(probe.name)
    verified(session, probe)
    at = _place(session, probe, lay, warm == Warm.NONE if flush is None else flush, offset)
    stuck = probe.flavour == "shared_st_ld"   # st [p], p: the chain stays put
    state = Runner.to_device(np.array([at.base + lay.cursor * lay.stride], dtype=np.uint64))
    lengths = lengths or dict(probe.ops)
    compiled = module(session)[0]
    expect: list = []
    walk = {"pos": lay.cursor, "first": True}

    def args(n: int):
        def one(r: int, rec) -> tuple:
            w = lay.n if (warm == Warm.EVERY or (warm == Warm.FIRST and walk["first"])) else 0
            walk["first"] = False
            if not stuck:
                walk["pos"] = lay.walk(walk["pos"], w + lengths[n])
            expect.append((n, r, at.base + walk["pos"] * lay.stride))
            return (rec, state, np.uint32(w), np.uint32(lengths[n]), np.uint64(at.init),
                    np.uint32(at.words))
        return one
    out = session.runner.measure(Plan(
        probe.name, {n: compiled.function(probe.entries[n]) for n in sorted(lengths)},
        Launch((1,), (1,)), args, repeats, record=(3,)))
    host = out.raw
    _check_ends(probe, lay, host, expect)
    del at
    lay.cursor = walk["pos"]
    return ChaseRun(probe, {n: [int(v) for v in host[n][1:, 0]] for n in host},
                    dict(lengths), lay.footprint, lay.n,
                    sum(lengths[n] * (repeats + 1) for n in lengths),
                    sorted({int(v) for n in host for v in host[n][:, 2]}))


def _check_ends(probe: Probe, lay: Layout, host: dict, expect: list) -> None:
    for n, r, want in expect:
        got = int(host[n][r, 1])
        if got != want:
            raise ChainError(
                f"{probe.name}: launch {r} of length {n} ended at {got:#x}, the host's walk "
                f"of the same chain at {want:#x}: the chase did not visit the intended "
                f"lines (footprint {lay.footprint} B, {lay.n} pointers)")


def bank(session: Context, row: BankRow, *, repeats: int) -> ChaseRun:
    """One warp's conflicted chase (Table 10 row); thread 0's cycles; every thread's end
    offset checked."""
    probe = kernels.bank_probe(row, session.gpu.dev.arch)
    verified(session, probe)
    words, starts = bank_layout(row)
    d_words = Runner.to_device(words)
    state = Runner.to_device(starts)
    compiled = module(session)[0]
    out = session.runner.measure(Plan(
        probe.name, {n: compiled.function(probe.entries[n]) for n in CHAIN_LENGTHS},
        Launch((1,), (32,)),
        lambda n: (lambda r, rec: (rec, state, np.uint64(d_words.data.ptr),
                                   np.uint32(len(words)))), repeats, record=(32 * 3,)))
    cycles = {}
    for n in CHAIN_LENGTHS:
        h = out.raw[n].reshape(repeats + 1, 32, 3)
        for t in range(32):
            want = bank_end(row, t, n)
            if int(h[0, t, 1]) != want:
                raise ChainError(f"{probe.name} {row.name}: thread {t} ended at offset "
                                 f"{int(h[0, t, 1])}, expected {want}")
        cycles[n] = [int(v) for v in h[1:, 0, 0]]
    return ChaseRun(probe, cycles, {n: n for n in CHAIN_LENGTHS},
                    BANK_POSITIONS * bank_block(row), BANK_POSITIONS * 32, 0, [])


# --- sweeps -------------------------------------------------------------------------------------

@dataclass
class Curve:
    """A sweep's figures: latency (and its spread) per footprint or stride."""
    footprints: list[int]
    latency: list[float]
    spread: list[float]
    smids: list[int]
    warm: list[str]

    @classmethod
    def of_points(cls, pts: list["StairPoint"]) -> "Curve":
        return cls([p.footprint for p in pts], [p.latency for p in pts],
                   [p.spread for p in pts], sorted({m for p in pts for m in p.smids}),
                   [p.warm for p in pts])

    def as_data(self) -> dict:
        return {"footprint_bytes": self.footprints,
                "latency_cycles": [round(v, 2) for v in self.latency],
                "spread_cycles": [round(v, 2) for v in self.spread], "warm": self.warm,
                "smids": self.smids}


def staircase_places(footprint: int, l2_bytes: int, buffer_bytes: int) -> list[int]:
    """Offsets in the buffer at which a staircase point's chain is measured: one (0) up to a
    quarter of the L2 and past the L2; between (where one SM's chain is a mix of near- and
    far-partition lines, fixed by the physical pages it lies in) up to STAIRCASE_PLACES
    offsets spread over the buffer, 2 MiB-aligned, so the point averages over several pages'
    mixes. (Past the L2 the chain starts to miss; each place would cost a walk of the whole
    chain, the longest of the staircase, for a point no L2 figure is read from.)"""
    if footprint <= l2_bytes // 4 or footprint > l2_bytes:
        return [0]
    room = (buffer_bytes - footprint) // PLACE_ALIGN
    n = max(1, min(STAIRCASE_PLACES, room + 1))
    return [0] if n == 1 else [round(i * room / (n - 1)) * PLACE_ALIGN for i in range(n)]


def pooled(runs: list[ChaseRun]) -> ChaseRun:
    """One ChaseRun of the launches of several (same probe, lengths and chain)."""
    first = runs[0]
    return ChaseRun(first.probe, {n: [c for r in runs for c in r.cycles[n]] for n in first.cycles},
                    first.ops, first.footprint, first.lines,
                    sum(r.timed_steps for r in runs), sorted({m for r in runs for m in r.smids}),
                    [x for r in runs for x in r.notes])


@dataclass
class StairPoint:
    """One staircase point: the ld.global.ca chase's latency at one footprint."""
    footprint: int
    latency: float
    spread: float
    smids: list[int]
    warm: str


def point(session: Context, f: int, launches: Bounds = SWEEP_LAUNCHES,
          deep_launches: Bounds = STAIRCASE_LAUNCHES,
          layout: Layout | None = None) -> StairPoint:
    """Load-to-use latency (ld.global.ca chase, slope over CHAIN_LENGTHS) over a fresh random
    single cycle of `f` bytes: `launches` when walked before every launch (the L1
    footprints), `deep_launches` for the L2 and device-memory footprints, whose per-launch
    slopes scatter more, split over the places of the buffer staircase_places gives. The
    footprint is data (the chain uploaded to the shared buffer): every point launches the
    same compiled, SASS-verified kernels. `layout`: another chain over the footprint (the
    second L2 method's forward walk) in place of the random cycle."""
    geo = geometry_of(session)
    probe = kernels.chase_probe("ca", session.gpu.dev.arch, ChaseKind.CHAIN)
    lay = layout if layout is not None else \
        session.runs.take(layout_key(f), lambda: stair_layout(f))
    w = geo.sweep_warm(f)
    offsets = staircase_places(f, geo.l2_bytes, buffer(session).nbytes) \
        if w == Warm.FIRST else [0]
    per_place = launches.of(session.repeats) if w == Warm.EVERY else \
        -(-deep_launches.of(session.repeats) // len(offsets))
    run = pooled([chase(session, probe, lay, repeats=per_place, warm=w, offset=o)
                  for o in offsets])
    fitted = fit(run.cycles, run.ops)
    return StairPoint(f, fitted.value, fitted.spread, run.smids, w.value)


def stair_layout(f: int) -> Layout:
    """The chain of the staircase point (or bisection point) at footprint `f`."""
    return random_layout(f, LINE, seed=f % 9973).ready()


def layout_key(f: int) -> tuple:
    return ("memory", "stair_layout", f)


def chains_ahead(session: Context, fs: list[int], key, make) -> None:
    """The chains over footprints `fs` (`make(f)`) built on a host worker while the GPU chases
    the current one, kept under `key(f)` for the point that takes them."""
    for f in fs:
        session.runs.ahead(key(f), lambda f=f: make(f))


def sweep_ahead(session: Context, fs: list[int], measure, key, make) -> Curve:
    """`measure(f)` (a StairPoint) at every footprint of `fs`, the next LAYOUTS_AHEAD points'
    chains built ahead (chains_ahead)."""
    pts = []
    for i, f in enumerate(fs):
        chains_ahead(session, fs[i + 1:i + 1 + LAYOUTS_AHEAD], key, make)
        pts.append(measure(f))
    return Curve.of_points(pts)


def staircase(session: Context, launches: Bounds = SWEEP_LAUNCHES,
              deep_launches: Bounds = STAIRCASE_LAUNCHES) -> Curve:
    """The cache staircase: a point (``point``) at every footprint of Geometry.sweep(), the
    next points' chains built while the GPU chases (sweep_ahead)."""
    return sweep_ahead(session, geometry_of(session).sweep(),
                       lambda f: point(session, f, launches, deep_launches), layout_key,
                       stair_layout)


def fill_sweep(session: Context, launches: Bounds = SWEEP_LAUNCHES) -> Curve:
    """Mean latency of a forward ld.global.ca walk at each stride of STRIDES over a region
    held in the L2 but not the L1 (walked once with .cg first): misses are L1 fills from the
    L2, so the curve gives the L1 fill granularity.

    The same walk for L2 fills from device memory (.cg over a flushed region) is NOT offered:
    its latency was not monotonic in the stride and differed between sessions (DRAM
    row-buffer locality and prefetching dominate; docs/memory.md, lab notes), so no fill size
    can be read from it."""
    arch = session.gpu.dev.arch
    probe = kernels.chase_probe("ca", arch, ChaseKind.CHAIN)
    warm_probe = kernels.chase_probe("cg", arch, ChaseKind.LOOP)
    fps, lat, spread, smids, warms = [], [], [], set(), []
    for stride in STRIDES:
        lay = sequential_layout(FILL_REGION // stride, stride)
        chase(session, warm_probe, lay, repeats=0, warm=Warm.NONE, flush=True,
              lengths={min(warm_probe.entries): lay.n})
        run = chase(session, probe, lay, repeats=launches.of(session.repeats), warm=Warm.NONE,
                    flush=False)
        fitted = fit(run.cycles, run.ops)
        fps.append(stride)
        lat.append(fitted.value)
        spread.append(fitted.spread)
        warms.append("l2-resident")
        smids.update(run.smids)
    return Curve(fps, lat, spread, sorted(smids), warms)
