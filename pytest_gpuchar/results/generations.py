"""Generations: one characteristic across archs, one column per arch and board, from the
expectation files (the papers' records, the boards measured here) and a run's own figures,
so a user sees how latency and throughput moved from Volta to Blackwell. Pure."""
from __future__ import annotations

from dataclasses import dataclass, field

from . import expectations as E

# archs in generation order, the GPU each arch-level record describes when no device says
ORDER = ("sm_50", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a",
         "sm_100", "sm_103", "sm_120", "sm_121")


@dataclass
class Column:
    arch: str
    label: str                 # "sm_80 (ampere22)", "sm_90 NVIDIA H200"
    source: str = ""


@dataclass
class Table:
    columns: list[Column] = field(default_factory=list)
    rows: dict[str, dict[str, str]] = field(default_factory=dict)   # key -> label -> cell
    units: dict[str, str] = field(default_factory=dict)


def cell(e: E.Expected) -> str:
    if e.value is not None:
        return f"{e.value:g}"
    if e.range is not None:
        return f"{e.range[0]:g}-{e.range[1]:g}"
    if e.one_of is not None:
        return " or ".join(f"{v:g}" for v in e.one_of)
    return ""


def _source(entries) -> str:
    """The records' sources, by their short names (a measured run: "measured")."""
    srcs = sorted({e.source.split(" ")[0].strip(",;:") for e in entries if e.source})
    return ", ".join(srcs[:3]) + (", ..." if len(srcs) > 3 else "")


def table(store: E.Store, prefixes: tuple[str, ...] = (), archs=ORDER,
          results=()) -> Table:
    """Every characteristic (whose key starts with one of `prefixes`, all if none) that has
    a figure on two or more columns: arch-level records and per-device sections, plus the
    figures of `results` (a run) as their own columns."""
    t = Table()
    for arch in archs:
        exp = store.load(arch)
        if exp is None:
            continue
        chars = {k: e for k, e in exp.characteristics.items() if cell(e)}
        if chars:
            col = Column(arch, f"{arch} ({_source(chars.values())})", _source(chars.values()))
            _add(t, col, chars)
        for dev, entries in sorted(exp.devices.items()):
            entries = {k: e for k, e in entries.items() if cell(e)}
            if entries:
                _add(t, Column(arch, f"{arch} {dev}", "measured"), entries)
    runs: dict[str, dict] = {}
    for r in results:
        if r.value is not None and r.status.value in ("pass", "fail", "measured"):
            dev = (r.provenance or {}).get("device", "this run")
            runs.setdefault(f"{r.arch} {dev} (this run)", {})[r.key] = r
    for label, rs in runs.items():
        t.columns.append(Column(label.split(" ")[0], label, "this run"))
        for k, r in rs.items():
            t.rows.setdefault(k, {})[label] = f"{r.value:.4g}"
            t.units.setdefault(k, r.unit)
    keep = {k: v for k, v in t.rows.items() if len(v) >= 2 and
            (not prefixes or k.startswith(prefixes))}
    t.rows = dict(sorted(keep.items()))
    used = {lab for v in t.rows.values() for lab in v}
    t.columns = [c for c in t.columns if c.label in used]
    return t


def _add(t: Table, col: Column, entries: dict[str, E.Expected]) -> None:
    t.columns.append(col)
    for k, e in entries.items():
        t.rows.setdefault(k, {})[col.label] = cell(e)
        t.units.setdefault(k, e.unit)


def markdown(t: Table, title: str = "## Generations") -> list[str]:
    if not t.rows:
        return []
    labels = [c.label for c in t.columns]
    out = [title, "",
           "One characteristic per row, one column per arch record (its sources) or board; a "
           "paper's figure and this suite's can be measured differently: the expectation "
           "files' `method` and `note` say how.", "",
           "| characteristic | unit | " + " | ".join(labels) + " |",
           "|---|---|" + "---|" * len(labels)]
    for k, cells in t.rows.items():
        out.append(f"| {k} | {t.units.get(k, '')} | "
                   + " | ".join(cells.get(lab, "") for lab in labels) + " |")
    return out + [""]
