"""The nightly gate: conformance bounds and change limits chosen for a stated false-alarm rate
per board-night, from the noise model (results/noise.py).

A board-night asks each of about FIGURES figures two questions, conformance (is the board
within its model's bounds?) and change (did the board move against its own recent runs?). The
design rate DESIGN_RATE is shared out evenly: each figure and question may raise a false alarm
with probability ALPHA = DESIGN_RATE / (2 x FIGURES) on a healthy board, under the noise
model's assumptions (normal within-board noise and board-to-board spread, sigmas at their 90%
upper confidence bounds). What the assumptions miss is measured, not assumed: the
leave-one-board-out cross-validation (cli/crossval.py, results/<arch>/gate.md).

- **Conformance**: a two-sided normal tolerance interval (Howe's factor) over the sampled
  boards' values: mean +- k x sqrt(sigma_board^2 + sigma_run^2), covering 1 - ALPHA of the
  model's boards with 90% confidence, and never narrower than the boards seen. Written into
  the expectation entry as `range` (the lowest and highest run of the sampled boards) and
  `tolerance.abs` (the margin at either end), so the judge's check is the one it always was.
- **Change**: tonight against the median of the board's own last runs (up to HISTORY), beyond
  Z x sigma_run x sqrt(1 + 1/k) for k runs of history. An *exact* figure (every run of every
  sampled board read one value) flags any move of a cycle or more (of EXACT_REL elsewhere).
  An unstable result (its launches spread wider than its stability limit) is judged all the
  same, with its own spread added to the limit.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .noise import Figure, tolerance_factor, two_sided_z

DESIGN_RATE = 1e-3          # false alarms per board-night, every figure and question together
FIGURES = 1200              # figures judged in a board-night (sm_90: about 1,190)
QUESTIONS = 2               # conformance and change
ALPHA = DESIGN_RATE / (FIGURES * QUESTIONS)
Z = two_sided_z(ALPHA)      # about 5.1
HISTORY = 5                 # a board's own runs a night is compared with
MIN_BOARDS = 3              # fewer boards say too little about a model's spread
EXACT_RESOLUTION = 0.001    # an exact figure: a move of 0.1% (half a cycle) counts
RESOLUTION = 0.003          # any other figure: moves under 0.3% never count
CYCLE_UNITS = ("cycles", "cycles/op")
RULE = ("bounds: mean +- k x sqrt(sigma_board^2 + sigma_run^2) over the sampled boards "
        "(Howe's two-sided normal tolerance interval, coverage 1 - {alpha:.2g}, confidence "
        "90%), never narrower than the boards' runs; change: beyond {z:.2f} x sigma_run x "
        "sqrt(1 + 1/k) from the median of the board's last k <= {history} runs; sigma_run at "
        "its 90% upper confidence bound; no move under 0.3% counts (exact figures: 0.1%, at "
        "most half a cycle)")


def rule_text() -> str:
    return RULE.format(alpha=ALPHA, z=Z, history=HISTORY)


def floor(unit: str, center: float, exact: bool) -> float:
    """The smallest move that counts: for an exact figure (every run of every board read it:
    any move is news) EXACT_RESOLUTION of its value, and never more than half a cycle for a
    cycle count (a move of one cycle always counts); for any other figure RESOLUTION of its
    value (a median over launches, a whole kernel's cycles, a model's prediction from the
    board's parameters moves by less than that without meaning anything; SPEC's repeatability
    bar is 1%)."""
    if not exact:
        return RESOLUTION * abs(center)
    f = EXACT_RESOLUTION * abs(center)
    return min(f, 0.5) if unit in CYCLE_UNITS else f


def one_sided(key: str, unit: str) -> bool:
    """A model's error (|predicted - measured| / measured) is bounded above only: a board the
    model predicts better is not out of its model's range. It is derived from the measured
    and predicted cycles, which the change question asks about; its own moves near zero say
    nothing."""
    return unit == "ratio" and key.endswith(".error")


def round_up(x: float, digits: int = 2) -> float:
    """`x` rounded up to `digits` significant digits (0 stays 0)."""
    if x <= 0 or not math.isfinite(x):
        return 0.0 if x <= 0 else x
    e = math.floor(math.log10(x)) - digits + 1
    return round(math.ceil(x / 10 ** e - 1e-9) * 10 ** e, max(0, -e))


@dataclass(frozen=True)
class Bounds:
    """What the sample says of one figure: the contract's numbers."""
    key: str
    unit: str
    low: float                  # lowest run of the sampled boards
    high: float                 # highest
    margin: float               # at either end
    sigma_run: float | None     # within-board, absolute, 90% upper bound
    sigma_board: float          # board-to-board, absolute
    exact: bool
    n_boards: int
    n_runs: int
    modes: tuple[float, ...]
    grid: bool = False          # read off a power-of-two sweep: one step (x2) is its resolution

    @property
    def lo_bound(self) -> float:
        return 0.0 if self.grid else self.low - self.margin

    @property
    def hi_bound(self) -> float:
        return 2 * self.high if self.grid else self.high + self.margin

    def conforms(self, value: float, spread: float = 0.0) -> bool:
        return self.lo_bound - spread <= value <= self.hi_bound + spread


def derive(fig: Figure, min_boards: int = MIN_BOARDS) -> Bounds | None:
    """A figure's bounds from its sample (None with fewer than `min_boards` boards)."""
    values = fig.board_values()
    if len(values) < min_boards:
        return None
    runs = [v for vs in fig.boards.values() for v in vs]
    low, high = min(runs), max(runs)
    if one_sided(fig.key, fig.unit):
        low = 0.0
    mean = statistics.fmean(values.values())
    s_run = fig.sigma_run
    s_board = fig.sigma_board
    exact = fig.exact
    if len(values) == 1:
        # one board is the model (an explicit replace): other boards are judged as if they
        # were its later nights
        need = Z * s_run * math.sqrt(2) if s_run is not None else 0.01 * abs(mean)
    else:
        total = math.hypot(s_board, s_run or 0.0)
        k = tolerance_factor(len(values), ALPHA)
        need = max(low - (mean - k * total), (mean + k * total) - high, 0.0)
    margin = round_up(max(need, floor(fig.unit, mean, exact)))
    return Bounds(fig.key, fig.unit, low, high, margin,
                  None if s_run is None else round_up(s_run), round_up(s_board), exact,
                  len(values), fig.n_runs, tuple(fig.modes()), fig.grid)


def outward(low: float, high: float) -> tuple[float, float]:
    """A range as an entry writes it, rounded outwards (never narrower than the runs): 2
    decimals, or 4 significant digits for figures under 1."""
    def digits(v: float) -> int:
        return 2 if v == 0 or abs(v) >= 1 else 3 - math.floor(math.log10(abs(v)))
    d = min(digits(low), digits(high))
    return (math.floor(low * 10 ** d + 1e-9) / 10 ** d,
            math.ceil(high * 10 ** d - 1e-9) / 10 ** d)


# --- change against the board's own history ----------------------------------------------

@dataclass(frozen=True)
class Move:
    """Tonight's value against the board's own recent runs."""
    moved: bool
    reference: float
    delta: float
    limit: float
    basis: str


def change_limit(reference: float, k: int, sigma_run: float | None, unit: str,
                 exact: bool, spread: float = 0.0, fallback_rel: float = 0.01
                 ) -> tuple[float, str]:
    """How far tonight may sit from the median of k runs of history before it is a change,
    and what that limit rests on."""
    least = max(floor(unit, reference, exact), spread)
    if exact:
        return least, "exact figure: any move beyond 0.1% (half a cycle)"
    if sigma_run is None:
        limit = max(fallback_rel * abs(reference), 0.5 if unit in CYCLE_UNITS else 0.0)
        return max(limit, least), (f"no noise model for this figure: {fallback_rel:.0%}, half "
                                   f"a cycle, either run's spread")
    limit = Z * sigma_run * math.sqrt(1 + 1 / max(k, 1))
    return max(limit, least), f"{Z:.2f} x sigma_run {sigma_run:.3g} x sqrt(1 + 1/{k})"


def change(value: float, history: list[float], *, sigma_run: float | None, unit: str,
           exact: bool, spread: float = 0.0, key: str = "", grid: bool = False,
           fallback_rel: float = 0.01) -> Move | None:
    """Tonight's value against the median of the board's last HISTORY runs (oldest first);
    None without history, and for a model's error (one_sided: its cycles are asked)."""
    past = [v for v in history if v is not None and math.isfinite(v)][-HISTORY:]
    if not past or one_sided(key, unit):
        return None
    ref = statistics.median(past)
    if grid and ref > 0 and value > 0:
        steps = abs(math.log2(value / ref))
        return Move(steps > 1 + 1e-9, ref, value - ref, ref, "one step of a power-of-two "
                                                               "sweep is its resolution")
    limit, basis = change_limit(ref, len(past), sigma_run, unit, exact, spread, fallback_rel)
    delta = value - ref
    return Move(abs(delta) > limit, ref, delta, limit, basis)


# --- info and mapping records -------------------------------------------------------------

def info_identity(r: dict) -> tuple:
    """What an info or mapping record says, without its prose: its value and unit, the
    expectation it names, and the SASS mapping (data.unit: opcode -> count) and kind a
    mapping record carries. The detail text may quote measured figures (the L2 size a chase
    kept) that move from run to run: it is never compared. A model's error recorded as info
    (a miss far beyond the seed's, `one_sided`) is compared by what it is, not by its value."""
    data = r.get("data") if isinstance(r.get("data"), dict) else {}
    if one_sided(r.get("key") or "", r.get("unit") or ""):
        # the error moves with the measured cycles, which are asked themselves
        return ("model error", r.get("unit") or "", r.get("expected") or "")
    unit = data.get("unit")
    mapping = tuple(sorted((str(k), v) for k, v in unit.items())) if isinstance(unit, dict) \
        else unit
    return (r.get("value"), r.get("unit") or "", r.get("expected") or "", mapping,
            data.get("kind"))
