"""Board to board: the same characteristic measured on several GPUs of one run (pytest-xdist,
one worker per GPU, --gpuchar-distribute=replicate), and the GPUs whose figure lies outside
the fleet's spread - a fleet's first question is "is one of my GPUs off?". Pure."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

NOISE_ABS = {"cycles": 0.5, "cycles/op": 0.5, "ratio": 0.01}
NOISE_REL = 0.01


def board(r) -> str:
    """A GPU's label in a result: index and UUID (or name) from its provenance."""
    p = r.provenance or {}
    uuid = str(p.get("uuid") or "")
    return f"GPU {p.get('device_index', '?')} {uuid[:12] or p.get('device', '')}".strip()


@dataclass
class Row:
    key: str
    arch: str
    unit: str
    values: dict[str, float] = field(default_factory=dict)     # board -> value
    spreads: dict[str, float] = field(default_factory=dict)
    median: float = 0.0
    flagged: dict[str, str] = field(default_factory=dict)      # board -> why


def compare(results) -> list[Row]:
    """Every characteristic measured (stable, finite) on two or more boards."""
    rows: dict[tuple[str, str], Row] = {}
    for r in results:
        if r.value is None or r.status.value not in ("pass", "fail", "measured"):
            continue
        row = rows.setdefault((r.arch, r.key), Row(r.key, r.arch, r.unit))
        b = board(r)
        row.values[b] = float(r.value)
        row.spreads[b] = float(r.spread or 0.0)
    out = []
    for row in rows.values():
        if len(row.values) < 2:
            continue
        vals = list(row.values.values())
        row.median = statistics.median(vals)
        # the fleet's own spread (3 MADs) needs three boards: of two, each sits half their
        # difference from the median and 3 MADs would never flag either
        mad = statistics.median(abs(v - row.median) for v in vals) if len(vals) > 2 else 0.0
        for b, v in row.values.items():
            allow = max(NOISE_REL * abs(row.median), NOISE_ABS.get(row.unit, 0.0),
                        2 * row.spreads[b], 3 * mad)
            if abs(v - row.median) > allow:
                row.flagged[b] = (f"{v:.4g} against the fleet's median {row.median:.4g} "
                                  f"(more than {allow:.3g} {row.unit} off)")
        out.append(row)
    return sorted(out, key=lambda r: (not r.flagged, r.arch, r.key))


def markdown(rows: list[Row]) -> list[str]:
    if not rows:
        return []
    boards = sorted({b for r in rows for b in r.values})
    out = ["## Board to board", "",
           f"{len(rows)} characteristics measured on {len(boards)} GPUs; "
           f"{sum(bool(r.flagged) for r in rows)} with a GPU outside the fleet's spread.", "",
           "| arch | characteristic | unit | " + " | ".join(boards) + " | median | flagged |",
           "|---" * (len(boards) + 5) + "|"]
    for r in rows:
        cells = " | ".join(f"{r.values[b]:.4g}" if b in r.values else "" for b in boards)
        out.append(f"| {r.arch} | {r.key} | {r.unit} | {cells} | {r.median:.4g} | "
                   f"{'; '.join(f'{b}: {w}' for b, w in r.flagged.items())} |")
    return out + [""]
