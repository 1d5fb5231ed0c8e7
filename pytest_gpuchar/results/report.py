"""Results of a run: each characteristic measured (or checked) with its expectation, status
and provenance; written as JSON (machine-readable), Markdown and one self-contained HTML page
(for people: results/html)."""
from __future__ import annotations

import json
from pathlib import Path

from ..core.atomic import atomic_write
from . import durations, fleet, generations, jitdiff
from .files import ARTIFACTS
from .judge import Result, Status


def board_markdown(boards: list[dict]) -> list[str]:
    """The GPUs' boards as NVML read them at the start and the end of the run, flags first."""
    if not boards:
        return []
    from ..core.nvml import summary
    out = ["## Board (NVML, start and end of the run)", ""]
    for b in boards:
        out.append(f"**GPU {b.get('device_index', '?')} {b.get('uuid', '')}** "
                   f"({b.get('device', '')})")
        out += [""] + [f"- **flagged**: {f}" for f in b.get("flags") or []]
        out += [f"- start: {summary(b.get('start') or {'skipped': 'not read'})}",
                f"- end: {summary(b.get('end') or {'skipped': 'not read'})}", ""]
    return out


def dumps(doc: dict) -> str:
    """A report document as gpuchar-results.json has it: each result on a line of its own, the
    rest indented. (An indent throughout sends the json module through its pure-Python
    encoder, several times slower for a run's thousand results than a line each.)"""
    parts = []
    for key, value in doc.items():
        if key == "results" and isinstance(value, list):
            lines = ",\n".join(json.dumps(r) for r in value)
            parts.append(f"{json.dumps(key)}: [\n{lines}\n]")
        else:
            parts.append(f"{json.dumps(key)}: {json.dumps(value, indent=1)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


class Recorder:
    def __init__(self) -> None:
        self.results: list[Result] = []
        self.meta: dict = {}
        # files a test wrote into the report directory (plots, curves): name, caption, test
        self.artifacts: list[dict] = []
        self.generations = None     # generations.Table of the run's figures, set at the end
        self._seen: dict[tuple, Result] = {}

    def add(self, r: Result) -> Result:
        """Keep a result; the same figure reported again by another test (Table II and Table
        V judge the same cached chains: 10 keys twice in a run) is kept once, the other test
        named in its data (`also_in`)."""
        key = (r.arch, r.key, str((r.provenance or {}).get("uuid", "")), r.status, r.value)
        if r.value is not None:
            first = self._seen.get(key)
            if first is not None and first.test != r.test:
                also = first.data.setdefault("also_in", [])
                if r.test not in also:
                    also.append(r.test)
                return first
            self._seen.setdefault(key, r)
        self.results.append(r)
        return r

    def by_status(self, *statuses: Status) -> list[Result]:
        return [r for r in self.results if r.status in statuses]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.status.value] = out.get(r.status.value, 0) + 1
        return dict(sorted(out.items()))

    def gpus(self) -> list[dict]:
        """Each GPU the results were measured on (index, UUID, name from their provenance)
        and how many results it gave: one under a single process, one per worker's GPU
        under pytest-xdist."""
        seen: dict[tuple, int] = {}
        for r in self.results:
            p = r.provenance or {}
            if p.get("uuid") or p.get("device"):
                k = (p.get("device_index"), str(p.get("uuid") or ""), str(p.get("device", "")))
                seen[k] = seen.get(k, 0) + 1
        return [{"device_index": i, "uuid": u, "device": d, "results": n}
                for (i, u, d), n in sorted(seen.items(), key=lambda kv: (str(kv[0][0]),
                                                                         kv[0][1]))]

    def add_artifact(self, name: str, caption: str, test: str = "") -> None:
        """A file under the report directory's artifacts/ (plots, curves) to list in it."""
        self.artifacts.append({"name": name, "caption": caption, "test": test})

    def to_json(self) -> dict:
        return {"meta": {**self.meta, "gpus": self.gpus()},
                "results": [r.as_dict() for r in self.results],
                "artifacts": self.artifacts}

    def write(self, directory: Path) -> tuple[Path, Path, Path]:
        """gpuchar-results.json, gpuchar-summary.md and index.html (the page rendered from the
        JSON's own document, so a saved run's page is the same: gpuchar-report html)."""
        from .html import write_report
        directory.mkdir(parents=True, exist_ok=True)
        doc = json.loads(json.dumps(self.to_json(), default=str))
        # each file whole or as it was: a run killed while writing leaves no half report for
        # the next night to read as its previous run
        jpath = directory / "gpuchar-results.json"
        atomic_write(jpath, dumps(doc))
        mpath = directory / "gpuchar-summary.md"
        atomic_write(mpath, self.markdown())
        return jpath, mpath, write_report(doc, directory, self.generations)

    def board_dependent(self) -> list[str]:
        """Conformance of the figures that vary from board to board: each against its
        model's range from a fleet sample (the expectation's provenance names the boards)."""
        dep = [r for r in self.results if r.boards > 1]
        if not dep:
            return []
        out = ["## Board-dependent figures", "",
               f"{len(dep)} figures vary from board to board; each is judged against its "
               f"model's range from a fleet sample (boards, dates and rule in the expectation's "
               f"provenance). {sum(r.status == Status.FAIL for r in dep)} outside it.", "",
               "| arch | characteristic | board | measured | unit | model's range | boards "
               "| status |", "|---|---|---|---|---|---|---|---|"]
        for r in dep:
            val = "" if r.value is None else f"{r.value:.4g}"
            out.append(f"| {r.arch} | {r.key} | {str(r.provenance.get('uuid', ''))[:12]} | "
                       f"{val} | {r.unit} | {r.expected} | {r.boards} | {r.status.value} |")
        return out + [""]

    def markdown(self) -> str:
        m = self.meta
        out = ["# pytest-gpuchar run", ""]
        for k in ("date", "archs", "device", "driver", "cuda_driver_api", "ptxas",
                  "sm_clock_measured_mhz", "wall_s"):
            if k in m:
                out.append(f"- **{k}**: {m[k]}")
        gpus = self.gpus()
        if len(gpus) > 1:
            out.append("- **GPUs**: " + "; ".join(
                f"{g['device_index']} {g['uuid']} ({g['device']}, {g['results']} results)"
                for g in gpus))
        out += ["", "Status counts: " + ", ".join(f"{k} {v}" for k, v in self.counts().items()),
                ""]
        out += board_markdown(m.get("boards") or [])
        groups = [("Failed or unstable", (Status.FAIL, Status.UNSTABLE, Status.INVALID,
                                          Status.ERROR)),
                  ("Measured", (Status.PASS, Status.MEASURED)),
                  ("Notes (mappings against the paper, JIT vs ptxas)", (Status.INFO,))]
        for title, sts in groups:
            rows = [r for r in self.results if r.status in sts]
            if not rows:
                continue
            out += [f"## {title}", "",
                    "| arch | characteristic | measured | unit | spread | expected | deviation "
                    "| status | detail |", "|---|---|---|---|---|---|---|---|---|"]
            for r in rows:
                val = "" if r.value is None else f"{r.value:.2f}"
                spr = "" if r.spread is None else f"{r.spread:.2f}"
                dev = "" if r.deviation is None else f"{r.deviation:+.2f}"
                detail = r.detail.replace("|", "/").replace("\n", " ")[:160]
                out.append(f"| {r.arch} | {r.key} | {val} | {r.unit} | {spr} | {r.expected} | "
                           f"{dev} | {r.status.value} | {detail} |")
            out.append("")
        out += self.board_dependent()
        out += literature_markdown(self.results)
        out += jitdiff.markdown(jitdiff.summary(self.results))
        out += durations.markdown(m.get("time_by_topic", {}))
        out += fleet.markdown(fleet.compare(self.results))
        if self.generations is not None:
            out += generations.markdown(self.generations)
        if self.artifacts:
            out += ["## Plots and data", ""]
            for a in self.artifacts:
                link = f"{ARTIFACTS}/{a['name']}"
                shown = f"![{a['caption']}]({link})" if a["name"].endswith(".png") else \
                    f"[{a['name']}]({link})"
                if a.get("error"):
                    shown = f"{a['name']} was not written: {a['error']}"
                out += [f"**{a['caption']}** ({a['test']})", "", shown, ""]
        return "\n".join(out) + "\n"


def literature_markdown(results: list[Result]) -> list[str]:
    """The figures whose expectation cites published values (`literature:`): the measured
    value beside each paper's figure, with where it is printed and how the paper measured it
    (shown, never judged)."""
    rows = [r for r in results if r.literature and r.value is not None]
    if not rows:
        return []
    out = ["## Beside the literature", "",
           "Published figures for the same characteristics (expectation files, `literature:`); "
           "not judged: the paper's method differs as its row says.", "",
           "| arch | characteristic | measured | status | paper | where | the paper's method |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        for lit in r.literature:
            how = lit.get("method", "") + (f" ({lit['note']})" if lit.get("note") else "")
            cells = [r.arch, r.key, f"{r.value:.4g} {r.unit}", r.status.value,
                     lit.get("figure", ""), lit.get("source", ""), how]
            out.append("| " + " | ".join(c.replace("|", "/").replace("\n", " ")
                                         for c in cells) + " |")
    return out + [""]

