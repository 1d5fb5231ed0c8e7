"""The expectation files' schema: the entry types (Expected, Unmeasurable, ArchExpectations),
the fields a file, an entry, a fleet rule, a literature value and a declared noise may hold,
and their validation with file:line:key errors (``parse``, ``load_file``). Only safe YAML
loading is used; the files' layout, their merging, lookup and regeneration are
results/expectations.py."""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from ..core import archs
from ..core.topic_list import expectation_topics
from .literature import Literature, LiteratureError, from_mapping

SCHEMA_VERSION = 2          # 2: the contract form (noise {run, board}, modes, shared provenance)
# Topic directories under ROOT (the topics with files of their own, core.topic.TOPICS); a key
# "memory.latency.l1" lives in memory/<arch>.yaml.
TOPICS = expectation_topics()
TOP_KEYS = {"schema", "arch", "description", "sources", "characteristics", "mappings",
            "devices", "provenance", "unmeasurable", "methods"}
UNMEASURABLE_KEYS = {"reason", "sass", "source", "compiler"}
ENTRY_KEYS = {"value", "range", "one_of", "unit", "tolerance", "source", "method", "note",
              "provenance", "status", "noise", "modes", "literature"}
# noise: the figure's noise model (results/noise.py), in the figure's unit, 1 sigma:
# run = within-board run-to-run (absent: not measured; 0: exact), board = board to board;
# grid: read off a power-of-two sweep (one step is its resolution)
NOISE_KEYS = {"run", "board", "grid"}
FLEET_SOURCE = "fleet"     # an entry derived from the model's fleet sample (file provenance)
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
    # the noise model (results/noise.py, results/gate.py): within-board run-to-run sigma
    # (None: not measured; 0: exact), board-to-board sigma, read off a power-of-two sweep
    sigma_run: float | None = None
    sigma_board: float = 0.0
    grid: bool = False
    modes: tuple[float, ...] = ()
    # a fleet-derived entry: how many boards of the model its sample holds (the file's
    # provenance.samples) and when it was measured (provenance.date of an entry that has one)
    boards: int = 0
    measured: str = ""
    # published figures for the same characteristic (shown beside the result, never judged)
    literature: tuple[Literature, ...] = ()

    @property
    def noise_rel(self) -> float:
        """The within-board sigma relative to the figure (0 when not measured or exact)."""
        ref = self.value if self.value is not None else \
            sum(self.range) / 2 if self.range is not None else None
        if not self.sigma_run or not ref:
            return 0.0
        return self.sigma_run / abs(ref)

    @property
    def noise_source(self) -> str:
        if self.sigma_run is None:
            return ""
        return ("exact: every run of every sampled board read it" if self.sigma_run == 0 else
                f"within-board sigma {self.sigma_run:g} {self.unit}, board-to-board "
                f"{self.sigma_board:g}")

    def noise(self) -> dict:
        """The noise model as a result carries it to the nightly's change question."""
        if self.sigma_run is None:
            return {}
        return {"run": self.sigma_run, "board": self.sigma_board, "exact": self.sigma_run == 0,
                "grid": self.grid}

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
        over = f" over {self.boards} boards" if self.boards > 1 else \
            " (fleet)" if self.source == FLEET_SOURCE else ""
        if self.range is not None:
            return f"{self.range[0]:g}-{self.range[1]:g} {self.unit}{t}{over}"
        if self.one_of is not None:
            return f"one of {', '.join(f'{v:g}' for v in self.one_of)} {self.unit}{t}"
        if self.value is not None:
            return f"{self.value:g} {self.unit}{t}{over}"
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


YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml when PyYAML has it
_CONSTRUCTOR = yaml.constructor.SafeConstructor()


_STR, _MAP, _SEQ = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:map",
                    "tag:yaml.org,2002:seq")
_SCALAR = {"tag:yaml.org,2002:int": _CONSTRUCTOR.construct_yaml_int,
           "tag:yaml.org,2002:float": _CONSTRUCTOR.construct_yaml_float,
           "tag:yaml.org,2002:bool": _CONSTRUCTOR.construct_yaml_bool,
           "tag:yaml.org,2002:null": _CONSTRUCTOR.construct_yaml_null}


def _construct(node):
    """The Python value of a YAML node (safe types only). Plain maps, lists, strings and
    numbers are built here directly (an alias is the node it names, built again); anything
    else (merge keys, timestamps, sets) goes through PyYAML's safe constructor."""
    try:
        return _plain(node)
    except _NotPlain:
        pass
    try:
        return _CONSTRUCTOR.construct_object(node, deep=True)
    finally:
        _CONSTRUCTOR.constructed_objects.clear()
        _CONSTRUCTOR.recursive_objects.clear()


class _NotPlain(Exception):
    pass


def _plain(node, depth: int = 0):
    tag = node.tag
    if tag == _STR:
        return node.value
    if depth > 64:
        raise _NotPlain
    if tag == _MAP:
        out = {}
        for k, v in node.value:
            if k.tag == "tag:yaml.org,2002:merge":
                raise _NotPlain
            key = _plain(k, depth + 1)
            if isinstance(key, (dict, list)):
                raise _NotPlain
            out[key] = _plain(v, depth + 1)
        return out
    if tag == _SEQ:
        return [_plain(v, depth + 1) for v in node.value]
    make = _SCALAR.get(tag)
    if make is None:
        raise _NotPlain
    return make(node)


def _entry(path: Path, key: str, node, key_node=None, base: Expected | None = None,
           samples: dict[str, int] | None = None, device: str = "") -> Expected:
    """One entry. A device entry takes the unit, method and note of the file's arch entry of
    the same key (`base`) unless it gives its own; a fleet-derived one (source: fleet) the
    number of boards of its model's sample (`samples`, from the file's provenance)."""
    fields = _fields(path, node, key, ENTRY_KEYS)
    at = key_node if key_node is not None else node   # "missing ..." errors point at the key
    if "unit" not in fields and base is None:
        raise _err(path, at, key, "missing 'unit'" + (" (no arch entry of this key to take it "
                                                      "from)" if device else ""))
    unit = _construct(fields["unit"][1]) if "unit" in fields else base.unit
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
    text = {k: str(_construct(fields[k][1])) for k in ("source", "method", "note") if k in fields}
    if base is not None:
        for k, inherited in (("method", base.method), ("note", base.note)):
            if inherited and k not in text:
                text[k] = inherited
    if value is None and not numeric and "note" not in text:
        raise _err(path, at, key, "value: null needs a 'note' saying why")
    if "source" not in text:
        raise _err(path, at, key, "missing 'source'")
    sigma_run, sigma_board, grid = _noise(path, key, fields["noise"]) if "noise" in fields \
        else (None, 0.0, False)
    modes = ()
    if "modes" in fields:
        n = fields["modes"][1]
        if not isinstance(n, yaml.SequenceNode) or len(n.value) < 2:
            raise _err(path, n, f"{key}.modes", "expected a list of two or more numbers")
        modes = tuple(_number(path, x, f"{key}.modes") for x in n.value)
    measured = _measured(path, key, fields["provenance"]) if "provenance" in fields else ""
    boards = (samples or {}).get(device, 0) if text["source"] == FLEET_SOURCE else 0
    lit = _literature(path, key, fields["literature"][1], unit) if "literature" in fields \
        else ()
    return Expected(key, unit, value, rng, one_of, abs_tol, rel_tol, text.get("source", ""),
                    text.get("method", ""), text.get("note", ""),
                    f"{path}:{node.start_mark.line + 1}", sigma_run, sigma_board, grid, modes,
                    boards=boards, measured=measured, literature=lit)


def _measured(path: Path, key: str, pair) -> str:
    """When an entry with provenance of its own was measured (`provenance.date`); the rest of
    an entry's provenance is free (the file's provenance is shared by its entries)."""
    kn, node = pair
    if not isinstance(node, yaml.MappingNode):
        raise _err(path, node, f"{key}.provenance", "expected a mapping")
    prov = {k: v for k, _, v in _mapping_items(path, node, f"{key}.provenance")}
    return str(_construct(prov["date"])) if "date" in prov else ""


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


def _noise(path: Path, key: str, pair) -> tuple[float | None, float, bool]:
    """An entry's `noise: {run, board, grid}`: the within-board run-to-run sigma and the
    board-to-board sigma in the figure's unit (results/noise.py), and whether the figure is
    read off a power-of-two sweep."""
    kn, node = pair
    fields = _fields(path, node, f"{key}.noise", NOISE_KEYS)
    out = []
    for name in ("run", "board"):
        if name not in fields:
            out.append(None if name == "run" else 0.0)
            continue
        v = _number(path, fields[name][1], f"{key}.noise.{name}")
        if v < 0:
            raise _err(path, fields[name][1], f"{key}.noise.{name}", "must be >= 0")
        out.append(v)
    grid = bool(_construct(fields["grid"][1])) if "grid" in fields else False
    return out[0], out[1], grid


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
    digest = hashlib.blake2b(f"{path.resolve()}\0{text}".encode(), digest_size=16).hexdigest()
    parsed = _PARSED.get(digest)
    if parsed is None:
        parsed = parse(text, path)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[digest] = parsed
    return _copy(parsed)


# A process parses each file's text once (a process that opens many sessions, the unit tests
# and the fleet commands, loads the same files again and again). A new process parses them
# again: every sm_90 file in about 0.3 s, every arch's in about 0.6 s. The entries are frozen;
# each caller gets its own dicts.
_PARSED: dict[str, ArchExpectations] = {}
_PARSED_MAX = 256


def _copy(a: ArchExpectations) -> ArchExpectations:
    return replace(a, characteristics=dict(a.characteristics),
                   mappings={k: dict(v) for k, v in a.mappings.items()},
                   devices={k: dict(v) for k, v in a.devices.items()},
                   sources=dict(a.sources), unmeasurable=dict(a.unmeasurable))


def parse(text: str, path: Path) -> ArchExpectations:
    """Validate and load expectation YAML text; `path` names it in errors."""
    try:
        root = yaml.compose(text, Loader=YAML_LOADER)
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
        raise _err(path, top["schema"][1], "schema",
                   f"unsupported version {schema!r}; this suite reads schema {SCHEMA_VERSION} "
                   f"(docs/nightly.md, 'The expectation files')")
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
    samples = _samples(path, top["provenance"][1]) if "provenance" in top else {}
    if "methods" in top:      # texts the entries share, each named by a YAML anchor
        for name, _, v in _mapping_items(path, top["methods"][1], "methods"):
            if not isinstance(_construct(v), str):
                raise _err(path, v, f"methods.{name}", "expected a method's text")
    devices = {}
    if "devices" in top:
        for dname, _, dnode in _mapping_items(path, top["devices"][1], "devices"):
            dd = {}
            for sk, skn, sv in _mapping_items(path, dnode, f"devices.{dname}"):
                if sk != "characteristics":
                    raise _err(path, skn, f"devices.{dname}.{sk}", "allowed: characteristics")
                for k, kn, v in _mapping_items(path, sv, f"devices.{dname}.characteristics"):
                    e = _entry(path, f"devices.{dname}.{k}", v, kn, chars.get(k), samples,
                               dname)
                    dd[k] = replace(e, key=k)
            devices[dname] = dd
    sources = _construct(top["sources"][1]) if "sources" in top else {}
    unmeasurable = _unmeasurable(path, top["unmeasurable"][1]) if "unmeasurable" in top else {}
    return ArchExpectations(arch, path, chars, mappings, devices, sources or {}, raw,
                            unmeasurable)


def _samples(path: Path, node) -> dict[str, int]:
    """The file's `provenance.samples`: model -> {boards, runs, dates, sample, export}, the
    fleet sample its fleet-derived entries come from; model -> its number of boards."""
    if not isinstance(node, yaml.MappingNode):
        raise _err(path, node, "provenance", "expected a mapping")
    top = {k: v for k, _, v in _mapping_items(path, node, "provenance")}
    if "samples" not in top:
        return {}
    out = {}
    for model, _, v in _mapping_items(path, top["samples"], "provenance.samples"):
        fields = {k: vv for k, _, vv in _mapping_items(path, v, f"provenance.samples.{model}")}
        if "boards" not in fields:
            raise _err(path, v, f"provenance.samples.{model}", "missing 'boards'")
        n = _number(path, fields["boards"], f"provenance.samples.{model}.boards")
        out[model] = int(n)
    return out


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
