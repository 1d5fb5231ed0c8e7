"""FP8 tensor-core numerics on Hopper's native path: wgmma.mma_async m64n8k32 with e4m3/e5m2
inputs and an f32 accumulator (sm_90a), one warpgroup per 64x8 tile, as an analysis.TensorCore.

A and B are packed on the host into the shared-memory layout the descriptors describe
(K-major, no swizzle: 8-row x 16-byte core matrices stored whole, the next one along K at
LBO = 128 B, the next 8 rows at SBO; PTX ISA "Shared Memory Matrix Layout", canonical layout
((8,m),(T,2k)):((1T,SBO),(1,LBO))); the kernel copies a tile's bytes into shared memory, loads
C into the accumulator fragment (PTX ISA "Matrix Fragments for wgmma.mma_async.m64nNk32",
accumulator D: warp w holds rows 16w..16w+15, register j of lane l row 16w + l/4 + 8((j/2)%2),
column 2(l%4) + j%2 + 8(j/4)), runs STEPS wgmma in one group (K = 32 x STEPS) and stores D.
The layout is checked on the hardware against A@B+C before any figure is taken.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ...core import archs, ptx
from ...core.probe import NotApplicable
from .kernels import MmaProbe
from .rows import MmaRow

TARGET = "sm_90a"
THREADS = 128
CHUNK = 16               # bytes of K per core-matrix row
TYPES = ("e4m3", "e5m2")
STEPS = (1, 8)           # wgmma per group: the tile kernel and the in-group chain (K = 256)


@dataclass(frozen=True)
class Fp8WgmmaRow(MmaRow):
    """One wgmma.mma_async m64n8k32 kernel (FP8 in, f32 accumulator), `steps` of them in one
    wgmma group over consecutive K slices (k = 32 x steps)."""
    steps: int = 1

    @property
    def entry(self) -> str:
        return f"fp8wg_{self.in_type}_s{self.steps}"

    @property
    def instruction(self) -> str:
        t = self.in_type
        return f"wgmma.mma_async.sync.aligned.m64n8k32.f32.{t}.{t}"

    def unsupported(self, arch: str) -> str | None:
        if archs.number(arch) != 90:
            return f"{arch}: FP8 wgmma needs sm_90a"
        return None


def wgmma_row(in_type: str, steps: int = 1) -> Fp8WgmmaRow:
    if in_type not in TYPES:
        raise ValueError(f"FP8 wgmma type {in_type!r}: one of {TYPES}")
    return Fp8WgmmaRow(f"{in_type}.m64n8k{32 * steps}.f32.wgmma", in_type, "f32", 64, 8,
                    32 * steps, 90, "8.0", steps)


def require(arch: str, prefix: str = "") -> None:
    if archs.number(arch) != 90:
        raise NotApplicable(f"{prefix}{arch}: FP8 wgmma needs sm_90a")


# --- layouts --------------------------------------------------------------------------------

def a_bytes(s: Fp8WgmmaRow) -> int:
    return 64 * s.k


def b_bytes(s: Fp8WgmmaRow) -> int:
    return s.n * s.k


def sbo(s: Fp8WgmmaRow) -> int:
    """Bytes from one 8-row group to the next (all of a row's K chunks between)."""
    return (s.k // CHUNK) * 128


def smem_offsets(rows: int, s: Fp8WgmmaRow) -> np.ndarray:
    """(rows, K) byte offset of element (r, k) in the K-major no-swizzle layout (read-only,
    made once per shape: every launch packs with it)."""
    return _smem_offsets(rows, s.k)


@functools.lru_cache(maxsize=16)
def _smem_offsets(rows: int, k_len: int) -> np.ndarray:
    r = np.arange(rows)[:, None]
    k = np.arange(k_len)[None, :]
    out = (r // 8) * ((k_len // CHUNK) * 128) + (k // CHUNK) * 128 + (r % 8) * 16 + k % CHUNK
    out.flags.writeable = False
    return out


def pack_ab(s: Fp8WgmmaRow, a_bits: np.ndarray, b_bits: np.ndarray) -> np.ndarray:
    """A (T, 64, K) and B (T, K, N) byte patterns -> (T, A bytes + B bytes) uint8 tiles in
    the shared-memory layout (B stored N rows of K: "column-major", K-major)."""
    T = a_bits.shape[0]
    out = np.zeros((T, a_bytes(s) + b_bytes(s)), np.uint8)
    out[:, smem_offsets(64, s)] = a_bits
    out[:, a_bytes(s) + smem_offsets(s.n, s)] = np.swapaxes(b_bits, 1, 2)
    return out


@functools.lru_cache(maxsize=4)
def fragment_coords(n: int = 8) -> np.ndarray:
    """(128, N/2, 2) (row, column) of accumulator register j of thread t (read-only, made
    once per N: every launch packs and unpacks with it)."""
    t = np.arange(THREADS)[:, None]
    j = np.arange(n // 2)[None, :]
    w, lane = t // 32, t % 32
    row = 16 * w + lane // 4 + 8 * ((j // 2) % 2)
    col = 2 * (lane % 4) + j % 2 + 8 * (j // 4)
    out = np.stack(np.broadcast_arrays(row, col), axis=-1)
    out.flags.writeable = False
    return out


def pack_c(c_bits: np.ndarray) -> np.ndarray:
    """C (T, 64, 8) f32 bit patterns -> (T, 128, 4) accumulator fragments."""
    xy = fragment_coords(c_bits.shape[2])
    return c_bits[:, xy[..., 0], xy[..., 1]].astype(np.uint32)


def unpack_d(frags: np.ndarray, n: int = 8) -> np.ndarray:
    """(T, 128, N/2) accumulator fragments -> (T, 64, N) f32 bit patterns."""
    xy = fragment_coords(n)
    out = np.zeros((frags.shape[0], 64, n), np.uint32)
    out[:, xy[..., 0], xy[..., 1]] = frags
    return out


# --- the kernel -----------------------------------------------------------------------------

def kernel(s: Fp8WgmmaRow) -> str:
    """One warpgroup per tile (tiles past the count exit before any wgmma, block-uniform):
    copy the tile to shared memory, load C, `steps` wgmma in one group, store D. Untimed."""
    tile = a_bytes(s) + b_bytes(s)
    words = tile // 4
    const = ((sbo(s) >> 4) << 32) | ((128 >> 4) << 16)
    copies = []
    for i in range(-(-words // THREADS)):
        copies += [f"add.u32 %i, %tx, {i * THREADS};", f"setp.lt.u32 %p, %i, {words};",
                   "mul.wide.u32 %off, %i, 4;", "add.u64 %ga, %rab, %off;",
                   "@%p ld.global.b32 %w, [%ga];", "shl.b32 %sa, %i, 2;",
                   "add.u32 %sa, %sa, %sbase;", "@%p st.shared.b32 [%sa], %w;"]
    desc = []
    for reg, off in (("%descA", 0), ("%descB", a_bytes(s))):
        desc += [f"add.u32 %sa, %sbase, {off};", f"cvt.u64.u32 {reg}, %sa;",
                 f"shr.u64 {reg}, {reg}, 4;", f"and.b64 {reg}, {reg}, 16383;",
                 f"or.b64 {reg}, {reg}, {const};"]
    acc = "{%d0, %d1, %d2, %d3}"
    mma = [f"add.s64 %dA, %descA, {16 * k};\nadd.s64 %dB, %descB, {16 * k};\n"
           f"{s.instruction} {acc}, %dA, %dB, %scd, 1, 1;" for k in range(s.steps)]
    return ptx.Kernel(
        entry=s.entry, clock=None, directives=[f".maxntid {THREADS}, 1, 1"],
        params=[".param .u64 pab", ".param .u64 pc", ".param .u64 pd", ".param .u32 pn"],
        decls=[".reg .b64 %rab, %rc, %rd, %off, %ga, %descA, %descB, %dA, %dB;",
               ".reg .b32 %tx, %tile, %n, %i, %w, %sa, %sbase, %d<4>;",
               ".reg .pred %p, %scd;", f".shared .align 1024 .b8 fp8wg_smem[{tile}];"],
        setup=["ld.param.u64 %rab, [pab];", "ld.param.u64 %rc, [pc];",
               "ld.param.u64 %rd, [pd];", "ld.param.u32 %n, [pn];", "mov.u32 %tx, %tid.x;",
               "mov.u32 %tile, %ctaid.x;", "setp.ge.u32 %p, %tile, %n;", "@%p bra $FP8_DONE;",
               "mov.u32 %sbase, fp8wg_smem;", f"mul.wide.u32 %off, %tile, {tile};",
               "add.u64 %rab, %rab, %off;"],
        body=[*copies, "fence.proxy.async.shared::cta;", "bar.sync 0;", *desc,
              "mad.lo.u32 %i, %tile, 128, %tx;", "mul.wide.u32 %off, %i, 16;",
              "add.u64 %rc, %rc, %off;", "add.u64 %rd, %rd, %off;",
              f"ld.global.v4.b32 {acc}, [%rc];", "setp.eq.u32 %scd, 1, 1;",
              "wgmma.fence.sync.aligned;", *mma, "wgmma.commit_group.sync.aligned;",
              "wgmma.wait_group.sync.aligned 0;"],
        after=[f"st.global.v4.b32 [%rd], {acc};", "$FP8_DONE:"],
    ).render()


def probe(s: Fp8WgmmaRow, arch: str = "sm_90") -> MmaProbe:
    """The kernel as a probe: valid when its SASS holds tensor-core instructions (QGMMA)."""
    require(arch)
    return MmaProbe(f"numerics/{s.name}", TARGET, "\n" + kernel(s), {1: s.entry}, {1: 1},
                    isa=s.isa, mma=s)


def probes(arch: str) -> list[MmaProbe]:
    if archs.number(arch) != 90:
        return []
    return [probe(wgmma_row(t, k)) for t in TYPES for k in STEPS]


def module_text(part: list[MmaProbe]) -> str:
    return ptx.header(TARGET, "8.0") + "\n".join(p.kernels for p in part)
