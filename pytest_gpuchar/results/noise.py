"""The noise model of a figure, learned from a fleet's runs in the history store: how much one
board moves between its own runs (within-board run-to-run noise) kept apart from how much the
boards of a model differ (board-to-board spread), and the modes a figure shows.

Pure statistics: no files, no pytest. The inputs are `Run`s (one board's whole-suite run: its
board, model, date and results by key), as `fleet_runs` makes them from a history store's
documents; the outputs are `Figure`s, one per characteristic and model, that results/gate.py
turns into bounds.

- **Within-board sigma** (`Figure.sigma_run`): from the moves between consecutive runs of one
  board (a move is the difference of two runs, so sigma = RMS(moves) / sqrt 2), pooled over the
  boards, then raised to its one-sided 90% upper confidence bound (a sum of n squared moves is
  sigma^2 x 2 x chi-square with n degrees of freedom): few moves give a wide bound, never a
  narrow guess. With no move (single runs), half the median spread over launches stands in.
- **Board-to-board sigma** (`Figure.sigma_board`): the standard deviation of the boards'
  values (each board the median of its runs).
- **Exact** figures: every run of every board read the same value (integer cycles that
  repeat); their noise is zero and a one-cycle move is a move.
- **Modes**: the distinct values boards settle on, where the values fall in separated groups
  (a cluster's barrier latency takes 46, 55, 59 or 63 cycles depending on where its CTAs land).
- **Ratios** (`RATIOS`: a load's sustained SM clock over the idle clock): a ratio moves with
  its denominator, and a run whose idle clock reads low moves every load's ratio at once,
  so a ratio's within-board sigma is never narrower, relative to its value, than its
  denominator's: a sample whose boards moved both clocks together gives the ratio a sigma
  that one idle clock reading low, within its own noise, exceeds many times (docs/nightly.md).
- **Placement figures** (cluster barriers, distributed shared memory, TMA multicast): where a
  cluster's CTAs land is a property of each die's floorswept layout, and the H100 and the H200
  carry the same GH100 die with 132 SMs, so their samples are pooled across the models of one
  die (same arch and SM count): a mode one model's sample lacks is there in the other's.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from functools import cached_property
from statistics import NormalDist
from typing import Iterable

from .expectations import is_spec_bar, method_shape
from .finite import number

FIGURE_STATUSES = ("pass", "fail", "measured")     # a value the run stood behind
CONFIDENCE = 0.90           # sigma's upper confidence bound, and the tolerance interval's
TAIL = 2.0                  # the largest move seen is taken as this many sigmas of a move
PLACEMENT = ("movement.cluster.", "movement.dsm.", "movement.tma.multicast.",
             "movement.tma.separate.")
# a ratio's key and the key of its denominator
RATIOS = ((re.compile(r"^(tensor\.clock_load)\.\w+\.sm_clock_vs_idle$"), r"\1.idle.sm_clock_mhz"),)


@dataclass(frozen=True)
class Run:
    """One board's whole-suite run: results (key -> result dict) of the arch it ran."""
    board: str
    model: str
    arch: str
    sm_count: int | None
    date: str
    results: dict[str, dict]
    run_id: int | None = None


@dataclass
class Figure:
    """One characteristic of one model across its boards (`own`), with the boards of the other
    models of its die that measured it the same way (`peers`). The statistics are over the
    `boards` of its sample: the die's when the figure is a placement figure or the models
    agree on it (`pooled`), else the model's own."""
    key: str
    unit: str
    method: str
    model: str
    own: dict[str, list[float]] = field(default_factory=dict)     # board -> value per run
    peers: dict[str, list[float]] = field(default_factory=dict)   # other models of the die
    spreads: list[float] = field(default_factory=list)             # abs, per own result
    family_move: float = 0.0    # the largest relative move of its family (attach_families)
    denominator_rel: float = 0.0    # a ratio's denominator's relative sigma (attach_families)

    # --- the sample -------------------------------------------------------------------------
    @cached_property
    def pooled(self) -> bool:
        """Sampled over the die: a placement figure, or one on which the die's models agree
        (their boards' medians within 3 sigma of the spread either shows, or 0.5%)."""
        if not self.peers or not self.own:
            return False
        if is_placement(self.key):
            return True
        a, b = _medians(self.own), _medians(self.peers)
        ma, mb = statistics.median(a), statistics.median(b)
        run = _sigma(_moves(self.own) + _moves(self.peers), []) or 0.0
        spread = math.sqrt(_var(a) + _var(b) + run * run)
        return abs(ma - mb) <= 3 * spread + 0.005 * max(abs(ma), abs(mb))

    @property
    def boards(self) -> dict[str, list[float]]:
        return {**self.peers, **self.own} if self.pooled else self.own

    @property
    def models(self) -> str:
        return "die" if self.pooled else "model"

    # --- the statistics ---------------------------------------------------------------------
    def moves(self) -> list[float]:
        """Absolute moves between consecutive runs of each board."""
        return _moves(self.boards)

    @property
    def n_runs(self) -> int:
        return sum(len(v) for v in self.boards.values())

    def board_values(self) -> dict[str, float]:
        return {b: statistics.median(v) for b, v in self.boards.items()}

    @property
    def center(self) -> float:
        return statistics.median(self.board_values().values())

    @property
    def exact(self) -> bool:
        """Every run of every board read one value, and some board ran twice."""
        values = [v for vs in self.boards.values() for v in vs]
        return max(values) - min(values) <= 1e-9 * max(abs(max(values)), abs(min(values))) \
            and any(len(vs) > 1 for vs in self.boards.values())

    @property
    def sigma_run(self) -> float | None:
        """The within-board run-to-run sigma (absolute), at its upper confidence bound and
        never below the largest move of its family over TAIL x sqrt 2 (no sampled move of the
        probe beyond TAIL sigmas: the moves' tails are heavier than a normal's), nor, for a
        ratio, below its denominator's sigma relative to its value; None when nothing says
        how much a board moves (single runs without a spread)."""
        own = _sigma(self.moves(), self.spreads)
        if own is None:
            return None
        return max(own, abs(self.center) * self.family_move / (TAIL * math.sqrt(2)),
                   abs(self.center) * self.denominator_rel)

    def relative_moves(self) -> list[float]:
        return [abs(b - a) / abs(a) for vs in self.boards.values()
                for a, b in zip(vs, vs[1:]) if a]

    @property
    def grid(self) -> bool:
        """A figure read off a power-of-two sweep (a knee, a fill size in bytes): it resolves
        one step of the sweep, a factor of 2."""
        values = [v for vs in self.boards.values() for v in vs]
        return self.unit == "bytes" and all(v > 0 and float(v).is_integer()
                                            and int(v) & (int(v) - 1) == 0 for v in values)

    @property
    def sigma_board(self) -> float:
        return math.sqrt(_var(list(self.board_values().values())))

    def modes(self) -> list[float]:
        """The separated groups the boards' runs fall in (their medians), when there are
        several: consecutive values (sorted) further apart than the run-to-run noise can
        explain (6 sigma, at least a cycle / 1%) start a new group. One group: []."""
        values = sorted(v for vs in self.boards.values() for v in vs)
        if len(values) < 2:
            return []
        s = _sigma(_moves_within_modes(self.boards), []) or 0.0
        gap = max(6 * s, 1.0 if self.unit.startswith("cycles") else 0.0,
                  0.01 * abs(statistics.median(values)))
        groups = [[values[0]]]
        for v in values[1:]:
            if v - groups[-1][-1] <= gap:
                groups[-1].append(v)
            else:
                groups.append([v])
        return [round(statistics.median(g), 4) for g in groups] if len(groups) > 1 else []

    def without(self, board: str) -> "Figure":
        """This figure with one board left out (leave-one-board-out)."""
        return Figure(self.key, self.unit, self.method, self.model,
                      {b: v for b, v in self.own.items() if b != board},
                      {b: v for b, v in self.peers.items() if b != board}, self.spreads)
    # (the family's largest move is set again over the figures left: attach_families)


def family(key: str) -> str:
    """The figures one probe measures over its swept parameters and reads the same way: the
    key with its numbers masked (shapes, sizes, warps, cluster sizes) and its element types
    as one (bf16, f32, e4m3, s8, tf32 ...), e.g. tensor.wgmma.*.*.m#n#k#.ss.throughput. Their
    run-to-run moves have one source."""
    parts = re.sub(r"\d+", "#", key).split(".")
    return ".".join("*" if re.fullmatch(r"(bf|tf|f|e|s|u|b)#(m#)?", p) else p for p in parts)


def attach_families(figs: dict[str, Figure]) -> dict[str, Figure]:
    """Set each figure's `family_move`: the largest relative move between two runs of one
    board over its family's figures; then each ratio's `denominator_rel`: its denominator's
    sigma_run over the denominator's center (`RATIOS`)."""
    tails: dict[str, float] = {}
    for key, f in figs.items():
        if not f.key.endswith(".error"):       # a model's error near zero moves by its whole
            m = f.relative_moves()
            if m:
                tails[family(key)] = max(tails.get(family(key), 0.0), max(m))
    for key, f in figs.items():
        f.family_move = tails.get(family(key), 0.0)
    for key, f in figs.items():
        f.denominator_rel = 0.0
        for pattern, denominator in RATIOS:
            d = figs.get(pattern.sub(denominator, key)) if pattern.match(key) else None
            sigma = d.sigma_run if d is not None and d.center else None
            if sigma is not None:
                f.denominator_rel = sigma / abs(d.center)
    return figs


def _moves(boards: dict[str, list[float]]) -> list[float]:
    return [abs(b - a) for vs in boards.values() for a, b in zip(vs, vs[1:])]


def _moves_within_modes(boards: dict[str, list[float]]) -> list[float]:
    """Moves of boards that stayed in one place (the smaller half): a mode's own scatter."""
    moves = sorted(_moves(boards))
    return moves[:max(1, len(moves) // 2)] if moves else []


def _medians(boards: dict[str, list[float]]) -> list[float]:
    return [statistics.median(v) for v in boards.values()]


def _var(values: list[float]) -> float:
    return statistics.variance(values) if len(values) > 1 else 0.0


def _sigma(moves: list[float], spreads: list[float]) -> float | None:
    if moves:
        n = len(moves)
        ss = sum(m * m for m in moves)
        return max(math.sqrt(ss / 2 / chi2_quantile(1 - CONFIDENCE, n)),
                   max(moves) / (TAIL * math.sqrt(2)))
    if spreads:
        return statistics.median(spreads) / 2
    return None


# --- quantiles without scipy --------------------------------------------------------------

def chi2_quantile(p: float, dof: int) -> float:
    """The p-quantile of a chi-square distribution (Wilson-Hilferty: within 1% for the
    degrees of freedom used here, 1 and up)."""
    z = NormalDist().inv_cdf(p)
    k = 2 / (9 * dof)
    return max(dof * (1 - k + z * math.sqrt(k)) ** 3, 1e-9)


def two_sided_z(alpha: float) -> float:
    """z with P(|Z| > z) = alpha."""
    return NormalDist().inv_cdf(1 - alpha / 2)


def tolerance_factor(n: int, alpha: float, confidence: float = CONFIDENCE) -> float:
    """Howe's k for a two-sided normal tolerance interval: mean +- k sd of n boards covers
    1 - alpha of the model's boards with the given confidence. n < 2: infinite."""
    if n < 2:
        return math.inf
    dof = n - 1
    return two_sided_z(alpha) * math.sqrt(dof * (1 + 1 / n) / chi2_quantile(1 - confidence, dof))


# --- building figures from runs -----------------------------------------------------------

def is_placement(key: str) -> bool:
    return key.startswith(PLACEMENT)


def figures(runs: Iterable[Run], arch: str, model: str) -> dict[str, Figure]:
    """Every numeric figure of `model` on `arch` in the runs, by key: each board's values in
    date order, with the method of the newest run of the die that measured it (older code's
    runs of a figure measured another way do not count; methods compared without the numbers
    a run chose); the die's other models' boards (same arch and SM count) as peers.
    Unstable, invalid, info and error results, and SPEC's bars, do not enter."""
    runs = sorted((r for r in runs if r.arch == arch), key=lambda r: r.date)
    sms = {r.sm_count for r in runs if r.model == model}
    die = [r for r in runs if r.sm_count in sms]
    newest: dict[str, str] = {}
    for r in die:
        for key, res in r.results.items():
            if res.get("status") in FIGURE_STATUSES:
                newest[key] = method_shape(res.get("method", ""))
    out: dict[str, Figure] = {}
    peers: dict[str, dict[str, list[float]]] = {}
    for r in die:
        for key, res in r.results.items():
            v = number(res.get("value"))
            if is_spec_bar(key) or res.get("status") not in FIGURE_STATUSES \
                    or v is None or method_shape(res.get("method", "")) != newest.get(key):
                continue
            if r.model != model:
                peers.setdefault(key, {}).setdefault(r.board, []).append(v)
                continue
            f = out.get(key)
            if f is None:
                f = out[key] = Figure(key, res.get("unit", ""), res.get("method", ""), model)
            f.own.setdefault(r.board, []).append(v)
            if (spread := number(res.get("spread"))) is not None:
                f.spreads.append(abs(spread))
    for key, f in out.items():
        f.peers = peers.get(key, {})
    return attach_families(out)


def fleet_runs(docs: Iterable[dict]) -> list[Run]:
    """`Run`s from history-store documents (History.run: one board each) or results reports
    (a merged multi-GPU report holds several boards: one run per board, by the results'
    provenance)."""
    out = []
    for doc in docs:
        run = doc.get("run") or {}
        meta = doc.get("meta") or {}
        per: dict[str, list[dict]] = {}
        for r in doc.get("results") or []:
            prov = r.get("provenance") if isinstance(r.get("provenance"), dict) else {}
            board = run.get("board") or prov.get("uuid") or meta.get("uuid")
            if board and r.get("key"):
                per.setdefault(str(board), []).append(r)
        for board, res in per.items():
            prov = next((r["provenance"] for r in res if isinstance(r.get("provenance"), dict)),
                        {}) or {}
            model = run.get("device") or prov.get("device") or meta.get("device")
            arch = run.get("arch") or prov.get("arch") or meta.get("arch")
            if not model or not arch:
                continue
            by_key: dict[str, dict] = {}
            for r in res:
                if r.get("arch") == arch:
                    by_key.setdefault(r["key"], r)
            sms = run.get("sm_count") or prov.get("sm_count") or meta.get("sm_count")
            date = run.get("date") or meta.get("date") or prov.get("date") or ""
            out.append(Run(board, str(model), str(arch), int(sms) if sms else None,
                           str(date), by_key, run.get("id")))
    return out
