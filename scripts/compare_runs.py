"""Repeatability of two gpuchar runs: share of latency characteristics with the same integer
cycles, and the largest relative difference of the other figures.
Usage: python scripts/compare_runs.py RUN1.json RUN2.json"""
import json
import sys


def load(path):
    return {(r["arch"], r["key"]): r for r in json.load(open(path))["results"]
            if r.get("value") is not None}


a, b = load(sys.argv[1]), load(sys.argv[2])
common = sorted(set(a) & set(b))
lat = [k for k in common if k[1].startswith(("latency.", "cpi.", "table_i.", "overhead."))]
same = [k for k in lat if round(a[k]["value"]) == round(b[k]["value"])]
print(f"characteristics in both runs: {len(common)}")
if lat:
    print(f"cycle characteristics with identical integer cycles: {len(same)}/{len(lat)} "
          f"({100 * len(same) / len(lat):.1f}%)")
for k in lat:
    if k not in same:
        print(f"  differs: {k[1]}: {a[k]['value']:.2f} vs {b[k]['value']:.2f}")
status_changes = [k for k in common if a[k]["status"] != b[k]["status"]]
print(f"status changes between runs: {len(status_changes)}")
for k in status_changes:
    print(f"  {k[1]}: {a[k]['status']} -> {b[k]['status']}")
