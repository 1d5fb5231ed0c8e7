#!/usr/bin/env bash
# One fleet round on one lent host of four (or more) GPUs, no network: the first
# $GPUCHAR_SAMPLE_N GPUs (2) run the whole suite at once (replicate) as new sample boards; the
# host then rebuilds the sample's store (the carried fleet-inputs/ of git history, the
# committed fleet reports, the new sample), re-derives the model's ranges with
# `gpuchar-expectations fleet` (which judges the sample against what it wrote), and holds the
# remaining GPUs out against those ranges (holdout.sh: README command, night 1, night 2).
# A hold-out board is judged by ranges derived without it, in the same call.
#   lead's machine: bash tools/fleet_store.sh --inputs fleet-inputs   (ignored; carry it)
#   device tool:    bash tools/gpu-host/fleet_round.sh   (carry .whl and fleet-inputs)
# $OUT gets: round.txt (summary), sample.json.gz, plan.txt (the fleet plan and its check),
# expectations.tgz (the rewritten expectation files, to commit after review), holdout.jsonl,
# holdout.txt, g<i>.tgz (each hold-out board's reports and logs).
# $GPUCHAR_ROUND_SAMPLE=FILE: take the sample from a report instead of running it (a check of
# the host steps without GPUs).
set -u
OUT=${OUT:-$PWD/gpuchar-out}
mkdir -p "$OUT"
. tools/gpu-host/install.sh
k=${GPUCHAR_SAMPLE_N:-2}
{
  if [ -n "${GPUCHAR_ROUND_SAMPLE:-}" ]; then
    cp "$GPUCHAR_ROUND_SAMPLE" "$OUT/sample.json.gz"
    model=$(python3 -c "import gzip, json, sys
d = json.load(gzip.open(sys.argv[1]))
print(next(r['provenance']['device'] for r in d['results'] if (r.get('provenance') or {}).get('device')))" "$OUT/sample.json.gz")
  else
    n=$(nvidia-smi -L | grep -c '^GPU')
    model=$(nvidia-smi -i 0 --query-gpu=name --format=csv,noheader)
    sample=$(seq -s, 0 $((k - 1)))
    t=$(date +%s)
    CUDA_VISIBLE_DEVICES=$sample timeout -s INT "${GPUCHAR_NIGHT_S:-300}" python3 -m pytest \
      tests/characterisation -n "$k" --gpuchar-distribute=replicate -p no:cacheprovider -q \
      --gpuchar-report /tmp/sample > /tmp/sample.log 2>&1
    echo "sample on GPUs $sample ($model): pytest exit $?, $(( $(date +%s) - t )) s: $(tail -1 /tmp/sample.log | cut -c1-160)"
    gzip -c /tmp/sample/gpuchar-results.json > "$OUT/sample.json.gz"
  fi
  rm -f /tmp/fleet.sqlite
  python3 -m pytest_gpuchar.cli.history import fleet-inputs/*.json.gz results/sm_90/fleet/*.json.gz \
    results/sm_90/fleet/runs/*.json.gz "$OUT/sample.json.gz" --db /tmp/fleet.sqlite | tail -1
  python3 -m pytest_gpuchar.cli.expectations fleet --history /tmp/fleet.sqlite --arch sm_90 \
    --model "$model" > "$OUT/plan.txt" 2>&1
  echo "fleet for $model: exit $? ($(sed -n 1p "$OUT/plan.txt"); $(tail -1 "$OUT/plan.txt"))"
  tar czf "$OUT/expectations.tgz" expectations
  if [ -z "${GPUCHAR_ROUND_SAMPLE:-}" ] && [ "$n" -gt "$k" ]; then
    GPUCHAR_HOLDOUT_GPUS="$(seq -s' ' "$k" $((n - 1)))" bash tools/gpu-host/holdout.sh > /tmp/holdout.log 2>&1
    cat "$OUT/holdout.txt"
  fi
} 2>&1 | tee "$OUT/round.txt"
ls -la "$OUT"
