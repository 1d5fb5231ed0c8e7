#!/usr/bin/env bash
# Where a hardware run's host time goes, on one GPU: the hardware suite once as the README
# runs it (report + JUnit: wall, per-test times, time by topic), then once sampled by py-spy
# (every thread, waits included; the wheel carried in .whl/), read by pyspy_top.py.
# $OUT gets: run.log, run.xml, report.tgz, prof.log, pyspy.txt (the raw samples), profile.txt
# (where the test thread's wall went, by function, and the slowest tests).
# Usage: bash tools/gpu-host/profile_run.sh [pytest args]    (e.g. -k tensor)
set -u
OUT=${OUT:-$PWD/gpuchar-out}
mkdir -p "$OUT"
. tools/gpu-host/install.sh
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader \
  | tee "$OUT/profile.txt"
t=$(date +%s)
timeout -s INT "${GPUCHAR_NIGHT_S:-240}" python3 -m pytest tests/characterisation -m hardware \
  -p no:cacheprovider -q --gpuchar-report /tmp/prof-report --junitxml "$OUT/run.xml" "$@" \
  > "$OUT/run.log" 2>&1
echo "plain run: exit $? wall $(( $(date +%s) - t )) s: $(tail -1 "$OUT/run.log")" | tee -a "$OUT/profile.txt"
grep -A12 "^time by topic" "$OUT/run.log" | head -12 >> "$OUT/profile.txt"
t=$(date +%s)
# sampled, every thread, idle time included (a wait is where a test's wall goes too)
timeout -s INT "${GPUCHAR_NIGHT_S:-240}" /tmp/site/bin/py-spy record --format raw --threads --idle \
  -r 200 -o "$OUT/pyspy.txt" -- python3 -m pytest tests/characterisation -m hardware \
  -p no:cacheprovider -q --gpuchar-report /tmp/prof-report2 "$@" > "$OUT/prof.log" 2>&1
echo "sampled run: exit $? wall $(( $(date +%s) - t )) s: $(tail -1 "$OUT/prof.log")" | tee -a "$OUT/profile.txt"
python3 tools/gpu-host/pyspy_top.py "$OUT/pyspy.txt" >> "$OUT/profile.txt" 2>&1
python3 tools/gpu-host/slowest_tests.py "$OUT/run.xml" 30 "tests of the plain run" >> "$OUT/profile.txt" 2>&1
tar czf "$OUT/report.tgz" -C /tmp prof-report
ls -la "$OUT"
