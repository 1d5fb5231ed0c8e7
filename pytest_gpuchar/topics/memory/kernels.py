"""The memory probes' kernels on the shared frame (core.ptx.Kernel: no pass loop, the guard;
the warm-up walk and the shared-memory fill are setup lines) and the probes built from them.

Pointer chase: every load's address is the value the previous load returned, so the loads
are serialised and each costs its full load-to-use latency. Two probes per load flavour:
``chain`` (N loads unrolled between the clock reads: the slope over N is the latency) and
``loop`` (one load in a nounroll loop of `steps` iterations: the slope over steps is the chase
loop's cycles per step; its timed region is verified by ``ChaseLoopProbe``). Table 10's bank probe
has one warp chase through shared memory; its 64-bit variant keeps each load 64 bits wide
with side instructions ``Bank64Probe`` allows.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ...core import loop, ptx, sass
from ...core.build import Group
from ...core.ptx import Kernel
from ...core.probe import Probe
from ...core.verify import Intent, ProbeInvalid, Verdict, check_exact, matches
from .chains import CONST_WORDS, const_chain_words
from .rows import (CHAIN_LENGTHS, FLAVOURS, LOOP_STEPS, SMEM_BYTES, BankRow, Flavour, ChaseKind,
                   Space, sass_unit)

CHASE_PARAMS = [".param .u64 out_param", ".param .u64 state_param", ".param .u32 warm_param",
                ".param .u32 steps_param", ".param .u64 init_param", ".param .u32 initw_param"]
BANK_PARAMS = [".param .u64 out_param", ".param .u64 state_param", ".param .u64 init_param",
               ".param .u32 initw_param"]
CONST_DECL = (f".const .align 8 .u32 gpuchar_cchain[{CONST_WORDS}] = "
              "{" + ", ".join(str(v) for v in const_chain_words()) + "};\n")

# one loop iteration besides the load: the counter's add, the compare, the backward branch
LOOP_UNIT = ("IADD3|VIADD|IADD32I|IADD|IMAD.IADD|UIADD3", "ISETP.*|UISETP.*", "BRA|BRA.U")
# executed once before the loop (the step count's parameter load, the counter's zeroing, the
# alignment NOPs of the loop head): allowed in the region ahead of the loop label only, as
# are never-executed instructions (core.loop.predicated_off), see ChaseLoopProbe
LOOP_SETUP_OPCODES = ("LDC", "ULDC", "ULDC.64", "LDCU", "LDCU.64", "MOV", "UMOV", "IMAD.MOV.U32", "MOV32I", "NOP")
BANK64_SIDE = ("IMNMX*", "VIMNMX*", "VMNMX*", "ISETP*", "SEL", "LOP3.LUT")
BANK64_SIDE_MAX = 2


# --- PTX ------------------------------------------------------------------------------------

def smem_decl(smem: str) -> str:
    return f".shared .align 16 .b8 {smem}[{SMEM_BYTES}];\n"


def smem_fill(smem: str, first: str, empty_test: str, step: str) -> list[str]:
    """PTX: copy `%nw` words from global `%init` into `smem`, each word plus the buffer's
    base (relative offsets become shared addresses), thread-strided from `first` by `step`,
    then a barrier."""
    return [
        f"mov.u32 %base, {smem};",
        f"mov.u32 %j, {first};",
        empty_test,
        "@%more bra $COPIED;",
        "$COPY:",
        "mul.wide.u32 %a64, %j, 4;",
        "add.u64 %a64, %a64, %init;",
        "ld.global.u32 %v, [%a64];",
        "add.u32 %v, %v, %base;",
        "shl.b32 %i, %j, 2;",
        "add.u32 %i, %i, %base;",
        "st.shared.u32 [%i], %v;",
        f"add.u32 %j, %j, {step};",
        "setp.lt.u32 %more, %j, %nw;",
        "@%more bra $COPY;",
        "$COPIED:",
        "bar.sync 0;",
    ]


def _chase_setup(flavour: Flavour, p: str, smem: str) -> list[str]:
    """Parameters, the start pointer (shared: the chain copied in; const: an offset) and the
    untimed warm-up walk (cache-hit levels: every line of the cycle once)."""
    lines = ["ld.param.u64 %out, [out_param];", "ld.param.u64 %state, [state_param];",
             "ld.param.u32 %warm, [warm_param];", "ld.param.u32 %steps, [steps_param];",
             "ld.param.u64 %init, [init_param];", "ld.param.u32 %nw, [initw_param];",
             "ld.global.u64 %p64, [%state];"]
    if flavour.space == Space.SHARED:
        lines += [*smem_fill(smem, "0", "setp.eq.u32 %more, %nw, 0;", "1"),
                  "cvt.u32.u64 %p32, %p64;", "add.u32 %p32, %p32, %base;"]
    elif flavour.space == Space.CONST:
        lines += ["cvt.u32.u64 %p32, %p64;"]
    return lines + ["mov.u32 %i, 0;", "setp.eq.u32 %more, %warm, 0;", "@%more bra $WARMED;",
                    "$WARM:", *flavour.step_lines(p), "add.u32 %i, %i, 1;",
                    "setp.lt.u32 %more, %i, %warm;", "@%more bra $WARM;", "$WARMED:",
                    "mov.u32 %i, 0;"]


def chase_kernel(entry: str, flavour: Flavour, *, n: int | None, smem: str = "") -> str:
    """One single-thread chase kernel.

    Parameters: out (u64*: cycles, end pointer, %smid), state (u64*: the start pointer, for
    shared/const an offset; the end pointer is written back so the next launch continues the
    cycle), warm (u32: untimed chase steps before the clock), steps (u32: loop iterations,
    `n is None` only), init (u64*: u32 words copied into shared memory `smem`), init_words
    (u32). `n` unrolled loads in the timed region, or (n None) the nounroll loop.
    """
    p = "%p64" if flavour.width == 64 else "%p32"
    if n is None:
        body = ["$LOOP:", '.pragma "nounroll";', *flavour.step_lines(p), "add.u32 %i, %i, 1;",
                "setp.lt.u32 %more, %i, %steps;", "@%more bra $LOOP;"]
    else:
        body = [line for _ in range(n) for line in flavour.step_lines(p)]
    after = ["sub.s64 %dt, %t1, %t0;", "st.global.u64 [%out], %dt;"]
    if flavour.space == Space.SHARED:
        after += ["sub.u32 %p32, %p32, %base;"]
    if flavour.width == 32:
        after += ["cvt.u64.u32 %p64, %p32;"]
    after += ["st.global.u64 [%out+8], %p64;", "st.global.u64 [%state], %p64;",
              "mov.u32 %smid, %smid;", "st.global.u32 [%out+16], %smid;"]
    return Kernel(
        entry=entry, params=CHASE_PARAMS,
        decls=[".reg .b64 %out, %state, %init, %p64, %t0, %t1, %dt, %a64;",
               ".reg .b32 %p32, %warm, %steps, %i, %j, %nw, %v, %base, %smid;",
               ".reg .pred %never, %more;"],
        setup=_chase_setup(flavour, p, smem), body=body, after=after).render()


def bank_kernel(entry: str, width: int, n: int, smem: str) -> str:
    """One warp chasing through shared memory, each thread its own chain, with the address
    pattern fixing the bank conflict degree (see analysis.bank_layout). Thread 0's cycles are
    reported. 64-bit rows: the chain advances on the low word and the high word of every load
    is min-ed into an accumulator stored at the end (off the chain's critical path), so the
    compiler must keep each load 64 bits wide."""
    setup = [
        "ld.param.u64 %out, [out_param];", "ld.param.u64 %state, [state_param];",
        "ld.param.u64 %init, [init_param];", "ld.param.u32 %nw, [initw_param];",
        "mov.u32 %tx, %tid.x;", "mov.u32 %ntx, %ntid.x;",
        "mul.wide.u32 %a64, %tx, 8;", "add.u64 %state, %state, %a64;",
        "mul.wide.u32 %a64, %tx, 24;", "add.u64 %out, %out, %a64;",
        "ld.global.u64 %p64, [%state];",
        *smem_fill(smem, "%tx", "setp.ge.u32 %more, %j, %nw;", "%ntx"),
        "cvt.u32.u64 %p32, %p64;", "add.u32 %p32, %p32, %base;", "mov.u32 %acc, %tx;"]
    step = (["ld.shared.u32 %p32, [%p32];"] if width == 32 else
            ["ld.shared.u64 %q, [%p32];", "mov.b64 {%p32, %hi}, %q;", "min.u32 %acc, %acc, %hi;"])
    return Kernel(
        entry=entry, params=BANK_PARAMS,
        decls=[".reg .b64 %out, %state, %init, %p64, %q, %t0, %t1, %dt, %a64;",
               ".reg .b32 %p32, %j, %nw, %v, %i, %base, %tx, %ntx, %hi, %acc;",
               ".reg .pred %never, %more;"],
        setup=setup, body=step * n,
        after=["sub.s64 %dt, %t1, %t0;", "st.global.u64 [%out], %dt;",
               "sub.u32 %p32, %p32, %base;", "cvt.u64.u32 %p64, %p32;",
               "st.global.u64 [%out+8], %p64;", "st.global.u32 [%out+16], %acc;"]).render()


# --- probes ------------------------------------------------------------------------------

def entry_name(name: str) -> str:
    return "gpuchar_mem_" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")


@dataclass
class ChaseProbe(Probe):
    """A pointer chase of one load flavour: unrolled loads, one chained step per op."""
    flavour: str = ""

    @property
    def space(self) -> Space:
        return FLAVOURS[self.flavour].space


@dataclass
class ChaseLoopProbe(ChaseProbe):
    """The chase as a nounroll loop: every length is the same kernel (`steps` is a parameter);
    its unit is one chase step plus LOOP_UNIT, run once per iteration."""

    def intent(self, n: int) -> Intent:
        return Intent(1, self.unit)     # the loop body; the whole region: verify_regions

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> Verdict:
        """The timed region is setup (LOOP_SETUP_OPCODES, run once) followed by one loop
        whose body, from the backward branch's target to the branch, is exactly the unit (so
        the slope over `steps` is the cost of one iteration as compiled). Raises ProbeInvalid
        with the listing otherwise; the verdict's unit counts the loop body."""
        body = self.loop_body(regions[min(regions)], functions[self.entries[min(regions)]])
        return Verdict(True, dict(Counter(i.opcode for i in body)), Counter(), "loop")

    def loop_body(self, region: list[sass.Instr], func: sass.Function) -> list[sass.Instr]:
        listing = sass.format_listing(region)
        if not region or region[-1].base != "BRA":
            raise ProbeInvalid(f"probe invalid: {self.name}: the timed region does not end "
                               f"with the loop's backward branch\n{listing}")
        at = loop.branch_target(func, region[-1])
        if at is None:
            raise ProbeInvalid(f"probe invalid: {self.name}: branch target of "
                               f"{region[-1].text} not found\n{listing}")
        start = func.instrs[at].offset
        # never-executed instructions (sm_70's convergence placeholder) are not run
        body = [i for i in region if i.offset >= start and not loop.predicated_off(i)]
        setup = [i for i in region if i.offset < start]
        if not region[0].offset <= start:
            raise ProbeInvalid(f"probe invalid: {self.name}: the branch leaves the timed region"
                               f" (not a loop inside it)\n{listing}")
        stray = [i.opcode for i in setup
                 if i.opcode not in LOOP_SETUP_OPCODES and not loop.predicated_off(i)]
        if stray:
            raise ProbeInvalid(f"probe invalid: {self.name}: instructions ahead of the loop "
                               f"that are not setup: {stray}\n{listing}")
        why = check_exact(body, self.unit, 1)
        if why:
            raise ProbeInvalid(f"probe invalid: {self.name}: loop body: {why}\n{listing}")
        return body


@dataclass
class BankProbe(Probe):
    """Table 10: shared loads of one warp; the conflict degree is in the data, not the PTX."""
    width: int = 32


@dataclass
class Bank64Probe(BankProbe):
    """64-bit rows: besides the loads the region may hold up to BANK64_SIDE_MAX side
    instructions per load (the accumulator of the high words, off the chain); they are
    counted into the verdict's unit beside the loads."""

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> Verdict:
        loads = {}
        for n, region in regions.items():
            side = [i for i in region if any(matches(i.opcode, p) for p in BANK64_SIDE)]
            if len(side) > BANK64_SIDE_MAX * n:
                raise ProbeInvalid(f"probe invalid: {self.name}: chain length {n}: {len(side)} "
                                   f"side instructions for {n} loads (at most "
                                   f"{BANK64_SIDE_MAX} per load)")
            loads[n] = [i for i in region if i not in side]
        verdict = super().verify_regions(loads, functions)
        n0 = min(regions)
        verdict.unit.update({k: round(v / n0, 3) for k, v in Counter(
            i.opcode for i in regions[n0] if i not in loads[n0]).items()})
        return verdict


def chase_probe(flavour: str, arch: str, kind: ChaseKind | str = ChaseKind.CHAIN) -> ChaseProbe:
    """The chase of one load flavour: kind "chain" (unrolled, latency) or "loop"."""
    kind = ChaseKind.of(kind)
    f = FLAVOURS[flavour]
    unit = f.sass(arch)
    name = f"memory/{kind.value}/{flavour}"
    smem = f"gpuchar_smem_{flavour}_{kind.value}"
    decl = smem_decl(smem) if f.space == Space.SHARED else \
        CONST_DECL if f.space == Space.CONST else ""
    if kind == ChaseKind.CHAIN:
        entries = {n: entry_name(f"{name}_n{n}") for n in CHAIN_LENGTHS}
        text = decl + "\n".join(chase_kernel(entries[n], f, n=n, smem=smem)
                                for n in CHAIN_LENGTHS)
        return ChaseProbe(name, arch, text, entries, {n: n for n in CHAIN_LENGTHS}, unit=unit,
                          chained=True, flavour=flavour)
    e = entry_name(f"{name}_loop")
    return ChaseLoopProbe(name, arch, decl + chase_kernel(e, f, n=None, smem=smem),
                     {s: e for s in LOOP_STEPS}, {s: s for s in LOOP_STEPS},
                     unit=unit + LOOP_UNIT, flavour=flavour)


def bank_probe(row: BankRow, arch: str) -> BankProbe:
    """Shared loads of one warp under a conflict degree; the PTX depends only on the width
    (the degree is in the data), so all rows of one width share one probe."""
    name = f"memory/bank/u{row.width}"
    smem = f"gpuchar_smem_bank_u{row.width}"
    entries = {n: entry_name(f"{name}_n{n}") for n in CHAIN_LENGTHS}
    text = smem_decl(smem) + "\n".join(bank_kernel(entries[n], row.width, n, smem)
                                       for n in CHAIN_LENGTHS)
    cls = BankProbe if row.width == 32 else Bank64Probe
    return cls(name, arch, text, entries, {n: n for n in CHAIN_LENGTHS},
               unit=sass_unit("shared_ld" if row.width == 32 else "lds64", arch), chained=True,
               width=row.width)


def table_iv_probe(name: str, kind: str | int, arch: str) -> Probe:
    """The probes of the static test's rows: a flavour's chain or loop, or the bank probe of
    a width (its Table 10 row with the fewest ways)."""
    if name == "bank":
        return bank_probe(BankRow(int(kind), 1 if kind == 32 else 2), arch)
    return chase_probe(name, arch, kind)


def suite_probes(arch: str) -> list[Probe]:
    """Every memory probe of `arch` (one ptxas run / one driver JIT link)."""
    out: list[Probe] = []
    for f in FLAVOURS:
        out += [chase_probe(f, arch, ChaseKind.CHAIN), chase_probe(f, arch, ChaseKind.LOOP)]
    return out + [bank_probe(BankRow(32, 1), arch), bank_probe(BankRow(64, 2), arch)]


def module_text(arch: str, probes: list[Probe] | None = None) -> str:
    """One PTX module holding these memory probes (default: all of `arch`); the .const chain
    (shared by the const probes, identical in each) declared once: it must stay the module's
    only .const variable, at offset 0 of its bank."""
    probes = suite_probes(arch) if probes is None else probes
    return ptx.header(arch) + CONST_DECL + "".join(p.kernels.replace(CONST_DECL, "")
                                                   for p in probes)


def group(arch: str) -> Group:
    """The memory module of `arch`: every probe in one module (one ptxas run, one JIT link),
    the .const chain declared once."""
    return Group("memory", arch, suite_probes(arch), text=lambda probes: module_text(arch, probes))
