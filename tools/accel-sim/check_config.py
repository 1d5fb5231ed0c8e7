#!/usr/bin/env python3
"""Feed Accel-Sim's real SM90_H100 configuration, followed by the fragments gpuchar-model-params
writes from a results file, to gpgpu-sim's own option parser, and report what it read.

The parser (src/option_parser.cc) is compiled from a gpgpu-sim source tree (a clone or a bare
git directory of accel-sim/gpgpu-sim_distribution) together with driver.cc, which registers
every option gpgpu-sim registers (extract_options.py reads them from the same source, and the
trace options from accel-sim/accel-sim-framework when given) and parses the files in turn as
"-config FILE" arguments, as Accel-Sim's command line does. See README.md.

Exit status: 0 when every option the fragments write was read with every value gpgpu-sim's
readers take, reads back as written, and every instruction class enters its pipeline inside
it; 1 when one is not; 2 when the harness cannot run (no compiler, no source).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import extract_options  # noqa: E402

from pytest_gpuchar.models import accelsim_rules as rules  # noqa: E402

REF = "h100-test"     # the branch that holds SM90_H100's gpgpusim.config and trace.config
GPGPUSIM_CONFIG = "configs/tested-cfgs/SM90_H100/gpgpusim.config"
TRACE_CONFIG = "gpu-simulator/configs/tested-cfgs/SM90_H100/trace.config"
DEFAULT_RESULTS = ROOT / "results/sm_90/nvidia-h100-80gb-hbm3/gpuchar-results.json.gz"


class HarnessError(Exception):
    """The harness cannot run here (exit 2)."""


@dataclass
class Source:
    """A repository to read files from: a work tree, or a git directory at ``ref``."""
    path: Path
    ref: str = REF

    def _git(self) -> list[str] | None:
        if (self.path / ".git").exists():
            return ["git", "-C", str(self.path)]
        if (self.path / "HEAD").exists() and (self.path / "objects").is_dir():
            return ["git", "--git-dir", str(self.path)]
        return None

    def revision(self) -> str:
        git = self._git()
        if git is None:
            return "work tree"
        for ref in (self.ref, f"origin/{self.ref}"):
            r = subprocess.run([*git, "rev-parse", "--short", ref], capture_output=True,
                               text=True)
            if r.returncode == 0:
                return f"{ref} {r.stdout.strip()}"
        raise HarnessError(f"{self.path}: no branch {self.ref!r} (nor origin/{self.ref})")

    def read(self, path: str) -> str:
        git = self._git()
        if git is None:
            f = self.path / path
            if not f.exists():
                raise HarnessError(f"{f} not found")
            return f.read_text()
        for ref in (self.ref, f"origin/{self.ref}"):
            r = subprocess.run([*git, "show", f"{ref}:{path}"], capture_output=True, text=True)
            if r.returncode == 0:
                return r.stdout
        raise HarnessError(f"{self.path}: {path} not at {self.ref}")

    def grep(self, word: str, *paths: str) -> list[str]:
        git = self._git()
        if git is None:
            return sorted(str(p.relative_to(self.path)) for d in paths
                          for p in (self.path / d).rglob("*") if p.suffix in (".cc", ".h")
                          and word in p.read_text(errors="replace"))
        ref = self.revision().split()[0]
        r = subprocess.run([*git, "grep", "-l", word, ref, "--", *paths], capture_output=True,
                           text=True)
        return [line.split(":", 1)[1] for line in r.stdout.split()]


def find_source(explicit: str | None, env: str, default: str) -> Source | None:
    """The first of: the explicit path, $env, tools/accel-sim/.src/<default> that exists."""
    for cand in (explicit, os.environ.get(env), str(HERE / ".src" / default)):
        if cand and Path(cand).exists():
            return Source(Path(cand))
    return None


def compiler() -> str | None:
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")


def registrations(gpgpusim: Source, accelsim: Source | None) -> list[extract_options.Option]:
    n = extract_options.specialized_unit_num(gpgpusim.read("src/abstract_hardware_model.h"))
    out = []
    for path in gpgpusim.grep("option_parser_register", "src", "libcuda"):
        if path.endswith(("option_parser.cc", "option_parser.h")):
            continue
        out += extract_options.extract(gpgpusim.read(path), path, n)
    if accelsim is not None:
        path = "gpu-simulator/trace-driven/trace_driven.cc"
        out += extract_options.extract(accelsim.read(path), path, n)
    return out


def build(gpgpusim: Source, options: list[extract_options.Option], out: Path) -> Path:
    """Compile driver.cc with the source's option_parser.cc; the registration table is
    written as options.inc."""
    cxx = compiler()
    if cxx is None:
        raise HarnessError("no C++ compiler (g++ / c++, or $CXX)")
    out.mkdir(parents=True, exist_ok=True)
    for name in ("option_parser.cc", "option_parser.h"):
        (out / name).write_text(gpgpusim.read(f"src/{name}"))
    (out / "options.inc").write_text(extract_options.registration_table(options))
    shutil.copy(HERE / "driver.cc", out / "driver.cc")
    exe = out / "driver"
    cmd = [cxx, "-std=c++11", "-O1", "-w", "-I", str(out), "-o", str(exe),
           str(out / "driver.cc"), str(out / "option_parser.cc")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise HarnessError(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return exe


@dataclass
class Run:
    """One parse: the files in order, what the driver printed, its exit status."""
    files: list[Path]
    status: int
    read: dict = field(default_factory=dict)
    stderr: str = ""


def parse(exe: Path, files: list[Path], report: list[str]) -> Run:
    args = [a for f in files for a in ("-config", str(f))]
    r = subprocess.run([str(exe), *args, "--report", *report], capture_output=True, text=True)
    run = Run(files, r.returncode, stderr=r.stderr.strip())
    if r.returncode == 0:
        run.read = json.loads(r.stdout)
    return run


def fragments(results: Path, arch: str) -> tuple[str, str, str]:
    """The gpgpusim.config fragment, the trace.config fragment (the library's writer: the CLI
    no longer exports trace mode) and the whole config gpuchar-model-params writes for
    `results`, the expectation files and a superseded.yaml beside it applied as the CLI
    applies them."""
    from pytest_gpuchar.cli.model_params import declaration, model_parameters, render
    from pytest_gpuchar.models import accelsim
    from pytest_gpuchar.results.expectations import Store
    from pytest_gpuchar.results.files import read_report
    report = read_report(results)
    exp, declared = Store(ROOT / "expectations").load(arch), declaration(results)
    whole = render(report, arch, "accel-sim", exp, declared)
    trace = accelsim.trace_fragment(model_parameters(report, arch), report.get("results", []),
                                    report.get("meta", {}))
    return render(report, arch, "accel-sim-fragment", exp, declared), trace, whole


def verdict(run: Run, written: dict[str, str]) -> list[str]:
    """What is wrong with a parse of configs + fragments: an option the fragments write that
    gpgpu-sim reads with fewer values than its readers take or reads back otherwise, a class
    outside its pipeline."""
    if run.status:
        return [f"the parser stopped (exit {run.status}): {run.stderr}"]
    bad = []
    for name, value in written.items():
        got = run.read["options"].get(name)
        if got is None:
            bad.append(f"{name}: not registered by gpgpu-sim")
            continue
        if isinstance(got, str) and got != value:
            bad.append(f"{name}: read {got!r}, written {value!r}")
        elif not isinstance(got, str) and float(got) != float(value):
            bad.append(f"{name}: read {got}, written {value}")
        if name in rules.ARITY:
            n = len(rules.read_values(name, str(got)))
            if n != rules.ARITY[name]:
                bad.append(f"{name}: {n} of the {rules.ARITY[name]} values gpgpu-sim reads")
    for st in run.read["stages"]:
        unread = [k for k in ("latency", "interval", "stages") if st[k] is None]
        if unread:
            bad.append(f"{st['mode']} {st['op']}: {', '.join(unread)} never read from the "
                       f"option string (gpgpu-sim would use an uninitialised value)")
        elif not st["inside"]:
            bad.append(f"{st['mode']} {st['op']}: start stage {st['start']} outside the "
                       f"{st['unit']} pipeline of {st['stages']} stages (latency "
                       f"{st['latency']}, interval {st['interval']})")
    return bad


def summary(run: Run, written: dict[str, str], title: str) -> str:
    lines = [f"== {title}", "files: " + ", ".join(str(f) for f in run.files)]
    if run.status:
        return "\n".join(lines + [f"parser exit {run.status}: {run.stderr}"])
    lines.append(f"options registered: {run.read['registered']}")
    for name, got in run.read["options"].items():
        mark = "" if name not in written else f"   (fragment: {written[name]})"
        lines.append(f"  {name} = {got}{mark}")
    lines.append("values read:")
    for k, v in run.read["scan"].items():
        lines.append(f"  {k}: {v}")
    lines.append("pipelines (stages): " + ", ".join(f"{k} {v}"
                                                     for k, v in run.read["pipelines"].items()))
    for st in run.read["stages"]:
        flag = "" if st["inside"] else "   <-- OUTSIDE"
        lines.append(f"  {st['mode']:5s} {st['op']:12s} {st['unit']:6s} latency {st['latency']} "
                     f"interval {st['interval']} -> start {st['start']} of {st['stages']}{flag}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=DEFAULT_RESULTS,
                    help="results file whose fragments (merged after SM90_H100) and whole "
                         "config (alone) are parsed")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--gpgpusim", help="gpgpu-sim_distribution clone or git dir "
                    "(default $GPGPUSIM_SRC, then tools/accel-sim/.src/gpgpu-sim_distribution)")
    ap.add_argument("--accelsim", help="accel-sim-framework clone or git dir (default "
                    "$ACCELSIM_SRC, then tools/accel-sim/.src/accel-sim-framework)")
    ap.add_argument("--ref", default=REF, help=f"branch holding SM90_H100 (default {REF})")
    ap.add_argument("--fragment", type=Path, help="a gpgpusim.config fragment to check "
                    "instead of the one written from --results")
    ap.add_argument("--build", type=Path, default=HERE / ".build")
    ap.add_argument("--json", type=Path, help="also write the whole report as JSON here")
    args = ap.parse_args(argv)
    try:
        report = check(args)
    except HarnessError as e:
        print(f"check_config: {e}", file=sys.stderr)
        return 2
    print(report["text"])
    if args.json:
        args.json.write_text(json.dumps({k: v for k, v in report.items() if k != "text"},
                                        indent=1))
    return 0 if not report["problems"] else 1


def check(args) -> dict:
    """Build, write the fragments, parse base alone and base + fragments; the report."""
    g = find_source(args.gpgpusim, "GPGPUSIM_SRC", "gpgpu-sim_distribution")
    if g is None:
        raise HarnessError("no gpgpu-sim source: give --gpgpusim, set $GPGPUSIM_SRC, or run "
                           "tools/accel-sim/fetch_source.sh")
    g.ref = args.ref
    a = find_source(args.accelsim, "ACCELSIM_SRC", "accel-sim-framework")
    if a is not None:
        a.ref = args.ref
    exe = build(g, registrations(g, a), args.build)
    base = args.build / "SM90_H100.gpgpusim.config"
    base.write_text(g.read(GPGPUSIM_CONFIG))
    files = [base]
    frag_g, frag_t, whole_text = fragments(args.results, args.arch)
    if args.fragment:
        frag_g = args.fragment.read_text()
    fg = args.build / "fragment.gpgpusim.config"
    fg.write_text(frag_g)
    merged = [base, fg]
    if a is not None:
        bt = args.build / "SM90_H100.trace.config"
        bt.write_text(a.read(TRACE_CONFIG))
        ft = args.build / "fragment.trace.config"
        ft.write_text(frag_t)
        files += [bt]
        merged += [bt, ft]
    written = {**rules.options(frag_g), **(rules.options(frag_t) if a is not None else {})}
    names = sorted(set(written) | {rules.latency_option(c) for c in rules.SLOTS}
                   | {rules.initiation_option(c) for c in rules.SLOTS}
                   | ({rules.trace_option(u) for u in rules.TRACE_UNITS} if a else set()))
    before, after = parse(exe, files, names), parse(exe, merged, names)
    problems = verdict(after, written)
    wf = args.build / "whole.gpgpusim.config"
    wf.write_text(whole_text)
    whole_written = rules.options(whole_text)
    alone = parse(exe, [wf], sorted(set(names) | set(whole_written)))
    problems += [f"whole config alone: {p}" for p in verdict(alone, whole_written)]
    head = (f"gpgpu-sim {g.path} ({g.revision()})"
            + (f"; accel-sim {a.path} ({a.revision()})" if a else "; no accel-sim source: "
               "trace.config not checked"))
    text = "\n\n".join([head, summary(before, {}, "SM90_H100 alone"),
                        summary(after, written, "SM90_H100 + fragment(s)"),
                        summary(alone, whole_written, "whole config alone (no base)"),
                        "problems:\n" + ("\n".join(f"  {p}" for p in problems) or "  none")])
    return {"source": head, "before": before.read, "after": after.read, "written": written,
            "alone": alone.read, "whole_written": whole_written, "alone_status": alone.status,
            "problems": problems, "text": text, "status": after.status,
            "stderr": after.stderr}


if __name__ == "__main__":
    sys.exit(main())
