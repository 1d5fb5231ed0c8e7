"""Read a py-spy speedscope profile of a run (`py-spy record --format speedscope --threads
--idle`) and print where the thread that ran the tests spent its wall, in time order: before
the first test, per test function (its wall; the part waiting for the GPU, for host work or
for a build; the rest is the host's own work in the test thread), and after the last test;
then the functions of the package on top of the host's own samples, overall and per phase.
Usage: python3 tools/gpu-host/pyspy_timeline.py PROFILE.json [--top N]"""
from __future__ import annotations

import argparse
import collections
import json

from pyspy_top import short

# a sample is a wait when it blocks in one of these (function, file part): what it waits for is
# named by the innermost package frame above it (the GPU's poll, a build, work made ahead)
BLOCKING = [("_poll", "core/gpu.py"), ("result", "concurrent/futures"), ("wait", "threading.py"),
            ("get", "cupy/"), ("synchronize", "cupy/"), ("sleep", "")]
WAIT_OF = [("core/gpu.py", "gpu"), ("core/runner.py", "gpu"), ("core/jit.py", "build"),
           ("core/build.py", "build"), ("schedule.py", "build"), ("core/topic.py", "host"),
           ("core/hostpool.py", "host"), ("results/plots", "plots")]
TEST_FILE = "tests/characterisation/"


def load(path: str):
    doc = json.load(open(path))
    frames = doc["shared"]["frames"]
    return frames, doc["profiles"]


def test_thread(profiles: list) -> dict:
    """The profile whose samples run test functions most often."""
    def score(p):
        return sum(w for s, w in zip(p["samples"], p["weights"]) if s and any(
            TEST_FILE in (FR[i].get("file") or "") for i in s))
    return max(profiles, key=score)


FR: list = []


def label(i: int) -> str:
    f = FR[i]
    return f"{f['name']} ({short(f.get('file') or '')})"


def kind(stack: list[int]) -> str:
    """"own" (the host working in this thread) or what the sample waits for."""
    blocked = any(FR[i]["name"].rpartition(".")[2] == n and part in (FR[i].get("file") or "")
                  for i in stack[-3:] for n, part in BLOCKING)
    if not blocked:
        return "own"
    for i in reversed(stack):
        file = FR[i].get("file") or ""
        for part, k in WAIT_OF:
            if part in file:
                return k
    return "idle"


def test_of(stack: list[int]) -> str | None:
    for i in stack:
        f = FR[i]
        if TEST_FILE in (f.get("file") or "") and f["name"].startswith("test_"):
            return f"{f['file'].split(TEST_FILE)[-1]}::{f['name']}"
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    frames, profiles = load(a.profile)
    FR[:] = frames
    p = test_thread(profiles)
    print(f"thread: {p['name']}; {len(p['samples'])} samples, "
          f"{sum(p['weights']):.2f} {p.get('unit', 's')}")
    tests = [test_of(s) for s in p["samples"]]
    last = max((i for i, t in enumerate(tests) if t), default=-1)
    seen_test = False
    order: list[str] = []
    wall: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    own_fn: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for n, (s, w, t) in enumerate(zip(p["samples"], p["weights"], tests)):
        seen_test = seen_test or bool(t)
        key = t or ("before the first test" if not seen_test else
                    "after the last test" if n > last else "between tests")
        if key not in wall:
            order.append(key)
        k = kind(s)
        wall[key][k] += w
        if k == "own":
            pkg = [i for i in s if "pytest_gpuchar/" in (FR[i].get("file") or "")]
            fn = label(pkg[-1] if pkg else s[-1])
            own_fn[key][fn] += w
            own_fn["all"][fn] += w
    cols = ["gpu", "host", "build", "plots", "idle", "own"]
    print(f"\n{'phase / test function':70s} {'wall':>7s}" + "".join(f"{c:>7s}" for c in cols))
    tot = collections.Counter()
    for key in sorted(order, key=lambda k: -sum(wall[k].values())):
        c = wall[key]
        tot.update(c)
        print(f"{key[:70]:70s} {sum(c.values()):7.2f}" + "".join(f"{c[k]:7.2f}" for k in cols))
    print(f"{'all':70s} {sum(tot.values()):7.2f}" + "".join(f"{tot[k]:7.2f}" for k in cols))
    for key in ["all", "before the first test", "between tests", "after the last test",
                *sorted((k for k in order if "::" in k),
                        key=lambda k: -wall[k]["own"])[:8]]:
        if key not in own_fn:
            continue
        print(f"\n== own host samples, {key}: the innermost package function (else the top)")
        for fn, v in own_fn[key].most_common(a.top):
            print(f"  {v:6.2f} {fn}")


if __name__ == "__main__":
    main()
