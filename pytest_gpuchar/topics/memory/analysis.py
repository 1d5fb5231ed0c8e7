"""The memory figures' maths, pure (no CuPy, no pytest): footprints from the device's cache
sizes (``Geometry``), Table 10's conflicting address patterns, the staircase's plateaus and
knees (capacities) and the stride sweep's fill size."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .chains import CONST_LINES, CONST_STRIDE, Layout, const_layout, random_layout
from .rows import LINE, SMEM_BYTES, BankRow, Footprint, LevelRow, Warm

FALLBACK_L1 = 256 * 1024        # largest L1/shared per SM of the archs the suite knows (sm_90)
FALLBACK_L2 = 64 * 2**20        # above the largest L2 of the known archs (sm_90: 50 MiB)
DRAM_FACTOR = 4                 # device-memory chases: footprint >= 4 x L2
MEMORY_RESERVE = 0.25           # leave this fraction of free device memory alone
SWEEP_STEP = 2 ** (1 / 3)       # staircase footprints: 3 points per doubling


# --- footprints from the device -------------------------------------------------------------

@dataclass
class Geometry:
    """Cache sizes the footprints are chosen from, and where each came from."""
    l1_bytes: int          # unified L1/shared per SM (the L1 can be at most this)
    l2_bytes: int
    free_bytes: int | None
    notes: list[str] = field(default_factory=list)

    def footprint(self, level: Footprint | str) -> int:
        """Footprint of a Table IV level (bytes)."""
        if level == Footprint.L1:
            return 16 * 1024          # fits the smallest L1 of every arch (sm_50: 24 KB)
        if level == Footprint.L2:
            # well above any L1, well below the L2 (and below one partition of a split L2)
            return max(4 * self.l1_bytes, min(self.l2_bytes // 8, 8 * 2**20))
        if level == Footprint.DRAM:
            return self.dram_footprint()[0]
        if level == Footprint.SHARED:
            return 4096
        if level == Footprint.CONST:
            return CONST_LINES * CONST_STRIDE
        raise ValueError(f"unknown level footprint {level!r}")

    def dram_footprint(self) -> tuple[int, str]:
        want = 1 << math.ceil(math.log2(DRAM_FACTOR * self.l2_bytes))
        return fit_to_memory(want, self.free_bytes, floor=2 * self.l2_bytes)

    def sweep(self, per_octave: int = 3) -> list[int]:
        """Staircase footprints: 4 KB to the device-memory footprint, `per_octave` points per
        doubling, multiples of the line size."""
        top = self.dram_footprint()[0]
        k_max = int(math.floor(math.log2(top / 4096) * per_octave + 1e-9))
        pts = sorted({int(round(4096 * 2 ** (k / per_octave) / LINE)) * LINE
                      for k in range(k_max + 1)})
        return pts

    def sweep_warm(self, f: int) -> Warm:
        """Warm-up policy of one staircase point: the L1 is emptied between launches, so
        small footprints are walked before every timed chain; the L2 keeps its lines between
        launches, so larger ones once; above 1.25x L2 a warm-up walk cannot leave the timed
        lines cached (a cyclic walk longer than the cache evicts each line before its reuse):
        none, and the L2 is flushed after the upload instead."""
        if f <= 1 << 20:
            return Warm.EVERY
        if f <= 1.25 * self.l2_bytes:
            return Warm.FIRST
        return Warm.NONE


def fit_to_memory(want: int, free: int | None, *, floor: int = 0) -> tuple[int, str]:
    """`want` bytes, or less when free device memory (minus MEMORY_RESERVE) cannot hold it:
    halved until it fits, and the reason said. Never below `floor` silently: if even that does
    not fit, the largest power of two that fits is returned with a note saying the level
    cannot be reached."""
    if free is None:
        return want, ""
    budget = int(free * (1 - MEMORY_RESERVE))
    if want <= budget:
        return want, ""
    got = want
    while got > budget and got > 4096:
        got //= 2
    note = (f"footprint reduced from {want / 2**20:.0f} MiB to {got / 2**20:.0f} MiB: only "
            f"{free / 2**20:.0f} MiB device memory free")
    if got < floor:
        note += f" (below {floor / 2**20:.0f} MiB: device memory latency NOT reached)"
    return got, note


def geometry(dev) -> Geometry:
    """Footprint inputs from a DeviceInfo: L2 from the device's l2CacheSize, L1 from the
    unified L1/shared size per SM, free memory from cudaMemGetInfo. Fallback (documented) when
    one is 0: L1 256 KiB, L2 64 MiB (above every L2 of the archs the suite knows), so the sweep
    still spans every level, only coarser."""
    notes = []
    l2 = dev.l2_bytes or 0
    if l2 <= 0:
        l2 = FALLBACK_L2
        notes.append(f"L2 size unreadable: assumed {FALLBACK_L2 // 2**20} MiB (fallback)")
    l1 = dev.l1_shared_bytes or 0
    if l1 <= 0:
        l1 = FALLBACK_L1
        notes.append(f"L1/shared size unknown: assumed {FALLBACK_L1 // 1024} KiB (fallback)")
    g = Geometry(l1, l2, dev.free_memory_bytes, notes)
    _, note = g.dram_footprint()
    if note:
        g.notes.append(note)
    return g


def human_bytes(n: int) -> str:
    for unit, div in (("MiB", 2**20), ("KiB", 1024)):
        if n >= div:
            v = n / div
            return f"{v:.0f} {unit}" if abs(v - round(v)) < 0.05 else f"{v:.1f} {unit}"
    return f"{n} B"


# --- Table 10: bank conflicts by construction ---------------------------------------------------

BANK_POSITIONS = 4      # each thread's own cycle through this many addresses


def bank_block(row: BankRow) -> int:
    """Bytes between a thread's consecutive positions: a multiple of 128 bytes."""
    return max(128, 32 * 4 * row.ways)


def bank_layout(row: BankRow, positions: int = BANK_POSITIONS) -> tuple[np.ndarray, np.ndarray]:
    """Shared-memory contents (u32 offsets from the array base) and each thread's start
    offset for a Table 10 row: at step m thread t reads offset m*B + t*4k (k = ways; 0 =
    broadcast: every thread the same word), B a multiple of 128 bytes, so every step is a
    k-way conflict; each thread cycles through its own `positions` addresses."""
    k = row.ways
    tstride = 4 * k
    block = bank_block(row)
    words = np.zeros(SMEM_BYTES // 4, dtype=np.uint32)
    if positions * block > SMEM_BYTES:
        raise ValueError(f"{row.name}: {positions} x {block} B exceeds {SMEM_BYTES} B shared")
    starts = np.zeros(32, dtype=np.uint64)
    for t in range(32):
        for m in range(positions):
            a = m * block + t * tstride
            nxt = ((m + 1) % positions) * block + t * tstride
            words[a // 4] = nxt
            if row.width == 64:
                words[a // 4 + 1] = 0
        starts[t] = t * tstride
    return words, starts


def bank_end(row: BankRow, thread: int, steps: int) -> int:
    """The offset thread `thread` reaches after `steps` loads of its cycle."""
    return (steps % BANK_POSITIONS) * bank_block(row) + thread * 4 * row.ways


def bank_banks(row: BankRow) -> int:
    """Conflict degree the layout produces at step 0 (for tests): the most distinct 4-byte
    words any bank must serve to the warp."""
    words, starts = bank_layout(row)
    per_bank: dict[int, set[int]] = {}
    for t in range(32):
        a = int(starts[t])
        for w in range(row.width // 32):
            word = a // 4 + w
            per_bank.setdefault(word % 32, set()).add(word)
    return max(len(s) for s in per_bank.values())


# --- the staircase ------------------------------------------------------------------------------

@dataclass
class Plateau:
    first: int          # index of the first point
    last: int
    latency: float      # median latency over the plateau
    lo_bytes: int       # footprint of the first / last point
    hi_bytes: int


def _run_end(lat: np.ndarray, i: int, rel: float, abs_tol: float) -> int:
    """The last point of the longest run from point i whose points stay within
    max(rel*median, abs_tol) of the run's median."""
    j, n = i, len(lat)
    while j + 1 < n:
        med = float(np.median(lat[i:j + 2]))
        if np.all(np.abs(lat[i:j + 2] - med) <= max(rel * med, abs_tol)):
            j += 1
        else:
            break
    return j


def _range(lat: np.ndarray) -> float:
    """A run's range over its median."""
    return float((lat.max() - lat.min()) / np.median(lat))


def _runs(footprints: list[int], lat: np.ndarray, rel: float, abs_tol: float,
          min_points: int) -> list[Plateau]:
    """Maximal runs of consecutive points within max(rel*median, abs_tol) of their median. A
    run's first point is left out, as a partial hit between two levels, when the run from
    the next point reaches further and is the tighter of the two (smaller range over its
    median): a point of the near-to-far L2 transition (part near hits) once formed a run
    with the far level's first point, cut the level there, and the L2 capacity was read off
    that point's latency instead of the far level's (docs/memory.md, lab notes)."""
    out: list[Plateau] = []
    n = len(lat)
    end = [_run_end(lat, i, rel, abs_tol) for i in range(n)]     # the run from each point
    i = 0
    while i < n:
        j = end[i]
        if i + 1 < n:
            k = end[i + 1]
            if k > j and _range(lat[i + 1:k + 1]) < _range(lat[i:j + 1]):
                i += 1
                continue
        if j - i + 1 >= min_points:
            out.append(Plateau(i, j, float(np.median(lat[i:j + 1])), footprints[i],
                               footprints[j]))
            i = j + 1
        else:
            i += 1
    return out


def plateaus(footprints: list[int], latency: list[float], *, rel: float = 0.08,
             abs_tol: float = 4.0, min_points: int = 2) -> list[Plateau]:
    """Runs of consecutive points whose latency stays within max(rel*lat, abs_tol) of the
    run's median: the levels of the staircase. Points between plateaus (partial hits) belong
    to none. Runs shorter than `min_points` are dropped."""
    lat = np.asarray(latency, dtype=float)
    # merge neighbours at the same level (a noisy point split one plateau in two)
    merged: list[Plateau] = []
    for p in _runs(footprints, lat, rel, abs_tol, min_points):
        if merged and abs(p.latency - merged[-1].latency) <= max(rel * p.latency, abs_tol):
            q = merged[-1]
            merged[-1] = Plateau(q.first, p.last, float(np.median(lat[q.first:p.last + 1])),
                                 q.lo_bytes, p.hi_bytes)
        else:
            merged.append(p)
    return merged


# A cache hit's latency repeats within about 1% from point to point of a plateau (docs/memory.md,
# lab notes); a point at its upper end more than 3% above its level is a point where part of
# the chain already misses: the capacity lies below it
EDGE_REL = 0.03


def without_rising_edge(p: Plateau, footprints: list[int], latency: list[float], *,
                        rel: float = EDGE_REL, abs_tol: float = 4.0) -> Plateau:
    """The plateau without the points at its upper end that stand above its level by more
    than max(rel x level, abs_tol). `plateaus` groups points within 8% (a device-memory
    plateau scatters that much), which can take the first partial-miss point of a cache
    level for a hit: the near-L2 capacity then flips between two sweep points from night to
    night (docs/memory.md, lab notes)."""
    lat = np.asarray(latency, dtype=float)
    last = p.last
    while last > p.first and lat[last] - p.latency > max(rel * p.latency, abs_tol):
        last -= 1
    if last == p.last:
        return p
    return Plateau(p.first, last, float(np.median(lat[p.first:last + 1])), p.lo_bytes,
                   footprints[last])


@dataclass
class Knee:
    """A capacity: the largest footprint still on the lower plateau (`lo`), the first point
    of the next plateau (`hi`); the capacity lies in [lo, hi)."""
    lo: int
    hi: int
    below: float        # latency of the lower plateau
    above: float

    @property
    def estimate(self) -> int:
        return self.lo


def knees(footprints: list[int], latency: list[float], **kw) -> list[Knee]:
    ps = plateaus(footprints, latency, **kw)
    return [Knee(a.hi_bytes, footprints[b.first], a.latency, b.latency)
            for a, b in zip(ps, ps[1:]) if b.latency > a.latency]


# --- the fill size ------------------------------------------------------------------------------

def fill_granularity(strides: list[int], latency: list[float], *,
                     frac: float = 0.9) -> int | None:
    """Bytes fetched per miss, from a forward walk at each stride: below the fill size a miss
    serves stride/fill of the accesses, so the mean latency grows with the stride until it
    reaches the all-miss level at stride = fill. Returns the smallest stride whose latency
    reaches `frac` of the way from the smallest stride's latency to the all-miss level (the
    largest strides' median), or None when the curve does not rise (no misses seen)."""
    lat = np.asarray(latency, dtype=float)
    if float(np.median(lat[-2:])) - float(lat[0]) < 4.0:
        return None
    level = fill_level(latency, frac)
    for s, v in zip(strides, lat):
        if v >= level:
            return int(s)
    return None


def fill_level(latency: list[float], frac: float = 0.9) -> float:
    """The latency `frac` of the way from the smallest stride's to the all-miss level (the
    largest strides' median): where the fill size is read."""
    lat = np.asarray(latency, dtype=float)
    return float(lat[0]) + frac * (float(np.median(lat[-2:])) - float(lat[0]))


def fill_ambiguity(strides: list[int], latency: list[float], spread: list[float], fill: int,
                   *, frac: float = 0.9) -> str:
    """Why the stride sweep cannot tell `fill` from the stride below it ('' when it can): the
    stride below the crossing reaches the 90% level within its own spread. A sweep whose
    all-miss level scatters (its region partly in the far L2 partition) can put that stride
    anywhere between hit and miss from one launch to the next."""
    i = strides.index(fill) if fill in strides else 0
    if i == 0:
        return ""
    level = fill_level(latency, frac)
    below, sp = float(latency[i - 1]), float(spread[i - 1])
    if below + sp < level:
        return ""
    return (f"the stride below the fill size ({strides[i - 1]} B: {below:.0f} +- {sp:.0f} "
            f"cycles) reaches the {frac:.0%} level ({level:.0f} cycles) within its spread: "
            f"{strides[i - 1]} and {fill} B cannot be told apart")


def fill_spread(strides: list[int], latency: list[float], spread: list[float], fill: int,
                *, frac: float = 0.9) -> float:
    """How far the fill size moves within the sweep's own scatter: the smallest stride whose
    latency less its spread reaches the `frac` level (the largest stride when none does)
    minus the smallest whose latency plus its spread does (bytes; 0 when the crossing is
    clear of every stride's spread)."""
    level = fill_level(latency, frac)
    high = [s for s, v, sp in zip(strides, latency, spread) if v + sp >= level]
    low = [s for s, v, sp in zip(strides, latency, spread) if v - sp >= level]
    lo = min(high) if high else fill
    return float((min(low) if low else max(strides)) - lo)


def fill_model_error(strides: list[int], latency: list[float], fill: int) -> float:
    """Largest deviation, as a fraction of (miss - hit), of the measured curve from the fill
    model: hit + min(1, stride/fill) * (miss - hit), hit and miss taken from the curve's ends
    (hit extrapolated from the smallest stride)."""
    lat = np.asarray(latency, dtype=float)
    miss = float(np.median(lat[-2:]))
    s0 = strides[0]
    # lat0 = hit + s0/fill (miss - hit)  =>  hit = (lat0 - s0/fill miss) / (1 - s0/fill)
    a = min(1.0, s0 / fill)
    hit = (lat[0] - a * miss) / (1 - a) if a < 1 else lat[0]
    span = miss - hit
    model = np.array([hit + min(1.0, s / fill) * span for s in strides])
    return float(np.max(np.abs(model - lat)) / span) if span > 0 else float("inf")


def level_layout(level: LevelRow, g: Geometry, seed: int = 1) -> Layout:
    """The chain a Table IV level chases through."""
    if level.footprint == Footprint.CONST:
        return const_layout()
    return random_layout(g.footprint(level.footprint), LINE, seed)
