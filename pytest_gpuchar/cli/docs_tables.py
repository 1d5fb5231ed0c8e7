"""The tables of docs/ that quote measured figures, generated from the committed runs
(results/<arch>/<board>/*-results.json.gz), never typed: each sits in a marked block
(results/docblocks.py) that this program rewrites, and a unit test fails when a block differs
from what the committed runs give (tests/unit/cli/test_docs_tables.py).

    python -m pytest_gpuchar.cli.docs_tables            # check: exit 1 naming drifted blocks
    python -m pytest_gpuchar.cli.docs_tables --write    # rewrite them

Blocks: docs/tensor.md `tensor-mma` and `tensor-wgmma` (both boards' night 2),
docs/movement.md `movement-boards` (the data-movement figures of both boards' nights),
docs/models.md `bsp-hopper` (Many-BSP measured against predicted) and `accel-sim-example` (the
Accel-Sim options of the H100's night 2, written by models/accelsim.py through
gpuchar-model-params, comments dropped)."""
from __future__ import annotations

import argparse
import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..results import docblocks
from ..results.files import ResultsError, read_report

ROOT = Path(__file__).resolve().parent.parent.parent
COMMAND = "python -m pytest_gpuchar.cli.docs_tables --write"


@dataclass(frozen=True)
class Run:
    label: str
    path: str           # relative to the project root

    def report(self, root: Path) -> dict:
        path = root / self.path
        return _read(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _read(path: str, mtime_ns: int) -> dict:
    """A result file, read once per content (the blocks share the nights)."""
    return read_report(Path(path))


H200 = "results/sm_90/nvidia-h200"
H100 = "results/sm_90/nvidia-h100-80gb-hbm3"
NIGHTS = (Run("H200 n1", f"{H200}/run1-results.json.gz"),
          Run("H200 n2", f"{H200}/gpuchar-results.json.gz"),
          Run("H100 n1", f"{H100}/run1-results.json.gz"),
          Run("H100 n2", f"{H100}/gpuchar-results.json.gz"))


def _by_key(report: dict) -> dict[str, dict]:
    return {r["key"]: r for r in report.get("results", []) if r.get("arch") == "sm_90"}


def _board(report: dict) -> str:
    meta = report.get("meta", {})
    uuid = str(meta.get("uuid") or next((g.get("uuid") for g in meta.get("gpus", [])), ""))
    return f"{meta.get('device', '?')} {uuid[:12]}, {str(meta.get('date', ''))[:10]}"


def _caption(root: Path, runs) -> str:
    return "; ".join(f"{r.label}: `{r.path}` ({_board(r.report(root))})" for r in runs)


# --- docs/movement.md ---------------------------------------------------------------------

def _fig(res: dict[str, dict], key: str, fmt: str = "{:.1f}") -> str:
    r = res.get(key)
    if r is None or r.get("value") is None:
        return "-"
    text = fmt.format(r["value"])
    return text + (" u" if r.get("status") == "unstable" else "")


def _join(res, keys, fmt="{:.1f}") -> str:
    return " / ".join(_fig(res, k, fmt) for k in keys)


M = "movement."
MOVEMENT_ROWS: tuple[tuple[str, Callable[[dict], str]], ...] = (
    ("DSM remote, `generic` c2 / c4 / c8 / c16 (cycles)", lambda r: _join(
        r, [f"{M}dsm.latency.generic.c{c}.remote" for c in (2, 4, 8, 16)])),
    ("DSM local, `generic` c2 / c16 (cycles)", lambda r: _join(
        r, [f"{M}dsm.latency.generic.c{c}.local" for c in (2, 16)])),
    ("DSM remote, `u32` c2 / c4 / c8 (cycles)", lambda r: _join(
        r, [f"{M}dsm.latency.u32.c{c}.remote" for c in (2, 4, 8)])),
    ("DSM bandwidth c2 / c8 (B/clk/SM)", lambda r: _join(
        r, [f"{M}dsm.bandwidth.c{c}" for c in (2, 8)], "{:.2f}")),
    ("cluster barrier c2 / c4 / c8; relaxed (cycles)", lambda r: _join(
        r, [f"{M}cluster.barrier.c{c}" for c in (2, 4, 8)], "{:.0f}") + "; relaxed " + _join(
        r, [f"{M}cluster.barrier_relaxed.c{c}" for c in (2, 4, 8)], "{:.0f}")),
    ("cluster launch c2 / c8 vs plain block (cycles)", lambda r: _join(
        r, [f"{M}cluster.launch.c{c}" for c in (2, 8)], "{:.0f}") + " vs " + _fig(
        r, f"{M}cluster.launch.plain", "{:.0f}")),
    ("TMA bulk latency L2 / DRAM (cycles)", lambda r: _join(
        r, [f"{M}tma.latency.bulk.{m}" for m in ("l2", "dram")], "{:.0f}")),
    ("plain load of the same bytes, L2 / DRAM (cycles)", lambda r: _join(
        r, [f"{M}tma.latency.plain.{m}" for m in ("l2", "dram")], "{:.0f}")),
    ("TMA knee L2 / DRAM (bytes)", lambda r: _join(
        r, [f"{M}tma.bandwidth.{m}.knee_bytes" for m in ("l2", "dram")], "{:.0f}")),
    ("multicast c2 / c4 vs separate copies (cycles per round)", lambda r: _join(
        r, [f"{M}tma.multicast.c{c}" for c in (2, 4)], "{:.0f}") + " vs " + _join(
        r, [f"{M}tma.separate.c{c}" for c in (2, 4)], "{:.0f}")),
    ("shared memory u32 / u64 / u128 (B/clk/SM)", lambda r: _join(
        r, [f"{M}bandwidth.shared_u{w}.per_sm" for w in (32, 64, 128)])),
    ("device memory read / write / copy, of the datasheet peak", lambda r: _join(
        r, [f"{M}bandwidth.dram_{k}.of_peak" for k in ("read", "write", "copy")], "{:.3f}")),
    ("device memory read / write / copy, whole GPU", lambda r: " / ".join(
        _fig(r, f"{M}bandwidth.dram_{k}.gpu", "{:.0f}") for k in ("read", "write", "copy"))
        + " " + (r.get(f"{M}bandwidth.dram_read.gpu") or {}).get("unit", "")),
)


def movement_boards(root: Path) -> str:
    reports = [_by_key(n.report(root)) for n in NIGHTS]
    out = ["| figure | " + " | ".join(n.label for n in NIGHTS) + " |",
           "|---|" + "---|" * len(NIGHTS)]
    for label, cell in MOVEMENT_ROWS:
        out.append(f"| {label} | " + " | ".join(cell(r) for r in reports) + " |")
    out += ["", "Cycles at the SM clock; \"u\": the run reported the figure unstable (its "
            "spread over the limit), the value is shown as read. " + _caption(root, NIGHTS)
            + "."]
    return "\n".join(out)


# --- docs/models.md -----------------------------------------------------------------------

def _size(kernel: str, size: str) -> str:
    if kernel == "knn":
        n = int(size)
        return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else f"{n:,}"
    dims = size.split("x")
    if len(dims) == 3 and len(set(dims)) == 1:
        return f"{dims[0]}^3"
    return " x ".join(dims)


def bsp_hopper(root: Path) -> str:
    """The Many-BSP results table of both boards' night 2: models/manybsp_runs.py's own table
    (the prediction re-run on the run's recorded inputs, the parameters taken from files)."""
    from ..models import manybsp_runs
    runs = (NIGHTS[3], NIGHTS[1])          # night 2 of the H100, of the H200
    table = manybsp_runs.results_table({r.label[:4]: manybsp_runs.rows(r.report(root))
                                        for r in runs})
    return table + "\n" + _caption(root, runs) + (
        ". Error: eq. (27), signed (predicted - measured) / measured. \"L2-resident\": the "
        "same prediction with mem_lat = the L2 hit latency (`predicted_cycles_l2_resident`). "
        "\"From files\": the parameters this prediction took from the expectation files; all "
        "others came from the same run.")


def _options(text: str) -> list[str]:
    return [line.split("  #")[0].rstrip() for line in text.splitlines()
            if line.startswith("-")]


def accel_sim_example(root: Path) -> str:
    """The options gpuchar-model-params substitutes into the base for the H100's night 2,
    comments dropped: the package's writer, so a change of it shows here."""
    from .model_params import render
    run = NIGHTS[3]
    report = run.report(root)
    return "\n".join(["```", *_options(render(report, "sm_90", "accel-sim-fragment")),
                      "```", "", f"{run.label}: `{run.path}` ({_board(report)}); "
                      f"`gpuchar-model-params --results {run.path} --arch sm_90 --format "
                      f"accel-sim-fragment`, comments omitted (`--format accel-sim` writes "
                      f"them into the whole config)."])


# --- docs/tensor.md ------------------------------------------------------------------------

MMA_ROWS = tuple(f"mma.{r}" for r in (
    "f16.f32.m16n8k16", "f16.f16.m16n8k16", "bf16.f32.m16n8k16", "f16.f32.m16n8k8",
    "f16.f16.m16n8k8", "bf16.f32.m16n8k8", "tf32.f32.m16n8k8", "tf32.f32.m16n8k4",
    "s8.s32.m16n8k32", "s8.s32.m16n8k16", "s8.s32.m8n8k16", "f64.f64.m8n8k4",
    "f64.f64.m16n8k4", "f64.f64.m16n8k8", "f64.f64.m16n8k16")) + tuple(
    f"mma_sp.{r}" for r in (
        "f16.f32.m16n8k32", "f16.f16.m16n8k32", "f16.f32.m16n8k16", "f16.f16.m16n8k16",
        "s8.s32.m16n8k64", "s8.s32.m16n8k32", "tf32.f32.m16n8k16", "tf32.f32.m16n8k8")) + (
    "ldmatrix.x1", "ldmatrix.x2", "ldmatrix.x4")
WGMMA_ROWS = ("f16.f32.m64n8k16.ss", "f16.f32.m64n16k16.ss", "f16.f32.m64n32k16.ss",
              "f16.f32.m64n64k16.ss", "f16.f32.m64n128k16.ss", "f16.f32.m64n128k16.rs",
              "bf16.f32.m64n128k16.rs", "f16.f32.m64n256k16.ss", "f16.f32.m64n256k16.rs",
              "bf16.f32.m64n256k16.ss", "tf32.f32.m64n256k8.ss", "e4m3.f32.m64n256k32.ss",
              "e5m2.f32.m64n256k32.ss", "s8.s32.m64n256k32.ss")


def _latency(v: float) -> str:
    return f"{v:.0f}" if abs(v - round(v)) < 0.005 else f"{v:.2f}"


def _pair(reports, key: str, fmt) -> str:
    """The figure on each board, "H200 / H100"."""
    out = []
    for res in reports:
        r = res.get(key)
        if r is None or r.get("value") is None:
            out.append("-")
            continue
        text = fmt(r["value"]) if callable(fmt) else fmt.format(r["value"])
        out.append(text + (" u" if r.get("status") == "unstable" else ""))
    return " / ".join(out)


def _tensor_runs(root: Path):
    runs = (NIGHTS[1], NIGHTS[3])          # night 2 of the H200, of the H100
    return runs, [_by_key(r.report(root)) for r in runs]


def tensor_mma(root: Path) -> str:
    runs, reports = _tensor_runs(root)
    out = ["| row | completion latency | throughput_w4 | throughput_w8 | throughput_peak |",
           "|---|---|---|---|---|"]
    for row in MMA_ROWS:
        instr, rest = row.split(".", 1)
        label = f"`{instr}` {rest}" + (" (B/clk/SM)" if instr == "ldmatrix" else "")
        k = f"tensor.{row}."
        out.append(f"| {label} | {_pair(reports, k + 'completion_latency', _latency)} | "
                   + " | ".join(_pair(reports, k + f, "{:.1f}") for f in
                                ("throughput_w4", "throughput_w8", "throughput_peak")) + " |")
    out += ["", "Each cell: " + " / ".join(r.label for r in runs) + "; \"u\": unstable. "
            + _caption(root, runs) + "."]
    return "\n".join(out)


def tensor_wgmma(root: Path) -> str:
    runs, reports = _tensor_runs(root)
    out = ["| wgmma | completion latency | cycles per wgmma | throughput (FLOP/clk/SM) | "
           "achieved/peak |", "|---|---|---|---|---|"]
    for row in WGMMA_ROWS:
        k = f"tensor.wgmma.{row}."
        out.append(f"| {row} | " + " | ".join(_pair(reports, k + f, fmt) for f, fmt in (
            ("completion_latency", "{:.2f}"), ("cycles_per_wgmma", "{:.2f}"),
            ("throughput", "{:.1f}"), ("achieved_peak", "{:.3f}"))) + " |")
    out += ["", "Each cell: " + " / ".join(r.label for r in runs) + "; \"u\": unstable. The "
            "throughput is the best stable point over warpgroups x ILP (its point is in the "
            "result's data). " + _caption(root, runs) + "."]
    return "\n".join(out)


BLOCKS: dict[str, dict[str, Callable[[Path], str]]] = {
    "docs/tensor.md": {"tensor-mma": tensor_mma, "tensor-wgmma": tensor_wgmma},
    "docs/movement.md": {"movement-boards": movement_boards},
    "docs/models.md": {"bsp-hopper": bsp_hopper, "accel-sim-example": accel_sim_example},
}


def bodies(root: Path = ROOT) -> dict[str, dict[str, str]]:
    """doc -> block -> the body the committed runs give."""
    return {doc: {name: make(root) for name, make in blocks.items()}
            for doc, blocks in BLOCKS.items()}


def drifted(root: Path = ROOT) -> list[str]:
    """'doc: block' for every block that differs from the committed runs."""
    out = []
    for doc, want in bodies(root).items():
        path = root / doc
        out += [f"{doc}: {name}" for name in docblocks.drift(path.read_text(), want, path)]
    return out


def write(root: Path = ROOT) -> list[str]:
    from ..results.expectations import atomic_write
    done = []
    for doc, want in bodies(root).items():
        path = root / doc
        text = old = path.read_text()
        for name, body in want.items():
            text = docblocks.replace(text, name, body, path)
        if text != old:
            atomic_write(path, text)
            done.append(doc)
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_gpuchar.cli.docs_tables",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the drifted blocks")
    ap.add_argument("--root", type=Path, default=ROOT, help="the project (default: this one)")
    args = ap.parse_args(argv)
    try:
        if args.write:
            done = write(args.root)
            print("rewrote " + ", ".join(done) if done else "docs agree with the committed runs")
            return 0
        off = drifted(args.root)
    except (ResultsError, docblocks.BlockError, OSError) as e:
        print(e, file=sys.stderr)
        return 2
    for d in off:
        print(f"differs from the committed runs: {d}")
    if off:
        print(f"fix: {COMMAND}")
    return 1 if off else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
