"""Where a pytest run's wall goes before, between and after its tests, as a pytest plugin
(`-p phases`, this directory on PYTHONPATH): the moments the run reached each stage, in
seconds after GPUCHAR_T0 (the shell's `date +%s.%N` before it started python), appended as
one JSON line to GPUCHAR_PHASES at the end of the run. `main` prints them as a table.
Stages: this plugin loaded (the interpreter and pytest imported; `-p` plugins load before
pytest's entry-point plugins), configured (the entry-point plugins imported, conftests
read), session started (expectations validated), collected, the first test started, the
last test ended, sessionfinish begun and ended (reports, history, the pools closed),
unconfigured; `exit`, the command's end, comes from the shell (`main`'s ENDS).
GPUCHAR_PHASES_PROFILE=collection,finish (either or both) also runs cProfile over pytest's
collection and over the sessionfinish hooks (the reports, the pools' close, the snapshot
report), their top functions by cumulative time appended to GPUCHAR_PHASES.prof.txt.
Usage: python3 tools/gpu-host/phases.py PHASES.jsonl [ENDS]
(ENDS: each run's wall in seconds, one per line, as speed_best_of.sh writes them)"""
from __future__ import annotations

import contextlib
import cProfile
import io
import json
import os
import pstats
import sys
import time

import pytest

STAGES = ("loaded", "configured", "session", "collected", "first_test", "last_test",
          "finish_begun", "finish_ended", "unconfigured", "exit")
_AT: dict[str, float] = {"loaded": time.time()}


_PROFILES: dict[str, cProfile.Profile] = {}
TOP = 40


def _mark(stage: str) -> None:
    _AT.setdefault(stage, time.time())


@contextlib.contextmanager
def _profiled(part: str):
    """cProfile over the block when GPUCHAR_PHASES_PROFILE names `part` (else nothing)."""
    if part not in os.environ.get("GPUCHAR_PHASES_PROFILE", "").split(","):
        yield
        return
    prof = _PROFILES.setdefault(part, cProfile.Profile())
    prof.enable()
    try:
        yield
    finally:
        prof.disable()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection(session):
    with _profiled("collection"):
        return (yield)


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    _mark("configured")


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    _mark("session")


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    _mark("collected")


def pytest_runtest_logstart(nodeid, location):
    _mark("first_test")


def pytest_runtest_logfinish(nodeid, location):
    _AT["last_test"] = time.time()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    _mark("finish_begun")
    try:
        with _profiled("finish"):
            return (yield)
    finally:
        _mark("finish_ended")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    _mark("unconfigured")
    out, t0 = os.environ.get("GPUCHAR_PHASES"), os.environ.get("GPUCHAR_T0")
    if not out or not t0:
        return
    with open(out, "a") as f:
        f.write(json.dumps({k: round(v - float(t0), 3) for k, v in _AT.items()}) + "\n")
    for part, prof in _PROFILES.items():
        text = io.StringIO()
        pstats.Stats(prof, stream=text).strip_dirs().sort_stats("cumulative").print_stats(TOP)
        with open(f"{out}.prof.txt", "a") as f:
            f.write(f"== {part}\n{text.getvalue()}\n")


def rows(path: str, ends: list[float] | None = None) -> list[dict]:
    """Each run's stage times (s after its start), with `exit` where the shell's end is given
    (as seconds after the start: speed_best_of.sh writes them so)."""
    out = [json.loads(line) for line in open(path) if line.strip()]
    for r, end in zip(out, ends or []):
        r["exit"] = end
    return out


def main() -> None:
    runs = rows(sys.argv[1], [float(x) for x in open(sys.argv[2]).read().split()]
                if len(sys.argv) > 2 else None)
    print("\n== phases of each run: seconds from the command's start to each stage, then "
          "each stage's share (the gap since the stage before)")
    print("run " + " ".join(f"{s:>12}" for s in STAGES))
    for i, r in enumerate(runs, 1):
        print(f"{i:>3} " + " ".join(f"{r[s]:>12.2f}" if s in r else f"{'-':>12}"
                                    for s in STAGES))
        gaps, before = [], 0.0
        for s in STAGES:
            if s in r:
                gaps.append(f"{r[s] - before:>12.2f}")
                before = r[s]
            else:
                gaps.append(f"{'-':>12}")
        print("gap " + " ".join(gaps))


if __name__ == "__main__":
    main()
