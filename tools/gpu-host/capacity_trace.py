"""The cache capacities of one or more runs of test_memory_staircase.py (issue 33 item 1), as
text: per run, each capacity with its bisection trace (footprint, latency, spread, on the
level or not), the staircase points around each knee, the driver's l2CacheSize beside the L2
figures, the capacity tests' wall time; then the gpuchar-expectations update commands that
write the figures of the first run (L1 at the arch level, the L2 ones in the device's
section).
Usage: python3 capacity_trace.py OUT/capacity*/gpuchar-results.json"""
import json
import shlex
import sys

MiB = 2 ** 20
KEYS = ("memory.capacity.l1", "memory.capacity.l2_near", "memory.capacity.l2")


def size(n):
    return f"{n / MiB:.2f} MiB" if n >= MiB else f"{n / 1024:.1f} KiB"


def staircase_around(data, lo, hi):
    """The staircase points from one below lo to one above hi."""
    fps, lat, sp = data["footprint_bytes"], data["latency_cycles"], data["spread_cycles"]
    i = max(0, max([k for k, f in enumerate(fps) if f <= lo], default=0) - 1)
    j = min(len(fps), min([k for k, f in enumerate(fps) if f >= hi], default=len(fps)) + 2)
    return [f"{size(fps[k])}: {lat[k]:.1f} +- {sp[k]:.1f}" for k in range(i, j)]


def one(path):
    doc = json.load(open(path))
    meta, results = doc["meta"], doc["results"]
    by = {r["key"]: r for r in results}
    print(f"== {path}: {meta.get('device')} {meta.get('uuid', '')[:12]} driver "
          f"{meta.get('driver')} ({meta.get('date', '')[:19]})")
    for key in KEYS:
        r = by.get(key)
        if r is None:
            print(f"{key}: no figure")
            continue
        print(f"{key} = {r['value']:.0f} B ({size(r['value'])}) [{r['status']}; expected "
              f"{r.get('expected') or '-'}]")
        print(f"  {r.get('detail', '')}")
        b = (r.get("data") or {}).get("bisection")
        if not b:
            continue
        print(f"  rule: <= {b['limit_cycles']} cycles (plateau {b['plateau_cycles']} + "
              f"{b['rel']:.0%}); next level {b['above_cycles']}; [{size(b['lo'])}, "
              f"{size(b['hi'])}) = {b['resolution']:.2%} wide")
        for s in b["steps"]:
            print(f"    step {size(s['footprint_bytes']):>12}: {s['latency_cycles']:7.1f} +- "
                  f"{s.get('spread_cycles', 0):5.1f} cycles ({s.get('warm', '?')}) "
                  f"{'on the level' if s['on_level'] else 'off'}")
        print("    staircase: " + "; ".join(staircase_around(r["data"], b["lo"], b["hi"])))
    note = by.get("memory.capacity.l2_driver")
    print(f"driver: {note['detail'] if note else 'no memory.capacity.l2_driver note'}")
    far = by.get("memory.latency.l2_far")
    if far:
        print(f"memory.latency.l2_far = {far['value']:.1f} cycles [{far['status']}]")
    for t in meta.get("time_by_topic") or []:
        print(f"time: {t}")
    return meta, results


def main(paths):
    if not paths:
        sys.exit(__doc__)
    runs = [one(p) for p in paths]
    meta, results = runs[0]
    if len(runs) > 1:
        print("== run to run")
        for key in KEYS:
            vals = [next((r["value"] for r in rs if r["key"] == key), None) for _, rs in runs]
            got = [v for v in vals if v is not None]
            move = (max(got) - min(got)) / min(got) if len(got) > 1 else 0.0
            print(f"{key}: {[size(v) if v else None for v in vals]} (moved {move:.1%})")
    device, arch = meta.get("device"), meta.get("arch", "sm_90")
    cmd = ["python3", "-m", "pytest_gpuchar.cli.expectations", "update", "--results", paths[0],
           "--arch", arch]
    print("== write the first run's figures (existing entries keep their 5% tolerance):")
    print(" ".join(map(shlex.quote, cmd + ["--key=memory.capacity.l1"])))
    print(" ".join(map(shlex.quote, cmd + ["--device", device, "--key=memory.capacity.l2",
                                           "--key=memory.capacity.l2_near"])))


if __name__ == "__main__":
    main(sys.argv[1:])
