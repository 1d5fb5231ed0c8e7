"""Comparing runs: tonight's results against the previous run's (values beyond their noise,
statuses, presence), failed tests and snapshot diffs from the junit XML, the verdict (exit
code) of a nightly run, and the repeatability of two runs per topic against SPEC's bar."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from . import gate
from .finite import number

EXIT_NO_CHANGE = 0
EXIT_WITHIN_TOLERANCE = 1
EXIT_REGRESSION = 2
EXIT_BROKEN = 3
EXIT_MEASURED_NOTHING = 4  # no hardware test ran (no GPU, CuPy broken, another arch): not green
EXIT_TEXT = {EXIT_NO_CHANGE: "no change", EXIT_WITHIN_TOLERANCE: "changes within tolerance",
             EXIT_REGRESSION: "regressions", EXIT_BROKEN: "the run broke",
             EXIT_MEASURED_NOTHING: "measured nothing"}

NOISE_REL = 0.01           # a value moved when it differs by more than 1% ...
NOISE_ABS = {"cycles": 0.5, "cycles/op": 0.5, "ratio": 0.005}   # ... and more than this
GOOD = ("pass", "measured")


@dataclass
class Change:
    """One difference between tonight and the reference (previous run / expectations /
    snapshots)."""
    kind: str            # value | status | new | missing | expectation | invalid | sass | test | mapping
    severity: str        # regression | change | note
    key: str
    arch: str = ""
    old: object = None
    new: object = None
    unit: str = ""
    tolerance: str = ""  # the expectation as written (value, tolerance, source)
    status_old: str = ""
    status_new: str = ""
    detail: str = ""


# --- comparing two runs -----------------------------------------------------------------

def _index(results: list[dict]) -> dict[tuple[str, str], dict]:
    out: dict[tuple[str, str], dict] = {}
    for r in results:
        k = (r.get("arch", ""), r.get("key", ""))
        n = 1
        while k in out:           # the same key recorded twice: keep both apart
            n += 1
            k = (r.get("arch", ""), f"{r.get('key', '')}#{n}")
        out[k] = r
    return out


def measured_clock(snapshot: dict) -> str:
    """A clock snapshot's measured SM clock ("1980.0 MHz"), or "invalid" and why: the clock
    probe failed its check (core.smclock), so there is no number."""
    err, mhz = snapshot.get("sm_clock_error"), snapshot.get("sm_clock_measured_mhz", "-")
    return f"invalid ({err.splitlines()[0]})" if err else f"{mhz} MHz"


def moved(old: dict, new: dict, noise_rel: float = NOISE_REL) -> bool:
    """Did a numeric value move beyond its noise: more than max(noise_rel x old, the unit's
    absolute noise, either run's own spread)?"""
    a, b = number(old.get("value")), number(new.get("value"))
    if a is None or b is None:
        return (a is None) != (b is None)
    limit = max(noise_rel * abs(a), NOISE_ABS.get(new.get("unit", ""), 0.0),
                number(old.get("spread")) or 0.0, number(new.get("spread")) or 0.0)
    return abs(b - a) > limit


def gate_move(r: dict, past: list[float], noise_rel: float = NOISE_REL,
              previous: dict | None = None) -> gate.Move | None:
    """Tonight's result against the board's own recent values (oldest first) under the
    noise model its expectation carries (`noise`: within-board sigma, exact, grid); a figure
    without one is judged by the fallback rule (noise_rel, half a cycle, either run's own
    spread). An unstable result is judged all the same, its spread added to the limit."""
    v = number(r.get("value"))
    if v is None:
        return None
    model = r.get("noise") if isinstance(r.get("noise"), dict) else {}
    spread = number(r.get("spread")) or 0.0
    if model:
        # an unstable figure is judged with its spread added; an exact one's spread is its
        # reading's resolution (a bisection's bracket: the capacities), either run's
        widen = spread if r.get("status") == "unstable" else \
            max(spread, number((previous or {}).get("spread")) or 0.0) if model.get("exact") \
            else 0.0
        return gate.change(v, past, sigma_run=number(model.get("run")), unit=r.get("unit", ""),
                           exact=bool(model.get("exact")), spread=widen, key=r.get("key", ""),
                           grid=bool(model.get("grid")))
    prev_spread = number((previous or {}).get("spread")) or 0.0
    return gate.change(v, past, sigma_run=None, unit=r.get("unit", ""), exact=False,
                       spread=max(spread, prev_spread), key=r.get("key", ""),
                       fallback_rel=noise_rel)


def history_values(history: list[list[dict]], arch: str, key: str) -> list[float]:
    """A figure's stable values in the board's earlier runs (oldest first)."""
    out = []
    for results in history:
        for r in results:
            if r.get("arch", "") == arch and r.get("key") == key:
                v = number(r.get("value"))
                if v is not None and r.get("status") in GOOD + ("fail",):
                    out.append(v)
                break
    return out


def board(r: dict) -> str:
    """The UUID of the GPU that measured a result ('' when the result does not say)."""
    prov = r.get("provenance")
    return str(prov.get("uuid") or "") if isinstance(prov, dict) else ""


def other_board(old: dict, new: dict) -> tuple[str, str] | None:
    """(old board, new board) when both results name their GPU and the GPUs differ."""
    a, b = board(old), board(new)
    return (a, b) if a and b and a != b else None


def compare(current: list[dict], previous: list[dict] | None, *,
            noise_rel: float = NOISE_REL, skipped: dict[str, str] | None = None,
            previous_skipped: dict[str, str] | None = None,
            other_board_run: str = "", history: list[list[dict]] | None = None
            ) -> list[Change]:
    """Classify every characteristic of tonight's run against the expectations (its own
    status) and against the previous run (values, statuses, presence). `skipped`: tonight's
    skipped tests and their reasons (junit_skips); `previous_skipped`: the previous run's tests
    skipped for what their own measurement saw (its report's meta "measured_skips"), whose
    figures measured tonight are notes, as tonight's such skips are for the missing ones.

    Two questions are answered apart. *Conformance* is each result's own status against the
    model's expectation: a figure out of tolerance is a regression on any night, the first
    one included. *Change* is asked only of the same board: against a run of another board
    (`other_board_run` names it, or the results' provenance names two UUIDs) every
    difference - a value, a status, a figure one run has and the other not - is a note,
    never a change: boards of one model differ by what the fleet ranges allow, and the move
    says nothing about a driver or compiler. A figure new to the suite (absent from the
    previous run of the same board) is a note too. `history`: the board's earlier runs
    (oldest first, `previous` last; default `previous` alone), the change question's
    reference (results/gate.py)."""
    changes: list[Change] = []
    cur = _index(current)
    prev = _index(previous) if previous is not None else None
    past = history if history is not None else ([previous] if previous is not None else [])
    for (arch, key), r in cur.items():
        p = prev.get((arch, key)) if prev is not None else None
        base = dict(key=key, arch=arch, new=r.get("value"), unit=r.get("unit", ""),
                    tolerance=" ".join(x for x in (r.get("expected", ""),
                                                   f"[{r['source']}]" if r.get("source") else "")
                                       if x),
                    status_new=r.get("status", ""), old=p.get("value") if p else None,
                    status_old=p.get("status", "") if p else "")
        other = other_board_run or (" -> ".join(b[:12] for b in other_board(p, r))
                                    if p is not None and other_board(p, r) else "")
        if other:
            c = _against_other_board(r, p, base, other, noise_rel)
        else:
            c = _against_same_board(r, p, base, prev is not None, noise_rel,
                                    previous_skipped or {},
                                    history_values(past, arch, key.split("#")[0]))
        if c is not None:
            changes.append(c)
    if prev is not None:
        changes += _missing(cur, prev, skipped or {}, other_board_run)
    return changes


def _conformance(r: dict, base: dict) -> Change | None:
    """Is this board within its model's range: a figure out of tolerance (or in error) is a
    regression on any night."""
    if r.get("status") in ("fail", "error"):
        return Change("expectation", "regression", detail=(r.get("detail") or "")[:300],
                      **base)
    return None


def _against_other_board(r: dict, p: dict | None, base: dict, other: str,
                         noise_rel: float) -> Change | None:
    """Tonight's figure beside another board's run: conformance, and notes for the rest."""
    st = r.get("status", "")
    c = _conformance(r, base)
    if c is not None:
        return c
    if p is None:
        return Change("new", "note", detail=f"not in the run of the other board ({other}): "
                                            f"nothing of this board's own to compare with",
                      **base) if st in GOOD else None
    pst = p.get("status", "")
    if st != pst:
        return Change("status", "note", detail=f"{pst} on the other board, {st} on this one "
                                               f"({other})", **base)
    if st in GOOD and moved(p, r, noise_rel):
        return Change("board", "note", detail=(
            f"another board ({other}): boards of one model differ; this board's own "
            f"history decides whether it moved"), **base)
    return None


def _against_same_board(r: dict, p: dict | None, base: dict, have_prev: bool,
                        noise_rel: float, previous_skipped: dict[str, str],
                        past: list[float]) -> Change | None:
    """Tonight's figure against the same board's own earlier runs (or none: the first
    night): conformance, then change under the figure's noise model (results/gate.py)."""
    st = r.get("status", "")
    if st in ("fail", "error"):
        if p is not None and p.get("status") == st and not _moved(r, past, noise_rel, p):
            # failed last night too, with the same value: no change of the board, but it is
            # still outside its model's range - conformance fails on every such night
            return Change("expectation", "regression", detail=(
                "still out of tolerance, as in the previous run (the board has not moved): "
                + (r.get("detail") or ""))[:300], **base)
        return _conformance(r, base)
    if st == "invalid":
        if p is not None and p.get("status") != "invalid":
            return Change("invalid", "regression", detail=(r.get("detail") or "")[:300], **base)
        return None
    if not have_prev:
        return None
    if p is None:
        why = previous_skipped.get(r.get("test") or "", "")
        detail = f"not measured in the previous run: {why}" if measured_skip(why) else \
            "new to the suite since this board's previous run"
        return Change("new", "note", detail=detail[:300], **base)
    pst = p.get("status", "")
    if st == "info" or pst == "info":
        if gate.info_identity(r) != gate.info_identity(p):
            return Change("mapping", "change", detail=f"{p.get('detail')} -> "
                                                      f"{r.get('detail')}", **base)
        return None
    if pst in ("fail", "error", "invalid") and st in GOOD:
        return Change("status", "change", detail=f"{pst} -> {st}", **base)
    mv = gate_move(r, past, noise_rel, p)
    if mv is None:
        if "unstable" in (st, pst) and st != pst:
            return Change("status", "note", detail=(
                "unstable in the previous run: no stable value of this board to compare with "
                f"({(r.get('detail') or p.get('detail') or '')[:160]})"), **base)
        return None
    if not mv.moved:
        return None
    return Change("value", "change", detail=(
        f"{mv.reference:g} -> {r.get('value'):g} ({mv.delta:+.4g} {r.get('unit', '')}) "
        f"beyond {mv.limit:.3g}: {mv.basis}"
        + (" (unstable tonight: judged with its spread)" if st == "unstable" else ""))[:300],
        **base)


def _moved(r: dict, past: list[float], noise_rel: float, p: dict) -> bool:
    mv = gate_move(r, past, noise_rel, p)
    return bool(mv and mv.moved)


# a hardware test skipped for what its own measurement saw (e.g. no SM seeing a far L2 level)
# says why its figure is absent; skips for the machine (no GPU, another arch) do not
_MACHINE_SKIPS = ("hardware: no GPU", "hardware: GPU is ", "hardware: GPUCHAR_NO_GPU",
                  "hardware: GPU wedged")


def measured_skip(reason: str) -> bool:
    return reason.startswith("hardware: ") and not reason.startswith(_MACHINE_SKIPS)


def _missing(cur: dict, prev: dict, skipped: dict[str, str],
             other_board_run: str = "") -> list[Change]:
    """Characteristics measured in the previous run and absent tonight: regressions, except
    those of a test whose probe is declared unmeasurable tonight or that skipped for what its
    measurement saw tonight (notes, with the reason), and every one when the previous run was
    another board's (a note: nothing says this board ever measured it)."""
    declared = {r.get("test") for (_, k), r in cur.items() if k.startswith("unmeasurable.")}
    out = []
    for (arch, key), p in prev.items():
        if (arch, key) in cur or p.get("status") not in GOOD + ("unstable",):
            continue
        reason = skipped.get(p.get("test") or "", "")
        if other_board_run:
            out.append(Change("missing", "note", key=key, arch=arch, old=p.get("value"),
                              unit=p.get("unit", ""), status_old=p.get("status", ""),
                              detail=f"measured on the other board ({other_board_run}), not "
                                     f"tonight" + (f": {reason}" if reason else "")))
        elif p.get("test") in declared:
            out.append(Change("missing", "note", key=key, arch=arch, old=p.get("value"),
                              unit=p.get("unit", ""), status_old=p.get("status", ""),
                              detail="declared unmeasurable tonight (expectation file)"))
        elif measured_skip(reason):
            out.append(Change("missing", "note", key=key, arch=arch, old=p.get("value"),
                              unit=p.get("unit", ""), status_old=p.get("status", ""),
                              detail=f"not measured tonight: {reason}"[:300]))
        else:
            out.append(Change("missing", "regression", key=key, arch=arch,
                              old=p.get("value"), unit=p.get("unit", ""),
                              status_old=p.get("status", ""), detail=(
                                  "measured in the previous run, absent tonight "
                                  "(skipped or not run)")))
    return out


XDIST_GROUP = re.compile(r"@[^@\[\]/:]+$")    # pytest-xdist loadgroup's "@group" suffix


def _pytest_nodeid(classname: str, name: str) -> str:
    """pytest's node id of a junit test case: classname "tests.characterisation.test_x" (a
    class, if any, last and capitalised) -> "tests/characterisation/test_x.py::name" (without
    the @group suffix a split run's test names carry)."""
    parts = classname.split(".")
    cls = [parts.pop()] if len(parts) > 1 and parts[-1][:1].isupper() else []
    return "::".join(["/".join(parts) + ".py", *cls, XDIST_GROUP.sub("", name)])


def junit_skips(path: Path) -> dict[str, str]:
    """Skipped test cases of a junit XML: pytest node id -> the skip reason."""
    out = {}
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return out
    for tc in root.iter("testcase"):
        for el in tc.findall("skipped"):
            nodeid = _pytest_nodeid(tc.get("classname", ""), tc.get("name", ""))
            out[nodeid] = el.get("message", "") or el.text or ""
    return out


def junit_failures(path: Path) -> list[dict]:
    """Failed/errored test cases of a junit XML: id, message, text."""
    out = []
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return out
    for tc in root.iter("testcase"):
        for tag in ("failure", "error"):
            for el in tc.findall(tag):
                name = XDIST_GROUP.sub("", tc.get("name", ""))
                nodeid = f"{tc.get('classname', '')}::{name}"
                out.append({"test": nodeid, "kind": tag, "message": el.get("message", ""),
                            "text": el.text or ""})
    return out


_SNAPSHOT_FAILURE = re.compile(r"\[- snapshot\]|[Ss]napshot .{0,200}does not exist")


def is_snapshot_failure(f: dict) -> bool:
    """syrupy's own assertion (received != snapshot, or no snapshot yet), not any failure of
    a test that happens to take a snapshot fixture."""
    return bool(_SNAPSHOT_FAILURE.search(f"{f['message']}\n{f['text']}"))


def sass_diff(f: dict, limit: int = 120) -> str:
    """The diff syrupy printed for a failed snapshot assertion (E-lines, lines with - / +)."""
    lines = [ln[2:] if ln.startswith("E ") else ln for ln in f["text"].splitlines()
             if ln.startswith("E ")]
    if not lines:
        lines = f["message"].splitlines()
    return "\n".join(lines[:limit]) + (f"\n... {len(lines) - limit} more lines"
                                       if len(lines) > limit else "")


def _test_name(test: str) -> str:
    """The test's function and parameters (junit and pytest spell the module differently)."""
    return test.split("::")[-1]


def failure_change(f: dict) -> Change:
    """A failed test as a change: a snapshot failure (the SASS changed, with its diff) or
    another failed test (its message)."""
    if is_snapshot_failure(f):
        return Change("sass", "regression", key=f["test"], detail=sass_diff(f))
    return Change("test", "regression", key=f["test"], detail=(f["message"] or f["text"])[:400])


def failure_changes(failures: list[dict], results: list[dict],
                    previous_changes: list[dict] | None = None,
                    previous_failures: list[dict] | None = None) -> list[Change]:
    """Snapshot failures (the SASS changed) and failed tests that recorded no failing result.
    One that the previous run reported identically (same test, same diff or message: from a
    nightly.json's changes or a gpuchar-results.json's meta.failures) is a known failure: a
    note, not a regression."""
    failing_tests = {r.get("test") for r in results if r.get("status") in ("fail", "error")}
    known = {(c.get("kind"), _test_name(c.get("key", "")), c.get("detail"))
             for c in previous_changes or []}
    known |= {(c.kind, _test_name(c.key), c.detail)
              for c in map(failure_change, previous_failures or [])}
    out = []
    for f in failures:
        if any(t and (f["test"].endswith(t.split("::")[-1]) or t == f["test"])
               for t in failing_tests) and not is_snapshot_failure(f):
            continue
        c = failure_change(f)
        if (c.kind, _test_name(c.key), c.detail) in known:
            c.severity = "note"
        out.append(c)
    return out


def other_process(p: dict) -> Change:
    """Another program computing on the measured GPU during the night (NVML's process list):
    every figure timed meanwhile may be disturbed, so the night is not "no change"."""
    mem = p.get("memory_mib")
    return Change("environment", "change", key=f"process {p['pid']}", new=p.get("name"),
                  detail=(f"another process computed on the GPU during the night: pid "
                          f"{p['pid']} ({p.get('name') or '?'}, "
                          f"{mem if mem is not None else '?'} MiB), seen {p.get('first_seen')} "
                          f"to {p.get('last_seen')}; the figures timed meanwhile may be "
                          f"disturbed"))


def verdict(changes: list[Change], pytest_exit: int | None, have_results: bool) -> int:
    if pytest_exit not in (0, 1) or not have_results:
        return EXIT_BROKEN
    if any(c.severity == "regression" for c in changes):
        return EXIT_REGRESSION
    if any(c.severity == "change" for c in changes):
        return EXIT_WITHIN_TOLERANCE
    return EXIT_NO_CHANGE


# --- repeatability of two runs (SPEC: integer cycles identical, other figures within 1%) ------

STABLE = ("pass", "fail", "measured")


def _values(results: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["arch"], r["key"]): r for r in results if r.get("value") is not None}


CYCLES_EXACT_BELOW = 100     # cycle figures below this are compared in integer cycles
# A model's error (|predicted - measured| / measured) is a share of the measured cycles: two runs
# agree "within 1%" when it moved by at most one percentage point. Relative to itself an error
# of 0.006 would have to repeat to 0.00006, which no cycle count repeats to (docs/models.md).
ERROR_ABS = 0.01


def _is_error(r: dict) -> bool:
    return r["key"].endswith(".error") and r.get("unit") == "ratio"


def repeatability(first: list[dict], second: list[dict]) -> dict:
    """Per topic (the first part of each key): cycle figures (unit cycles or cycles/op) under
    CYCLES_EXACT_BELOW cycles with identical integer cycles, every other figure (longer
    latencies, whole-kernel cycles, throughput, ratios) within 1%, a model's error within one
    percentage point (ERROR_ABS) (issue 13's bars:
    98% and 97%), and the characteristics unstable in either run (counted apart: they
    already say they are not repeatable); the worst differences and the status changes."""
    a, b = _values(first), _values(second)
    common = sorted(set(a) & set(b))
    topics: dict = defaultdict(lambda: {"cycles": 0, "cycles_same": 0, "other": 0,
                                        "other_1pc": 0, "unstable": 0, "differs": []})
    for k in common:
        ra, rb = a[k], b[k]
        t = topics[k[1].split(".")[0]]
        if ra["status"] not in STABLE or rb["status"] not in STABLE:
            t["unstable"] += 1
            continue
        va, vb = float(ra["value"]), float(rb["value"])
        if str(ra.get("unit", "")).startswith("cycles") and \
                max(abs(va), abs(vb)) < CYCLES_EXACT_BELOW:
            t["cycles"] += 1
            if round(va) == round(vb):
                t["cycles_same"] += 1
            else:
                t["differs"].append((abs(va - vb), f"{k[1]}: {va:.2f} vs {vb:.2f} {ra['unit']}"))
        elif _is_error(ra):
            t["other"] += 1
            points = abs(va - vb)
            if points <= ERROR_ABS:
                t["other_1pc"] += 1
            else:
                t["differs"].append((points * 100, f"{k[1]}: {va:.4g} vs {vb:.4g} (moved "
                                                   f"{points * 100:.1f} points)"))
        else:
            t["other"] += 1
            rel = abs(va - vb) / max(abs(va), abs(vb), 1e-300)
            if rel <= 0.01:
                t["other_1pc"] += 1
            else:
                t["differs"].append((rel * 100, f"{k[1]}: {va:.4g} vs {vb:.4g} "
                                                f"{ra.get('unit', '')} ({rel:.1%})"))
    status_changes = [f"{k[1]}: {a[k]['status']} -> {b[k]['status']}" for k in common
                      if a[k]["status"] != b[k]["status"]]
    return {"common": len(common), "topics": dict(topics), "status_changes": status_changes}


def _share(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.1f}%)" if d else "0/0"


def repeatability_lines(rep: dict) -> list[str]:
    """The repeatability as text: one line per topic, the total, what differs."""
    lines = [f"characteristics in both runs: {rep['common']}"]
    tot = defaultdict(int)
    for name in sorted(rep["topics"]):
        t = rep["topics"][name]
        for k in ("cycles", "cycles_same", "other", "other_1pc", "unstable"):
            tot[k] += t[k]
        parts = []
        if t["cycles"]:
            parts.append(f"identical integer cycles {_share(t['cycles_same'], t['cycles'])}")
        if t["other"]:
            parts.append(f"other figures within 1% {_share(t['other_1pc'], t['other'])}")
        parts.append(f"unstable in a run: {t['unstable']}")
        lines.append(f"{name}: " + "; ".join(parts))
    if tot["cycles"]:
        lines.append(f"ALL: identical integer cycles {_share(tot['cycles_same'], tot['cycles'])}"
                     f"; other figures within 1% {_share(tot['other_1pc'], tot['other'])}; "
                     f"unstable in a run: {tot['unstable']}")
    for name in sorted(rep["topics"]):
        for _, line in sorted(rep["topics"][name]["differs"], reverse=True):
            lines.append(f"  differs: {line}")
    lines.append(f"status changes between runs: {len(rep['status_changes'])}")
    lines += [f"  {s}" for s in rep["status_changes"]]
    return lines
