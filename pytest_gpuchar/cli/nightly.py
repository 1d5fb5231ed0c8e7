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
     tests collected) or wrote no results, or the nightly's own arguments are wrong (an
     unknown option, a --previous that cannot be read: named before the night runs)
  4  measured nothing: no hardware test ran (no GPU, CuPy missing or broken, a GPU of another
     arch), so tonight says nothing about the driver; the reason is the last line printed.
     A deliberately static night passes --static-only (-m static) and exits 0-3 by the
     static checks

Usage: gpuchar-nightly [--out DIR] [--previous PREV.json] [--history DIR] [--static-only]
                       [TESTS...] [-- extra pytest args]
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from ..results.changes import (EXIT_BROKEN, EXIT_MEASURED_NOTHING, EXIT_TEXT, NOISE_REL,
                               Change, compare, failure_changes, junit_failures, junit_skips,
                               number, repeatability, repeatability_lines, verdict)
from ..results.files import ResultsError, read_report, read_results


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
        mhz = gpu.Gpu(d, gpu.JitCache(d.index)).sm_clock_mhz()
        out = {"device": d.name, "arch": d.arch, "driver": d.driver,
               "cuda_driver_api": d.cuda_driver_api, "cuda_runtime": d.cuda_runtime,
               "sm_count": d.sm_count, "sm_clock_max_mhz": d.sm_clock_max_mhz,
               "sm_clock_smi_mhz": d.sm_clock_now_mhz,
               "sm_clock_measured_mhz": round(mhz, 1)}
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
        mhz, top = number(c.get("sm_clock_measured_mhz")), number(c.get("sm_clock_max_mhz"))
        if mhz and top and mhz < THROTTLE_FRACTION * top:
            flags.append(f"SM clock at the {when} {mhz:.0f} MHz < {THROTTLE_FRACTION:.0%} of "
                         f"max {top:.0f} MHz")
        reasons = c.get("nvidia_smi", {}).get("throttle_reasons", "")
        # 0x0 none, 0x1 GPU idle (normal between launches)
        if reasons and reasons not in ("0x0000000000000000", "0x0000000000000001", "[N/A]"):
            flags.append(f"nvidia-smi throttle reasons at the {when}: {reasons}")
    a, b = number(before.get("sm_clock_measured_mhz")), number(after.get("sm_clock_measured_mhz"))
    if a and b and abs(b - a) > CLOCK_DRIFT * a:
        flags.append(f"SM clock changed during the run: {a:.0f} -> {b:.0f} MHz")
    return flags


def toolkit() -> dict:
    from ..core import toolchain
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


def previous_run(args, device: dict) -> Path | None:
    """What tonight is compared with: --previous, else the history's latest run, else the
    device's committed baseline (--baseline-root, default results/)."""
    if args.previous:
        return Path(args.previous)
    if args.history and (Path(args.history) / "latest.json").exists():
        return Path(args.history) / "latest.json"
    return baseline_for(device, Path(args.baseline_root))


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


def selected_tonight(previous: list[dict] | None, junit: Path,
                     static_only: bool) -> list[dict] | None:
    """On a --static-only night, the previous run's results of the tests tonight's run
    selected (the previous night's hardware figures are not "missing"); else `previous`."""
    if not static_only or previous is None:
        return previous
    import xml.etree.ElementTree as ET
    try:
        cases = {(tc.get("classname", ""), tc.get("name", ""))
                 for tc in ET.parse(junit).getroot().iter("testcase")}
    except (OSError, ET.ParseError):
        return []

    def case(nodeid: str) -> tuple[str, str]:
        path, _, rest = nodeid.partition("::")
        parts = rest.split("::")
        return ".".join([path.removesuffix(".py").replace("/", "."), *parts[:-1]]), parts[-1]
    return [r for r in previous if case(str(r.get("test", ""))) in cases]


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
           "--junitxml", str(out / "junit.xml"), *(["-m", "static"] if args.static_only else []),
           *args.pytest_args]
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
    prev_path = previous_run(args, before)
    previous = None
    previous_changes: list[dict] = []
    previous_failures: list[dict] = []
    previous_skipped: dict[str, str] = {}
    if prev_path is not None:
        try:
            prev_doc = read_report(prev_path)
        except ResultsError as e:
            print(f"gpuchar-nightly: --previous: {e}", file=sys.stderr)
            return EXIT_BROKEN
        # a nightly.json carries the run's results; a plain gpuchar-results.json too
        previous = prev_doc.get("results") if "results" in prev_doc else None
        previous_changes = prev_doc.get("changes", [])
        previous_failures = prev_doc.get("meta", {}).get("failures", [])
        previous_skipped = prev_doc.get("meta", {}).get("measured_skips", {})
        previous = selected_tonight(previous, out / "junit.xml", args.static_only)
    changes = compare(results, previous, noise_rel=args.noise_rel,
                      skipped=junit_skips(out / "junit.xml"),
                      previous_skipped=previous_skipped)
    rep = repeatability(previous, results) if previous is not None else None
    changes += failure_changes(junit_failures(out / "junit.xml"), results, previous_changes,
                               previous_failures)
    code, nothing = night_verdict(changes, proc.returncode, current, args.static_only)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.get("status", "")] = counts.get(r.get("status", ""), 0) + 1
    doc = {
        "schema": 1,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "exit": code, "verdict": EXIT_TEXT[code], "static_only": bool(args.static_only),
        "measured_nothing": nothing or None,
        "pytest_exit": proc.returncode, "pytest_command": cmd[1:], "wall_s": wall,
        "previous": str(prev_path) if previous is not None else None,
        "environment": {"before": before, "after": after, "toolkit": toolkit(),
                        "CUDA_CACHE_DISABLE": env["CUDA_CACHE_DISABLE"],
                        "throttling": throttling(before, after)},
        "status_counts": counts,
        "skipped": current.get("meta", {}).get("skipped", {}),
        "changes": [asdict(c) for c in changes],
        "repeatability": rep,
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
    if nothing:         # the reason, last
        print(f"gpuchar-nightly: {EXIT_TEXT[code]} (exit {code}): {nothing}")
    return code


class _Parser(argparse.ArgumentParser):
    """A command-line mistake is "the run broke" (3), not argparse's 2: the nightly's 2 means
    regressions."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(EXIT_BROKEN, f"{self.prog}: error: {message}\n")


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
    ap.add_argument("tests", nargs="*", help="test paths (default tests/characterisation)")
    ap.add_argument("--repeatability", nargs=2, metavar=("RUN1", "RUN2"),
                    help="only compare two runs' gpuchar-results.json (or nightly.json) for "
                         "repeatability per topic, print it and exit 0")
    ap.add_argument("--out", default="gpuchar-nightly", help="output directory")
    ap.add_argument("--previous", help="the previous run's nightly.json (or a "
                                       "gpuchar-results.json) to compare with")
    ap.add_argument("--history", help="directory keeping every run's nightly JSON and "
                                      "latest.json (the default previous run)")
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
    return run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
