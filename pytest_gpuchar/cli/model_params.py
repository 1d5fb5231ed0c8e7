"""gpuchar-model-params: export what a gpuchar JSON report measured of one arch in the form a
performance model or simulator reads: the Many-BSP parameters (seed 002, Table 1-8: launch
overheads, bar.sync, issue cycle, memory latency, per-unit throughput) as YAML (the default),
or an Accel-Sim configuration (``--format accel-sim``: a whole gpgpusim.config, the shipped
SM90_H100 base with the run's options substituted, models/accelsim_config.py;
``accel-sim-fragment``: only the options the run determines, models/accelsim.py). Accel-Sim's
SASS trace mode is not exported: the Accel-Sim the base belongs to (accel-sim-framework
c4d00b5) has no Hopper opcode map and stops on sm_90 traces (docs/models.md)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core import archs
from ..models import accelsim, accelsim_config
from ..results import baselines
from ..results.expectations import ExpectationError, Store
from ..results.files import ResultsError, read_report
from .output import emit, interruptible
from ..topics.bsp.params import FU_PREFIX, MODEL_KEYS
from ..topics.bsp.params import model_parameters as _model_parameters
from ..topics.throughput.rows import SCHEDULERS_PER_SM

__all__ = ["FORMATS", "FU_PREFIX", "MODEL_KEYS", "main", "model_parameters", "no_figure",
           "render", "declaration", "warnings"]

FORMATS = ("yaml", "accel-sim", "accel-sim-fragment")


def model_parameters(report: dict, arch: str) -> dict:
    """The Many-BSP Table 1-8 parameters of `arch` in `report` (topics/bsp/params.py), with
    the throughput tables' scheduler count per SM."""
    return _model_parameters(report, arch, n_ws=SCHEDULERS_PER_SM)


def render(report: dict, arch: str, fmt: str = "yaml", expectations=None,
           declared=None) -> str:
    """The export of `arch` from `report` in format `fmt` (one of FORMATS). For a baseline
    that cannot be re-measured (`declared`: its superseded.yaml, results/baselines.py) and
    `expectations` (the arch's ArchExpectations), a figure the report stored as passed that
    today's file refuses is exported as the file's figure, and rows of probes since declared
    unmeasurable are left out; the output says which."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    fresh = baselines.refreshed(report, expectations, declared)
    report, notes = fresh.report, fresh.notes()
    params = model_parameters(report, arch)
    if fmt == "yaml":
        import yaml
        if notes:
            params["superseded"] = notes
        return yaml.safe_dump(params, sort_keys=False, width=100)
    results, meta = report.get("results", []), report.get("meta", {})
    make = accelsim_config.whole if fmt == "accel-sim" else accelsim.fragment
    text = make(params, results, meta)
    if notes:
        head = ["# figures of the results file that today's expectation files contradict "
                "(a baseline older than the files):"] + [f"#   {n}" for n in notes]
        text = "\n".join(head) + "\n" + text
    return text


def declaration(results: Path):
    """The superseded.yaml beside a results file (None when there is none)."""
    return baselines.read_sidecar(Path(results).parent / baselines.SIDECAR)


def warnings(report: dict, expectations, declared) -> list[str]:
    """One line per figure the export takes from the expectation files in place of `report`
    (declared baseline), or per figure today's files refuse that the export still takes as
    measured (a run that can be repeated: regenerate it)."""
    if declared is not None:
        return baselines.refreshed(report, expectations, declared).notes()
    if expectations is None:
        return []
    return [f"{s.key}: {s.measured:g} disagrees with today's expectation {s.expected} at "
            f"{baselines.short(s.origin)}; exported as measured (re-run the board, or declare "
            f"the baseline in {baselines.SIDECAR} beside it if it cannot be re-measured)"
            for s in baselines.stale(report, expectations)]


def no_figure(report: dict, arch: str, path: Path) -> str:
    """Why `report` gives `arch` no export ("" when it holds a figure of it): an export of
    an arch the run did not measure would be a configuration of nothing but "not measured"
    under another board's name."""
    measured = sorted({r.get("arch", "?") for r in report.get("results", [])
                       if isinstance(r.get("value"), (int, float))
                       and not isinstance(r.get("value"), bool)})
    if arch in measured:
        return ""
    if measured:
        which = "it" if len(measured) == 1 else "one of those"
        return (f"{path} holds no {arch} figure (it measured {', '.join(measured)}): export "
                f"{which} with --arch {measured[0]}, or give the report of a run on an {arch} "
                f"GPU")
    return (f"{path} holds no measured figure at all (a run without a GPU measures nothing): "
            f"give the report of a run on an {arch} GPU")


@interruptible("gpuchar-model-params")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="gpuchar-model-params",
        description="Export what a gpuchar JSON report measured of one arch for a performance "
                    "model or simulator: the Many-BSP parameters (Table 1-8: launch overheads, "
                    "bar.sync, issue cycle, memory latency, per-unit throughput) as YAML, or "
                    "the Accel-Sim configuration options the run determines.")
    ap.add_argument("--results", required=True, type=Path, help="gpuchar-results.json")
    ap.add_argument("--arch", required=True)
    ap.add_argument("--format", dest="fmt", choices=FORMATS, default="yaml",
                    help="yaml: Many-BSP parameters (default); accel-sim: a whole "
                         "gpgpusim.config (SM90_H100 with the run's options substituted); "
                         "accel-sim-fragment: only the options the run determines")
    ap.add_argument("-o", "--output", type=Path, help="output file (default: stdout)")
    ap.add_argument("--expectations", type=Path, default=None,
                    help="expectation files a figure is re-judged against (default: "
                         "./expectations, else the shipped ones): a figure the file refuses "
                         "is exported as the file's, and the output says so")
    args = ap.parse_args(argv)
    try:
        arch = archs.validate(args.arch)
    except archs.UnknownArch as e:
        print(f"gpuchar-model-params: --arch: {e}", file=sys.stderr)
        return 2
    try:
        report = read_report(args.results)
    except ResultsError as e:
        print(f"gpuchar-model-params: {e}", file=sys.stderr)
        return 2
    why = no_figure(report, arch, args.results)
    if why:
        print(f"gpuchar-model-params: {why}", file=sys.stderr)
        return 2
    try:
        exp = Store(args.expectations).load(arch)
        declared = declaration(args.results)
    except (ExpectationError, baselines.SidecarError) as e:
        print(f"gpuchar-model-params: {e}", file=sys.stderr)
        return 2
    text = render(report, arch, args.fmt, exp, declared)
    if not emit("gpuchar-model-params", "-o", args.output, text):
        return 2
    if args.output:
        print(f"wrote {args.output}")
    for n in warnings(report, exp, declared):   # after the export: an error stays one line
        print(f"gpuchar-model-params: {args.results}: {n}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
