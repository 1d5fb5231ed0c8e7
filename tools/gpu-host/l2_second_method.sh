#!/usr/bin/env bash
# One call on a lent H200 (no network), under 2 minutes: the L2 capacity by its two methods,
# side by side (issue 42 item 4): test_cache_capacity[l2] (the random-chase staircase, knee
# bisected) and test_cache_capacity[l2_sequential] (a forward walk over the same footprints,
# the same verified chase kernel, bisected by the same rule; topics/memory/sequential.py).
# Both share the session's staircase, so the pair costs one staircase plus the walk's points.
# Writes $OUT/l2-second-method/ (the report, gzipped), its .pytest.txt and $OUT/l2_second_method.txt:
# pytest's exit and wall, both figures with their brackets, plateaus and bisection steps,
# the driver's l2CacheSize, and the gpuchar-expectations command to accept the new figure.
# GPUCHAR_L2_RUNS=N (default 1): N sessions one after another, each its own report
# (l2-second-method[-i]/), to see how the two figures and their sweeps move between runs.
# Usage: bash tools/gpu-host/l2_second_method.sh
set -u
OUT=${OUT:-$PWD/gpuchar-out}
mkdir -p "$OUT"
. tools/gpu-host/install.sh "$OUT/install.log"
runs=${GPUCHAR_L2_RUNS:-1}
for i in $(seq 1 "$runs"); do
dir=$OUT/l2-second-method$([ "$runs" -gt 1 ] && echo "-$i")
start=$(date +%s)
timeout -s INT "${GPUCHAR_L2_S:-110}" python3 -m pytest \
  tests/characterisation/test_memory_staircase.py -m hardware -p no:cacheprovider -q -rfEx \
  -k "test_cache_capacity and l2 and not near_far" \
  --durations=5 --gpuchar-report "$dir" > "$dir.pytest.txt" 2>&1
rc=$?
{
  echo "== run $i of $runs: pytest exit $rc in $(( $(date +%s) - start )) s: $(tail -1 "$dir.pytest.txt")"
  if [ -f "$dir/gpuchar-results.json" ]; then
    python3 - "$dir/gpuchar-results.json" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
print("device:", rep["meta"].get("device"), rep["meta"].get("uuid"), rep["meta"].get("date"))
for r in rep["results"]:
    if r["key"] in ("memory.capacity.l2", "memory.capacity.l2_sequential",
                    "memory.capacity.l2_driver"):
        v = r.get("value")
        mib = f"{v / 2**20:.2f} MiB" if isinstance(v, (int, float)) else v
        print(f"{r['key']}: {r['status']} {mib}  {r.get('detail', '')}")
        d = r.get("data") or {}
        for s in (d.get("bisection") or {}).get("steps", []):
            print(f"    step {s['footprint_bytes'] / 2**20:.2f} MiB: {s['latency_cycles']} cycles"
                  f" {'on' if s['on_level'] else 'off'} the level")
        if d.get("sweep"):
            pts = zip(d["sweep"]["footprint_bytes"], d["sweep"]["latency_cycles"])
            print("    walk: " + ", ".join(f"{f / 2**20:.1f} MiB {c}" for f, c in pts))
PY
    echo "accept (after review): gpuchar-expectations update --results $dir/gpuchar-results.json --arch sm_90 --key memory.capacity.l2_sequential"
  else
    echo "no report written: see $dir.pytest.txt"
    tail -30 "$dir.pytest.txt"
  fi
} >> "$OUT/l2_second_method.txt" 2>&1
[ -f "$dir/gpuchar-results.json" ] && gzip -f "$dir/gpuchar-results.json"
rm -rf "$dir/artifacts" "$dir/index.html"
done
cat "$OUT/l2_second_method.txt"
