"""`gpuchar-expectations crossval`: the gate's two error rates on the fleet sample, as the
tables of results/<arch>/gate.md (results/crossval.py computes them) and, beside it, every
figure's smallest move caught (gate-figures.csv)."""
from __future__ import annotations

import csv
import io
import sys
import time
from collections import Counter
from pathlib import Path

from ..core.atomic import atomic_write
from ..results import crossval as CV
from ..results import gate
from ..results.expectations import Store

SIZES = ("1 cycle", "2%", "5%", "10%")


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.1f}%)" if d else "-"


def false_alarm_lines(rep: CV.ModelReport) -> list[str]:
    c = CV.false_alarm_counts(rep)
    out = [f"| {rep.model} | {len(rep.boards)} | {c['board_runs']} | "
           f"{_pct(c['with_alarm'], c['board_runs'])} | "
           f"{_pct(c['first_with_alarm'], c['first_nights'])} | "
           f"{_pct(c['later_with_alarm'], c['later_nights'])} | "
           f"{c['conformance_alarms']} | {c['change_alarms']} |"]
    return out


def alarms_lines(rep: CV.ModelReport) -> list[str]:
    rows = [(a.board[:12], a.night, a.question, a.key, a.detail)
            for r in rep.runs for a in r.alarms]
    if not rows:
        return [f"{rep.model}: no alarm on any board-run."]
    out = [f"{rep.model}: the alarms (each a false alarm: every sampled run is of a healthy, "
           "unchanged board)", "", "| board | night | question | figure | detail |",
           "|---|---:|---|---|---|"]
    out += [f"| {b} | {n} | {q} | `{k}` | {d} |" for b, n, q, k, d in rows]
    return out


def detection_lines(rep: CV.ModelReport) -> list[str]:
    table = CV.detection_table(rep)
    out = ["| topic | kind | " + " | ".join(f"+-{s}" for s in SIZES) + " |",
           "|---|---|" + "---:|" * len(SIZES)]
    for (topic, kind), c in sorted(table.items()):
        cells = [_pct(c[f"{s} caught"], c[f"{s} total"]) if c[f"{s} total"] else "-"
                 for s in SIZES]
        out.append(f"| {topic} | {kind} | " + " | ".join(cells) + " |")
    tot = Counter()
    for c in table.values():
        tot.update(c)
    out.append("| **all** | | " + " | ".join(
        f"**{_pct(tot[f'{s} caught'], tot[f'{s} total'])}**" if tot[f"{s} total"] else "-"
        for s in SIZES) + " |")
    return out


def headline(rep: CV.ModelReport) -> dict[str, tuple[int, int]]:
    quiet5 = [i for i in rep.injections if i.move in ("+5%", "-5%")
              and CV.quiet(rep.figs[i.key], rep.bounds.get(i.key))]
    cyc = [i for i in rep.injections if "cycle" in i.move]
    first10 = [i for i in rep.injections if i.move in ("+10%", "-10%")]
    return {"quiet5": (sum(i.caught for i in quiet5), len(quiet5)),
            "cycle": (sum(i.caught for i in cyc), len(cyc)),
            "first10": (sum(i.first_night for i in first10), len(first10))}


def wide_tolerances(store: Store, rep: CV.ModelReport, arch: str) -> list[str]:
    """Entries of the files wider than the noise model's bound for their figure (beyond the
    writer's hysteresis), or judged by a hand tolerance although the sample derives one."""
    exp = store.load(arch)
    out = []
    for key, b in sorted(rep.bounds.items()):
        e = exp.get(key, rep.model) if exp is not None else None
        if b is None or e is None or not e.numeric or b.grid:
            continue
        lo, hi = e.range if e.range is not None else (e.value, e.value) \
            if e.value is not None else (None, None)
        if lo is None:
            continue
        width = (hi + e.allowance(hi)) - (lo - e.allowance(lo))
        need = b.hi_bound - b.lo_bound
        if width > need + 2 * (gate_slack(b)) + 1e-9:
            out.append(f"| `{key}` | {lo - e.allowance(lo):.6g}..{hi + e.allowance(hi):.6g} | "
                       f"{b.lo_bound:.6g}..{b.hi_bound:.6g} | {e.source} |")
    return out


def on_the_gpu(where: Path) -> list[str]:
    """The measurements gate.md cites that only a GPU makes, from the files committed beside
    it: the fresh boards held out (fleet/holdout.jsonl, rows judged by this gate) and the
    real-fault nights (gate-faults.json, tools/gpu-host/gate_faults.sh)."""
    import json
    out = []
    rows = []
    if (where / "fleet" / "holdout.jsonl").exists():
        rows = [json.loads(ln) for ln in (where / "fleet" / "holdout.jsonl").read_text()
                .splitlines() if ln.strip()]
    rows = [r for r in rows if r.get("gate")]
    if rows:
        out += ["## Fresh boards (not in the sample), on the GPU", "",
                "tools/gpu-host/holdout.sh: the README's hardware command, the first night and "
                "the second night (the board's own history store), each board's exit codes "
                "(fleet/holdout.jsonl; the nightly.md files in fleet/holdout/).", "",
                "| board | date | README command | first night | second night | note |",
                "|---|---|---|---|---|---|"]
        out += [f"| {r['uuid']} | {r['date']} | {r['readme_exit']} ({r['readme_wall_s']} s) | "
                f"{r['night1_exit']} ({r['night1_wall_s']} s) | {r['night2_exit']} "
                f"({r['night2_wall_s']} s) | {r.get('note', '')} |" for r in rows]
        out.append("")
    faults = where / "gate-faults.json"
    if faults.exists():
        doc = json.loads(faults.read_text())
        out += ["## Real faults, on the GPU", "",
                "tools/gpu-host/gate_faults.sh after a board's two nights, each fault night "
                "judged against a copy of that board's history:", "",
                "| fault | board | exit | verdict | other processes NVML named | changes by "
                "kind | SASS snapshots that differ | figures moved |", "|---|---|---|---|---|---|---|---|"]
        names = {"corun": "another process runs a compute kernel on the GPU all night",
                 "optlvl": "the driver JIT at optimisation level 1 (GPUCHAR_JIT_OPT_LEVEL=1)"}
        for k, f in doc.items():
            procs = ", ".join(f"pid {p['pid']} ({p['name']}, {p['memory_mib']} MiB)"
                              for p in f.get("other_processes") or []) or "none"
            kinds = ", ".join(f"{n} {c}" for c, n in sorted(f.get("changes", {}).items()))
            top = "; ".join(f"{m[1]} {m[2]:.4g} -> {m[3]:.4g}" for m in f.get("moved_top", [])[:4])
            out.append(f"| {names.get(k, k)} | {f.get('board')} | {f.get('exit')} | "
                       f"{f.get('verdict')} | {procs} | {kinds} | {f.get('sass_count')} | "
                       f"{f.get('moved_count')} (largest: {top}) |")
        out.append("")
    return out


def gate_slack(b: gate.Bounds) -> float:
    """What the writer may leave wider than the rule's bound at either end: its hysteresis
    on the margin and the outward rounding of the range (2 decimals, 4 digits under 1)."""
    from ..results.contract import HYSTERESIS
    lo, hi = gate.outward(b.low, b.high)
    return (HYSTERESIS - 1) * b.margin + max(b.low - lo, hi - b.high) + 1e-12


def figures_csv(reps: list[CV.ModelReport]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["model", "key", "unit", "kind", "boards", "low", "high", "margin",
                "sigma_run", "sigma_board", "exact", "sample", "smallest_move_caught"])
    for rep in reps:
        small = CV.smallest_caught(rep.injections)
        for key, fig in sorted(rep.figs.items()):
            b = rep.bounds.get(key)
            if b is None:
                continue
            w.writerow([rep.model, key, b.unit, CV.kind_of(fig, b), b.n_boards, f"{b.low:.6g}",
                        f"{b.high:.6g}", b.margin, b.sigma_run, b.sigma_board, b.exact,
                        fig.models, small.get(key, "not injected (no later night)")])
    return buf.getvalue()


def run_crossval(store: Store, runs: list, arch: str, *, models: list[str] | None,
                 output: Path | None, command: str) -> int:
    start = time.perf_counter()
    have = sorted({r.model for r in runs if r.arch == arch})
    models = models or have
    missing = [m for m in models if m not in have]
    if missing:
        print(f"gpuchar-expectations: --model {', '.join(missing)}: not in the sample "
              f"(models: {', '.join(have) or 'none'})", file=sys.stderr)
        return 2
    reps = [CV.cross_validate(runs, arch, m) for m in models]
    took = time.perf_counter() - start
    lines = [f"# The nightly gate on {arch}: its error rates, measured", "",
             f"Regenerate: `{command or f'gpuchar-expectations crossval --arch {arch} -o ...'}`"
             f" ({took:.0f} s on the machine that wrote it).", "",
             "## The rule", "",
             f"Design rate: at most {gate.DESIGN_RATE:g} false alarms per board-night over "
             f"{gate.FIGURES} figures and two questions (conformance, change): per figure and "
             f"question {gate.ALPHA:.2g}, z = {gate.Z:.2f}. {gate.rule_text()}. "
             "docs/nightly.md says it in words.", "",
             "## False alarms, each board left out", "",
             "Every board's runs judged in date order with bounds and noise derived from the "
             "other boards only: its first run as a first night (conformance), each later run "
             "as a later night (conformance, and change against its own earlier runs).", "",
             "| model | boards | board-runs | with any alarm | first nights | later nights | "
             "conformance alarms | change alarms |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for rep in reps:
        lines += false_alarm_lines(rep)
    lines.append("")
    for rep in reps:
        lines += alarms_lines(rep) + [""]
    lines += ["## Detection: known moves injected into held-out runs", "",
              "Into each held-out board's last run (a later night; its earlier runs are the "
              "history), one figure at a time: one cycle up and down on exact cycle figures, "
              "+-2%, +-5%, +-10% on every figure (a figure read off a power-of-two sweep: x4 "
              "and /4). Caught: the figure leaves its bounds or moves against the board's "
              "history. A model's error is judged through its cycles and is not injected.", ""]
    for rep in reps:
        h = headline(rep)
        lines += [f"### {rep.model}", "",
                  f"- +-5% on figures whose within-board noise (sigma_run) is under 1%: "
                  f"{_pct(*h['quiet5'])}",
                  f"- one cycle on exact cycle latencies: {_pct(*h['cycle'])}",
                  f"- +-10% on a first night (conformance alone): {_pct(*h['first10'])}", ""]
        lines += detection_lines(rep) + [""]
        small = Counter(CV.smallest_caught(rep.injections).values())
        lines += ["Smallest move caught on every held-out board, in both directions (what the "
                  "gate promises per figure; every figure in gate-figures.csv): "
                  + ", ".join(f"{k}: {small[k]}" for k in ("1 cycle", "2%", "5%", "10%",
                                                           "> 10%") if small[k]), ""]
    lines += ["## Tolerances wider than the noise model's bound", "",
              "An entry of the files whose judged interval is wider than the bound the noise "
              "model derives from the sample (beyond the writer's hysteresis):", ""]
    wide = [w for rep in reps for w in wide_tolerances(store, rep, arch)]
    lines += (["| figure | the files' interval | the model's bound | source |", "|---|---|---|---|"]
              + wide) if wide else ["None."]
    if output:
        lines += on_the_gpu(Path(output).parent)
    text = "\n".join(lines) + "\n"
    if output:
        atomic_write(Path(output), text)
        atomic_write(Path(output).with_name("gate-figures.csv"), figures_csv(reps))
        print(f"gpuchar-expectations: wrote {output} and "
              f"{Path(output).with_name('gate-figures.csv')}", file=sys.stderr)
    else:
        print(text, end="")
    for rep in reps:
        c = CV.false_alarm_counts(rep)
        h = headline(rep)
        print(f"{rep.model}: false alarms {c['with_alarm']}/{c['board_runs']} board-runs; "
              f"+-5% on sigma<1% caught {_pct(*h['quiet5'])}; one cycle {_pct(*h['cycle'])}",
              file=sys.stderr)
    return 1 if wide or any(CV.false_alarm_counts(r)["with_alarm"] for r in reps) else 0
