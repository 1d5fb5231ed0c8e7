"""The nightly driver-upgrade check: ``gpuchar-nightly``.

One command runs the whole suite with the driver's JIT cache disabled (CUDA_CACHE_DISABLE=1,
so every probe is JIT-compiled by the installed driver tonight, not loaded from a cache an
older driver wrote), records device, driver, toolkit and the SM clock before and after the run
(throttling flagged), compares the run against the SASS snapshots, the expectation files and
the previous run's results, and writes

  <out>/nightly.json   machine-readable: environment, clocks, every change with its class
  <out>/nightly.md     for people: what changed (characteristic, old value, new value,
                       tolerance), the SASS diffs of snapshot failures, what was skipped
  <out>/report/        the run's own gpuchar-results.json / gpuchar-summary.md / artifacts
  <out>/pytest.log, <out>/junit.xml

Exit status:
  0  no change: everything passed, nothing moved beyond its noise against the previous run
  1  changes within tolerance: values moved (or appeared/disappeared as notes, or the SASS
     mappings noted against the papers changed) but every expectation and snapshot holds
  2  regressions: a characteristic out of tolerance, a SASS snapshot differs (the driver's
     JIT now emits other code), a probe became invalid, a measured characteristic vanished,
     or another test failed - each new since the previous run (a failure the previous run
     reported the same way is listed as a known failure, a note; without a previous run
     every failure is a regression)
  3  the run itself broke: pytest could not run the suite (usage error, internal error, no
     tests collected) or wrote no results

Usage: gpuchar-nightly [--out DIR] [--previous PREV.json] [--history DIR] [TESTS...]
                       [-- extra pytest args]
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

EXIT_NO_CHANGE = 0
EXIT_WITHIN_TOLERANCE = 1
EXIT_REGRESSION = 2
EXIT_BROKEN = 3
EXIT_TEXT = {EXIT_NO_CHANGE: "no change", EXIT_WITHIN_TOLERANCE: "changes within tolerance",
             EXIT_REGRESSION: "regressions", EXIT_BROKEN: "the run broke"}

THROTTLE_FRACTION = 0.90   # measured SM clock below this share of the max clock: throttled
CLOCK_DRIFT = 0.05         # start vs end measured clock differ by more than this: flagged
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


def _num(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(float(v)) else None


def moved(old: dict, new: dict, noise_rel: float = NOISE_REL) -> bool:
    """Did a numeric value move beyond its noise: more than max(noise_rel x old, the unit's
    absolute noise, either run's own spread)?"""
    a, b = _num(old.get("value")), _num(new.get("value"))
    if a is None or b is None:
        return (a is None) != (b is None)
    limit = max(noise_rel * abs(a), NOISE_ABS.get(new.get("unit", ""), 0.0),
                _num(old.get("spread")) or 0.0, _num(new.get("spread")) or 0.0)
    return abs(b - a) > limit


def compare(current: list[dict], previous: list[dict] | None, *,
            noise_rel: float = NOISE_REL) -> list[Change]:
    """Classify every characteristic of tonight's run against the expectations (its own
    status) and against the previous run (values, statuses, presence)."""
    changes: list[Change] = []
    cur = _index(current)
    prev = _index(previous) if previous is not None else None
    for (arch, key), r in cur.items():
        st = r.get("status", "")
        p = prev.get((arch, key)) if prev is not None else None
        base = dict(key=key, arch=arch, new=r.get("value"), unit=r.get("unit", ""),
                    tolerance=" ".join(x for x in (r.get("expected", ""),
                                                   f"[{r['source']}]" if r.get("source") else "")
                                       if x),
                    status_new=st, old=p.get("value") if p else None,
                    status_old=p.get("status", "") if p else "")
        if st in ("fail", "error"):
            if p is not None and p.get("status") == st and not moved(p, r, noise_rel):
                # failed last night too, with the same value: known, not a change
                changes.append(Change("expectation", "note", detail=(
                    "still out of tolerance, as in the previous run: "
                    + (r.get("detail") or ""))[:300], **base))
            else:
                changes.append(Change("expectation", "regression",
                                      detail=(r.get("detail") or "")[:300], **base))
            continue
        if st == "invalid":
            if p is not None and p.get("status") != "invalid":
                changes.append(Change("invalid", "regression",
                                      detail=(r.get("detail") or "")[:300], **base))
            continue
        if prev is None:
            continue
        if p is None:
            changes.append(Change("new", "change", detail="not in the previous run", **base))
            continue
        pst = p.get("status", "")
        if "unstable" in (st, pst):
            if st != pst:
                changes.append(Change("status", "note", detail=(
                    "unstable in one run: spread too wide to compare "
                    f"({(r.get('detail') or p.get('detail') or '')[:160]})"), **base))
            continue
        if st == "info" or pst == "info":
            if (r.get("detail"), r.get("expected")) != (p.get("detail"), p.get("expected")):
                changes.append(Change("mapping", "change", detail=f"{p.get('detail')} -> "
                                                                  f"{r.get('detail')}", **base))
            continue
        if pst in ("fail", "error", "invalid") and st in GOOD:
            changes.append(Change("status", "change", detail=f"{pst} -> {st}", **base))
            continue
        if moved(p, r, noise_rel):
            changes.append(Change("value", "change", **base))
    if prev is not None:
        for (arch, key), p in prev.items():
            if (arch, key) not in cur and p.get("status") in GOOD + ("unstable",):
                changes.append(Change("missing", "regression", key=key, arch=arch,
                                      old=p.get("value"), unit=p.get("unit", ""),
                                      status_old=p.get("status", ""), detail=(
                                          "measured in the previous run, absent tonight "
                                          "(skipped or not run)")))
    return changes


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
                nodeid = f"{tc.get('classname', '')}::{tc.get('name', '')}"
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


def failure_changes(failures: list[dict], results: list[dict],
                    previous_changes: list[dict] | None = None) -> list[Change]:
    """Snapshot failures (the SASS changed) and failed tests that recorded no failing result.
    One that the previous run reported identically (same test, same diff or message) is a
    known failure: a note, not a regression."""
    failing_tests = {r.get("test") for r in results if r.get("status") in ("fail", "error")}
    known = {(c.get("kind"), c.get("key"), c.get("detail")) for c in previous_changes or []}
    out = []
    for f in failures:
        if is_snapshot_failure(f):
            c = Change("sass", "regression", key=f["test"], detail=sass_diff(f))
        elif not any(t and (f["test"].endswith(t.split("::")[-1]) or t == f["test"])
                     for t in failing_tests):
            c = Change("test", "regression", key=f["test"],
                       detail=(f["message"] or f["text"])[:400])
        else:
            continue
        if (c.kind, c.key, c.detail) in known:
            c.severity = "note"
        out.append(c)
    return out


def verdict(changes: list[Change], pytest_exit: int | None, have_results: bool) -> int:
    if pytest_exit not in (0, 1) or not have_results:
        return EXIT_BROKEN
    if any(c.severity == "regression" for c in changes):
        return EXIT_REGRESSION
    if any(c.severity == "change" for c in changes):
        return EXIT_WITHIN_TOLERANCE
    return EXIT_NO_CHANGE


# --- clocks and environment ---------------------------------------------------------------

CLOCK_PROBE = r"""
import json, sys
out = {}
try:
    from pytest_gpuchar import device, measure
    d = device.detect()
    if d:
        out = {"device": d.name, "arch": d.arch, "driver": d.driver,
               "cuda_driver_api": d.cuda_driver_api, "cuda_runtime": d.cuda_runtime,
               "sm_count": d.sm_count, "sm_clock_max_mhz": d.sm_clock_max_mhz,
               "sm_clock_smi_mhz": d.sm_clock_now_mhz,
               "sm_clock_measured_mhz": round(measure.sm_clock_mhz(d), 1)}
    else:
        out = {"no_gpu": d.reason}
except Exception as e:
    out = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(out))
"""

SMI_FIELDS = ("clocks.sm,clocks.max.sm,clocks_throttle_reasons.active,temperature.gpu,"
              "power.draw")


def smi() -> dict:
    try:
        txt = subprocess.run(["nvidia-smi", f"--query-gpu={SMI_FIELDS}",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=20).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return {}
    if not txt:
        return {}
    vals = [v.strip() for v in txt[0].split(",")]
    return dict(zip(("sm_mhz", "max_sm_mhz", "throttle_reasons", "temperature_c", "power_w"),
                    vals))


def clock_snapshot(env: dict) -> dict:
    """Device, driver and the measured SM clock (a short busy loop) in a fresh process."""
    try:
        p = subprocess.run([sys.executable, "-c", CLOCK_PROBE], capture_output=True, text=True,
                           timeout=120, env=env)
        info = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {
            "error": p.stderr.strip()[-300:]}
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as e:
        info = {"error": f"{type(e).__name__}: {e}"}
    info["nvidia_smi"] = smi()
    info["time"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return info


def throttling(before: dict, after: dict) -> list[str]:
    """Reasons to distrust tonight's clock: measured below THROTTLE_FRACTION of the max, or
    start and end differing by more than CLOCK_DRIFT, or nvidia-smi naming a throttle reason."""
    flags = []
    for when, c in (("start", before), ("end", after)):
        mhz, top = _num(c.get("sm_clock_measured_mhz")), _num(c.get("sm_clock_max_mhz"))
        if mhz and top and mhz < THROTTLE_FRACTION * top:
            flags.append(f"SM clock at the {when} {mhz:.0f} MHz < {THROTTLE_FRACTION:.0%} of "
                         f"max {top:.0f} MHz")
        reasons = c.get("nvidia_smi", {}).get("throttle_reasons", "")
        # 0x0 none, 0x1 GPU idle (normal between launches)
        if reasons and reasons not in ("0x0000000000000000", "0x0000000000000001", "[N/A]"):
            flags.append(f"nvidia-smi throttle reasons at the {when}: {reasons}")
    a, b = _num(before.get("sm_clock_measured_mhz")), _num(after.get("sm_clock_measured_mhz"))
    if a and b and abs(b - a) > CLOCK_DRIFT * a:
        flags.append(f"SM clock changed during the run: {a:.0f} -> {b:.0f} MHz")
    return flags


def toolkit() -> dict:
    from . import toolchain
    out = {}
    for name in ("ptxas", "nvdisasm"):
        out[name] = [f"{t.version} ({t.origin})" for t in toolchain.all_tools(name)]
    return out


# --- the report -----------------------------------------------------------------------------

def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.6g}"
    return str(v)


def markdown(doc: dict) -> str:
    env, ch = doc["environment"], [Change(**c) for c in doc["changes"]]
    out = [f"# gpuchar nightly: {EXIT_TEXT[doc['exit']]} (exit {doc['exit']})", ""]
    dev = env.get("before", {})
    out += [f"- **date**: {doc['date']}", f"- **device**: {dev.get('device', dev.get('no_gpu', '?'))}"
            f" ({dev.get('arch', '-')}, {dev.get('sm_count', '-')} SMs)",
            f"- **driver**: {dev.get('driver', '-')} (CUDA driver API "
            f"{dev.get('cuda_driver_api', '-')}, runtime {dev.get('cuda_runtime', '-')})",
            f"- **toolkit**: ptxas {', '.join(env['toolkit'].get('ptxas', [])) or 'none'}",
            f"- **SM clock** (measured): start {dev.get('sm_clock_measured_mhz', '-')} MHz, "
            f"end {env.get('after', {}).get('sm_clock_measured_mhz', '-')} MHz, "
            f"max {dev.get('sm_clock_max_mhz', '-')} MHz",
            f"- **JIT cache**: CUDA_CACHE_DISABLE={env.get('CUDA_CACHE_DISABLE')}",
            f"- **suite**: `{' '.join(doc['pytest_command'])}` -> pytest exit "
            f"{doc['pytest_exit']}, {doc['wall_s']} s",
            f"- **compared with**: {doc.get('previous') or 'no previous run (expectations and snapshots only)'}",
            ""]
    if env.get("throttling"):
        out += ["**Throttling flagged** (timings tonight may be off):", ""]
        out += [f"- {f}" for f in env["throttling"]] + [""]
    counts = doc.get("status_counts", {})
    out += ["Status counts: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"), ""]
    groups = [("Regressions", "regression"), ("Changes within tolerance", "change"),
              ("Notes", "note")]
    for title, sev in groups:
        rows = [c for c in ch if c.severity == sev and c.kind not in ("sass", "test")]
        if rows:
            out += [f"## {title}", "",
                    "| arch | characteristic | kind | old | new | unit | tolerance | status | detail |",
                    "|---|---|---|---|---|---|---|---|---|"]
            for c in rows:
                st = f"{c.status_old or '-'} -> {c.status_new or '-'}"
                det = c.detail.replace("|", "/").replace("\n", " ")[:200]
                out.append(f"| {c.arch} | {c.key} | {c.kind} | {_fmt(c.old)} | {_fmt(c.new)} | "
                           f"{c.unit} | {c.tolerance.replace('|', '/')} | {st} | {det} |")
            out.append("")
    sass_rows = [c for c in ch if c.kind == "sass"]
    if sass_rows:
        out += ["## SASS changed (snapshot failures)", "",
                "The driver's JIT (or ptxas) now emits other code for these probes. Review the "
                "diff; accept with `--snapshot-update` (docs/nightly.md).", ""]
        for c in sass_rows:
            out += [f"### {c.key}", "", "```diff", c.detail, "```", ""]
    other = [c for c in ch if c.kind == "test"]
    if other:
        out += ["## Other failed tests", ""] + [f"- `{c.key}`: {c.detail[:300]}" for c in other]
        out.append("")
    skipped = doc.get("skipped", {})
    if skipped:
        out += ["## Skipped", ""] + [f"- {n} x {reason}" for reason, n in
                                     sorted(skipped.items(), key=lambda x: -x[1])[:20]] + [""]
    if not ch:
        out += ["Nothing changed: every characteristic within its noise of the previous run, "
                "every expectation and snapshot holds.", ""]
    out += ["Accepting a reviewed change: see docs/nightly.md (review, `pytest --snapshot-update`, "
            "`gpuchar-expectations update --results <this run>/report/gpuchar-results.json "
            "--arch <arch>`).", ""]
    return "\n".join(out)


def _write(path: Path, text: str) -> None:
    from .expectations import atomic_write
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)


def run(args) -> int:
    if args.previous and not Path(args.previous).exists():
        print(f"gpuchar-nightly: --previous {args.previous}: no such file", file=sys.stderr)
        return EXIT_BROKEN
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    report_dir = out / "report"
    if report_dir.exists():
        shutil.rmtree(report_dir)
    env = dict(os.environ)
    env["CUDA_CACHE_DISABLE"] = "1"
    started = time.time()
    before = clock_snapshot(env)
    cmd = [sys.executable, "-m", "pytest", *(args.tests or ["tests/characterisation"]),
           "-p", "no:cacheprovider", "-q", "-rfEs", "--gpuchar-report", str(report_dir),
           "--junitxml", str(out / "junit.xml"), *args.pytest_args]
    with open(out / "pytest.log", "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    after = clock_snapshot(env)
    wall = round(time.time() - started, 1)
    results_path = report_dir / "gpuchar-results.json"
    current = {}
    if results_path.exists():
        try:
            current = json.loads(results_path.read_text())
        except json.JSONDecodeError:
            current = {}
    results = current.get("results", [])
    prev_path = Path(args.previous) if args.previous else (
        Path(args.history) / "latest.json" if args.history else None)
    previous = None
    previous_changes: list[dict] = []
    if prev_path is not None and prev_path.exists():
        prev_doc = json.loads(prev_path.read_text())
        # a nightly.json carries the run's results; a plain gpuchar-results.json too
        previous = prev_doc.get("results") if "results" in prev_doc else None
        previous_changes = prev_doc.get("changes", [])
    changes = compare(results, previous, noise_rel=args.noise_rel)
    changes += failure_changes(junit_failures(out / "junit.xml"), results, previous_changes)
    code = verdict(changes, proc.returncode, bool(current))
    counts: dict[str, int] = {}
    for r in results:
        counts[r.get("status", "")] = counts.get(r.get("status", ""), 0) + 1
    doc = {
        "schema": 1,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "exit": code, "verdict": EXIT_TEXT[code],
        "pytest_exit": proc.returncode, "pytest_command": cmd[1:], "wall_s": wall,
        "previous": str(prev_path) if previous is not None else None,
        "environment": {"before": before, "after": after, "toolkit": toolkit(),
                        "CUDA_CACHE_DISABLE": env["CUDA_CACHE_DISABLE"],
                        "throttling": throttling(before, after)},
        "status_counts": counts,
        "skipped": current.get("meta", {}).get("skipped", {}),
        "changes": [asdict(c) for c in changes],
        "meta": current.get("meta", {}),
        "results": results,
    }
    _write(out / "nightly.json", json.dumps(doc, indent=1, default=str))
    _write(out / "nightly.md", markdown(doc))
    if args.history:
        hist = Path(args.history)
        stamp = doc["date"].replace(":", "").replace("-", "")[:15]
        _write(hist / f"nightly-{stamp}.json", json.dumps(doc, indent=1, default=str))
        _write(hist / "latest.json", json.dumps(doc, indent=1, default=str))
    n = {s: sum(c.severity == s for c in changes) for s in ("regression", "change", "note")}
    print(f"gpuchar-nightly: {EXIT_TEXT[code]} (exit {code}): {n['regression']} regressions, "
          f"{n['change']} changes within tolerance, {n['note']} notes; pytest exit "
          f"{proc.returncode}, {wall} s; report {out / 'nightly.md'}")
    for f in doc["environment"]["throttling"]:
        print(f"gpuchar-nightly: throttling: {f}")
    return code


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, extra = argv[:k], argv[k + 1:]
    ap = argparse.ArgumentParser(
        prog="gpuchar-nightly",
        description="Nightly driver-upgrade check: run the suite with the JIT cache disabled, "
                    "compare with snapshots, expectations and the previous run, write "
                    "nightly.json and nightly.md. Exit: 0 no change, 1 changes within "
                    "tolerance, 2 regressions, 3 the run broke. Extra pytest args after --.")
    ap.add_argument("tests", nargs="*", help="test paths (default tests/characterisation)")
    ap.add_argument("--out", default="gpuchar-nightly", help="output directory")
    ap.add_argument("--previous", help="the previous run's nightly.json (or a "
                                       "gpuchar-results.json) to compare with")
    ap.add_argument("--history", help="directory keeping every run's nightly JSON and "
                                      "latest.json (the default previous run)")
    ap.add_argument("--noise-rel", type=float, default=NOISE_REL,
                    help=f"relative change below which a value has not moved "
                         f"(default {NOISE_REL})")
    args = ap.parse_args(argv)
    args.pytest_args = extra
    return run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
