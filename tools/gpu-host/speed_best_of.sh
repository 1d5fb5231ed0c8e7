#!/usr/bin/env bash
# Issue 41's measure on one GPU: the README's hardware command (`pytest tests/characterisation`:
# the sm_90 static checks and every hardware test) run GPUCHAR_RUNS times (default 2) back to
# back, each with a report and a JUnit XML; the best run's pytest seconds, the counts of every
# run (they must agree), the time by topic and the GPU-busy share of the hardware tests' wall
# (speed_table.py). With GPUCHAR_OLD_PATCH (a patch from this tree back to the old code, see
# compare_codes.sh) the old code's and this code's hardware suites are then compared figure by
# figure (compare_codes.sh: every figure within its spread + 1%?).
# $OUT gets: speed.txt (the table), run-<i>.log, run-<i>.xml, report-<i>.tgz and, with a
# patch, compare/ (compare_codes.sh's summary.txt, compare.md, compare.json, logs).
# Usage: bash tools/gpu-host/speed_best_of.sh [pytest args]   (carry .whl/)
set -u
OUT=${OUT:-$PWD/gpuchar-out}
RUNS=${GPUCHAR_RUNS:-2}
mkdir -p "$OUT"
. tools/gpu-host/install.sh
HERE=tools/gpu-host
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,temperature.gpu \
  --format=csv,noheader | tee "$OUT/speed.txt"
# collection once: compiles and assertion-rewrites the installed package (a cold start the
# runs below do not pay; speed_check.sh times it)
python3 -m pytest tests/characterisation --co -q -p no:cacheprovider > /dev/null 2>&1
for i in $(seq 1 "$RUNS"); do
  t=$(date +%s%N)
  timeout -s INT "${GPUCHAR_NIGHT_S:-300}" python3 -m pytest tests/characterisation -q -rfE \
    --gpuchar-report "/tmp/speed-report-$i" --junitxml "$OUT/run-$i.xml" "$@" \
    > "$OUT/run-$i.log" 2>&1
  echo "run $i: exit $? wall $(( ($(date +%s%N) - t) / 1000000 )) ms" | tee -a "$OUT/speed.txt"
  tar czf "$OUT/report-$i.tgz" -C /tmp "speed-report-$i"
done
python3 "$HERE/speed_table.py" "$OUT" "$RUNS" /tmp/speed-report >> "$OUT/speed.txt" 2>&1
if [ -n "${GPUCHAR_OLD_PATCH:-}" ]; then
  OUT="$OUT/compare" bash "$HERE/compare_codes.sh" "$GPUCHAR_OLD_PATCH" . \
    "${GPUCHAR_DEVICE:-0}" > /dev/null 2>&1
  echo "== old/new comparison (compare_codes.sh)" >> "$OUT/speed.txt"
  cat "$OUT/compare/summary.txt" >> "$OUT/speed.txt" 2>/dev/null
fi
cat "$OUT/speed.txt"
ls -la "$OUT"
