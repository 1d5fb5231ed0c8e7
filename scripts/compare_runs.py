"""Repeatability of two gpuchar runs, per topic (the first part of each key: latency, cpi,
memory, tensor, numerics, throughput, ...), against SPEC's bar: cycle figures (unit cycles or
cycles/op) with identical integer cycles, other figures (throughput, ratios, errors) within 1%.
Only characteristics that are stable (pass, fail or measured) in both runs are compared; the
unstable ones are counted apart, since they already say they are not repeatable.
Usage: python scripts/compare_runs.py RUN1.json RUN2.json"""
import json
import sys
from collections import defaultdict

STABLE = ("pass", "fail", "measured")


def load(path):
    return {(r["arch"], r["key"]): r for r in json.load(open(path))["results"]
            if r.get("value") is not None}


def main(p1, p2):
    a, b = load(p1), load(p2)
    common = sorted(set(a) & set(b))
    print(f"characteristics in both runs: {len(common)}")
    topics = defaultdict(lambda: {"cyc": [], "cyc_same": [], "oth": [], "oth_1pc": [],
                                  "unstable": 0, "worst": []})
    for k in common:
        ra, rb = a[k], b[k]
        t = topics[k[1].split(".")[0]]
        if ra["status"] not in STABLE or rb["status"] not in STABLE:
            t["unstable"] += 1
            continue
        va, vb = float(ra["value"]), float(rb["value"])
        if str(ra.get("unit", "")).startswith("cycles"):
            t["cyc"].append(k)
            if round(va) == round(vb):
                t["cyc_same"].append(k)
            else:
                t["worst"].append((abs(va - vb), f"{k[1]}: {va:.2f} vs {vb:.2f} {ra['unit']}"))
        else:
            t["oth"].append(k)
            rel = abs(va - vb) / max(abs(va), abs(vb), 1e-300)
            if rel <= 0.01:
                t["oth_1pc"].append(k)
            else:
                t["worst"].append((rel * 100, f"{k[1]}: {va:.4g} vs {vb:.4g} {ra.get('unit', '')}"
                                   f" ({rel:.1%})"))
    tot = [0, 0, 0, 0, 0]
    for name in sorted(topics):
        t = topics[name]
        tot[0] += len(t["cyc_same"]); tot[1] += len(t["cyc"])
        tot[2] += len(t["oth_1pc"]); tot[3] += len(t["oth"]); tot[4] += t["unstable"]
        parts = []
        if t["cyc"]:
            parts.append(f"identical integer cycles {len(t['cyc_same'])}/{len(t['cyc'])} "
                         f"({100 * len(t['cyc_same']) / len(t['cyc']):.1f}%)")
        if t["oth"]:
            parts.append(f"other figures within 1% {len(t['oth_1pc'])}/{len(t['oth'])} "
                         f"({100 * len(t['oth_1pc']) / len(t['oth']):.1f}%)")
        parts.append(f"unstable in a run: {t['unstable']}")
        print(f"{name}: " + "; ".join(parts))
    if tot[1]:
        print(f"ALL: identical integer cycles {tot[0]}/{tot[1]} ({100 * tot[0] / tot[1]:.1f}%); "
              f"other figures within 1% {tot[2]}/{tot[3]} "
              f"({100 * tot[2] / max(tot[3], 1):.1f}%); unstable in a run: {tot[4]}")
    for name in sorted(topics):
        for _, line in sorted(topics[name]["worst"], reverse=True):
            print(f"  differs: {line}")
    status_changes = [k for k in common if a[k]["status"] != b[k]["status"]]
    print(f"status changes between runs: {len(status_changes)}")
    for k in status_changes:
        print(f"  {k[1]}: {a[k]['status']} -> {b[k]['status']}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
