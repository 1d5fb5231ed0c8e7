#!/usr/bin/env bash
# The cyclic garbage collector's pauses in the README hardware command, on one GPU: the
# command run GPUCHAR_RUNS times (default 2) with this tree's code ("new") and as many with
# the same code less the freeze after a SASS parse ("old": core/sass.py's gc.freeze() line
# removed from a copy of the installed package), interleaved old/new, each with the gc_times
# plugin (tools/gpu-host/gc_times.py: per generation the collections and their pauses, the
# longest pauses with their test) and a report; then speed_table.py of each code's runs.
# $OUT gets: gc.txt (the summary, with each code's speed_table.py), <code>/run-<i>.log and
# .xml, gc-<code>.jsonl (every process's pauses).
# Usage: bash tools/gpu-host/gc_check.sh [pytest args]   (carry .whl/)
set -u
OUT=${OUT:-$PWD/gpuchar-out}
RUNS=${GPUCHAR_RUNS:-2}
mkdir -p "$OUT"
. tools/gpu-host/install.sh
HERE=$PWD/tools/gpu-host
rm -rf /tmp/site-old && cp -r /tmp/site /tmp/site-old
sed -i '/^ *gc\.freeze()$/d' /tmp/site-old/pytest_gpuchar/core/sass.py
grep -c "gc.freeze()" /tmp/site/pytest_gpuchar/core/sass.py /tmp/site-old/pytest_gpuchar/core/sass.py \
  > "$OUT/gc.txt"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader \
  | tee -a "$OUT/gc.txt"
PYTHONPATH=/tmp/site python3 -m pytest tests/characterisation --co -q -p no:cacheprovider > /dev/null 2>&1
for i in $(seq 1 "$RUNS"); do
  for code in old new; do
    site=/tmp/site; [ "$code" = old ] && site=/tmp/site-old
    mkdir -p "$OUT/$code"
    t=$(date +%s%N)
    PYTHONPATH="$site:$HERE" GPUCHAR_GC_OUT="$OUT/gc-$code.jsonl" timeout -s INT 300 \
      python3 -m pytest tests/characterisation -q -rfE -p gc_times \
      --gpuchar-report "/tmp/gc-report-$code-$i" --junitxml "$OUT/$code/run-$i.xml" "$@" \
      > "$OUT/$code/run-$i.log" 2>&1
    echo "$code run $i: exit $? wall $(( ($(date +%s%N) - t) / 1000000 )) ms" | tee -a "$OUT/gc.txt"
    grep -E "[0-9]+ passed" "$OUT/$code/run-$i.log" | tail -1 >> "$OUT/gc.txt"
    grep -A4 "^gc pauses" "$OUT/$code/run-$i.log" >> "$OUT/gc.txt"
  done
done
for code in old new; do
  echo "== $code" >> "$OUT/gc.txt"
  python3 "$HERE/speed_table.py" "$OUT/$code" "$RUNS" "/tmp/gc-report-$code" >> "$OUT/gc.txt" 2>&1
done
cat "$OUT/gc.txt"
