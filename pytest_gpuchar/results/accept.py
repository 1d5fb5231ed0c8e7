"""Accepting a hardware run's measured figures as the new expectations, with
`pytest --snapshot-update` (in the same run as the snapshots): per device by default, at the
arch level with --gpuchar-accept-level=arch; through the same writer as
`gpuchar-expectations update` (every other entry, comment and line of the file kept, atomic).

Never accepted: results that are invalid, unstable or errors; SPEC's bars (peak fractions,
achieved/peak); a paper's record at the arch level (a file whose entries come from a paper:
such an arch is accepted per device); any result of a test that failed for another reason
than a figure out of tolerance (or errored at setup: it recorded nothing)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from . import expectations as E

REFUSED_STATUSES = ("invalid", "unstable", "error", "info")




@dataclass
class Acceptance:
    level: str                       # "device" (each result's own device) or "arch"
    root: Path
    # device level: "extend" adds this board to the model's boards (every other board's
    # figure kept, the range spanning them all); "replace" makes this board's figure the
    # model's alone (an explicit choice: --gpuchar-accept-fleet=replace)
    fleet: str = "extend"
    candidates: list[dict] = field(default_factory=list)   # results of tests that may write
    accepted: list[dict] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)      # the fleet samples extended

    def consider(self, results: list[dict], test_ok: bool, why_not: str = "") -> None:
        """The results one test recorded; `test_ok`: the test passed, or failed only because a
        figure was out of tolerance (what accepting is for)."""
        if test_ok:
            self.candidates += results
        else:
            self.refused += [{"key": r["key"], "arch": r["arch"],
                              "why": f"the test failed: {why_not[:200]}"} for r in results]

    def _refusal(self, r: dict, store: E.Store) -> str:
        if r.get("status") in REFUSED_STATUSES:
            return f"status {r.get('status')}"
        v = r.get("value")
        if v is None or not math.isfinite(float(v)):
            return "no finite value"
        if E.is_spec_bar(r["key"]):
            return "SPEC's bar (a quality target, never regenerated)"
        if self.level == "arch" and paper_record(store, r["arch"], r["key"]):
            return "the arch's value is a paper's record: accept it per device (the default)"
        return ""

    def write(self, store: E.Store) -> None:
        """Arch level: every acceptable candidate into its arch's file of its topic. Device
        level: the run's boards join their model's fleet sample (extend) or become it
        (replace), and the entries the sample moved are rewritten (results/contract.py)."""
        from . import contract
        by_file: dict[Path, dict[str, dict]] = {}
        by_model: dict[tuple[str, str], list[dict]] = {}
        for r in self.candidates:
            device = (r.get("provenance") or {}).get("device", "") \
                if self.level == "device" else ""
            why = self._refusal(r, store) or ("no device in the result's provenance"
                                               if self.level == "device" and not device else "")
            if why:
                self.refused.append({"key": r["key"], "arch": r["arch"], "why": why})
                continue
            if device:
                by_model.setdefault((r["arch"], device), []).append(r)
                continue
            path = E.file_for(r["key"], r["arch"], self.root)
            old = current_entry(store, r["arch"], r["key"], None)
            entry = E.measured_entry(r, old)
            by_file.setdefault(path, {})[r["key"]] = entry
            self.accepted.append({"key": r["key"], "arch": r["arch"], "old": old.get("value"),
                                  "new": entry["value"], "unit": entry["unit"],
                                  "tolerance": entry["tolerance"], "file": str(path),
                                  "device": "(arch level)"})
        for path, entries in sorted(by_file.items()):
            E.write_entries(path, entries)
        for (arch, device), results in sorted(by_model.items()):
            store.clear()
            before = store.load(arch)
            try:
                written = contract.accept(arch, device, [{"results": results}],
                                          root=self.root, sample_path=sample_path(self.root,
                                                                                  arch),
                                          fleet=self.fleet)
            except E.ExpectationError as e:
                self.refused += [{"key": r["key"], "arch": arch, "why": str(e)} for r in results]
                continue
            store.clear()
            after = store.load(arch)
            for path, keys in written.files.items():
                for key in keys:
                    old, new = (e.get(key, device) if e else None for e in (before, after))
                    self.accepted.append({
                        "key": key, "arch": arch, "device": device, "file": str(path),
                        "old": old.describe() if old else None,
                        "new": new.describe() if new else None,
                        "unit": new.unit if new else "", "tolerance": "fleet"})
            self.samples.append({"arch": arch, "device": device, "fleet": self.fleet,
                                 **written.summary.as_yaml(), "rewritten": written.changed,
                                 "unchanged": written.unchanged})
        store.clear()

    def as_meta(self) -> dict:
        return {"level": self.level, "accepted": self.accepted, "refused": self.refused,
                "samples": self.samples}


def sample_path(root: Path, arch: str) -> Path:
    """Where a model's fleet sample lives beside the expectation files: results/<arch>/fleet/
    sample.jsonl.gz of the directory holding expectations/."""
    return Path(root).resolve().parent / "results" / arch / "fleet" / "sample.jsonl.gz"


def current_entry(store: E.Store, arch: str, key: str, device: str | None) -> dict:
    """The entry a new value replaces (as YAML data: the device's own, else the arch's, which
    gives a new device entry its tolerance and note), or {}."""
    exp = store.load(arch)
    if exp is None:
        return {}
    e = exp.get(key, device)
    if e is None:
        return {}
    out = {"value": e.value, "tolerance": {k: v for k, v in (("abs", e.abs_tol),
                                                             ("rel", e.rel_tol)) if v}}
    if e.note:
        out["note"] = e.note
    return out


def paper_record(store: E.Store, arch: str, key: str) -> bool:
    """Does the file `key` belongs in, in any layer of the store, hold a paper's record (any
    arch-level entry whose source is not a measured run)?"""
    paths = [E.file_for(key, arch, layer) for layer in store.layers]
    return any(not e.source.startswith("measured")
               for path in paths if path.exists()
               for e in E.load_file(path).characteristics.values())
