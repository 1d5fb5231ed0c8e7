"""The tensor-core tables as data: wmma (003 Table III), mma.sync (004 Tables 3-5), mma.sp
(004 Tables 6-7), ldmatrix (004 Table 9), Hopper wgmma (beyond the seeds, sm_90a), the sweep
grid of 004 Figs 6-7, and the rows whose PTX is valid but no tensor-core instruction on an arch.

A row kind is a subclass (``TensorRow`` is an mma.sync row; ``SparseRow``, ``WmmaRow``,
``LdmatrixRow``, ``EmulatedRow``): what differs between kinds (which archs run it, the sweep
grid, the work one op does, the figures' keys) is a class attribute or method, never a string
tested at a dispatch site.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

from ....core import archs

# --- sweep grid (seed 004, Figs 6-7) ------------------------------------------------------

WARPS = (1, 2, 4, 6, 8, 12, 16)
ILPS = (1, 2, 3, 4, 5, 6)
SCHEDULERS = 4                  # warp schedulers (SM sub-partitions) per SM, sm_70 and later
# The timed region is a counted loop (trip count a kernel parameter) whose body is STEPS
# dependent steps of every ILP chain, timed at three trip counts (TRIP_RATIOS x a base count
# sized per point): the warps' start skew after bar.sync (hundreds of cycles at 8 warps)
# is then a fixed cost far below 1% of the span instead of a bias on short unrolled chains.
# The loop's control and back edge cost once per trip: with 8 steps per trip that held the
# 4-warp throughput several % under the unrolled chains' figure; 32 steps per trip cut it to
# a quarter (docs/tensor.md, lab notes).
STEPS = 32
TRIP_RATIOS = (1, 2, 3)
MIN_TRIPS = 2                   # the base trip count's floor
SPAN_PER_WARP = 10000           # cycles: the longest span's floor is this x warps (8 warps:
                                # 80000, so a start skew up to 800 cycles stays under 1%; at
                                # 5000 the f64 mma points at 8 warps were unstable on their
                                # skew: docs/tensor.md, lab notes)
# wgmma with several warpgroups: the warpgroups start up to ~1000 cycles apart, still over 1%
# of the span at half this floor (docs/tensor.md, lab notes), so their spans are planned four
# times longer
WGMMA_SPAN_PER_WARP = 4 * SPAN_PER_WARP
STEP_FLOOR = 12                 # cycles: no chain step of any row is faster (docs/tensor.md)
SKEW_SHARE_MAX = 0.01           # start skew / longest per-SM span: above it, unstable
WMMA_ILPS = (1, 4)              # wmma: completion latency (ILP 1) and issue rate (ILP 4), 1 warp
# wgmma: the throughput loop issues WGMMA_STEPS wgmma per accumulator chain per trip between
# wgmma.fence and commit_group, then wait_group 1 (one group stays in flight, as a GEMM main
# loop does); the completion-latency loop is fence + one wgmma + commit + wait_group 0 per
# trip, timed at WGMMA_LAT_TRIPS
WGMMA_STEPS = 4
WGMMA_LAT_TRIPS = (32, 64, 96)
WGMMA_GROUPS = (1, 2, 3, 4)     # warpgroups per SM

# Documented dense peaks per SM per clock on H100/H200 (sm_90). Source: NVIDIA H100 Tensor
# Core GPU Architecture whitepaper (2022), H100 SXM5: dense FP16/BF16 989.4 TFLOP/s, TF32 494.7,
# FP8 1978.9, INT8 1978.9 TOPS at the 1830 MHz boost clock on 132 SMs; per SM per clock that
# is 989.4e12 / (132 * 1.83e9) = 4096 FLOP (2048 FMA). The H200 datasheet gives the same
# rates (same GH100 SM: dense bf16 about 990 TFLOP/s).
HOPPER_PEAK_FLOP = {"f16": 4096, "bf16": 4096, "tf32": 2048, "e4m3": 8192, "e5m2": 8192,
                    "s8": 8192}
HOPPER_PEAK_SOURCE = ("NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): H100 SXM5 "
                      "dense FP16/BF16 989.4 TFLOP/s, TF32 494.7, FP8 and INT8 1978.9 at 1830 MHz"
                      " x 132 SMs -> 4096 / 2048 / 8192 / 8192 per SM per clock")
SMEM_BYTES_PER_CLK = 128        # 32 banks x 4 B (004 section 7)
# FP64 tensor cores (DMMA): H100 SXM5 66.9 TFLOP/s FP64 Tensor Core (same whitepaper) on 132
# SMs at 1980 MHz, the clock its FP32 (66.9 = 132 x 128 x 2 x 1.98 GHz) and FP64 vector
# (33.5) figures use: 66.9e12 / (132 x 1.98e9 x 2) = 128 FMA/clk/SM, twice the A100's 64
# (19.5 TFLOP/s = 108 x 64 x 2 x 1.41 GHz). At the 1830 MHz of the 16-bit tensor figures it
# would be 138.5, no power of two: the FP64 figure is not quoted at that clock.
HOPPER_F64_PEAK_FMA = 128
HOPPER_F64_PEAK_SOURCE = ("NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): H100 SXM5"
                          " FP64 Tensor Core 66.9 TFLOP/s = 132 SMs x 1980 MHz x 2 FLOP x 128 "
                          "FMA/clk/SM (the clock of its FP32 66.9 and FP64 33.5 TFLOP/s figures)")
# Upper bounds on any arch's dense mma.sync rate per SM per clock (FMA; the Hopper dense
# peaks above): the trip counts are sized from them, so a point's span is never shorter than
# planned (a slower row only runs longer). Sparse rows count dense-equivalent work: twice.
RATE_BOUND = {"f16": 2048, "bf16": 2048, "tf32": 1024, "e4m3": 4096, "s8": 4096, "u8": 4096,
              "u4": 8192, "f64": HOPPER_F64_PEAK_FMA,
              # sm_120's narrow formats: FP8/FP6 at the FP8 bound, FP4 twice that
              "f8f6f4": 4096, "mxf8f6f4": 4096, "mxf4nvf4": 8192}


class Kind(str, Enum):
    """A row's kind: the first part of its probe names ("mma/<row>/ilp1") and sweep keys."""
    MMA = "mma"
    MMA_SP = "mma.sp"
    WMMA = "wmma"
    LDMATRIX = "ldmatrix"
    EMULATED = "mma.emulated"
    WGMMA = "wgmma"

    def __str__(self) -> str:
        return self.value


# --- rows -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Frag:
    """A fragment: number of registers, their width, the value kind."""
    regs: int
    kind: str
    width: int = 32


@dataclass(frozen=True)
class TensorRow:
    """One mma.sync row of a table (subclasses: the other kinds).

    ptx: the instruction with {d} {a} {b} {c} {e} (register lists) placeholders.
    sass: opcode glob(s) ('|'-separated) one PTX op becomes, `per_op` of them; per-arch
    overrides in sass_by_arch (arch number -> (glob, per_op)).
    fma: multiply-adds per op (dense-equivalent m*n*k, as 004 counts sparse ops).
    """
    kind: ClassVar[Kind] = Kind.MMA
    on_volta: ClassVar[bool] = False          # Volta's tensor cores run this kind
    ilps: ClassVar[tuple[int, ...]] = ILPS     # hardware sweep: ILPs ...
    sweep_warps: ClassVar[tuple[int, ...]] = WARPS   # ... and warps per SM
    key_prefix: ClassVar[str] = "tensor.mma"  # figures: <key_prefix>.<row>.<figure>
    op: ClassVar[str] = "mma.sync"            # the instruction, in method texts
    unit: ClassVar[str] = "fma/clk/SM"        # throughput unit

    name: str
    table: str                 # "003-III", "004-3", "004-6", "004-9", "hopper"
    ptx: str
    a: Frag
    b: Frag
    c: Frag
    sass: str
    per_op: int = 1
    fma: int = 0
    min_arch: int = 80
    max_arch: int = 999
    e: Frag | None = None
    sass_by_arch: tuple = ()   # ((arch number, glob, per_op), ...) first match >= wins
    meta_type: str = ""        # mma.sp: metadata rule
    bytes_per_op: int = 0      # ldmatrix: bytes per warp per op
    isa: str = ""              # minimum PTX ISA version if above the arch default
    why_unsupported: str = ""
    native_from: int = 0       # native again from this arch on (FP8 mma.sync: sm_89, sm_120+)
    arch_specific: bool = False   # compiled for the arch's "a" target (sm_120a)

    @property
    def work(self) -> int:
        """Work of one op for the throughput figure (FMA; ldmatrix: bytes)."""
        return self.fma

    @property
    def rate_bound(self) -> float:
        """No arch does more of this row's work per SM per clock (RATE_BOUND: the trip
        counts' planning; never a figure)."""
        return RATE_BOUND[self.name.split(".")[0]] * (2 if self.kind is Kind.MMA_SP else 1)

    @property
    def documented_peak(self) -> tuple[float, str] | None:
        """(peak per SM per clock, source) where a documented peak applies on sm_90."""
        if self.kind is Kind.MMA and self.name.startswith("f64."):
            return HOPPER_F64_PEAK_FMA, HOPPER_F64_PEAK_SOURCE
        return None

    @property
    def key(self) -> str:
        return f"{self.key_prefix}.{self.name}"

    @property
    def what(self) -> str:
        return f"{self.op}.{self.name}"

    def sass_for(self, arch: str) -> tuple[str, int]:
        n = archs.number(arch)
        best = (self.sass, self.per_op)
        for a, glob, per in sorted(self.sass_by_arch):
            if n >= a:
                best = (glob, per)
        return best

    def supported(self, arch: str) -> str | None:
        """None if the arch has this instruction, else the reason (skip before ptxas)."""
        n = archs.number(arch)
        if n < 70 or (n < 75 and not self.on_volta):
            return f"{arch} has no tensor cores" if n < 70 else \
                f"{self.name} needs sm_{self.min_arch}+ ({arch} has Volta tensor cores only)"
        if n < self.min_arch:
            return f"{self.name} needs sm_{self.min_arch}+ ({arch} lacks this shape/type)"
        if self.emulated_on(n):
            return f"{self.name}: {self.why_unsupported or 'not available on ' + arch}"
        return None

    def emulated_on(self, n: int) -> bool:
        """Past the row's max arch (and not native again): the PTX is valid there but is no
        (native) tensor-core instruction."""
        return n > self.max_arch and not (self.native_from and n >= self.native_from)

    def emulated(self) -> "TensorRow":
        """This row on an arch where its PTX is valid but no (native) tensor-core
        instruction: no arch limits (the static emulation check)."""
        return EmulatedRow(**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                              if f.name not in ("min_arch", "max_arch", "native_from")},
                           min_arch=0, max_arch=999)


class SparseRow(TensorRow):
    kind = Kind.MMA_SP
    key_prefix = "tensor.mma_sp"
    op = "mma.sp"


class WmmaRow(TensorRow):
    kind = Kind.WMMA
    on_volta = True
    ilps = WMMA_ILPS
    sweep_warps = (1,)
    key_prefix = "tensor.wmma"
    op = "wmma"

    def emulated(self) -> "WmmaRow":
        return dataclasses.replace(self, min_arch=0, max_arch=999)


class LdmatrixRow(TensorRow):
    kind = Kind.LDMATRIX
    key_prefix = "tensor.ldmatrix"
    op = "ldmatrix"
    unit = "B/clk/SM"

    @property
    def work(self) -> int:
        return self.bytes_per_op

    @property
    def rate_bound(self) -> float:
        return SMEM_BYTES_PER_CLK

    @property
    def documented_peak(self) -> tuple[float, str] | None:
        return None


class EmulatedRow(TensorRow):
    """An mma row compiled where it is no tensor-core instruction (static check only)."""
    kind = Kind.EMULATED

    def supported(self, arch: str) -> str | None:
        return None


def _mma(name, table, shape, types, a, b, c, sass, fma, min_arch=80, per_op=1, scale="",
         **kw):
    """A dense mma.sync row; `scale`: the block-scale type (.ue8m0 / .ue4m3), the {e} register
    then holds both operands' scales."""
    tail = ", {e}, {{0, 0}}, {e}, {{0, 0}}" if scale else ""
    ptx = (f"mma.sync.aligned.{shape}.row.col.{types}{'.' + scale if scale else ''} "
           f"{{d}}, {{a}}, {{b}}, {{c}}{tail};")
    return TensorRow(name, table, ptx, a, b, c, sass, per_op, fma, min_arch, **kw)


def _sp(name, table, shape, types, a, b, c, sass, fma, meta, **kw):
    ptx = f"mma.sp.sync.aligned.{shape}.row.col.{types} {{d}}, {{a}}, {{b}}, {{c}}, {{e}}, 0x0;"
    if meta != "tf32":   # f16 / s8 metadata: a ptxas routine per op from sm_100 on
        kw = {"max_arch": 90, "why_unsupported": SPARSE_CALL_WHY, **kw}
    return SparseRow(name, table, ptx, a, b, c, sass, 1, fma, 80,
                     e=Frag(1, f"meta.{meta}"), meta_type=meta, **kw)


# Blackwell (ptxas 13.x for sm_100/sm_103/sm_120/sm_121): two shapes of Ampere's tables are no
# single tensor instruction any more (what they become is the static emulation test's check).
IMMA_PADDED_WHY = ("no IMMA.8816 on sm_100+: ptxas pads m8n8k16 to IMMA.16816.S8.S8 and "
                   "zeroes the padding with a CS2R per op (checked by the static emulation test)")
SPARSE_CALL_WHY = ("on sm_100+ ptxas calls a metadata routine (__cuda_sm_10x_*_mdata_*) before "
                   "every sparse op: one CALL per step, not one tensor op (checked by the static "
                   "emulation test)")


F32x4 = Frag(4, "f32")
H2x2 = Frag(2, "f16x2")
S32x4 = Frag(4, "s32")

# 004 Table 3 (A100), 4 (RTX 3070 Ti), 5 (RTX 2080 Ti): dense mma.sync
MMA = [
    _mma("f16.f32.m16n8k16", "004-3", "m16n8k16", "f32.f16.f16.f32", Frag(4, "f16x2"),
         Frag(2, "f16x2"), F32x4, "HMMA.16816.F32", 16 * 8 * 16),
    _mma("f16.f32.m16n8k8", "004-3", "m16n8k8", "f32.f16.f16.f32", Frag(2, "f16x2"),
         Frag(1, "f16x2"), F32x4, "HMMA.1688.F32", 16 * 8 * 8, min_arch=75),
    _mma("f16.f16.m16n8k16", "004-3", "m16n8k16", "f16.f16.f16.f16", Frag(4, "f16x2"),
         Frag(2, "f16x2"), H2x2, "HMMA.16816.F16", 16 * 8 * 16),
    _mma("f16.f16.m16n8k8", "004-3", "m16n8k8", "f16.f16.f16.f16", Frag(2, "f16x2"),
         Frag(1, "f16x2"), H2x2, "HMMA.1688.F16", 16 * 8 * 8, min_arch=75),
    _mma("bf16.f32.m16n8k16", "004-1", "m16n8k16", "f32.bf16.bf16.f32", Frag(4, "bf16x2"),
         Frag(2, "bf16x2"), F32x4, "HMMA.16816.F32.BF16", 16 * 8 * 16),
    _mma("bf16.f32.m16n8k8", "004-1", "m16n8k8", "f32.bf16.bf16.f32", Frag(2, "bf16x2"),
         Frag(1, "bf16x2"), F32x4, "HMMA.1688.F32.BF16", 16 * 8 * 8),
    _mma("tf32.f32.m16n8k8", "004-3", "m16n8k8", "f32.tf32.tf32.f32", Frag(4, "tf32"),
         Frag(2, "tf32"), F32x4, "HMMA.1688.F32.TF32", 16 * 8 * 8),
    _mma("tf32.f32.m16n8k4", "004-3", "m16n8k4", "f32.tf32.tf32.f32", Frag(2, "tf32"),
         Frag(1, "tf32"), F32x4, "HMMA.1684.F32.TF32", 16 * 8 * 4),
    _mma("s8.s32.m8n8k16", "004-3", "m8n8k16", "s32.s8.s8.s32", Frag(1, "s8x4"),
         Frag(1, "s8x4"), Frag(2, "s32"), "IMMA.8816.S8.S8", 8 * 8 * 16, min_arch=75,
         max_arch=90, why_unsupported=IMMA_PADDED_WHY),
    _mma("s8.s32.m16n8k16", "004-3", "m16n8k16", "s32.s8.s8.s32", Frag(2, "s8x4"),
         Frag(1, "s8x4"), S32x4, "IMMA.16816.S8.S8", 16 * 8 * 16),
    _mma("s8.s32.m16n8k32", "004-3", "m16n8k32", "s32.s8.s8.s32", Frag(4, "s8x4"),
         Frag(2, "s8x4"), S32x4, "IMMA.16832.S8.S8", 16 * 8 * 32),
    _mma("f64.f64.m8n8k4", "004-1", "m8n8k4", "f64.f64.f64.f64", Frag(1, "f64", 64),
         Frag(1, "f64", 64), Frag(2, "f64", 64), "DMMA.884", 8 * 8 * 4,
         sass_by_arch=((90, "DMMA.8x8x4", 1),)),
    # Hopper's FP64 shapes (PTX ISA 7.8, sm_90+): one DMMA.16x8xK each on sm_90; ptxas for
    # sm_100/sm_120 splits them into 2/4/8 DMMA.8x8x4 (the m8n8k4 row is Ampere's shape)
    _mma("f64.f64.m16n8k4", "hopper", "m16n8k4", "f64.f64.f64.f64", Frag(2, "f64", 64),
         Frag(1, "f64", 64), Frag(4, "f64", 64), "DMMA.16x8x4", 16 * 8 * 4, min_arch=90,
         sass_by_arch=((100, "DMMA.8x8x4", 2),)),
    _mma("f64.f64.m16n8k8", "hopper", "m16n8k8", "f64.f64.f64.f64", Frag(4, "f64", 64),
         Frag(2, "f64", 64), Frag(4, "f64", 64), "DMMA.16x8x8", 16 * 8 * 8, min_arch=90,
         sass_by_arch=((100, "DMMA.8x8x4", 4),)),
    _mma("f64.f64.m16n8k16", "hopper", "m16n8k16", "f64.f64.f64.f64", Frag(8, "f64", 64),
         Frag(4, "f64", 64), Frag(4, "f64", 64), "DMMA.16x8x16", 16 * 8 * 16, min_arch=90,
         sass_by_arch=((100, "DMMA.8x8x4", 8),)),
    _mma("e4m3.f32.m16n8k32", "hopper", "m16n8k32", "f32.e4m3.e4m3.f32", Frag(4, "e4m3x4"),
         Frag(2, "e4m3x4"), F32x4, "HMMA.16832.F32.E4M3.E4M3|QMMA.16832.F32.E4M3.E4M3",
         16 * 8 * 32, min_arch=89, isa="8.4", max_arch=89, native_from=120,
         why_unsupported="no FP8 mma.sync on sm_90..sm_110: ptxas emulates it with "
         "F2FP.F16.E4M3.UNPACK_B conversions + HMMA.16816.F32 (checked by the static emulation "
         "test); Hopper's FP8 tensor path is wgmma (QGMMA), B200's tcgen05; sm_120 has QMMA"),
    # Blackwell GeForce (sm_120a, PTX ISA 8.7): mma.sync kinds of the narrow formats, with and
    # without block scaling (one scale register per operand, byte 0 of lane 0: {0, 0}).
    # sm_100 has none of them (its narrow-format path is tcgen05.mma).
    *(_mma(name, "blackwell", shape, f"{kind}.f32.{types}.f32", a, b, F32x4, sass, fma,
           min_arch=120, isa="8.7", arch_specific=True, e=e, scale=scale)
      for name, shape, kind, types, a, b, sass, fma, e, scale in (
          ("f8f6f4.e4m3.e2m1.m16n8k32", "m16n8k32", "kind::f8f6f4", "e4m3.e2m1",
           Frag(4, "e4m3x4"), Frag(2, "e2m1x8"), "QMMA.16832.F32.E4M3.E2M1", 16 * 8 * 32,
           None, ""),
          ("mxf8f6f4.e4m3.m16n8k32", "m16n8k32", "kind::mxf8f6f4.block_scale.scale_vec::1X",
           "e4m3.e4m3", Frag(4, "e4m3x4"), Frag(2, "e4m3x4"),
           "QMMA.SF.16832.F32.E4M3.E4M3.E8", 16 * 8 * 32, Frag(1, "scale.ue8m0"), "ue8m0"),
          ("mxf4nvf4.2x.e2m1.m16n8k64", "m16n8k64", "kind::mxf4nvf4.block_scale.scale_vec::2X",
           "e2m1.e2m1", Frag(4, "e2m1x8"), Frag(2, "e2m1x8"),
           "OMMA.SF.16864.F32.E2M1.E2M1.E8", 16 * 8 * 64, Frag(1, "scale.ue8m0"), "ue8m0"),
          ("mxf4nvf4.4x.e2m1.m16n8k64", "m16n8k64", "kind::mxf4nvf4.block_scale.scale_vec::4X",
           "e2m1.e2m1", Frag(4, "e2m1x8"), Frag(2, "e2m1x8"),
           "OMMA.SF.16864.F32.E2M1.E2M1.UE4M3.4X", 16 * 8 * 64, Frag(1, "scale.ue4m3"),
           "ue4m3"))),
]

# 004 Tables 6 (A100) and 7 (RTX 3070 Ti): 2:4 sparse mma.sp (fma counted dense-equivalent)
MMA_SP = [
    _sp("f16.f32.m16n8k32", "004-6", "m16n8k32", "f32.f16.f16.f32", Frag(4, "f16x2"),
        Frag(4, "f16x2"), F32x4, "HMMA.SP.16832.F32", 16 * 8 * 32, "f16"),
    _sp("f16.f32.m16n8k16", "004-6", "m16n8k16", "f32.f16.f16.f32", Frag(2, "f16x2"),
        Frag(2, "f16x2"), F32x4, "HMMA.SP.16816.F32", 16 * 8 * 16, "f16"),
    _sp("f16.f16.m16n8k32", "004-6", "m16n8k32", "f16.f16.f16.f16", Frag(4, "f16x2"),
        Frag(4, "f16x2"), H2x2, "HMMA.SP.16832.F16", 16 * 8 * 32, "f16"),
    _sp("f16.f16.m16n8k16", "004-6", "m16n8k16", "f16.f16.f16.f16", Frag(2, "f16x2"),
        Frag(2, "f16x2"), H2x2, "HMMA.SP.16816.F16", 16 * 8 * 16, "f16"),
    _sp("tf32.f32.m16n8k16", "004-6", "m16n8k16", "f32.tf32.tf32.f32", Frag(4, "tf32"),
        Frag(4, "tf32"), F32x4, "HMMA.SP.16816.F32.TF32", 16 * 8 * 16, "tf32"),
    _sp("tf32.f32.m16n8k8", "004-6", "m16n8k8", "f32.tf32.tf32.f32", Frag(2, "tf32"),
        Frag(2, "tf32"), F32x4, "HMMA.SP.1688.F32.TF32", 16 * 8 * 8, "tf32"),
    _sp("s8.s32.m16n8k64", "004-6", "m16n8k64", "s32.s8.s8.s32", Frag(4, "s8x4"),
        Frag(4, "s8x4"), S32x4, "IMMA.SP.16864.S8.S8", 16 * 8 * 64, "s8"),
    _sp("s8.s32.m16n8k32", "004-6", "m16n8k32", "s32.s8.s8.s32", Frag(2, "s8x4"),
        Frag(2, "s8x4"), S32x4, "IMMA.SP.16832.S8.S8", 16 * 8 * 32, "s8"),
]


def _wmma(name, shape, layout, types, a, b, c, sass, per_op, fma, min_arch=80, **kw):
    ptx = f"wmma.mma.sync.aligned.{layout}.{shape}.{types} {{d}}, {{a}}, {{b}}, {{c}};"
    return WmmaRow(name, "003-III", ptx, a, b, c, sass, per_op, fma, min_arch, **kw)


F32x8 = Frag(8, "f32")
_HMMA_F16 = ((70, "HMMA.884.F16.F16*", 8), (75, "HMMA.1688.F16", 4), (80, "HMMA.16816.F16", 2))
_HMMA_F32 = ((70, "HMMA.884.F32.F32*", 16), (75, "HMMA.1688.F32", 4), (80, "HMMA.16816.F32", 2))
_IMMA_U8 = ((75, "IMMA.8816.U8.U8", 4), (80, "IMMA.16816.U8.U8", 2))

# 003 Table III (A100, WMMA): every type and its shapes (timed with row.col: no MOVM)
WMMA = [
    _wmma("f16.f16.m16n16k16", "m16n16k16", "row.col", "f16.f16", Frag(8, "f16x2"),
          Frag(8, "f16x2"), Frag(4, "f16x2"), "HMMA.16816.F16", 2, 16 * 16 * 16, 70,
          sass_by_arch=_HMMA_F16),
    _wmma("f16.f16.m32n8k16", "m32n8k16", "row.col", "f16.f16", Frag(8, "f16x2"),
          Frag(8, "f16x2"), Frag(4, "f16x2"), "HMMA.16816.F16", 2, 32 * 8 * 16, 70,
          sass_by_arch=_HMMA_F16),
    _wmma("f16.f16.m8n32k16", "m8n32k16", "row.col", "f16.f16", Frag(8, "f16x2"),
          Frag(8, "f16x2"), Frag(4, "f16x2"), "HMMA.16816.F16", 2, 8 * 32 * 16, 70,
          sass_by_arch=_HMMA_F16),
    _wmma("f16.f32.m16n16k16", "m16n16k16", "row.col", "f32.f32", Frag(8, "f16x2"),
          Frag(8, "f16x2"), F32x8, "HMMA.16816.F32", 2, 16 * 16 * 16, 70,
          sass_by_arch=_HMMA_F32),
    _wmma("f16.f32.m32n8k16", "m32n8k16", "row.col", "f32.f32", Frag(8, "f16x2"),
          Frag(8, "f16x2"), F32x8, "HMMA.16816.F32", 2, 32 * 8 * 16, 70,
          sass_by_arch=_HMMA_F32),
    _wmma("f16.f32.m8n32k16", "m8n32k16", "row.col", "f32.f32", Frag(8, "f16x2"),
          Frag(8, "f16x2"), F32x8, "HMMA.16816.F32", 2, 8 * 32 * 16, 70,
          sass_by_arch=_HMMA_F32),
    _wmma("bf16.f32.m16n16k16", "m16n16k16", "row.col", "f32.bf16.bf16.f32", Frag(4, "bf16x2"),
          Frag(4, "bf16x2"), F32x8, "HMMA.16816.F32.BF16", 2, 16 * 16 * 16),
    _wmma("bf16.f32.m32n8k16", "m32n8k16", "row.col", "f32.bf16.bf16.f32", Frag(8, "bf16x2"),
          Frag(2, "bf16x2"), F32x8, "HMMA.16816.F32.BF16", 2, 32 * 8 * 16),
    _wmma("bf16.f32.m8n32k16", "m8n32k16", "row.col", "f32.bf16.bf16.f32", Frag(2, "bf16x2"),
          Frag(8, "bf16x2"), F32x8, "HMMA.16816.F32.BF16", 2, 8 * 32 * 16),
    _wmma("tf32.f32.m16n16k8", "m16n16k8", "row.col", "f32.tf32.tf32.f32", Frag(4, "tf32"),
          Frag(4, "tf32"), F32x8, "HMMA.1684.F32.TF32", 4, 16 * 16 * 8),
    _wmma("f64.f64.m8n8k4", "m8n8k4", "row.col", "f64.f64.f64.f64.rn", Frag(1, "f64", 64),
          Frag(1, "f64", 64), Frag(2, "f64", 64), "DMMA.884", 1, 8 * 8 * 4,
          sass_by_arch=((90, "DMMA.8x8x4", 1),)),
    _wmma("u8.s32.m16n16k16", "m16n16k16", "row.col", "s32.u8.u8.s32", Frag(2, "u8x4"),
          Frag(2, "u8x4"), Frag(8, "s32"), "IMMA.16816.U8.U8", 2, 16 * 16 * 16, 75,
          sass_by_arch=_IMMA_U8),
    _wmma("u8.s32.m32n8k16", "m32n8k16", "row.col", "s32.u8.u8.s32", Frag(4, "u8x4"),
          Frag(1, "u8x4"), Frag(8, "s32"), "IMMA.16816.U8.U8", 2, 32 * 8 * 16, 75,
          sass_by_arch=_IMMA_U8),
    _wmma("u8.s32.m8n32k16", "m8n32k16", "row.col", "s32.u8.u8.s32", Frag(1, "u8x4"),
          Frag(4, "u8x4"), Frag(8, "s32"), "IMMA.16816.U8.U8", 2, 8 * 32 * 16, 75,
          sass_by_arch=_IMMA_U8),
    _wmma("u4.s32.m8n8k32", "m8n8k32", "row.col", "s32.u4.u4.s32", Frag(1, "u4x8"),
          Frag(1, "u4x8"), Frag(2, "s32"), "IMMA.8832.U4.U4", 1, 8 * 8 * 32, 75, max_arch=89,
          why_unsupported="no INT4 tensor cores on sm_90: ptxas emulates the u4 wmma with a "
          "subroutine CALL (checked by the static emulation test)"),
]

# 004 Table 9: ldmatrix (bytes per warp: 128 per 8x8 b16 matrix)
LDMATRIX = [
    LdmatrixRow(f"x{k}", "004-9", f"ldmatrix.sync.aligned.m8n8.x{k}.shared.b16 {{d}}, [{{a}}];",
                Frag(1, "addr"), Frag(0, ""), Frag(k, "addr"),
                "LDSM.16.M88" + ("" if k == 1 else f".{k}"), 1, 0, 75, bytes_per_op=128 * k)
    for k in (1, 2, 4)
]

# 003 Table III as printed (A100, sm_80): SASS per wmma of each type
PAPER_TABLE_III = {"f16.f16": (2, "HMMA.16816.F16"), "f16.f32": (2, "HMMA.16816.F32"),
                   "bf16.f32": (2, "HMMA.16816.F32.BF16"), "tf32.f32": (4, "HMMA.1684.F32.TF32"),
                   "f64.f64": (1, "DMMA.884"), "u8.s32": (2, "IMMA.16816.U8.U8"),
                   "u4.s32": (1, "IMMA.8832.U4.U4")}


def tables() -> dict[Kind, list[TensorRow]]:
    return {Kind.MMA: MMA, Kind.MMA_SP: MMA_SP, Kind.WMMA: WMMA, Kind.LDMATRIX: LDMATRIX}


def row(kind: str, name: str) -> TensorRow:
    for r in tables()[Kind(kind)]:
        if r.name == name:
            return r
    raise KeyError(f"no {kind} row {name!r}; rows: {[r.name for r in tables()[Kind(kind)]]}")


# --- not tensor-core instructions (static mapping checks) -------------------------------------

# The observation of 004 / the PTX ISA: mma.m8n8k4 f16 (Volta's shape) is no tensor-core
# instruction on Ampere and later: it becomes FPU code.
MMA_M8N8K4_F16 = _mma("f16.f32.m8n8k4", "004-2", "m8n8k4", "f32.f16.f16.f32", Frag(2, "f16x2"),
                      Frag(2, "f16x2"), Frag(8, "f32"), "HMMA.884.F32.F32*", 8 * 8 * 4,
                      min_arch=70)


class Emulation(Enum):
    """What a row that is no tensor-core instruction on an arch becomes there."""
    FPU = "mma.m8n8k4 f16: HMMA.884 on sm_70/sm_75, FPU code or a call on sm_80+ (004)"
    FP8_CONVERT = "FP8 mma.sync on sm_90+: F2FP conversions to f16 + HMMA, no QMMA"
    INT4_CALL = "u4 wmma on sm_90+: a subroutine CALL, no INT4 tensor op"
    IMMA_PADDED = "s8 mma.m8n8k16 on sm_100+: IMMA.16816 with the padding zeroed per op"
    SPARSE_CALL = "f16/s8 mma.sp on sm_100+: a metadata CALL before every sparse tensor op"


def emulated_rows(arch: str) -> list[tuple[Emulation, TensorRow]]:
    """Rows whose PTX is valid on `arch` but is no (native) tensor-core instruction there:
    mma.m8n8k4 f16 on sm_80+ (004: FPU code; checked from sm_70 on), FP8 mma.sync and u4 wmma
    beyond their max arch."""
    n = archs.number(arch)
    out = []
    if n >= 70:
        out.append((Emulation.FPU, MMA_M8N8K4_F16))
    for how, r in ((Emulation.FP8_CONVERT, row("mma", "e4m3.f32.m16n8k32")),
                   (Emulation.INT4_CALL, row("wmma", "u4.s32.m8n8k32")),
                   (Emulation.IMMA_PADDED, row("mma", "s8.s32.m8n8k16")),
                   *((Emulation.SPARSE_CALL, r) for r in MMA_SP
                     if r.why_unsupported == SPARSE_CALL_WHY)):
        if r.emulated_on(n) and n >= r.min_arch:
            out.append((how, r))
    return out


WMMA_LAYOUTS = ("row.col", "row.row", "col.col", "col.row")
MOVM_TYPES = ("f16.f16", "f32.f32")


# --- wgmma (Hopper, sm_90a) -----------------------------------------------------------------

@dataclass(frozen=True)
class WgmmaRow:
    """wgmma.mma_async m64nNkK: A from shared memory (descriptor) or registers, B from shared
    memory, accumulators in registers; issued by a warpgroup (4 warps)."""
    kind: ClassVar[Kind] = Kind.WGMMA

    name: str
    atype: str          # f16, bf16, tf32, e4m3, e5m2, s8
    n: int
    a_regs: bool        # A from registers
    dtype: str = "f32"

    @property
    def k(self) -> int:
        return {"f16": 16, "bf16": 16, "tf32": 8}.get(self.atype, 32)

    @property
    def acc_regs(self) -> int:
        return self.n // 2      # 64 x N accumulators over 128 threads

    @property
    def flop(self) -> int:
        return 2 * 64 * self.n * self.k

    @property
    def work(self) -> int:
        return self.flop

    @property
    def sass(self) -> str:
        op = {"e4m3": "QGMMA", "e5m2": "QGMMA", "s8": "IGMMA"}.get(self.atype, "HGMMA")
        return f"{op}.64x{self.n}x{self.k}*"

    @property
    def peak(self) -> int:
        return HOPPER_PEAK_FLOP[self.atype]

    @property
    def reg_kind(self) -> str:
        """How a 32-bit register (or shared word) of A/B is filled (operands.draw_regs)."""
        return {"f16": "f16x2", "bf16": "bf16x2", "tf32": "tf32", "e4m3": "e4m3x4",
                "e5m2": "e5m2x4", "s8": "s8x4"}[self.atype]

    def instruction(self) -> str:
        shape = f"m64n{self.n}k{self.k}"
        if self.atype == "s8":
            return f"wgmma.mma_async.sync.aligned.{shape}.s32.s8.s8"
        return f"wgmma.mma_async.sync.aligned.{shape}.f32.{self.atype}.{self.atype}"


WGMMA = [WgmmaRow(f"f16.f32.m64n{n}k16.ss", "f16", n, False) for n in (8, 16, 32, 64, 128, 256)]
WGMMA += [
    WgmmaRow("f16.f32.m64n128k16.rs", "f16", 128, True),
    WgmmaRow("f16.f32.m64n256k16.rs", "f16", 256, True),
    WgmmaRow("bf16.f32.m64n256k16.ss", "bf16", 256, False),
    WgmmaRow("bf16.f32.m64n128k16.rs", "bf16", 128, True),
    WgmmaRow("tf32.f32.m64n256k8.ss", "tf32", 256, False),
    WgmmaRow("e4m3.f32.m64n256k32.ss", "e4m3", 256, False),
    WgmmaRow("e5m2.f32.m64n256k32.ss", "e5m2", 256, False),
    WgmmaRow("s8.s32.m64n256k32.ss", "s8", 256, False, "s32"),
]
# the throughput sweep over warpgroups: N=128 keeps 64 accumulator registers per chain, so
# ILP 2 still fits 2 warpgroups' registers (64K per SM)
WGMMA_SWEEP = ("f16.f32.m64n128k16.ss", "f16.f32.m64n256k16.ss", "f16.f32.m64n128k16.rs")


def wgmma_row(name: str) -> WgmmaRow:
    for r in WGMMA:
        if r.name == name:
            return r
    raise KeyError(f"no wgmma row {name!r}; rows: {[r.name for r in WGMMA]}")


def has_wgmma(arch: str) -> bool:
    """wgmma exists on sm_90a only (the probes are compiled for it on an sm_90 GPU)."""
    return archs.number(arch) == 90
