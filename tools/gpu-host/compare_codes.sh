#!/usr/bin/env bash
# Two checkouts of the suite on one GPU, one after the other: the hardware suite of OLD, then
# of NEW (each installed into its own /tmp/code-*, run from inside its own tree against its own
# snapshots and expectations, --gpuchar-report and a JUnit XML), then every figure compared
# (compare_figures.py: old and new value, spreads, within the larger spread + 1%?, and would the
# nightly gate call the move a change?) with each topic's wall and GPU-busy time. $OUT gets: summary.txt, compare.md, compare.json, old.tgz,
# new.tgz (the reports), logs.tgz.
#
# Usage: bash tools/gpu-host/compare_codes.sh OLD NEW_DIR [GPU_INDEX]
#   OLD: the old tree, or a patch file from the new tree back to it (the old tree is then
#   built under /tmp/old-tree from NEW_DIR with the patch applied in reverse: a whole old tree
#   beside the snapshots no longer fits the device tool's 64 MiB), e.g. prepared on the lead's
#   machine:  git diff --binary 06b60e3 HEAD -- pytest_gpuchar tests/characterisation \
#               expectations conftest.py pyproject.toml tox.ini > cmp/old.patch
#   then on the GPU: bash tools/gpu-host/compare_codes.sh cmp/old.patch . 0
#   (or with a tree: mkdir -p cmp/old && git archive 06b60e3 | tar -x -C cmp/old; ... cmp/old)
# Environment: GPUCHAR_COMPARE_ARGS (pytest arguments for both runs, e.g. -k memory),
# GPUCHAR_COMPARE_MARK (default hardware: the hardware suite; "" for the whole suite),
# GPUCHAR_NIGHT_S (a run's time limit, 480 s).
set -u
NEW=$(cd "$2" && pwd)
if [ -f "$1" ]; then
  PATCH=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
  rm -rf /tmp/old-tree && mkdir -p /tmp/old-tree
  (cd "$NEW" && tar --exclude=./.whl --exclude=./cmp --exclude=./results -cf - .) \
    | tar -xf - -C /tmp/old-tree
  (cd /tmp/old-tree && { git apply -R "$PATCH" 2>/dev/null || patch -s -p1 -R < "$PATCH"; }) \
    || { echo "compare_codes: $1 does not apply in reverse to $2"; exit 2; }
  OLD=/tmp/old-tree
else
  OLD=$(cd "$1" && pwd)
fi
GPU=${3:-0}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-$PWD/gpuchar-out}
LOGS=$OUT/logs
MARK=${GPUCHAR_COMPARE_MARK-hardware}
mkdir -p "$LOGS"
# the carried wheels (CuPy and the suite's dependencies) once, for both codes
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  "$NEW"/.whl/*.whl > "$LOGS/install-deps.log" 2>&1
export PATH=$PATH:/usr/local/cuda/bin
export PYTHONUNBUFFERED=1
nvidia-smi -i "$GPU" --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv > "$LOGS/nvidia-smi.txt" 2>&1
run() {   # run <name> <tree>
  local name=$1 tree=$2 site=/tmp/code-$1
  rm -rf "$site"
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \
    --target "$site" "$tree" > "$LOGS/install-$name.log" 2>&1 ||
    { echo "$name: install failed"; tail -3 "$LOGS/install-$name.log"; }
  local start=$(date +%s)
  (cd "$tree" && PYTHONPATH="$site:/tmp/site" timeout -s INT "${GPUCHAR_NIGHT_S:-480}" \
     python3 -m pytest tests/characterisation ${MARK:+-m "$MARK"} -p no:cacheprovider -q -rfE \
     --gpuchar-device "$GPU" --gpuchar-report "$OUT/$name" --junitxml "$OUT/$name.xml" \
     ${GPUCHAR_COMPARE_ARGS:-} > "$LOGS/$name.log" 2>&1)
  echo "$name: exit $? wall $(( $(date +%s) - start )) s: $(tail -1 "$LOGS/$name.log" | cut -c1-160)"
  grep -A12 "^time by topic" "$LOGS/$name.log" | head -12
}
{
  echo "GPU $GPU: $(tail -1 "$LOGS/nvidia-smi.txt")"
  run old "$OLD"
  run new "$NEW"
  PYTHONPATH="$NEW:/tmp/site" python3 "$HERE/compare_figures.py" "$OUT/old/gpuchar-results.json" \
    "$OUT/new/gpuchar-results.json" --old-junit "$OUT/old.xml" --new-junit "$OUT/new.xml" \
    --old-tree "$OLD" --new-tree "$NEW" --out "$OUT/compare"
  echo "compare: exit $? (0: every figure within its spread + 1%; see compare.md)"
} 2>&1 | tee "$OUT/summary.txt"
for name in old new; do
  mv "$OUT/$name.xml" "$OUT/$name/" 2>/dev/null
  [ -d "$OUT/$name" ] && tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
done
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$LOGS"
ls -la "$OUT"
