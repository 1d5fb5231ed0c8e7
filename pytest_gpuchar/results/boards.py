"""Which run each board of tonight is compared with, and the comparison per board.

A nightly answers two questions apart for every figure (docs/nightly.md):

- *conformance*: is the board within its model's range? Each result's own status against the
  expectation files (whose board-dependent figures hold a fleet sample's range);
- *change*: did the board move since its own last run? Only a run of the same board (by
  UUID) is a reference for that. On a board's first night there is none: the nightly says
  so, judges conformance only, and whatever another board's run (the model's committed
  baseline) differs in is a note.

Pure: reports in, a plan and the changes out; reading files and databases is the caller's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .changes import Change, compare, repeatability


def result_board(r: dict) -> str:
    prov = r.get("provenance")
    return str(prov.get("uuid") or "") if isinstance(prov, dict) else ""


def doc_boards(doc: dict) -> list[str]:
    """The boards (UUIDs) a report or nightly document measured, in order of first mention:
    its results' provenance, its meta's GPUs, its meta's own UUID."""
    seen: dict[str, None] = {}
    for r in doc.get("results") or []:
        if result_board(r):
            seen.setdefault(result_board(r), None)
    meta = doc.get("meta") or {}
    for g in meta.get("gpus") or []:
        if isinstance(g, dict) and g.get("uuid"):
            seen.setdefault(str(g["uuid"]), None)
    if meta.get("uuid"):
        seen.setdefault(str(meta["uuid"]), None)
    return list(seen)


def of_board(results: list[dict], board: str) -> list[dict]:
    """A board's results, with the results that name no board (mappings, static notes) that
    every board of the run shares."""
    return [r for r in results if result_board(r) in (board, "")]


@dataclass
class Reference:
    """What one board of tonight is compared with."""
    board: str                       # tonight's board ("" when its results name none)
    label: str = ""                  # the reference run: a path, a history run
    doc: dict | None = None          # that run's report (None: nothing to compare with)
    same_board: bool = False         # the reference is this board's own previous run
    other: str = ""                  # the reference's board(s) when they are another's
    earlier: list = field(default_factory=list)   # the board's runs before `doc` (oldest
    # first, results lists): with it, the change question's history (results/gate.py)

    @property
    def first_night(self) -> bool:
        return not self.same_board

    def describe(self) -> str:
        who = self.board[:12] or "this run"
        if self.same_board:
            return f"{who}: its own previous run, {self.label}"
        if self.doc is not None:
            return (f"{who}: first night of this board (no run of its own to compare with): "
                    f"conformance only; differences from another board's run ({self.other}, "
                    f"{self.label}) are notes")
        return f"{who}: first night of this board: conformance only (no previous run)"

    def as_dict(self) -> dict:
        return {"board": self.board, "reference": self.label or None,
                "same_board": self.same_board, "first_night": self.first_night,
                "other_board": self.other or None}


def reference(board: str, label: str, doc: dict | None) -> Reference:
    """Tonight's `board` against a candidate run `doc`: its own previous run when the run
    measured this board (or when neither names a board: a run before UUIDs were recorded is
    taken as this machine's), another board's otherwise."""
    if doc is None:
        return Reference(board)
    theirs = doc_boards(doc)
    if board in theirs or not theirs or not board:
        return Reference(board, label, doc, same_board=True)
    return Reference(board, label, doc, other=", ".join(b[:12] for b in theirs))


@dataclass
class Comparison:
    changes: list[Change] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)
    repeatability: dict | None = None     # of the first board with a run of its own


def compare_boards(results: list[dict], refs: list[Reference], *, noise_rel: float,
                   skipped: dict[str, str]) -> Comparison:
    """Each board's results against its reference (`refs`, one per board of tonight): its
    own previous run gives changes, another board's run notes, none nothing but
    conformance."""
    out = Comparison(references=refs)
    boards = {r.board for r in refs}
    for ref in refs:
        mine = of_board(results, ref.board) if len(boards) > 1 else results
        if ref.doc is None:
            out.changes += compare(mine, None, noise_rel=noise_rel, skipped=skipped)
            continue
        prev = ref.doc.get("results")
        theirs = of_board(prev or [], ref.board) if ref.same_board and ref.board and \
            len(doc_boards(ref.doc)) > 1 else prev
        meta = ref.doc.get("meta") or {}
        history = [*ref.earlier, theirs] if ref.same_board and theirs is not None else None
        out.changes += compare(mine, theirs, noise_rel=noise_rel, skipped=skipped,
                               previous_skipped=meta.get("measured_skips") or {},
                               other_board_run="" if ref.same_board else ref.other,
                               history=history)
        if ref.same_board and out.repeatability is None and theirs is not None:
            out.repeatability = repeatability(theirs, mine)
    return out


def known_failures(refs: list[Reference]) -> tuple[list[dict], list[dict]]:
    """The previous changes and failed tests a run's own failures are matched against (a
    failure reported the same way last night is a known one): only from runs of the same
    board."""
    changes: list[dict] = []
    failures: list[dict] = []
    for ref in refs:
        if ref.same_board and ref.doc is not None:
            changes += ref.doc.get("changes") or []
            failures += (ref.doc.get("meta") or {}).get("failures") or []
    return changes, failures
