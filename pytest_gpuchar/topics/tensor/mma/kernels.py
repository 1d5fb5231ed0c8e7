"""The tensor-core probes' PTX on the shared kernel frame (core.ptx.Kernel), and the probe
builders: the sweep probe of a row at one ILP, the wgmma probe, the MOVM layout kernels and
the emulation probes; the modules they are compiled in.

Probe layout (``timed_kernel``): one block on one SM, W warps (a launch parameter), each warp
running ILP independent accumulator chains (D_k = A*B + D_k) inside a counted loop between two
%clock64 reads: every trip is STEPS dependent steps of every chain, unrolled; the trip count
is a kernel parameter and the loop is not unrolled (``.pragma "nounroll"``). Every warp stores
its own start and end clock; the host fits them over three trip counts: the per-warp span
(latency of one chain step) and the per-SM span (min start .. max end over the warps: the SM's
time for all the work). Inputs are random, never zero; every accumulator is stored after the
region.
"""
from __future__ import annotations

import dataclasses
import re

from ....core import archs, ptx
from ....core.ptx import Kernel, Registers
from .probes import LdmatrixProbe, TensorProbe, Unsupported, WgmmaProbe
from .rows import (MOVM_TYPES, STEPS, WGMMA, WGMMA_STEPS, WGMMA_SWEEP, WMMA_LAYOUTS, Emulation,
                   Frag, LdmatrixRow, TensorRow, WgmmaRow, emulated_rows, has_wgmma, tables,
                   wgmma_row)

PARAMS = [".param .u64 out_param", ".param .u64 in_param", ".param .u64 fill_param",
          ".param .u32 trips_param"]
LATENCY = 1      # the wgmma completion-latency loop's key in a probe's entries (1 per trip)


def isa_version(arch: str, isas) -> str:
    """The highest of the arch's PTX ISA version and the rows' minimum versions."""
    need = [v for v in isas if v] + [archs.ptx_isa_version(arch)]
    return max(need, key=lambda v: tuple(int(x) for x in v.split(".")))


def _reglist(regs: list[str]) -> str:
    return "{" + ", ".join(regs) + "}"


def _entry_name(name: str, tag: str) -> str:
    return "tc_" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_") + f"_{tag}"


# --- the timed kernel -----------------------------------------------------------------------

def _fill_loop(smem_words: int, ldmatrix: bool) -> list[str]:
    """Every thread copies words of `fill` into the shared buffer (ldmatrix: adding the
    buffer's base to each word, the chase's relative offsets), then a barrier."""
    return [
        "mov.u32 %sbase, tc_smem;",
        "mov.u32 %fi, %tidx;",
        "$FILL:",
        f"setp.ge.u32 %fdone, %fi, {smem_words};",
        "@%fdone bra $FILLED;",
        "mul.wide.u32 %foff, %fi, 4;",
        "add.u64 %faddr, %fill, %foff;",
        "ld.global.b32 %fval, [%faddr];",
        *(["add.u32 %fval, %fval, %sbase;"] if ldmatrix else []),
        "shl.b32 %fsh, %fi, 2;",
        "add.u32 %fsh, %fsh, %sbase;",
        "st.shared.b32 [%fsh], %fval;",
        "add.u32 %fi, %fi, %nthr;",
        "bra.uni $FILL;",
        "$FILLED:",
        *(["fence.proxy.async.shared::cta;"] if not ldmatrix else []),
        "bar.sync 0;",
    ]


def counted_loop(body: list[str], after: tuple[str, ...] = ()) -> list[str]:
    """The timed region: `body` run %trips times (the kernel's trip-count parameter, >= 1) by
    a do-while loop the compiler must not unroll, then `after` (still timed). The counter
    counts down to zero: the loop compares with a constant, so no trip does a constant-bank
    load of the trip count (ptxas put an LDC / ULDC of it inside count-up loops)."""
    return ["mov.u32 %trip, %trips;", "$TC_LOOP:", '.pragma "nounroll";', *body,
            "sub.u32 %trip, %trip, 1;", "setp.ne.u32 %again, %trip, 0;",
            "@%again bra $TC_LOOP;", *after]


def timed_kernel(name: str, regs: Registers, body: list[str], results: list[str], *,
                 operands: tuple[str, ...] = (), smem_words: int = 0, ldmatrix: bool = False,
                 extra_decls: tuple[str, ...] = (), prologue: tuple[str, ...] = (),
                 after_loop: tuple[str, ...] = ()) -> str:
    """One timed kernel: per-thread operands from `in` (regs.loads, then `operands`), shared
    buffer filled from `fill` (smem_words words, then a barrier), bar.sync so every warp
    starts together, %clock64 around the counted loop of `body` (counted_loop), each thread's
    start and end clock and every result stored to `out` after the second read.

    Every loaded operand is folded into one checksum whose single store (then a membar) makes
    the loads complete before the clock starts. (Storing every operand, as the instruction
    probes' frame does, left hundreds of bytes per thread of stores draining into the timed
    region: erratic fixed costs that grew with warps and ILP, docs/tensor.md, lab notes.)
    One pass: the loop's first trip warms the instruction cache, a fixed cost the slope over
    trip counts cancels."""
    n_in = len(regs.inputs)
    in_bytes = max(1, n_in) * 8
    out_bytes = (2 + len(results) + max(1, n_in)) * 8
    stores, off = [], 16
    for reg in results:
        w = 64 if reg.startswith("%x") else 32
        stores.append(f"st.global.b{w} [%out+{off}], {reg};")
        off += 8
    settle = [f"xor.b{s.width} %ck{s.width}, %ck{s.width}, {regs.loaded[s.slot]};"
              for s in regs.inputs]
    settle += ["cvt.u32.u64 %cklo, %ck64;", "xor.b32 %ck32, %ck32, %cklo;",
               "st.global.b32 [%scratch], %ck32;"]
    return Kernel(
        entry=name, params=PARAMS,
        decls=[".reg .b64 %out, %in, %fill, %scratch, %toff, %t0, %t1, %foff, %faddr;",
               ".reg .b32 %tidx, %nthr, %trips, %trip, %sbase, %rowoff, %fi, %fval, %fsh;",
               ".reg .b32 %ck32, %cklo;",
               ".reg .b64 %ck64;",
               ".reg .pred %again, %fdone;",
               *regs.declarations(), *extra_decls,
               *([f".shared .align 128 .b32 tc_smem[{smem_words}];"] if smem_words else [])],
        setup=["ld.param.u64 %out, [out_param];",
               "ld.param.u64 %in, [in_param];",
               "ld.param.u64 %fill, [fill_param];",
               "ld.param.u32 %trips, [trips_param];",
               "mov.u32 %tidx, %tid.x;",
               "mov.u32 %nthr, %ntid.x;",
               "and.b32 %rowoff, %tidx, 31;",
               "shl.b32 %rowoff, %rowoff, 4;",
               f"mul.wide.u32 %toff, %tidx, {in_bytes};",
               "add.u64 %in, %in, %toff;",
               f"mul.wide.u32 %toff, %tidx, {out_bytes};",
               "add.u64 %out, %out, %toff;",
               f"add.u64 %scratch, %out, {off};",
               *(_fill_loop(smem_words, ldmatrix) if smem_words else []),
               *prologue],
        operands=["mov.u32 %ck32, 0;", "mov.u64 %ck64, 0;", *regs.loads, *operands, *settle],
        sync=["membar.cta;", "bar.sync 0;"],
        body=counted_loop(body, after_loop),
        after=["st.global.b64 [%out], %t0;", "st.global.b64 [%out+8], %t1;", *stores],
        guard=False,
    ).render()


# --- the sweep probe of a row ---------------------------------------------------------------

def _load(regs: Registers, frag: Frag) -> list[str]:
    return [regs.load(frag.width, frag.kind) for _ in range(frag.regs)]


def _accumulator_chains(r: TensorRow, ilp: int, n: int, regs: Registers) -> tuple[list, list]:
    """One A and one B fragment shared by the chains (their values do not matter to the
    timing; sharing keeps registers for more chains), one accumulator per chain,
    D_k = A*B + D_k: (body, results)."""
    a = _load(regs, r.a)
    b = _load(regs, r.b)
    e = _load(regs, r.e) if r.e else None
    accs = [_load(regs, r.c) for _ in range(ilp)]
    body = [r.ptx.format(d=_reglist(acc), a=_reglist(a), b=_reglist(b), c=_reglist(acc),
                         e=e[0] if e else "")
            for _ in range(n) for acc in accs]
    return body, [x for acc in accs for x in acc]


def _ldmatrix_chains(r: TensorRow, ilp: int, n: int, regs: Registers,
                     operands: list[str]) -> tuple[list, list]:
    """Each chain's address is the value the previous ldmatrix loaded: a pointer chase
    through the shared buffer laid out so every thread reads its own 16-byte row
    (conflict-free, see operands.ldmatrix_fill): (body, results)."""
    chains = []
    for c in range(ilp):
        dst = [regs.reg(32) for _ in range(r.c.regs)]
        operands += [f"add.u32 {dst[0]}, %sbase, {c * 512};",
                     f"add.u32 {dst[0]}, {dst[0]}, %rowoff;"]
        chains.append(dst)
    body = [r.ptx.format(d=_reglist(dst), a=dst[0]) for _ in range(n) for dst in chains]
    return body, [x for dst in chains for x in dst]


def sweep_probe(r: TensorRow, arch: str, ilp: int, steps: int = STEPS) -> TensorProbe:
    """ILP independent accumulator chains, `steps` dependent ops of each per loop trip
    (ldmatrix: ILP pointer chases, `steps` loads each per trip). Raises Unsupported (a skip)
    where the arch lacks the row."""
    why = r.supported(arch)
    if why:
        raise Unsupported(why)
    glob, per = r.sass_for(arch)
    name = f"{r.kind}/{r.name}/ilp{ilp}"
    ldmatrix = isinstance(r, LdmatrixRow)
    smem_words = 128 * ilp if ldmatrix else 0
    regs, operands = Registers(), []
    if ldmatrix:
        body, results = _ldmatrix_chains(r, ilp, steps, regs, operands)
    else:
        body, results = _accumulator_chains(r, ilp, steps, regs)
    entry = _entry_name(name, f"n{steps}")
    kernel = timed_kernel(entry, regs, body, results, operands=tuple(operands),
                          smem_words=smem_words, ldmatrix=ldmatrix)
    cls = LdmatrixProbe if ldmatrix else TensorProbe
    target = arch + "a" if r.arch_specific and not arch.endswith("a") else arch
    return cls(name, target, kernel, {steps: entry}, {steps: steps * ilp}, unit=(glob,),
               per_op=per, chained=True, inputs={steps: regs.inputs},
               out_slots={steps: 2 + len(results) + max(1, len(regs.inputs))},
               isa=isa_version(arch, [r.isa]) if r.isa else None, guarded=False, row=r,
               ilp=ilp, smem_words=smem_words, steps=steps)


def static_probe(r: TensorRow, arch: str) -> TensorProbe:
    """The probe the static suite checks for a row: ILP 1; a skip where the arch lacks it."""
    why = r.supported(arch)
    if why:
        raise Unsupported(f"static: {why}")
    return sweep_probe(r, arch, 1)


# --- wgmma (Hopper, sm_90a) -----------------------------------------------------------------

# shared-memory layout of A (64 x K) and B (K x N): no swizzle, K-major, 8x16-byte core
# matrices stored contiguously; LBO = next core matrix along K, SBO = next 8-row group.
WG_LBO = 128


def _desc_const(rows: int, k_bytes: int) -> int:
    sbo = (k_bytes // 16) * 128          # bytes per 8-row group: one core matrix per 16 B of K
    return ((sbo >> 4) << 32) | ((WG_LBO >> 4) << 16)


def _wgmma_tail(r: WgmmaRow) -> str:
    """The operands after A and B: scale-d (known true: accumulate; a run-time predicate
    costs a VOTEU.ANY per wgmma), the scales and transposes the type takes."""
    if r.atype == "s8":
        return "%scd;"
    if r.atype in ("f16", "bf16"):
        return "%scd, 1, 1, 0;" if r.a_regs else "%scd, 1, 1, 0, 0;"
    return "%scd, 1, 1;"


def _descriptors(r: WgmmaRow, a_bytes: int, k_bytes: int) -> tuple[str, ...]:
    return (
        "cvt.u64.u32 %descA, %sbase;",
        "shr.u64 %descA, %descA, 4;",
        "and.b64 %descA, %descA, 16383;",
        f"or.b64 %descA, %descA, {_desc_const(64, k_bytes)};",
        f"add.u32 %fsh, %sbase, {a_bytes};",
        "cvt.u64.u32 %descB, %fsh;",
        "shr.u64 %descB, %descB, 4;",
        "and.b64 %descB, %descB, 16383;",
        f"or.b64 %descB, %descB, {_desc_const(r.n, k_bytes)};",
    )


def _wgmma_kernel(r: WgmmaRow, entry: str, ilp: int, per_trip: int, wait: int,
                  smem_words: int, a_bytes: int, k_bytes: int):
    """One wgmma loop kernel: per trip wgmma.fence, `per_trip` wgmma on each of ILP
    accumulators, commit_group, wait_group `wait`; after the loop (still timed) wait_group 0
    when a group was left in flight. Returns (kernel text, registers, results)."""
    regs = Registers()
    areg = [regs.load(32, r.reg_kind) for _ in range(4)] if r.a_regs else None
    accs = [[regs.load(32, "s32" if r.atype == "s8" else "f32")
             for _ in range(r.acc_regs)] for _ in range(ilp)]
    a_op = _reglist(areg) if r.a_regs else "%descA"
    body = ["wgmma.fence.sync.aligned;"]
    body += [f"{r.instruction()} {_reglist(acc)}, {a_op}, %descB, {_wgmma_tail(r)}"
             for _ in range(per_trip) for acc in accs]
    body += ["wgmma.commit_group.sync.aligned;", f"wgmma.wait_group.sync.aligned {wait};"]
    results = [x for acc in accs for x in acc]
    text = timed_kernel(
        entry, regs, body, results, operands=("setp.eq.u32 %scd, 1, 1;",),
        smem_words=smem_words, extra_decls=(".reg .b64 %descA, %descB;", ".reg .pred %scd;"),
        prologue=_descriptors(r, a_bytes, k_bytes),
        after_loop=("wgmma.wait_group.sync.aligned 0;",) if wait else ())
    return text, regs, results


def wgmma_probe(r: WgmmaRow, ilp: int = 1, steps: int = WGMMA_STEPS) -> WgmmaProbe:
    """wgmma loops issued by every warpgroup of the block. The throughput loop (key `steps`):
    per trip fence, `steps` wgmma on each of ILP accumulator chains, commit_group and
    wait_group 1 (the previous trip's group completes while this one runs: the tensor core is
    never drained, as in a GEMM main loop), wait_group 0 after the loop. ILP 1 also has the
    completion-latency loop (key LATENCY): per trip fence, one wgmma, commit_group,
    wait_group 0, so each trip is one wgmma's whole completion."""
    arch = "sm_90a"
    k_bytes = r.k * (1 if r.atype in ("e4m3", "e5m2", "s8") else 4 if r.atype == "tf32" else 2)
    a_bytes, b_bytes = 64 * k_bytes, r.n * k_bytes
    # 1 KiB of slack after B: a descriptor whose LBO/SBO roles were read the other way round
    # would still address only this block's buffer
    smem_words = (a_bytes + b_bytes + 1024) // 4
    name = f"wgmma/{r.name}/ilp{ilp}"
    loops = {steps: (ilp, steps, 1)}
    if ilp == 1:
        loops = {LATENCY: (1, 1, 0), **loops}
    kernels, entries, ops, inputs, out_slots = [], {}, {}, {}, {}
    for key, (chains, per_trip, wait) in loops.items():
        entries[key] = _entry_name(name, "lat" if key == LATENCY else f"n{key}")
        text, regs, results = _wgmma_kernel(r, entries[key], chains, per_trip, wait,
                                            smem_words, a_bytes, k_bytes)
        kernels.append(text)
        ops[key] = chains * per_trip
        inputs[key] = regs.inputs
        out_slots[key] = 2 + len(results) + max(1, len(regs.inputs))
    return WgmmaProbe(name, arch, "\n".join(kernels), entries, ops, unit=(r.sass,), per_op=1,
                      chained=True, inputs=inputs, out_slots=out_slots, guarded=False, row=r,
                      ilp=ilp, smem_words=smem_words, steps=steps)


def static_wgmma_probe(r: WgmmaRow, arch: str) -> WgmmaProbe:
    """The wgmma probe the static suite checks (ILP 1, sm_90a); a skip on other archs."""
    if not has_wgmma(arch):
        raise Unsupported(f"static: wgmma needs sm_90a ({arch} has none)")
    return wgmma_probe(r, 1)


# --- the probe sets and their modules -------------------------------------------------------

def module_text(arch: str, ps: list[TensorProbe]) -> str:
    """One module of probes for `arch`, at the highest PTX ISA version any of them needs; for
    the arch-specific target where a probe needs it (wgmma: sm_90a, sm_120's narrow-format
    mma.sync kinds: sm_120a)."""
    target = "sm_90a" if any(isinstance(p, WgmmaProbe) for p in ps) else \
        next((p.arch for p in ps if p.arch.endswith("a")), arch)
    version = isa_version(target, [p.isa for p in ps])
    return ptx.header(target, version) + "\n" + "\n".join(p.kernels for p in ps)


def static_probes(arch: str) -> tuple[list[TensorProbe], dict[str, str]]:
    """The probes the static suite assembles for `arch` (ILP 1 of every row the arch has)
    and, per skipped row, the reason."""
    out, skipped = [], {}
    for kind, rows in tables().items():
        for r in rows:
            why = r.supported(arch)
            if why:
                skipped[f"{kind}/{r.name}"] = why
                continue
            out.append(sweep_probe(r, arch, 1))
    return out, skipped


def wgmma_static(arch: str) -> list[WgmmaProbe]:
    return [wgmma_probe(r, 1) for r in WGMMA] if has_wgmma(arch) else []


def hardware_probes(arch: str) -> list[TensorProbe]:
    """Every probe of the hardware sweep for `arch` (every ILP of every row it has)."""
    return [sweep_probe(r, arch, k) for rows in tables().values() for r in rows
            if not r.supported(arch) for k in r.ilps]


def wgmma_hardware(arch: str) -> list[WgmmaProbe]:
    """The wgmma probes of the sweep: ILP 1 of every row, ILP 2 of the sweep rows whose
    accumulators fit twice."""
    if not has_wgmma(arch):
        return []
    out = [wgmma_probe(r, 1) for r in WGMMA]
    out += [wgmma_probe(wgmma_row(n), 2) for n in WGMMA_SWEEP if wgmma_row(n).n <= 128]
    return out


EMULATED_STEPS = 4


def emulated_probes(arch: str) -> list[tuple[Emulation, TensorProbe]]:
    """The rows whose PTX is valid on `arch` but no (native) tensor-core instruction there
    (rows.emulated_rows), a loop of one chain of 4 each, with what each must become (the static
    emulation check)."""
    return [(how, dataclasses.replace(sweep_probe(r.emulated(), arch, 1, steps=EMULATED_STEPS),
                                      name=f"emulated/{r.kind}/{r.name}"))
            for how, r in emulated_rows(arch)]


# --- layouts: MOVM transposes (003 section IV-C) -------------------------------------------

def movm_entry(layout: str, types: str) -> str:
    return f"movm_{layout.replace('.', '_')}_{types.replace('.', '_')}"


def movm_kernel(layout: str, shape: str = "m16n16k16", types: str = "f16.f16") -> str:
    """A whole wmma tile (load a, b, c from global in `layout`, mma, store d), untimed: with
    16-bit fragments the compiler transposes (MOVM.16.MT88) whichever operands the layout
    leaves in the wrong orientation."""
    la, lb = layout.split(".")
    lc = la   # C/D stored in A's layout, as the paper's col.col case (A and C transposed)
    ctype = types.split(".")[1]
    creg = 4 if ctype == "f16" else 8
    rc = "b32" if ctype == "f16" else "f32"
    a = _reglist([f"%a{i}" for i in range(8)])
    b = _reglist([f"%b{i}" for i in range(8)])
    c = _reglist([f"%c{i}" for i in range(creg)])
    d = _reglist([f"%d{i}" for i in range(creg)])
    return Kernel(
        entry=movm_entry(layout, types), clock=None,
        params=[".param .u64 pa", ".param .u64 pb", ".param .u64 pc", ".param .u64 pd"],
        decls=[".reg .b64 %ra, %rb, %rc, %rd;", ".reg .b32 %a<8>, %b<8>;",
               f".reg .{rc} %c<{creg}>, %d<{creg}>;"],
        setup=["ld.param.u64 %ra, [pa];", "ld.param.u64 %rb, [pb];", "ld.param.u64 %rc, [pc];",
               "ld.param.u64 %rd, [pd];"],
        body=[f"wmma.load.a.sync.aligned.{la}.{shape}.global.f16 {a}, [%ra], 16;",
              f"wmma.load.b.sync.aligned.{lb}.{shape}.global.f16 {b}, [%rb], 16;",
              f"wmma.load.c.sync.aligned.{lc}.{shape}.global.{ctype} {c}, [%rc], 16;",
              f"wmma.mma.sync.aligned.{layout}.{shape}.{types} {d}, {a}, {b}, {c};",
              f"wmma.store.d.sync.aligned.{lc}.{shape}.global.{ctype} [%rd], {d}, 16;"],
    ).render()


def movm_layouts() -> list[tuple[str, str]]:
    """(layout, types) of every MOVM kernel, in module order."""
    return [(lay, types) for types in MOVM_TYPES for lay in WMMA_LAYOUTS]


def movm_module(arch: str) -> str:
    """One module with the MOVM kernel of every layout (f16.f16 and f32.f32 accumulators)."""
    return ptx.module(arch, [movm_kernel(lay, types=types) for lay, types in movm_layouts()])
