#!/usr/bin/env bash
# The nightly gate's real-fault rows (results/sm_90/gate.md) on one lent GPU, after
# holdout.sh has run that board's README command and two nights (its history in
# /tmp/h$GPU/history.sqlite). Each fault night is judged against a copy of that history:
#   corun  another process runs a compute kernel (CuPy matmuls) on the GPU for the whole night
#   optlvl the driver JIT at optimisation level 1 (GPUCHAR_JIT_OPT_LEVEL=1) instead of its
#          default, a stand-in for a compiler change
# Writes $OUT/faults.json (each night's exit, verdict, the other processes NVML named, the
# changes by kind and severity, the SASS snapshots that differ, the figures that moved most)
# and $OUT/faults.tgz (the nights' nightly.md and nightly.json).
# Usage: GPUCHAR_HOLDOUT_GPUS=0 bash tools/gpu-host/holdout.sh; bash tools/gpu-host/gate_faults.sh
set -u
OUT=${OUT:-$PWD/gpuchar-out}
G=${GPUCHAR_FAULT_GPU:-0}
H=/tmp/h$G/history.sqlite
D=/tmp/hf
mkdir -p "$D" "$OUT"
. tools/gpu-host/install.sh
export CUDA_VISIBLE_DEVICES=$G
LIMIT=${GPUCHAR_STEP_S:-240}
[ -f "$H" ] || { echo "gate_faults: no history $H (run holdout.sh first)"; exit 3; }

cp "$H" "$D/corun.sqlite"
python3 - <<'PY' > "$D/load.log" 2>&1 &
import time, cupy as cp
a = cp.random.rand(4096, 4096, dtype=cp.float32)
end = time.time() + 600
while time.time() < end:
    for _ in range(20):
        a = (a @ a) * 1e-3
    cp.cuda.Stream.null.synchronize()
PY
load=$!
sleep 5
timeout -s INT "$LIMIT" python3 -m pytest_gpuchar.cli.nightly --out "$D/corun" \
  --history "$D/corun.sqlite" > "$D/corun.log" 2>&1
echo "corun: exit $? (load pid $load)" | tee -a "$OUT/faults.txt"
kill "$load" 2>/dev/null; wait "$load" 2>/dev/null

cp "$H" "$D/optlvl.sqlite"
GPUCHAR_JIT_OPT_LEVEL=1 timeout -s INT "$LIMIT" python3 -m pytest_gpuchar.cli.nightly \
  --out "$D/optlvl" --history "$D/optlvl.sqlite" > "$D/optlvl.log" 2>&1
echo "optlvl: exit $?" | tee -a "$OUT/faults.txt"

python3 - "$D" > "$OUT/faults.json" <<'PY'
import collections, json, sys
from pathlib import Path
out = {}
for night in ("corun", "optlvl"):
    p = Path(sys.argv[1]) / night / "nightly.json"
    if not p.exists():
        out[night] = {"missing": str(p)}
        continue
    doc = json.loads(p.read_text())
    ch = doc["changes"]
    kinds = collections.Counter(f"{c['kind']}/{c['severity']}" for c in ch)
    moved = []
    for c in ch:
        if c["kind"] in ("value", "expectation") and isinstance(c.get("old"), (int, float)) \
                and isinstance(c.get("new"), (int, float)) and c["old"]:
            moved.append((abs(c["new"] - c["old"]) / abs(c["old"]), c["key"], c["old"],
                          c["new"], c["severity"]))
    moved.sort(reverse=True)
    out[night] = {"exit": doc["exit"], "verdict": doc["verdict"],
                  "pytest_exit": doc["pytest_exit"], "wall_s": doc["wall_s"],
                  "board": (doc["environment"]["before"].get("board") or {}).get("uuid"),
                  "other_processes": doc["environment"].get("other_processes"),
                  "process_watch": doc["environment"].get("process_watch"),
                  "changes": dict(kinds),
                  "sass": sorted(c["key"] for c in ch if c["kind"] == "sass")[:40],
                  "sass_count": sum(c["kind"] == "sass" for c in ch),
                  "moved_top": [list(m) for m in moved[:25]],
                  "moved_count": len(moved)}
print(json.dumps(out, indent=1))
PY
tar czf "$OUT/faults.tgz" -C /tmp hf/corun/nightly.md hf/optlvl/nightly.md hf/corun.log \
  hf/optlvl.log hf/load.log 2>/dev/null
cat "$OUT/faults.txt"
