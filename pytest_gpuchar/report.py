"""Results of a run: each characteristic measured (or checked) with its expectation, status
and provenance; written as JSON (machine-readable) and Markdown (for people)."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .expectations import Expected

ARTIFACTS = "artifacts"   # subdirectory of the report directory for plots and curves
STATUSES = ("pass", "fail", "unstable", "invalid", "measured", "info", "error")


@dataclass
class Result:
    key: str                    # "latency.add.u32"
    arch: str
    status: str                 # see STATUSES
    value: float | None = None
    unit: str = ""
    spread: float | None = None
    expected: str = ""          # human-readable expectation
    deviation: float | None = None
    source: str = ""
    method: str = ""
    test: str = ""
    detail: str = ""
    data: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    allowance: float | None = None   # the expectation's tolerance at this value (abs units)

    @property
    def moved(self) -> bool:
        """Passed, but used more than half of its tolerance: drifting towards the edge."""
        return (self.status == "pass" and self.deviation is not None and
                bool(self.allowance) and abs(self.deviation) > 0.5 * self.allowance)

    def line(self) -> str:
        val = "-" if self.value is None else f"{self.value:.2f}"
        dev = "" if self.deviation is None else f"{self.deviation:+.2f}"
        return f"{self.arch:7s} {self.key:34s} {val:>9s} {self.unit:9s} {self.expected:30s} " \
               f"{dev:>7s} {self.status}"


def judge(key: str, arch: str, value: float, unit: str, spread: float, unstable: bool,
          why: str, exp: Expected | None, **kw) -> Result:
    """Compare one measured value with its expectation."""
    r = Result(key, arch, "measured", value, unit, spread, **kw)
    if value is None or not math.isfinite(value):
        r.status, r.detail = "fail", f"measured value is {value!r}, not a finite number"
    elif unstable:
        r.status, r.detail = "unstable", why
    if exp is not None:
        r.expected = exp.describe()
        r.source = exp.source
        if exp.numeric and value is not None and math.isfinite(value):
            r.deviation = exp.deviation(value)
            if r.deviation is not None:
                r.allowance = exp.allowance(value - r.deviation)
            if r.status == "measured":
                r.status = "pass" if exp.check(value) else "fail"
    return r


class Recorder:
    def __init__(self) -> None:
        self.results: list[Result] = []
        self.meta: dict = {}
        # files a test wrote into the report directory (plots, curves): name, caption, test
        self.artifacts: list[dict] = []

    def add(self, r: Result) -> Result:
        self.results.append(r)
        return r

    def by_status(self, *statuses: str) -> list[Result]:
        return [r for r in self.results if r.status in statuses]

    def add_artifact(self, name: str, caption: str, test: str = "") -> None:
        """A file under the report directory's artifacts/ (plots, curves) to list in it."""
        self.artifacts.append({"name": name, "caption": caption, "test": test})

    def to_json(self) -> dict:
        return {"meta": self.meta, "results": [asdict(r) for r in self.results],
                "artifacts": self.artifacts}

    def write(self, directory: Path) -> tuple[Path, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        jpath = directory / "gpuchar-results.json"
        jpath.write_text(json.dumps(self.to_json(), indent=1, sort_keys=False, default=str))
        mpath = directory / "gpuchar-summary.md"
        mpath.write_text(self.markdown())
        return jpath, mpath

    def markdown(self) -> str:
        m = self.meta
        out = ["# pytest-gpuchar run", ""]
        for k in ("date", "archs", "device", "driver", "cuda_driver_api", "ptxas",
                  "sm_clock_measured_mhz", "wall_s"):
            if k in m:
                out.append(f"- **{k}**: {m[k]}")
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r.status] = counts.get(r.status, 0) + 1
        out += ["", "Status counts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
                ""]
        groups = [("Failed or unstable", ("fail", "unstable", "invalid", "error")),
                  ("Measured", ("pass", "measured")),
                  ("Notes (mappings against the paper, JIT vs ptxas)", ("info",))]
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
                           f"{dev} | {r.status} | {detail} |")
            out.append("")
        if self.artifacts:
            out += ["## Plots and data", ""]
            for a in self.artifacts:
                link = f"{ARTIFACTS}/{a['name']}"
                shown = f"![{a['caption']}]({link})" if a["name"].endswith(".png") else \
                    f"[{a['name']}]({link})"
                out += [f"**{a['caption']}** ({a['test']})", "", shown, ""]
        return "\n".join(out) + "\n"
