#!/usr/bin/env bash
# On a lent machine with several GPUs: gpu_check.sh's steps ($GPUCHAR_STEPS, default
# fresh,night2) on every GPU at once, one process per GPU (CUDA_VISIBLE_DEVICES), each into its
# own folder; $OUT gets g<i>.tgz (that GPU's whole $OUT) and summary<i>.txt per GPU, so a
# machine of up to four GPUs stays within the eight files a call brings back. The runs share
# the host's CPUs: their pytest times are not those of a machine to itself.
set -u
OUT=${OUT:-$PWD/gpuchar-out}
n=$(nvidia-smi -L | grep -c '^GPU')
for g in $(seq 0 $((n - 1))); do
  mkdir -p "/tmp/g$g"
  (CUDA_VISIBLE_DEVICES=$g OUT=/tmp/g$g GPUCHAR_N1=/tmp/g$g/n0 \
     GPUCHAR_STEPS=${GPUCHAR_STEPS:-fresh,night2} bash tools/gpu-host/gpu_check.sh \
     > "/tmp/g$g.log" 2>&1) &
  sleep "${GPUCHAR_STAGGER_S:-20}"     # one pip install into /tmp/site at a time
done
wait
for g in $(seq 0 $((n - 1))); do
  echo "== GPU $g"; cat "/tmp/g$g/summary.txt"
  cp "/tmp/g$g/summary.txt" "$OUT/summary$g.txt"
  tar czf "$OUT/g$g.tgz" -C /tmp "g$g"
done
