#!/usr/bin/env bash
# The nightly driver-upgrade check on a lent GPU machine (no network), twice:
#  1. install the carried wheels (.whl/) and this package into /tmp/site;
#  2. nightly run 1 (gpuchar-nightly: whole suite, CUDA_CACHE_DISABLE=1, compared with the
#     committed snapshots and expectations);
#     GPUCHAR_NIGHTLY_ACCEPT=1: run 1 records the driver's SASS (--snapshot-update) - the first
#     run of a new suite or driver, after review;
#     GPUCHAR_NIGHTLY_REGEN=<key prefix>[,<prefix>...]: between the runs, write run 1's measured
#     values of the keys under those prefixes into the GPU's per-device expectations (not the peak fractions
#     nor wgmma's achieved/peak: those are the spec's bars, never regenerated);
#     GPUCHAR_NIGHTLY_REGEN_ARCH=1: into the arch's values instead (SM-internal figures);
#  3. nightly run 2, compared with run 1 as the previous run (no change expected);
#  4. export the model parameters of run 2 (gpuchar-model-params).
# $OUT gets at most 8 files: nightly.txt, nightly1.md, nightly2.md, nightly1.tgz, nightly2.tgz,
# snapshots.tgz, expectations.tgz, model-params.yaml.
# Usage: bash tools/gpu-host/gpu_nightly.sh [extra pytest args]; GPUCHAR_TESTS selects test paths.
set -u
TESTS=${GPUCHAR_TESTS:-tests/characterisation}
OUT=${OUT:-$PWD/gpuchar-out}
mkdir -p "$OUT"
. tools/gpu-host/install.sh
arch=$(python3 -c "from pytest_gpuchar.core import device; d = device.detect(); print(d.arch if d else '')")
dev=$(python3 -c "from pytest_gpuchar.core import device; d = device.detect(); print(d.name if d else '')")
accept=()
[ "${GPUCHAR_NIGHTLY_ACCEPT:-0}" = 1 ] && accept=(--snapshot-update)
start=$(date +%s)
python3 -m pytest_gpuchar.cli.nightly --out "$OUT/n1" $TESTS -- "${accept[@]}" "$@"
echo "nightly run 1: exit $? wall $(( $(date +%s) - start )) s" | tee -a "$OUT/nightly.txt"
if [ -n "${GPUCHAR_NIGHTLY_REGEN:-}" ] && [ -n "$arch" ]; then
  keys=$(python3 - "$OUT/n1/report/gpuchar-results.json" "$GPUCHAR_NIGHTLY_REGEN" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
prefixes = tuple(x for x in sys.argv[2].split(",") if x)
print(" ".join(sorted({f"--key={r['key']}" for r in res if r["key"].startswith(prefixes)
                       and ".peak_fraction." not in r["key"] and not r["key"].endswith(".achieved_peak")
                       and r.get("value") is not None})))
PY
)
  level=(--device "$dev")
  [ "${GPUCHAR_NIGHTLY_REGEN_ARCH:-0}" = 1 ] && level=()
  python3 -m pytest_gpuchar.cli.expectations update --root expectations "${level[@]}" \
    --results "$OUT/n1/report/gpuchar-results.json" --arch "$arch" $keys | tee -a "$OUT/nightly.txt"
fi
start=$(date +%s)
python3 -m pytest_gpuchar.cli.nightly --out "$OUT/n2" --previous "$OUT/n1/nightly.json" $TESTS -- "$@"
echo "nightly run 2: exit $? wall $(( $(date +%s) - start )) s" | tee -a "$OUT/nightly.txt"
python3 -m pytest_gpuchar.cli.nightly --repeatability "$OUT/n1/report/gpuchar-results.json" \
  "$OUT/n2/report/gpuchar-results.json" > "$OUT/n2/repeatability.txt" 2>&1
head -12 "$OUT/n2/repeatability.txt" >> "$OUT/nightly.txt"
[ -n "$arch" ] && python3 -m pytest_gpuchar.cli.model_params --results "$OUT/n2/report/gpuchar-results.json" \
  --arch "$arch" -o "$OUT/model-params.yaml" >> "$OUT/nightly.txt" 2>&1
for k in 1 2; do
  cp "$OUT/n$k/nightly.md" "$OUT/nightly$k.md" 2>/dev/null
  grep -h "gpuchar-nightly:" "$OUT/n$k/pytest.log" >/dev/null 2>&1
  tail -4 "$OUT/n$k/pytest.log" >> "$OUT/nightly.txt" 2>/dev/null
  tar czf "$OUT/nightly$k.tgz" -C "$OUT" "n$k" && rm -rf "$OUT/n$k"
done
tar czf "$OUT/snapshots.tgz" $(find tests -type d -name __sass__) 2>/dev/null
tar czf "$OUT/expectations.tgz" expectations
cat "$OUT/nightly.txt"
