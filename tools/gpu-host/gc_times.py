"""A pytest plugin for measuring where the cyclic garbage collector's pauses fall in a run:
`PYTHONPATH=tools/gpu-host pytest -p gc_times ...` times every collection (gc.callbacks) and,
at the end, prints per generation the count, the total and the longest pause, and the ten
longest pauses with the test that was running (PYTEST_CURRENT_TEST); with GPUCHAR_GC_OUT set,
also appends them as one JSON line to that file (one line per process: pytest-xdist workers
load the plugin too)."""
from __future__ import annotations

import gc
import json
import os
import time

_start: dict = {}
_pauses: list[tuple[float, int, float, int, str]] = []   # (at s, generation, pause s, n, test)
_t0 = time.perf_counter()


def _callback(phase: str, info: dict) -> None:
    if phase == "start":
        _start["t"] = time.perf_counter()
        return
    t = _start.pop("t", None)
    if t is None:
        return
    now = time.perf_counter()
    _pauses.append((round(t - _t0, 3), info["generation"], now - t, info.get("collected", 0),
                    os.environ.get("PYTEST_CURRENT_TEST", "")))


def pytest_configure(config) -> None:
    gc.callbacks.append(_callback)


def pytest_unconfigure(config) -> None:
    if _callback in gc.callbacks:
        gc.callbacks.remove(_callback)
    who = getattr(config, "workerinput", {}).get("workerid", "controller")
    per = {}
    for _, g, p, _, _ in _pauses:
        n, tot, mx = per.get(g, (0, 0.0, 0.0))
        per[g] = (n + 1, tot + p, max(mx, p))
    lines = [f"gc pauses ({who}, {len(_pauses)} collections, "
             f"threshold {gc.get_threshold()}, frozen {gc.get_freeze_count()}):"]
    lines += [f"  generation {g}: {n} collections, {tot:.3f} s, longest {mx:.3f} s"
              for g, (n, tot, mx) in sorted(per.items())]
    for at, g, p, n, test in sorted(_pauses, key=lambda x: -x[2])[:10]:
        lines.append(f"  {p:.3f} s gen {g} at {at:.1f} s ({n} collected) {test}")
    print("\n".join(lines))
    out = os.environ.get("GPUCHAR_GC_OUT")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps({"who": who, "pid": os.getpid(), "per_generation": per,
                                "pauses": sorted(_pauses, key=lambda x: -x[2])[:50]}) + "\n")
