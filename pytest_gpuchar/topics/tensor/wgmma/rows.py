"""wgmma in depth (Hopper, sm_90a) as data: sparse wgmma.mma_async.sp against the sparse peak,
sparse against dense per operand source (A from shared memory, ``ss``, or registers, ``rs``)
over N and swizzle, the small-N shapes under several warpgroups and several wgmma in flight,
f16 accumulation and FP8 with f16 accumulation, and the shared-memory swizzle modes.

A row is one wgmma (type, shape, accumulator, layout); its ``configs`` are the loop kernels
timed (``Config``: independent accumulators issued per trip and the wait_group depth), each
launched with every number of warpgroups in ``warpgroups``. The dense peaks are the
whitepaper's (tensor rows.HOPPER_PEAK_FLOP); 2:4 sparsity doubles them (same source: H100
SXM5 sparse FP16 1979 TFLOP/s, FP8 and INT8 3958).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..mma.rows import HOPPER_PEAK_FLOP, HOPPER_PEAK_SOURCE

WARPGROUPS = (1, 2, 3)           # consumer warpgroups per SM
MAX_ACC_REGS = 128               # accumulator registers per thread (3 warpgroups: 170 max)
SWIZZLES = {"none": 0, "128B": 1, "64B": 2, "32B": 3}     # descriptor bits 62-63
SWIZZLE_BYTES = {"none": 0, "128B": 128, "64B": 64, "32B": 32}
SPARSE_PEAK_SOURCE = ("2:4 sparsity doubles the dense peak: NVIDIA H100 Tensor Core GPU "
                      "Architecture whitepaper (2022), H100 SXM5 sparse FP16/BF16 1979 TFLOP/s, "
                      "FP8 and INT8 3958")
ELEM_BYTES = {"f16": 2, "bf16": 2, "e4m3": 1, "e5m2": 1, "s8": 1}


@dataclass(frozen=True)
class Config:
    """One loop kernel: per trip, wgmma.fence, `steps` wgmma on each of `chains` independent
    accumulators (a chain's wgmma ordered through its accumulator), commit_group, wait_group
    `wait` (0: the trip waits for its own group; 1: the group of the previous trip, so two
    groups are in flight)."""
    chains: int
    wait: int
    steps: int = 1

    @property
    def tag(self) -> str:
        return f"c{self.chains}w{self.wait}" + (f"s{self.steps}" if self.steps > 1 else "")

    @property
    def per_trip(self) -> int:
        """wgmma per trip and warpgroup."""
        return self.chains * self.steps


LATENCY = Config(1, 0)           # one wgmma per trip, waited for: its completion latency
# one warpgroup's accumulator chain, 4 wgmma per fence and wait_group 1 (the dense
# tensor.wgmma rows' cycles_per_wgmma loop): the issue interval the papers print as latency
CHAIN = Config(1, 1, 4)


@dataclass(frozen=True)
class DepthRow:
    name: str
    atype: str                   # f16, bf16, e4m3, s8
    dtype: str                   # f32, f16, s32
    n: int
    configs: tuple[Config, ...]
    warpgroups: tuple[int, ...] = WARPGROUPS
    sparse: bool = False
    swizzle: str = "none"
    group: str = ""              # which question of the issue the row answers
    a_regs: bool = False         # A from registers (rs) rather than shared memory (ss)

    @property
    def source(self) -> str:
        """Where A comes from: "rs" (registers) or "ss" (shared memory, as B always)."""
        return "rs" if self.a_regs else "ss"

    @property
    def isa(self) -> str:
        """PTX ISA version of the row's wgmma (sparse wgmma: 8.2)."""
        return "8.2" if self.sparse else "8.0"

    @property
    def k(self) -> int:
        dense = 16 if ELEM_BYTES[self.atype] == 2 else 32
        return 2 * dense if self.sparse else dense

    @property
    def acc_regs(self) -> int:
        """32-bit accumulator registers per thread (64 x N over 128 threads; f16 packed)."""
        return self.n // 4 if self.dtype == "f16" else self.n // 2

    @property
    def flop(self) -> int:
        """Work of one wgmma: 2*64*N*K (dense-equivalent for 2:4 sparse A)."""
        return 2 * 64 * self.n * self.k

    @property
    def peak(self) -> int:
        return HOPPER_PEAK_FLOP[self.atype] * (2 if self.sparse else 1)

    @property
    def peak_source(self) -> str:
        return SPARSE_PEAK_SOURCE if self.sparse else HOPPER_PEAK_SOURCE

    @property
    def a_k_bytes(self) -> int:
        """Bytes of one row of A in shared memory (sparse A is stored M x K/2)."""
        return (self.k // 2 if self.sparse else self.k) * ELEM_BYTES[self.atype]

    @property
    def b_k_bytes(self) -> int:
        return self.k * ELEM_BYTES[self.atype]

    @property
    def a_frag_regs(self) -> int:
        """32-bit registers per thread of A in registers (64 rows x a_k_bytes over 128
        threads: 4 for every type here, sparse A holding only its non-zero half)."""
        return 64 * self.a_k_bytes // (128 * 4)

    @property
    def smem_operand_bytes(self) -> int:
        """Bytes of the operands one wgmma names in shared memory: B (N x K), and A (64 rows
        of a_k_bytes) unless A is in registers. The 2:4 metadata is a register."""
        return (0 if self.a_regs else 64 * self.a_k_bytes) + self.n * self.b_k_bytes

    @property
    def sass(self) -> str:
        op = {"e4m3": "QGMMA", "e5m2": "QGMMA", "s8": "IGMMA"}.get(self.atype, "HGMMA")
        return f"{op}.{'SP.' if self.sparse else ''}64x{self.n}x{self.k}*"

    @property
    def meta(self) -> str:
        """The 2:4 metadata rule of the type (tensor operands.META_NIBBLES)."""
        return "f16" if ELEM_BYTES[self.atype] == 2 else "s8"

    @property
    def reg_kind(self) -> str:
        """How a shared-memory word of A/B is filled (operands.draw_regs)."""
        return {"f16": "f16x2", "bf16": "bf16x2", "e4m3": "e4m3x4", "e5m2": "e5m2x4",
                "s8": "s8x4"}[self.atype]

    def instruction(self) -> str:
        sp = ".sp" if self.sparse else ""
        return (f"wgmma.mma_async{sp}.sync.aligned.m64n{self.n}k{self.k}.{self.dtype}."
                f"{self.atype}.{self.atype}")

    def operands_after_b(self) -> str:
        """sp-meta and sp-sel (sparse), scale-d (a predicate known true), then the
        immediates the type takes (scale-a, scale-b, and for f16/bf16 the transposes)."""
        sp = "%meta, 0, " if self.sparse else ""
        if self.atype == "s8":
            return f"{sp}%scd"
        if ELEM_BYTES[self.atype] == 2:            # imm-trans-a only for A in shared memory
            return f"{sp}%scd, 1, 1, 0" + ("" if self.a_regs else ", 0")
        return f"{sp}%scd, 1, 1"

    def a_operand(self) -> str:
        """A: its descriptor, or its fragment registers (PTX ISA: 4 x .b32 for the 16-bit
        types' 64 x 16 and the 8-bit types' 64 x 32 stored elements)."""
        if not self.a_regs:
            return "%descA"
        return "{" + ", ".join(f"%ra{i}" for i in range(self.a_frag_regs)) + "}"

    def fits(self, c: Config) -> bool:
        """Whether the config's accumulators fit (wait 1 and steps reuse the same ones)."""
        return c.chains * self.acc_regs <= MAX_ACC_REGS

    @property
    def key(self) -> str:
        return f"tensor.wgmma_depth.{self.name}"


def _configs(n_regs: int, chains=(1, 2, 4, 8), waits=(0, 1)) -> tuple[Config, ...]:
    return tuple(Config(c, w) for w in waits for c in chains if c * n_regs <= MAX_ACC_REGS)


def _dense(name, atype, dtype, n, **kw) -> DepthRow:
    acc = n // 4 if dtype == "f16" else n // 2
    return DepthRow(name, atype, dtype, n, kw.pop("configs", _configs(acc)), **kw)


def _source_configs(n_regs: int) -> tuple[Config, ...]:
    """Completion latency, one chain per warpgroup (c1w1), the 4-wgmma chain of the papers'
    issue interval, and two chains where their accumulators fit."""
    return (LATENCY, Config(1, 1), CHAIN) + ((Config(2, 1),) if 2 * n_regs <= MAX_ACC_REGS
                                             else ())


def _f16(n: int, a_regs: bool, sparse: bool, swizzle: str = "none",
         group: str = "operand_source") -> DepthRow:
    """f16 x f16 -> f32 m64nNk16 (sparse: k32), A from shared memory or registers."""
    name = (f"{'sp.' if sparse else ''}f16.f32.m64n{n}k{32 if sparse else 16}."
            f"{'rs' if a_regs else 'ss'}" + (f".swizzle_{swizzle}" if swizzle != "none" else ""))
    return DepthRow(name, "f16", "f32", n, _source_configs(n // 2), sparse=sparse,
                    swizzle=swizzle, group=group, a_regs=a_regs)


# sparse wgmma against the sparse peak, A and B from shared memory (ss): N=256 (one
# accumulator chain per warpgroup), and f16 also N=128 (two)
SPARSE = [
    _f16(256, False, True, group="sparse"),
    _f16(128, False, True, group="sparse"),
    DepthRow("sp.bf16.f32.m64n256k32.ss", "bf16", "f32", 256, (LATENCY, Config(1, 1)),
             sparse=True, group="sparse"),
    DepthRow("sp.e4m3.f32.m64n256k64.ss", "e4m3", "f32", 256, (LATENCY, Config(1, 1)),
             sparse=True, group="sparse"),
    DepthRow("sp.s8.s32.m64n256k64.ss", "s8", "s32", 256, (LATENCY, Config(1, 1)),
             sparse=True, group="sparse"),
]

# where sparse f16 loses to 2x dense (issue 33 item 2): the same loops over N, A from shared
# memory (ss) or registers (rs), no swizzle or 128B, sparse (k32) and dense (k16); each
# sparse row compares with the dense row of its N, source and swizzle (docs/hopper.md)
SOURCE_N = (64, 128, 192, 256)
OPERAND_SOURCE = [
    *[_f16(n, rs, True) for n in SOURCE_N for rs in (False, True)
      if rs or n not in (128, 256)],                      # sp ss N=128/256: in SPARSE
    *[_f16(n, rs, True, "128B") for n in (128, 256) for rs in (False, True)],
    *[_f16(n, rs, False) for n in SOURCE_N for rs in (False, True)],
    *[_f16(n, rs, False, "128B") for n in (128, 256) for rs in (False, True)],
]

# the small-N shapes (latency-bound with one chain: 0.22-0.64 of the peak): 1-3 warpgroups
# x 1-8 independent wgmma per trip x wait_group 0/1
SMALL_N = [_dense(f"f16.f32.m64n{n}k16", "f16", "f32", n, group="small_n")
           for n in (8, 16, 32, 64)]

# f16 accumulation, FP8 with f16 accumulation
F16_ACC = [
    _dense("f16.f16.m64n256k16", "f16", "f16", 256, configs=_configs(64, (1, 2)),
           warpgroups=(1, 2), group="f16_acc"),
    _dense("e4m3.f16.m64n256k32", "e4m3", "f16", 256, configs=_configs(64, (1, 2)),
           warpgroups=(1, 2), group="f16_acc"),
]

# dense FP8 with f32 accumulation: the native reference of the FP8 mma.sync emulation
FP8_NATIVE = [
    _dense("e4m3.f32.m64n256k32", "e4m3", "f32", 256, configs=(LATENCY, Config(1, 1)),
           warpgroups=(1, 2), group="fp8_native"),
]

# the shared-memory descriptors' swizzle modes (A and B, K-major): same throughput or not
SWIZZLE = [
    DepthRow(f"f16.f32.m64n128k16.swizzle_{s}", "f16", "f32", 128, (LATENCY, Config(1, 1)),
             warpgroups=(1, 2), swizzle=s, group="swizzle")
    for s in SWIZZLES
]

ROWS = SPARSE + OPERAND_SOURCE + SMALL_N + F16_ACC + FP8_NATIVE + SWIZZLE


def row(name: str) -> DepthRow:
    for r in ROWS:
        if r.name == name:
            return r
    raise KeyError(f"no wgmma depth row {name!r}; rows: {[r.name for r in ROWS]}")


def counterpart(r: DepthRow, **changes) -> DepthRow | None:
    """The row that differs from `r` only in `changes` (of sparse, a_regs, swizzle), the one
    of r's group first; None when there is none."""
    fields = ("atype", "dtype", "n", "sparse", "a_regs", "swizzle")
    want = {f: changes.get(f, getattr(r, f)) for f in fields}
    same = [x for x in ROWS if x is not r and all(getattr(x, f) == v for f, v in want.items())]
    return min(same, key=lambda x: x.group != r.group, default=None)
