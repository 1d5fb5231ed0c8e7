#!/usr/bin/env bash
# Issue 41's measure on one GPU: the README's hardware command (`pytest tests/characterisation`:
# the sm_90 static checks and every hardware test) run GPUCHAR_RUNS times (default 2) back to
# back, each with a report and a JUnit XML; the best run's pytest seconds, the counts of every
# run (they must agree), the time by topic and the GPU-busy share of the hardware tests' wall
# (speed_table.py), and each run's phases (phases.py: start-up, collection, tests, the end).
# With GPUCHAR_OLD_PATCH (a patch from this tree back to the old code, see
# compare_codes.sh) the old code's and this code's hardware suites are then compared figure by
# figure (compare_codes.sh: every figure within its spread + 1%? a change for the nightly gate?).
# Bytecode (GPUCHAR_BYTECODE): `kept` (the default) runs the command as on a user's machine
# after its first run: pip compiles what it installs and Python keeps the bytecode of what it
# imports. This lent machine sets PYTHONDONTWRITEBYTECODE and install.sh installs with
# --no-compile, so every run compiled every module imported before the repository's conftest
# keeps bytecode (the plugin, syrupy, PyYAML: about 1 s a run); the warm-up compiles them
# once with Python's default. `none` runs it as the machine is set (how the speed files in
# results/ were measured until this option came), an earlier `kept`'s bytecode removed first.
# $OUT gets: speed.txt (the table), run-<i>.log, run-<i>.xml, report-<i>.tgz, with
# GPUCHAR_PHASES_PROFILE phases-prof.txt (phases.py's cProfile of the runs' collection and
# end) and, with a patch, compare/ (compare_codes.sh's summary.txt, compare.md, compare.json,
# logs, and its own output in compare_codes.log).
# Usage: bash tools/gpu-host/speed_best_of.sh [pytest args]   (carry .whl/)
set -u
OUT=${OUT:-$PWD/gpuchar-out}
RUNS=${GPUCHAR_RUNS:-2}
mkdir -p "$OUT"
. tools/gpu-host/install.sh
HERE=tools/gpu-host
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,temperature.gpu \
  --format=csv,noheader | tee "$OUT/speed.txt"
BYTECODE=${GPUCHAR_BYTECODE:-kept}
echo "bytecode: $BYTECODE" | tee -a "$OUT/speed.txt"
if [ "$BYTECODE" = kept ]; then
  env -u PYTHONDONTWRITEBYTECODE python3 -m compileall -q -j 0 pytest_gpuchar /tmp/site \
    > /dev/null 2>&1
  env -u PYTHONDONTWRITEBYTECODE python3 -m pytest tests/characterisation --co -q > /dev/null 2>&1
else
  find pytest_gpuchar tests /tmp/site -name __pycache__ -prune -exec rm -rf {} +
  rm -rf .pytest_cache/d/pycache
  # collection once, as before: nothing kept (-p no:cacheprovider under the machine's setting)
  python3 -m pytest tests/characterisation --co -q -p no:cacheprovider > /dev/null 2>&1
fi
rm -f /tmp/speed-phases.jsonl /tmp/speed-phases.jsonl.prof.txt /tmp/speed-ends.txt
for i in $(seq 1 "$RUNS"); do
  t=$(date +%s%N)
  GPUCHAR_T0=$(date +%s.%N) GPUCHAR_PHASES=/tmp/speed-phases.jsonl \
    PYTHONPATH="$PYTHONPATH:$PWD/$HERE" timeout -s INT "${GPUCHAR_NIGHT_S:-300}" \
    python3 -m pytest tests/characterisation -q -rfE -p phases \
    --gpuchar-report "/tmp/speed-report-$i" --junitxml "$OUT/run-$i.xml" "$@" \
    > "$OUT/run-$i.log" 2>&1
  rc=$?
  e=$(date +%s%N)
  awk "BEGIN { printf \"%.3f\\n\", ($e - $t) / 1e9 }" >> /tmp/speed-ends.txt
  echo "run $i: exit $rc wall $(( (e - t) / 1000000 )) ms" | tee -a "$OUT/speed.txt"
  tar czf "$OUT/report-$i.tgz" -C /tmp "speed-report-$i"
done
python3 "$HERE/speed_table.py" "$OUT" "$RUNS" /tmp/speed-report >> "$OUT/speed.txt" 2>&1
python3 "$HERE/phases.py" /tmp/speed-phases.jsonl /tmp/speed-ends.txt >> "$OUT/speed.txt" 2>&1
cp /tmp/speed-phases.jsonl.prof.txt "$OUT/phases-prof.txt" 2>/dev/null   # GPUCHAR_PHASES_PROFILE
if [ -n "${GPUCHAR_OLD_PATCH:-}" ]; then
  mkdir -p "$OUT/compare"
  OUT="$OUT/compare" bash "$HERE/compare_codes.sh" "$GPUCHAR_OLD_PATCH" . \
    "${GPUCHAR_DEVICE:-0}" > "$OUT/compare/compare_codes.log" 2>&1
  crc=$?
  echo "== old/new comparison (compare_codes.sh)" >> "$OUT/speed.txt"
  if [ -s "$OUT/compare/summary.txt" ]; then
    cat "$OUT/compare/summary.txt" >> "$OUT/speed.txt"
  else   # (e.g. a cmp/old.patch older than the tree: it does not apply in reverse)
    echo "compare_codes.sh exit $crc, no summary; its last lines:" >> "$OUT/speed.txt"
    tail -5 "$OUT/compare/compare_codes.log" >> "$OUT/speed.txt"
  fi
fi
cat "$OUT/speed.txt"
ls -la "$OUT"
