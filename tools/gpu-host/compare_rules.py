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
the difference column, also 4 digits, gives the new value), each figure's noise model and
unit from the expectation files as they are now (the device section of the board's model,
as a run's results carry them to the nightly), so a change of the noise model is judged on
the same comparisons.

Usage: python3 compare_rules.py COMPARE.md... [--arch sm_90] [--root EXPECTATIONS_DIR]
       [--out rules.md]
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from collections import Counter
from pathlib import Path

from pytest_gpuchar.results.gate import CYCLE_UNITS, one_sided

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("compare_figures", HERE / "compare_figures.py")
cf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cf)

MOVES = (0.01, 0.02, 0.05, 0.10)
HEADER = "| arch | key | old | new | old spread | new spread | diff |"


def _parse(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def read_md(path: Path) -> tuple[str, str, list[tuple[str, dict, dict]]]:
    """(model, board, [(key, old result, new result)]) of a compare_figures.py markdown: the
    figures with a number on both sides; statuses as written."""
    model, board, rows, table = "", "", [], False
    for line in path.read_text().splitlines():
        if line.startswith("- new:"):
            board = next((w for w in line.split() if w.startswith("GPU-")), "").rstrip(",")
            model = line[len("- new:"):].split(" GPU-")[0].strip()
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
    return model, board, rows


def noise_models(arch: str, model: str, root: Path | None = None) -> dict[str, dict]:
    """key -> {"unit", "noise"}: each figure's expectation for `model` (its device section,
    else the arch level) in the expectation files under `root` (the package's default)."""
    from pytest_gpuchar.results import expectations
    exp = expectations.Store(root).load(arch)
    if exp is None:
        raise SystemExit(f"compare_rules: no expectation files for {arch}")
    keys = set(exp.characteristics) | set(exp.devices.get(model, {}))
    return {k: {"unit": e.unit, "noise": e.noise()} for k in keys
            if (e := exp.get(k, model)) is not None}


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


def evaluate(paths: list[Path], arch: str = "sm_90", root: Path | None = None) -> dict:
    by_model: dict[str, dict[str, dict]] = {}
    out = {"comparisons": [], "caught": {}, "exact": Counter(), "no_model": set()}
    caught = {m: Counter() for m in MOVES}
    for path in paths:
        name, board, rows = read_md(path)
        if name not in by_model:
            by_model[name] = noise_models(arch, name, root)
        models = by_model[name]
        flagged = {"issue": [], "gate": []}
        for key, old, new in rows:
            model = models.get(key)
            if model is None:           # judged as the nightly judges it: the fallback rule
                out["no_model"].add(key)
                model = {"unit": "", "noise": None}
            o, n = with_model(old, model), with_model(new, model)
            issue, gate = flags(o, n)
            if issue:
                flagged["issue"].append(key)
            if gate:
                flagged["gate"].append(key)
            if one_sided(key, model["unit"]):     # its cycles are asked, not it
                continue
            for m in MOVES:
                for sign in (1, -1):
                    i, g = flags(o, {**n, "value": n["value"] * (1 + sign * m)})
                    caught[m].update(n=1, issue=i, gate=bool(g))
            if (model.get("noise") or {}).get("exact") and model["unit"] in CYCLE_UNITS:
                for step in (1, -1):
                    i, g = flags(o, {**n, "value": n["value"] + step})
                    out["exact"].update(n=1, issue=i, gate=bool(g))
        out["comparisons"].append({"file": path.name, "board": board, "figures": len(rows),
                                   **flagged})
    out["caught"] = caught
    return out


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f}%)" if n else "-"


def markdown(res: dict, arch: str) -> str:
    lines = ["# The old/new comparison's two rules, judged on the comparisons made", "",
             f"Noise models and units: the {arch} expectation files as they are now (the "
             "board's model's section). The issue's rule: within when |new - old| <= the "
             "larger spread + 1% of |old|. The gate's: no change when |new - old| <= its "
             "change limit with the old run as the one earlier night (`results/gate.change`).",
             "",
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
        lines += ["", f"No expectation (no noise model: the gate's fallback rule, 1% or a "
                  f"run's spread; unit unknown): {len(res['no_model'])} keys, e.g. "
                  + ", ".join(sorted(res["no_model"])[:5])]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("compare", type=Path, nargs="+")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--root", type=Path, help="the expectation files (default: the package's)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    res = evaluate(a.compare, a.arch, a.root)
    text = markdown(res, a.arch)
    if a.out:
        a.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
