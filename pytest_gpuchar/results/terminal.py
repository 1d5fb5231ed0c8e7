"""The `gpuchar` section of the terminal summary, one screen: what ran per arch, the results
by status, what failed or moved, invalid probes grouped by cause, skips grouped by reason.
Everything else is in the report (--gpuchar-report DIR) or with -v."""
from __future__ import annotations

import re
import textwrap
from collections import Counter, defaultdict
from pathlib import Path

from . import durations
from .judge import Status

MAX_LISTED = 30   # rows of one kind listed
MIN_WIDTH = 60    # a narrower terminal still gets lines of this width
STATUS_WORDS = {"pass": "passed", "fail": "failed", "unstable": "unstable",
                "invalid": "probes invalid", "measured": "measured (no expectation)",
                "info": "PTX->SASS mapping notes", "error": "errors"}


def wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` characters, broken only at spaces, continued with
    four more spaces of indent; nothing is cut (a command or an arch name in a line is what a
    user must type or read: a word longer than the line stays whole)."""
    if len(text) <= width:
        return [text]
    lead = text[:len(text) - len(text.lstrip())]
    return textwrap.wrap(text, width, subsequent_indent=lead + "    ", break_long_words=False,
                         break_on_hyphens=False) or [text]


def _width(tr) -> int:
    tw = getattr(tr, "_tw", None)
    return max(MIN_WIDTH, (getattr(tw, "fullwidth", 0) or 80) - 1)


def _line(tr, text: str, **markup) -> None:
    for line in wrap(text, _width(tr)):
        tr.write_line(line, **markup)


def _row(tr, text: str, **markup) -> None:
    """A row of a table (fixed columns): written whole, neither wrapped nor cut (a narrow
    terminal folds it)."""
    tr.write_line(text, **markup)


def write(tr, st) -> None:
    rec = st.recorder
    if not (rec.results or st.skip_reasons or st.static_ran or st.static_skipped or
            st.snapshots_kept or "acceptance" in rec.meta or "history" in rec.meta):
        return
    tr.section("gpuchar")
    verbose = tr.config.getoption("verbose") > 0
    _static(tr, st)
    _boards(tr, rec.meta.get("boards") or [])
    counts = rec.counts()
    if counts:
        _line(tr, "results: " + ", ".join(f"{v} {STATUS_WORDS.get(k, k)}"
                                          for k, v in counts.items()))
    _measured(tr, rec)
    _invalid(tr, rec)
    _mappings(tr, rec, verbose)
    _jit_vs_ptxas(tr, rec)
    _fleet(tr, rec)
    for reason, n in sorted(st.skip_reasons.items(), key=lambda x: -x[1])[:10]:
        _line(tr, f"skipped {n}: {reason}")
    if len(st.skip_reasons) > 10:
        _line(tr, f"  ... {len(st.skip_reasons) - 10} more skip reasons (-rs lists them)")
    for name, why in sorted(rec.meta.get("artifacts_failed", {}).items()):
        _line(tr, f"plot not written: {name}: {why}", yellow=True)
    if rec.meta.get("xdist_grouping"):
        _line(tr, rec.meta["xdist_grouping"], yellow=True)
    _acceptance(tr, rec.meta.get("acceptance"))
    if st.snapshots_kept == "interrupted":
        _line(tr, "snapshots: no unused snapshot reported or deleted: the run was interrupted "
                  "(clean-up happens in a whole run without failures)", yellow=True)
    elif st.snapshots_kept:
        _line(tr, f"snapshots: no unused snapshot reported or deleted: {st.snapshots_kept} "
                  f"test(s) failed or errored in this run (clean-up happens in a run without "
                  f"failures)", yellow=True)
    for ln in durations.lines(rec.meta.get("time_by_topic", {})):
        _line(tr, ln)
    if "written" in rec.meta:
        paths = [Path(p) for p in rec.meta["written"]]
        dirs = {p.parent for p in paths}
        _line(tr, f"reports in {dirs.pop()}: " + ", ".join(p.name for p in paths)
              if len(dirs) == 1 else "reports: " + ", ".join(map(str, paths)))
    _history(tr, rec.meta.get("history"))


def _history(tr, h: dict | None) -> None:
    """Where --gpuchar-history recorded the run, or why it did not."""
    if not h:
        return
    if "error" in h:
        _line(tr, f"history: NOT recorded into {h['target']}: {h['error']}", red=True)
    elif "note" in h:
        _line(tr, f"history: {h['note']} ({h['target']})")
    else:
        new = [i for i in h["runs"] if i not in h["existing"]]
        _line(tr, f"history: {h['target']}: " + (f"recorded run(s) {', '.join(map(str, new))}"
                                                 if new else "") +
              (f"{'; ' if new else ''}already recorded: run(s) "
               f"{', '.join(map(str, h['existing']))}" if h["existing"] else ""))


def _static(tr, st) -> None:
    archs = sorted(set(st.static_ran) | set(st.static_skipped))
    if not archs:
        return
    parts = [f"{a} {st.static_ran[a]}" + (f" (skipped: {st.static_skipped[a]})"
                                            if not st.static_ran[a] else "") for a in archs]
    _line(tr, "static checks run per arch: " + ", ".join(p for p in parts if " (" not in p))
    for p in parts:
        if " (" in p:
            _line(tr, f"  {p}", yellow=True)
    b = st.builds
    hits = b.listings.hits if b.listings else 0
    if b.assembled or hits:
        where = (f"{hits} read from the listing cache ({b.listings.root}; pytest --cache-clear "
                 f"assembles them again)") if hits else "none from a cache"
        _line(tr, f"offline SASS modules: {b.assembled} assembled by ptxas + nvdisasm, {where}")
    if not sum(st.static_ran.values()):
        _line(tr, "NO STATIC CHECK RAN: no ptxas/nvdisasm handles these archs (per arch above: "
                  "why, and what to install)", red=True, bold=True)


def _boards(tr, boards: list[dict]) -> None:
    """Each GPU's board as NVML saw it at the start and the end: what makes its figures
    suspect (clocks held, ECC errors, a narrow PCIe link, MIG), or why NVML could not say."""
    for b in boards:
        who = f"board GPU {b.get('device_index', '?')} {b.get('uuid') or b.get('device', '')}"
        skipped = b.get("end", {}).get("skipped") or b.get("start", {}).get("skipped")
        if b.get("flags"):
            for f in b["flags"]:
                _line(tr, f"{who}: {f}", red=True)
        elif skipped:
            _line(tr, f"{who}: not read: {skipped}", yellow=True)
        else:
            _line(tr, f"{who} (NVML, start and end): no clock held, no ECC error")


def _measured(tr, rec) -> None:
    measured = [r for r in rec.results if r.value is not None]
    bad = [r for r in rec.results if r.status in (Status.FAIL, Status.UNSTABLE, Status.ERROR)]
    moved = [r for r in rec.results if r.moved]
    shown = bad + moved if len(measured) > 40 else measured + [r for r in bad if r.value is None]
    if not shown:
        return
    if len(measured) > 40:
        _line(tr, f"failed, unstable or moved (passed using more than half of the "
                  f"tolerance): {len(bad)} + {len(moved)} of {len(measured)} measured")
    _row(tr, f"{'arch':7s} {'characteristic':34s} {'measured':>9s} {'unit':9s} "
             f"{'expected':30s} {'dev':>7s} status")
    for r in shown[:MAX_LISTED * 2]:
        _row(tr, r.line() + (" (moved)" if r.moved else ""))
    if len(shown) > MAX_LISTED * 2:
        _line(tr, f"  ... {len(shown) - MAX_LISTED * 2} more in the report "
                  f"(--gpuchar-report DIR)")


def cause(detail: str) -> str:
    """The kind of an invalid probe's finding, without its probe name and counts."""
    text = re.sub(r"^probe invalid: ", "", detail.splitlines()[0] if detail else "")
    text = re.sub(r"^[\w./+-]+: ", "", text)                  # the probe's name
    text = re.sub(r"^chain length \d+: ", "", text)
    return re.split(r"[:;{]", text)[0].strip() or "(no detail)"


def _invalid(tr, rec) -> None:
    invalid = rec.by_status(Status.INVALID)
    if not invalid:
        return
    per_arch = Counter(r.arch for r in invalid)
    _line(tr, f"{len(invalid)} probes invalid, no number reported ("
              + ", ".join(f"{a} {n}" for a, n in sorted(per_arch.items())) + "), by cause:")
    groups: dict[str, list] = defaultdict(list)
    for r in invalid:
        groups[cause(r.detail)].append(r)
    for why, rs in sorted(groups.items(), key=lambda x: -len(x[1])):
        names = sorted({r.key.removeprefix("sass.") for r in rs})
        _line(tr, f"  {len(rs):3d} {why}: {', '.join(names)}")


def _mappings(tr, rec, verbose: bool) -> None:
    info = [r for r in rec.by_status(Status.INFO) if r.data.get("differs")]
    if not info:
        return
    per_arch = Counter(r.arch for r in info)
    _line(tr, f"{len(info)} PTX->SASS mappings differ from the paper's record ("
              + ", ".join(f"{a} {n}" for a, n in sorted(per_arch.items()))
              + ("): row: paper -> today's compiler" if verbose else
                 "; -v lists them, the report has them)"))
    if not verbose:
        return
    for r in info:
        unit = " + ".join(f"{v:g}*{k}" if v != 1 else k for k, v in r.data["unit"].items())
        _line(tr, f"  {r.arch} {r.key[len('sass.'):]:18s} {r.data['paper']} -> "
                  f"{unit} (ptxas {r.data['ptxas']})")


def _jit_vs_ptxas(tr, rec) -> None:
    """How the driver-JIT SASS compares with the offline ptxas of the driver's CUDA version
    (the driver's compiler is part of the driver: this is how a driver changes code): with
    `ptxas -c`, the mode the driver compiles PTX in, and with whole-program ptxas, by class."""
    from . import jitdiff
    s = jitdiff.summary(rec.results)
    if s is not None:
        differ = sorted({r.key for r in rec.results if r.data.get("jit_equals_ptxas") is False})
        _line(tr, jitdiff.line(s) + (f"; differ from ptxas -c: {', '.join(differ)}"
                                     if differ else ""))
        return
    compared = [r for r in rec.results if r.data.get("jit_equals_ptxas") is not None]
    if compared:      # a run from before the classes were recorded
        differ = sorted({r.key for r in compared if r.data["jit_equals_ptxas"] is False})
        _line(tr, f"driver JIT vs ptxas: {len(compared) - len(differ)} of {len(compared)} "
                  f"probes identical")


def _acceptance(tr, acc: dict | None) -> None:
    """What a --snapshot-update run accepted as the new expectations, and what it refused."""
    if not acc:
        return
    if "note" in acc:
        _line(tr, f"expectations: {acc['note']}")
        return
    done, refused = acc["accepted"], acc["refused"]
    _line(tr, f"expectations accepted ({acc['level']} level): {len(done)}; refused: "
              f"{len(refused)}")
    for s in acc.get("samples") or []:
        _line(tr, f"  {s['arch']} {s['device']}: fleet sample ({s['fleet']}) of {s['boards']} "
                  f"boards, {s['runs']} runs ({s['sample']}, {s['export']}): {s['rewritten']} "
                  f"entries rewritten, {s['unchanged']} unchanged")
    for a in done[:MAX_LISTED]:
        if isinstance(a["tolerance"], dict):
            tol = " (tolerance " + ", ".join(f"{k} {v:g}" for k, v in a["tolerance"].items()) \
                + ")"
            _line(tr, f"  {a['arch']} {a['key']}: {_figure(a['old'])} -> {_figure(a['new'])} "
                      f"{a['unit']}{tol} [{a['device']}]")
        else:
            _line(tr, f"  {a['arch']} {a['key']}: {a['old'] or '(none)'} -> {a['new']} "
                      f"[{a['device']}]")
    if len(done) > MAX_LISTED:
        _line(tr, f"  ... {len(done) - MAX_LISTED} more in the report")
    for why, n in Counter(r["why"] for r in refused).most_common(10):
        _line(tr, f"  refused {n}: {why}")


def _figure(v) -> str:
    """A value, or a range over boards, as the acceptance lists it."""
    if v is None:
        return "-"
    if isinstance(v, (list, tuple)):
        return "-".join(f"{x:g}" for x in v)
    return f"{v:g}"


def _board_dependent(tr, rec) -> None:
    """The figures judged against a model's range from a fleet sample (conformance)."""
    dep = [r for r in rec.results if r.boards > 1]
    if not dep:
        return
    spans = sorted({r.boards for r in dep})
    out = [r for r in dep if r.status == Status.FAIL]
    _line(tr, f"board-dependent: {len(dep)} figures judged against their model's range from "
              f"a fleet sample (over {spans[0]}-{spans[-1]} boards); {len(out)} outside it",
          **({"red": True} if out else {}))


def _fleet(tr, rec) -> None:
    from . import fleet
    _board_dependent(tr, rec)
    rows = fleet.compare(rec.results)
    if not rows:
        return
    off = [r for r in rows if r.flagged]
    boards = sorted({b for r in rows for b in r.values})
    _line(tr, f"board to board: {len(rows)} characteristics on {len(boards)} GPUs; "
              f"{len(off)} with a GPU outside the fleet's spread")
    for r in off[:MAX_LISTED]:
        for b, why in r.flagged.items():
            _line(tr, f"  {r.arch} {r.key}: {b}: {why}", red=True)
