"""Per-arch expectation files: their layout, lookup with per-device overrides, comparison of
a measurement, and atomic regeneration from a run (the schema and its validation with
file:line:key errors: results/schema.py).

Files: ``expectations/<arch>.yaml`` holds the instruction tables; each topic of the suite has
its own directory of per-arch files, ``expectations/<topic>/<arch>.yaml`` (topics: TOPICS, from
core.topic), whose characteristic keys all start with ``<topic>.``. ``load(arch)`` merges an
arch's files; a key defined in two files is an error naming both. Regeneration writes each
key back to the file of its topic, so the topics (and the archs) never overwrite each other.

File layout::

    schema: 1
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

import math
import re
import os
from pathlib import Path

import yaml

from ..core import locations
from ..core.atomic import atomic_write
# the schema (entry types, their fields and validation), also the public names of this module
# (atomic_write too: the writers of other modules take it from here)
from .schema import (ENTRY_KEYS, MAX_FILE_BYTES, NOISE_KEYS, NOISE_MAX, SCHEMA_VERSION, TOP_KEYS,
                     TOPICS, UNITS, UNMEASURABLE_KEYS, ArchExpectations,
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


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def measured_entry(r: dict, old: dict, *, abs_tol: float = 1.0, rel_tol: float = 0.05) -> dict:
    """The expectation entry a measured result becomes: an existing entry keeps its tolerance
    and note; a new one takes the tolerance its test proposed (data.tolerance: a bool or an
    error needs its own) or the default; the run's provenance is recorded."""
    prov = r.get("provenance") or {}
    entry = {
        "value": _rounded(float(r["value"])),
        "unit": r.get("unit", "cycles"),
        "tolerance": old.get("tolerance") or (r.get("data") or {}).get("tolerance")
        or {"abs": abs_tol, "rel": rel_tol},
        "source": f"measured {str(prov.get('date', ''))[:10]} on {prov.get('device', '?')}",
        "method": r.get("method", ""),
        "provenance": {k: prov[k] for k in sorted(prov)},
    }
    for kept in ("note", "noise", "literature"):
        if kept in old:
            entry[kept] = old[kept]
    return entry


def board_of(prov: dict) -> str:
    """A board's label in an entry's `boards`: its UUID's first 12 characters."""
    return str(prov.get("uuid") or "")[:12]


def fleet_entry(r: dict, old: dict, **tol) -> dict:
    """A device (model) entry that holds for every board of the model measured so far: each
    board's latest value in provenance.boards; one board gives a value, several a range from
    the lowest to the highest, judged with the entry's tolerance at either end. An entry
    written before boards were recorded counts as its own board (provenance.uuid). An entry
    a fleet sample made (provenance.fleet: its rule, sigma, dates) keeps them, the new board
    counted in. Boards of one model differ by more than each repeats, and a nightly on any
    board of the model is judged against the model's entry: accepting one board adds it to
    the fleet, it never replaces the others."""
    entry = measured_entry(r, old, **tol)
    prev = old.get("provenance") or {}
    boards = dict(prev.get("boards") or {})
    if not boards and board_of(prev) and _finite(old.get("value")):
        boards[board_of(prev)] = old["value"]
    this = board_of(r.get("provenance") or {})
    if not this:
        return entry
    boards[this] = entry["value"]
    fleet = dict(prev.get("fleet") or {})
    if fleet:
        day = str((r.get("provenance") or {}).get("date", ""))[:10]
        dates = sorted(d for d in [*(fleet.get("dates") or []), day] if d)
        fleet.update(boards=len(boards), dates=[dates[0], dates[-1]] if dates else [])
        entry["provenance"]["fleet"] = fleet
        entry["source"] = (f"fleet sample of {len(boards)} {r['provenance'].get('device', '?')} "
                           f"boards, runs of {fleet['dates'][0]} to {fleet['dates'][-1]} "
                           f"(provenance.fleet); {this} accepted {day}")
    if len(set(boards.values())) > 1:
        del entry["value"]
        entry = {"range": [min(boards.values()), max(boards.values())], **entry}
        if not fleet:
            entry["source"] = f"{entry['source']}; {len(boards)} boards (provenance.boards)"
    entry["provenance"]["boards"] = dict(sorted(boards.items()))
    return entry


def write_entries(path: Path, entries: dict[str, dict], device: str | None = None) -> None:
    """Replace or add these entries in `path` (the arch values, or the `device` section),
    keeping every other line of the file: validated, then written atomically."""
    from .yamledit import set_entries
    path = Path(path)
    text = path.read_text() if path.exists() else \
        f"schema: {SCHEMA_VERSION}\narch: {path.stem}\ncharacteristics: {{}}\n"
    section = ["devices", device, "characteristics"] if device else ["characteristics"]
    text = set_entries(text, section, entries)
    parse(text, path)   # validate before replacing: a bad write must never land
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)


def section_entries(path: Path, device: str | None = None) -> dict[str, dict]:
    """The raw entries of a file's arch values, or of its `device` section ({} when the file
    or the section does not exist)."""
    data = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    if device:
        data = (data.get("devices") or {}).get(device) or {}
    return data.get("characteristics") or {}


def update_from_results(path: Path, results: list[dict], *, device: str | None = None,
                        abs_tol: float = 1.0, rel_tol: float = 0.05,
                        keys: set[str] | None = None, fleet: bool = False) -> list[str]:
    """Write measured values into an expectation file: atomically, keeping every entry it does
    not change, the file's comments and order and its own provenance. Results that are
    invalid, unstable, errors or SPEC's bars are never written. With `fleet` (a device
    section) the entry spans every board of the model measured (fleet_entry). Returns the
    keys written."""
    path = Path(path)
    target = section_entries(path, device)
    entries: dict[str, dict] = {}
    for r in results:
        if r.get("arch") != path.stem or not _finite(r.get("value")) or r.get("status") in (
                "invalid", "unstable", "error") or is_spec_bar(r.get("key", "")):
            continue
        if keys and r["key"] not in keys:
            continue
        make = fleet_entry if fleet and device else measured_entry
        entries[r["key"]] = make(r, target.get(r["key"]) or {}, abs_tol=abs_tol,
                                 rel_tol=rel_tol)
    if entries:
        write_entries(path, entries, device)
    return list(entries)


def update_arch(arch: str, results: list[dict], *, root: Path,
                device: str | None = None, abs_tol: float = 1.0, rel_tol: float = 0.05,
                keys: set[str] | None = None, fleet: bool = False) -> dict[Path, list[str]]:
    """update_from_results for every file of `arch` the results touch: each key goes to the
    file of its topic (file_for). Returns file -> keys written."""
    by_file: dict[Path, set[str]] = {}
    for r in results:
        if r.get("arch") == arch and r.get("key") and (not keys or r["key"] in keys):
            by_file.setdefault(file_for(r["key"], arch, root), set()).add(r["key"])
    return {path: update_from_results(path, results, device=device, abs_tol=abs_tol,
                                      rel_tol=rel_tol, keys=ks, fleet=fleet)
            for path, ks in sorted(by_file.items())}


# --- declared run-to-run noise ------------------------------------------------------------

NOISE_STEP = 0.005          # a declared noise is rounded up to half a percent
NOISE_SIGMAS = 3            # ... from this many times the RMS of the measured moves
NOISE_MAX = 0.5             # the largest relative noise an entry may declare (schema)
NOISE_MIN_MOVES = 3         # fewer pairs say too little about a figure's run-to-run scatter


class NoiseError(ValueError):
    """Pairs that cannot give a run-to-run noise (two boards, a key without an entry)."""


def pair_moves(pairs: list[tuple[list[dict], list[dict]]], arch: str,
               keys: list[str]) -> tuple[dict[str, dict[str, list[float]]], set[str]]:
    """key -> board -> the relative moves between the two runs of each pair measured on that
    board, and the dates of the runs. Unstable or invalid figures give no move (their result
    already says they cannot be compared); a pair of two boards is an error: boards of one
    model differ by more than one board repeats (the fleet ranges say by how much)."""
    moves: dict[str, dict[str, list[float]]] = {k: {} for k in keys}
    dates: set[str] = set()
    for i, (first, second) in enumerate(pairs, 1):
        a = {r.get("key"): r for r in first if r.get("arch") == arch}
        b = {r.get("key"): r for r in second if r.get("arch") == arch}
        for key in keys:
            ra, rb = a.get(key), b.get(key)
            if ra is None or rb is None or not (_finite(ra.get("value"))
                                                and _finite(rb.get("value"))):
                continue
            if {ra.get("status"), rb.get("status")} - {"pass", "measured"}:
                continue
            if method_shape(ra.get("method", "")) != method_shape(rb.get("method", "")):
                continue        # the code changed between the two runs: not noise
            ba, bb = (board_of(r.get("provenance") or {}) for r in (ra, rb))
            if not ba or ba != bb:
                raise NoiseError(f"pair {i}: {key} was measured on {ba or '(no board)'} and "
                                 f"{bb or '(no board)'}: a run-to-run noise needs two runs of "
                                 f"one board")
            va, vb = float(ra["value"]), float(rb["value"])
            moves[key].setdefault(ba, []).append(round(abs(vb - va) / max(abs(va), 1e-300), 4))
            dates |= {str((r.get("provenance") or {}).get("date", ""))[:10] for r in (ra, rb)}
    return moves, dates - {""}


def method_shape(text) -> str:
    """A method's text with the numbers one run chose masked (the loop finder's trip count,
    the clock it read, the launch count, an autotuned configuration): two boards of one code
    differ there, not in how they measured. The sizes a procedure sweeps stay: a list in
    brackets ("[8, 12, 16] independent ops") or a slash series ("16/32/64"), and so do the
    words. Used to tell runs of one method from runs of older code."""
    parts = re.split(r"(\[[^\]]*\]|\d+(?:\.\d+)?(?:/\d+(?:\.\d+)?)+)", str(text or ""))
    return "".join(part if i % 2 else re.sub(r"\d+(?:\.\d+)?", "#", part)
                   for i, part in enumerate(parts))


def noisy_keys(pairs: list[tuple[list[dict], list[dict]]], arch: str) -> list[str]:
    """The keys some pair of runs of one board moved by more than the nightly's own 1%:
    those that need a declared noise."""
    from .changes import NOISE_REL
    keys = sorted({r.get("key") for first, _ in pairs for r in first
                   if r.get("arch") == arch and r.get("key")})
    moves, _ = pair_moves(pairs, arch, keys)
    return [k for k in keys if any(m > NOISE_REL for ms in moves[k].values() for m in ms)]


def board_pairs(runs: list[list[dict]]) -> list[tuple[list[dict], list[dict]]]:
    """Consecutive runs of each board (the runs oldest first, one board each, as a history
    store gives them): the pairs a run-to-run noise is measured from."""
    last: dict[str, list[dict]] = {}
    out = []
    for results in runs:
        boards = {board_of(r.get("provenance") or {}) for r in results} - {""}
        if len(boards) != 1:
            continue
        b = boards.pop()
        if b in last:
            out.append((last[b], results))
        last[b] = results
    return out


def noise_of(moves: list[float]) -> float:
    """The declared noise of a figure from its measured moves: NOISE_SIGMAS x their RMS (a
    move is the difference of two runs, so its RMS already holds both runs' scatter), never
    below the largest move, rounded up to NOISE_STEP."""
    rms = math.sqrt(sum(m * m for m in moves) / len(moves))
    return round(math.ceil(max(NOISE_SIGMAS * rms, max(moves)) / NOISE_STEP - 1e-9)
                 * NOISE_STEP, 4)


def declare_noise(arch: str, pairs: list[tuple[list[dict], list[dict]]], keys: list[str], *,
                  root: Path, device: str | None = None, complete: bool = False
                  ) -> dict[str, str]:
    """Write each key's run-to-run noise into its entry (the arch values or the `device`
    section): `noise.boards` keeps every board's moves (the entry's, then this call's pairs:
    give each pair once; with `complete`, the pairs are every run of their boards - a history
    store's - and a board's moves replace its earlier ones, so a second call changes nothing),
    `noise.rel` is noise_of() over all of them, `noise.source` says so.
    A key with fewer than NOISE_MIN_MOVES moves, or whose moves stay within the nightly's own
    1%, gets none (the entry is left as it was). Atomic per file, every other entry kept.
    Returns key -> what was done."""
    from .changes import NOISE_REL
    moves, dates = pair_moves(pairs, arch, keys)
    where = f"devices.{device}" if device else "characteristics"
    by_file: dict[Path, dict[str, dict]] = {}
    read: dict[Path, dict[str, dict]] = {}      # each file parsed once
    said: dict[str, str] = {}
    for key in keys:
        path = file_for(key, arch, root)
        if path not in read:
            read[path] = section_entries(path, device)
        old = read[path].get(key)
        if old is None:
            raise NoiseError(f"{path}: {key}: no entry under {where}; write its value first "
                             f"(gpuchar-expectations update)")
        boards = {str(b): [float(x) for x in (m if isinstance(m, list) else [m])] for b, m in
                  ((old.get("noise") or {}).get("boards") or {}).items()}
        for b, ms in moves[key].items():
            if complete:
                boards[b] = list(ms)
            else:
                boards.setdefault(b, []).extend(ms)
        every = [m for ms in boards.values() for m in ms]
        if len(every) < NOISE_MIN_MOVES:
            said[key] = (f"{len(every)} move(s) measured, fewer than {NOISE_MIN_MOVES}: "
                         f"left as it was")
            continue
        if max(every) <= NOISE_REL:
            said[key] = (f"largest of {len(every)} moves {max(every):.2%}, within the "
                         f"nightly's own {NOISE_REL:.0%}: no noise declared")
            continue
        rel = noise_of(every)
        if rel > NOISE_MAX:
            said[key] = (f"moves up to {max(every):.0%}: more than a relative noise can say "
                         f"(at most {NOISE_MAX:.0%}; a figure near zero): left as it was")
            continue
        span = "" if not dates else f", runs of {min(dates)}" if len(dates) == 1 else \
            f", runs of {min(dates)} to {max(dates)}"
        n = f"{len(boards)} board{'s' if len(boards) != 1 else ''}"
        entry = dict(old)
        entry["noise"] = {
            "rel": rel,
            "source": f"{NOISE_SIGMAS} x the RMS of {len(every)} moves between two runs of "
                      f"one board, {n} (noise.boards){span}",
            "boards": dict(sorted(boards.items()))}
        by_file.setdefault(path, {})[key] = entry
        said[key] = (f"±{rel:.1%} ({len(every)} moves over {n}, largest {max(every):.2%})")
    for path, entries in sorted(by_file.items()):
        write_entries(path, entries, device)
    return said
