"""Where a run's time went, per topic: the wall time of its static checks and of its hardware
tests (setup, call and teardown of each), and the GPU-busy time of its launches (the launch
stage's CUDA events: what the GPU spent running the topic's kernels). Pure bookkeeping over
the tests' reports; the JSON report keeps it under meta.time_by_topic, the Markdown report and
the terminal summary show it."""
from __future__ import annotations

from collections import defaultdict

KINDS = ("static", "hardware")


class Durations:
    """Per test: its topic, its kind and its seconds, as the reports come in."""

    def __init__(self) -> None:
        self.tests: dict[str, dict] = {}
        self.not_run: set[str] = set()

    def skipped_at_setup(self, nodeid: str) -> None:
        """The test did not run (skipped before its call: no GPU, not this arch): none of
        its phases is a topic's time."""
        self.not_run.add(nodeid)
        self.tests.pop(nodeid, None)

    def add(self, nodeid: str, topic: str | None, kind: str, seconds: float,
            busy_s: float | None = None) -> None:
        """One phase's report of a test (busy_s: the test's GPU-busy seconds so far)."""
        if not topic or nodeid in self.not_run:
            return
        t = self.tests.setdefault(nodeid, {"topic": topic, "kind": kind, "wall_s": 0.0,
                                           "gpu_busy_s": 0.0})
        t["wall_s"] += seconds
        if busy_s is not None:
            t["gpu_busy_s"] = busy_s

    def by_topic(self) -> dict[str, dict]:
        """topic -> tests, static and hardware wall seconds, GPU-busy seconds (rounded)."""
        out: dict[str, dict] = defaultdict(lambda: {"tests": 0, "static_s": 0.0,
                                                    "hardware_s": 0.0, "gpu_busy_s": 0.0})
        for t in self.tests.values():
            row = out[t["topic"]]
            row["tests"] += 1
            row[f"{t['kind']}_s"] += t["wall_s"]
            row["gpu_busy_s"] += t["gpu_busy_s"]
        return {k: {f: round(v, 3) if isinstance(v, float) else v for f, v in row.items()}
                for k, row in sorted(out.items())}


def totals(table: dict[str, dict]) -> dict:
    return {f: round(sum(r[f] for r in table.values()), 3)
            for f in ("tests", "static_s", "hardware_s", "gpu_busy_s")}


def markdown(table: dict[str, dict]) -> list[str]:
    """The report's section (none without a topic's test)."""
    if not table:
        return []
    out = ["## Time by topic", "",
           "Wall seconds of each topic's tests (setup, call, teardown), static and hardware, "
           "and the GPU-busy seconds of their launches (CUDA events).", "",
           "| topic | tests | static s | hardware s | GPU busy s |", "|---|---|---|---|---|"]
    for name, r in [*table.items(), ("all", totals(table))]:
        out.append(f"| {name} | {r['tests']} | {r['static_s']:.1f} | {r['hardware_s']:.1f} | "
                   f"{r['gpu_busy_s']:.2f} |")
    return out + [""]


def lines(table: dict[str, dict]) -> list[str]:
    """The terminal summary's lines: one per topic that ran hardware tests, else one line
    of the static time per topic."""
    if not table:
        return []
    hw = {k: r for k, r in table.items() if r["hardware_s"] or r["gpu_busy_s"]}
    if not hw:
        return ["time (static) by topic: " + ", ".join(
            f"{k} {r['static_s']:.1f} s" for k, r in table.items())]
    t = totals(table)
    out = [f"time by topic (wall of hardware tests / GPU busy; static wall): all "
           f"{t['hardware_s']:.1f} s / {t['gpu_busy_s']:.1f} s; {t['static_s']:.1f} s"]
    out += [f"  {k}: {r['hardware_s']:.1f} s / {r['gpu_busy_s']:.2f} s; {r['static_s']:.1f} s"
            for k, r in table.items()]
    return out
