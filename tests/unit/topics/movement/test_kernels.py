"""The movement probes (topics/movement/kernels.py, chases.py, streams.py, probes.py, run.py)
without a compiler: which probes exist on which arch (and why not), the modules the registry
compiles, the PTX each kernel must carry, and the verification of counted chains and stream
loops on synthetic SASS."""
from __future__ import annotations

import re

import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.core.verify import ProbeInvalid
from pytest_gpuchar.topics.movement import chases, kernels, rows, run, streams
from pytest_gpuchar.topics.movement.probes import (AtomicChainProbe, CountProbe, StreamProbe,
                                                 executed)


def test_probes_per_arch():
    assert len(run.suite_probes("sm_90")) == 39
    older = {p.name for p in run.suite_probes("sm_80")}
    assert older == {f"movement/bandwidth/{r.id}" for r in rows.STREAM_ROWS} | {
        "movement/async/cp_async.ca", "movement/async/cp_async.cg", "movement/l2/by_sm",
        "movement/l2/by_sm_atomic", "movement/loaded/chase"}
    assert run.suite_probes("sm_75") == [] and run.groups("sm_70") == []


@pytest.mark.parametrize("make, why", [
    (lambda: run.cluster_probe("dsm.u32", "sm_89"), "thread-block clusters: sm_90\\+ only"),
    (lambda: run.tma_probe("multicast", "sm_80"), "TMA multicast.*sm_90\\+ only"),
    (lambda: chases.async_probe(rows.Async.TRY_WAIT, "sm_86"), "mbarrier.*sm_90\\+"),
    (lambda: chases.async_probe(rows.Async.CP_ASYNC_CG, "sm_75"), "cp.async copies: sm_80\\+"),
    (lambda: streams.stream_probe(rows.STREAMS[rows.Stream.L2], "sm_70"), "sm_80\\+ only"),
])
def test_missing_features_are_not_applicable_with_the_reason(make, why):
    with pytest.raises(NotApplicable, match=why):
        make()


def test_groups_and_targets():
    main, extra = run.groups("sm_90")
    assert (main.name, main.arch, main.split) == ("movement", "sm_90", True)
    assert extra.arch == "sm_90a" and {p.name for p in extra.probes} == {
        "movement/tma/multicast", "movement/tma/separate"}
    assert ".target sm_90a" in extra.probes[0].ptx
    text = "".join(p.kernels for p in main.probes + extra.probes)
    entries = re.findall(r"\.visible \.entry (\w+)\(", text)
    assert len(entries) == len(set(entries))
    shared = re.findall(r"\.shared[^\n]* (\w+)\[", text)
    assert len(shared) == len(set(shared))


def test_cluster_kernels_declare_the_explicit_cluster():
    for name in ("dsm.u32", "dsm.generic", "barrier", "barrier_relaxed", "dsm_bandwidth"):
        assert ".explicitcluster" in run.cluster_probe(name, "sm_90").kernels
    assert ".explicitcluster" not in run.cluster_probe("launch", "sm_90").kernels
    mc = run.tma_probe("multicast", "sm_90").kernels
    assert ".multicast::cluster" in mc and ".explicitcluster" in mc
    assert ".multicast::cluster" not in run.tma_probe("separate", "sm_90").kernels


def test_tensor_kernels_take_the_map_as_an_aligned_parameter():
    for mech in (rows.Mechanism.TENSOR1D, rows.Mechanism.TENSOR2D):
        k = kernels.tma_probe(mech, "sm_90").kernels
        assert ".param .align 128 .b8 tmap_param[128]" in k and "cvta.param.u64" in k
    assert "tmap_param" not in kernels.tma_probe(rows.Mechanism.BULK, "sm_90").kernels


def test_loaded_streamers_count_themselves_once_per_cta():
    k = chases.loaded_probe("sm_90").kernels
    assert "@%more red.global.add.u32 [%counter], 1;" in k


# --- verification on synthetic SASS --------------------------------------------------------------

def _function(name: str, lines: list[str]) -> sass.Function:
    out, off = [f"//--------------------- .text.{name} --------------------------"], 0
    for line in lines:
        if line.endswith(":"):
            out.append(line)
            continue
        out.append(f"        /*{off:04x}*/                   {line} ;")
        off += 16
    return sass.parse("\n".join(out))[name]


GUARD = ["CS2R R2, SR_CLOCKLO", "ISETP.NE.U32.AND P0, PT, R2, -0x1, PT",
         "ISETP.NE.U32.AND.EX P0, PT, R3, -0x1, PT, P0", "@!P0 BRA `(.L_x_9)"]
END = [".L_x_9:", "CS2R R10, SR_CLOCKLO", "STG.E.64 desc[UR4][R12.64], R10", "EXIT"]


def _stream(body: list[str], tail: list[str] = ()) -> dict[str, sass.Function]:
    lines = ["S2R R5, SR_TID.X", *GUARD, "IMAD.SHL.U32 R5, R5, 0x4, RZ", ".L_x_0:", *body,
             "IADD3 R5, R5, 0x400, RZ", "ISETP.NE.AND P1, PT, R5, R8, PT", "@P1 BRA `(.L_x_0)",
             *END, *tail]
    return {"k": _function("k", lines)}


def _stream_probe(**kw) -> StreamProbe:
    return StreamProbe("s", "sm_90", "", {8: "k", 16: "k"}, {8: 8, 16: 16}, **kw)


def test_stream_loop_holds_exactly_its_loads():
    funcs = _stream(["LDS R4, [R5]", "LDS R6, [R5+0x200]", "LOP3.LUT R7, R4, R6, R7, 0x96, !PT"])
    v = _stream_probe(loop={"LDS": 2}).check(funcs)
    assert v.unit["LDS"] == 2 and v.message == "stream"
    with pytest.raises(ProbeInvalid, match="loop body: memory instructions"):
        _stream_probe(loop={"LDS": 3}).check(funcs)


def test_stream_region_with_another_memory_access_is_invalid():
    funcs = _stream(["LDS R4, [R5]", "STS [R5], R4"])
    with pytest.raises(ProbeInvalid, match="unexpected instructions.*STS"):
        _stream_probe(loop={"LDS": 1}).check(funcs)


def test_stream_without_a_loop_is_invalid():
    funcs = {"k": _function("k", [*GUARD, "LDS R4, [R5]", *END])}
    with pytest.raises(ProbeInvalid, match="no loop"):
        _stream_probe(loop={"LDS": 1}).check(funcs)


def test_stream_tail_behind_exit_is_checked():
    funcs = _stream(["LDS R4, [R5]"], ["SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R3",
                                       "@!P0 BRA `(.L_x_0)", "BRA `(.L_x_9)"])
    assert _stream_probe(loop={"LDS": 1}, tail=("SYNCS.PHASECHK.TRANS64*",)).check(funcs)
    with pytest.raises(ProbeInvalid, match="behind EXIT"):
        _stream_probe(loop={"LDS": 1}).check(funcs)


def _chain(n: int, step: list[str], extra: list[str] = ()) -> sass.Function:
    return _function(f"c{n}", [*GUARD, *extra, *[s for _ in range(n) for s in step], *END])


def _count_probe(**kw) -> CountProbe:
    return CountProbe("c", "sm_90", "", {2: "c2", 4: "c4"}, {2: 2, 4: 4}, **kw)


def test_counted_chain_allows_side_instructions_only():
    step = ["R2UR UR4, R8", "UBLKCP.S.G [UR8], [UR4], UR6", "LDS R8, [UR8]"]
    funcs = {"c2": _chain(2, step, ["UMOV UR6, 0x40"]), "c4": _chain(4, step)}
    v = _count_probe(counts={"UBLKCP.S.G": 1, "LDS": 1}).check(funcs)
    assert v.unit["UBLKCP.S.G"] == 1.0 and v.message == "counted"
    with pytest.raises(ProbeInvalid, match="length 2: instructions"):
        _count_probe(counts={"UBLKCP.S.G": 2, "LDS": 1}).check(funcs)
    bad = {"c2": _chain(2, step + ["LDG.E R9, desc[UR4][R2.64]"]), "c4": _chain(4, step)}
    with pytest.raises(ProbeInvalid, match="unexpected instructions.*LDG.E"):
        _count_probe(counts={"UBLKCP.S.G": 1, "LDS": 1}).check(bad)


def test_never_executed_placeholders_are_left_out():
    f = _function("k", ["@!PT LDS RZ, [RZ]", "MEMBAR.ALL.CTA", "FENCE.VIEW.ASYNC.S"])
    assert [i.opcode for i in executed(f.instrs)] == ["MEMBAR.ALL.CTA", "FENCE.VIEW.ASYNC.S"]


def test_atomic_chain_must_use_each_result():
    ok = ["ATOMG.E.ADD.64.STRONG.GPU PT, R16, desc[UR4][R14.64], RZ",
          "ATOMG.E.ADD.64.STRONG.GPU PT, R18, desc[UR4][R16.64], RZ"]
    broken = ["ATOMG.E.ADD.64.STRONG.GPU PT, R16, desc[UR4][R14.64], RZ",
              "ATOMG.E.ADD.64.STRONG.GPU PT, R18, desc[UR4][R14.64], RZ"]

    def probe():
        return AtomicChainProbe("a", "sm_90", "", {1: "c1", 2: "c2"}, {1: 1, 2: 2},
                                unit=("ATOMG.E.ADD.64.STRONG.GPU",))
    funcs = {"c1": _function("c1", [*GUARD, ok[0], *END]), "c2": _function("c2", [*GUARD, *ok,
                                                                                   *END])}
    assert probe().check(funcs).ok
    funcs["c2"] = _function("c2", [*GUARD, *broken, *END])
    with pytest.raises(ProbeInvalid, match="chain broken"):
        probe().check(funcs)
