"""More latency probes on the shared frame: cp.async round trips, mbarrier arrive/wait chains
and fences (one thread), the L2 chase every SM runs over the heatmap's lines, and the
loaded-latency kernel (CTA 0 chases device memory while the other CTAs stream)."""
from __future__ import annotations

from ...core.ptx import Kernel
from ...core.probe import NotApplicable, Probe
from .kernels import ITERS, OUT, common_regs, load_common, make_probe, only_thread0, record_lines
from .probes import AtomicChainProbe, CountProbe, MovementProbe
from .rows import (ASYNC_LENGTHS, ASYNC_MIN_ARCH, FENCE_LENGTHS, L2_LENGTHS, LOADED_LENGTHS,
                   MBAR_LENGTHS, Async, needs)

CHASE_OP = "ld.global.cg.u64 %p, [%p];"
CHASE_SASS = ("LDG.E.64.STRONG.GPU",)


# --- cp.async round trips ------------------------------------------------------------------------

def cp_async_kernel(entry: str, n: int, op: str) -> str:
    """n dependent 16-byte cp.async (.ca or .cg) round trips: copy the node at p into shared
    memory, wait for the group, read the next node's offset from the copy. Every pass walks
    the same n nodes from the start offset (the L1 is not kept across launches: the first
    pass brings the nodes in, the timed last pass finds them there). Parameters (out, base,
    start offset, iters); thread 0 records (cycles, end offset, SM) of the last pass."""
    dst = f"{entry}_dst"
    step = [f"cp.async.{op}.shared.global [%dst], [%p], 16;", "cp.async.commit_group;",
            "cp.async.wait_group 0;", "ld.shared.u32 %off, [%dst];", "cvt.u64.u32 %o64, %off;",
            "add.u64 %p, %base, %o64;"]
    return Kernel(
        entry=entry, params=[OUT, ".param .u64 base_param", ".param .u64 start_param", ITERS],
        preamble=[f".shared .align 16 .b8 {dst}[16];"],
        decls=common_regs(", %base, %start, %p, %o64", ", %dst, %off"),
        setup=[*load_common(), "ld.param.u64 %base, [base_param];",
               "ld.param.u64 %start, [start_param];", f"mov.u32 %dst, {dst};"],
        operands=["add.u64 %p, %base, %start;"],
        body=step * n,
        after=["sub.s64 %dt, %t1, %t0;", "sub.u64 %a64, %p, %base;", "mov.u32 %sm, %smid;",
               *only_thread0(["st.global.u64 [%out], %dt;", "st.global.u64 [%out+8], %a64;",
                               "st.global.u32 [%out+16], %sm;"])],
        passes=True).render()


# --- mbarriers and fences ------------------------------------------------------------------------

def _mbar_body(kind: Async, n: int) -> list[str]:
    if kind is Async.ARRIVE:
        return ["mbarrier.arrive.shared::cta.b64 _, [%b0];"] * n
    wait = "test_wait" if kind is Async.TEST_WAIT else "try_wait"
    return ["mbarrier.arrive.shared::cta.b64 %st, [%a];",
            f"mbarrier.{wait}.shared::cta.b64 %ok, [%a], %st;",
            "selp.b32 %a, %b0, %b1, %ok;"] * n


def mbarrier_kernel(entry: str, n: int, kind: Async) -> str:
    """One thread, two mbarriers of count 1 (every arrive completes a phase). ARRIVE: n
    independent arrives (state discarded); TEST_WAIT / TRY_WAIT: n steps of arrive, wait on
    its state, and the next barrier's address selected by the wait's result (always the
    first: the phase is complete; the record's third word is the chain's barrier minus the
    first, 0 when every wait saw its phase complete).

    The chain's address %a is carried from pass to pass: every mbarrier operation must find
    an initialised mbarrier at its address (PTX ISA, "Lifecycle of the mbarrier object"), so
    the record's offset goes to a register of its own (%v). Computed into %a, it made the
    second pass's first arrive and wait act on shared address 0 (the reserved shared memory,
    no mbarrier): CUDA error 719 on the first launch (docs/movement.md)."""
    bars = f"{entry}_bars"
    return Kernel(
        entry=entry, params=[OUT, ITERS],
        preamble=[f".shared .align 8 .b64 {bars}[2];"],
        decls=common_regs(", %st", ", %b0, %b1, %a", ", %ok"),
        setup=[*load_common(), f"mov.u32 %b0, {bars};", "add.u32 %b1, %b0, 8;",
               "mbarrier.init.shared::cta.b64 [%b0], 1;",
               "mbarrier.init.shared::cta.b64 [%b1], 1;", "mov.u32 %a, %b0;",
               "mov.u64 %st, 0;"],
        body=_mbar_body(kind, n),
        after=["sub.s64 %dt, %t1, %t0;", "sub.u32 %v, %a, %b0;",
               *only_thread0(["st.global.u64 [%out], %dt;", "st.global.u64 [%out+8], %st;",
                               "st.global.u32 [%out+16], %v;"])],
        passes=True).render()


def fence_kernel(entry: str, n: int, after_store: bool) -> str:
    """n x fence.proxy.async.shared::cta, alone or each after a st.shared of a loaded value to
    its own word (a generic-proxy write the async proxy must then see)."""
    words = f"{entry}_words"
    step = (lambda k: [f"st.shared.u32 [%w+{4 * k}], %val;",
                       "fence.proxy.async.shared::cta;"]) if after_store else \
        (lambda k: ["fence.proxy.async.shared::cta;"])
    return Kernel(
        entry=entry, params=[OUT, ".param .u64 in_param", ITERS],
        preamble=[f".shared .align 16 .b8 {words}[{4 * max(FENCE_LENGTHS)}];"],
        decls=common_regs(", %in", ", %w, %val"),
        setup=[*load_common(), "ld.param.u64 %in, [in_param];", "ld.global.u32 %val, [%in];",
               f"mov.u32 %w, {words};"],
        body=[line for k in range(n) for line in step(k)],
        after=["sub.s64 %dt, %t1, %t0;", *only_thread0(["st.global.u64 [%out], %dt;"])],
        passes=True).render()


FENCE_UNIT = ("MEMBAR.ALL.CTA", "FENCE.VIEW.ASYNC.S")


def async_probe(kind: Async, arch: str) -> Probe:
    """The probe of an async-copy, mbarrier or fence row."""
    why = needs(arch, ASYNC_MIN_ARCH.get(kind, 90),
                "cp.async copies" if kind in ASYNC_MIN_ARCH else
                "mbarrier transactions, try_wait and async-proxy fences")
    if why:
        raise NotApplicable(f"static: {why}")
    name = f"movement/async/{kind.value}"
    if kind in (Async.CP_ASYNC_CA, Async.CP_ASYNC_CG):
        op = "ca" if kind is Async.CP_ASYNC_CA else "cg"
        sass_op = "LDGSTS.E.128" if op == "ca" else "LDGSTS.E.BYPASS.128"
        return make_probe(CountProbe, name, arch, ASYNC_LENGTHS,
                      lambda e, n: (cp_async_kernel(e, n, op), n),
                      counts={sass_op: 1, "LDGDEPBAR": 1, "DEPBAR.LE": 1, "LDS": 1},
                      chained=True)
    if kind is Async.ARRIVE:
        return make_probe(MovementProbe, name, arch, MBAR_LENGTHS,
                      lambda e, n: (mbarrier_kernel(e, n, kind), n),
                      unit=("SYNCS.ARRIVE.TRANS64.A1T0",))
    if kind in (Async.TEST_WAIT, Async.TRY_WAIT):
        check = "SYNCS.PHASECHK.TRANS64" + (".TRYWAIT" if kind is Async.TRY_WAIT else "")
        return make_probe(CountProbe, name, arch, MBAR_LENGTHS,
                      lambda e, n: (mbarrier_kernel(e, n, kind), n),
                      counts={"SYNCS.ARRIVE.TRANS64.A1T0": 1, check: 1})
    store = kind is Async.STORE_FENCE
    return make_probe(MovementProbe, name, arch, FENCE_LENGTHS,
                  lambda e, n: (fence_kernel(e, n, store), n),
                  unit=(("STS",) if store else ()) + FENCE_UNIT)


# --- the L2 from every SM, latency under load ----------------------------------------------------

L2_OPS = {"load": CHASE_OP, "atomic": "atom.global.add.u64 %p, [%p], 0;"}
L2_SASS = {"load": CHASE_SASS, "atomic": ("ATOMG.E.ADD.64.STRONG.GPU",)}


def l2_kernel(entry: str, n: int, op: str) -> str:
    """Every CTA (one per SM) chases each line of a table in turn: pass `it` of CTA `cta`
    takes line (cta + it) mod lines (staggered: no two CTAs on one line at once), touches it
    once untimed, then n dependent steps on the line's self-pointer: ld.global.cg (an L2 hit,
    served wherever the L2 keeps the line for this SM) or atom.global.add 0 (performed at the
    line's home L2 slice). Parameters (out, lines: u64 addresses, nlines, iters = nlines + 1:
    pass 0 warms the instruction cache). A record per (CTA, pass): cycles, end pointer, SM,
    line."""
    step = L2_OPS[op]
    return Kernel(
        entry=entry, params=[OUT, ".param .u64 lines_param", ".param .u32 nlines_param", ITERS],
        decls=common_regs(", %lines, %p", ", %nlines, %k"),
        setup=[*load_common(), "ld.param.u64 %lines, [lines_param];",
               "ld.param.u32 %nlines, [nlines_param];"],
        operands=["add.u32 %k, %cta, %it;", "rem.u32 %k, %k, %nlines;",
                  "mul.wide.u32 %a64, %k, 8;", "add.u64 %a64, %a64, %lines;",
                  "ld.global.u64 %p, [%a64];", step],
        body=[step] * n,
        after=["sub.s64 %dt, %t1, %t0;", "mov.u32 %sm, %smid;",
               *record_lines(24, [("u64", "%dt", 0), ("u64", "%p", 8), ("u32", "%sm", 16),
                                  ("u32", "%k", 20)])],
        passes=True).render()


def l2_probe(arch: str, op: str = "load") -> Probe:
    why = needs(arch, 80, "the per-SM L2 chase (its scope: Ampere's partitioned L2 onwards)")
    if why:
        raise NotApplicable(f"static: {why}")
    name = "movement/l2/by_sm" + ("" if op == "load" else f"_{op}")
    if op == "atomic":    # the dependence through the atomics' results is checked there
        return make_probe(AtomicChainProbe, name, arch, L2_LENGTHS,
                          lambda e, n: (l2_kernel(e, n, op), n), unit=L2_SASS[op])
    return make_probe(MovementProbe, name, arch, L2_LENGTHS,
                      lambda e, n: (l2_kernel(e, n, op), n), unit=L2_SASS[op], chained=True)


LOADED_PARAMS = [OUT, ".param .u64 start_param", ".param .u64 counter_param",
                 ".param .u64 stream_param", ".param .u64 slice_param",
                 ".param .u32 trips_param", ".param .u32 streamers_param",
                 ".param .u64 wait_param", ITERS]


def _streamer() -> list[str]:
    """CTAs 1..streamers: every thread reads its CTA's slice of the stream buffer, 4 x 16 B
    per iteration, wrapping at the slice's end (a power of two), `trips` iterations; thread 0
    counts the CTA in (counter) and records its start and end time (%globaltimer) at out +
    cta * 48. The chaser's CTA skips this and its other threads leave."""
    loads = [f"ld.global.cg.v4.u32 {{%w{4 * k}, %w{4 * k + 1}, %w{4 * k + 2}, %w{4 * k + 3}}}, "
             f"[%q+{16384 * k}];" for k in range(4)]
    fold = [f"xor.b32 %acc, %acc, %w{k};" for k in range(16)]
    return ["setp.eq.u32 %more, %cta, 0;", "@%more bra $CHASER;",
            "setp.eq.u32 %more, %tx, 0;", "@%more red.global.add.u32 [%counter], 1;",
            "mov.u64 %g0, %globaltimer;",
            "sub.u32 %v, %cta, 1;", "cvt.u64.u32 %a64, %v;", "mul.lo.u64 %a64, %a64, %slice;",
            "add.u64 %sbase, %stream, %a64;", "sub.u64 %mask, %slice, 1;",
            "mul.wide.u32 %soff, %tx, 16;", "mov.u32 %acc, 0;", "mov.u32 %k, 0;", "$STREAM:",
            ".pragma \"nounroll\";", "add.u64 %q, %sbase, %soff;", *loads, *fold,
            "add.u64 %soff, %soff, 65536;", "and.b64 %soff, %soff, %mask;",
            "add.u32 %k, %k, 1;", "setp.lt.u32 %more, %k, %trips;", "@%more bra $STREAM;",
            "mov.u64 %g1, %globaltimer;", "setp.ne.u32 %more, %tx, 0;", "@%more ret;",
            "mul.wide.u32 %a64, %cta, 48;", "add.u64 %rec, %out, %a64;",
            "st.global.u64 [%rec+16], %g0;", "st.global.u64 [%rec+24], %g1;",
            "st.global.u32 [%rec+8], %acc;", "mov.u32 %sm, %smid;",
            "st.global.u32 [%rec+40], %sm;", "ret;", "$CHASER:",
            "setp.ne.u32 %more, %tx, 0;", "@%more ret;"]


def _chaser_wait() -> list[str]:
    """Thread 0 of CTA 0 waits until every streamer has started (bounded by wait_ns)."""
    return ["mov.u64 %g0, %globaltimer;", "$SPIN:", "ld.volatile.global.u32 %seen, [%counter];",
            "setp.ge.u32 %more, %seen, %nstream;", "@%more bra $GO;",
            "mov.u64 %g1, %globaltimer;", "sub.u64 %g1, %g1, %g0;",
            "setp.lt.u64 %more, %g1, %waitns;", "@%more bra $SPIN;", "$GO:"]


def loaded_kernel(entry: str, n: int) -> str:
    """Latency under load: once every streaming CTA has started, CTA 0's thread 0 chases n
    dependent device-memory loads (each to a line never visited before) per pass (the first
    pass warms the instruction cache) while CTAs 1..streamers stream (_streamer). Record of
    CTA 0 at out (last pass): cycles, end pointer, %globaltimer before and after the chase,
    streamers seen, SM."""
    return Kernel(
        entry=entry, params=LOADED_PARAMS,
        decls=[".reg .b64 %out, %rec, %a64, %t0, %t1, %dt, %p, %counter, %stream, %slice, "
               "%waitns, %g0, %g1, %gs, %ge, %sbase, %soff, %mask, %q;",
               ".reg .b32 %tx, %cta, %sm, %v, %seen, %nstream, %trips, %k, %acc, %iters, %it, "
               "%step, %w<16>;", ".reg .pred %never, %more, %again;"],
        setup=["ld.param.u64 %out, [out_param];", "ld.param.u64 %p, [start_param];",
               "ld.param.u64 %counter, [counter_param];", "ld.param.u64 %stream, [stream_param];",
               "ld.param.u64 %slice, [slice_param];", "ld.param.u32 %trips, [trips_param];",
               "ld.param.u32 %nstream, [streamers_param];", "ld.param.u64 %waitns, [wait_param];",
               "ld.param.u32 %iters, [iters_param];", "mov.u32 %tx, %tid.x;",
               "mov.u32 %cta, %ctaid.x;", *_streamer(), *_chaser_wait()],
        sync=["mov.u64 %gs, %globaltimer;"],
        body=[CHASE_OP] * n,
        after=["mov.u64 %ge, %globaltimer;", "sub.s64 %dt, %t1, %t0;", "mov.u32 %sm, %smid;",
               "st.global.u64 [%out], %dt;", "st.global.u64 [%out+8], %p;",
               "st.global.u64 [%out+16], %gs;", "st.global.u64 [%out+24], %ge;",
               "st.global.u32 [%out+32], %seen;", "st.global.u32 [%out+40], %sm;"],
        passes=True).render()


def loaded_probe(arch: str) -> Probe:
    why = needs(arch, 80, "the loaded-latency kernel (its scope: Ampere onwards)")
    if why:
        raise NotApplicable(f"static: {why}")
    return make_probe(MovementProbe, "movement/loaded/chase", arch, LOADED_LENGTHS,
                  lambda e, n: (loaded_kernel(e, n), n), unit=CHASE_SASS, chained=True)
