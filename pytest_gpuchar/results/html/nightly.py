"""The nightly's page (nightly.html beside nightly.md), rendered from the same document
(nightly.json): the verdict and the changes against the previous night on top (regressions,
changes within tolerance, notes; the SASS diffs; other failed tests; throttling and board
flags), then the night's run as the report page shows it."""
from __future__ import annotations

from pathlib import Path

from ..changes import measured_clock
from .page import report_context

GROUPS = (("regression", "Regressions"), ("change", "Changes within tolerance"),
          ("note", "Notes"))


def _environment(doc: dict) -> dict:
    env = doc.get("environment") or {}
    before, after = env.get("before") or {}, env.get("after") or {}
    return {"device": before.get("device") or before.get("no_gpu") or before.get("error", "?"),
            "arch": before.get("arch", "-"), "sm_count": before.get("sm_count", "-"),
            "driver": before.get("driver", "-"),
            "cuda_driver_api": before.get("cuda_driver_api", "-"),
            "cuda_runtime": before.get("cuda_runtime", "-"),
            "ptxas": ", ".join((env.get("toolkit") or {}).get("ptxas") or []) or "none",
            "clock_start": measured_clock(before), "clock_end": measured_clock(after),
            "clock_max": before.get("sm_clock_max_mhz", "-"),
            "jit_cache": env.get("CUDA_CACHE_DISABLE"),
            "throttling": env.get("throttling") or [],
            "board_start": before.get("board") or {}, "board_end": after.get("board") or {}}


def nightly_context(doc: dict, artifacts: list[dict] | None = None,
                    artifacts_dir: Path | None = None) -> dict:
    """Everything nightly.html.j2 shows, from nightly.json's document (and the run's
    artifacts list, which nightly.json does not carry)."""
    from ...core.nvml import summary
    changes = [c for c in doc.get("changes") or [] if isinstance(c, dict)]
    groups = []
    for sev, title in GROUPS:
        rows = [c for c in changes if c.get("severity") == sev and
                c.get("kind") not in ("sass", "test")]
        groups.append({"severity": sev, "title": title, "rows": rows,
                       "n": sum(c.get("severity") == sev for c in changes)})
    run = report_context({"meta": doc.get("meta") or {}, "results": doc.get("results") or [],
                          "artifacts": artifacts or []}, artifacts_dir)
    env = _environment(doc)
    return dict(run, title=f"gpuchar nightly: {doc.get('verdict', '?')} (exit "
                           f"{doc.get('exit', '?')})",
                doc=doc, env=env, groups=groups,
                sass_changes=[c for c in changes if c.get("kind") == "sass"],
                test_changes=[c for c in changes if c.get("kind") == "test"],
                board_line=summary(env["board_start"]) if env["board_start"] else "",
                skipped=sorted((doc.get("skipped") or {}).items(), key=lambda x: -x[1])[:20]
                if isinstance(doc.get("skipped"), dict) else [],
                repeatability=_repeatability(doc.get("repeatability")))


def _repeatability(rep) -> list[str]:
    if not rep:
        return []
    from ..changes import repeatability_lines
    try:
        return repeatability_lines(rep)
    except (KeyError, TypeError, AttributeError):
        return []
