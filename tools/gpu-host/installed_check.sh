#!/usr/bin/env bash
# Issue 40 on one GPU (a few minutes): the package as installed (not run from the checkout)
# against the checkout, and the user-probe example on the GPU.
#  1. the carried wheels and this tree into /tmp/site (install.sh: a non-editable install, so
#     /tmp/site/pytest_gpuchar carries the suite, the expectation files and the snapshots);
#  2. from an empty directory, `pytest --gpu-arch=<the GPU's arch>`: the installed suite,
#     its writable state in GPUCHAR_HOME=/tmp/gpuchar-home;
#  3. the README's hardware command in the checkout (`pytest tests/characterisation`);
#  4. every result's verdict of 2 against 3 (verdicts.txt: same / differs, by key and arch);
#  5. docs/examples/user-probes: the driver's SASS recorded (--snapshot-update, accept level
#     none: no expectation written), then measured and judged against its expectations/.
# $OUT: verdicts.txt, probes.txt, reports.tgz, logs.tgz.
# Usage: bash tools/gpu-host/installed_check.sh (carry .whl/ as for gpu_run.sh)
set -u
OUT=${OUT:-$PWD/gpuchar-out}
TREE=$PWD
mkdir -p "$OUT/logs" /tmp/gpuchar-empty
. tools/gpu-host/install.sh "$OUT/logs/install.log"
export GPUCHAR_HOME=/tmp/gpuchar-home
arch=$(python3 -c "from pytest_gpuchar.core import device; d = device.detect(); print(d.arch if d else '')")
(cd /tmp/gpuchar-empty && python3 -m pytest --gpu-arch="$arch" -p no:cacheprovider -q -rfE \
  --gpuchar-report "$OUT/installed" > "$OUT/logs/installed.log" 2>&1)
echo "installed suite: exit $?; $(tail -1 "$OUT/logs/installed.log")" | tee "$OUT/verdicts.txt"
python3 -m pytest tests/characterisation -p no:cacheprovider -q -rfE \
  --gpuchar-report "$OUT/clone" > "$OUT/logs/clone.log" 2>&1
echo "checkout suite: exit $?; $(tail -1 "$OUT/logs/clone.log")" | tee -a "$OUT/verdicts.txt"
python3 - "$OUT" >> "$OUT/verdicts.txt" <<'EOF'
import json, sys
out = sys.argv[1]
def verdicts(name):
    doc = json.load(open(f"{out}/{name}/gpuchar-results.json"))
    return {(r["key"], r["arch"], r.get("test", "").split("::")[-1]): r["status"]
            for r in doc["results"]}
a, b = verdicts("installed"), verdicts("clone")
same = [k for k in a.keys() & b.keys() if a[k] == b[k]]
print(f"results: installed {len(a)}, checkout {len(b)}, both {len(a.keys() & b.keys())}, "
      f"same verdict {len(same)}")
for k in sorted(a.keys() ^ b.keys())[:20]:
    print("only in", "installed" if k in a else "checkout", k)
for k in sorted(k for k in a.keys() & b.keys() if a[k] != b[k]):
    print("differs", k, "installed", a[k], "checkout", b[k])
EOF
cat "$OUT/verdicts.txt"
cd "$TREE/docs/examples/user-probes"
python3 -m pytest --gpu-arch="$arch" -p no:cacheprovider -q --snapshot-update \
  --gpuchar-accept-level=none > "$OUT/logs/probes-record.log" 2>&1
echo "user probes, SASS recorded: exit $?; $(tail -1 "$OUT/logs/probes-record.log")" | tee "$OUT/probes.txt"
python3 -m pytest --gpu-arch="$arch" -p no:cacheprovider -v -rfEs \
  --gpuchar-report "$OUT/probes" > "$OUT/logs/probes.log" 2>&1
echo "user probes, judged: exit $?" | tee -a "$OUT/probes.txt"
grep -E "PASSED|FAILED|SKIPPED|XFAIL|ERROR" "$OUT/logs/probes.log" | tee -a "$OUT/probes.txt"
python3 -c "
import json; doc = json.load(open('$OUT/probes/gpuchar-results.json'))
for r in doc['results']:
    print(r['key'], r['status'], r.get('value'), r.get('unit'), 'expected', r.get('expected'))
" | tee -a "$OUT/probes.txt"
tar czf "$OUT/probes-sass.tgz" __sass__
cd "$TREE"
tar czf "$OUT/reports.tgz" -C "$OUT" installed clone probes && rm -rf "$OUT/installed" "$OUT/clone" "$OUT/probes"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
