#!/usr/bin/env bash
# Issue 33 item 2 on one lent H200/H100 (no network): the wgmma depth rows of sparse f16 against
# dense per operand source (ss / rs), N and swizzle, plus the other sparse rows, under
# `timeout -s INT` so a hang still returns the report. Driver-JIT SASS snapshots are recorded
# for the new rows (--snapshot-update), expectations are not touched (accept level none).
# $OUT gets:
#   sparse/           the --gpuchar-report of the run (gpuchar-results.json, summary)
#   sparse.txt        the figures as a table (tools/gpu-host/sparse_table.py) and pytest's tail
#   sparse.log        pytest's output
#   sparse-snapshots.tgz   the SASS snapshots the run wrote: driver JIT (hardware tests) and the
#                     host ptxas (the static tests of the same rows, --snapshot-update)
#   sparse-accept.txt the gpuchar-expectations update arguments for the new figures
#                     (accept_new.py: run them on the lead's tree after review)
# Usage: OUT=/path bash tools/gpu-host/sparse_check.sh   (about 1-2 minutes on an H200)
set -u
OUT=${OUT:-$PWD/gpuchar-out}
mkdir -p "$OUT"
. tools/gpu-host/install.sh "$OUT/install.log"
ROWS='(f16.f32 or sp.) and (.ss or .rs)'     # sparse rows, operand-source rows (sparse + dense)
read -r arch dev <<<"$(python3 -c "from pytest_gpuchar.core import device; d = device.detect(); print(d.arch, d.name) if d else print('none none')")"
start=$(date +%s)
timeout -s INT "${GPUCHAR_SPARSE_S:-170}" python3 -m pytest \
  tests/characterisation/test_tensor_wgmma_depth.py -m hardware -p no:cacheprovider -q -rfEs \
  -k "$ROWS" --gpuchar-report "$OUT/sparse" --snapshot-update --gpuchar-accept-level=none \
  > "$OUT/sparse.log" 2>&1
rc=$?
# the host ptxas's static snapshots of the same rows (the offline suite's record for that ptxas)
timeout -s INT 60 python3 -m pytest tests/characterisation/test_tensor_wgmma_depth.py -m static \
  -p no:cacheprovider -q -k "$ROWS" --gpu-arch="$arch" --snapshot-update > "$OUT/sparse-static.log" 2>&1
echo "static (host ptxas, --snapshot-update): exit $? $(tail -1 "$OUT/sparse-static.log")" \
  >> "$OUT/sparse.log"
{
  echo "device: $dev ($arch); pytest exit $rc in $(( $(date +%s) - start )) s; -k '$ROWS'"
  echo "chain: cycles_per_wgmma (c1w1s4, 1 warpgroup); at best: 2*64*N*K / best throughput;"
  echo "B/clk: smem_operand_rate; compl: completion_latency; model: docs/hopper.md section 2"
  echo
  python3 tools/gpu-host/sparse_table.py "$OUT/sparse"
  echo
  tail -6 "$OUT/sparse.log"
} > "$OUT/sparse.txt" 2>&1
cat "$OUT/sparse.txt"
find tests/characterisation/__sass__ -name '*.sass' -newer "$OUT/install.log" \
  -print0 | tar --null -T - -czf "$OUT/sparse-snapshots.tgz"
[ -f "$OUT/sparse/gpuchar-results.json" ] && \
  python3 tools/gpu-host/accept_new.py "$OUT/sparse/gpuchar-results.json" "$arch" "$dev" \
  > "$OUT/sparse-accept.txt" 2>&1
exit $rc
