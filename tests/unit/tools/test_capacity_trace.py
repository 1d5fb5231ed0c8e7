"""tools/gpu-host/capacity_trace.py (issue 33: the GPU call's capacity text): the bisection
trace of each capacity, the driver's note, the run-to-run move, and update commands that
`gpuchar-expectations update` accepts and that write what the run measured."""
from __future__ import annotations

import importlib.util
import json
import shlex
import shutil
from pathlib import Path

from pytest_gpuchar.cli.expectations import main as expectations_main
from pytest_gpuchar.results import expectations as E

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "tools" / "gpu-host" / "capacity_trace.py"
spec = importlib.util.spec_from_file_location("capacity_trace", TOOL)
ct = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ct)
MiB = 2 ** 20
PROV = {"arch": "sm_90", "device": "NVIDIA H200", "uuid": "GPU-0123456789ab",
        "date": "2026-11-29T00:00:00+00:00"}


def capacity(key, lo, hi, plateau):
    steps = [{"footprint_bytes": (lo + hi) // 2, "latency_cycles": plateau * 1.2,
              "on_level": False, "spread_cycles": 3.0, "warm": "first"}]
    data = {"footprint_bytes": [lo // 2, lo, hi, hi * 2],
            "latency_cycles": [plateau, plateau, 2 * plateau, 2 * plateau],
            "spread_cycles": [1.0] * 4,
            "bisection": {"lo": lo, "hi": hi, "resolution": (hi - lo) / lo, "rel": 0.05,
                          "plateau_cycles": plateau, "limit_cycles": plateau * 1.05,
                          "above_cycles": 2 * plateau, "steps": steps}}
    return {"key": key, "arch": "sm_90", "status": "pass", "value": float(lo),
            "unit": "bytes", "detail": f"capacity in [{lo}, {hi})", "data": data,
            "provenance": PROV, "method": "bisected"}


def report(tmp_path, name, l2):
    results = [capacity("memory.capacity.l1", 203 * 1024, 209 * 1024, 32.0),
               capacity("memory.capacity.l2_near", 28 * MiB, 28.8 * MiB, 281.0),
               capacity("memory.capacity.l2", l2, int(l2 * 1.029), 510.0),
               {"key": "memory.capacity.l2_driver", "arch": "sm_90", "status": "info",
                "value": 60.0 * MiB, "detail": "driver l2CacheSize 60 MiB; 0.97 x"}]
    path = tmp_path / name
    path.write_text(json.dumps({"meta": {**PROV, "driver": "580"}, "results": results}))
    return str(path)


def test_trace_and_the_update_commands_write_the_figures(tmp_path, capsys):
    one = report(tmp_path, "r1.json", 58 * MiB)
    two = report(tmp_path, "r2.json", 59 * MiB)
    ct.main([one, two])
    out = capsys.readouterr().out
    assert "rule: <= 535.5 cycles (plateau 510.0 + 5%)" in out
    assert "off" in out and "driver: driver l2CacheSize 60 MiB; 0.97 x" in out
    assert "memory.capacity.l2: ['58.00 MiB', '59.00 MiB'] (moved 1.7%)" in out
    commands = [ln for ln in out.splitlines() if ln.startswith("python3 -m pytest_gpuchar")]
    assert len(commands) == 2 and "--device 'NVIDIA H200'" in commands[1]
    root = tmp_path / "expectations"
    shutil.copytree(ROOT / "expectations", root)
    (tmp_path / "results" / "sm_90" / "fleet").mkdir(parents=True)
    shutil.copy(ROOT / "results" / "sm_90" / "fleet" / "sample.jsonl.gz",
                tmp_path / "results" / "sm_90" / "fleet")
    for c in commands:
        assert expectations_main(["--root", str(root)] + shlex.split(c)[3:]) == 0
    text = (root / "memory" / "sm_90.yaml").read_text()
    e = E.parse(text, root / "memory" / "sm_90.yaml")
    dev = e.devices["NVIDIA H200"]
    # the device command adds the run's board to the H200 fleet sample beside the files (a
    # copy here) and derives the contract again: the board's 58 MiB is within it
    assert dev["memory.capacity.l2"].check(58 * MiB)
    from pytest_gpuchar.results import sample as S
    docs = S.read(tmp_path / "results" / "sm_90" / "fleet" / "sample.jsonl.gz")
    assert any(d["meta"]["uuid"] == "GPU-0123456789ab" for d in docs)
    assert e.characteristics["memory.capacity.l1"].value == 203 * 1024
