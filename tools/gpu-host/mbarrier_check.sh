#!/usr/bin/env bash
# Do the suite's mbarrier rows run now (issue 33 item 11)? One GPU, one call, under 3 minutes.
# The rows of tests/characterisation/test_movement_async.py named mbarrier (arrive, the
# arrive -> test_wait and arrive -> try_wait chains; their declared fault, if rows.ASYNC_FAULTS
# still holds one, skipped away by unskip_faults.py), static and hardware tests:
#   1. plain, with --snapshot-update --gpuchar-accept-level=none: the verdict without a
#      sanitizer, the figures, and the driver's SASS of the rows recorded (the wait rows never
#      had one; the arrive row's record changed); no expectation is touched
#   2. under compute-sanitizer --tool memcheck   (an arrive or wait on no mbarrier, an address)
#   3. under compute-sanitizer --tool synccheck
# The arch is the GPU's ($MBAR_ARCH overrides it); no GPU: exit 2, nothing run. Each step under
# its own timeout ($MBAR_STEP_S, 45 s; a timeout reads exit 124). Writes
# $OUT/mbarrier.txt (the summary, then each step's log tail), $OUT/mbarrier-logs.tgz (whole
# logs, the report of step 1) and $OUT/mbarrier-snapshots.tgz (every SASS snapshot step 1
# wrote, to be reviewed and committed). Usage: bash tools/gpu-host/mbarrier_check.sh
set -u
OUT=${OUT:-$PWD/gpuchar-out}
STEP_S=${MBAR_STEP_S:-45}
LOGS=$OUT/mbarrier-logs
mkdir -p "$LOGS"
. tools/gpu-host/install.sh "$LOGS/install.log"
export PYTHONPATH="tools/gpu-host:$PYTHONPATH"
SUMMARY=$OUT/mbarrier.txt
arch=${MBAR_ARCH:-$(python3 -c "from pytest_gpuchar.core import device
d = device.detect(); print(d.arch if d else '')" 2>> "$LOGS/install.log")}
if [ -z "$arch" ]; then
  echo "mbarrier_check: no GPU detected: the hardware rows cannot run (exit 2)" | tee "$SUMMARY"
  tar czf "$OUT/mbarrier-logs.tgz" -C "$OUT" mbarrier-logs && rm -rf "$LOGS"
  exit 2
fi
stamp=$(mktemp) && sleep 1
sel=(tests/characterisation/test_movement_async.py -k mbarrier "--gpu-arch=$arch" -p unskip_faults
     -p no:cacheprovider -v -rfEs --gpuchar-watchdog 40)
{
  echo "mbarrier_check ($arch): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)"
  echo "compute-sanitizer: $(compute-sanitizer --version 2>&1 | tail -1)"
  echo "git: $(git log --oneline -1 2>/dev/null || echo 'no git')"
} > "$SUMMARY"

rows() {   # the verdict of each mbarrier test of a pytest log
  grep -E "::test_async_(latency|probe_sass)\[.*mbarrier[^ ]*\] (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)" "$1" |
    sed -E 's/^tests\/characterisation\/test_movement_async.py:://; s/ +\[ *[0-9]+%\]$//'
  grep -E "^(FAILED|ERROR) .*mbarrier" "$1" | cut -c1-400
  grep -m3 -iE "CUDA_ERROR|error 719|illegal|launch failure|ChainError|hung" "$1" | cut -c1-300
}

run_step() {   # name, command...
  local name=$1; shift
  local start=$SECONDS
  timeout -s INT -k 5 "$STEP_S" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  {
    echo; echo "== $name: exit $rc ($((SECONDS - start)) s): $(tail -1 "$LOGS/$name.log" | cut -c1-200)"
    rows "$LOGS/$name.log"
    grep -E "^========= (ERROR SUMMARY|Invalid|Illegal|Barrier|Race|Program hit|    at |Target application)" \
      "$LOGS/$name.log" | head -20 | cut -c1-240
  } >> "$SUMMARY"
}

run_step plain python3 -m pytest "${sel[@]}" --snapshot-update --gpuchar-accept-level=none \
  --gpuchar-report "$LOGS/report"
grep -E "movement\.async\.mbarrier" "$LOGS/report/gpuchar-summary.md" 2>/dev/null |
  cut -c1-260 >> "$SUMMARY"
for tool in memcheck synccheck; do
  run_step "$tool" compute-sanitizer --tool "$tool" --target-processes all --print-limit 10 \
    --error-exitcode 99 python3 -m pytest "${sel[@]}"
done

find tests/characterisation/__sass__ -name '*.sass' -newer "$stamp" > "$LOGS/snapshots.txt"
{
  echo; echo "== SASS snapshots written by step plain ($(wc -l < "$LOGS/snapshots.txt")):"
  cat "$LOGS/snapshots.txt"
  echo; echo "Read: the wait rows (test_async_latency[...arrive_test_wait/try_wait]) PASSED in step"
  echo "plain, their figures above; memcheck and synccheck 'ERROR SUMMARY: 0 errors' and no"
  echo "CUDA_ERROR / 719 line (exit 99: the sanitizer found errors, 124: the step timed out)."
  echo "Under a sanitizer a figure out of tolerance (instrumented timing) is not a fault."
} >> "$SUMMARY"
[ -s "$LOGS/snapshots.txt" ] && tar czf "$OUT/mbarrier-snapshots.tgz" -T "$LOGS/snapshots.txt"
for f in plain memcheck synccheck; do
  { echo; echo "---- $f.log (tail)"; tail -40 "$LOGS/$f.log" | cut -c1-300; } >> "$SUMMARY"
done
tar czf "$OUT/mbarrier-logs.tgz" -C "$OUT" mbarrier-logs && rm -rf "$LOGS"
rm -f "$stamp"
cat "$SUMMARY"
