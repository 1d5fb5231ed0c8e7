#!/usr/bin/env bash
# One call on a lent GPU machine (no network), about a minute: the cache-capacity rows of
# tests/characterisation/test_memory_staircase.py (issue 33 item 1: knees bisected to 3%)
# $GPUCHAR_CAPACITY_RUNS times (default 2: the run-to-run move beside the 5% tolerance),
# each into its own report ($OUT/capacity, $OUT/capacity-2); then $OUT/capacity.txt: each
# run's exit and wall, the bisection traces, the driver's l2CacheSize beside the figures,
# the move between runs and the gpuchar-expectations update commands for the first run.
# Usage: bash tools/gpu-host/capacity_check.sh
set -u
OUT=${OUT:-$PWD/gpuchar-out}
mkdir -p "$OUT"
. tools/gpu-host/install.sh "$OUT/install.log"
runs=${GPUCHAR_CAPACITY_RUNS:-2}
reports=()
for k in $(seq 1 "$runs"); do
  dir=$OUT/capacity
  [ "$k" -gt 1 ] && dir=$OUT/capacity-$k
  start=$(date +%s)
  timeout -s INT "${GPUCHAR_CAPACITY_S:-100}" python3 -m pytest \
    tests/characterisation/test_memory_staircase.py -m hardware -p no:cacheprovider -q -rfEx \
    --durations=10 --gpuchar-report "$dir" > "$OUT/pytest-$k.txt" 2>&1
  rc=$?
  echo "run $k: pytest exit $rc in $(( $(date +%s) - start )) s: $(tail -1 "$OUT/pytest-$k.txt")"
  grep -E "^[0-9.]+s (call|setup) .*test_(cache_capacity|fill_granularity)" "$OUT/pytest-$k.txt"
  [ -f "$dir/gpuchar-results.json" ] && reports+=("$dir/gpuchar-results.json")
done > "$OUT/capacity.txt" 2>&1
if [ "${#reports[@]}" -gt 0 ]; then
  python3 tools/gpu-host/capacity_trace.py "${reports[@]}" >> "$OUT/capacity.txt" 2>&1
else
  echo "no report written: see $OUT/pytest-*.txt" >> "$OUT/capacity.txt"
fi
cat "$OUT/capacity.txt"
