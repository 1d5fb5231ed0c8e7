"""The driver's JIT against the offline ptxas of its CUDA version, over a run: how many probes
compile identically with `ptxas -c` (the mode the driver compiles PTX in for cuLinkAddData) and
with the default whole-program ptxas, and what differs, class by class (core/sassdiff.py): how
many probes show each class, how many in their timed region, and one example line of each
compiler. Read from the results' data (`jit_vs_ptxas`, written by the instruction tables), so a
committed run's report can be summarised again offline."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core import sassdiff

RELOCATABLE = "ptxas -c"
WHOLE = "ptxas"


@dataclass
class Row:
    name: str
    probes: int = 0
    timed_region: int = 0
    example: tuple[str, str] = ("", "")
    example_probe: str = ""


@dataclass
class Summary:
    ptxas: str
    compared: int
    identical: dict[str, int]            # mode -> probes identical to the JIT
    classes: dict[str, list[Row]] = field(default_factory=dict)   # mode -> rows


def _get(r, name: str, default=None):
    return r.get(name, default) if isinstance(r, dict) else getattr(r, name, default)


def summary(results) -> Summary | None:
    """The comparison over every result (Result objects or their dicts) carrying it; each
    probe once (a key measured by two tests counts once)."""
    seen: dict[tuple, dict] = {}
    versions: set[str] = set()
    for r in results:
        data = _get(r, "data") or {}
        if isinstance(data.get("jit_vs_ptxas"), dict):
            seen.setdefault((_get(r, "arch"), _get(r, "key")), data["jit_vs_ptxas"])
            versions.add(str(data.get("ptxas")))
    if not seen:
        return None
    found = {m for cmp in seen.values() for m in cmp}
    modes = [m for m in (RELOCATABLE, WHOLE) if m in found] + sorted(found - {RELOCATABLE,
                                                                               WHOLE})
    out = Summary(", ".join(sorted(versions)), len(seen), {m: 0 for m in modes})
    for (_, key), cmp in sorted(seen.items()):
        for mode, c in cmp.items():
            out.identical[mode] += bool(c.get("identical"))
            rows = {row.name: row for row in out.classes.setdefault(mode, [])}
            for name, found in (c.get("classes") or {}).items():
                row = rows.get(name)
                if row is None:
                    row = Row(name)
                    out.classes[mode].append(row)
                    rows[name] = row
                row.probes += 1
                row.timed_region += bool(found.get("timed_region"))
                if not row.example_probe and any(found.get("example") or ()):
                    row.example, row.example_probe = tuple(found["example"]), key
    for rows in out.classes.values():
        rows.sort(key=lambda row: -row.probes)
    return out


def line(s: Summary) -> str:
    """One line for the terminal summary."""
    parts = [f"{s.identical.get(m, 0)} of {s.compared} identical to {m}" for m in
             (RELOCATABLE, WHOLE) if m in s.identical]
    top = ", ".join(f"{row.name} {row.probes}" for row in s.classes.get(WHOLE, [])[:4])
    return (f"driver JIT vs ptxas {s.ptxas}: " + "; ".join(parts) +
            (f" (whole-program differs by: {top}; the report has every class)" if top else ""))


def _code(x: str) -> str:
    """A SASS line as Markdown code (a double-backtick span when it holds a backtick)."""
    if not x:
        return "-"
    return f"`` {x} ``" if "`" in x else f"`{x}`"


def markdown(s: Summary | None) -> list[str]:
    if s is None:
        return []
    out = ["## Driver JIT against ptxas", "",
           f"{s.compared} probes of the instruction tables, the driver's JIT SASS against the "
           f"offline ptxas {s.ptxas} of its CUDA version: "
           + "; ".join(f"{s.identical.get(m, 0)} identical to `{m}`" for m in s.identical)
           + ". The driver compiles PTX for a link (cuLinkAddData), as `ptxas -c` does; what "
           "the default whole-program ptxas (the static snapshots' mode) does otherwise, by "
           "class of instruction:", ""]
    for mode, rows in s.classes.items():
        if not rows:
            continue
        out += [f"Against `{mode}`:", "",
                "| difference | probes | in the timed region | example: JIT | example: ptxas "
                "| what it is |", "|---|---|---|---|---|---|"]
        for row in rows:
            jit, ptx = (_code(x) for x in row.example)
            out.append(f"| {row.name} | {row.probes} | {row.timed_region} | {jit} | {ptx} | "
                       f"{sassdiff.describe(row.name)} |".replace("\n", " "))
        out.append("")
    return out
