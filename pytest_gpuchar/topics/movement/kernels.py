"""The movement topic's latency probes on the shared kernel frame (core.ptx.Kernel): chains
of dependent steps between two clock reads, in the pass loop (the first pass warms the
instruction cache; the records of every pass are kept). Clusters: the DSM chase, mapa, the
cluster barrier and the launch stamp; TMA: 1 KiB transfer chains and multicast rounds;
async copies, mbarriers and fences; the L2 chase of every SM and the loaded-latency kernel.
Bandwidth loops are in streams.py."""
from __future__ import annotations

import re

from ...core.archs import number
from ...core.ptx import Kernel
from ...core.probe import NotApplicable, Probe
from .probes import CountProbe, MovementProbe
from .rows import (BARRIER_LENGTHS, DSM_LENGTHS, DSM_SLOTS, LINE, MAPA_LENGTHS,
                   MULTICAST_LENGTHS, TMA_BYTES, TMA_LENGTHS, DsmFlavour, Mechanism, Sync, needs)

OUT = ".param .u64 out_param"
ITERS = ".param .u32 iters_param"
TMAP = ".param .align 128 .b8 tmap_param[128]"   # CUtensorMap: 128-byte aligned
RECORD = 32      # bytes per (CTA, pass) record of the cluster kernels
# the wait of a TMA step: the compiler moves the retry of a try_wait loop behind EXIT
WAIT_TAIL = ("SYNCS.PHASECHK.TRANS64*", "YIELD")   # sm_120's retry loop yields the warp


def entry_name(name: str) -> str:
    return "gpuchar_mv_" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")


def common_regs(extra_b64: str = "", extra_b32: str = "", extra_pred: str = "") -> list[str]:
    """Registers every kernel here declares (frame: %t0 %t1 %dt %it %iters %step ...)."""
    return [f".reg .b64 %out, %rec, %a64, %t0, %t1, %dt{extra_b64};",
            f".reg .b32 %iters, %it, %step, %tx, %cta, %sm, %v{extra_b32};",
            f".reg .pred %never, %again, %more{extra_pred};"]


def load_common() -> list[str]:
    return ["ld.param.u64 %out, [out_param];", "ld.param.u32 %iters, [iters_param];",
            "mov.u32 %tx, %tid.x;", "mov.u32 %cta, %ctaid.x;"]


def record_lines(slot_bytes: int, fields: list[tuple[str, str, int]]) -> list[str]:
    """Store one record per (CTA, pass) at out + (cta * iters + it) * slot_bytes: fields are
    (ptx type, register, byte offset). %v, %a64 and %rec are overwritten first, so no field
    may be one of them."""
    clobbered = [reg for _, reg, _ in fields if reg in ("%v", "%a64", "%rec")]
    if clobbered:
        raise ValueError(f"record_lines: {clobbered} would be stored after being overwritten")
    return ["mad.lo.u32 %v, %cta, %iters, %it;", f"mul.wide.u32 %a64, %v, {slot_bytes};",
            "add.u64 %rec, %out, %a64;",
            *[f"st.global.{t} [%rec+{off}], {reg};" for t, reg, off in fields]]


def only_thread0(lines: list[str], label: str = "$SKIP_REC") -> list[str]:
    return ["setp.ne.u32 %more, %tx, 0;", f"@%more bra {label};", *lines, f"{label}:"]


def make_probe(cls, name: str, arch: str, lengths, make, **kw) -> Probe:
    """A probe of one kernel per length: make(entry, n) -> (kernel text, ops timed)."""
    entries, ops, texts = {}, {}, []
    for n in lengths:
        entries[n] = entry_name(f"{name}_n{n}")
        text, ops[n] = make(entries[n], n)
        texts.append(text)
    return cls(name, arch, "\n" + "\n".join(texts), entries, ops, **kw)


# --- clusters: distributed shared memory ---------------------------------------------------------

def _dsm_fill(flavour: DsmFlavour) -> list[str]:
    """Each CTA writes its chain into its own shared memory: slot k holds the cluster-wide
    address of slot next[k] of this CTA (mapa to the own rank), then the cluster barrier
    makes every chain visible."""
    if flavour is DsmFlavour.U32:
        value = ["mad.lo.u32 %v, %nk, 128, %sb;", "mapa.shared::cluster.u32 %v, %v, %rank;",
                 "st.shared.u32 [%slot], %v;"]
    else:
        value = ["mul.wide.u32 %a64, %nk, 128;", "add.u64 %g, %gbase, %a64;",
                 "mapa.u64 %g, %g, %rank;", "st.shared.u64 [%slot], %g;"]
    return ["mov.u32 %k, 0;", "$FILL:", ".pragma \"nounroll\";", "mul.wide.u32 %a64, %k, 4;",
            "add.u64 %a64, %a64, %next;", "ld.global.u32 %nk, [%a64];",
            "mad.lo.u32 %slot, %k, 128, %sb;", *value, "add.u32 %k, %k, 1;",
            f"setp.lt.u32 %more, %k, {DSM_SLOTS};", "@%more bra $FILL;",
            "barrier.cluster.arrive;", "barrier.cluster.wait;"]


def dsm_kernel(entry: str, flavour: DsmFlavour, n: int) -> str:
    """The DSM chase: parameters (out, next: u32[DSM_SLOTS] chain, iters = cluster size + 1).
    Pass `it` of CTA `rank` chases n steps through the chain of CTA (rank + it) mod size
    (pass 0 and the last pass: its own), starting at slot 0; a record per (CTA, pass):
    cycles, end offset, target rank, SM, rank; a cluster barrier closes every pass."""
    smem = f"{entry}_smem"
    u32 = flavour is DsmFlavour.U32
    start = (["mapa.shared::cluster.u32 %pbase, %sb, %tgt;", "mov.u32 %p, %pbase;"] if u32
             else ["mapa.u64 %qbase, %gbase, %tgt;", "mov.u64 %q, %qbase;"])
    step = "ld.shared::cluster.u32 %p, [%p];" if u32 else "ld.u64 %q, [%q];"
    end = (["sub.u32 %end, %p, %pbase;"] if u32 else
           ["sub.u64 %a64, %q, %qbase;", "cvt.u32.u64 %end, %a64;"])
    return Kernel(
        entry=entry, params=[OUT, ".param .u64 next_param", ITERS],
        directives=[".explicitcluster"],
        preamble=[f".shared .align 128 .b8 {smem}[{DSM_SLOTS * LINE}];"],
        decls=common_regs(", %next, %g, %gbase, %q, %qbase",
                      ", %rank, %nrank, %tgt, %k, %nk, %slot, %sb, %p, %pbase, %end"),
        setup=[*load_common(), "ld.param.u64 %next, [next_param];",
               "mov.u32 %rank, %cluster_ctarank;", "mov.u32 %nrank, %cluster_nctarank;",
               f"mov.u32 %sb, {smem};", f"mov.u64 %gbase, {smem};",
               "cvta.shared.u64 %gbase, %gbase;", *_dsm_fill(flavour)],
        operands=["add.u32 %tgt, %rank, %it;", "rem.u32 %tgt, %tgt, %nrank;", *start],
        body=[step] * n,
        after=["sub.s64 %dt, %t1, %t0;", *end, "mov.u32 %sm, %smid;",
               *record_lines(RECORD, [("u64", "%dt", 0), ("u32", "%end", 8), ("u32", "%tgt", 12),
                                 ("u32", "%sm", 16), ("u32", "%rank", 20)]),
               "barrier.cluster.arrive;", "barrier.cluster.wait;"],
        passes=True).render()


def dsm_probe(flavour: DsmFlavour, arch: str) -> Probe:
    why = needs(arch, 90, "thread-block clusters")
    if why:
        raise NotApplicable(f"static: {why}")
    name = f"movement/dsm/{flavour.value}"
    make = lambda e, n: (dsm_kernel(e, flavour, n), n)
    if flavour is DsmFlavour.U32:
        # the compiler rebuilds the 64-bit window address (low word, SR_SWINHI) per load:
        # register moves beside each LD
        return make_probe(CountProbe, name, arch, DSM_LENGTHS, make, chained=True,
                      counts={"LD.E": 1}, side=("MOV", "IMAD.MOV*", "S2R"))
    return make_probe(MovementProbe, name, arch, DSM_LENGTHS, make, unit=("LD.E.64",),
                  chained=True)


# --- clusters: mapa, barrier, launch stamp -------------------------------------------------------

def mapa_kernel(entry: str, n: int) -> str:
    """n dependent mapa.shared::cluster.u32 (each maps the previous result) on values loaded
    from memory: parameters (out, in: u32 [start, rank], iters)."""
    return Kernel(
        entry=entry, params=[OUT, ".param .u64 in_param", ITERS],
        decls=common_regs(", %in", ", %p, %r"),
        setup=[*load_common(), "ld.param.u64 %in, [in_param];", "ld.global.u32 %p, [%in];",
               "ld.global.u32 %r, [%in+4];"],
        body=["mapa.shared::cluster.u32 %p, %p, %r;"] * n,
        after=["sub.s64 %dt, %t1, %t0;",
               *only_thread0(record_lines(16, [("u64", "%dt", 0), ("u32", "%p", 8)]))],
        passes=True).render()


def barrier_kernel(entry: str, n: int, relaxed: bool) -> str:
    """n x (barrier.cluster.arrive[.relaxed]; barrier.cluster.wait) by every thread of every
    CTA; thread 0 of each CTA records its cycles per pass."""
    arrive = "barrier.cluster.arrive.relaxed;" if relaxed else "barrier.cluster.arrive;"
    return Kernel(
        entry=entry, params=[OUT, ITERS], directives=[".explicitcluster"],
        decls=common_regs(extra_b32=", %rank"),
        setup=[*load_common(), "mov.u32 %rank, %cluster_ctarank;"],
        body=[arrive, "barrier.cluster.wait;"] * n,
        after=["sub.s64 %dt, %t1, %t0;", "mov.u32 %sm, %smid;",
               *only_thread0(record_lines(16, [("u64", "%dt", 0), ("u32", "%sm", 8),
                                           ("u32", "%rank", 12)]))],
        passes=True).render()


def sync_probe(kind: Sync, arch: str) -> Probe:
    why = needs(arch, 90, "thread-block clusters")
    if why:
        raise NotApplicable(f"static: {why}")
    if kind is Sync.MAPA:
        return make_probe(MovementProbe, "movement/cluster/mapa", arch, MAPA_LENGTHS,
                      lambda e, n: (mapa_kernel(e, n), n), unit=("PRMT",), chained=True)
    relaxed = kind is Sync.BARRIER_RELAXED
    unit = ("UCGABAR_ARV", "UCGABAR_WAIT", "CCTL.IVALL")
    if not relaxed:   # the release of the default arrive: a GPU-scope memory barrier (the
        # driver JIT of CUDA 13.0 puts a MEMBAR.ALL.CTA ahead of it, ptxas 13.5 does not)
        unit = ("?MEMBAR.ALL.CTA", "MEMBAR.ALL.GPU", "ERRBAR", "CGAERRBAR", *unit)
    return make_probe(MovementProbe, f"movement/cluster/{kind.value}", arch, BARRIER_LENGTHS,
                  lambda e, n: (barrier_kernel(e, n, relaxed), n), unit=unit)


def launch_kernel(entry: str) -> str:
    """Entry and exit stamps: thread 0 of each block records (clock at entry, clock at exit,
    SM, cluster rank); nothing between the two clock reads."""
    return Kernel(
        entry=entry, params=[OUT], decls=common_regs(extra_b32=", %rank"),
        setup=["ld.param.u64 %out, [out_param];", "mov.u32 %tx, %tid.x;",
               "mov.u32 %cta, %ctaid.x;"],
        body=[], guard=False,
        after=["mov.u32 %sm, %smid;", "mov.u32 %rank, %cluster_ctarank;",
               *only_thread0(["mul.wide.u32 %a64, %cta, 32;", "add.u64 %rec, %out, %a64;",
                               "st.global.u64 [%rec], %t0;", "st.global.u64 [%rec+8], %t1;",
                               "st.global.u32 [%rec+16], %sm;",
                               "st.global.u32 [%rec+20], %rank;"])]).render()


def launch_probe(arch: str) -> Probe:
    why = needs(arch, 90, "thread-block clusters")
    if why:
        raise NotApplicable(f"static: {why}")
    e = entry_name("movement/cluster/launch")
    return MovementProbe("movement/cluster/launch", arch, "\n" + launch_kernel(e), {0: e},
                         {0: 0}, unit=(), guarded=False)


# --- TMA -----------------------------------------------------------------------------------------

def _tma_wait(k: int) -> list[str]:
    return [f"$W{k}:", "mbarrier.try_wait.shared::cta.b64 %ok, [%bar], %st;",
            f"@!%ok bra $W{k};"]


def bulk_dst(arch: str) -> str:
    """The state space of a TMA copy's shared-memory destination. The own CTA's buffer is
    `.shared::cluster` on sm_90 (PTX 8.0 has no other form); from sm_100 on (PTX 8.6+) it is
    `.shared::cta`: with a `.shared::cluster` address ptxas 13.x for sm_120 tests at run time
    whether the destination is the own CTA and calls a driver routine (CALL.ABS) if not, which
    would put that test and call in every timed step."""
    return "shared::cta" if number(arch) >= 100 else "shared::cluster"


def _tma_step(mech: Mechanism, k: int, dst: str = "shared::cluster") -> list[str]:
    """One dependent 1 KiB transfer: issue, completion, and the next address from the data."""
    arm = f"mbarrier.arrive.expect_tx.shared::cta.b64 %st, [%bar], {TMA_BYTES};"
    if mech is Mechanism.PLAIN:
        # every word is used (the other words xor-ed aside), so both loads stay 128-bit
        return ["add.u64 %a64, %p, %toff;", "ld.global.cg.v4.u32 {%x, %y, %z, %w}, [%a64];",
                "ld.global.cg.v4.u32 {%x2, %y2, %z2, %w2}, [%a64+16];",
                "add.u32 %off, %x, %x2;", "cvt.u64.u32 %o64, %off;",
                "add.u64 %p, %base, %o64;", "xor.b32 %acc, %acc, %y;",
                "xor.b32 %acc, %acc, %z;", "xor.b32 %acc, %acc, %w;", "xor.b32 %acc, %acc, %y2;",
                "xor.b32 %acc, %acc, %z2;", "xor.b32 %acc, %acc, %w2;"]
    if mech is Mechanism.BULK:
        copy = (f"cp.async.bulk.{dst}.global.mbarrier::complete_tx::bytes [%dst], "
                f"[%p], {TMA_BYTES}, [%bar];")
        after = ["ld.shared.u32 %off, [%dst];", "cvt.u64.u32 %o64, %off;",
                 "add.u64 %p, %base, %o64;"]
    elif mech is Mechanism.TENSOR1D:
        copy = (f"cp.async.bulk.tensor.1d.{dst}.global.mbarrier::complete_tx::bytes "
                "[%dst], [%tm, {%x}], [%bar];")
        after = ["ld.shared.u32 %x, [%dst];"]
    else:
        copy = (f"cp.async.bulk.tensor.2d.{dst}.global.mbarrier::complete_tx::bytes "
                "[%dst], [%tm, {%x, %y}], [%bar];")
        after = ["ld.shared.v2.u32 {%x, %y}, [%dst];"]
    return [arm, copy, *_tma_wait(k), *after]


def _tma_start(mech: Mechanism) -> list[str]:
    if mech in (Mechanism.PLAIN, Mechanism.BULK):
        return ["add.u64 %p, %base, %start;", "mul.wide.u32 %toff, %tx, 32;"]
    return ["cvt.u32.u64 %x, %start;", "shr.u64 %a64, %start, 32;", "cvt.u32.u64 %y, %a64;",
            "mov.b64 %tm, tmap_param;", "cvta.param.u64 %tm, %tm;"]


def _tma_end(mech: Mechanism) -> list[str]:
    if mech in (Mechanism.PLAIN, Mechanism.BULK):
        return ["sub.u64 %a64, %p, %base;"]
    return ["cvt.u64.u32 %a64, %x;", "cvt.u64.u32 %o64, %y;", "shl.b64 %o64, %o64, 32;",
            "or.b64 %a64, %a64, %o64;"]


def tma_kernel(entry: str, mech: Mechanism, n: int, space: str = "shared::cluster") -> str:
    """n dependent 1 KiB transfers: parameters (out, base, start, iters[, tensor map]).
    start: byte offset (plain, bulk) or coordinates x | y << 32 (tensor maps); every block
    holds where the next one is (tma_layout). Plain: one warp, 32 B per thread; the others:
    one thread, the transfer completes on an mbarrier (try_wait). Thread 0 records (cycles,
    end position, SM) of the last pass."""
    dst, bar = f"{entry}_dst", f"{entry}_bar"
    params = [OUT, ".param .u64 base_param", ".param .u64 start_param", ITERS]
    if mech in (Mechanism.TENSOR1D, Mechanism.TENSOR2D):
        params.append(TMAP)
    return Kernel(
        entry=entry, params=params,
        preamble=[f".shared .align 128 .b8 {dst}[{TMA_BYTES}];",
                  f".shared .align 8 .b64 {bar};"],
        decls=common_regs(", %base, %start, %p, %toff, %o64, %st, %tm",
                      ", %dst, %bar, %off, %x, %y, %z, %w, %x2, %y2, %z2, %w2, %acc", ", %ok"),
        setup=[*load_common(), "ld.param.u64 %base, [base_param];",
               "ld.param.u64 %start, [start_param];", f"mov.u32 %dst, {dst};",
               f"mov.u32 %bar, {bar};", "mbarrier.init.shared::cta.b64 [%bar], 1;",
               "fence.mbarrier_init.release.cluster;", "fence.proxy.async.shared::cta;",
               "mov.u32 %acc, 0;", *_tma_start(mech)],
        body=[line for k in range(n) for line in _tma_step(mech, k, space)],
        after=["sub.s64 %dt, %t1, %t0;", *_tma_end(mech), "mov.u32 %sm, %smid;",
               *only_thread0(["st.global.u64 [%out], %dt;", "st.global.u64 [%out+8], %a64;",
                               "st.global.u32 [%out+16], %sm;", "st.global.u32 [%out+20], %acc;"])],
        passes=True).render()


WAIT = {"SYNCS.ARRIVE.TRANS64": 1, "SYNCS.PHASECHK.TRANS64.TRYWAIT": 1}
TMA_COUNTS = {
    Mechanism.PLAIN: {"LDG.E.128.STRONG.GPU": 2},
    Mechanism.BULK: {"UBLKCP.S.G": 1, **WAIT, "LDS": 1},
    Mechanism.TENSOR1D: {"UTMALDG.1D": 1, **WAIT, "LDS": 1},
    Mechanism.TENSOR2D: {"UTMALDG.2D": 1, **WAIT, "LDS.64": 1},
}


def tma_probe(mech: Mechanism, arch: str) -> Probe:
    """A TMA latency chain (plain: the comparison, one warp's loads of the same bytes); the
    steps are compiler sequences (uniform datapath, elect loops): each step's transfer,
    arm, wait and read counted exactly."""
    why = needs(arch, 90, "the Tensor Memory Accelerator and mbarrier transactions")
    if why:
        raise NotApplicable(f"static: {why}")
    return make_probe(CountProbe, f"movement/tma/{mech.value}", arch, TMA_LENGTHS,
                  lambda e, n: (tma_kernel(e, mech, n, bulk_dst(arch)), n),
                  counts=TMA_COUNTS[mech],
                  chained=mech is Mechanism.PLAIN, tail=WAIT_TAIL)


def multicast_kernel(entry: str, n: int, multicast: bool) -> str:
    """n rounds of: every CTA arms its mbarrier for 1 KiB; rank 0 multicasts the block to every
    CTA of the cluster (or every CTA loads its own copy); each waits for its own completion,
    reads the next block's offset, then a relaxed cluster barrier. Rounds alternate between
    two buffers and two mbarriers, so a round's data and completion can never land in the
    buffer or phase of the round before (rank 0 is at most one round ahead of any CTA)."""
    dst, bar = f"{entry}_dst", f"{entry}_bar"
    copy = ("@%lead cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
            ".multicast::cluster [%dst{b}], [%p], {size}, [%bar{b}], %mask;" if multicast else
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%dst{b}], [%p], "
            "{size}, [%bar{b}];")
    step = lambda k: [
        f"mbarrier.arrive.expect_tx.shared::cta.b64 %st{k % 2}, [%bar{k % 2}], {TMA_BYTES};",
        copy.format(b=k % 2, size=TMA_BYTES),
        f"$W{k}:", f"mbarrier.try_wait.shared::cta.b64 %ok, [%bar{k % 2}], %st{k % 2};",
        f"@!%ok bra $W{k};", f"ld.shared.u32 %off, [%dst{k % 2}];",
        "barrier.cluster.arrive.relaxed;", "barrier.cluster.wait;", "cvt.u64.u32 %o64, %off;",
        "add.u64 %p, %base, %o64;"]
    return Kernel(
        entry=entry, params=[OUT, ".param .u64 base_param", ".param .u64 start_param", ITERS],
        directives=[".explicitcluster"],
        preamble=[f".shared .align 128 .b8 {dst}[{2 * TMA_BYTES}];",
                  f".shared .align 8 .b64 {bar}[2];"],
        decls=common_regs(", %base, %start, %p, %o64, %st0, %st1",
                      ", %dst0, %dst1, %bar0, %bar1, %off, %rank, %nrank", ", %ok, %lead")
        + [".reg .b16 %mask;", ".reg .b32 %m32;"],
        setup=[*load_common(), "ld.param.u64 %base, [base_param];",
               "ld.param.u64 %start, [start_param];", f"mov.u32 %dst0, {dst};",
               f"add.u32 %dst1, %dst0, {TMA_BYTES};", f"mov.u32 %bar0, {bar};",
               "add.u32 %bar1, %bar0, 8;", "mov.u32 %rank, %cluster_ctarank;",
               "mov.u32 %nrank, %cluster_nctarank;", "setp.eq.u32 %lead, %rank, 0;",
               "shl.b32 %m32, 1, %nrank;", "sub.u32 %m32, %m32, 1;", "cvt.u16.u32 %mask, %m32;",
               "mbarrier.init.shared::cta.b64 [%bar0], 1;",
               "mbarrier.init.shared::cta.b64 [%bar1], 1;",
               "fence.mbarrier_init.release.cluster;", "barrier.cluster.arrive;",
               "barrier.cluster.wait;", "add.u64 %p, %base, %start;"],
        body=[line for k in range(n) for line in step(k)],
        after=["sub.s64 %dt, %t1, %t0;", "sub.u64 %o64, %p, %base;", "mov.u32 %sm, %smid;",
               # not %a64: record_lines computes the record's address in it
               *record_lines(RECORD, [("u64", "%dt", 0), ("u64", "%o64", 8), ("u32", "%sm", 16),
                                 ("u32", "%rank", 20)])],
        passes=True).render()


def multicast_probe(multicast: bool, arch: str) -> Probe:
    """Multicast rounds compile for sm_90a (ptxas advises .multicast::cluster there)."""
    why = needs(arch, 90, "TMA multicast to a cluster")
    if why:
        raise NotApplicable(f"static: {why}")
    kind = "multicast" if multicast else "separate"
    counts = {"UBLKCP.S.G.MULTICAST" if multicast else "UBLKCP.S.G": 1, **WAIT, "LDS": 1,
              "UCGABAR_ARV": 1, "UCGABAR_WAIT": 1, "CCTL.IVALL": 1}
    return make_probe(CountProbe, f"movement/tma/{kind}", "sm_90a", MULTICAST_LENGTHS,
                  lambda e, n: (multicast_kernel(e, n, multicast), n), counts=counts,
                  tail=WAIT_TAIL)
