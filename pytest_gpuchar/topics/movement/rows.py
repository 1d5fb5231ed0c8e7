"""The movement tables as data: cluster sizes and DSM flavours, TMA mechanisms and levels,
async-copy and barrier rows, bandwidth rows with their documented peaks, the load levels of
the loaded-latency curve, and the chain lengths / trip counts every probe uses."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ...core import archs
from ...core.runner import Bounds

# --- lengths (differential: every figure is a slope over these) ----------------------------------
# Every length of a probe must keep the guard over its body the same way (core.probe.same_guard):
# ptxas if-converts it over 8-16 dependent loads and keeps the branch from 32 on. The TMA chains
# are 16-64 long so that one launch's scatter (L2: 100-cycle modes; device memory: fresh random
# lines) stays under the spread limit of the slope; cluster launches time 4-32 CTAs per SM
# (with clusters the scheduler spreads 2-10 CTAs over the SMs of a nominal 2-8).
DSM_LENGTHS = (32, 48, 64)        # dependent ld.shared::cluster per timed region
MAPA_LENGTHS = (16, 32, 64)
BARRIER_LENGTHS = (8, 16, 32)     # barrier.cluster arrive + wait pairs
TMA_LENGTHS = (16, 32, 64)        # dependent 1 KiB transfers (issue, complete, read)
ASYNC_LENGTHS = (8, 16, 32)       # dependent cp.async round trips
MBAR_LENGTHS = (16, 32, 64)
FENCE_LENGTHS = (8, 16, 32)
L2_LENGTHS = (32, 48, 64)         # dependent L2 hits per line (heatmap)
LOADED_LENGTHS = (32, 64, 128)    # dependent device-memory loads under load

CLUSTER_SIZES = (2, 4, 8, 16)     # 16 needs the non-portable attribute
LINE = 128                        # bytes per chain element (one L2 line)
TMA_BYTES = 1024                  # bytes per transfer of the TMA latency chains
DSM_SLOTS = 64                    # chain elements in each CTA's shared memory
L2_LINES = 160                    # lines of the heatmap (> SM count: staggered, no sharing)
TMA_L2_BLOCKS = 32                # blocks of an L2-resident TMA chain (walked warm first)


def needs(arch: str, minimum: int, what: str) -> str | None:
    """None if `arch` has the feature, else why not (the NotApplicable reason)."""
    if archs.number(arch) < minimum:
        return f"{what}: sm_{minimum}+ only ({arch} is older)"
    return None


# --- clusters and distributed shared memory ------------------------------------------------------

class DsmFlavour(str, Enum):
    """How the remote word is addressed: ld.shared::cluster on a 32-bit shared::cluster
    address (the compiler rebuilds the 64-bit window address per load), or a generic load
    through a mapa.u64 pointer (what CUDA C++'s cluster.map_shared_rank gives)."""
    U32 = "u32"
    GENERIC = "generic"


@dataclass(frozen=True)
class DsmRow:
    cluster: int
    flavour: DsmFlavour

    @property
    def id(self) -> str:
        return f"{self.flavour.value}.c{self.cluster}"


DSM_ROWS = tuple(DsmRow(c, f) for f in DsmFlavour for c in CLUSTER_SIZES)


class Sync(str, Enum):
    """The cluster-synchronisation rows."""
    MAPA = "mapa"
    BARRIER = "barrier"                  # barrier.cluster.arrive (release) + wait (acquire)
    BARRIER_RELAXED = "barrier_relaxed"  # barrier.cluster.arrive.relaxed + wait


@dataclass(frozen=True)
class SyncRow:
    kind: Sync
    cluster: int = 2

    @property
    def id(self) -> str:
        return self.kind.value if self.kind is Sync.MAPA else f"{self.kind.value}.c{self.cluster}"


SYNC_ROWS = (SyncRow(Sync.MAPA),) + tuple(SyncRow(k, c) for k in (Sync.BARRIER,
                                                                Sync.BARRIER_RELAXED)
                                          for c in CLUSTER_SIZES)
LAUNCH_CLUSTERS = (1, 2, 4, 8)           # 1: a plain launch (no cluster attribute)
LAUNCH_WAVES = (4, 8, 16, 32)            # blocks per SM, run one after the other
DSM_BW_CLUSTERS = (2, 4, 8, 16)


# --- TMA -----------------------------------------------------------------------------------------

class Mechanism(str, Enum):
    """How 1 KiB reaches the SM: one warp's plain loads, cp.async.bulk, a 1D or 2D tensor map."""
    PLAIN = "plain"
    BULK = "bulk"
    TENSOR1D = "tensor1d"
    TENSOR2D = "tensor2d"


class Level(str, Enum):
    """Where the data sits when it is fetched."""
    L1 = "l1"
    L2 = "l2"
    DRAM = "dram"


@dataclass(frozen=True)
class TmaRow:
    mechanism: Mechanism
    level: Level

    @property
    def id(self) -> str:
        return f"{self.mechanism.value}.{self.level.value}"


TMA_ROWS = tuple(TmaRow(m, lv) for m in Mechanism for lv in (Level.L2, Level.DRAM))
TMA_SIZES = (256, 512, 1024, 2048, 4096, 8192, 16384)
TMA_STAGE = 32768                 # bytes per pipeline stage (two stages in flight)
TMA_KNEE_SHARE = 0.9              # the knee: smallest size reaching 90% of the best
TMA_TRIPS = (6, 12, 24)
TMA_BW_LEVELS = (Level.L2, Level.DRAM)
MULTICAST_CLUSTERS = (2, 4)


@dataclass(frozen=True)
class TmaBwRow:
    level: Level
    size: int

    @property
    def id(self) -> str:
        return f"{self.level.value}.s{self.size}"


TMA_BW_ROWS = tuple(TmaBwRow(lv, s) for lv in TMA_BW_LEVELS for s in TMA_SIZES)


@dataclass(frozen=True)
class MulticastRow:
    cluster: int
    multicast: bool     # False: every CTA loads its own copy (the comparison)

    @property
    def id(self) -> str:
        return f"{'multicast' if self.multicast else 'separate'}.c{self.cluster}"


MULTICAST_ROWS = tuple(MulticastRow(c, m) for c in MULTICAST_CLUSTERS for m in (True, False))
MULTICAST_LENGTHS = (4, 8, 16)


# --- async copies, mbarriers, fences -------------------------------------------------------------

class Async(str, Enum):
    CP_ASYNC_CA = "cp_async.ca"        # cp.async.ca 16 B round trip, chain in the L1
    CP_ASYNC_CG = "cp_async.cg"        # cp.async.cg 16 B round trip, chain in the L2
    ARRIVE = "mbarrier.arrive"         # independent arrives (issue cost)
    TEST_WAIT = "mbarrier.arrive_test_wait"   # arrive -> test_wait -> next address
    TRY_WAIT = "mbarrier.arrive_try_wait"     # arrive -> try_wait -> next address
    FENCE = "fence.proxy_async"        # fence.proxy.async.shared::cta alone
    STORE_FENCE = "fence.proxy_async_after_st"   # st.shared + fence.proxy.async


ASYNC_MIN_ARCH = {Async.CP_ASYNC_CA: 80, Async.CP_ASYNC_CG: 80}   # the others: sm_90
ASYNC_ROWS = tuple(Async)


# --- bandwidths ----------------------------------------------------------------------------------

class Stream(str, Enum):
    """A streaming access pattern of every thread of one 1024-thread CTA per SM."""
    SHARED_U32 = "shared_u32"
    SHARED_U64 = "shared_u64"
    SHARED_U128 = "shared_u128"
    L1 = "l1"
    L2 = "l2"
    DRAM_READ = "dram_read"
    DRAM_WRITE = "dram_write"
    DRAM_COPY = "dram_copy"
    CP_ASYNC = "cp_async_cg"
    DSM = "dsm"          # remote ld.shared::cluster (the cluster table's bandwidth rows)


class Region(str, Enum):
    """What one CTA of a stream kernel walks: its shared memory, its own small global region
    (wrapped every iteration: a cache-resident footprint), or its slice of a buffer several
    times the L2 (never wrapped within a launch)."""
    SHARED = "shared"
    CTA = "cta"
    SLICE = "slice"


BLOCK = 1024            # threads per CTA of the stream kernels


@dataclass(frozen=True)
class StreamRow:
    kind: Stream
    width: int          # bytes per thread per access
    unroll: int         # accesses per loop iteration
    trips: tuple[int, ...]
    level: Level
    region: Region
    region_bytes: int = 0   # per-CTA footprint (SHARED, CTA); SLICE: from the buffer
    peak: str = ""      # "shared" or "hbm": the documented peak it is compared with
    stage: str = ""     # the staircase step this row draws ("" : not drawn)

    @property
    def id(self) -> str:
        return self.kind.value

    @property
    def step(self) -> int:
        """Bytes between a thread's accesses k and k + 1 of one iteration: a warp's chunk
        (shared and L1 rows: every warp re-reads its neighbours' words) or a whole CTA's
        (every access of an iteration distinct)."""
        return 32 * self.width if self.region is Region.SHARED or self.level is Level.L1 \
            else BLOCK * self.width

    @property
    def advance(self) -> int:
        """Bytes the CTA moves on per iteration."""
        return self.unroll * self.step


SHARED_REGION = 32 * 1024       # per-CTA shared-memory footprint of the shared rows
STREAM_ROWS = (
    StreamRow(Stream.SHARED_U32, 4, 8, (32, 64, 128), Level.L1, Region.SHARED, SHARED_REGION,
              "shared", "shared"),
    StreamRow(Stream.SHARED_U64, 8, 8, (32, 64, 128), Level.L1, Region.SHARED, SHARED_REGION,
              "shared"),
    StreamRow(Stream.SHARED_U128, 16, 8, (16, 32, 64), Level.L1, Region.SHARED, SHARED_REGION,
              "shared"),
    StreamRow(Stream.L1, 16, 4, (32, 64, 128), Level.L1, Region.CTA, 32 * 1024, "", "L1"),
    StreamRow(Stream.L2, 16, 4, (16, 32, 64), Level.L2, Region.CTA, 64 * 1024, "", "L2"),
    StreamRow(Stream.DRAM_READ, 16, 4, (8, 16, 24), Level.DRAM, Region.SLICE, 0, "hbm",
              "device memory"),
    StreamRow(Stream.DRAM_WRITE, 16, 4, (8, 16, 24), Level.DRAM, Region.SLICE, 0, "hbm"),
    StreamRow(Stream.DRAM_COPY, 16, 4, (4, 8, 12), Level.DRAM, Region.SLICE, 0, "hbm"),
    StreamRow(Stream.CP_ASYNC, 16, 4, (16, 32, 64), Level.L2, Region.CTA, 64 * 1024),
)
STREAMS = {r.kind: r for r in STREAM_ROWS}
DSM_STREAM = StreamRow(Stream.DSM, 16, 8, (16, 32, 64), Level.L1, Region.SHARED, SHARED_REGION)
BW_SPREAD_REL = 0.02            # per-repeat rates spread wider than this: unstable
# Stream rates per level the data comes from. SPREAD: how far a run's launches may scatter
# (max - min of the per-launch rates, share of the value) before the figure is unstable; L2
# and device-memory launches scatter more while their median repeats (the ranges and nights:
# docs/movement.md, lab notes; the tolerances: expectations/tolerances.yaml).
RATE_SPREAD_REL = {Level.L1: BW_SPREAD_REL, Level.L2: 0.03, Level.DRAM: 0.12}

# Documented peaks. Shared memory: 32 banks of 32 bits per clock (CUDA C++ Programming
# Guide, "Shared Memory" of compute capability 5.x and later). Device memory: NVIDIA's
# datasheets, by device name (substring, first match).
SHARED_PEAK = 128.0             # B/clk/SM
SHARED_PEAK_SOURCE = ("CUDA C++ Programming Guide, compute capabilities 5.x+: shared memory "
                      "has 32 banks, each 32 bits wide per clock cycle (128 B/clk/SM)")
HBM_PEAK_GBPS = (
    ("H200", 4800.0, "NVIDIA H200 datasheet: 4.8 TB/s HBM3e"),
    ("H100 PCIe", 2000.0, "NVIDIA H100 datasheet: H100 PCIe 2.0 TB/s HBM2e"),
    ("H100 NVL", 3900.0, "NVIDIA H100 datasheet: H100 NVL 3.9 TB/s HBM3"),
    ("H100", 3350.0, "NVIDIA H100 datasheet: H100 SXM 3.35 TB/s HBM3"),
    ("H800", 3350.0, "NVIDIA H800 SXM5 specification: 3.35 TB/s HBM3"),
)


def hbm_peak(device: str) -> tuple[float, str] | None:
    """(GB/s, source) of the device's documented memory bandwidth, or None if unknown."""
    for name, gbps, source in HBM_PEAK_GBPS:
        if name in device:
            return gbps, source
    return None


def stream_arch(row: StreamRow, arch: str) -> str | None:
    """Why the row's kernel cannot exist on `arch` (None: it can)."""
    if row.kind is Stream.CP_ASYNC:
        return needs(arch, 80, "cp.async copies")
    return needs(arch, 80, "the movement topic's bandwidth kernels (its scope: Ampere onwards)")


# --- the L2 from every SM, loaded latency --------------------------------------------------------

class L2Figure(str, Enum):
    """The heatmap's figures: near / far latency of repeated loads and of atomics (performed
    at the line's home slice, so a far line stays far), the partitions of the atomic map."""
    NEAR = "near"
    FAR = "far"
    ATOMIC_NEAR = "atomic_near"
    ATOMIC_FAR = "atomic_far"
    PARTITIONS = "partitions"

    @property
    def op(self) -> str:
        return "load" if self in (L2Figure.NEAR, L2Figure.FAR) else "atomic"



L2_ROWS = tuple(L2Figure)
LOADED_SHARES = (0, 12, 25, 50, 100)    # percent of the other SMs streaming
LOADED_TRIPS = 256                      # streamer iterations (each 64 KiB per CTA)
LOADED_WAIT_NS = 20_000_000             # the chaser waits at most 20 ms for the streamers
# the TMA device-memory chains: per-launch slopes scatter widely, so a median of 15 moved night
# to night as sampling predicts; 60 launches (each transfer a block of its own). The figures
# behind these repeat counts: docs/movement.md, lab notes
TMA_DRAM_LAUNCHES = Bounds(60)
# device-memory streams: per-launch rates scatter a few %, so a median of 7 launches moved
# about 1% night to night (the whole GPU's write rate); 28 launches halve that
DRAM_STREAM_LAUNCHES = Bounds(28)
# the loaded chase: per-launch slopes scatter widely under streaming load, and with 15
# launches the median moved by a few % night to night; 60 launches halve that (about 1 s a
# night)
LOADED_LAUNCHES = Bounds(60)
# cluster launches: per-launch slopes scatter a few %, so a median of 7 moved about 2%
# between back-to-back nights; 25 launches halve that
CLUSTER_LAUNCHES = Bounds(25)
# the cp.async .cg chain: 32 nodes in one 4 KiB block sat in whichever L2 slices that block's
# physical address hashes to, a mix of near and far fixed for the process: within a run its
# launches agreed closely, between back-to-back nights it moved by a few %. Its nodes
# are now 2048 lines at random over 32 MiB (16 x 2 MiB pages), each launch walking the next
# ones, 25 launches: the median averages over the lines, not one block's mix
CP_ASYNC_CG_NODES = 2048
CP_ASYNC_CG_REGION = 32 * 2**20
CP_ASYNC_CG_LAUNCHES = Bounds(25)
# ... and each launch times other lines: the full range of its 25 per-launch slopes is several
# % while their median repeats closely
CP_ASYNC_CG_SPREAD_REL = 0.15
DRAM_SPREAD_REL = 0.25   # per-launch slopes over fresh random lines scatter this much (the
                         # memory topic's device-memory rows); the median is judged


# Rows whose kernels stop the GPU: measured, they would take every later hardware test with
# them, so their hardware test is skipped with this reason (the static SASS check still runs).
# None now: the wait chains' CUDA error 719 was their kernel's own address (docs/movement.md).
ASYNC_FAULTS: dict[Async, str] = {}
