"""Transfers on the GPU: 1 KiB TMA chains (cp.async.bulk, 1D and 2D tensor maps, one warp's
plain loads) with the blocks in the L2 or in device memory, multicast rounds in a cluster,
cp.async round trips, mbarrier and fence costs. Every chain continues across launches where
the last one stopped; every launch's end position is checked against the host's walk."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...core.fit import SPREAD_REL, fit
from ...core.runner import Bounds, ChainError, Order, Plan, TensorMapRejected
from ...results.judge import Measured, Measurement
from . import chases, kernels, layouts
from ...core.topic import Context
from .layouts import TENSOR2D_BOX, TENSOR2D_WIDTH, TENSOR_ELEM, TENSOR1D_BOX
from .rows import (CP_ASYNC_CG_NODES, CP_ASYNC_CG_REGION, CP_ASYNC_CG_LAUNCHES,
                   CP_ASYNC_CG_SPREAD_REL, ASYNC_LENGTHS, DRAM_SPREAD_REL, FENCE_LENGTHS, LINE,
                   MBAR_LENGTHS, MULTICAST_LENGTHS, TMA_BYTES, TMA_DRAM_LAUNCHES, TMA_L2_BLOCKS,
                   TMA_LENGTHS, Async, Level, Mechanism, MulticastRow, TmaRow)
from . import state as st
from .state import passes


METHOD_TMA = ("{what}: dependent 1 KiB transfers, each block holding where the next one "
              "is; slope of %clock64 cycles over {lengths} transfers, second pass of the "
              "kernel, median of {reps} launches after a warm-up; {where}")
WHAT = {Mechanism.PLAIN: "one warp's ld.global.cg.v4 (32 B per thread)",
        Mechanism.BULK: "cp.async.bulk to shared memory, completion on an mbarrier (try_wait)",
        Mechanism.TENSOR1D: "cp.async.bulk.tensor.1d (u32, box 256), completion on an mbarrier",
        Mechanism.TENSOR2D: "cp.async.bulk.tensor.2d (u32, box 64 x 4 of a 4 KiB-pitch tensor), "
                            "completion on an mbarrier"}
WHERE = {Level.L2: f"{TMA_L2_BLOCKS} blocks in the L2 (walked once before)",
         Level.DRAM: "a random block of a buffer >= 4 x L2 per transfer, the L2 evicted "
                     "first, no block visited twice"}


class Chain:
    """A block chain in the big buffer walked by consecutive launches (`cursor`: the step the
    next launch starts at), with the host's expected end position of each launch."""

    def __init__(self, chain: layouts.BlockChain, mech: Mechanism) -> None:
        self.chain, self.mech, self.cursor = chain, mech, 0

    def start(self) -> np.uint64:
        return np.uint64(layouts.tma_position(self.mech, self.chain.position(self.cursor)))

    def advance(self, steps: int) -> int:
        """Move the cursor; the expected end value of the launch that walked `steps`."""
        self.cursor += steps
        return layouts.tma_position(self.mech, self.chain.position(self.cursor))


def _tensor_map(session: Context, mech: Mechanism, big):
    """The tensor map over the big buffer (u32 elements); a refusal is reported with the
    driver's error."""
    nbytes = st.big_bytes(session)
    runner = session.runner
    if mech is Mechanism.TENSOR1D:
        return runner.tensor_map(st.address(big), (nbytes // TENSOR_ELEM,), (), (TENSOR1D_BOX,))
    rows = nbytes // (TENSOR2D_WIDTH * TENSOR_ELEM)
    return runner.tensor_map(st.address(big), (TENSOR2D_WIDTH, rows),
                             (TENSOR2D_WIDTH * TENSOR_ELEM,), TENSOR2D_BOX)


def tma_repeats(session: Context, row: TmaRow) -> tuple[int, int]:
    """(launches, chain blocks) of a TMA latency row. Device memory: TMA_DRAM_LAUNCHES
    (fewer only where the buffer holds too few blocks), every transfer a block of its own."""
    if row.level is not Level.DRAM:
        return session.repeats, TMA_L2_BLOCKS
    return layouts.fresh_launches(session.repeats, TMA_DRAM_LAUNCHES,
                                  layouts.tma_capacity(row.mechanism, st.big_bytes(session)),
                                  int(passes()) * sum(TMA_LENGTHS))


def _prepare_chain(session: Context, row: TmaRow, big, blocks: int) -> Chain:
    mech = row.mechanism
    capacity = layouts.tma_capacity(mech, st.big_bytes(session))
    dram = row.level is Level.DRAM
    chain = layouts.block_chain(blocks, capacity, TMA_BYTES, st.rng(session), sparse=dram)
    idx, val = layouts.tma_words(mech, chain)
    st.upload(big, idx, val, np.uint32)
    return Chain(chain, mech)


def warm_chain(session: Context, fn, longest: int, grid: tuple, block: tuple,
               chain: Chain, big, tmap: tuple, name: str, *, cluster: int | None = None,
               records: int = 4, shared_mem: int = 0):
    """Walk an L2-resident chain's whole cycle once with the kernel of `longest` steps per
    pass (enough passes), so every block is in the L2; returns the launch's record buffer
    (kept alive until the wait)."""
    warm = -(-chain.chain.count // longest) + 1
    out = session.runner.zeros((records,))
    session.runner.enqueue(fn, st.geometry(grid, block, smem=shared_mem, cluster=cluster),
                           (out, big, chain.start(), np.uint32(warm), *tmap), name=name)
    chain.advance(warm * longest)
    return out


def chain_args(chain: Chain, want: list, extra: tuple = ()):
    """The argument factory of a chain's timed launches: each launch starts where the last
    one ended; its expected end is appended to `want` as (length, launch, end)."""
    def args(n):
        def one(r, rec):
            start = chain.start()
            want.append((n, r, chain.advance(int(passes()) * n)))
            return (rec, extra[0], start, passes(), *extra[1:])
        return one
    return args


def _measure_tma(session: Context, row: TmaRow, arch: str):
    probe = kernels.tma_probe(row.mechanism, arch)
    name = f"{probe.name}/{row.level.value}"
    st.built(session, probe)
    fns = st.functions(session, probe, TMA_LENGTHS)
    big = st.big(session)
    tmap = () if row.mechanism in (Mechanism.PLAIN, Mechanism.BULK) else \
        (_tensor_map(session, row.mechanism, big),)
    reps, blocks = tma_repeats(session, row)
    chain = _prepare_chain(session, row, big, blocks)
    threads = 32 if row.mechanism is Mechanism.PLAIN else 1
    longest = TMA_LENGTHS[-1]
    keep = warm_chain(session, fns[longest], longest, (1,), (threads,), chain, big, tmap,
                      name) if row.level is Level.L2 else st.flush_l2(session)
    dram = row.level is Level.DRAM
    want: list = []
    out = session.runner.measure(Plan(
        name, fns, st.geometry((1,), (threads,)), chain_args(chain, want, (big, *tmap)), reps,
        record=(4,), order=Order.REPEAT))
    del keep
    host = out.raw
    for n, r, end in want:
        if int(host[n][r, 1]) != end:
            raise ChainError(f"{name}: launch {r} of length {n} ended at {int(host[n][r, 1]):#x}, "
                             f"the host's walk at {end:#x}: the transfers did not follow the "
                             f"chain")
    cycles = {n: [int(v) for v in host[n][1:, 0]] for n in TMA_LENGTHS}
    limits = {"spread_rel": DRAM_SPREAD_REL} if dram else {}
    return fit(cycles, {n: n for n in TMA_LENGTHS}, **limits), cycles, probe, reps


def tma_latency(session: Context, row: TmaRow, arch: str) -> Measured:
    """Completion latency of a dependent 1 KiB transfer (issue to data usable)."""
    try:
        f, cycles, probe, reps = st.once(session, ("tma", row.id),
                                         lambda: _measure_tma(session, row, arch))
    except TensorMapRejected as e:
        return Measured(checks=[f"TMA descriptor rejected by the driver: {e}"])
    return Measured(Measurement.of_fit(
        f"movement.tma.latency.{row.mechanism.value}.{row.level.value}", f, "cycles",
        method=METHOD_TMA.format(what=WHAT[row.mechanism], lengths=list(TMA_LENGTHS),
                                 reps=reps, where=WHERE[row.level]),
        data={"cycles": cycles, "sass_unit": st.unit(session, probe), "bytes": TMA_BYTES,
              "tolerance": st.tol("latency_dram" if row.level is Level.DRAM else "latency")}),
        sass=st.sass(session, probe))


# --- multicast -----------------------------------------------------------------------------------

def _measure_multicast(session: Context, row: MulticastRow):
    probe = kernels.multicast_probe(row.multicast, "sm_90")
    c = row.cluster
    name = f"{probe.name}/c{c}"
    st.built(session, probe)
    fns = st.functions(session, probe, MULTICAST_LENGTHS)
    smem = st.lone_smem(session)      # one CTA per SM
    session.runner.launcher.clusters(fns[MULTICAST_LENGTHS[0]], name, c, (1,), smem)
    big = st.big(session)
    chain = _prepare_chain(session, TmaRow(Mechanism.BULK, Level.L2), big, TMA_L2_BLOCKS)
    longest = MULTICAST_LENGTHS[-1]
    keep = warm_chain(session, fns[longest], longest, (c,), (1,), chain, big, (), name,
                      cluster=c, records=c * (-(-TMA_L2_BLOCKS // longest) + 1) * 4,
                      shared_mem=smem)
    reps, want = session.repeats, []
    out = session.runner.measure(Plan(
        name, fns, st.geometry((c,), (1,), smem=smem, cluster=c), chain_args(chain, want, (big,)),
        reps, record=(c * 2 * 4,), order=Order.REPEAT))
    del keep
    host = {n: out.raw[n].reshape(reps + 1, c, 2, 4) for n in MULTICAST_LENGTHS}
    for n, r, end in want:
        got = host[n][r, :, 1, 1]
        if not (got == end).all():
            raw = [[hex(int(w)) for w in rec] for rec in host[n][r].reshape(-1, 4)]
            raise ChainError(f"{name}: launch {r} of length {n}: CTAs ended at "
                             f"{[hex(int(v)) for v in got]}, the host's walk at {end:#x} "
                             f"(records per CTA and pass, words dt/end/sm|rank/-: {raw})")
    cycles = {n: [int(v) for v in host[n][1:, 0, 1, 0]] for n in MULTICAST_LENGTHS}
    return fit(cycles, {n: n for n in MULTICAST_LENGTHS}), cycles, probe


def multicast(session: Context, row: MulticastRow, arch: str) -> Measured:
    """A 1 KiB block delivered to every CTA of a cluster: one multicast copy issued by rank 0
    against every CTA copying it itself; each round closes with a relaxed cluster barrier."""
    kernels.multicast_probe(row.multicast, arch)      # NotApplicable before sm_90
    f, cycles, probe = st.once(session, ("multicast", row.id),
                               lambda: _measure_multicast(session, row))
    how = ("rank 0 issues cp.async.bulk ... .multicast::cluster to all CTAs" if row.multicast
           else "every CTA issues its own cp.async.bulk of the same block")
    return Measured(Measurement.of_fit(
        f"movement.tma.{row.id}", f, "cycles",
        method=f"rounds in one cluster of {row.cluster}: every CTA arms its mbarrier for 1 KiB, "
               f"{how}, each waits for its own completion, then barrier.cluster.arrive.relaxed + "
               f"wait; the next block's offset read from the data; slope over "
               f"{list(MULTICAST_LENGTHS)} rounds of CTA 0's %clock64 cycles, median of "
               f"{session.repeats} launches; blocks L2-resident",
        data={"cycles": cycles, "sass_unit": st.unit(session, probe),
              "tolerance": st.tol("latency")}), sass=st.sass(session, probe))


# --- cp.async, mbarriers, fences -----------------------------------------------------------------

class AsyncChain(NamedTuple):
    nodes: int
    lines: int              # lines of the region the nodes are drawn from
    sparse: bool            # nodes at random over the region (else its first `nodes` lines)
    launches: Bounds        # timed launches of the session's repeats
    spread_rel: float       # the fit's stability limit on its per-launch slopes


def cp_async_layout(kind: Async) -> AsyncChain:
    """The chain of a cp.async row: .ca 32 nodes 128 B apart (4 KiB: the timed second pass of
    a launch finds its n nodes in the L1); .cg CP_ASYNC_CG_NODES lines at random over
    CP_ASYNC_CG_REGION, so its L2 hits average over many lines' slices instead of one
    block's, and each launch times other lines, so its slopes scatter with their mix of near
    and far slices (CP_ASYNC_CG_SPREAD_REL) while the median repeats."""
    if kind is Async.CP_ASYNC_CG:
        return AsyncChain(CP_ASYNC_CG_NODES, CP_ASYNC_CG_REGION // LINE, True,
                          CP_ASYNC_CG_LAUNCHES, CP_ASYNC_CG_SPREAD_REL)
    return AsyncChain(32, 32, False, Bounds(), SPREAD_REL)


def _measure_cp_async(session: Context, kind: Async, probe):
    """A chain of nodes (cp_async_layout); each pass of a launch walks the same n nodes from
    the launch's start, and each launch starts where the last one ended."""
    name = probe.name
    chain = cp_async_layout(kind)
    nodes = chain.nodes
    reps = chain.launches.of(session.repeats)
    buf = st.buffer(session, f"cp_async_{kind.value}", chain.lines * LINE)
    order = layouts.block_chain(nodes, chain.lines, LINE, st.rng(session), sparse=chain.sparse)
    nxt = np.roll(order.order, -1)
    st.upload(buf, order.order * LINE // 4, (nxt * LINE).astype(np.uint32), np.uint32)
    fns = st.functions(session, probe, ASYNC_LENGTHS)
    longest = ASYNC_LENGTHS[-1]
    warm = 2            # passes over the first `longest` nodes: module, TLB and lines loaded
    keep = session.runner.zeros((4,))
    session.runner.enqueue(fns[longest], st.geometry((1,), (1,)),
                           (keep, buf, np.uint64(order.position(0) * LINE), np.uint32(warm)),
                           name=name)
    walk = {"cursor": longest}       # every pass walks the same nodes from the start
    want: list = []

    def args(n):
        def one(r, rec):
            start = np.uint64(order.position(walk["cursor"]) * LINE)
            walk["cursor"] += n
            want.append((n, r, order.position(walk["cursor"]) * LINE))
            return (rec, buf, start, passes())
        return one
    out = session.runner.measure(Plan(name, fns, st.geometry((1,), (1,)), args, reps,
                                      record=(4,), order=Order.REPEAT))
    del keep
    host = out.raw
    for n, r, end in want:
        if int(host[n][r, 1]) != end:
            raise ChainError(f"{name}: launch {r} of length {n} ended at offset "
                             f"{int(host[n][r, 1])}, the host's walk at {end}")
    return {n: [int(v) for v in host[n][1:, 0]] for n in ASYNC_LENGTHS}, ASYNC_LENGTHS


def _measure_sync_op(session: Context, kind: Async, probe):
    """mbarrier and fence rows: one thread, one CTA; the wait chains must end on the first
    barrier (every wait saw its phase complete)."""
    fence = kind in (Async.FENCE, Async.STORE_FENCE)
    lengths = FENCE_LENGTHS if fence else MBAR_LENGTHS
    fns = st.functions(session, probe, lengths)
    value = session.runner.to_device(np.array([0x5A5A5A5A, 0], dtype=np.uint32))
    out = session.runner.measure(Plan(
        probe.name, fns, st.geometry((1,), (1,)),
        lambda n: ((lambda r, rec: (rec, value, passes())) if fence else
                   (lambda r, rec: (rec, passes()))),
        session.repeats, record=(4,), order=Order.REPEAT))
    host = out.raw
    if kind in (Async.TEST_WAIT, Async.TRY_WAIT):
        bad = {n: int(h[0, 2]) for n, h in host.items() if (h[:, 2] != 0).any()}
        if bad:
            raise ChainError(f"{probe.name}: a wait did not see its phase complete (the chain "
                             f"moved to the second barrier): {bad}")
    return {n: [int(v) for v in host[n][1:, 0]] for n in lengths}, lengths


ASYNC_METHOD = {
    Async.CP_ASYNC_CA: "cp.async.ca 16 B + commit + wait_group 0 + ld.shared of the next "
                       "offset, chain of 32 nodes, every pass the same n nodes (the timed "
                       "second pass hits in the L1)",
    Async.CP_ASYNC_CG: "cp.async.cg 16 B + commit + wait_group 0 + ld.shared of the next "
                       f"offset, chain of {CP_ASYNC_CG_NODES} lines at random over "
                       f"{CP_ASYNC_CG_REGION >> 20} MiB, every pass the same n nodes, each "
                       "launch the next n (L2 hits: .cg bypasses the L1)",
    Async.ARRIVE: "independent mbarrier.arrive.shared::cta (state discarded) on a count-1 "
                  "barrier: issue cost",
    Async.TEST_WAIT: "mbarrier.arrive -> test_wait on its state -> selp of the next barrier "
                     "(dependent)",
    Async.TRY_WAIT: "mbarrier.arrive -> try_wait on its state -> selp of the next barrier "
                    "(dependent)",
    Async.FENCE: "fence.proxy.async.shared::cta back to back",
    Async.STORE_FENCE: "st.shared of a loaded value + fence.proxy.async.shared::cta",
}


def async_row(session: Context, kind: Async, arch: str) -> Measured:
    """cp.async round trips, mbarrier arrive / wait steps, async-proxy fences."""
    probe = chases.async_probe(kind, arch)

    def make():
        st.built(session, probe)
        if kind in (Async.CP_ASYNC_CA, Async.CP_ASYNC_CG):
            return _measure_cp_async(session, kind, probe)
        return _measure_sync_op(session, kind, probe)
    cycles, lengths = st.once(session, ("async", kind.value), make)
    f = fit(cycles, {n: n for n in lengths}, spread_rel=cp_async_layout(kind).spread_rel
            if kind in (Async.CP_ASYNC_CA, Async.CP_ASYNC_CG) else SPREAD_REL)
    launches = len(cycles[lengths[0]])
    return Measured(Measurement.of_fit(
        f"movement.async.{kind.value}", f, "cycles/op",
        method=f"{ASYNC_METHOD[kind]}; slope of %clock64 cycles over {list(lengths)} steps, "
               f"one thread, second pass, median of {launches} launches after a warm-up",
        data={"cycles": cycles, "sass_unit": st.unit(session, probe),
              "tolerance": st.tol("latency")}), sass=st.sass(session, probe))
