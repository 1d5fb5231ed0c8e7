"""One line per GPU of a multi-GPU report (results per board and status, duplicates) and the
board-to-board summary. Usage: python3 report_boards.py gpuchar-results.json"""
import sys
from collections import Counter
from pathlib import Path

from pytest_gpuchar.results import fleet
from pytest_gpuchar.results.files import ResultsError, read_results
from pytest_gpuchar.results.judge import Result

try:
    raw = read_results(Path(sys.argv[1]))
except ResultsError as e:
    sys.exit(f"  no report: {e}")
results = [Result(**r) for r in raw]
per = Counter((fleet.board(r), r.status.value) for r in results)
seen = Counter((fleet.board(r), r.arch, r.key) for r in results)
for b in sorted({b for b, _ in per}):
    counts = ", ".join(f"{s} {n}" for (bb, s), n in sorted(per.items()) if bb == b)
    print(f"  {b}: {sum(n for (bb, _), n in per.items() if bb == b)} results ({counts})")
print(f"  keys reported more than once for one GPU: {sum(n > 1 for n in seen.values())}")
rows = fleet.compare(results)
off = [r for r in rows if r.flagged]
print(f"  board to board: {len(rows)} characteristics on 2+ GPUs, {len(off)} flagged")
for r in off[:8]:
    print(f"    {r.key}: " + "; ".join(r.flagged.values()))
