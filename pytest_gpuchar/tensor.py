"""Tensor cores: the catalogue of wmma / mma.sync / mma.sp / ldmatrix / wgmma rows, the PTX
probes that time them, and the SASS each must become.

Seeds: Table III of the Ampere paper (003, wmma), Tables 3-9 and Figs 6-7 of the tensor-core
paper (004, mma.sync / mma.sp / ldmatrix sweeps over ILP x warps per SM). Hopper wgmma is beyond
the seeds (compiled for sm_90a).

Probe layout (``sweep_kernel``): one block on one SM, W warps (a launch parameter), each warp
running ILP independent accumulator chains of n dependent instructions (D_k = A*B + D_k), fully
unrolled between two %clock64 reads. Every warp stores its own start and end clock; the host
takes the per-warp time (latency of one ILP step: cycles per chain step) and the block time
(min start / max end over the warps: the SM's time for all the work). Both are fitted as
slopes over chain lengths n (fixed costs cancel). Inputs are random, never zero (tensor cores
run measurably faster on zeros); every accumulator is stored after the region.

Only this module knows the tensor instructions' operand shapes; the verifier (verify.py)
checks each timed region holds exactly n*ILP*(SASS per op) tensor instructions and nothing
else (wgmma: plus the fixed fence/commit/wait of the group, which does not grow with n).
"""
from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from . import archs, probes, sass
from .verify import Intent, ProbeInvalid, matches, verify

# --- sweep grid (seed 004, Figs 6-7) ------------------------------------------------------

WARPS = (1, 2, 4, 6, 8, 12, 16)
ILPS = (1, 2, 3, 4, 5, 6)
# chain steps per accumulator (differential over these). 4-step chains ran off the line on
# H200 (a smaller fixed cost than longer chains) and multi-warp blocks need long regions for
# the warps' start skew to cancel: 8/16/32.
LENGTHS = (8, 16, 32)
WMMA_ILPS = (1, 4)              # wmma: completion latency (ILP 1) and issue rate (ILP 4), 1 warp
# wgmma per accumulator chain; the chain of 1 is timed directly (completion latency: fence,
# one wgmma, commit, wait) and left out of the slope
WGMMA_LENGTHS = (1, 4, 8, 16)
SINGLE = 1
WGMMA_GROUPS = (1, 2, 3, 4)     # warpgroups per SM

# Documented dense peaks per SM per clock on H100/H200 (sm_90). Source: NVIDIA H100 Tensor
# Core GPU Architecture whitepaper (2022), H100 SXM5: dense FP16/BF16 989.4 TFLOP/s, TF32 494.7,
# FP8 1978.9, INT8 1978.9 TOPS at the 1830 MHz boost clock on 132 SMs; per SM per clock that
# is 989.4e12 / (132 * 1.83e9) = 4096 FLOP (2048 FMA). The H200 datasheet gives the same
# rates (same GH100 SM; /work/.library/device/H200.md: "dense bf16 about 990 TFLOP/s").
HOPPER_PEAK_FLOP = {"f16": 4096, "bf16": 4096, "tf32": 2048, "e4m3": 8192, "e5m2": 8192,
                    "s8": 8192}
HOPPER_PEAK_SOURCE = ("NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): H100 SXM5 "
                      "dense FP16/BF16 989.4 TFLOP/s, TF32 494.7, FP8 and INT8 1978.9 at 1830 MHz"
                      " x 132 SMs -> 4096 / 2048 / 8192 / 8192 per SM per clock")
SMEM_BYTES_PER_CLK = 128        # 32 banks x 4 B (004 section 7)


class Unsupported(Exception):
    """The arch lacks this shape/type: the reason, given before any ptxas run."""


class SparseMetadataError(ValueError):
    """mma.sp metadata that is not a valid 2:4 (or tf32 1:2) pattern: rejected before launch."""


# --- operand kinds and random inputs --------------------------------------------------------

# kind -> how one 32-bit (or 64-bit for f64) register is filled
REG_KINDS = ("f16x2", "bf16x2", "tf32", "f32", "s32", "s8x4", "u8x4", "s4x8", "u4x8", "f64",
             "e4m3x4", "e5m2x4", "meta.f16", "meta.tf32", "meta.s8", "nonzero")

# Valid 4-bit metadata groups: two indices i0 < i1 of the non-zeros in a group of four
# (2:4 sparsity, PTX ISA "sparse matrix storage"); tf32 is 1:2 stored as index pairs (0,1),
# (2,3) only.
META_NIBBLES = {"f16": (0x4, 0x8, 0xC, 0x9, 0xD, 0xE), "s8": (0x4, 0x8, 0xC, 0x9, 0xD, 0xE),
                "tf32": (0x4, 0xE)}


def validate_sparse_metadata(words, dtype: str, probe: str = "") -> None:
    """Every 4-bit group of every metadata word must be a valid 2:4 index pair (i0 < i1),
    else SparseMetadataError naming the probe, the word and the group."""
    allowed = META_NIBBLES.get(dtype)
    if allowed is None:
        raise SparseMetadataError(f"{probe}: no sparse metadata rule for type {dtype!r}; "
                                  f"one of {sorted(META_NIBBLES)}")
    arr = np.asarray(words, dtype=np.uint64).ravel()
    for i, w in enumerate(arr):
        w = int(w)
        if w >> 32:
            raise SparseMetadataError(f"{probe}: metadata word {i} = {w:#x} is wider than 32 bits")
        for g in range(8):
            nib = (w >> (4 * g)) & 0xF
            if nib not in allowed:
                lo, hi = nib & 3, nib >> 2
                why = ("the two indices are equal" if lo == hi else
                       "indices not in ascending order" if lo > hi else
                       f"not allowed for {dtype}")
                raise SparseMetadataError(
                    f"{probe}: metadata word {i} = {w:#010x}: group {g} = {nib:#x} "
                    f"(indices {lo},{hi}) is not a valid {'1:2' if dtype == 'tf32' else '2:4'}"
                    f" pattern ({why}); allowed groups: {', '.join(hex(a) for a in allowed)}")


def _uniform_pm(rng, n, lo=0.25, hi=1.0):
    return rng.uniform(lo, hi, n) * rng.choice([-1.0, 1.0], n)


def draw_regs(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """n random register values (uint64 holding 32 or 64 bits) of `kind`, never zero
    (floats in +-[0.25, 1], integers with no zero byte / nibble)."""
    import ml_dtypes
    if kind in ("f16x2", "bf16x2"):
        dt = np.float16 if kind == "f16x2" else ml_dtypes.bfloat16
        h = _uniform_pm(rng, 2 * n).astype(dt).view(np.uint16).astype(np.uint64)
        return h[0::2] | (h[1::2] << np.uint64(16))
    if kind in ("tf32", "f32"):
        return _uniform_pm(rng, n).astype(np.float32).view(np.uint32).astype(np.uint64)
    if kind == "f64":
        return _uniform_pm(rng, n).astype(np.float64).view(np.uint64)
    if kind == "s32":
        return (rng.integers(1, 1000, n) * rng.choice([-1, 1], n)).astype(np.int64).astype(
            np.uint32).astype(np.uint64)
    if kind in ("s8x4", "u8x4"):
        b = rng.integers(1, 128, 4 * n) * (rng.choice([-1, 1], 4 * n) if kind == "s8x4" else 2)
        return _pack(np.asarray(b, np.int64) & 0xFF, 8)
    if kind in ("s4x8", "u4x8"):
        return _pack(rng.integers(1, 8 if kind == "s4x8" else 16, 8 * n), 4)
    if kind in ("e4m3x4", "e5m2x4"):
        dt = ml_dtypes.float8_e4m3fn if kind == "e4m3x4" else ml_dtypes.float8_e5m2
        b = _uniform_pm(rng, 4 * n).astype(dt).view(np.uint8).astype(np.int64)
        return _pack(b, 8)
    if kind.startswith("meta."):
        allowed = META_NIBBLES[kind.split(".")[1]]
        return _pack(rng.choice(allowed, 8 * n), 4)
    if kind == "nonzero":
        return rng.integers(1, 1 << 31, n).astype(np.uint64)
    raise ValueError(f"unknown register kind {kind!r}; one of {REG_KINDS}")


def _pack(parts, bits: int) -> np.ndarray:
    parts = np.asarray(parts, dtype=np.uint64).reshape(-1, 32 // bits)
    out = np.zeros(parts.shape[0], np.uint64)
    for k in range(parts.shape[1]):
        out |= parts[:, k] << np.uint64(bits * k)
    return out


# --- the catalogue --------------------------------------------------------------------------

@dataclass(frozen=True)
class Frag:
    """A fragment: number of registers, their width, the value kind."""
    regs: int
    kind: str
    width: int = 32


@dataclass(frozen=True)
class TensorRow:
    """One tensor-core instruction of a table.

    ptx: the instruction with {d} {a} {b} {c} {e} (register lists) placeholders.
    sass: opcode glob(s) ('|'-separated) one PTX op becomes, `per_op` of them; per-arch
    overrides in sass_by_arch (arch number -> (glob, per_op)).
    fma: multiply-adds per op (dense-equivalent m*n*k, as 004 counts sparse ops).
    """
    name: str
    table: str                 # "003-III", "004-3", "004-6", "004-9", "hopper"
    kind: str                  # "mma", "mma.sp", "wmma", "ldmatrix"
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
        if self.kind == "mma.emulated":
            return None
        if n < 70 or (n < 75 and self.kind != "wmma"):
            return f"{arch} has no tensor cores" if n < 70 else \
                f"{self.name} needs sm_{self.min_arch}+ ({arch} has Volta tensor cores only)"
        if n < self.min_arch:
            return f"{self.name} needs sm_{self.min_arch}+ ({arch} lacks this shape/type)"
        if n > self.max_arch:
            return f"{self.name}: {self.why_unsupported or 'not available on ' + arch}"
        return None


def _mma(name, table, shape, types, a, b, c, sass, fma, min_arch=80, per_op=1, **kw):
    ptx = f"mma.sync.aligned.{shape}.row.col.{types} {{d}}, {{a}}, {{b}}, {{c}};"
    return TensorRow(name, table, "mma", ptx, a, b, c, sass, per_op, fma, min_arch, **kw)


def _sp(name, table, shape, types, a, b, c, sass, fma, meta, **kw):
    ptx = f"mma.sp.sync.aligned.{shape}.row.col.{types} {{d}}, {{a}}, {{b}}, {{c}}, {{e}}, 0x0;"
    return TensorRow(name, table, "mma.sp", ptx, a, b, c, sass, 1, fma, 80,
                     e=Frag(1, f"meta.{meta}"), meta_type=meta, **kw)


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
         Frag(1, "s8x4"), Frag(2, "s32"), "IMMA.8816.S8.S8", 8 * 8 * 16, min_arch=75),
    _mma("s8.s32.m16n8k16", "004-3", "m16n8k16", "s32.s8.s8.s32", Frag(2, "s8x4"),
         Frag(1, "s8x4"), S32x4, "IMMA.16816.S8.S8", 16 * 8 * 16),
    _mma("s8.s32.m16n8k32", "004-3", "m16n8k32", "s32.s8.s8.s32", Frag(4, "s8x4"),
         Frag(2, "s8x4"), S32x4, "IMMA.16832.S8.S8", 16 * 8 * 32),
    _mma("f64.f64.m8n8k4", "004-1", "m8n8k4", "f64.f64.f64.f64", Frag(1, "f64", 64),
         Frag(1, "f64", 64), Frag(2, "f64", 64), "DMMA.884", 8 * 8 * 4,
         sass_by_arch=((90, "DMMA.8x8x4", 1),)),
    _mma("e4m3.f32.m16n8k32", "hopper", "m16n8k32", "f32.e4m3.e4m3.f32", Frag(4, "e4m3x4"),
         Frag(2, "e4m3x4"), F32x4, "HMMA.16832.F32.E4M3.E4M3|QMMA.16832.F32.E4M3.E4M3",
         16 * 8 * 32, min_arch=89, isa="8.4", max_arch=89,
         why_unsupported="no FP8 mma.sync on sm_90: ptxas emulates it with F2FP.F16.E4M3."
         "UNPACK_B conversions + HMMA.16816.F32 (checked by the static emulation test); "
         "Hopper's FP8 tensor path is wgmma (QGMMA)"),
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
    return TensorRow(name, "003-III", "wmma", ptx, a, b, c, sass, per_op, fma, min_arch, **kw)


F32x8 = Frag(8, "f32")
# 003 Table III (A100, WMMA): every type and its shapes (timed with row.col: no MOVM)
WMMA = [
    _wmma("f16.f16.m16n16k16", "m16n16k16", "row.col", "f16.f16", Frag(8, "f16x2"),
          Frag(8, "f16x2"), Frag(4, "f16x2"), "HMMA.16816.F16", 2, 16 * 16 * 16, 70,
          sass_by_arch=((70, "HMMA.884.F16.F16*", 8), (75, "HMMA.1688.F16", 4),
                        (80, "HMMA.16816.F16", 2))),
    _wmma("f16.f16.m32n8k16", "m32n8k16", "row.col", "f16.f16", Frag(8, "f16x2"),
          Frag(8, "f16x2"), Frag(4, "f16x2"), "HMMA.16816.F16", 2, 32 * 8 * 16, 70,
          sass_by_arch=((70, "HMMA.884.F16.F16*", 8), (75, "HMMA.1688.F16", 4),
                        (80, "HMMA.16816.F16", 2))),
    _wmma("f16.f16.m8n32k16", "m8n32k16", "row.col", "f16.f16", Frag(8, "f16x2"),
          Frag(8, "f16x2"), Frag(4, "f16x2"), "HMMA.16816.F16", 2, 8 * 32 * 16, 70,
          sass_by_arch=((70, "HMMA.884.F16.F16*", 8), (75, "HMMA.1688.F16", 4),
                        (80, "HMMA.16816.F16", 2))),
    _wmma("f16.f32.m16n16k16", "m16n16k16", "row.col", "f32.f32", Frag(8, "f16x2"),
          Frag(8, "f16x2"), F32x8, "HMMA.16816.F32", 2, 16 * 16 * 16, 70,
          sass_by_arch=((70, "HMMA.884.F32.F32*", 16), (75, "HMMA.1688.F32", 4),
                        (80, "HMMA.16816.F32", 2))),
    _wmma("f16.f32.m32n8k16", "m32n8k16", "row.col", "f32.f32", Frag(8, "f16x2"),
          Frag(8, "f16x2"), F32x8, "HMMA.16816.F32", 2, 32 * 8 * 16, 70,
          sass_by_arch=((70, "HMMA.884.F32.F32*", 16), (75, "HMMA.1688.F32", 4),
                        (80, "HMMA.16816.F32", 2))),
    _wmma("f16.f32.m8n32k16", "m8n32k16", "row.col", "f32.f32", Frag(8, "f16x2"),
          Frag(8, "f16x2"), F32x8, "HMMA.16816.F32", 2, 8 * 32 * 16, 70,
          sass_by_arch=((70, "HMMA.884.F32.F32*", 16), (75, "HMMA.1688.F32", 4),
                        (80, "HMMA.16816.F32", 2))),
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
          sass_by_arch=((75, "IMMA.8816.U8.U8", 4), (80, "IMMA.16816.U8.U8", 2))),
    _wmma("u8.s32.m32n8k16", "m32n8k16", "row.col", "s32.u8.u8.s32", Frag(4, "u8x4"),
          Frag(1, "u8x4"), Frag(8, "s32"), "IMMA.16816.U8.U8", 2, 32 * 8 * 16, 75,
          sass_by_arch=((75, "IMMA.8816.U8.U8", 4), (80, "IMMA.16816.U8.U8", 2))),
    _wmma("u8.s32.m8n32k16", "m8n32k16", "row.col", "s32.u8.u8.s32", Frag(1, "u8x4"),
          Frag(4, "u8x4"), Frag(8, "s32"), "IMMA.16816.U8.U8", 2, 8 * 32 * 16, 75,
          sass_by_arch=((75, "IMMA.8816.U8.U8", 4), (80, "IMMA.16816.U8.U8", 2))),
    _wmma("u4.s32.m8n8k32", "m8n8k32", "row.col", "s32.u4.u4.s32", Frag(1, "u4x8"),
          Frag(1, "u4x8"), Frag(2, "s32"), "IMMA.8832.U4.U4", 1, 8 * 8 * 32, 75, max_arch=89,
          why_unsupported="no INT4 tensor cores on sm_90: ptxas emulates the u4 wmma with a "
          "subroutine CALL (checked by the static emulation test)"),
]

# 004 Table 9: ldmatrix (bytes per warp: 128 per 8x8 b16 matrix)
LDMATRIX = [
    TensorRow(f"x{k}", "004-9", "ldmatrix",
              f"ldmatrix.sync.aligned.m8n8.x{k}.shared.b16 {{d}}, [{{a}}];",
              Frag(1, "addr"), Frag(0, ""), Frag(k, "addr"),
              "LDSM.16.M88" + ("" if k == 1 else f".{k}"), 1, 0, 75, bytes_per_op=128 * k)
    for k in (1, 2, 4)
]

# The observation of 004 / the PTX ISA: mma.m8n8k4 f16 (Volta's shape) is no tensor-core
# instruction on Ampere and later: it becomes FPU code. Static mapping check only.
MMA_M8N8K4_F16 = _mma("f16.f32.m8n8k4", "004-2", "m8n8k4", "f32.f16.f16.f32", Frag(2, "f16x2"),
                      Frag(2, "f16x2"), Frag(8, "f32"), "HMMA.884.F32.F32*", 8 * 8 * 4,
                      min_arch=70)


def tables() -> dict[str, list[TensorRow]]:
    return {"mma": MMA, "mma.sp": MMA_SP, "wmma": WMMA, "ldmatrix": LDMATRIX}


def row(kind: str, name: str) -> TensorRow:
    for r in tables()[kind]:
        if r.name == name:
            return r
    raise KeyError(f"no {kind} row {name!r}; rows: {[r.name for r in tables()[kind]]}")


# --- PTX: one sweep kernel ------------------------------------------------------------------

def isa_version(arch: str, rows) -> str:
    base = archs.ptx_isa_version(arch)
    need = [r.isa for r in rows if r.isa] + [base]
    return max(need, key=lambda v: tuple(int(x) for x in v.split(".")))


class _Regs:
    def __init__(self) -> None:
        self.n: dict[int, int] = {}

    def get(self, width: int, count: int) -> list[str]:
        p = {32: "r", 64: "x"}[width]
        start = self.n.get(width, 0)
        self.n[width] = start + count
        return [f"%{p}{start + i}" for i in range(count)]

    def decls(self) -> list[str]:
        t = {32: ".b32", 64: ".b64"}
        p = {32: "r", 64: "x"}
        return [f".reg {t[w]} %{p[w]}<{n}>;" for w, n in sorted(self.n.items()) if n]


@dataclass
class Slot:
    """One input register of every thread: the `in` slot it comes from and its kind."""
    slot: int
    kind: str
    width: int


@dataclass
class TensorProbe:
    """Kernels of one row at one ILP over chain lengths: data, like probes.Probe."""
    name: str                         # "mma/f16.f32.m16n8k16/ilp2"
    row: TensorRow
    arch: str
    ilp: int
    entries: dict[int, str]           # chain length -> kernel
    text: str                         # the kernels (no module header)
    slots: list[Slot]
    out_slots: int
    smem_words: int = 0               # 32-bit words of the shared buffer filled from `fill`
    intent_unit: str = ""
    per_op: int = 1

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    def ops(self, n: int) -> int:
        """PTX tensor ops per warp in the timed region at chain length n."""
        return n * self.ilp

    def intent(self, n: int) -> Intent:
        return Intent(n * self.ilp * self.per_op, (self.intent_unit,), min_depth=n)


def _reglist(regs: list[str]) -> str:
    return "{" + ", ".join(regs) + "}"


def _entry_name(name: str, n: int) -> str:
    return "tc_" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_") + f"_n{n}"


def sweep_probe(r: TensorRow, arch: str, ilp: int, lengths=LENGTHS) -> TensorProbe:
    """ILP independent accumulator chains of n dependent ops each, for every n in `lengths`.

    mma/mma.sp/wmma: one A and one B fragment shared by the chains (their values do not
    matter to the timing; sharing keeps registers for more chains), one accumulator per chain,
    D_k = A*B + D_k. ldmatrix: each chain's address is the value the previous ldmatrix loaded
    (a pointer chase through a shared buffer laid out so every thread reads its own 16-byte
    row: conflict-free, see `ldmatrix_fill`)."""
    why = r.supported(arch)
    if why:
        raise Unsupported(why)
    glob, per = r.sass_for(arch)
    name = f"{r.kind}/{r.name}/ilp{ilp}"
    kernels, entries = [], {}
    slots: list[Slot] = []
    out_slots = 0
    smem_words = 0
    for n in lengths:
        regs = _Regs()
        loads, slots, body, results = [], [], [], []

        def load(frag: Frag) -> list[str]:
            out = regs.get(frag.width, frag.regs)
            for reg in out:
                s = Slot(len(slots), frag.kind, frag.width)
                slots.append(s)
                loads.append(f"ld.global.b{frag.width} {reg}, [%in+{s.slot * 8}];")
            return out

        if r.kind == "ldmatrix":
            k = r.c.regs
            smem_words = 128 * ilp
            chains = []
            for c in range(ilp):
                dst = regs.get(32, k)
                body_addr = dst[0]
                loads.append(f"add.u32 {body_addr}, %sbase, {c * 512};")
                loads.append(f"add.u32 {body_addr}, {body_addr}, %rowoff;")
                chains.append(dst)
            for _ in range(n):
                for dst in chains:
                    body.append(r.ptx.format(d=_reglist(dst), a=dst[0]))
            results = [x for dst in chains for x in dst]
        else:
            a = load(r.a)
            b = load(r.b)
            e = load(r.e) if r.e else None
            accs = [load(r.c) for _ in range(ilp)]
            for _ in range(n):
                for acc in accs:
                    body.append(r.ptx.format(d=_reglist(acc), a=_reglist(a), b=_reglist(b),
                                             c=_reglist(acc), e=e[0] if e else ""))
            results = [x for acc in accs for x in acc]
        entry = _entry_name(name, n)
        kernels.append(_kernel(entry, regs, loads, body, results, len(slots),
                               smem_words=smem_words, ldmatrix=r.kind == "ldmatrix"))
        entries[n] = entry
        out_slots = 2 + len(results) + max(1, len(slots))
    return TensorProbe(name, r, arch, ilp, entries, "\n".join(kernels), slots, out_slots,
                       smem_words, glob, per)


def _kernel(name: str, regs: _Regs, loads: list[str], body: list[str], results: list[str],
            n_in: int, *, smem_words: int = 0, ldmatrix: bool = False,
            extra_decls: tuple[str, ...] = (), prologue: tuple[str, ...] = (),
            width_of=None) -> str:
    """One timed kernel: per-thread operands from `in` (stride n_in slots), shared buffer
    filled from `fill` (smem_words words, then a barrier), two passes (the first warms the
    instruction cache), bar.sync so every warp starts together, %clock64 around the guarded
    body, each thread's start and end clock and every result stored to `out`."""
    in_bytes = max(1, n_in) * 8
    out_bytes = (2 + len(results) + max(1, n_in)) * 8
    stores, off = [], 16
    for reg in results:
        w = 64 if reg.startswith("%x") else 32
        stores.append(f"st.global.b{w} [%out+{off}], {reg};")
        off += 8
    # Every loaded operand is folded into one checksum whose single store (then a membar)
    # makes the loads complete before the clock starts. (Storing every operand, as the
    # instruction probes' frame does, left hundreds of bytes per thread of stores draining
    # into the timed region on H200: erratic fixed costs of 100s-1000s of cycles that grew
    # with warps and ILP.) Results are stored in the last pass only, for the same reason.
    settle = []
    for line in loads:
        m = re.match(r"ld\.global\.b(\d+) (%\w+), \[%in\+(\d+)\];", line)
        if m:
            settle.append(f"xor.b{m.group(1)} %ck{m.group(1)}, %ck{m.group(1)}, {m.group(2)};")
    settle += ["cvt.u32.u64 %cklo, %ck64;", "xor.b32 %ck32, %ck32, %cklo;",
               "st.global.b32 [%scratch], %ck32;"]
    smem = []
    if smem_words:
        smem = [f".shared .align 128 .b32 tc_smem[{smem_words}];"]
    fill = []
    if smem_words:
        fill = [
            "mov.u32 %sbase, tc_smem;",
            "mov.u32 %fi, %tidx;",
            "$FILL:",
            f"setp.ge.u32 %fdone, %fi, {smem_words};",
            "@%fdone bra $FILLED;",
            "mul.wide.u32 %foff, %fi, 4;",
            "add.u64 %faddr, %fill, %foff;",
            "ld.global.b32 %fval, [%faddr];",
            *(["add.u32 %fval, %fval, %sbase;"] if ldmatrix else []),
            "shl.b32 %fsh, %fi, 2;",
            "add.u32 %fsh, %fsh, %sbase;",
            "st.shared.b32 [%fsh], %fval;",
            "add.u32 %fi, %fi, %nthr;",
            "bra.uni $FILL;",
            "$FILLED:",
            *(["fence.proxy.async.shared::cta;"] if not ldmatrix else []),
            "bar.sync 0;",
        ]
    lines = [
        f".visible .entry {name}(.param .u64 out_param, .param .u64 in_param, "
        f".param .u64 fill_param, .param .u32 iters_param)",
        "{",
        ".reg .b64 %out, %in, %fill, %scratch, %toff, %t0, %t1, %dt, %foff, %faddr;",
        ".reg .b32 %tidx, %nthr, %iters, %it, %step, %sbase, %rowoff, %fi, %fval, %fsh;",
        ".reg .b32 %ck32, %cklo, %nxt;",
        ".reg .b64 %ck64;",
        ".reg .pred %never, %again, %fdone, %last;",
        *regs.decls(),
        *extra_decls,
        *smem,
        "ld.param.u64 %out, [out_param];",
        "ld.param.u64 %in, [in_param];",
        "ld.param.u64 %fill, [fill_param];",
        "ld.param.u32 %iters, [iters_param];",
        "mov.u32 %tidx, %tid.x;",
        "mov.u32 %nthr, %ntid.x;",
        "and.b32 %rowoff, %tidx, 31;",
        "shl.b32 %rowoff, %rowoff, 4;",
        f"mul.wide.u32 %toff, %tidx, {in_bytes};",
        "add.u64 %in, %in, %toff;",
        f"mul.wide.u32 %toff, %tidx, {out_bytes};",
        "add.u64 %out, %out, %toff;",
        f"add.u64 %scratch, %out, {off};",
        *fill,
        *prologue,
        "mov.u32 %it, 0;",
        "$PASS:",
        "mov.u32 %ck32, 0;",
        "mov.u64 %ck64, 0;",
        *loads,
        *settle,
        "add.u32 %nxt, %it, 1;",
        "setp.ge.u32 %last, %nxt, %iters;",
        "membar.cta;",
        "bar.sync 0;",
        "mov.u64 %t0, %clock64;",
        "setp.eq.u64 %never, %t0, -1;",
        "@%never bra $BODY_END;",
        *body,
        "$BODY_END:",
        "mov.u64 %t1, %clock64;",
        "@%last st.global.b64 [%out], %t0;",
        "@%last st.global.b64 [%out+8], %t1;",
        *[f"@%last {x}" for x in stores],
        "sub.s64 %dt, %t1, %t0;",
        "min.u64 %dt, %dt, 1;",
        "cvt.u32.u64 %step, %dt;",
        "add.u32 %it, %it, %step;",
        "setp.lt.u32 %again, %it, %iters;",
        "@%again bra $PASS;",
        "ret;",
        "}",
    ]
    return "\n".join(lines) + "\n"


# --- wgmma (Hopper, sm_90a) -----------------------------------------------------------------

@dataclass(frozen=True)
class WgmmaRow:
    """wgmma.mma_async m64nNkK: A from shared memory (descriptor) or registers, B from shared
    memory, accumulators in registers; issued by a warpgroup (4 warps)."""
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
    def sass(self) -> str:
        op = {"e4m3": "QGMMA", "e5m2": "QGMMA", "s8": "IGMMA"}.get(self.atype, "HGMMA")
        return f"{op}.64x{self.n}x{self.k}*"

    @property
    def peak(self) -> int:
        return HOPPER_PEAK_FLOP[self.atype]

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


# shared-memory layout of A (64 x K) and B (K x N): no swizzle, K-major, 8x16-byte core
# matrices stored contiguously; LBO = next core matrix along K, SBO = next 8-row group.
WG_LBO = 128


def _desc_const(rows: int, k_bytes: int) -> int:
    sbo = (k_bytes // 16) * 128          # bytes per 8-row group: one core matrix per 16 B of K
    return ((sbo >> 4) << 32) | ((WG_LBO >> 4) << 16)


def wgmma_probe(r: WgmmaRow, ilp: int = 1, lengths=WGMMA_LENGTHS) -> TensorProbe:
    """ILP accumulator chains of n wgmma each, issued by every warpgroup of the block between
    wgmma.fence and one commit_group + wait_group 0 (the whole group's completion is inside
    the timed region: latency is commit to wait complete, differential over n)."""
    arch = "sm_90a"
    k_bytes = r.k * (1 if r.atype in ("e4m3", "e5m2", "s8") else 4 if r.atype == "tf32" else 2)
    a_bytes, b_bytes = 64 * k_bytes, r.n * k_bytes
    # 1 KiB of slack after B: a descriptor whose LBO/SBO roles were read the other way round
    # would still address only this block's buffer
    smem_words = (a_bytes + b_bytes + 1024) // 4
    name = f"wgmma/{r.name}/ilp{ilp}"
    kernels, entries, slots, out_slots = [], {}, [], 0
    akind = {"f16": "f16x2", "bf16": "bf16x2", "tf32": "tf32", "e4m3": "e4m3x4",
             "e5m2": "e5m2x4", "s8": "s8x4"}[r.atype]
    for n in lengths:
        regs = _Regs()
        loads, slots, body = [], [], []

        def load(regs_n: int, kind: str) -> list[str]:
            out = regs.get(32, regs_n)
            for reg in out:
                s = Slot(len(slots), kind, 32)
                slots.append(s)
                loads.append(f"ld.global.b32 {reg}, [%in+{s.slot * 8}];")
            return out

        areg = load(4, akind) if r.a_regs else None
        accs = [load(r.acc_regs, "s32" if r.atype == "s8" else "f32") for _ in range(ilp)]
        # scale-d known true: accumulate (a run-time predicate costs a VOTEU.ANY per wgmma)
        loads.append("setp.eq.u32 %scd, 1, 1;")
        body.append("wgmma.fence.sync.aligned;")
        if r.atype == "s8":
            tail = "%scd;"
        elif r.atype in ("f16", "bf16"):
            tail = "%scd, 1, 1, 0;" if r.a_regs else "%scd, 1, 1, 0, 0;"
        else:
            tail = "%scd, 1, 1;"
        a_op = _reglist(areg) if r.a_regs else "%descA"
        for _ in range(n):
            for acc in accs:
                body.append(f"{r.instruction()} {_reglist(acc)}, {a_op}, %descB, {tail}")
        body += ["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;"]
        results = [x for acc in accs for x in acc]
        prologue = (
            "cvt.u64.u32 %descA, %sbase;",
            "shr.u64 %descA, %descA, 4;",
            "and.b64 %descA, %descA, 16383;",
            f"or.b64 %descA, %descA, {_desc_const(64, k_bytes)};",
            f"add.u32 %fsh, %sbase, {a_bytes};",
            "cvt.u64.u32 %descB, %fsh;",
            "shr.u64 %descB, %descB, 4;",
            "and.b64 %descB, %descB, 16383;",
            f"or.b64 %descB, %descB, {_desc_const(r.n, k_bytes)};",
        )
        entry = _entry_name(name, n)
        kernels.append(_kernel(entry, regs, loads, body, results, len(slots),
                               smem_words=smem_words,
                               extra_decls=(".reg .b64 %descA, %descB;", ".reg .pred %scd;"),
                               prologue=prologue))
        entries[n] = entry
        out_slots = 2 + len(results) + max(1, len(slots))
    p = TensorProbe(name, None, arch, ilp, entries, "\n".join(kernels), slots, out_slots,
                    smem_words, r.sass, 1)
    p.wgmma = r
    return p


WGMMA_FIXED = ("WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR.LE", "WARPSYNC*", "R2UR*", "UMOV",
               "NOP", "BAR.SYNC.DEFER_BLOCKING", "UIADD3*", "ULOP*", "USHF*", "IMAD.U32",
               "UMOV.64")


_GUARD_OPS = ("R2UR", "UISETP*", "ISETP*", "PLOP3*")


def _strip_uniform_guard(name: str, region: list) -> list:
    """sm_90a wgmma kernels compare the clock in uniform registers: R2UR the clock value,
    UISETP, PLOP3, then the branch over the body. Drop that guard (fixed cost)."""
    for k, ins in enumerate(region[:8]):
        if ins.base == "BRA" and ins.pred:
            if all(matches(i.opcode, "|".join(_GUARD_OPS)) for i in region[:k]):
                return region[k + 1:]
            break
    return probes.strip_guard(name, region)


def never_executed(ins: sass.Instr) -> bool:
    """Scheduling filler between dependent tensor instructions, not part of the probe: NOP
    (the driver JIT of 580.x pads HMMA chains with them) and instructions predicated on
    !PT / !UPT that never execute ('@!UPT UIADD3 URZ, URZ, URZ, URZ', ptxas 13.x). They are
    left out of the verified region; their count is reported (filler_count)."""
    return ins.pred in ("@!PT", "@!UPT") or ins.opcode == "NOP"


def verify_probe(p: TensorProbe, functions: dict[str, sass.Function]):
    """The timed region of every chain length holds exactly the intended tensor
    instructions; wgmma: exactly n*ILP of them plus a fixed group prologue/epilogue
    (fence/arrive, wait) that does not grow with n. Raises ProbeInvalid with the listing."""
    regions = {}
    for n, entry in p.entries.items():
        if entry not in functions:
            raise sass.RegionError(f"{p.name}: kernel {entry} missing from the SASS")
        region = [i for i in sass.timed_region(functions[entry]) if not never_executed(i)]
        regions[n] = _strip_uniform_guard(p.name, region)
    if getattr(p, "wgmma", None) is None:
        return regions, verify(p.name, regions, p.intent)
    count = {}
    fixed = {}
    for n, reg in regions.items():
        tc = [i for i in reg if matches(i.opcode, p.intent_unit)]
        rest = Counter(i.opcode for i in reg if not matches(i.opcode, p.intent_unit))
        count[n] = len(tc)
        fixed[n] = rest
        if len(tc) != n * p.ilp:
            raise _wg_fail(p, regions, f"chain length {n}: {len(tc)} {p.intent_unit} in the "
                           f"timed region, wanted {n * p.ilp}")
        bad = {k: v for k, v in rest.items() if not any(matches(k, f) for f in WGMMA_FIXED)}
        if bad:
            raise _wg_fail(p, regions, f"chain length {n}: unexpected instructions {bad}")
        if "WARPGROUP.DEPBAR.LE" not in rest:
            raise _wg_fail(p, regions, f"chain length {n}: no wait (WARPGROUP.DEPBAR) inside "
                           "the timed region: completion would not be timed")
    # serialisation shows as extra WARPGROUP.ARRIVE / DEPBAR between the wgmma: their counts
    # must be the same at every length; other setup (descriptor UMOV/R2UR) must not grow
    lengths = sorted(fixed)
    first = fixed[lengths[0]]
    for n in lengths[1:]:
        rest = fixed[n]
        wg = {k: v for k, v in rest.items() if k.startswith("WARPGROUP")}
        wg0 = {k: v for k, v in first.items() if k.startswith("WARPGROUP")}
        grown = {k: v for k, v in rest.items() if not k.startswith("WARPGROUP")
                 and v > first.get(k, 0)}
        if wg != wg0 or grown:
            raise _wg_fail(p, regions, f"the non-wgmma part of the region changes with the "
                           f"chain length: {dict(first)} at n={lengths[0]} vs {dict(rest)} at "
                           f"n={n} (serialised wgmma?)")
    from .verify import Verdict
    return regions, Verdict(True, {p.intent_unit: 1.0, **{k: v for k, v in first.items()}},
                            Counter(first), "wgmma")


def _wg_fail(p, regions, why) -> ProbeInvalid:
    listing = "\n".join(f"-- timed region, chain length {n}:\n{sass.format_listing(r)}"
                        for n, r in sorted(regions.items()))
    return ProbeInvalid(f"probe invalid: {p.name}: {why}\n{listing}")


SERIALISED = re.compile(r"C75(10|19)|wgmma[^\n]*serializ|fence[^\n]*insert", re.I)


def check_wgmma_log(name: str, log: str) -> None:
    """ptxas / driver JIT warnings that wgmma was serialised or had fences inserted (C7510,
    C7519) fail the probe."""
    m = SERIALISED.search(log or "")
    if m:
        line = next((ln for ln in log.splitlines() if m.group(0) in ln), m.group(0))
        raise ProbeInvalid(f"probe invalid: {name}: the compiler serialised wgmma or inserted "
                           f"fences: {line.strip()}")


# --- module batches -----------------------------------------------------------------------

def module(arch: str, ps: list[TensorProbe]) -> str:
    rows = [p.row for p in ps if p.row is not None]
    target = "sm_90a" if any(getattr(p, "wgmma", None) for p in ps) else arch
    version = isa_version(target, rows)
    return (f".version {version}\n.target {target}\n.address_size 64\n\n"
            + "\n".join(p.text for p in ps))


def static_probes(arch: str) -> tuple[list[TensorProbe], dict[str, str]]:
    """The probes the static suite assembles for `arch` (ILP 1 of every row the arch has, plus
    the wgmma rows on sm_90 as sm_90a) and, per skipped row, the reason."""
    out, skipped = [], {}
    for kind, rows in tables().items():
        for r in rows:
            why = r.supported(arch)
            if why:
                skipped[f"{kind}/{r.name}"] = why
                continue
            out.append(sweep_probe(r, arch, 1))
    return out, skipped


def wgmma_static(arch: str) -> list[TensorProbe]:
    if archs.number(arch) != 90:
        return []
    return [wgmma_probe(r, 1) for r in WGMMA]


def hardware_probes(arch: str) -> list[TensorProbe]:
    """Every probe of the hardware sweep for `arch` (one JIT link)."""
    out = []
    for kind, rows in tables().items():
        ilps = WMMA_ILPS if kind == "wmma" else ILPS
        for r in rows:
            if r.supported(arch):
                continue
            out += [sweep_probe(r, arch, k) for k in ilps]
    return out


def wgmma_hardware(arch: str) -> list[TensorProbe]:
    if archs.number(arch) != 90:
        return []
    out = [wgmma_probe(r, 1) for r in WGMMA]
    out += [wgmma_probe(wgmma_row(n), 2) for n in WGMMA_SWEEP if wgmma_row(n).n <= 128]
    return out


# --- inputs ---------------------------------------------------------------------------------

def inputs(p: TensorProbe, threads: int, seed: int = 0x7E45) -> tuple[np.ndarray, np.ndarray]:
    """(`in` buffer: threads x slots uint64, `fill` buffer: shared-memory words uint32).
    Random, never zero; mma.sp metadata validated (SparseMetadataError before any launch);
    ldmatrix: the pointer-chase layout (relative offsets; the kernel adds the buffer base)."""
    rng = np.random.default_rng(seed)
    buf = np.zeros((threads, max(1, len(p.slots))), np.uint64)
    for s in p.slots:
        buf[:, s.slot] = draw_regs(s.kind, threads, rng)
        if s.kind.startswith("meta."):
            validate_sparse_metadata(buf[:, s.slot], s.kind.split(".")[1], p.name)
    if p.row is not None and p.row.kind == "ldmatrix":
        fill = ldmatrix_fill(p.ilp)
    else:
        fill = draw_regs("nonzero", max(1, p.smem_words), rng).astype(np.uint32)
        if getattr(p, "wgmma", None) is not None:
            kind = {"f16": "f16x2", "bf16": "bf16x2", "tf32": "tf32", "e4m3": "e4m3x4",
                    "e5m2": "e5m2x4", "s8": "s8x4"}[p.wgmma.atype]
            fill = draw_regs(kind, p.smem_words, rng).astype(np.uint32)
    return buf, fill


def ldmatrix_fill(ilp: int) -> np.ndarray:
    """Shared words for the ldmatrix pointer chase: chain c owns 32 rows of 16 B at c*512;
    word w of row i holds the offset of row (4i + w) mod 32 of the same chain. A thread t
    that addresses row t gets back (as its first register) word t%4 of row t//4, i.e. the
    offset of row t again: every step re-reads 32 distinct rows, 8 per 128-byte phase
    (conflict-free), and the next address is data the compiler cannot know."""
    out = np.zeros(128 * ilp, np.uint32)
    for c in range(ilp):
        for i in range(32):
            for w in range(4):
                out[c * 128 + 4 * i + w] = c * 512 + ((4 * i + w) % 32) * 16
    return out


# --- measurement (GPU) ----------------------------------------------------------------------

@dataclass
class SweepPoint:
    warps: int
    ilp: int
    latency: float        # cycles per chain step of one warp (all ILP ops of the step)
    throughput: float     # per SM per clock (fma, bytes or flop, see unit)
    lat_spread: float
    thr_spread: float
    unstable: bool
    why: str = ""
    cycles: dict = field(default_factory=dict)
    skewed: bool = False  # start skew changed with n: the block-span slope is biased


def work_per_op(p: TensorProbe) -> float:
    if getattr(p, "wgmma", None) is not None:
        return p.wgmma.flop
    if p.row.kind == "ldmatrix":
        return p.row.bytes_per_op
    return p.row.fma


def launch_all(jobs, dev, *, repeats: int, watchdog_s: float, compiled,
               skipped: dict | None = None) -> dict:
    """jobs: [(probe, warps_or_threads)] -> {(probe name, threads): {n: [(t0s, t1s) per
    repeat]}}. Every launch of every job first (one stream, warm-up launch dropped), one wait
    under the watchdog, then one copy back per buffer."""
    import cupy as cp
    from . import measure
    pending = []
    keep = []
    skipped = {} if skipped is None else skipped
    for p, threads in jobs:
        buf, fill = inputs(p, threads)
        d_in = cp.asarray(buf)
        d_fill = cp.asarray(fill)
        keep += [d_in, d_fill]
        outs = {}
        try:
            for n, entry in p.entries.items():
                fn = compiled.function(entry)
                out = cp.zeros((repeats + 1, threads, p.out_slots), dtype=np.int64)
                for rep in range(repeats + 1):
                    fn((1,), (threads,), (out[rep], d_in, d_fill, np.uint32(2)))
                outs[n] = out
        except cp.cuda.driver.CUDADriverError as e:
            # a launch the kernel's resources refuse (registers x threads): reported, skipped
            skipped[(p.name, threads)] = f"launch refused: {e}"
            continue
        pending += [(p.name, threads, n, out) for n, out in outs.items()]
    measure._wait("tensor sweep", watchdog_s)
    res: dict = {}
    for name, threads, n, out in pending:
        host = out.get()[1:]
        res.setdefault((name, threads), {})[n] = [(h[::32, 0], h[::32, 1]) for h in host]
    return res


SWEEP_IQR_REL = 0.05      # interquartile range of the per-launch slopes, relative to the value
SKEW_SHARE = 0.03         # start-skew change between the shortest and longest chain, relative
                          # to the span growth between them


def _iqr(xs) -> float:
    q1, q3 = np.quantile(np.asarray(xs, float), [0.25, 0.75])
    return float(q3 - q1)


def fit_point(p: TensorProbe, threads: int, raw: dict, warp_size: int = 32) -> SweepPoint:
    """Per-warp latency (mean over warps of end - start, slope over n) and per-SM throughput
    (work / slope of max end - min start over the block's warps).

    Stability (the sweep launches every point many times, and one launch in a batch can land
    in another scheduling mode): the spreads are the interquartile ranges of the per-launch
    slopes (the reported spreads are the full ranges), and a point is unstable when either
    interquartile range is above SWEEP_IQR_REL of its value, when the
    cycles are not linear in n, or - several warps - when the skew between the warps' start
    clocks changes with the chain length by more than SKEW_SHARE of the span's growth. The
    last is the differential method's own premise (fixed costs identical at every length):
    on H200, 8 warps of HMMA chains left bar.sync 120-270 cycles apart depending on n, which
    biased block-span slopes by up to 20% while each launch looked repeatable."""
    from .measure import fit
    single = None
    if getattr(p, "wgmma", None) is not None and SINGLE in raw and len(raw) > 2:
        each = [float(np.mean(t1 - t0)) for t0, t1 in raw[SINGLE]]
        single = float(np.median(each))
        single_spread = max(each) - min(each)
        raw = {n: v for n, v in raw.items() if n != SINGLE}
    lat_cycles = {n: [float(np.mean(t1 - t0)) for t0, t1 in reps] for n, reps in raw.items()}
    blk_cycles = {n: [float(t1.max() - t0.min()) for t0, t1 in reps] for n, reps in raw.items()}
    skew = {n: float(np.median([t0.max() - t0.min() for t0, _ in reps]))
            for n, reps in raw.items()}
    ops = {n: n for n in raw}
    lf = fit(lat_cycles, ops)
    bf = fit(blk_cycles, ops)
    warps = threads // warp_size
    issuers = threads // 128 if getattr(p, "wgmma", None) is not None else warps
    work = work_per_op(p) * p.ilp * issuers
    thr = work / bf.value if bf.value > 0 else float("nan")
    thr_each = [work / s for s in bf.slopes if s > 0]
    whole = bool(thr_each) and len(thr_each) == len(bf.slopes)
    thr_iqr = _iqr(thr_each) if whole else float("inf")
    lat_iqr = _iqr(lf.slopes) if lf.slopes else lf.spread
    # the spreads reported (and used by the nightly as the in-run noise) are the full ranges
    # over launches; the stability test uses the interquartile ranges
    thr_spread = float(max(thr_each) - min(thr_each)) if whole else float("inf")
    lat_spread = lf.spread
    why = []
    if lat_iqr > max(0.5, SWEEP_IQR_REL * abs(lf.value)):
        why.append(f"per-launch latency slopes: interquartile range {lat_iqr:.2f} cycles")
    if not np.isfinite(thr) or thr_iqr > SWEEP_IQR_REL * abs(thr):
        why.append(f"per-launch throughput: interquartile range {thr_iqr:.1f}")
    for f in (lf, bf):
        if f.why_unstable.startswith("cycles not linear"):
            why.append(f.why_unstable)
    lo, hi = min(raw), max(raw)
    growth = bf.medians[hi] - bf.medians[lo]
    skewed = warps > 1 and abs(skew[hi] - skew[lo]) > SKEW_SHARE * max(growth, 1.0)
    if skewed:
        why.append(f"the warps' start skew changes with chain length ({skew[lo]:.0f} cycles at "
                   f"n={lo}, {skew[hi]:.0f} at n={hi}): the block-span slope is biased")
    cycles = {"warp_mean": lf.medians, "block": bf.medians, "start_skew": skew}
    if single is not None:
        cycles["single"] = single
        cycles["single_spread"] = single_spread
    return SweepPoint(warps, p.ilp, lf.value, thr, lat_spread, thr_spread, bool(why),
                      "; ".join(dict.fromkeys(why)), cycles, skewed)


def convergence(points: dict[tuple[int, int], SweepPoint], warps: int,
                frac: float = 0.95) -> SweepPoint | None:
    """The convergence point at `warps` (as 004 Tables 3-9 report it): the smallest ILP whose
    throughput reaches `frac` of the best over ILP at that warp count."""
    row = [pt for (w, _), pt in sorted(points.items()) if w == warps]
    if not row:
        return None
    best = max(pt.throughput for pt in row)
    for pt in sorted(row, key=lambda q: q.ilp):
        if pt.throughput >= frac * best:
            return pt
    return None


def convergence_candidates(points: dict[tuple[int, int], SweepPoint], warps: int,
                           frac: float = 0.95) -> list[SweepPoint]:
    """The points at `warps` that could be the convergence point given their own launch
    spreads: in ILP order, each whose throughput plus spread reaches the threshold, up to the
    first whose throughput minus spread is surely above it."""
    row = sorted((pt for (w, _), pt in points.items() if w == warps), key=lambda q: q.ilp)
    if not row:
        return []
    limit = frac * max(pt.throughput for pt in row)
    out = []
    for pt in row:
        if pt.throughput + pt.thr_spread >= limit:
            out.append(pt)
            if pt.throughput - pt.thr_spread >= limit:
                break
    return out or [convergence(points, warps, frac)]


def peak(points: dict[tuple[int, int], SweepPoint], *,
         max_warps: int | None = None) -> SweepPoint | None:
    """The point of highest throughput among the stable ones (fit_point) with at most
    `max_warps` warps. (The maximum over unstable points is the maximum of the noise: before
    the skew check, the best point over all warps moved by up to 30% between two H200 runs.)"""
    pts = [p for (w, _), p in points.items() if (max_warps is None or w <= max_warps)
           and np.isfinite(p.throughput) and not p.unstable]
    return max(pts, key=lambda p: p.throughput) if pts else None


def higher_unstable(points: dict[tuple[int, int], SweepPoint], best: SweepPoint, *,
                    max_warps: int | None = None, margin: float = 0.05) -> SweepPoint | None:
    """An unstable point (launch spread, not the start-skew bias, which is known to be wrong)
    whose throughput is more than `margin` above the best stable one: then the stable best is
    not the peak, and the peak is reported unstable rather than low (H100: the 4-warp ILP 4-6
    points of bf16 m16n8k16 were all unstable in one run, the best stable point 25% lower)."""
    worse = [p for (w, _), p in points.items() if (max_warps is None or w <= max_warps)
             and p.unstable and not p.skewed and np.isfinite(p.throughput)
             and p.throughput > best.throughput * (1 + margin)]
    return max(worse, key=lambda p: p.throughput) if worse else None


# --- plots ----------------------------------------------------------------------------------

def heatmap(points: dict[tuple[int, int], SweepPoint], title: str, unit: str):
    """Throughput and latency over warps x ILP (as 004 Figs 6-7): a matplotlib Figure."""
    from . import plots
    plt = plots.pyplot()
    warps = sorted({w for w, _ in points})
    ilps = sorted({k for _, k in points})
    thr = np.full((len(ilps), len(warps)), np.nan)
    lat = np.full((len(ilps), len(warps)), np.nan)
    for (w, k), pt in points.items():
        thr[ilps.index(k), warps.index(w)] = pt.throughput
        lat[ilps.index(k), warps.index(w)] = pt.latency
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, data, label in ((axes[0], thr, f"throughput ({unit})"),
                            (axes[1], lat, "latency (cycles per ILP step)")):
        im = ax.imshow(data, origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(warps)), [str(w) for w in warps])
        ax.set_yticks(range(len(ilps)), [str(k) for k in ilps])
        ax.set_xlabel("warps per SM")
        ax.set_ylabel("ILP")
        ax.set_title(label, fontsize=9)
        for i in range(len(ilps)):
            for j in range(len(warps)):
                if np.isfinite(data[i, j]):
                    ax.text(j, i, f"{data[i, j]:.0f}" if data[i, j] >= 100 else
                            f"{data[i, j]:.1f}", ha="center", va="center", fontsize=7,
                            color="white" if data[i, j] < np.nanmax(data) * 0.6 else "black")
        fig.colorbar(im, ax=ax)
    fig.suptitle(title, fontsize=10)
    return fig


# --- static mapping checks: layouts (MOVM) and the non-tensor m8n8k4 ------------------------

WMMA_LAYOUTS = ("row.col", "row.row", "col.col", "col.row")


def movm_kernel(arch: str, layout: str, shape: str = "m16n16k16", types: str = "f16.f16") -> str:
    """A whole wmma tile (load a, b, c from global in `layout`, mma, store d) for the MOVM
    check of 003 section IV-C: with 16-bit fragments the compiler transposes (MOVM.16.MT88)
    whichever operands the layout leaves in the wrong orientation."""
    la, lb = layout.split(".")
    lc = la   # C/D stored in A's layout, as the paper's col.col case (A and C transposed)
    ctype = types.split(".")[1]
    creg = 4 if ctype == "f16" else 8
    rc = "b32" if ctype == "f16" else "f32"
    a = [f"%a{i}" for i in range(8)]
    b = [f"%b{i}" for i in range(8)]
    c = [f"%c{i}" for i in range(creg)]
    d = [f"%d{i}" for i in range(creg)]
    name = f"movm_{layout.replace('.', '_')}_{types.replace('.', '_')}"
    lines = [
        f".visible .entry {name}(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)",
        "{", ".reg .b64 %ra, %rb, %rc, %rd;", ".reg .b32 %a<8>, %b<8>;",
        f".reg .{rc} %c<{creg}>, %d<{creg}>;",
        "ld.param.u64 %ra, [pa];", "ld.param.u64 %rb, [pb];", "ld.param.u64 %rc, [pc];",
        "ld.param.u64 %rd, [pd];",
        f"wmma.load.a.sync.aligned.{la}.{shape}.global.f16 {_reglist(a)}, [%ra], 16;",
        f"wmma.load.b.sync.aligned.{lb}.{shape}.global.f16 {_reglist(b)}, [%rb], 16;",
        f"wmma.load.c.sync.aligned.{lc}.{shape}.global.{ctype} {_reglist(c)}, [%rc], 16;",
        f"wmma.mma.sync.aligned.{layout}.{shape}.{types} {_reglist(d)}, {_reglist(a)}, "
        f"{_reglist(b)}, {_reglist(c)};",
        f"wmma.store.d.sync.aligned.{lc}.{shape}.global.{ctype} [%rd], {_reglist(d)}, 16;",
        "ret;", "}",
    ]
    return "\n".join(lines) + "\n"


def movm_module(arch: str) -> tuple[str, dict[str, str]]:
    """One module with the MOVM kernel of every layout (f16.f16 and f32.f32 accumulators)."""
    kernels, names = [], {}
    for types in ("f16.f16", "f32.f32"):
        for lay in WMMA_LAYOUTS:
            k = movm_kernel(arch, lay, types=types)
            names[f"{lay}/{types}"] = re.search(r"\.entry (\w+)\(", k).group(1)
            kernels.append(k)
    return (f".version {archs.ptx_isa_version(arch)}\n.target {arch}\n.address_size 64\n\n"
            + "\n".join(kernels)), names


def emulated_probes(arch: str) -> list[tuple[TensorRow, TensorProbe]]:
    """Rows whose PTX is valid on `arch` but is no (native) tensor-core instruction there:
    mma.m8n8k4 f16 on sm_80+ (004: FPU code), FP8 mma.sync and u4 wmma on sm_90."""
    n = archs.number(arch)
    out = []
    if n >= 70:
        out.append((MMA_M8N8K4_F16, _raw_probe(MMA_M8N8K4_F16, arch)))
    for r in (row("mma", "e4m3.f32.m16n8k32"), row("wmma", "u4.s32.m8n8k32")):
        if n > r.max_arch and n >= r.min_arch:
            out.append((r, _raw_probe(r, arch)))
    return out


def _raw_probe(r: TensorRow, arch: str) -> TensorProbe:
    """sweep_probe without the arch check (for the emulation checks)."""
    import dataclasses
    free = dataclasses.replace(r, min_arch=0, max_arch=999, kind="wmma" if r.kind == "wmma"
                               else "mma.emulated")
    p = sweep_probe(free, arch, 1, lengths=(4,))
    p.name = f"emulated/{r.kind}/{r.name}"
    return p


TENSOR_OPS = ("HMMA*", "IMMA*", "DMMA*", "BMMA*", "QMMA*", "HGMMA*", "IGMMA*", "QGMMA*")


def tensor_opcodes(instrs) -> Counter:
    return Counter(i.opcode for i in instrs if matches(i.opcode, "|".join(TENSOR_OPS)))
