"""Judging: a topic's Measurement against its expectation -> a Result with a Status.

A topic's run turns spans into ``Measurement``s (value, unit, spread, whether the figure is
stable, the topic's own invariants); ``judge`` compares one with the expectation file's entry
(per-device override first) and gives the ``Result`` the reports carry. Pure: no pytest, no
CuPy.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import Enum

from ..core.fit import Fit, Rate
from .expectations import Expected


class Status(str, Enum):
    PASS = "pass"            # measured, within the expectation's tolerance
    FAIL = "fail"            # measured, outside it (or not a finite number)
    UNSTABLE = "unstable"    # the spread or linearity says the figure cannot be judged
    INVALID = "invalid"      # the SASS is not what the probe intends: no number
    MEASURED = "measured"    # measured, nothing to compare with
    INFO = "info"            # a note: PTX->SASS mapping against the paper, JIT vs ptxas
    ERROR = "error"          # the measurement itself failed

    def __str__(self) -> str:
        return self.value


BAD = (Status.FAIL, Status.UNSTABLE, Status.ERROR)
GOOD = (Status.PASS, Status.MEASURED)


@dataclass
class Measurement:
    """One characteristic as a topic measured it, before judging."""
    key: str
    value: float | None
    unit: str = "cycles/op"
    spread: float | None = None
    unstable: str = ""            # why the figure cannot be judged ("" when stable)
    method: str = ""
    detail: str = ""
    data: dict = field(default_factory=dict)
    checks: list[str] = field(default_factory=list)   # the topic's own invariants that failed

    @classmethod
    def of_fit(cls, key: str, fit: Fit, unit: str = "cycles/op", **kw) -> "Measurement":
        """A slope fit's figure: value, spread, stability, and the fit's raw data."""
        m = cls(key, fit.value, unit, fit.spread, fit.why_unstable if fit.unstable else "", **kw)
        m.data.setdefault("slopes", [round(s, 3) for s in fit.slopes])
        m.data.setdefault("medians", fit.medians)
        m.data.setdefault("intercept", round(fit.intercept, 2))
        return m

    @classmethod
    def of_rate(cls, key: str, rate: Rate, unit: str, **kw) -> "Measurement":
        """A rate read as the inverse of a slope: value, the spread of the per-repeat rates,
        stability, and the fit's raw data (the rates, the length medians, the fixed cost)."""
        m = cls(key, rate.value, unit, rate.spread, rate.why_unstable if rate.unstable else "",
                **kw)
        m.data.setdefault("rates", [round(r, 3) for r in rate.rates])
        m.data.setdefault("medians", rate.medians)
        m.data.setdefault("intercept", round(rate.intercept, 2))
        return m

    @classmethod
    def of_value(cls, key: str, value: float | None, unit: str, *, spread: float | None,
                 unstable: str = "", **kw) -> "Measurement":
        """A figure that is not a slope (a sweep point's rate, a knee, a ratio, a bit count,
        a clock): its value with its own spread (the scatter of what it was read from: the
        launches, the places, the windows) and why it cannot be judged ("" when stable)."""
        return cls(key, value, unit, spread, unstable, **kw)


class NoFigure(Exception):
    """A row that gives no figure for a known reason (the SASS is not a tensor-core
    computation, blocks of one SM overlapped, a known anomaly reproduced): its `notes`
    (results: invalid, info) are recorded and the test is an expected failure with `reason`.
    Raised by a topic's run; the plugin records and xfails."""

    def __init__(self, reason: str, *notes: "Result") -> None:
        super().__init__(reason)
        self.reason = reason
        self.notes = list(notes)


class Measured:
    """What a topic's run read for one hardware row: its figures, the driver's SASS to compare
    with the snapshot (None: no snapshot), invariants of the topic that failed, and notes
    (Results, e.g. info: a figure the driver reports beside the measured one) recorded as
    they are."""

    def __init__(self, *figures: Measurement, sass: str | None = None,
                 checks=(), notes=()) -> None:
        self.figures = list(figures)
        self.sass = sass
        self.checks = list(checks)
        self.notes = list(notes)


@dataclass
class Result:
    key: str                    # "latency.add.u32"
    arch: str
    status: Status
    value: float | None = None
    unit: str = ""
    spread: float | None = None
    expected: str = ""          # human-readable expectation
    deviation: float | None = None
    source: str = ""
    method: str = ""
    test: str = ""
    detail: str = ""
    data: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    allowance: float | None = None   # the expectation's tolerance at this value (abs units)
    noise_rel: float = 0.0           # the within-board sigma relative to the figure
    noise_source: str = ""
    # the figure's noise model (Expected.noise: run, board, exact, grid): what the nightly's
    # change question judges a move by (results/gate.py); {} without a fleet-derived entry
    noise: dict = field(default_factory=dict)
    boards: int = 0                  # board-dependent: the boards the model's range spans
    literature: list = field(default_factory=list)   # papers' figures (Literature.as_dict)

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    def as_dict(self) -> dict:
        """Plain JSON-able dict (the status as its string): reports, xdist transport."""
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @property
    def moved(self) -> bool:
        """Passed, but used more than half of its tolerance: drifting towards the edge."""
        return (self.status == Status.PASS and self.deviation is not None and
                bool(self.allowance) and abs(self.deviation) > 0.5 * self.allowance)

    def line(self) -> str:
        val = "-" if self.value is None else f"{self.value:.2f}"
        dev = "" if self.deviation is None else f"{self.deviation:+.2f}"
        return f"{self.arch:7s} {self.key:34s} {val:>9s} {self.unit:9s} {self.expected:30s} " \
               f"{dev:>7s} {self.status.value}"

    def failure(self) -> str:
        """The assertion message of a failed result."""
        val = self.value if self.value is None else round(self.value, 2)
        return (f"{self.key} on {self.arch}: measured {val} {self.unit}, expected "
                f"{self.expected} [{self.source}]"
                + (f"; deviation {self.deviation:+.2f}" if self.deviation is not None else "")
                + (f"; {self.detail}" if self.detail else ""))


def judge(m: Measurement, arch: str, exp: Expected | None, **kw) -> Result:
    """Compare one measurement with its expectation (None: nothing to compare with)."""
    r = Result(m.key, arch, Status.MEASURED, m.value, m.unit, m.spread, method=m.method,
               detail=m.detail, data=dict(m.data), **kw)
    finite = m.value is not None and math.isfinite(m.value)
    if not finite:
        r.status, r.detail = Status.FAIL, f"measured value is {m.value!r}, not a finite number"
    elif m.unstable:
        r.status, r.detail = Status.UNSTABLE, m.unstable
    if exp is not None:
        r.expected = exp.describe()
        r.source = exp.source
        r.noise_rel, r.noise_source = exp.noise_rel, exp.noise_source
        r.noise = exp.noise()
        r.boards = exp.boards
        r.literature = [lit.as_dict() for lit in exp.literature]
        if exp.numeric and finite:
            r.deviation = exp.deviation(m.value)
            if r.deviation is not None:
                r.allowance = exp.allowance(m.value - r.deviation)
            if r.status == Status.MEASURED:
                r.status = Status.PASS if exp.check(m.value) else Status.FAIL
            elif r.status == Status.UNSTABLE and r.deviation is not None and \
                    abs(r.deviation) > (r.allowance or 0.0) + abs(m.spread or 0.0):
                # too noisy to judge within its tolerance, but outside it even with its whole
                # spread added: judged all the same (the median against its own, wider, noise)
                r.status = Status.FAIL
                r.detail = (f"unstable ({m.unstable}), and outside its expectation even with "
                            f"its spread {m.spread:g} added")
    return r
