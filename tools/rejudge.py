"""Every committed run judged twice: by the code and expectation files of an earlier commit
(`--old`, default 1e5c33c: the last before the schema-2 contract) and by this tree's. Shows
that a change of the files (a migration) or of the rule moved no verdict it did not mean to.

    python tools/rejudge.py [--old REV] [-o results/sm_90/rejudge.md]

The runs: every report under results/ (*.json.gz with a `results` list) and every run of the
fleet samples (results/<arch>/fleet/sample.jsonl.gz). A figure is judged as the suite judged
it (results/judge.judge against the expectation of its board's model, the model's entry
first): every numeric result that was pass, fail, measured or unstable when recorded.
Only figures of the method each figure is measured by now count (the newest run's method,
numbers masked: results/expectations.method_shape): a run of older code measured some
figures another way, and neither tree's files describe those values. The old tree is `git
archive`d into a temporary directory and run in its own process."""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JUDGED = ("pass", "fail", "measured", "unstable")


def runs(root: Path):
    """(label, doc) of every committed run, in a stable order."""
    for p in sorted((root / "results").rglob("*.json.gz")):
        try:
            doc = json.load(gzip.open(p))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("results"), list):
            yield str(p.relative_to(root)), doc
    for p in sorted((root / "results").rglob("sample.jsonl.gz")):
        with gzip.open(p, "rt") as f:
            for i, line in enumerate(f):
                if line.strip():
                    yield f"{p.relative_to(root)}:{i + 1}", json.loads(line)


def _label(r: dict, meta: dict) -> str:
    board = (r.get("provenance") or {}).get("uuid") or meta.get("uuid") or ""
    return f"{r['key']}@{board[:12]}"


def current(root: Path) -> set[tuple[str, str]]:
    """(run label, figure@board) of the figures measured by today's method of their key."""
    sys.path.insert(0, str(ROOT))
    from pytest_gpuchar.results.expectations import method_shape
    docs = sorted(runs(root), key=lambda d: str((d[1].get("meta") or {}).get("date", "")))
    newest = {(r.get("arch") or (doc.get("meta") or {}).get("arch"), r["key"]):
              method_shape(r.get("method", "")) for _, doc in docs for r in doc["results"]}
    return {(label, _label(r, doc.get("meta") or {})) for label, doc in docs
            for r in doc["results"]
            if newest.get((r.get("arch") or (doc.get("meta") or {}).get("arch"), r["key"]))
            == method_shape(r.get("method", ""))}


def dump(root: Path, tree: Path) -> dict[str, dict[str, str]]:
    """label -> key@board -> status, judged by the code and files under `tree`."""
    sys.path.insert(0, str(tree))
    from pytest_gpuchar.results.expectations import Store
    from pytest_gpuchar.results.judge import Measurement, judge
    store = Store(tree / "expectations")
    out: dict[str, dict[str, str]] = {}
    for label, doc in runs(root):
        meta = doc.get("meta") or {}
        verdicts = out.setdefault(label, {})
        for r in doc["results"]:
            v, arch = r.get("value"), r.get("arch") or meta.get("arch")
            if r.get("status") not in JUDGED or not isinstance(v, (int, float)) \
                    or isinstance(v, bool) or not math.isfinite(v) or not arch:
                continue
            prov = r.get("provenance") or {}
            device = prov.get("device") or meta.get("device")
            exp = store.load(arch)
            e = exp.get(r["key"], device) if exp else None
            if e is None:
                continue
            m = Measurement(r["key"], float(v), r.get("unit") or "", r.get("spread"),
                            r.get("detail", "") if r["status"] == "unstable" else "",
                            method=r.get("method", ""))
            verdicts[_label(r, meta)] = str(judge(m, arch, e).status.value)
    return out


def in_process(tree: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    res = subprocess.run([sys.executable, __file__, "--dump", str(tree)], env=env,
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"rejudge: judging with {tree} failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout)


def table(old: dict, new: dict, rev: str, keep: set[tuple[str, str]], out: str) -> str:
    c = Counter()
    old = {lb: {k: v for k, v in d.items() if (lb, k) in keep} for lb, d in old.items()}
    new = {lb: {k: v for k, v in d.items() if (lb, k) in keep} for lb, d in new.items()}
    moved: list[str] = []
    for label in sorted(set(old) | set(new)):
        a, b = old.get(label, {}), new.get(label, {})
        c["runs"] += 1
        for key in set(a) | set(b):
            sa, sb = a.get(key), b.get(key)
            if sa and sb:
                c["both"] += 1
                if sa == sb:
                    c["same"] += 1
                else:
                    c[f"{sa} -> {sb}"] += 1
                    moved.append(f"| {label} | {key} | {sa} | {sb} |")
            elif sb:
                c["new only"] += 1
            else:
                c["old only"] += 1
    differ = sum(v for k, v in c.items() if "->" in k)
    lines = [f"# Every committed run judged by {rev} and by this tree", "",
             f"Regenerate: `python tools/rejudge.py --old {rev} -o {out}`", "",
             "| runs | figures judged by both | same verdict | verdicts that differ | "
             "judged only now (no entry then) | judged only then (no entry now) |",
             "|---:|---:|---:|---:|---:|---:|",
             f"| {c['runs']} | {c['both']} | {c['same']} | {differ} | {c['new only']} | "
             f"{c['old only']} |", ""]
    kinds = sorted(k for k in c if "->" in k)
    if kinds:
        lines += ["By direction: " + ", ".join(f"{k} {c[k]}" for k in kinds) + ".", "",
                  "| run | figure@board | then | now |", "|---|---|---|---|"] + sorted(moved)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", default="1e5c33c", help="the earlier commit (default 1e5c33c)")
    ap.add_argument("-o", "--output", type=Path, help="write the table here (default stdout)")
    ap.add_argument("--dump", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.dump:
        json.dump(dump(ROOT, args.dump), sys.stdout)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        arc = subprocess.run(["git", "-C", str(ROOT), "archive", args.old, "pytest_gpuchar",
                              "expectations"], capture_output=True, check=False)
        if arc.returncode != 0:
            raise SystemExit(f"rejudge: git archive {args.old}: {arc.stderr.decode()[-500:]}")
        subprocess.run(["tar", "-x", "-C", tmp], input=arc.stdout, check=True)
        old = in_process(Path(tmp))
    new = in_process(ROOT)
    text = table(old, new, args.old, current(ROOT), str(args.output or "<file>"))
    from pytest_gpuchar.cli.output import emit      # (current() put this tree on the path)
    return 0 if emit("rejudge", "-o", args.output, text) else 2


if __name__ == "__main__":
    raise SystemExit(main())
