"""Per-arch expectation files: their layout, lookup with per-device overrides, comparison of
a measurement, and atomic regeneration from a run (the schema and its validation with
file:line:key errors: results/schema.py).

Files: ``expectations/<arch>.yaml`` holds the instruction tables; each topic of the suite has
its own directory of per-arch files, ``expectations/<topic>/<arch>.yaml`` (topics: TOPICS, from
core.topic), whose characteristic keys all start with ``<topic>.``. ``load(arch)`` merges an
arch's files; a key defined in two files is an error naming both. Regeneration writes each
key back to the file of its topic, so the topics (and the archs) never overwrite each other.

File layout::

    schema: 2
    arch: sm_80
    description: free text
    sources:                       # short names used by the entries' `source`
      ampere22: "Abdelkhalik et al., Demystifying the Nvidia Ampere Architecture ..., 2022"
    characteristics:
      latency.add.u32:             # <kind>.<row>
        value: 4                   # or  range: [190, 235]  or  one_of: [0, 6]  or  value: null
        unit: cycles
        tolerance: {abs: 1, rel: 0.1}   # required for any numeric expectation
        source: ampere22 Table II
        method: ...                # optional: how the figure was measured
        note: ...                  # optional
        provenance: {...}          # optional: a measured run's device/driver/toolkit/clock/date
        literature: [...]          # optional: papers' figures for it, shown, never judged
                                   # (results/literature.py)
    mappings:
      add.u32:
        paper: IADD                # SASS as the paper printed it (historical record)
        source: ampere22 Table V
    devices:                       # per-device overrides of characteristics
      "NVIDIA H100 80GB HBM3":
        characteristics: {...}

Only safe YAML loading is used.
"""
from __future__ import annotations

import functools
import re
import os
from pathlib import Path

import yaml

from ..core import locations
from ..core.atomic import atomic_write
from .finite import number
# the schema (entry types, their fields and validation), also the public names of this module
# (atomic_write too: the writers of other modules take it from here)
from .schema import (ENTRY_KEYS, FLEET_SOURCE, MAX_FILE_BYTES, NOISE_KEYS, SCHEMA_VERSION,
                     TOP_KEYS, TOPICS, UNITS, UNMEASURABLE_KEYS, YAML_LOADER, ArchExpectations,
                     ExpectationError, Expected, load_file, parse,
                     Unmeasurable)  # noqa: F401

PACKAGE_ROOT = locations.shipped_expectations()   # the checkout's, else the installed package's


def default_root(start: Path | None = None) -> Path:
    """Where the expectation files are: $GPUCHAR_EXPECTATIONS, else `start`/expectations
    (the current directory: the project a command is run in), else the files that came with
    the code (a checkout's expectations/, or the installed package's)."""
    env = os.environ.get("GPUCHAR_EXPECTATIONS")
    if env:
        return Path(env)
    here = Path(start or Path.cwd()) / "expectations"
    return here if here.is_dir() else PACKAGE_ROOT


def default_layers(start: Path | None = None) -> list[Path]:
    """The directories a Store reads, lowest first; the last is the one written. One
    directory (default_root), except for the files of an installed package, which are never
    written: the user's own directory (core/locations.py: $GPUCHAR_HOME, else the platform's
    user data directory) lies over them, and its entries win."""
    root = default_root(start)
    if root == PACKAGE_ROOT and not locations.is_checkout():
        return [root, locations.user_expectations()]
    return [root]


def layer_name(path: Path | str, layers: list[Path]) -> str:
    """Which layer a file belongs to: 'shipped' (the installed package's), 'user' (the
    user's directory over them) or 'project' (a single directory)."""
    if len(layers) < 2:
        return "project"
    p = Path(str(path).split(":")[0])
    return "user" if p.is_relative_to(layers[-1]) else "shipped"


def overlay(base: ArchExpectations | None, top: ArchExpectations | None
            ) -> ArchExpectations | None:
    """`top` laid over `base`: each key of top (characteristic, mapping, per-device entry,
    unmeasurable probe, source name) replaces base's; base's other keys are kept."""
    if base is None or top is None:
        return base or top
    out = ArchExpectations(base.arch, top.path, {**base.characteristics, **top.characteristics},
                           {**base.mappings, **top.mappings},
                           {d: dict(e) for d, e in base.devices.items()},
                           {**base.sources, **top.sources}, base.raw,
                           {**base.unmeasurable, **top.unmeasurable})
    for dname, entries in top.devices.items():
        out.devices.setdefault(dname, {}).update(entries)
    return out


def available(root: Path) -> dict[str, Path]:
    """arch -> file for every expectations/<arch>.yaml (the instruction tables)."""
    return {p.stem: p for p in sorted(Path(root).glob("sm_*.yaml"))}


def arch_files(arch: str, root: Path) -> list[Path]:
    """Every file holding `arch`'s expectations: <arch>.yaml first, then each topic's."""
    root = Path(root)
    return [p for p in [root / f"{arch}.yaml"] + [root / t / f"{arch}.yaml" for t in TOPICS]
            if p.exists()]


def all_files(root: Path) -> list[Path]:
    root = Path(root)
    return sorted(root.glob("sm_*.yaml")) + sorted(
        p for t in TOPICS for p in (root / t).glob("sm_*.yaml"))


def file_for(key: str, arch: str, root: Path) -> Path:
    """The file a characteristic key belongs in (by its topic prefix)."""
    root = Path(root)
    topic = key.split(".")[0]
    return root / topic / f"{arch}.yaml" if topic in TOPICS else root / f"{arch}.yaml"


def merge(parts: list[ArchExpectations]) -> ArchExpectations:
    """One arch's files as one: a key (characteristic, mapping or per-device override) defined
    in two files is an error naming both."""
    first = parts[0]
    out = ArchExpectations(first.arch, first.path, {}, {}, {}, {}, first.raw)
    seen: dict[str, str] = {}
    for p in parts:
        for k, e in p.characteristics.items():
            if k in out.characteristics:
                raise ExpectationError(f"{e.origin}: {k}: also defined at "
                                       f"{out.characteristics[k].origin}")
            out.characteristics[k] = e
        for k, m in p.mappings.items():
            if k in out.mappings:
                raise ExpectationError(f"{p.path}:0: mappings.{k}: also defined in {seen[k]}")
            out.mappings[k], seen[k] = m, str(p.path)
        for dname, dd in p.devices.items():
            target = out.devices.setdefault(dname, {})
            for k, e in dd.items():
                if k in target:
                    raise ExpectationError(f"{e.origin}: devices.{dname}.{k}: also defined at "
                                           f"{target[k].origin}")
                target[k] = e
        out.sources.update(p.sources)
        for k, u in p.unmeasurable.items():
            if k in out.unmeasurable:
                raise ExpectationError(f"{u.origin}: unmeasurable.{k}: also defined at "
                                       f"{out.unmeasurable[k].origin}")
            out.unmeasurable[k] = u
    return out


def load(arch: str, root: Path) -> ArchExpectations | None:
    """`arch`'s expectations from all its files (None if it has none)."""
    files = arch_files(arch, root)
    return merge([load_file(f) for f in files]) if files else None


class Store:
    """The expectation files of one session (or command): one directory, or layers of them
    (default_layers: the user's over an installed package's), each arch's files loaded and
    merged once. `root` is the directory written (the top layer)."""

    def __init__(self, root: Path | None = None, layers: list[Path] | None = None) -> None:
        if layers is None:
            layers = [Path(root)] if root is not None else default_layers()
        self.layers = [Path(p) for p in layers]
        self.root = self.layers[-1]
        self._loaded: dict[str, ArchExpectations | None] = {}

    def load(self, arch: str) -> ArchExpectations | None:
        if arch not in self._loaded:
            merged = None
            for layer in self.layers:
                merged = overlay(merged, load(arch, layer))
            self._loaded[arch] = merged
        return self._loaded[arch]

    def available(self) -> dict[str, Path]:
        out: dict[str, Path] = {}
        for layer in self.layers:
            out.update(available(layer))
        return dict(sorted(out.items()))

    def files(self) -> list[Path]:
        return [f for layer in self.layers for f in all_files(layer)]

    def layer_of(self, path: Path | str) -> str:
        return layer_name(path, self.layers)

    def clear(self) -> None:
        self._loaded.clear()


# --- regeneration from a measured run (never done by a test run) ---------------------------

def _rounded(v: float) -> float:
    """Cycles to 2 decimals; small figures (errors of 1e-8) to 4 significant digits."""
    return round(v, 2) if v == 0 or abs(v) >= 1 else float(f"{v:.4g}")


SPEC_BARS = (".peak_fraction.", ".achieved_peak")   # SPEC's quality bars: never regenerated


def is_spec_bar(key: str) -> bool:
    return any(b in key or key.endswith(b.lstrip(".")) for b in SPEC_BARS)


def measured_entry(r: dict, old: dict, *, abs_tol: float = 1.0, rel_tol: float = 0.05) -> dict:
    """The arch-level entry a measured result becomes: an existing entry keeps its tolerance,
    note and literature; a new one takes the tolerance its test proposed (data.tolerance: a
    bool or an error needs its own) or the default. The run's provenance is the history
    store's and the file's, not the entry's: the source line names the date and device."""
    prov = r.get("provenance") or {}
    entry = {
        "value": _rounded(float(r["value"])),
        "unit": r.get("unit", "cycles"),
        "tolerance": old.get("tolerance") or (r.get("data") or {}).get("tolerance")
        or {"abs": abs_tol, "rel": rel_tol},
        "source": f"measured {str(prov.get('date', ''))[:10]} on {prov.get('device', '?')}",
        "method": r.get("method", ""),
    }
    for kept in ("note", "literature"):
        if kept in old:
            entry[kept] = old[kept]
    return entry


def write_entries(path: Path, entries: dict[str, dict], device: str | None = None,
                  provenance: dict[str, dict] | None = None) -> None:
    """Replace or add these entries in `path` (the arch values, or the `device` section), and
    the `provenance` lines given (model -> its sample, under provenance.samples), keeping
    every other line of the file: validated, then written atomically."""
    from .yamledit import set_entries
    path = Path(path)
    text = path.read_text() if path.exists() else \
        f"schema: {SCHEMA_VERSION}\narch: {path.stem}\ncharacteristics: {{}}\n"
    if provenance:
        text = set_entries(text, ["provenance", "samples"], provenance)
    section = ["devices", device, "characteristics"] if device else ["characteristics"]
    if entries:
        text = set_entries(text, section, entries)
    parse(text, path)   # validate before replacing: a bad write must never land
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)


def section_entries(path: Path, device: str | None = None) -> dict[str, dict]:
    """The raw entries of a file's arch values, or of its `device` section ({} when the file
    or the section does not exist)."""
    # libyaml where PyYAML has it (schema.py's loader): the device command reads the
    # model's files whole, several MB of YAML, 8 s in pure Python
    data = (yaml.load(path.read_text(), Loader=YAML_LOADER) if path.exists() else None) or {}
    if device:
        data = (data.get("devices") or {}).get(device) or {}
    return data.get("characteristics") or {}


def update_from_results(path: Path, results: list[dict], *, abs_tol: float = 1.0,
                        rel_tol: float = 0.05, keys: set[str] | None = None) -> list[str]:
    """Write measured values into an expectation file's arch values: atomically, keeping
    every entry it does not change, the file's comments and order and its own provenance.
    Results that are invalid, unstable, errors or SPEC's bars are never written. (A model's
    device entries come from its fleet sample: results/contract.py.) Returns the keys
    written."""
    path = Path(path)
    target = section_entries(path)
    entries: dict[str, dict] = {}
    for r in results:
        if r.get("arch") != path.stem or number(r.get("value")) is None or r.get("status") in (
                "invalid", "unstable", "error") or is_spec_bar(r.get("key", "")):
            continue
        if keys and r["key"] not in keys:
            continue
        entries[r["key"]] = measured_entry(r, target.get(r["key"]) or {}, abs_tol=abs_tol,
                                           rel_tol=rel_tol)
    if entries:
        write_entries(path, entries)
    return list(entries)


def update_arch(arch: str, results: list[dict], *, root: Path, abs_tol: float = 1.0,
                rel_tol: float = 0.05, keys: set[str] | None = None) -> dict[Path, list[str]]:
    """update_from_results for every file of `arch` the results touch: each key goes to the
    file of its topic (file_for). Returns file -> keys written."""
    by_file: dict[Path, set[str]] = {}
    for r in results:
        if r.get("arch") == arch and r.get("key") and (not keys or r["key"] in keys):
            by_file.setdefault(file_for(r["key"], arch, root), set()).add(r["key"])
    return {path: update_from_results(path, results, abs_tol=abs_tol, rel_tol=rel_tol, keys=ks)
            for path, ks in sorted(by_file.items())}


# --- methods --------------------------------------------------------------------------------

def method_shape(text) -> str:
    """A method's text with the numbers one run chose masked (the loop finder's trip count,
    the clock it read, the launch count, an autotuned configuration): two boards of one code
    differ there, not in how they measured. The sizes a procedure sweeps stay: a list in
    brackets ("[8, 12, 16] independent ops") or a slash series ("16/32/64"), and so do the
    words. Used to tell runs of one method from runs of older code."""
    return _method_shape(str(text or ""))


@functools.lru_cache(maxsize=8192)
def _method_shape(text: str) -> str:
    """method_shape of a string, memoised: a fleet sample repeats each method once per board
    and run (95,000 calls for the H200 sample's figures, a few thousand distinct texts)."""
    parts = re.split(r"(\[[^\]]*\]|\d+(?:\.\d+)?(?:/\d+(?:\.\d+)?)+)", text)
    return "".join(part if i % 2 else re.sub(r"\d+(?:\.\d+)?", "#", part)
                   for i, part in enumerate(parts))
