"""Input values for probe operands: never zeros, seeded, chosen so chains stay finite where
that matters (a div.rn chain whose value drifts into subnormals takes the slow path)."""
from __future__ import annotations

import numpy as np

from .ptx import SLOT_BYTES, InputSlot

KINDS = ("int", "small", "nonzero", "float", "near1", "unit", "bool", "pos", "neg2",
         "neg2.f16x2")


def _float_bits(values: np.ndarray, width: int) -> np.ndarray:
    if width == 16:
        return values.astype(np.float16).view(np.uint16).astype(np.uint64)
    if width == 32:
        return values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return values.astype(np.float64).view(np.uint64)


def draw(kind: str, width: int, rng: np.random.Generator) -> int:
    """One raw bit pattern of `width` bits for an operand of this kind."""
    if kind not in KINDS:
        raise ValueError(f"unknown operand value kind {kind!r}; one of {KINDS}")
    if width == 1 or kind == "bool":
        return int(rng.integers(0, 2))
    mask = (1 << width) - 1
    if kind == "int":
        v = int(rng.integers(1, 1 << min(width, 63))) | (1 << (width - 2))
        return v & mask
    if kind == "nonzero":
        return int(rng.integers(3, 1 << min(width - 1, 62))) & mask
    if kind == "small":
        return int(rng.integers(1, 16))
    if kind == "pos":
        return int(rng.integers(1 << (width // 2), 1 << (width - 2))) & mask
    if kind == "neg2.f16x2":    # (-2, -2) as two halves: x*b + x = -x, exact, never 0/inf
        return 0xC000C000
    if kind == "neg2":          # -2 exactly: x*b + x = -x keeps a chain's value forever
        return int(_float_bits(np.array([-2.0]), width)[0]) & mask
    if kind == "float":      # [1, 2): normal, finite, well away from subnormals
        x = rng.uniform(1.0, 2.0, 1)
    elif kind == "near1":    # [1, 1.001): products and quotients of many stay near 1
        x = rng.uniform(1.0, 1.001, 1)
    else:                    # "unit": (-1, 1) without 0, for sin/cos/tanh
        x = rng.uniform(0.1, 0.9, 1) * rng.choice([-1.0, 1.0])
    return int(_float_bits(x, width)[0]) & mask


def input_buffer(slots: list[InputSlot], seed: int = 0x5EED) -> bytes:
    """Bytes of the `in` buffer for one thread: one 8-byte little-endian slot per input."""
    rng = np.random.default_rng(seed)
    out = bytearray(SLOT_BYTES * max(1, len(slots)))
    for s in slots:
        v = draw(s.kind, s.width, rng)
        out[s.slot * SLOT_BYTES:(s.slot + 1) * SLOT_BYTES] = v.to_bytes(SLOT_BYTES, "little")
    return bytes(out)
