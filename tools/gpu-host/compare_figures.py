"""Compare every figure of two gpuchar reports of the same board (two checkouts of the suite
run one after the other on one GPU): old value, new value, their spreads, and whether the new
value lies within the larger spread plus 1% of the old value; beside it, whether the nightly
gate would call the move a change (the old run as the board's history, the new result's own
noise model: results/changes.gate_move); the statuses; each topic's wall time (and GPU-busy
time where the report has it). Not the product: the GPU-host harness (the suite's package
must be importable: compare_codes.sh puts the new tree first on PYTHONPATH).

Usage: python3 compare_figures.py OLD.json NEW.json [--old-junit X.xml --new-junit Y.xml
       --old-tree DIR --new-tree DIR] [--out compare]   (writes compare.md and compare.json)
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from pytest_gpuchar.results import changes
from pytest_gpuchar.results.gate import one_sided
from pytest_gpuchar.results.finite import number

REL = 0.01          # the 1% beside the spread


def read(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


def figures(report: dict) -> dict[tuple[str, str], dict]:
    """(arch, key) -> result, the figures of a report (one GPU)."""
    return {(r["arch"], r["key"]): r for r in report.get("results", [])
            if r.get("status") not in ("info",)}


def relative_error(result: dict) -> bool:
    """A model's relative error against a measurement (|predicted - measured| / measured:
    the Many-BSP predictions' `*.error`, unit ratio), a number near zero: what the gate
    bounds above only (results/gate.one_sided)."""
    return one_sided(str(result.get("key", "")), result.get("unit"))


def scale(result: dict, value: float) -> float:
    """What the 1% is taken of: the value; for a relative error, the measurement it is
    relative to, carried through as its spread is (d|p - m| / m = (p / m) dm / m, and
    p / m <= 1 + error): 1% of a value near zero was a hundredth of a per cent, so a
    measurement that moved within its own allowance moved its error outside
    (results/sm_90/compare-41/README.md)."""
    return 1.0 + abs(value) if relative_error(result) else abs(value)


def gate(old: dict, new: dict) -> tuple[str, float | None]:
    """The nightly gate's question about the new run, the old run as the board's one earlier
    night: "change" or "no change" and the limit (gate.change: the figure's within-board
    noise from its expectation's `noise`, or the fallback rule without one); "-" where the
    gate does not ask (a model's relative error: its cycles are asked)."""
    move = changes.gate_move(new, [float(old["value"])], previous=old)
    if move is None:
        return "-", None
    return ("change" if move.moved else "no change"), move.limit


def compare_one(old: dict | None, new: dict | None) -> dict:
    """One figure: values, spreads, |difference|, the allowance (larger spread + 1% of the
    old value, `scale`) and the verdict: same, within, OUTSIDE, or only-old / only-new /
    no-value; and the nightly gate's verdict on the move (`gate`)."""
    row = {"old": None if old is None else old.get("value"),
           "new": None if new is None else new.get("value"),
           "old_spread": None if old is None else old.get("spread"),
           "new_spread": None if new is None else new.get("spread"),
           "old_status": None if old is None else old.get("status"),
           "new_status": None if new is None else new.get("status"),
           "unit": (new or old or {}).get("unit", "")}
    if old is None or new is None:
        row["verdict"] = "only-new" if old is None else "only-old"
        return row
    a, b = number(old.get("value")), number(new.get("value"))
    if a is None or b is None:
        row["verdict"] = "same" if old.get("value") == new.get("value") or (
            a is None and b is None) else "no-value"
        return row
    spread = max(number(old.get("spread")) or 0.0, number(new.get("spread")) or 0.0)
    allowance = spread + REL * scale(old, a)
    row.update(diff=b - a, allowance=allowance)
    row["verdict"] = "same" if a == b else "within" if abs(b - a) <= allowance else "OUTSIDE"
    row["gate"], row["gate_limit"] = gate(old, new)
    return row


def compare(old: dict, new: dict) -> dict[tuple[str, str], dict]:
    fo, fn = figures(old), figures(new)
    return {k: compare_one(fo.get(k), fn.get(k)) for k in sorted(set(fo) | set(fn))}


TOPIC_MARK = re.compile(r"""pytest\.mark\.topic\(\s*["']([a-z_]+)["']""")


def junit_topics(junit: Path, tree: Path) -> dict[str, float]:
    """topic -> wall seconds of its tests in a JUnit XML (each test module's topic marker
    read from the checkout's source)."""
    topic_of: dict[str, str] = {}
    for f in (tree / "tests" / "characterisation").glob("test_*.py"):
        m = TOPIC_MARK.search(f.read_text())
        topic_of[f.stem] = m.group(1) if m else f.stem
    out: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        out[topic_of.get(module, module)] += float(case.get("time", 0.0))
    return dict(out)


def times_table(old: dict, new: dict, old_junit: dict | None, new_junit: dict | None) -> list:
    """Per topic: old wall, new wall (JUnit), new hardware wall and GPU-busy (the report)."""
    by_topic = new.get("meta", {}).get("time_by_topic", {})
    topics = sorted(set(by_topic) | set(old_junit or {}) | set(new_junit or {}))
    rows = [(t, (old_junit or {}).get(t), (new_junit or {}).get(t),
             by_topic.get(t, {}).get("hardware_s"), by_topic.get(t, {}).get("gpu_busy_s"))
            for t in topics]
    return rows


def _f(v, fmt="{:.4g}") -> str:
    return "" if v is None else fmt.format(v) if isinstance(v, (int, float)) else str(v)


def markdown(rows: dict, times: list, old: dict, new: dict) -> str:
    counts, gated = defaultdict(int), defaultdict(int)
    for r in rows.values():
        counts[r["verdict"]] += 1
        gated[r.get("gate") or "-"] += 1
    mo, mn = old.get("meta", {}), new.get("meta", {})
    out = ["# Old code against new code, one board", "",
           f"- old: {mo.get('device', '?')} {mo.get('uuid', '')}, wall {mo.get('wall_s')} s",
           f"- new: {mn.get('device', '?')} {mn.get('uuid', '')}, wall {mn.get('wall_s')} s",
           "- verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
           f"- within: |new - old| <= max(old spread, new spread) + {REL:.0%} of |old|",
           "- the nightly gate, the old run as the board's history: " + ", ".join(
               f"{k} {v}" for k, v in sorted(gated.items())), "",
           "## Time by topic (s)", "",
           "| topic | old wall | new wall | new hardware wall | new GPU busy |",
           "|---|---|---|---|---|"]
    out += [f"| {t} | {_f(a, '{:.1f}')} | {_f(b, '{:.1f}')} | {_f(c, '{:.1f}')} | "
            f"{_f(d, '{:.2f}')} |" for t, a, b, c, d in times]
    order = {"OUTSIDE": 0, "no-value": 1, "only-old": 2, "only-new": 3, "within": 4, "same": 5}
    out += ["", "## Every figure (outside first)", "",
            "| arch | key | old | new | old spread | new spread | diff | allowance | verdict | "
            "gate limit | gate | status old -> new |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (arch, key), r in sorted(rows.items(), key=lambda kv: (order[kv[1]["verdict"]], kv[0])):
        out.append(f"| {arch} | {key} | {_f(r['old'])} | {_f(r['new'])} | {_f(r['old_spread'])} "
                   f"| {_f(r['new_spread'])} | {_f(r.get('diff'))} | {_f(r.get('allowance'))} | "
                   f"{r['verdict']} | {_f(r.get('gate_limit'))} | {r.get('gate', '')} | "
                   f"{r['old_status']} -> {r['new_status']} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--old-junit", type=Path)
    ap.add_argument("--new-junit", type=Path)
    ap.add_argument("--old-tree", type=Path)
    ap.add_argument("--new-tree", type=Path)
    ap.add_argument("--out", type=Path, default=Path("compare"))
    a = ap.parse_args(argv)
    old, new = read(a.old), read(a.new)
    rows = compare(old, new)
    oj = junit_topics(a.old_junit, a.old_tree) if a.old_junit and a.old_tree else None
    nj = junit_topics(a.new_junit, a.new_tree) if a.new_junit and a.new_tree else None
    times = times_table(old, new, oj, nj)
    Path(f"{a.out}.md").write_text(markdown(rows, times, old, new))
    Path(f"{a.out}.json").write_text(json.dumps(
        {"figures": {f"{arch} {key}": r for (arch, key), r in rows.items()},
         "times": times}, indent=1))
    bad = [k for k, r in rows.items() if r["verdict"] in ("OUTSIDE", "no-value", "only-old")]
    moved = [k for k, r in rows.items() if r.get("gate") == "change"]
    print(f"{len(rows)} figures: {len(bad)} outside their spread + {REL:.0%} or lost; "
          f"old wall {old.get('meta', {}).get('wall_s')} s, new wall "
          f"{new.get('meta', {}).get('wall_s')} s")
    print(f"the nightly gate, the old run as the board's last night: {len(moved)} of "
          f"{len(rows)} figures moved" + (": " + ", ".join(k for _, k in moved[:8])
                                          if moved else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
