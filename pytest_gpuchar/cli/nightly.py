"""The nightly driver-upgrade check: ``gpuchar-nightly``.

One command runs the whole suite with the driver's JIT cache disabled (CUDA_CACHE_DISABLE=1,
so every probe is JIT-compiled by the installed driver tonight, not loaded from a cache an
older driver wrote), records device, driver, toolkit and the SM clock before and after the run
(throttling flagged), compares the run against the SASS snapshots, the expectation files and
the previous run's results, and writes

  <out>/nightly.json   machine-readable: environment, clocks, every change with its class
  <out>/nightly.md     for people: what changed (characteristic, old value, new value,
                       tolerance), the SASS diffs of snapshot failures, what was skipped
  <out>/nightly.html   the same document as one self-contained page, the night's run below
  <out>/report/        the run's own gpuchar-results.json / gpuchar-summary.md / index.html /
                       artifacts
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
     tests collected) or wrote no results, or the nightly's own arguments are wrong (an
     unknown option, a --previous that cannot be read: named before the night runs)
  4  measured nothing: no hardware test ran (no GPU, CuPy missing or broken, a GPU of another
     arch), so tonight says nothing about the driver; the reason is the last line printed.
     A deliberately static night passes --static-only (-m static) and exits 0-3 by the
     static checks

Usage: gpuchar-nightly [--out DIR] [--previous PREV.json] [--history TARGET] [--static-only]
                       [TESTS...] [-- extra pytest args]

TESTS default to tests/characterisation; test paths after `--` replace that default.

--history TARGET is the history store (results/history.py, docs/history.md): a file path
(SQLite) or a database URL (postgresql://...); the night is recorded into it with its exit
code, and the board's latest run in it is the previous run.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from ..core import device, nvml
from ..results.gate import HISTORY
from ..results.boards import Reference, compare_boards, doc_boards, known_failures, reference
from ..results.changes import (EXIT_BROKEN, EXIT_MEASURED_NOTHING, EXIT_TEXT, NOISE_REL,
                               measured_clock, other_process,
                               Change, failure_changes, junit_failures, junit_skips,
                               repeatability, repeatability_lines, verdict)
from ..results.files import ResultsError, read_report, read_results
from ..results.finite import number
from ..results.history_rows import HistoryError
from .output import OutputError, check_dir, unwritable, interruptible
from .pytest_args import default_tests, selected_tonight, test_paths


THROTTLE_FRACTION = 0.90   # measured SM clock below this share of the max clock: throttled
CLOCK_DRIFT = 0.05         # start vs end measured clock differ by more than this: flagged


# --- clocks and environment ---------------------------------------------------------------

CLOCK_PROBE = r"""
import json, sys
out = {}
try:
    from pytest_gpuchar.core import device, gpu
    d = device.detect()
    if d:
        out = {"device": d.name, "arch": d.arch, "driver": d.driver,
               "cuda_driver_api": d.cuda_driver_api, "cuda_runtime": d.cuda_runtime,
               "sm_count": d.sm_count, "sm_clock_max_mhz": d.sm_clock_max_mhz,
               "sm_clock_nvml_mhz": d.sm_clock_now_mhz, "board": d.board}
        try:    # verified first: an invalid clock probe gives no number, but sm_clock_error
            mhz = round(gpu.Gpu(d, gpu.JitCache(d.index)).sm_clock_mhz(), 1)
        except Exception as e:
            mhz, out["sm_clock_error"] = None, f"{type(e).__name__}: {e}"
        out["sm_clock_measured_mhz"] = mhz
    else:
        out = {"no_gpu": d.reason}
except Exception as e:
    out = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(out))
"""


def clock_snapshot(env: dict) -> dict:
    """Device, driver, the board as NVML reads it and the measured SM clock (a short busy
    loop) in a fresh process; none where `env` has the detection find no GPU before CUDA."""
    if why := device.disabled(env):
        return {"no_gpu": why, "time": nvml.now()}
    try:
        p = subprocess.run([sys.executable, "-c", CLOCK_PROBE], capture_output=True, text=True,
                           timeout=120, env=env)
        info = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {
            "error": p.stderr.strip()[-300:]}
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as e:
        info = {"error": f"{type(e).__name__}: {e}"}
    return {**info, "time": nvml.now()}


def end_snapshot(before: dict, env: dict) -> dict:
    """The clock snapshot at the end of the night; without a GPU at the start, the start's
    reason stamped now (no second process: the night's pytest says why there was none)."""
    if "no_gpu" not in before:
        return clock_snapshot(env)
    return {"no_gpu": before["no_gpu"], "probed": "at the start only (no GPU)", "time": nvml.now()}


def throttling(before: dict, after: dict) -> list[str]:
    """Reasons to distrust tonight's figures: the SM clock measured below THROTTLE_FRACTION of
    the max, or start and end differing by more than CLOCK_DRIFT; what NVML saw on the board
    at the start and the end (a clock-event reason other than idle, ECC errors, a narrow PCIe
    link, MIG mode: core/nvml.flags)."""
    flags = []
    for when, c in (("start", before), ("end", after)):
        mhz, top = number(c.get("sm_clock_measured_mhz")), number(c.get("sm_clock_max_mhz"))
        if mhz and top and mhz < THROTTLE_FRACTION * top:
            flags.append(f"SM clock at the {when} {mhz:.0f} MHz < {THROTTLE_FRACTION:.0%} of "
                         f"max {top:.0f} MHz")
    a, b = number(before.get("sm_clock_measured_mhz")), number(after.get("sm_clock_measured_mhz"))
    if a and b and abs(b - a) > CLOCK_DRIFT * a:
        flags.append(f"SM clock changed during the run: {a:.0f} -> {b:.0f} MHz")
    return flags + nvml.flags(before.get("board") or {}, after.get("board") or {})


def toolkit() -> dict:
    from ..core import toolchain
    return {name: [f"{t.version} ({t.origin})" for t in toolchain.all_tools(name)]
            for name in ("ptxas", "nvdisasm")}


# --- the report -----------------------------------------------------------------------------

def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.6g}"
    return str(v)


def compared_with(doc: dict) -> list[str]:
    """The header lines saying what each board was compared with (first night or not)."""
    boards = doc.get("boards") or []
    if not boards:
        none = "no previous run (expectations and snapshots only)"
        return [f"- **compared with**: {doc.get('previous') or none}"]
    refs = [Reference(b["board"], b.get("reference") or "", {} if b.get("reference") else None,
                      b.get("same_board", False), b.get("other_board") or "") for b in boards]
    return ["- **compared with** (change: a board against its own previous run; conformance: "
            "every figure against the model's expectations):"] + \
        [f"  - {r.describe()}" for r in refs]


def conformance_lines(doc: dict, ch: list[Change]) -> list[str]:
    """The two questions in one paragraph each: conformance (every figure against the model's
    expectations, board-dependent ones against a fleet sample's range) and change (each board
    against its own previous run)."""
    results = doc.get("results") or []
    dep = [r for r in results if (r.get("boards") or 0) > 1]
    fails = sum(r.get("status") in ("fail", "error") for r in results)
    spans = sorted({r["boards"] for r in dep})
    out = ["## Conformance", "",
           f"Every figure against its model's expectations: {fails} out of tolerance or in error "
           f"of {len(results)} results."
           + (f" {len(dep)} board-dependent figures judged against their model's range from a "
              f"fleet sample (over {spans[0]}-{spans[-1]} boards), "
              f"{sum(r.get('status') == 'fail' for r in dep)} outside it." if dep else ""), ""]
    firsts = [b for b in doc.get("boards") or [] if b.get("first_night")]
    moved = sum(c.severity in ("change", "regression") and c.kind not in ("expectation",)
                for c in ch)
    out += ["## Change", ""]
    if firsts and len(firsts) == len(doc.get("boards") or []):
        out += ["First night of " + ", ".join(b["board"][:12] or "this board" for b in firsts)
                + ": nothing of its own to compare with, so no change is judged; differences "
                  "from another board are notes.", ""]
    else:
        out += [f"Each board against its own previous run: {moved} changes or regressions "
                f"besides conformance"
                + (f"; first night of {', '.join(b['board'][:12] for b in firsts)}"
                   if firsts else "") + ".", ""]
    return out


def markdown(doc: dict) -> str:
    env, ch = doc["environment"], [Change(**c) for c in doc["changes"]]
    out = [f"# gpuchar nightly: {EXIT_TEXT[doc['exit']]} (exit {doc['exit']})", ""]
    if doc.get("measured_nothing"):
        out += [f"**Measured nothing**: {doc['measured_nothing']}.", ""]
    elif doc.get("static_only"):
        out += ["**Static checks only** (--static-only): no hardware test was run; the exit "
                "status is that of the static checks.", ""]
    dev = env.get("before", {})
    out += [f"- **date**: {doc['date']}", f"- **device**: {dev.get('device', dev.get('no_gpu', '?'))}"
            f" ({dev.get('arch', '-')}, {dev.get('sm_count', '-')} SMs)",
            f"- **driver**: {dev.get('driver', '-')} (CUDA driver API "
            f"{dev.get('cuda_driver_api', '-')}, runtime {dev.get('cuda_runtime', '-')})",
            f"- **toolkit**: ptxas {', '.join(env['toolkit'].get('ptxas', [])) or 'none'}",
            f"- **SM clock** (measured): start {measured_clock(dev)}, end "
            f"{measured_clock(env.get('after', {}))}, max {dev.get('sm_clock_max_mhz', '-')} MHz",
            f"- **JIT cache**: CUDA_CACHE_DISABLE={env.get('CUDA_CACHE_DISABLE')}",
            f"- **suite**: `{' '.join(doc['pytest_command'])}` -> pytest exit "
            f"{doc['pytest_exit']}, {doc['wall_s']} s",
            *compared_with(doc), ""]
    if dev.get("board"):
        out.insert(-1, f"- **board** (NVML, start): {nvml.summary(dev['board'])}")
    if env.get("throttling"):
        out += ["**Throttling flagged** (or a board fault: timings tonight may be off):", ""]
        out += [f"- {f}" for f in env["throttling"]] + [""]
    counts = doc.get("status_counts", {})
    out += ["Status counts: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"), ""]
    out += conformance_lines(doc, ch)
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
    if doc.get("repeatability"):
        out += ["## Repeatability against the previous run", "",
                "SPEC's bar: identical integer cycles, other figures within 1%.", "", "```",
                *repeatability_lines(doc["repeatability"]), "```", ""]
    if not ch and not doc.get("measured_nothing"):
        out += ["Nothing changed: every characteristic within its noise of the previous run, "
                "every expectation and snapshot holds.", ""]
    out += ["Accepting a reviewed change: see docs/nightly.md (review, `pytest --snapshot-update`, "
            "`gpuchar-expectations update --results <this run>/report/gpuchar-results.json "
            "--arch <arch>`).", ""]
    return "\n".join(out)


def _write(path: Path, text: str) -> None:
    from ..core.atomic import atomic_write
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)


def device_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3': a device's directory name."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def baseline_for(device: dict, root: Path) -> Path | None:
    """The committed baseline of this device: <root>/<arch>/<device slug>/ holds the latest
    reviewed run's gpuchar-results.json (plain or .gz), so the first night on a fresh machine
    is compared with the reference and not with nothing."""
    if not device.get("device") or not device.get("arch"):
        return None
    d = Path(root) / device["arch"] / device_slug(device["device"])
    for name in ("gpuchar-results.json", "gpuchar-results.json.gz"):
        if (d / name).is_file():
            return d / name
    return None


def previous_run(args, device: dict, board: str | None = None) -> Path | dict | None:
    """The candidate run tonight's `board` is compared with: --previous, else the board's
    latest run in the history (a report-shaped dict), else the model's committed baseline
    (--baseline-root, default results/). Whether it is this board's own run or another
    board's is decided per board (references)."""
    if args.previous:
        return Path(args.previous)
    store = getattr(args, "history_store", None)
    if store is not None and board:
        prev = store.previous(board, device.get("arch"))
        if prev is not None:
            return prev
    return baseline_for(device, Path(args.baseline_root))


def previous_label(args, prev: Path | dict) -> str:
    """How nightly.json names what tonight was compared with."""
    if isinstance(prev, dict):
        return f"run {prev['run']['id']} ({prev['run']['date']}) of {args.history_store.name}"
    return str(prev)


def open_store(target: str):
    """The --history store, or one error line (what changed, for a directory) and None."""
    from ..results.history import open_history
    if Path(target).is_dir():
        print(f"gpuchar-nightly: --history {target}: is a directory. --history now takes the "
              f"history database: a file path (SQLite) or a database URL (docs/history.md). "
              f"Bring the old runs in with: gpuchar-history import {target}/nightly-*.json "
              f"--db {Path(target) / 'gpuchar-history.sqlite'}, then pass --history "
              f"{Path(target) / 'gpuchar-history.sqlite'}", file=sys.stderr)
        return None
    try:
        return open_history(target)
    except HistoryError as e:
        print(f"gpuchar-nightly: --history {e}", file=sys.stderr)
        return None


def record_history(args, doc: dict, path: Path, code: int) -> None:
    """Tonight's nightly.json (with its exit code) into the --history store, one run per
    board; a failing write is said on stderr and changes nothing else."""
    store = getattr(args, "history_store", None)
    if store is None:
        return
    try:
        ids = store.record(doc, source="nightly", path=str(path), nightly_exit=code)
    except HistoryError as e:
        print(f"gpuchar-nightly: --history: tonight was NOT recorded: {e}", file=sys.stderr)
        return
    print(f"gpuchar-nightly: recorded in {store.name}: run(s) {', '.join(map(str, ids))}"
          + (" (already there)" if ids.existing else ""))


def references(args, device: dict, results: list[dict]) -> list[Reference]:
    """One reference per board of tonight's run: its own previous run (changes), or another
    board's (notes only), or none (conformance only). Raises ResultsError for a bad file and
    HistoryError for an unreadable history."""
    refs, read = [], {}
    for board in doc_boards({"results": results}) or [""]:
        prov = next((r.get("provenance") for r in results if board and
                     (r.get("provenance") or {}).get("uuid") == board), None) or {}
        dev = {"device": prov.get("device"), "arch": prov.get("arch")} \
            if prov.get("device") and prov.get("arch") else device
        prev = previous_run(args, dev, board or None)
        if isinstance(prev, dict):
            ref = reference(board, previous_label(args, prev), prev)
            if ref.same_board and board:
                ref.earlier = args.history_store.earlier(board, dev.get("arch"), prev,
                                                         HISTORY - 1)
            refs.append(ref)
            continue
        if prev is not None and prev not in read:
            read[prev] = read_report(prev)
        refs.append(reference(board, str(prev or ""), read.get(prev)))
    return refs


# --- a night that measured nothing ------------------------------------------------------------

def measured_nothing(meta: dict) -> str:
    """Why tonight's run measured nothing on a GPU ("" when a hardware test ran): the skip
    reason that kept most hardware tests from running, or that none was selected. Such a
    night is not green: a driver upgrade that breaks CuPy would otherwise pass as "no
    change" with every hardware test skipped."""
    if meta.get("hardware_ran", 0):
        return ""
    skips = sorted(((n, why) for why, n in meta.get("skipped", {}).items()
                    if why.startswith("hardware:")), reverse=True)
    if not skips:
        return ("no hardware test ran: none was selected (the TESTS given or -m left only "
                "static checks); a deliberately static night: gpuchar-nightly --static-only")
    n, why = skips[0]
    more = sum(k for k, _ in skips[1:])
    return (f"no hardware test ran: {n}{f' (+{more})' if more else ''} skipped with "
            f"\"{why}\"; a deliberately static night: gpuchar-nightly --static-only")


def night_verdict(changes: list[Change], pytest_exit: int, current: dict,
                  static_only: bool) -> tuple[int, str]:
    """(exit code, why the night measured nothing or ""): a broken run is 3 whatever else;
    then a night in which no hardware test ran is 4, unless it is a deliberately static one
    (--static-only); then verdict()'s 2, 1, 0."""
    code = verdict(changes, pytest_exit, bool(current))
    nothing = "" if static_only or code == EXIT_BROKEN else \
        measured_nothing(current.get("meta", {}))
    return (EXIT_MEASURED_NOTHING, nothing) if nothing else (code, "")


def start_suite(cmd: list[str], log, env: dict):
    """Tonight's pytest process, its output to `log` (the one place it is started)."""
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)


def _suite(args, out: Path, report_dir: Path, env: dict, uuid: str = ""):
    """Tonight's suite run (its output in pytest.log): its command, the process, the other
    processes NVML saw computing on the GPU meanwhile, and why NVML could not look ("")."""
    # -o gpuchar_history=: the nightly records tonight itself, after comparing (an ini's
    # history would record the run before the comparison reads the previous one)
    tests = args.tests or ([] if test_paths(args.pytest_args) else default_tests())
    cmd = [sys.executable, "-m", "pytest", *tests,
           "-p", "no:cacheprovider", "-q", "-rfEs", "--gpuchar-report", str(report_dir),
           "--junitxml", str(out / "junit.xml"), "-o", "gpuchar_history=",
           *(["-m", "static"] if args.static_only else []), *args.pytest_args]
    with open(out / "pytest.log", "w") as log:
        proc = start_suite(cmd, log, env)
        watch = nvml.ProcessWatch(uuid, proc.pid).start() if uuid else None
        proc.wait()
    others = watch.stop() if watch is not None else []
    return cmd, proc, others, (watch.why_not if watch is not None else "no GPU at the start")


def environment(before: dict, after: dict, env: dict, others: list[dict],
                unwatched: str) -> dict:
    """nightly.json's environment: the clock snapshots, the toolkit, throttling, and the
    other processes NVML saw computing on the GPU during the night."""
    return {"before": before, "after": after, "toolkit": toolkit(),
            "CUDA_CACHE_DISABLE": env["CUDA_CACHE_DISABLE"],
            "throttling": throttling(before, after), "other_processes": others,
            "process_watch": unwatched or "NVML listed the GPU's compute processes every "
                                          "second"}


def _report(results_path: Path) -> dict:
    """Tonight's report ({} when the run wrote none, or a broken one)."""
    if results_path.exists():
        try:
            return json.loads(results_path.read_text())
        except json.JSONDecodeError:
            return {}
    return {}


def run(args) -> int:
    if args.previous and not Path(args.previous).exists():
        print(f"gpuchar-nightly: --previous {args.previous}: no such file", file=sys.stderr)
        return EXIT_BROKEN
    out = Path(args.out).resolve()
    report_dir = out / "report"
    try:
        check_dir("--out", Path(args.out))
        if report_dir.exists():
            shutil.rmtree(report_dir)
    except (OutputError, OSError) as e:
        why = e if isinstance(e, OutputError) else unwritable("--out", Path(args.out), e)
        print(f"gpuchar-nightly: {why}", file=sys.stderr)
        return EXIT_BROKEN
    env = dict(os.environ)
    env["CUDA_CACHE_DISABLE"] = "1"
    started = time.time()
    before = clock_snapshot(env)
    uuid = str(((before.get("board") or {}).get("uuid")) or "")
    cmd, proc, others, unwatched = _suite(args, out, report_dir, env, uuid)
    after = end_snapshot(before, env)
    wall = round(time.time() - started, 1)
    current = _report(report_dir / "gpuchar-results.json")
    results = current.get("results", [])
    try:
        refs = references(args, before, results)
    except ResultsError as e:
        print(f"gpuchar-nightly: --previous: {e}", file=sys.stderr)
        return EXIT_BROKEN
    except HistoryError as e:
        print(f"gpuchar-nightly: --history: cannot read the previous run: {e}", file=sys.stderr)
        return EXIT_BROKEN
    for ref in refs:         # a static night is compared with the tests it selected
        if ref.doc is not None and args.static_only:
            ref.doc = {**ref.doc, "results": selected_tonight(
                ref.doc.get("results"), out / "junit.xml", True)}
    cmp = compare_boards(results, refs, noise_rel=args.noise_rel,
                         skipped=junit_skips(out / "junit.xml"))
    changes, rep = cmp.changes, cmp.repeatability
    changes += failure_changes(junit_failures(out / "junit.xml"), results,
                               *known_failures(refs))
    changes += [other_process(p) for p in others]
    code, nothing = night_verdict(changes, proc.returncode, current, args.static_only)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.get("status", "")] = counts.get(r.get("status", ""), 0) + 1
    doc = {
        "schema": 1,
        "date": nvml.now(),
        "exit": code, "verdict": EXIT_TEXT[code], "static_only": bool(args.static_only),
        "measured_nothing": nothing or None,
        "pytest_exit": proc.returncode, "pytest_command": cmd[1:], "wall_s": wall,
        "previous": next((r.label for r in refs if r.same_board), None),
        "boards": [r.as_dict() for r in refs],
        "first_night": any(r.first_night for r in refs),
        "environment": environment(before, after, env, others, unwatched),
        "status_counts": counts,
        "skipped": current.get("meta", {}).get("skipped", {}),
        "changes": [asdict(c) for c in changes],
        "repeatability": rep,
        "meta": current.get("meta", {}),
        "results": results,
    }
    _write(out / "nightly.json", json.dumps(doc, indent=1, default=str))
    _write(out / "nightly.md", markdown(doc))
    record_history(args, doc, out / "nightly.json", code)
    from ..results import html
    html.write_nightly(doc, out, current.get("artifacts"))
    n = {s: sum(c.severity == s for c in changes) for s in ("regression", "change", "note")}
    print(f"gpuchar-nightly: {EXIT_TEXT[code]} (exit {code}): {n['regression']} regressions, "
          f"{n['change']} changes within tolerance, {n['note']} notes; pytest exit "
          f"{proc.returncode}, {wall} s; report {out / 'nightly.md'}")
    for f in doc["environment"]["throttling"]:
        print(f"gpuchar-nightly: throttling: {f}")
    if nothing:         # the reason, last
        print(f"gpuchar-nightly: {EXIT_TEXT[code]} (exit {code}): {nothing}")
    return code


class _Parser(argparse.ArgumentParser):
    """A command-line mistake is "the run broke" (3), not argparse's 2: the nightly's 2 means
    regressions."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(EXIT_BROKEN, f"{self.prog}: error: {message}\n")


@interruptible("gpuchar-nightly", EXIT_BROKEN, "nothing was run, compared or recorded")
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, extra = argv[:k], argv[k + 1:]
    ap = _Parser(
        prog="gpuchar-nightly",
        description="Nightly driver-upgrade check: run the suite with the JIT cache disabled, "
                    "compare with snapshots, expectations and the previous run, write "
                    "nightly.json and nightly.md. Exit: 0 no change, 1 changes within "
                    "tolerance, 2 regressions, 3 the run broke, 4 measured nothing (no "
                    "hardware test ran; see --static-only). Extra pytest args after --.")
    ap.add_argument("tests", nargs="*", help="test paths (default tests/characterisation, "
                                             "else the installed suite: --gpuchar-suite; test "
                                             "paths after -- replace the default too)")
    ap.add_argument("--repeatability", nargs=2, metavar=("RUN1", "RUN2"),
                    help="only compare two runs' gpuchar-results.json (or nightly.json) for "
                         "repeatability per topic, print it and exit 0")
    ap.add_argument("--out", default="gpuchar-nightly", help="output directory")
    ap.add_argument("--previous", help="the previous run's nightly.json (or a "
                                       "gpuchar-results.json) to compare with")
    ap.add_argument("--history", metavar="TARGET",
                    help="the history store: a file path (SQLite) or a database URL "
                         "(postgresql://...); tonight is recorded into it with its exit code, "
                         "and the board's latest run in it is the previous run (docs/history.md)")
    ap.add_argument("--baseline-root", default="results",
                    help="where committed baselines live (<root>/<arch>/<device>/gpuchar-"
                         "results.json): the previous run when neither --previous nor a "
                         "history has one (default: results)")
    ap.add_argument("--static-only", action="store_true",
                    help="a deliberately static night: run the static checks only (-m static) "
                         "and exit by them (0-3), compared with the previous run's static "
                         "checks; without it a night in which no hardware test ran exits 4")
    ap.add_argument("--noise-rel", type=float, default=NOISE_REL,
                    help=f"relative change below which a value has not moved "
                         f"(default {NOISE_REL})")
    args = ap.parse_args(argv)
    args.pytest_args = extra
    try:
        if args.repeatability:
            runs = [read_results(Path(p)) for p in args.repeatability]
            print("\n".join(repeatability_lines(repeatability(*runs))))
            return 0
        if args.previous:     # a bad --previous is named before the night runs, not after
            read_results(Path(args.previous))
    except ResultsError as e:
        print(f"gpuchar-nightly: {e}", file=sys.stderr)
        return EXIT_BROKEN
    args.history_store = open_store(args.history) if args.history else None
    if args.history and args.history_store is None:
        return EXIT_BROKEN      # named before the night runs, not after
    try:
        return run(args)
    except KeyboardInterrupt:
        print(f"\ngpuchar-nightly: interrupted (exit {EXIT_BROKEN}): the night was not "
              f"compared, written or recorded; what ran is in "
              f"{Path(args.out) / 'pytest.log'}", file=sys.stderr)
        return EXIT_BROKEN
    finally:
        if args.history_store is not None:
            args.history_store.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
