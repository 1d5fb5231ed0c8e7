"""The table of speed_best_of.sh: per run of the README's hardware command its pytest seconds
(pytest's own last line), its counts (tests by outcome, figures in the report), whether every
run counted the same; the best run's time by topic (wall of the hardware tests, GPU busy, the
busy share) and its slowest tests.
Usage: python3 tools/gpu-host/speed_table.py OUT RUNS REPORT_PREFIX
(OUT/run-<i>.log, OUT/run-<i>.xml, REPORT_PREFIX-<i>/gpuchar-results.json for i = 1..RUNS)"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import slowest_tests  # noqa: E402  (beside this script)

LAST = re.compile(r"^(?P<counts>.*) in (?P<s>[\d.]+)s")
OUTCOME = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?)\b")


def tests_run(counts: str) -> int:
    """The tests of pytest's summary line, whatever their outcome (deselected not counted):
    a figure unstable on the night turns a pass into an expected failure, not a test less."""
    return sum(int(n) for n, _ in OUTCOME.findall(counts))


def run_row(out: Path, i: int, prefix: str) -> dict:
    log = (out / f"run-{i}.log").read_text(errors="replace").splitlines()
    last = next((m for m in (LAST.match(line.strip("= ")) for line in reversed(log)) if m), None)
    row = {"run": i, "pytest_s": float(last["s"]) if last else None,
           "counts": last["counts"] if last else "(no summary line)"}
    try:
        rep = json.loads(Path(f"{prefix}-{i}/gpuchar-results.json").read_text())
    except (OSError, ValueError):
        rep = {}
    row["figures"] = len(rep.get("results", []))
    row["by_topic"] = rep.get("meta", {}).get("time_by_topic", {})
    return row


def main() -> None:
    out, runs, prefix = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rows = [run_row(out, i, prefix) for i in range(1, runs + 1)]
    print("\n== README hardware command, per run")
    for r in rows:
        print(f"run {r['run']}: pytest {r['pytest_s']} s; {r['counts']}; {r['figures']} "
              f"figures in the report")
    same = len({(tests_run(r["counts"]), r["figures"]) for r in rows}) == 1
    print(f"counts of tests and figures the same in every run: {same} "
          f"({', '.join(sorted({str(tests_run(r['counts'])) for r in rows}))} tests)")
    if len({r["counts"] for r in rows}) > 1:
        print("  (their outcomes differ: a figure unstable on the night is an expected failure)")
    done = [r for r in rows if r["pytest_s"] is not None]
    if not done:
        return
    best = min(done, key=lambda r: r["pytest_s"])
    print(f"best of {runs}: run {best['run']}, {best['pytest_s']:.1f} s of pytest")
    topics = best["by_topic"]
    wall = sum(t.get("hardware_s", 0.0) for t in topics.values())
    busy = sum(t.get("gpu_busy_s", 0.0) for t in topics.values())
    print(f"\n== time by topic, run {best['run']} (wall of hardware tests / GPU busy / share)")
    if wall:
        print(f"all: {wall:.1f} s / {busy:.2f} s / {busy / wall:.0%}")
    for name, t in sorted(topics.items(), key=lambda kv: -kv[1].get("hardware_s", 0.0)):
        w, b = t.get("hardware_s", 0.0), t.get("gpu_busy_s", 0.0)
        print(f"  {name}: {w:.1f} s / {b:.2f} s / {b / w:.0%}" if w else f"  {name}: 0 s")
    print(slowest_tests.report(out / f"run-{best['run']}.xml", 25, f"tests, run {best['run']}"))


if __name__ == "__main__":
    main()
