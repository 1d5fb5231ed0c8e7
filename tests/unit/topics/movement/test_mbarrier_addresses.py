"""Every mbarrier operation of the movement probes acts on an initialised mbarrier (PTX ISA,
"Lifecycle of the mbarrier object": an mbarrier object must be initialised prior to use).
Read from each kernel's PTX without a compiler: the registers given to mbarrier.init are the
barriers; every other register that addresses an mbarrier (arrive, expect_tx, test_wait,
try_wait, a bulk copy's completion barrier) may only ever hold one of them (a mov or a selp of
barriers), and no barrier register is written again after its init. The wait chains broke
this once (issue 33 item 11): the pass loop's record turned the chain's address into an offset
from the first barrier, so the second pass arrived on shared address 0 (CUDA error 719)."""
from __future__ import annotations

import re

import pytest

from pytest_gpuchar.topics.movement import chases, rows, run

INIT = re.compile(r"^mbarrier\.init\S* \[(%\w+)\]")
# the barrier operand of an mbarrier instruction or of a copy completing on one
USE = re.compile(r"^(?:mbarrier\.(?!init)\S+ [^\[]*|cp\.async\.bulk\S*mbarrier::\S+ .*)"
                 r"\[(%\w+)(?:\+\d+)?\][^\[]*$")
BARRIER_COPY = re.compile(r"^(?:mov\.[bu]32 \S+, (%\w+)|selp\.[bu]32 \S+, (%\w+), (%\w+), \S+)$")


def _instructions(kernel: str) -> list[str]:
    """The instructions of one kernel's body, guards stripped, one per line."""
    body = kernel[kernel.index("{") + 1:]
    out = []
    for line in body.splitlines():
        line = re.sub(r"^@!?%\w+ ", "", line.strip())
        if line and not line.startswith((".", "$", "}")):
            out.append(line.rstrip(";"))
    return out


def _dest(instr: str) -> str | None:
    ops = instr.split(" ", 1)
    if len(ops) < 2 or ops[1].startswith("["):
        return None
    return ops[1].split(",")[0].strip()


def barrier_misuse(kernel: str) -> list[str]:
    """What in one kernel's PTX may address something that is not an initialised mbarrier."""
    instrs = _instructions(kernel)
    inits = {m.group(1): i for i, s in enumerate(instrs) if (m := INIT.match(s))}
    problems = []
    for i, s in enumerate(instrs):
        d = _dest(s)
        if d in inits and i > inits[d]:
            problems.append(f"barrier register {d} written after its init: {s}")
    for reg in {m.group(1) for s in instrs if (m := USE.match(s))} - set(inits):
        for s in (s for s in instrs if _dest(s) == reg):
            m = BARRIER_COPY.match(s)
            if not m or not {g for g in m.groups() if g} <= set(inits):
                problems.append(f"{reg} addresses an mbarrier but may hold another value: {s}")
    if not inits and any(USE.match(s) for s in instrs):
        problems.append("mbarrier operations without an mbarrier.init")
    return problems


def _kernels(text: str) -> list[str]:
    return [k for k in re.split(r"\n(?=\.shared|\.visible)", text) if ".entry" in k]


@pytest.mark.parametrize("arch", ["sm_90", "sm_100", "sm_120"])
def test_every_mbarrier_operation_addresses_an_initialised_barrier(arch):
    checked = 0
    for probe in run.suite_probes(arch):
        for k in _kernels(probe.kernels):
            if "mbarrier" in k:
                assert barrier_misuse(k) == [], probe.name
                checked += 1
    assert checked >= 15    # the mbarrier rows, TMA chains, multicast rounds, bulk streams


@pytest.mark.parametrize("kind", [rows.Async.TEST_WAIT, rows.Async.TRY_WAIT])
def test_the_wait_chains_record_their_offset_without_moving_the_chain(kind):
    """The pass loop carries %a into the next pass: the record's offset has its own
    register."""
    text = chases.mbarrier_kernel("k", 16, kind)
    assert "sub.u32 %v, %a, %b0;" in text and "st.global.u32 [%out+16], %v;" in text
    assert barrier_misuse(text) == []


def test_the_check_finds_the_old_wait_chain_fault():
    """The kernel as it faulted (the offset computed into the chain's address) and the other
    ways a barrier address can go wrong are each reported."""
    good = chases.mbarrier_kernel("k", 16, rows.Async.TEST_WAIT)
    old = good.replace("sub.u32 %v, %a, %b0;", "sub.u32 %a, %a, %b0;")
    assert barrier_misuse(old) == [
        "%a addresses an mbarrier but may hold another value: sub.u32 %a, %a, %b0"]
    moved = good.replace("mov.u32 %it, 0;", "mov.u32 %it, 0;\nadd.u32 %b1, %b1, 4;")
    assert barrier_misuse(moved) == [
        "barrier register %b1 written after its init: add.u32 %b1, %b1, 4"]
    uninit = good.replace("mbarrier.init.shared::cta.b64 [%b1], 1;\n", "")
    assert barrier_misuse(uninit) == [
        "%a addresses an mbarrier but may hold another value: selp.b32 %a, %b0, %b1, %ok"] * 16
