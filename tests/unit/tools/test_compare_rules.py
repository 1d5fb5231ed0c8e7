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


def res(key, value, spread, run, exact=False, unit="cycles"):
    return {"key": key, "arch": "sm_90", "value": value, "spread": spread, "status": "pass",
            "unit": unit, "noise": {"run": run, "board": 1.0, "exact": exact, "grid": False}}


def test_flags_and_injected_moves(tmp_path):
    """A placement figure that moved 3% against a one-cycle spread: flagged by the spreads +
    1%, not by the gate (run noise 4.9 cycles); an exact latency that did not move: flagged by
    neither, and its one-cycle moves caught by the gate only (1% of 256 is 2.6 cycles)."""
    old = [res("movement.cluster.barrier.c2", 338.0, 1.0, 4.9),
           res("tensor.wgmma.lat", 256.0, 0.0, 0.0, exact=True)]
    new = [res("movement.cluster.barrier.c2", 328.4, 1.0, 4.9),
           res("tensor.wgmma.lat", 256.0, 0.0, 0.0, exact=True)]
    files = {}
    for name, results in (("old", old), ("new", new)):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps({"meta": {"uuid": "GPU-1"}, "results": results}))
    assert rules.cf.main([str(files["old"]), str(files["new"]), "--out",
                          str(tmp_path / "cmp")]) == 1
    got = rules.evaluate({"results": new}, [tmp_path / "cmp.md"])
    (c,) = got["comparisons"]
    assert c["figures"] == 2 and c["issue"] == ["movement.cluster.barrier.c2"] and c["gate"] == []
    assert got["exact"] == {"n": 2, "issue": 0, "gate": 2}
    ten = got["caught"][0.10]
    assert ten["n"] == 4 and ten["gate"] == 3   # c2 +10%, 361.2: 23 cycles from 338, in 35
    md = rules.markdown(got, "new.json")
    assert "| +-10% | 4 |" in md and "the issue's rule 0 of 1, the gate 1 of 1" in md
