"""Board to board: one characteristic on several GPUs, the one off the fleet flagged."""
from __future__ import annotations

from pytest_gpuchar.results import fleet
from pytest_gpuchar.results.judge import Result


def R(key, value, gpu, spread=0.1, unit="cycles", status="pass"):
    return Result(key, "sm_90", status, value, unit, spread,
                  provenance={"device": "NVIDIA H200", "device_index": gpu,
                              "uuid": f"GPU-0000000{gpu}-aaaa"})


def test_a_gpu_off_the_fleet_is_flagged():
    results = [R("memory.latency.l2_hit", v, i) for i, v in enumerate([279, 280, 279, 311])]
    results += [R("latency.add.u32", 5.0, i) for i in range(4)]
    results += [R("tensor.x", 3.0, 0), R("tensor.x", 9.0, 1, status="unstable")]
    rows = fleet.compare(results)
    assert [r.key for r in rows] == ["memory.latency.l2_hit", "latency.add.u32"]
    l2 = rows[0]
    assert l2.median == 279.5 and list(l2.flagged) == ["GPU 3 GPU-00000003"]
    assert "311 against the fleet's median 279.5" in l2.flagged["GPU 3 GPU-00000003"]
    assert not rows[1].flagged
    md = "\n".join(fleet.markdown(rows))
    assert "## Board to board" in md and "2 characteristics measured on 4 GPUs; 1 with" in md


def test_one_gpu_is_no_fleet():
    assert fleet.compare([R("latency.add.u32", 5.0, 0)]) == []


def test_two_gpus_that_disagree_are_both_flagged():
    """Of two boards neither is the odd one out, but a gap beyond the noise is shown (the
    fleet's 3-MAD spread needs three boards: of two it never flagged anything)."""
    rows = fleet.compare([R("movement.bandwidth.l2.per_sm", 34.3, 0, unit="B/clk/SM"),
                          R("movement.bandwidth.l2.per_sm", 36.4, 1, unit="B/clk/SM"),
                          R("latency.add.u32", 5.0, 0), R("latency.add.u32", 5.0, 1)])
    by = {r.key: r for r in rows}
    assert len(by["movement.bandwidth.l2.per_sm"].flagged) == 2
    assert not by["latency.add.u32"].flagged
