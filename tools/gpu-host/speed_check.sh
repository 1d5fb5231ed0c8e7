#!/usr/bin/env bash
# The README's hardware command timed on one GPU, cold and warm: pytest's collection once to
# compile and assertion-rewrite the installed package (cold), then `pytest tests/characterisation`
# (the sm_90 static checks and every hardware test) with a report and a JUnit XML; then
# py-spy with native frames over one selection (default: the tensor sweep's first row), to see
# what a Python line spends in CuPy or the driver. $OUT gets: speed.txt (walls, time by topic,
# the slowest tests, the native profile's top), run.log, run.xml, native.txt (raw samples).
# Usage: bash tools/gpu-host/speed_check.sh [-k EXPRESSION for the native profile]
set -u
OUT=${OUT:-$PWD/gpuchar-out}
mkdir -p "$OUT"
. tools/gpu-host/install.sh
SEL=${1:-test_table_3_mma and m16n8k16}
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader \
  | tee "$OUT/speed.txt"
t=$(date +%s%N)
python3 -m pytest tests/characterisation --co -q -p no:cacheprovider > /dev/null 2>&1
echo "collection, cold (compiles and rewrites the package): $(( ($(date +%s%N) - t) / 1000000 )) ms" \
  | tee -a "$OUT/speed.txt"
t=$(date +%s%N)
timeout -s INT "${GPUCHAR_NIGHT_S:-300}" python3 -m pytest tests/characterisation -q -rfE \
  --gpuchar-report /tmp/speed-report --junitxml "$OUT/run.xml" > "$OUT/run.log" 2>&1
rc=$?
echo "README hardware command: exit $rc wall $(( ($(date +%s%N) - t) / 1000000 )) ms: $(tail -1 "$OUT/run.log")" \
  | tee -a "$OUT/speed.txt"
grep -A12 "^time by topic" "$OUT/run.log" | head -12 >> "$OUT/speed.txt"
grep -E "^(FAILED|ERROR)" "$OUT/run.log" >> "$OUT/speed.txt"
python3 tools/gpu-host/slowest_tests.py "$OUT/run.xml" 25 >> "$OUT/speed.txt" 2>&1
timeout -s INT 200 /tmp/site/bin/py-spy record --native --format raw --threads --idle -r 200 \
  -o "$OUT/native.txt" -- python3 -m pytest tests/characterisation -m hardware -q \
  -p no:cacheprovider -k "$SEL" > "$OUT/native.log" 2>&1
rc=$?
echo "native profile of -k '$SEL': exit $rc $(tail -1 "$OUT/native.log")" | tee -a "$OUT/speed.txt"
python3 tools/gpu-host/pyspy_top.py "$OUT/native.txt" --top 40 >> "$OUT/speed.txt" 2>&1
tar czf "$OUT/report.tgz" -C /tmp speed-report
ls -la "$OUT"
