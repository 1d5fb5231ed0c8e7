"""gpuchar-expectations: validate expectation files, or (re)generate an arch's values from a
measured run's JSON report (atomic; every other entry and arch untouched)."""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from ..core import archs
from ..results.expectations import (ExpectationError, NoiseError, Store, board_pairs,
                                    declare_noise, file_for, load_file, noisy_keys,
                                    section_entries, update_arch)
from ..results.files import ResultsError, read_results
from . import output
from .output import interruptible


def _check(store: Store, files: list[Path]) -> int:
    explicit = bool(files)
    files = files or store.files()
    if not files:
        print(f"no expectation files found under {store.root} (set GPUCHAR_EXPECTATIONS)")
        return 1
    bad = 0
    for f in files:
        try:
            e = load_file(f)
            print(f"ok  {f}: {len(e.characteristics)} characteristics, "
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


def _noise(store: Store, args) -> int:
    from ..results.history_rows import HistoryError
    if args.history and not args.device:
        print("gpuchar-expectations: noise --history needs --device (the model whose boards' "
              "runs are paired)", file=sys.stderr)
        return 2
    if not args.history and not args.key:
        print("gpuchar-expectations: noise --pair needs --key (which figures)", file=sys.stderr)
        return 2
    try:
        arch = archs.validate(args.arch)
        pairs = [(read_results(a), read_results(b)) for a, b in args.pair] if args.pair else \
            board_pairs(_history_runs(args.history, args.device, arch))
    except (archs.UnknownArch, ResultsError, HistoryError) as e:
        print(f"gpuchar-expectations: {e}", file=sys.stderr)
        return 2
    keys = list(dict.fromkeys(args.key)) if args.key else noisy_keys(pairs, arch)
    if args.history:
        print(f"{len(pairs)} pair(s) of runs of one board in {args.history}; "
              f"{len(keys)} figure(s) " + ("asked for" if args.key else
                                          "moved by more than 1% in one of them"))
    try:
        said = {}
        for device, ks in _by_section(store, arch, keys, args.device).items():
            said |= declare_noise(arch, pairs, ks, root=store.root, device=device,
                                  complete=bool(args.history))
    except NoiseError as e:
        print(f"gpuchar-expectations: nothing written: {e}", file=sys.stderr)
        return 2
    except (ExpectationError, OSError) as e:
        print(f"gpuchar-expectations: the file was left as it was: {e}", file=sys.stderr)
        return 1
    for key, what in said.items():
        print(f"{key}: {what}")
    return 0


def _by_section(store: Store, arch: str, keys: list[str], device: str | None
                ) -> dict[str | None, list[str]]:
    """Where each key's noise goes: the device section when it has an entry for the key, else
    the arch's values (a noise measured on one model, said so by its source)."""
    if device is None:
        return {None: keys}
    out: dict[str | None, list[str]] = {}
    read: dict[Path, dict] = {}                 # each file parsed once
    for key in keys:
        path = file_for(key, arch, store.root)
        if path not in read:
            read[path] = section_entries(path, device)
        out.setdefault(device if key in read[path] else None, []).append(key)
    return out


def _history_runs(target: str, model: str, arch: str) -> list[list[dict]]:
    """Every run of `model` on `arch` in a history store, as results lists."""
    from ..results.history import open_history
    from ..results.history_rows import HistoryError
    if not Path(target).exists() and "://" not in target:
        raise HistoryError(f"--history {target}: no such file")
    hist = open_history(target)
    try:
        return [hist.run(r["id"])["results"] for r in hist.runs(model=model, arch=arch)]
    finally:
        hist.close()


def _fleet(store: Store, args) -> int:
    from ..results import fleetsample
    from ..results.history_rows import HistoryError
    try:
        arch = archs.validate(args.arch)
        runs = [read_results(p) for p in args.runs] if args.runs else \
            _history_runs(args.history, args.model, arch)
    except (archs.UnknownArch, ResultsError, HistoryError) as e:
        print(f"gpuchar-expectations: {e}", file=sys.stderr)
        return 2
    if args.min_boards < 2:
        print("gpuchar-expectations: --min-boards: a fleet range needs at least 2 boards",
              file=sys.stderr)
        return 2
    try:
        plan = fleetsample.plan_fleet(arch, runs, args.model, root=store.root,
                                      keys=set(args.key) if args.key else None,
                                      min_boards=args.min_boards)
    except ExpectationError as e:
        print(f"gpuchar-expectations: {e}", file=sys.stderr)
        return 1
    boards = {b for runs_ in runs for r in runs_ if r.get("arch") == arch
              and (r.get("provenance") or {}).get("device") == args.model
              for b in [(r.get("provenance") or {}).get("uuid")] if b}
    if not boards:
        print(f"gpuchar-expectations: no {arch} figure of {args.model!r} with a board UUID in "
              f"the {len(runs)} run(s) given: nothing to sample", file=sys.stderr)
        return 2
    print(f"sample: {len(boards)} boards of {args.model} in {len(runs)} run(s)"
          + (f" of {args.history}" if args.history else ""))
    print("\n".join(fleetsample.lines(plan, args.model)))
    if args.dry_run:
        print("dry run: nothing written")
        return 0
    try:
        written = fleetsample.write_fleet(arch, plan, args.model, root=store.root)
    except (ExpectationError, OSError) as e:
        print(f"gpuchar-expectations: the file was left as it was: {e}", file=sys.stderr)
        return 1
    for path, keys in written.items():
        print(f"wrote {len(keys)} fleet ranges to {path} (devices.{args.model})")
    judged, bad = fleetsample.misfits(arch, runs, args.model, root=store.root,
                                      keys=set(args.key) if args.key else None)
    print(f"the sample against the entries now written: {judged} figures judged, "
          f"{len(bad)} out of tolerance")
    for key, board, value, expected in bad[:20]:
        print(f"  {key} on {board[:12]}: {value:g}, expected {expected}")
    return 1 if bad else 0


def parser() -> argparse.ArgumentParser:
    """The command's arguments: check, update, noise, fleet, generations."""
    ap = argparse.ArgumentParser(
        prog="gpuchar-expectations",
        description="Check expectation files, or (re)generate an arch's values from a measured "
                    "run's JSON report (atomic; other entries and archs untouched).")
    ap.add_argument("--root", type=Path, default=None,
                    help="expectations directory (default: $GPUCHAR_EXPECTATIONS, else "
                         "./expectations)")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    c = sub.add_parser("check", help="validate expectation files")
    c.add_argument("files", nargs="*", type=Path)
    u = sub.add_parser("update", help="write measured values from a gpuchar JSON report")
    u.add_argument("--results", required=True, type=Path, help="gpuchar report JSON")
    u.add_argument("--arch", required=True)
    u.add_argument("--root", dest="update_root", type=Path, default=None)
    u.add_argument("--device", help="write under devices.<name> instead of the arch values")
    u.add_argument("--key", action="append", help="only these characteristic keys")
    u.add_argument("--fleet", action="store_true",
                   help="with --device: keep every board's value (by UUID) and expect the "
                        "range they span, instead of this board's value alone")
    u.add_argument("--abs-tol", type=float, default=1.0)
    u.add_argument("--rel-tol", type=float, default=0.05)
    nz = sub.add_parser("noise", help="declare figures' run-to-run noise from pairs of runs "
                                      "of one board (the nightly's notes, not changes)")
    nsrc = nz.add_mutually_exclusive_group(required=True)
    nsrc.add_argument("--pair", nargs=2, action="append", type=Path,
                      metavar=("RUN1", "RUN2"), help="two gpuchar reports of one board "
                                                     "(repeatable)")
    nsrc.add_argument("--history", metavar="TARGET",
                      help="pair each board's consecutive runs of --device in a history store "
                           "(a file path or database URL); without --key, every figure that "
                           "moved by more than 1%% in one pair")
    nz.add_argument("--arch", required=True)
    nz.add_argument("--root", dest="update_root", type=Path, default=None)
    nz.add_argument("--device", help="the entries under devices.<name>")
    nz.add_argument("--key", action="append",
                    help="a characteristic key (repeatable); its entry must exist")
    fl = sub.add_parser("fleet", help="a model's board-dependent ranges from a fleet sample "
                                      "of whole-suite runs (several boards, by UUID)")
    src = fl.add_mutually_exclusive_group(required=True)
    src.add_argument("--runs", nargs="+", type=Path, metavar="RUN",
                     help="gpuchar-results.json[.gz] or nightly.json of the sampled boards (a "
                          "merged multi-GPU report counts every board it holds)")
    src.add_argument("--history", metavar="TARGET",
                     help="take the sample from a history store (every run of the model on "
                          "the arch): a file path (SQLite) or a database URL")
    fl.add_argument("--arch", required=True)
    fl.add_argument("--model", required=True,
                    help="the device name the entries are for, e.g. 'NVIDIA H100 80GB HBM3'")
    fl.add_argument("--root", dest="update_root", type=Path, default=None)
    fl.add_argument("--key", action="append", help="only these characteristic keys")
    fl.add_argument("--min-boards", type=int, default=3,
                    help="a figure needs this many boards in the sample (default 3)")
    fl.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    g = sub.add_parser("generations", help="Markdown table of each characteristic across "
                                           "archs and boards (papers' records, boards measured)")
    g.add_argument("--prefix", action="append", default=[],
                   help="only characteristics whose key starts with this (repeatable)")
    g.add_argument("-o", "--output", type=Path, help="write to this file (default: stdout)")
    return ap


def _missing_root(args, root: Path) -> str:
    """Why the expectations directory cannot be used ("" when it can): a --root or
    $GPUCHAR_EXPECTATIONS that is no directory is named, not read as an empty set of files."""
    if root.is_dir():
        return ""
    given = getattr(args, "update_root", None) or args.root
    what = f"--root {root}" if given is not None else f"$GPUCHAR_EXPECTATIONS={root}" \
        if os.environ.get("GPUCHAR_EXPECTATIONS") else f"{root}"
    return (f"{what}: {'not a' if root.exists() else 'no such'} directory: give the directory of the expectation files "
            f"(sm_XX.yaml), e.g. the repository's expectations/")


@interruptible("gpuchar-expectations")
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    store = Store(getattr(args, "update_root", None) or args.root)
    missing = _missing_root(args, store.root)
    if missing:
        print(f"gpuchar-expectations: {missing}", file=sys.stderr)
        return 2
    if args.cmd == "check":
        return _check(store, args.files)
    if args.cmd == "generations":
        from ..results import generations
        table = generations.table(store, tuple(args.prefix))
        if not table.rows:
            which = f" whose key starts with {', '.join(args.prefix)}" if args.prefix else ""
            print(f"gpuchar-expectations: generations: no characteristic{which} has a figure on "
                  f"two or more archs or boards in {store.root}", file=sys.stderr)
            return 1
        text = "\n".join(generations.markdown(table, "# Generations")) + "\n"
        if args.output:
            try:
                output.write("-o", args.output, text)
            except output.OutputError as e:
                print(f"gpuchar-expectations: {e}", file=sys.stderr)
                return 2
        else:
            print(text, end="")
        return 0
    if args.cmd == "noise":
        return _noise(store, args)
    if args.cmd == "fleet":
        return _fleet(store, args)
    if args.fleet and not args.device:
        print("gpuchar-expectations: --fleet needs --device (a model's boards)", file=sys.stderr)
        return 2
    try:
        arch = archs.validate(args.arch)
        results = read_results(args.results)
    except (archs.UnknownArch, ResultsError) as e:
        print(f"gpuchar-expectations: {e}", file=sys.stderr)
        return 2
    try:
        written = update_arch(arch, results, root=store.root, device=args.device,
                              abs_tol=args.abs_tol, rel_tol=args.rel_tol,
                              keys=set(args.key) if args.key else None,
                              fleet=args.fleet)
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
