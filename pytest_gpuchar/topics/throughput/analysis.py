"""Pure maths of the throughput and launch records (no CuPy, no pytest): per-SM busy spans and
the rate fitted over trip counts, per-block spans and warp start skews, serialised blocks and
the gaps between them, the warp and block launch figures and the issue cycle."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...core import runner
from ...core.fit import fit, least_squares, per_sm_spans
from .kernels import BLOCKS_PER_SM
from .rows import SCHEDULERS_PER_SM

WARP_SPREAD = (0.5, 0.10)     # cycles, share: per-launch spread above both is unstable
GAP_AGREEMENT = 0.15          # block launch: slope-minus-body against the median gap


# --- whole-GPU throughput ------------------------------------------------------------------

def trip_spans(host: dict[int, np.ndarray],
               reps: int) -> tuple[dict[int, list[float]], int, list[int]]:
    """Records per trip count, (1 + reps, warps, 3) each (the first launch a warm-up) ->
    (trip -> per-repeat median over SMs of the per-SM busy span, SMs seen, the distinct warp
    counts per SM seen in the last launch)."""
    spans: dict[int, list[float]] = {}
    sms, warps_per_sm = 0, []
    for t, rec in host.items():
        spans[t] = []
        for r in range(1, reps + 1):
            per = per_sm_spans(rec[r])
            sms = len(per)
            warps_per_sm = sorted({w for _, w in per.values()})
            spans[t].append(float(statistics.median(c for c, _ in per.values())))
    return spans, sms, warps_per_sm


class UnitRate(NamedTuple):
    rate: float          # results per clock per SM (1 / slope)
    spread: float        # max - min of the per-repeat rates
    unstable: bool
    why: str
    intercept: float     # fixed cycles (launch skew, operand loads, stores)
    rates: list[float]   # per-repeat rates


def rate_from_spans(spans: dict[int, list[float]], results_per_sm: dict[int, float],
                    *, spread_rel: float = 0.02) -> UnitRate:
    """Fit per-SM busy cycles against results per SM over trip counts (core.fit): slope
    = cycles per result; rate = 1 / slope. `spans`: trip -> per-repeat cycles list."""
    f = fit(spans, results_per_sm, spread_abs=0.0, spread_rel=spread_rel)
    rates = [1.0 / s for s in f.slopes if s > 0]
    rate = 1.0 / f.value if f.value > 0 else float("nan")
    spread = (max(rates) - min(rates)) if rates else float("nan")
    why = f.why_unstable
    if why and rates:
        why += f" (per-repeat rates {min(rates):.2f}..{max(rates):.2f} results/clk/SM)"
    return UnitRate(rate, spread, f.unstable, why, f.intercept, rates)


def dynamic_smem(shared_per_sm: int, blocks_per_sm: int = BLOCKS_PER_SM) -> int:
    """The topic's blocks per SM held by dynamic shared memory (core.runner.dynamic_smem)."""
    return runner.dynamic_smem(shared_per_sm, blocks_per_sm)


def issue_cycle(rates: dict[str, float], schedulers: int = SCHEDULERS_PER_SM) -> float:
    """Cycles between two warp instructions of one scheduler at the fastest measured rate
    (results/clk/SM of single-result rows)."""
    best = max(rates.values())
    return schedulers * 32 / best


# --- blocks and warps ----------------------------------------------------------------------

def _per_block(rec: np.ndarray, warps_per_block: int) -> np.ndarray:
    n = rec.shape[0] // warps_per_block
    return rec[: n * warps_per_block].reshape(n, warps_per_block, rec.shape[1]).astype(np.int64)


def block_spans(rec: np.ndarray, warps_per_block: int) -> list[int]:
    """rec (warps, 3+) [start, end, ...] -> busy cycles of each block (max end - min start)."""
    r = _per_block(rec, warps_per_block)
    return [int(x) for x in (r[:, :, 1].max(axis=1) - r[:, :, 0].min(axis=1))]


def warp_start_skew(rec: np.ndarray, warps_per_block: int) -> list[int]:
    """Per block: last warp's entry clock minus the first warp's."""
    r = _per_block(rec, warps_per_block)
    return [int(x) for x in (r[:, :, 0].max(axis=1) - r[:, :, 0].min(axis=1))]


def _blocks_by_sm(rec: np.ndarray) -> dict[int, list[tuple[int, int]]]:
    """One-warp block records [start, end, smid, cta] -> per SM its (start, end), in order."""
    by_sm: dict[int, list[tuple[int, int]]] = {}
    for start, end, smid, _ in rec.astype(np.int64).tolist():
        by_sm.setdefault(int(smid), []).append((start, end))
    return {sm: sorted(blocks) for sm, blocks in by_sm.items()}


def serial_blocks(rec: np.ndarray) -> tuple[dict[int, int], dict[int, int], list[int], bool]:
    """One-warp blocks: per SM busy span and block count, every block's body (end - start),
    and whether blocks of one SM overlapped in time (then they were not serialised)."""
    span, count, bodies, overlap = {}, {}, [], False
    for sm, blocks in _blocks_by_sm(rec).items():
        span[sm] = blocks[-1][1] - blocks[0][0]
        count[sm] = len(blocks)
        bodies += [e - s for s, e in blocks]
        overlap |= any(b[0] < a[1] for a, b in zip(blocks, blocks[1:]))
    return span, count, bodies, overlap


def block_gaps(rec: np.ndarray) -> list[int]:
    """One-warp blocks serialised on their SM: for each SM, every gap between one block's exit
    clock and the next block's entry clock (same SM, same clock)."""
    return [b[0] - a[1] for blocks in _blocks_by_sm(rec).values()
            for a, b in zip(blocks, blocks[1:])]


@dataclass
class SerialBlocks:
    """What the serialised one-warp blocks of every launch showed."""
    per_repeat: list[list[tuple[int, int]]]   # per repeat: (blocks an SM ran, its busy span)
    bodies: list[int]                         # every block's exit - entry
    gaps: list[int]                           # exit to the next block's entry, same SM
    overlapped: bool                          # blocks of one SM overlapped in time
    counts: set[int]                          # blocks per SM seen


def serial_records(per_repeat: list[list[np.ndarray]]) -> SerialBlocks:
    """Per repeat, the records of each grid size -> SerialBlocks."""
    out = SerialBlocks([], [], [], False, set())
    for grids in per_repeat:
        pairs = []
        for host in grids:
            span, count, body, ov = serial_blocks(host)
            out.overlapped |= ov
            out.bodies += body
            out.gaps += block_gaps(host)
            out.counts |= set(count.values())
            pairs += [(count[s], span[s]) for s in span]
        out.per_repeat.append(pairs)
    return out


def slope(xs: list[float], ys: list[float]) -> tuple[float, float]:
    return least_squares(xs, ys)


def block_fit(per_repeat: list[list[tuple[int, int]]], *, spread_abs: float = 5.0,
              spread_rel: float = 0.05) -> dict:
    """Cycles per serialised block: per repeat, the least-squares slope of every SM's busy span
    against the number of blocks that SM actually ran (the block scheduler hands an SM 2..9 of
    them when each SM's share is 2, 4 or 8, so counts per SM are measured, not assumed); the
    median of the per-repeat slopes, their spread, and the linearity of the median span per
    block count."""
    slopes = []
    for pairs in per_repeat:
        if len({c for c, _ in pairs}) >= 2:
            slopes.append(slope([c for c, _ in pairs], [s for _, s in pairs])[0])
    allp = [p for pairs in per_repeat for p in pairs]
    counts = sorted({c for c, _ in allp})
    medians = {c: float(statistics.median(s for k, s in allp if k == c)) for c in counts}
    if len(counts) < 2 or not slopes:
        return {"value": float("nan"), "spread": 0.0, "slopes": slopes, "medians": medians,
                "unstable": True, "why": "fewer than two distinct block counts per SM"}
    value = float(statistics.median(slopes))
    spread = max(slopes) - min(slopes)
    m, c = slope(counts, [medians[k] for k in counts])
    residual = max(abs(medians[k] - (m * k + c)) for k in counts)
    why = ""
    if spread > max(spread_abs, spread_rel * abs(value)):
        why = f"per-repeat slopes spread {spread:.1f} cycles/block"
    # The median span per block count is not linear (an SM handed more blocks can wait for
    # the grid-wide dispatcher longer per block: docs/throughput.md): reported, and the slope is
    # cross-checked against the directly measured gaps between blocks (judge_block)
    # instead of being judged by it.
    return {"value": value, "spread": spread, "slopes": slopes, "medians": medians,
            "residual": residual, "unstable": bool(why), "why": why}


def judge_block(value: float, gaps: list[int]) -> dict:
    """Cross-check of the block launch overhead (slope per block minus the block's body)
    against the gaps measured directly between consecutive blocks of one SM (exit clock to
    next entry clock): the gaps' median must agree within GAP_AGREEMENT, else the figure is
    unstable with both estimates in the reason."""
    if not gaps:
        return {"why": "no two blocks ran on one SM: no gap to check against",
                "data": {"gap_count": 0}}
    g = np.asarray(gaps, float)
    med = float(np.median(g))
    q1, q3 = (float(x) for x in np.quantile(g, [0.25, 0.75]))
    why = ""
    if abs(med - value) > GAP_AGREEMENT * max(abs(value), 1.0):
        why = (f"slope-minus-body {value:.0f} cycles and the median gap between blocks "
               f"{med:.0f} cycles disagree by more than {GAP_AGREEMENT:.0%}")
    return {"why": why, "data": {"gap_median_cycles": med, "gap_quartiles": [q1, q3],
                                 "gap_count": len(gaps)}}


# --- launch figures ------------------------------------------------------------------------

@dataclass
class Launched:
    """A launch figure: value (cycles), spread, stability and the data behind it."""
    value: float
    spread: float
    unstable: bool
    why: str
    data: dict


def warp_launch_figure(skew: dict[int, list[float]], setup=()) -> Launched:
    """Many-BSP's warp_lnch_ovh enters its model as w x warp_lnch_ovh: the mean cost per
    additional warp over a full block, i.e. the first-to-last warp entry skew of the largest
    block divided by its warps - 1 (itself a difference of two clock reads of one SM, whose
    fixed costs cancel). The slope over block sizes is reported too: the skew is not linear
    (warps start in parallel groups, not one after another: docs/throughput.md, lab notes),
    so the slope is not the figure."""
    wmax = max(skew)
    per = [s / (wmax - 1) for s in skew[wmax]]
    value = float(statistics.median(per))
    spread = max(per) - min(per)
    why = ""
    if spread > max(WARP_SPREAD[0], WARP_SPREAD[1] * abs(value)):
        why = f"per-launch figures spread {spread:.2f} cycles/warp"
    f = fit(skew, {w: w - 1 for w in skew}, spread_abs=1.0, spread_rel=0.1)
    return Launched(value, spread, bool(why), why,
                    {"skew_cycles": {w: f.medians[w] for w in sorted(skew)},
                     "skew_block_warps": wmax, "slope_cycles_per_warp": round(f.value, 3),
                     "slope_linear": not f.unstable, "slope_note": f.why_unstable,
                     "setup": list(setup)})


def block_launch_figure(per_repeat: list[list[tuple[int, int]]], bodies: list[int],
                        gaps: list[int], overlapped: bool, data: dict) -> Launched:
    """Block launch overhead: cycles per serialised block (block_fit) minus the block's own
    body (median exit - entry), cross-checked against the gaps between blocks (judge_block);
    no figure when blocks of one SM overlapped. `data` (what the run saw) is completed."""
    f = block_fit(per_repeat)
    body = float(statistics.median(bodies))
    value = f["value"] - body
    verdict = judge_block(value, gaps)
    data = {"cycles_per_block": round(f["value"], 2), "block_body_cycles": body,
            "median_span_by_blocks": f["medians"],
            "linear_fit_residual": round(f.get("residual", 0.0), 1), **data,
            "per_repeat_slopes": [round(x, 2) for x in f["slopes"]], **verdict["data"]}
    if overlapped:
        return Launched(float("nan"), 0.0, True,
                        "blocks of one SM overlapped in time: not serialised, no figure", data)
    why = "; ".join(w for w in (f["why"], verdict["why"]) if w)
    return Launched(value, f["spread"], bool(why), why, data)
