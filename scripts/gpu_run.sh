#!/usr/bin/env bash
# Hardware run on a lent GPU machine (no network): install the carried wheels (.whl/) and this
# package into /tmp/site, run the characterisation suite twice back to back (the first run
# records the driver-JIT snapshots with --snapshot-update, the second must agree), compare the
# two runs, and leave reports in $OUT.   Usage: bash scripts/gpu_run.sh [extra pytest args]
set -u
OUT=${OUT:-$PWD/gpuchar-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site .
export PYTHONPATH=/tmp/site
export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv | tee "$OUT/nvidia-smi.txt"
for run in 1 2; do
  extra=()
  [ "$run" = 1 ] && extra=(--snapshot-update)
  start=$(date +%s)
  python3 -m pytest tests/characterisation -p no:cacheprovider -q -rfE \
    --gpuchar-report "$OUT/run$run" "${extra[@]}" "$@" > "$OUT/run$run.log" 2>&1
  echo "run$run: exit $? wall $(( $(date +%s) - start )) s" | tee -a "$OUT/runs.txt"
  tail -5 "$OUT/run$run.log"
done
python3 scripts/compare_runs.py "$OUT/run1/gpuchar-results.json" "$OUT/run2/gpuchar-results.json" \
  | tee "$OUT/repeatability.txt"
tar czf "$OUT/snapshots.tgz" $(find tests -type d -name __snapshots__) 2>/dev/null
