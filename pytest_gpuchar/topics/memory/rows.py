"""The memory tables as data: the load flavours a chase is built from and the SASS one step
must become (Table IV's rows: which level, through which footprint), Table 10's bank-conflict
rows, and the staircase's capacity and fill rows."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ...core import archs
from ...core.runner import Bounds

LINE = 128                      # bytes per pointer in random chases: one per 128-byte line
# unrolled dependent loads per timed region: from 32 on ptxas keeps the guard's branch at every
# length (core.probe.same_guard; it if-converts 16), and a range of 96 steps keeps one launch's
# scatter in the slope within the limit (L2 hits and device memory at 32-64 were not)
CHAIN_LENGTHS = (32, 64, 128)
LOOP_STEPS = (32, 64, 128)      # iterations of the timed chase loop
# Launches of a device-memory row: each timed load goes to a fresh random line, so a launch's
# chains scatter a few %; the slope of the medians of 15 launches moved about what that
# scatter gives between back-to-back nights, and 60 halve it (docs/memory.md, lab notes)
DRAM_LAUNCHES = Bounds(60)
# Launches per staircase point in the L2 and device memory (footprints past 1 MiB): the far-L2
# plateau is the median of two or three such points, each a few % of per-launch scatter; with
# 3 launches it moved about 2% between back-to-back nights (docs/memory.md, lab notes); 25
# whatever --gpuchar-repeats asks (the sweep has tens of points)
STAIRCASE_LAUNCHES = Bounds(25, 25)
# ... and from a quarter of the L2 to the L2 they are split over this many places of the
# buffer: with 25 launches at one place the far plateau moved up to twice what its per-launch
# scatter predicts between nights (docs/memory.md, lab notes): which pages the chain lies in
# decides its mix of near and far lines
STAIRCASE_PLACES = 5
SMEM_BYTES = 16384              # static shared array of the shared-memory probes


class Space(str, Enum):
    """The state space a chase walks through."""
    GLOBAL = "global"
    SHARED = "shared"
    CONST = "const"


class Footprint(str, Enum):
    """What a Table IV row's chain spans (Geometry.footprint gives its bytes)."""
    L1 = "l1"
    L2 = "l2"
    DRAM = "dram"
    SHARED = "shared"
    CONST = "const"


class Warm(str, Enum):
    """When the whole cycle is walked (untimed) before a timed chain."""
    EVERY = "every"     # before every timed chain: the L1 is emptied between launches
    FIRST = "first"     # before the first launch only: the L2 keeps its lines
    NONE = "none"       # never: each launch continues the cycle, no line reused


class ChaseKind(str, Enum):
    """The two chase probes of a flavour: unrolled loads (latency) or a nounroll loop."""
    CHAIN = "chain"
    LOOP = "loop"

    @classmethod
    def of(cls, kind: "ChaseKind | str") -> "ChaseKind":
        try:
            return cls(kind)
        except ValueError:
            raise ValueError(f"unknown chase probe kind {kind!r}: chain or loop") from None


@dataclass(frozen=True)
class Flavour:
    """One load (or store+load) instruction the chase is built from."""
    name: str
    space: Space
    ptx_op: str         # the PTX instruction of one chase step ({p} is the chain register)
    width: int          # chain register width
    note: str

    def sass(self, arch: str) -> tuple[str, ...]:
        """The exact SASS opcodes one step must become on `arch` (see sass_unit)."""
        return sass_unit(self.name, arch)

    def step_lines(self, reg: str) -> list[str]:
        """The PTX of one chase step on chain register `reg`."""
        return self.ptx_op.format(p=reg).split("\n")

    @property
    def op_text(self) -> str:
        """The step as the method texts print it."""
        return self.ptx_op.replace("{p}", "p").replace("\n", " ")


FLAVOURS = {f.name: f for f in (
    Flavour("ca", Space.GLOBAL, "ld.global.ca.u64 {p}, [{p}];", 64,
            "cache at all levels (L1 and L2)"),
    Flavour("default", Space.GLOBAL, "ld.global.u64 {p}, [{p}];", 64,
            "no cache operator: what compiled CUDA code issues (weak, L1-cached)"),
    Flavour("cg", Space.GLOBAL, "ld.global.cg.u64 {p}, [{p}];", 64, "cache in L2, not L1"),
    Flavour("cv", Space.GLOBAL, "ld.global.cv.u64 {p}, [{p}];", 64,
            "volatile: fetch again (system-scope strong load)"),
    Flavour("nc", Space.GLOBAL, "ld.global.nc.u64 {p}, [{p}];", 64,
            "non-coherent read-only (texture) path"),
    Flavour("shared_ld", Space.SHARED, "ld.shared.u32 {p}, [{p}];", 32, "shared-memory load"),
    Flavour("shared_st_ld", Space.SHARED,
            "st.volatile.shared.u32 [{p}], {p};\nld.volatile.shared.u32 {p}, [{p}];", 32,
            "shared store then a load of the same word (the load waits for the store)"),
    Flavour("const", Space.CONST, "ld.const.u32 {p}, [{p}];", 32, "constant cache (indexed)"),
)}


def _sass_table(n: int) -> dict[str, tuple[str, ...]]:
    """SASS per step as ptxas 12.4/13.5 emit it (checked offline for every static arch; the
    driver's JIT is verified against the same table on the GPU)."""
    if n >= 80:
        g = {"ca": "LDG.E.64.STRONG.SM", "default": "LDG.E.64", "cg": "LDG.E.64.STRONG.GPU",
             "cv": "LDG.E.64.STRONG.SYS", "nc": "LDG.E.64.CONSTANT"}
        lds = "LDS"
    elif n >= 70:
        g = {"ca": "LDG.E.64.STRONG.CTA", "default": "LDG.E.64.SYS",
             "cg": "LDG.E.64.STRONG.GPU", "cv": "LDG.E.64.STRONG.SYS",
             "nc": "LDG.E.64.CONSTANT.SYS"}
        lds = "LDS.U"
    else:
        g = {"ca": "LDG.E.64", "default": "LDG.E.64", "cg": "LDG.E.CG.64",
             "cv": "LDG.E.CV.64", "nc": "LDG.E.CI.64"}
        lds = "LDS.U.32"
    out = {k: (v,) for k, v in g.items()}
    out["shared_ld"] = (lds,)
    out["shared_st_ld"] = ("STS", lds)
    out["const"] = ("LDC",)
    out["lds64"] = ("LDS.64" if n >= 80 else "LDS.U.64",)
    return out


def sass_unit(flavour: str, arch: str) -> tuple[str, ...]:
    table = _sass_table(archs.number(arch))
    if flavour not in table:
        raise KeyError(f"no SASS mapping for load flavour {flavour!r}")
    return table[flavour]


# --- Table IV -------------------------------------------------------------------------------

@dataclass(frozen=True)
class LevelRow:
    """A row of Table IV: what is chased, through which footprint."""
    key: str            # memory.latency.<level>
    flavour: str
    footprint: Footprint
    warm: bool          # walk the whole cycle once before the timed chain
    paper: str = ""     # the Table IV row this corresponds to

    @property
    def policy(self) -> Warm:
        """The warm-up of the row's chases: the L2 keeps its lines between launches."""
        if not self.warm:
            return Warm.NONE
        return Warm.FIRST if self.footprint == Footprint.L2 else Warm.EVERY

    @property
    def is_dram(self) -> bool:
        return self.footprint == Footprint.DRAM


LEVELS = (
    LevelRow("l1_hit", "ca", Footprint.L1, True, "L1 (ld.ca) 33"),
    LevelRow("l1_hit_default", "default", Footprint.L1, True, ""),
    LevelRow("readonly_hit", "nc", Footprint.L1, True, ""),
    LevelRow("l2_hit", "cg", Footprint.L2, True, "L2 (ld.cg) 200"),
    LevelRow("dram_cv", "cv", Footprint.DRAM, False, "global (ld.cv) 290"),
    LevelRow("dram_ca", "ca", Footprint.DRAM, False, ""),
    LevelRow("shared_load", "shared_ld", Footprint.SHARED, True, "shared ld 23"),
    LevelRow("shared_store_load", "shared_st_ld", Footprint.SHARED, True,
          "shared st 19 (see method)"),
    LevelRow("const_hit", "const", Footprint.CONST, True, ""),
)


def level(key: str) -> LevelRow:
    return next(lv for lv in LEVELS if lv.key == key)


# --- Table 10 -------------------------------------------------------------------------------

@dataclass(frozen=True)
class BankRow:
    """A row of Table 10: access width and conflict degree (0 = broadcast)."""
    width: int
    ways: int

    @property
    def name(self) -> str:
        return f"u{self.width}.{'broadcast' if self.ways == 0 else f'{self.ways}way'}"

    @property
    def key(self) -> str:
        return f"memory.bank.{self.name}"

    @property
    def half(self) -> "BankRow | None":
        """The row with half the conflict degree, if Table 10 has it (it must be cheaper)."""
        if self.ways < 2:
            return None
        h = BankRow(self.width, self.ways // 2)
        return h if h in BANK_ROWS else None


BANK_ROWS = tuple([BankRow(32, 0)] + [BankRow(32, k) for k in (1, 2, 4, 8, 16, 32)] +
                  [BankRow(64, k) for k in (2, 4, 8, 16, 32)])


# --- the staircase ------------------------------------------------------------------------

class Capacity(str, Enum):
    """The capacities the staircase gives (test_cache_capacity's rows)."""
    L1 = "l1"
    L2 = "l2"
    L2_NEAR_FAR = "l2_near_far"
    # the L2 by a sequential walk, not a random chase (sequential.py; issue 42 item 4)
    L2_SEQUENTIAL = "l2_sequential"


CAPACITY_ROWS = tuple(Capacity)
FILL_ROWS = ("l1",)
STRIDES = (8, 16, 32, 64, 128, 256)   # the fill sweep's strides (bytes)
FILL_REGION = 512 * 1024              # the fill sweep's L2-resident region
FILL_MODEL_LIMIT = 0.15               # largest deviation from the fill model of a fill figure
