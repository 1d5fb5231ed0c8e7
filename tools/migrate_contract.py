#!/usr/bin/env python3
"""One-off migration of the expectation files to schema 2, the contract form (issue 39).

    python tools/migrate_contract.py STORE [--root expectations] [--sample results/sm_90/fleet/sample.jsonl.gz]

- every file: `schema: 2`; an entry's own provenance block is dropped, the provenance its
  measured entries shared is written once at the top of the file (`provenance.measured`);
- sm_90: the fleet sample is the history store STORE's runs (tools/fleet_store.sh builds it
  from what git keeps), exported to --sample; each model's device section is written from it
  by the contract writer (results/contract.py): one line per figure. A device entry the
  sample cannot derive (fewer than 3 boards) is kept, without its provenance and the old
  `noise:` (whose moves the store holds).
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_gpuchar.core.atomic import atomic_write  # noqa: E402
from pytest_gpuchar.results import contract, noise, sample as S  # noqa: E402
from pytest_gpuchar.results import expectations as E  # noqa: E402
from pytest_gpuchar.results.history import open_history  # noqa: E402
from pytest_gpuchar.results.yamledit import render_entry  # noqa: E402

ORDER = ("schema", "arch", "description", "sources", "provenance", "methods",
         "characteristics", "mappings", "devices", "unmeasurable")
ALIAS = "__gpuchar_alias__"
SHARED = ("device", "driver", "cuda_driver_api", "cuda_runtime", "ptxas", "sm_count",
          "sm_clock_max_mhz")


def _shared(entries: dict) -> dict | None:
    provs = [e.get("provenance") or {} for e in entries.values() if isinstance(e, dict)]
    tuples = collections.Counter(tuple((k, p.get(k)) for k in SHARED if p.get(k) is not None)
                                 for p in provs if p)
    if not tuples:
        return None
    common = dict(tuples.most_common(1)[0][0])
    dates = sorted(str(p.get("date"))[:10] for p in provs if p.get("date"))
    if dates:
        common["dates"] = [dates[0], dates[-1]]
    common["entries"] = f"{sum(1 for p in provs if p)} measured entries (their source line)"
    return common


def _clean(entry: dict) -> dict:
    out = {k: v for k, v in entry.items() if k not in ("provenance", "noise")}
    return out


def _dump_top(key: str, value) -> list[str]:
    text = yaml.safe_dump({key: value}, sort_keys=False, width=100, allow_unicode=True,
                          default_flow_style=None if key == "provenance" else False)
    return text.rstrip("\n").split("\n")


def _anchor(key: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", "_", re.sub(r"\d+", "N", key.split(".", 1)[-1]))[:40]
    name, n = base.strip("_") or "method", 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def share_methods(data: dict) -> None:
    """A method text two or more entries of the file share is written once, under `methods:`
    with a YAML anchor, and each entry names it (`method: *name`)."""
    chars = data.get("characteristics") or {}
    count = collections.Counter(e.get("method") for e in chars.values()
                                if isinstance(e, dict) and e.get("method"))
    taken: set[str] = set()
    names: dict[str, str] = {}
    for key, e in chars.items():
        m = e.get("method") if isinstance(e, dict) else None
        if m and count[m] > 1:
            if m not in names:
                names[m] = _anchor(key, taken)
            e["method"] = f"{ALIAS}{names[m]}"
    if names:
        data["methods"] = {name: text for text, name in names.items()}


def _aliases(lines: list[str]) -> list[str]:
    return [re.sub(rf"'?{ALIAS}([A-Za-z0-9_]+)'?", r"*\1", ln) for ln in lines]


def render_file(head: list[str], data: dict) -> str:
    lines = list(head)
    for top in ORDER:
        if top not in data:
            continue
        v = data[top]
        if top == "methods":
            lines.append("methods:              # texts several entries share (YAML anchors)")
            for name, text in v.items():
                dumped = yaml.safe_dump(text, width=10**9, allow_unicode=True).rstrip("\n")
                dumped = dumped.removesuffix("\n...").split("\n")
                lines.append(f"  {name}: &{name} {dumped[0]}")
                lines += ["    " + d.lstrip() if d else d for d in dumped[1:]]
            continue
        if top in ("characteristics", "mappings", "unmeasurable"):
            if not v:
                lines.append(f"{top}: {{}}")
                continue
            lines.append(f"{top}:")
            for k, e in v.items():
                lines += _aliases(render_entry(k, e, 2))
        elif top == "devices":
            lines.append("devices:")
            for dname, dd in v.items():
                lines.append(f"  {yaml.safe_dump(dname).strip().removesuffix('...').strip()}:")
                lines.append("    characteristics:")
                for k, e in (dd.get("characteristics") or {}).items():
                    lines += render_entry(k, e, 6)
        else:
            lines += _dump_top(top, v)
    return "\n".join(lines) + "\n"


def migrate_file(path: Path, keep_devices: bool) -> None:
    text = path.read_text()
    head = []
    for ln in text.split("\n"):
        if ln.startswith("#") or (not ln.strip() and head):
            head.append(ln)
        else:
            break
    data = yaml.safe_load(text)
    data["schema"] = 2
    chars = data.get("characteristics") or {}
    shared = _shared(chars)
    if shared:
        prov = dict(data.get("provenance") or {})
        prov["measured"] = shared
        data["provenance"] = prov
    data["characteristics"] = {k: _clean(e) for k, e in chars.items()}
    share_methods(data)
    devices = {}
    for dname, dd in (data.get("devices") or {}).items():
        kept = {k: _clean(e) for k, e in (dd.get("characteristics") or {}).items()}
        if keep_devices and kept:
            for k, e in kept.items():
                base = chars.get(k)
                if base and e.get("unit") == base.get("unit"):
                    e.pop("unit")
                if base and e.get("method") == base.get("method"):
                    e.pop("method")
                e["source"] = re.sub(r";? ?\d+ boards \(provenance\.boards\)", "",
                                     str(e.get("source", ""))).strip()
            devices[dname] = {"characteristics": kept}
    if devices:
        data["devices"] = devices
    else:
        data.pop("devices", None)
    out = render_file(head, data)
    E.parse(out, path)
    atomic_write(path, out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--root", type=Path, default=Path("expectations"))
    ap.add_argument("--sample", type=Path, default=Path("results/sm_90/fleet/sample.jsonl.gz"))
    ap.add_argument("--drop", type=Path, help="JSON list of [board, date, key]: results of "
                                              "older code the old rule left out (superseded)")
    args = ap.parse_args()
    with open_history(args.store, create=False) as h:
        docs = [h.run(r["id"]) for r in h.runs(arch="sm_90")]
    drop = {tuple(x) for x in json.loads(args.drop.read_text())} if args.drop else set()
    for d in docs:
        d["results"] = [r for r in d["results"]
                        if (d["run"]["board"], d["run"]["date"], r.get("key")) not in drop]
    runs = noise.fleet_runs(docs)
    metas = {(r.board, r.date): d.get("meta", {}) for d, r in zip(docs, runs)}
    sample_docs = [S.run_doc(r, {k: (metas.get((r.board, r.date)) or {}).get(k)
                                 for k in S.META_FIELDS}) for r in runs]
    for f in E.all_files(args.root):
        old_devices = f.stem == "sm_90"
        migrate_file(f, keep_devices=old_devices)
    S.write(args.sample, sample_docs)
    sid = S.sample_id(sample_docs)
    for model in sorted({r.model for r in runs}):
        w = contract.write_model("sm_90", model, noise.fleet_runs(sample_docs), root=args.root,
                                 sample=sid, export=str(args.sample))
        print(f"{model}: {w.changed} entries written, {len(w.too_few)} on fewer than 3 boards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
