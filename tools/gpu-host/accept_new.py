"""Which characteristics of a reviewed run to accept after a change of probes: the ones with
no expectation yet (status measured) or out of tolerance (fail), never SPEC's bars. SM-internal
figures (instruction latencies, tensor cores, numerics, DPX) go to the arch's values, the
board-dependent ones (memory, throughput, launch, data movement, clocks, models) to the device's
section. Prints the gpuchar-expectations update commands' arguments, one line per level.
Usage: python3 accept_new.py RESULTS.json ARCH "DEVICE NAME" """
import json
import shlex
import sys

from pytest_gpuchar.results.expectations import is_spec_bar

ARCH_LEVEL = ("latency.", "cpi.", "table_i.", "overhead.", "tensor.", "numerics.", "dpx.")

path, arch, device = sys.argv[1:4]
results = json.load(open(path))["results"]
keys = {"arch": set(), "device": set()}
for r in results:
    if r["arch"] != arch or r.get("value") is None or is_spec_bar(r["key"]):
        continue
    if r["status"] in ("measured", "fail"):
        keys["arch" if r["key"].startswith(ARCH_LEVEL) else "device"].add(r["key"])
for level, ks in keys.items():
    if ks:
        args = ["--results", path, "--arch", arch] + (["--device", device] if level == "device"
                                                      else [])
        print(" ".join(shlex.quote(a) for a in args + [f"--key={k}" for k in sorted(ks)]))
