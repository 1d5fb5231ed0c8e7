"""The L2 seen from every SM, and device-memory latency under load, on the GPU.

Heatmap: one CTA per SM chases each of L2_LINES self-pointing lines in turn (staggered, so no
two SMs share a line at once); each (SM, line) latency is a slope over chain lengths; each
SM's lines split into a near and a far level, and the SMs group into partitions by which
lines are near. Loaded latency: CTA 0 chases device memory while a share of the other SMs
stream from a buffer twice the L2; the streamers' bandwidth during the chase gives the
curve's x axis."""
from __future__ import annotations


import numpy as np

from ...core.probe import NotApplicable
from ...core.runner import ChainError, Order, Plan
from ...core.topic import Context
from ...results.judge import Measured, Measurement
from . import analysis, chases, layouts, plots
from .rows import (DRAM_SPREAD_REL, L2_LENGTHS, L2_LINES, LOADED_LENGTHS,
                   LOADED_LAUNCHES, LOADED_SHARES, LOADED_TRIPS, LOADED_WAIT_NS,
                   L2Figure)
from . import state as st
from .state import passes


MIB = 1 << 20
LOADED_BLOCK = 2048      # one chain pointer per 2 KiB of the buffer


# --- the heatmap ---------------------------------------------------------------------------------

def _by_sm(rec: np.ndarray, lines: np.ndarray, name: str) -> tuple[list[int], np.ndarray]:
    """One launch's records [cta, pass, 3] -> (SM of each row, cycles [row, line]); the end
    pointers and line order checked."""
    ctas, iters, _ = rec.shape
    sm = (rec[:, 0, 2] & np.uint64(0xFFFFFFFF)).astype(np.int64)
    if len(set(sm.tolist())) != ctas:
        raise ChainError(f"{name}: two CTAs ran on one SM (SMs {sorted(sm.tolist())}): no "
                         f"per-SM heatmap")
    k = (rec[:, :, 2] >> np.uint64(32)).astype(np.int64)
    plan = (np.arange(ctas)[:, None] + np.arange(iters)[None, :]) % len(lines)
    if not (k == plan).all() or not (rec[:, :, 1] == lines[k]).all():
        raise ChainError(f"{name}: a chase ended off its line (the self-pointing line was not "
                         f"what was loaded)")
    order = np.argsort(sm)
    out = np.zeros((ctas, len(lines)))
    for row, c in enumerate(order):
        out[row, k[c, 1:]] = rec[c, 1:, 0].astype(np.int64)
    return sorted(sm.tolist()), out


def _lines(session: Context):
    """The heatmap's lines (made once): random lines of a 64 MiB buffer of their own, each
    holding its own address; (addresses, device table). Not the shared big buffer: the
    transfer chains rewrite it, and a chase through a rewritten line leaves the table."""
    size = min(st.big_bytes(session), 64 * MIB)
    heat = st.buffer(session, "l2_heat", size)
    offs = layouts.heat_lines(L2_LINES, size, st.rng(session))
    lines = (st.address(heat) + offs).astype(np.uint64)
    st.upload(heat, offs // 8, lines, np.uint64)
    return lines, session.runner.to_device(lines)


def _measure_l2(session: Context, arch: str, op: str, lines, table):
    probe = chases.l2_probe(arch, op)
    name = probe.name
    st.built(session, probe)
    sms, reps = st.sms(session), session.repeats
    iters = L2_LINES + 1
    out = session.runner.measure(Plan(
        name, st.functions(session, probe, L2_LENGTHS),
        st.geometry((sms,), (1,), smem=st.lone_smem(session)),
        lambda n: (lambda r, rec: (rec, table, np.uint32(L2_LINES), np.uint32(iters))), reps,
        record=(sms * iters * 3,), order=Order.REPEAT))
    per = {n: [_by_sm(h.reshape(sms, iters, 3), lines, name) for h in out.timed(n)]
           for n in L2_LENGTHS}
    sms = per[L2_LENGTHS[0]][0][0]
    if any(p[0] != sms for n in L2_LENGTHS for p in per[n]):
        raise ChainError(f"{name}: the launches ran on different sets of SMs")
    dt = {n: np.stack([p[1] for p in per[n]]) for n in L2_LENGTHS}     # [rep, sm, line]
    lat = analysis.slopes({n: np.median(dt[n], axis=0) for n in L2_LENGTHS})
    per_repeat = [analysis.slopes({n: dt[n][r] for n in L2_LENGTHS})
                  for r in range(reps)]
    return analysis.l2_map(lat, per_repeat), lat, sms, probe


METHOD_L2 = ("one CTA per SM ({sms} SMs), thread 0 takes each of {lines} self-pointing lines "
             "in turn (CTA i line (i + pass) mod {lines}), touches it once, then {step}; per "
             "(SM, line) the slope of %clock64 cycles over {lengths} dependent steps, median "
             "of {reps} launches; each SM's lines split at the widest latency gap into near "
             "and far; {what}")
STEP = {"load": "dependent ld.global.cg of it (L2 hits wherever the L2 keeps the line for "
                "this SM)",
        "atomic": "dependent atom.global.add 0 on it (performed at the line's home slice)"}
WHAT = {L2Figure.NEAR: "the median over SMs of each SM's near level",
        L2Figure.FAR: "the median over SMs of each SM's far level",
        L2Figure.ATOMIC_NEAR: "the median over SMs of each SM's near level",
        L2Figure.ATOMIC_FAR: "the median over SMs of each SM's far level",
        L2Figure.PARTITIONS: "SMs grouped by which lines are near to them (agreeing on all "
                             "but 10% of the lines): the home partitions"}
KEYS = {L2Figure.NEAR: "movement.l2.latency.near", L2Figure.FAR: "movement.l2.latency.far",
        L2Figure.ATOMIC_NEAR: "movement.l2.atomic.near",
        L2Figure.ATOMIC_FAR: "movement.l2.atomic.far"}


def l2_map(session: Context, op: str, arch: str, artifact):
    """The (SM x line) map of one step kind, measured and drawn once per session."""
    lines, table = st.once(session, ("l2_lines",), lambda: _lines(session))
    res = st.once(session, ("l2", op), lambda: _measure_l2(session, arch, op, lines, table))
    m, lat, sms, _ = res
    st.once(session, ("l2_plot", op),
            lambda: plots.save_heatmap(artifact, op, lat, sms, m, session.gpu.dev))
    return res


def l2_by_sm(session: Context, row: L2Figure, arch: str, artifact) -> Measured:
    m, lat, sms, probe = l2_map(session, row.op, arch, artifact)
    data = {"sms": len(sms), "partition_sms": [[sms[i] for i in g] for g in m.groups],
            "per_sm_near_far": {sms[i]: v for i, v in enumerate(m.per_sm)},
            "one_level_sms": [sms[i] for i in m.one_level],
            "sass_unit": st.unit(session, probe)}
    method = METHOD_L2.format(sms=len(sms), lines=L2_LINES, step=STEP[row.op],
                              lengths=list(L2_LENGTHS), reps=session.repeats, what=WHAT[row])
    if row is L2Figure.PARTITIONS:
        f = Measurement.of_value("movement.l2.partitions", float(len(m.groups)), "count",
                                 spread=None, method=method,
                                 data={**data, "tolerance": st.tol("count")})
        return Measured(f, sass=st.sass(session, probe))
    far = row in (L2Figure.FAR, L2Figure.ATOMIC_FAR)
    if far and len(m.one_level) == len(sms):
        raise NotApplicable(f"hardware: {row.op} steps see one latency level from every SM "
                            f"({m.near:.0f} cycles): no far level to report")
    value = m.far if far else m.near
    spread = m.spread["far" if far else "near"]
    limit = max(1.0, 0.01 * value) if value == value else 0.0
    why = f"per-repeat medians spread {spread:.1f} cycles > {limit:.1f}" if spread > limit else ""
    if spread != spread:
        why = (f"a far level in {m.far_repeats} of {session.repeats} launches: its spread over "
               f"them is unknown")
    return Measured(Measurement.of_value(KEYS[row], value, "cycles", spread=spread, unstable=why,
                                         method=method,
                                         data={**data, "tolerance": st.tol("latency")}),
                    sass=st.sass(session, probe))


# --- latency under load --------------------------------------------------------------------------

def streamers(share: int, sms: int) -> int:
    return round(share / 100 * (sms - 1))


def stream_slice(k: int, l2: int, total: int) -> int:
    """Bytes each of k streamers cycles through: a power of two, together at least twice the
    L2 (so the streams come from device memory) and at most the buffer."""
    want = max(MIB, -(-2 * l2 // max(1, k)))
    size = 1 << (want - 1).bit_length()
    while k * size > total and size > MIB:
        size //= 2
    return size


def _measure_loaded(session: Context, share: int, arch: str):
    probe = chases.loaded_probe(arch)
    name = f"{probe.name}/s{share}"
    st.built(session, probe)
    fns = st.functions(session, probe, LOADED_LENGTHS)
    # as many launches as LOADED_LAUNCHES asks while no line of the buffer is visited twice
    capacity = st.big_bytes(session) // LOADED_BLOCK
    reps, blocks = layouts.fresh_launches(session.repeats, LOADED_LAUNCHES, capacity,
                                          int(passes()) * sum(LOADED_LENGTHS))
    k = streamers(share, st.sms(session))
    big, dst = st.big(session), st.dst(session)
    base = st.address(big)
    chain = layouts.block_chain(blocks, capacity, LOADED_BLOCK, st.rng(session))
    idx, val = layouts.pointer_words(chain, base)
    st.upload(big, idx, val, np.uint64)
    slice_ = stream_slice(k, session.gpu.dev.l2_bytes, st.big_bytes(session))
    counters = session.runner.zeros(((reps + 1) * len(LOADED_LENGTHS),), np.uint32)
    st.flush_l2(session)
    walk, want = {"cursor": 0}, []

    def args(n):
        j = LOADED_LENGTHS.index(n)

        def one(r, rec):
            slot = counters[r * len(LOADED_LENGTHS) + j:][:1]
            start = np.uint64(base + chain.position(walk["cursor"]) * LOADED_BLOCK)
            walk["cursor"] += int(passes()) * n
            want.append((n, r, base + chain.position(walk["cursor"]) * LOADED_BLOCK))
            return (rec, start, slot, dst, np.uint64(slice_), np.uint32(LOADED_TRIPS),
                    np.uint32(k), np.uint64(LOADED_WAIT_NS), passes())
        return one
    out = session.runner.measure(Plan(
        name, fns, st.geometry((1 + k,), (1024,), smem=st.lone_smem(session)), args, reps,
        record=((1 + k) * 6,), order=Order.REPEAT))
    host = {n: out.raw[n].reshape(reps + 1, 1 + k, 6) for n in LOADED_LENGTHS}
    for n, r, end in want:
        if int(host[n][r, 0, 1]) != end:
            raise ChainError(f"{name}: launch {r} of length {n} ended at "
                             f"{int(host[n][r, 0, 1]):#x}, the host's walk at {end:#x}")
        seen = int(host[n][r, 0, 4] & np.uint64(0xFFFFFFFF))
        if seen != k:
            raise ChainError(f"{name}: the chase started with {seen} of {k} streamers running "
                             f"(the wait for them timed out)")
    cycles = {n: [int(v) for v in host[n][1:, 0, 0]] for n in LOADED_LENGTHS}
    windows = [((int(h[0, 2]), int(h[0, 3])), [(int(x[2]), int(x[3])) for x in h[1:]])
               for n in LOADED_LENGTHS for h in host[n][1:]]
    point = analysis.loaded_point(share, k, cycles, windows, LOADED_TRIPS * 65536,
                                  spread_rel=DRAM_SPREAD_REL)
    return point, cycles, reps, slice_, probe


def loaded(session: Context, share: int, arch: str, artifact) -> Measured:
    """Device-memory load latency while `share` percent of the other SMs stream."""
    point, cycles, reps, slice_, probe = st.once(session, ("loaded", share),
                                                 lambda: _measure_loaded(session, share, arch))
    if share == LOADED_SHARES[-1]:
        st.once(session, ("loaded_plot",), lambda: plots.save_loaded(
            artifact, [loaded_point(session, x, arch) for x in LOADED_SHARES], session.gpu.dev))
    m = Measurement.of_fit(
        f"movement.loaded.latency.s{share}", point.latency, "cycles",
        method=(f"CTA 0 chases device memory (random lines of a buffer >= 4 x L2, none visited "
                f"twice, L2 evicted first; slope of %clock64 cycles over {list(LOADED_LENGTHS)} "
                f"dependent loads, second pass, median of {reps} launches) once "
                f"{point.streamers} other CTAs (one per SM, 1024 threads, ld.global.cg.v4 over "
                f"{slice_ // MIB} MiB each) are streaming"),
        data={"cycles": cycles, "streamers": point.streamers,
              "achieved_gbps": round(point.gbps, 1), "covered": point.covered,
              "sass_unit": st.unit(session, probe), "tolerance": st.tol("loaded")})
    if not point.covered and not m.unstable:
        m.unstable = "a chase ran outside the streamers' window: the load did not cover it"
    return Measured(m, sass=st.sass(session, probe))


def loaded_point(session: Context, share: int, arch: str) -> analysis.LoadedPoint:
    return st.once(session, ("loaded", share), lambda: _measure_loaded(session, share, arch))[0]
