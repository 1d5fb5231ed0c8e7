"""Operand values for the tensor-core probes: random register contents of every fragment kind
(never zero: tensor cores run measurably faster on zeros), the 2:4 sparse metadata rule (a
bad pattern is rejected before any launch), the ldmatrix pointer-chase layout, and the `in` /
`fill` buffers one launch reads. Pure numpy."""
from __future__ import annotations

from typing import Protocol

import numpy as np


class SparseMetadataError(ValueError):
    """mma.sp metadata that is not a valid 2:4 (or tf32 1:2) pattern: rejected before launch."""


# kind -> how one 32-bit (or 64-bit for f64) register is filled
REG_KINDS = ("f16x2", "bf16x2", "tf32", "f32", "s32", "s8x4", "u8x4", "s4x8", "u4x8", "f64",
             "e4m3x4", "e5m2x4", "e2m1x8", "scale.ue8m0", "scale.ue4m3", "meta.f16", "meta.tf32",
             "meta.s8", "nonzero")
# FP4 e2m1 codes of +-0.5 and +-1 (sign, 2 exponent bits, 1 mantissa bit)
E2M1_CODES = (0b0001, 0b0010, 0b1001, 0b1010)
# block scales of 1.0 in every byte: ue8m0 2^(127-127), ue4m3 1.0 (exponent 7, bias 7)
SCALE_ONE = {"scale.ue8m0": 0x7F, "scale.ue4m3": 0x38}

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
    nibs = (arr[:, None] >> (np.arange(8, dtype=np.uint64) * np.uint64(4))) & np.uint64(0xF)
    bad = ((arr >> np.uint64(32)) != 0) | ~np.isin(nibs, allowed).all(axis=1)
    if not bad.any():                   # every word checked at once; the first bad one named
        return
    i = int(np.flatnonzero(bad)[0])
    w = int(arr[i])
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


SIGNS = np.array([-1.0, 1.0])


def _uniform_pm(rng, n, lo=0.25, hi=1.0):
    # the sign as rng.choice([-1.0, 1.0], n) draws it (the same stream: integers(0, 2, n)),
    # without choice's per-call overhead: tens of thousands of draws a sweep
    return rng.uniform(lo, hi, n) * SIGNS[rng.integers(0, 2, n)]


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
    if kind == "e2m1x8":
        return _pack(rng.choice(E2M1_CODES, 8 * n), 4)
    if kind in SCALE_ONE:
        return _pack(np.full(4 * n, SCALE_ONE[kind], np.int64), 8)
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


class Operands(Protocol):
    """What inputs() reads of a probe (a TensorProbe): its name, its input slots (of its
    sweep kernel, and per kernel), its shared-memory words."""
    name: str
    slots: list
    inputs: dict

    def fill(self, rng: np.random.Generator) -> np.ndarray: ...


def inputs(p: Operands, threads: int, seed: int = 0x7E45,
           key: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(`in` buffer: threads x slots uint64, `fill` buffer: shared-memory words uint32) for
    the probe's kernel `key` (default: its sweep kernel). Random, never zero; mma.sp
    metadata validated (SparseMetadataError before any launch); the shared words are the
    probe's own (`TensorProbe.fill`: ldmatrix the pointer-chase layout, relative offsets the
    kernel adds the buffer base to)."""
    rng = np.random.default_rng(seed)
    slots = p.slots if key is None else p.inputs[key]
    buf = np.zeros((threads, max(1, len(slots))), np.uint64)
    for s in slots:
        buf[:, s.slot] = draw_regs(s.kind, threads, rng)
        if s.kind.startswith("meta."):
            validate_sparse_metadata(buf[:, s.slot], s.kind.split(".")[1], p.name)
    return buf, p.fill(rng)


def of_probes(probes: list) -> dict:
    """Every launch set's operands of these TensorProbes by (probe name, threads, kernel
    key): what `inputs` gives each, made at once (ahead, in a worker process:
    topics/tensor/mma/run.py)."""
    return {(p.name, threads, key): inputs(p, threads, key=key)
            for p in probes for threads, key in p.launches()}


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
