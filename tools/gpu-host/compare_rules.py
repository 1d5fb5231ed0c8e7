"""The two rules of an old/new comparison (compare_figures.py), judged on comparisons already
made: the issue's rule (|new - old| within the larger spread of one run's launches + 1%) and
the nightly gate's change rule (the old run as the board's one earlier night, each figure's
within-board noise from its expectation). Not the product: the GPU-host harness's evidence.

- **False alarms**: the figures each rule flags in each comparison given. Where no code that
  measures a figure changed between the two runs (the same code twice, or a change of host
  work only), a flag is a false alarm; the caller says which comparisons are such pairs.
- **Misses**: a known move injected into the new run of every comparison, one figure at a
  time (x (1 +- m) for m in MOVES; one cycle up and down on a figure the noise model calls
  exact), caught when the rule flags it. A model's relative error (`*.error`) is left out:
  the gate asks about its cycles, not about it.

The comparisons are read from compare_figures.py's markdown (values to 4 significant digits;
the difference column, also 4 digits, gives the new value), the noise models and units from a
report of the suite's current expectations (each result's `noise`, as the nightly reads them).

Usage: python3 compare_rules.py REPORT.json[.gz] COMPARE.md... [--out rules.md]
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("compare_figures", HERE / "compare_figures.py")
cf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cf)

MOVES = (0.01, 0.02, 0.05, 0.10)
CYCLES = ("cycles", "cycles/op")       # a one-cycle move is injected into an exact one
HEADER = "| arch | key | old | new | old spread | new spread | diff |"


def _parse(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def read_md(path: Path) -> tuple[str, list[tuple[str, dict, dict]]]:
    """(board, [(key, old result, new result)]) of a compare_figures.py markdown: the figures
    with a number on both sides; statuses as written."""
    board, rows, table = "", [], False
    for line in path.read_text().splitlines():
        if line.startswith("- new:"):
            board = next((w for w in line.split() if w.startswith("GPU-")), "").rstrip(",")
        if line.startswith(HEADER):
            table = True
            continue
        if not table or not line.startswith("| ") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        arch, key, old, new, so, sn, diff = cells[:7]
        status = cells[-1].split(" -> ")
        a, b, d = _parse(old), _parse(new), _parse(diff)
        if a is None or b is None:
            continue
        b = a + d if d is not None else b
        rows.append((key, {"arch": arch, "key": key, "value": a, "spread": _parse(so),
                           "status": status[0]},
                     {"arch": arch, "key": key, "value": b, "spread": _parse(sn),
                      "status": status[-1]}))
    return board, rows


def noise_models(report: dict) -> dict[str, dict]:
    """key -> {"unit", "noise"} of the report's results."""
    return {r["key"]: {"unit": r.get("unit", ""), "noise": r.get("noise")}
            for r in report.get("results", []) if r.get("key")}


def with_model(r: dict, model: dict) -> dict:
    out = {**r, "unit": model.get("unit", "")}
    if isinstance(model.get("noise"), dict):
        out["noise"] = model["noise"]
    return out


def flags(old: dict, new: dict) -> tuple[bool, bool | None]:
    """(the issue's rule flags it, the gate calls it a change (None: not asked))."""
    row = cf.compare_one(old, new)
    issue = row["verdict"] == "OUTSIDE"
    g = row.get("gate")
    return issue, (None if g in (None, "-") else g == "change")


def judged(key: str, model: dict) -> bool:
    return not (model.get("unit") == "ratio" and key.endswith(".error"))


def evaluate(report: dict, paths: list[Path]) -> dict:
    models = noise_models(report)
    out = {"comparisons": [], "caught": {}, "exact": Counter(), "no_model": set()}
    caught = {m: Counter() for m in MOVES}
    for path in paths:
        board, rows = read_md(path)
        flagged = {"issue": [], "gate": []}
        for key, old, new in rows:
            model = models.get(key)
            if model is None:
                out["no_model"].add(key)
                continue
            o, n = with_model(old, model), with_model(new, model)
            issue, gate = flags(o, n)
            if issue:
                flagged["issue"].append(key)
            if gate:
                flagged["gate"].append(key)
            if not judged(key, model):
                continue
            for m in MOVES:
                for sign in (1, -1):
                    i, g = flags(o, {**n, "value": n["value"] * (1 + sign * m)})
                    caught[m].update(n=1, issue=i, gate=bool(g))
            if (model.get("noise") or {}).get("exact") and model["unit"] in CYCLES:
                for step in (1, -1):
                    i, g = flags(o, {**n, "value": n["value"] + step})
                    out["exact"].update(n=1, issue=i, gate=bool(g))
        out["comparisons"].append({"file": path.name, "board": board, "figures": len(rows),
                                   **flagged})
    out["caught"] = caught
    return out


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f}%)" if n else "-"


def markdown(res: dict, report_name: str) -> str:
    lines = ["# The old/new comparison's two rules, judged on the comparisons made", "",
             f"Noise models and units: `{report_name}` (each result's `noise`). The issue's "
             "rule: within when |new - old| <= the larger spread + 1% of |old|. The gate's: "
             "no change when |new - old| <= its change limit with the old run as the one "
             "earlier night (`results/gate.change`).", "",
             "## Figures flagged in each comparison", "",
             "| file | board | figures | issue's rule | the gate | flagged by the issue's rule "
             "| flagged by the gate |", "|---|---|---:|---:|---:|---|---|"]
    for c in res["comparisons"]:
        lines.append(f"| `{c['file']}` | {c['board']} | {c['figures']} | {len(c['issue'])} | "
                     f"{len(c['gate'])} | {', '.join(c['issue']) or '-'} | "
                     f"{', '.join(c['gate']) or '-'} |")
    n = len(res["comparisons"])
    clean = {r: sum(1 for c in res["comparisons"] if not c[r]) for r in ("issue", "gate")}
    lines += ["", f"Comparisons with no figure flagged: the issue's rule {clean['issue']} of "
              f"{n}, the gate {clean['gate']} of {n}.", "",
              "## Known moves injected into the new run, one figure at a time", "",
              "| move | figures x 2 directions | caught by the issue's rule | caught by the "
              "gate |", "|---|---:|---:|---:|"]
    for m, c in res["caught"].items():
        lines.append(f"| +-{m:.0%} | {c['n']} | {_pct(c['issue'], c['n'])} | "
                     f"{_pct(c['gate'], c['n'])} |")
    e = res["exact"]
    if e["n"]:
        lines.append(f"| one cycle, exact cycle figures | {e['n']} | {_pct(e['issue'], e['n'])}"
                     f" | {_pct(e['gate'], e['n'])} |")
    if res["no_model"]:
        lines += ["", f"Not in the report (left out): {len(res['no_model'])} keys, e.g. "
                  + ", ".join(sorted(res["no_model"])[:5])]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("compare", type=Path, nargs="+")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    res = evaluate(cf.read(a.report), a.compare)
    text = markdown(res, a.report.name)
    if a.out:
        a.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
