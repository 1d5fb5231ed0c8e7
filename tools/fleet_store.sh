#!/usr/bin/env bash
# Rebuild the sm_90 fleet sample's history store from what git keeps: every version of the
# committed sm_90 run reports (git history of results/sm_90), today's replicate samples
# (results/sm_90/fleet/*.json.gz) and the runs of boards that joined the sample
# (results/sm_90/fleet/runs/). The hold-out boards' runs are not in it: a report holding a
# board of results/sm_90/fleet/holdout.jsonl that has no run under fleet/runs/ (one that
# joined the sample) is left out, as the committed H200 baseline of a hold-out board is. The
# store lists the sample's boards and runs (tools/fleet_md.py); the contract is derived from
# the committed sample (results/sm_90/fleet/sample.jsonl.gz), whose runs leave out figures the
# store's still carry: the plans in results/sm_90/fleet/ are `gpuchar-expectations fleet --arch
# sm_90 --model MODEL --dry-run` against it (results/sm_90/fleet/not-yet-done.md).
# Usage: bash tools/fleet_store.sh DB
#        bash tools/fleet_store.sh --inputs DIR   (only the git-history reports, into DIR: what a
#        GPU host without the repository's history imports; tools/gpu-host/fleet_round.sh)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
if [ "${1:-}" = "--inputs" ]; then
  tmp=${2:?usage: fleet_store.sh --inputs DIR}
  mkdir -p "$tmp"
  DB=""
else
  DB=${1:?usage: fleet_store.sh DB}
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
fi
for c in $(git log --format=%h --all -- 'results/sm_90/*results.json.gz' \
             'results/sm_90/*/*results.json.gz' 'results/sm_90/*/*/*results.json.gz'); do
  git ls-tree -r --name-only "$c" -- results/sm_90 | grep -E 'results\.json\.gz$' |
    grep -v '^results/sm_90/fleet/' | while read -r f; do
      git show "$c:$f" > "$tmp/${c}_$(echo "$f" | tr / _)"
    done
done
python3 - "$tmp" <<'PY'
import gzip, json, pathlib, sys
held = {json.loads(l)["uuid"] for l in open("results/sm_90/fleet/holdout.jsonl") if l.strip()}
joined = {p.name.split("-")[0] for p in pathlib.Path("results/sm_90/fleet/runs").glob("*.gz")}
held = {u for u in held if u[4:12] not in joined}
for f in pathlib.Path(sys.argv[1]).glob("*.json.gz"):
    boards = {(r.get("provenance") or {}).get("uuid") for r in json.load(gzip.open(f))["results"]}
    if boards & held:
        print(f"fleet_store: {f.name}: a hold-out board's run, left out")
        f.unlink()
PY
if [ -z "$DB" ]; then   # one file per content (a report unchanged over commits is one run)
  (cd "$tmp" && md5sum ./*.json.gz | sort | awk 'seen[$1]++ {print $2}' | xargs -r rm)
  echo "fleet_store: $(ls "$tmp" | wc -l) reports in $tmp"
  exit 0
fi
gpuchar-history import "$tmp"/*.json.gz results/sm_90/fleet/*.json.gz \
  results/sm_90/fleet/runs/*.json.gz --db "$DB"
gpuchar-history boards --db "$DB"
