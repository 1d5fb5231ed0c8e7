"""Which characteristics of a reviewed run to accept after a change of probes: the ones with
no expectation yet (status measured) or out of tolerance (fail), never SPEC's bars. SM-internal
figures (instruction latencies, tensor cores, numerics, DPX) new to the arch go to the arch's
values (one this board fails goes to its own device section), the board-dependent ones
(memory, throughput, launch, data movement, clocks, models) to the device's section. Prints the gpuchar-expectations update commands' arguments, one line per level.
Usage: python3 accept_new.py RESULTS.json ARCH "DEVICE NAME" """
import json
import math
import shlex
import sys

from pytest_gpuchar.results.expectations import is_spec_bar

ARCH_LEVEL = ("latency.", "cpi.", "table_i.", "overhead.", "tensor.", "numerics.", "dpx.")
DEVICE_LEVEL = ("tensor.clock_load.",)   # clocks under load: the board's power and cooling

path, arch, device = sys.argv[1:4]
results = json.load(open(path))["results"]
keys = {"arch": set(), "device": set()}
for r in results:
    value = r.get("value")
    if r["arch"] != arch or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or is_spec_bar(r["key"]):
        continue
    if r["status"] in ("measured", "fail"):
        # an arch-level figure this board fails is this board's own (a second board must
        # not overwrite the first one's arch value)
        arch_level = r["key"].startswith(ARCH_LEVEL) and not r["key"].startswith(DEVICE_LEVEL) \
            and r["status"] == "measured"
        keys["arch" if arch_level else "device"].add(r["key"])
for level, ks in keys.items():
    if ks:
        # a model's entry spans every board of it measured (--fleet)
        args = ["--results", path, "--arch", arch] + (["--device", device, "--fleet"]
                                                      if level == "device" else [])
        print(" ".join(shlex.quote(a) for a in args + [f"--key={k}" for k in sorted(ks)]))
