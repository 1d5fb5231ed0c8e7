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


FLEET_MODES = ("extend", "replace")


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
        """Write every acceptable candidate into its arch's file of its topic."""
        by_file: dict[tuple[Path, str], dict[str, dict]] = {}
        raws: dict[tuple[Path, str], dict[str, dict]] = {}
        for r in self.candidates:
            device = (r.get("provenance") or {}).get("device", "") \
                if self.level == "device" else ""
            why = self._refusal(r, store) or ("no device in the result's provenance"
                                               if self.level == "device" and not device else "")
            if why:
                self.refused.append({"key": r["key"], "arch": r["arch"], "why": why})
                continue
            path = E.file_for(r["key"], r["arch"], self.root)
            old = current_entry(store, r["arch"], r["key"], device or None)
            raw = raw_entries(raws, path, device).get(r["key"]) if device else None
            if raw and self.fleet == "extend":
                entry = E.fleet_entry(r, {**raw, "tolerance": raw.get("tolerance")
                                          or old.get("tolerance")})
            elif device and self.fleet == "extend":
                entry = E.fleet_entry(r, old)
            else:
                entry = E.measured_entry(r, old)
            by_file.setdefault((path, device), {})[r["key"]] = entry
            self.accepted.append({"key": r["key"], "arch": r["arch"],
                                  "old": (raw or {}).get("range") or old.get("value"),
                                  "new": entry.get("range") or entry["value"],
                                  "unit": entry["unit"],
                                  "tolerance": entry["tolerance"], "file": str(path),
                                  "device": device or "(arch level)"})
        for (path, device), entries in sorted(by_file.items()):
            E.write_entries(path, entries, device or None)
        store.clear()

    def as_meta(self) -> dict:
        return {"level": self.level, "accepted": self.accepted, "refused": self.refused}


def raw_entries(cache: dict, path: Path, device: str) -> dict[str, dict]:
    """The device section of a file as YAML data (each file read once per acceptance)."""
    if (path, device) not in cache:
        cache[(path, device)] = E.section_entries(path, device)
    return cache[(path, device)]


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
