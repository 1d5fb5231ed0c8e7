"""Read py-spy's raw (collapsed) samples of a run (`py-spy record --format raw --threads
--idle`) and print, for the thread that ran the tests, where its wall time went: the share of
samples in which each function (file:line of its definition is not in raw output, so file and
function name) was on the stack (inclusive) and on top (own), the package's functions first.
Usage: python3 tools/gpu-host/pyspy_top.py SAMPLES [--thread NAME] [--top N]"""
from __future__ import annotations

import argparse
import collections
import re

FRAME = re.compile(r"^(?P<fn>[^ ]+) \((?P<file>[^:)]+)(?::\d+)?\)$")


def short(file: str) -> str:
    """A frame's file as the tables print it: from the package or the checkout down."""
    return file.split("site-packages/")[-1].split("/work/main/")[-1]


def frames(stack: str) -> list[str]:
    out = []
    for f in stack.split(";"):
        m = FRAME.match(f.strip())
        out.append(f"{m['fn']} ({short(m['file'])})" if m else f.strip())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("samples")
    ap.add_argument("--thread", default="", help="a thread id/name part (default: the busiest)")
    ap.add_argument("--top", type=int, default=50)
    a = ap.parse_args()
    by_thread: dict[str, list[tuple[list[str], int]]] = collections.defaultdict(list)
    for line in open(a.samples):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        fs = frames(stack)
        by_thread[fs[0]].append((fs[1:], int(n)))
    totals = {t: sum(n for _, n in s) for t, s in by_thread.items()}
    for t, n in sorted(totals.items(), key=lambda x: -x[1])[:8]:
        print(f"thread {t}: {n} samples")
    thread = next((t for t in totals if a.thread and a.thread in t),
                  max(totals, key=totals.get))
    samples = by_thread[thread]
    total = totals[thread]
    incl, own = collections.Counter(), collections.Counter()
    for fs, n in samples:
        for f in set(fs):
            incl[f] += n
        if fs:
            own[fs[-1]] += n
    print(f"\n== {thread}: {total} samples; inclusive share, package functions")
    for f, n in incl.most_common():
        if "pytest_gpuchar" in f or "tests/" in f:
            print(f"{100 * n / total:6.1f}% {f}")
            a.top -= 1
            if a.top <= 0:
                break
    print("\n== own (top of stack) share, any function")
    for f, n in own.most_common(40):
        print(f"{100 * n / total:6.1f}% {f}")


if __name__ == "__main__":
    main()
