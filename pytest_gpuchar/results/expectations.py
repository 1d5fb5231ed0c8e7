"""Per-arch expectation files: schema validation with file:line:key errors, lookup with
per-device overrides, comparison of a measurement, and atomic regeneration from a run.

Files: ``expectations/<arch>.yaml`` holds the instruction tables; each topic of the suite has
its own directory of per-arch files, ``expectations/<topic>/<arch>.yaml`` (topics: TOPICS, from
core.topic), whose characteristic keys all start with ``<topic>.``. ``load(arch)`` merges an
arch's files; a key defined in two files is an error naming both. Regeneration writes each key back to the file
of its topic, so the topics (and the archs) never overwrite each other.

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
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core import archs
from .literature import Literature, LiteratureError, from_mapping
from ..core.atomic import atomic_write
from ..core.topic import expectation_topics

SCHEMA_VERSION = 1
# Topic directories under ROOT (the topics with files of their own, core.topic.TOPICS); a key
# "memory.latency.l1" lives in memory/<arch>.yaml.
TOPICS = expectation_topics()
PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent / "expectations"
TOP_KEYS = {"schema", "arch", "description", "sources", "characteristics", "mappings",
            "devices", "provenance", "unmeasurable"}
UNMEASURABLE_KEYS = {"reason", "sass", "source", "compiler"}
ENTRY_KEYS = {"value", "range", "one_of", "unit", "tolerance", "source", "method", "note",
              "provenance", "status", "noise", "literature"}
NOISE_KEYS = {"rel", "source", "boards"}
NOISE_MAX = 0.5            # a declared run-to-run noise above 50% is a typo, not a figure
UNITS = {"cycles", "cycles/op", "instructions", "ratio", "bytes", "MHz", "flop/clk/SM",
         "ops/clk/SM", "B/clk/SM", "count", "bool", "error", "us", "ns", "fma/clk/SM",
         "ops/clk", "B/clk", "GB/s", "bits", "percent"}


class ExpectationError(ValueError):
    """A malformed expectation file: the message starts with file:line: and names the key."""


@dataclass(frozen=True)
class Expected:
    key: str
    unit: str
    value: float | None = None
    range: tuple[float, float] | None = None
    one_of: tuple[float, ...] | None = None
    abs_tol: float = 0.0
    rel_tol: float = 0.0
    source: str = ""
    method: str = ""
    note: str = ""
    origin: str = ""          # file:line the entry came from
    # the figure's declared run-to-run noise (relative) and where it was measured: moves
    # within it between two runs of one board are notes in the nightly, not changes
    noise_rel: float = 0.0
    noise_source: str = ""
    # a board-dependent figure: how many boards of the model its range spans
    # (provenance.boards) and the rule that made the range from them (provenance.fleet.rule)
    boards: int = 0
    fleet_rule: str = ""
    # published figures for the same characteristic (shown beside the result, never judged)
    literature: tuple[Literature, ...] = ()

    @property
    def numeric(self) -> bool:
        return self.value is not None or self.range is not None or self.one_of is not None

    def allowance(self, ref: float) -> float:
        return max(self.abs_tol, self.rel_tol * abs(ref))

    def check(self, measured: float) -> bool:
        if measured is None or not math.isfinite(measured):
            return False   # NaN/Inf never passes as "within tolerance"
        if self.range is not None:
            lo, hi = self.range
            return lo - self.allowance(lo) <= measured <= hi + self.allowance(hi)
        if self.one_of is not None:
            return any(abs(measured - v) <= self.allowance(v) for v in self.one_of)
        if self.value is not None:
            return abs(measured - self.value) <= self.allowance(self.value)
        return True

    def describe(self) -> str:
        tol = []
        if self.abs_tol:
            tol.append(f"±{self.abs_tol:g}")
        if self.rel_tol:
            tol.append(f"±{self.rel_tol:.0%}")
        t = f" ({' or '.join(tol)})" if tol else ""
        if self.range is not None:
            over = f" over {self.boards} boards" if self.boards > 1 else ""
            return f"{self.range[0]:g}-{self.range[1]:g} {self.unit}{t}{over}"
        if self.one_of is not None:
            return f"one of {', '.join(f'{v:g}' for v in self.one_of)} {self.unit}{t}"
        if self.value is not None:
            return f"{self.value:g} {self.unit}{t}"
        return f"(no numeric value: {self.note or 'see source'})"

    def deviation(self, measured: float) -> float | None:
        ref = self.value
        if ref is None and self.range is not None:
            lo, hi = self.range
            ref = lo if measured < lo else hi if measured > hi else measured
        if ref is None and self.one_of is not None:
            ref = min(self.one_of, key=lambda v: abs(v - measured))
        return None if ref is None else measured - ref


@dataclass(frozen=True)
class Unmeasurable:
    """A probe that cannot be made valid with today's compilers, declared with the SASS fact
    that prevents it: `sass` is a regular expression its "probe invalid" verdict (message and
    listing) must match on every run, so a compiler that stops doing it is noticed."""
    probe: str
    reason: str
    sass: str
    source: str = ""
    origin: str = ""
    compiler: str = ""       # regex on the compiler's tag ("jit-driver-", "ptxas-13"): "" = any

    def explains(self, verdict: str) -> bool:
        return re.search(self.sass, verdict) is not None

    def applies(self, compiler: str) -> bool:
        """Does the declaration speak of SASS made by this compiler (its snapshot tag)?"""
        return not self.compiler or re.search(self.compiler, compiler) is not None


@dataclass
class ArchExpectations:
    arch: str
    path: Path
    characteristics: dict[str, Expected]
    mappings: dict[str, dict[str, Any]]
    devices: dict[str, dict[str, Expected]]
    sources: dict[str, str]
    raw: dict = field(repr=False, default_factory=dict)
    unmeasurable: dict[str, Unmeasurable] = field(default_factory=dict)

    def get(self, key: str, device: str | None = None) -> Expected | None:
        if device and device in self.devices and key in self.devices[device]:
            return self.devices[device][key]
        return self.characteristics.get(key)


# --- loading with line numbers -----------------------------------------------------------

def _err(path: Path, node, key: str, msg: str) -> ExpectationError:
    line = node.start_mark.line + 1 if node is not None else 0
    return ExpectationError(f"{path}:{line}: {key}: {msg}")


def _mapping_items(path: Path, node, key: str):
    if not isinstance(node, yaml.MappingNode):
        raise _err(path, node, key, "expected a mapping")
    seen = set()
    for k, v in node.value:
        if not isinstance(k, yaml.ScalarNode):
            raise _err(path, k, key, "keys must be plain strings")
        if k.value in seen:
            raise _err(path, k, f"{key}.{k.value}" if key else k.value, "duplicate key")
        seen.add(k.value)
        yield k.value, k, v


def _fields(path: Path, node, key: str, allowed: set[str], what: str = "field") -> dict:
    """A mapping's fields (name -> (key node, value node)); a name not in `allowed` is an
    error naming it and the allowed ones."""
    fields = {k: (kn, v) for k, kn, v in _mapping_items(path, node, key)}
    for k, (kn, _) in fields.items():
        if k not in allowed:
            raise _err(path, kn, f"{key}.{k}",
                       f"unknown {what}; allowed: {', '.join(sorted(allowed))}")
    return fields


def _number(path: Path, node, key: str, *, allow_null=False) -> float | None:
    val = _construct(node)
    if val is None and allow_null:
        return None
    if isinstance(val, bool) or not isinstance(val, (int, float)):
        raise _err(path, node, key, f"expected a number, got {val!r}")
    if not math.isfinite(val):
        raise _err(path, node, key, f"expected a finite number, got {val!r}")
    return float(val)


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml when PyYAML has it
_CONSTRUCTOR = yaml.constructor.SafeConstructor()


def _construct(node):
    """The Python value of a YAML node (safe types only)."""
    try:
        return _CONSTRUCTOR.construct_object(node, deep=True)
    finally:
        _CONSTRUCTOR.constructed_objects.clear()
        _CONSTRUCTOR.recursive_objects.clear()


def _entry(path: Path, key: str, node, key_node=None) -> Expected:
    fields = _fields(path, node, key, ENTRY_KEYS)
    at = key_node if key_node is not None else node   # "missing ..." errors point at the key
    if "unit" not in fields:
        raise _err(path, at, key, "missing 'unit'")
    unit = _construct(fields["unit"][1])
    if unit not in UNITS:
        raise _err(path, fields["unit"][1], f"{key}.unit",
                   f"unknown unit {unit!r}; one of {', '.join(sorted(UNITS))}")
    given = [k for k in ("value", "range", "one_of") if k in fields]
    if not given:
        raise _err(path, at, key, "missing 'value' (or 'range' / 'one_of')")
    if len(given) > 1:
        raise _err(path, at, key, f"give only one of value/range/one_of, not {given}")
    value = rng = one_of = None
    if "value" in fields:
        value = _number(path, fields["value"][1], f"{key}.value", allow_null=True)
    if "range" in fields:
        n = fields["range"][1]
        if not isinstance(n, yaml.SequenceNode) or len(n.value) != 2:
            raise _err(path, n, f"{key}.range", "expected [low, high]")
        lo, hi = (_number(path, x, f"{key}.range") for x in n.value)
        if lo > hi:
            raise _err(path, n, f"{key}.range", f"low {lo:g} > high {hi:g}")
        rng = (lo, hi)
    if "one_of" in fields:
        n = fields["one_of"][1]
        if not isinstance(n, yaml.SequenceNode) or not n.value:
            raise _err(path, n, f"{key}.one_of", "expected a non-empty list of numbers")
        one_of = tuple(_number(path, x, f"{key}.one_of") for x in n.value)
    numeric = value is not None or rng is not None or one_of is not None
    abs_tol = rel_tol = 0.0
    if "tolerance" in fields:
        tn = fields["tolerance"][1]
        for tk, tkn, tv in _mapping_items(path, tn, f"{key}.tolerance"):
            if tk not in ("abs", "rel"):
                raise _err(path, tkn, f"{key}.tolerance.{tk}", "allowed: abs, rel")
            v = _number(path, tv, f"{key}.tolerance.{tk}")
            if v < 0:
                raise _err(path, tv, f"{key}.tolerance.{tk}", "must be >= 0")
            if tk == "abs":
                abs_tol = v
            else:
                rel_tol = v
    elif numeric and rng is None:
        raise _err(path, at, key, "missing 'tolerance' (abs and/or rel)")
    if value is None and not numeric and "note" not in fields:
        raise _err(path, at, key, "value: null needs a 'note' saying why")
    noise_rel, noise_source = _noise(path, key, fields["noise"]) if "noise" in fields \
        else (0.0, "")
    text = {k: str(_construct(fields[k][1])) for k in ("source", "method", "note") if k in fields}
    if "source" not in text:
        raise _err(path, at, key, "missing 'source'")
    boards, rule = _fleet(path, key, fields["provenance"]) if "provenance" in fields \
        else (0, "")
    lit = _literature(path, key, fields["literature"][1], unit) if "literature" in fields \
        else ()
    return Expected(key, unit, value, rng, one_of, abs_tol, rel_tol, text.get("source", ""),
                    text.get("method", ""), text.get("note", ""),
                    f"{path}:{node.start_mark.line + 1}", noise_rel, noise_source,
                    boards=boards, fleet_rule=rule, literature=lit)


def _fleet(path: Path, key: str, pair) -> tuple[int, str]:
    """The boards an entry's range spans (`provenance.boards`: board -> its value) and the
    rule that made the range (`provenance.fleet.rule`); the rest of a provenance is free."""
    kn, node = pair
    if not isinstance(node, yaml.MappingNode):
        raise _err(path, node, f"{key}.provenance", "expected a mapping")
    prov = {k: (kkn, v) for k, kkn, v in _mapping_items(path, node, f"{key}.provenance")}
    n = 0
    if "boards" in prov:
        for b, bkn, bv in _mapping_items(path, prov["boards"][1], f"{key}.provenance.boards"):
            _number(path, bv, f"{key}.provenance.boards.{b}")
            n += 1
    rule = ""
    if "fleet" in prov:
        fleet = {k: v for k, _, v in _mapping_items(path, prov["fleet"][1],
                                                   f"{key}.provenance.fleet")}
        if "rule" not in fleet:
            raise _err(path, prov["fleet"][1], f"{key}.provenance.fleet", "missing 'rule'")
        rule = str(_construct(fleet["rule"]))
    return n, rule


def _literature(path: Path, key: str, node, unit: str) -> tuple[Literature, ...]:
    """An entry's `literature:` list (results/literature.py), errors at the item's line."""
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise _err(path, node, f"{key}.literature", "expected a non-empty list of published "
                                                    "figures")
    out = []
    for i, item in enumerate(node.value):
        try:
            out.append(from_mapping(_construct(item), unit, UNITS))
        except LiteratureError as e:
            at = f"{key}.literature[{i}]" + (f".{e.field}" if e.field else "")
            raise _err(path, item, at, str(e)) from None
    return tuple(out)


def _noise(path: Path, key: str, pair) -> tuple[float, str]:
    """An entry's `noise: {rel, source, boards}`: how far two runs of one board move this
    figure apart (rel, relative; declare_noise derives it from the moves in `boards`, board ->
    list of moves) and where that was measured (source)."""
    kn, node = pair
    fields = _fields(path, node, f"{key}.noise", NOISE_KEYS)
    for need in ("rel", "source"):
        if need not in fields:
            raise _err(path, kn, f"{key}.noise", f"missing '{need}'")
    rel = _number(path, fields["rel"][1], f"{key}.noise.rel")
    if not 0 < rel <= NOISE_MAX:
        raise _err(path, fields["rel"][1], f"{key}.noise.rel",
                   f"must be in (0, {NOISE_MAX:g}], got {rel:g}")
    if "boards" in fields:
        for b, bkn, bv in _mapping_items(path, fields["boards"][1], f"{key}.noise.boards"):
            for x in (bv.value if isinstance(bv, yaml.SequenceNode) else [bv]):
                if _number(path, x, f"{key}.noise.boards.{b}") < 0:
                    raise _err(path, x, f"{key}.noise.boards.{b}", "must be >= 0")
    return rel, str(_construct(fields["source"][1]))


MAX_FILE_BYTES = 4 * 2**20     # an expectation file is a few hundred KB at most


def load_file(path: str | Path) -> ArchExpectations:
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ExpectationError(f"{path}:0: (file): {size / 2**20:.1f} MiB, over the "
                                   f"{MAX_FILE_BYTES // 2**20} MiB limit of an expectation file")
        text = path.read_text()
    except OSError as e:
        raise ExpectationError(f"{path}:0: (file): cannot read: {e}") from e
    return parse(text, path)


def parse(text: str, path: Path) -> ArchExpectations:
    """Validate and load expectation YAML text; `path` names it in errors."""
    try:
        root = yaml.compose(text, Loader=_LOADER)
        raw = _construct(root) if root is not None else None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        raise ExpectationError(f"{path}:{line}: (syntax): {getattr(e, 'problem', e)}") from e
    if root is None:
        raise ExpectationError(f"{path}:1: (file): empty expectation file")
    top = {k: (kn, v) for k, kn, v in _mapping_items(path, root, "")}
    for k, (kn, _) in top.items():
        if k not in TOP_KEYS:
            raise _err(path, kn, k, f"unknown top-level key; allowed: {', '.join(sorted(TOP_KEYS))}")
    for req in ("schema", "arch"):
        if req not in top:
            raise _err(path, root, req, "missing")
    schema = _construct(top["schema"][1])
    if schema != SCHEMA_VERSION:
        raise _err(path, top["schema"][1], "schema", f"unsupported version {schema!r}")
    arch_node = top["arch"][1]
    arch = _construct(arch_node)
    try:
        arch = archs.validate(str(arch))
    except archs.UnknownArch as e:
        raise _err(path, arch_node, "arch", str(e)) from None
    if path.stem != arch and path.stem.startswith("sm_"):
        raise _err(path, arch_node, "arch", f"file is named {path.name} but says {arch}")
    topic = path.parent.name if path.parent.name in TOPICS else None
    chars = {}
    if "characteristics" in top:
        for k, kn, v in _mapping_items(path, top["characteristics"][1], "characteristics"):
            if topic and not k.startswith(topic + "."):
                raise _err(path, kn, k, f"a key in {topic}/ must start with '{topic}.'")
            if not topic and k.split(".")[0] in TOPICS:
                raise _err(path, kn, k, f"belongs in {k.split('.')[0]}/{path.name}")
            chars[k] = _entry(path, k, v, kn)
    mappings = {}
    if "mappings" in top:
        for k, kn, v in _mapping_items(path, top["mappings"][1], "mappings"):
            m = _construct(v)
            if not isinstance(m, dict) or "paper" not in m and "sass" not in m:
                raise _err(path, v, f"mappings.{k}", "expected a mapping with 'paper' and/or 'sass'")
            mappings[k] = m
    devices = {}
    if "devices" in top:
        for dname, _, dnode in _mapping_items(path, top["devices"][1], "devices"):
            dd = {}
            for sk, skn, sv in _mapping_items(path, dnode, f"devices.{dname}"):
                if sk != "characteristics":
                    raise _err(path, skn, f"devices.{dname}.{sk}", "allowed: characteristics")
                for k, kn, v in _mapping_items(path, sv, f"devices.{dname}.characteristics"):
                    dd[k] = _entry(path, f"devices.{dname}.{k}", v, kn)
            devices[dname] = dd
    sources = _construct(top["sources"][1]) if "sources" in top else {}
    unmeasurable = _unmeasurable(path, top["unmeasurable"][1]) if "unmeasurable" in top else {}
    return ArchExpectations(arch, path, chars, mappings, devices, sources or {}, raw,
                            unmeasurable)


def _unmeasurable(path: Path, node) -> dict[str, Unmeasurable]:
    out = {}
    for name, kn, v in _mapping_items(path, node, "unmeasurable"):
        fields = _fields(path, v, f"unmeasurable.{name}", UNMEASURABLE_KEYS, "key")
        for req in ("reason", "sass"):
            if req not in fields:
                raise _err(path, v, f"unmeasurable.{name}.{req}", "missing")
        text = {k: _construct(vv) for k, (_, vv) in fields.items()}
        if not all(isinstance(x, str) and x for x in text.values()):
            raise _err(path, v, f"unmeasurable.{name}", "reason, sass and source are text")
        for k in ("sass", "compiler"):
            try:
                re.compile(text.get(k, ""))
            except re.error as e:
                raise _err(path, fields[k][1], f"unmeasurable.{name}.{k}",
                           f"not a regular expression: {e}") from None
        out[name] = Unmeasurable(name, text["reason"], text["sass"], text.get("source", ""),
                                 f"{path}:{kn.start_mark.line + 1}", text.get("compiler", ""))
    return out


def default_root(start: Path | None = None) -> Path:
    """Where the expectation files are: $GPUCHAR_EXPECTATIONS, else `start`/expectations
    (the current directory: the project a command is run in), else the directory beside
    the package source (an editable install)."""
    env = os.environ.get("GPUCHAR_EXPECTATIONS")
    if env:
        return Path(env)
    here = Path(start or Path.cwd()) / "expectations"
    return here if here.is_dir() else PACKAGE_ROOT


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
    """The expectation files of one session (or command): a root directory, each arch's
    files loaded and merged once."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()
        self._loaded: dict[str, ArchExpectations | None] = {}

    def load(self, arch: str) -> ArchExpectations | None:
        if arch not in self._loaded:
            self._loaded[arch] = load(arch, self.root)
        return self._loaded[arch]

    def available(self) -> dict[str, Path]:
        return available(self.root)

    def files(self) -> list[Path]:
        return all_files(self.root)

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
            ba, bb = (board_of(r.get("provenance") or {}) for r in (ra, rb))
            if not ba or ba != bb:
                raise NoiseError(f"pair {i}: {key} was measured on {ba or '(no board)'} and "
                                 f"{bb or '(no board)'}: a run-to-run noise needs two runs of "
                                 f"one board")
            va, vb = float(ra["value"]), float(rb["value"])
            moves[key].setdefault(ba, []).append(round(abs(vb - va) / max(abs(va), 1e-300), 4))
            dates |= {str((r.get("provenance") or {}).get("date", ""))[:10] for r in (ra, rb)}
    return moves, dates - {""}


def noise_of(moves: list[float]) -> float:
    """The declared noise of a figure from its measured moves: NOISE_SIGMAS x their RMS (a
    move is the difference of two runs, so its RMS already holds both runs' scatter), never
    below the largest move, rounded up to NOISE_STEP."""
    rms = math.sqrt(sum(m * m for m in moves) / len(moves))
    return round(math.ceil(max(NOISE_SIGMAS * rms, max(moves)) / NOISE_STEP - 1e-9)
                 * NOISE_STEP, 4)


def declare_noise(arch: str, pairs: list[tuple[list[dict], list[dict]]], keys: list[str], *,
                  root: Path, device: str | None = None) -> dict[str, str]:
    """Write each key's run-to-run noise into its entry (the arch values or the `device`
    section): `noise.boards` keeps every board's moves (the entry's, then this call's pairs:
    give each pair once), `noise.rel` is noise_of() over all of them, `noise.source` says so.
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
