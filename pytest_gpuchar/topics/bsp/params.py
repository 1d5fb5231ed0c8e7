"""The Many-BSP parameters (the report's Table 1-8: launch overheads, bar.sync, issue cycle,
memory latencies, per-unit throughput) from a run's results: ``model_parameters`` is what
``gpuchar-model-params`` exports (cli/model_params.py writes it as YAML). ``Values`` gives
those results for one arch and device: this session's own results first, then the
expectation files' values (the device's section first), each with where it came from; its
``report`` is a results file in the shape ``model_parameters`` reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...core import archs

SCHEDULERS_PER_SM = archs.SCHEDULERS_PER_SM
USABLE = ("pass", "measured")

# Many-BSP Table 1-8 names -> characteristic keys of a gpuchar run (first found wins)
MODEL_KEYS = {
    "warp_lnch_ovh": ["throughput.launch.warp"],
    "block_lnch_ovh": ["throughput.launch.block"],
    "issue_cycle": ["throughput.launch.issue_cycle"],
    "bar_sync_ovh_256": ["throughput.bar_sync.nt256"],
    "bar_sync_ovh_1024": ["throughput.bar_sync.nt1024"],
    # Many-BSP's mem_lat = G2 is the global-memory (DRAM) latency; the memory suite's
    # pointer chase with ld.global.cv (Ampere paper Table IV's "global") first
    "mem_lat": ["memory.latency.dram_cv", "memory.latency.dram_ca", "memory.latency.dram",
                "memory.latency.global"],
    "l2_lat": ["memory.latency.l2_hit", "memory.latency.l2"],
    "l1_lat": ["memory.latency.l1_hit", "memory.latency.l1"],
    "shared_lat": ["memory.latency.shared_load"],
}
FU_PREFIX = "throughput.unit."


def _missing(report: dict, arch: str, keys: list[str]) -> str:
    """Why none of `keys` gave a value: not in the run, or in it with an unusable status
    (an unstable figure is not exported as a model input)."""
    seen = {r["key"]: r.get("status") for r in report.get("results", [])
            if r.get("arch") == arch and r.get("key") in keys}
    if not seen:
        return f"not measured in this run (looked for {', '.join(keys)})"
    return "no usable measurement in this run: " + ", ".join(
        f"{k} {seen[k]}" for k in keys if k in seen)


def model_parameters(report: dict, arch: str, n_ws: int = SCHEDULERS_PER_SM) -> dict:
    """The Many-BSP model's inputs (Table 1-8 names) from a gpuchar JSON report: each with the
    measured value, its unit and the characteristic it came from (null with the reason when
    the run did not measure it), plus n_fu^i: results per clock per SM of each functional-unit
    row. Only results that passed or were measured (not unstable, invalid or failed) count."""
    ok = {r["key"]: r for r in report.get("results", [])
          if r.get("arch") == arch and r.get("value") is not None
          and r.get("status") in USABLE}
    meta = report.get("meta", {})
    params: dict = {}
    for name, keys in MODEL_KEYS.items():
        hit = next((k for k in keys if k in ok), None)
        if hit:
            r = ok[hit]
            params[name] = {"value": round(float(r["value"]), 3), "unit": r.get("unit", ""),
                            "from": hit}
        else:
            params[name] = {"value": None, "reason": _missing(report, arch, keys)}
    fu = {k[len(FU_PREFIX):]: round(float(r["value"]), 2) for k, r in sorted(ok.items())
          if k.startswith(FU_PREFIX)}
    prov = next((r.get("provenance") for r in ok.values() if r.get("provenance")), {}) or {}
    return {
        "schema": 1,
        "model": "Many-BSP (Riahi et al.), Table 1-8 parameters",
        "arch": arch,
        "device": prov.get("device") or meta.get("device"),
        "provenance": {k: prov.get(k, meta.get(k)) for k in
                       ("device", "driver", "cuda_driver_api", "ptxas", "sm_count",
                        "sm_clock_max_mhz", "sm_clock_measured_mhz", "date")},
        "warp_size": 32,
        "n_ws": n_ws,
        "n_SM": prov.get("sm_count"),
        "parameters": params,
        "n_fu_results_per_clk_per_sm": fu,
    }


@dataclass(frozen=True)
class ParamValue:
    key: str
    value: float
    unit: str
    source: str          # "this session" or the expectation entry's file:line


class Values:
    """Characteristic values of one arch for one device: ``results`` (this session's, as
    dicts) first where they passed or were measured, then the expectation files' (``exp``:
    ArchExpectations; the device's section first). A range (a model's entry spanning its
    boards, `gpuchar-expectations update --fleet`) gives its midpoint; other expectations
    without a single value are left out."""

    def __init__(self, arch: str, results: list[dict] = (), exp=None,
                 device: str | None = None) -> None:
        self.arch, self.exp, self.device = arch, exp, device
        self.session = {r["key"]: r for r in results if r.get("arch") == arch
                        and r.get("value") is not None and r.get("status") in USABLE}

    def get(self, key: str) -> ParamValue | None:
        r = self.session.get(key)
        if r is not None:
            return ParamValue(key, float(r["value"]), r.get("unit", ""), "this session")
        e = self.exp.get(key, self.device) if self.exp is not None else None
        if e is not None and e.value is None and e.range is not None:
            lo, hi = e.range
            return ParamValue(key, (lo + hi) / 2, e.unit,
                         f"{e.origin} (midpoint of the boards' range {lo:g}-{hi:g})")
        if e is None or e.value is None:
            return None
        return ParamValue(key, float(e.value), e.unit, e.origin)

    def __call__(self, key: str) -> float | None:
        v = self.get(key)
        return None if v is None else v.value

    def keys(self) -> list[str]:
        names = set(self.session)
        if self.exp is not None:
            names |= set(self.exp.characteristics) | set(self.exp.devices.get(self.device, {}))
        return sorted(names)

    def report(self, provenance: dict | None = None) -> dict:
        """These values as a results file (each passed), for ``model_parameters``."""
        out = []
        for k in self.keys():
            v = self.get(k)
            if v is not None:
                out.append({"key": k, "arch": self.arch, "value": v.value, "unit": v.unit,
                            "status": "pass", "source": v.source,
                            "provenance": dict(provenance or {})})
        return {"results": out, "meta": dict(provenance or {})}


def parameters(values: Values, sm_count: int | None, provenance: dict | None = None) -> dict:
    """Table 1-8 from these values (model_parameters), the SM count the device's own, each
    parameter annotated with the source of its value."""
    p = model_parameters(values.report(provenance), values.arch)
    if sm_count:
        p["n_SM"] = sm_count
    for entry in p["parameters"].values():
        if entry.get("from"):
            entry["source"] = short_source(values.get(entry["from"]).source)
    return p


def short_source(source: str) -> str:
    """An expectation entry's origin as "<topic>/<arch>.yaml:<line>" (or "<arch>.yaml:<line>"),
    without the machine's path; "this session" as is."""
    if ":" not in source:
        return source
    path, line = source.rsplit(":", 1)
    p = Path(path)
    name = p.name if p.parent.name in ("", "expectations") else f"{p.parent.name}/{p.name}"
    return f"{name}:{line}"


def missing(params: dict, names: tuple[str, ...]) -> list[str]:
    """The parameters among ``names`` this run lacks, with the keys looked for."""
    return [f"{n} ({params['parameters'][n]['reason']})" for n in names
            if params["parameters"].get(n, {}).get("value") is None]
