#!/usr/bin/env bash
# Hold-out acceptance on one lent machine (no network): on every GPU at once, as a new user
# of each board would, (1) the README's hardware command, (2) its first nightly, (3) its
# second nightly - the nightlies keeping that board's history in its own SQLite file, so the
# second night is compared with the first (the same board) and the first with nothing of its
# own (conformance only). One row per board goes to holdout.jsonl (UUID, model, date, each
# step's exit and wall); $OUT also gets g<i>.tgz (that board's reports, nightly.md files and
# logs) and holdout.txt. The runs share the host's CPUs: their walls are not those of a
# machine to itself. Usage: bash tools/gpu-host/holdout.sh
# ($GPUCHAR_HOLDOUT_GPUS: the GPU indices to hold out, e.g. "2 3"; default every GPU)
set -u
OUT=${OUT:-$PWD/gpuchar-out}
mkdir -p "$OUT"
. tools/gpu-host/install.sh
n=$(nvidia-smi -L | grep -c '^GPU')
GPUS=${GPUCHAR_HOLDOUT_GPUS:-$(seq 0 $((n - 1)))}   # which GPUs are held out (default: all)
LIMIT=${GPUCHAR_STEP_S:-200}
board() {   # $1: GPU index; every step on that GPU alone (CUDA_VISIBLE_DEVICES)
  local g=$1 d=/tmp/h$1 t rc
  mkdir -p "$d"
  export CUDA_VISIBLE_DEVICES=$g
  uuid=$(nvidia-smi -i "$g" --query-gpu=uuid --format=csv,noheader)
  name=$(nvidia-smi -i "$g" --query-gpu=name --format=csv,noheader)
  t=$(date +%s)
  timeout -s INT "$LIMIT" python3 -m pytest tests/characterisation -p no:cacheprovider \
    --gpuchar-report "$d/readme" > "$d/readme.log" 2>&1
  rc=$?; r1="\"readme_exit\": $rc, \"readme_wall_s\": $(( $(date +%s) - t ))"
  t=$(date +%s)
  timeout -s INT "$LIMIT" python3 -m pytest_gpuchar.cli.nightly --out "$d/night1" \
    --history "$d/history.sqlite" > "$d/night1.log" 2>&1
  rc=$?; r2="\"night1_exit\": $rc, \"night1_wall_s\": $(( $(date +%s) - t ))"
  t=$(date +%s)
  timeout -s INT "$LIMIT" python3 -m pytest_gpuchar.cli.nightly --out "$d/night2" \
    --history "$d/history.sqlite" > "$d/night2.log" 2>&1
  rc=$?; r3="\"night2_exit\": $rc, \"night2_wall_s\": $(( $(date +%s) - t ))"
  echo "{\"uuid\": \"$uuid\", \"device\": \"$name\", \"date\": \"$(date -u +%Y-%m-%d)\", $r1, $r2, $r3}" \
    > "$d/row.json"
}
for g in $GPUS; do
  board "$g" &
  sleep "${GPUCHAR_STAGGER_S:-5}"
done
wait
for g in $GPUS; do
  d=/tmp/h$g
  cat "$d/row.json" >> "$OUT/holdout.jsonl"
  { echo "== GPU $g: $(cat "$d/row.json")"
    tail -1 "$d/readme.log"; tail -1 "$d/night1.log"; tail -1 "$d/night2.log"
    for k in night1 night2; do
      grep -E "^(First night|Each board|Every figure)" "$d/$k/nightly.md" 2>/dev/null | cut -c1-240
    done; } | tee -a "$OUT/holdout.txt"
  for k in readme night1/report night2/report; do
    [ -f "$d/$k/gpuchar-results.json" ] && gzip -f "$d/$k/gpuchar-results.json"
  done
  tar czf "$OUT/g$g.tgz" -C /tmp "h$g"
done
ls -la "$OUT"
