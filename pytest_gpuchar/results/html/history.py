"""The history as pages (``gpuchar-history html --db TARGET -o DIR``), in the asv manner: a
static site with one page per characteristic.

DIR/index.html: per model, the board-by-board table (UUID, runs, first and last run, drivers,
the latest run's pytest and nightly exits) and the list of its characteristics (unit, boards,
results, the median of the boards' latest values and their spread, what was not judged), each
linking to its page. DIR/keys/<key>.html: per model, the value over run dates, one line per
board (its colour the same on every page), each change of a board's driver marked, points that
were not judged or measured (unstable, invalid) hollow; below it the table of the values.

Everything is read from the store in one query (History.figures) and the plots are drawn by
svg.timeline (a thousand matplotlib figures would take minutes). The site is written into a
new directory that then replaces DIR whole (core/atomic.replacing_dir): a render that fails
leaves the old pages as they were.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..history_rows import (FLEET_STATUSES, UNKNOWN_BOARD, HistoryError, driver_changes,
                            fleet_of, per_board, slug)
from . import svg, write
from .env import num, render

INDEX = "index.html"
KEYS = "keys"
NO_GPU = "no GPU"            # the model of runs that recorded no device
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class Site:
    """What write_history wrote: the directory, its pages, characteristics, models, bytes."""
    directory: Path
    pages: int = 0
    keys: int = 0
    models: list[str] = field(default_factory=list)
    bytes: int = 0


def short(board: str | None) -> str:
    """A board as the legends name it: its UUID's first 12 characters (GPU-fa334b31)."""
    return board[:12] if board else UNKNOWN_BOARD


def page_names(keys) -> dict[str, str]:
    """Each key's page file name (keys/<name>.html): the key where it is safe as a file name
    on any system, else its safe characters and a hash of the key; never two alike, even
    where case does not count."""
    out, taken = {}, set()
    for key in keys:
        name = _UNSAFE.sub("_", key).strip(".") or "key"
        if name != key or name.lower() in taken:
            name = f"{name[:80]}-{hashlib.sha1(key.encode()).hexdigest()[:10]}"
        taken.add(name.lower())
        out[key] = f"{name}.html"
    return out


def _date(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def _model(device) -> str:
    return device or NO_GPU


def _board_rows(boards: list[dict], model: str) -> list[dict]:
    """The board table of one model, each board with its line's style index."""
    mine = [b for b in boards if _model(b["device"]) == model]
    out = []
    for k, b in enumerate(mine):
        colour, dash = svg.style(k)
        out.append(dict(b, label=b["board"] or UNKNOWN_BOARD, short=short(b["board"]),
                        colour=colour, dash=dash, index=k))
    return out


def _summary(key: str, rows: list[dict], href: str) -> dict:
    """A characteristic's row of the index (one model's rows of it)."""
    f = fleet_of(rows)
    return {"key": key, "href": href, "unit": next((r["unit"] for r in rows if r["unit"]), ""),
            "boards": len({r["board"] for r in rows}), "results": len(rows),
            "median": f.get("median"), "spread_rel": f.get("spread_rel"),
            "left_out": f["left_out"], "changes": len(driver_changes(rows))}


def _points(rs: list[dict], unit: str) -> list[svg.Point]:
    return [svg.Point(_date(r["date"]), r["value"], r["spread"],
                      r["status"] in FLEET_STATUSES,
                      f"{short(r['board'])} {r['date'][:16].replace('T', ' ')}: "
                      f"{num(r['value'])} {unit} ({r['status']}, driver {r['driver'] or '-'}, "
                      f"run {r['run']})")
            for r in rs]


def _model_part(key: str, model: str, rows: list[dict], board_rows: list[dict]) -> dict:
    """One model's part of a characteristic's page: its plot, legend, driver changes, table."""
    unit = next((r["unit"] for r in rows if r["unit"]), "")
    style = {b["board"]: b for b in board_rows}
    per = per_board(rows)
    series = {(b or UNKNOWN_BOARD): (style[b]["index"], _points(rs, unit))
              for b, rs in sorted(per.items(), key=lambda kv: style[kv[0]]["index"])}
    changes = [{"board": b, "short": short(b), "date": d, "old": old, "new": new}
               for b, d, old, new in driver_changes(rows)]
    marks = [(c["board"] or UNKNOWN_BOARD, _date(c["date"]), f"driver {c['new']}",
              f"{c['short']}: driver {c['old']} -> {c['new']} at {c['date']}")
             for c in changes]
    plot = svg.timeline(series, marks, ylabel=unit or "value") if series else None
    archs = sorted({r["arch"] for r in rows if r["value"] is not None})
    legend = [dict(style[b], n=len(rs)) for b, rs in per.items()]
    legend.sort(key=lambda b: b["index"])
    return {"name": model, "id": slug(model), "unit": unit, "plot": plot, "legend": legend,
            "changes": changes, "archs": archs, "fleet": fleet_of(rows),
            "rows": [dict(r, short=short(r["board"]), label=r["board"] or UNKNOWN_BOARD)
                     for r in rows]}


def collect(h, *, model: str | None = None, arch: str | None = None,
            keys: list[str] | None = None) -> tuple[list[dict], list[dict], dict]:
    """(rows of History.figures, boards, filters) of what the pages show; HistoryError naming
    an unknown model or key, or when nothing matches."""
    name = h.resolve_model(model) if model else None
    for k in keys or []:
        h.check_key(k)
    rows = h.figures(list(dict.fromkeys(keys)) if keys else None, model=name, arch=arch)
    filters = {"model": name, "arch": arch, "keys": list(keys or [])}
    if not rows:
        asked = ", ".join(f"{k} {v}" for k, v in (("model", name), ("arch", arch)) if v)
        raise HistoryError(f"{h.name}: no result" + (f" of {asked}" if asked else "")
                           + " to show")
    return rows, h.boards(model=name), filters


def pages(rows: list[dict], boards: list[dict], *, db: str, filters: dict):
    """(relative path, HTML text) of every page: the index first, then one per key."""
    by_key: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by_key[r["key"]][_model(r["device"])].append(r)
    models = sorted({m for per in by_key.values() for m in per}, key=lambda m: (m == NO_GPU, m))
    tables = {m: _board_rows(boards, m) for m in models}
    names = page_names(sorted(by_key))
    dates = sorted(r["date"] for r in rows if r["date"])
    index = [{"name": m, "id": slug(m), "boards": tables[m],
              "keys": [_summary(k, per[m], f"{KEYS}/{names[k]}#{slug(m)}")
                       for k, per in sorted(by_key.items()) if m in per]} for m in models]
    n_runs = len({r["run"] for r in rows})
    yield INDEX, render("history_index.html.j2", title=f"gpuchar history: {db}", db=db,
                        models=index, filters=filters, n_runs=n_runs,
                        n_keys=len(by_key), first=dates[0] if dates else None,
                        last=dates[-1] if dates else None)
    for key in sorted(by_key):
        parts = [_model_part(key, m, by_key[key][m], tables[m]) for m in models
                 if m in by_key[key]]
        yield f"{KEYS}/{names[key]}", render("history_key.html.j2", title=key, key=key,
                                             db=db, parts=parts, index=f"../{INDEX}")


def check_out(out: Path, name: str) -> None:
    """HistoryError unless `out` may become the site: a new or empty directory, or one that
    holds only what this writes (index.html, keys/), which is replaced whole."""
    if out.exists() and not out.is_dir():
        raise HistoryError(f"{name}: is a file, not a directory")
    if out.is_dir():
        other = sorted(p.name for p in out.iterdir() if p.name not in (INDEX, KEYS))
        if other:
            raise HistoryError(f"{name}: holds files gpuchar-history html did not write ("
                               f"{', '.join(other[:3])}{', ...' if len(other) > 3 else ''}); "
                               f"give a new or empty directory")


def write_history(h, out: Path, *, model: str | None = None, arch: str | None = None,
                  keys: list[str] | None = None, name: str | None = None) -> Site:
    """Render the pages of history `h` into directory `out` (replaced whole; see check_out).
    `name` names `out` in errors (the command line's option)."""
    from ...core.atomic import replacing_dir
    out = Path(out)
    name = name or str(out)
    check_out(out, name)
    rows, boards, filters = collect(h, model=model, arch=arch, keys=keys)
    site = Site(out, models=sorted({_model(r["device"]) for r in rows}))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with replacing_dir(out) as tmp:
            (tmp / KEYS).mkdir()
            for rel, text in pages(rows, boards, db=h.name, filters=filters):
                site.bytes += write(tmp / rel, text).stat().st_size
                site.pages += 1
    except OSError as e:
        raise HistoryError(f"{name}: cannot write: {e.strerror or e}") from None
    site.keys = site.pages - 1
    return site
