"""Bandwidth loops on the shared frame: every thread of a 1024-thread CTA (one per SM) runs a
nounroll loop of `unroll` independent accesses per iteration for `trips` iterations between
its two clock reads; the bytes moved per SM grow with the trip count, the fixed costs cancel
in the slope. Lane 0 of every warp records its clocks, %globaltimer around the loop, an
accumulator of every loaded word (so no load is dead) and its SM. Also the TMA bulk-copy
pipeline (two stages of TMA_STAGE bytes in flight, one issuing thread per CTA)."""
from __future__ import annotations

from ...core.archs import number
from ...core.ptx import Kernel
from ...core.probe import NotApplicable
from .kernels import WAIT_TAIL, bulk_dst, entry_name
from .probes import StreamProbe
from .rows import (DSM_STREAM, TMA_STAGE, TMA_TRIPS, Region, Stream, StreamRow, needs,
                   stream_arch)

PARAMS = [".param .u64 out_param", ".param .u64 src_param", ".param .u64 dst_param",
          ".param .u64 slice_param", ".param .u32 trips_param", ".param .u32 mask_param"]
WARP_RECORD = 48    # t0, t1, globaltimer before / after, accumulator, SM, cluster rank
VEC = {4: "u32", 8: "v2.u32", 16: "v4.u32"}
SASS = {  # the SASS one access of a row must be
    Stream.SHARED_U32: {"LDS": 1}, Stream.SHARED_U64: {"LDS.64": 1},
    Stream.SHARED_U128: {"LDS.128": 1}, Stream.L1: {"LDG.E.128": 1},
    Stream.L2: {"LDG.E.128.STRONG.GPU": 1}, Stream.DRAM_READ: {"LDG.E.128.STRONG.GPU": 1},
    Stream.DRAM_WRITE: {"STG.E.128": 1},
    Stream.DRAM_COPY: {"LDG.E.128.STRONG.GPU": 1, "STG.E.128": 1},
    Stream.CP_ASYNC: {"LDGSTS.E.BYPASS.128": 1}, Stream.DSM: {"LD.E.128": 1},
}


def _regs(width: int, k: int) -> str:
    n = width // 4
    return "{" + ", ".join(f"%v{n * k + j}" for j in range(n)) + "}" if n > 1 else f"%v{k}"


def _ops(row: StreamRow) -> list[str]:
    """The `unroll` accesses of one iteration (addresses %sa shared, %ga / %gd global)."""
    u, s, w = row.unroll, row.step, row.width
    kind = row.kind
    if kind in (Stream.SHARED_U32, Stream.SHARED_U64, Stream.SHARED_U128):
        return [f"ld.shared.{VEC[w]} {_regs(w, k)}, [%sa+{k * s}];" for k in range(u)]
    if kind is Stream.DSM:
        return [f"ld.shared::cluster.{VEC[w]} {_regs(w, k)}, [%sa+{k * s}];" for k in range(u)]
    if kind is Stream.CP_ASYNC:
        return [f"cp.async.cg.shared.global [%sa+{k * s}], [%ga+{k * s}], 16;"
                for k in range(u)] + ["cp.async.commit_group;", "cp.async.wait_group 1;"]
    if kind is Stream.DRAM_WRITE:
        return [f"st.global.v4.u32 [%ga+{k * s}], {{%k, %k, %k, %k}};" for k in range(u)]
    cache = "" if kind is Stream.L1 else ".cg"      # L1: the default (weak, L1-cached) load
    loads = [f"ld.global{cache}.v4.u32 {_regs(w, k)}, [%ga+{k * s}];" for k in range(u)]
    if kind is Stream.DRAM_COPY:
        return loads + [f"st.global.v4.u32 [%gd+{k * s}], {_regs(w, k)};" for k in range(u)]
    return loads


def _folds(row: StreamRow) -> list[str]:
    """Every loaded word xor-ed into one of four accumulators (copies store theirs)."""
    if row.kind in (Stream.DRAM_WRITE, Stream.DRAM_COPY, Stream.CP_ASYNC):
        return []
    words = row.unroll * row.width // 4
    return [f"xor.b32 %acc{j % 4}, %acc{j % 4}, %v{j};" for j in range(words)]


def _addresses(row: StreamRow) -> list[str]:
    """This iteration's base addresses from the offset %off."""
    if row.region is Region.SHARED:
        lines = ["add.u32 %sa, %sbase, %off;"]
        return lines + (["cvt.u64.u32 %a64, %off;", "add.u64 %ga, %gbase, %a64;"]
                        if row.kind is Stream.CP_ASYNC else [])
    lines = ["cvt.u64.u32 %a64, %off;", "add.u64 %ga, %gbase, %a64;"]
    if row.kind is Stream.DRAM_COPY:
        lines.append("add.u64 %gd, %dbase, %a64;")
    if row.kind is Stream.CP_ASYNC:
        lines.append("add.u32 %sa, %sbase, %toff;")
    return lines


def _setup(row: StreamRow, smem: str) -> list[str]:
    lines = ["ld.param.u64 %out, [out_param];", "ld.param.u64 %src, [src_param];",
             "ld.param.u64 %dst, [dst_param];", "ld.param.u64 %slice, [slice_param];",
             "ld.param.u32 %trips, [trips_param];", "ld.param.u32 %mask, [mask_param];",
             "mov.u32 %tx, %tid.x;", "mov.u32 %cta, %ctaid.x;", "mov.u32 %rank, 0;",
             f"mul.lo.u32 %off, %tx, {row.width};", "mov.u32 %toff, %off;",
             "cvt.u64.u32 %a64, %cta;", "mul.lo.u64 %a64, %a64, %slice;",
             "add.u64 %gbase, %src, %a64;", "add.u64 %dbase, %dst, %a64;",
             "mov.u32 %acc0, 0;", "mov.u32 %acc1, 0;", "mov.u32 %acc2, 0;", "mov.u32 %acc3, 0;",
             "mov.u32 %k, 0;"]
    if smem:
        lines.append(f"mov.u32 %sbase, {smem};")
    if row.kind is Stream.DSM:   # read the next CTA's shared memory
        lines += ["mov.u32 %rank, %cluster_ctarank;", "mov.u32 %nrank, %cluster_nctarank;",
                  "add.u32 %tgt, %rank, 1;", "rem.u32 %tgt, %tgt, %nrank;",
                  "mapa.shared::cluster.u32 %sbase, %sbase, %tgt;",
                  "barrier.cluster.arrive;", "barrier.cluster.wait;"]
    return lines


def _after(row: StreamRow) -> list[str]:
    tail = ["mov.u64 %g1, %globaltimer;", "xor.b32 %acc0, %acc0, %acc1;",
            "xor.b32 %acc2, %acc2, %acc3;", "xor.b32 %acc0, %acc0, %acc2;",
            "mov.u32 %sm, %smid;", "and.b32 %lane, %tx, 31;", "setp.ne.u32 %more, %lane, 0;",
            "@%more bra $SKIP_REC;", "shr.u32 %v, %tx, 5;", "mad.lo.u32 %v, %cta, 32, %v;",
            f"mul.wide.u32 %a64, %v, {WARP_RECORD};", "add.u64 %rec, %out, %a64;",
            "st.global.u64 [%rec], %t0;", "st.global.u64 [%rec+8], %t1;",
            "st.global.u64 [%rec+16], %g0;", "st.global.u64 [%rec+24], %g1;",
            "st.global.u32 [%rec+32], %acc0;", "st.global.u32 [%rec+36], %sm;",
            "st.global.u32 [%rec+40], %rank;", "$SKIP_REC:"]
    if row.kind is Stream.DSM:   # no CTA leaves while another still reads its memory
        tail += ["barrier.cluster.arrive;", "barrier.cluster.wait;"]
    return tail


def stream_kernel(entry: str, row: StreamRow) -> str:
    """The bandwidth loop of one row. Parameters (out, src, dst, slice, trips, mask): CTA c
    walks src + c * slice (and dst + c * slice for copies), or its dynamic shared memory;
    thread t starts at offset t * width, access k of an iteration at + k * step, and the
    offset moves on by unroll * step per iteration, wrapped by `mask`."""
    shared = row.region is Region.SHARED or row.kind is Stream.CP_ASYNC
    smem = f"{entry}_dyn" if shared else ""
    loop = ["$LOOP:", ".pragma \"nounroll\";", *_addresses(row), *_ops(row), *_folds(row),
            f"add.u32 %off, %off, {row.advance};", "and.b32 %off, %off, %mask;",
            "add.u32 %k, %k, 1;", "setp.lt.u32 %more, %k, %trips;", "@%more bra $LOOP;"]
    if row.kind is Stream.CP_ASYNC:
        loop.append("cp.async.wait_all;")
    words = row.unroll * max(1, row.width // 4)
    return Kernel(
        entry=entry, params=PARAMS,
        directives=[".explicitcluster"] if row.kind is Stream.DSM else [],
        preamble=[f".extern .shared .align 128 .b8 {smem}[];"] if smem else [],
        decls=[".reg .b64 %out, %src, %dst, %slice, %rec, %a64, %gbase, %dbase, %ga, %gd, "
               "%t0, %t1, %dt, %g0, %g1;",
               ".reg .b32 %trips, %mask, %tx, %cta, %sm, %v, %k, %off, %toff, %sa, %sbase, "
               "%lane, %rank, %nrank, %tgt, %acc0, %acc1, %acc2, %acc3;",
               f".reg .b32 %v<{words}>;", ".reg .pred %never, %more;"],
        setup=_setup(row, smem), sync=["mov.u64 %g0, %globaltimer;"], body=loop,
        after=_after(row)).render()


def _dsm_stream_gap(arch: str) -> str | None:
    """sm_120/sm_121 (ptxas 13.x): the DSM stream's ld.shared::cluster.v4 becomes a generic
    LD.E.128 through the shared window, and %tid.x is re-read inside the timed region ahead of
    its guard; the row is not recorded there until the kernel is restructured for it."""
    if number(arch) in (120, 121):
        return (f"{arch}: ptxas 13.x issues the DSM stream's ld.shared::cluster.v4 as a generic "
                f"LD.E.128 through the shared window and re-reads %tid.x inside the timed "
                f"region (not the DSM load path sm_90/sm_100 record)")
    return None


def stream_probe(row: StreamRow, arch: str) -> StreamProbe:
    why = (needs(arch, 90, "thread-block clusters") or _dsm_stream_gap(arch)) \
        if row.kind is Stream.DSM else stream_arch(row, arch)
    if why:
        raise NotApplicable(f"static: {why}")
    name = f"movement/bandwidth/{row.kind.value}"
    entry = entry_name(name)
    loop = {p: c * row.unroll for p, c in SASS[row.kind].items()}
    total, side = dict(loop), ()
    if row.kind is Stream.CP_ASYNC:
        loop.update({"LDGDEPBAR": 1, "DEPBAR.LE": 1})
        total.update({"LDGDEPBAR": 2, "DEPBAR.LE": 2})   # the drain: cp.async.wait_all
    return StreamProbe(name, arch, "\n" + stream_kernel(entry, row),
                       {t: entry for t in row.trips}, {t: t for t in row.trips},
                       loop=loop, total=total, side=side)


def dsm_stream_probe(arch: str) -> StreamProbe:
    return stream_probe(DSM_STREAM, arch)


# --- the TMA bulk-copy pipeline ------------------------------------------------------------------

def _issue(s: int, size: int, dst: str) -> list[str]:
    """Arm stage s's barrier for TMA_STAGE bytes and issue its copies of `size` bytes."""
    copies = [f"cp.async.bulk.{dst}.global.mbarrier::complete_tx::bytes "
              f"[%d{s}+{j * size}], [%ga+{j * size}], {size}, [%bar{s}];"
              for j in range(TMA_STAGE // size)]
    return [f"mbarrier.arrive.expect_tx.shared::cta.b64 %st{s}, [%bar{s}], {TMA_STAGE};",
            *copies, f"add.u32 %off, %off, {TMA_STAGE};", "and.b32 %off, %off, %mask;",
            "cvt.u64.u32 %a64, %off;", "add.u64 %ga, %gbase, %a64;"]


def _wait(s: int, label: str) -> list[str]:
    return [f"{label}:", f"mbarrier.try_wait.shared::cta.b64 %ok, [%bar{s}], %st{s};",
            f"@!%ok bra {label};"]


def tma_stream_kernel(entry: str, size: int, dst: str = "shared::cluster") -> str:
    """One thread per CTA keeps two stages of TMA_STAGE bytes in flight, each stage `size`-
    byte cp.async.bulk copies completing on the stage's mbarrier: both stages issued, then
    per iteration each stage waited for and issued again, finally both waited for. Bytes
    per launch: (2 + 2 * trips) * TMA_STAGE per CTA. Parameters as the stream kernels."""
    dyn, bars = f"{entry}_dyn", f"{entry}_bars"
    body = [*_issue(0, size, dst), *_issue(1, size, dst), "$LOOP:", ".pragma \"nounroll\";",
            *_wait(0, "$WL0"), *_issue(0, size, dst), *_wait(1, "$WL1"), *_issue(1, size, dst),
            "add.u32 %k, %k, 1;", "setp.lt.u32 %more, %k, %trips;", "@%more bra $LOOP;",
            *_wait(0, "$WE0"), *_wait(1, "$WE1")]
    return Kernel(
        entry=entry, params=PARAMS,
        preamble=[f".extern .shared .align 128 .b8 {dyn}[];",
                  f".shared .align 8 .b64 {bars}[2];"],
        decls=[".reg .b64 %out, %src, %dst, %slice, %rec, %a64, %gbase, %ga, %t0, %t1, %dt, "
               "%g0, %g1, %st0, %st1;",
               ".reg .b32 %trips, %mask, %tx, %cta, %sm, %v, %k, %off, %d0, %d1, %bar0, %bar1, "
               "%lane, %rank;", ".reg .pred %never, %more, %ok;"],
        setup=["ld.param.u64 %out, [out_param];", "ld.param.u64 %src, [src_param];",
               "ld.param.u64 %slice, [slice_param];", "ld.param.u32 %trips, [trips_param];",
               "ld.param.u32 %mask, [mask_param];", "mov.u32 %tx, %tid.x;",
               "mov.u32 %cta, %ctaid.x;", "mov.u32 %rank, 0;", "cvt.u64.u32 %a64, %cta;",
               "mul.lo.u64 %a64, %a64, %slice;", "add.u64 %gbase, %src, %a64;",
               "mov.u64 %ga, %gbase;", "mov.u32 %off, 0;", "mov.u32 %k, 0;",
               f"mov.u32 %d0, {dyn};", f"add.u32 %d1, %d0, {TMA_STAGE};",
               f"mov.u32 %bar0, {bars};", "add.u32 %bar1, %bar0, 8;",
               "mbarrier.init.shared::cta.b64 [%bar0], 1;",
               "mbarrier.init.shared::cta.b64 [%bar1], 1;",
               "fence.mbarrier_init.release.cluster;", "fence.proxy.async.shared::cta;"],
        sync=["mov.u64 %g0, %globaltimer;"], body=body,
        after=["mov.u64 %g1, %globaltimer;", "mov.u32 %sm, %smid;",
               f"mul.wide.u32 %a64, %cta, {32 * WARP_RECORD};", "add.u64 %rec, %out, %a64;",
               "st.global.u64 [%rec], %t0;", "st.global.u64 [%rec+8], %t1;",
               "st.global.u64 [%rec+16], %g0;", "st.global.u64 [%rec+24], %g1;",
               "st.global.u32 [%rec+32], %off;", "st.global.u32 [%rec+36], %sm;",
               "st.global.u32 [%rec+40], %rank;"]).render()


def tma_stream_probe(size: int, arch: str) -> StreamProbe:
    why = needs(arch, 90, "the Tensor Memory Accelerator")
    if why:
        raise NotApplicable(f"static: {why}")
    name = f"movement/tma_bw/s{size}"
    entry = entry_name(name)
    per_stage = TMA_STAGE // size
    return StreamProbe(
        name, arch, "\n" + tma_stream_kernel(entry, size, bulk_dst(arch)),
        {t: entry for t in TMA_TRIPS},
        {t: t for t in TMA_TRIPS},
        loop={"UBLKCP.S.G": 2 * per_stage, "SYNCS.ARRIVE.TRANS64": 2,
              "SYNCS.PHASECHK.TRANS64.TRYWAIT": 2},
        total={"UBLKCP.S.G": 4 * per_stage, "SYNCS.ARRIVE.TRANS64": 4,
               "SYNCS.PHASECHK.TRANS64.TRYWAIT": 4},
        tail=WAIT_TAIL)
