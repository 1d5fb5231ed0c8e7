#!/usr/bin/env bash
# Where the host time of chosen hardware tests goes, function by function, on one GPU: for
# each -k expression given, the hardware tests it selects run once plain (the listing, JIT
# and kernel caches warmed: what the best of 2 of speed_best_of.sh sees), then once under
# cProfile; `$OUT/cprofile.txt` gets each run's wall and pstats' top functions by own time and
# by cumulative time (C calls included: a launch or copy that blocks shows as its own time).
# Usage: bash tools/gpu-host/cprofile_tests.sh 'EXPR' ['EXPR' ...]
#   e.g. 'test_table_3_mma and f16.f32.m16n8k16' (the tensor sweep, made at its first row)
set -u
OUT=${OUT:-$PWD/gpuchar-out}
TOP=${GPUCHAR_TOP:-45}
mkdir -p "$OUT"
. tools/gpu-host/install.sh
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader \
  | tee "$OUT/cprofile.txt"
i=0
for expr in "$@"; do
  i=$((i + 1))
  args=(tests/characterisation -m hardware -q -k "$expr")
  t=$(date +%s%N)
  python3 -m pytest "${args[@]}" > "$OUT/plain-$i.log" 2>&1
  echo "== [$i] -k '$expr': plain run exit $? wall $(( ($(date +%s%N) - t) / 1000000 )) ms:" \
    "$(tail -1 "$OUT/plain-$i.log")" >> "$OUT/cprofile.txt"
  t=$(date +%s%N)
  python3 -m cProfile -o "/tmp/cprofile-$i.out" -m pytest "${args[@]}" > "$OUT/prof-$i.log" 2>&1
  echo "   profiled run exit $? wall $(( ($(date +%s%N) - t) / 1000000 )) ms:" \
    "$(tail -1 "$OUT/prof-$i.log")" >> "$OUT/cprofile.txt"
  python3 - "/tmp/cprofile-$i.out" "$TOP" >> "$OUT/cprofile.txt" 2>&1 <<'PY'
import io, pstats, sys
for key in ("tottime", "cumulative"):
    s = io.StringIO()
    pstats.Stats(sys.argv[1], stream=s).strip_dirs().sort_stats(key).print_stats(int(sys.argv[2]))
    text = s.getvalue()
    print(f"-- by {key}")
    print(text[text.index("   ncalls"):].rstrip())
PY
done
cat "$OUT/cprofile.txt"
