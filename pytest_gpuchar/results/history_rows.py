"""What the history store keeps of a report, before any database: a gpuchar-results.json or a
nightly.json split into one run per board (GPU UUID), each with its columns, its meta and its
result rows; and the way back from a stored row to a report's result. Pure (no SQLAlchemy).

A merged multi-GPU report (pytest-xdist, ``--gpuchar-distribute=replicate``) carries each
result's board in ``provenance.uuid``; it becomes one run per board. Results without a board
(offline PTX->SASS checks, which no GPU measured) belong to every board's run, so that each
run reads like the report of one board. A report with no UUID anywhere (the early runs) is one
run of an unknown board: the store never invents a board.

A figure's rows over time (what ``History.series`` gives) are read here too: per board, the
changes of a board's driver, the summary across a model's boards (``fleet_of``), so that the
command line and the pages read them one way.
"""
from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import math
import re
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

UNKNOWN_BOARD = "unknown board"
SOURCES = ("nightly", "pytest", "import")
FLEET_STATUSES = ("pass", "fail", "measured")   # figures a fleet statistic counts
NUMBERS = ("value", "spread", "deviation", "allowance", "noise_rel")
TEXTS = ("status", "unit", "expected", "source", "method", "test", "detail", "noise_source")
OBJECTS = ("data", "provenance")
# a board's own provenance overrides these fields of a merged report's meta
DEVICE_FIELDS = ("device", "device_index", "uuid", "arch", "sm_count", "driver",
                 "cuda_driver_api", "cuda_runtime", "ptxas", "sm_clock_max_mhz",
                 "sm_clock_measured_mhz")
# the parts of a nightly.json beside its meta, results and changes, kept in the run's meta
NIGHTLY_PARTS = ("schema", "verdict", "pytest_command", "wall_s", "previous", "environment",
                 "status_counts", "skipped", "repeatability")


class HistoryError(ValueError):
    """The history store cannot do what was asked: the message names the database, file,
    board or key, and the problem."""


@functools.lru_cache(maxsize=1)
def suite_version() -> str:
    """The suite's version: the package version, and the git commit of its source tree when it
    is a git checkout ("0.1.0+g06b60e3", "+dirty" with uncommitted changes to tracked files)."""
    from importlib import metadata
    try:
        version = metadata.version("pytest-gpuchar")
    except metadata.PackageNotFoundError:
        version = "unknown"
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return version
    try:
        git = ["git", "-C", str(root)]
        commit = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return version
    return f"{version}+g{commit}{'+dirty' if dirty else ''}" if commit else version


def slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (a model's results/<arch>/ folder)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def jsonable(obj):
    """`obj` as strict JSON data (what PostgreSQL's json type accepts): non-finite floats as
    the strings "nan", "inf", "-inf", tuples as lists, keys as strings, anything else as str."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else repr(obj)
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return str(obj)


def parse_date(text, what: str = "date") -> _dt.datetime | None:
    """An ISO date or date-time as a naive UTC datetime (a date alone is its midnight UTC);
    None for None. Raises HistoryError naming `what` for anything else."""
    if text is None or text == "":
        return None
    if isinstance(text, _dt.datetime):
        d = text
    else:
        try:
            d = _dt.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
        except ValueError:
            raise HistoryError(f"{what}: {text!r} is not an ISO date (2026-11-23 or "
                               f"2026-11-23T19:30:37+00:00)") from None
    if d.tzinfo is not None:
        d = d.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return d


def iso(d: _dt.datetime | None) -> str | None:
    """A stored (naive UTC) datetime as ISO text with its +00:00."""
    return None if d is None else d.replace(tzinfo=_dt.timezone.utc).isoformat(
        timespec="seconds")


def _int(v) -> int | None:
    try:
        return None if v is None or isinstance(v, bool) else int(v)
    except (TypeError, ValueError):
        return None


def _float(v) -> float | None:
    try:
        f = None if v is None or isinstance(v, bool) else float(v)
    except (TypeError, ValueError):
        return None
    return f if f is not None and math.isfinite(f) else None


def _text(v) -> str | None:
    if v is None or v == "":
        return None
    if isinstance(v, (list, tuple)):
        return "; ".join(str(x) for x in v) or None
    return str(v)


def is_nightly(doc: dict) -> bool:
    return "exit" in doc and ("environment" in doc or "verdict" in doc)


def check_doc(doc, name: str) -> list[dict]:
    """The results of a report (a gpuchar-results.json, or a nightly.json whose results may
    have been left out), or HistoryError naming `name` and what is wrong."""
    if not isinstance(doc, dict):
        raise HistoryError(f"{name}: not a gpuchar results report (expected a JSON object)")
    results = doc.get("results")
    if results is None and is_nightly(doc):
        return []
    if not isinstance(results, list):
        raise HistoryError(f"{name}: not a gpuchar results report or nightly.json (expected an "
                           f"object with a 'results' list)")
    for i, r in enumerate(results):
        if not isinstance(r, dict) or not isinstance(r.get("key"), str) or not r["key"] or \
                not isinstance(r.get("arch"), str):
            raise HistoryError(f"{name}: results[{i}] is not a result (expected an object with "
                               f"a 'key' and an 'arch' string)")
    return results


def board_of(r: dict) -> str | None:
    p = r.get("provenance")
    return str(p["uuid"]) if isinstance(p, dict) and p.get("uuid") else None


@dataclass
class BoardRun:
    """One run of one board as the store keeps it: the columns of its runs row, its meta
    (JSON) and its result rows."""
    columns: dict
    meta: dict
    results: list[dict] = field(default_factory=list)


def common_provenance(own: list[dict]) -> dict | None:
    """The provenance most of a board's results carry (one per pytest session)."""
    seen: dict[str, list] = {}
    for r in own:
        p = r.get("provenance")
        if isinstance(p, dict) and p:
            e = seen.setdefault(json.dumps(jsonable(p), sort_keys=True), [0, p])
            e[0] += 1
    return jsonable(max(seen.values(), key=lambda e: e[0])[1]) if seen else None


VOLATILE_META = ("written", "history")   # set after a report is written: not the measurement


def run_hash(board: str | None, meta: dict, results: list[dict]) -> str:
    """The identity of one board's run: its board, the report's meta and the board's results
    (a nightly.json carries its report's meta and results, so the nightly's record and an
    import of its report/gpuchar-results.json are one run, recorded once)."""
    m = {k: v for k, v in meta.items() if k not in VOLATILE_META}
    text = json.dumps(jsonable({"board": board, "meta": m, "results": results}),
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def split(doc: dict, *, source: str, path: str | None = None, nightly_exit: int | None = None,
          name: str = "report") -> list[BoardRun]:
    """The runs of `doc`, one per board (see the module's docstring), in board order."""
    if source not in SOURCES:
        raise HistoryError(f"source {source!r}: one of {', '.join(SOURCES)}")
    results = check_doc(doc, name)
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    nightly = is_nightly(doc)
    if nightly_exit is None and nightly:
        nightly_exit = _int(doc.get("exit"))
    boards = sorted({b for b in map(board_of, results) if b} |
                    {str(g["uuid"]) for g in meta.get("gpus") or []
                     if isinstance(g, dict) and g.get("uuid")})
    if not boards and meta.get("uuid"):
        boards = [str(meta["uuid"])]
    out = []
    for board in boards or [None]:
        mine = [r for r in results if board_of(r) in (board, None)]     # in the doc's order
        own = [r for r in mine if board is not None and board_of(r) == board]
        run_meta = _board_meta(doc, meta, own, board, nightly)
        cols = _columns(doc, run_meta, nightly, nightly_exit)
        cols.update(board=board, source=source, path=path,
                    doc_kind="nightly" if nightly else "results",
                    n_results=len(mine),
                    content_hash=run_hash(board, meta, mine))
        out.append(BoardRun(cols, run_meta, mine))
    return out


def _board_meta(doc: dict, meta: dict, own: list[dict], board: str | None,
                nightly: bool) -> dict:
    """The doc's meta with the board's own device fields (a merged report's meta names one
    GPU), a nightly's changes of this board and the rest of a nightly.json."""
    m = dict(meta)
    prov = common_provenance(own)
    if prov:
        m["provenance"] = prov
        for k in DEVICE_FIELDS:
            if k in prov:
                m[k] = prov[k]
    elif board is None:
        m.pop("uuid", None)
    if nightly:
        changes = doc.get("changes") or []
        m["changes"] = [c for c in changes if not isinstance(c, dict) or
                        (c.get("board") or c.get("uuid") or board) == board]
        m["nightly"] = {k: doc[k] for k in NIGHTLY_PARTS if k in doc}
    return jsonable(m)


def _columns(doc: dict, m: dict, nightly: bool, nightly_exit: int | None) -> dict:
    env = doc.get("environment") if nightly and isinstance(doc.get("environment"), dict) else {}
    before = env.get("before") or {}
    after = env.get("after") or {}
    tools = env.get("toolkit") or {}
    date = (doc.get("date") if nightly else None) or m.get("date")
    try:
        run_date = parse_date(date)
    except HistoryError:
        run_date = None
    dev = (lambda k: m.get(k) if m.get(k) not in (None, "") else before.get(k))
    return {
        "run_date": run_date, "host": _text(m.get("host")),
        "device_index": _int(m.get("device_index")), "device": _text(dev("device")),
        "arch": _text(dev("arch")) or ",".join(m.get("archs") or []) or None,
        "sm_count": _int(dev("sm_count")), "driver": _text(dev("driver")),
        "cuda_driver_api": _text(dev("cuda_driver_api")),
        "cuda_runtime": _text(dev("cuda_runtime")),
        "ptxas": _text(m.get("ptxas") or tools.get("ptxas")),
        "nvdisasm": _text(m.get("nvdisasm") or tools.get("nvdisasm")),
        "suite_version": _text(m.get("suite")),
        "sm_clock_max_mhz": _float(dev("sm_clock_max_mhz")),
        "sm_clock_mhz": _float(dev("sm_clock_measured_mhz")),
        "sm_clock_end_mhz": _float(after.get("sm_clock_measured_mhz")),
        "pytest_exit": _int(doc.get("pytest_exit") if nightly else m.get("exitstatus")),
        "nightly_exit": nightly_exit,
    }


# --- a result <-> its row ------------------------------------------------------------------

STANDARD = ("status", "value", "unit", "spread", "expected", "deviation", "source", "method",
            "test", "detail", "data", "provenance", "allowance", "noise_rel", "noise_source")


def result_row(r: dict, common: dict | None = None) -> dict:
    """The columns of one result's row. The provenance is left out (NULL) when it is the
    run's `common` one (kept once, in the run's meta); what a column cannot hold as given (a
    value that is not a finite number, a field the store has no column for, a field the result
    did not have) goes to `extra`, so that `result_dict(result_row(r, c), c)` gives `r` back."""
    row: dict = {"key": r["key"], "arch": r["arch"]}
    extra: dict = {}
    for k in NUMBERS:
        v = r.get(k)
        row[k] = _float(v)
        if v is not None and (row[k] is None or isinstance(v, bool)):
            row[k] = None
            extra[k] = jsonable(v)
    for k in TEXTS:
        v = r.get(k)
        row[k] = v if v is None or isinstance(v, str) else str(v)
        if v is not None and not isinstance(v, str):
            extra[k] = jsonable(v)
    for k in OBJECTS:
        v = r.get(k)
        row[k] = jsonable(v) if isinstance(v, dict) else None
        if v is not None and not isinstance(v, dict):
            extra[k] = jsonable(v)
    if common and r.get("provenance") == common:
        row["provenance"] = None
    for k, v in r.items():
        if k not in row:
            extra[k] = jsonable(v)
    absent = [k for k in STANDARD if k not in r]
    if absent:
        extra["_absent"] = absent
    row["extra"] = extra or None
    return row


def _restore(v):
    if isinstance(v, str) and v in ("nan", "inf", "-inf"):
        return float(v)
    return v


def result_dict(row, common: dict | None = None) -> dict:
    """A stored row back as a report's result (the keys gpuchar-results.json has); `common`
    is its run's provenance (meta["provenance"])."""
    m = row._mapping if hasattr(row, "_mapping") else row
    r = {"key": m["key"], "arch": m["arch"]}
    for k in STANDARD:
        r[k] = m[k]
    r["data"] = r["data"] if r["data"] is not None else {}
    r["provenance"] = r["provenance"] if r["provenance"] is not None else dict(common or {})
    extra = dict(m["extra"] or {})
    for k in extra.pop("_absent", []):
        r.pop(k, None)
    for k, v in extra.items():
        r[k] = _restore(v) if k in NUMBERS else v
    return r


# --- a figure's rows over time (History.series) ---------------------------------------------

def per_board(rows: list[dict]) -> dict:
    """The rows with a date and a finite value, per board, in date order."""
    per: dict = {}
    for r in rows:
        if r["date"] and r["value"] is not None and math.isfinite(r["value"]):
            per.setdefault(r["board"], []).append(r)
    return per


def driver_changes(rows: list[dict]) -> list[tuple]:
    """(board, date, old driver, new driver) of every run whose driver differs from the
    board's previous run."""
    return [(b, cur["date"], prev["driver"], cur["driver"])
            for b, rs in per_board(rows).items()
            for prev, cur in zip(rs, rs[1:]) if cur["driver"] != prev["driver"]]


def fleet_of(rows: list[dict]) -> dict:
    """One figure across boards from its rows (one model's): per board its latest value,
    number of runs and min/max/median over its runs; across boards (latest values, known
    boards only) the number of boards, min, max, median and spread (max - min, and relative
    to the median). Only judged or measured figures count (FLEET_STATUSES); `left_out` counts
    the others."""
    usable = [r for r in rows if r["status"] in FLEET_STATUSES and r["value"] is not None]
    per: dict = {}
    for r in usable:
        per.setdefault(r["board"], []).append(r)
    boards = []
    for b, rs in sorted(per.items(), key=lambda kv: (kv[0] is None, kv[0] or "")):
        vals = [r["value"] for r in rs]
        boards.append({"board": b, "latest": rs[-1]["value"], "latest_date": rs[-1]["date"],
                       "driver": rs[-1]["driver"], "runs": len({r["run"] for r in rs}),
                       "min": min(vals), "max": max(vals),
                       "median": statistics.median(vals)})
    latest = [b["latest"] for b in boards if b["board"] is not None]
    out = {"unit": usable[-1]["unit"] if usable else None, "boards": boards,
           "left_out": len(rows) - len(usable), "n_boards": len(latest)}
    if latest:
        med = statistics.median(latest)
        out.update(min=min(latest), max=max(latest), median=med,
                   spread=max(latest) - min(latest),
                   spread_rel=(max(latest) - min(latest)) / abs(med) if med else None)
    return out
