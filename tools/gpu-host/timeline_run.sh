#!/usr/bin/env bash
# Where the README hardware command's wall goes, in time order, on one GPU: the command once
# as the README runs it (report + JUnit), then once sampled by py-spy in speedscope format
# (every thread, waits included; the wheel carried in .whl/), read by pyspy_timeline.py: the
# test thread's wall before the first test, per test function (waiting for the GPU, a build,
# work made ahead, or the host's own work) and after the last test.
# $OUT gets: run-1.log, run-1.xml, report.tgz (the plain run), speed.txt (its speed_table.py),
# prof.log, timeline.json.gz (the samples), timeline.txt (pyspy_timeline.py).
# Usage: bash tools/gpu-host/timeline_run.sh [pytest args]    (carry .whl/)
set -u
OUT=${OUT:-$PWD/gpuchar-out}
mkdir -p "$OUT"
. tools/gpu-host/install.sh
HERE=tools/gpu-host
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader \
  | tee "$OUT/timeline.txt"
python3 -m pytest tests/characterisation --co -q -p no:cacheprovider > /dev/null 2>&1
t=$(date +%s%N)
timeout -s INT "${GPUCHAR_NIGHT_S:-240}" python3 -m pytest tests/characterisation -q -rfE \
  --gpuchar-report /tmp/speed-report-1 --junitxml "$OUT/run-1.xml" "$@" > "$OUT/run-1.log" 2>&1
echo "run 1: exit $? wall $(( ($(date +%s%N) - t) / 1000000 )) ms" | tee "$OUT/speed.txt"
python3 "$HERE/speed_table.py" "$OUT" 1 /tmp/speed-report >> "$OUT/speed.txt" 2>&1
tar czf "$OUT/report.tgz" -C /tmp speed-report-1
t=$(date +%s)
timeout -s INT "${GPUCHAR_NIGHT_S:-240}" /tmp/site/bin/py-spy record --format speedscope \
  --threads --idle -r 200 -o "$OUT/timeline.json" -- python3 -m pytest tests/characterisation \
  -q -rfE --gpuchar-report /tmp/prof-report "$@" > "$OUT/prof.log" 2>&1
echo "sampled run: exit $? wall $(( $(date +%s) - t )) s: $(tail -1 "$OUT/prof.log")" \
  | tee -a "$OUT/timeline.txt"
python3 "$HERE/pyspy_timeline.py" "$OUT/timeline.json" >> "$OUT/timeline.txt" 2>&1
gzip -f "$OUT/timeline.json"
cat "$OUT/speed.txt" "$OUT/timeline.txt" | head -150
ls -la "$OUT"
