#!/usr/bin/env bash
# One call on a lent GPU machine (no network): the steps in $GPUCHAR_STEPS, in order.
#   novisible  the suite's Table II with CUDA_VISIBLE_DEVICES="" (the GPU hidden: must skip)
#   night1     gpuchar-nightly against the committed baseline of this device (or none), with
#              --snapshot-update (the driver's SASS recorded; expectations not touched), then
#              the new or out-of-tolerance figures accepted (accept_new.py: SM-internal ones
#              at the arch level, board-dependent ones per device)
#   night2     gpuchar-nightly against night 1 (a no-change night: exit 0 expected), the
#              repeatability of the pair, the model parameters
#              ($GPUCHAR_N1: night 1's folder when it ran in an earlier call)
#   diag       pytest on $GPUCHAR_DIAG (test ids) alone, under a 150 s timeout, -x
#   fresh      gpuchar-nightly against the committed baseline only (a fresh machine's first night)
#   fleet      (several GPUs) the suite with -n <GPUs>, --gpuchar-distribute=replicate then
#              split: wall times, the report's results per GPU, the board-to-board table
#   kill       (several GPUs) a replicate run whose newest worker is killed (-9) after
#              $GPUCHAR_KILL_S (60) s: exit code and what its report kept
#   profile    the suite under cProfile (host time: where a night's seconds go), the top
#              functions by cumulative and own time in profile-top.txt
#   demo       pytest --snapshot-update -k add on Table II into a copy of the expectations:
#              the diff of what it accepted
#   bindings   check_bindings.py: the driver calls through cuda-bindings and NVML beside the old
#              ctypes / nvidia-smi code (JIT cubins byte-identical, launches, occupancy, tensor
#              maps, NVML's fields); its table in summary.txt, its JSON in logs.tgz
#   mbarrier   mbarrier_check.sh: the suite's mbarrier rows plain (the driver's SASS recorded),
#              then under compute-sanitizer memcheck and synccheck (issue 33 item 11)
#   sample     (several GPUs) the whole suite on every GPU at once (replicate), recorded into
#              $OUT/history.sqlite: each board a fleet sample board; $OUT/sample.json.gz
#   exits      gpuchar-nightly's exit codes on Table II (issue 30): on the GPU (0-2 expected,
#              never 4; meta.hardware_ran > 0), the GPU hidden (4, the reason last), and
#              --static-only (0-3)
# $GPUCHAR_EXTRA: pytest arguments added to both nights (e.g. --deselect of a probe that hangs).
# Each night runs under timeout -s INT $GPUCHAR_NIGHT_S (480 s) so a hang still returns its logs.
# $OUT gets at most 8 files. Usage: GPUCHAR_STEPS=night1,night2 bash tools/gpu-host/gpu_check.sh
set -u
OUT=${OUT:-$PWD/gpuchar-out}
STEPS=${GPUCHAR_STEPS:-night1,night2}
LOGS=$OUT/logs
mkdir -p "$LOGS"
. tools/gpu-host/install.sh "$LOGS/install.log"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv > "$LOGS/nvidia-smi.txt" 2>&1
read -r arch dev <<<"$(python3 -c "from pytest_gpuchar.core import device; d = device.detect(); print(d.arch, d.name) if d else print('none none')")"
echo "device: $dev ($arch)" | tee "$OUT/summary.txt"
nightly() { python3 -m pytest_gpuchar.cli.nightly "$@"; }
for step in ${STEPS//,/ }; do
  start=$(date +%s)
  case $step in
    novisible)
      CUDA_VISIBLE_DEVICES= python3 -m pytest tests/characterisation/test_table_ii_dependency.py \
        -p no:cacheprovider -q -rs > "$LOGS/novisible.log" 2>&1
      echo "novisible: exit $? $(grep -m1 -E '^SKIPPED|skipped' "$LOGS/novisible.log" | cut -c1-150)";;
    night1)
      timeout -s INT "${GPUCHAR_NIGHT_S:-480}" python3 -m pytest_gpuchar.cli.nightly --out "$OUT/n1" -- \
        --snapshot-update --gpuchar-accept-level=none --durations=30 ${GPUCHAR_EXTRA:-} \
        > "$LOGS/n1.txt" 2>&1
      echo "night1: exit $? $(tail -1 "$LOGS/n1.txt" | cut -c1-200)"
      python3 tools/gpu-host/accept_new.py "$OUT/n1/report/gpuchar-results.json" "$arch" "$dev" |
        while read -r line; do
          eval "python3 -m pytest_gpuchar.cli.expectations update --root expectations $line"
        done >> "$LOGS/accept.txt" 2>&1
      echo "accepted: $(grep -c wrote "$LOGS/accept.txt") files";;
    night2)
      n1=${GPUCHAR_N1:-$OUT/n1}
      timeout -s INT "${GPUCHAR_NIGHT_S:-480}" python3 -m pytest_gpuchar.cli.nightly --out "$OUT/n2" \
        --previous "$n1/nightly.json" -- ${GPUCHAR_EXTRA:-} > "$LOGS/n2.txt" 2>&1
      echo "night2: exit $? $(tail -1 "$LOGS/n2.txt" | cut -c1-200)"
      python3 -m pytest_gpuchar.cli.nightly --repeatability "$n1/report/gpuchar-results.json" \
        "$OUT/n2/report/gpuchar-results.json" > "$OUT/repeatability.txt" 2>&1
      grep -E "^(ALL|[a-z_]+):" "$OUT/repeatability.txt"
      python3 -m pytest_gpuchar.cli.model_params --results "$OUT/n2/report/gpuchar-results.json" \
        --arch "$arch" -o "$LOGS/model-params.yaml" > /dev/null 2>&1;;
    diag)
      timeout 150 python3 -m pytest ${GPUCHAR_DIAG:-} -p no:cacheprovider -q -x \
        --gpuchar-watchdog 10 > "$LOGS/diag.txt" 2>&1
      echo "diag: exit $?"; grep -E "^E .*(Probe|Chain|Error)|passed|failed" "$LOGS/diag.txt" |
        cut -c1-300 | tail -12;;
    fresh)
      timeout -s INT "${GPUCHAR_NIGHT_S:-480}" python3 -m pytest_gpuchar.cli.nightly --out "$OUT/n0" \
        -- ${GPUCHAR_EXTRA:-} > "$LOGS/n0.txt" 2>&1
      echo "fresh night vs committed baseline: exit $? $(tail -1 "$LOGS/n0.txt" | cut -c1-200)";;
    fleet)
      n=$(nvidia-smi -L | grep -c '^GPU')
      for mode in ${GPUCHAR_FLEET_MODES:-replicate split}; do
        t0=$(date +%s)
        timeout -s INT "${GPUCHAR_NIGHT_S:-480}" python3 -m pytest tests/characterisation -n "$n" \
          --gpuchar-distribute=$mode -p no:cacheprovider -q --gpuchar-report "$OUT/fleet-$mode" \
          ${GPUCHAR_EXTRA:-} > "$LOGS/fleet-$mode.txt" 2>&1
        echo "fleet $mode on $n GPUs: exit $?, $(( $(date +%s) - t0 )) s: $(tail -1 "$LOGS/fleet-$mode.txt" | cut -c1-160)"
        python3 tools/gpu-host/report_boards.py "$OUT/fleet-$mode/gpuchar-results.json"
      done;;
    kill)
      n=$(nvidia-smi -L | grep -c '^GPU')
      python3 -m pytest tests/characterisation -n "$n" --gpuchar-distribute=replicate \
        -p no:cacheprovider -q --gpuchar-report "$OUT/fleet-kill" ${GPUCHAR_EXTRA:-} \
        > "$LOGS/fleet-kill.txt" 2>&1 &
      pid=$!
      sleep "${GPUCHAR_KILL_S:-60}"
      victim=$(pgrep -n -P "$pid")
      echo "kill -9 worker pid $victim at ${GPUCHAR_KILL_S:-60} s"; kill -9 "$victim"
      timeout 300 tail --pid="$pid" -f /dev/null; wait "$pid"
      echo "kill: exit $? $(tail -1 "$LOGS/fleet-kill.txt" | cut -c1-160)"
      grep -E "crashed|node down|worker .* crashed|replaced" "$LOGS/fleet-kill.txt" | head -3
      python3 tools/gpu-host/report_boards.py "$OUT/fleet-kill/gpuchar-results.json";;
    profile)
      timeout -s INT "${GPUCHAR_NIGHT_S:-480}" python3 -m cProfile -o "$OUT/night.prof" -m pytest \
        tests/characterisation -p no:cacheprovider -q ${GPUCHAR_EXTRA:-} > "$LOGS/profile.txt" 2>&1
      echo "profile: exit $? $(tail -1 "$LOGS/profile.txt" | cut -c1-160)"
      python3 -c "import pstats, sys; s = pstats.Stats('$OUT/night.prof', stream=sys.stdout)
s.sort_stats('cumulative').print_stats(60); s.sort_stats('tottime').print_stats(40)" \
        > "$OUT/profile-top.txt" 2>&1;;
    bindings)
      OUT="$LOGS" timeout 600 python3 tools/gpu-host/check_bindings.py > "$LOGS/bindings.log" 2>&1
      echo "bindings: exit $? ($(tail -1 "$LOGS/bindings.log"))"
      cat "$LOGS/check_bindings.txt";;
    demo)
      rm -rf /tmp/exp-demo && cp -r expectations /tmp/exp-demo
      GPUCHAR_EXPECTATIONS=/tmp/exp-demo python3 -m pytest tests/characterisation/test_table_ii_dependency.py \
        --snapshot-update --gpuchar-accept-level=arch -k add -p no:cacheprovider -q > "$LOGS/demo.log" 2>&1
      diff -ru expectations /tmp/exp-demo > "$LOGS/accept-demo.diff"
      echo "demo: $(grep -c '^[-+] ' "$LOGS/accept-demo.diff") changed lines";;
    mbarrier)
      OUT="$LOGS" bash tools/gpu-host/mbarrier_check.sh > "$LOGS/mbarrier.log" 2>&1
      echo "mbarrier: exit $?"; grep -E "^(== |test_async|FAILED|ERROR|=========|\\|)" \
        "$LOGS/mbarrier.txt" | cut -c1-200 | head -40;;
    sample)
      n=$(nvidia-smi -L | grep -c '^GPU')
      timeout -s INT "${GPUCHAR_NIGHT_S:-480}" python3 -m pytest tests/characterisation -n "$n" \
        --gpuchar-distribute=replicate -p no:cacheprovider -q --gpuchar-report "$OUT/sample" \
        --gpuchar-history "$OUT/history.sqlite" ${GPUCHAR_EXTRA:-} > "$LOGS/sample.txt" 2>&1
      echo "sample on $n GPUs (replicate): pytest exit $?: $(tail -1 "$LOGS/sample.txt" | cut -c1-160)"
      python3 -m pytest_gpuchar.cli.history runs --db "$OUT/history.sqlite" 2>&1 | cut -c1-200
      gzip -c "$OUT/sample/gpuchar-results.json" > "$OUT/sample.json.gz"
      tar czf "$LOGS/sample-report.tgz" -C "$OUT" sample && rm -rf "$OUT/sample";;
    exits)
      t2=tests/characterisation/test_table_ii_dependency.py
      nightly --out "$OUT/x-gpu" "$t2" > "$LOGS/x-gpu.txt" 2>&1
      echo "exits: on the GPU: exit $? (0-2 expected), hardware_ran $(python3 -c "import json
print(json.load(open('$OUT/x-gpu/nightly.json'))['meta'].get('hardware_ran'))" 2>&1)"
      CUDA_VISIBLE_DEVICES= nightly --out "$OUT/x-hidden" "$t2" > "$LOGS/x-hidden.txt" 2>&1
      echo "exits: GPU hidden: exit $? (4 expected): $(tail -1 "$LOGS/x-hidden.txt" | cut -c1-200)"
      nightly --out "$OUT/x-static" --static-only "$t2" > "$LOGS/x-static.txt" 2>&1
      echo "exits: --static-only: exit $? (0-3 expected): $(tail -1 "$LOGS/x-static.txt" | cut -c1-160)"
      rm -rf "$OUT/x-gpu" "$OUT/x-hidden" "$OUT/x-static";;
  esac
  echo "  ($step: $(( $(date +%s) - start )) s)"
done | tee -a "$OUT/summary.txt"
for d in fleet-replicate fleet-split fleet-kill; do
  [ -d "$OUT/$d" ] && tar czf "$OUT/$d.tgz" -C "$OUT" "$d" && rm -rf "$OUT/$d"
done
for k in 0 1 2; do
  [ -d "$OUT/n$k" ] && tar czf "$OUT/n$k.tgz" -C "$OUT" "n$k" && rm -rf "$OUT/n$k"
done
# the snapshots and expectation files as they are now (the lead diffs them against the tree)
tar czf "$OUT/recorded.tgz" tests/characterisation/__sass__ expectations
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$LOGS"
ls -la "$OUT"
