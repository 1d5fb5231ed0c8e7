"""The throughput topic's kernels on the shared frame (core.ptx.Kernel), and its probe types.

A throughput kernel runs, per thread, ``CHAINS`` independent dependent chains of a row's op,
``UNROLL`` ops per chain per iteration of a counted loop (``.pragma "nounroll"``, trip count
a kernel parameter) between the two clock reads; lane 0 of each warp stores its %clock64
before and after the loop and its %smid. Blocks of ``BLOCK`` threads, ``BLOCKS_PER_SM`` per
SM, held resident by ``.maxntid``/``.minnctapersm``. Operands are loaded per lane; every
chain's result is stored after the loop. The bar.sync rows are the same kernel with one
"chain" of barriers; the launch stamps read %clock64 first thing at entry (and at exit).

``ThroughputProbe`` verifies one loop between the clock reads, ``EntryStampProbe`` that
nothing but setup precedes the entry clock read (verify.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...core import ptx, sass
from ...core.probe import NotApplicable, OneKernelProbe, Probe
from ...core.ptx import SLOT_BYTES, Clock, InputSlot, Kernel, Registers
from . import rows
from .rows import LaunchCost, ThroughputRow, Style
from .verify import LoopVerdict, StampVerdict, entry_prologue, verify_entry_stamp, verify_loop

BLOCK = 256
BLOCKS_PER_SM = 4          # 1024 threads = 32 warps = 8 per scheduler on 4-scheduler SMs
CHAINS = 8                 # independent chains per thread
UNROLL = 32                # ops per chain per loop iteration (256 ops per iteration)
REC_WORDS = 3              # per warp: start, end, smid (u64 each)
BAR_UNROLL = 16            # bar.sync per loop iteration
STAMP_WORDS = 4            # launch stamps per warp: start, end, smid, ctaid (u64 each)

WARP_ENTRY = "gpuchar_warp_launch"
BLOCK_ENTRY = "gpuchar_block_launch"
STAMPS = {LaunchCost.WARP: (WARP_ENTRY, False), LaunchCost.BLOCK: (BLOCK_ENTRY, True)}  # exit stamp


def kernel_name(row: ThroughputRow) -> str:
    return "tp_" + re.sub(r"[^A-Za-z0-9]+", "_", row.name)


# --- the loop body -------------------------------------------------------------------------

@dataclass
class _Chains:
    """Builds the chains of one row's loop body; source operands other than the chain value
    are loaded once and shared by all chains."""
    row: ThroughputRow
    regs: Registers
    shared: dict[str, str] = field(default_factory=dict)

    def operand(self, f: str) -> str:
        # one register per source field for all chains: consecutive ops read it in the same
        # operand slot, so the operand reuse cache serves it (with a register per chain, three
        # source registers per FFMA/DFMA/HFMA2 hit register-bank conflicts, well under the
        # FFMA peak: docs/throughput.md, lab notes)
        t = self.row.template
        if f not in self.shared:
            self.shared[f] = self.regs.load(t.operands[f].width, t.operands[f].kind)
        return self.shared[f]

    def acc(self, unroll: int) -> tuple[list[str], list[tuple[str, int]]]:
        t = self.row.template
        a = t.operands["a"]
        x = self.regs.load(a.width, a.kind)
        fixed = {f: self.operand(f) for f in t.sources if f != "a"}
        return [t.render({"d": x, "a": x, **fixed}) for _ in range(unroll)], [(x, a.width)]

    def fib(self, unroll: int) -> tuple[list[str], list[tuple[str, int]]]:
        t = self.row.template
        a = t.operands["a"]
        x = self.regs.load(a.width, a.kind)
        y = self.regs.load(a.width, a.kind)
        fixed = {f: self.operand(f) for f in t.sources if f not in ("a", "b")}
        seq, cur, other = [], x, y
        for _ in range(unroll):
            seq.append(t.render({"d": cur, "a": cur, "b": other, **fixed}))
            cur, other = other, cur
        return seq, [(x, a.width), (y, a.width)]

    def roundtrip_f64(self, unroll: int) -> tuple[list[str], list[tuple[str, int]]]:
        x = self.regs.load(64, "float")
        f = self.regs.reg(32)
        seq = []
        for _ in range(unroll):
            seq += [f"cvt.rn.f32.f64 {f}, {x};", f"cvt.f64.f32 {x}, {f};"]
        return seq, [(x, 64)]

    def lds(self, unroll: int) -> tuple[list[str], list[tuple[str, int]]]:
        # the address is the chain value itself: a per-lane shared word holding its own
        # address, so x = ld.shared [x] keeps x (and depends on the previous load)
        x = self.regs.reg(32)
        self.regs.loads.append(f"mov.u32 {x}, %lds_addr;")
        return [self.row.template.render({"d": x, "a": x}) for _ in range(unroll)], [(x, 32)]

    def bar(self, unroll: int) -> tuple[list[str], list[tuple[str, int]]]:
        # no value: `unroll` barriers of the whole block (Many-BSP Tables 1-5..1-7)
        return [self.row.template.text] * unroll, []


CHAIN = {Style.ACC: _Chains.acc, Style.FIB: _Chains.fib, Style.ROUNDTRIP_F64:
         _Chains.roundtrip_f64, Style.LDS: _Chains.lds, Style.BAR: _Chains.bar}


def loop_body(row: ThroughputRow, regs: Registers, unroll: int,
              chains: int) -> tuple[list[str], list[tuple[str, int]]]:
    """Loop-body lines of `chains` chains of `unroll` ops each, interleaved op by op (chain 0
    op 0, chain 1 op 0, ...), every chain updated in place so its value is loop-carried.
    A row of barriers has one chain whatever `chains` says."""
    build = _Chains(row, regs)
    lines: list[list[str]] = []
    results: list[tuple[str, int]] = []
    for _ in range(1 if row.style is Style.BAR else chains):
        seq, res = CHAIN[row.style](build, unroll)
        lines.append(seq)
        results += res
    inter = [s[k] for k in range(max(len(s) for s in lines)) for s in lines if k < len(s)]
    return inter, results


# --- kernels -------------------------------------------------------------------------------

def kernel(row: ThroughputRow, arch: str, *, entry: str | None = None, unroll: int = UNROLL,
           chains: int = CHAINS, block: int = BLOCK,
           blocks_per_sm: int = BLOCKS_PER_SM) -> tuple[Kernel, Registers, int]:
    """The row's throughput kernel (entry: `kernel_name(row)` unless given); returns (kernel,
    its registers and input slots, result slots per thread).

    Parameters: rec (per-warp start/end/smid, u64 each), res (per-thread results), in
    (operands, one block of input slots per lane), iters (loop trip count)."""
    regs = Registers()
    body, results = loop_body(row, regs, unroll, chains)
    stores = [f"st.global.b{width} [%res+{k * SLOT_BYTES}], {reg};"
              for k, (reg, width) in enumerate(results)]
    off = len(results) * SLOT_BYTES
    preamble, shared_setup = [], []
    if row.shared:
        preamble = [f".shared .align 4 .b32 tp_lds[{block}];"]
        shared_setup = ["mov.u32 %lds_addr, tp_lds;", "shl.b32 %lds_off, %tidx, 2;",
                        "add.u32 %lds_addr, %lds_addr, %lds_off;",
                        "st.shared.u32 [%lds_addr], %lds_addr;", "bar.sync 0;"]
    k = ptx.loop_kernel(entry or kernel_name(row), regs, body, stores, label="TP_LOOP",
                        block=block, blocks_per_sm=blocks_per_sm,
                        res_bytes=max(off, SLOT_BYTES), rec_words=REC_WORDS,
                        preamble=preamble, b32=("%lds_addr", "%lds_off"), setup=shared_setup)
    return k, regs, max(1, len(results))


def stamp_kernel(entry: str, *, exit_stamp: bool) -> Kernel:
    """Each warp's lane 0 stores %clock64 at entry (and at exit), %smid and %ctaid.x.
    rec layout per warp: start, end, smid, ctaid (u64); without the exit stamp end = start."""
    return Kernel(
        entry=entry, params=[".param .u64 rec_param"],
        decls=[".reg .b64 %rec, %t0, %t1, %off, %w64;",
               ".reg .b32 %tx, %cta, %nt, %smx, %warp, %lane, %wpb;", ".reg .pred %lead;"],
        body=["ld.param.u64 %rec, [rec_param];", "mov.u32 %tx, %tid.x;",
              "mov.u32 %cta, %ctaid.x;", "mov.u32 %nt, %ntid.x;", "mov.u32 %smx, %smid;",
              "and.b32 %lane, %tx, 31;", "shr.u32 %warp, %tx, 5;", "shr.u32 %wpb, %nt, 5;",
              "mad.lo.u32 %warp, %cta, %wpb, %warp;", "setp.eq.u32 %lead, %lane, 0;"],
        after=[f"mul.wide.u32 %off, %warp, {STAMP_WORDS * 8};", "add.u64 %rec, %rec, %off;",
               "@%lead st.global.u64 [%rec], %t0;", "@%lead st.global.u64 [%rec+8], %t1;",
               "cvt.u64.u32 %w64, %smx;", "@%lead st.global.u64 [%rec+16], %w64;",
               "cvt.u64.u32 %w64, %cta;", "@%lead st.global.u64 [%rec+24], %w64;"],
        clock=Clock(), guard=False, exit_read=exit_stamp)


# --- probe types -----------------------------------------------------------------------------

@dataclass(kw_only=True)
class ThroughputProbe(OneKernelProbe):
    """One kernel whose timed region is a counted loop: ``ops`` maps the PTX ops per loop
    iteration to themselves (the one "length"); ``check`` verifies the loop (verify_loop)."""
    row: ThroughputRow
    unroll: int = UNROLL
    chains: int = CHAINS

    @property
    def ops_per_iter(self) -> int:
        """PTX ops per thread per loop iteration."""
        return self.ops[self.length]

    @property
    def slots(self) -> list[InputSlot]:
        return self.inputs[self.length]

    @property
    def result_slots(self) -> int:
        return self.out_slots[self.length]

    def results_per_iter(self) -> int:
        """Results (scalar operations) per thread per loop iteration."""
        return self.ops_per_iter * self.row.results_per_op

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> LoopVerdict:
        return verify_loop(self.name, self.arch, self.unit, self.ops_per_iter,
                           self.sass_of(functions))


class EntryStampProbe(Probe):
    """A launch stamp: its "region" is what precedes the entry clock read, and that may only
    be setup (constants, special registers, moves): the read comes before any memory access
    or computation."""

    def regions(self, functions: dict[str, sass.Function]) -> dict[int, list[sass.Instr]]:
        return {0: entry_prologue(self.name, self.sass_of(functions))}

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> StampVerdict:
        return verify_entry_stamp(self.name, self.sass_of(functions), regions[0])


# --- probe builders ------------------------------------------------------------------------

def loop_probe(row: ThroughputRow, arch: str, *, entry: str | None = None, unroll: int = UNROLL,
               chains: int = CHAINS, block: int = BLOCK,
               blocks_per_sm: int = BLOCKS_PER_SM) -> ThroughputProbe:
    k, regs, slots = kernel(row, arch, entry=entry, unroll=unroll, chains=chains, block=block,
                            blocks_per_sm=blocks_per_sm)
    n = unroll * chains
    return ThroughputProbe(f"throughput/{row.name}", arch, k.render(), {n: k.entry}, {n: n},
                           unit=row.unit(arch), inputs={n: regs.inputs}, out_slots={n: slots},
                           guarded=False, row=row, unroll=unroll, chains=chains)


def probe(row: ThroughputRow | str, arch: str) -> ThroughputProbe:
    """The throughput probe of a row (by name or ThroughputRow) on `arch`."""
    return loop_probe(rows.ROWS[row] if isinstance(row, str) else row, arch)


def row_probe(row: ThroughputRow, arch: str, stage: str = "static") -> ThroughputProbe:
    """The row's probe, or NotApplicable (a skip) where the arch lacks the row's op."""
    why = row.supported(arch)
    if why:
        raise NotApplicable(f"{stage}: {why}")
    return probe(row, arch)


def bar_probe(arch: str, threads: int) -> ThroughputProbe:
    """bar.sync loop for blocks of `threads` threads, one block per SM."""
    return loop_probe(rows.BAR_ROW, arch, entry=f"{kernel_name(rows.BAR_ROW)}_nt{threads}",
                      unroll=BAR_UNROLL, chains=1, block=threads, blocks_per_sm=1)


def stamp_probe(kind: LaunchCost, arch: str) -> EntryStampProbe:
    """The warp (entry stamp only) or block (entry and exit stamps) launch kernel."""
    entry, exit_stamp = STAMPS[kind]
    return EntryStampProbe(f"launch/{kind.value}", arch,
                           stamp_kernel(entry, exit_stamp=exit_stamp).render(), {0: entry},
                           {0: 0}, unit=(), guarded=False)


def launch_probe(kind: LaunchCost, arch: str) -> Probe:
    """What a launch row verifies: its stamp kernel, or for the issue cycle the FFMA loop."""
    if kind is LaunchCost.ISSUE_CYCLE:
        return probe("ffma", arch)
    return stamp_probe(kind, arch)


def suite_probes(arch: str) -> list[ThroughputProbe]:
    """Every throughput row's probe that can exist on `arch`."""
    return [probe(r, arch) for r in rows.ROWS.values() if r.supported(arch) is None]


def topic_probes(arch: str) -> list[Probe]:
    """Every kernel of the topic: throughput rows, bar.sync, launch stamps (module order)."""
    return [*suite_probes(arch), *(bar_probe(arch, n) for n in rows.BAR_THREADS),
            stamp_probe(LaunchCost.WARP, arch), stamp_probe(LaunchCost.BLOCK, arch)]


def module_text(arch: str, probes: list[Probe]) -> str:
    """The topic's module: one ptxas run offline, one driver JIT link on the GPU."""
    return ptx.header(arch) + "\n".join(p.kernels for p in probes)
