"""tools/gpu-host/compare_rules.py: the comparison's two rules judged on comparisons already
written by compare_figures.py, with known moves injected into the new run."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[3] / "tools" / "gpu-host"
spec = importlib.util.spec_from_file_location("compare_rules", TOOLS / "compare_rules.py")
rules = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rules)


def res(key, value, spread, unit="cycles"):
    return {"key": key, "arch": "sm_90", "value": value, "spread": spread, "status": "pass",
            "unit": unit}


EXPECTATIONS = {   # the expectation files: an exact latency, the H200's cluster barrier
    "tensor/sm_90.yaml": """schema: 2
arch: sm_90
characteristics:
  tensor.wgmma.lat: {value: 256, unit: cycles, tolerance: {abs: 0}, source: measured,
                     noise: {run: 0, board: 0}}
""",
    "movement/sm_90.yaml": """schema: 2
arch: sm_90
devices:
  NVIDIA H200:
    characteristics:
      movement.cluster.barrier.c2: {range: [312.7, 758.4], tolerance: {abs: 1100},
                                    noise: {run: 4.9, board: 190}, unit: cycles, source: fleet}
"""}


def test_flags_and_injected_moves(tmp_path):
    """A placement figure that moved 3% against a one-cycle spread: flagged by the spreads +
    1%, not by the gate (run noise 4.9 cycles in the H200's section of the expectation
    files); an exact latency that did not move: flagged by neither, and its one-cycle moves
    caught by the gate only (1% of 256 is 2.6 cycles)."""
    meta = {"device": "NVIDIA H200", "uuid": "GPU-1"}
    old = [res("movement.cluster.barrier.c2", 338.0, 1.0), res("tensor.wgmma.lat", 256.0, 0.0)]
    new = [res("movement.cluster.barrier.c2", 328.4, 1.0), res("tensor.wgmma.lat", 256.0, 0.0)]
    files = {}
    for name, results in (("old", old), ("new", new)):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps({"meta": meta, "results": results}))
    assert rules.cf.main([str(files["old"]), str(files["new"]), "--out",
                          str(tmp_path / "cmp")]) == 1
    for name, text in EXPECTATIONS.items():
        (tmp_path / "exp" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "exp" / name).write_text(text)
    got = rules.evaluate([tmp_path / "cmp.md"], "sm_90", tmp_path / "exp")
    (c,) = got["comparisons"]
    assert c["board"] == "GPU-1" and c["figures"] == 2
    assert c["issue"] == ["movement.cluster.barrier.c2"] and c["gate"] == []
    assert got["exact"] == {"n": 2, "issue": 0, "gate": 2}
    ten = got["caught"][0.10]
    assert ten["n"] == 4 and ten["gate"] == 3   # c2 +10%, 361.2: 23 cycles from 338, in 35
    md = rules.markdown(got, "sm_90")
    assert "| +-10% | 4 |" in md and "the issue's rule 0 of 1, the gate 1 of 1" in md
