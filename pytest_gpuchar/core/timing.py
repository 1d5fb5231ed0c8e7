"""Where a run's wall time goes: seconds the test thread spent blocked, by what it waited for
(the driver's JIT, an offline assembly, the GPU), in total and per test; and the GPU-busy
seconds the launch stage measured with CUDA events (what the GPU spent running the tests'
kernels), per test. Pure bookkeeping: a thread-safe accumulator the build and launch layers
feed and the report reads."""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from contextlib import contextmanager

JIT = "jit"            # waiting for the driver to link a module
OFFLINE = "offline"    # waiting for ptxas + nvdisasm
GPU = "gpu"            # waiting for launched kernels to finish
HOST = "host"          # waiting for host work started ahead on a worker (RunCache.ahead)

_lock = threading.Lock()
_total: dict[str, float] = defaultdict(float)
_tests: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
_busy: dict[str, float] = defaultdict(float)     # test -> GPU-busy seconds
_current = {"test": ""}


def set_test(nodeid: str) -> None:
    """The test the following waits are charged to ("" between tests)."""
    _current["test"] = nodeid


@contextmanager
def blocked(kind: str):
    """Charge the time spent in the block to `kind` (total and the current test)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t0
        with _lock:
            _total[kind] += dt
            _tests[_current["test"]][kind] += dt


def charge_busy(seconds: float) -> None:
    """Add GPU-busy seconds (the events of launched kernels) to the current test."""
    with _lock:
        _busy[_current["test"]] += seconds


def busy() -> dict[str, float]:
    """test -> GPU-busy seconds ("" : outside any test)."""
    with _lock:
        return dict(_busy)


def summary(top: int = 12) -> dict:
    """{"total": {kind: s}, "tests": [{test, kind: s, ...}] the `top` most blocked tests}."""
    with _lock:
        tests = sorted(_tests.items(), key=lambda kv: -sum(kv[1].values()))[:top]
        return {"total": {k: round(v, 2) for k, v in sorted(_total.items())},
                "tests": [{"test": t or "(between tests)",
                           **{k: round(v, 2) for k, v in sorted(w.items())}}
                          for t, w in tests]}


def reset() -> None:
    with _lock:
        _total.clear()
        _tests.clear()
        _busy.clear()
        _current["test"] = ""
