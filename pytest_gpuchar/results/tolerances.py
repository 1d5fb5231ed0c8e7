"""The tolerance a measured figure proposes for its expectation entry, read from the one file
that holds them: `tolerances.yaml` of the expectations directory (by topic, then the kind of
figure the topic's code names). A figure records it as data["tolerance"]; accepting a run
gives it to a new entry (an entry that exists keeps its own: figures are judged against the
entries only).

The directory is the session's (`use`, called when the session starts), else the default
one (results.expectations.default_root); a directory without the file (a copy of the
expectation files made before it existed) falls back to the one beside the package.
"""
from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

from .expectations import PACKAGE_ROOT, default_root
from .finite import number
from .schema import ExpectationError

FILE = "tolerances.yaml"
SCHEMA = 1
FIELDS = ("abs", "rel")

_root: dict[str, Path | None] = {"root": None}


def use(root: Path | None) -> None:
    """Read the tolerances from `root` (the session's expectations directory) from now on."""
    _root["root"] = Path(root) if root is not None else None


def path(root: Path | None = None) -> Path:
    """The file read for `root` (else the session's, else the default directory)."""
    base = Path(root or _root["root"] or default_root())
    here = base / FILE
    return here if here.exists() or not (PACKAGE_ROOT / FILE).exists() else PACKAGE_ROOT / FILE


def of(topic: str, kind: str, root: Path | None = None) -> dict:
    """The tolerance of `kind` of `topic`'s figures: a fresh {"abs": A, "rel": R} (either or
    both, as the file writes them)."""
    where = path(root)
    table = load(where)
    if kind not in table.get(topic, {}):
        raise ExpectationError(f"{where}:0: {topic}.{kind}: no such tolerance (the kinds of "
                               f"{topic}: {sorted(table.get(topic, {}))})")
    return copy.deepcopy(table[topic][kind])


@functools.cache
def load(where: Path) -> dict[str, dict[str, dict]]:
    """The file, validated: {topic: {kind: tolerance}}."""
    try:
        raw = yaml.safe_load(where.read_text())
    except OSError as e:
        raise ExpectationError(f"{where}:0: (file): cannot read: {e}") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise ExpectationError(f"{where}:{mark.line + 1 if mark else 0}: (syntax): "
                               f"{getattr(e, 'problem', e)}") from e
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        raise ExpectationError(f"{where}:1: schema: expected a mapping with schema: {SCHEMA}")
    out: dict[str, dict[str, dict]] = {}
    for topic, kinds in raw.items():
        if topic == "schema":
            continue
        if not isinstance(kinds, dict):
            raise ExpectationError(f"{where}:0: {topic}: expected a mapping of kinds")
        out[str(topic)] = {str(k): _checked(where, f"{topic}.{k}", t) for k, t in kinds.items()}
    return out


def _checked(where: Path, name: str, tol) -> dict:
    if not isinstance(tol, dict) or not tol or set(tol) - set(FIELDS):
        raise ExpectationError(f"{where}:0: {name}: expected {{abs: A, rel: R}} (either or "
                               f"both), got {tol!r}")
    for k, v in tol.items():
        if number(v) is None or v < 0:
            raise ExpectationError(f"{where}:0: {name}.{k}: expected a finite number >= 0, "
                                   f"got {v!r}")
    return tol
