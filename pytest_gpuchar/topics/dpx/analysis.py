"""Pure maths of the DPX topic: what each intrinsic computes (the CPU reference a chain's
stored results are checked against), the input words of a probe, and the per-SM throughput
from the warps' clocks over trip counts. No CuPy, no pytest."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from ...core.fit import fit, per_sm_spans
from ...core.runner import dynamic_smem  # noqa: F401 - the loop's blocks per SM (run.py)
from .rows import DpxRow

LANES = {"s32": ((0, 32, True),), "u32": ((0, 32, False),),
         "s16x2": ((0, 16, True), (16, 16, True)), "u16x2": ((0, 16, False), (16, 16, False))}
SEED = 0xD9C


def input_words(count: int, seed: int = SEED) -> np.ndarray:
    """`count` random 32-bit words (every bit pattern possible: negative and positive lanes)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 32, max(1, count), dtype=np.uint64)


# --- the reference --------------------------------------------------------------------------

def split(word: int, lanes: str) -> list[int]:
    """A 32-bit word as its lanes' integer values."""
    out = []
    for shift, bits, signed in LANES[lanes]:
        v = (int(word) >> shift) & ((1 << bits) - 1)
        out.append(v - (1 << bits) if signed and v >> (bits - 1) else v)
    return out


def join(values: list[int], lanes: str) -> int:
    word = 0
    for v, (shift, bits, _) in zip(values, LANES[lanes]):
        word |= (int(v) & ((1 << bits) - 1)) << shift
    return word


def _wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


def _lane(family: str, relu: bool, a: int, b: int, c: int, bits: int, signed: bool) -> int:
    if family in ("max3", "min3"):
        f = max if family == "max3" else min
        v = f(f(a, b), c)
    elif family in ("addmax", "addmin"):
        f = max if family == "addmax" else min
        v = f(_wrap(a + b, bits, signed), c)
    elif family in ("relu_max", "bmax"):
        v = max(a, b)
    else:                                   # relu_min, bmin
        v = min(a, b)
    return max(v, 0) if relu else v


def call(row: DpxRow, a: int, b: int, c: int = 0) -> dict[str, int]:
    """The outputs of one call as 32-bit words: d (the value) and, for __vibmax/__vibmin,
    e (a's value was chosen: the whole word, or the high half) and f (the low half)."""
    la, lb, lc = split(a, row.lanes), split(b, row.lanes), split(c, row.lanes)
    spec = LANES[row.lanes]
    d = [_lane(row.family, row.relu, x, y, z, bits, signed)
         for x, y, z, (_, bits, signed) in zip(la, lb, lc, spec)]
    out = {"d": join(d, row.lanes)}
    if row.family in ("bmax", "bmin"):
        chose_a = [int(x >= y) if row.family == "bmax" else int(x <= y)
                   for x, y in zip(la, lb)]
        if len(chose_a) == 1:
            out["e"] = chose_a[0]
        else:
            out["e"], out["f"] = chose_a[1], chose_a[0]    # high half, low half
    return out


def replay(row: DpxRow, layout: list[dict[str, int]], words) -> list[dict[str, int]]:
    """Every op's outputs of a chain (`layout`: kernels.chain_layout) on the input words."""
    out, cur = [], 0
    for srcs in layout:
        vals = {f: (cur if s < 0 else int(words[s])) for f, s in srcs.items()}
        res = call(row, vals["a"], vals["b"], vals.get("c", 0))
        out.append(res)
        cur = res["d"]
    return out


def mismatches(row: DpxRow, expected: list[dict[str, int]], stored: list[tuple[int, str]],
               got, limit: int = 4) -> list[str]:
    """The stored outputs (`stored`: (op, field) per out slot after the cycle count, `got`
    their 32-bit words) that differ from the reference."""
    bad = [f"op {k} {f}: got {int(g) & 0xFFFFFFFF:#010x}, want {expected[k][f]:#010x}"
           for (k, f), g in zip(stored, got) if int(g) & 0xFFFFFFFF != expected[k][f]]
    if not bad:
        return []
    return [f"{row.intrinsic}: {len(bad)} of {len(stored)} stored results differ from the CPU "
            f"reference ({row.what}): " + "; ".join(bad[:limit])]


# --- throughput -----------------------------------------------------------------------------

@dataclass
class CallRate:
    rate: float               # calls per clock per SM (1 / slope)
    spread: float             # max - min of the per-repeat rates
    unstable: bool
    why: str
    rates: list[float]
    spans: dict               # trip -> per-repeat median (over SMs) busy cycles
    warps_per_sm: list[int]
    intercept: float
    residual: float = float("nan")     # the fit's largest deviation from its line (cycles)


def rate(records: dict[int, np.ndarray], calls_per_sm: dict[int, float],
         spread_rel: float = 0.01) -> CallRate:
    """Records per trip count, (repeats, warps, 3) each (warm-up already dropped) -> the
    calls per clock per SM: slope of the per-SM busy span (median over SMs) against the
    calls each SM ran, per repeat; unstable when the per-repeat rates spread more than
    `spread_rel`, the spans are not linear, or the SMs ran different numbers of warps."""
    spans, warps = {}, set()
    for t, rec in records.items():
        spans[t] = []
        for r in range(rec.shape[0]):
            per = per_sm_spans(rec[r])
            warps |= {w for _, w in per.values()}
            spans[t].append(float(statistics.median(c for c, _ in per.values())))
    f = fit(spans, calls_per_sm, spread_abs=0.0, spread_rel=spread_rel)
    rates = [1.0 / s for s in f.slopes if s > 0]
    value = 1.0 / f.value if f.value > 0 else float("nan")
    why = f.why_unstable
    if len(warps) > 1:
        why = f"warps per SM differ between SMs ({sorted(warps)}): blocks were not spread " \
              f"evenly" + (f"; {why}" if why else "")
    return CallRate(value, (max(rates) - min(rates)) if rates else float("nan"), bool(why), why,
                rates, spans, sorted(warps), f.intercept, f.residual)


