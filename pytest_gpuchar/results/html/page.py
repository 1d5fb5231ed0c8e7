"""The run's report as one self-contained HTML page (index.html beside gpuchar-results.json):
what the templates are given, built from the report's JSON document alone (a run's own, or a
saved one), so the page of a saved run is the page the run wrote.

The first screen: what ran per arch, the results by status, what failed, is unstable or moved
(with the reason), invalid probes by cause, failed tests, the boards' NVML flags, skips by
reason. Then one section per topic: its tables (one per test module, that is per table of the
papers), its plots (inline SVG), the SASS diffs of its changed snapshots; board to board; the
provenance."""
from __future__ import annotations

import ast
from collections import Counter, defaultdict
from pathlib import Path

from ...core.topic_list import TOPICS
from .. import fleet
from ..changes import is_snapshot_failure, sass_diff
from ..judge import Result
from ..terminal import cause
from . import svg

STATUS_ORDER = ("fail", "error", "unstable", "invalid", "pass", "measured", "info")
ATTENTION = ("fail", "error", "unstable")
# the sections follow the topics in the registry's order (core.topic.TOPICS, one list): a report
# written before runs recorded meta.topics is sectioned by key prefix; the instruction tables'
# keys have their own prefixes
INSTRUCTION_PREFIXES = {"cpi", "latency", "table_i", "overhead", "sass", "unmeasurable"}
MAX_ATTENTION = 200      # rows of the first screen's table (the sections have every result)
BIG_META = {"failures", "skipped", "measured_skips", "topics", "topic_docs", "boards", "gpus",
            "acceptance", "blocked_s", "written", "static_checks", "archs"}


def as_dict(v) -> dict:
    """A meta entry that should be a mapping (an older compacted report stored some as their
    Python repr)."""
    if isinstance(v, dict):
        return v
    if isinstance(v, str) and v.startswith("{"):
        try:
            out = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            return {}
        return out if isinstance(out, dict) else {}
    return {}


def module_of(test: str) -> str:
    return (test or "").split("::")[0]


def topics_of(results: list[dict], meta: dict) -> list[str]:
    """The topic of each result: the run's own record (meta.topics: test module -> topic);
    for an older report, the key's prefix when it names a topic, else the topic most of its
    test module's results name, else the instruction tables' prefixes, else "other"."""
    recorded = as_dict(meta.get("topics"))
    guess = []
    for r in results:
        prefix = r.get("key", "").split(".")[0]
        guess.append(prefix if prefix in TOPICS else None)
    votes: dict[str, Counter] = defaultdict(Counter)
    for r, g in zip(results, guess):
        if g:
            votes[module_of(r.get("test", ""))][g] += 1
    out = []
    for r, g in zip(results, guess):
        mod = module_of(r.get("test", ""))
        if mod in recorded:
            out.append(recorded[mod])
        elif g:
            out.append(g)
        elif votes.get(mod):
            out.append(votes[mod].most_common(1)[0][0])
        elif r.get("key", "").split(".")[0] in INSTRUCTION_PREFIXES:
            out.append("instructions")
        else:
            out.append("other")
    return out


def _moved(r: dict) -> bool:
    dev, allow = r.get("deviation"), r.get("allowance")
    return r.get("status") == "pass" and dev is not None and bool(allow) and \
        abs(dev) > 0.5 * allow


def _board(r: dict) -> str:
    p = r.get("provenance") or {}
    return f"{p.get('device_index', '')} {str(p.get('uuid') or '')[:12]}".strip()


def row(r: dict, index: int) -> dict:
    """A result as a table row (the JSON's fields, and whether it moved)."""
    return {"id": f"r{index}", "key": r.get("key", ""), "arch": r.get("arch", ""),
            "status": r.get("status", ""), "value": r.get("value"), "unit": r.get("unit", ""),
            "spread": r.get("spread"), "expected": r.get("expected", ""),
            "deviation": r.get("deviation"), "detail": r.get("detail", ""),
            "method": r.get("method", ""), "source": r.get("source", ""),
            "test": r.get("test", ""), "board": _board(r), "moved": _moved(r)}


def reason(r: dict) -> str:
    """Why a result needs attention, in one line."""
    if r["status"] == "fail" and r["value"] is not None:
        what = f"measured {r['value']:.4g} {r['unit']}, expected {r['expected'] or '-'}"
        return what + (f"; {r['detail']}" if r["detail"] else "")
    if r["moved"]:
        return (f"passed, {r['deviation']:+.3g} {r['unit']} from {r['expected']}: more than "
                f"half of the tolerance")
    return r["detail"] or r["status"]


def _per_arch(rows: list[dict], meta: dict) -> list[dict]:
    static = as_dict(meta.get("static_checks"))
    archs = list(dict.fromkeys(list(meta.get("archs") or []) + sorted(static) +
                               [r["arch"] for r in rows if r["arch"]]))
    skipped = as_dict(meta.get("skipped"))
    hw_skip = next((k for k, _ in Counter(skipped).most_common()
                    if str(k).startswith("hardware:")), "")
    out = []
    for arch in archs:
        mine = [r for r in rows if r["arch"] == arch]
        boards = sorted({r["board"] for r in mine if r["board"]})
        out.append({"arch": arch, "static": static.get(arch, 0),
                    "counts": Counter(r["status"] for r in mine),
                    "hardware": (f"measured on {len(boards)} GPU(s)" if boards else
                                 (hw_skip or "no hardware figure"))})
    return out


def _invalid(rows: list[dict]) -> list[dict]:
    groups: dict[str, list] = defaultdict(list)
    for r in rows:
        if r["status"] == "invalid":
            groups[cause(r["detail"])].append(r["key"].removeprefix("sass."))
    return [{"cause": c, "n": len(keys), "names": ", ".join(sorted(set(keys)))}
            for c, keys in sorted(groups.items(), key=lambda kv: -len(kv[1]))]


def _failures(meta: dict, rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(snapshot failures with their SASS diff, other failed tests that recorded no failing
    result) from meta.failures."""
    failing = {r["test"] for r in rows if r["status"] in ("fail", "error")}
    sass, other = [], []
    for f in meta.get("failures") or []:
        f = {"test": f.get("test", ""), "message": f.get("message", ""),
             "text": f.get("text", ""), "when": f.get("when", "")}
        if is_snapshot_failure(f):
            sass.append({"test": f["test"], "module": module_of(f["test"]),
                         "diff": sass_diff(f)})
        elif f["test"] not in failing:
            other.append({"test": f["test"], "module": module_of(f["test"]),
                          "message": (f["message"] or f["text"])[:2000], "when": f["when"]})
    return sass, other


def _boards(meta: dict) -> list[dict]:
    out = []
    for b in meta.get("boards") or []:
        start, end = b.get("start") or {}, b.get("end") or {}
        fields = [k for k in dict.fromkeys(list(start) + list(end))
                  if k not in ("unsupported", "errors", "time", "skipped", "matched_by")]
        out.append({"who": f"GPU {b.get('device_index', '?')} {b.get('uuid') or ''}".strip(),
                    "device": b.get("device", ""), "flags": b.get("flags") or [],
                    "skipped": end.get("skipped") or start.get("skipped") or "",
                    "fields": [(k, start.get(k), end.get(k)) for k in fields],
                    "start_time": start.get("time", ""), "end_time": end.get("time", "")})
    return out


def notes(results: list[dict]) -> list[str]:
    """The terminal summary's notes: PTX->SASS mappings that differ from the papers' record,
    the driver's JIT against the offline ptxas of its CUDA version."""
    out = []
    differ = Counter(r.get("arch", "") for r in results
                     if r.get("status") == "info" and (r.get("data") or {}).get("differs"))
    if differ:
        out.append(f"{sum(differ.values())} PTX->SASS mappings differ from the paper's record ("
                   + ", ".join(f"{a} {n}" for a, n in sorted(differ.items()))
                   + "): the info rows of the sections")
    jit = [r for r in results if (r.get("data") or {}).get("jit_equals_ptxas") is not None]
    if jit:
        odd = sorted({r["key"] for r in jit if r["data"]["jit_equals_ptxas"] is False})
        versions = ", ".join(sorted({str(r["data"].get("ptxas")) for r in jit}))
        shown = ", ".join(odd[:12]) + (f" and {len(odd) - 12} more" if len(odd) > 12 else "")
        out.append(f"driver JIT vs ptxas {versions}: {len(jit) - len(odd)} of {len(jit)} probes "
                   f"identical" + (f"; differ: {shown}" if odd else ""))
    return out


def first_screen(rows: list[dict], meta: dict, sass: list, other: list) -> dict:
    attention = [r for r in rows if r["status"] in ATTENTION or r["moved"]]
    order = {s: k for k, s in enumerate(ATTENTION)}
    attention.sort(key=lambda r: (order.get(r["status"], len(order)), r["arch"], r["key"]))
    skipped = as_dict(meta.get("skipped"))
    return {"counts": [(s, sum(r["status"] == s for r in rows)) for s in STATUS_ORDER],
            "total": len(rows), "moved": sum(r["moved"] for r in rows),
            "archs": _per_arch(rows, meta),
            "attention": [dict(r, reason=reason(r)) for r in attention[:MAX_ATTENTION]],
            "attention_total": len(attention), "invalid": _invalid(rows),
            "sass": sass, "other": other, "boards": _boards(meta),
            "skips": Counter(skipped).most_common(12), "skip_total": sum(skipped.values()),
            "acceptance": as_dict(meta.get("acceptance"))}


def _plots(artifacts: list[dict], directory: Path | None) -> list[dict]:
    """The run's PNG plots as inline SVG (their twin), an older one's PNG as a data URI; the
    data files (JSON) by name."""
    out = []
    for a in artifacts:
        name = a.get("name", "")
        p = Path(directory) / name if directory else None
        item = {"name": name, "caption": a.get("caption", ""), "test": a.get("test", ""),
                "module": module_of(a.get("test", "")), "svg": "", "png": "", "missing": False}
        if name.endswith(".png"):
            twin = p.with_suffix(".svg") if p else None
            if twin is not None and twin.is_file():
                item["svg"] = svg.from_file(twin)
            elif p is not None and p.is_file():
                item["png"] = svg.png_data_uri(p)
            else:
                item["missing"] = True
        out.append(item)
    return out


def _fleet(results: list[dict]) -> dict:
    """Board to board: the table and a plot of each characteristic relative to the median."""
    objs = []
    for r in results:
        try:
            objs.append(Result(**{k: v for k, v in r.items()
                                  if k in Result.__dataclass_fields__}))
        except (TypeError, ValueError):
            continue
    rows = fleet.compare(objs)
    if not rows:
        return {}
    boards = sorted({b for r in rows for b in r.values})

    def rel(r) -> dict[str, float]:
        return {b: 100.0 * (v - r.median) / abs(r.median) if r.median else 0.0
                for b, v in r.values.items()}
    # the flagged characteristics, then those whose boards differ most: at most 40 rows
    shown = sorted(rows, key=lambda r: (not r.flagged, -max(map(abs, rel(r).values()))))[:40]
    plot = svg.dots([(f"{r.arch} {r.key}", rel(r), set(r.flagged)) for r in shown],
                    title=f"{len(rows)} characteristics on {len(boards)} GPUs"
                          + (f"; shown: the {len(shown)} farthest apart, flagged first"
                             if len(rows) > len(shown) else ""),
                    salt="fleet")
    return {"boards": boards, "rows": rows, "plot": plot,
            "flagged": sum(bool(r.flagged) for r in rows)}


def sections(rows: list[dict], topics: list[str], meta: dict, plots: list[dict],
             sass: list, other: list) -> list[dict]:
    """One section per topic: its tables (one per test module), plots, SASS diffs, failures."""
    docs = as_dict(meta.get("topic_docs"))
    by_topic: dict[str, list] = defaultdict(list)
    for r, t in zip(rows, topics):
        by_topic[t].append(r)
    mod_topic = {module_of(r["test"]): t for r, t in zip(rows, topics)}
    mod_topic.update(as_dict(meta.get("topics")))
    names = [t for t in TOPICS if t in by_topic] + sorted(set(by_topic) - set(TOPICS))
    out = []
    for name in names:
        mine = by_topic[name]
        tables: dict[str, list] = defaultdict(list)
        for r in mine:
            tables[module_of(r["test"]) or "(no test)"].append(r)
        out.append({"name": name, "id": f"topic-{name}", "doc": docs.get(name, ""),
                    "counts": [(s, n) for s, n in ((s, sum(r["status"] == s for r in mine))
                                                   for s in STATUS_ORDER) if n],
                    "tables": [{"module": m, "title": m.rsplit("/", 1)[-1], "rows": rs}
                               for m, rs in tables.items()],
                    "plots": [p for p in plots if mod_topic.get(p["module"]) == name],
                    "sass": [s for s in sass if mod_topic.get(s["module"]) == name],
                    "other": [o for o in other if mod_topic.get(o["module"]) == name]})
    placed = {id(p) for s in out for p in s["plots"]}
    loose = [p for p in plots if id(p) not in placed]
    loose_sass = [s for s in sass if mod_topic.get(s["module"]) not in by_topic]
    if loose or loose_sass:
        out.append({"name": "other", "id": "topic-other-files", "doc": "", "counts": [],
                    "tables": [], "plots": loose, "sass": loose_sass, "other": []})
    return out


def provenance(meta: dict) -> dict:
    plain = [(k, v) for k, v in meta.items() if k not in BIG_META and not isinstance(v, dict)]
    blocked = as_dict(meta.get("blocked_s"))
    return {"items": plain, "gpus": meta.get("gpus") or [],
            "blocked": as_dict(blocked.get("total")) if blocked else {}}


def generations_context(table) -> dict:
    if table is None or not getattr(table, "rows", None):
        return {}
    cols = [c.label for c in table.columns]
    return {"columns": cols, "rows": [(k, table.units.get(k, ""), [cells.get(c, "") for c in cols])
                                      for k, cells in table.rows.items()]}


def report_context(doc: dict, artifacts_dir: Path | None = None, generations=None) -> dict:
    """Everything report.html.j2 shows, from the report's document."""
    meta = doc.get("meta") or {}
    results = [r for r in doc.get("results") or [] if isinstance(r, dict)]
    rows = [row(r, k) for k, r in enumerate(results)]
    sass, other = _failures(meta, rows)
    plots = _plots(doc.get("artifacts") or [], artifacts_dir)
    devices = sorted({str(meta.get("device") or "")} - {""}) or \
        sorted({str((r.get("provenance") or {}).get("device", "")) for r in results} - {""})
    archs = ", ".join(meta.get("archs") or []) or "-"
    title = f"gpuchar: {', '.join(devices) or 'no GPU'} ({archs})"
    return {"title": title, "meta": meta, "devices": devices,
            "first": dict(first_screen(rows, meta, sass, other), notes=notes(results)),
            "sections": sections(rows, topics_of(results, meta), meta, plots, sass, other),
            "multi_board": len({r["board"] for r in rows if r["board"]}) > 1,
            "fleet": _fleet(results), "provenance": provenance(meta),
            "generations": generations_context(generations)}
