#!/usr/bin/env bash
# A fleet sample from one lent machine of several GPUs (no network): the whole suite on every
# GPU at once (pytest-xdist, -n <GPUs>, --gpuchar-distribute=replicate), each board a sample
# board of its model. $OUT gets sample-<host tag>.json.gz (the merged report: every result with
# its board's UUID), sample.txt (exit, wall, boards) and logs.tgz. Then, on the lead's machine:
#   gpuchar-history import sample-*.json.gz --db fleet.sqlite
#   gpuchar-expectations fleet --arch sm_90 --model NAME --runs <the sample's reports> ...
# Usage: bash tools/gpu-host/fleet_sample.sh [extra pytest args]
set -u
OUT=${OUT:-$PWD/gpuchar-out}
LOGS=$OUT/logs
mkdir -p "$LOGS"
. tools/gpu-host/install.sh "$LOGS/install.log"
n=$(nvidia-smi -L | grep -c '^GPU')
nvidia-smi -L > "$LOGS/gpus.txt"
tag=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1 | cut -c5-12)
t0=$(date +%s)
timeout -s INT "${GPUCHAR_SAMPLE_S:-500}" python3 -m pytest tests/characterisation -n "$n" \
  --gpuchar-distribute=replicate -p no:cacheprovider -q --gpuchar-report "$OUT/sample" "$@" \
  > "$LOGS/sample.txt" 2>&1
rc=$?
wall=$(( $(date +%s) - t0 ))
echo "sample on $n GPUs ($(cut -d'(' -f1 "$LOGS/gpus.txt" | sort -u | sed 's/GPU [0-9]*: //' | tr '\n' ' ')): pytest exit $rc, $wall s" \
  | tee "$OUT/sample.txt"
tail -2 "$LOGS/sample.txt" | tee -a "$OUT/sample.txt"
python3 - "$OUT/sample/gpuchar-results.json" >> "$OUT/sample.txt" <<'EOF'
import collections, json, sys
doc = json.load(open(sys.argv[1]))
by = collections.Counter((r.get("provenance") or {}).get("uuid", "") for r in doc["results"])
for g in doc["meta"].get("gpus", []):
    st = collections.Counter(r["status"] for r in doc["results"]
                             if (r.get("provenance") or {}).get("uuid") == g["uuid"])
    print(f"  GPU {g['device_index']} {g['uuid']} {g['device']}: {dict(st)}")
EOF
cat "$OUT/sample.txt"
gzip -c "$OUT/sample/gpuchar-results.json" > "$OUT/sample-$tag.json.gz"
cp "$OUT/sample/gpuchar-summary.md" "$OUT/sample-summary.md" 2>/dev/null
rm -rf "$OUT/sample"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$LOGS"
ls -la "$OUT"
