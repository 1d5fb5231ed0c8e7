"""The gate measured on the fleet's own runs: false alarms with each board left out, and the
share of injected moves it catches (the tables of results/<arch>/gate.md).

- **Leave one board out.** For every board of a model, the noise model and the bounds are
  derived from the other boards only (results/noise.py, results/gate.py), then that board's
  runs are judged in date order: the first as a first night (conformance only), each later one
  as a later night (conformance, and change against the board's own earlier runs). A board-run
  with any alarm is a false alarm: every run in the sample is of a healthy, unchanged board.
- **Detection.** Into each held-out board's last run (a later night, its earlier runs the
  history), one figure at a time, a known move is injected: one cycle up and down on exact
  cycle figures, +-2%, +-5%, +-10% on every figure. A move is caught when the figure leaves its
  bounds or moves against the board's history. Reported by topic and kind of figure, and per
  figure the smallest move caught on every board in both directions: what the gate promises.

Pure: runs in, tables out (cli/crossval.py prints and writes them).
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from . import gate
from .expectations import method_shape
from .finite import number
from .noise import FIGURE_STATUSES, Figure, Run, attach_families, figures

JUDGED = FIGURE_STATUSES + ("unstable",)
MOVES = (0.02, 0.05, 0.10)


@dataclass
class Alarm:
    board: str
    date: str
    night: int                 # 1: the board's first night
    key: str
    question: str              # conformance | change
    value: float
    detail: str


@dataclass
class BoardRun:
    board: str
    model: str
    date: str
    night: int
    judged: int = 0
    unjudged: int = 0          # figures with fewer than MIN_BOARDS other boards
    alarms: list[Alarm] = field(default_factory=list)


def _value(res: dict | None) -> float | None:
    if not res or res.get("status") not in JUDGED:
        return None
    return number(res.get("value"))


def _spread(res: dict, exact: bool) -> float:
    """An unstable result is judged with its own spread added to the limits; an exact
    figure's spread is its reading's resolution (a bisection's bracket)."""
    s = res.get("spread")
    if not (res.get("status") == "unstable" or exact) or not isinstance(s, (int, float)) \
            or not math.isfinite(s):
        return 0.0
    return abs(float(s))


def _history(runs: list[Run], key: str, shape: str) -> list[float]:
    out = []
    for r in runs:
        res = r.results.get(key)
        v = _value(res)
        if v is not None and res.get("status") != "unstable" \
                and method_shape(res.get("method", "")) == shape:
            out.append(v)
    return out


def judge_night(run: Run, earlier: list[Run], figs: dict[str, Figure],
                bounds: dict[str, gate.Bounds | None], night: int) -> BoardRun:
    """One run of a held-out board judged as the gate would: against bounds derived without
    the board, and (after the first night) against its own earlier runs."""
    out = BoardRun(run.board, run.model, run.date, night)
    for key, fig in figs.items():
        res = run.results.get(key)
        v = _value(res)
        shape = method_shape(fig.method)
        if v is None or method_shape(res.get("method", "")) != shape:
            continue
        b = bounds.get(key)
        if b is None:
            out.unjudged += 1
            continue
        out.judged += 1
        spread = _spread(res, b.exact)
        if not b.conforms(v, spread):
            out.alarms.append(Alarm(run.board, run.date, night, key, "conformance", v,
                                    f"{v:g} outside {b.lo_bound:g}..{b.hi_bound:g} "
                                    f"({b.n_boards} other boards)"))
        if night > 1:
            mv = gate.change(v, _history(earlier, key, shape), sigma_run=b.sigma_run,
                             unit=b.unit, exact=b.exact, spread=spread, key=key, grid=b.grid)
            if mv is not None and mv.moved:
                out.alarms.append(Alarm(run.board, run.date, night, key, "change", v,
                                        f"{mv.reference:g} -> {v:g} ({mv.delta:+.3g}), limit "
                                        f"{mv.limit:.3g}: {mv.basis}"))
    return out


@dataclass
class Injection:
    key: str
    board: str
    move: str                  # "+1 cycle", "-5%", ...
    size: float                # relative size (a cycle: 1 / value)
    caught: bool
    first_night: bool          # caught by conformance alone


@dataclass
class ModelReport:
    model: str
    boards: list[str]
    runs: list[BoardRun]
    injections: list[Injection]
    figs: dict[str, Figure]
    bounds: dict[str, gate.Bounds | None]       # from every board (the committed contract)


def _moves(b: gate.Bounds, v: float) -> list[tuple[str, float]]:
    if b.grid:
        return [("x4", v * 4), ("/4", v / 4)]
    out = []
    if b.exact and b.unit in gate.CYCLE_UNITS and float(v).is_integer():
        out += [("+1 cycle", v + 1), ("-1 cycle", v - 1)]
    for m in MOVES:
        out += [(f"+{m:.0%}", v * (1 + m)), (f"-{m:.0%}", v * (1 - m))]
    return out


def inject(run: Run, earlier: list[Run], figs: dict[str, Figure],
           bounds: dict[str, gate.Bounds | None]) -> list[Injection]:
    """Each figure of a held-out board's run moved by a known amount, one at a time."""
    out = []
    for key, fig in figs.items():
        b = bounds.get(key)
        res = run.results.get(key)
        v = _value(res)
        shape = method_shape(fig.method)
        if b is None or v is None or res.get("status") == "unstable" \
                or method_shape(res.get("method", "")) != shape or v == 0 \
                or gate.one_sided(key, b.unit):
            continue
        hist = _history(earlier, key, shape)
        for name, moved in _moves(b, v):
            conf = not b.conforms(moved)
            mv = gate.change(moved, hist, sigma_run=b.sigma_run, unit=b.unit, exact=b.exact,
                             key=key, grid=b.grid)
            out.append(Injection(key, run.board, name, abs(moved - v) / abs(v),
                                 conf or bool(mv and mv.moved), conf))
    return out


def cross_validate(runs: list[Run], arch: str, model: str) -> ModelReport:
    """Leave each board of `model` out in turn: judge its runs, inject moves into its last."""
    figs = figures(runs, arch, model)
    boards = sorted({r.board for r in runs if r.model == model and r.arch == arch})
    report = ModelReport(model, boards, [], [], figs,
                         {k: gate.derive(f) for k, f in figs.items()})
    for h in boards:
        mine = sorted((r for r in runs if r.board == h and r.arch == arch),
                      key=lambda r: r.date)
        train = attach_families({k: f.without(h) for k, f in figs.items()})
        bounds = {k: gate.derive(f) for k, f in train.items()}
        for i, run in enumerate(mine):
            report.runs.append(judge_night(run, mine[:i], train, bounds, i + 1))
        if len(mine) > 1:
            report.injections += inject(mine[-1], mine[:-1], train, bounds)
    return report


# --- summaries ----------------------------------------------------------------------------

def kind_of(fig: Figure, b: gate.Bounds | None) -> str:
    """The kind of a figure, for the detection table."""
    if fig.unit in gate.CYCLE_UNITS:
        return "exact cycle latency" if b is not None and b.exact else "cycle latency"
    if fig.unit == "ratio" and fig.key.endswith(".error"):
        return "model error"
    if fig.unit in ("B/clk/SM", "B/clk", "GB/s"):
        return "bandwidth"
    if fig.unit in ("flop/clk/SM", "ops/clk/SM", "fma/clk/SM", "ops/clk"):
        return "throughput"
    if fig.unit == "MHz":
        return "clock"
    return "other"


def quiet(fig: Figure, b: gate.Bounds | None) -> bool:
    """Within-board noise under 1% of the value."""
    c = abs(fig.center)
    return b is not None and b.sigma_run is not None and c > 0 and b.sigma_run / c < 0.01


def smallest_caught(injections: list[Injection]) -> dict[str, str]:
    """Per figure, the smallest move caught on every held-out board in both directions."""
    by: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for i in injections:
        size = "1 cycle" if "cycle" in i.move else i.move[1:]
        by[i.key][size].append(i.caught)
    out = {}
    for key, sizes in by.items():
        order = (["1 cycle"] if "1 cycle" in sizes else []) + [f"{m:.0%}" for m in MOVES]
        out[key] = next((s for s in order if s in sizes and all(sizes[s])), "> 10%")
    return out


def false_alarm_counts(report: ModelReport) -> dict[str, int]:
    runs = report.runs
    return {"board_runs": len(runs),
            "with_alarm": sum(1 for r in runs if r.alarms),
            "first_nights": sum(1 for r in runs if r.night == 1),
            "first_with_alarm": sum(1 for r in runs if r.night == 1 and r.alarms),
            "later_nights": sum(1 for r in runs if r.night > 1),
            "later_with_alarm": sum(1 for r in runs if r.night > 1 and r.alarms),
            "conformance_alarms": sum(1 for r in runs for a in r.alarms
                                      if a.question == "conformance"),
            "change_alarms": sum(1 for r in runs for a in r.alarms if a.question == "change")}


def detection_table(report: ModelReport) -> dict[tuple[str, str], Counter]:
    """(topic, kind) -> Counter of "<move> caught" / "<move> total"."""
    table: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for i in report.injections:
        fig = report.figs[i.key]
        row = (i.key.split(".")[0], kind_of(fig, report.bounds.get(i.key)))
        size = "1 cycle" if "cycle" in i.move else i.move[1:]
        table[row][f"{size} total"] += 1
        table[row][f"{size} caught"] += i.caught
    return table
