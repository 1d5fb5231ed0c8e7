"""A model's contract in its expectation files, derived from its fleet sample: one line per
figure in the device section (range or value, tolerance, noise, modes, `source: fleet`), the
sample named once per file (`provenance.samples`), the rule once in the docs.

An acceptance changes what it changed: an entry is rewritten only when the sample moved it
beyond what the entry already says (`settled`): a board outside the entry's range, a margin the
entry lacks or one more than HYSTERESIS times what the rule needs, a noise that moved by more
than that factor, a new mode. So a board that conforms changes no entry, or a few, plus the
sample's line in each file; a board that moves many entries shows in the diff.

Both acceptance paths, `pytest --snapshot-update` on a GPU and `gpuchar-expectations update`
offline, come here with the same default (extend: the other boards stay in the sample);
replacing the model's sample by the accepted boards alone is the explicit `replace`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import expectations as E
from . import gate
from . import sample as S
from .finite import number
from .noise import Figure, Run, figures, fleet_runs, method_shape

HYSTERESIS = 1.5            # an entry is kept while the rule's numbers stay within this factor
FLEET_MODES = ("extend", "replace")


def entry_of(b: gate.Bounds, fig: Figure, base: E.Expected | None) -> dict:
    """The device entry of a figure's bounds: its unit and method only where the arch entry
    of the key does not already say them."""
    lo, hi = gate.outward(b.low, b.high)
    out: dict = {"value": lo} if lo == hi else {"range": [lo, hi]}
    out["tolerance"] = {"rel": 1.0} if b.grid else {"abs": b.margin}
    noise: dict = {}
    if b.sigma_run is not None:
        noise["run"] = b.sigma_run
    noise["board"] = b.sigma_board
    if b.grid:
        noise["grid"] = True
    out["noise"] = noise
    if b.modes:
        out["modes"] = [E._rounded(m) for m in b.modes]
    if base is None or base.unit != b.unit:
        out["unit"] = b.unit
    if base is None or method_shape(base.method) != method_shape(fig.method):
        out["method"] = fig.method
    out["source"] = E.FLEET_SOURCE
    return out


def with_noise(old: dict | None, fig: Figure) -> dict | None:
    """A device entry the sample cannot derive (fewer than MIN_BOARDS boards) keeps its range
    and tolerance, but takes the within-board noise its boards' runs measured, so the change
    question judges it by that (the 1% fallback flagged the L2 capacity's bisection, which
    moves by one 3% step between runs of one board). None: nothing to add or nothing new."""
    if old is None or fig.sigma_run is None or not fig.moves():
        return None
    run = 0.0 if fig.exact else gate.round_up(fig.sigma_run)
    noise = dict(old.get("noise") or {})
    if "run" in noise and _close(noise["run"], run):
        return None
    noise["run"] = run
    if fig.grid:
        noise["grid"] = True
    return {**old, "noise": noise}


def _interval(entry: dict) -> tuple[float, float] | None:
    value = number(entry.get("value"))
    rng = entry.get("range") or ([value] * 2 if value is not None else None)
    return (float(rng[0]), float(rng[1])) if rng else None


def _close(old, new) -> bool:
    """Two noise figures within HYSTERESIS of each other (both zero, or both absent)."""
    if old is None or new is None:
        return old is None and new is None
    if old == 0 or new == 0:
        return old == new
    return 1 / HYSTERESIS <= float(old) / float(new) <= HYSTERESIS


def settled(old: dict, new: dict) -> bool:
    """Does the entry in the file already say what the sample says (within HYSTERESIS)?"""
    o, n = _interval(old), _interval(new)
    if o is None or n is None or old.get("source") != E.FLEET_SOURCE:
        return False
    if n[0] < o[0] or n[1] > o[1]:
        return False                       # a board outside the entry's range
    ot, nt = old.get("tolerance") or {}, new.get("tolerance") or {}
    if set(ot) != set(nt) or "rel" in nt and ot.get("rel") != nt.get("rel"):
        return False
    if "abs" in nt and not (nt["abs"] <= float(ot["abs"]) <= HYSTERESIS * nt["abs"] + 1e-12):
        return False
    on, nn = old.get("noise") or {}, new.get("noise") or {}
    if not (_close(on.get("run"), nn.get("run")) and _close(on.get("board"), nn.get("board"))
            and bool(on.get("grid")) == bool(nn.get("grid"))):
        return False
    if len(old.get("modes") or []) != len(new.get("modes") or []):
        return False
    return all(old.get(k) == new.get(k) for k in ("unit", "method"))


@dataclass
class Written:
    """What a contract write did: file -> keys rewritten; keys the sample could not derive
    (fewer than MIN_BOARDS boards); the model's sample summary."""
    files: dict[Path, list[str]] = field(default_factory=dict)
    unchanged: int = 0
    too_few: list[str] = field(default_factory=list)
    summary: S.Summary | None = None
    added: int = 0              # runs the acceptance added to the sample (0: all there)

    @property
    def changed(self) -> int:
        return sum(len(v) for v in self.files.values())


def write_model(arch: str, model: str, runs: list[Run], *, root: Path, sample: str,
                export: str, min_boards: int = gate.MIN_BOARDS, dry_run: bool = False
                ) -> Written:
    """Derive every figure of `model` from the runs and write the entries the sample moved
    (atomic per file, every other entry and line kept), with the sample's line in the
    provenance of every file holding the model's fleet entries."""
    root = Path(root)
    exp = E.Store(root).load(arch)
    out = Written(summary=S.summary(runs, model, sample, export))
    by_file: dict[Path, dict[str, dict]] = {}
    read: dict[Path, dict[str, dict]] = {}
    for key, fig in sorted(figures(runs, arch, model).items()):
        path = E.file_for(key, arch, root)
        if path not in read:
            read[path] = E.section_entries(path, model)
        b = gate.derive(fig, min_boards)
        if b is None:
            out.too_few.append(key)
            noisy = with_noise(read[path].get(key), fig)
            if noisy is not None:
                by_file.setdefault(path, {})[key] = noisy
            continue
        base = exp.characteristics.get(key) if exp is not None else None
        new = entry_of(b, fig, base)
        old = read[path].get(key)
        if old is not None and settled(old, new):
            out.unchanged += 1
            continue
        by_file.setdefault(path, {})[key] = new
    out.files = {p: list(e) for p, e in sorted(by_file.items())}
    if dry_run:
        return out
    fleet_files = set(by_file) | {p for p, entries in read.items()
                                  if any(e.get("source") == E.FLEET_SOURCE
                                         for e in entries.values())}
    for path in sorted(fleet_files):
        E.write_entries(path, by_file.get(path, {}), model,
                        provenance={model: out.summary.as_yaml()})
    return out


def accept(arch: str, model: str, new_docs: list[dict], *, root: Path, sample_path: Path,
           fleet: str = "extend", dry_run: bool = False) -> Written:
    """Accept runs of `model` (reports of one or more boards): into the committed sample
    (`extend`, the default: every other board stays) or as the model's whole sample
    (`replace`, explicit), then the contract written from it and the sample saved."""
    if fleet not in FLEET_MODES:
        raise ValueError(f"fleet {fleet!r}: one of {', '.join(FLEET_MODES)}")
    old_docs = S.read(sample_path) if Path(sample_path).exists() else []
    added = [S.run_doc(r, _meta(d)) for d in new_docs for r in fleet_runs([d])
             if r.model == model and r.arch == arch]
    if not added:
        raise E.ExpectationError(f"{sample_path}:0: (sample): the accepted results hold no "
                                 f"{model} run of {arch} with a board UUID (a model's fleet "
                                 f"sample counts boards): nothing accepted")
    keys = {(d["meta"]["uuid"], d["meta"]["date"]) for d in added}
    if fleet == "replace":
        kept = [d for d in old_docs if d["meta"].get("device") != model]
    else:
        kept = [d for d in old_docs if (d["meta"].get("uuid"), d["meta"].get("date")) not in keys]
    docs = kept + added
    written_new = len(docs) - len(old_docs) if fleet == "extend" else len(added)
    runs = fleet_runs(docs)
    # a model sampled on fewer than MIN_BOARDS boards (a user's first boards, or an explicit
    # replace) is judged as its boards' later nights: one board's bounds are its change limit
    boards = {r.board for r in runs if r.model == model and r.arch == arch}
    min_boards = 1 if fleet == "replace" or len(boards) < gate.MIN_BOARDS else gate.MIN_BOARDS
    written = write_model(arch, model, runs, root=root, sample=S.sample_id(docs),
                          export=export_name(sample_path, root), min_boards=min_boards,
                          dry_run=dry_run)
    written.added = written_new
    if not dry_run and (written_new or fleet == "replace"):
        S.write(sample_path, docs)
    return written


def export_name(sample_path: Path, root: Path) -> str:
    """How the files' provenance names the sample: relative to the directory holding the
    expectations (results/sm_90/fleet/sample.jsonl.gz), else as given."""
    try:
        return str(Path(sample_path).resolve().relative_to(Path(root).resolve().parent))
    except ValueError:
        return str(sample_path)


def _meta(doc: dict) -> dict:
    meta = dict(doc.get("meta") or {})
    first = next((r.get("provenance") for r in doc.get("results") or []
                  if isinstance(r.get("provenance"), dict)), {}) or {}
    return {k: meta.get(k, first.get(k)) for k in S.META_FIELDS}

