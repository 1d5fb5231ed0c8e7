"""gpuchar-expectations: validate expectation files, or (re)generate an arch's values from a
measured run's JSON report (atomic; every other entry and arch untouched)."""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from ..core import archs
from ..results.expectations import ExpectationError, Store, load_file, update_arch
from ..results.files import ResultsError, read_results
from . import output
from .output import interruptible


def _check(store: Store, files: list[Path]) -> int:
    explicit = bool(files)
    files = files or store.files()
    if not files:
        print(f"no expectation files found under {' or '.join(map(str, store.layers))} "
              f"(set GPUCHAR_EXPECTATIONS)")
        return 1
    bad = 0
    layered = len(store.layers) > 1
    for f in files:
        try:
            e = load_file(f)
            where = f"[{store.layer_of(f)}] " if layered else ""
            print(f"ok  {where}{f}: {len(e.characteristics)} characteristics, "
                  f"{len(e.mappings)} mappings, {len(e.devices)} devices")
        except ExpectationError as err:
            bad += 1
            print(f"BAD {err}")
    if not explicit and not bad:   # cross-file duplicates of each arch
        for arch in sorted({f.stem for f in files}):
            try:
                store.load(arch)
            except ExpectationError as err:
                bad += 1
                print(f"BAD {err}")
    return 1 if bad else 0


DEFAULT_SAMPLE = "results/{arch}/fleet/sample.jsonl.gz"


def _show(store: Store, args) -> int:
    """Each entry of an arch (the device's own over the arch's), the layer it came from
    (shipped, user, or project for a single directory) and its file:line."""
    try:
        arch = archs.validate(args.arch)
        exp = store.load(arch)
    except (archs.UnknownArch, ExpectationError) as e:
        print(f"gpuchar-expectations: {e}", file=sys.stderr)
        return 2
    if exp is None:
        print(f"gpuchar-expectations: no expectation file of {arch} under "
              f"{' or '.join(map(str, store.layers))}", file=sys.stderr)
        return 1
    keys = sorted(set(exp.characteristics) | set(exp.devices.get(args.device or "", {})))
    shown = 0
    for key in keys:
        if args.key and not any(key.startswith(k) for k in args.key):
            continue
        e = exp.get(key, args.device)
        figure = e.value if e.range is None else list(e.range)
        print(f"{key}  {figure} {e.unit}  [{store.layer_of(e.origin)}] {e.origin}")
        shown += 1
    print(f"{shown} entries of {arch}" + (f" for {args.device}" if args.device else "")
          + f"; layers, lowest first: {', '.join(map(str, store.layers))}")
    return 0


def sample_path(args, arch: str, root: Path | None = None) -> Path:
    """The model's fleet sample: --sample, else results/<arch>/fleet/sample.jsonl.gz beside
    the expectations directory (the repository the files are committed in), as pytest
    --snapshot-update finds it."""
    from ..results.accept import sample_path as beside
    if args.sample:
        return Path(args.sample)
    return beside(root, arch) if root is not None else Path(DEFAULT_SAMPLE.format(arch=arch))


def sample_docs(args, arch: str) -> list[dict]:
    """The runs the contract is derived from, as the sample file holds them (one report per
    run): a history store's (--history) or the committed sample (--sample, default)."""
    from ..results import sample as S
    from ..results.history import open_history
    if getattr(args, "history", None):
        if not Path(args.history).exists() and "://" not in args.history:
            raise ResultsError(f"--history {args.history}: no such file")
        from ..results import noise
        with open_history(args.history, create=False) as h:
            docs = [h.run(r["id"]) for r in h.runs(arch=arch)]
        return [S.run_doc(r, d.get("meta")) for d, r in zip(docs, noise.fleet_runs(docs))]
    path = sample_path(args, arch, getattr(args, "store_root", None))
    if not path.exists():
        raise ResultsError(f"--sample {path}: no such file (the fleet sample the contract is "
                           f"derived from; give --sample FILE or --history DB)")
    return S.read(path)


def _written(w, model: str, dry: bool) -> None:
    s = w.summary
    verb = "would rewrite" if dry else "rewrote"
    print(f"{model}: sample of {s.boards} boards, {s.runs} runs ({s.first}..{s.last}), "
          f"sample {s.sample}: {verb} {w.changed} entries, {w.unchanged} unchanged, "
          f"{len(w.too_few)} on fewer than 3 boards (left as they are)")
    for path, keys in w.files.items():
        print(f"  {path}: {len(keys)} entries" + (f" ({', '.join(keys[:6])}"
                                                   f"{', ...' if len(keys) > 6 else ''})"
                                                   if keys else ""))


def _arch_sample(args) -> tuple[str, list[dict]] | None:
    """--arch and its sample's runs (sample_docs), or None after one error line."""
    try:
        arch = archs.validate(args.arch)
        return arch, sample_docs(args, arch)
    except (archs.UnknownArch, ResultsError) as e:
        print(f"gpuchar-expectations: {e}", file=sys.stderr)
        return None


def _fleet(store: Store, args) -> int:
    """The model's contract derived again from its sample (no new run)."""
    from ..results import contract
    from ..results import sample as S
    from ..results import noise
    got = _arch_sample(args)
    if got is None:
        return 2
    arch, docs = got
    runs = noise.fleet_runs(docs)
    models = sorted({r.model for r in runs if r.arch == arch})
    if args.model not in models:
        print(f"gpuchar-expectations: --model {args.model!r}: no run of it in the sample "
              f"(models: {', '.join(models) or 'none'})", file=sys.stderr)
        return 2
    try:
        w = contract.write_model(arch, args.model, runs, root=store.root,
                                 sample=S.sample_id(docs),
                                 export=contract.export_name(
                                     sample_path(args, arch, store.root), store.root),
                                 dry_run=args.dry_run)
    except (ExpectationError, OSError) as e:
        print(f"gpuchar-expectations: the file was left as it was: {e}", file=sys.stderr)
        return 1
    _written(w, args.model, args.dry_run)
    return 0


def _crossval(store: Store, args) -> int:
    from ..results import noise
    from .crossval import run_crossval
    got = _arch_sample(args)
    if got is None:
        return 2
    arch, docs = got
    return run_crossval(store, noise.fleet_runs(docs), arch, models=args.model, output=args.output,
                        command=" ".join(["gpuchar-expectations", *sys.argv[1:]])
                        if sys.argv and "crossval" in sys.argv else "")


def parser() -> argparse.ArgumentParser:
    """The command's arguments: check, update, fleet, crossval, generations."""
    ap = argparse.ArgumentParser(
        prog="gpuchar-expectations",
        description="Check expectation files, or (re)generate an arch's values from a measured "
                    "run's JSON report (atomic; other entries and archs untouched).")
    ap.add_argument("--root", type=Path, default=None,
                    help="expectations directory (default: $GPUCHAR_EXPECTATIONS, else "
                         "./expectations, else the files that came with the package, with "
                         "the user's own directory over them: docs/installed.md)")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    c = sub.add_parser("check", help="validate expectation files")
    c.add_argument("files", nargs="*", type=Path)
    sh = sub.add_parser("show", help="each entry of an arch with the layer (shipped, user, "
                                     "project) and file:line it came from")
    sh.add_argument("--arch", required=True)
    sh.add_argument("--device", help="the device's own entries over the arch's")
    sh.add_argument("--key", action="append", help="only keys starting with this (repeatable)")
    u = sub.add_parser("update", help="accept a measured run: a board into its model's fleet "
                                      "sample (--device), or the arch's values")
    u.add_argument("--results", required=True, type=Path, help="gpuchar report JSON")
    u.add_argument("--arch", required=True)
    u.add_argument("--root", dest="update_root", type=Path, default=None)
    u.add_argument("--device", help="the model (GPU name) whose fleet the run's boards join; "
                                    "without it the run's values become the arch's")
    u.add_argument("--key", action="append", help="only these characteristic keys (arch level)")
    u.add_argument("--fleet", nargs="?", const="extend", default=None,
                   choices=("extend", "replace"),
                   help="with --device: extend (default) adds the run's boards to the sample, "
                        "every other board kept; replace makes them the model's whole sample "
                        "(as pytest --gpuchar-accept-fleet)")
    u.add_argument("--sample", type=Path, default=None,
                   help="the fleet sample (default: results/<arch>/fleet/sample.jsonl.gz)")
    u.add_argument("--dry-run", action="store_true", help="say what would change, write nothing")
    u.add_argument("--abs-tol", type=float, default=1.0)
    u.add_argument("--rel-tol", type=float, default=0.05)
    fl = sub.add_parser("fleet", help="derive a model's contract (device entries) again from its "
                                      "fleet sample")
    fl.add_argument("--arch", required=True)
    fl.add_argument("--model", required=True,
                    help="the device name the entries are for, e.g. 'NVIDIA H100 80GB HBM3'")
    fl.add_argument("--root", dest="update_root", type=Path, default=None)
    src = fl.add_mutually_exclusive_group()
    src.add_argument("--sample", type=Path, help="the sample (default: "
                                                 "results/<arch>/fleet/sample.jsonl.gz)")
    src.add_argument("--history", metavar="TARGET",
                     help="take the sample from a history store (a file path or database URL)")
    fl.add_argument("--dry-run", action="store_true", help="print what would change, write "
                                                            "nothing")
    cv = sub.add_parser("crossval", help="the gate's error rates: leave each board out, inject "
                                         "known moves (results/<arch>/gate.md)")
    cv.add_argument("--arch", required=True)
    cv.add_argument("--model", action="append", help="a model (repeatable; default: every "
                                                     "model of the sample)")
    csrc = cv.add_mutually_exclusive_group()
    csrc.add_argument("--sample", type=Path, help="the sample (default: "
                                                  "results/<arch>/fleet/sample.jsonl.gz)")
    csrc.add_argument("--history", metavar="TARGET", help="a history store instead")
    cv.add_argument("-o", "--output", type=Path, help="write the tables (Markdown) here")
    g = sub.add_parser("generations", help="Markdown table of each characteristic across "
                                           "archs and boards (papers' records, boards measured)")
    g.add_argument("--prefix", action="append", default=[],
                   help="only characteristics whose key starts with this (repeatable)")
    g.add_argument("-o", "--output", type=Path, help="write to this file (default: stdout)")
    return ap


def _missing_root(args, store: Store) -> str:
    """Why the expectations directory cannot be used ("" when it can): a --root or
    $GPUCHAR_EXPECTATIONS that is no directory is named, not read as an empty set of files.
    Installed, the user's layer (written first by an acceptance) may not exist yet: the
    shipped files below it are read."""
    root = store.root
    given = getattr(args, "update_root", None) or args.root
    if root.is_dir() or (given is None and not os.environ.get("GPUCHAR_EXPECTATIONS")
                         and any(Path(layer).is_dir() for layer in store.layers)):
        return ""
    what = f"--root {root}" if given is not None else f"$GPUCHAR_EXPECTATIONS={root}" \
        if os.environ.get("GPUCHAR_EXPECTATIONS") else f"{root}"
    return (f"{what}: {'not a' if root.exists() else 'no such'} directory: give the directory of the expectation files "
            f"(sm_XX.yaml), e.g. the repository's expectations/")


@interruptible("gpuchar-expectations")
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    store = Store(getattr(args, "update_root", None) or args.root)
    args.store_root = store.root
    missing = _missing_root(args, store)
    if missing:
        print(f"gpuchar-expectations: {missing}", file=sys.stderr)
        return 2
    if args.cmd == "check":
        return _check(store, args.files)
    if args.cmd == "show":
        return _show(store, args)
    if args.cmd == "generations":
        from ..results import generations
        table = generations.table(store, tuple(args.prefix))
        if not table.rows:
            which = f" whose key starts with {', '.join(args.prefix)}" if args.prefix else ""
            print(f"gpuchar-expectations: generations: no characteristic{which} has a figure on "
                  f"two or more archs or boards in {store.root}", file=sys.stderr)
            return 1
        text = "\n".join(generations.markdown(table, "# Generations")) + "\n"
        return 0 if output.emit("gpuchar-expectations", "-o", args.output, text) else 2
    if args.cmd == "fleet":
        return _fleet(store, args)
    if args.cmd == "crossval":
        return _crossval(store, args)
    try:
        arch = archs.validate(args.arch)
        results = read_results(args.results)
    except (archs.UnknownArch, ResultsError) as e:
        print(f"gpuchar-expectations: {e}", file=sys.stderr)
        return 2
    if args.fleet and not args.device:
        print("gpuchar-expectations: --fleet needs --device (a model's boards)", file=sys.stderr)
        return 2
    if args.device:
        return _accept_device(store, args, arch)
    try:
        written = update_arch(arch, results, root=store.root, abs_tol=args.abs_tol,
                              rel_tol=args.rel_tol, keys=set(args.key) if args.key else None)
    except (ExpectationError, OSError) as e:
        print(f"gpuchar-expectations: the file was left as it was: {e}", file=sys.stderr)
        return 1
    written = {path: keys for path, keys in written.items() if keys}
    for path, keys in written.items():
        print(f"wrote {len(set(keys))} values to {path}")
    if not written:
        print(f"gpuchar-expectations: nothing written: "
              f"{nothing_to_write(results, arch, args.key, args.results)}", file=sys.stderr)
        return 1
    return 0


def _accept_device(store: Store, args, arch: str) -> int:
    """A run's boards join their model's fleet sample (or replace it), and the contract is
    derived again: only the entries the sample moved are rewritten."""
    from ..results import contract
    from ..results.files import read_report
    path = sample_path(args, arch, store.root)
    try:
        w = contract.accept(arch, args.device, [read_report(args.results)], root=store.root,
                            sample_path=path, fleet=args.fleet or "extend",
                            dry_run=args.dry_run)
    except ResultsError as e:
        print(f"gpuchar-expectations: {e}", file=sys.stderr)
        return 2
    except (ExpectationError, OSError) as e:
        print(f"gpuchar-expectations: the files were left as they were: {e}", file=sys.stderr)
        return 1
    _written(w, args.device, args.dry_run)
    if not args.dry_run:
        how = "replaced by this run" if args.fleet == "replace" else \
            f"{w.added} run(s) added" if w.added else "the run was in it already: unchanged"
        print(f"sample {path}: {w.summary.runs} runs of {args.device} ({how})")
    return 0


def nothing_to_write(results: list[dict], arch: str, keys: list[str] | None,
                     path: Path) -> str:
    """Why a results file gives `arch` no value to write (update_from_results writes only
    finite figures that are not invalid, unstable, errors or SPEC's bars)."""
    from collections import Counter
    from ..results.expectations import is_spec_bar
    from ..results.terminal import STATUS_WORDS
    mine = [r for r in results if r.get("arch") == arch]
    if not results:
        return f"{path} holds no result at all"
    if not mine:
        have = sorted({str(r.get("arch")) for r in results if r.get("arch")})
        return (f"{path} holds no {arch} result"
                + (f" (its archs: {', '.join(have)}; give --arch)" if have else " (no result)"))
    if keys:
        mine = [r for r in mine if r.get("key") in keys]
        if not mine:
            return f"{path} holds no {arch} result of --key {', '.join(keys)}"
    figures = [r for r in mine if isinstance(r.get("value"), (int, float))
               and not isinstance(r.get("value"), bool)]
    if not figures:
        what = Counter(STATUS_WORDS.get(r.get("status"), r.get("status")) for r in mine)
        return (f"{path} holds no hardware figure of {arch}, only "
                + ", ".join(f"{n} {w}" for w, n in what.most_common())
                + f" (a run without an {arch} GPU measures nothing): accept the report of a "
                  f"run on an {arch} GPU")
    why = Counter("SPEC's bars" if is_spec_bar(r.get("key", "")) else
                  "not finite" if not math.isfinite(r["value"]) else
                  STATUS_WORDS.get(r.get("status"), str(r.get("status"))) for r in figures)
    return (f"none of the {len(figures)} {arch} figures of {path} can be written: "
            + ", ".join(f"{n} {w}" for w, n in why.most_common())
            + " (invalid, unstable, error, non-finite figures and SPEC's bars are never written)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
