"""A committed baseline (``results/<arch>/<device>/gpuchar-results.json.gz``) against today's
expectation files: which of its figures the files contradict (stale judgements), which of its
rows are probes since declared unmeasurable, and the report an export reads in its place.

A result's stored status is the judgement of the expectation file of its night. When the file
changes afterwards (a bisected capacity replaces a grid-rule one, a probe is declared
unmeasurable), the baseline keeps a "pass" today's file would refuse. A baseline that can be
re-measured is regenerated; one that cannot (no board of that model is lent) keeps its
measurements as measured, declares the contradicted figures in ``superseded.yaml`` beside it
(SIDECAR, read by the unit test that holds every committed baseline to its files), and an
export reads ``refreshed(report)``: each contradicted figure replaced by the expectation file's
(the device's section first; a range gives its midpoint), with where it came from.

Pure: no GPU, no pytest.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from .finite import number
from .schema import ArchExpectations

USABLE = ("pass", "measured")      # statuses whose value an export reads
SIDECAR = "superseded.yaml"        # the declaration beside a baseline that cannot be re-measured
SIDECAR_KEYS = {"why", "superseded", "unmeasurable"}


@dataclass(frozen=True)
class Stale:
    """One figure of a baseline that today's expectation contradicts."""
    key: str
    arch: str
    measured: float
    status: str
    expected: str          # the expectation as described (value/range and tolerance)
    origin: str            # file:line of the expectation entry
    replacement: float | None   # the expectation's figure (a range's midpoint); None: one_of

    def line(self) -> str:
        use = (f"{self.replacement:g} from the expectation file" if self.replacement is not None
               else "nothing (the expectation is a set of values)")
        return (f"{self.key}: baseline {self.measured:g} (stored {self.status}) disagrees with "
                f"{self.expected} at {short(self.origin)}; export uses {use}")


def short(origin: str) -> str:
    """An entry's origin without the machine's path: '<topic>/<arch>.yaml:<line>'."""
    path, _, line = origin.rpartition(":")
    p = Path(path)
    name = p.name if p.parent.name in ("", "expectations") else f"{p.parent.name}/{p.name}"
    return f"{name}:{line}" if path else origin


def _figure(e) -> float | None:
    if e.value is not None:
        return float(e.value)
    if e.range is not None:
        return (e.range[0] + e.range[1]) / 2
    return None


def stale(report: dict, exp: ArchExpectations, device: str | None = None) -> list[Stale]:
    """Every figure of `report` of `exp`'s arch with a usable status that `exp` (the device's
    section first; `device` defaults to the report's) holds a numeric expectation for and
    refuses, beyond its tolerance or range."""
    device = device or (report.get("meta") or {}).get("device")
    out = []
    for r in report.get("results", []):
        if r.get("arch") != exp.arch or r.get("status") not in USABLE \
                or number(r.get("value")) is None:
            continue
        e = exp.get(r["key"], device)
        if e is None or not e.numeric or e.check(float(r["value"])):
            continue
        out.append(Stale(r["key"], exp.arch, float(r["value"]), r["status"], e.describe(),
                         e.origin, _figure(e)))
    return out


def since_unmeasurable(report: dict, exp: ArchExpectations) -> list[str]:
    """The keys of rows `report` holds (any status) for probes `exp` now declares
    unmeasurable: a current run reports none of them."""
    return sorted({r["key"] for r in report.get("results", [])
                   if r.get("arch") == exp.arch and r.get("key") in exp.unmeasurable})


@dataclass
class Refreshed:
    """The report an export reads, and what was changed to make it."""
    report: dict
    stale: list[Stale]
    unmeasurable: list[str]
    why: str = ""

    def notes(self) -> list[str]:
        out = [s.line() for s in self.stale]
        if out and self.why:
            out.insert(0, f"the baseline cannot be re-measured ({self.why})")
        if self.unmeasurable:
            out.append(f"{len(self.unmeasurable)} rows of probes since declared unmeasurable "
                       f"left out: {', '.join(self.unmeasurable)}")
        return out


def refreshed(report: dict, exp: ArchExpectations | None,
              declared: "Declared | None" = None) -> Refreshed:
    """For a baseline declared as one that cannot be re-measured (`declared`: its
    superseded.yaml), `report` with each stale figure replaced by its expectation's (status
    pass, `source` the entry's file:line, `superseded` the baseline's value and status,
    `detail` saying so; a one_of expectation leaves the row without a value) and the rows of
    probes since declared unmeasurable removed. Otherwise (a run that can be repeated: it is
    regenerated, not patched) or without expectations, the report as it is."""
    if exp is None or declared is None:
        return Refreshed(report, [], [])
    found = stale(report, exp)
    gone = set(since_unmeasurable(report, exp))
    by_key = {s.key: s for s in found}
    rows = []
    for r in report.get("results", []):
        if r.get("arch") == exp.arch and r.get("key") in gone:
            continue
        s = by_key.get(r.get("key")) if r.get("arch") == exp.arch else None
        if s is not None and r.get("status") in USABLE:
            r = {**r, "value": s.replacement, "status": "pass" if s.replacement is not None
                 else "superseded", "source": short(s.origin),
                 "detail": f"expectation file's figure ({s.expected}, {short(s.origin)}): the "
                           f"baseline's {s.measured:g} is superseded",
                 "superseded": {"measured": s.measured, "status": s.status,
                                "expected": s.expected, "from": short(s.origin)}}
        rows.append(r)
    return Refreshed({**report, "results": rows}, found, sorted(gone), declared.why)


# --- the declaration beside a baseline ----------------------------------------------------

class SidecarError(ValueError):
    """A malformed superseded.yaml: the message names the file and the field."""


@dataclass(frozen=True)
class Declared:
    why: str                         # why the baseline cannot be re-measured
    superseded: dict[str, float]     # key -> the baseline's value, as measured
    reasons: dict[str, str]          # key -> why today's expectation differs
    unmeasurable: tuple[str, ...]


def read_sidecar(path: Path) -> Declared | None:
    """The declaration at `path` (None when there is none)."""
    path = Path(path)
    if not path.exists():
        return None
    doc = yaml.safe_load(path.read_text()) or {}
    if not isinstance(doc, dict) or set(doc) - SIDECAR_KEYS or "why" not in doc:
        raise SidecarError(f"{path}: expected a mapping with 'why' and optionally "
                           f"'superseded', 'unmeasurable' (got {sorted(doc) if isinstance(doc, dict) else type(doc).__name__})")
    sup, reasons = {}, {}
    for key, item in (doc.get("superseded") or {}).items():
        if not isinstance(item, dict) or number(item.get("measured")) is None \
                or not isinstance(item.get("reason"), str):
            raise SidecarError(f"{path}: superseded.{key}: expected {{measured: <the "
                               f"baseline's number>, reason: <text>}}")
        sup[key], reasons[key] = float(item["measured"]), item["reason"]
    unm = doc.get("unmeasurable") or []
    if not isinstance(unm, list) or not all(isinstance(k, str) for k in unm):
        raise SidecarError(f"{path}: unmeasurable: expected a list of keys")
    return Declared(str(doc["why"]), sup, reasons, tuple(unm))


def sidecar_problems(report: dict, exp: ArchExpectations, declared: Declared | None) -> list[str]:
    """What is wrong between a baseline, its expectation file and its declaration: a stale
    figure or a since-unmeasurable row that is not declared (or no declaration at all), a
    declared one that is no longer stale, a declared value that is not the baseline's."""
    found = {s.key: s for s in stale(report, exp)}
    gone = since_unmeasurable(report, exp)
    if declared is None:
        return ([f"{s.line()} (regenerate the baseline, or declare it in {SIDECAR} if it "
                 f"cannot be re-measured)" for s in found.values()]
                + [f"{k}: a row of a probe since declared unmeasurable" for k in gone])
    bad = [f"{k}: stale but not declared in {SIDECAR}: {s.line()}"
           for k, s in found.items() if k not in declared.superseded]
    for k, v in declared.superseded.items():
        if k not in found:
            bad.append(f"{k}: declared superseded but the baseline agrees with its "
                       f"expectation (or holds no such figure)")
        elif found[k].measured != v:
            bad.append(f"{k}: declared as measured {v:g}, the baseline holds "
                       f"{found[k].measured:g}")
    if sorted(declared.unmeasurable) != gone:
        bad.append(f"unmeasurable: declared {sorted(declared.unmeasurable)}, the baseline's "
                   f"rows of probes declared unmeasurable are {gone}")
    return bad
