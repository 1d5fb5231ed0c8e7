"""The sparse-vs-dense wgmma figures of one report as a table (issue 33 item 2).
Usage: python3 sparse_table.py REPORT_DIR_OR_JSON > sparse.txt

One line per wgmma depth row of the report (the operand-source rows and the sparse rows):
the chain's issue interval (cycles_per_wgmma), the SM cycles per wgmma at the best point
(2*64*N*K / throughput) and which point, the shared-memory operand rate, the completion
latency, the speed-up over the dense row and over no swizzle, and beside them the interval
of docs/hopper.md's two-limit model (tensor core at the documented peak, shared memory at
128 B/clk reading each wgmma's operands once) and the paper's figure where there is one."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from pytest_gpuchar.topics.tensor.wgmma import rows

PREFIX = "tensor.wgmma_depth."
SMEM_B_PER_CLK = 128
COLUMNS = ("row", "src", "N", "swz", "chain", "at best", "best", "B/clk", "compl", "vs dense",
           "vs none", "model", "paper")


def load(path: Path) -> list[dict]:
    """The report's results (a report directory or its gpuchar-results.json)."""
    path = Path(path)
    if path.is_dir():
        path = path / "gpuchar-results.json"
    return json.loads(path.read_text())["results"]


def model_interval(r: rows.DepthRow) -> float:
    """max(tensor core at the documented peak, operand bytes at 128 B/clk/SM)."""
    return max(r.flop / r.peak, r.smem_operand_bytes / SMEM_B_PER_CLK)


def _fmt(v, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{digits}f}"


def _cell(figs: dict, name: str, digits: int = 1) -> str:
    f = figs.get(name)
    if f is None:
        return "-"
    mark = "" if f.get("status") in ("pass", "measured") else f" ({f.get('status')})"
    return _fmt(f.get("value"), digits) + mark


def table(results: list[dict]) -> str:
    by_row: dict[str, dict] = {}
    for res in results:
        key = res.get("key", "")
        if not key.startswith(PREFIX):
            continue
        name, _, fig = key[len(PREFIX):].rpartition(".")
        by_row.setdefault(name, {})[fig] = res
    lines = [" | ".join(COLUMNS), " | ".join("---" for _ in COLUMNS)]
    order = {r.name: i for i, r in enumerate(rows.ROWS)}
    for name in sorted(by_row, key=lambda n: order.get(n, len(order))):
        try:
            r = rows.row(name)
        except KeyError:
            continue
        if not (r.sparse or r.group == "operand_source"):
            continue
        figs = by_row[name]
        thr = figs.get("throughput") or {}
        best = (thr.get("data") or {}).get("best", "-")
        at_best = r.flop / thr["value"] if thr.get("value") else None
        lit = [x.get("figure", "") for f in figs.values() for x in (f.get("literature") or [])
               if "cycles" in x.get("figure", "")]
        lines.append(" | ".join([
            name, r.source, str(r.n), r.swizzle, _cell(figs, "cycles_per_wgmma"),
            _fmt(at_best) + ("" if thr.get("status") in ("pass", "measured", None)
                             else f" ({thr['status']})"), str(best),
            _cell(figs, "smem_operand_rate"),
            _cell(figs, "completion_latency"), _cell(figs, "speedup_vs_dense", 3),
            _cell(figs, "throughput_vs_none", 3), _fmt(model_interval(r)),
            "; ".join(lit) or "-"]))
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.splitlines()[1], file=sys.stderr)
        return 2
    try:
        results = load(Path(argv[1]))
    except (OSError, ValueError, KeyError) as e:
        print(f"sparse_table: cannot read the report {argv[1]}: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
