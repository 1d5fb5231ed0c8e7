"""A model's board-dependent ranges from a fleet sample: the conformance half of a nightly.

Boards of one model differ (two H100s of one host: the L2 stream 3% apart), by more than one
board repeats from night to night. A figure whose boards spread wider than one board's own
run-to-run noise explains is *board-dependent*: the model's expectation (the device section of
the arch's file) is then the range the sampled boards span, widened by a stated rule, with the
boards (UUIDs), the dates and the rule in the entry's provenance. Figures on which every board
agrees within its noise keep the expectation they have, unless a sampled run fails it: the
sample's boards are healthy boards of the model, so an entry that rejects one of them is
rewritten from the sample like a board-dependent one (`Derived.rejected` names the boards).

The rule (RULE): each board counts with the median of its runs; the boards the entry already
spans (provenance.boards) that the sample has no run of count too when the entry was measured
with the sample's method (a model's range never forgets a board); the range runs from the
lowest board to the highest; it is judged with a relative tolerance at either end of at least three
times the within-board run-to-run noise sigma (and never less than the entry's own tolerance).
Sigma comes from the moves between two runs of one board (the sample's boards with several
runs, and the moves a declared `noise:` keeps): their RMS over sqrt(2), a move being the
difference of two runs. With fewer than NOISE_MIN_MOVES moves the results' own spread (the
scatter over launches, relative, the median over the sample) stands in for it.

Pure apart from `write_fleet`, which goes through the one atomic writer.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from . import expectations as E

SIGMAS = 3                  # the range is widened by this many run-to-run sigmas
MIN_BOARDS = 3              # fewer boards say too little about a model's spread
NOISE_MIN_MOVES = E.NOISE_MIN_MOVES
ABS_RESOLUTION = {"cycles": 0.5, "cycles/op": 0.5}   # what a cycle count resolves
TOL_STEP = 0.001            # tolerances are rounded up to 0.1%
RULE = (f"range: lowest to highest board of the sample (each board the median of its runs) "
        f"and of the boards the entry spanned with the same method; "
        f"tolerance at either end: the larger of {SIGMAS} x the within-board run-to-run "
        f"noise sigma (RMS of two-run moves / sqrt 2, else the median relative spread over "
        f"launches) and the entry's own; written for a figure the boards spread wider than "
        f"that noise, or whose old entry failed a sampled run; a board's runs older than the "
        f"entry that fail it are left out (older code); methods compared without their numbers")
FIGURE_STATUSES = ("pass", "fail", "measured")


@dataclass
class Figure:
    """One characteristic across the sample's boards."""
    key: str
    unit: str
    method: str
    boards: dict[str, list[float]] = field(default_factory=dict)   # uuid -> value per run
    spreads: list[float] = field(default_factory=list)              # relative, per result
    dates: set[str] = field(default_factory=set)
    run_dates: dict[str, list[str]] = field(default_factory=dict)   # uuid -> date per run
    superseded: list[str] = field(default_factory=list)   # boards left out: see drop_superseded

    def drop_superseded(self, expected, entry_date: str) -> None:
        """Leave out the runs older than the entry that the entry fails: the entry was
        measured after them, by code that has changed since (the method's words can stay the
        same while a probe's kernel changes), so they are not the model's boards as measured
        now. A board with no run left drops out of the figure (named in `superseded`)."""
        if not entry_date:
            return
        for b in list(self.boards):
            keep = [(d, v) for d, v in zip(self.run_dates[b], self.boards[b])
                    if not d or d >= entry_date or expected.check(v)]
            if len(keep) == len(self.boards[b]):
                continue
            if keep:
                self.run_dates[b], self.boards[b] = map(list, zip(*keep))
            else:
                del self.boards[b], self.run_dates[b]
                self.superseded.append(b)

    def board_values(self) -> dict[str, float]:
        return {b: statistics.median(vs) for b, vs in self.boards.items()}

    def moves(self) -> list[float]:
        """Relative moves between consecutive runs of one board."""
        out = []
        for vs in self.boards.values():
            out += [abs(b - a) / max(abs(a), 1e-300) for a, b in zip(vs, vs[1:])]
        return out


@dataclass
class Derived:
    """What the sample says of one figure."""
    key: str
    unit: str
    n_boards: int
    n_runs: int
    low: float
    high: float
    median: float
    sigma_rel: float
    sigma_basis: str
    dependent: bool
    tolerance: dict
    boards: dict[str, float]
    dates: tuple[str, str]
    method: str
    kept: list[str] = field(default_factory=list)   # the entry's boards the sample had no run of
    rejected: list[str] = field(default_factory=list)   # sampled boards the old entry failed
    superseded: list[str] = field(default_factory=list)   # boards whose runs predate the entry

    @property
    def written(self) -> bool:
        """Does the model's entry come from the sample: board-dependent, or the old entry
        fails a sampled board."""
        return self.dependent or bool(self.rejected)

    @property
    def spread_rel(self) -> float:
        return (self.high - self.low) / max(abs(self.median), 1e-300)


method_shape = E.method_shape    # methods compared without the numbers a run chose


def _board(r: dict) -> str:
    return str((r.get("provenance") or {}).get("uuid") or "")


def collect(runs: Iterable[list[dict]], arch: str, model: str) -> dict[str, Figure]:
    """Every finite, judged figure of `model` on `arch` in the sampled runs (each a results
    list, a merged multi-GPU report included), by board. A figure enters with the method of
    the newest run that measured it only: a board measured with an older method does not
    count for it (the committed history holds runs of older code). Methods are compared by
    `method_shape`: the numbers in a method's text are the run's own choices."""
    seen: list[tuple[str, dict]] = []
    for results in runs:
        for r in results:
            prov = r.get("provenance") or {}
            if r.get("arch") != arch or prov.get("device") != model or not _board(r) \
                    or r.get("status") not in FIGURE_STATUSES or not E._finite(r.get("value")) \
                    or E.is_spec_bar(r.get("key", "")):
                continue
            seen.append((str(prov.get("date") or ""), r))
    seen.sort(key=lambda x: x[0])
    newest_method = {r["key"]: method_shape(r.get("method", "")) for _, r in seen}
    out: dict[str, Figure] = {}
    for date, r in seen:
        if method_shape(r.get("method", "")) != newest_method[r["key"]]:
            continue
        f = out.setdefault(r["key"], Figure(r["key"], r.get("unit", ""), r.get("method", "")))
        v = float(r["value"])
        f.boards.setdefault(_board(r), []).append(v)
        f.run_dates.setdefault(_board(r), []).append(date)
        spread = r.get("spread")
        if E._finite(spread) and v:
            f.spreads.append(abs(float(spread)) / abs(v))
        if date:
            f.dates.add(date[:10])
    return out


def sigma(fig: Figure, declared_moves: list[float]) -> tuple[float, str]:
    """The within-board run-to-run noise (relative) and what it was taken from."""
    moves = fig.moves() + list(declared_moves)
    if len(moves) >= NOISE_MIN_MOVES:
        rms = math.sqrt(sum(m * m for m in moves) / len(moves))
        return rms / math.sqrt(2), f"RMS of {len(moves)} two-run moves of one board / sqrt 2"
    if fig.spreads:
        return statistics.median(fig.spreads), (f"median relative spread over launches of "
                                                f"{len(fig.spreads)} results")
    return 0.0, "no noise measured"


def _round_up(x: float) -> float:
    return round(math.ceil(x / TOL_STEP - 1e-9) * TOL_STEP, 4)


def derive(fig: Figure, old: dict) -> Derived:
    """The sample's range of one figure under RULE; `old` is the entry it would replace (its
    tolerance is the floor, its declared noise's moves count towards sigma)."""
    vals = fig.board_values()
    kept = kept_boards(fig, old, set(vals))
    vals.update(kept)
    declared = [float(m) for ms in ((old.get("noise") or {}).get("boards") or {}).values()
                for m in (ms if isinstance(ms, list) else [ms])]
    s, basis = sigma(fig, declared)
    lo, hi, med = min(vals.values()), max(vals.values()), statistics.median(vals.values())
    resolution = ABS_RESOLUTION.get(fig.unit, 0.0)
    dependent = len(vals) >= 2 and (hi - lo) > max(SIGMAS * s * abs(med), 0.005 * abs(med),
                                                   resolution)
    tol = dict(old.get("tolerance") or {})
    tol["rel"] = max(float(tol.get("rel") or 0.0), _round_up(SIGMAS * s))
    dates = sorted(fig.dates) or [""]
    return Derived(fig.key, fig.unit, len(vals), sum(len(v) for v in fig.boards.values()),
                   lo, hi, med, s, basis, dependent, {k: tol[k] for k in sorted(tol) if tol[k]},
                   {b[:12]: E._rounded(v) for b, v in sorted(vals.items())},
                   (dates[0], dates[-1]), fig.method, sorted(kept))


def kept_boards(fig: Figure, old: dict, sampled: set[str]) -> dict[str, float]:
    """The boards the entry already spans (provenance.boards) that the sample has no run of:
    kept when the entry was measured with the sample's method (a model's range never forgets
    a board it has seen), left out when the method has changed since (their figures measured
    something else)."""
    boards = (old.get("provenance") or {}).get("boards") or {}
    if not boards or method_shape(str(old.get("method", ""))) != method_shape(fig.method):
        return {}
    short = {b[:12] for b in sampled}
    return {str(b): float(v) for b, v in boards.items()
            if str(b)[:12] not in short and E._finite(v)}


def fleet_provenance(d: Derived, model: str) -> dict:
    return {"device": model, "boards": d.boards,
            "fleet": {"rule": RULE, "boards": d.n_boards, "runs": d.n_runs,
                      **({"kept_from_entry": d.kept} if d.kept else {}),
                      "dates": list(d.dates), "sigma_rel": round(d.sigma_rel, 5),
                      "sigma_basis": d.sigma_basis, "spread_rel": round(d.spread_rel, 5)}}


def entry(d: Derived, old: dict, model: str) -> dict:
    """The device entry a board-dependent figure gets: its range over the sample, RULE's
    tolerance; the old entry's note and declared noise kept."""
    out = {"range": [E._rounded(d.low), E._rounded(d.high)], "unit": d.unit,
           "tolerance": d.tolerance,
           "source": f"fleet sample of {d.n_boards} {model} boards, runs of "
                     f"{d.dates[0]} to {d.dates[1]} (provenance.fleet)",
           "method": d.method, "provenance": fleet_provenance(d, model)}
    for kept in ("note", "noise"):
        if kept in old:
            out[kept] = old[kept]
    return out


@dataclass
class Plan:
    """What `write_fleet` does (or, dry, would do) per key."""
    written: dict[str, Derived] = field(default_factory=dict)
    agreeing: dict[str, Derived] = field(default_factory=dict)   # within noise across boards
    too_few: dict[str, int] = field(default_factory=dict)        # key -> boards sampled
    no_entry: list[str] = field(default_factory=list)
    old: dict[str, dict] = field(default_factory=dict)


def plan_fleet(arch: str, runs: Iterable[list[dict]], model: str, *, root: Path,
               keys: set[str] | None = None, min_boards: int = MIN_BOARDS) -> Plan:
    figs = collect(runs, arch, model)
    plan = Plan()
    store = E.Store(root)
    exp = store.load(arch)
    read: dict[Path, dict[str, dict]] = {}
    arch_read: dict[tuple[Path, None], dict[str, dict]] = {}
    for key in sorted(figs):
        if keys and key not in keys:
            continue
        fig = figs[key]
        expected = exp.get(key, model) if exp is not None else None
        if expected is not None:
            fig.drop_superseded(expected, expected.measured)
        if len(fig.boards) < min_boards:
            plan.too_few[key] = len(fig.boards)
            continue
        if expected is None:
            plan.no_entry.append(key)
            continue
        path = E.file_for(key, arch, root)
        if path not in read:
            read[path] = E.section_entries(path, model)
        if read[path].get(key) is None and (path, None) not in arch_read:
            arch_read[(path, None)] = E.section_entries(path, None)
        old = read[path].get(key) or _arch_entry(
            exp, key, (arch_read.get((path, None), {}).get(key) or {}).get("noise"))
        plan.old[key] = old
        d = derive(fig, old)
        d.rejected = rejected_boards(fig, expected)
        d.superseded = list(fig.superseded)
        (plan.written if d.written else plan.agreeing)[key] = d
    return plan


def rejected_boards(fig: Figure, expected) -> list[str]:
    """The sampled boards with a run the current expectation fails (as the judge would)."""
    return sorted(b for b, vs in fig.boards.items()
                  if any(not expected.check(v) for v in vs))


def _arch_entry(exp: E.ArchExpectations, key: str, noise: dict | None) -> dict:
    """The arch-level entry as YAML data (a device section without its own entry starts from
    it): its tolerance, note and declared noise (never its boards: they may be another
    model's)."""
    e = exp.characteristics.get(key)
    if e is None:
        return {}
    out: dict = {"tolerance": {k: v for k, v in (("abs", e.abs_tol), ("rel", e.rel_tol)) if v}}
    if e.range is not None:
        out["range"] = list(e.range)
    elif e.value is not None:
        out["value"] = e.value
    if e.note:
        out["note"] = e.note
    if noise:
        out["noise"] = noise
    return out


def write_fleet(arch: str, plan: Plan, model: str, *, root: Path) -> dict[Path, list[str]]:
    """Write every board-dependent figure of the plan into its file's device section
    (atomically, every other entry kept). Returns file -> keys written."""
    by_file: dict[Path, dict[str, dict]] = {}
    for key, d in plan.written.items():
        by_file.setdefault(E.file_for(key, arch, root), {})[key] = entry(d, plan.old[key], model)
    for path, entries in sorted(by_file.items()):
        E.write_entries(path, entries, model)
    return {p: list(e) for p, e in sorted(by_file.items())}


def lines(plan: Plan, model: str) -> list[str]:
    """The plan for people: one line per board-dependent figure (old -> new range, how much
    it widened), then counts of the rest."""
    failing = sum(1 for d in plan.written.values() if not d.dependent)
    out = [f"{model}: {len(plan.written)} figures from the sample ({len(plan.written) - failing} "
           f"board-dependent, {failing} whose entry failed a sampled board); "
           f"{len(plan.agreeing)} agree "
           f"across boards within their noise (left as they are); {len(plan.too_few)} on fewer "
           f"boards than asked; {len(plan.no_entry)} without an expectation"]
    for key, d in plan.written.items():
        old = plan.old.get(key) or {}
        was = old.get("range") or ([old["value"]] * 2 if E._finite(old.get("value")) else None)
        was_txt = f"{was[0]:g}-{was[1]:g}" if was else "none"
        wider = ""
        if was:
            grew = (d.high - d.low) - (float(was[1]) - float(was[0]))
            wider = f", span {'+' if grew >= 0 else ''}{grew:.4g} {d.unit}"
        kept = f", {len(d.kept)} kept from the entry" if d.kept else ""
        if d.rejected:
            kept += f"; the entry failed {', '.join(b[:12] for b in d.rejected)}"
        if d.superseded:
            kept += (f"; left out, runs older than the entry and failing it: "
                     f"{', '.join(b[:12] for b in d.superseded)}")
        out.append(f"  {key}: {was_txt} -> {d.low:g}-{d.high:g} {d.unit} over {d.n_boards} "
                   f"boards ({d.n_runs} runs{kept}; boards {d.spread_rel:.2%} apart, sigma "
                   f"{d.sigma_rel:.2%}: {d.sigma_basis}; tolerance {d.tolerance}{wider})")
    return out


def misfits(arch: str, runs: Iterable[list[dict]], model: str, *, root: Path,
            keys: set[str] | None = None) -> tuple[int, list[tuple[str, str, float, str]]]:
    """The sampled runs judged against the expectations now in the files, as the nightly
    would: (figures judged, [(key, board, value, expected)] that fail). Runs measured with
    another method, and runs older than their entry that it fails (left out of the sample),
    are not judged. After `write_fleet` the list is empty unless a writer or rule is wrong."""
    exp = E.Store(root).load(arch)
    figs = collect(runs, arch, model)
    judged, bad = 0, []
    for key, fig in sorted(figs.items()):
        expected = exp.get(key, model) if exp is not None else None
        if expected is None or (keys and key not in keys):
            continue
        fig.drop_superseded(expected, expected.measured)
        for board, values in sorted(fig.boards.items()):
            for v in values:
                judged += 1
                if not expected.check(v):
                    bad.append((key, board, v, expected.describe()))
    return judged, bad

