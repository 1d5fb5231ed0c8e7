#!/usr/bin/env bash
# Hardware run on a lent GPU machine (no network).
#  1. install the carried wheels (.whl/) and this package into /tmp/site;
#  2. run the characterisation suite (records new snapshots with --snapshot-update);
#  3. regenerate the GPU arch's expectations from that run (gpuchar-expectations update);
#  4. run the suite again, judged against those expectations and snapshots (a no-change run);
#  5. compare the two runs (repeatability) and leave everything in $OUT (8 files at most:
#     runs.txt, repeatability.txt, run1.tgz, run2.tgz, expectations.tgz, snapshots.tgz, logs.tgz).
# Usage: bash tools/gpu-host/gpu_run.sh [extra pytest args]
# Environment: GPUCHAR_TESTS (test paths, default tests/characterisation), GPUCHAR_RUNS (1: a
# single run, snapshots recorded and expectations regenerated, no repeatability check).
set -u
TESTS=${GPUCHAR_TESTS:-tests/characterisation}
RUNS=${GPUCHAR_RUNS:-2}
OUT=${OUT:-$PWD/gpuchar-out}
mkdir -p "$OUT/logs"
. tools/gpu-host/install.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv > "$OUT/logs/nvidia-smi.txt"
arch=$(python3 -c "from pytest_gpuchar.core import device; d = device.detect(); print(d.arch if d else '')")
for run in $(seq 1 "$RUNS"); do
  extra=()
  [ "$run" = 1 ] && extra=(--snapshot-update)
  start=$(date +%s)
  python3 -m pytest $TESTS -p no:cacheprovider -q -rfE \
    --gpuchar-report "$OUT/run$run" "${extra[@]}" "$@" > "$OUT/logs/run$run.log" 2>&1
  echo "run$run: exit $? wall $(( $(date +%s) - start )) s" | tee -a "$OUT/runs.txt"
  tail -3 "$OUT/logs/run$run.log"
  if [ "$run" = 1 ] && [ -n "$arch" ]; then
    python3 -m pytest_gpuchar.cli.expectations update --root expectations \
      --results "$OUT/run1/gpuchar-results.json" --arch "$arch" | tee -a "$OUT/runs.txt"
    tar czf "$OUT/expectations.tgz" expectations
  fi
done
if [ "$RUNS" -ge 2 ]; then
  python3 -m pytest_gpuchar.cli.nightly --repeatability "$OUT/run1/gpuchar-results.json" \
    "$OUT/run2/gpuchar-results.json" > "$OUT/repeatability.txt"
  head -3 "$OUT/repeatability.txt"
fi
# at most 8 files come back: each run's report (JSON, Markdown, artifacts/) as one archive
for run in $(seq 1 "$RUNS"); do
  tar czf "$OUT/run$run.tgz" -C "$OUT" "run$run" && rm -rf "$OUT/run$run"
done
tar czf "$OUT/snapshots.tgz" $(find tests -type d -name __sass__) 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
