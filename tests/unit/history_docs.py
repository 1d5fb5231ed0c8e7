"""Reports for the history store's tests: the committed runs and small synthetic ones."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "results" / "sm_90" / "nvidia-h100-80gb-hbm3" / "gpuchar-results.json.gz"
H200 = ROOT / "results" / "sm_90" / "nvidia-h200" / "gpuchar-results.json.gz"
H200_X2 = ROOT / "results" / "sm_90" / "nvidia-h200" / "fleet-2x" / "gpuchar-results.json.gz"
MODEL = "NVIDIA H100 80GB HBM3"


def result(key, value, board=None, *, status="pass", unit="cycles", spread=0.0, arch="sm_90",
           driver="580.159.04", device=MODEL, index=0, **kw) -> dict:
    prov = {"device": device, "device_index": index, "uuid": board, "arch": arch,
            "sm_count": 132, "driver": driver, "cuda_driver_api": "13.0",
            "cuda_runtime": "13.2", "ptxas": "12.8.93", "sm_clock_max_mhz": 1980.0,
            "sm_clock_measured_mhz": 1980.0} if board else {}
    r = {"key": key, "arch": arch, "status": status, "value": value, "unit": unit,
         "spread": spread, "expected": "", "deviation": None, "source": "", "method": "",
         "test": f"tests/t.py::test[{key}]", "detail": "", "data": {}, "provenance": prov,
         "allowance": None, "noise_rel": 0.0, "noise_source": ""}
    r.update(kw)
    return r


def report(date: str, results: list[dict], *, exitstatus: int = 0, **meta) -> dict:
    """A gpuchar-results.json of `results` (their boards listed in meta.gpus)."""
    gpus = {}
    for r in results:
        p = r["provenance"]
        if p.get("uuid"):
            g = gpus.setdefault(p["uuid"], {"device_index": p.get("device_index"),
                                            "uuid": p["uuid"], "device": p.get("device"),
                                            "results": 0})
            g["results"] += 1
    first = next(iter(gpus.values()), {})
    m = {"date": date, "archs": ["sm_90"], "exitstatus": exitstatus, "skipped": {},
         "measured_skips": {}, "device": first.get("device"),
         "device_index": first.get("device_index"), "uuid": first.get("uuid"),
         "arch": "sm_90", "driver": results[0]["provenance"].get("driver") if results else None,
         "gpus": list(gpus.values())}
    m.update(meta)
    return {"meta": m, "results": results, "artifacts": []}


def nightly(doc: dict, date: str, code: int, changes=()) -> dict:
    """A nightly.json around the report `doc`."""
    return {"schema": 1, "date": date, "exit": code, "verdict": "x", "pytest_exit": 0,
            "pytest_command": ["-m", "pytest"], "wall_s": 1.0, "previous": None,
            "environment": {"before": {"device": doc["meta"]["device"], "arch": "sm_90",
                                       "sm_clock_measured_mhz": 1980.0},
                            "after": {"sm_clock_measured_mhz": 1975.0},
                            "toolkit": {"ptxas": ["12.8.93 (triton)"],
                                        "nvdisasm": ["12.4.99 (triton)"]},
                            "CUDA_CACHE_DISABLE": "1", "throttling": []},
            "status_counts": {}, "skipped": {}, "changes": list(changes),
            "repeatability": None, "meta": doc["meta"], "results": doc["results"]}
