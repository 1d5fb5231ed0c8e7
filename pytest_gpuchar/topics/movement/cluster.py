"""Clusters on the GPU: the DSM latency matrix (every CTA of one cluster chases every CTA's
chain), DSM bandwidth per cluster size (all co-resident clusters stream from their
neighbour's shared memory), mapa and barrier.cluster costs, and serialised launches with and
without a cluster attribute. Every cluster size is first asked of the driver's occupancy
query (a size the device cannot launch is skipped with its answer)."""
from __future__ import annotations


import numpy as np

from ...core.fit import fit
from ...core.runner import ChainError, Order, Plan
from ...core.topic import Context
from ...results.judge import Measured, Measurement
from . import analysis, kernels, layouts, streams
from .bandwidth import stream_measurement, stream_windows
from .rows import (BARRIER_LENGTHS, DSM_LENGTHS, DSM_SLOTS, DSM_STREAM,
                   CLUSTER_LAUNCHES, LAUNCH_WAVES, LINE, MAPA_LENGTHS, SHARED_REGION,
                   DsmRow, Sync, SyncRow)
from . import state as st


METHOD_DSM = ("pointer chase through distributed shared memory ({op}), one thread in each CTA "
              "of one cluster of {c} (one CTA per SM): pass p of CTA r walks {n_slots} slots "
              "128 B apart in the shared memory of CTA (r + p) mod {c}; slope of %clock64 "
              "cycles over {lengths} dependent loads, median of {reps} launches after a "
              "warm-up; local = offset 0, remote = median over offsets 1..{last} and CTAs")
DSM_OPS = {"u32": "ld.shared::cluster.u32 on 32-bit shared::cluster addresses",
           "generic": "generic ld.u64 through mapa.u64 pointers"}
METHOD_SYNC = ("slope of %clock64 cycles over {lengths} x {what} (thread 0 of CTA 0, one "
               "cluster of {c}, {threads} threads per CTA, one CTA per SM), median of {reps} "
               "launches after a warm-up; second pass of the kernel (the first warms the "
               "instruction cache)")
METHOD_LAUNCH = ("one CTA per SM at a time (dynamic shared memory over half the SM), {waves} "
                 "CTAs per SM in one launch{how}; slope of each SM's busy span (first entry "
                 "clock to last exit clock) against the CTAs it ran, median over {reps} "
                 "launches")


# --- DSM latency ---------------------------------------------------------------------------------

def _check_dsm(name: str, host: dict[int, np.ndarray], nxt: np.ndarray, c: int) -> list[str]:
    """End offsets against the host's walk, targets against the pass plan; the SMs seen."""
    sms = set()
    for n, rec in host.items():
        want = layouts.walk(nxt, 0, n) * LINE
        end = rec[..., 1] & np.uint64(0xFFFFFFFF)
        if not (end == want).all():
            bad = sorted({int(v) for v in end.ravel() if int(v) != want})[:4]
            raise ChainError(f"{name}: length {n}: chases ended at offsets {bad}, the host's "
                             f"walk of the chain at {want}: the chase did not walk the chain")
        tgt = (rec[..., 1] >> np.uint64(32)).astype(np.int64)
        plan = (np.arange(c)[:, None] + np.arange(c + 1)[None, :]) % c
        if not (tgt == plan[None]).all():
            raise ChainError(f"{name}: length {n}: passes read other CTAs than planned")
        per_launch = rec[:, :, 0, 2] & np.uint64(0xFFFFFFFF)
        for launch in per_launch:
            if len(set(launch.tolist())) != c:
                raise ChainError(f"{name}: two CTAs of the cluster ran on one SM "
                                 f"({sorted(launch.tolist())}): no remote figure")
            sms |= {int(v) for v in launch}
    return sorted(sms)


def _measure_dsm(session: Context, row: DsmRow, arch: str):
    probe = kernels.dsm_probe(row.flavour, arch)
    c = row.cluster
    name = f"{probe.name}/c{c}"
    st.built(session, probe)
    fns = st.functions(session, probe, DSM_LENGTHS)
    smem = st.lone_smem(session)      # one CTA per SM: "remote" is another SM
    session.runner.launcher.clusters(fns[DSM_LENGTHS[0]], name, c, (1,), smem)
    nxt = layouts.random_cycle(DSM_SLOTS, st.rng(session)).astype(np.uint32)
    d_next = session.runner.to_device(nxt)
    passes, reps = c + 1, session.repeats
    out = session.runner.measure(Plan(
        name, fns, st.geometry((c,), (1,), smem=smem, cluster=c),
        lambda n: (lambda r, rec: (rec, d_next, np.uint32(passes))), reps,
        record=(c * passes * 4,), order=Order.REPEAT))
    host = {n: out.raw[n].reshape(reps + 1, c, passes, 4) for n in DSM_LENGTHS}
    sms = _check_dsm(name, host, nxt, c)
    dt = {n: host[n][1:, :, :, 0].astype(np.int64).astype(float) for n in DSM_LENGTHS}
    return analysis.dsm_figures(dt), sms, probe


def dsm_latency(session: Context, row: DsmRow, arch: str) -> Measured:
    """Load-to-use latency of distributed shared memory: the own CTA's and the others'."""
    figs, sms, probe = st.once(session, ("dsm", row.id),
                               lambda: _measure_dsm(session, row, arch))
    c = row.cluster
    method = METHOD_DSM.format(op=DSM_OPS[row.flavour.value], c=c, n_slots=DSM_SLOTS,
                               lengths=list(DSM_LENGTHS), reps=session.repeats, last=c - 1)
    data = {"by_rank_offset": figs.by_offset, "matrix_cta_by_offset": figs.matrix, "sms": sms,
            "sass_unit": st.unit(session, probe), "tolerance": st.tol("latency")}
    key = f"movement.dsm.latency.{row.flavour.value}.c{c}"
    return Measured(*[Measurement.of_value(
        f"{key}.{where}", m.value, "cycles", spread=m.spread, unstable=m.why_unstable,
        method=method, data={**data, "per_repeat": [round(x, 3) for x in m.samples]})
        for where, m in (("local", figs.local), ("remote", figs.remote))],
        sass=st.sass(session, probe))


# --- DSM bandwidth -------------------------------------------------------------------------------

def dsm_bandwidth(session: Context, c: int, arch: str) -> Measured:
    """Bytes per clock each SM reads from its neighbour's shared memory (ld.shared::cluster
    .v4), every co-resident cluster of `c` CTAs streaming at once."""
    probe = streams.dsm_stream_probe(arch)
    row = DSM_STREAM
    name = f"{probe.name}/c{c}"

    def make():
        st.built(session, probe)
        smem = st.smem_for(session, SHARED_REGION + row.advance)
        fn = st.function(session, probe, row.trips[0])
        grid = session.runner.launcher.clusters(fn, name, c, (1024,), smem) * c
        big = st.big(session)
        runs = stream_windows(session, probe, name=name, grid=grid, smem=smem, cluster=c,
                              trips=row.trips, source=big, args=lambda out, t, src: (
                                  out, src, src, np.uint64(0), np.uint32(t),
                                  np.uint32(SHARED_REGION - 1)))
        return analysis.stream_figures(runs, {t: t * row.unroll * row.width * 1024
                                              for t in row.trips}), grid
    figs, grid = st.once(session, ("dsm_bw", c), make)
    return stream_measurement(session, probe, f"movement.dsm.bandwidth.c{c}", figs, row,
                              extra=f"; {grid // c} clusters of {c} co-resident, each CTA reading "
                                    f"the next CTA's shared memory")


# --- mapa, barrier.cluster -----------------------------------------------------------------------

def _measure_sync(session: Context, row: SyncRow, arch: str):
    probe = kernels.sync_probe(row.kind, arch)
    c = 2 if row.kind is Sync.MAPA else row.cluster
    threads = 1 if row.kind is Sync.MAPA else 32
    lengths = MAPA_LENGTHS if row.kind is Sync.MAPA else BARRIER_LENGTHS
    name = f"{probe.name}/c{c}"
    st.built(session, probe)
    fns = st.functions(session, probe, lengths)
    smem = st.lone_smem(session)      # one CTA per SM
    session.runner.launcher.clusters(fns[lengths[0]], name, c, (threads,), smem)
    operands = session.runner.to_device(np.array([0x400, 1], dtype=np.uint32))

    def args(n):
        if row.kind is Sync.MAPA:
            return lambda r, rec: (rec, operands, np.uint32(2))
        return lambda r, rec: (rec, np.uint32(2))
    out = session.runner.measure(Plan(
        name, fns, st.geometry((c,), (threads,), smem=smem, cluster=c), args, session.repeats,
        record=(c * 2 * 2,), order=Order.REPEAT))
    # record (cta 0, pass 1): words 2..3 of the CTA's two 16-byte records
    cycles = {n: [int(v) for v in out.timed(n)[:, 2]] for n in lengths}
    return fit(cycles, {n: n for n in lengths}), cycles, probe, c, threads, lengths


SYNC_WHAT = {Sync.MAPA: "dependent mapa.shared::cluster.u32",
             Sync.BARRIER: "(barrier.cluster.arrive; barrier.cluster.wait)",
             Sync.BARRIER_RELAXED: "(barrier.cluster.arrive.relaxed; barrier.cluster.wait)"}


def sync(session: Context, row: SyncRow, arch: str) -> Measured:
    """mapa latency; barrier.cluster arrive + wait, per cluster size."""
    f, cycles, probe, c, threads, lengths = st.once(session, ("sync", row.id),
                                                    lambda: _measure_sync(session, row, arch))
    key = "movement.cluster.mapa" if row.kind is Sync.MAPA else \
        f"movement.cluster.{row.kind.value}.c{c}"
    return Measured(Measurement.of_fit(
        key, f, "cycles/op" if row.kind is Sync.MAPA else "cycles",
        method=METHOD_SYNC.format(lengths=list(lengths), what=SYNC_WHAT[row.kind], c=c,
                                  threads=threads, reps=session.repeats),
        data={"cycles": cycles, "sass_unit": st.unit(session, probe),
              "tolerance": st.tol("barrier")}), sass=st.sass(session, probe))


# --- launches ------------------------------------------------------------------------------------

def _measure_launch(session: Context, c: int, arch: str):
    probe = kernels.launch_probe(arch)
    name = f"{probe.name}/{'plain' if c == 1 else f'c{c}'}"
    st.built(session, probe)
    fn = st.function(session, probe, 0)
    smem = st.lone_smem(session)
    cluster = None if c == 1 else c
    if cluster:
        per_wave = session.runner.launcher.clusters(fn, name, c, (32,), smem) * c
    else:
        session.runner.launcher.prepare(fn, name, smem)
        per_wave = st.sms(session)
    reps = CLUSTER_LAUNCHES.of(session.repeats)
    out = session.runner.measure(Plan(
        name, {b: fn for b in LAUNCH_WAVES},
        lambda b: st.geometry((per_wave * b,), (32,), smem=smem, cluster=cluster),
        lambda b: (lambda r, rec: (rec,)), reps, record=lambda b: (per_wave * b * 4,),
        order=Order.REPEAT, split=True))
    per_repeat = [[out.raw[b][r].reshape(-1, 4) for b in LAUNCH_WAVES]
                  for r in range(1, reps + 1)]
    return analysis.serial_blocks(per_repeat), per_wave, probe, reps


def launch(session: Context, c: int, arch: str) -> Measured:
    """Cycles per serialised CTA with clusters of `c` (1: a plain launch, no attribute)."""
    res, per_wave, probe, reps = st.once(session, ("launch", c),
                                         lambda: _measure_launch(session, c, arch))
    if res.value != res.value:
        return Measured(checks=[f"no launch figure for clusters of {c}: {res.why}"])
    label = "plain" if c == 1 else f"c{c}"
    data = {"gap_median_cycles": res.gap, "blocks_per_sm_seen": res.counts,
            "ctas_per_wave": per_wave, "tolerance": st.tol("launch")}
    if c != 1 and ("movement", "launch", 1) in session.runs:
        plain = session.runs.once(("movement", "launch", 1), lambda: None)[0]
        data["ratio_to_plain"] = round(res.value / plain.value, 3) if plain.value else None
    how = "" if c == 1 else f", clusters of {c} (cluster-dimension launch attribute)"
    return Measured(Measurement.of_value(
        f"movement.cluster.launch.{label}", res.value, "cycles", spread=res.spread,
        unstable=res.why,
        method=METHOD_LAUNCH.format(waves=list(LAUNCH_WAVES), how=how, reps=reps),
        data=data), sass=st.sass(session, probe))
