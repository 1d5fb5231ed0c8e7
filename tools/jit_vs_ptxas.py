"""The driver's JIT against ptxas, offline, from the committed JIT snapshots of the instruction
tables: every probe's snapshot under tests/characterisation/__sass__/jit-driver-<driver>/<arch>/
is compared with the same probe assembled now by a local ptxas, with -c (the mode the driver
compiles PTX in) and without (whole-program), and the per-class summary is printed as the
report prints it (results/jitdiff.py). No GPU needed.

    python tools/jit_vs_ptxas.py [--arch sm_90] [--driver 580.159.04] [--ptxas 13.0]

--ptxas picks the local ptxas by version prefix (the driver's CUDA version: 13.0 for the 580
driver; CUDA_HOME or PATH may hold it); default: the preferred one.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_gpuchar.core import sass, sassdiff, toolchain
from pytest_gpuchar.core.build import default_text
from pytest_gpuchar.results import jitdiff
from pytest_gpuchar.topics.instructions import run

ROOT = Path(__file__).resolve().parents[1]
TESTS = {"latency": "test_table_v_latency", "cpi": "test_table_v_cycles"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--driver", default="580.159.04")
    ap.add_argument("--ptxas", default=None, help="version prefix of the local ptxas")
    args = ap.parse_args(argv)
    snaps = ROOT / "tests/characterisation/__sass__" / f"jit-driver-{args.driver}" / \
        args.arch / "test_table_v_instructions"
    tool = toolchain.find("ptxas", args.arch, args.ptxas)
    probes = [p for p in run.suite_probes(args.arch) if p.name.split("/")[0] in TESTS]
    text = default_text(args.arch, probes)
    listings = {}
    for mode, t in ((jitdiff.RELOCATABLE, toolchain.relocatable(tool)), (jitdiff.WHOLE, tool)):
        funcs = sass.parse(toolchain.disassemble(toolchain.assemble(text, args.arch, tool=t),
                                                 args.arch))
        listings[mode] = {p.name: p.snapshot_text(funcs) for p in probes}
    results = []
    for p in probes:
        kind, row = p.name.split("/", 1)
        path = snaps / f"{TESTS[kind]}[{args.arch}-{row}].sass"
        if not path.exists():
            continue
        jit = path.read_text()
        results.append({"arch": args.arch, "key": f"{kind}.{row}", "data": {
            "ptxas": tool.version, "jit_vs_ptxas": {
                mode: sassdiff.compare(jit, listings[mode][p.name]).as_dict()
                for mode in listings}}})
    if not results:
        print(f"no JIT snapshots under {snaps}", file=sys.stderr)
        return 2
    print(f"<!-- {len(results)} JIT snapshots of driver {args.driver} ({args.arch}) against "
          f"ptxas {tool.version} ({tool.path}) -->")
    print("\n".join(jitdiff.markdown(jitdiff.summary(results))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
