"""A model's fleet sample as committed beside its contract: the runs the expectation files'
fleet-derived entries come from, one run per line of a gzip-compressed JSON Lines file
(`results/<arch>/fleet/sample.jsonl.gz`), each line a minimal results report of one board
(meta: board, model, arch, SM count, date, driver, toolkit; results: key, status, value,
unit, spread, method). `gpuchar-history import` reads it back into a history store, and
`git diff` shows the runs an acceptance added (`.gitattributes`: `diff=gzip`).

The sample's identity (`sample_id`) is a digest of its runs, named in each file's provenance.
"""
from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from ..core.atomic import atomic_write
from .files import ResultsError
from .noise import Run

RESULT_FIELDS = ("key", "status", "value", "unit", "spread", "method")
META_FIELDS = ("device", "arch", "sm_count", "driver", "cuda_driver_api", "cuda_runtime",
               "ptxas")


def run_doc(run: Run, meta: dict | None = None) -> dict:
    """One run as the minimal report a line of the sample holds."""
    meta = {k: v for k, v in (meta or {}).items() if k in META_FIELDS and v is not None}
    prov = {"uuid": run.board, "device": run.model, "arch": run.arch, "date": run.date,
            **({"sm_count": run.sm_count} if run.sm_count else {}), **meta}
    results = [{**{k: r.get(k) for k in RESULT_FIELDS}, "arch": run.arch, "provenance": prov}
               for key, r in sorted(run.results.items())]
    return {"meta": {"uuid": run.board, "date": run.date, **meta, "device": run.model,
                     "arch": run.arch, **({"sm_count": run.sm_count} if run.sm_count else {})},
            "results": results}


def _line(doc: dict) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=True)


def write(path: Path, docs: list[dict]) -> None:
    """The sample file, one run a line, oldest first (atomic; gzip with no timestamp, so the
    same runs give the same bytes)."""
    docs = sorted(docs, key=lambda d: (str(d["meta"].get("date")), str(d["meta"].get("uuid"))))
    text = "".join(_line(d) + "\n" for d in docs).encode()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write(Path(path), gzip.compress(text, mtime=0))


def read(path: Path) -> list[dict]:
    """The reports of a sample file (each line one run)."""
    path = Path(path)
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError) as e:
        raise ResultsError(f"{path}: cannot read the fleet sample: {e}") from None
    out = []
    for i, line in enumerate(raw.decode().splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            raise ResultsError(f"{path}:{i}: not a JSON line ({e.msg})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
            raise ResultsError(f"{path}:{i}: not a run (expected {{meta, results}})")
        out.append(doc)
    return out


def sample_id(docs: list[dict]) -> str:
    """A short digest naming the sample: its runs' boards, dates and results."""
    h = hashlib.sha256()
    for d in sorted(docs, key=lambda d: (str(d["meta"].get("date")),
                                         str(d["meta"].get("uuid")))):
        h.update(_line(d).encode())
    return h.hexdigest()[:8]


@dataclass(frozen=True)
class Summary:
    """What a file's provenance says of one model's sample."""
    boards: int
    runs: int
    first: str
    last: str
    sample: str
    export: str

    def as_yaml(self) -> dict:
        return {"boards": self.boards, "runs": self.runs, "dates": [self.first, self.last],
                "sample": self.sample, "export": self.export}


def summary(runs: list[Run], model: str, sample: str, export: str) -> Summary:
    mine = [r for r in runs if r.model == model]
    dates = sorted(r.date[:10] for r in mine if r.date)
    return Summary(len({r.board for r in mine}), len(mine), dates[0] if dates else "",
                   dates[-1] if dates else "", sample, export)
